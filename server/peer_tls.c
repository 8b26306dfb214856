/* peer_tls.c: see peer_tls.h. */
#include "peer_tls.h"

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/x509.h>

#include "address.h"
#include "list.h"
#include "log.h"
#include "log_rate.h"
#include "member_cn.h"
#include "tls_stream.h"

/*
 * The hello, sent by the connecting side inside TLS once the handshake is
 * done, carries what libraft's TCP preamble carries (protocol, id, address),
 * big-endian: [8 protocol][8 id][8 length L][L bytes of address, NUL
 * included]. The accepting side answers with the protocol word alone once
 * it has checked the hello against the certificate.
 */
#define HELLO_PROTOCOL UINT64_C(0x524c504545520001) /* "RLPEER", version 1 */
#define HELLO_HEAD 24
#define HELLO_ADDR_MAX 256
#define ACK_LEN 8

enum link_state {
	LINK_RESOLVING,  /* outbound: host name being resolved */
	LINK_CONNECTING, /* outbound: TCP connect in progress */
	LINK_HANDSHAKE,  /* TLS handshake */
	LINK_HELLO,      /* inbound: reading the hello; outbound: the answer */
	LINK_OPEN,       /* raft has its stream; bytes are pumped */
	LINK_CLOSING,
};

struct peer_tls {
	struct raft_uv_transport *transport;
	uv_loop_t *loop;
	SSL_CTX *server_ctx, *client_ctx;
	raft_id id;
	char address[HELLO_ADDR_MAX];
	unsigned setup_ms;
	uv_tcp_t listener;
	bool listening;
	raft_uv_accept_cb accept_cb;
	peer_tls_member_fn is_member; /* NULL: no membership check */
	void *member_arg;
	struct list links;    /* struct peer_link, every one not yet freed, oldest first */
	unsigned handshaking; /* inbound links in setup (neither open nor closing) */
	bool closing;
	bool closer_done; /* see transport_close */
	bool listener_done;
	uv_timer_t closer;
	raft_uv_transport_close_cb close_cb;
	struct peer_tls_stats stats;
	/* Refusals are logged at a bounded rate (log_rate.h), by kind: an
	 * inbound connection that failed TLS, or proved no member's identity,
	 * or was over its address's limit, or was evicted for a newer one; an
	 * outbound one. */
	struct log_rate log_inbound_tls, log_inbound_identity, log_inbound_address,
		log_inbound_evicted, log_outbound;
};

/* One connection, inbound or outbound, from TCP to its last handle closed. */
struct peer_link {
	struct peer_tls *t;
	struct list link;
	bool outbound;
	bool counted;  /* in t->handshaking */
	bool draining; /* raft closed its end: close once the queue is sent */
	enum link_state state;
	/* Holds on l: tcp (or the TLS engine that took it), timer, pipe, and a
	 * resolution in progress (its request lives in l). */
	int handles;
	uv_tcp_t tcp;
	uv_getaddrinfo_t resolve;
	uv_connect_t connect;
	uv_timer_t timer; /* setup deadline */
	struct tls_stream tls;
	bool tls_started;
	uv_pipe_t pipe; /* our end of the socket pair */
	bool pipe_open;
	bool pipe_paused;            /* not read: the TLS side has too much queued */
	bool net_paused;             /* TLS not read: raft has too much queued */
	size_t to_raft;              /* bytes written to the pipe and not yet taken */
	struct raft_uv_connect *req; /* outbound, until its callback */
	raft_id peer_id;             /* outbound: whom raft asked for; inbound: claimed */
	char peer_address[HELLO_ADDR_MAX];
	char remote[64];                         /* the TCP peer, for the log */
	char ip[48];                             /* inbound: its address, for its limit */
	uint64_t accepted_ms;                    /* inbound: when, for the log */
	uint8_t in[HELLO_HEAD + HELLO_ADDR_MAX]; /* hello or answer being read */
	size_t in_len;
	uint8_t out[HELLO_HEAD + HELLO_ADDR_MAX]; /* hello or answer sent */
	struct tls_stream_write out_req;
};

/* A write of plaintext from raft, until TLS has sent it. The bytes are
 * read into one slab: the link is open, so tls_stream_write() encrypts
 * them before it returns (tls_stream.h). */
struct to_net {
	struct tls_stream_write req;
	struct peer_link *l;
};

/* Plaintext for raft that the pipe did not take at once. */
struct to_raft {
	uv_write_t req;
	struct peer_link *l;
	size_t len;
	char data[];
};

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* ------------------------------------------------------------- closing -- */

