/* A hostile keepalive stream on a real 3-node cluster (issue 9 item 6):
 * ids the leader does not know are answered at once and never replicated
 * (EUNAVAILABLE for these, never given out: not open there yet),
 * a session named twice is renewed once, a window's renewals go out in
 * RENEW commands of at most 16,384 sessions (split by test_leases), a
 * connection past its budget of session ids per second, many requests'
 * worth, gets ELIMIT for the excess and is not read until the budget
 * refills, a request over RAFTLOCK_KEEPALIVE_MAX ids is refused by its id
 * naming the bound, the connection going on -- while an honest session
 * keeps its lock and no election happens. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"
#include "frame.h"
#include "lockutil.h"

#define KNOWN 6000          /* sessions the hostile connection renews */
#define RENEW_MAX_IDS 16384 /* server/leases.c */
#define BUDGET 262144       /* --keepalive-max-ids default */
/* The most one request names; the budget is that many requests. */
#define FULL RAFTLOCK_KEEPALIVE_MAX
#define FULLS_A_BUDGET (BUDGET / FULL)
_Static_assert(BUDGET % FULL == 0 && 2 * KNOWN < FULL, "the requests below");
#define TTL_KNOWN_MS 60000
/* The shortest TTL the cluster allows: two of its 3 s election timeouts
 * (GUARANTEES rule 8a). */
#define HONEST_TTL_MS 6000

static struct tcluster cl;

static int setup(void **state)
{
	(void)state;
	/* A long election timeout: a sanitizer build on a loaded machine may
	 * take a while over a budget's 262,144 ids, and this test is about
	 * keepalives (the no-election figure is tests/bench/bounds). */
	tcluster_start(&cl, 3, 3000);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return tcluster_destroy(&cl);
}

/* A counter or gauge of node i's metrics. */
static unsigned long long metric(int i, const char *name)
{
	static char buf[65536];
	assert_int_equal(tcluster_http_get(&cl, i, "/metrics", buf, sizeof buf), 0);
	char key[128];
	snprintf(key, sizeof key, "\nraftlock_%s ", name);
	const char *p = strstr(buf, key);
	if (p == NULL)
		fail_msg("metric %s missing", name);
	return strtoull(p + strlen(key), NULL, 10);
}

static uint64_t term_of(int i)
{
	Raftlock__StatusInfo *st = tcluster_status(&cl, i);
	assert_non_null(st);
	uint64_t term = st->term;
	raftlock__status_info__free_unpacked(st, NULL);
	return term;
}

/* A keepalive naming ids, the first 2 * KNOWN of them (the known sessions
 * in the requests below) with their secret: the rest have none (which
 * would fill more than a frame), and are refused alike. */
static void send_keepalive(int fd, uint64_t id, uint64_t *ids, size_t n)
{
	static ProtobufCBinaryData secrets[2 * KNOWN];
	for (size_t i = 0; i < 2 * KNOWN; i++)
		secrets[i] = raw_secret;
	Raftlock__KeepAliveRequest ka = RAFTLOCK__KEEP_ALIVE_REQUEST__INIT;
	ka.sessions = ids;
	ka.n_sessions = n;
	ka.secrets = secrets;
	ka.n_secrets = n < 2 * KNOWN ? n : 2 * KNOWN;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.id = id;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_KEEPALIVE;
	env.keepalive = &ka;
	assert_int_equal(raw_send_envelope(fd, &env), 0);
}

/* The next envelope on the hostile connection, read in bulk (responses of
 * 160 KB: raw_recv_envelope reads one byte per system call). */
static struct frame_reader reader;

static Raftlock__Envelope *recv_bulk(int fd, int timeout_ms)
{
	uint64_t end = tcluster_now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		const uint8_t *payload;
		size_t n;
		if (frame_reader_next(&reader, &payload, &n) == 1)
			return raftlock__envelope__unpack(NULL, n, payload);
		uint64_t now = tcluster_now_ms();
		struct pollfd p = {fd, POLLIN, 0};
		if (now >= end || poll(&p, 1, (int)(end - now)) <= 0)
			return NULL;
		static uint8_t buf[1 << 16];
		ssize_t got = read(fd, buf, sizeof buf);
		if (got <= 0 || frame_reader_feed(&reader, buf, (size_t)got) != 0)
			return NULL;
	}
}

/* The response to request id; responses to the other requests in flight
 * (answered in any order) are kept until asked for. */
#define EARLY_MAX (FULLS_A_BUDGET + 4)
static Raftlock__Envelope *early[EARLY_MAX];

