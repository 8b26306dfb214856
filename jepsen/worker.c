/*
 * jepsen-worker: one client process of a harness run.
 *
 * It drives the real client library (client/raftlock.h) and logs every
 * invocation and completion as one JSON line (format: jepsen/README.md),
 * timestamped with CLOCK_MONOTONIC, which every process on the machine
 * shares; lease validity (CLOCK_BOOTTIME ms from the library) is converted
 * to the same clock.
 *
 * Workloads:
 *   mutex      acquire one of --locks exclusive locks; while holding, read
 *              the fenced register's counter with the token and write it
 *              back plus one; release.
 *   semaphore  acquire one permit of a --permits semaphore, hold, release.
 *   rwlock     read-write locks: 70% shared holders, which read the
 *              register (shared reads do not raise its bar); exclusive
 *              holders do the mutex read-modify-write.
 *   reentrant  the mutex round, acquiring twice through one handle (same
 *              token expected) and releasing twice.
 *   waiters    the mutex round on a single lock, waiting up to 5 s in the
 *              server's queue, across failovers.
 *   pairs      two of --locks locks in random order, each round either as
 *              one set (raftlock_multi_*) or one after the other, which
 *              may deadlock with another worker: EDEADLK, then let go of
 *              the first and go on. The mutex read-modify-write on each.
 *   election   campaign for one election (raftlock_campaign, logged as an
 *              acquire of a mutex, so the lease checker sees two leaders),
 *              proclaim, do the mutex read-modify-write as leader, resign;
 *              an observer (raftlock_observe) logs every change it is told
 *              of as process "observer-ID" (the observe checker).
 *   durable    hold a lock of its own for seconds, reading the whole lock
 *              and session table meanwhile (the durability checker's reads).
 *   status     print each node's status as JSON on stdout and exit.
 *
 * SIGTERM or SIGINT: finish the current step, release, close, exit 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "raftlock.h"

#define MAX_ADDRESSES 16
#define PAGE_LIMIT 200
#define MAX_PAGES 100

struct config {
	int id;
	const char *addresses[MAX_ADDRESSES];
	size_t n_addresses;
	const char *workload;
	const char *prefix;
	int locks;
	unsigned permits;
	unsigned ttl_ms;
	unsigned bind_ms; /* crash-fast release: bound sessions, this grace; 0 = off */
	const char *register_addr;
	const char *out;
	unsigned seed;
	unsigned hold_ms;
	int acquire_timeout_ms;
	unsigned time_s;
	unsigned request_timeout_ms;
};

static struct config cfg = {
	.workload = "mutex",
	.prefix = "j/",
	.locks = 3,
	.permits = 2,
	.ttl_ms = 3000,
	.hold_ms = 50,
	.acquire_timeout_ms = 1000,
	.time_s = 3600,
	.request_timeout_ms = 5000,
};

static volatile sig_atomic_t stop_flag;
static int out_fd = 1;
static raftlock_client *client;
static raftlock_session *session;
static uint64_t session_id;
static atomic_int session_lost;

/* ---------------------------------------------------------- clocks -- */

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/* The session's valid_until on CLOCK_MONOTONIC ns; 0 when lost. */
static uint64_t valid_until_mono(void)
{
	if (session == NULL)
		return 0;
	uint64_t v = raftlock_session_valid_until(session);
	if (v == 0)
		return 0;
	uint64_t m0 = mono_ns();
	uint64_t b = clock_ns(CLOCK_BOOTTIME);
	uint64_t m1 = mono_ns();
	int64_t offset = (int64_t)(m0 / 2 + m1 / 2) - (int64_t)b;
	int64_t vm = (int64_t)(v * 1000000u) + offset;
	return vm > 0 ? (uint64_t)vm : 0;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !stop_flag)
		;
}

/* ------------------------------------------------------- json lines -- */

struct buf {
	char *p;
	size_t len, cap;
};

static void buf_add(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		size_t room = b->cap - b->len;
		va_start(ap, fmt);
		int n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap * 2 : 512;
		while (cap - b->len <= (size_t)n)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (p == NULL) {
			fprintf(stderr, "worker: out of memory\n");
			exit(3);
		}
		b->p = p;
		b->cap = cap;
	}
}

static void buf_str(struct buf *b, const char *s)
{
	char esc[8];

	buf_add(b, "\"");
	for (; s && *s; s++)
		buf_add(b, "%s", json_char((unsigned char)*s, esc));
	buf_add(b, "\"");
}

/* One event. `type` is invoke/ok/fail/info; lock, error, value_json may
 * be NULL; token/value of 0 are omitted unless has_value. */
