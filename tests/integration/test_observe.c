/* Health, readiness and metrics on a real 3-node cluster (issue 13, item
 * 4): GET /healthz answers while the process runs; GET /readyz is 200 on
 * the leader and on followers that caught up, and 503 with the reason on a
 * node that lost its quorum; /metrics carries the build, leadership, lock
 * activity, the most contended prefixes and latency histograms, with the
 * lock figures the same on every node (they come from apply); and with
 * --log-format json every line a node logs is one JSON object with the
 * documented fields (issue 13, item 5); `raftlock top --once` shows the
 * contended lock and its waiter. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctype.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"

static struct tcluster cl;
static char page[1 << 17];

static int setup(void **state)
{
	(void)state;
	cl.extra_args[0] = "--log-format";
	cl.extra_args[1] = "json";
	cl.extra_args[2] = "--log-level"; /* the harness's warn leaves few lines */
	cl.extra_args[3] = "info";
	tcluster_start(&cl, 3, 1000);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return tcluster_destroy(&cl);
}

/* The HTTP status code of GET path on node i; the body stays in page. */
static int get(int i, const char *path)
{
	if (tcluster_http_get(&cl, i, path, page, sizeof page) != 0)
		return -1;
	int code = 0;
	if (sscanf(page, "HTTP/1.1 %d", &code) != 1)
		return -1;
	return code;
}

/* The value of a sample line "NAME VALUE" (NAME with its labels) on node
 * i; fails the test when the line is missing. */
static double sample(int i, const char *name)
{
	assert_int_equal(get(i, "/metrics"), 200);
	char key[256];
	snprintf(key, sizeof key, "\n%s ", name);
	const char *p = strstr(page, key);
	if (p == NULL)
		fail_msg("node %d: no sample %s", i, name);
	return strtod(p + strlen(key), NULL);
}

/* Waits until GET path on node i answers `code`. */
static bool wait_code(int i, const char *path, int code, int timeout_ms)
{
	uint64_t end = tcluster_now_ms() + (uint64_t)timeout_ms;
	do {
		if (get(i, path) == code)
			return true;
		tl_sleep_ms(50);
	} while (tcluster_now_ms() < end);
	return false;
}

/* The family a sample belongs to: its name without a histogram suffix. */
static void family_of(const char *name, size_t len, char *out, size_t outlen)
{
	static const char *suffixes[] = {"_bucket", "_sum", "_count"};
	for (size_t k = 0; k < 3; k++) {
		size_t sl = strlen(suffixes[k]);
		if (len > sl && memcmp(name + len - sl, suffixes[k], sl) == 0) {
			snprintf(out, outlen, "%.*s", (int)(len - sl), name);
			return;
		}
	}
	snprintf(out, outlen, "%.*s", (int)len, name);
}

/* The body of a /metrics answer is Prometheus text: every sample a
 * metric name, optional labels, a number; its family TYPEd before it;
 * bucket counts that never decrease and end, at +Inf, at _count. */
static void check_exposition(const char *body)
{
	char typed[8192] = " ";
	double prev = -1, inf = -1; /* the series' last bucket, its +Inf one */
	for (const char *line = body; *line != '\0';) {
		const char *end = strchr(line, '\n');
		assert_non_null(end);
		char l[1024];
		snprintf(l, sizeof l, "%.*s", (int)(end - line), line);
		line = end + 1;
		if (strncmp(l, "# HELP ", 7) == 0)
			continue;
		char fam[256], type[32];
		if (sscanf(l, "# TYPE %255s %31s", fam, type) == 2) {
			assert_true(strcmp(type, "gauge") == 0 || strcmp(type, "counter") == 0 ||
				    strcmp(type, "histogram") == 0);
			strcat(typed, fam);
			strcat(typed, " ");
			continue;
		}
		size_t n = 0;
		while (isalnum((unsigned char)l[n]) || l[n] == '_' || l[n] == ':')
			n++;
		if (n == 0 || isdigit((unsigned char)l[0]))
			fail_msg("not a sample: %s", l);
		char want[300];
		family_of(l, n, fam, sizeof fam);
		snprintf(want, sizeof want, " %s ", fam);
		if (strstr(typed, want) == NULL)
			fail_msg("no TYPE before: %s", l);
		const char *v = l + n;
		if (*v == '{') {
			v = strstr(v, "} ");
			if (v == NULL)
				fail_msg("labels not closed: %s", l);
			v++;
		}
		char *num_end;
		assert_int_equal(*v, ' ');
		double value = strtod(v + 1, &num_end);
		if (num_end == v + 1 || *num_end != '\0')
			fail_msg("not a number: %s", l);
		bool count = strstr(l, "_count{") != NULL ||
			     (n > 6 && strncmp(l + n - 6, "_count", 6) == 0);
		if (strstr(l, "_bucket{") != NULL) {
			if (prev >= 0 && value < prev)
				fail_msg("bucket count decreases: %s", l);
			bool last = strstr(l, "le=\"+Inf\"") != NULL;
			prev = last ? -1 : value;
			if (last)
				inf = value;
		} else if (count && inf >= 0) {
			if (value != inf)
				fail_msg("_count is not the +Inf bucket: %s", l);
			inf = -1;
		}
	}
}

