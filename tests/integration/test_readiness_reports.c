/* test_readiness_reports.c: a ready leader tells each follower, in the
 * STATUS it sends the follower's client port, its term and applied index,
 * and that report decides the follower's readiness (/readyz, systemd's
 * READY=1; docs/OPERATIONS.md, "When a node can serve"). Anyone who
 * reaches the port can send such a STATUS: here a client forges reports
 * of the current term with an applied index far ahead, which would keep
 * a serving follower unready until the leader's next report, and the
 * follower's /readyz stays 200 after every one of them. On a plaintext
 * client port no report is taken at all (the followers become ready on
 * their leader's own STATUS answer); with client-tls = mutual the
 * leader's reports, over its certificate, are taken, and those of a client
 * certificate of the same CA are not. */
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
#include "raftlock.h"

#define FORGERIES 20

static char dir[] = "/tmp/raftlock-reports-XXXXXX";
static char certs[300];
static struct tcluster cl;

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* Node i's GET /readyz status code, -1 if it did not answer. */
static int readyz(int i)
{
	char out[4096];
	int code = 0;
	if (tcluster_http_get(&cl, i, "/readyz", out, sizeof out) != 0 ||
	    sscanf(out, "HTTP/1.1 %d", &code) != 1)
		return -1;
	return code;
}

/* A follower of the ready leader that serves, and its term. */
static int serving_follower(uint64_t *term)
{
	int leader = tcluster_leader(&cl, 15000);
	assert_true(leader >= 0);
	int f = (leader + 1) % cl.n;
	for (int tries = 0; readyz(f) != 200; tries++) {
		if (tries >= 150)
			fail_msg("follower %d: /readyz not 200 in 15 s", f + 1);
		sleep_ms(100);
	}
	Raftlock__StatusInfo *st = tcluster_status(&cl, f);
	assert_non_null(st);
	*term = st->term;
	raftlock__status_info__free_unpacked(st, NULL);
	return f;
}

/* A STATUS carrying a leader's report: term, and an applied index no
 * follower has reached. */
static void forged(Raftlock__Envelope *env, Raftlock__StatusRequest *req, uint64_t id,
		   uint64_t term)
{
	raftlock__status_request__init(req);
	req->leader_term = term;
	req->leader_applied = UINT64_C(1) << 40;
	raftlock__envelope__init(env);
	env->id = id;
	env->body_case = RAFTLOCK__ENVELOPE__BODY_STATUS;
	env->status = req;
}

static long long metric(int i, const char *name)
{
	return tcluster_metric(&cl, i, name);
}

/* Plaintext: a client's forged reports leave the follower serving, and
 * none is taken, the leader's neither (every follower became ready on its
 * leader's answer). */
static void forged_reports_plaintext(void **state)
{
	(void)state;
	tcluster_start(&cl, 3, 1000);
	uint64_t term;
	int f = serving_follower(&term);
	long long ignored = metric(f, "raftlock_readiness_reports_ignored_total");
	int fd = raw_connect(cl.client_port[f]);
	assert_true(fd >= 0);
	for (int k = 1; k <= FORGERIES; k++) {
		Raftlock__Envelope env;
		Raftlock__StatusRequest req;
		forged(&env, &req, (uint64_t)k, term);
		assert_int_equal(raw_send_envelope(fd, &env), 0);
		Raftlock__Envelope *answer = raw_recv_envelope(fd, 5000);
		assert_non_null(answer);
		raftlock__envelope__free_unpacked(answer, NULL);
		/* answered: the report went through dispatch */
		int code = readyz(f);
		if (code != 200)
			fail_msg("follower %d: /readyz %d after forged report %d", f + 1, code, k);
		sleep_ms(20);
	}
	close(fd);
	assert_true(metric(f, "raftlock_readiness_reports_ignored_total") >= ignored + FORGERIES);
	for (int i = 0; i < cl.n; i++)
		assert_int_equal(metric(i, "raftlock_readiness_reports_taken_total"), 0);
	assert_int_equal(tcluster_destroy(&cl), 0);
}

/* client-tls = mutual: the leader's reports are taken (its certificate is
 * raftlock-node-<id>); alice's, a client certificate of the cluster's CA,
 * are not, and the follower keeps serving. */
static void forged_reports_mutual_tls(void **state)
{
	(void)state;
	memset(&cl, 0, sizeof cl);
	assert_non_null(mkdtemp(dir));
	assert_int_equal(tcluster_make_certs(dir), 0);
	snprintf(certs, sizeof certs, "%s/certs", dir);
	cl.client_tls = "mutual";
	cl.tls_dir = certs;
	tcluster_start(&cl, 3, 1000);
	uint64_t term;
	int f = serving_follower(&term);
	for (int tries = 0; metric(f, "raftlock_readiness_reports_taken_total") < 1; tries++) {
		if (tries >= 50)
			fail_msg("follower %d took no report of its leader in 5 s", f + 1);
		sleep_ms(100);
	}
	long long ignored = metric(f, "raftlock_readiness_reports_ignored_total");
	char ca[400], cert[400], key[400], err[512] = "";
	snprintf(ca, sizeof ca, "%s/ca.pem", certs);
	snprintf(cert, sizeof cert, "%s/client-alice.pem", certs);
	snprintf(key, sizeof key, "%s/client-alice.key", certs);
	struct raw_tls t;
	if (raw_tls_connect(&t, cl.client_port[f], ca, cert, key, err, sizeof err) != 0)
		fail_msg("alice: %s", err);
	for (int k = 1; k <= FORGERIES; k++) {
		Raftlock__Envelope env;
		Raftlock__StatusRequest req;
		forged(&env, &req, (uint64_t)k, term);
		assert_int_equal(raw_tls_send_envelope(&t, &env), 0);
		Raftlock__Envelope *answer = raw_tls_recv_envelope(&t, 5000, err, sizeof err);
		if (answer == NULL)
			fail_msg("alice: no answer: %s", err);
		raftlock__envelope__free_unpacked(answer, NULL);
		int code = readyz(f);
		if (code != 200)
			fail_msg("follower %d: /readyz %d after forged report %d", f + 1, code, k);
		sleep_ms(20);
	}
	raw_tls_close(&t);
	assert_true(metric(f, "raftlock_readiness_reports_ignored_total") >= ignored + FORGERIES);
	assert_int_equal(tcluster_destroy_and_remove(&cl, dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(forged_reports_plaintext),
		cmocka_unit_test(forged_reports_mutual_tls),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
