/*
 * metrics.h: the HTTP endpoint on an optional address (metrics-address):
 *   GET /metrics  Prometheus text exposition: role, term, indexes, sessions,
 *                 locks, batching, connections, lock activity, latency
 *                 histograms (names and units: docs/OPERATIONS.md);
 *   GET /healthz  200 "ok" while the loop answers;
 *   GET /readyz   200 when this node can serve (status_serving), else 503,
 *                 with the reason in one line.
 * One request per connection. Loop thread only.
 */
#ifndef RAFTLOCK_METRICS_H
#define RAFTLOCK_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "config.h"
#include "listener.h"
#include "node.h"
#include "service.h"

struct metrics {
	uv_loop_t *loop;
	const struct config *cfg;
	struct node *node;
	struct service *service;
	uv_tcp_t listener;
	struct listener_reject reject; /* a scrape without memory for it */
	bool started;
};

/* Listens on cfg->metrics_address (does nothing when it is empty).
 * Returns 0 or RAFTLOCK_ECONFIG / RAFTLOCK_EIO with a message in err. */
int metrics_start(struct metrics *m, uv_loop_t *loop, const struct config *cfg, struct node *node,
		  struct service *service, char *err, size_t errlen);

void metrics_close(struct metrics *m);

/* Writes the exposition text into buf (at most len bytes, NUL-terminated);
 * returns its length. */
size_t metrics_render(struct metrics *m, char *buf, size_t len);

#endif
