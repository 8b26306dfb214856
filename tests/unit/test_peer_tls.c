/* test_peer_tls.c: the raft-port TLS transport (server/peer_tls.c and the
 * TLS engine under it, the real files) as libraft drives it: two or three
 * transports on one loop over loopback TCP, each listening with an accept
 * callback and connecting with raft_uv_connect requests; raft's side of a
 * connection is the stream the callbacks hand over. Certificates: see
 * tests/peer_certs.h (cluster a, another CA b, expired ones of a). Every
 * test ends with uv_loop_close() == 0. */
#include <dlfcn.h>
#include <netdb.h>
#include <pthread.h>
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
#include <signal.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "log.h"
#include "loopback.h"
#include "peer_certs.h"
#include "peer_tls.h"

static bool have_expired;

/*
 * The resolver, as libuv's thread pool calls it: this getaddrinfo takes the
 * C library's place for the whole program. A name ending in ".slow.test"
 * waits at a gate (opened by the test, or after 3 s), then resolves as
 * "localhost"; any other goes to the C library at once.
 */
typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *,
			      struct addrinfo **);
static getaddrinfo_fn real_getaddrinfo; /* set before any thread can call */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static int gate_waiting; /* resolutions at the gate now */

__attribute__((visibility("default"))) int getaddrinfo(const char *node, const char *service,
						       const struct addrinfo *hints,
						       struct addrinfo **res)
{
	const char *slow = ".slow.test";
	size_t n = node != NULL ? strlen(node) : 0;
	if (n < strlen(slow) || strcmp(node + n - strlen(slow), slow) != 0)
		return real_getaddrinfo(node, service, hints, res);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 3;
	pthread_mutex_lock(&gate_lock);
	gate_waiting++;
	pthread_cond_broadcast(&gate_cond); /* for gate_reached() */
	while (!gate_open && pthread_cond_timedwait(&gate_cond, &gate_lock, &until) == 0)
		;
	gate_waiting--;
	pthread_mutex_unlock(&gate_lock);
	return real_getaddrinfo("localhost", service, hints, res);
}

static void gate_set(bool open)
{
	pthread_mutex_lock(&gate_lock);
	gate_open = open;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
}

/* Whether a resolution waits at the gate, or gets there within 2 s (the
 * loop is not run: a resolver thread does not wake it). */
static bool gate_reached(void)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	pthread_mutex_lock(&gate_lock);
	while (gate_waiting == 0 && pthread_cond_timedwait(&gate_cond, &gate_lock, &until) == 0)
		;
	bool any = gate_waiting > 0;
	pthread_mutex_unlock(&gate_lock);
	return any;
}

static int make_certs(void **state)
{
	(void)state;
	signal(SIGPIPE, SIG_IGN);
	real_getaddrinfo = (getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo");
	assert_non_null(real_getaddrinfo);
	log_setup(getenv("RAFTLOCK_TEST_DEBUG") ? LOG_DEBUG : LOG_INFO, 0, LOG_FORMAT_TEXT);
	return peer_certs_make(3, 3, &have_expired);
}

static int remove_certs(void **state)
{
	(void)state;
	return peer_certs_remove();
}

/* ------------------------------------------------------------ harness -- */

static uv_loop_t loop;

/* A bytes sink on a stream raft would own. */
struct sink {
	uv_stream_t *stream;
	char *got;
	size_t len, cap;
	int end; /* the read error that ended it, 0 while open */
	bool closed;
};

/* A member: its transport as raft would hold it, and what raft saw. */
struct member {
	struct raft_uv_transport tr;
	bool up, closed;
	raft_id id;
	char address[32];
	int accepted;
	raft_id accepted_id;
	char accepted_address[64];
	struct sink in; /* the last accepted stream */
};

/* A connect request, as raft's client makes one. */
struct dial {
	struct raft_uv_connect req;
	int calls;
	int status;
	struct sink out;
};

static void sink_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct sink *s = h->data;
	if (s->len + suggested > s->cap) {
		s->cap = (s->len + suggested) * 2;
		s->got = realloc(s->got, s->cap);
		assert_non_null(s->got);
	}
	*buf = uv_buf_init(s->got + s->len, (unsigned)suggested);
}

static void sink_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
	(void)buf;
	struct sink *s = stream->data;
	if (nread > 0)
		s->len += (size_t)nread;
	else if (nread < 0 && s->end == 0)
		s->end = (int)nread;
}