static void transport_maybe_closed(struct peer_tls *t)
{
	if (!t->closing || !t->closer_done || !t->listener_done || !list_empty(&t->links) ||
	    t->close_cb == NULL)
		return;
	raft_uv_transport_close_cb cb = t->close_cb;
	t->close_cb = NULL;
	cb(t->transport); /* raft may free t->transport: nothing after this */
}

static void link_release(struct peer_link *l)
{
	if (--l->handles > 0)
		return;
	struct peer_tls *t = l->t;
	list_remove(&l->link);
	if (l->req != NULL) {
		/* raft's client asserts a cancellation only while it closes. */
		l->req->cb(l->req, NULL, t->closing ? RAFT_CANCELED : RAFT_NOCONNECTION);
	}
	free(l);
	transport_maybe_closed(t);
}

static void link_handle_closed(uv_handle_t *h)
{
	link_release(h->data);
}

static void link_tls_closed(struct tls_stream *ts)
{
	link_release(ts->data);
}

/* l no longer counts against the setup limits: it is open or closing. */
static void link_uncount(struct peer_link *l)
{
	if (l->counted) {
		l->counted = false;
		l->t->handshaking--;
	}
}

/* Closes every handle of l and cancels its resolution; the last close
 * callback (or resolve_cb) frees it and, for an outbound link raft has not
 * got yet, fails raft's connect request. */
static void link_close(struct peer_link *l)
{
	if (l->state == LINK_CLOSING)
		return;
	/* Cancelled or not (a resolver thread may be in it), the request's
	 * callback runs once, and releases l. */
	if (l->state == LINK_RESOLVING)
		uv_cancel((uv_req_t *)&l->resolve);
	l->state = LINK_CLOSING;
	link_uncount(l); /* its place is free now, not at the last callback */
	uv_close((uv_handle_t *)&l->timer, link_handle_closed);
	if (l->tls_started)
		tls_stream_close(&l->tls, link_tls_closed);
	else
		uv_close((uv_handle_t *)&l->tcp, link_handle_closed);
	if (l->pipe_open)
		uv_close((uv_handle_t *)&l->pipe, link_handle_closed);
}

/* A connection refused before raft saw it: say why (a line of kind rate),
 * then close it. */
static void link_refusev(struct peer_link *l, struct log_rate *rate, const char *fmt, va_list ap)
{
	struct peer_tls *t = l->t;
	char why[512];
	vsnprintf(why, sizeof why, fmt, ap);
	uint64_t now = uv_now(t->loop);
	if (l->outbound)
		log_rate_warn(rate, now, "raft connection to %llu (%s) refused: %s",
			      (unsigned long long)l->peer_id, l->peer_address, why);
	else
		log_rate_warn(rate, now, "raft connection from %s refused: %s", l->remote, why);
	t->stats.refused++;
	link_close(l);
}

