/* A leadership hand-over whose target cannot take over does not keep the
 * cluster refusing writes (issue 9, item 9).
 *
 * Three nodes: a follower loses its data (replaced), so the leader hands
 * leadership to the other follower, which the test has paused (SIGSTOP):
 * every transfer times out. The leader keeps its quorum through the
 * replaced member's answers, but cannot commit (that member gets no entries
 * from this leader, see followers.c), so a write it accepts stays pending
 * and a write it refuses is answered at once with ENOTLEADER. A probe sends
 * a write every PROBE_MS and classifies each. Required: writes refused for
 * less than a quarter of the window, and no refusal lasting longer than one
 * election timeout. Measured before the back-off (same probe): 33-45% of
 * the window refused, refusals up to 1.3 s; after: 6-13%, at most 0.63 s.
 *
 * And a leader that stops hands over to a live voter, or to nobody when
 * none is alive (stop_hands_over_to_the_living). */
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

#define ELECTION_MS 1000
#define WINDOW_MS 14000
#define PROBE_MS 20
#define ANSWER_MS 60 /* a refusal comes at once; an accepted write waits */

/* Sends one write (an open-session) and waits for its answer: 1 when it was
 * refused as not leader, 0 when it is still pending after ANSWER_MS. */
static int probe(int fd, uint64_t id)
{
	Raftlock__OpenSessionRequest req = RAFTLOCK__OPEN_SESSION_REQUEST__INIT;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	req.nonce = id;
	req.ttl_ms = 60000;
	req.secret = raw_secret;
	env.id = id;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
	env.open_session = &req;
	assert_int_equal(raw_send_envelope(fd, &env), 0);
	uint64_t end = tcluster_now_ms() + ANSWER_MS;
	while (tcluster_now_ms() < end) {
		Raftlock__Envelope *r = raw_recv_envelope(fd, (int)(end - tcluster_now_ms()) + 1);
		if (r == NULL)
			return 0;
		int refused = r->id == id && r->body_case == RAFTLOCK__ENVELOPE__BODY_RESPONSE &&
			      r->response->status == RAFTLOCK_ENOTLEADER;
		bool mine = r->id == id;
		raftlock__envelope__free_unpacked(r, NULL);
		if (mine)
			return refused;
	}
	return 0;
}

struct window {
	uint64_t ms, refused_ms, longest;
	int runs;
	bool kept; /* the same leader in the same term throughout */
};

static uint64_t term_of(struct tcluster *cl, int i, bool *leads)
{
	Raftlock__StatusInfo *st = tcluster_status(cl, i);
	uint64_t term = st ? st->term : 0;
	*leads = st != NULL && st->ready;
	if (st != NULL)
		raftlock__status_info__free_unpacked(st, NULL);
	return term;
}

/* One try of the scenario on a fresh cluster. kept is false when the leader
 * lost its quorum while the replaced member was starting (a loaded machine:
 * it then steps down, and the next leader has no stale state to hand over
 * for), which is not what this test is about. */
static struct window run_window(void)
{
	struct window w = {0};
	struct tcluster cl;
	memset(&cl, 0, sizeof cl);
	tcluster_start(&cl, 3, ELECTION_MS);
	raftlock_client *c = tl_client(&cl);
	raftlock_session *s = tl_session(c, 30000);
	raftlock_lock *l = tl_lock(s, "before");
	tl_take(l);
	raftlock_lock_free(l);
	raftlock_session_close(s);
	raftlock_client_close(c);
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	int lost = (leader + 1) % cl.n, target = (leader + 2) % cl.n;
	/* The target is paused as soon as the replaced member answers: the
	 * leader then keeps its quorum through that member. Should the leader
	 * ask it first (it asks every 500 ms), the hand-over succeeds and the
	 * run is tried again (kept). */
	tcluster_replace(&cl, lost);
	for (uint64_t end = tcluster_now_ms() + 10000; tcluster_now_ms() < end; usleep(2000)) {
		Raftlock__StatusInfo *st = tcluster_status(&cl, lost);
		if (st != NULL) {
			raftlock__status_info__free_unpacked(st, NULL);
			break;
		}
	}
	tcluster_signal(&cl, target, SIGSTOP);
	bool leads;
	uint64_t term = term_of(&cl, leader, &leads);
	int fd = raw_connect(cl.client_port[leader]);
	assert_true(fd >= 0);
	uint64_t t0 = tcluster_now_ms(), run_start = 0, last = t0, id = 1000;
	bool in_run = false;
	while ((last = tcluster_now_ms()) < t0 + WINDOW_MS) {
		int r = probe(fd, ++id);
		uint64_t now = tcluster_now_ms();
		if (r && !in_run) {
			in_run = true;
			run_start = now;
			w.runs++;
		} else if (!r && in_run) {
			in_run = false;
			w.refused_ms += now - run_start;
			w.longest = now - run_start > w.longest ? now - run_start : w.longest;
		}
		usleep(PROBE_MS * 1000);
	}
	if (in_run) {
		w.refused_ms += last - run_start;
		w.longest = last - run_start > w.longest ? last - run_start : w.longest;
	}
	w.ms = last - t0;
	close(fd);
	bool still;
	w.kept = leads && term_of(&cl, leader, &still) == term && still;
	tcluster_signal(&cl, target, SIGCONT);
	assert_int_equal(tcluster_destroy(&cl), 0);
	return w;
}

