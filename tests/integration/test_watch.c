/* Watches (raftlock_watch) on a real 3-node cluster: the current state
 * then every change under the prefix in log order, nothing of other
 * prefixes; resuming across a kill of the leader delivers each change
 * once, and a second watch resumed from the first one's starting position
 * on another node replays exactly the same changes at the same positions;
 * a resume from a position older than the node's history gets
 * HISTORY_LOST, then the current state, then the changes after it; an
 * identity without read permission is refused; the CLI prints them. */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"

#define ELECTION_MS 500
#define HISTORY 64 /* --watch-history of the nodes */
#define MAX_EVENTS 4096

static struct tcluster cl;

struct ev {
	enum raftlock_watch_kind kind;
	struct raftlock_position pos;
	char name[64];
	uint64_t session, token;
	int status;
};

struct recorder {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int n;
	struct ev ev[MAX_EVENTS];
};

static void record(const struct raftlock_watch_event *e, void *arg)
{
	struct recorder *r = arg;
	pthread_mutex_lock(&r->mu);
	if (r->n < MAX_EVENTS) {
		struct ev *x = &r->ev[r->n++];
		x->kind = e->kind;
		x->pos = e->position;
		snprintf(x->name, sizeof x->name, "%s", e->name);
		x->session = e->session;
		x->token = e->token;
		x->status = e->status;
	}
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->mu);
}

static struct recorder *recorder_new(void)
{
	struct recorder *r = calloc(1, sizeof *r);
	assert_non_null(r);
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cond, NULL);
	return r;
}

static void recorder_free(struct recorder *r)
{
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cond);
	free(r);
}

static bool is_change(enum raftlock_watch_kind k)
{
	return k >= RAFTLOCK_WATCH_GRANTED && k <= RAFTLOCK_WATCH_REVOKED;
}

static int changes(struct recorder *r)
{
	int n = 0;
	for (int i = 0; i < r->n; i++)
		n += is_change(r->ev[i].kind);
	return n;
}

/* Waits up to timeout_ms until the recorder holds an event of kind after
 * index `from` (or n changes when kind is 0); returns its index, -1. */
static int await_kind(struct recorder *r, int from, enum raftlock_watch_kind kind, int timeout_ms)
{
	uint64_t end = tcluster_now_ms() + (uint64_t)timeout_ms;
	pthread_mutex_lock(&r->mu);
	for (;;) {
		for (int i = from; i < r->n; i++)
			if (r->ev[i].kind == kind) {
				pthread_mutex_unlock(&r->mu);
				return i;
			}
		if (tcluster_now_ms() >= end)
			break;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&r->cond, &r->mu, &ts);
	}
	pthread_mutex_unlock(&r->mu);
	return -1;
}

static int count_kind(struct recorder *r, enum raftlock_watch_kind kind)
{
	int n = 0;
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->n; i++)
		n += r->ev[i].kind == kind;
	pthread_mutex_unlock(&r->mu);
	return n;
}

static bool await_changes(struct recorder *r, int n, int timeout_ms)
{
	uint64_t end = tcluster_now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		pthread_mutex_lock(&r->mu);
		int have = changes(r);
		pthread_mutex_unlock(&r->mu);
		if (have >= n)
			return true;
		if (tcluster_now_ms() >= end)
			return false;
		tl_sleep_ms(20);
	}
}

static int pos_cmp(struct raftlock_position a, struct raftlock_position b)
{
	if (a.index != b.index)
		return a.index < b.index ? -1 : 1;
	return a.offset < b.offset ? -1 : a.offset > b.offset;
}

/* The changes of r, in order, strictly increasing in position. */
static int change_list(struct recorder *r, struct ev *out, int max)
{
	int n = 0;
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->n && n < max; i++)
		if (is_change(r->ev[i].kind))
			out[n++] = r->ev[i];
	pthread_mutex_unlock(&r->mu);
	for (int i = 1; i < n; i++)
		if (pos_cmp(out[i - 1].pos, out[i].pos) >= 0)
			fail_msg("change %d at %" PRIu64 ".%u does not follow %" PRIu64 ".%u", i,
				 out[i].pos.index, out[i].pos.offset, out[i - 1].pos.index,
				 out[i - 1].pos.offset);
	return n;
}

