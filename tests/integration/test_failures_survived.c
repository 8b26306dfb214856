/* How many node failures each cluster size survives (docs/GUARANTEES.md,
 * section 5): 3 nodes survive 1, 5 nodes survive 2; beyond that the
 * cluster refuses writes (never a wrong answer) while every node still
 * answers STATUS, and it serves again once a majority is back. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"

static raftlock_client *client_with_timeout(struct tcluster *c, unsigned timeout_ms)
{
	struct raftlock_client_options o = {0};
	o.addresses = c->addrs;
	o.n_addresses = (size_t)c->n;
	o.request_timeout_ms = timeout_ms;
	raftlock_client *cl = NULL;
	const char *err = NULL;
	if (raftlock_client_open(&o, &cl, &err) != 0)
		fail_msg("client_open: %s", err);
	return cl;
}

static void survives(int size)
{
	struct tcluster cl;
	memset(&cl, 0, sizeof cl);
	tcluster_start(&cl, size, 1000);
	int tolerated = (size - 1) / 2;
	raftlock_client *c = tl_client(&cl);
	raftlock_session *s = tl_session(c, 10000);
	raftlock_lock *held = tl_lock(s, "held");
	uint64_t t0 = tl_take(held);
	/* Kill the leader first, then followers, up to the tolerated count. */
	int killed[TCLUSTER_MAX], nk = 0;
	for (int k = 0; k < tolerated; k++) {
		int victim = k == 0 ? tcluster_leader(&cl, 10000) : -1;
		for (int i = 0; victim < 0 && i < cl.n; i++)
			if (cl.pid[i] > 0 && i != tcluster_leader(&cl, 10000))
				victim = i;
		assert_true(victim >= 0);
		tcluster_signal(&cl, victim, SIGKILL);
		killed[nk++] = victim;
		assert_true(tcluster_leader(&cl, 15000) >= 0);
	}
	/* Still serving: a new grant with a larger token; the held lock kept. */
	char name[32];
	snprintf(name, sizeof name, "after-%d", tolerated);
	raftlock_lock *l = tl_lock(s, name);
	uint64_t t1 = tl_take(l);
	assert_true(t1 > t0);
	raftlock_session *other = tl_session(c, 10000);
	raftlock_lock *contender = tl_lock(other, "held");
	uint64_t tok;
	assert_int_equal(raftlock_lock_try(contender, &tok), RAFTLOCK_EBUSY);
	printf("measure: %d-node cluster served after %d of its nodes were killed\n", size,
	       tolerated);
	/* One more failure: no majority. Writes fail, never succeed wrongly;
	 * the survivors still answer STATUS. */
	int extra = -1;
	for (int i = 0; i < cl.n && extra < 0; i++)
		if (cl.pid[i] > 0)
			extra = i;
	tcluster_signal(&cl, extra, SIGKILL);
	raftlock_client *impatient = client_with_timeout(&cl, 3000);
	raftlock_session *s2 = NULL;
	struct raftlock_session_options so = {.ttl_ms = 10000};
	int rv = raftlock_session_open(impatient, &so, &s2);
	assert_true(rv == RAFTLOCK_ETIMEDOUT || rv == RAFTLOCK_EUNAVAILABLE ||
		    rv == RAFTLOCK_ECONNECTION);
	for (int i = 0; i < cl.n; i++) {
		if (cl.pid[i] <= 0)
			continue;
		Raftlock__StatusInfo *st = tcluster_status(&cl, i);
		assert_non_null(st);
		raftlock__status_info__free_unpacked(st, NULL);
	}
	raftlock_client_close(impatient);
	/* A majority back: serving again, and nothing was lost. */
	tcluster_restart(&cl, extra);
	for (int k = 0; k < nk; k++)
		tcluster_restart(&cl, killed[k]);
	assert_true(tcluster_leader(&cl, 20000) >= 0);
	assert_int_equal(raftlock_lock_try(contender, &tok), RAFTLOCK_EBUSY);
	uint64_t t2 = tl_take(tl_lock(other, "after-restart"));
	assert_true(t2 > t1);
	raftlock_client_close(c);
	assert_int_equal(tcluster_destroy(&cl), 0);
}

static void three_nodes_survive_one(void **state)
{
	(void)state;
	survives(3);
}

static void five_nodes_survive_two(void **state)
{
	(void)state;
	survives(5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(three_nodes_survive_one),
		cmocka_unit_test(five_nodes_survive_two),
	};
	if (getenv("RAFTLOCK_TEST_FILTER") != NULL)
		cmocka_set_test_filter(getenv("RAFTLOCK_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