static void stuck_transfer_backs_off(void **state)
{
	(void)state;
	struct window w;
	for (int attempt = 1;; attempt++) {
		w = run_window();
		printf("measure: writes refused %llu ms of %llu (%.1f%%) in %d refusals, longest "
		       "%llu ms (election timeout %d ms)%s\n",
		       (unsigned long long)w.refused_ms, (unsigned long long)w.ms,
		       (double)w.refused_ms * 100 / (double)w.ms, w.runs,
		       (unsigned long long)w.longest, ELECTION_MS,
		       w.kept ? (w.runs ? "" : "; no hand-over tried: again")
			      : "; the leader changed: scenario not reached, again");
		if ((w.kept && w.runs > 0) || attempt == 3)
			break;
	}
	assert_true(w.kept);
	assert_true(w.runs >= 1); /* the hand-over was tried */
	assert_true(w.longest <= ELECTION_MS);
	assert_true((double)w.refused_ms < (double)w.ms / 4);
}

/* The live node of highest id other than `not` (-1: none). */
static int live_other(struct tcluster *c, int not )
{
	int best = -1;
	for (int i = 0; i < c->n; i++)
		if (i != not &&c->pid[i] > 0 &&
		    (best < 0 || tcluster_id(c, i) > tcluster_id(c, best)))
			best = i;
	return best;
}

/* A leader that stops hands leadership to a voter that is alive, not to
 * one just killed (the leader picks it by its members' answers; libraft's
 * own pick also avoided it here). With every other voter down it stops
 * without a transfer, which could only time out: without this, its stop
 * waited an election timeout for it (this half fails then). */
static void stop_hands_over_to_the_living(void **state)
{
	(void)state;
	static struct tcluster c;
	setenv("RAFTLOCK_TEST_DEBUG", "1", 1); /* the hand-over's lines are info */
	tcluster_start(&c, 3, 2 * ELECTION_MS);
	int leader = tcluster_leader(&c, 15000);
	assert_true(leader >= 0);
	int dead = live_other(&c, leader);
	tcluster_signal(&c, dead, SIGKILL);
	int alive = live_other(&c, leader);
	tl_sleep_ms(3 * 500); /* the leader asks its members every 500 ms */
	assert_int_equal(tcluster_stop(&c, leader), 0);
	char done[64];
	snprintf(done, sizeof done, "leadership transfer done (leader now %llu)",
		 (unsigned long long)tcluster_id(&c, alive));
	if (!tcluster_log_has(&c, leader, done))
		fail_msg("node %llu stopped without handing over to %llu, the live voter",
			 (unsigned long long)tcluster_id(&c, leader),
			 (unsigned long long)tcluster_id(&c, alive));

	/* Both back; then the new leader's only follower goes. */
	tcluster_restart(&c, leader);
	tcluster_restart(&c, dead);
	int now = tcluster_leader(&c, 15000);
	assert_true(now >= 0);
	tl_sleep_ms(3 * 500);
	for (int i = 0; i < c.n; i++)
		if (i != now)
			tcluster_signal(&c, i, SIGKILL);
	tl_sleep_ms(300); /* their connections end at once; the leader leads on
			   * for an election timeout without them */
	assert_int_equal(tcluster_stop(&c, now), 0);
	assert_true(tcluster_log_has(&c, now, "no other voter is alive"));
	assert_int_equal(tcluster_destroy(&c), 0);
	unsetenv("RAFTLOCK_TEST_DEBUG");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(stuck_transfer_backs_off),
		cmocka_unit_test(stop_hands_over_to_the_living),
	};
	if (getenv("RAFTLOCK_TEST_FILTER") != NULL)
		cmocka_set_test_filter(getenv("RAFTLOCK_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
