/*
 * test_connection_limit: a node's limit on connections from one client
 * address (--max-connections-per-address, GUARANTEES section 6) as the
 * client library meets it. With every node holding its one connection from
 * 127.0.0.1, a new client's calls end with RAFTLOCK_ELIMIT and a message
 * naming the limit, well before their timeout, and nothing is created;
 * once a node has room again, the same client works. With client TLS on,
 * a host that opens connections and never shakes hands holds at most the
 * limit plus the refusals being told (ADMISSION_MAX_REFUSING); the rest
 * are closed at once.
 */
#include <setjmp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"
#include "raftlock.h"

/* One STATUS on a new raw connection to port: the connection, counted by
 * the node, or -1 when the node refused it with RAFTLOCK_ELIMIT. */
static int try_occupy(int port)
{
	int fd = raw_connect(port);
	assert_true(fd >= 0);
	assert_int_equal(raw_send_status(fd), 0);
	Raftlock__Envelope *r = raw_recv_envelope(fd, 5000);
	assert_non_null(r);
	int status = (int)r->response->status;
	raftlock__envelope__free_unpacked(r, NULL);
	if (status == 0)
		return fd;
	close(fd);
	assert_int_equal(status, RAFTLOCK_ELIMIT);
	return -1;
}

/* Fills every node's room for 127.0.0.1, keeping what it took in fds (n
 * of them). Other connections from this address come and go meanwhile:
 * tcluster_leader's probes, whose close a node may not have seen yet, the
 * leader's own STATUS connection to each follower's client port
 * (server/followers.c) and, on a plaintext cluster, each follower's to the
 * leader's (it asks the leader for its readiness, status.h): the nodes
 * share this address, so each node allows PER_ADDRESS, room for those two
 * and the test. Each node is filled until it refuses, twice, a while
 * apart: once full, a node stays full, as a refused node only asks again
 * later and finds no room. */
#define PER_ADDRESS "3"
static int fill_every_node(struct tcluster *cl, int *fds, int cap)
{
	int n = 0;
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < cl->n; i++) {
			int fd;
			while ((fd = try_occupy(cl->client_port[i])) >= 0) {
				assert_true(n < cap);
				fds[n++] = fd;
			}
		}
		tl_sleep_ms(500);
	}
	return n;
}

static void refused_until_room(void **state)
{
	(void)state;
	static struct tcluster cl;
	memset(&cl, 0, sizeof cl);
	cl.extra_args[0] = "--max-connections-per-address";
	cl.extra_args[1] = PER_ADDRESS;
	tcluster_start(&cl, 3, 1000);
	assert_true(tcluster_leader(&cl, 10000) >= 0);
	int fds[16];
	int n_fds = fill_every_node(&cl, fds, 16);
	printf("measure: the test holds %d of the 9 places\n", n_fds);

	raftlock_client *c = tl_client(&cl); /* request timeout 15 s */
	raftlock_session *s = NULL;
	uint64_t t0 = tcluster_now_ms();
	int rv = raftlock_session_open(c, NULL, &s);
	uint64_t took = tcluster_now_ms() - t0;
	const char *msg = raftlock_errmsg(c);
	printf("measure: refused with '%s' after %llu ms\n", msg, (unsigned long long)took);
	assert_int_equal(rv, RAFTLOCK_ELIMIT);
	assert_null(s);
	assert_non_null(strstr(msg, "max-connections-per-address " PER_ADDRESS));
	assert_true(took < 5000);
	struct raftlock_status *st = NULL;
	assert_int_equal(raftlock_status_get(c, cl.addrs[0], &st), RAFTLOCK_ELIMIT);

	/* Room again on every node: the same client opens its session. */
	for (int i = 0; i < n_fds; i++)
		close(fds[i]);
	uint64_t until = tcluster_now_ms() + 10000;
	while ((rv = raftlock_session_open(c, NULL, &s)) == RAFTLOCK_ELIMIT &&
	       tcluster_now_ms() < until)
		tl_sleep_ms(100);
	assert_int_equal(rv, 0);
	raftlock_session_close(s);
	raftlock_client_close(c);
	assert_int_equal(tcluster_destroy(&cl), 0);
}

/* ADMISSION_MAX_REFUSING (server/admission.h). */
#define REFUSING 8

/* A STATUS over a new TLS connection to port, with the harness's
 * certificate from certs: 0, the connection counted by the node and kept
 * in t; RAFTLOCK_ELIMIT, the node's refusal, its message in msg; -1, closed
 * without a word (t holds nothing but on 0). */
