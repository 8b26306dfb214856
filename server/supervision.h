/*
 * supervision.h: what the service manager is told (sdnotify.h), from the
 * loop:
 *   STATUS=<why>  while the node cannot serve, each time the reason
 *                 changes (status_serving: no leader known, catching up
 *                 with leader 2: applied 90 of 120, ...), and after;
 *   READY=1       once, the first time the node can serve (the socket
 *                 does not block: a message the receiver's full queue
 *                 refuses is said again at the next tick, and STOPPING=1
 *                 is tried for up to 0.5 s);
 *   WATCHDOG=1    every half $WATCHDOG_USEC (WatchdogSec=), from a loop
 *                 timer: a loop that stops turning stops the pings, and
 *                 systemd restarts the node; but a loop held on purpose
 *                 (an apply waiting for disk space) pings from its wait,
 *                 with STATUS= saying why (supervision_stalled);
 *   STOPPING=1    when shutdown begins.
 * Without $NOTIFY_SOCKET it starts no timer and says nothing.
 * Loop thread only.
 */
#ifndef RAFTLOCK_SUPERVISION_H
#define RAFTLOCK_SUPERVISION_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "node.h"
#include "sdnotify.h"

#define SUPERVISION_TICK_MS 200 /* how often readiness is looked at */

struct supervision {
	struct node *node;
	struct sdnotify notify;
	uv_timer_t tick, watchdog;
	bool running;
	bool ready_sent;
	char said[192]; /* the last STATUS= */
};

/* Reads the environment (sdnotify_open) and, when notifications are on,
 * starts the timers. Returns 0, or sdnotify_open's error with err. */
int supervision_start(struct supervision *s, uv_loop_t *loop, struct node *node, char *err,
		      size_t errlen);

/* The loop is held on purpose (node_hooks.on_stalled): WATCHDOG=1, since
 * the loop's timer cannot ping meanwhile and the node is not hung, and
 * STATUS=why. Without notifications, nothing. */
void supervision_stalled(struct supervision *s, const char *why);

/* STOPPING=1 and a last STATUS=; then the timers close. */
void supervision_stop(struct supervision *s);

#endif
