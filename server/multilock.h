/*
 * multilock.h: atomic acquire of several locks (MULTI_ACQUIRE), part of
 * apply (fsm_rules.h; docs/GUARANTEES.md, multi-acquire).
 *
 * A set of up to RAFTLOCK_MULTI_MAX locks, each with its mode, is granted
 * all together, in one apply, or not at all. When it cannot be granted at
 * once and the request waits, one waiter marked `multi` joins the tail of
 * every lock's queue in the same apply, and the session records the set
 * (SessionRecord.multi_waits below feature level FEATURES_SEQ_TABLES, a row
 * of the store's multi_waits table from it). Since every queue is FIFO and a set queues
 * on all its locks at one point of the log, the queues agree on the order
 * of the waiters they share. The rule: a set is granted when its waiter is
 * at the head of every one of its queues, each compatible with that lock's
 * holders and no lock in its lock-delay. A set at the head of one queue
 * but not yet grantable holds that queue, as a waiting writer does. So
 * the oldest waiter of all is always at the head of each of its queues:
 * it waits for holders only, never for a younger waiter (no starvation).
 * Each lock of a granted set gets its own fencing token, taken in the
 * order of the names.
 */
#ifndef RAFTLOCK_MULTILOCK_H
#define RAFTLOCK_MULTILOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftlock.h"
#include "raftlock.pb-c.h"
#include "store.h"

struct apply;

/* What an apply keeps for the sets: the locks whose queue may move
 * because a set was granted or dropped there (run at the end of each
 * command, when no record is held in memory), and the tokens of a result
 * that must outlive the session record they were read from. */
struct multilock_state {
	char **names;
	size_t n, cap;
	uint64_t tokens[RAFTLOCK_MULTI_MAX];
};

void multilock_init(struct multilock_state *m);
void multilock_free(struct multilock_state *m);

/* MULTI_ACQUIRE of the session (in memory; the caller stores it). Results:
 * 0 with tokens (granted now), queued, EBUSY (not free and no wait, or the
 * owner already holds or awaits one of the locks), EINVAL (no items, more
 * than RAFTLOCK_MULTI_MAX, names not strictly increasing, a bad item),
 * EKIND, EDEADLK (the wait would close a cycle: deadlock.h), ELIMIT. */
Raftlock__Result multilock_acquire(struct apply *a, Raftlock__SessionRecord *sess,
				   const Raftlock__Command *cmd);

/* The head waiter of `lock` (in memory) is a set's, of session sess (in
 * memory, live): grants the whole set if every lock allows it, pushing
 * the outcome. Returns whether it did; the caller stores sess then. */
bool multilock_grant(struct apply *a, Raftlock__LockRecord *lock, Raftlock__SessionRecord *sess);

/* The set's waiter (sess, seq) on `lock` is leaving (cancel, timeout):
 * removes its waiters from the set's other locks, telling the watches
 * they left with status (RAFTLOCK_ECANCELED, RAFTLOCK_ETIMEDOUT), and the
 * set from the session. The caller removes the one on `lock` and records
 * the outcome. */
void multilock_drop(struct apply *a, Raftlock__LockRecord *lock, Raftlock__SessionRecord *sess,
		    uint64_t seq, int status);

/* Runs the queues of the locks noted during the command (end of each
 * command). */
void multilock_run_queues(struct apply *a);

/* The session ends: its queued sets go (their waiters go with the
 * caller; the record's own list goes with the record). */
void multilock_end(struct apply *a, const Raftlock__SessionRecord *sess);

/* Moves every session's list of queued sets into the multi_waits table:
 * the apply that raises the recorded level to FEATURES_SEQ_TABLES, once. */
void multilock_move(struct store *st, MDB_txn *txn);

/* Points res->tokens at a copy held by the apply (it may point into a
 * record about to be freed). */
void multilock_keep_tokens(struct apply *a, Raftlock__Result *res);

#endif