static int setup(void **state)
{
	(void)state;
	static const char *args[] = {"--watch-history", "64", NULL};
	for (int i = 0; args[i] != NULL; i++)
		cl.extra_args[i] = args[i];
	tcluster_start(&cl, 3, ELECTION_MS);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return tcluster_destroy(&cl);
}

static uint64_t async_token;
static int async_status = 1;
static pthread_mutex_t async_mu = PTHREAD_MUTEX_INITIALIZER;

static void async_done(raftlock_lock *l, int status, uint64_t value, void *arg)
{
	(void)l;
	(void)arg;
	pthread_mutex_lock(&async_mu);
	async_status = status;
	async_token = value;
	pthread_mutex_unlock(&async_mu);
}

/* Waits up to timeout_ms for async_done (async_status leaves 1). The
 * grant's push and the watch's events travel apart, so a watch may see
 * the grant before the acquire's callback has run. */
static bool await_async(int timeout_ms)
{
	uint64_t end = tcluster_now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		pthread_mutex_lock(&async_mu);
		bool done = async_status != 1;
		pthread_mutex_unlock(&async_mu);
		if (done)
			return true;
		if (tcluster_now_ms() >= end)
			return false;
		tl_sleep_ms(5);
	}
}

/* The state first, then each change of the prefix, in order: a waiter
 * queues, the holder releases, the waiter is granted; a wait the client
 * gives up leaves the queue with ECANCELED. */
static void test_state_then_changes(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "st/a", 5000);
	raftlock_lock *other;
	assert_int_equal(raftlock_lock_new(p.b, "other/a", NULL, &other), 0);
	uint64_t t1 = tl_take(p.la);

	struct recorder *r = recorder_new();
	raftlock_watch_handle *w;
	assert_int_equal(raftlock_watch(p.c, "st/", NULL, record, r, &w), 0);
	int cur = await_kind(r, 0, RAFTLOCK_WATCH_CURRENT, 10000);
	assert_int_equal(cur, 1);
	assert_int_equal(r->ev[0].kind, RAFTLOCK_WATCH_HOLDING);
	assert_string_equal(r->ev[0].name, "st/a");
	assert_int_equal(r->ev[0].token, t1);
	assert_int_equal(r->ev[0].session, raftlock_session_id(p.a));
	assert_int_equal(r->ev[1].pos.offset, RAFTLOCK_WATCH_OFFSET_END);

	tl_take(other); /* another prefix: not seen */
	assert_int_equal(
		raftlock_lock_acquire_async(p.lb, RAFTLOCK_EXCLUSIVE, 1, -1, async_done, NULL), 0);
	tl_await_waiters(p.c, "st/a", 1);
	assert_int_equal(raftlock_lock_release(p.la, NULL), 0);
	assert_true(await_changes(r, 3, 10000));
	/* A wait that the client gives up: it cancels it. */
	raftlock_lock *la2 = tl_lock(p.a, "st/a");
	uint64_t tok;
	assert_int_equal(raftlock_lock_acquire(la2, RAFTLOCK_EXCLUSIVE, 1, 300, &tok),
			 RAFTLOCK_ETIMEDOUT);
	assert_true(await_changes(r, 5, 10000));
	pthread_mutex_lock(&async_mu);
	assert_int_equal(async_status, 0);
	uint64_t t2 = async_token;
	pthread_mutex_unlock(&async_mu);

	struct ev ch[16];
	int n = change_list(r, ch, 16);
	assert_int_equal(n, 5);
	assert_int_equal(ch[0].kind, RAFTLOCK_WATCH_QUEUED);
	assert_int_equal(ch[0].session, raftlock_session_id(p.b));
	assert_int_equal(ch[1].kind, RAFTLOCK_WATCH_RELEASED);
	assert_int_equal(ch[1].token, t1);
	assert_int_equal(ch[2].kind, RAFTLOCK_WATCH_GRANTED);
	assert_int_equal(ch[2].token, t2);
	assert_true(t2 > t1);
	/* the release and the grant are one apply: one index, two offsets */
	assert_int_equal(ch[1].pos.index, ch[2].pos.index);
	assert_int_equal(ch[2].pos.offset, ch[1].pos.offset + 1);
	assert_int_equal(ch[3].kind, RAFTLOCK_WATCH_QUEUED);
	assert_int_equal(ch[4].kind, RAFTLOCK_WATCH_DEQUEUED);
	assert_int_equal(ch[4].status, RAFTLOCK_ECANCELED);
	for (int i = 0; i < n; i++)
		assert_string_equal(ch[i].name, "st/a");
	assert_true(pos_cmp(r->ev[cur].pos, ch[0].pos) < 0);

	/* Every node keeps the changes (filled at apply), and one serves the
	 * watch. */
	long long subscribers = 0;
	for (int i = 0; i < cl.n; i++) {
		assert_true(tcluster_metric(&cl, i, "raftlock_watch_changes_kept") >= 5);
		subscribers += tcluster_metric(&cl, i, "raftlock_watch_subscribers");
	}
	assert_int_equal(subscribers, 1);

	raftlock_watch_cancel(w);
	int seen = r->n;
	assert_int_equal(raftlock_lock_release(p.lb, NULL), 0);
	tl_sleep_ms(300);
	assert_int_equal(r->n, seen); /* cancelled: nothing more */
	subscribers = 0;
	for (int i = 0; i < cl.n; i++)
		subscribers += tcluster_metric(&cl, i, "raftlock_watch_subscribers");
	assert_int_equal(subscribers, 0); /* the node was told */
	recorder_free(r);
	raftlock_lock_free(la2);
	raftlock_lock_free(other);
	tl_pair_close(&p);
}

