/*
 * lock.h: the lock layer, on the session layer: lock handles and the
 * raftlock_lock_* calls. A handle is an owner (DESIGN.md rule 9): its id is
 * the client's random base plus a counter (sessions_new_owner), so two
 * handles never share one. Handles live on their session's `attached`
 * list; closing the session frees them (lock_free_all, its freeing hook).
 */
#ifndef RAFTLOCK_LOCK_H
#define RAFTLOCK_LOCK_H

#include <stdint.h>

#include "session.h"

struct raftlock_lock {
	struct list link; /* in the session's locks */
	raftlock_session *session;
	char *name;
	struct raftlock_lock_options opts;
	uint64_t owner;
	uint64_t token;             /* 0 when holding nothing */
	uint32_t count;             /* nesting depth */
	struct lock_async *waiting; /* its asynchronous acquire that waits, if any */
	/* The largest token revoked through the handle: an acquire whose
	 * grant was revoked before its caller took it in must not hold it
	 * (lock_hold). */
	uint64_t revoked;
	/* A set (multi.c): its first handle leads it and lists all its
	 * handles, in name order, itself first; they share one owner. A
	 * grant to the leader gives each handle its token; a late grant
	 * nobody waits for is undone by releasing every lock of the set. */
	raftlock_lock *const *set;
	size_t n_set;
	char *value; /* elections: published with each grant; NULL: none */
	/* What a layer above made on the handle (a set it leads, a
	 * leadership), freed by free_wrapper when the session frees the
	 * handle (lock_free_all), not when the caller does; NULL: none. */
	void *wrapper;
	void (*free_wrapper)(void *wrapper);
};

/* raftlock_lock_acquire() and raftlock_lock_acquire_async() with the
 * request's envelope made by the caller (an AcquireRequest, or the
 * MultiAcquireRequest of the set l leads); env is borrowed for the call.
 * t->mu not held. */
int lock_acquire_env(raftlock_lock *l, Raftlock__Envelope *env, int timeout_ms, uint64_t *token);
int lock_acquire_env_async(raftlock_lock *l, Raftlock__Envelope *env, int timeout_ms,
			   raftlock_lock_cb cb, void *arg);

/*
 * Releases one level of each of the n handles of locks (n >= 1), which
 * share one owner (a set's, multi.c), as one call of their session within
 * one request timeout in all: waits for their orphans once, then sends
 * every release before it waits for any. Returns 0 when each was
 * released, else one lock's error (raftlock_errmsg names it): that of a
 * lock still held (not sent, or refused), else RAFTLOCK_EUNKNOWN (a
 * release that will execute), else the first other one (ENOTHOLDER,
 * ESESSION: nothing held). t->mu not held.
 */
int lock_release_set(raftlock_lock *const *locks, size_t n);

/* Elections: publishes value on the handle's current grant (PROCLAIM,
 * fenced by its token), as a call of its session, once the handle's
 * earlier requests still being sent are settled (an earlier proclaim
 * whose outcome was unknown applies first). 0, or RAFTLOCK_ENOTHOLDER
 * (the grant is gone), or the errors of a release. Without t->mu. */
int lock_proclaim(raftlock_lock *l, const char *value);

/* Frees every handle of s, and what was made on them (wrapper), with
 * t->mu held: the session layer's freeing hook. */
void lock_free_all(raftlock_session *s);

/* Ends the asynchronous acquires of s that wait, with RAFTLOCK_ECANCELED
 * when s is closing, else RAFTLOCK_ESESSION (t->mu held): the session
 * layer's ending hook. Their callbacks run soon after on the I/O thread. */
void lock_end_waits(raftlock_session *s);

/* The grant of lock name to s through handle owner with token was
 * revoked: that handle holds nothing any more, also should an acquire in
 * flight take that grant in later (t->mu held): the session layer's
 * revoked hook. */
void lock_revoked(raftlock_session *s, uint64_t owner, const char *name, uint64_t token);

#endif
