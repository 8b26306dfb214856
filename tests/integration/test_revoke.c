/* Revocation and crash-fast release on a real 3-node cluster through
 * libraftlock and the CLI (issue 14, items 5 and 6): an admin's revoke
 * pushes the event, supersedes the token and passes the lock on; a
 * cooperative revoke asks first; a maximum hold time revokes by itself;
 * `raftlock lock` stops its command on revocation; a bound session whose
 * process is killed frees its lock within the grace, a stopped one keeps
 * it, and a leader kill does not end a bound session. */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
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
#define TTL_MS 3000

static struct tcluster cl;

/* What a session's on_lock_event saw, in order. */
struct events {
	pthread_mutex_t mu;
	int kinds[8];
	uint64_t tokens[8];
	size_t n;
};

static void record_event(raftlock_session *s, enum raftlock_lock_event ev, const char *name,
			 uint64_t token, void *arg)
{
	(void)s;
	(void)name;
	struct events *e = arg;
	pthread_mutex_lock(&e->mu);
	if (e->n < 8) {
		e->kinds[e->n] = ev;
		e->tokens[e->n++] = token;
	}
	pthread_mutex_unlock(&e->mu);
}

/* Waits up to ms for the i-th event; returns its kind (0: none came). */
static int await_event(struct events *e, size_t i, unsigned ms, uint64_t *token)
{
	uint64_t end = tcluster_now_ms() + ms;
	for (;;) {
		pthread_mutex_lock(&e->mu);
		int kind = e->n > i ? e->kinds[i] : 0;
		if (kind != 0 && token != NULL)
			*token = e->tokens[i];
		pthread_mutex_unlock(&e->mu);
		if (kind != 0 || tcluster_now_ms() >= end)
			return kind;
		tl_sleep_ms(5);
	}
}

static raftlock_session *session_with_events(raftlock_client *c, struct events *e)
{
	memset(e, 0, sizeof *e);
	pthread_mutex_init(&e->mu, NULL);
	struct raftlock_session_options o = {
		.ttl_ms = TTL_MS, .on_lock_event = record_event, .on_lock_event_arg = e};
	raftlock_session *s = NULL;
	if (raftlock_session_open(c, &o, &s) != 0)
		fail_msg("session open: %s", raftlock_errmsg(c));
	return s;
}

/* A thread blocked in raftlock_lock_acquire. */
struct waiter {
	pthread_t thread;
	raftlock_lock *lock;
	int rv;
	uint64_t token;
	_Atomic uint64_t done_at;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	w->rv = raftlock_lock_acquire(w->lock, RAFTLOCK_EXCLUSIVE, 1, 20000, &w->token);
	atomic_store(&w->done_at, tcluster_now_ms());
	return NULL;
}

static void waiter_start(struct waiter *w, raftlock_lock *l)
{
	memset(w, 0, sizeof *w);
	w->lock = l;
	assert_int_equal(pthread_create(&w->thread, NULL, waiter_main, w), 0);
}

/* Whether node i's metric reaches at least min within 5 s (a follower
 * applies a moment after the leader). */
static bool await_metric(int i, const char *name, long long min)
{
	uint64_t end = tcluster_now_ms() + 5000;
	while (tcluster_metric(&cl, i, name) < min && tcluster_now_ms() < end)
		tl_sleep_ms(20);
	return tcluster_metric(&cl, i, name) >= min;
}

static bool token_current(raftlock_client *c, const char *name, uint64_t token)
{
	bool current = false;
	assert_int_equal(raftlock_check_token(c, name, token, &current), 0);
	return current;
}

static void revoke_pushes_event_and_passes_on(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	struct events ev;
	raftlock_session *a = session_with_events(c, &ev);
	raftlock_session *b = tl_session(c, TTL_MS);
	raftlock_lock *la = tl_lock(a, "rv/now"), *lb = tl_lock(b, "rv/now");
	uint64_t ta = tl_take(la);
	assert_int_equal(raftlock_lock_acquire(la, RAFTLOCK_EXCLUSIVE, 1, 0, NULL), 0); /* nested */
	struct waiter w;
	waiter_start(&w, lb);
	tl_await_waiters(c, "rv/now", 1);

	uint32_t count = 0;
	assert_int_equal(raftlock_revoke(c, "rv/now", 0, 0, &count), 0);
	assert_int_equal(count, 1);
	uint64_t tok = 0;
	assert_int_equal(await_event(&ev, 0, 3000, &tok), RAFTLOCK_LOCK_REVOKED);
	assert_int_equal(tok, ta);
	assert_int_equal(raftlock_lock_token(la), 0);
	pthread_join(w.thread, NULL);
	assert_int_equal(w.rv, 0);
	assert_true(w.token > ta);
	assert_false(token_current(c, "rv/now", ta));
	assert_true(token_current(c, "rv/now", w.token));
	/* The revoked handle holds nothing; the session lives on. */
	assert_int_equal(raftlock_lock_release(la, NULL), RAFTLOCK_ENOTHOLDER);
	assert_true(raftlock_session_valid(a));
	/* Nothing to revoke by an old token, or on a free name. */
	assert_int_equal(raftlock_revoke(c, "rv/now", ta, 0, NULL), RAFTLOCK_ENOTFOUND);
	assert_int_equal(raftlock_revoke(c, "rv/none", 0, 0, NULL), RAFTLOCK_ENOTFOUND);
	raftlock_session_close(a);
	raftlock_session_close(b);
	raftlock_client_close(c);
}