/* Holders of `name` taken and released n times in one session. */
static void churn(raftlock_lock *l, int n)
{
	for (int i = 0; i < n; i++) {
		tl_take(l);
		assert_int_equal(raftlock_lock_release(l, NULL), 0);
	}
}

/* Kill the leader while a watch runs: the library resumes on another node
 * from the last position it delivered; every change arrives once, in
 * order. A second watch, resumed from the first one's CURRENT on whatever
 * node it reaches, gets exactly the same changes at the same positions. */
static void test_resume_across_leader_kill(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	struct recorder *r = recorder_new();
	raftlock_watch_handle *w;
	assert_int_equal(raftlock_watch(c, "kill/", NULL, record, r, &w), 0);
	int cur = await_kind(r, 0, RAFTLOCK_WATCH_CURRENT, 10000);
	assert_true(cur >= 0);
	struct raftlock_position start = r->ev[cur].pos;

	raftlock_client *wc = tl_client(&cl);
	raftlock_session *s = tl_session(wc, 3000);
	raftlock_lock *l = tl_lock(s, "kill/x");
	churn(l, 5); /* 10 changes */
	assert_true(await_changes(r, 10, 10000));
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	tcluster_signal(&cl, leader, SIGKILL);
	assert_true(tcluster_leader(&cl, 20000) >= 0);
	churn(l, 5); /* 10 more, under the new leader */
	assert_true(await_changes(r, 20, 20000));
	tl_sleep_ms(200);

	static struct ev a[64], b[64];
	int na = change_list(r, a, 64);
	assert_int_equal(na, 20);
	for (int i = 0; i < na; i++)
		assert_int_equal(a[i].kind,
				 i % 2 == 0 ? RAFTLOCK_WATCH_GRANTED : RAFTLOCK_WATCH_RELEASED);

	struct recorder *r2 = recorder_new();
	raftlock_watch_handle *w2;
	assert_int_equal(raftlock_watch(c, "kill/", &start, record, r2, &w2), 0);
	assert_true(await_changes(r2, 20, 10000));
	int nb = change_list(r2, b, 64);
	assert_int_equal(nb, 20);
	for (int i = 0; i < na; i++) {
		assert_int_equal(pos_cmp(a[i].pos, b[i].pos), 0);
		assert_int_equal(a[i].kind, b[i].kind);
		assert_int_equal(a[i].token, b[i].token);
	}
	assert_int_equal(await_kind(r2, 0, RAFTLOCK_WATCH_HISTORY_LOST, 0), -1);

	raftlock_watch_cancel(w2);
	raftlock_watch_cancel(w);
	recorder_free(r2);
	recorder_free(r);
	raftlock_lock_free(l);
	raftlock_session_close(s);
	raftlock_client_close(wc);
	raftlock_client_close(c);
	tcluster_restart(&cl, leader);
	assert_true(tcluster_leader(&cl, 20000) >= 0);
}

