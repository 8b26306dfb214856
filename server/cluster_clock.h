/*
 * cluster_clock.h: the leader's cluster clock (GUARANTEES, Terms: cluster
 * time). Cluster time is carried by every log entry the leader writes; a
 * new leader continues from the highest value applied (its post-election
 * barrier proves it has applied every earlier entry) and advances it with
 * its own monotonic time, read from an injected timebase. While this node
 * is not a ready leader the clock stands still: a pause of the cluster
 * only lengthens leases. Stamps never go backwards.
 *
 * No I/O; loop thread only.
 */
#ifndef RAFTLOCK_CLUSTER_CLOCK_H
#define RAFTLOCK_CLUSTER_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "timebase.h"

struct cluster_clock {
	struct timebase *tb; /* borrowed */
	bool running;
	uint64_t base;       /* cluster ms at `mono` */
	uint64_t mono;       /* timebase ms when it (re)started */
	uint64_t last_stamp; /* the last cluster time put in an entry */
};

/* A stopped clock at cluster time 0, reading tb. */
void cluster_clock_init(struct cluster_clock *c, struct timebase *tb);

/* This node became the ready leader and the highest cluster time applied
 * is `applied`: the clock runs from there. Stamps of an earlier leadership
 * that did not commit are forgotten (they are not in the log). */
void cluster_clock_start(struct cluster_clock *c, uint64_t applied);

/* This node stopped being the ready leader: the clock stands still. */
void cluster_clock_stop(struct cluster_clock *c);

/* Cluster time now: running, base plus the time since it started;
 * stopped, where it stood. */
uint64_t cluster_clock_now(const struct cluster_clock *c);

/* The cluster time for the next entry: now, but never below the previous
 * stamp. */
uint64_t cluster_clock_stamp(struct cluster_clock *c);

#endif