static void sink_start(struct sink *s, uv_stream_t *stream)
{
	s->stream = stream;
	stream->data = s;
	assert_int_equal(uv_read_start(stream, sink_alloc, sink_read), 0);
}

static void stream_closed(uv_handle_t *h)
{
	struct sink *s = h->data;
	s->closed = true;
	raft_free(h); /* raft frees what the transport gave it so */
}

static void sink_close(struct sink *s)
{
	if (s->stream != NULL && !uv_is_closing((uv_handle_t *)s->stream))
		uv_close((uv_handle_t *)s->stream, stream_closed);
}

static void on_accept(struct raft_uv_transport *tr, raft_id id, const char *address,
		      uv_stream_t *stream)
{
	struct member *m = (struct member *)tr;
	m->accepted++;
	m->accepted_id = id;
	snprintf(m->accepted_address, sizeof m->accepted_address, "%s", address);
	sink_close(&m->in); /* keep the last one */
	free(m->in.got);
	memset(&m->in, 0, sizeof m->in);
	sink_start(&m->in, stream);
}

static void on_connect(struct raft_uv_connect *req, uv_stream_t *stream, int status)
{
	struct dial *d = req->data;
	d->calls++;
	d->status = status;
	if (status == 0)
		sink_start(&d->out, stream);
	else
		assert_null(stream);
}

/* A member whose certificate is `cert` (e.g. "a/node-1", member cert_id's)
 * trusting `ca`, and whose hello claims id. */
static void member_up_as(struct member *m, raft_id cert_id, raft_id id, const char *cert,
			 const char *ca)
{
	memset(m, 0, sizeof *m);
	m->id = id;
	snprintf(m->address, sizeof m->address, "127.0.0.1:%d", loopback_free_port());
	struct tls_files files = {peer_certs_path("%s.pem", cert), peer_certs_path("%s.key", cert),
				  peer_certs_path("%s", ca)};
	char err[512];
	if (peer_tls_init(&m->tr, &loop, cert_id, &files, err, sizeof err) != 0)
		fail_msg("%s", err);
	peer_tls_set_setup_timeout(&m->tr, 2000);
	assert_int_equal(m->tr.init(&m->tr, id, m->address), 0);
	assert_int_equal(m->tr.listen(&m->tr, on_accept), 0);
	m->up = true;
}

static void member_up(struct member *m, raft_id id, const char *cert, const char *ca)
{
	member_up_as(m, id, id, cert, ca);
}

static void member_closed(struct raft_uv_transport *tr)
{
	((struct member *)tr)->closed = true;
}

static void dial_address(struct member *from, struct dial *d, raft_id id, const char *address)
{
	memset(d, 0, sizeof *d);
	d->req.data = d;
	assert_int_equal(from->tr.connect(&from->tr, &d->req, id, address, on_connect), 0);
}

static void dial(struct member *from, struct dial *d, raft_id id, const struct member *to)
{
	dial_address(from, d, id, to->address);
}

/* to's address with its host given by name, "<name>:<port>". */
static char *named(const struct member *to, const char *name)
{
	static char address[128];
	snprintf(address, sizeof address, "%s%s", name, strrchr(to->address, ':'));
	return address;
}

static bool wake;
static void wake_cb(uv_timer_t *t)
{
	(void)t;
	wake = true;
}

/* Runs the loop until cond holds, at most ms; returns whether it held. */
static bool run_for(bool (*cond)(void *), void *arg, unsigned ms)
{
	uv_timer_t t;
	uv_timer_init(&loop, &t);
	uv_timer_start(&t, wake_cb, ms, 0);
	wake = false;
	bool ok;
	while (!(ok = cond(arg)) && !wake)
		uv_run(&loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&t, NULL);
	uv_run(&loop, UV_RUN_NOWAIT);
	return ok;
}

static bool dial_done(void *arg)
{
	return ((struct dial *)arg)->calls > 0;
}

static bool never(void *arg)
{
	(void)arg;
	return false;
}