static void health_and_readiness(void **state)
{
	(void)state;
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	for (int i = 0; i < cl.n; i++) {
		assert_int_equal(get(i, "/healthz"), 200);
		assert_non_null(strstr(page, "\r\n\r\nok\n"));
		/* Followers: once the leader has told them how far it applied. */
		assert_true(wait_code(i, "/readyz", 200, 5000));
		assert_non_null(
			strstr(page, i == leader ? "serving as leader" : "serving as follower"));
		assert_int_equal(sample(i, "raftlock_serving"), 1);
		assert_int_equal(sample(i, "raftlock_has_leader"), 1);
		assert_int_equal(sample(i, "raftlock_is_leader"), i == leader);
	}
	assert_int_equal(get(leader, "/nothing"), 404);
}

struct releaser {
	raftlock_lock *lock;
	unsigned after_ms;
};

static void *release_later(void *arg)
{
	struct releaser *r = arg;
	tl_sleep_ms(r->after_ms);
	assert_int_equal(raftlock_lock_release(r->lock, NULL), 0);
	return NULL;
}

/* b waits behind a on lock `name`, for about ms, n times over. */
static void wait_behind(const char *name, int n, unsigned ms)
{
	struct tl_pair p;
	tl_pair_open(&p, &cl, name, 10000);
	for (int k = 0; k < n; k++) {
		tl_take(p.la);
		struct releaser r = {p.la, ms};
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, release_later, &r), 0);
		uint64_t token;
		assert_int_equal(raftlock_lock_acquire(p.lb, RAFTLOCK_EXCLUSIVE, 1, 10000, &token),
				 0);
		pthread_join(t, NULL);
		assert_int_equal(raftlock_lock_release(p.lb, NULL), 0);
	}
	tl_pair_close(&p);
}

static void lock_activity_and_latency(void **state)
{
	(void)state;
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	double grants0 = sample(leader, "raftlock_lock_grants_total");
	double waits0 = sample(leader, "raftlock_lock_waits_total");
	double waited0 = sample(leader, "raftlock_lock_wait_duration_seconds_count");
	double held0 = sample(leader, "raftlock_lock_hold_duration_seconds_count");
	double acquires0 =
		sample(leader, "raftlock_request_duration_seconds_count{op=\"acquire\"}");

	/* b waits behind a for about 300 ms, three times over. */
	wait_behind("hotspot/orders", 3, 300);
	/* Names are bytes: one that is not UTF-8 still makes a valid label,
	 * its stray bytes written as \xNN text (server/metrics_label.h). */
	wait_behind("x\xff\xfe/y", 1, 300);

	assert_true(sample(leader, "raftlock_lock_grants_total") - grants0 >= 6);
	assert_true(sample(leader, "raftlock_lock_waits_total") - waits0 >= 3);
	assert_true(sample(leader, "raftlock_lock_wait_duration_seconds_count") - waited0 >= 3);
	assert_true(sample(leader, "raftlock_lock_hold_duration_seconds_count") - held0 >= 6);
	/* Waits of about 300 ms: none at or below 100 ms, all within 5 s. */
	double fast = sample(leader, "raftlock_lock_wait_duration_seconds_bucket{le=\"0.1\"}");
	double slow = sample(leader, "raftlock_lock_wait_duration_seconds_bucket{le=\"5\"}");
	assert_true(slow - fast >= 3);
	assert_true(sample(leader, "raftlock_lock_prefix_waits{prefix=\"hotspot\"}") >= 3);
	assert_true(sample(leader, "raftlock_lock_prefix_waits{prefix=\"x\\\\xff\\\\xfe\"}") >= 1);
	assert_true(sample(leader, "raftlock_request_duration_seconds_count{op=\"acquire\"}") -
			    acquires0 >=
		    6);
	assert_true(sample(leader, "raftlock_request_duration_seconds_count{op=\"keepalive\"}") >=
		    0);
	assert_true(sample(leader, "raftlock_disk_write_duration_seconds_count") > 0);
	assert_true(sample(leader, "raftlock_apply_duration_seconds_count") > 0);
	assert_non_null(strstr(page, "# TYPE raftlock_disk_write_duration_seconds histogram"));
	check_exposition(strstr(page, "\r\n\r\n") + 4);
	assert_non_null(strstr(page, "raftlock_build_info{version=\""));
	assert_non_null(strstr(page, "raft=\"0.22."));
	/* Bounded: at most ten prefixes are shown. */
	int prefixes = 0;
	for (const char *q = page; (q = strstr(q, "\nraftlock_lock_prefix_waits{")) != NULL; q++)
		prefixes++;
	assert_true(prefixes >= 1 && prefixes <= 10);

	/* Every node applied the same entries: the same lock figures. */
	double grants = sample(leader, "raftlock_lock_grants_total");
	for (int i = 0; i < cl.n; i++) {
		if (i == leader)
			continue;
		uint64_t end = tcluster_now_ms() + 5000;
		while (sample(i, "raftlock_lock_grants_total") < grants && tcluster_now_ms() < end)
			tl_sleep_ms(50);
		assert_int_equal(sample(i, "raftlock_lock_grants_total"), grants);
		assert_true(sample(i, "raftlock_lock_prefix_waits{prefix=\"hotspot\"}") >= 3);
	}
}

