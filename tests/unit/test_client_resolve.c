/*
 * test_client_resolve.c: addresses given by name. Their lookup runs off
 * the client's I/O thread and is waited for at most the connect timeout;
 * a resolver that does not answer holds neither the other addresses, nor
 * the client's sessions, nor raftlock_client_close(), and the lookups it
 * leaves behind are freed once it answers. Numeric addresses ask no
 * resolver. Status calls take only their share of the lookups, and a
 * resolver thread blocks every signal. The tests stand in for the
 * resolver (transport_resolver_set) with one that waits until the test
 * lets it answer.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "client.h"
#include "client_fakeserver.h"
#include "clock.h"
#include "raftlock.h"
#include "resolve.h"

#define CONNECT_MS 300
/* A held lookup answers by itself after this long: a test that fails
 * leaves no resolver thread behind for long. */
#define GATE_MAX_MS 5000

/* The stand-in resolver: every name is 127.0.0.1, once the gate opens (or
 * after answer_after_ms), or the error fail. */
static struct gate {
	pthread_mutex_t mu;
	int calls;           /* lookups asked for */
	int inside;          /* lookups waiting at the gate now */
	bool open;           /* lookups answer */
	int answer_after_ms; /* >0: each lookup answers after this long */
	int fail;            /* an EAI_* code to answer with */
	bool v6_first;       /* answer ::1, where nothing listens, first */
	bool only_hung;      /* only names "hung*" wait, other names answer */
} gate = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int gate_lookup(const char *host, const char *port, const struct addrinfo *hints,
		       struct addrinfo **res)
{
	pthread_mutex_lock(&gate.mu);
	gate.calls++;
	gate.inside++;
	uint64_t until = clock_mono_ms() +
			 (gate.answer_after_ms > 0 ? (unsigned)gate.answer_after_ms : GATE_MAX_MS);
	if (gate.only_hung && strncmp(host, "hung", 4) != 0)
		until = 0;
	while (!gate.open && gate.fail == 0 && clock_mono_ms() < until) {
		pthread_mutex_unlock(&gate.mu);
		sleep_ms(5);
		pthread_mutex_lock(&gate.mu);
	}
	int fail = gate.fail;
	bool v6_first = gate.v6_first;
	gate.inside--;
	pthread_mutex_unlock(&gate.mu);
	if (fail != 0)
		return fail;
	struct addrinfo numeric = *hints;
	numeric.ai_flags |= AI_NUMERICHOST;
	int rv = getaddrinfo("127.0.0.1", port, &numeric, res);
	struct addrinfo *v6;
	if (rv == 0 && v6_first && getaddrinfo("::1", port, &numeric, &v6) == 0) {
		/* one list: glibc's freeaddrinfo() frees node by node */
		v6->ai_next = *res;
		*res = v6;
	}
	return rv;
}

static int gate_get(const int *field)
{
	pthread_mutex_lock(&gate.mu);
	int v = *field;
	pthread_mutex_unlock(&gate.mu);
	return v;
}

static void gate_open(void)
{
	pthread_mutex_lock(&gate.mu);
	gate.open = true;
	pthread_mutex_unlock(&gate.mu);
}

static int gate_reset(void **state)
{
	(void)state;
	pthread_mutex_lock(&gate.mu);
	gate.calls = gate.inside = 0;
	gate.open = false;
	gate.answer_after_ms = 0;
	gate.fail = 0;
	gate.v6_first = false;
	gate.only_hung = false;
	pthread_mutex_unlock(&gate.mu);
	return 0;
}

/* Every lookup is freed within a short while of its resolver's answer
 * (LSan would find one that is not at exit only by chance). */
static void assert_lookups_freed(void)
{
	uint64_t until = clock_mono_ms() + 2000;
	while (resolve_live() != 0 && clock_mono_ms() < until)
		sleep_ms(5);
	assert_int_equal(resolve_live(), 0);
}

/* "NAME:PORT" with the port of f. */
static void name_at(char *out, size_t len, const char *name, const struct fake *f)
{
	snprintf(out, len, "%s:%s", name, strrchr(f->addr, ':') + 1);
}

/* A client of addrs (the first is tried first), names looked up by
 * lookup (NULL: getaddrinfo). */
