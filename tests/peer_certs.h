/*
 * peer_certs.h: the certificates of the peer TLS tests (unit and
 * integration), made once per test binary with deploy/make-certs in a new
 * temporary directory:
 *   a/        the cluster's CA, node-1..N (CN raftlock-node-I) and
 *             client-harness (for tests/integration/cluster.c's client TLS)
 *   b/        another CA and its own node-1..M
 *   expired/  node-1..M signed by a's CA, valid for one day in 2020 (made
 *             under libfaketime; absent when it is not installed)
 * Each certificate costs a few openssl commands: M, the impostors' count,
 * can be smaller than N.
 */
#ifndef RAFTLOCK_TEST_PEER_CERTS_H
#define RAFTLOCK_TEST_PEER_CERTS_H

#include <stdbool.h>

/* Makes the directory for N = nodes and M = others; 0, or -1 (make.log
 * there says why). *have_expired tells whether expired/ was made. */
int peer_certs_make(int nodes, int others, bool *have_expired);

/* The path of a file in it, from a printf format ("a/node-%d.pem"): one of
 * 16 rotating buffers, valid until 16 more calls. */
char *peer_certs_path(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Removes the directory; 0 or -1. */
int peer_certs_remove(void);

#endif
