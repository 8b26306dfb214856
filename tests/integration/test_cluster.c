/* A real 3-node cluster through the real client library: locks and fencing
 * tokens across leader kills, whole-cluster restarts, session expiry, a
 * paused leader, and a follower catching up. Figures measured on the way
 * are printed as "measure: ..." lines. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"

#define ELECTION_MS 1000
/* The sessions across the leader's kill: 3 s, as test_failover's, whose
 * validity (2/3 of it) is shorter than the longest failovers. */
#define TTL_MS 3000

static struct tcluster cl;

static int setup(void **state)
{
	(void)state;
	cl.snapshot_threshold = 64; /* exercise snapshots and their restore */
	tcluster_start(&cl, 3, ELECTION_MS);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return tcluster_destroy(&cl);
}

static uint64_t next_token_of(int node)
{
	Raftlock__StatusInfo *st = tcluster_status(&cl, node);
	assert_non_null(st);
	uint64_t t = st->next_token;
	raftlock__status_info__free_unpacked(st, NULL);
	return t;
}

static void basics(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "basics", 5000);
	raftlock_client *c = p.c;
	raftlock_session *a = p.a;
	raftlock_lock *la = p.la, *lb = p.lb;
	uint64_t t1 = tl_take(la);
	uint64_t tok = 0;
	assert_int_equal(raftlock_lock_try(lb, &tok), RAFTLOCK_EBUSY);
	/* Only the holder releases. */
	assert_int_equal(raftlock_lock_release(lb, NULL), RAFTLOCK_ENOTHOLDER);
	bool current = false;
	assert_int_equal(raftlock_check_token(c, "basics", t1, &current), 0);
	assert_true(current);
	struct raftlock_lock_info *info = NULL;
	assert_int_equal(raftlock_lock_get(c, "basics", false, &info), 0);
	assert_int_equal(info->n_holders, 1);
	assert_int_equal(info->holders[0].token, t1);
	assert_int_equal(info->holders[0].session, raftlock_session_id(a));
	assert_string_equal(info->holders[0].who.client_name, "integration-test");
	assert_int_equal(info->holders[0].who.pid, (uint32_t)getpid());
	raftlock_lock_info_free(info);
	assert_int_equal(raftlock_lock_release(la, NULL), 0);
	uint64_t t2 = tl_take(lb);
	assert_true(t2 > t1);
	assert_int_equal(raftlock_check_token(c, "basics", t1, &current), 0);
	assert_false(current);
	assert_int_equal(raftlock_lock_release(lb, NULL), 0);
	tl_pair_close(&p);
}

/* A lock held survives kill -9 of the leader; the next grant's token is
 * larger than every earlier one; the holder's keepalives keep its session
 * alive across the failover. */
static void leader_kill(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	raftlock_session *a = tl_session(c, TTL_MS), *b = tl_session(c, TTL_MS);
	raftlock_lock *la = tl_lock(a, "failover"), *lb = tl_lock(b, "failover");
	raftlock_lock *probe = tl_lock(b, "failover-probe");
	uint64_t t1 = tl_take(la);
	int leader = tcluster_leader(&cl, 5000);
	assert_true(leader >= 0);
	uint64_t killed_at = tcluster_now_ms();
	tcluster_signal(&cl, leader, SIGKILL);
	/* Time until a grant succeeds again (on another name). */
	uint64_t tp = 0;
	int rv;
	while ((rv = raftlock_lock_try(probe, &tp)) != 0 && tcluster_now_ms() - killed_at < 20000)
		tl_sleep_ms(5);
	assert_int_equal(rv, 0);
	printf("measure: kill -9 of the leader -> next successful grant in %llu ms\n",
	       (unsigned long long)(tcluster_now_ms() - killed_at));
	assert_true(tp > t1);
	uint64_t tok = 0;
	assert_int_equal(raftlock_lock_try(lb, &tok), RAFTLOCK_EBUSY);
	/* More than a TTL later the holder's session is still valid and holds. */
	tl_sleep_ms(TTL_MS + 2000);
	assert_true(raftlock_session_valid(a));
	assert_int_equal(raftlock_lock_try(lb, &tok), RAFTLOCK_EBUSY);
	assert_int_equal(raftlock_lock_release(la, NULL), 0);
	uint64_t t2 = tl_take(lb);
	assert_true(t2 > tp);
	assert_int_equal(raftlock_lock_release(lb, NULL), 0);
	assert_int_equal(raftlock_lock_release(probe, NULL), 0);
	raftlock_lock_free(la);
	raftlock_lock_free(lb);
	raftlock_lock_free(probe);
	raftlock_session_close(a);
	raftlock_session_close(b);
	raftlock_client_close(c);
	tcluster_restart(&cl, leader);
	assert_true(tcluster_leader(&cl, 10000) >= 0);
}

