/* Snapshots whose image is dumped off the loop (feature level 6,
 * server/image_build.h): the entries applied while the image was dumped
 * travel after it as a tail (server/snapshot_tail.h). Every node dumps
 * slowly here (the test-only RAFTLOCK_TEST_FAULT=slow-image: 300 ms), so
 * its snapshots carry entries; a member sent one by the leader, and a node
 * that rebuilds its store from its own at start, each end with the state
 * of the others: the same applied index, locks, sessions and next token. */
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

static void start(struct tcluster *cl)
{
	memset(cl, 0, sizeof *cl);
	cl->snapshot_threshold = 64;
	cl->snapshot_trailing = 16;
	cl->extra_args[0] = "--log-level"; /* snapshot lines are at info */
	cl->extra_args[1] = "info";
	setenv("RAFTLOCK_TEST_FAULT", "slow-image", 1);
	tcluster_start(cl, 3, 500);
	unsetenv("RAFTLOCK_TEST_FAULT");
}

static void take_locks(raftlock_session *s, const char *prefix, int n)
{
	char name[32];
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof name, "%s-%03d", prefix, i);
		raftlock_lock *l = tl_lock(s, name);
		tl_take(l);
		raftlock_lock_free(l);
	}
}

/* The entries of node i's last "restored snapshot" line; -1 if none. */
static int restored_entries(struct tcluster *cl, int i)
{
	char line[2048];
	FILE *f = tcluster_log_open(cl, i);
	assert_non_null(f);
	int entries = -1;
	while (fgets(line, sizeof line, f) != NULL) {
		const char *at = strstr(line, "restored snapshot at");
		const char *and = at ? strstr(at, " and ") : NULL;
		if (and != NULL)
			entries = atoi(and+5);
	}
	fclose(f);
	return entries;
}

/* Waits until node i has applied what the leader had and holds the same
 * state as far as STATUS shows it. */
static bool same_state_as_leader(struct tcluster *cl, int i)
{
	Raftlock__StatusInfo *ls = tcluster_status(cl, tcluster_leader(cl, 10000));
	assert_non_null(ls);
	uint64_t index = ls->applied_index, locks = ls->locks, sessions = ls->sessions,
		 token = ls->next_token;
	raftlock__status_info__free_unpacked(ls, NULL);
	uint64_t end = tcluster_now_ms() + 15000;
	while (tcluster_now_ms() < end) {
		Raftlock__StatusInfo *vs = tcluster_status(cl, i);
		bool same = vs != NULL && vs->applied_index >= index && vs->locks == locks &&
			    vs->sessions == sessions && vs->next_token == token;
		if (!same && tcluster_now_ms() + 50 >= end)
			printf("node %d: applied %llu, %llu locks, %llu sessions, next token %llu; "
			       "leader: %llu, %llu, %llu, %llu\n",
			       i + 1, vs ? (unsigned long long)vs->applied_index : 0,
			       vs ? (unsigned long long)vs->locks : 0,
			       vs ? (unsigned long long)vs->sessions : 0,
			       vs ? (unsigned long long)vs->next_token : 0,
			       (unsigned long long)index, (unsigned long long)locks,
			       (unsigned long long)sessions, (unsigned long long)token);
		if (vs != NULL)
			raftlock__status_info__free_unpacked(vs, NULL);
		if (same)
			return true;
		tl_sleep_ms(50);
	}
	return false;
}

/* Waits up to 10 s until every node took a snapshot off the loop (a
 * node takes it at the first entry it applies once its image is whole);
 * returns how many nodes did. */
static int snapshots_off_the_loop(struct tcluster *cl)
{
	uint64_t end = tcluster_now_ms() + 10000;
	int with = 0;
	while (tcluster_now_ms() < end) {
		with = 0;
		for (int i = 0; i < cl->n; i++)
			with += tcluster_log_count(cl, i, "off the loop") > 0;
		if (with == cl->n)
			break;
		tl_sleep_ms(50);
	}
	return with;
}

/* A cluster whose every node took a snapshot off the loop after LOCKS
 * locks, and the follower `after` places past its leader. */
struct filled {
	struct tcluster cl;
	raftlock_client *c;
	raftlock_session *s;
	int victim;
};

static void fill(struct filled *f, int after)
{
	start(&f->cl);
	f->c = tl_client(&f->cl);
	f->s = tl_session(f->c, 60000);
	take_locks(f->s, "held", LOCKS);
	int off = snapshots_off_the_loop(&f->cl);
	printf("measure: %d of %d nodes took a snapshot off the loop\n", off, f->cl.n);
	assert_int_equal(off, f->cl.n);
	int leader = tcluster_leader(&f->cl, 10000);
	assert_true(leader >= 0);
	f->victim = (leader + after) % f->cl.n;
}

/* The victim, changed, has the others' state again, and got there by a
 * snapshot with entries after its image. */
static void check_and_stop(struct filled *f, const char *how)
{
	take_locks(f->s, "after", 5);
	assert_true(same_state_as_leader(&f->cl, f->victim));
	int entries = restored_entries(&f->cl, f->victim);
	printf("measure: node %d %s a snapshot with %d entries after its image\n", f->victim + 1,
	       how, entries);
	assert_true(entries > 0);
	raftlock_session_close(f->s);
	raftlock_client_close(f->c);
	assert_int_equal(tcluster_destroy(&f->cl), 0);
}

static void a_member_sent_one_catches_up(void **state)
{
	(void)state;
	struct filled f;
	fill(&f, 1);
	/* Empty again: the leader's log starts past it, so it gets a snapshot. */
	tcluster_replace(&f.cl, f.victim);
	check_and_stop(&f, "restored");
}

static void a_node_rebuilt_from_its_own_matches(void **state)
{
	(void)state;
	struct filled f;
	fill(&f, 2);
	assert_true(same_state_as_leader(&f.cl, f.victim));
	/* Its store gone, its raft log kept: rebuilt from its last snapshot
	 * (image and tail) and the entries after it. */
	assert_int_equal(tcluster_stop(&f.cl, f.victim), 0);
	assert_int_equal(tcluster_shell("rm -f '%s/n%d/state/data.mdb' '%s/n%d/state/lock.mdb'",
					f.cl.dir, f.victim + 1, f.cl.dir, f.victim + 1),
			 0);
	tcluster_restart(&f.cl, f.victim);
	check_and_stop(&f, "rebuilt from");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_member_sent_one_catches_up),
		cmocka_unit_test(a_node_rebuilt_from_its_own_matches),
	};
	if (getenv("RAFTLOCK_TEST_FILTER") != NULL)
		cmocka_set_test_filter(getenv("RAFTLOCK_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
