/*
 * conn.h: one TCP connection to a cluster node, and node addresses.
 *
 * A conn is driven by its owner's poll loop: conn_start() begins a
 * non-blocking connect (after a lookup of the host when it is a name:
 * state CONN_RESOLVING, finished by conn_finish_resolve()),
 * conn_finish_connect() completes it when the socket turns writable,
 * conn_queue()/conn_flush() write whole frames, and conn_read()/conn_next()
 * hand out decoded envelopes. The owner polls conn_poll_fd() for
 * conn_poll_events(), and bounds the whole connect (lookup, TCP, TLS) by a
 * deadline of its own (conn_give_up). A conn is used by one thread at a
 * time. Errors: RAFTLOCK_ECONNECTION for anything the network did
 * (refused, reset, closed by the peer) and for a name without an address
 * (c->why then says which name and why), RAFTLOCK_EPROTO/ETOOBIG for bytes
 * that are not a valid frame, RAFTLOCK_ENOMEM.
 *
 * TLS: a conn started with a struct conn_tls runs a TLS handshake after
 * the TCP connect (state CONN_HANDSHAKE, driven by conn_handshake()) and
 * then reads and writes through OpenSSL. The owner polls for
 * conn_poll_events() and asks conn_can_read()/conn_can_write() what the
 * events allow, since a TLS read may wait for writability and a write for
 * readability, and bytes OpenSSL has already decrypted (conn_buffered())
 * do not make the socket readable. A handshake the peer or this side
 * refuses, or a TLS error before the peer sent any application data (the
 * node refusing the client's certificate after a TLS 1.3 handshake), is
 * RAFTLOCK_ETLS with the reason in c->why; a TLS error later is
 * RAFTLOCK_ECONNECTION. Without TLS nothing of this costs a call.
 */
#ifndef RAFTLOCK_CONN_H
#define RAFTLOCK_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <poll.h>

#include <openssl/ssl.h>

#include "frame.h"
#include "raftlock.pb-c.h"
#include "resolve.h"

/* A parsed "host:port" ("[v6]:port" for IPv6 literals). Owns its strings. */
struct conn_addr {
	char *host;
	char *port;
	char *text; /* as given */
	/* A lookup of host a connect stopped waiting for (conn_give_up),
	 * under way or answered: the next conn_start() of this address takes
	 * it over. Owned; conn_addr_free() lets go of it. */
	struct resolve *lookup;
};

/* Parses text. Returns 0, RAFTLOCK_EINVAL (no port, port not in 1..65535,
 * empty host) or RAFTLOCK_ENOMEM; *out is unchanged on failure. */
int conn_addr_parse(const char *text, struct conn_addr *out);
void conn_addr_free(struct conn_addr *a);

enum conn_state {
	CONN_CLOSED,
	CONN_RESOLVING, /* the host is a name, being looked up */
	CONN_CONNECTING,
	CONN_HANDSHAKE, /* TLS only: connected, handshake under way */
	CONN_OPEN,
};

/* How a conn speaks TLS; borrowed by the conn from conn_start() until
 * conn_close(). */
struct conn_tls {
	SSL_CTX *ctx;            /* a client context (tls_ctx_new) */
	const char *server_name; /* the name the peer's certificate must
				    carry; NULL: the address's host */
};

#define CONN_WHY_MAX 200

struct conn {
	int fd;
	enum conn_state state;
	uint8_t *out; /* bytes waiting to be written: out[out_off..out_len) */
	size_t out_off;
	size_t out_len;
	size_t out_cap;
	struct frame_reader reader;
	/* TLS; ssl is NULL for plain TCP */
	SSL *ssl;
	short tls_rd;           /* what the next read waits for: POLLIN or POLLOUT */
	short tls_wr;           /* what the next write (or handshake step) waits for */
	bool tls_spoke;         /* the peer sent application data */
	bool tls_failed;        /* a fatal TLS error: no close_notify */
	bool tls_asked;         /* the peer asked for a client certificate */
	bool tls_short;         /* the last recv got less than it asked for */
	char why[CONN_WHY_MAX]; /* the reason of RAFTLOCK_ETLS, or of a
				   RAFTLOCK_ECONNECTION of the lookup */
	/* from conn_start() until conn_close() */
	const struct conn_tls *tls;     /* borrowed; NULL: plain TCP */
	char *host;                     /* the certificate's name by default */
	struct resolve *lookup;         /* a name's lookup; its answer is borrowed */
	enum resolve_use lookup_use;    /* RESOLVE_CONNECTION unless set after conn_init */
	struct addrinfo *numeric;       /* a numeric host's address (owned) */
	const struct addrinfo *ai_next; /* the host's next address to try */
};

void conn_init(struct conn *c);

/*
 * Starts connecting to a, over TLS when tls is not NULL. A numeric host is
 * connected to at once, without a resolver. A name is looked up first,
 * on a thread of its own (resolve.h), with resolver (NULL: getaddrinfo),
 * or with the lookup a->lookup holds (taken over from a), and the conn is
 * RESOLVING: nothing here waits for a resolver. Otherwise the conn is
 * CONNECTING, or OPEN (TLS: HANDSHAKE) if the connect finished at once.
 * a is borrowed for the call. Errors: RAFTLOCK_ECONNECTION (c->why says
 * why when a cap on lookups refused it: resolve_start names the cap),
 * RAFTLOCK_ENOMEM (also when OpenSSL cannot make the connection object, or
 * the lookup's thread cannot start); the conn is then CLOSED.
 */
int conn_start(struct conn *c, struct conn_addr *a, const struct conn_tls *tls,
	       resolve_fn resolver);

