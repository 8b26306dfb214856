/* test_client_tls.c: TLS on the client port (issue 11, item 2). A 3-node
 * cluster runs with client-tls = mutual and certificates from
 * deploy/make-certs: the cluster's CA with node and client certificates,
 * another CA with a client of its own, and a client of the cluster's CA made
 * under faketime so that it has expired. Every refusal happens at the
 * handshake, names its reason to the client and in the node's log, and
 * leaves the node serving; the leader still reads its followers' STATUS
 * through their TLS client ports (followers.c: a replaced member is found
 * and caught up). Bad settings stop a node at start. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"
#include "codec.h"
#include "frame.h"
#include "raftlock.h"

#include <openssl/ssl.h>

#define HANDSHAKE_TIMEOUT_MS 1000

static char dir[] = "/tmp/raftlock-tls-XXXXXX";
static char certs[300];
static struct tcluster cl;
static const char *timeout_args[] = {"--tls-handshake-timeout-ms", "1000", NULL};

static const char *file(const char *sub, const char *name)
{
	static char buf[8][400];
	static int next;
	char *p = buf[next++ % 8];
	snprintf(p, 400, "%s/%s/%s", dir, sub, name);
	return p;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

static int setup(void **state)
{
	(void)state;
	if (mkdtemp(dir) == NULL)
		return -1;
	if (tcluster_make_certs(dir) != 0)
		return -1;
	snprintf(certs, sizeof certs, "%s/certs", dir);
	cl.client_tls = "mutual";
	cl.tls_dir = certs;
	for (int i = 0; timeout_args[i] != NULL; i++)
		cl.extra_args[i] = timeout_args[i];
	tcluster_start(&cl, 3, 500);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return tcluster_destroy_and_remove(&cl, dir) == 0 ? 0 : -1;
}

/* The node answers a client with a good certificate. */
static void assert_serving(int i)
{
	char err[512] = "";
	Raftlock__StatusInfo *st = raw_tls_status(
		cl.client_port[i], file("certs", "ca.pem"), file("certs", "client-harness.pem"),
		file("certs", "client-harness.key"), err, sizeof err);
	if (st == NULL)
		fail_msg("node %d does not serve a good client: %s", i + 1, err);
	assert_int_equal(st->node_id, (uint64_t)i + 1);
	raftlock__status_info__free_unpacked(st, NULL);
}

/* A client with sub/NAME.pem (or no certificate when name is NULL) is
 * refused with a reason that contains want. */
static void assert_refused(int i, const char *sub, const char *name, const char *want)
{
	char cert[100], key[100], err[512] = "";
	snprintf(cert, sizeof cert, "%s.pem", name ? name : "");
	snprintf(key, sizeof key, "%s.key", name ? name : "");
	Raftlock__StatusInfo *st = raw_tls_status(cl.client_port[i], file("certs", "ca.pem"),
						  name ? file(sub, cert) : NULL,
						  name ? file(sub, key) : NULL, err, sizeof err);
	if (st != NULL)
		fail_msg("node %d answered a client with %s", i + 1,
			 name ? name : "no certificate");
	printf("refused %s: %s\n", name ? name : "(no certificate)", err);
	if (strstr(err, want) == NULL)
		fail_msg("refusal of %s says '%s', not '%s'", name ? name : "no certificate", err,
			 want);
	assert_serving(i);
}

static unsigned long long metric(int i, const char *name)
{
	long long v = tcluster_metric(&cl, i, name);
	assert_true(v >= 0);
	return (unsigned long long)v;
}

/* No certificate, another CA's, an expired one: each refused at the
 * handshake, on the leader and on a follower; another client certificate of
 * the cluster's CA passes. */
static void certificates_refused(void **state)
{
	(void)state;
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	int follower = (leader + 1) % 3;
	unsigned long long before = metric(leader, "raftlock_client_tls_handshake_failures_total");
	for (int k = 0; k < 2; k++) {
		int i = k == 0 ? leader : follower;
		assert_refused(i, "certs", NULL, "certificate required");
		assert_refused(i, "other", "client-mallory", "unknown ca");
		assert_refused(i, "old", "client-old", "certificate expired");
		char err[512] = "";
		Raftlock__StatusInfo *st =
			raw_tls_status(cl.client_port[i], file("certs", "ca.pem"),
				       file("certs", "client-alice.pem"),
				       file("certs", "client-alice.key"), err, sizeof err);
		if (st == NULL)
			fail_msg("alice refused: %s", err);
		raftlock__status_info__free_unpacked(st, NULL);
	}
	assert_true(tcluster_log_has(&cl, leader, "peer did not return a certificate"));
	assert_true(tcluster_log_has(&cl, leader, "certificate verify failed"));
	assert_true(tcluster_log_has(&cl, leader, "certificate has expired"));
	unsigned long long after = metric(leader, "raftlock_client_tls_handshake_failures_total");
	assert_true(after - before >= 3);
}

