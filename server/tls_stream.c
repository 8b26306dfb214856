/* tls_stream.c: see tls_stream.h.
 *
 * Data flow: stream bytes -> net_in (memory BIO) -> SSL_read -> on_read;
 * tls_stream_write -> SSL_write -> ts->out (the output BIO below) -> the
 * stream, once per plaintext write (or per handshake flight). The BIOs
 * never block, so OpenSSL only ever asks for more input
 * (SSL_ERROR_WANT_READ); its output is moved to the stream after every
 * call that may produce some.
 *
 * Cost, per record: the ciphertext is handed to the kernel with
 * uv_try_write straight from ts->out; only what the kernel does not take
 * at once is copied into a uv_write request. A write done at once is done
 * when tls_stream_write() returns, which says so (TLS_STREAM_WRITTEN): no
 * uv_write request (no malloc, copy or poll-interest change), and no
 * callback, so no loop turn through the engine's timer to make it. OpenSSL's
 * error queue is cleared only when it holds something (tls_clear_errors). */
#include "tls_stream.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509.h>

/* What OpenSSL may return from one SSL_read: a record's plaintext. */
#define PLAIN_MAX 16384

/* Ciphertext the kernel did not take at once, with the plaintext write it
 * completes. */
struct net_write {
	uv_write_t req;
	struct tls_stream *ts;
	struct tls_stream_write *done; /* NULL for handshake and alerts */
	char buf[];
};

/* ------------------------------------------------------- output BIO -- */

/* OpenSSL writes its records here: appended to ts->out, which
 * flush_net() hands to the stream. A memory BIO would cost a copy in and
 * another out. */
static BIO_METHOD *out_method;
static pthread_once_t out_once = PTHREAD_ONCE_INIT;

static int out_write(BIO *b, const char *data, int len)
{
	struct tls_stream *ts = BIO_get_data(b);
	if (len <= 0)
		return 0;
	if (ts->out_len + (size_t)len > ts->out_cap) {
		size_t cap = ts->out_cap ? ts->out_cap : 4096;
		while (cap < ts->out_len + (size_t)len)
			cap *= 2;
		char *p = realloc(ts->out, cap);
		if (p == NULL)
			return -1; /* OpenSSL fails the call: fail_tls */
		ts->out = p;
		ts->out_cap = cap;
	}
	memcpy(ts->out + ts->out_len, data, (size_t)len);
	ts->out_len += (size_t)len;
	return len;
}

static long out_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)num;
	(void)ptr;
	if (cmd == BIO_CTRL_FLUSH)
		return 1; /* flush_net() runs after every call that writes */
	if (cmd == BIO_CTRL_WPENDING) {
		struct tls_stream *ts = BIO_get_data(b);
		return ts != NULL ? (long)ts->out_len : 0;
	}
	return 0;
}

static int out_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static void out_make(void)
{
	BIO_METHOD *m =
		BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "raftlock TLS output");
	if (m == NULL)
		return;
	if (BIO_meth_set_write(m, out_write) != 1 || BIO_meth_set_ctrl(m, out_ctrl) != 1 ||
	    BIO_meth_set_create(m, out_create) != 1) {
		BIO_meth_free(m);
		return;
	}
	out_method = m;
}

static void stream_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void stream_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	(void)suggested;
	static _Thread_local char slab[65536]; /* copied into net_in at once */
	*buf = uv_buf_init(slab, sizeof slab);
}

/* Records the end of the connection (the first one wins); reported to the
 * owner by report(), from the loop. */
static void fail(struct tls_stream *ts, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void fail(struct tls_stream *ts, int code, const char *fmt, ...)
{
	if (ts->ended)
		return;
	ts->ended = true;
	ts->error = code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ts->errmsg, sizeof ts->errmsg, fmt, ap);
	va_end(ap);
}

/* OpenSSL's reason for a failed call, with the certificate check's verdict
 * when that is what failed. */
