/*
 * cluster_clock.h: the leader's cluster clock (GUARANTEES, Terms: cluster
 * time). Cluster time is carried by every log entry the leader writes; a
 * new leader continues from the highest value applied (its post-election
 * barrier proves it has applied every earlier entry) and advances it with
 * its own monotonic time, read from an injected timebase. While this node
 * is not a ready leader the clock stands still: a pause of the cluster
 * only lengthens leases. Likewise a stall of the leader's own loop (a
 * snapshot, a starved CPU) counts CLUSTER_CLOCK_STALL_MAX_MS at most: the
 * keepalives that arrived meanwhile were not read, and a leader that
 * resumes must not expire the sessions they renew. A ready leader reads
 * its clock at least every 50 ms (leases.c), so a longer gap between two
 * reads is a stall. Stamps never go backwards.
 *
 * No I/O; loop thread only.
 */
#ifndef RAFTLOCK_CLUSTER_CLOCK_H
#define RAFTLOCK_CLUSTER_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "timebase.h"

/* The most one stall of the leader's loop advances cluster time. */
#define CLUSTER_CLOCK_STALL_MAX_MS 1000

struct cluster_clock {
	struct timebase *tb; /* borrowed */
	bool running;
	uint64_t base;       /* cluster ms at `mono` */
	uint64_t mono;       /* timebase ms when it (re)started, moved on by
				the stalls' excess */
	uint64_t seen;       /* timebase ms of the last read */
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

/* Cluster time now: running, base plus the time since it started, less
 * what stalls beyond CLUSTER_CLOCK_STALL_MAX_MS took; stopped, where it
 * stood. */
uint64_t cluster_clock_now(struct cluster_clock *c);

/* The cluster time for the next entry: now, but never below the previous
 * stamp. */
uint64_t cluster_clock_stamp(struct cluster_clock *c);

#endif
