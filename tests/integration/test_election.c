/* Leader election (raftlock_campaign, raftlock_proclaim, raftlock_resign,
 * raftlock_observe) on a real 3-node cluster: one leader at a time with
 * increasing tokens, its value published with the grant; observers see
 * every change of (leader, value, token) in order, also across a kill of
 * the raft leader; a leader paused past its lease is deposed and its
 * proclaim refused; `raftlock elect` and `raftlock observe`. */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"

#define ELECTION_MS 500
#define MAX_SEEN 256

static struct tcluster cl;

struct seen {
	pthread_mutex_t mu;
	int n;
	bool has[MAX_SEEN], lost[MAX_SEEN];
	uint64_t session[MAX_SEEN], token[MAX_SEEN];
	struct raftlock_position pos[MAX_SEEN];
	char value[MAX_SEEN][32];
};

static void on_leader(const struct raftlock_leader_event *ev, void *arg)
{
	struct seen *s = arg;
	if (getenv("DEBUG_SEEN"))
		fprintf(stderr, "SEEN %d %" PRIu64 ".%u has=%d lost=%d tok=%" PRIu64 " v=%s\n",
			s->n, ev->position.index, ev->position.offset, ev->has_leader,
			ev->history_lost, ev->token, ev->value);
	pthread_mutex_lock(&s->mu);
	if (s->n < MAX_SEEN) {
		int i = s->n++;
		s->has[i] = ev->has_leader;
		s->lost[i] = ev->history_lost;
		s->session[i] = ev->session;
		s->token[i] = ev->token;
		s->pos[i] = ev->position;
		snprintf(s->value[i], sizeof s->value[i], "%s", ev->value);
	}
	pthread_mutex_unlock(&s->mu);
}

static struct seen *seen_new(void)
{
	struct seen *s = calloc(1, sizeof *s);
	assert_non_null(s);
	pthread_mutex_init(&s->mu, NULL);
	return s;
}

/* Waits until the last thing seen is (has, value); returns its index. */
static int await_seen(struct seen *s, bool has, const char *value, int timeout_ms)
{
	uint64_t end = tcluster_now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		pthread_mutex_lock(&s->mu);
		int n = s->n;
		bool ok = n > 0 && s->has[n - 1] == has &&
			  (!has || strcmp(s->value[n - 1], value) == 0);
		pthread_mutex_unlock(&s->mu);
		if (ok)
			return n - 1;
		if (tcluster_now_ms() >= end) {
			for (int i = 0; i < s->n; i++)
				fprintf(stderr, "seen %d: has=%d token=%" PRIu64 " value=%s\n", i,
					s->has[i], s->token[i], s->value[i]);
			fail_msg("not seen: has=%d value=%s", has, value);
		}
		tl_sleep_ms(20);
	}
}

/* Tokens of successive leaders increase; positions increase. */
static void assert_ordered(struct seen *s)
{
	uint64_t last_token = 0;
	for (int i = 0; i < s->n; i++) {
		if (i > 0) {
			const struct raftlock_position *a = &s->pos[i - 1], *b = &s->pos[i];
			assert_true(a->index < b->index ||
				    (a->index == b->index && a->offset < b->offset));
		}
		if (!s->has[i])
			continue;
		assert_true(s->token[i] >= last_token);
		last_token = s->token[i];
	}
}

static int setup(void **state)
{
	(void)state;
	tcluster_start(&cl, 3, ELECTION_MS);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return tcluster_destroy(&cl);
}

struct campaign_arg {
	raftlock_session *s;
	const char *name, *value;
	raftlock_leader *leader;
	int rv;
};

static void *campaign_thread(void *arg)
{
	struct campaign_arg *c = arg;
	c->rv = raftlock_campaign(c->s, c->name, c->value, 20000, &c->leader);
	return NULL;
}

