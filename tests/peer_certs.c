/* peer_certs.c: see peer_certs.h. */
#include "peer_certs.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef RAFTLOCK_SOURCE_DIR
#error RAFTLOCK_SOURCE_DIR must name the source tree (deploy/make-certs)
#endif

static char dir[] = "/tmp/raftlock-peer-certs-XXXXXX";

char *peer_certs_path(const char *fmt, ...)
{
	static char buf[16][300];
	static int next;
	char *p = buf[next++ % 16];
	int n = snprintf(p, sizeof buf[0], "%s/", dir);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p + n, sizeof buf[0] - (size_t)n, fmt, ap);
	va_end(ap);
	return p;
}

int peer_certs_make(int nodes, int others, bool *have_expired)
{
	char cmd[1024];
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(cmd, sizeof cmd,
		 "cd %s && %s/deploy/make-certs a --nodes %d --client harness >make.log 2>&1 && "
		 "%s/deploy/make-certs b --nodes %d >>make.log 2>&1",
		 dir, RAFTLOCK_SOURCE_DIR, nodes, RAFTLOCK_SOURCE_DIR, others);
	if (system(cmd) != 0) {
		fprintf(stderr, "making certificates failed: see %s/make.log\n", dir);
		return -1;
	}
	/* libfaketime itself: the faketime wrapper's named semaphores collide
	 * between tests that run at once. */
	snprintf(cmd, sizeof cmd,
		 "cd %s && lib=$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -n 1) "
		 "&& [ -n \"$lib\" ] && LD_PRELOAD=$lib FAKETIME='@2020-01-01 00:00:00' "
		 "%s/deploy/make-certs expired --ca-from a --nodes %d --days 1 >>make.log 2>&1",
		 dir, RAFTLOCK_SOURCE_DIR, others);
	*have_expired = system(cmd) == 0;
	return 0;
}

int peer_certs_remove(void)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}