static raftlock_client *client_for(const char **addrs, size_t n, unsigned request_ms,
				   resolve_fn lookup)
{
	struct raftlock_client_options o = {
		.addresses = addrs,
		.n_addresses = n,
		.client_name = "test",
		.request_timeout_ms = request_ms,
		.connect_timeout_ms = CONNECT_MS,
	};
	raftlock_client *c = NULL;
	assert_int_equal(raftlock_client_open(&o, &c, NULL), 0);
	transport_resolver_set(&c->t, lookup);
	pthread_mutex_lock(&c->t.mu);
	c->t.addr_next = 0; /* it starts at a random one */
	pthread_mutex_unlock(&c->t.mu);
	return c;
}

/* What began at t0 (clock_mono_ms) took lo_ms or more, and less than
 * hi_ms. */
static void assert_took(const char *what, uint64_t t0, uint64_t lo_ms, uint64_t hi_ms)
{
	uint64_t took = clock_mono_ms() - t0;
	if (took < lo_ms || took >= hi_ms)
		fail_msg("%s took %llu ms", what, (unsigned long long)took);
}

/* raftlock_client_close(c) returns within bound_ms while a lookup waits
 * at the gate; once the gate opens, every lookup is freed. */
static void close_while_held(raftlock_client *c, uint64_t bound_ms)
{
	assert_int_equal(gate_get(&gate.inside), 1);
	uint64_t t0 = clock_mono_ms();
	raftlock_client_close(c);
	assert_took("raftlock_client_close", t0, 0, bound_ms);
	assert_int_equal(gate_get(&gate.inside), 1); /* close did not wait for it */
	gate_open();
	assert_lookups_freed();
}

/* --------------------------------------------------------------- tests -- */

/* A name whose resolver does not answer costs one connect timeout: the
 * next address, numeric, serves the call; close does not wait for the
 * lookup, which is freed once it answers. */
static void test_hung_name_then_numeric(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char name[64];
	name_at(name, sizeof name, "hung.test", f);
	const char *addrs[] = {name, f->addr};
	raftlock_client *c = client_for(addrs, 2, 5000, gate_lookup);
	raftlock_session *s = NULL;
	uint64_t t0 = clock_mono_ms();
	assert_int_equal(raftlock_session_open(c, NULL, &s), 0);
	assert_took("session open", t0, CONNECT_MS - 10, CONNECT_MS + 900);
	assert_int_equal(gate_get(&gate.calls), 1);
	assert_int_equal(raftlock_session_close(s), 0);
	close_while_held(c, 500);
	fake_stop(f);
}

/* raftlock_client_close() returns at once while its I/O thread waits for
 * a lookup whose resolver does not answer; the lookup is freed when it
 * answers, after the client is gone. */
static void test_close_while_lookup_hangs(void **state)
{
	(void)state;
	const char *addrs[] = {"hung.test:7001"};
	raftlock_client *c = client_for(addrs, 1, 5000, gate_lookup);
	/* a request the I/O thread connects for, which nobody waits for */
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__StatusRequest status = RAFTLOCK__STATUS_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_STATUS;
	env.status = &status;
	struct request *req;
	pthread_mutex_lock(&c->t.mu);
	assert_int_equal(transport_submit(&c->t, &env, false, &req), 0);
	pthread_mutex_unlock(&c->t.mu);
	uint64_t until = clock_mono_ms() + 2000;
	while (gate_get(&gate.inside) == 0 && clock_mono_ms() < until)
		sleep_ms(1);
	close_while_held(c, 200); /* the request goes with the client */
}

/* A client's session keeps working while one of its addresses is a name
 * whose resolver does not answer: a call that loses its connection goes
 * past the name to the numeric address in about one connect timeout. */
static void test_session_works_past_hung_name(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char name[64];
	name_at(name, sizeof name, "hung.test", f);
	const char *addrs[] = {f->addr, name};
	raftlock_client *c = client_for(addrs, 2, 5000, gate_lookup);
	raftlock_session *s = NULL;
	raftlock_lock *l = NULL;
	assert_int_equal(raftlock_session_open(c, NULL, &s), 0);
	assert_int_equal(raftlock_lock_new(s, "a", NULL, &l), 0);
	assert_int_equal(gate_get(&gate.calls), 0);
	FAKE_SET(f, drop_first_acquire, true); /* the next connect: the name */
	uint64_t token = 0, t0 = clock_mono_ms();
	assert_int_equal(raftlock_lock_try(l, &token), 0);
	assert_took("try-lock", t0, CONNECT_MS - 10, CONNECT_MS + 1200);
	assert_int_equal(gate_get(&gate.calls), 1);
	assert_true(raftlock_session_valid(s));
	assert_int_equal(raftlock_lock_release(l, NULL), 0);
	raftlock_lock_free(l);
	assert_int_equal(raftlock_session_close(s), 0);
	close_while_held(c, 500);
	fake_stop(f);
}