static int tls_try_occupy(struct raw_tls *t, int port, const char *certs, char *msg, size_t len)
{
	char ca[300], cert[300], key[300], err[512];
	snprintf(ca, sizeof ca, "%s/ca.pem", certs);
	snprintf(cert, sizeof cert, "%s/client-harness.pem", certs);
	snprintf(key, sizeof key, "%s/client-harness.key", certs);
	if (raw_tls_connect(t, port, ca, cert, key, err, sizeof err) != 0)
		return -1;
	Raftlock__StatusRequest req = RAFTLOCK__STATUS_REQUEST__INIT;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.id = 1;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_STATUS;
	env.status = &req;
	raw_tls_send_envelope(t, &env); /* a refused one may be closed already */
	Raftlock__Envelope *r = raw_tls_recv_envelope(t, 5000, err, sizeof err);
	int status = r == NULL ? -1 : (int)r->response->status;
	if (r != NULL)
		snprintf(msg, len, "%s", r->response->message);
	if (r != NULL)
		raftlock__envelope__free_unpacked(r, NULL);
	if (status != 0)
		raw_tls_close(t);
	return status;
}

/* How many of fds[0..n) the peer closed, polling until want of them are
 * or for timeout_ms. */
static int count_closed(const int *fds, int n, int want, int timeout_ms)
{
	struct pollfd p[128];
	assert_true(n <= 128);
	uint64_t until = tcluster_now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		for (int k = 0; k < n; k++)
			p[k] = (struct pollfd){fds[k], POLLIN, 0};
		poll(p, (nfds_t)n, 0);
		int closed = 0;
		for (int k = 0; k < n; k++)
			closed += (p[k].revents & (POLLIN | POLLHUP | POLLERR)) != 0 &&
				  recv(fds[k], &(char){0}, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
		if (closed >= want || tcluster_now_ms() >= until)
			return closed;
		tl_sleep_ms(20);
	}
}

/* With client TLS on, a connection over the limit is kept until its
 * handshake ends, to be told why it is closed: at most REFUSING such from
 * one address. Many silent connections from this address, on a leader
 * whose room the test took, are closed at once but REFUSING of them (not
 * after the 10 s handshake deadline), the node counts no more than the
 * limit plus those, and once they leave, a client over the limit is told
 * RAFTLOCK_ELIMIT again. */
static void tls_refusals_bounded(void **state)
{
	(void)state;
	char dir[] = "/tmp/raftlock-connlim-XXXXXX", certs[300];
	assert_non_null(mkdtemp(dir));
	assert_int_equal(tcluster_make_certs(dir), 0);
	snprintf(certs, sizeof certs, "%s/certs", dir);
	static struct tcluster cl;
	memset(&cl, 0, sizeof cl);
	cl.client_tls = "mutual";
	cl.tls_dir = certs;
	cl.extra_args[0] = "--max-connections-per-address";
	cl.extra_args[1] = PER_ADDRESS;
	tcluster_start(&cl, 3, 1000);
	int i = tcluster_leader(&cl, 10000);
	assert_true(i >= 0);
	int port = cl.client_port[i];

	/* The leader's room for 127.0.0.1, taken; the next proper client is
	 * told why it is closed. */
	enum { HELD = 8 };
	struct raw_tls held[HELD];
	int n_held = 0, rv;
	char msg[256] = "";
	while ((rv = tls_try_occupy(&held[n_held], port, certs, msg, sizeof msg)) == 0)
		assert_true(++n_held < HELD);
	assert_int_equal(rv, RAFTLOCK_ELIMIT);
	assert_non_null(strstr(msg, "max-connections-per-address " PER_ADDRESS));

	enum { SILENT = 100 };
	int fds[SILENT];
	for (int k = 0; k < SILENT; k++) {
		fds[k] = raw_connect(port);
		assert_true(fds[k] >= 0);
	}
	/* A place the test did not hold may have been freed meanwhile. */
	int closed = count_closed(fds, SILENT, SILENT - REFUSING - atoi(PER_ADDRESS), 3000);
	tl_sleep_ms(300); /* every one accepted: the count is final */
	closed = count_closed(fds, SILENT, SILENT, 0);
	long long open = tcluster_metric(&cl, i, "raftlock_client_connections");
	printf("measure: %d of %d silent connections closed at once; the node counts %lld "
	       "connections (limit " PER_ADDRESS " + %d refusals being told)\n",
	       closed, SILENT, open, REFUSING);
	assert_true(closed >= SILENT - REFUSING - atoi(PER_ADDRESS));
	assert_true(open >= 0 && open <= atoi(PER_ADDRESS) + REFUSING);

	/* The silent ones gone, their places are free: a client over the
	 * limit hears why again (a place freed meanwhile is taken first). */
	for (int k = 0; k < SILENT; k++)
		close(fds[k]);
	for (uint64_t until = tcluster_now_ms() + 5000;; tl_sleep_ms(100)) {
		rv = tls_try_occupy(&held[n_held], port, certs, msg, sizeof msg);
		if (rv == RAFTLOCK_ELIMIT || tcluster_now_ms() >= until)
			break;
		if (rv == 0)
			assert_true(++n_held < HELD);
	}
	assert_int_equal(rv, RAFTLOCK_ELIMIT);
	assert_non_null(strstr(msg, "max-connections-per-address " PER_ADDRESS));
	for (int k = 0; k < n_held; k++)
		raw_tls_close(&held[k]);
	assert_int_equal(tcluster_destroy_and_remove(&cl, dir), 0);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN); /* a refused TLS client's STATUS may meet a closed socket */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(refused_until_room),
		cmocka_unit_test(tls_refusals_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