/* Refused for what it sent, or failed to. */
static void link_refuse(struct peer_link *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void link_refuse(struct peer_link *l, const char *fmt, ...)
{
	struct peer_tls *t = l->t;
	struct log_rate *rate = &t->log_inbound_tls;
	if (l->outbound)
		rate = &t->log_outbound;
	else if (l->state == LINK_HELLO)
		rate = &t->log_inbound_identity;
	va_list ap;
	va_start(ap, fmt);
	link_refusev(l, rate, fmt, ap);
	va_end(ap);
}

/* Refused by a setup limit, whatever it sent. */
static void link_shed(struct peer_link *l, struct log_rate *rate, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void link_shed(struct peer_link *l, struct log_rate *rate, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	link_refusev(l, rate, fmt, ap);
	va_end(ap);
}

static struct peer_link *link_new(struct peer_tls *t, bool outbound)
{
	struct peer_link *l = calloc(1, sizeof *l);
	if (l == NULL)
		return NULL;
	l->t = t;
	l->outbound = outbound;
	l->state = outbound ? LINK_CONNECTING : LINK_HANDSHAKE;
	list_add_tail(&t->links, &l->link);
	uv_tcp_init(t->loop, &l->tcp);
	uv_timer_init(t->loop, &l->timer);
	l->tcp.data = l->timer.data = l;
	l->handles = 2;
	strcpy(l->remote, "?");
	return l;
}

static void setup_timeout(uv_timer_t *h)
{
	struct peer_link *l = h->data;
	link_refuse(l, "not set up within %u ms", l->t->setup_ms);
}

/* ---------------------------------------------------------------- pump -- */

static void pipe_write_cb(uv_write_t *req, int status)
{
	struct to_raft *w = req->data;
	struct peer_link *l = w->l;
	l->to_raft -= w->len;
	free(w);
	if (status != 0) {
		link_close(l);
		return;
	}
	if (l->net_paused && l->state == LINK_OPEN && l->to_raft < PEER_TLS_HIGH_WATER / 2) {
		l->net_paused = false;
		tls_stream_read_start(&l->tls);
	}
}

/* Passes plaintext from the peer to raft: what the pipe takes now is not
 * copied; the rest waits in a write request of its own. */
static void send_to_raft(struct peer_link *l, const char *buf, size_t n)
{
	uv_buf_t b = uv_buf_init((char *)buf, (unsigned)n);
	int rv = uv_try_write((uv_stream_t *)&l->pipe, &b, 1);
	if (rv < 0 && rv != UV_EAGAIN) {
		link_close(l);
		return;
	}
	size_t done = rv > 0 ? (size_t)rv : 0;
	if (done == n)
		return;
	struct to_raft *w = malloc(sizeof *w + (n - done));
	if (w == NULL)
		log_fatal("out of memory");
	w->l = l;
	w->len = n - done;
	memcpy(w->data, buf + done, w->len);
	w->req.data = w;
	b = uv_buf_init(w->data, (unsigned)w->len);
	if (uv_write(&w->req, (uv_stream_t *)&l->pipe, &b, 1, pipe_write_cb) != 0) {
		free(w);
		link_close(l);
		return;
	}
	l->to_raft += w->len;
	if (l->to_raft > l->t->stats.peak_to_raft)
		l->t->stats.peak_to_raft = l->to_raft;
	if (!l->net_paused && l->to_raft >= PEER_TLS_HIGH_WATER) {
		l->net_paused = true;
		tls_stream_read_stop(&l->tls);
	}
}

static void pipe_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void pipe_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void net_write_cb(struct tls_stream_write *req, int status)
{
	struct to_net *c = req->data;
	struct peer_link *l = c->l;
	free(c);
	if (status != 0 || l->state != LINK_OPEN) {
		link_close(l);
		return;
	}
	size_t queued = tls_stream_write_queue_size(&l->tls);
	if (l->draining && queued == 0) {
		link_close(l);
		return;
	}
	if (l->pipe_paused && !l->draining && queued < PEER_TLS_HIGH_WATER / 2) {
		l->pipe_paused = false;
		uv_read_start((uv_stream_t *)&l->pipe, pipe_alloc_cb, pipe_read_cb);
	}
}

static void drain_timeout(uv_timer_t *h)
{
	link_close(h->data);
}

/* raft's bytes, read from the pipe: encrypted at once (pipe_read_cb). */
static _Thread_local char pipe_slab[65536];

static void pipe_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	(void)suggested;
	*buf = uv_buf_init(pipe_slab, sizeof pipe_slab);
}

/* Plaintext from raft, for the peer. */
static void pipe_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct peer_link *l = s->data;
	if (nread <= 0) {
		if (nread == 0)
			return;
		/* raft closed its stream: send what it wrote (for at most the
		 * setup deadline: the peer may not read), then close. */
		uv_read_stop(s);
		if (l->state == LINK_OPEN && tls_stream_write_queue_size(&l->tls) > 0) {
			l->draining = true;
			uv_timer_start(&l->timer, drain_timeout, l->t->setup_ms, 0);
		} else {
			link_close(l);
		}
		return;
	}
	struct to_net *c = malloc(sizeof *c);
	if (c == NULL)
		log_fatal("out of memory");
	c->l = l;
	c->req.data = c;
	uv_buf_t b = uv_buf_init(buf->base, (unsigned)nread);
	int rv = tls_stream_write(&c->req, &l->tls, &b, 1, net_write_cb);
	if (rv == TLS_STREAM_WRITTEN) {
		free(c); /* nothing for net_write_cb: the pipe is being read */
	} else if (rv != 0) {
		free(c);
		link_close(l);
		return;
	}
	size_t queued = tls_stream_write_queue_size(&l->tls);
	if (queued > l->t->stats.peak_to_peer)
		l->t->stats.peak_to_peer = queued;
	if (queued >= PEER_TLS_HIGH_WATER) {
		l->pipe_paused = true;
		uv_read_stop(s);
	}
}

/* Reads what raft wrote to l's pipe and sends it, as the pump would on
 * the loop's next poll. The end of the pipe and its errors are left to
 * that poll: libuv reads the pipe again, gets them and calls
 * pipe_read_cb. */
