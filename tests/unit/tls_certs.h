/*
 * tls_certs.h: certificates for the unit tests that run TLS, made with the
 * openssl command in a new temporary directory: ca.pem (CN ca) signing
 * server.pem (CN server), client.pem (CN client-a) and node-2.pem and
 * node-3.pem (CN raftlock-node-2 and -3, members' names), and other-ca.pem
 * signing stranger.pem (CN stranger), each NAME.pem with NAME.key. Every
 * leaf has the names IP:127.0.0.1 and DNS:localhost and both the serverAuth
 * and clientAuth usages; all are valid for two days.
 */
#ifndef RAFTLOCK_TEST_TLS_CERTS_H
#define RAFTLOCK_TEST_TLS_CERTS_H

#include <openssl/ssl.h>
#include <stdbool.h>

/* Makes them; returns 0, or -1 (the reason on stderr). */
int tls_certs_make(void);

/* Removes the directory; returns 0 or -1. */
int tls_certs_remove(void);

/* DIR/name, in one of 8 rotating static buffers. */
const char *tls_certs_path(const char *name);

/* A server context presenting server.pem; mutual: requires a client
 * certificate signed by ca.pem. Fails the test on error. */
SSL_CTX *tls_certs_server_ctx(bool mutual);

/* A client context trusting the CA file ca, presenting who.pem/.key unless
 * who is NULL. Fails the test on error. */
SSL_CTX *tls_certs_client_ctx(const char *who, const char *ca);

#endif