/* With only a name that does not resolve in time, a call ends at its
 * timeout with RAFTLOCK_ECONNECTION and the message says why; the lookup
 * is asked for once, each attempt waiting for it again rather than
 * starting another; close returns at once with the lookup still held. */
static void test_hung_name_alone(void **state)
{
	(void)state;
	const char *addrs[] = {"hung.test:7001"};
	raftlock_client *c = client_for(addrs, 1, 1000, gate_lookup);
	raftlock_session *s = NULL;
	uint64_t t0 = clock_mono_ms();
	assert_int_equal(raftlock_session_open(c, NULL, &s), RAFTLOCK_ECONNECTION);
	assert_took("session open", t0, 990, 2000);
	assert_null(s);
	const char *msg = raftlock_errmsg(c);
	if (strstr(msg, "hung.test:7001: name lookup of 'hung.test' took longer than 300 ms") ==
	    NULL)
		fail_msg("message: %s", msg);
	assert_int_equal(gate_get(&gate.calls), 1);
	close_while_held(c, 500);
}

/* A resolver slower than the connect timeout is still waited for: the
 * attempts after the first take its answer when it comes. */
static void test_slow_name_connects(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char name[64];
	name_at(name, sizeof name, "slow.test", f);
	pthread_mutex_lock(&gate.mu);
	gate.answer_after_ms = CONNECT_MS * 5 / 2;
	pthread_mutex_unlock(&gate.mu);
	const char *addrs[] = {name};
	raftlock_client *c = client_for(addrs, 1, 5000, gate_lookup);
	raftlock_session *s = NULL;
	assert_int_equal(raftlock_session_open(c, NULL, &s), 0);
	assert_int_equal(gate_get(&gate.calls), 1);
	assert_int_equal(raftlock_session_close(s), 0);
	raftlock_client_close(c);
	assert_lookups_freed();
	fake_stop(f);
}

/* A name's addresses are tried in the resolver's order: one where nothing
 * listens (::1, or no IPv6 at all) is passed for the next. */
static void test_next_address_of_name(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char name[64];
	name_at(name, sizeof name, "two.test", f);
	pthread_mutex_lock(&gate.mu);
	gate.open = true;
	gate.v6_first = true;
	pthread_mutex_unlock(&gate.mu);
	const char *addrs[] = {name};
	raftlock_client *c = client_for(addrs, 1, 5000, gate_lookup);
	raftlock_session *s = NULL;
	uint64_t t0 = clock_mono_ms();
	assert_int_equal(raftlock_session_open(c, NULL, &s), 0);
	assert_took("session open", t0, 0, CONNECT_MS);
	assert_int_equal(gate_get(&gate.calls), 1);
	assert_int_equal(raftlock_session_close(s), 0);
	raftlock_client_close(c);
	assert_lookups_freed();
	fake_stop(f);
}

/* A name the resolver knows no address of: RAFTLOCK_ECONNECTION, and the
 * message gives the resolver's reason. */
static void test_unknown_name(void **state)
{
	(void)state;
	pthread_mutex_lock(&gate.mu);
	gate.fail = EAI_NONAME;
	pthread_mutex_unlock(&gate.mu);
	const char *addrs[] = {"nowhere.test:7001"};
	raftlock_client *c = client_for(addrs, 1, 500, gate_lookup);
	raftlock_session *s = NULL;
	assert_int_equal(raftlock_session_open(c, NULL, &s), RAFTLOCK_ECONNECTION);
	const char *msg = raftlock_errmsg(c);
	char want[160];
	snprintf(want, sizeof want, "nowhere.test:7001: name lookup of 'nowhere.test' failed: %s",
		 gai_strerror(EAI_NONAME));
	if (strstr(msg, want) == NULL)
		fail_msg("message: %s", msg);
	assert_true(gate_get(&gate.calls) >= 1);
	raftlock_client_close(c);
	assert_lookups_freed();
}