static void pump_now(struct peer_link *l)
{
	uv_os_fd_t fd;
	if (uv_fileno((uv_handle_t *)&l->pipe, &fd) != 0)
		return;
	while (l->state == LINK_OPEN && !l->pipe_paused && !l->draining) {
		ssize_t n = read(fd, pipe_slab, sizeof pipe_slab);
		if (n <= 0)
			return;
		uv_buf_t b = uv_buf_init(pipe_slab, (unsigned)n);
		pipe_read_cb((uv_stream_t *)&l->pipe, n, &b);
		if ((size_t)n < sizeof pipe_slab)
			return; /* drained */
	}
}

void peer_tls_flush(struct raft_uv_transport *tr)
{
	struct peer_tls *t = tr->impl;
	struct list *pos;
	list_each (pos, &t->links) {
		struct peer_link *l = list_entry(pos, struct peer_link, link);
		/* raft_uv sends only over the connections it opened. */
		if (l->outbound && l->state == LINK_OPEN && l->pipe_open)
			pump_now(l);
	}
}

/* ------------------------------------------------------- setting up --- */

static void raft_stream_free(uv_handle_t *h)
{
	raft_free(h);
}

/* Gives raft its end of a new socket pair and starts the pump; rest is
 * plaintext that came after the hello, for raft. */
static void link_open(struct peer_link *l, const char *rest, size_t n)
{
	struct peer_tls *t = l->t;
	int fds[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
		link_refuse(l, "socketpair: %s", strerror(errno));
		return;
	}
	uv_pipe_t *theirs = raft_malloc(sizeof *theirs);
	if (theirs == NULL)
		log_fatal("out of memory");
	uv_pipe_init(t->loop, &l->pipe, 0);
	l->pipe.data = l;
	l->pipe_open = true;
	l->handles++;
	uv_pipe_init(t->loop, theirs, 0);
	int ours_rv = uv_pipe_open(&l->pipe, fds[0]);
	if (ours_rv != 0)
		close(fds[0]);
	int theirs_rv = uv_pipe_open(theirs, fds[1]);
	if (theirs_rv != 0)
		close(fds[1]);
	if (ours_rv != 0 || theirs_rv != 0) {
		uv_close((uv_handle_t *)theirs, raft_stream_free);
		link_refuse(l, "socket pair: %s", uv_strerror(ours_rv != 0 ? ours_rv : theirs_rv));
		return;
	}
	l->state = LINK_OPEN;
	uv_timer_stop(&l->timer);
	link_uncount(l);
	uv_read_start((uv_stream_t *)&l->pipe, pipe_alloc_cb, pipe_read_cb);
	if (l->outbound) {
		struct raft_uv_connect *req = l->req;
		l->req = NULL;
		t->stats.connected++;
		log_debug("raft connection to %llu (%s) set up over TLS",
			  (unsigned long long)l->peer_id, l->peer_address);
		req->cb(req, (uv_stream_t *)theirs, 0);
	} else {
		t->stats.accepted++;
		log_debug("raft connection from %llu (%s, %s) set up over TLS",
			  (unsigned long long)l->peer_id, l->peer_address, l->remote);
		t->accept_cb(t->transport, l->peer_id, l->peer_address, (uv_stream_t *)theirs);
	}
	if (n > 0 && l->state == LINK_OPEN)
		send_to_raft(l, rest, n);
}

static void out_write_cb(struct tls_stream_write *req, int status)
{
	if (status != 0)
		link_close(req->data);
}

static int send_out(struct peer_link *l, size_t len)
{
	uv_buf_t b = uv_buf_init((char *)l->out, (unsigned)len);
	l->out_req.data = l;
	int rv = tls_stream_write(&l->out_req, &l->tls, &b, 1, out_write_cb);
	return rv == TLS_STREAM_WRITTEN ? 0 : rv;
}

/* Whether the certificate the peer presented is member id's. */
static bool cert_is_member(struct peer_link *l, raft_id id)
{
	char expect[MEMBER_CN_SIZE];
	member_cn(id, expect);
	return strcmp(tls_stream_peer_cn(&l->tls), expect) == 0;
}

/* Inbound: the hello's fixed part is in. Returns false if refused. */
static bool hello_head_ok(struct peer_link *l)
{
	uint64_t protocol = get64(l->in), id = get64(l->in + 8), len = get64(l->in + 16);
	if (protocol != HELLO_PROTOCOL) {
		link_refuse(l, "not a raftlock peer hello (protocol %#llx)",
			    (unsigned long long)protocol);
		return false;
	}
	if (id == 0 || id > INT64_MAX || len < 2 || len > HELLO_ADDR_MAX) {
		link_refuse(l, "malformed hello (id %llu, address of %llu bytes)",
			    (unsigned long long)id, (unsigned long long)len);
		return false;
	}
	return true;
}

