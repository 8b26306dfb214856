/* A node that cannot go on stops in the open, and a lost INIT is proposed
 * again (issue 9, item 11).
 *
 * - A snapshot restore that fails at runtime (injected with the test-only
 *   RAFTLOCK_TEST_FAULT=restore on one follower, which then gets an
 *   InstallSnapshot) stops that node with a non-zero status and a message
 *   naming the cause; started again without the fault it rebuilds from its
 *   disk and catches up. Before: libraft left it running and not applying.
 * - The first leader's INIT is dropped (RAFTLOCK_TEST_FAULT=drop-init on every
 *   node): the leader proposes it again and the cluster hands out tokens.
 *   Before: the leader answered EUNAVAILABLE until leadership changed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"

static void failed_restore_stops_the_node(void **state)
{
	(void)state;
	struct tcluster cl;
	memset(&cl, 0, sizeof cl);
	cl.snapshot_threshold = 64;
	cl.snapshot_trailing = 16;
	tcluster_start(&cl, 3, 500);
	raftlock_client *c = tl_client(&cl);
	raftlock_session *s = tl_session(c, 10000);
	char name[32];
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof name, "held-%03d", i);
		raftlock_lock *l = tl_lock(s, name);
		tl_take(l);
		raftlock_lock_free(l);
	}
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	int victim = (leader + 1) % cl.n;
	/* Empty again: the leader's log starts past it, so it gets a snapshot. */
	setenv("RAFTLOCK_TEST_FAULT", "restore", 1);
	tcluster_replace(&cl, victim);
	unsetenv("RAFTLOCK_TEST_FAULT");
	int st = -1;
	uint64_t end = tcluster_now_ms() + 15000;
	while (tcluster_now_ms() < end) {
		if (waitpid(cl.pid[victim], &st, WNOHANG) == cl.pid[victim])
			break;
		st = -1;
		tl_sleep_ms(50);
	}
	printf("measure: node %d exit status %#x\n", victim + 1, st);
	assert_true(st != -1); /* it stopped */
	cl.pid[victim] = 0;
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
	assert_true(tcluster_log_has(&cl, victim, "snapshot restore failed at index"));
	assert_true(tcluster_log_has(&cl, victim, "injected failure"));
	/* Its supervisor starts it again: it rebuilds from its disk. */
	tcluster_restart(&cl, victim);
	raftlock_lock *l = tl_lock(s, "after");
	tl_take(l);
	raftlock_lock_free(l);
	Raftlock__StatusInfo *ls = tcluster_status(&cl, tcluster_leader(&cl, 10000));
	assert_non_null(ls);
	uint64_t index = ls->commit_index, locks = ls->locks;
	raftlock__status_info__free_unpacked(ls, NULL);
	bool caught_up = false;
	end = tcluster_now_ms() + 10000;
	while (!caught_up && tcluster_now_ms() < end) {
		Raftlock__StatusInfo *vs = tcluster_status(&cl, victim);
		caught_up = vs != NULL && vs->applied_index >= index && vs->locks == locks;
		if (vs != NULL)
			raftlock__status_info__free_unpacked(vs, NULL);
		tl_sleep_ms(50);
	}
	assert_true(caught_up);
	raftlock_session_close(s);
	raftlock_client_close(c);
	assert_int_equal(tcluster_destroy(&cl), 0);
}

static void lost_init_is_proposed_again(void **state)
{
	(void)state;
	struct tcluster cl;
	memset(&cl, 0, sizeof cl);
	cl.extra_args[0] = "--log-level";
	cl.extra_args[1] = "info";
	setenv("RAFTLOCK_TEST_FAULT", "drop-init", 1);
	/* Waits for a ready leader that has applied INIT (next_token != 0);
	 * exits the test if none within 20 s. */
	uint64_t t0 = tcluster_now_ms();
	tcluster_start(&cl, 3, 500);
	unsetenv("RAFTLOCK_TEST_FAULT");
	int leader = tcluster_leader(&cl, 1000);
	assert_true(leader >= 0);
	printf("measure: tokens handed out %llu ms after start\n",
	       (unsigned long long)(tcluster_now_ms() - t0));
	int dropped = 0;
	for (int i = 0; i < cl.n; i++)
		dropped += tcluster_log_has(&cl, i, "dropping the first INIT");
	assert_true(dropped >= 1);
	raftlock_client *c = tl_client(&cl);
	raftlock_session *s = tl_session(c, 10000);
	raftlock_lock *l = tl_lock(s, "x");
	assert_true(tl_take(l) != 0);
	raftlock_lock_free(l);
	raftlock_session_close(s);
	raftlock_client_close(c);
	assert_int_equal(tcluster_destroy(&cl), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(failed_restore_stops_the_node),
		cmocka_unit_test(lost_init_is_proposed_again),
	};
	if (getenv("RAFTLOCK_TEST_FILTER") != NULL)
		cmocka_set_test_filter(getenv("RAFTLOCK_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
