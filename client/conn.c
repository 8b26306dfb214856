/* conn.c: see conn.h. */
#include "grow.h"
#include "conn.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509.h>

#include "address.h"
#include "clock.h"
#include "codec.h"
#include "raftlock.h"
#include "tls_ctx.h"

int conn_addr_parse(const char *text, struct conn_addr *out)
{
	char host[256], port[ADDRESS_PORT_MAX];
	if (address_split(text, host, sizeof host, port) != 0)
		return RAFTLOCK_EINVAL;
	struct conn_addr a = {
		.host = strdup(host),
		.port = strdup(port),
		.text = strdup(text),
	};
	if (a.host == NULL || a.port == NULL || a.text == NULL) {
		conn_addr_free(&a);
		return RAFTLOCK_ENOMEM;
	}
	*out = a;
	return 0;
}

void conn_addr_free(struct conn_addr *a)
{
	free(a->host);
	free(a->port);
	free(a->text);
	resolve_drop(a->lookup);
	a->host = a->port = a->text = NULL;
	a->lookup = NULL;
}

void conn_init(struct conn *c)
{
	memset(c, 0, sizeof *c);
	c->fd = -1;
	c->state = CONN_CLOSED;
	frame_reader_init(&c->reader, RAFTLOCK_FRAME_MAX);
}

/* ---------------------------------------------------------------- TLS -- */

/* OpenSSL's socket BIO writes with write(): a peer that has gone would
 * raise SIGPIPE in the program. This one sends with MSG_NOSIGNAL and is
 * otherwise the socket BIO (its ctrl, create and destroy). */
static BIO_METHOD *conn_bio_method;
static pthread_once_t conn_bio_once = PTHREAD_ONCE_INIT;

static int conn_bio_write(BIO *b, const char *buf, int n)
{
	ssize_t w;
	do
		w = send((int)BIO_get_fd(b, NULL), buf, (size_t)n, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	BIO_clear_retry_flags(b);
	if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		BIO_set_retry_write(b);
	return (int)w;
}

static int conn_bio_read(BIO *b, char *buf, int n)
{
	ssize_t r;
	do
		r = recv((int)BIO_get_fd(b, NULL), buf, (size_t)n, 0);
	while (r < 0 && errno == EINTR);
	/* Less than asked: the socket had no more (see conn_tls_read). */
	((struct conn *)BIO_get_data(b))->tls_short = r >= 0 && r < n;
	BIO_clear_retry_flags(b);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		BIO_set_retry_read(b);
	if (r == 0)
		BIO_set_flags(b, BIO_FLAGS_IN_EOF); /* OpenSSL tells a cut-off peer by it */
	return (int)r;
}

static int conn_bio_puts(BIO *b, const char *str)
{
	return conn_bio_write(b, str, (int)strlen(str));
}

static void conn_bio_make(void)
{
	const BIO_METHOD *sock = BIO_s_socket();
	BIO_METHOD *m = BIO_meth_new(BIO_TYPE_SOCKET, "raftlock socket");
	if (m == NULL)
		return;
	if (BIO_meth_set_write(m, conn_bio_write) != 1 ||
	    BIO_meth_set_read(m, conn_bio_read) != 1 || BIO_meth_set_puts(m, conn_bio_puts) != 1 ||
	    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(sock)) != 1 ||
	    BIO_meth_set_create(m, BIO_meth_get_create(sock)) != 1 ||
	    BIO_meth_set_destroy(m, BIO_meth_get_destroy(sock)) != 1) {
		BIO_meth_free(m);
		return;
	}
	conn_bio_method = m;
}

/* OpenSSL calls it when the node asks for a client certificate. */
static int conn_tls_asked(SSL *ssl, void *arg)
{
	(void)ssl;
	((struct conn *)arg)->tls_asked = true;
	return 1; /* go on, with the certificate of the context if any */
}

