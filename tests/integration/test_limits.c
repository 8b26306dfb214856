/* test_limits.c: the limits of the replicated state on a real 3-node
 * cluster with auth = on and bearer tokens, through the C library (issue
 * 11, item 4; docs/GUARANTEES.md, section 6). Every node runs with
 * max-sessions-per-identity 2 and max-waiters-per-lock 2:
 *   - an identity's third session is refused with RAFTLOCK_ELIMIT and a
 *     message naming the limit, opens nothing, and leaves the other
 *     identities alone; closing one gives its place back, and the count
 *     survives the leader's death (it is in the replicated state);
 *   - a lock's third waiter is refused the same way and the queue is
 *     unchanged; the two queued still get the lock in turn. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"

static char dir[] = "/tmp/raftlock-limits-XXXXXX";
static char tokens_path[300];
static struct tcluster cl;

#define TOKEN_ROOT "root-token-7c41d09e5ab23f68"
#define TOKEN_ALICE "alice-token-1e8b37f0c4d95a26"
#define TOKEN_BOB "bob-token-62f0a9d14c7e3b85"

static int setup(void **state)
{
	(void)state;
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(tokens_path, sizeof tokens_path, "%s/tokens", dir);
	const char *tokens[] = {"root", TOKEN_ROOT, "alice", TOKEN_ALICE, "bob", TOKEN_BOB, NULL};
	if (tl_write_tokens(tokens_path, tokens) != 0)
		return -1;
	static const char *args[] = {"--auth",
				     "on",
				     "--auth-tokens",
				     tokens_path,
				     "--auth-admin",
				     "root",
				     "--max-sessions-per-identity=2",
				     "--max-waiters-per-lock=2"};
	for (size_t i = 0; i < sizeof args / sizeof args[0]; i++)
		cl.extra_args[i] = args[i];
	tcluster_start(&cl, 3, 500);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return tcluster_destroy_and_remove(&cl, dir) == 0 ? 0 : -1;
}

/* Sessions the leader's applied state holds. */
static uint64_t cluster_sessions(void)
{
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	Raftlock__StatusInfo *st = tcluster_status(&cl, leader);
	assert_non_null(st);
	uint64_t n = st->sessions;
	raftlock__status_info__free_unpacked(st, NULL);
	return n;
}

/* A counter of the leader's metrics. */
static long long leader_metric(const char *name)
{
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	return tcluster_metric(&cl, leader, name);
}

static void sessions_per_identity(void **state)
{
	(void)state;
	raftlock_client *alice = tl_client_token(&cl, TOKEN_ALICE, "alice");
	raftlock_client *bob = tl_client_token(&cl, TOKEN_BOB, "bob");
	raftlock_session *a1 = tl_session(alice, 10000), *a2 = tl_session(alice, 10000);

	uint64_t before = cluster_sessions();
	struct raftlock_session_options so = {.ttl_ms = 10000};
	raftlock_session *a3 = NULL;
	assert_int_equal(raftlock_session_open(alice, &so, &a3), RAFTLOCK_ELIMIT);
	assert_null(a3);
	tl_assert_errmsg_has(alice, "identity 'alice' already holds 2 sessions");
	tl_assert_errmsg_has(alice, "max-sessions-per-identity");
	assert_int_equal(cluster_sessions(), before);
	assert_int_equal(leader_metric("raftlock_sessions_per_identity_refused_total"), 1);

	/* Bob is not alice. */
	raftlock_session *b1 = tl_session(bob, 10000);

	/* A close gives the place back. */
	assert_int_equal(raftlock_session_close(a1), 0);
	a1 = tl_session(alice, 10000);

	/* The count is replicated state: a new leader refuses alike. */
	int leader = tcluster_leader(&cl, 10000);
	tcluster_signal(&cl, leader, SIGKILL);
	assert_true(tcluster_leader(&cl, 15000) >= 0);
	a3 = NULL;
	assert_int_equal(raftlock_session_open(alice, &so, &a3), RAFTLOCK_ELIMIT);
	tl_assert_errmsg_has(alice, "max-sessions-per-identity");
	tcluster_restart(&cl, leader);

	raftlock_session_close(a1);
	raftlock_session_close(a2);
	raftlock_session_close(b1);
	raftlock_client_close(alice);
	raftlock_client_close(bob);
}