static Raftlock__Response *recv_response(int fd, uint64_t id, int timeout_ms,
					 Raftlock__Envelope **keep)
{
	for (;;) {
		for (int i = 0; i < EARLY_MAX; i++)
			if (early[i] != NULL && early[i]->id == id) {
				*keep = early[i];
				early[i] = NULL;
				return (*keep)->response;
			}
		Raftlock__Envelope *env = recv_bulk(fd, timeout_ms);
		if (env == NULL)
			return NULL;
		assert_int_equal(env->body_case, RAFTLOCK__ENVELOPE__BODY_RESPONSE);
		int i = 0;
		while (i < EARLY_MAX && early[i] != NULL)
			i++;
		assert_true(i < EARLY_MAX);
		early[i] = env;
	}
}

/* The statuses a full request of `ids` (below) gets: 0 for the known
 * sessions, EUNAVAILABLE for the rest, ELIMIT for the last `refused`. */
static void assert_full_answer(const Raftlock__Response *r, size_t refused)
{
	assert_non_null(r);
	assert_int_equal(r->status, 0);
	assert_int_equal(r->payload_case, RAFTLOCK__RESPONSE__PAYLOAD_KEEPALIVE);
	assert_int_equal(r->keepalive->n_statuses, FULL);
	for (size_t i = 0; i < FULL; i++) {
		int want = i >= FULL - refused ? RAFTLOCK_ELIMIT
			   : i < 2 * KNOWN     ? 0
					       : RAFTLOCK_EUNAVAILABLE;
		assert_int_equal(r->keepalive->statuses[i], want);
		if (want == 0)
			assert_int_equal(r->keepalive->ttl_ms[i], TTL_KNOWN_MS);
	}
}

/* Opens KNOWN sessions over the raw connection, pipelined in groups. */
static void open_sessions(int fd, uint64_t *ids)
{
	for (size_t at = 0; at < KNOWN; at += 2000) {
		for (size_t i = at; i < at + 2000; i++) {
			Raftlock__OpenSessionRequest op = RAFTLOCK__OPEN_SESSION_REQUEST__INIT;
			op.ttl_ms = TTL_KNOWN_MS;
			op.secret = raw_secret;
			Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
			env.id = 1000000 + i;
			env.body_case = RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
			env.open_session = &op;
			assert_int_equal(raw_send_envelope(fd, &env), 0);
		}
		for (size_t i = at; i < at + 2000; i++) {
			Raftlock__Envelope *env;
			Raftlock__Response *r = recv_response(fd, 1000000 + i, 10000, &env);
			assert_non_null(r);
			assert_int_equal(r->status, 0);
			ids[i] = r->result->session;
			raftlock__envelope__free_unpacked(env, NULL);
		}
	}
}

