/* A node that cannot go on stops in the open, and a lost INIT is proposed
 * again (issue 9, item 11).
 *
 * - A snapshot restore that fails at runtime (injected with the test-only
 *   RAFTLOCK_TEST_FAULT=restore on one follower, which then gets an
 *   InstallSnapshot) stops that node with a non-zero status and a message
 *   naming the cause; started again without the fault it rebuilds from its
 *   disk and catches up. Before: libraft left it running and not applying.
 * - A store whose state says format 0 although it has applied entries (a
 *   build of 2026-11-21 wrote no format, and its sessions had no lease
 *   rows, which a snapshot load now refuses) is rebuilt from the raft log
 *   at start, as a store of another format is; it was kept.
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
#include "config.h"
#include "lockutil.h"
#include "store.h"

/* Sets the format recorded in the state of node i (stopped) to format. */
static void set_store_format(struct tcluster *cl, int i, uint32_t format)
{
	char dir[300], err[256];
	snprintf(dir, sizeof dir, "%s/n%d/state", cl->dir, i + 1);
	struct store st;
	assert_int_equal(store_open(&st, dir, CONFIG_DEFAULT_MAP_SIZE, err, sizeof err), 0);
	MDB_txn *txn = store_begin(&st, true);
	Raftlock__Meta *m = store_get_meta(&st, txn);
	assert_true(m->applied_index > 0);
	m->format = format;
	store_put_meta(&st, txn, m);
	raftlock__meta__free_unpacked(m, NULL);
	store_commit(txn);
	store_close(&st);
}

/* Waits until node i has applied the leader's commit index and holds as
 * many locks. */
static bool caught_up_with_leader(struct tcluster *cl, int i, int timeout_ms)
{
	Raftlock__StatusInfo *ls = tcluster_status(cl, tcluster_leader(cl, 10000));
	assert_non_null(ls);
	uint64_t index = ls->commit_index, locks = ls->locks;
	raftlock__status_info__free_unpacked(ls, NULL);
	uint64_t end = tcluster_now_ms() + (uint64_t)timeout_ms;
	while (tcluster_now_ms() < end) {
		Raftlock__StatusInfo *vs = tcluster_status(cl, i);
		bool done = vs != NULL && vs->applied_index >= index && vs->locks == locks;
		if (vs != NULL)
			raftlock__status_info__free_unpacked(vs, NULL);
		if (done)
			return true;
		tl_sleep_ms(50);
	}
	return false;
}

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
	assert_true(caught_up_with_leader(&cl, victim, 10000));
	raftlock_session_close(s);
	raftlock_client_close(c);
	assert_int_equal(tcluster_destroy(&cl), 0);
}

static void store_of_format_0_is_rebuilt(void **state)
{
	(void)state;
	struct tcluster cl;
	memset(&cl, 0, sizeof cl);
	tcluster_start(&cl, 3, 500);
	raftlock_client *c = tl_client(&cl);
	raftlock_session *s = tl_session(c, 10000);
	raftlock_lock *l = tl_lock(s, "kept");
	tl_take(l);
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	int victim = (leader + 1) % cl.n;
	assert_true(caught_up_with_leader(&cl, victim, 10000));
	assert_int_equal(tcluster_stop(&cl, victim), 0);
	set_store_format(&cl, victim, 0);
	tcluster_restart(&cl, victim);
	assert_true(caught_up_with_leader(&cl, victim, 10000));
	assert_true(tcluster_log_has(&cl, victim, "has store format 0"));
	assert_true(tcluster_log_has(&cl, victim, "rebuilding it from the raft log"));
	raftlock_lock_free(l);
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
		cmocka_unit_test(store_of_format_0_is_rebuilt),
		cmocka_unit_test(lost_init_is_proposed_again),
	};
	if (getenv("RAFTLOCK_TEST_FILTER") != NULL)
		cmocka_set_test_filter(getenv("RAFTLOCK_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