/* The whole hello (inbound) or answer (outbound) is in; rest follows it. */
static void hello_done(struct peer_link *l, const char *rest, size_t n)
{
	if (l->outbound) {
		if (get64(l->in) != HELLO_PROTOCOL) {
			link_refuse(l, "not a raftlock peer answer");
			return;
		}
		link_open(l, rest, n);
		return;
	}
	raft_id id = get64(l->in + 8);
	size_t len = (size_t)get64(l->in + 16);
	const char *address = (const char *)l->in + HELLO_HEAD;
	if (memchr(address, '\0', len) != address + len - 1) {
		link_refuse(l, "malformed hello (address)");
		return;
	}
	if (!cert_is_member(l, id)) {
		link_refuse(l, "claims to be member %llu (%s) but its certificate is for '%s'",
			    (unsigned long long)id, address, tls_stream_peer_cn(&l->tls));
		return;
	}
	if (l->t->is_member != NULL && !l->t->is_member(l->t->member_arg, id)) {
		link_refuse(l, "member %llu (%s) is not a member of this node's cluster",
			    (unsigned long long)id, address);
		return;
	}
	l->peer_id = id;
	memcpy(l->peer_address, address, len);
	put64(l->out, HELLO_PROTOCOL);
	if (send_out(l, ACK_LEN) != 0) {
		link_close(l);
		return;
	}
	link_open(l, rest, n);
}

static size_t hello_need(const struct peer_link *l)
{
	if (l->outbound)
		return ACK_LEN;
	if (l->in_len < HELLO_HEAD)
		return HELLO_HEAD;
	return HELLO_HEAD + (size_t)get64(l->in + 16);
}

static void tls_read_cb(struct tls_stream *ts, ssize_t nread, const char *buf)
{
	struct peer_link *l = ts->data;
	if (nread < 0) {
		const char *why = tls_stream_error(ts);
		if (why[0] == '\0')
			why = uv_strerror((int)nread);
		if (l->state == LINK_OPEN)
			log_debug("raft connection %s %llu ended: %s", l->outbound ? "to" : "from",
				  (unsigned long long)l->peer_id, why);
		if (l->state == LINK_OPEN || l->state == LINK_CLOSING)
			link_close(l);
		else if (l->outbound && l->state == LINK_HELLO)
			link_refuse(l, "the peer did not accept this member's hello (%s)", why);
		else
			link_refuse(l, "%s", why);
		return;
	}
	size_t n = (size_t)nread, used = 0;
	while (l->state == LINK_HELLO && used < n) {
		size_t need = hello_need(l), k = need - l->in_len;
		if (k > n - used)
			k = n - used;
		memcpy(l->in + l->in_len, buf + used, k);
		l->in_len += k;
		used += k;
		if (l->in_len < need)
			return;
		if (!l->outbound && l->in_len == HELLO_HEAD) {
			if (!hello_head_ok(l))
				return;
			continue;
		}
		hello_done(l, buf + used, n - used);
		return;
	}
	if (l->state == LINK_OPEN && used < n)
		send_to_raft(l, buf + used, n - used);
}

static void tls_handshake_cb(struct tls_stream *ts)
{
	struct peer_link *l = ts->data;
	if (l->state != LINK_HANDSHAKE)
		return;
	l->state = LINK_HELLO;
	if (!l->outbound)
		return;
	if (!cert_is_member(l, l->peer_id)) {
		link_refuse(l, "its certificate is for '%s', not for member %llu",
			    tls_stream_peer_cn(ts), (unsigned long long)l->peer_id);
		return;
	}
	struct peer_tls *t = l->t;
	size_t len = strlen(t->address) + 1;
	put64(l->out, HELLO_PROTOCOL);
	put64(l->out + 8, t->id);
	put64(l->out + 16, len);
	memcpy(l->out + HELLO_HEAD, t->address, len);
	if (send_out(l, HELLO_HEAD + len) != 0)
		link_close(l);
}

static void link_start_tls(struct peer_link *l, SSL_CTX *ctx, enum tls_role role)
{
	struct tls_stream_options o = {
		.role = role,
		.host = NULL, /* the member's identity is checked by id, not address */
		.handshake_timeout_ms = l->t->setup_ms,
		.on_handshake = tls_handshake_cb,
		.on_read = tls_read_cb,
	};
	l->state = LINK_HANDSHAKE;
	int rv = tls_stream_start(&l->tls, (uv_stream_t *)&l->tcp, ctx, &o);
	if (rv != 0) {
		link_refuse(l, "TLS: %s", uv_strerror(rv));
		return;
	}
	l->tls.data = l; /* tls_stream_start() clears the engine */
	l->tls_started = true;
}

