/*
 * party_sessions.h: whether the holders and waiters of the locks of an
 * image being loaded (store_load_from()) name sessions of the image.
 *
 * Apply trusts that they do: a holder of a session that is not there
 * holds its lock for good (no expiry of its session ever ends it), and
 * a waiter of one is dropped only once it heads its queue. So a load
 * refuses such an image, naming the lock and the session
 * (store_load_error()).
 *
 * Kept cheap for images of millions of locks: each party's session is
 * noted as its lock loads (read from the lock's bytes with the sets'
 * waiters: sets_check.h), a session once when it repeats; the notes are
 * sorted once (not at all when they came in order) and met with the
 * sessions in their table's order, which the load walks anyway. Only a
 * session that is missing walks the locks again, to name one.
 *
 * Runs inside the load's write transaction.
 */
#ifndef RAFTLOCK_PARTY_SESSIONS_H
#define RAFTLOCK_PARTY_SESSIONS_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct party_sessions {
	uint64_t *ids; /* noted; once sorted, increasing */
	size_t n, cap;
	bool unsorted;
	bool failed; /* out of memory while noting */
	size_t met;  /* ids[0..met) are sessions met */
};

void party_sessions_init(struct party_sessions *ps);
void party_sessions_free(struct party_sessions *ps);

/* Notes that a holder or waiter of a lock loaded names session id. */
void party_sessions_add(struct party_sessions *ps, uint64_t id);

/* Once every lock is loaded, before the first party_sessions_meet():
 * 0, or RAFTLOCK_ENOMEM (a note or the sort ran out of memory). */
int party_sessions_sort(struct party_sessions *ps);

/* The image's sessions, each id once, in increasing order: 0, or
 * RAFTLOCK_EDATA when a party names a session below id that was not met
 * (store_load_error() says which lock of txn names it). */
int party_sessions_meet(struct party_sessions *ps, struct store *s, MDB_txn *txn, uint64_t id);

/* After the last session: 0, or RAFTLOCK_EDATA when a party names a
 * session that was not met, as party_sessions_meet(). */
int party_sessions_end(struct party_sessions *ps, struct store *s, MDB_txn *txn);

#endif