static void cooperative_revoke_asks_first(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	struct events ev;
	raftlock_session *a = session_with_events(c, &ev);
	raftlock_session *b = tl_session(c, TTL_MS);
	raftlock_lock *la = tl_lock(a, "rv/coop"), *lb = tl_lock(b, "rv/coop");
	uint64_t ta = tl_take(la);
	struct waiter w;
	waiter_start(&w, lb);
	tl_await_waiters(c, "rv/coop", 1);

	uint64_t asked = tcluster_now_ms();
	assert_int_equal(raftlock_revoke(c, "rv/coop", 0, 600, NULL), 0);
	assert_int_equal(await_event(&ev, 0, 3000, NULL), RAFTLOCK_LOCK_RELEASE_REQUESTED);
	assert_true(token_current(c, "rv/coop", ta)); /* still the holder's, for now */
	assert_int_equal(await_event(&ev, 1, 5000, NULL), RAFTLOCK_LOCK_REVOKED);
	pthread_join(w.thread, NULL);
	assert_int_equal(w.rv, 0);
	assert_true(w.token > ta);
	uint64_t took = atomic_load(&w.done_at) - asked;
	assert_true(took >= 550); /* not before the grace (whole-ms cluster clock) */
	assert_true(took < 600 + 1500);

	/* A holder that lets go when asked is not revoked. */
	struct events ev2;
	raftlock_session *d = session_with_events(c, &ev2);
	raftlock_lock *ld = tl_lock(d, "rv/coop");
	waiter_start(&w, ld);
	tl_await_waiters(c, "rv/coop", 1);
	assert_int_equal(raftlock_revoke(c, "rv/coop", 0, 5000, NULL), 0);
	/* the event went to b, which releases */
	tl_sleep_ms(200);
	assert_int_equal(raftlock_lock_release(lb, NULL), 0);
	pthread_join(w.thread, NULL);
	assert_int_equal(w.rv, 0);
	assert_int_equal(await_event(&ev2, 0, 300, NULL), 0);
	raftlock_session_close(a);
	raftlock_session_close(b);
	raftlock_session_close(d);
	raftlock_client_close(c);
}

static void max_hold_time_revokes(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	struct events ev;
	raftlock_session *a = session_with_events(c, &ev);
	raftlock_session *b = tl_session(c, TTL_MS);
	struct raftlock_lock_options o = {.max_hold_ms = 800};
	raftlock_lock *la = NULL, *lb = tl_lock(b, "rv/max");
	assert_int_equal(raftlock_lock_new(a, "rv/max", &o, &la), 0);
	uint64_t t0 = tcluster_now_ms();
	uint64_t ta = tl_take(la);
	struct waiter w;
	waiter_start(&w, lb);
	pthread_join(w.thread, NULL);
	assert_int_equal(w.rv, 0);
	uint64_t took = atomic_load(&w.done_at) - t0;
	assert_true(took >= 750);
	assert_true(took < 800 + 1500);
	assert_int_equal(await_event(&ev, 0, 1000, NULL), RAFTLOCK_LOCK_REVOKED);
	assert_int_equal(raftlock_lock_token(la), 0);
	assert_true(w.token > ta);
	struct raftlock_lock_info *info = NULL;
	assert_int_equal(raftlock_lock_get(c, "rv/max", false, &info), 0);
	assert_int_equal(info->max_hold_ms, 800);
	raftlock_lock_info_free(info);
	/* Every node applies the revocations so far (three tests' worth). */
	for (int i = 0; i < cl.n; i++)
		assert_true(await_metric(i, "raftlock_lock_revocations_total", 3));
	raftlock_session_close(a);
	raftlock_session_close(b);
	raftlock_client_close(c);
}

/* Runs the raftlock CLI with args; returns its exit status. */
static int cli(char *out, size_t len, const char *args)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "%s/bin/raftlock --endpoints %s,%s,%s %s 2>&1",
		 RAFTLOCK_BINARY_DIR, cl.addrs[0], cl.addrs[1], cl.addrs[2], args);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* `raftlock lock` kills its command when the grant is revoked, and
 * `raftlock revoke` does it. */
