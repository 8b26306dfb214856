/*
 * client_tls.h: the TLS contexts of the client port, from the settings
 * (client-tls, client-tls-cert, -key, -ca). Built once at start (and by
 * --check-config, so that a missing file or a key that does not match its
 * certificate stops the node before it serves), by proto/tls_ctx.c.
 */
#ifndef RAFTLOCK_CLIENT_TLS_H
#define RAFTLOCK_CLIENT_TLS_H

#include <stddef.h>

#include <openssl/ssl.h>

#include "config.h"

struct client_tls {
	/* The client port's: presents client-tls-cert; in mutual mode requires
	 * a client certificate signed by client-tls-ca. NULL when off. */
	SSL_CTX *server;
	/* The leader's, for its followers' client ports (followers.c):
	 * presents client-tls-cert and verifies the followers against
	 * client-tls-ca (the system's store when none is given). NULL when
	 * off. */
	SSL_CTX *client;
};

/* Fills t from cfg. Returns 0 (both NULL when client-tls is off), or
 * RAFTLOCK_ECONFIG with a message naming the file and OpenSSL's reason in
 * err, t then holding nothing. */
int client_tls_open(struct client_tls *t, const struct config *cfg, char *err, size_t errlen);

/* Frees the contexts (connections hold their own references). */
void client_tls_close(struct client_tls *t);

#endif