struct event {
	const char *type;
	const char *f;
	const char *lock;
	uint64_t token;
	const char *error;
	const char *value_json;
	const char *kind;
	unsigned limit;
	const char *mode;
	const char *locks_json;  /* a set: its names, ["a","b"] (lock: the first) */
	const char *tokens_json; /* a set: its tokens, in the order of locks */
	int timeout_ms;          /* acquire invocations: the wait asked for */
};

static void emit(const struct event *ev)
{
	struct buf b = {0};
	buf_add(&b, "{\"time\":%" PRIu64 ",\"process\":%d,\"type\":", mono_ns(), cfg.id);
	buf_str(&b, ev->type);
	buf_add(&b, ",\"f\":");
	buf_str(&b, ev->f);
	if (ev->lock) {
		buf_add(&b, ",\"lock\":");
		buf_str(&b, ev->lock);
	}
	if (ev->token)
		buf_add(&b, ",\"token\":%" PRIu64, ev->token);
	if (session_id)
		buf_add(&b, ",\"session\":%" PRIu64, session_id);
	if (strcmp(ev->type, "invoke") != 0) {
		uint64_t v = valid_until_mono();
		if (v)
			buf_add(&b, ",\"valid_until\":%" PRIu64, v);
	}
	if (ev->kind) {
		buf_add(&b, ",\"kind\":");
		buf_str(&b, ev->kind);
		if (ev->limit)
			buf_add(&b, ",\"limit\":%u", ev->limit);
	}
	if (ev->mode) {
		buf_add(&b, ",\"mode\":");
		buf_str(&b, ev->mode);
	}
	if (ev->error) {
		buf_add(&b, ",\"error\":");
		buf_str(&b, ev->error);
	}
	if (ev->value_json)
		buf_add(&b, ",\"value\":%s", ev->value_json);
	if (ev->locks_json)
		buf_add(&b, ",\"locks\":%s", ev->locks_json);
	if (ev->tokens_json)
		buf_add(&b, ",\"tokens\":%s", ev->tokens_json);
	if (ev->timeout_ms)
		buf_add(&b, ",\"timeout_ms\":%d", ev->timeout_ms);
	buf_add(&b, "}\n");
	/* One write per line: lines of a paused or killed worker stay whole. */
	size_t off = 0;
	while (off < b.len) {
		ssize_t n = write(out_fd, b.p + off, b.len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	free(b.p);
}

/* The RAFTLOCK_E* name of an error code ("EBUSY"). */
static const char *error_name(int rc)
{
	switch (rc) {
#define RAFTLOCK__ERROR_NAME(name, value, message) \
	case RAFTLOCK_##name: return #name;
		RAFTLOCK_ERRORS(RAFTLOCK__ERROR_NAME)
#undef RAFTLOCK__ERROR_NAME
	default: return "EOTHER";
	}
}

/* Errors after which the request certainly did not take effect. */
static bool error_definite(int rc)
{
	switch (rc) {
	case RAFTLOCK_EBUSY:
	case RAFTLOCK_ESESSION:
	case RAFTLOCK_ENOTHOLDER:
	case RAFTLOCK_EKIND:
	case RAFTLOCK_ELIMIT:
	case RAFTLOCK_EINVAL:
	case RAFTLOCK_ETOOBIG:
	case RAFTLOCK_ENOTFOUND:
	case RAFTLOCK_EDEADLK:
	case RAFTLOCK_ESTALESEQ: return true;
	default: return false;
	}
}

static void emit_result(const char *f, const char *lock, int rc, uint64_t token,
			const char *value_json)
{
	struct event ev = {.f = f, .lock = lock, .token = token, .value_json = value_json};
	if (rc == 0) {
		ev.type = "ok";
	} else {
		/* An acquire that timed out neither holds nor waits (the
		 * header's contract; the checkers rely on it). */
		bool definite = error_definite(rc) ||
				(rc == RAFTLOCK_ETIMEDOUT && strcmp(f, "acquire") == 0);
		ev.type = definite ? "fail" : "info";
		ev.error = error_name(rc);
	}
	emit(&ev);
}

/* ------------------------------------------------- fenced register -- */

static int reg_fd = -1;

static int reg_connect(void)
{
	char host[64];
	const char *colon = strrchr(cfg.register_addr, ':');
	if (colon == NULL || (size_t)(colon - cfg.register_addr) >= sizeof host)
		return -1;
	memcpy(host, cfg.register_addr, (size_t)(colon - cfg.register_addr));
	host[colon - cfg.register_addr] = '\0';
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)atoi(colon + 1))};
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return -1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct timeval tv = {.tv_sec = 2};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Sends one request line, reads one response line into resp. 0 on success,
 * -1 when the outcome is unknown (the connection is dropped). */