/* Stopping and restarting all three nodes keeps locks, sessions and
 * next_token: once with SIGTERM (clean), once with SIGKILL. */
static void restart_all(void **state)
{
	(void)state;
	for (int round = 0; round < 2; round++) {
		int sig = round == 0 ? SIGTERM : SIGKILL;
		raftlock_client *c = tl_client(&cl);
		raftlock_session *a = tl_session(c, 30000);
		char name[32];
		snprintf(name, sizeof name, "restart-%d", round);
		raftlock_lock *la = tl_lock(a, name);
		uint64_t t1 = tl_take(la);
		int leader = tcluster_leader(&cl, 5000);
		uint64_t before = next_token_of(leader);
		uint64_t down_at = tcluster_now_ms();
		for (int i = 0; i < cl.n; i++) {
			if (sig == SIGTERM)
				tcluster_stop(&cl, i);
			else
				tcluster_signal(&cl, i, SIGKILL);
		}
		for (int i = 0; i < cl.n; i++)
			tcluster_restart(&cl, i);
		leader = tcluster_leader(&cl, 20000);
		assert_true(leader >= 0);
		printf("measure: whole-cluster restart (%s) -> ready leader in %llu ms\n",
		       sig == SIGTERM ? "SIGTERM" : "SIGKILL",
		       (unsigned long long)(tcluster_now_ms() - down_at));
		assert_true(next_token_of(leader) >= before);
		/* The lock and the session are still there. */
		raftlock_session *b = tl_session(c, 5000);
		raftlock_lock *lb = tl_lock(b, name);
		uint64_t tok = 0;
		assert_int_equal(raftlock_lock_try(lb, &tok), RAFTLOCK_EBUSY);
		assert_true(raftlock_session_valid(a));
		assert_int_equal(raftlock_lock_release(la, NULL), 0);
		uint64_t t2 = tl_take(lb);
		assert_true(t2 > t1);
		assert_true(t2 >= before);
		raftlock_lock_free(la);
		raftlock_lock_free(lb);
		raftlock_session_close(a);
		raftlock_session_close(b);
		raftlock_client_close(c);
	}
}

/* A client that stops heartbeating (its process is stopped) loses its
 * session within TTL + election timeout, and another session gets the lock. */
static void silent_client_expires(void **state)
{
	(void)state;
	const unsigned ttl = 2000;
	uint64_t t1 = 0;
	pid_t child = tl_fork_holder(&cl, "silent", ttl, NULL, &t1);
	kill(child, SIGSTOP);
	uint64_t stopped_at = tcluster_now_ms();
	raftlock_client *c = tl_client(&cl);
	raftlock_session *b = tl_session(c, 5000);
	raftlock_lock *lb = tl_lock(b, "silent");
	uint64_t t2 = 0;
	int rv;
	while ((rv = raftlock_lock_try(lb, &t2)) == RAFTLOCK_EBUSY &&
	       tcluster_now_ms() - stopped_at < ttl + ELECTION_MS + 3000)
		tl_sleep_ms(20);
	uint64_t took = tcluster_now_ms() - stopped_at;
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	assert_int_equal(rv, 0);
	printf("measure: silent client (TTL %u ms) -> lock granted to another after %llu ms\n", ttl,
	       (unsigned long long)took);
	assert_true(took <= ttl + ELECTION_MS + 500);
	assert_true(t2 > t1);
	assert_int_equal(raftlock_lock_release(lb, NULL), 0);
	raftlock_lock_free(lb);
	raftlock_session_close(b);
	raftlock_client_close(c);
}

/* A leader paused with SIGSTOP past the TTL acknowledges no keepalive after
 * SIGCONT: its RENEW cannot commit, and a deposed leader steps down. */
