/* example_common.h: what every example does first: connect to the cluster
 * named by RAFTLOCK_ENDPOINTS (host:port,host:port,...) and open a session.
 * Real programs do the same with their own configuration. */
#ifndef RAFTLOCK_EXAMPLE_COMMON_H
#define RAFTLOCK_EXAMPLE_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raftlock.h"

static inline void example_die(raftlock_client *c, const char *what, int rv)
{
	fprintf(stderr, "%s: %s\n", what, c ? raftlock_errmsg(c) : raftlock_strerror(rv));
	exit(1);
}

/* Connects using RAFTLOCK_ENDPOINTS (default: the local cluster). */
static inline raftlock_client *example_connect(const char *name)
{
	static char buf[1024];
	static const char *addrs[16];
	const char *env = getenv("RAFTLOCK_ENDPOINTS");
	snprintf(buf, sizeof buf, "%s",
		 env ? env : "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103");
	size_t n = 0;
	for (char *p = strtok(buf, ","); p != NULL && n < 16; p = strtok(NULL, ","))
		addrs[n++] = p;
	struct raftlock_client_options o = {.addresses = addrs, .n_addresses = n,
					    .client_name = name};
	raftlock_client *c = NULL;
	const char *err = NULL;
	int rv = raftlock_client_open(&o, &c, &err);
	if (rv != 0) {
		fprintf(stderr, "connect: %s\n", err ? err : raftlock_strerror(rv));
		exit(1);
	}
	return c;
}

static inline raftlock_session *example_session(raftlock_client *c, unsigned ttl_ms)
{
	struct raftlock_session_options o = {.ttl_ms = ttl_ms};
	raftlock_session *s = NULL;
	int rv = raftlock_session_open(c, &o, &s);
	if (rv != 0)
		example_die(c, "open session", rv);
	return s;
}

#endif