/* Numeric addresses ask no resolver. */
static void test_numeric_asks_no_resolver(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	const char *addrs[] = {f->addr};
	raftlock_client *c = client_for(addrs, 1, 5000, gate_lookup);
	raftlock_session *s = NULL;
	assert_int_equal(raftlock_session_open(c, NULL, &s), 0);
	assert_int_equal(gate_get(&gate.calls), 0);
	assert_int_equal(resolve_live(), 0);
	assert_int_equal(raftlock_session_close(s), 0);
	raftlock_client_close(c);
	fake_stop(f);
}

/* A real name still connects, through the system's resolver (the fake
 * listens on 127.0.0.1; "localhost" may name ::1 first). */
static void test_localhost_connects(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char name[64];
	name_at(name, sizeof name, "localhost", f);
	const char *addrs[] = {name};
	raftlock_client *c = client_for(addrs, 1, 5000, NULL);
	raftlock_session *s = NULL;
	assert_int_equal(raftlock_session_open(c, NULL, &s), 0);
	assert_int_equal(raftlock_session_close(s), 0);
	struct raftlock_status *st = NULL;
	assert_int_equal(raftlock_status_get(c, name, &st), 0);
	raftlock_status_free(st);
	raftlock_client_close(c);
	assert_lookups_freed();
	fake_stop(f);
}

/* A client for status calls, of the address good, with a connect timeout
 * short enough for RESOLVE_MAX calls well within GATE_MAX_MS; only the
 * names "hung*" wait at the gate. */
static raftlock_client *monitor_of_hung_names(const char *good)
{
	pthread_mutex_lock(&gate.mu);
	gate.only_hung = true;
	pthread_mutex_unlock(&gate.mu);
	const char *addrs[] = {good};
	struct raftlock_client_options o = {
		.addresses = addrs,
		.n_addresses = 1,
		.client_name = "monitor",
		.request_timeout_ms = 5000,
		.connect_timeout_ms = 20,
	};
	raftlock_client *monitor = NULL;
	assert_int_equal(raftlock_client_open(&o, &monitor, NULL), 0);
	transport_resolver_set(&monitor->t, gate_lookup);
	return monitor;
}

/* A program that asks names whose resolver does not answer for their
 * status more often than RESOLVE_MAX lookups allow (each name once, so
 * that no lookup is joined) leaves connections their share: a session
 * still connects to another name, and the status calls past their share
 * fail at once, saying why. */
static void test_status_calls_leave_room(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char good[64], hung[64];
	name_at(good, sizeof good, "good.test", f);
	raftlock_client *monitor = monitor_of_hung_names(good);
	const char *addrs[] = {good};
	for (int i = 0; i < RESOLVE_MAX + 8; i++) {
		char prefix[32];
		snprintf(prefix, sizeof prefix, "hung-%d.test", i);
		name_at(hung, sizeof hung, prefix, f);
		struct raftlock_status *st = NULL;
		assert_int_equal(raftlock_status_get(monitor, hung, &st), RAFTLOCK_ECONNECTION);
	}
	const char *msg = raftlock_errmsg(monitor);
	char want[128];
	snprintf(want, sizeof want,
		 "name lookup of 'hung-%d.test' not started: status calls have their %d lookups "
		 "under way",
		 RESOLVE_MAX + 7, RESOLVE_EXCHANGE_MAX);
	if (strstr(msg, want) == NULL)
		fail_msg("message: %s", msg);
	/* a request timeout well before the hung lookups end by themselves */
	raftlock_client *c = client_for(addrs, 1, 1000, gate_lookup);
	raftlock_session *s = NULL;
	assert_int_equal(raftlock_session_open(c, NULL, &s), 0);
	assert_true(gate_get(&gate.calls) <= RESOLVE_EXCHANGE_MAX + 1); /* and good.test */
	assert_int_equal(raftlock_session_close(s), 0);
	raftlock_client_close(c);
	raftlock_client_close(monitor);
	gate_open();
	assert_lookups_freed();
	fake_stop(f);
}

/* With RESOLVE_MAX lookups of connections waiting for their resolver,
 * the status calls' share is empty, yet the cap refuses them too: their
 * message names the cap that refused, RESOLVE_MAX, not their share, as
 * does a connection's refused lookup. */
