/* A member whose log goes back in time (here: its data directory lost and
 * the node started again empty with the same id, members and --bootstrap,
 * which docs/OPERATIONS.md says not to do) catches up with the cluster: by
 * InstallSnapshot, since the leader's log no longer reaches back to its
 * start, then by the log entries after the snapshot; and it keeps up
 * afterwards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"

#define LOCKS 300
#define CATCHUP_DEADLINE_MS 10000

/* Waits until node i has applied `index`; returns the milliseconds it took
 * from t0, or -1 at the deadline. */
static long wait_applied(struct tcluster *cl, int i, uint64_t index, uint64_t t0)
{
	while (tcluster_now_ms() < t0 + CATCHUP_DEADLINE_MS) {
		Raftlock__StatusInfo *st = tcluster_status(cl, i);
		bool done = st != NULL && st->applied_index >= index;
		if (st != NULL)
			raftlock__status_info__free_unpacked(st, NULL);
		if (done)
			return (long)(tcluster_now_ms() - t0);
		tl_sleep_ms(50);
	}
	return -1;
}

static uint64_t leader_commit_index(struct tcluster *cl, uint64_t *locks)
{
	int leader = tcluster_leader(cl, 10000);
	assert_true(leader >= 0);
	Raftlock__StatusInfo *st = tcluster_status(cl, leader);
	assert_non_null(st);
	uint64_t index = st->commit_index;
	if (locks != NULL)
		*locks = st->locks;
	raftlock__status_info__free_unpacked(st, NULL);
	return index;
}

static unsigned long long metric(struct tcluster *cl, int i, const char *name)
{
	static char page[16384];
	assert_int_equal(tcluster_http_get(cl, i, "/metrics", page, sizeof page), 0);
	char key[128];
	snprintf(key, sizeof key, "\n%s ", name);
	const char *at = strstr(page, key);
	assert_non_null(at);
	return strtoull(at + strlen(key), NULL, 10);
}

static void replaced_member_catches_up(void **state)
{
	(void)state;
	struct tcluster cl;
	memset(&cl, 0, sizeof cl);
	/* Small snapshots that keep little log behind them: the replaced
	 * member's start is compacted away long before it comes back. */
	cl.snapshot_threshold = 64;
	cl.snapshot_trailing = 16;
	tcluster_start(&cl, 3, 500);
	raftlock_client *c = tl_client(&cl);
	raftlock_session *s = tl_session(c, 10000);
	char name[32];
	for (int i = 0; i < LOCKS; i++) {
		snprintf(name, sizeof name, "held-%03d", i);
		raftlock_lock *l = tl_lock(s, name);
		tl_take(l);
		raftlock_lock_free(l); /* the grant stays with the session */
	}
	/* A follower, so that the leader it last replicated with stays. */
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	int victim = (leader + 1) % cl.n;
	uint64_t t0 = tcluster_now_ms();
	tcluster_replace(&cl, victim);
	uint64_t locks = 0;
	uint64_t index = leader_commit_index(&cl, &locks);
	long took = wait_applied(&cl, victim, index, t0);
	printf("measure: replaced member applied the leader's commit index %llu after %ld ms\n",
	       (unsigned long long)index, took);
	assert_true(took >= 0);
	Raftlock__StatusInfo *st = tcluster_status(&cl, victim);
	assert_non_null(st);
	assert_int_equal(st->locks, locks);
	assert_true(st->locks >= LOCKS);
	raftlock__status_info__free_unpacked(st, NULL);
	assert_true(metric(&cl, victim, "raftlock_snapshots_restored_total") >= 1);
	/* And it keeps up with what comes after. */
	raftlock_lock *after = tl_lock(s, "after-replace");
	tl_take(after);
	index = leader_commit_index(&cl, NULL);
	assert_true(wait_applied(&cl, victim, index, tcluster_now_ms()) >= 0);
	raftlock_lock_free(after);
	raftlock_session_close(s);
	raftlock_client_close(c);
	assert_int_equal(tcluster_destroy(&cl), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(replaced_member_catches_up),
	};
	if (getenv("RAFTLOCK_TEST_FILTER") != NULL)
		cmocka_set_test_filter(getenv("RAFTLOCK_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