/* A new SSL object of c on fd, expecting the peer to be host. */
static int conn_tls_new(struct conn *c, int fd, const struct conn_tls *tls, const char *host)
{
	pthread_once(&conn_bio_once, conn_bio_make);
	if (conn_bio_method == NULL)
		return RAFTLOCK_ENOMEM;
	SSL *ssl = SSL_new(tls->ctx);
	BIO *bio = BIO_new(conn_bio_method);
	if (ssl == NULL || bio == NULL)
		goto err;
	BIO_set_fd(bio, fd, BIO_NOCLOSE);
	BIO_set_data(bio, c);       /* the socket BIO's methods do not use it */
	SSL_set_bio(ssl, bio, bio); /* ssl owns bio */
	bio = NULL;
	if (tls_ctx_expect_host(ssl, tls->server_name != NULL ? tls->server_name : host) != 0)
		goto err;
	SSL_set_connect_state(ssl);
	/* One recv takes whatever has arrived, not a record header and then
	 * its body: conn_buffered() asks SSL_has_pending(), which counts it. */
	SSL_set_read_ahead(ssl, 1);
	SSL_set_cert_cb(ssl, conn_tls_asked, c);
	c->ssl = ssl;
	c->tls_rd = POLLIN;
	c->tls_wr = POLLOUT;
	c->tls_spoke = false;
	c->tls_failed = false;
	c->tls_asked = false;
	return 0;
err:
	BIO_free(bio);
	SSL_free(ssl);
	ERR_clear_error();
	return RAFTLOCK_ENOMEM;
}

/*
 * Why a node that cut the connection off without a word (or with its word
 * lost) did so. A node refusing the client's certificate does it after
 * a TLS 1.3 handshake, and its alert may be lost if it closes with our
 * first request unread (the reset that sends overtakes it). NULL: no
 * telling (then it is a network failure).
 */
static const char *conn_tls_cut(const struct conn *c)
{
	if (!c->tls_asked)
		return c->state == CONN_HANDSHAKE ? "the node does not speak TLS on this port"
						  : NULL;
	if (SSL_get_certificate(c->ssl) == NULL)
		return "the node requires a client certificate";
	return "the node does not accept the client certificate (it asked for one, then closed "
	       "the connection)";
}

/* The reason of a failed TLS call, in plain words where OpenSSL's are
 * obscure, into c->why. */
static void conn_tls_why(struct conn *c)
{
	unsigned long e = ERR_peek_last_error();
	const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;
	long verify = SSL_get_verify_result(c->ssl);
	if (reason == NULL)
		reason = "unknown error";
	if (verify != X509_V_OK) {
		snprintf(c->why, sizeof c->why, "certificate verify failed: %s",
			 X509_verify_cert_error_string(verify));
		ERR_clear_error();
		return;
	}
	const char *what = NULL;
	switch (ERR_GET_REASON(e)) {
	case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
		what = "the node requires a client certificate";
		break;
	case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
		what = "the node does not trust the client certificate's CA";
		break;
	case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
		what = "the node refused the client certificate as expired";
		break;
	case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
	case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
	case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE: what = "the node refused the handshake"; break;
	case SSL_R_WRONG_VERSION_NUMBER:
	case SSL_R_PACKET_LENGTH_TOO_LONG: what = "the node does not speak TLS on this port"; break;
	case SSL_R_UNEXPECTED_EOF_WHILE_READING:
		what = conn_tls_cut(c);
		if (what == NULL)
			what = "the node closed the connection after the handshake";
		break;
	}
	if (what != NULL)
		snprintf(c->why, sizeof c->why, "%s (%s)", what, reason);
	else
		snprintf(c->why, sizeof c->why, "%s", reason);
	ERR_clear_error();
}

/* Maps the result r of a failed SSL call: 0 when it must wait (*wants:
 * the events it waits for), else the error. A failure before the node
 * sent any application data is a refusal (RAFTLOCK_ETLS) when OpenSSL
 * says why, or when the node had asked for a client certificate (see
 * conn_tls_cut). */
static int conn_tls_result(struct conn *c, int r, short *wants)
{
	int saved = errno;
	int e = SSL_get_error(c->ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		*wants = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		return 0;
	}
	bool early = c->state == CONN_HANDSHAKE || !c->tls_spoke;
	if (e == SSL_ERROR_SSL || e == SSL_ERROR_SYSCALL)
		c->tls_failed = true;
	if (early && e == SSL_ERROR_SSL) {
		conn_tls_why(c);
		return RAFTLOCK_ETLS;
	}
	ERR_clear_error();
	const char *cut = early && c->tls_asked ? conn_tls_cut(c) : NULL;
	if (cut != NULL) {
		snprintf(c->why, sizeof c->why, "%s", cut);
		return RAFTLOCK_ETLS;
	}
	if (e == SSL_ERROR_SYSCALL && (saved == ENOMEM || saved == ENOBUFS))
		return RAFTLOCK_ENOMEM;
	return RAFTLOCK_ECONNECTION; /* also SSL_ERROR_ZERO_RETURN: closed by the peer */
}