static int reg_call(const char *req, char *resp, size_t cap)
{
	if (reg_fd < 0 && (reg_fd = reg_connect()) < 0)
		return -1;
	size_t len = strlen(req), off = 0;
	while (off < len) {
		ssize_t n = write(reg_fd, req + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto broken;
		off += (size_t)n;
	}
	off = 0;
	while (off + 1 < cap) {
		ssize_t n = read(reg_fd, resp + off, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto broken;
		if (resp[off] == '\n')
			break;
		off++;
	}
	resp[off] = '\0';
	return 0;
broken:
	close(reg_fd);
	reg_fd = -1;
	return -1;
}

/* Reads (write = false) or writes `value` under `token`. Returns 0 and sets
 * *value on acceptance, 1 when refused, -1 when unknown. */
static int reg_access(bool write_op, bool shared, const char *lock, uint64_t token, int64_t *value)
{
	char req[512], resp[512];
	if (write_op)
		snprintf(req, sizeof req,
			 "{\"op\":\"write\",\"lock\":\"%s\",\"token\":%" PRIu64
			 ",\"value\":%" PRId64 ",\"client\":%d}\n",
			 lock, token, *value, cfg.id);
	else
		snprintf(req, sizeof req,
			 "{\"op\":\"read\",\"lock\":\"%s\",\"token\":%" PRIu64
			 ",\"client\":%d%s}\n",
			 lock, token, cfg.id, shared ? ",\"shared\":true" : "");
	if (reg_call(req, resp, sizeof resp) != 0)
		return -1;
	if (strstr(resp, "\"ok\": true") == NULL)
		return strstr(resp, "refused") ? 1 : -1;
	const char *v = strstr(resp, "\"value\": ");
	if (v == NULL)
		return -1;
	*value = strtoll(v + 9, NULL, 10);
	return 0;
}

/* One fenced register access, logged as an operation. Returns 0 when
 * accepted (with *value), 1 when refused, -1 when unknown. */
static int fenced_access(bool write_op, bool shared, const char *lock, uint64_t token,
			 int64_t *value)
{
	char vj[32];
	snprintf(vj, sizeof vj, "%" PRId64, *value);
	struct event ev = {.type = "invoke",
			   .f = write_op ? "write" : "read",
			   .lock = lock,
			   .token = token,
			   .value_json = write_op ? vj : NULL,
			   .mode = shared ? "shared" : NULL};
	emit(&ev);
	int rc = reg_access(write_op, shared, lock, token, value);
	ev.type = rc == 0 ? "ok" : rc == 1 ? "fail" : "info";
	ev.error = rc == 0 ? NULL : rc == 1 ? "REFUSED" : "EIO";
	snprintf(vj, sizeof vj, "%" PRId64, *value);
	ev.value_json = rc == 0 || write_op ? vj : NULL;
	emit(&ev);
	return rc;
}

/* ---------------------------------------------------------- session -- */

static void on_lost(raftlock_session *s, int reason, void *arg)
{
	(void)s;
	(void)reason;
	(void)arg;
	atomic_store(&session_lost, 1);
}

static void session_end(void)
{
	if (session == NULL)
		return;
	struct event ev = {.type = "invoke", .f = "close"};
	emit(&ev);
	int rc = raftlock_session_close(session);
	session = NULL;
	emit_result("close", NULL, rc, 0, NULL);
	session_id = 0;
}

/* Opens a session, retrying until it works or the worker stops. */
static bool session_begin(void)
{
	for (unsigned attempt = 0; !stop_flag && attempt < 100000; attempt++) {
		struct raftlock_session_options so = {.ttl_ms = cfg.ttl_ms,
						      .on_lost = on_lost,
						      .bind_to_connection = cfg.bind_ms != 0,
						      .bind_grace_ms = cfg.bind_ms};
		struct event ev = {.type = "invoke", .f = "open"};
		emit(&ev);
		atomic_store(&session_lost, 0);
		raftlock_session *s = NULL;
		int rc = raftlock_session_open(client, &so, &s);
		if (rc == 0) {
			session = s;
			session_id = raftlock_session_id(s);
		}
		emit_result("open", NULL, rc, 0, NULL);
		if (rc == 0)
			return true;
		sleep_ms(100 + (unsigned)(rand() % 200));
	}
	return false;
}

static bool session_usable(void)
{
	return session != NULL && !atomic_load(&session_lost) && raftlock_session_valid(session);
}

/* ---------------------------------------------------------- holders -- */

/* Reads every lock under the run's prefix and every session, linearizably,
 * and logs them as one "holders" operation. */
static void read_holders(void)
{
	struct event ev = {.type = "invoke", .f = "holders"};
	emit(&ev);
	struct buf b = {0};
	buf_add(&b, "{\"locks\":{");
	char *after = NULL;
	int rc = 0;
	bool first_lock = true;
	for (int page = 0; page < MAX_PAGES; page++) {
		struct raftlock_lock_list *l = NULL;
		rc = raftlock_lock_list(client, cfg.prefix, after, PAGE_LIMIT, false, &l);
		if (rc != 0)
			break;
		for (size_t i = 0; i < l->n_locks; i++) {
			struct raftlock_lock_info *li = &l->locks[i];
			buf_add(&b, "%s", first_lock ? "" : ",");
			first_lock = false;
			buf_str(&b, li->name);
			buf_add(&b, ":[");
			for (size_t h = 0; h < li->n_holders; h++)
				buf_add(&b, "%s{\"token\":%" PRIu64 ",\"session\":%" PRIu64 "}",
					h ? "," : "", li->holders[h].token, li->holders[h].session);
			buf_add(&b, "]");
		}
		bool more = l->more && l->n_locks > 0;
		free(after);
		after = more ? strdup(l->locks[l->n_locks - 1].name) : NULL;
		raftlock_lock_list_free(l);
		if (!more)
			break;
	}
	free(after);
	buf_add(&b, "},\"sessions\":[");
	uint64_t next = 0;
	bool first_session = true;
	for (int page = 0; rc == 0 && page < MAX_PAGES; page++) {
		struct raftlock_session_list *sl = NULL;
		rc = raftlock_session_list(client, next, PAGE_LIMIT, false, &sl);
		if (rc != 0)
			break;
		for (size_t i = 0; i < sl->n_sessions; i++) {
			buf_add(&b, "%s%" PRIu64, first_session ? "" : ",", sl->sessions[i].id);
			first_session = false;
			next = sl->sessions[i].id;
		}
		bool more = sl->more && sl->n_sessions > 0;
		raftlock_session_list_free(sl);
		if (!more)
			break;
	}
	buf_add(&b, "]}");
	emit_result("holders", NULL, rc, 0, rc == 0 ? b.p : NULL);
	free(b.p);
}

/* -------------------------------------------------------- workloads -- */

static unsigned rand_below(unsigned n)
{
	return n ? (unsigned)rand() % n : 0;
}

struct round {
	const char *name;
	const struct raftlock_lock_options *lo;
	enum raftlock_mode mode;
	bool fenced; /* read-modify-write (exclusive) or read (shared) */
	bool nest;   /* acquire twice through the handle, release twice */
	bool reads;  /* read the lock table while holding (durable) */
	unsigned hold_ms;
	int timeout_ms;
};

static const char *kind_name(enum raftlock_kind kind)
{
	return kind == RAFTLOCK_SEMAPHORE ? "semaphore"
	       : kind == RAFTLOCK_RWLOCK  ? "rwlock"
					  : "mutex";
}

static int logged_release(raftlock_lock *lk, const char *f, const char *name, uint64_t token)
{
	struct event ev = {.type = "invoke", .f = f, .lock = name, .token = token};
	emit(&ev);
	uint32_t remaining = 0;
	int rc = raftlock_lock_release(lk, &remaining);
	char vj[16];
	snprintf(vj, sizeof vj, "%u", remaining);
	emit_result(f, name, rc, token, rc == 0 ? vj : NULL);
	return rc;
}

static void hold(const struct round *r)
{
	uint64_t until = mono_ns() + (uint64_t)r->hold_ms * 1000000u;
	for (unsigned i = 0; i < 1000 && mono_ns() < until && !stop_flag; i++) {
		if (r->reads)
			read_holders();
		uint64_t now = mono_ns();
		uint64_t left = now < until ? (until - now) / 1000000u : 0;
		sleep_ms(r->reads && left > 300 ? 300 : (unsigned)left);
	}
}

/* One acquire-hold-release round. Returns false when the session turned
 * out lost. */
static bool round_trip(const struct round *r)
{
	raftlock_lock *lk = NULL;
	if (raftlock_lock_new(session, r->name, r->lo, &lk) != 0)
		return false;
	bool shared = r->mode == RAFTLOCK_SHARED;
	struct event ev = {
		.type = "invoke",
		.f = "acquire",
		.lock = r->name,
		.kind = kind_name(r->lo->kind),
		.limit = r->lo->kind == RAFTLOCK_SEMAPHORE ? r->lo->limit : 0,
		.mode = r->lo->kind == RAFTLOCK_RWLOCK ? (shared ? "shared" : "exclusive") : NULL,
		.timeout_ms = r->timeout_ms};
	emit(&ev);
	uint64_t token = 0;
	int rc = raftlock_lock_acquire(lk, r->mode, 1, r->timeout_ms, &token);
	emit_result("acquire", r->name, rc, rc == 0 ? token : 0, NULL);
	bool alive = rc != RAFTLOCK_ESESSION;
	if (rc != 0) {
		raftlock_lock_free(lk);
		return alive;
	}
	bool nested = false;
	if (r->nest) {
		ev = (struct event){
			.type = "invoke", .f = "reacquire", .lock = r->name, .token = token};
		emit(&ev);
		uint64_t again = 0;
		int rc2 = raftlock_lock_acquire(lk, r->mode, 1, 0, &again);
		emit_result("reacquire", r->name, rc2, again, NULL);
		nested = rc2 == 0;
	}
	/* The read-modify-write of the fenced counter spans the hold: the
	 * holder checks its lease and reads, holds, then writes without
	 * checking again, as a program does that a GC pause (the pause
	 * nemesis) can stop at any point. */
	int64_t value = 0;
	bool have_read = r->fenced && session_usable() &&
			 fenced_access(false, shared, r->name, token, &value) == 0;
	hold(r);
	if (have_read && !shared) {
		value++;
		fenced_access(true, false, r->name, token, &value);
	}
	if (nested)
		logged_release(lk, "rerelease", r->name, token);
	if (logged_release(lk, "release", r->name, token) == RAFTLOCK_ESESSION)
		alive = false;
	raftlock_lock_free(lk);
	return alive;
}

/* A release through a handle that holds nothing: refused with
 * ENOTHOLDER, and whoever holds the lock keeps it (GUARANTEES 5). The
 * checkers see a release acknowledged without a grant. */
static void foreign_release(const char *name, const struct raftlock_lock_options *lo)
{
	raftlock_lock *lk = NULL;
	if (raftlock_lock_new(session, name, lo, &lk) != 0)
		return;
	logged_release(lk, "release", name, 0);
	raftlock_lock_free(lk);
}

/* ------------------------------------------------------------ pairs -- */

/* The fenced read-modify-write of each of n locks held (tokens), spanning
 * one hold of up to --hold-ms, as the mutex round does for one. */
static void pairs_fenced_hold(char *const *names, const uint64_t *tokens, size_t n)
{
	int64_t value[2] = {0, 0};
	bool have[2] = {false, false};
	for (size_t i = 0; i < n; i++)
		have[i] = session_usable() &&
			  fenced_access(false, false, names[i], tokens[i], &value[i]) == 0;
	sleep_ms(rand_below(cfg.hold_ms + 1));
	for (size_t i = 0; i < n; i++) {
		if (have[i]) {
			value[i]++;
			fenced_access(true, false, names[i], tokens[i], &value[i]);
		}
	}
}

/* Both locks as one set: one acquire of both, one release of both.
 * Returns false when the session turned out lost. */
static bool pairs_set(char *const *names)
{
	struct raftlock_lock_options lo = {.kind = RAFTLOCK_MUTEX};
	struct raftlock_multi_item items[2] = {{.name = names[0], .opts = &lo},
					       {.name = names[1], .opts = &lo}};
	raftlock_multi *set = NULL;
	if (raftlock_multi_new(session, items, 2, &set) != 0)
		return false;
	char lj[2 * RAFTLOCK_NAME_MAX + 16], tj[64];
	snprintf(lj, sizeof lj, "[\"%s\",\"%s\"]", names[0], names[1]);
	struct event ev = {.type = "invoke",
			   .f = "acquire",
			   .lock = names[0],
			   .kind = "mutex",
			   .locks_json = lj,
			   .timeout_ms = cfg.acquire_timeout_ms};
	emit(&ev);
	int rc = raftlock_multi_acquire(set, cfg.acquire_timeout_ms);
	uint64_t tokens[2] = {raftlock_multi_token(set, 0), raftlock_multi_token(set, 1)};
	snprintf(tj, sizeof tj, "[%" PRIu64 ",%" PRIu64 "]", tokens[0], tokens[1]);
	ev = (struct event){.lock = names[0],
			    .token = rc == 0 ? tokens[0] : 0,
			    .locks_json = lj,
			    .tokens_json = rc == 0 ? tj : NULL};
	ev.type = rc == 0 ? "ok" : error_definite(rc) || rc == RAFTLOCK_ETIMEDOUT ? "fail" : "info";
	ev.f = "acquire";
	ev.error = rc == 0 ? NULL : error_name(rc);
	emit(&ev);
	bool alive = rc != RAFTLOCK_ESESSION;
	if (rc == 0) {
		pairs_fenced_hold(names, tokens, 2);
		ev = (struct event){.type = "invoke",
				    .f = "release",
				    .lock = names[0],
				    .token = tokens[0],
				    .locks_json = lj,
				    .tokens_json = tj};
		emit(&ev);
		rc = raftlock_multi_release(set);
		ev.type = rc == 0 ? "ok" : error_definite(rc) ? "fail" : "info";
		ev.error = rc == 0 ? NULL : error_name(rc);
		ev.value_json = rc == 0 ? "0" : NULL;
		emit(&ev);
		alive = rc != RAFTLOCK_ESESSION;
	}
	raftlock_multi_free(set);
	return alive;
}

/* The locks one after the other, each with its own handle and wait: two
 * workers taking them in opposite orders close a cycle, refused with
 * EDEADLK for the later wait, which lets go of its first lock. */
static bool pairs_in_turn(char *const *names)
{
	struct raftlock_lock_options lo = {.kind = RAFTLOCK_MUTEX};
	raftlock_lock *lk[2] = {NULL, NULL};
	uint64_t tokens[2] = {0, 0};
	size_t held = 0;
	int rc = 0;
	for (; held < 2; held++) {
		if (raftlock_lock_new(session, names[held], &lo, &lk[held]) != 0)
			break;
		struct event ev = {.type = "invoke",
				   .f = "acquire",
				   .lock = names[held],
				   .kind = "mutex",
				   .timeout_ms = cfg.acquire_timeout_ms};
		emit(&ev);
		rc = raftlock_lock_acquire(lk[held], RAFTLOCK_EXCLUSIVE, 1, cfg.acquire_timeout_ms,
					   &tokens[held]);
		emit_result("acquire", names[held], rc, rc == 0 ? tokens[held] : 0, NULL);
		if (rc != 0) {
			raftlock_lock_free(lk[held]);
			lk[held] = NULL;
			break;
		}
	}
	bool alive = rc != RAFTLOCK_ESESSION;
	if (held == 2)
		pairs_fenced_hold(names, tokens, 2);
	while (held-- > 0) {
		if (logged_release(lk[held], "release", names[held], tokens[held]) ==
		    RAFTLOCK_ESESSION)
			alive = false;
		raftlock_lock_free(lk[held]);
	}
	return alive;
}

static bool pairs_round(void)
{
	static char a[RAFTLOCK_NAME_MAX], b[RAFTLOCK_NAME_MAX];
	unsigned n = cfg.locks < 2 ? 2 : (unsigned)cfg.locks;
	unsigned i = rand_below(n), j = (i + 1 + rand_below(n - 1)) % n;
	snprintf(a, sizeof a, "%slock-%u", cfg.prefix, i);
	snprintf(b, sizeof b, "%slock-%u", cfg.prefix, j);
	char *names[2] = {a, b};
	return rand_below(2) ? pairs_set(names) : pairs_in_turn(names);
}

/* ------------------------------------------------------- elections -- */

/* The I/O thread: one line per change, O_APPEND writes keep it whole. */
static void observed(const struct raftlock_leader_event *ev, void *arg)
{
	const char *name = arg;
	struct buf b = {0};
	buf_add(&b,
		"{\"time\":%" PRIu64 ",\"process\":\"observer-%d\",\"type\":\"observe\","
		"\"lock\":",
		mono_ns(), cfg.id);
	buf_str(&b, name);
	buf_add(&b,
		",\"leader\":%s,\"session\":%" PRIu64 ",\"token\":%" PRIu64 ",\"index\":%" PRIu64
		",\"offset\":%" PRIu32 ",\"lost\":%s}\n",
		ev->has_leader ? "true" : "false", ev->session, ev->token, ev->position.index,
		ev->position.offset, ev->history_lost ? "true" : "false");
	if (b.p != NULL && write(out_fd, b.p, b.len) < 0)
		perror("worker: observe");
	free(b.p);
}

/* Campaign, proclaim, lead (the fenced read-modify-write), resign.
 * Returns false when the session turned out lost. */
static bool election_round(const char *name)
{
	struct event ev = {.type = "invoke", .f = "acquire", .lock = name, .kind = "mutex"};
	emit(&ev);
	raftlock_leader *leader = NULL;
	int rc = raftlock_campaign(session, name, "", cfg.acquire_timeout_ms, &leader);
	uint64_t token = rc == 0 ? raftlock_leader_token(leader) : 0;
	emit_result("acquire", name, rc, token, NULL);
	if (rc != 0)
		return rc != RAFTLOCK_ESESSION;
	char value[64];
	snprintf(value, sizeof value, "worker-%d-%" PRIu64, cfg.id, token);
	ev = (struct event){.type = "invoke", .f = "proclaim", .lock = name, .token = token};
	emit(&ev);
	emit_result("proclaim", name, raftlock_proclaim(leader, value), token, NULL);
	int64_t counter = 0;
	bool have_read =
		session_usable() && fenced_access(false, false, name, token, &counter) == 0;
	sleep_ms(rand_below(cfg.hold_ms + 1));
	if (have_read) {
		counter++;
		fenced_access(true, false, name, token, &counter);
	}
	ev = (struct event){.type = "invoke", .f = "release", .lock = name, .token = token};
	emit(&ev);
	rc = raftlock_resign(leader);
	emit_result("release", name, rc, token, rc == 0 ? "0" : NULL);
	return rc != RAFTLOCK_ESESSION;
}

static void run_workload(void)
{
	uint64_t deadline = mono_ns() + (uint64_t)cfg.time_s * 1000000000u;
	const char *w = cfg.workload;
	struct raftlock_lock_options lo = {.kind = RAFTLOCK_MUTEX};
	if (strcmp(w, "semaphore") == 0) {
		lo.kind = RAFTLOCK_SEMAPHORE;
		lo.limit = cfg.permits;
	} else if (strcmp(w, "rwlock") == 0) {
		lo.kind = RAFTLOCK_RWLOCK;
	}
	char name[RAFTLOCK_NAME_MAX];
	bool election = strcmp(w, "election") == 0;
	static char leader_name[RAFTLOCK_NAME_MAX];
	snprintf(leader_name, sizeof leader_name, "%sleader", cfg.prefix);
	raftlock_observer *obs = NULL;
	if (election && raftlock_observe(client, leader_name, observed, leader_name, &obs) != 0)
		fprintf(stderr, "worker: observe: %s\n", raftlock_errmsg(client));
	for (unsigned long iter = 0; !stop_flag && mono_ns() < deadline && iter < 100000000ul;
	     iter++) {
		if (!session_usable()) {
			if (session != NULL)
				session_end();
			if (!session_begin())
				break;
		}
		struct round r = {.name = name,
				  .lo = &lo,
				  .mode = RAFTLOCK_EXCLUSIVE,
				  .fenced = true,
				  .hold_ms = rand_below(cfg.hold_ms + 1),
				  .timeout_ms = cfg.acquire_timeout_ms};
		snprintf(name, sizeof name, "%slock-%u", cfg.prefix,
			 rand_below((unsigned)cfg.locks));
		if (strcmp(w, "durable") == 0) {
			snprintf(name, sizeof name, "%sdurable-%d", cfg.prefix, cfg.id);
			r.fenced = false;
			r.reads = true;
			r.hold_ms = 2000 + rand_below(4000);
		} else if (strcmp(w, "semaphore") == 0) {
			snprintf(name, sizeof name, "%ssem", cfg.prefix);
			r.fenced = false;
		} else if (strcmp(w, "rwlock") == 0) {
			r.mode = rand_below(10) < 7 ? RAFTLOCK_SHARED : RAFTLOCK_EXCLUSIVE;
		} else if (strcmp(w, "reentrant") == 0) {
			r.nest = true;
		} else if (strcmp(w, "waiters") == 0) {
			/* Everyone queues on one lock, waiting long. */
			snprintf(name, sizeof name, "%squeue", cfg.prefix);
			r.timeout_ms = 5000;
		}
		if (strcmp(w, "mutex") == 0 && rand_below(20) == 0)
			foreign_release(name, &lo);
		bool alive = election                  ? election_round(leader_name)
			     : strcmp(w, "pairs") == 0 ? pairs_round()
						       : round_trip(&r);
		if (strcmp(w, "durable") == 0 && !stop_flag)
			read_holders();
		if (!alive)
			atomic_store(&session_lost, 1);
		sleep_ms(rand_below(20));
	}
	raftlock_observe_cancel(obs);
	session_end();
}

static int run_status(void)
{
	printf("[");
	for (size_t i = 0; i < cfg.n_addresses; i++) {
		struct raftlock_status *st = NULL;
		int rc = raftlock_status_get(client, cfg.addresses[i], &st);
		printf("%s{\"address\":\"%s\"", i ? "," : "", cfg.addresses[i]);
		if (rc == 0) {
			printf(",\"node_id\":%" PRIu64 ",\"role\":\"%s\","
			       "\"ready\":%s,\"term\":%" PRIu64 ",\"leader_id\":%" PRIu64
			       ",\"commit_index\":%" PRIu64 ",\"applied_index\":%" PRIu64
			       ",\"next_token\":%" PRIu64 "}",
			       st->node_id, st->role ? st->role : "", st->ready ? "true" : "false",
			       st->term, st->leader_id, st->commit_index, st->applied_index,
			       st->next_token);
			raftlock_status_free(st);
		} else {
			printf(",\"error\":\"%s\"}", error_name(rc));
		}
	}
	printf("]\n");
	return 0;
}

/* ------------------------------------------------------------- main -- */

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: jepsen-worker --id N --addresses H:P[,H:P...]\n"
		"  [--workload mutex|semaphore|rwlock|reentrant|waiters|durable|pairs|election|\n"
		"   status]\n"
		"  [--prefix P]\n"
		"  [--locks K] [--permits N] [--ttl-ms MS] [--register H:P]\n"
		"  [--out FILE] [--seed S] [--hold-ms MS] [--bind-ms MS]\n"
		"  [--acquire-timeout-ms MS] [--time S] [--request-timeout-ms MS]\n"
		"  [--cacert FILE] [--cert FILE] [--key FILE] [--server-name NAME]\n"
		"  (TLS, as for the raftlock command; default: $RAFTLOCK_CACERT,\n"
		"  $RAFTLOCK_CERT, $RAFTLOCK_KEY, $RAFTLOCK_SERVER_NAME)\n");
	exit(2);
}