/* Closes the members (raft's streams first, as raft does) and the loop. */
static void finish(struct member *ms, int n, struct dial *ds, int nd)
{
	for (int i = 0; i < nd; i++)
		sink_close(&ds[i].out);
	for (int i = 0; i < n; i++) {
		sink_close(&ms[i].in);
		if (ms[i].up)
			ms[i].tr.close(&ms[i].tr, member_closed);
	}
	for (int i = 0; i < n; i++) {
		if (!ms[i].up)
			continue;
		while (!ms[i].closed)
			uv_run(&loop, UV_RUN_ONCE);
		peer_tls_close(&ms[i].tr);
		free(ms[i].in.got);
	}
	for (int i = 0; i < nd; i++) {
		assert_int_equal(ds[i].calls, 1); /* exactly once, also when cancelled */
		free(ds[i].out.got);
	}
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static int setup(void **state)
{
	(void)state;
	assert_int_equal(uv_loop_init(&loop), 0);
	return 0;
}

/* -------------------------------------------------------------- tests -- */

static char *pattern(size_t n, unsigned seed)
{
	char *p = malloc(n);
	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (char)((i * 131u + seed) ^ (i >> 9));
	return p;
}

static void write_done(uv_write_t *req, int status)
{
	assert_int_equal(status, 0);
	free(req);
}

/* Writes data to stream in pieces of odd sizes. */
static void send_all(uv_stream_t *stream, const char *data, size_t n)
{
	static const size_t sizes[] = {1, 7, 4096, 65537, 100, 300000};
	size_t off = 0;
	for (unsigned i = 0; off < n; i++) {
		size_t k = sizes[i % 6];
		if (k > n - off)
			k = n - off;
		uv_write_t *w = malloc(sizeof *w);
		uv_buf_t b = uv_buf_init((char *)data + off, (unsigned)k);
		assert_int_equal(uv_write(w, stream, &b, 1, write_done), 0);
		off += k;
	}
}

struct want {
	struct sink *s;
	size_t n;
};

static bool sink_has(void *arg)
{
	struct want *w = arg;
	return w->s->len >= w->n;
}

static bool sink_ended(void *arg)
{
	return ((struct sink *)arg)->end != 0;
}

static bool accepted(void *arg)
{
	return ((struct member *)arg)->accepted > 0;
}

static bool accepted_twice(void *arg)
{
	return ((struct member *)arg)->accepted > 1;
}

/* The connecting side's pump stopped reading raft's stream. */
static bool held_back(void *arg)
{
	return peer_tls_stats(arg).peak_to_peer >= PEER_TLS_HIGH_WATER;
}

/* Members 1 and 2 of cluster A, 1 connected to 2. */
static void connected_pair(struct member m[2], struct dial *d)
{
	member_up(&m[0], 1, "a/node-1", "a/ca.pem");
	member_up(&m[1], 2, "a/node-2", "a/ca.pem");
	dial(&m[0], d, 2, &m[1]);
	assert_true(run_for(dial_done, d, 5000));
	assert_int_equal(d->status, 0);
	assert_true(run_for(accepted, &m[1], 5000));
}

/* A connects to B: raft on B is told A's id and address; bytes flow both
 * ways, in order, also after the receiver did not read for a while (both
 * pumps hold back instead of buffering); closing raft's stream on one side
 * ends the other side's. */
static void test_connect_accept_bytes(void **state)
{
	(void)state;
	struct member m[2];
	struct dial d;
	connected_pair(m, &d);
	assert_int_equal(m[1].accepted_id, 1);
	assert_string_equal(m[1].accepted_address, m[0].address);

	/* 12 MiB from 1 to 2 while 2's raft does not read: more than the
	 * kernel's buffers take, so the pumps on both sides must hold back. */
	size_t big = 12u << 20, back = 200000;
	char *p = pattern(big, 1), *q = pattern(back, 2);
	uv_read_stop(m[1].in.stream);
	send_all(d.out.stream, p, big);
	assert_true(run_for(held_back, &m[0].tr, 20000));
	assert_int_equal(m[1].in.len, 0);
	assert_true(peer_tls_stats(&m[1].tr).peak_to_raft >= PEER_TLS_HIGH_WATER);
	sink_start(&m[1].in, m[1].in.stream);
	struct want w = {&m[1].in, big};
	assert_true(run_for(sink_has, &w, 20000));
	assert_int_equal(m[1].in.len, big);
	assert_memory_equal(m[1].in.got, p, big);

	/* and back, on the same connection */
	send_all(m[1].in.stream, q, back);
	struct want w2 = {&d.out, back};
	assert_true(run_for(sink_has, &w2, 10000));
	assert_memory_equal(d.out.got, q, back);

	/* raft on 1 closes its stream: raft on 2 reads the end */
	sink_close(&d.out);
	assert_true(run_for(sink_ended, &m[1].in, 5000));
	assert_int_equal(m[1].in.end, UV_EOF);
	struct peer_tls_stats s0 = peer_tls_stats(&m[0].tr), s1 = peer_tls_stats(&m[1].tr);
	assert_int_equal(s0.connected, 1);
	assert_int_equal(s1.accepted, 1);
	assert_int_equal(s0.refused + s1.refused, 0);
	/* Held back, not buffered: at most one read from raft (64 KiB) or one
	 * TLS delivery past the mark. */
	assert_true(s1.peak_to_raft <= PEER_TLS_HIGH_WATER + 128 * 1024);
	assert_true(s0.peak_to_peer <= PEER_TLS_HIGH_WATER + 128 * 1024);
	free(p);
	free(q);
	finish(m, 2, &d, 1);
}

/* The accepting side closes raft's stream: the connecting raft reads the
 * end. */
static void test_close_from_acceptor(void **state)
{
	(void)state;
	struct member m[2];
	struct dial d;
	connected_pair(m, &d);
	sink_close(&m[1].in);
	assert_true(run_for(sink_ended, &d.out, 5000));
	assert_int_equal(d.out.end, UV_EOF);
	finish(m, 2, &d, 1);
}

/* Refused connections: raft on the dialling side gets RAFT_NOCONNECTION,
 * raft on the other side is never told, the refusal is counted there. */
static void expect_refused(struct member *from, raft_id id, struct member *to, bool by_to)
{
	struct dial d;
	struct peer_tls_stats before_to = peer_tls_stats(&to->tr),
			      before_from = peer_tls_stats(&from->tr);
	dial(from, &d, id, to);
	assert_true(run_for(dial_done, &d, 5000));
	assert_int_equal(d.status, RAFT_NOCONNECTION);
	run_for(never, NULL, 100);
	assert_int_equal(to->accepted, 0);
	struct peer_tls_stats after_to = peer_tls_stats(&to->tr),
			      after_from = peer_tls_stats(&from->tr);
	if (by_to)
		assert_int_equal(after_to.refused, before_to.refused + 1);
	else
		assert_int_equal(after_from.refused, before_from.refused + 1);
}

/* Members 1 and 3 hold certificates from `bad` (trusting the cluster's
 * CA); member 2 is good: 1 dialling 2 is refused by 2, 2 dialling 3 is
 * refused by 2 itself. */
static void refused_both_ways(const char *bad)
{
	struct member m[3];
	char cert[64];
	snprintf(cert, sizeof cert, "%s/node-1", bad);
	member_up(&m[0], 1, cert, "a/ca.pem");
	member_up(&m[1], 2, "a/node-2", "a/ca.pem");
	snprintf(cert, sizeof cert, "%s/node-3", bad);
	member_up(&m[2], 3, cert, "a/ca.pem");
	expect_refused(&m[0], 2, &m[1], true);
	expect_refused(&m[1], 3, &m[2], false);
	finish(m, 3, NULL, 0);
}

/* Certificates from another CA, either way. */
static void test_other_ca_refused(void **state)
{
	(void)state;
	refused_both_ways("b");
}

/* Expired certificates of the cluster's own CA, either way. */
static void test_expired_refused(void **state)
{
	(void)state;
	if (!have_expired)
		skip(); /* faketime missing */
	refused_both_ways("expired");
}

/* A member that claims another's id: node 2's certificate with id 1 in
 * its hello is refused by the acceptor; a dialler that asked for member 2
 * and reached a server with node 3's certificate refuses it. */
static void test_identity_mismatch_refused(void **state)
{
	(void)state;
	struct member m[3];
	member_up_as(&m[0], 2, 1, "a/node-2", "a/ca.pem"); /* poses as 1 */
	member_up(&m[1], 2, "a/node-2", "a/ca.pem");
	member_up(&m[2], 3, "a/node-3", "a/ca.pem");
	expect_refused(&m[0], 3, &m[2], true);
	expect_refused(&m[1], 2, &m[2], false); /* 3 answers at "2's" address */
	/* and a well-formed connection still works afterwards */
	struct dial d;
	dial(&m[1], &d, 3, &m[2]);
	assert_true(run_for(dial_done, &d, 5000));
	assert_int_equal(d.status, 0);
	assert_true(run_for(accepted, &m[2], 5000));
	assert_int_equal(m[2].accepted_id, 2);
	finish(m, 3, &d, 1);
}

/* Members 1 and 2 only, for member 2's transport. */
static bool one_or_two(void *arg, raft_id id)
{
	(void)arg;
	return id == 1 || id == 2;
}

/* A valid certificate of the cluster's CA for an id the acceptor does not
 * count among its members: refused, and raft never told; members go on. */
static void test_non_member_refused(void **state)
{
	(void)state;
	struct member m[3];
	member_up(&m[0], 1, "a/node-1", "a/ca.pem");
	member_up(&m[1], 2, "a/node-2", "a/ca.pem");
	member_up(&m[2], 3, "a/node-3", "a/ca.pem");
	peer_tls_set_members(&m[1].tr, one_or_two, NULL);
	expect_refused(&m[2], 2, &m[1], true);
	struct dial d;
	dial(&m[0], &d, 2, &m[1]);
	assert_true(run_for(dial_done, &d, 5000));
	assert_int_equal(d.status, 0);
	assert_true(run_for(accepted, &m[1], 5000));
	assert_int_equal(m[1].accepted_id, 1);
	finish(m, 3, &d, 1);
}

/* A reload: member 2 moves to another CA's certificate and trust (b).
 * Connections set up afterwards use them (member 1, still of a, is refused;
 * member 3, moved to b too, is accepted); a reload with files that do not
 * do (missing, or another member's certificate) fails with a message and
 * leaves the material in use. */
static void test_reload(void **state)
{
	(void)state;
	struct member m[3];
	member_up(&m[0], 1, "a/node-1", "a/ca.pem");
	member_up(&m[1], 2, "a/node-2", "a/ca.pem");
	member_up(&m[2], 3, "b/node-3", "b/ca.pem");
	expect_refused(&m[2], 2, &m[1], true); /* not yet */

	char err[512] = "";
	struct tls_files missing = {peer_certs_path("b/node-2.pem"), peer_certs_path("b/none.key"),
				    peer_certs_path("b/ca.pem")};
	assert_int_equal(peer_tls_reload(&m[1].tr, 2, &missing, err, sizeof err), -1);
	assert_non_null(strstr(err, "none.key"));
	struct tls_files other = {peer_certs_path("b/node-3.pem"), peer_certs_path("b/node-3.key"),
				  peer_certs_path("b/ca.pem")};
	assert_int_equal(peer_tls_reload(&m[1].tr, 2, &other, err, sizeof err), -1);
	assert_non_null(strstr(err, "raftlock-node-2"));
	expect_refused(&m[2], 2, &m[1], true); /* still a's */

	struct tls_files b = {peer_certs_path("b/node-2.pem"), peer_certs_path("b/node-2.key"),
			      peer_certs_path("b/ca.pem")};
	assert_int_equal(peer_tls_reload(&m[1].tr, 2, &b, err, sizeof err), 0);
	expect_refused(&m[0], 2, &m[1], true);
	struct dial d;
	dial(&m[2], &d, 2, &m[1]);
	assert_true(run_for(dial_done, &d, 5000));
	assert_int_equal(d.status, 0);
	assert_true(run_for(accepted, &m[1], 5000));
	assert_int_equal(m[1].accepted_id, 3);
	finish(m, 3, &d, 1);
}

/* ----------------------------------------- garbage at the raft port -- */

struct raw {
	uv_tcp_t tcp;
	uv_connect_t connect;
	uv_write_t write;
	const char *data;
	size_t len;
	bool ended, closed;
};

static void raw_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	static char scratch[4096];
	(void)h;
	(void)suggested;
	*buf = uv_buf_init(scratch, sizeof scratch);
}