static void fail_tls(struct tls_stream *ts, const char *what)
{
	unsigned long e = ERR_get_error();
	const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;
	long v = SSL_get_verify_result(ts->ssl);
	ERR_clear_error();
	if (reason == NULL)
		reason = "protocol error";
	if (v != X509_V_OK)
		fail(ts, UV_EPROTO, "%s: %s: %s", what, reason, X509_verify_cert_error_string(v));
	else
		fail(ts, UV_EPROTO, "%s: %s", what, reason);
}

/* Work for the loop: callbacks that a tls_stream_* call must not make. */
static void timer_cb(uv_timer_t *t);
static void defer(struct tls_stream *ts)
{
	if (!ts->closing)
		uv_timer_start(&ts->timer, timer_cb, 0, 0);
}

/* req's callback, with status, from the loop. */
static void finish_later(struct tls_stream *ts, struct tls_stream_write *req, int status)
{
	req->status = status;
	req->next = NULL;
	*ts->finished_tail = req;
	ts->finished_tail = &req->next;
	defer(ts);
}

static void call_back_finished(struct tls_stream *ts)
{
	struct tls_stream_write *req;
	while ((req = ts->finished) != NULL) {
		ts->finished = req->next;
		if (ts->finished == NULL)
			ts->finished_tail = &ts->finished;
		req->cb(req, req->status);
	}
}

/* Tells the owner of the end, once. */
static void report(struct tls_stream *ts)
{
	if (!ts->ended || ts->reported || ts->closing)
		return;
	ts->reported = true;
	uv_read_stop(ts->stream);
	ts->on_read(ts, ts->error, NULL);
}

static void net_written(uv_write_t *w, int status)
{
	struct net_write *nw = (struct net_write *)w;
	struct tls_stream *ts = nw->ts;
	struct tls_stream_write *req = nw->done;
	free(nw);
	if (status < 0 && !ts->closing)
		fail(ts, status, "writing to the peer: %s", uv_strerror(status));
	if (req != NULL)
		req->cb(req, status);
	report(ts);
}

/* The write failed with code: the connection ends, req (if any) too. */
static void flush_failed(struct tls_stream *ts, struct tls_stream_write *req, int code)
{
	if (code == UV_ENOMEM)
		fail(ts, code, "out of memory writing to the peer");
	else
		fail(ts, code, "writing to the peer: %s", uv_strerror(code));
	if (req != NULL)
		finish_later(ts, req, code);
	defer(ts);
}

/* Hands ts->out to the stream. Returns true when the kernel took it all
 * at once: req (if any) is then done, and not called back. Otherwise req
 * completes with the write of the rest, or with the error, from the loop. */
static bool flush_out(struct tls_stream *ts, struct tls_stream_write *req)
{
	size_t n = ts->out_len, done = 0;
	ts->out_len = 0;
	if (n > 0) {
		/* UV_EAGAIN also while earlier writes wait in libuv's queue:
		 * the order of the bytes is kept. */
		uv_buf_t b = uv_buf_init(ts->out, (unsigned)n);
		int w = uv_try_write(ts->stream, &b, 1);
		if (w < 0 && w != UV_EAGAIN) {
			flush_failed(ts, req, w);
			return false;
		}
		done = w > 0 ? (size_t)w : 0;
	}
	if (done == n)
		return true;
	struct net_write *nw = malloc(sizeof *nw + (n - done));
	if (nw == NULL) {
		flush_failed(ts, req, UV_ENOMEM);
		return false;
	}
	memcpy(nw->buf, ts->out + done, n - done);
	nw->ts = ts;
	nw->done = req;
	uv_buf_t b = uv_buf_init(nw->buf, (unsigned)(n - done));
	int rv = uv_write(&nw->req, ts->stream, &b, 1, net_written);
	if (rv != 0) {
		free(nw);
		flush_failed(ts, req, rv);
	}
	return false;
}

/* ts->out keeps its room between writes, unless a burst made it large. */
#define OUT_KEEP (256 * 1024)