int conn_handshake(struct conn *c)
{
	tls_clear_errors();
	int r = SSL_do_handshake(c->ssl);
	if (r != 1)
		return conn_tls_result(c, r, &c->tls_wr);
	c->state = CONN_OPEN;
	c->tls_wr = POLLOUT;
	return 0;
}

/* Over TLS: conn_read() of what OpenSSL decrypts. */
static int conn_tls_read(struct conn *c)
{
	uint8_t buf[16384];
	c->tls_rd = POLLIN;
	c->tls_short = false;
	for (int i = 0; i < 64; i++) {
		tls_clear_errors();
		int r = SSL_read(c->ssl, buf, sizeof buf);
		if (r <= 0)
			return conn_tls_result(c, r, &c->tls_rd);
		c->tls_spoke = true;
		int rv = frame_reader_feed(&c->reader, buf, (size_t)r);
		if (rv != 0)
			return rv;
		/* The last recv drained the socket and OpenSSL holds nothing:
		 * another SSL_read would only recv EAGAIN (poll says when
		 * more comes). */
		if (c->tls_short && SSL_has_pending(c->ssl) == 0)
			return 0;
	}
	return 0; /* more may be buffered: conn_buffered() says so */
}

/* Over TLS: conn_flush() through OpenSSL (partial writes are on). */
static int conn_tls_flush(struct conn *c)
{
	c->tls_wr = POLLOUT;
	while (c->out_off < c->out_len) {
		size_t left = c->out_len - c->out_off;
		tls_clear_errors();
		int w = SSL_write(c->ssl, c->out + c->out_off,
				  left > INT_MAX ? INT_MAX : (int)left);
		if (w <= 0)
			return conn_tls_result(c, w, &c->tls_wr);
		c->out_off += (size_t)w;
	}
	c->out_off = c->out_len = 0;
	return 0;
}

/* ------------------------------------------------------------- sockets -- */

/* Lets go of what conn_start() set up to reach the host. */
static void conn_forget_host(struct conn *c)
{
	resolve_drop(c->lookup);
	if (c->numeric != NULL)
		freeaddrinfo(c->numeric);
	free(c->host);
	c->lookup = NULL;
	c->numeric = NULL;
	c->ai_next = NULL;
	c->host = NULL;
	c->tls = NULL;
}

/* Closes the socket, its SSL object with it (no close_notify). */
static void conn_drop_socket(struct conn *c)
{
	if (c->ssl != NULL) {
		SSL_free(c->ssl);
		ERR_clear_error();
		c->ssl = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->state = CONN_CLOSED;
}

/* Connects to the host's next address that takes a connect, in the
 * resolver's order (a name may have an IPv6 and an IPv4 address, and a
 * node listen on only one of them). */
static int conn_dial(struct conn *c)
{
	int rv = RAFTLOCK_ECONNECTION;
	while (c->ai_next != NULL) {
		const struct addrinfo *ai = c->ai_next;
		c->ai_next = ai->ai_next;
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
				ai->ai_protocol);
		if (fd < 0) {
			if (errno == ENOMEM || errno == ENOBUFS)
				return RAFTLOCK_ENOMEM;
			continue; /* an address family this host lacks */
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			c->state = CONN_OPEN;
		} else if (errno == EINPROGRESS) {
			c->state = CONN_CONNECTING;
		} else {
			close(fd);
			continue;
		}
		c->fd = fd;
		if (c->tls == NULL)
			return 0;
		if ((rv = conn_tls_new(c, fd, c->tls, c->host)) != 0) {
			conn_drop_socket(c);
			return rv;
		}
		if (c->state == CONN_OPEN)
			c->state = CONN_HANDSHAKE; /* begins when the socket polls writable */
		return 0;
	}
	return rv;
}

