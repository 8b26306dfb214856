/*
 * fsm_rules.h: the state machine's grant rules (fsm.c), shared with the
 * parts of apply that live in their own files (multilock.c). Internal to
 * apply: only fsm.c and those files include it. Everything here runs
 * inside one apply, on its write transaction; the rules are those of
 * fsm.h (no clock, no randomness, no I/O but LMDB).
 *
 * Records: a lock or session record passed in is the caller's, in memory;
 * the caller stores and frees it. A function that touches another lock
 * loads it, changes it and stores it before it returns, so that no two
 * copies of one record are ever changed at once.
 */
#ifndef RAFTLOCK_FSM_RULES_H
#define RAFTLOCK_FSM_RULES_H

#include <stdbool.h>
#include <stdint.h>

#include "fsm.h"
#include "multilock.h"
#include "outcomes.h"
#include "session_locks.h"

/* Everything one apply needs, passed to every command. */
struct apply {
	struct fsm *fsm;
	MDB_txn *txn;
	Raftlock__Meta *meta;
	uint64_t index; /* log index of the entry */
	uint64_t now;   /* cluster time after this entry */
	unsigned command;
	const struct fsm_sink *sink;
	struct multilock_state multi; /* multilock.h */
	uint32_t changes;             /* FSM_EV_CHANGE events of this entry so far */
};

void emit(struct apply *a, struct fsm_event ev);

/* Tells the watches (FSM_EV_CHANGE) that something happened to a holder
 * or waiter of `name`: a position in the log, the same on every node.
 * note_change has no value; the _gone forms describe holder or waiter i
 * of lock, before the caller removes it. */
void note_change_value(struct apply *a, Raftlock__WatchKind kind, const char *name,
		       uint64_t session, uint64_t owner, uint64_t token, Raftlock__Mode mode,
		       uint32_t permits, int status, const char *value);
void note_change(struct apply *a, Raftlock__WatchKind kind, const char *name, uint64_t session,
		 uint64_t owner, uint64_t token, Raftlock__Mode mode, uint32_t permits, int status);
void note_holder_gone(struct apply *a, const Raftlock__LockRecord *lock, size_t i,
		      Raftlock__WatchKind kind);
void note_waiter_gone(struct apply *a, const Raftlock__LockRecord *lock, size_t i, int status);
Raftlock__Result result_of(int status);
uint64_t elapsed_ns(const struct apply *a, uint64_t since);

/* Rule 6: a session is live until the cluster time reaches its deadline. */
bool session_live(struct apply *a, uint64_t id);

/* Store full and the other limits (GUARANTEES, section 6). */
bool store_full(struct apply *a);
Raftlock__Result refuse_limit(Raftlock__Limit limit, uint64_t value);
Raftlock__Result refuse_full(struct apply *a);
/* The waiters a lock may have for an acquire with this max_waiters (the
 * proposing leader's, carried in the entry) to queue. */
uint32_t max_waiters(const Raftlock__Acquire *op);

/* Whether the lock is in its lock-delay, and whether a request of (mode,
 * permits) is compatible with its holders. */
bool delayed(const struct apply *a, const Raftlock__LockRecord *lock);
bool compatible(const Raftlock__LockRecord *lock, Raftlock__Mode mode, uint32_t permits);

/* Adds a holder with a new fencing token and the published value (NULL or
 * "": none), and tells the watches. */
Raftlock__Holder *grant(struct apply *a, Raftlock__LockRecord *lock, uint64_t session,
			uint64_t owner, Raftlock__Mode mode, uint32_t permits, const char *value);

/* Records the final outcome of the queued acquire seq and pushes it. */
void finish_wait(struct apply *a, Raftlock__SessionRecord *sess, uint64_t seq,
		 const Raftlock__Result *res);

/* Grants waiters from the head of the lock's queue while they fit
 * (current: the command's own session, in memory, or NULL). */
void grant_waiters(struct apply *a, Raftlock__LockRecord *lock, Raftlock__SessionRecord *current);

/* Stores the lock, or deletes it when nothing refers to it any more. */
void save_lock(struct apply *a, Raftlock__LockRecord *lock);

/* Where this apply keeps the names of a session (session_locks.h): the
 * level may rise within an entry, so ask each time. */
static inline struct session_locks apply_names(const struct apply *a)
{
	return session_locks_at(a->fsm->store, a->txn, a->meta);
}

/* Where this apply keeps the outcomes of a session's commands
 * (outcomes.h); as for the names, ask each time. */
static inline struct outcomes apply_outcomes(const struct apply *a)
{
	return outcomes_at(a->fsm->store, a->txn, a->meta);
}

/* Drops the lock from the session's names once it neither holds nor
 * awaits it. */
void forget_lock_if_done(struct apply *a, Raftlock__SessionRecord *sess,
			 const Raftlock__LockRecord *lock);

/*
 * The lock an acquire names (created in memory if new) and the mode and
 * permits the request means on it. Returns a result of status 0 with
 * *lock set; a refusal with *lock NULL (bad name or kind, EKIND, the lock
 * limit); or a refusal with *lock set (a mode or permits the lock cannot
 * take), which the caller saves as it would after a success.
 */
Raftlock__Result open_lock(struct apply *a, const Raftlock__Acquire *op,
			   Raftlock__LockRecord **lock, Raftlock__Mode *mode, uint32_t *permits);

#endif