/* More changes than the nodes keep (--watch-history 64): a resume from
 * before them gets HISTORY_LOST, the current state (the lock still held)
 * and CURRENT, then the changes after it. */
static void test_history_lost(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	raftlock_session *s = tl_session(c, 5000);
	raftlock_lock *l = tl_lock(s, "lost/x");
	raftlock_lock *held = tl_lock(s, "lost/held");
	uint64_t t_held = tl_take(held);
	struct raftlock_position old = {0};
	{ /* a position that this cluster had, early on */
		struct recorder *r = recorder_new();
		raftlock_watch_handle *w;
		assert_int_equal(raftlock_watch(c, "lost/", NULL, record, r, &w), 0);
		int cur = await_kind(r, 0, RAFTLOCK_WATCH_CURRENT, 10000);
		assert_true(cur >= 0);
		old = r->ev[cur].pos;
		raftlock_watch_cancel(w);
		recorder_free(r);
	}
	churn(l, HISTORY); /* 2 * HISTORY changes: the ring moved past `old` */

	struct recorder *r = recorder_new();
	raftlock_watch_handle *w;
	assert_int_equal(raftlock_watch(c, "lost/", &old, record, r, &w), 0);
	int cur = await_kind(r, 0, RAFTLOCK_WATCH_CURRENT, 10000);
	assert_true(cur >= 0);
	assert_int_equal(r->ev[0].kind, RAFTLOCK_WATCH_HISTORY_LOST);
	assert_int_equal(pos_cmp(r->ev[0].pos, old), 0);
	int holding = 0;
	for (int i = 1; i < cur; i++) {
		assert_int_equal(r->ev[i].kind, RAFTLOCK_WATCH_HOLDING);
		assert_string_equal(r->ev[i].name, "lost/held");
		assert_int_equal(r->ev[i].token, t_held);
		holding++;
	}
	assert_int_equal(holding, 1);
	assert_int_equal(changes(r), 0);
	churn(l, 1);
	assert_true(await_changes(r, 2, 10000));
	assert_true(pos_cmp(r->ev[cur].pos, r->ev[cur + 1].pos) < 0);

	/* A resume from inside the history: no loss, just the changes. */
	struct recorder *r3 = recorder_new();
	raftlock_watch_handle *w3;
	struct raftlock_position mid = r->ev[cur].pos;
	assert_int_equal(raftlock_watch(c, "lost/", &mid, record, r3, &w3), 0);
	assert_true(await_changes(r3, 2, 10000));
	assert_int_equal(r3->ev[0].kind, RAFTLOCK_WATCH_GRANTED);
	assert_int_equal(await_kind(r3, 0, RAFTLOCK_WATCH_HISTORY_LOST, 0), -1);

	raftlock_watch_cancel(w3);
	raftlock_watch_cancel(w);
	recorder_free(r3);
	recorder_free(r);
	raftlock_lock_free(l);
	raftlock_lock_free(held);
	raftlock_session_close(s);
	raftlock_client_close(c);
}

/* Cancelling from inside the callback makes that call the last. */
static raftlock_watch_handle *self_w;
static int self_calls;
static void cancel_self(const struct raftlock_watch_event *e, void *arg)
{
	(void)e;
	(void)arg;
	self_calls++;
	raftlock_watch_cancel(self_w);
}