/* Moves OpenSSL's output to the stream: flush_out(). */
static bool flush_net(struct tls_stream *ts, struct tls_stream_write *req)
{
	bool at_once = flush_out(ts, req);
	if (ts->out_cap > OUT_KEEP) {
		free(ts->out);
		ts->out = NULL;
		ts->out_cap = 0;
	}
	return at_once;
}

static void free_bufs(struct tls_stream_write *req)
{
	if (req->bufs != req->small)
		free(req->bufs);
	req->bufs = NULL;
	req->nbufs = 0;
}

/* Encrypts req and hands its records to the stream. Returns true when req
 * is done at once (flush_out), not to be called back. */
static bool send_req(struct tls_stream *ts, struct tls_stream_write *req)
{
	int rv = 0;
	tls_clear_errors();
	for (unsigned i = 0; i < req->nbufs && rv == 0; i++) {
		const char *p = req->bufs[i].base;
		size_t left = req->bufs[i].len;
		while (left > 0) {
			/* Partial writes (tls_ctx.c): one record per call. */
			int chunk = left > INT32_MAX ? INT32_MAX : (int)left;
			int w = SSL_write(ts->ssl, p, chunk);
			if (w <= 0) {
				fail_tls(ts, "TLS write");
				rv = UV_EPROTO;
				break;
			}
			p += w;
			left -= (size_t)w;
		}
	}
	free_bufs(req);
	if (rv != 0) {
		finish_later(ts, req, rv);
		return false;
	}
	return flush_net(ts, req);
}

static void established(struct tls_stream *ts)
{
	ts->established = true;
	uv_timer_stop(&ts->timer);
	X509 *peer = SSL_get0_peer_certificate(ts->ssl);
	int n = peer != NULL
			? X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName,
						    ts->peer_cn, sizeof ts->peer_cn)
			: -1;
	/* A name with a NUL byte in it would read as its head ("raftlock-
	 * node-4\0x" as member 4's): no name at all, then. */
	if (n < 0 || strlen(ts->peer_cn) != (size_t)n)
		ts->peer_cn[0] = '\0';
	struct tls_stream_write *req;
	while ((req = ts->queue) != NULL && !ts->ended) {
		ts->queue = req->next;
		if (ts->queue == NULL)
			ts->queue_tail = &ts->queue;
		ts->queued_bytes -= req->bytes;
		if (send_req(ts, req)) /* its owner waits for the callback */
			finish_later(ts, req, 0);
	}
}

/* One step of the handshake with what net_in holds. */
static void handshake(struct tls_stream *ts)
{
	tls_clear_errors();
	int r = SSL_do_handshake(ts->ssl);
	if (r == 1) {
		flush_net(ts, NULL); /* the last flight, before any data */
		established(ts);
		return;
	}
	int e = SSL_get_error(ts->ssl, r);
	if (e != SSL_ERROR_WANT_READ)
		fail_tls(ts, "TLS handshake failed");
	flush_net(ts, NULL); /* our next flight, or the alert that says why */
}

/* Decrypts what net_in holds and hands it to the owner. */
static void deliver(struct tls_stream *ts)
{
	char plain[PLAIN_MAX];
	while (!ts->paused && !ts->closing && !ts->ended) {
		/* Nothing to decrypt: no SSL_read just to hear "want read"
		 * (at the end of the stream it says how the peer left). */
		if (!ts->peer_eof && BIO_ctrl_pending(ts->net_in) == 0 && SSL_pending(ts->ssl) == 0)
			break;
		tls_clear_errors();
		int r = SSL_read(ts->ssl, plain, sizeof plain);
		if (r > 0) {
			ts->on_read(ts, r, plain);
			continue;
		}
		int e = SSL_get_error(ts->ssl, r);
		if (e == SSL_ERROR_WANT_READ) {
			if (ts->peer_eof)
				fail(ts, UV_EOF,
				     "the peer closed the connection without close_notify");
		} else if (e == SSL_ERROR_ZERO_RETURN) {
			fail(ts, UV_EOF, "the peer closed the connection (close_notify)");
		} else {
			fail_tls(ts, "TLS read");
		}
		break;
	}
	if (!ts->closing)
		flush_net(ts, NULL); /* what reading made OpenSSL say (key updates) */
}

