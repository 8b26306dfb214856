/*
 * loopback.h: free loopback ports for the unit tests that listen or
 * connect (test_node, test_service, test_peer_tls, test_peer_tcp).
 */
#ifndef RAFTLOCK_TEST_LOOPBACK_H
#define RAFTLOCK_TEST_LOOPBACK_H

#include <stdbool.h>

/* A TCP socket bound to a free port of 127.0.0.1 (*port), listening if
 * asked; the caller closes it. A failure fails the test. */
int loopback_socket(bool listening, int *port);

/* A port of 127.0.0.1 nothing listens on now. */
int loopback_free_port(void);

#endif