static void raw_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	(void)buf;
	if (nread < 0)
		((struct raw *)s->data)->ended = true;
}

static void raw_written(uv_write_t *req, int status)
{
	(void)req;
	(void)status;
}

static void raw_connected(uv_connect_t *req, int status)
{
	struct raw *r = req->data;
	assert_int_equal(status, 0);
	uv_read_start((uv_stream_t *)&r->tcp, raw_alloc, raw_read);
	if (r->len > 0) {
		uv_buf_t b = uv_buf_init((char *)r->data, (unsigned)r->len);
		uv_write(&r->write, (uv_stream_t *)&r->tcp, &b, 1, raw_written);
	}
}

static void raw_closed(uv_handle_t *h)
{
	((struct raw *)h->data)->closed = true;
}

/* A raw TCP connection to `to` from address `from` (a loopback address:
 * all of 127/8 is this host's), or from the default (127.0.0.1) if NULL,
 * that sends data and then only reads. */
static void raw_start_from(struct raw *r, const struct member *to, const char *from,
			   const char *data, size_t len)
{
	memset(r, 0, sizeof *r);
	r->data = data;
	r->len = len;
	struct sockaddr_in sa;
	const char *colon = strrchr(to->address, ':');
	uv_ip4_addr("127.0.0.1", atoi(colon + 1), &sa);
	uv_tcp_init(&loop, &r->tcp);
	r->tcp.data = r;
	if (from != NULL) {
		struct sockaddr_in src;
		uv_ip4_addr(from, 0, &src);
		assert_int_equal(uv_tcp_bind(&r->tcp, (struct sockaddr *)&src, 0), 0);
	}
	r->connect.data = r;
	assert_int_equal(
		uv_tcp_connect(&r->connect, &r->tcp, (struct sockaddr *)&sa, raw_connected), 0);
}