static void stream_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct tls_stream *ts = s->data;
	if (ts->closing || ts->ended)
		return;
	if (nread == UV_EOF) {
		uv_read_stop(s);
		ts->peer_eof = true;
		if (!ts->established)
			fail(ts, UV_ECONNABORTED,
			     "the peer closed the connection during the TLS handshake");
		else
			deliver(ts);
	} else if (nread < 0) {
		fail(ts, (int)nread, "reading from the peer: %s", uv_strerror((int)nread));
	} else if (nread > 0) {
		if (BIO_write(ts->net_in, buf->base, (int)nread) != (int)nread) {
			fail(ts, UV_ENOMEM, "out of memory reading from the peer");
		} else if (ts->established) {
			deliver(ts);
		} else {
			handshake(ts);
			if (ts->established && !ts->ended && ts->on_handshake != NULL)
				ts->on_handshake(ts);
			/* Records that came with the last flight. */
			if (ts->established)
				deliver(ts);
		}
	}
	if (ts->paused && ts->established && !ts->ended && !ts->closing)
		uv_read_stop(s);
	report(ts);
}

static void timer_cb(uv_timer_t *t)
{
	struct tls_stream *ts = t->data;
	if (ts->closing)
		return;
	if (!ts->established && !ts->ended)
		fail(ts, UV_ETIMEDOUT, "TLS handshake not done within %u ms", ts->timeout_ms);
	call_back_finished(ts);
	if (ts->established && !ts->ended && !ts->paused && !ts->closing)
		deliver(ts);
	report(ts);
}

int tls_stream_start(struct tls_stream *ts, uv_stream_t *stream, SSL_CTX *ctx,
		     const struct tls_stream_options *opts)
{
	if (opts->on_read == NULL)
		return UV_EINVAL;
	pthread_once(&out_once, out_make);
	if (out_method == NULL)
		return UV_ENOMEM;
	memset(ts, 0, sizeof *ts);
	ts->queue_tail = &ts->queue;
	ts->finished_tail = &ts->finished;
	ts->on_read = opts->on_read;
	ts->on_handshake = opts->on_handshake;
	ts->timeout_ms = opts->handshake_timeout_ms ? opts->handshake_timeout_ms
						    : TLS_STREAM_HANDSHAKE_TIMEOUT_MS;
	ts->ssl = SSL_new(ctx);
	ts->net_in = BIO_new(BIO_s_mem());
	ts->net_out = BIO_new(out_method);
	if (ts->ssl == NULL || ts->net_in == NULL || ts->net_out == NULL)
		goto nomem;
	BIO_set_data(ts->net_out, ts);
	BIO_set_mem_eof_return(ts->net_in, -1);        /* empty: "retry", not EOF */
	SSL_set_bio(ts->ssl, ts->net_in, ts->net_out); /* the SSL owns them now */
	if (opts->role == TLS_ROLE_CLIENT) {
		if (opts->host != NULL && tls_ctx_expect_host(ts->ssl, opts->host) != 0) {
			SSL_free(ts->ssl);
			return UV_EINVAL;
		}
		SSL_set_connect_state(ts->ssl);
	} else {
		/* Our clients do not resume sessions: send no tickets. */
		SSL_set_num_tickets(ts->ssl, 0);
		SSL_set_accept_state(ts->ssl);
	}
	void *owner = stream->data;
	ts->stream = stream;
	stream->data = ts;
	int rv = uv_read_start(stream, stream_alloc, stream_read);
	if (rv != 0) {
		stream->data = owner;
		SSL_free(ts->ssl);
		return rv;
	}
	uv_timer_init(stream->loop, &ts->timer); /* never fails */
	ts->timer.data = ts;
	ts->handles = 2;
	uv_timer_start(&ts->timer, timer_cb, ts->timeout_ms, 0);
	if (opts->role == TLS_ROLE_CLIENT) {
		handshake(ts); /* the ClientHello */
		if (ts->ended)
			defer(ts);
	}
	return 0;
nomem:
	if (ts->ssl != NULL)
		SSL_free(ts->ssl);
	BIO_free(ts->net_in);
	BIO_free(ts->net_out);
	return UV_ENOMEM;
}