struct waiter {
	pthread_t thread;
	raftlock_lock *lock;
	int rv;
	uint64_t token;
};

static void *wait_for_lock(void *arg)
{
	struct waiter *w = arg;
	w->rv = raftlock_lock_acquire(w->lock, RAFTLOCK_EXCLUSIVE, 1, 30000, &w->token);
	return NULL;
}

/* Waiters on `name`, as root reads them. */
static size_t waiters_of(raftlock_client *root, const char *name)
{
	struct raftlock_lock_info *info = NULL;
	if (raftlock_lock_get(root, name, false, &info) != 0)
		fail_msg("lock get: %s", raftlock_errmsg(root));
	size_t n = info->n_waiters;
	raftlock_lock_info_free(info);
	return n;
}

static void waiters_per_lock(void **state)
{
	(void)state;
	raftlock_client *root = tl_client_token(&cl, TOKEN_ROOT, "root");
	if (raftlock_acl_set(root, "alice", "lim/", RAFTLOCK_ACL_LOCK) != 0)
		fail_msg("acl set: %s", raftlock_errmsg(root));
	raftlock_session *rs = tl_session(root, 10000);
	raftlock_lock *held = tl_lock(rs, "lim/w");
	tl_take(held);

	raftlock_client *alice = tl_client_token(&cl, TOKEN_ALICE, "alice");
	raftlock_session *as = tl_session(alice, 10000);
	struct waiter w[2];
	for (int i = 0; i < 2; i++) {
		memset(&w[i], 0, sizeof w[i]);
		w[i].lock = tl_lock(as, "lim/w");
		assert_int_equal(pthread_create(&w[i].thread, NULL, wait_for_lock, &w[i]), 0);
		for (int tries = 0; waiters_of(root, "lim/w") < (size_t)i + 1; tries++) {
			assert_true(tries < 200);
			tl_sleep_ms(25);
		}
	}

	/* The third is refused at once, and the queue stays as it was. */
	raftlock_lock *third = tl_lock(as, "lim/w");
	uint64_t token = 0;
	uint64_t t0 = tcluster_now_ms();
	assert_int_equal(raftlock_lock_acquire(third, RAFTLOCK_EXCLUSIVE, 1, 10000, &token),
			 RAFTLOCK_ELIMIT);
	assert_true(tcluster_now_ms() - t0 < 5000);
	assert_int_equal(token, 0);
	tl_assert_errmsg_has(alice, "the lock already has 2 waiters");
	tl_assert_errmsg_has(alice, "max-waiters-per-lock");
	assert_int_equal(waiters_of(root, "lim/w"), 2);
	assert_int_equal(leader_metric("raftlock_waiters_per_lock_refused_total"), 1);

	/* The queued ones are served in turn. */
	assert_int_equal(raftlock_lock_release(held, NULL), 0);
	pthread_join(w[0].thread, NULL);
	assert_int_equal(w[0].rv, 0);
	assert_int_equal(raftlock_lock_release(w[0].lock, NULL), 0);
	pthread_join(w[1].thread, NULL);
	assert_int_equal(w[1].rv, 0);
	assert_true(w[1].token > w[0].token);
	assert_int_equal(raftlock_lock_release(w[1].lock, NULL), 0);

	raftlock_lock_free(third);
	for (int i = 0; i < 2; i++)
		raftlock_lock_free(w[i].lock);
	raftlock_lock_free(held);
	raftlock_session_close(as);
	raftlock_session_close(rs);
	raftlock_client_close(alice);
	raftlock_client_close(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sessions_per_identity),
		cmocka_unit_test(waiters_per_lock),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
