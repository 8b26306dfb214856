/*
 * peer_tcp.c: libraft's TCP transport with TCP_NODELAY on every stream
 * (peer_tcp.h says why).
 *
 * The transport raft sees (outer) forwards each call to a raft_uv_tcp
 * transport of its own (inner) and puts itself between inner and raft's
 * callbacks, to set the option on a stream before raft gets it.
 */
#include "peer_tcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct peer_tcp {
	struct raft_uv_transport inner;  /* raft_uv_tcp's; inner.data is this */
	struct raft_uv_transport *outer; /* the one raft holds */
	raft_uv_accept_cb accept_cb;
	raft_uv_transport_close_cb close_cb;
};

/* One connect request of raft's, while inner works on it. */
struct peer_tcp_connect {
	struct raft_uv_connect inner; /* inner.data is this */
	struct raft_uv_connect *req;
	raft_uv_connect_cb cb;
};

/* A failure to set the option costs latency, not correctness: the stream
 * is handed to raft either way. */
static void stream_nodelay(struct uv_stream_s *stream)
{
	if (stream != NULL && stream->type == UV_TCP)
		uv_tcp_nodelay((uv_tcp_t *)stream, 1);
}

static void copy_errmsg(struct peer_tcp *p)
{
	memcpy(p->outer->errmsg, p->inner.errmsg, sizeof p->outer->errmsg);
	p->outer->errmsg[sizeof p->outer->errmsg - 1] = '\0';
}

static int transport_init(struct raft_uv_transport *tr, raft_id id, const char *address)
{
	struct peer_tcp *p = tr->impl;
	int rv = p->inner.init(&p->inner, id, address);
	if (rv != 0)
		copy_errmsg(p);
	return rv;
}

static void on_accept(struct raft_uv_transport *inner, raft_id id, const char *address,
		      struct uv_stream_s *stream)
{
	struct peer_tcp *p = inner->data;
	stream_nodelay(stream);
	p->accept_cb(p->outer, id, address, stream);
}

static int transport_listen(struct raft_uv_transport *tr, raft_uv_accept_cb cb)
{
	struct peer_tcp *p = tr->impl;
	p->accept_cb = cb;
	int rv = p->inner.listen(&p->inner, on_accept);
	if (rv != 0)
		copy_errmsg(p);
	return rv;
}

static void on_connect(struct raft_uv_connect *inner, struct uv_stream_s *stream, int status)
{
	struct peer_tcp_connect *c = inner->data;
	struct raft_uv_connect *req = c->req;
	raft_uv_connect_cb cb = c->cb;
	free(c);
	if (status == 0)
		stream_nodelay(stream);
	cb(req, stream, status);
}

static int transport_connect(struct raft_uv_transport *tr, struct raft_uv_connect *req, raft_id id,
			     const char *address, raft_uv_connect_cb cb)
{
	struct peer_tcp *p = tr->impl;
	struct peer_tcp_connect *c = calloc(1, sizeof *c);
	if (c == NULL) {
		snprintf(tr->errmsg, sizeof tr->errmsg, "out of memory");
		return RAFT_NOMEM;
	}
	c->inner.data = c;
	c->req = req;
	c->cb = cb;
	/* A refused request never calls back (raft_uv_transport's rule). */
	int rv = p->inner.connect(&p->inner, &c->inner, id, address, on_connect);
	if (rv != 0) {
		copy_errmsg(p);
		free(c);
	}
	return rv;
}

static void on_close(struct raft_uv_transport *inner)
{
	struct peer_tcp *p = inner->data;
	p->close_cb(p->outer);
}

static void transport_close(struct raft_uv_transport *tr, raft_uv_transport_close_cb cb)
{
	struct peer_tcp *p = tr->impl;
	p->close_cb = cb;
	p->inner.close(&p->inner, on_close);
}

int peer_tcp_init(struct raft_uv_transport *t, uv_loop_t *loop, char *err, size_t errlen)
{
	struct peer_tcp *p = calloc(1, sizeof *p);
	if (p == NULL) {
		snprintf(err, errlen, "raft transport: out of memory");
		return -1;
	}
	p->inner.version = 1; /* 0.22.1 refuses version 0 */
	int rv = raft_uv_tcp_init(&p->inner, loop);
	if (rv != 0) {
		snprintf(err, errlen, "raft transport: %s", raft_strerror(rv));
		free(p);
		return -1;
	}
	p->inner.data = p;
	p->outer = t;
	t->impl = p;
	t->errmsg[0] = '\0';
	t->init = transport_init;
	t->listen = transport_listen;
	t->connect = transport_connect;
	t->close = transport_close;
	return 0;
}

void peer_tcp_close(struct raft_uv_transport *t)
{
	struct peer_tcp *p = t->impl;
	if (p == NULL)
		return;
	raft_uv_tcp_close(&p->inner);
	free(p);
	t->impl = NULL;
}