static void cli_command_stopped_on_revoke(void **state)
{
	(void)state;
	char out[4096];
	uint64_t t0 = tcluster_now_ms();
	int code =
		cli(out, sizeof out, "lock --no-child-exit-code --max-hold 700 rv/cli -- sleep 30");
	uint64_t took = tcluster_now_ms() - t0;
	assert_int_equal(code, 1);
	assert_non_null(strstr(out, "revoked"));
	assert_true(took < 10000);

	raftlock_client *c = tl_client(&cl);
	uint64_t token;
	pid_t holder = tl_fork_holder(&cl, "rv/cli2", TTL_MS, NULL, &token);
	char args[128];
	assert_int_equal(cli(out, sizeof out, "revoke rv/cli2 --json"), 0);
	char want[64];
	snprintf(want, sizeof want, "\"tokens\": [%" PRIu64 "]", token);
	assert_non_null(strstr(out, want));
	assert_false(token_current(c, "rv/cli2", token));
	snprintf(args, sizeof args, "revoke rv/cli2 --token %" PRIu64, token);
	assert_int_equal(cli(out, sizeof out, args), 3); /* nothing (left) to revoke */
	kill(holder, SIGKILL);
	waitpid(holder, NULL, 0);
	raftlock_client_close(c);
}

/* A child holding name through a bound session. */
static pid_t fork_bound_holder(const char *name, uint64_t *token)
{
	struct raftlock_session_options o = {.ttl_ms = TTL_MS, .bind_to_connection = true};
	return tl_fork_holder_with(&cl, name, &o, NULL, token);
}

static void bound_session_released_on_kill(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	raftlock_session *b = tl_session(c, TTL_MS);
	raftlock_lock *lb = tl_lock(b, "rv/bound");
	uint64_t token;
	pid_t holder = fork_bound_holder("rv/bound", &token);
	struct waiter w;
	waiter_start(&w, lb);
	tl_await_waiters(c, "rv/bound", 1);

	/* Stopped, its connection open: the TTL rule, not the grace. */
	kill(holder, SIGSTOP);
	tl_sleep_ms(RAFTLOCK_BIND_GRACE_DEFAULT_MS + 600);
	assert_int_equal(atomic_load(&w.done_at), 0);
	assert_true(token_current(c, "rv/bound", token));

	uint64_t killed = tcluster_now_ms();
	kill(holder, SIGKILL);
	waitpid(holder, NULL, 0);
	pthread_join(w.thread, NULL);
	assert_int_equal(w.rv, 0);
	uint64_t took = atomic_load(&w.done_at) - killed;
	print_message("granted %" PRIu64 " ms after kill -9 (grace %d ms, TTL %d ms)\n", took,
		      RAFTLOCK_BIND_GRACE_DEFAULT_MS, TTL_MS);
	assert_true(took >= RAFTLOCK_BIND_GRACE_DEFAULT_MS - 5);
	assert_true(took < RAFTLOCK_BIND_GRACE_DEFAULT_MS + 300); /* a TTL is 3000 */
	assert_true(w.token > token);
	assert_true(await_metric(0, "raftlock_bound_sessions_dropped_total", 1));
	raftlock_session_close(b);
	raftlock_client_close(c);
}

/* A leader kill closes the bound session's connection; the library
 * reconnects to the new leader, which keeps the session: it holds its
 * lock throughout and becomes valid again. */
static void bound_session_survives_leader_kill(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	struct raftlock_session_options o = {.ttl_ms = TTL_MS, .bind_to_connection = true};
	raftlock_session *s = NULL;
	assert_int_equal(raftlock_session_open(c, &o, &s), 0);
	uint64_t token = tl_take(tl_lock(s, "rv/failover"));
	int leader = tcluster_leader(&cl, 5000);
	assert_true(leader >= 0);
	tcluster_signal(&cl, leader, SIGKILL);
	tl_sleep_ms(RAFTLOCK_BIND_GRACE_DEFAULT_MS + 100);
	uint64_t end = tcluster_now_ms() + 10000;
	while (!raftlock_session_valid(s) && tcluster_now_ms() < end)
		tl_sleep_ms(20);
	assert_true(raftlock_session_valid(s));
	tl_sleep_ms(RAFTLOCK_BIND_GRACE_DEFAULT_MS * 2);
	assert_true(raftlock_session_valid(s));
	assert_true(token_current(c, "rv/failover", token));
	raftlock_session_close(s);
	/* The killed node back, answering, before the next test (or the
	 * cluster's stop) asks anything of it. */
	tcluster_restart(&cl, leader);
	struct raftlock_status *st = NULL;
	end = tcluster_now_ms() + 15000;
	while (raftlock_status_get(c, cl.client_addr[leader], &st) != 0 && tcluster_now_ms() < end)
		tl_sleep_ms(50);
	assert_non_null(st);
	raftlock_status_free(st);
	raftlock_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(revoke_pushes_event_and_passes_on),
		cmocka_unit_test(cooperative_revoke_asks_first),
		cmocka_unit_test(max_hold_time_revokes),
		cmocka_unit_test(cli_command_stopped_on_revoke),
		cmocka_unit_test(bound_session_released_on_kill),
		cmocka_unit_test(bound_session_survives_leader_kill),
	};
	if (getenv("RAFTLOCK_TEST_FILTER") != NULL)
		cmocka_set_test_filter(getenv("RAFTLOCK_TEST_FILTER"));
	return tcluster_run_group(tests, &cl, 3, ELECTION_MS);
}
