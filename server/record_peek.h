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

/* The name among the n bytes of a LockRecord: *len bytes at *name (not
 * NUL-terminated, borrowed from bytes), the last when there are several
 * (as the decoder takes it), none (0 bytes) when there is none. False
 * when the bytes cannot be read (*name and *len unchanged). */
bool record_peek_lock_name(const void *bytes, size_t n, const char **name, size_t *len);

/* A holder or a waiter of a lock, as record_peek_lock_parties() reads it
 * (fields absent read as 0). */
struct record_party {
	bool waiter; /* false: a holder */
	bool multi;  /* a waiter of a lock set (Waiter.multi) */
	uint64_t session, owner;
	uint64_t seq; /* a waiter's */
};

/* Visits the holders and waiters among the n bytes of a LockRecord in
 * the order the bytes hold them (as packed: the holders, then the
 * waiters in queue order), p borrowed for the call. Returns false when the bytes
 * cannot be read (visit may have been called for the parties before the
 * damage), true otherwise. */
bool record_peek_lock_parties(const void *bytes, size_t n,
			      void (*visit)(void *arg, const struct record_party *p), void *arg);

/* An Outcome's marks among its n bytes (fields absent read as false; the
 * last of a field repeated, as the decoder takes it): whether it is
 * pending (Outcome.pending) and queued (Outcome.queued). False when the
 * bytes cannot be read (*pending and *queued unchanged). */
bool record_peek_outcome_marks(const void *bytes, size_t n, bool *pending, bool *queued);

#endif