int tls_stream_write(struct tls_stream_write *req, struct tls_stream *ts, const uv_buf_t bufs[],
		     unsigned nbufs, tls_stream_write_cb cb)
{
	if (ts->closing || ts->ended)
		return UV_EPIPE;
	req->bufs = req->small;
	if (nbufs > sizeof req->small / sizeof req->small[0]) {
		req->bufs = malloc(nbufs * sizeof *bufs);
		if (req->bufs == NULL)
			return UV_ENOMEM;
	}
	memcpy(req->bufs, bufs, nbufs * sizeof *bufs);
	req->nbufs = nbufs;
	req->bytes = 0;
	for (unsigned i = 0; i < nbufs; i++)
		req->bytes += bufs[i].len;
	req->ts = ts;
	req->cb = cb;
	req->status = 0;
	req->next = NULL;
	if (!ts->established) {
		*ts->queue_tail = req;
		ts->queue_tail = &req->next;
		ts->queued_bytes += req->bytes;
		return 0;
	}
	return send_req(ts, req) ? TLS_STREAM_WRITTEN : 0;
}

size_t tls_stream_write_queue_size(const struct tls_stream *ts)
{
	return ts->queued_bytes + uv_stream_get_write_queue_size(ts->stream);
}

void tls_stream_read_stop(struct tls_stream *ts)
{
	if (ts->paused)
		return;
	ts->paused = true;
	if (ts->established && !ts->ended && !ts->closing)
		uv_read_stop(ts->stream);
}

void tls_stream_read_start(struct tls_stream *ts)
{
	if (!ts->paused)
		return;
	ts->paused = false;
	if (!ts->established || ts->ended || ts->closing)
		return;
	if (!ts->peer_eof)
		uv_read_start(ts->stream, stream_alloc, stream_read);
	defer(ts); /* what was decrypted or buffered meanwhile */
}

static void handle_closed(uv_handle_t *h)
{
	struct tls_stream *ts = h->data;
	if (--ts->handles > 0)
		return;
	/* libuv has called back every network write by now. */
	struct tls_stream_write *req;
	while ((req = ts->queue) != NULL) {
		ts->queue = req->next;
		free_bufs(req);
		finish_later(ts, req, UV_ECANCELED); /* closing: not deferred */
	}
	ts->queue_tail = &ts->queue;
	ts->queued_bytes = 0;
	call_back_finished(ts);
	SSL_free(ts->ssl);
	ts->ssl = NULL;
	free(ts->out);
	ts->out = NULL;
	ts->out_len = ts->out_cap = 0;
	if (ts->on_close != NULL)
		ts->on_close(ts);
}

void tls_stream_close(struct tls_stream *ts, tls_stream_close_cb close_cb)
{
	if (ts->closing)
		return;
	if (ts->established && ts->error != UV_EPROTO) {
		tls_clear_errors();
		if (SSL_shutdown(ts->ssl) >= 0)
			flush_net(ts, NULL); /* one attempt: libuv writes at once */
		ERR_clear_error();
	}
	ts->closing = true;
	ts->on_close = close_cb;
	uv_timer_stop(&ts->timer);
	uv_close((uv_handle_t *)&ts->timer, handle_closed);
	uv_close((uv_handle_t *)ts->stream, handle_closed);
}

bool tls_stream_established(const struct tls_stream *ts)
{
	return ts->established;
}

const char *tls_stream_error(const struct tls_stream *ts)
{
	return ts->errmsg;
}

const char *tls_stream_peer_cn(const struct tls_stream *ts)
{
	return ts->peer_cn;
}
