/*
 * record_peek.h: a look at a stored record's bytes (protobuf wire format)
 * without decoding it, for scans that want a few records among millions
 * and for hints on the hot path:
 * decoding a LockRecord allocates its name, holders and waiters, and at ten
 * million held locks leases_rebuild() spent seconds doing that at every
 * start and restore, only to find the handful with a timer.
 *
 * No allocation, no I/O, any thread.
 */
#ifndef RAFTLOCK_RECORD_PEEK_H
#define RAFTLOCK_RECORD_PEEK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether the n bytes of a LockRecord may hold a timer: a lock-delay
 * (delay_until), a waiter (whose deadline may be set), or a holder with a
 * revocation time (revoke_at). False only when the bytes read cleanly and
 * hold none of those; bytes it cannot read give true, so that the decoder
 * judges them. */
bool record_peek_lock_timed(const void *bytes, size_t n);

/* Whether the n bytes of a LockRecord hold a waiter and no holder of
 * session `session` (whose acquire may be granted at once, nested): a
 * hint, so bytes it cannot read give false. */
bool record_peek_lock_queued(const void *bytes, size_t n, uint64_t session);

/* Visits the waiters of a lock set (Waiter.multi) among the n bytes of a
 * LockRecord, in queue order, with their session and seq. Returns false
 * when the bytes cannot be read (visit may have been called for the
 * waiters before the damage), true otherwise. */
bool record_peek_lock_set_waiters(const void *bytes, size_t n,
				  void (*visit)(void *arg, uint64_t session, uint64_t seq),
				  void *arg);

#endif