static void lost_quorum_is_not_ready(void **state)
{
	(void)state;
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	double changes = sample(leader, "raftlock_leader_changes_seen_total");
	int survivor = (leader + 1) % cl.n;
	for (int i = 0; i < cl.n; i++)
		if (i != survivor)
			tcluster_signal(&cl, i, SIGKILL);
	/* It stops knowing a leader within a few election timeouts. */
	assert_true(wait_code(survivor, "/readyz", 503, 10000));
	assert_non_null(strstr(page, "no leader known"));
	assert_int_equal(get(survivor, "/healthz"), 200);
	assert_int_equal(sample(survivor, "raftlock_serving"), 0);
	assert_int_equal(sample(survivor, "raftlock_has_leader"), 0);
	/* Back with a majority: a leader again, and ready again. */
	for (int i = 0; i < cl.n; i++)
		if (i != survivor)
			tcluster_restart(&cl, i);
	assert_true(tcluster_leader(&cl, 15000) >= 0);
	for (int i = 0; i < cl.n; i++)
		assert_true(wait_code(i, "/readyz", 200, 10000));
	assert_true(sample(survivor, "raftlock_leader_changes_seen_total") >= changes);
}

/* Every line of node i's log: {"ts":"<RFC 3339 UTC, ms>","level":"...",
 * "node":<id>,"msg":"..."}. Returns the number of lines. */
static int json_lines(int i, bool *leader_ready)
{
	char line[8192], want[64];
	snprintf(want, sizeof want, "\",\"node\":%d,\"msg\":\"", i + 1);
	FILE *f = tcluster_log_open(&cl, i);
	assert_non_null(f);
	int n = 0;
	while (fgets(line, sizeof line, f) != NULL) {
		int y, mo, d, h, mi, se, ms, len = 0;
		assert_int_equal(sscanf(line,
					"{\"ts\":\"%4d-%2d-%2dT%2d:%2d:%2d.%3dZ\",\"level\":\"%n",
					&y, &mo, &d, &h, &mi, &se, &ms, &len),
				 7);
		if (len == 0 || strstr(line, want) == NULL || strstr(line, "\"}\n") == NULL)
			fail_msg("node %d: not a JSON log line: %s", i + 1, line);
		assert_true(y >= 2024 && mo >= 1 && mo <= 12 && ms >= 0 && ms <= 999);
		if (strstr(line, "\"level\":\"info\"") != NULL &&
		    strstr(line, "\"msg\":\"leader ready (term ") != NULL)
			*leader_ready = true;
		n++;
	}
	fclose(f);
	return n;
}

static void logs_in_json(void **state)
{
	(void)state;
	bool leader_ready = false;
	for (int i = 0; i < cl.n; i++)
		if (json_lines(i, &leader_ready) < 3)
			fail_msg("node %d logged fewer than 3 lines", i + 1);
	assert_true(leader_ready);
}

struct churn {
	struct tcluster *c;
	volatile bool stop;
	int pairs;
};

/* Acquire and release in a loop (bounded: 5,000 pairs or until told). */
static void *churn_locks(void *arg)
{
	struct churn *ch = arg;
	raftlock_client *c = tl_client(ch->c);
	raftlock_session *s = tl_session(c, 10000);
	raftlock_lock *l = tl_lock(s, "churn/x");
	while (!ch->stop && ch->pairs < 5000) {
		tl_take(l);
		assert_int_equal(raftlock_lock_release(l, NULL), 0);
		ch->pairs++;
	}
	raftlock_lock_free(l);
	raftlock_session_close(s);
	raftlock_client_close(c);
	return NULL;
}

