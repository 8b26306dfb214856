/*
 * rlbench: the raftlock load generator. rlbench.c runs the lock workloads
 * (uncontended, contended, rwlock, semaphore) through the driver; scale.c
 * runs the scale workloads (sessions, state), which measure the cluster
 * rather than pairs per second.
 */
#ifndef BENCH_RLBENCH_H
#define BENCH_RLBENCH_H

#include <stdint.h>

#include "../../client/raftlock.h"
#include "options.h"

#define RLBENCH_CONNS_MAX 64

struct rlbench {
	struct options *o;
	raftlock_client *client;
	char run[64];           /* unique prefix of this run's lock names */
	const char **addresses; /* parsed --addresses */
	size_t n_addresses;
	/* --conns client objects for the lock workloads; conns[0] is client */
	raftlock_client *conns[RLBENCH_CONNS_MAX];
	unsigned n_conns;
};

/* Client options for --addresses and the TLS options, named name. */
struct raftlock_client_options rlbench_client_options(const struct rlbench *b, const char *name);

/* The highest commit index any listed node reports, 0 if none answers. */
uint64_t rlbench_commit_index(struct rlbench *b);

/* The PID of the current leader among --server-pids (given in node-id
 * order: the PID of node i is pids[i - 1]), or 0 if unknown. */
int rlbench_leader_pid(struct rlbench *b);

/* Each runs its workload and prints the JSON line. 0 or 1 (failed). */
int scale_sessions(struct rlbench *b);
int scale_state(struct rlbench *b);
/* rawload.c: park timed waiters; a hostile keepalive stream. */
int scale_park(struct rlbench *b);
int scale_hostile(struct rlbench *b);
int scale_logmem(struct rlbench *b);

#endif
