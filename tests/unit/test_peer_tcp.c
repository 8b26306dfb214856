/* test_peer_tcp.c: the plaintext raft transport (server/peer_tcp.c over
 * libraft's real raft_uv_tcp) as libraft drives it: two transports on one
 * loop over loopback TCP. Every stream raft gets, accepted or connected,
 * has TCP_NODELAY on; what raft_uv_tcp tells (ids, addresses, failures,
 * error messages) reaches raft unchanged. Every test ends with
 * uv_loop_close() == 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "loopback.h"
#include "peer_tcp.h"

static uv_loop_t loop;

struct member {
	struct raft_uv_transport tr;
	char address[32];
	int accepted;
	raft_id accepted_id;
	char accepted_address[64];
	uv_stream_t *in;
	bool closed;
};

struct dial {
	struct raft_uv_connect req;
	int calls;
	int status;
	uv_stream_t *out;
};

static int nodelay_of(uv_stream_t *s)
{
	uv_os_fd_t fd;
	assert_int_equal(uv_fileno((uv_handle_t *)s, &fd), 0);
	int on = -1;
	socklen_t len = sizeof on;
	assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len), 0);
	return on;
}

static void on_accept(struct raft_uv_transport *tr, raft_id id, const char *address,
		      uv_stream_t *stream)
{
	struct member *m = tr->data;
	assert_ptr_equal(&m->tr, tr); /* raft's own transport, not the inner one */
	m->accepted++;
	m->accepted_id = id;
	snprintf(m->accepted_address, sizeof m->accepted_address, "%s", address);
	m->in = stream;
}

static void on_connect(struct raft_uv_connect *req, uv_stream_t *stream, int status)
{
	struct dial *d = req->data;
	assert_ptr_equal(&d->req, req);
	d->calls++;
	d->status = status;
	d->out = stream;
}

static void member_up(struct member *m, raft_id id, bool listening)
{
	memset(m, 0, sizeof *m);
	m->tr.version = 1;
	m->tr.data = m;
	char err[256];
	assert_int_equal(peer_tcp_init(&m->tr, &loop, err, sizeof err), 0);
	snprintf(m->address, sizeof m->address, "127.0.0.1:%d", loopback_free_port());
	assert_int_equal(m->tr.init(&m->tr, id, m->address), 0);
	if (listening)
		assert_int_equal(m->tr.listen(&m->tr, on_accept), 0);
}

static void on_closed(struct raft_uv_transport *tr)
{
	struct member *m = tr->data;
	m->closed = true;
}

static void free_stream(uv_handle_t *h)
{
	free(h);
}

static void member_down(struct member *m)
{
	if (m->in != NULL)
		uv_close((uv_handle_t *)m->in, free_stream);
	m->tr.close(&m->tr, on_closed);
	for (int i = 0; i < 1000 && !m->closed; i++)
		uv_run(&loop, UV_RUN_ONCE);
	assert_true(m->closed);
	peer_tcp_close(&m->tr);
}

/* Firing is all the deadline is for: it ends uv_run()'s wait. */
static void on_deadline(uv_timer_t *deadline)
{
	(void)deadline;
}

/* Runs the loop until *flag is nonzero, for at most 5 s: a one-shot timer
 * wakes uv_run() at the deadline and is inactive once it fired. */
static void run_until(const int *flag)
{
	uv_timer_t deadline;
	uv_timer_init(&loop, &deadline);
	uv_timer_start(&deadline, on_deadline, 5000, 0);
	while (*flag == 0 && uv_is_active((uv_handle_t *)&deadline))
		uv_run(&loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&deadline, NULL);
	uv_run(&loop, UV_RUN_NOWAIT); /* the close completes before the frame goes */
}

static int setup(void **state)
{
	(void)state;
	return uv_loop_init(&loop);
}

static void count_open(uv_handle_t *h, void *arg)
{
	if (!uv_is_closing(h))
		(*(int *)arg)++;
}

/* Every handle a test opened was closed (else uv_run would not return). */
static int teardown(void **state)
{
	(void)state;
	int open_handles = 0;
	uv_walk(&loop, count_open, &open_handles);
	assert_int_equal(open_handles, 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
	return 0;
}

/* ------------------------------------------------------------- tests -- */

/* Both ends of a raft connection have Nagle's algorithm off, and the
 * accepting side learns the connecting member's id and address. */
static void both_ends_nodelay(void **state)
{
	(void)state;
	struct member a, b;
	member_up(&a, 1, true);
	member_up(&b, 2, false);
	struct dial d = {.req.data = &d};
	assert_int_equal(b.tr.connect(&b.tr, &d.req, 1, a.address, on_connect), 0);
	run_until(&d.calls);
	assert_int_equal(d.calls, 1);
	assert_int_equal(d.status, 0);
	assert_non_null(d.out);
	assert_int_equal(nodelay_of(d.out), 1);
	/* raft_uv_tcp writes its handshake (id, address) once connected; the
	 * accept callback comes after it is read. */
	run_until(&a.accepted);
	assert_int_equal(a.accepted, 1);
	assert_int_equal(a.accepted_id, 2);
	assert_string_equal(a.accepted_address, b.address);
	assert_int_equal(nodelay_of(a.in), 1);
	uv_close((uv_handle_t *)d.out, free_stream);
	member_down(&a);
	member_down(&b);
}

/* A connect that fails calls back once with its failure and no stream. */
static void failed_connect_calls_back(void **state)
{
	(void)state;
	struct member b;
	member_up(&b, 2, false);
	char nobody[32];
	snprintf(nobody, sizeof nobody, "127.0.0.1:%d", loopback_free_port());
	struct dial d = {.req.data = &d};
	assert_int_equal(b.tr.connect(&b.tr, &d.req, 1, nobody, on_connect), 0);
	run_until(&d.calls);
	assert_int_equal(d.calls, 1);
	assert_int_not_equal(d.status, 0);
	member_down(&b);
}

/* A connect still pending at close is cancelled: its callback fires once,
 * with a failure, before the transport's close completes. (The close comes
 * before raft_uv_tcp has looked the address up, so no packet leaves: what
 * is cancelled is the lookup, the first step of every connect.) */
static void pending_connect_cancelled_on_close(void **state)
{
	(void)state;
	struct member b;
	member_up(&b, 2, false);
	struct dial d = {.req.data = &d};
	/* A non-routable address: the TCP connect stays pending. */
	assert_int_equal(b.tr.connect(&b.tr, &d.req, 1, "10.255.255.1:9", on_connect), 0);
	member_down(&b);
	assert_int_equal(d.calls, 1);
	assert_int_not_equal(d.status, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(both_ends_nodelay, setup, teardown),
		cmocka_unit_test_setup_teardown(failed_connect_calls_back, setup, teardown),
		cmocka_unit_test_setup_teardown(pending_connect_cancelled_on_close, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