/* An IPv4 literal or a host name with a port, as libraft takes them.
 * Blocking: for listen only, once at start; connects resolve on the thread
 * pool (transport_connect). */
static int resolve(const char *address, struct sockaddr_in *sa)
{
	char host[HELLO_ADDR_MAX], port[ADDRESS_PORT_MAX];
	if (address_split(address, host, sizeof host, port) != 0)
		return -1;
	if (uv_ip4_addr(host, atoi(port), sa) == 0)
		return 0;
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	if (getaddrinfo(host, port, &hints, &ai) != 0)
		return -1;
	memcpy(sa, ai->ai_addr, sizeof *sa);
	freeaddrinfo(ai);
	return 0;
}

/* -------------------------------------------------------- the interface -- */

static void tcp_connect_cb(uv_connect_t *req, int status)
{
	struct peer_link *l = req->data;
	if (l->state == LINK_CLOSING)
		return;
	if (status != 0) {
		log_debug("raft connection to %llu (%s): %s", (unsigned long long)l->peer_id,
			  l->peer_address, uv_strerror(status));
		link_close(l);
		return;
	}
	uv_tcp_nodelay(&l->tcp, 1);
	link_start_tls(l, l->t->client_ctx, TLS_ROLE_CLIENT);
}

static int link_connect(struct peer_link *l, const struct sockaddr *sa)
{
	l->state = LINK_CONNECTING;
	l->connect.data = l;
	return uv_tcp_connect(&l->connect, &l->tcp, sa, tcp_connect_cb);
}

static void resolve_cb(uv_getaddrinfo_t *req, int status, struct addrinfo *ai)
{
	struct peer_link *l = req->data;
	if (l->state == LINK_RESOLVING) {
		if (status != 0) {
			log_debug("raft connection to %llu (%s): %s",
				  (unsigned long long)l->peer_id, l->peer_address,
				  uv_strerror(status));
			link_close(l);
		} else if (link_connect(l, ai->ai_addr) != 0) {
			link_close(l);
		}
	}
	uv_freeaddrinfo(ai);
	link_release(l); /* the resolution's hold */
}

static int transport_connect(struct raft_uv_transport *tr, struct raft_uv_connect *req, raft_id id,
			     const char *address, raft_uv_connect_cb cb)
{
	struct peer_tls *t = tr->impl;
	char host[HELLO_ADDR_MAX], port[ADDRESS_PORT_MAX];
	struct sockaddr_in sa;
	if (t->closing)
		return RAFT_CANCELED;
	if (strlen(address) >= HELLO_ADDR_MAX ||
	    address_split(address, host, sizeof host, port) != 0)
		return RAFT_NOCONNECTION;
	struct peer_link *l = link_new(t, true);
	if (l == NULL)
		return RAFT_NOMEM;
	l->peer_id = id;
	strcpy(l->peer_address, address);
	snprintf(l->remote, sizeof l->remote, "%s", address);
	/* A host name is resolved on libuv's thread pool: the loop must not
	 * wait for a resolver. A literal (the usual member address) is not:
	 * it needs no lookup, and the pool's few threads are shared with
	 * raft's disk work, behind which it would wait. */
	int rv;
	if (uv_ip4_addr(host, atoi(port), &sa) == 0) {
		rv = link_connect(l, (struct sockaddr *)&sa);
	} else {
		struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
		l->resolve.data = l;
		rv = uv_getaddrinfo(t->loop, &l->resolve, resolve_cb, host, port, &hints);
		if (rv == 0) {
			l->state = LINK_RESOLVING;
			l->handles++;
		}
	}
	if (rv != 0) {
		link_close(l);
		return RAFT_NOCONNECTION;
	}
	req->cb = cb;
	l->req = req;
	uv_timer_start(&l->timer, setup_timeout, t->setup_ms, 0); /* resolution included */
	return 0;
}

/* Inbound links in setup from ip. */
static unsigned setups_from(struct peer_tls *t, const char *ip)
{
	unsigned n = 0;
	struct list *pos;
	list_each (pos, &t->links) {
		struct peer_link *l = list_entry(pos, struct peer_link, link);
		if (l->counted && strcmp(l->ip, ip) == 0)
			n++;
	}
	return n;
}