static void parse_addresses(char *list)
{
	for (char *save = NULL, *a = strtok_r(list, ",", &save);
	     a && cfg.n_addresses < MAX_ADDRESSES; a = strtok_r(NULL, ",", &save))
		cfg.addresses[cfg.n_addresses++] = a;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"id", 1, 0, 'i'},       {"addresses", 1, 0, 'a'},
		{"workload", 1, 0, 'w'}, {"prefix", 1, 0, 'P'},
		{"locks", 1, 0, 'l'},    {"permits", 1, 0, 'n'},
		{"ttl-ms", 1, 0, 't'},   {"register", 1, 0, 'r'},
		{"out", 1, 0, 'o'},      {"seed", 1, 0, 's'},
		{"hold-ms", 1, 0, 'h'},  {"acquire-timeout-ms", 1, 0, 'T'},
		{"time", 1, 0, 'd'},     {"request-timeout-ms", 1, 0, 'R'},
		{"cacert", 1, 0, 'C'},   {"cert", 1, 0, 'E'},
		{"key", 1, 0, 'K'},      {"server-name", 1, 0, 'N'},
		{"bind-ms", 1, 0, 'B'},  {0, 0, 0, 0},
	};
	const char *tls[4] = {getenv("RAFTLOCK_CACERT"), getenv("RAFTLOCK_CERT"),
			      getenv("RAFTLOCK_KEY"), getenv("RAFTLOCK_SERVER_NAME")};
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'i': cfg.id = atoi(optarg); break;
		case 'a': parse_addresses(optarg); break;
		case 'w': cfg.workload = optarg; break;
		case 'P': cfg.prefix = optarg; break;
		case 'l': cfg.locks = atoi(optarg); break;
		case 'n': cfg.permits = (unsigned)atoi(optarg); break;
		case 't': cfg.ttl_ms = (unsigned)atoi(optarg); break;
		case 'r': cfg.register_addr = optarg; break;
		case 'o': cfg.out = optarg; break;
		case 's': cfg.seed = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'h': cfg.hold_ms = (unsigned)atoi(optarg); break;
		case 'T': cfg.acquire_timeout_ms = atoi(optarg); break;
		case 'd': cfg.time_s = (unsigned)atoi(optarg); break;
		case 'R': cfg.request_timeout_ms = (unsigned)atoi(optarg); break;
		case 'C': tls[0] = optarg; break;
		case 'E': tls[1] = optarg; break;
		case 'K': tls[2] = optarg; break;
		case 'N': tls[3] = optarg; break;
		case 'B': cfg.bind_ms = (unsigned)atoi(optarg); break;
		default: usage();
		}
	}
	if (cfg.n_addresses == 0 || cfg.locks < 1)
		usage();
	bool status = strcmp(cfg.workload, "status") == 0;
	static const char *const workloads[] = {
		"mutex",   "semaphore", "rwlock", "reentrant",
		"waiters", "durable",   "pairs",  "election",
	};
	bool known = status;
	for (size_t i = 0; i < sizeof workloads / sizeof *workloads; i++)
		known = known || strcmp(cfg.workload, workloads[i]) == 0;
	if (!known)
		usage();
	if (!status && cfg.register_addr == NULL) {
		fprintf(stderr, "worker: the workloads need --register\n");
		return 2;
	}
	srand(cfg.seed ^ (unsigned)cfg.id * 2654435761u);
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (cfg.out) {
		out_fd = open(cfg.out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (out_fd < 0) {
			perror(cfg.out);
			return 2;
		}
	}
	char client_name[64];
	snprintf(client_name, sizeof client_name, "jepsen-worker-%d", cfg.id);
	struct raftlock_client_options co = {
		.addresses = cfg.addresses,
		.n_addresses = cfg.n_addresses,
		.client_name = client_name,
		.request_timeout_ms = status ? 1000 : cfg.request_timeout_ms,
		.connect_timeout_ms = status ? 500 : 1000,
	};
	for (int i = 0; i < 4; i++)
		if (tls[i] != NULL && tls[i][0] == '\0')
			tls[i] = NULL; /* an empty variable is unset */
	co.tls_ca_file = tls[0];
	co.tls_cert_file = tls[1];
	co.tls_key_file = tls[2];
	co.tls_server_name = tls[3];
	const char *msg = NULL;
	int rc = raftlock_client_open(&co, &client, &msg);
	if (rc != 0) {
		fprintf(stderr, "worker: %s\n", msg ? msg : raftlock_strerror(rc));
		return 1;
	}
	if (status)
		rc = run_status();
	else
		run_workload();
	raftlock_client_close(client);
	if (reg_fd >= 0)
		close(reg_fd);
	return rc;
}