static void test_bad_input_and_cancel_in_callback(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	raftlock_watch_handle *w;
	assert_int_equal(raftlock_watch(NULL, "", NULL, record, NULL, &w), RAFTLOCK_EINVAL);
	assert_int_equal(raftlock_watch(c, NULL, NULL, record, NULL, &w), RAFTLOCK_EINVAL);
	assert_int_equal(raftlock_watch(c, "", NULL, NULL, NULL, &w), RAFTLOCK_EINVAL);
	char big[RAFTLOCK_NAME_MAX + 2];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	assert_int_equal(raftlock_watch(c, big, NULL, record, NULL, &w), RAFTLOCK_EINVAL);
	struct raftlock_position p;
	assert_int_equal(raftlock_position_parse("12.3", &p), 0);
	assert_int_equal(p.index, 12);
	assert_int_equal(p.offset, 3);
	assert_int_equal(raftlock_position_parse("12", &p), 0);
	assert_int_equal(p.offset, RAFTLOCK_WATCH_OFFSET_END);
	assert_int_equal(raftlock_position_parse("12.", &p), RAFTLOCK_EINVAL);
	assert_int_equal(raftlock_position_parse("x", &p), RAFTLOCK_EINVAL);
	assert_int_equal(raftlock_position_parse("1.99999999999", &p), RAFTLOCK_EINVAL);
	assert_int_equal(raftlock_position_parse("99999999999999999999", &p), RAFTLOCK_EINVAL);
	assert_int_equal(raftlock_position_parse("18446744073709551615.0", &p), 0);

	raftlock_session *s = tl_session(c, 5000);
	raftlock_lock *l = tl_lock(s, "self/x");
	tl_take(l);
	assert_int_equal(raftlock_watch(c, "self/", NULL, cancel_self, NULL, &self_w), 0);
	tl_sleep_ms(500);
	assert_int_equal(raftlock_lock_release(l, NULL), 0);
	tl_sleep_ms(300);
	assert_int_equal(self_calls, 1);
	raftlock_lock_free(l);
	raftlock_session_close(s);
	raftlock_client_close(c);
}

/* A connection holds at most RAFTLOCK_WATCH_MAX watches (each is walked at
 * every change): one more ends with an ERROR event, RAFTLOCK_ELIMIT, and
 * the others go on; once one is canceled, a new one is taken. */
static void test_watches_per_connection(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	struct recorder *r = recorder_new();
	static raftlock_watch_handle *w[RAFTLOCK_WATCH_MAX + 1];
	for (int i = 0; i < RAFTLOCK_WATCH_MAX; i++)
		assert_int_equal(raftlock_watch(c, "many/", NULL, record, r, &w[i]), 0);
	uint64_t end = tcluster_now_ms() + 20000;
	while (count_kind(r, RAFTLOCK_WATCH_CURRENT) < RAFTLOCK_WATCH_MAX) {
		assert_true(tcluster_now_ms() < end);
		tl_sleep_ms(20);
	}
	assert_int_equal(count_kind(r, RAFTLOCK_WATCH_ERROR), 0);
	struct recorder *over = recorder_new();
	raftlock_watch_handle *extra;
	assert_int_equal(raftlock_watch(c, "many/", NULL, record, over, &extra), 0);
	int e = await_kind(over, 0, RAFTLOCK_WATCH_ERROR, 10000);
	assert_true(e >= 0);
	assert_int_equal(over->ev[e].status, RAFTLOCK_ELIMIT);
	raftlock_watch_cancel(extra);
	/* the others still see changes */
	raftlock_session *s = tl_session(c, 5000);
	raftlock_lock *l = tl_lock(s, "many/x");
	tl_take(l);
	assert_true(await_kind(r, 0, RAFTLOCK_WATCH_GRANTED, 10000) >= 0);
	/* The cancel goes out on its own: a new watch may reach the node
	 * before it and be refused; once the node has it, one is taken. */
	raftlock_watch_cancel(w[0]);
	struct recorder *again = NULL;
	for (int tries = 0;; tries++) {
		assert_true(tries < 50);
		if (again != NULL)
			recorder_free(again);
		again = recorder_new();
		assert_int_equal(raftlock_watch(c, "many/", NULL, record, again, &w[0]), 0);
		int got = -1;
		uint64_t until = tcluster_now_ms() + 10000;
		while (got < 0 && tcluster_now_ms() < until) {
			got = await_kind(again, 0, RAFTLOCK_WATCH_CURRENT, 20);
			if (got < 0 && await_kind(again, 0, RAFTLOCK_WATCH_ERROR, 20) >= 0)
				break;
		}
		if (got >= 0)
			break;
		raftlock_watch_cancel(w[0]);
		tl_sleep_ms(50);
	}
	for (int i = 0; i < RAFTLOCK_WATCH_MAX; i++)
		raftlock_watch_cancel(w[i]);
	assert_int_equal(raftlock_lock_release(l, NULL), 0);
	raftlock_lock_free(l);
	raftlock_session_close(s);
	raftlock_client_close(c);
	recorder_free(r);
	recorder_free(over);
	recorder_free(again);
}

#define CLI RAFTLOCK_BINARY_DIR "/bin/raftlock"

