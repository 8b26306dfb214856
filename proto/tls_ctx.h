/*
 * tls_ctx.h: the one place where raftlock builds an OpenSSL 3 context from
 * files, for both ports of raftlockd (client port, raft port), for the
 * connections a node makes to its peers, and for the client library. Every
 * context speaks TLS 1.2 or later, never renegotiates and never compresses.
 *
 * A server context presents cert/key and, when ca is given, asks the peer
 * for a certificate signed by it (required or optional, see below). A
 * client context verifies the server against ca (the system's default
 * store when ca is NULL) and presents cert/key when given; the caller sets
 * the expected host name per connection (tls_ctx_expect_host).
 */
#ifndef RAFTLOCK_TLS_CTX_H
#define RAFTLOCK_TLS_CTX_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

/* File names, all borrowed for the duration of tls_ctx_new. */
struct tls_files {
	const char *cert; /* PEM certificate (chain); NULL = present none */
	const char *key;  /* PEM private key of cert; NULL when cert is NULL */
	const char *ca;   /* PEM bundle of trusted CAs; NULL: see above */
};

enum tls_role {
	TLS_ROLE_SERVER,
	TLS_ROLE_CLIENT,
};

/*
 * Builds a context for role from files. For a server, require_peer makes a
 * connection without a client certificate signed by files->ca fail its
 * handshake (mutual TLS); without it a client certificate is verified only
 * when presented. A server needs cert and key; a server with require_peer
 * needs ca. On success *out owns a new context (free with SSL_CTX_free) and
 * 0 is returned; otherwise *out is unchanged, -1 is returned and err holds
 * a message naming the file and OpenSSL's reason.
 */
int tls_ctx_new(SSL_CTX **out, enum tls_role role, const struct tls_files *files, bool require_peer,
		char *err, size_t errlen);

/*
 * Makes ssl (a client connection) accept only a certificate for host: a DNS
 * name or, for a numeric address, an IP address subject alternative name.
 * Returns 0, or -1 when host cannot be set (out of memory).
 */
int tls_ctx_expect_host(SSL *ssl, const char *host);

/*
 * Writes OpenSSL's most recent error for this thread (and clears the
 * thread's error queue) after prefix into err; "unknown error" when the
 * queue is empty.
 */
void tls_ctx_error(char *err, size_t errlen, const char *prefix);

/*
 * Empties this thread's OpenSSL error queue, as SSL_get_error() needs
 * before each SSL call; looking costs a quarter of clearing, and the queue
 * is almost always empty.
 */
static inline void tls_clear_errors(void)
{
	if (ERR_peek_error() != 0)
		ERR_clear_error();
}

#endif