static void raw_start(struct raw *r, const struct member *to, const char *data, size_t len)
{
	raw_start_from(r, to, NULL, data, len);
}

static bool raw_ended(void *arg)
{
	return ((struct raw *)arg)->ended;
}

struct raws {
	struct raw *r;
	int n;
};

static int raws_ended(struct raws rs)
{
	int n = 0;
	for (int i = 0; i < rs.n; i++)
		n += rs.r[i].ended;
	return n;
}

static bool raws_all_ended(void *arg)
{
	struct raws *rs = arg;
	return raws_ended(*rs) == rs->n;
}

/* A TLS record header announcing a 512-byte ClientHello, and 9 bytes. */
static const char short_hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\x00\x00";

/* Random bytes, a ClientHello cut short (then silence until the setup
 * deadline) and a connection that says nothing: each is closed by the
 * acceptor and counted; a member connects normally afterwards. */
static void test_garbage_refused(void **state)
{
	(void)state;
	struct member m[2];
	member_up(&m[0], 1, "a/node-1", "a/ca.pem");
	member_up(&m[1], 2, "a/node-2", "a/ca.pem");
	peer_tls_set_setup_timeout(&m[1].tr, 500);
	char junk[3000];
	for (size_t i = 0; i < sizeof junk; i++)
		junk[i] = (char)(rand() & 0xff);
	struct raw r[3];
	raw_start(&r[0], &m[1], junk, sizeof junk);
	raw_start(&r[1], &m[1], short_hello, sizeof short_hello - 1);
	raw_start(&r[2], &m[1], NULL, 0);
	for (int i = 0; i < 3; i++)
		assert_true(run_for(raw_ended, &r[i], 5000));
	assert_int_equal(peer_tls_stats(&m[1].tr).refused, 3);
	assert_int_equal(m[1].accepted, 0);
	for (int i = 0; i < 3; i++)
		uv_close((uv_handle_t *)&r[i].tcp, raw_closed);
	struct dial d;
	dial(&m[0], &d, 2, &m[1]);
	assert_true(run_for(dial_done, &d, 5000));
	assert_int_equal(d.status, 0);
	assert_true(run_for(accepted, &m[1], 5000));
	finish(m, 2, &d, 1);
}