/* The inbound link in setup to close for a newcomer when all places are
 * taken: the oldest still in its TLS handshake, else (every one proved a
 * certificate of the cluster's CA) the oldest. Then whoever holds the
 * places must keep opening connections to keep them, and a member's
 * setup, a few round trips, is not the oldest for long. */
static struct peer_link *setup_victim(struct peer_tls *t)
{
	struct peer_link *oldest = NULL;
	struct list *pos;
	list_each (pos, &t->links) {
		struct peer_link *l = list_entry(pos, struct peer_link, link);
		if (!l->counted)
			continue;
		if (l->state == LINK_HANDSHAKE)
			return l;
		if (oldest == NULL)
			oldest = l;
	}
	return oldest;
}

static void on_connection(uv_stream_t *server, int status)
{
	struct peer_tls *t = server->data;
	if (status != 0 || t->closing)
		return;
	struct peer_link *l = link_new(t, false);
	if (l == NULL)
		log_fatal("out of memory");
	if (uv_accept(server, (uv_stream_t *)&l->tcp) != 0) {
		link_close(l);
		return;
	}
	struct sockaddr_storage sa;
	int salen = sizeof sa;
	strcpy(l->ip, "?");
	if (uv_tcp_getpeername(&l->tcp, (struct sockaddr *)&sa, &salen) == 0) {
		uv_ip_name((struct sockaddr *)&sa, l->ip, sizeof l->ip);
		snprintf(l->remote, sizeof l->remote, "%s:%d", l->ip,
			 ntohs(((struct sockaddr_in *)&sa)->sin_port));
	}
	/* One host holds only a few places, so that it takes more hosts than
	 * members to fill them; a member needs one or two at a time. */
	if (setups_from(t, l->ip) >= PEER_TLS_MAX_HANDSHAKES_PER_ADDRESS) {
		link_shed(l, &t->log_inbound_address,
			  "%u connections from %s already setting up (the limit for one address)",
			  PEER_TLS_MAX_HANDSHAKES_PER_ADDRESS, l->ip);
		return;
	}
	l->accepted_ms = uv_now(t->loop);
	if (t->handshaking >= PEER_TLS_MAX_HANDSHAKES) {
		/* Refusing the newcomer would let whoever holds the places shut
		 * the port to members for good. */
		struct peer_link *old = setup_victim(t);
		link_shed(old, &t->log_inbound_evicted,
			  "evicted after %llu ms, the oldest of %u connections setting up, for a "
			  "new one from %s",
			  (unsigned long long)(l->accepted_ms - old->accepted_ms), t->handshaking,
			  l->remote);
	}
	l->counted = true;
	t->handshaking++;
	uv_tcp_nodelay(&l->tcp, 1);
	uv_timer_start(&l->timer, setup_timeout, t->setup_ms, 0);
	link_start_tls(l, t->server_ctx, TLS_ROLE_SERVER);
}

static int transport_init(struct raft_uv_transport *tr, raft_id id, const char *address)
{
	struct peer_tls *t = tr->impl;
	if (strlen(address) >= sizeof t->address) {
		snprintf(tr->errmsg, sizeof tr->errmsg, "raft address %.100s... is too long",
			 address);
		return RAFT_INVALID;
	}
	t->id = id;
	strcpy(t->address, address);
	return 0;
}

static int transport_listen(struct raft_uv_transport *tr, raft_uv_accept_cb cb)
{
	struct peer_tls *t = tr->impl;
	struct sockaddr_in sa;
	t->accept_cb = cb;
	if (resolve(t->address, &sa) != 0) {
		snprintf(tr->errmsg, sizeof tr->errmsg, "raft address %.100s does not resolve",
			 t->address);
		return RAFT_IOERR;
	}
	uv_tcp_init(t->loop, &t->listener);
	t->listener.data = t;
	t->listening = true;
	int rv = uv_tcp_bind(&t->listener, (struct sockaddr *)&sa, 0);
	if (rv == 0)
		rv = uv_listen((uv_stream_t *)&t->listener, 128, on_connection);
	if (rv != 0) {
		snprintf(tr->errmsg, sizeof tr->errmsg, "listen on %.100s: %s", t->address,
			 uv_strerror(rv));
		return RAFT_IOERR;
	}
	return 0;
}

static void listener_closed(uv_handle_t *h)
{
	struct peer_tls *t = h->data;
	t->listener_done = true;
	transport_maybe_closed(t);
}

static void closer_closed(uv_handle_t *h)
{
	struct peer_tls *t = h->data;
	t->closer_done = true;
	transport_maybe_closed(t);
}