static void test_full_cap_named_by_status_calls(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char good[64], hung[64], status_why[512], conn_why[256] = "";
	struct resolve *held[RESOLVE_MAX] = {NULL}, *refused = NULL;
	int started = 0;
	for (int i = 0; i < RESOLVE_MAX; i++) {
		snprintf(hung, sizeof hung, "hung-conn-%d.test", i);
		started += resolve_start(hung, "7001", gate_lookup, RESOLVE_CONNECTION, &held[i],
					 NULL, 0) == 0;
	}
	name_at(good, sizeof good, "good.test", f);
	raftlock_client *monitor = monitor_of_hung_names(good);
	name_at(hung, sizeof hung, "hung-status.test", f);
	struct raftlock_status *st = NULL;
	int status_rv = raftlock_status_get(monitor, hung, &st);
	snprintf(status_why, sizeof status_why, "%s", raftlock_errmsg(monitor));
	int conn_rv = resolve_start("hung-more.test", "7001", gate_lookup, RESOLVE_CONNECTION,
				    &refused, conn_why, sizeof conn_why);
	/* every lookup let go before any assert: the next tests count them */
	raftlock_client_close(monitor);
	gate_open();
	for (int i = 0; i < RESOLVE_MAX; i++)
		resolve_drop(held[i]);
	resolve_drop(refused);
	assert_lookups_freed();
	fake_stop(f);

	assert_int_equal(started, RESOLVE_MAX);
	assert_int_equal(status_rv, RAFTLOCK_ECONNECTION);
	char want[128];
	snprintf(want, sizeof want,
		 "name lookup of 'hung-status.test' not started: the process has its %d lookups "
		 "under way",
		 RESOLVE_MAX);
	if (strstr(status_why, want) == NULL)
		fail_msg("status call: %s", status_why);
	assert_int_equal(conn_rv, RAFTLOCK_ELIMIT);
	snprintf(want, sizeof want,
		 "name lookup of 'hung-more.test' not started: the process has its %d lookups "
		 "under way",
		 RESOLVE_MAX);
	if (strstr(conn_why, want) == NULL)
		fail_msg("connection: %s", conn_why);
}

/* A monitor that asks one name whose resolver does not answer for its
 * status again and again (more often than RESOLVE_EXCHANGE_MAX) holds one
 * lookup, joined by each call: every call waits its connect timeout and
 * says so, and a status call of a healthy name still works. */
static void test_status_calls_of_one_hung_name_share_a_lookup(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char good[64], hung[64];
	name_at(good, sizeof good, "good.test", f);
	name_at(hung, sizeof hung, "hung.test", f);
	raftlock_client *monitor = monitor_of_hung_names(good);
	for (int i = 0; i < RESOLVE_EXCHANGE_MAX + 4; i++) {
		struct raftlock_status *st = NULL;
		assert_int_equal(raftlock_status_get(monitor, hung, &st), RAFTLOCK_ECONNECTION);
		const char *msg = raftlock_errmsg(monitor);
		if (strstr(msg, "name lookup of 'hung.test' took longer than 20 ms") == NULL)
			fail_msg("call %d: %s", i, msg);
	}
	assert_int_equal(gate_get(&gate.calls), 1);
	struct raftlock_status *st = NULL;
	assert_int_equal(raftlock_status_get(monitor, good, &st), 0);
	raftlock_status_free(st);
	assert_int_equal(gate_get(&gate.calls), 2);
	raftlock_client_close(monitor);
	gate_open();
	assert_lookups_freed();
	fake_stop(f);
}

/* Waits until r's answer is in, and checks it: 127.0.0.1:port, or with
 * fail the failure and its message. */
static void assert_answer(struct resolve *r, const char *port, int fail)
{
	struct pollfd p = {.fd = resolve_fd(r), .events = POLLIN};
	assert_int_equal(poll(&p, 1, 2000), 1);
	const struct addrinfo *ai = NULL;
	char why[128] = "";
	int rv = resolve_answer(r, &ai, why, sizeof why);
	if (fail != 0) {
		assert_int_equal(rv, RAFTLOCK_ECONNECTION);
		if (strstr(why, "name lookup of 'join.test' failed") == NULL)
			fail_msg("message: %s", why);
		return;
	}
	assert_int_equal(rv, 0);
	assert_non_null(ai);
	assert_int_equal(ai->ai_family, AF_INET);
	const struct sockaddr_in *in = (const struct sockaddr_in *)ai->ai_addr;
	assert_int_equal(ntohl(in->sin_addr.s_addr), INADDR_LOOPBACK);
	char want[8];
	snprintf(want, sizeof want, "%u", ntohs(in->sin_port));
	assert_string_equal(want, port);
}