/* Under a steady stream of writes a follower is always a few entries
 * behind its leader's last report: it stays ready all along. */
static void ready_under_load(void **state)
{
	(void)state;
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	for (int i = 0; i < cl.n; i++)
		assert_true(wait_code(i, "/readyz", 200, 5000));
	struct churn ch = {&cl, false, 0};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, churn_locks, &ch), 0);
	int polls = 0, unready = 0;
	uint64_t end = tcluster_now_ms() + 3000;
	while (tcluster_now_ms() < end) {
		for (int i = 0; i < cl.n; i++) {
			if (i == leader)
				continue;
			polls++;
			unready += get(i, "/readyz") != 200;
		}
	}
	ch.stop = true;
	pthread_join(t, NULL);
	assert_true(ch.pairs >= 100);
	assert_true(polls >= 100);
	assert_int_equal(unready, 0);
}

struct waiter {
	raftlock_lock *lock;
	int rv;
};

static void *wait_for_lock(void *arg)
{
	struct waiter *w = arg;
	uint64_t token;
	w->rv = raftlock_lock_acquire(w->lock, RAFTLOCK_EXCLUSIVE, 1, 20000, &token);
	return NULL;
}

/* The output of `raftlock top --once ARGS` against the cluster. */
static void run_top(const char *args, char *out, size_t len)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s/bin/raftlock --endpoints %s,%s,%s top --once %s",
		 RAFTLOCK_BINARY_DIR, cl.addrs[0], cl.addrs[1], cl.addrs[2], args);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	assert_int_equal(pclose(p), 0);
}

static void top_shows_contention(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "queue/jobs", 10000);
	raftlock_lock *other = tl_lock(p.a, "other/x");
	tl_take(other);
	tl_take(p.la);
	struct waiter w = {p.lb, -1};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, wait_for_lock, &w), 0);
	char out[8192];
	/* Until the acquire is queued. */
	uint64_t end = tcluster_now_ms() + 5000;
	do {
		run_top("", out, sizeof out);
	} while (strstr(out, "1 waiters") == NULL && tcluster_now_ms() < end);
	assert_non_null(strstr(out, "2 locks, 1 contended, 1 waiters"));
	/* The contended lock first, then the other; the waiter below. */
	const char *jobs = strstr(out, "\nqueue/jobs ");
	const char *x = strstr(out, "\nother/x ");
	const char *waiters = strstr(out, "\nWAITER ");
	assert_true(jobs != NULL && x != NULL && waiters != NULL && jobs < x && x < waiters);
	int holders = 0, queued = 0;
	assert_int_equal(sscanf(jobs, "\nqueue/jobs %*s %d %d", &holders, &queued), 2);
	assert_int_equal(holders, 1);
	assert_int_equal(queued, 1);
	assert_non_null(strstr(waiters, "queue/jobs"));
	/* A prefix keeps to its locks. */
	run_top("queue --limit 5", out, sizeof out);
	assert_non_null(strstr(out, "\nqueue/jobs "));
	assert_null(strstr(out, "other/x"));
	/* --json: one object, valid JSON (RAFTLOCK_PYTHON reads it back). */
	run_top("--json", out, sizeof out);
	const char *head = "{\"locks\":2,\"contended\":1,\"waiters\":1,";
	assert_true(strncmp(out, head, strlen(head)) == 0);
	const char *jobs_json = strstr(out, "{\"name\":\"queue/jobs\",\"kind\":\"");
	assert_non_null(jobs_json);
	assert_non_null(strstr(jobs_json, "\"holders\":1,\"waiters\":1,\"longest_wait_ms\":"));
	assert_non_null(strstr(out, "\"longest_waiters\":[{\"lock\":\"queue/jobs\""));
	run_top("--json | " RAFTLOCK_PYTHON " -c 'import json,sys; d=json.load(sys.stdin); "
		"sys.exit(0 if d[\"top\"][0][\"name\"] == \"queue/jobs\" else 1)'",
		out, sizeof out);

	assert_int_equal(raftlock_lock_release(p.la, NULL), 0);
	pthread_join(t, NULL);
	assert_int_equal(w.rv, 0);
	assert_int_equal(raftlock_lock_release(p.lb, NULL), 0);
	assert_int_equal(raftlock_lock_release(other, NULL), 0);
	raftlock_lock_free(other);
	tl_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(health_and_readiness), cmocka_unit_test(lock_activity_and_latency),
		cmocka_unit_test(ready_under_load),     cmocka_unit_test(lost_quorum_is_not_ready),
		cmocka_unit_test(logs_in_json),         cmocka_unit_test(top_shows_contention),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