/* PEER_TLS_MAX_HANDSHAKES_PER_ADDRESS stalled connections from address
 * 127.0.0.<host> (silent, or a ClientHello cut short), into rs; the loop
 * runs a moment after, so that the acceptor has taken them (in order)
 * before the next ones. */
static void stall_from(struct raws rs, int host, const struct member *to)
{
	char from[32];
	snprintf(from, sizeof from, "127.0.0.%d", host);
	for (int i = 0; i < rs.n; i++)
		raw_start_from(&rs.r[i], to, from, short_hello, i % 2 ? sizeof short_hello - 1 : 0);
	run_for(never, NULL, 50);
}

/* Hosts without a certificate hold connections in setup (silent, or a
 * ClientHello cut short) to fill the acceptor's places: one address gets
 * PEER_TLS_MAX_HANDSHAKES_PER_ADDRESS places and no more (the next is
 * closed at once, the others kept); with every place taken, each new
 * connection closes the oldest in setup, and a member still connects at
 * once, well before the setup deadline frees any place. */
static void test_setup_limits(void **state)
{
	(void)state;
	enum { PER = PEER_TLS_MAX_HANDSHAKES_PER_ADDRESS, HOSTS = PEER_TLS_MAX_HANDSHAKES / PER };
	struct member m[2];
	member_up(&m[0], 1, "a/node-1", "a/ca.pem");
	member_up(&m[1], 2, "a/node-2", "a/ca.pem");
	peer_tls_set_setup_timeout(&m[1].tr, 60000); /* no place freed by it */
	static struct raw r[PEER_TLS_MAX_HANDSHAKES + PER + 1];
	struct raws first = {r, PER}, all = {r, PEER_TLS_MAX_HANDSHAKES};
	struct raws extra = {r + PEER_TLS_MAX_HANDSHAKES, PER};
	struct raw *over = &r[PEER_TLS_MAX_HANDSHAKES + PER];

	/* One address over its limit: the connection past it is closed. */
	stall_from(first, 2, &m[1]);
	raw_start_from(over, &m[1], "127.0.0.2", NULL, 0);
	assert_true(run_for(raw_ended, over, 5000));
	assert_int_equal(peer_tls_stats(&m[1].tr).refused, 1);
	assert_int_equal(raws_ended(first), 0);

	/* Every place taken, by HOSTS addresses; PER more from another close
	 * the oldest PER, the first address's, and only those. */
	for (int h = 1; h < HOSTS; h++)
		stall_from((struct raws){r + h * PER, PER}, 2 + h, &m[1]);
	assert_int_equal(raws_ended(all), 0);
	stall_from(extra, 2 + HOSTS, &m[1]);
	assert_true(run_for(raws_all_ended, &first, 5000));
	assert_int_equal(raws_ended(all), PER);
	assert_int_equal(raws_ended(extra), 0);
	assert_int_equal(peer_tls_stats(&m[1].tr).refused, 1 + PER);

	/* A member gets in, closing one more of the oldest. */
	struct dial d;
	dial(&m[0], &d, 2, &m[1]);
	assert_true(run_for(dial_done, &d, 5000));
	assert_int_equal(d.status, 0);
	assert_true(run_for(accepted, &m[1], 5000));
	assert_int_equal(m[1].accepted_id, 1);
	assert_int_equal(raws_ended((struct raws){r + PER, PER}), 1);
	assert_int_equal(raws_ended(all), PER + 1);
	assert_int_equal(raws_ended(extra), 0);
	assert_int_equal(peer_tls_stats(&m[1].tr).refused, 2 + PER);

	for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
		uv_close((uv_handle_t *)&r[i].tcp, raw_closed);
	finish(m, 2, &d, 1);
}