#define JOINERS 5

/* Owners of a lookup of one host:port under way, of either use, join it:
 * the resolver is asked once, and its answer, an address or a failure,
 * reaches every owner, whichever lets go first. Another port is another
 * lookup, and so is one asked for after the answer came. */
static void joined_lookup_answers_every_owner(int fail)
{
	struct resolve *r[JOINERS] = {NULL}, *other = NULL, *after = NULL;
	for (int i = 0; i < JOINERS; i++)
		assert_int_equal(resolve_start("join.test", "7001", gate_lookup,
					       i % 2 ? RESOLVE_ONE_OFF : RESOLVE_CONNECTION, &r[i],
					       NULL, 0),
				 0);
	assert_int_equal(resolve_start("join.test", "7002", gate_lookup, RESOLVE_CONNECTION, &other,
				       NULL, 0),
			 0);
	uint64_t until = clock_mono_ms() + 2000;
	while (gate_get(&gate.inside) < 2 && clock_mono_ms() < until)
		sleep_ms(1);
	assert_int_equal(gate_get(&gate.inside), 2);
	assert_int_equal(gate_get(&gate.calls), 2);
	resolve_drop(r[0]); /* the first owner goes before the answer */
	pthread_mutex_lock(&gate.mu);
	gate.open = true;
	gate.fail = fail;
	pthread_mutex_unlock(&gate.mu);
	for (int i = 1; i < JOINERS; i++)
		assert_answer(r[i], "7001", fail);
	assert_answer(other, "7002", fail);
	assert_int_equal(gate_get(&gate.calls), 2);
	assert_int_equal(
		resolve_start("join.test", "7001", gate_lookup, RESOLVE_ONE_OFF, &after, NULL, 0),
		0);
	assert_answer(after, "7001", fail);
	assert_int_equal(gate_get(&gate.calls), 3);
	for (int i = 1; i < JOINERS; i++)
		resolve_drop(r[i]);
	resolve_drop(other);
	resolve_drop(after);
	assert_lookups_freed();
}

static void test_joined_lookup_answers_every_owner(void **state)
{
	joined_lookup_answers_every_owner(0);
	gate_reset(state);
	joined_lookup_answers_every_owner(EAI_NONAME);
}

/* A child forked while a lookup of a name hangs starts its own lookup of
 * that name: the parent's has no thread in the child and would never
 * answer there. The child's resolver answers at once. */
static void test_forked_child_looks_up_anew(void **state)
{
	(void)state;
	struct resolve *hung = NULL;
	assert_int_equal(
		resolve_start("fork.test", "7003", gate_lookup, RESOLVE_CONNECTION, &hung, NULL, 0),
		0);
	uint64_t until = clock_mono_ms() + 2000;
	while (gate_get(&gate.inside) < 1 && clock_mono_ms() < until)
		sleep_ms(1);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		/* the parent's resolver thread may have held it at the fork */
		pthread_mutex_init(&gate.mu, NULL);
		gate.open = true;
		struct resolve *r = NULL;
		if (resolve_start("fork.test", "7003", gate_lookup, RESOLVE_CONNECTION, &r, NULL,
				  0) != 0)
			_exit(2);
		struct pollfd p = {.fd = resolve_fd(r), .events = POLLIN};
		const struct addrinfo *ai = NULL;
		char why[128];
		_exit(poll(&p, 1, 2000) == 1 && resolve_answer(r, &ai, why, sizeof why) == 0 ? 0
											     : 1);
	}
	int status = 0;
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	gate_open();
	assert_answer(hung, "7003", 0);
	resolve_drop(hung);
	assert_lookups_freed();
}

#define SHARERS 3

/* Clients of one name whose resolver does not answer share its lookup:
 * each one's call ends at its timeout, the resolver is asked once, a
 * status call joins the same lookup, and closing every client while the
 * lookup is still held by all of them frees it all once it answers. */
