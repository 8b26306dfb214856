/*
 * timers.h: the leader's deadlines for lock-delays and server-side waits,
 * ordered by the time each is next due. A binary min-heap keyed by that time
 * gives the due timers in O(log n) each; a hash index from the timer's
 * identity (a lock name for a lock-delay, (session, acquire seq) for a
 * wait) to its heap slot drops a resolved timer in O(log n). Neither a grant
 * nor a tick walks all timers (issue 9 item 7).
 *
 * A timer is due at max(deadline, time its last proposal may be retried).
 * No clock of its own: callers pass cluster time. Not thread-safe. Never
 * aborts: functions that need memory return RAFTLOCK_ENOMEM and leave the
 * set as it was.
 */
#ifndef RAFTLOCK_TIMERS_H
#define RAFTLOCK_TIMERS_H

#include <stddef.h>
#include <stdint.h>

#include "idmap.h"

/* A revocation deadline's identity is (token, 0) in (session, seq): a
 * token names one grant for ever. */
enum timer_kind { TIMER_LOCK_DELAY, TIMER_WAIT, TIMER_REVOKE };

struct timer {
	enum timer_kind kind;
	char *name; /* owned */
	uint64_t session, seq;
	uint64_t deadline;
	uint64_t due;       /* heap key: deadline, or when to propose again */
	size_t slot;        /* index in the heap */
	uint64_t key;       /* hash of the identity, key of the index */
	struct timer *next; /* other timers whose identity hashes alike */
};

struct timers {
	struct timer **heap;
	size_t n, cap;
	struct idmap index; /* key -> struct timer *: first timer of that hash */
};

void timers_init(struct timers *t);
/* Frees every timer. */
void timers_close(struct timers *t);
void timers_clear(struct timers *t);

/*
 * Sets the deadline of the timer of that identity (name is copied; for a
 * lock-delay session and seq are ignored, for a wait the identity is
 * (session, seq)), adding it if absent. Its proposal mark is reset.
 * Returns 0 or RAFTLOCK_ENOMEM.
 */
int timers_set(struct timers *t, enum timer_kind kind, const char *name, uint64_t session,
	       uint64_t seq, uint64_t deadline);

/* Drops the lock-delay of name / the wait (session, seq), if there is one. */
void timers_drop_delay(struct timers *t, const char *name);
void timers_drop_wait(struct timers *t, uint64_t session, uint64_t seq);
void timers_drop_revoke(struct timers *t, uint64_t token);

/* The timer due soonest if it is due at `now`, else NULL. Borrowed until
 * the next call that changes the set. */
struct timer *timers_due(struct timers *t, uint64_t now);

/* Marks tm (from timers_due) as proposed: it is due again at retry_at
 * unless dropped first. */
void timers_postpone(struct timers *t, struct timer *tm, uint64_t retry_at);

/* Forgets every proposal mark: each timer is due at its deadline (a new
 * leader has proposed nothing yet). O(n). */
void timers_reset(struct timers *t);

static inline size_t timers_count(const struct timers *t)
{
	return t->n;
}

#endif