int conn_start(struct conn *c, struct conn_addr *a, const struct conn_tls *tls, resolve_fn resolver)
{
	c->why[0] = '\0';
	c->tls = tls;
	c->host = strdup(a->host);
	if (c->host == NULL)
		return RAFTLOCK_ENOMEM;
	int rv = resolve_numeric(a->host, a->port, &c->numeric);
	if (rv == 0) {
		c->ai_next = c->numeric;
		rv = conn_dial(c);
	} else if (rv == RAFTLOCK_EINVAL) {
		/* a name: looked up on a thread of its own, or by an earlier
		 * attempt whose connect stopped waiting for it */
		c->lookup = a->lookup;
		a->lookup = NULL;
		rv = c->lookup != NULL ? 0
				       : resolve_start(a->host, a->port, resolver, c->lookup_use,
						       &c->lookup, c->why, sizeof c->why);
		if (rv == 0)
			c->state = CONN_RESOLVING;
		if (rv == RAFTLOCK_ELIMIT)
			rv = RAFTLOCK_ECONNECTION; /* c->why names the cap */
	}
	if (rv != 0)
		conn_forget_host(c);
	return rv;
}

int conn_finish_resolve(struct conn *c)
{
	const struct addrinfo *ai;
	int rv = resolve_answer(c->lookup, &ai, c->why, sizeof c->why);
	if (rv == 1)
		return 0; /* not in yet */
	c->state = CONN_CLOSED;
	if (rv != 0)
		return rv;
	c->ai_next = ai;
	return conn_dial(c);
}

void conn_give_up(struct conn *c, struct conn_addr *a, unsigned ms)
{
	if (c->state != CONN_RESOLVING)
		return;
	snprintf(c->why, sizeof c->why, "name lookup of '%s' took longer than %u ms", c->host, ms);
	if (a == NULL)
		return;
	resolve_drop(a->lookup);
	a->lookup = c->lookup;
	c->lookup = NULL;
}

int conn_finish_connect(struct conn *c)
{
	int err = 0;
	socklen_t len = sizeof err;
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
		if (c->ai_next == NULL)
			return RAFTLOCK_ECONNECTION;
		conn_drop_socket(c); /* the name has another address */
		return conn_dial(c);
	}
	if (c->ssl == NULL) {
		c->state = CONN_OPEN;
		return 0;
	}
	c->state = CONN_HANDSHAKE;
	return conn_handshake(c);
}

int conn_queue(struct conn *c, const uint8_t *frame, size_t n)
{
	if (c->out_off > 0 && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (grow(&c->out, &c->out_cap, c->out_len + n, 4096, 1) != 0)
		return RAFTLOCK_ENOMEM;
	memcpy(c->out + c->out_len, frame, n);
	c->out_len += n;
	return 0;
}

int conn_flush(struct conn *c)
{
	if (c->state == CONN_RESOLVING)
		return 0; /* no socket yet */
	if (c->ssl != NULL)
		return c->state == CONN_OPEN ? conn_tls_flush(c) : 0;
	while (c->out_off < c->out_len) {
		ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return RAFTLOCK_ECONNECTION;
		}
		c->out_off += (size_t)w;
	}
	c->out_off = c->out_len = 0;
	return 0;
}

bool conn_wants_write(const struct conn *c)
{
	return c->state == CONN_CONNECTING || c->out_off < c->out_len;
}

int conn_read(struct conn *c)
{
	if (c->ssl != NULL)
		return conn_tls_read(c);
	uint8_t buf[16384];
	for (int i = 0; i < 64; i++) {
		ssize_t r = recv(c->fd, buf, sizeof buf, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return RAFTLOCK_ECONNECTION;
		}
		if (r == 0)
			return RAFTLOCK_ECONNECTION;
		int rv = frame_reader_feed(&c->reader, buf, (size_t)r);
		if (rv != 0)
			return rv;
		if ((size_t)r < sizeof buf)
			return 0;
	}
	return 0;
}

int conn_next(struct conn *c, Raftlock__Envelope **env)
{
	const uint8_t *payload;
	size_t n;
	int rv = frame_reader_next(&c->reader, &payload, &n);
	if (rv <= 0)
		return rv;
	rv = codec_decode_envelope(payload, n, env);
	return rv == 0 ? 1 : rv;
}