static void test_hostile_keepalives(void **state)
{
	(void)state;
	int L = tcluster_leader(&cl, 10000);
	assert_true(L >= 0);
	uint64_t term0 = term_of(L);

	raftlock_client *hc = tl_client(&cl);
	raftlock_session *hs = tl_session(hc, HONEST_TTL_MS);
	raftlock_lock *hl = tl_lock(hs, "honest");
	uint64_t token = tl_take(hl);

	int fd = raw_connect(cl.client_port[L]);
	assert_true(fd >= 0);
	frame_reader_init(&reader, RAFTLOCK_FRAME_MAX);
	static uint64_t known[KNOWN];
	open_sessions(fd, known);

	/* A full request: every known session twice, then random unknown ids. */
	static uint64_t ids[FULL + 1];
	uint64_t x = 0x9E3779B97F4A7C15ull;
	for (size_t i = 0; i <= FULL; i++) {
		if (i < 2 * KNOWN) {
			ids[i] = known[i % KNOWN];
		} else {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			ids[i] = x | 1ull << 62; /* far above every id handed out */
		}
	}
	tl_sleep_ms(1100); /* a fresh budget period for this connection */
	unsigned long long renewed0 = metric(L, "renew_sessions_total");
	unsigned long long unknown0 = metric(L, "keepalive_unknown_total");
	send_keepalive(fd, 1, ids, FULL);
	Raftlock__Envelope *env;
	Raftlock__Response *r = recv_response(fd, 1, 10000, &env);
	assert_full_answer(r, 0);
	raftlock__envelope__free_unpacked(env, NULL);
	/* Only the known sessions were replicated, each once (plus the honest
	 * client's own renewals), in RENEW commands under the cap. */
	unsigned long long renewed = metric(L, "renew_sessions_total") - renewed0;
	assert_true(renewed >= KNOWN);
	assert_true(renewed <= KNOWN + 100);
	assert_int_equal(metric(L, "keepalive_unknown_total") - unknown0, FULL - 2 * KNOWN);
	assert_true(metric(L, "renew_sessions_max") <= RENEW_MAX_IDS);
	assert_true(metric(L, "renew_sessions_max") > 0);

	/* The budget: 1,000 ids, then a budget's worth of full requests in
	 * the same second; the last 1,000 ids of the last one are refused and
	 * not replicated. */
	tl_sleep_ms(1100);
	unsigned long long refused0 = metric(L, "keepalive_refused_total");
	uint64_t t0 = tcluster_now_ms(); /* the period begins after this */
	send_keepalive(fd, 2, known, 1000);
	for (uint64_t k = 0; k < FULLS_A_BUDGET; k++)
		send_keepalive(fd, 100 + k, ids, FULL);
	r = recv_response(fd, 2, 10000, &env);
	assert_non_null(r);
	assert_int_equal(r->status, 0);
	raftlock__envelope__free_unpacked(env, NULL);
	for (uint64_t k = 0; k < FULLS_A_BUDGET; k++) {
		r = recv_response(fd, 100 + k, 10000, &env);
		assert_full_answer(r, k == FULLS_A_BUDGET - 1 ? 1000 : 0);
		raftlock__envelope__free_unpacked(env, NULL);
	}
	assert_int_equal(metric(L, "keepalive_refused_total") - refused0, 1000);

	/* The budget is spent: the connection is not read until it refills
	 * (the period began when request 2 arrived, after t0). */
	send_keepalive(fd, 4, known, 10);
	r = recv_response(fd, 4, 5000, &env);
	assert_non_null(r);
	uint64_t waited = tcluster_now_ms() - t0;
	if (r->status == RAFTLOCK_ELIMIT) {
		/* read in the same chunk as the last full request: refused
		 * whole, at once */
		assert_non_null(strstr(r->message, "budget"));
	} else {
		assert_int_equal(r->status, 0);
		assert_true(waited >= 990); /* the server's clock may lag by a tick */
	}
	raftlock__envelope__free_unpacked(env, NULL);

	/* One id past the protocol's bound: EPROTO by its id, naming the
	 * bound, nothing renewed; the connection goes on, and a request at
	 * the bound is answered on it. */
	int fd2 = raw_connect(cl.client_port[L]);
	assert_true(fd2 >= 0);
	frame_reader_close(&reader);
	frame_reader_init(&reader, RAFTLOCK_FRAME_MAX);
	unknown0 = metric(L, "keepalive_unknown_total");
	send_keepalive(fd2, 5, ids, FULL + 1);
	r = recv_response(fd2, 5, 10000, &env);
	assert_non_null(r);
	assert_int_equal(r->status, RAFTLOCK_EPROTO);
	char bound[64];
	snprintf(bound, sizeof bound, "RAFTLOCK_KEEPALIVE_MAX (%u)", (unsigned)FULL);
	assert_non_null(strstr(r->message, bound));
	raftlock__envelope__free_unpacked(env, NULL);
	assert_int_equal(metric(L, "keepalive_unknown_total"), unknown0); /* none read */
	send_keepalive(fd2, 6, ids, FULL);
	r = recv_response(fd2, 6, 10000, &env);
	assert_full_answer(r, 0);
	raftlock__envelope__free_unpacked(env, NULL);
	close(fd2);

	/* The honest session kept its lock throughout; nobody was elected. */
	assert_true(raftlock_session_valid(hs));
	assert_int_equal(raftlock_lock_token(hl), token);
	raftlock_client *other = tl_client(&cl);
	raftlock_session *os = tl_session(other, HONEST_TTL_MS);
	raftlock_lock *ol = tl_lock(os, "honest");
	uint64_t t;
	assert_int_equal(raftlock_lock_try(ol, &t), RAFTLOCK_EBUSY);
	assert_int_equal(term_of(L), term0);
	assert_int_equal(tcluster_leader(&cl, 1000), L);

	raftlock_lock_free(ol);
	raftlock_session_close(os);
	raftlock_client_close(other);
	raftlock_lock_release(hl, NULL);
	raftlock_lock_free(hl);
	raftlock_session_close(hs);
	raftlock_client_close(hc);
	close(fd);
	frame_reader_close(&reader);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hostile_keepalives),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