/* raftlock watch: text and JSON, --count, --from. */
/* A revocation (raftlock revoke) shows as REVOKED of the holder's
 * token, and the waiter's grant follows in the same apply. */
static void test_revoked(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "rv/a", 5000);
	uint64_t t1 = tl_take(p.la);
	struct recorder *r = recorder_new();
	raftlock_watch_handle *w;
	assert_int_equal(raftlock_watch(p.c, "rv/", NULL, record, r, &w), 0);
	assert_true(await_kind(r, 0, RAFTLOCK_WATCH_CURRENT, 10000) >= 0);
	pthread_mutex_lock(&async_mu);
	async_status = 1;
	pthread_mutex_unlock(&async_mu);
	assert_int_equal(
		raftlock_lock_acquire_async(p.lb, RAFTLOCK_EXCLUSIVE, 1, -1, async_done, NULL), 0);
	tl_await_waiters(p.c, "rv/a", 1);
	uint32_t count = 0;
	assert_int_equal(raftlock_revoke(p.c, "rv/a", t1, 0, &count), 0);
	assert_int_equal(count, 1);
	assert_true(await_changes(r, 3, 10000));

	struct ev ch[8];
	int n = change_list(r, ch, 8);
	assert_int_equal(n, 3);
	assert_int_equal(ch[0].kind, RAFTLOCK_WATCH_QUEUED);
	assert_int_equal(ch[1].kind, RAFTLOCK_WATCH_REVOKED);
	assert_int_equal(ch[1].token, t1);
	assert_int_equal(ch[1].session, raftlock_session_id(p.a));
	assert_int_equal(ch[2].kind, RAFTLOCK_WATCH_GRANTED);
	assert_int_equal(ch[2].session, raftlock_session_id(p.b));
	assert_true(ch[2].token > t1);
	assert_int_equal(ch[1].pos.index, ch[2].pos.index);
	assert_true(await_async(10000));
	pthread_mutex_lock(&async_mu);
	assert_int_equal(async_status, 0);
	assert_int_equal(async_token, ch[2].token);
	pthread_mutex_unlock(&async_mu);
	raftlock_watch_cancel(w);
	recorder_free(r);
	tl_pair_close(&p);
}

static void test_cli(void **state)
{
	(void)state;
	char dir[] = "/tmp/raftlock-watch-XXXXXX";
	assert_non_null(mkdtemp(dir));
	const char *e = cl.addrs[0];
	char eps[128];
	snprintf(eps, sizeof eps, "%s,%s,%s", cl.addrs[0], cl.addrs[1], cl.addrs[2]);
	(void)e;
	assert_int_equal(tcluster_shell("timeout 20 %s --endpoints %s watch cli/ --count 2 --json "
					"> %s/json.out 2>&1 &",
					CLI, eps, dir),
			 0);
	assert_int_equal(tcluster_shell("timeout 20 %s --endpoints %s watch cli/ --count 2 "
					"> %s/text.out 2>&1 &",
					CLI, eps, dir),
			 0);
	tl_sleep_ms(1000);
	raftlock_client *c = tl_client(&cl);
	raftlock_session *s = tl_session(c, 5000);
	raftlock_lock *l = tl_lock(s, "cli/one");
	uint64_t tok = tl_take(l);
	assert_int_equal(raftlock_lock_release(l, NULL), 0);
	char want[128];
	snprintf(want, sizeof want,
		 "\"kind\":\"granted\",\"name\":\"cli/one\",\"session\":%" PRIu64,
		 raftlock_session_id(s));
	int ok = 1;
	for (int i = 0; i < 100 && ok != 0; i++) {
		tl_sleep_ms(100);
		ok = tcluster_shell(
			"grep -q '%s' %s/json.out && grep -q ' released cli/one .*token=%" PRIu64
			"' %s/text.out",
			want, dir, tok, dir);
	}
	if (ok != 0)
		tcluster_shell("cat %s/json.out %s/text.out >&2", dir, dir);
	assert_int_equal(ok, 0);
	/* --from the first position printed (the CURRENT of an empty
	 * state, with its cluster id): the changes after it, then stop at
	 * --count */
	assert_int_equal(
		tcluster_shell(
			"grep -o '\"position\":\"[0-9]*@[0-9a-f]\\{16\\}\"' %s/json.out | head -1 "
			"| cut -d'\"' -f4 > %s/pos",
			dir, dir),
		0);
	assert_int_equal(tcluster_shell("timeout 20 %s --endpoints %s watch cli/ --count 1 --from "
					"\"$(cat %s/pos)\" | grep -q ' granted cli/one'",
					CLI, eps, dir),
			 0);
	assert_int_equal(tcluster_shell("%s --endpoints %s watch cli/ --from bad 2>/dev/null", CLI,
					eps) != 0,
			 1);
	tcluster_shell("rm -rf %s", dir);
	raftlock_lock_free(l);
	raftlock_session_close(s);
	raftlock_client_close(c);
}