static void test_campaign_proclaim_resign_observe(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	struct seen *o = seen_new();
	raftlock_observer *obs;
	assert_int_equal(raftlock_observe(c, "el/x", on_leader, o, &obs), 0);
	await_seen(o, false, "", 10000); /* nobody leads yet */

	raftlock_session *a = tl_session(c, 5000), *b = tl_session(c, 5000);
	raftlock_leader *la;
	assert_int_equal(raftlock_campaign(a, "el/x", "a1", 5000, &la), 0);
	uint64_t ta = raftlock_leader_token(la);
	int i = await_seen(o, true, "a1", 10000);
	assert_int_equal(o->token[i], ta);
	assert_int_equal(o->session[i], raftlock_session_id(a));

	raftlock_leader *busy;
	assert_int_equal(raftlock_campaign(b, "el/x", "b1", 0, &busy), RAFTLOCK_EBUSY);
	struct campaign_arg cb = {.s = b, .name = "el/x", .value = "b1"};
	pthread_t th;
	pthread_create(&th, NULL, campaign_thread, &cb);
	tl_await_waiters(c, "el/x", 1);

	assert_int_equal(raftlock_proclaim(la, "a2"), 0);
	i = await_seen(o, true, "a2", 10000);
	assert_int_equal(o->token[i], ta);

	assert_int_equal(raftlock_resign(la), 0);
	pthread_join(th, NULL);
	assert_int_equal(cb.rv, 0);
	uint64_t tb = raftlock_leader_token(cb.leader);
	assert_true(tb > ta);
	i = await_seen(o, true, "b1", 10000);
	assert_int_equal(o->token[i], tb);
	assert_int_equal(o->session[i], raftlock_session_id(b));

	assert_int_equal(raftlock_resign(cb.leader), 0);
	await_seen(o, false, "", 10000);
	assert_ordered(o);
	/* Nothing but changes, each once: none, a1, a2, none (the release)
	 * and b1 (the grant it made, in the same entry), none. */
	assert_int_equal(o->n, 6);
	assert_false(o->has[3]);
	assert_int_equal(o->pos[3].index, o->pos[4].index);

	assert_int_equal(raftlock_campaign(NULL, "el/x", "", 0, &busy), RAFTLOCK_EINVAL);
	assert_int_equal(raftlock_observe(c, "", on_leader, o, &obs) == 0, false);
	raftlock_observe_cancel(obs);
	free(o);
	raftlock_session_close(a);
	raftlock_session_close(b);
	raftlock_client_close(c);
}

/* A child process that leads `name` with value "paused", then, told to
 * through the pipe, proclaims "late" and exits with -(its result). */
static pid_t fork_leader(const char *name, int *tell, uint64_t *token)
{
	int up[2], down[2];
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		raftlock_client *c = tl_client(&cl);
		raftlock_session *s = tl_session(c, 2000);
		raftlock_leader *l;
		if (raftlock_campaign(s, name, "paused", 5000, &l) != 0)
			_exit(100);
		uint64_t t = raftlock_leader_token(l);
		if (write(up[1], &t, sizeof t) != sizeof t)
			_exit(101);
		char go;
		if (read(down[0], &go, 1) != 1)
			_exit(102);
		int rv = raftlock_proclaim(l, "late");
		_exit(-rv);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], token, sizeof *token), sizeof *token);
	close(up[0]);
	*tell = down[1];
	return pid;
}

/* A leader stopped past its lease is deposed: the next campaigner leads
 * with a higher token, and the old leader's proclaim is refused (by its
 * library, which knows its session is lost, or by the token fence). */
static void test_paused_leader_deposed(void **state)
{
	(void)state;
	/* Forked before this process has a client's threads: a child forked
	 * while another thread holds an allocator lock (ASan's, glibc's)
	 * can hang in its first malloc, and the test with it. The observer
	 * is told the current leader first, so it still sees "paused". */
	int tell;
	uint64_t t_old;
	pid_t pid = fork_leader("el/p", &tell, &t_old);
	raftlock_client *c = tl_client(&cl);
	struct seen *o = seen_new();
	raftlock_observer *obs;
	assert_int_equal(raftlock_observe(c, "el/p", on_leader, o, &obs), 0);
	await_seen(o, true, "paused", 10000);
	kill(pid, SIGSTOP);

	raftlock_session *b = tl_session(c, 5000);
	raftlock_leader *lb;
	assert_int_equal(raftlock_campaign(b, "el/p", "new", 20000, &lb), 0);
	uint64_t t_new = raftlock_leader_token(lb);
	assert_true(t_new > t_old);
	await_seen(o, true, "new", 10000);

	kill(pid, SIGCONT);
	assert_int_equal(write(tell, "g", 1), 1);
	close(tell);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	int rv = -WEXITSTATUS(st);
	if (rv != RAFTLOCK_ESESSION && rv != RAFTLOCK_ENOTHOLDER)
		fail_msg("the deposed leader's proclaim: %d (%s)", rv, raftlock_strerror(rv));
	tl_sleep_ms(300);
	pthread_mutex_lock(&o->mu);
	assert_string_equal(o->value[o->n - 1], "new");
	for (int i = 0; i < o->n; i++)
		assert_string_not_equal(o->value[i], "late");
	pthread_mutex_unlock(&o->mu);
	assert_ordered(o);
	raftlock_resign(lb);
	raftlock_observe_cancel(obs);
	free(o);
	raftlock_session_close(b);
	raftlock_client_close(c);
}

