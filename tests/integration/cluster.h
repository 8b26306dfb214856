/*
 * cluster.h: real raftlockd processes on free loopback ports for the
 * integration tests. Every node started is stopped by tcluster_destroy()
 * (also registered with atexit) and dies with the test process
 * (PR_SET_PDEATHSIG), so a failing test leaves nothing running.
 */
#ifndef RAFTLOCK_TEST_CLUSTER_H
#define RAFTLOCK_TEST_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "raftlock.pb-c.h"

#define TCLUSTER_MAX 5

struct tcluster {
	int n;
	char dir[256];
	char name[64];
	int raft_port[TCLUSTER_MAX];
	int client_port[TCLUSTER_MAX];
	int metrics_port[TCLUSTER_MAX];
	char client_addr[TCLUSTER_MAX][32];
	const char *addrs[TCLUSTER_MAX]; /* for raftlock_client_options */
	pid_t pid[TCLUSTER_MAX];
	unsigned election_ms;
	unsigned snapshot_threshold;
	unsigned snapshot_trailing;         /* 0: the node's default */
	unsigned map_size_mb[TCLUSTER_MAX]; /* --map-size of each node; 0: default */
	const char *extra_args[8];          /* more raftlockd flags, NULL-terminated;
					       "{id}" in one is the node's id */
};

/* Starts n nodes (3 or 5) and waits until one is a ready leader. */
void tcluster_start(struct tcluster *c, int n, unsigned election_ms);

/* Stops every node (SIGTERM, then SIGKILL after 5 s) and removes the data.
 * Returns the number of problems seen: a node that did not exit 0 after
 * SIGTERM, and sanitizer reports in the node logs (then kept). */
int tcluster_destroy(struct tcluster *c);

/* Starts node i again with its data directory. */
void tcluster_restart(struct tcluster *c, int i);

/* Stops node i, deletes its whole data directory and starts it again empty
 * with the same id and members, as when its machine is replaced. */
void tcluster_replace(struct tcluster *c, int i);

/* Sends sig to node i; SIGKILL also reaps it. */
void tcluster_signal(struct tcluster *c, int i, int sig);

/* Stops node i with SIGTERM and waits for it to exit (status returned). */
int tcluster_stop(struct tcluster *c, int i);

/* Index of a ready leader, waiting up to timeout_ms; -1 if none. */
int tcluster_leader(struct tcluster *c, int timeout_ms);

/* STATUS of node i over the raw protocol; NULL if it does not answer.
 * Free with raftlock__status_info__free_unpacked(). */
Raftlock__StatusInfo *tcluster_status(struct tcluster *c, int i);

/* GET path from node i's metrics endpoint; the whole HTTP response in out
 * (NUL-terminated). Returns 0, or -1 if the node did not answer. */
int tcluster_http_get(struct tcluster *c, int i, const char *path, char *out, size_t len);

/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t tcluster_now_ms(void);

/* Runs raftlockd with the given argv (NULL-terminated, argv[0] ignored),
 * waits up to timeout_ms, returns its exit status and its stderr in out. */
int tcluster_run_raftlockd(char *const argv[], char *out, size_t outlen, int timeout_ms);

/* ---- raw protocol, for tests that speak below the client library ---- */

/* Connects to 127.0.0.1:port; returns the fd or -1. */
int raw_connect(int port);
/* Writes all bytes; 0 or -1. */
int raw_send(int fd, const void *buf, size_t n);
/* Sends one envelope as a frame. */
int raw_send_envelope(int fd, const Raftlock__Envelope *env);
/* Reads one envelope (NULL on timeout, EOF or a bad frame). */
Raftlock__Envelope *raw_recv_envelope(int fd, int timeout_ms);
/* Whether the peer closed the connection within timeout_ms. */
bool raw_closed(int fd, int timeout_ms);

#endif