static void test_clients_share_a_hung_lookup(void **state)
{
	(void)state;
	const char *addrs[] = {"hung.test:7001"};
	raftlock_client *c[SHARERS];
	for (int i = 0; i < SHARERS; i++) {
		c[i] = client_for(addrs, 1, 500, gate_lookup);
		raftlock_session *s = NULL;
		assert_int_equal(raftlock_session_open(c[i], NULL, &s), RAFTLOCK_ECONNECTION);
		const char *msg = raftlock_errmsg(c[i]);
		if (strstr(msg, "name lookup of 'hung.test' took longer than") == NULL)
			fail_msg("client %d: %s", i, msg);
	}
	struct raftlock_status *st = NULL;
	assert_int_equal(raftlock_status_get(c[0], addrs[0], &st), RAFTLOCK_ECONNECTION);
	assert_int_equal(gate_get(&gate.calls), 1);
	assert_int_equal(gate_get(&gate.inside), 1);
	uint64_t t0 = clock_mono_ms();
	for (int i = 0; i < SHARERS; i++)
		raftlock_client_close(c[i]);
	assert_took("closing the clients", t0, 0, 500);
	assert_int_equal(gate_get(&gate.inside), 1);
	gate_open();
	assert_lookups_freed();
}

/* What the stand-in resolver below found its thread's signal mask to be. */
static sigset_t lookup_mask;

static int mask_lookup(const char *host, const char *port, const struct addrinfo *hints,
		       struct addrinfo **res)
{
	(void)host, (void)port, (void)hints, (void)res;
	pthread_sigmask(SIG_SETMASK, NULL, &lookup_mask);
	return EAI_NONAME;
}

/* A resolver thread blocks the signals meant for the process, and the
 * caller's mask is as it was. */
static void test_resolver_blocks_signals(void **state)
{
	(void)state;
	sigset_t before, after;
	pthread_sigmask(SIG_SETMASK, NULL, &before);
	struct resolve *r = NULL;
	assert_int_equal(
		resolve_start("masked.test", "7001", mask_lookup, RESOLVE_CONNECTION, &r, NULL, 0),
		0);
	pthread_sigmask(SIG_SETMASK, NULL, &after);
	struct pollfd p = {.fd = resolve_fd(r), .events = POLLIN};
	int polled = poll(&p, 1, 2000);
	resolve_drop(r); /* before any assert: the next test counts lookups */
	assert_int_equal(polled, 1);
	const int sigs[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGUSR1,
			    SIGUSR2, SIGALRM, SIGPIPE, SIGCHLD};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		if (sigismember(&lookup_mask, sigs[i]) != 1)
			fail_msg("signal %d reaches the resolver thread", sigs[i]);
		assert_int_equal(sigismember(&after, sigs[i]), sigismember(&before, sigs[i]));
	}
	assert_lookups_freed();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_hung_name_then_numeric, gate_reset),
		cmocka_unit_test_setup(test_close_while_lookup_hangs, gate_reset),
		cmocka_unit_test_setup(test_session_works_past_hung_name, gate_reset),
		cmocka_unit_test_setup(test_hung_name_alone, gate_reset),
		cmocka_unit_test_setup(test_slow_name_connects, gate_reset),
		cmocka_unit_test_setup(test_next_address_of_name, gate_reset),
		cmocka_unit_test_setup(test_unknown_name, gate_reset),
		cmocka_unit_test_setup(test_numeric_asks_no_resolver, gate_reset),
		cmocka_unit_test_setup(test_localhost_connects, gate_reset),
		cmocka_unit_test_setup(test_resolver_blocks_signals, gate_reset),
		cmocka_unit_test_setup(test_status_calls_leave_room, gate_reset),
		cmocka_unit_test_setup(test_full_cap_named_by_status_calls, gate_reset),
		cmocka_unit_test_setup(test_status_calls_of_one_hung_name_share_a_lookup,
				       gate_reset),
		cmocka_unit_test_setup(test_joined_lookup_answers_every_owner, gate_reset),
		cmocka_unit_test_setup(test_forked_child_looks_up_anew, gate_reset),
		cmocka_unit_test_setup(test_clients_share_a_hung_lookup, gate_reset),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
