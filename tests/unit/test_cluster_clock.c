/*
 * test_cluster_clock.c: the leader's cluster clock (server/cluster_clock.h)
 * on a manual timebase: it runs with the leader's time while read at
 * least every tick, a stall of the loop counts CLUSTER_CLOCK_STALL_MAX_MS
 * at most, it stands still when stopped, and stamps never go backwards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cluster_clock.h"
#include "timebase.h"

struct rig {
	struct timebase tb;
	struct cluster_clock c;
};

static void rig_up(struct rig *r, uint64_t applied)
{
	timebase_init_manual(&r->tb, 5000);
	cluster_clock_init(&r->c, &r->tb);
	cluster_clock_start(&r->c, applied);
}

/* Read every 50 ms (the leader's expiry tick), it keeps pace. */
static void test_runs_with_the_leader(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, 1000);
	assert_int_equal(cluster_clock_now(&r.c), 1000);
	for (int i = 0; i < 200; i++) {
		timebase_advance(&r.tb, 50);
		assert_int_equal(cluster_clock_now(&r.c), 1000 + 50 * (uint64_t)(i + 1));
	}
	/* a gap of exactly the limit is not a stall */
	timebase_advance(&r.tb, CLUSTER_CLOCK_STALL_MAX_MS);
	assert_int_equal(cluster_clock_now(&r.c), 11000 + CLUSTER_CLOCK_STALL_MAX_MS);
}

/* A loop that did not run for 8 s advances cluster time by the limit
 * only: the sessions whose keepalives waited unread are not expired for
 * the leader's own stall. Afterwards it runs at full pace again. */
static void test_a_stall_counts_the_limit(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, 1000);
	timebase_advance(&r.tb, 50);
	assert_int_equal(cluster_clock_now(&r.c), 1050);
	timebase_advance(&r.tb, 8000);
	uint64_t after = cluster_clock_now(&r.c);
	assert_int_equal(after, 1050 + CLUSTER_CLOCK_STALL_MAX_MS);
	assert_int_equal(cluster_clock_stamp(&r.c), after);
	timebase_advance(&r.tb, 50);
	assert_int_equal(cluster_clock_now(&r.c), after + 50);
	timebase_advance(&r.tb, CLUSTER_CLOCK_STALL_MAX_MS + 1);
	assert_int_equal(cluster_clock_now(&r.c), after + 50 + CLUSTER_CLOCK_STALL_MAX_MS);
}

/* Stopped, it stands still; restarted from the log, its stamps never go
 * below the last one it gave in the same leadership. */
static void test_stops_and_never_goes_back(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, 1000);
	timebase_advance(&r.tb, 300);
	assert_int_equal(cluster_clock_stamp(&r.c), 1300);
	cluster_clock_stop(&r.c);
	timebase_advance(&r.tb, 60000);
	assert_int_equal(cluster_clock_now(&r.c), 1300);
	/* a new leadership starts from what the log holds, and a stall
	 * before its first read is a stall too */
	cluster_clock_start(&r.c, 1200);
	assert_int_equal(cluster_clock_stamp(&r.c), 1200);
	timebase_advance(&r.tb, 5000);
	assert_int_equal(cluster_clock_now(&r.c), 1200 + CLUSTER_CLOCK_STALL_MAX_MS);
	assert_int_equal(cluster_clock_stamp(&r.c), 1200 + CLUSTER_CLOCK_STALL_MAX_MS);
	assert_true(cluster_clock_stamp(&r.c) >= 1200 + CLUSTER_CLOCK_STALL_MAX_MS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runs_with_the_leader),
		cmocka_unit_test(test_a_stall_counts_the_limit),
		cmocka_unit_test(test_stops_and_never_goes_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
