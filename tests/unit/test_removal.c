/*
 * test_removal.c: when a removed member leaves (removal.h): never before
 * its own MEMBER_REMOVE applied, whatever raft says; then once raft no
 * longer counts on it. And the REMOVED file that keeps it from starting
 * again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "removal.h"

#define ET 500

/* A follower that its leader reached a moment ago, in the committed
 * configuration. */
static struct removal_view member(void)
{
	return (struct removal_view){.follower = true,
				     .silent_ms = 10,
				     .election_ms = ET,
				     .committed_known = true,
				     .in_committed = true};
}

static void test_never_unless_retired(void **state)
{
	(void)state;
	struct removal_view v = member();
	assert_false(removal_should_leave(&v));
	/* A standby that a snapshot's older configuration leaves out, a
	 * candidate, a silent leader, a leader: none was removed. */
	v.in_committed = false;
	assert_false(removal_should_leave(&v));
	v = member();
	v.follower = false;
	assert_false(removal_should_leave(&v));
	v = member();
	v.silent_ms = 100 * ET;
	assert_false(removal_should_leave(&v));
	v = member();
	v.follower = false;
	v.leader = true;
	assert_false(removal_should_leave(&v));
}

static void test_retired_leaves_once_raft_lets_go(void **state)
{
	(void)state;
	struct removal_view v = member();
	v.retired = true;
	assert_false(removal_should_leave(&v)); /* the leader still replicates to it */
	v.silent_ms = ET - 1;
	assert_false(removal_should_leave(&v));
	v.silent_ms = ET;
	assert_true(removal_should_leave(&v)); /* the leader let go of it */
	v = member();
	v.retired = true;
	v.in_committed = false;
	assert_true(removal_should_leave(&v)); /* raft committed it too */
	v = member();
	v.retired = true;
	v.committed_known = false;
	v.in_committed = false;
	assert_false(removal_should_leave(&v)); /* no committed configuration known */
	v = member();
	v.retired = true;
	v.follower = false;
	assert_true(removal_should_leave(&v)); /* a candidate: no leader reaches it */
	v.leader = true;
	assert_true(removal_should_leave(&v)); /* it hands over as it stops */
}

static void test_marker(void **state)
{
	(void)state;
	char dir[] = "/tmp/test_removal.XXXXXX", out[1024];
	assert_non_null(mkdtemp(dir));
	assert_false(removal_marked(dir, out, sizeof out));
	assert_int_equal(removal_mark(dir, 4), 0);
	assert_true(removal_marked(dir, out, sizeof out));
	assert_non_null(strstr(out, "this node was removed from the cluster (member 4); stopping"));
	char line[128];
	removal_message(line, sizeof line, 4);
	assert_string_equal(line, "this node was removed from the cluster (member 4); stopping");
	char path[600];
	snprintf(path, sizeof path, "%s/REMOVED", dir);
	FILE *f = fopen(path, "w"); /* damaged: refused all the same */
	assert_non_null(f);
	fclose(f);
	assert_true(removal_marked(dir, out, sizeof out));
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
	/* A data directory it cannot write to: said, not fatal. */
	assert_int_not_equal(removal_mark("/nonexistent/dir", 4), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_never_unless_retired),
		cmocka_unit_test(test_retired_leaves_once_raft_lets_go),
		cmocka_unit_test(test_marker),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