/* Goes on after the lookup's descriptor (conn_poll_fd) polled readable:
 * 0 and the conn is CONNECTING, OPEN or HANDSHAKE as after conn_start(),
 * or still RESOLVING. Errors: RAFTLOCK_ECONNECTION (the name has no
 * address: c->why names the name and the resolver's reason; or none of
 * its addresses takes a connect), RAFTLOCK_ENOMEM. */
int conn_finish_resolve(struct conn *c);

/* Completes a connect after the socket polled writable. 0: OPEN, or with
 * TLS, HANDSHAKE (the handshake has begun), or CONNECTING again when the
 * connect was refused and the name has another address, tried now. */
int conn_finish_connect(struct conn *c);

/* Whether the conn is on its way to OPEN: a lookup, a connect or a TLS
 * handshake under way. */
static inline bool conn_connecting(const struct conn *c)
{
	return c->state == CONN_RESOLVING || c->state == CONN_CONNECTING ||
	       c->state == CONN_HANDSHAKE;
}

/*
 * The owner's connect deadline passed, ms after conn_start(). A conn still
 * RESOLVING says so in c->why, and hands its lookup over to a->lookup when
 * a is not NULL (a connect stopped waiting, but the next attempt at a
 * takes the answer rather than asking again: a resolver slower than the
 * connect timeout is still waited for, at most one lookup of a runs at a
 * time). The owner then closes c.
 */
void conn_give_up(struct conn *c, struct conn_addr *a, unsigned ms);

/* Takes the TLS handshake one step further after its events polled ready.
 * 0: OPEN, or still HANDSHAKE. Errors: RAFTLOCK_ETLS (c->why says why),
 * RAFTLOCK_ECONNECTION. */
int conn_handshake(struct conn *c);

/* Appends a whole frame (copied) to the write queue. */
int conn_queue(struct conn *c, const uint8_t *frame, size_t n);

/* Writes what the socket takes now. */
int conn_flush(struct conn *c);

bool conn_wants_write(const struct conn *c);

/* The descriptor to poll: the socket, or the lookup's while RESOLVING;
 * -1 when CLOSED. */
static inline int conn_poll_fd(const struct conn *c)
{
	return c->state == CONN_RESOLVING ? resolve_fd(c->lookup) : c->fd;
}

/* Events to poll conn_poll_fd() for. */
static inline short conn_poll_events(const struct conn *c)
{
	if (c->state == CONN_RESOLVING)
		return POLLIN;
	if (c->ssl == NULL || c->state == CONN_CONNECTING)
		return (short)(POLLIN | (conn_wants_write(c) ? POLLOUT : 0));
	if (c->state == CONN_HANDSHAKE)
		return c->tls_wr;
	return (short)(c->tls_rd | (c->out_off < c->out_len ? c->tls_wr : 0));
}

/* Whether decrypted bytes wait inside OpenSSL: read them without polling. */
static inline bool conn_buffered(const struct conn *c)
{
	return c->ssl != NULL && c->state == CONN_OPEN && SSL_has_pending(c->ssl) == 1;
}

/* Whether the polled events let conn_read() make progress. */
static inline bool conn_can_read(const struct conn *c, short revents)
{
	if (c->ssl == NULL)
		return revents & (POLLIN | POLLERR | POLLHUP);
	return (revents & (c->tls_rd | POLLERR | POLLHUP)) || conn_buffered(c);
}

/* Whether the polled events let conn_flush() make progress. */
static inline bool conn_can_write(const struct conn *c, short revents)
{
	if (c->ssl == NULL)
		return revents & POLLOUT;
	return revents & (c->tls_wr | POLLERR | POLLHUP);
}

/* Reads what the socket has now into the frame reader. */
int conn_read(struct conn *c);

/* Takes the next decoded envelope: 1 and *env (owned by the caller, freed
 * with raftlock__envelope__free_unpacked), 0 when no whole frame is
 * buffered, or a negative code (the connection must be closed). */
int conn_next(struct conn *c, Raftlock__Envelope **env);

/* Closes the socket (over TLS, after a close_notify if the connection is
 * sound; its SSL object is freed), lets go of a lookup under way (it ends
 * by itself) and drops buffered bytes; the conn may start again, also with
 * another address or TLS setting. */
void conn_close(struct conn *c);

/*
 * One blocking exchange on a connection of its own (TLS when tls is not
 * NULL): connects to a, sends frame, and waits for the envelope with the
 * given id, or for the node's refusal of the connection (a response with id
 * 0 and a status, say ELIMIT for its limit on connections from this
 * address), all within timeout_ms, of which the connect (a name's
 * lookup, TCP and TLS handshake) takes at most connect_timeout_ms (0: no
 * bound of its own, timeout_ms bounds it). A name is looked up with
 * resolver (NULL: getaddrinfo) within the share of one-off exchanges
 * (RESOLVE_ONE_OFF, resolve.h), so that exchanges never take the lookups
 * connections need. A lookup that outlives the connect's bound is let go
 * of (conn_close) and ends by itself. a is
 * borrowed (its lookup field is neither read nor written: a may be a
 * client's address, which its I/O thread uses meanwhile). *reply is owned
 * by the caller. Errors: RAFTLOCK_ECONNECTION (when a name's lookup failed
 * or took too long, the reason is copied into why, why_len bytes),
 * RAFTLOCK_ETIMEDOUT, RAFTLOCK_EPROTO, RAFTLOCK_ENOMEM, RAFTLOCK_ETLS (the
 * reason is copied into why).
 */
int conn_exchange(const struct conn_addr *a, const struct conn_tls *tls, resolve_fn resolver,
		  const uint8_t *frame, size_t n, uint64_t id, unsigned connect_timeout_ms,
		  unsigned timeout_ms, Raftlock__Envelope **reply, char *why, size_t why_len);

#endif