/* Closing the transport while a connection is being set up: raft's
 * connect request is called back once with RAFT_CANCELED, and the close
 * callback comes after it. */
static void test_close_cancels_connect(void **state)
{
	(void)state;
	struct member m[2];
	struct dial d[2];
	member_up(&m[0], 1, "a/node-1", "a/ca.pem");
	member_up(&m[1], 2, "a/node-2", "a/ca.pem");
	dial(&m[0], &d[0], 2, &m[1]);
	struct member silent = {.id = 3};
	/* a port that accepts nothing: the listen backlog holds the SYN */
	int port, fd = loopback_socket(true, &port);
	snprintf(silent.address, sizeof silent.address, "127.0.0.1:%d", port);
	dial(&m[0], &d[1], 3, &silent);
	uv_run(&loop, UV_RUN_NOWAIT);
	m[0].tr.close(&m[0].tr, member_closed);
	m[0].up = false;
	while (!m[0].closed) {
		uv_run(&loop, UV_RUN_ONCE);
		if (m[0].closed)
			break;
	}
	assert_int_equal(d[1].calls, 1);
	assert_int_equal(d[1].status, RAFT_CANCELED);
	peer_tls_close(&m[0].tr);
	close(fd);
	if (d[0].calls == 0)
		fail_msg("the first connect was not called back before the close");
	if (d[0].status != 0)
		assert_int_equal(d[0].status, RAFT_CANCELED);
	finish(m, 2, d, 2);
}

/* A member's address given by host name: raft's connect request returns
 * at once and the loop goes on (another connection is set up) while the
 * resolver takes its time; then the connection is set up to the address
 * the name resolves to. */
