/* lockutil.h: small helpers shared by the integration tests that go through
 * libraftlock. Each aborts the test (cmocka fail_msg) on unexpected errors. */
#ifndef RAFTLOCK_TEST_LOCKUTIL_H
#define RAFTLOCK_TEST_LOCKUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cluster.h"
#include "raftlock.h"

raftlock_client *tl_client(struct tcluster *c);
/* A client of c that authenticates with token (auth = on) under the
 * client name `name`. */
raftlock_client *tl_client_token(struct tcluster *c, const char *token, const char *name);
/* Writes an auth-tokens file at path: for each (name, token) pair of
 * pairs (NULL-terminated), the line of identity name for that token.
 * Returns 0, or -1 if the file cannot be written. */
int tl_write_tokens(const char *path, const char *const *pairs);
/* Fails the test unless the client's last error message contains text. */
void tl_assert_errmsg_has(raftlock_client *c, const char *text);
raftlock_session *tl_session(raftlock_client *cl, unsigned ttl_ms);
raftlock_lock *tl_lock(raftlock_session *s, const char *name);
/* Try-lock that must succeed; returns the token. */
uint64_t tl_take(raftlock_lock *l);
/* Try-locks of the n handles l[], all sent before any answer is awaited
 * (the leader commits them in few entries, where one after the other
 * costs a commit each); each must succeed. */
void tl_take_all(raftlock_lock **l, size_t n);
void tl_sleep_ms(unsigned ms);
/* Waits up to 10 s until `name` has n waiters (a linearizable read). */
void tl_await_waiters(raftlock_client *c, const char *name, size_t n);
/* The lock `name`, held once: how long (ms) its holder's lease still runs,
 * in cluster time, as the leader answers now; *deadline is its end
 * (cluster ms). */
uint64_t tl_lease_left(raftlock_client *c, const char *name, uint64_t *deadline);
/* The cluster time (ms) at which the lock `name`, held once, was granted. */
uint64_t tl_granted_time(raftlock_client *c, const char *name);

/* STATUS of the ready leader (waiting up to 20 s for one); fails the test
 * when there is none. Free with raftlock__status_info__free_unpacked(). */
Raftlock__StatusInfo *tl_leader_status(struct tcluster *c);

/* Forks a process that opens a session of ttl_ms, takes `name` (created
 * with opts, which may be NULL) and then only waits: a holder the test can
 * stop or kill. Sets *token to its grant's token; returns its pid. */
pid_t tl_fork_holder(struct tcluster *c, const char *name, unsigned ttl_ms,
		     const struct raftlock_lock_options *opts, uint64_t *token);
/* The same with the session's options (so, borrowed). */
pid_t tl_fork_holder_with(struct tcluster *c, const char *name,
			  const struct raftlock_session_options *so,
			  const struct raftlock_lock_options *opts, uint64_t *token);

/* Two sessions of one client, each with a handle on the same lock name:
 * the cast of most contention tests. */
struct tl_pair {
	raftlock_client *c;
	raftlock_session *a, *b;
	raftlock_lock *la, *lb;
};

void tl_pair_open(struct tl_pair *p, struct tcluster *cl, const char *name, unsigned ttl_ms);
/* Frees the handles, closes the sessions and the client. */
void tl_pair_close(struct tl_pair *p);

#endif