/* The raft leader is killed while leaderships change: the observer sees
 * every (leader, value, token) in order, none missed. */
static void test_observe_across_leader_kill(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl), *w = tl_client(&cl);
	struct seen *o = seen_new();
	raftlock_observer *obs;
	assert_int_equal(raftlock_observe(c, "el/k", on_leader, o, &obs), 0);
	await_seen(o, false, "", 10000);
	raftlock_session *s = tl_session(w, 3000);
	char v[16];
	int killed = -1;
	for (int round = 0; round < 6; round++) {
		if (round == 3) {
			killed = tcluster_leader(&cl, 10000);
			assert_true(killed >= 0);
			tcluster_signal(&cl, killed, SIGKILL);
			assert_true(tcluster_leader(&cl, 20000) >= 0);
		}
		raftlock_leader *l;
		snprintf(v, sizeof v, "r%d", round);
		assert_int_equal(raftlock_campaign(s, "el/k", v, 20000, &l), 0);
		snprintf(v, sizeof v, "r%dp", round);
		assert_int_equal(raftlock_proclaim(l, v), 0);
		assert_int_equal(raftlock_resign(l), 0);
	}
	await_seen(o, false, "", 10000);
	tl_sleep_ms(300);
	pthread_mutex_lock(&o->mu);
	/* none, then for each round: r, rp, none */
	assert_int_equal(o->n, 1 + 6 * 3);
	for (int round = 0; round < 6; round++) {
		int i = 1 + 3 * round;
		snprintf(v, sizeof v, "r%d", round);
		assert_true(o->has[i]);
		assert_string_equal(o->value[i], v);
		snprintf(v, sizeof v, "r%dp", round);
		assert_string_equal(o->value[i + 1], v);
		assert_int_equal(o->token[i + 1], o->token[i]);
		assert_false(o->has[i + 2]);
		assert_false(o->lost[i]);
	}
	pthread_mutex_unlock(&o->mu);
	assert_ordered(o);
	raftlock_observe_cancel(obs);
	free(o);
	raftlock_session_close(s);
	raftlock_client_close(w);
	raftlock_client_close(c);
	tcluster_restart(&cl, killed);
	assert_true(tcluster_leader(&cl, 20000) >= 0);
}

#define CLI RAFTLOCK_BINARY_DIR "/bin/raftlock"

/* raftlock elect runs its command as leader with the value published;
 * raftlock observe prints the changes. */
static void test_cli(void **state)
{
	(void)state;
	char dir[] = "/tmp/raftlock-elect-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char eps[128];
	snprintf(eps, sizeof eps, "%s,%s,%s", cl.addrs[0], cl.addrs[1], cl.addrs[2]);
	assert_int_equal(tcluster_shell("timeout 20 %s --endpoints %s observe el/cli --count 3 "
					"--json > %s/observe.out 2>&1 &",
					CLI, eps, dir),
			 0);
	tl_sleep_ms(1000);
	assert_int_equal(tcluster_shell("timeout 20 %s --endpoints %s elect el/cli --value "
					"host-1 -- sh -c 'echo token=$RAFTLOCK_TOKEN; sleep 0.5' "
					"> %s/elect.out 2>&1",
					CLI, eps, dir),
			 0);
	int ok = 1;
	for (int i = 0; i < 100 && ok != 0; i++) {
		tl_sleep_ms(100);
		ok = tcluster_shell("test $(wc -l < %s/observe.out) -ge 3", dir);
	}
	tcluster_shell("cat %s/observe.out %s/elect.out >&2", dir, dir);
	assert_int_equal(ok, 0);
	assert_int_equal(
		tcluster_shell("sed -n 1p %s/observe.out | grep -q '\"leader\":false'", dir), 0);
	assert_int_equal(tcluster_shell("T=$(sed -n 's/token=//p' %s/elect.out); sed -n 2p "
					"%s/observe.out | grep '\"leader\":true' | grep "
					"'\"value\":\"host-1\"' | grep -q \"\\\"token\\\":$T,\"",
					dir, dir),
			 0);
	assert_int_equal(
		tcluster_shell("sed -n 3p %s/observe.out | grep -q '\"leader\":false'", dir), 0);
	assert_int_equal(tcluster_shell("%s --endpoints %s elect el/cli --value x --shared -- true "
					"2>/dev/null",
					CLI, eps) != 0,
			 1);
	tcluster_shell("rm -rf %s", dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_campaign_proclaim_resign_observe),
		cmocka_unit_test(test_paused_leader_deposed),
		cmocka_unit_test(test_cli),
		cmocka_unit_test(test_observe_across_leader_kill),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