static void test_connect_by_host_name(void **state)
{
	(void)state;
	struct member m[3];
	struct dial d[2];
	member_up(&m[0], 1, "a/node-1", "a/ca.pem");
	member_up(&m[1], 2, "a/node-2", "a/ca.pem");
	member_up(&m[2], 3, "a/node-3", "a/ca.pem");
	gate_set(false);
	uint64_t start = uv_hrtime();
	dial_address(&m[0], &d[0], 2, named(&m[1], "node-2.slow.test"));
	assert_true(uv_hrtime() - start < 1000000000u); /* the resolver holds 3 s */
	assert_true(gate_reached());
	dial(&m[2], &d[1], 2, &m[1]);
	assert_true(run_for(dial_done, &d[1], 5000));
	assert_int_equal(d[1].status, 0);
	assert_true(run_for(accepted, &m[1], 5000));
	assert_int_equal(m[1].accepted_id, 3);
	assert_int_equal(d[0].calls, 0);
	assert_true(gate_reached()); /* still there */

	gate_set(true);
	assert_true(run_for(dial_done, &d[0], 5000));
	assert_int_equal(d[0].status, 0);
	assert_true(run_for(accepted_twice, &m[1], 5000));
	assert_int_equal(m[1].accepted_id, 1);
	finish(m, 3, d, 2);
}

/* Closing the transport while host names are being resolved, some by a
 * resolver thread (they wait at the gate), the rest still queued for one
 * (libuv gives resolutions at most half of its pool of 4): the close waits
 * for the running ones, each connect request is called back once with
 * RAFT_CANCELED, the close callback after them, and nothing is touched
 * after it is freed (ASan build). */
static void test_close_while_resolving(void **state)
{
	(void)state;
	enum { N = 6 };
	struct member m[2];
	struct dial d[N];
	member_up(&m[0], 1, "a/node-1", "a/ca.pem");
	member_up(&m[1], 2, "a/node-2", "a/ca.pem");
	gate_set(false);
	for (int i = 0; i < N; i++)
		dial_address(&m[0], &d[i], 2, named(&m[1], "node-2.slow.test"));
	assert_true(gate_reached());
	m[0].tr.close(&m[0].tr, member_closed);
	run_for(never, NULL, 100);
	assert_false(m[0].closed); /* a resolution is still running */
	gate_set(true);
	while (!m[0].closed)
		uv_run(&loop, UV_RUN_ONCE);
	for (int i = 0; i < N; i++) {
		assert_int_equal(d[i].calls, 1);
		assert_int_equal(d[i].status, RAFT_CANCELED);
	}
	peer_tls_close(&m[0].tr);
	m[0].up = false;
	assert_int_equal(m[1].accepted, 0);
	finish(m, 2, d, N);
}

/* A certificate that is not this member's is refused at init, with a
 * message naming it. */
static void test_own_certificate_checked(void **state)
{
	(void)state;
	struct raft_uv_transport tr;
	struct tls_files files = {peer_certs_path("a/node-2.pem"), peer_certs_path("a/node-2.key"),
				  peer_certs_path("a/ca.pem")};
	char err[512] = "";
	assert_int_equal(peer_tls_init(&tr, &loop, 1, &files, err, sizeof err), -1);
	assert_non_null(strstr(err, "'raftlock-node-2'"));
	assert_non_null(strstr(err, "'raftlock-node-1'"));
	assert_int_equal(peer_tls_init(&tr, &loop, 2, &files, err, sizeof err), 0);
	peer_tls_close(&tr);
	files.ca = NULL; /* all three are needed */
	assert_int_equal(peer_tls_init(&tr, &loop, 2, &files, err, sizeof err), -1);
	assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_connect_accept_bytes, setup),
		cmocka_unit_test_setup(test_close_from_acceptor, setup),
		cmocka_unit_test_setup(test_other_ca_refused, setup),
		cmocka_unit_test_setup(test_expired_refused, setup),
		cmocka_unit_test_setup(test_identity_mismatch_refused, setup),
		cmocka_unit_test_setup(test_non_member_refused, setup),
		cmocka_unit_test_setup(test_reload, setup),
		cmocka_unit_test_setup(test_garbage_refused, setup),
		cmocka_unit_test_setup(test_setup_limits, setup),
		cmocka_unit_test_setup(test_close_cancels_connect, setup),
		cmocka_unit_test_setup(test_connect_by_host_name, setup),
		cmocka_unit_test_setup(test_close_while_resolving, setup),
		cmocka_unit_test_setup(test_own_certificate_checked, setup),
	};
	return cmocka_run_group_tests(tests, make_certs, remove_certs);
}
