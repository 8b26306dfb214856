/*
 * test_connection_limit: a node's limit on connections from one client
 * address (--max-connections-per-address, GUARANTEES section 6) as the
 * client library meets it. With every node holding its one connection from
 * 127.0.0.1, a new client's calls end with RAFTLOCK_ELIMIT and a message
 * naming the limit, well before their timeout, and nothing is created;
 * once a node has room again, the same client works.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(refused_until_room),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