/* A client that trusts another CA refuses the node: the node shows the
 * cluster's certificate, not one the client can be fooled by. */
static void server_verified(void **state)
{
	(void)state;
	char err[512] = "";
	Raftlock__StatusInfo *st = raw_tls_status(
		cl.client_port[0], file("other", "ca.pem"), file("other", "client-mallory.pem"),
		file("other", "client-mallory.key"), err, sizeof err);
	assert_null(st);
	printf("client trusting another CA: %s\n", err);
	assert_non_null(strstr(err, "certificate verify failed"));
	assert_serving(0);
}

/* A truncated ClientHello, closed at once. */
static const char hello_start[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";

/* Malformed handshakes: plaintext protocol, random bytes, a ClientHello cut
 * short and closed, one cut short and left open (cut off at the handshake
 * deadline). Each closes its connection; the node keeps serving. */
static void malformed_handshakes(void **state)
{
	(void)state;
	int i = tcluster_leader(&cl, 10000);
	assert_true(i >= 0);
	unsigned long long before = metric(i, "raftlock_client_tls_handshake_failures_total");

	/* The plaintext protocol: a STATUS request as a frame. */
	int fd = raw_connect(cl.client_port[i]);
	assert_true(fd >= 0);
	assert_int_equal(raw_send_status(fd), 0);
	assert_null(raw_recv_envelope(fd, 1000));
	assert_true(raw_closed(fd, 2000));
	close(fd);
	assert_serving(i);

	/* Random bytes. */
	char junk[1500];
	srand(7);
	for (size_t k = 0; k < sizeof junk; k++)
		junk[k] = (char)rand();
	junk[0] = 0x16; /* a handshake record, then nonsense */
	fd = raw_connect(cl.client_port[i]);
	assert_true(fd >= 0);
	assert_int_equal(raw_send(fd, junk, sizeof junk), 0);
	assert_true(raw_closed(fd, 2000));
	close(fd);
	assert_serving(i);

	/* A ClientHello cut short, then the client goes away. */
	fd = raw_connect(cl.client_port[i]);
	assert_true(fd >= 0);
	assert_int_equal(raw_send(fd, hello_start, sizeof hello_start - 1), 0);
	close(fd);
	sleep_ms(100);
	assert_serving(i);

	/* ... and one that stays silent: closed at the deadline. */
	fd = raw_connect(cl.client_port[i]);
	assert_true(fd >= 0);
	assert_int_equal(raw_send(fd, hello_start, sizeof hello_start - 1), 0);
	uint64_t t0 = tcluster_now_ms();
	assert_true(raw_closed(fd, 5000));
	uint64_t took = tcluster_now_ms() - t0;
	close(fd);
	printf("measure: a stalled handshake closed after %llu ms (deadline %d ms)\n",
	       (unsigned long long)took, HANDSHAKE_TIMEOUT_MS);
	assert_true(took >= HANDSHAKE_TIMEOUT_MS - 100 && took < HANDSHAKE_TIMEOUT_MS + 1500);
	assert_serving(i);
	assert_true(tcluster_log_has(&cl, i, "not done within 1000 ms"));
	assert_true(tcluster_log_has(&cl, i, "during the TLS handshake"));
	unsigned long long after = metric(i, "raftlock_client_tls_handshake_failures_total");
	assert_true(after - before >= 4);
}

/* What a new TLS connection costs a client: connect, mutual handshake,
 * one STATUS round trip (and, in this harness, loading the client's
 * certificate files into a new context each time). */
static void handshake_time(void **state)
{
	(void)state;
	enum { N = 50 };
	uint64_t t0 = tcluster_now_ms();
	for (int k = 0; k < N; k++)
		assert_serving(k % 3);
	double ms = (double)(tcluster_now_ms() - t0) / N;
	printf("measure: mutual TLS connect + handshake + STATUS: %.2f ms on average (%d)\n", ms,
	       N);
}

/* Pipelined STATUS requests on one connection (answered by the node
 * itself, no raft: the service's own cost, where TLS weighs most), through
 * TLS when t is not NULL, else on plaintext fd. Returns answers per second. */
static double status_rate(struct raw_tls *t, int fd)
{
	enum { BATCH = 100, ROUNDS = 3000 };
	uint8_t *frames = NULL;
	size_t len = 0, cap = 0;
	for (int k = 0; k < BATCH; k++) {
		Raftlock__StatusRequest req = RAFTLOCK__STATUS_REQUEST__INIT;
		Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
		env.id = (uint64_t)k + 1;
		env.body_case = RAFTLOCK__ENVELOPE__BODY_STATUS;
		env.status = &req;
		assert_int_equal(codec_frame_envelope_append(&env, &frames, &len, &cap), 0);
	}
	struct frame_reader r;
	frame_reader_init(&r, RAFTLOCK_FRAME_MAX);
	uint64_t t0 = tcluster_now_ms();
	for (int round = 0; round < ROUNDS; round++) {
		if (t != NULL)
			assert_int_equal(SSL_write(t->ssl, frames, (int)len), (int)len);
		else
			assert_int_equal(raw_send(fd, frames, len), 0);
		for (int got = 0; got < BATCH;) {
			const uint8_t *payload;
			size_t n;
			if (frame_reader_next(&r, &payload, &n) == 1) {
				got++;
				continue;
			}
			char buf[65536];
			int k = t != NULL ? SSL_read(t->ssl, buf, sizeof buf)
					  : (int)read(fd, buf, sizeof buf);
			assert_true(k > 0);
			assert_int_equal(frame_reader_feed(&r, buf, (size_t)k), 0);
		}
	}
	uint64_t ms = tcluster_now_ms() - t0;
	frame_reader_close(&r);
	free(frames);
	return (double)BATCH * ROUNDS * 1000.0 / (double)(ms ? ms : 1);
}

/* What TLS costs the service: STATUS answers per second on one pipelined
 * connection, mutual TLS against a plaintext cluster started alongside. */
static void throughput(void **state)
{
	(void)state;
	struct raw_tls t;
	char err[512];
	assert_int_equal(raw_tls_connect(&t, cl.client_port[0], file("certs", "ca.pem"),
					 file("certs", "client-harness.pem"),
					 file("certs", "client-harness.key"), err, sizeof err),
			 0);
	double tls = status_rate(&t, -1);
	raw_tls_close(&t);
	struct tcluster plain = {0};
	tcluster_start(&plain, 3, 500);
	int fd = raw_connect(plain.client_port[0]);
	assert_true(fd >= 0);
	double clear = status_rate(NULL, fd);
	close(fd);
	assert_int_equal(tcluster_destroy(&plain), 0);
	printf("measure: pipelined STATUS on one connection: %.0f/s plaintext, %.0f/s mutual TLS "
	       "(%.0f%%)\n",
	       clear, tls, 100.0 * tls / clear);
}

/* The leader asks its followers' client ports for their STATUS through TLS,
 * with the node's certificate (followers.c): a member replaced by an empty
 * one is found to have lost its data and is caught up. */
static void followers_checked_over_tls(void **state)
{
	(void)state;
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	int victim = (leader + 2) % 3;
	tcluster_replace(&cl, victim);
	uint64_t t0 = tcluster_now_ms();
	bool seen = false;
	while (!seen && tcluster_now_ms() < t0 + 15000) {
		for (int i = 0; i < 3 && !seen; i++)
			seen = tcluster_log_has(&cl, i, "lost its data");
		if (!seen)
			sleep_ms(100);
	}
	if (!seen)
		fail_msg("no leader noticed the replaced member (logs in %s)", cl.dir);
	/* ... and the member catches up with the new leader. */
	bool caught_up = false;
	while (!caught_up && tcluster_now_ms() < t0 + 20000) {
		int l = tcluster_leader(&cl, 5000);
		Raftlock__StatusInfo *ls = l >= 0 ? tcluster_status(&cl, l) : NULL;
		Raftlock__StatusInfo *vs = tcluster_status(&cl, victim);
		caught_up = ls != NULL && vs != NULL && l != victim &&
			    vs->applied_index >= ls->commit_index && vs->applied_index > 1;
		if (ls)
			raftlock__status_info__free_unpacked(ls, NULL);
		if (vs)
			raftlock__status_info__free_unpacked(vs, NULL);
		if (!caught_up)
			sleep_ms(100);
	}
	printf("measure: replaced member noticed and caught up after %llu ms\n",
	       (unsigned long long)(tcluster_now_ms() - t0));
	assert_true(caught_up);
	for (int i = 0; i < 3; i++)
		assert_false(tcluster_log_has(&cl, i, "client port 127.0.0.1"));
}

/* ------------------------------------------------------------ settings */

static void expect_start(const char *want, int want_status, const char *const extra[])
{
	char *argv[32] = {"raftlockd",  "--id",     "1",
			  "--data-dir", "/tmp/x",   "--cluster",
			  "c",          "--member", "1,127.0.0.1:1,127.0.0.1:2"};
	int k = 9;
	for (int e = 0; extra[e] != NULL; e++)
		argv[k++] = (char *)extra[e];
	argv[k++] = "--check-config";
	argv[k] = NULL;
	char out[4096];
	int st = tcluster_run_raftlockd(argv, out, sizeof out, 10000);
	if (st != want_status || strstr(out, want) == NULL)
		fail_msg("exit %d (want %d): %s (want '%s')", st, want_status, out, want);
}

/* Bad combinations and bad files stop the node, --check-config included. */
static void bad_settings(void **state)
{
	(void)state;
	const char *ca = file("certs", "ca.pem"), *cert = file("certs", "node-1.pem"),
		   *key = file("certs", "node-1.key"), *other_key = file("certs", "node-2.key");
	expect_start("not off, server or mutual", 2, (const char *[]){"--client-tls", "on", NULL});
	expect_start("needs client-tls-ca", 2,
		     (const char *[]){"--client-tls", "mutual", "--client-tls-cert", cert,
				      "--client-tls-key", key, NULL});
	expect_start("needs client-tls-cert and client-tls-key", 2,
		     (const char *[]){"--client-tls", "server", "--client-tls-cert", cert, NULL});
	expect_start("client-tls is off", 2,
		     (const char *[]){"--client-tls-cert", cert, "--client-tls-key", key, NULL});
	expect_start("/nonexistent.pem", 2,
		     (const char *[]){"--client-tls", "server", "--client-tls-cert",
				      "/nonexistent.pem", "--client-tls-key", key, NULL});
	expect_start("node-2.key", 2,
		     (const char *[]){"--client-tls", "server", "--client-tls-cert", cert,
				      "--client-tls-key", other_key, NULL});
	expect_start("tls-handshake-timeout-ms", 2,
		     (const char *[]){"--tls-handshake-timeout-ms", "5", NULL});
	expect_start("client port mutual TLS", 0,
		     (const char *[]){"--client-tls", "mutual", "--client-tls-cert", cert,
				      "--client-tls-key", key, "--client-tls-ca", ca, NULL});
	/* The same keys in a config file. */
	char conf[400];
	snprintf(conf, sizeof conf, "%s/node.conf", dir);
	FILE *f = fopen(conf, "w");
	assert_non_null(f);
	fprintf(f,
		"client-tls = server\nclient-tls-cert = %s\nclient-tls-key = %s\n"
		"client-tls-ca = %s\ntls-handshake-timeout-ms = 2500\n",
		cert, key, ca);
	fclose(f);
	expect_start("client port TLS", 0, (const char *[]){"--config", conf, NULL});
	/* Issue 11, item 4: metrics on loopback unless said otherwise. */
	expect_start("not a loopback address", 2,
		     (const char *[]){"--metrics-address", "0.0.0.0:9464", NULL});
	expect_start("configuration OK", 0,
		     (const char *[]){"--metrics-address", "0.0.0.0:9464", "--metrics-public",
				      "yes", NULL});
	expect_start("configuration OK", 0,
		     (const char *[]){"--metrics-address", "127.0.0.1:9464", NULL});
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bad_settings),
		cmocka_unit_test(certificates_refused),
		cmocka_unit_test(server_verified),
		cmocka_unit_test(malformed_handshakes),
		cmocka_unit_test(handshake_time),
		cmocka_unit_test(throughput),
		cmocka_unit_test(followers_checked_over_tls),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