static void paused_leader_acks_nothing(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	const unsigned ttl = 5000;
	raftlock_session *s = tl_session(c, ttl);
	int leader = tcluster_leader(&cl, 5000);
	int fd = raw_connect(cl.client_port[leader]);
	assert_true(fd >= 0);
	/* A session whose secret the test knows (the library keeps its own),
	 * long enough to outlive the pause: the keepalive below must be one
	 * the old leader would renew if it could. */
	Raftlock__OpenSessionRequest op = RAFTLOCK__OPEN_SESSION_REQUEST__INIT;
	op.ttl_ms = 60000;
	op.secret = raw_secret;
	Raftlock__Envelope open = RAFTLOCK__ENVELOPE__INIT;
	open.id = 41;
	open.body_case = RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
	open.open_session = &op;
	assert_int_equal(raw_send_envelope(fd, &open), 0);
	Raftlock__Envelope *opened = raw_recv_envelope(fd, 5000);
	assert_non_null(opened);
	assert_int_equal(opened->response->status, 0);
	uint64_t id = opened->response->result->session;
	raftlock__envelope__free_unpacked(opened, NULL);
	tcluster_signal(&cl, leader, SIGSTOP);
	tl_sleep_ms(ttl + 1000); /* paused past the TTL */
	int other = tcluster_leader(&cl, 10000);
	bool valid = raftlock_session_valid(s); /* kept alive via the new leader */
	tcluster_signal(&cl, leader, SIGCONT);
	assert_true(other >= 0 && other != leader);
	assert_true(valid);
	Raftlock__KeepAliveRequest ka = RAFTLOCK__KEEP_ALIVE_REQUEST__INIT;
	ProtobufCBinaryData secret = raw_secret;
	ka.sessions = &id;
	ka.n_sessions = 1;
	ka.secrets = &secret;
	ka.n_secrets = 1;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.id = 42;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_KEEPALIVE;
	env.keepalive = &ka;
	assert_int_equal(raw_send_envelope(fd, &env), 0);
	Raftlock__Envelope *resp = raw_recv_envelope(fd, 5000);
	assert_non_null(resp);
	assert_int_equal(resp->body_case, RAFTLOCK__ENVELOPE__BODY_RESPONSE);
	printf("measure: keepalive to the resumed old leader answered %s\n",
	       raftlock_strerror(resp->response->status));
	assert_int_not_equal(resp->response->status, 0);
	assert_int_not_equal(resp->response->payload_case, RAFTLOCK__RESPONSE__PAYLOAD_KEEPALIVE);
	raftlock__envelope__free_unpacked(resp, NULL);
	close(fd);
	raftlock_session_close(s);
	raftlock_client_close(c);
}

/* A follower stopped while the cluster moves on (with snapshots taken every
 * 64 entries) catches up after its restart. */
static void follower_catches_up(void **state)
{
	(void)state;
	int leader = tcluster_leader(&cl, 5000);
	int follower = (leader + 1) % cl.n;
	tcluster_stop(&cl, follower);
	raftlock_client *c = tl_client(&cl);
	raftlock_session *s = tl_session(c, 10000);
	raftlock_lock *l = tl_lock(s, "catch-up");
	for (int i = 0; i < 200; i++) {
		tl_take(l);
		assert_int_equal(raftlock_lock_release(l, NULL), 0);
	}
	uint64_t held = tl_take(l);
	leader = tcluster_leader(&cl, 5000);
	assert_true(leader >= 0 && leader != follower);
	Raftlock__StatusInfo *ls = tcluster_status(&cl, leader);
	assert_non_null(ls);
	uint64_t commit = ls->commit_index, want_token = ls->next_token;
	raftlock__status_info__free_unpacked(ls, NULL);
	uint64_t start = tcluster_now_ms();
	tcluster_restart(&cl, follower);
	Raftlock__StatusInfo *fs = NULL;
	while (tcluster_now_ms() - start < 20000) {
		fs = tcluster_status(&cl, follower);
		if (fs != NULL && fs->applied_index >= commit)
			break;
		if (fs)
			raftlock__status_info__free_unpacked(fs, NULL);
		fs = NULL;
		tl_sleep_ms(50);
	}
	assert_non_null(fs);
	printf("measure: restarted follower caught up %llu entries in %llu ms\n",
	       (unsigned long long)commit, (unsigned long long)(tcluster_now_ms() - start));
	assert_int_equal(fs->next_token, want_token);
	raftlock__status_info__free_unpacked(fs, NULL);
	raftlock_lock_release(l, NULL);
	(void)held;
	raftlock_lock_free(l);
	raftlock_session_close(s);
	raftlock_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(basics),
		cmocka_unit_test(leader_kill),
		cmocka_unit_test(restart_all),
		cmocka_unit_test(silent_client_expires),
		cmocka_unit_test(paused_leader_acks_nothing),
		cmocka_unit_test(follower_catches_up),
	};
	if (getenv("RAFTLOCK_TEST_FILTER") != NULL) /* e.g. "leader_*" */
		cmocka_set_test_filter(getenv("RAFTLOCK_TEST_FILTER"));
	return cmocka_run_group_tests(tests, setup, teardown);
}