void conn_close(struct conn *c)
{
	if (c->ssl != NULL && c->state == CONN_OPEN && !c->tls_failed)
		SSL_shutdown(c->ssl); /* one try at a close_notify */
	conn_drop_socket(c);
	conn_forget_host(c);
	free(c->out);
	c->out = NULL;
	c->out_off = c->out_len = c->out_cap = 0;
	frame_reader_close(&c->reader);
	frame_reader_init(&c->reader, RAFTLOCK_FRAME_MAX);
}

/* One poll step of conn_exchange(): returns 1 when a reply is in *reply. */
static int conn_exchange_step(struct conn *c, short revents, uint64_t id,
			      Raftlock__Envelope **reply)
{
	int rv;
	if (c->state == CONN_RESOLVING)
		return conn_finish_resolve(c); /* the socket is polled next */
	if (c->state == CONN_CONNECTING) {
		if ((rv = conn_finish_connect(c)) != 0 || c->state != CONN_OPEN)
			return rv;
	} else if (c->state == CONN_HANDSHAKE) {
		if ((rv = conn_handshake(c)) != 0 || c->state != CONN_OPEN)
			return rv;
		revents = POLLOUT; /* send the request now */
	}
	if (conn_can_write(c, revents) && (rv = conn_flush(c)) != 0)
		return rv;
	if (!conn_can_read(c, revents))
		return 0;
	int read_rv = conn_read(c); /* what came before an end is read first */
	Raftlock__Envelope *env;
	while ((rv = conn_next(c, &env)) == 1) {
		/* id 0: the node refuses the connection itself (its limit on
		 * connections from this address), with the reason */
		bool response = env->body_case == RAFTLOCK__ENVELOPE__BODY_RESPONSE;
		bool refusal = response && env->id == 0 && env->response->status != 0;
		if (response && (env->id == id || refusal)) {
			*reply = env;
			return 1;
		}
		raftlock__envelope__free_unpacked(env, NULL);
	}
	return read_rv != 0 ? read_rv : rv;
}

int conn_exchange(const struct conn_addr *a, const struct conn_tls *tls, resolve_fn resolver,
		  const uint8_t *frame, size_t n, uint64_t id, unsigned connect_timeout_ms,
		  unsigned timeout_ms, Raftlock__Envelope **reply, char *why, size_t why_len)
{
	struct conn c;
	uint64_t start = clock_mono_ms(), deadline = start + timeout_ms;
	uint64_t connected_by = deadline;
	if (connect_timeout_ms != 0 && connect_timeout_ms < timeout_ms)
		connected_by = start + connect_timeout_ms;
	/* a's host and port only: its lookup is its I/O thread's */
	struct conn_addr to = {.host = a->host, .port = a->port, .text = a->text};
	conn_init(&c);
	c.lookup_use = RESOLVE_ONE_OFF; /* leaves connections their share */
	int rv = conn_start(&c, &to, tls, resolver);
	if (rv != 0)
		goto out;
	if ((rv = conn_queue(&c, frame, n)) != 0)
		goto out;
	for (;;) {
		uint64_t now = clock_mono_ms();
		uint64_t until = c.state == CONN_OPEN ? deadline : connected_by;
		if (now >= until) {
			conn_give_up(&c, NULL, (unsigned)(until - start));
			rv = c.state == CONN_OPEN ? RAFTLOCK_ETIMEDOUT : RAFTLOCK_ECONNECTION;
			goto out;
		}
		struct pollfd p = {.fd = conn_poll_fd(&c), .events = conn_poll_events(&c)};
		bool buffered = conn_buffered(&c);
		int pr = poll(&p, 1, buffered ? 0 : (int)(until - now));
		if (pr < 0 && errno != EINTR) {
			rv = RAFTLOCK_ECONNECTION;
			goto out;
		}
		if (pr <= 0 && !buffered)
			continue;
		rv = conn_exchange_step(&c, pr > 0 ? p.revents : 0, id, reply);
		if (rv == 1) {
			rv = 0;
			goto out;
		}
		if (rv < 0)
			goto out;
	}
out:
	if (why != NULL &&
	    (rv == RAFTLOCK_ETLS || (rv == RAFTLOCK_ECONNECTION && c.why[0] != '\0')))
		snprintf(why, why_len, "%s", c.why);
	conn_close(&c);
	frame_reader_close(&c.reader);
	return rv;
}
