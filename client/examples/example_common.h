/* example_common.h: what every example does first: connect to the cluster
 * named by RAFTLOCK_ENDPOINTS (host:port,host:port,...), over TLS when
 * RAFTLOCK_CACERT names the CA file (then RAFTLOCK_CERT and RAFTLOCK_KEY
 * name a client certificate and its key, RAFTLOCK_SERVER_NAME the name
 * the nodes' certificates carry, as for the raftlock command), and open a
 * session. Real programs do the same with their own configuration. */
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

/* The variable's value; NULL when unset or empty. */
static inline const char *example_env(const char *name)
{
	const char *v = getenv(name);
	return v != NULL && v[0] != '\0' ? v : NULL;
}

/* Connects using RAFTLOCK_ENDPOINTS (default: the local cluster). */
static inline raftlock_client *example_connect(const char *name)
{
	static char buf[1024];
	static const char *addrs[16];
	const char *env = getenv("RAFTLOCK_ENDPOINTS");
	snprintf(buf, sizeof buf, "%s", env ? env : "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103");
	size_t n = 0;
	for (char *p = strtok(buf, ","); p != NULL && n < 16; p = strtok(NULL, ","))
		addrs[n++] = p;
	struct raftlock_client_options o = {
		.addresses = addrs,
		.n_addresses = n,
		.client_name = name,
		.tls_ca_file = example_env("RAFTLOCK_CACERT"),
		.tls_cert_file = example_env("RAFTLOCK_CERT"),
		.tls_key_file = example_env("RAFTLOCK_KEY"),
		.tls_server_name = example_env("RAFTLOCK_SERVER_NAME"),
	};
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
