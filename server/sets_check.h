/*
 * sets_check.h: whether the queued lock sets of an image being loaded
 * (store_load_from()) agree with the waiters on its locks.
 *
 * Apply trusts that each waiter marked multi (Waiter.multi) has its set,
 * and that each set has its waiter, of the set's owner, on every lock it
 * names (multilock.h): a waiter without its set stops every node when it
 * reaches the head of its queue, a set without one of its waiters is
 * never granted, holding the queues of its other locks for good, and a
 * waiter of another owner is granted to that owner (and a cancel by the
 * set's owner does not find it). So a
 * load refuses an image where the two disagree, naming the lock, the
 * session and the seq (store_load_error()).
 *
 * The check, kept cheap for images of millions of locks: every lock
 * loaded is read for the sets' waiters without being decoded
 * (record_peek.h), and counted; each name of each set is looked up and
 * must have exactly one waiter of that set; then there must be as many
 * set waiters as names (no waiter of a set that does not name its
 * lock). Only when they differ are the locks walked again, to name one.
 *
 * Runs inside the load's write transaction.
 */
#ifndef RAFTLOCK_SETS_CHECK_H
#define RAFTLOCK_SETS_CHECK_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "party_sessions.h"
#include "raftlock.pb-c.h"
#include "store.h"

struct sets_check {
	struct store *store; /* borrowed for the check */
	MDB_txn *txn;
	uint64_t waiters; /* sets' waiters on the locks loaded */
	uint64_t names;   /* names of the sets checked */
	bool unread;      /* a lock record could not be read: unread_name's */
	char unread_name[64];
	struct party_sessions parties; /* of the locks loaded */
};

void sets_check_begin(struct sets_check *c, struct store *s, MDB_txn *txn);
void sets_check_free(struct sets_check *c);

/* A lock record as it is loaded (its key and value, borrowed for the
 * call): counts its sets' waiters and notes the sessions of its holders
 * and waiters (c->parties), or notes that its bytes cannot be read, for
 * sets_check_locks_read() (the image's sums are not checked yet: damage
 * is theirs to report). */
void sets_check_lock(struct sets_check *c, const MDB_val *key, const MDB_val *val);

/* Once the image's sums are right, before any set is checked: 0,
 * RAFTLOCK_EDATA when a lock record could not be read, or RAFTLOCK_ENOMEM
 * (noting the parties' sessions). On 0, c->parties
 * is sorted, to be met with the sessions (party_sessions_meet()). */
int sets_check_locks_read(struct sets_check *c);

/* Once every lock is loaded: session's queued set mw (borrowed for the
 * call) names 1..RAFTLOCK_MULTI_MAX locks, in increasing order, each a
 * lock with exactly one waiter of the set (session, mw->seq) marked
 * multi, of the set's owner. 0 or RAFTLOCK_EDATA. */
int sets_check_set(struct sets_check *c, uint64_t session, const Raftlock__MultiWait *mw);

/* Below FEATURES_SEQ_TABLES: the sets of rec's list (sets_check_set()),
 * no seq twice. 0 or RAFTLOCK_EDATA. */
int sets_check_list(struct sets_check *c, const Raftlock__SessionRecord *rec);

/* After every set of every session: each set waiter counted is one of a
 * set's names. seq_tables: where the sets are (their table, or the
 * session records' lists). 0 or RAFTLOCK_EDATA. */
int sets_check_end(struct sets_check *c, bool seq_tables);

#endif