/* A state of many pages (server/watch.h: WATCH_STATE_PAGE locks a page,
 * one page a loop turn): every lock once, in name order, at one position,
 * then CURRENT, then the changes made meanwhile and after. */
#define BIG_STATE 1000

static atomic_int big_taken;
static void big_done(raftlock_lock *l, int status, uint64_t token, void *arg)
{
	(void)l;
	(void)token;
	(void)arg;
	if (status == 0)
		atomic_fetch_add(&big_taken, 1);
}

static void test_large_state_in_pages(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "big/x", 5000);
	raftlock_lock **locks = calloc(BIG_STATE, sizeof *locks);
	assert_non_null(locks);
	/* 50 at a time: a sanitizer build applies a burst of 1,000 slowly
	 * enough to miss heartbeats. */
	for (int i = 0; i < BIG_STATE; i++) {
		char name[32];
		snprintf(name, sizeof name, "big/%04d", i);
		locks[i] = tl_lock(p.a, name);
		assert_int_equal(raftlock_lock_acquire_async(locks[i], RAFTLOCK_EXCLUSIVE, 1, 0,
							     big_done, NULL),
				 0);
		for (int k = 0; (i + 1) % 50 == 0 && k < 500 && atomic_load(&big_taken) <= i; k++)
			tl_sleep_ms(10);
	}
	assert_int_equal(atomic_load(&big_taken), BIG_STATE);

	struct recorder *r = recorder_new();
	raftlock_watch_handle *w;
	assert_int_equal(raftlock_watch(p.c, "big/", NULL, record, r, &w), 0);
	assert_int_equal(raftlock_lock_release(locks[0], NULL), 0); /* while it goes out */
	int cur = await_kind(r, 0, RAFTLOCK_WATCH_CURRENT, 10000);
	/* A reconnect (the client moving to the leader for the release) may
	 * cut the state short: HISTORY_LOST, and it comes again. */
	int from = 0;
	for (int i = 0; i < cur; i++)
		if (r->ev[i].kind == RAFTLOCK_WATCH_HISTORY_LOST)
			from = i + 1;
	assert_int_equal(cur - from, BIG_STATE);
	for (int i = 0; i < BIG_STATE; i++) {
		char name[32];
		snprintf(name, sizeof name, "big/%04d", i);
		assert_int_equal(r->ev[from + i].kind, RAFTLOCK_WATCH_HOLDING);
		assert_string_equal(r->ev[from + i].name, name);
		assert_int_equal(pos_cmp(r->ev[from + i].pos, r->ev[cur].pos), 0);
	}
	assert_int_equal(raftlock_lock_release(locks[1], NULL), 0);
	assert_true(await_changes(r, 2, 10000));
	struct ev ch[4];
	assert_int_equal(change_list(r, ch, 4), 2);
	assert_int_equal(ch[0].kind, RAFTLOCK_WATCH_RELEASED);
	assert_string_equal(ch[0].name, "big/0000");
	assert_string_equal(ch[1].name, "big/0001");
	raftlock_watch_cancel(w);
	recorder_free(r);
	for (int i = 0; i < BIG_STATE; i++)
		raftlock_lock_free(locks[i]);
	free(locks);
	tl_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_state_then_changes),
		cmocka_unit_test(test_large_state_in_pages),
		cmocka_unit_test(test_history_lost),
		cmocka_unit_test(test_watches_per_connection),
		cmocka_unit_test(test_bad_input_and_cancel_in_callback),
		cmocka_unit_test(test_cli),
		cmocka_unit_test(test_revoked),
		cmocka_unit_test(test_resume_across_leader_kill),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