static void transport_close(struct raft_uv_transport *tr, raft_uv_transport_close_cb cb)
{
	struct peer_tls *t = tr->impl;
	struct list *pos, *tmp;
	t->closing = true;
	t->close_cb = cb;
	/* A handle closed just to call cb from the loop, never from here. */
	uv_timer_init(t->loop, &t->closer);
	t->closer.data = t;
	uv_close((uv_handle_t *)&t->closer, closer_closed);
	if (t->listening)
		uv_close((uv_handle_t *)&t->listener, listener_closed);
	else
		t->listener_done = true;
	list_each_safe (pos, tmp, &t->links) {
		link_close(list_entry(pos, struct peer_link, link));
	}
}

/* Whether ctx's own certificate is member id's (its peers would refuse
 * it otherwise). */
static int check_own_cn(SSL_CTX *ctx, const struct tls_files *files, raft_id id, char *err,
			size_t errlen)
{
	char cn[256] = "", expect[MEMBER_CN_SIZE];
	X509 *cert = SSL_CTX_get0_certificate(ctx);
	if (cert != NULL)
		X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn,
					  sizeof cn);
	member_cn(id, expect);
	if (strcmp(cn, expect) == 0)
		return 0;
	snprintf(err, errlen,
		 "peer-tls-cert %s has common name '%s', but member %llu's must be '%s' (its "
		 "peers would refuse it)",
		 files->cert, cn, (unsigned long long)id, expect);
	return -1;
}

/* The server and client contexts of member id from files; on failure a
 * message in err and nothing allocated. */
static int contexts_new(const struct tls_files *files, raft_id id, SSL_CTX **server,
			SSL_CTX **client, char *err, size_t errlen)
{
	if (files->cert == NULL || files->key == NULL || files->ca == NULL) {
		snprintf(err, errlen, "peer TLS needs a certificate, its key and the cluster's CA");
		return -1;
	}
	if (tls_ctx_new(server, TLS_ROLE_SERVER, files, true, err, errlen) != 0)
		return -1;
	if (check_own_cn(*server, files, id, err, errlen) != 0 ||
	    tls_ctx_new(client, TLS_ROLE_CLIENT, files, false, err, errlen) != 0) {
		SSL_CTX_free(*server);
		*server = NULL;
		return -1;
	}
	return 0;
}

int peer_tls_init(struct raft_uv_transport *tr, uv_loop_t *loop, raft_id id,
		  const struct tls_files *files, char *err, size_t errlen)
{
	struct peer_tls *t = calloc(1, sizeof *t);
	if (t == NULL) {
		snprintf(err, errlen, "peer TLS: out of memory");
		return -1;
	}
	if (contexts_new(files, id, &t->server_ctx, &t->client_ctx, err, errlen) != 0) {
		free(t);
		return -1;
	}
	t->transport = tr;
	t->loop = loop;
	t->setup_ms = PEER_TLS_SETUP_MS;
	list_init(&t->links);
	tr->version = 1;
	tr->impl = t;
	tr->errmsg[0] = '\0';
	tr->init = transport_init;
	tr->listen = transport_listen;
	tr->connect = transport_connect;
	tr->close = transport_close;
	return 0;
}

int peer_tls_reload(struct raft_uv_transport *tr, raft_id id, const struct tls_files *files,
		    char *err, size_t errlen)
{
	struct peer_tls *t = tr->impl;
	SSL_CTX *server, *client;
	if (contexts_new(files, id, &server, &client, err, errlen) != 0)
		return -1;
	/* Connections set up or being set up hold their own references. */
	SSL_CTX_free(t->server_ctx);
	SSL_CTX_free(t->client_ctx);
	t->server_ctx = server;
	t->client_ctx = client;
	return 0;
}

void peer_tls_close(struct raft_uv_transport *tr)
{
	struct peer_tls *t = tr->impl;
	SSL_CTX_free(t->client_ctx);
	SSL_CTX_free(t->server_ctx);
	free(t);
	tr->impl = NULL;
}

void peer_tls_set_setup_timeout(struct raft_uv_transport *tr, unsigned ms)
{
	struct peer_tls *t = tr->impl;
	t->setup_ms = ms;
}

void peer_tls_set_members(struct raft_uv_transport *tr, peer_tls_member_fn is_member, void *arg)
{
	struct peer_tls *t = tr->impl;
	t->is_member = is_member;
	t->member_arg = arg;
}

struct peer_tls_stats peer_tls_stats(const struct raft_uv_transport *tr)
{
	const struct peer_tls *t = tr->impl;
	return t->stats;
}
