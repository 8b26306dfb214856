/*
 * options: the command line shared by the C load generators (rlbench,
 * redisbench), so that every system is driven with the same knobs.
 */
#ifndef BENCH_OPTIONS_H
#define BENCH_OPTIONS_H

#include <stddef.h>

#define OPTIONS_PIDS_MAX 16

struct options {
	const char *workload;       /* --workload W */
	unsigned clients;           /* --clients N (1..1024) */
	double warmup_s;            /* --warmup S (0..120) */
	double window_s;            /* --window S (0.1..600) */
	int pids[OPTIONS_PIDS_MAX]; /* --server-pids PID,PID,... */
	size_t n_pids;
	const char *cdf_out;   /* --cdf-out FILE */
	const char *addresses; /* --addresses HOST:PORT,... */
	unsigned retry_ms;     /* --retry-ms N: poll interval of try-locks */
	unsigned conns;        /* --conns N: client objects (connections) */
	const char *mode;      /* --mode async|threads (raftlock uncontended) */
	unsigned ttl_ms;       /* --ttl-ms N: session or lock TTL */
	unsigned long count;   /* --count N: sessions or locks (scale workloads) */
	const char *data_dirs; /* --data-dirs DIR,DIR,...: the nodes' data */
	/* State workload: shell commands the runner gives for each phase. */
	const char *stop_cmd;    /* --stop-cmd: stops every node cleanly */
	const char *wipe_cmd;    /* --wipe-cmd: stops every node and removes
				    their LMDB files (rebuild path) */
	const char *start_cmd;   /* --start-cmd: starts every node again */
	const char *catchup_cmd; /* --catchup-cmd: adds and starts a new empty
				    member; prints its client address */
	/* TLS of raftlock's clients, as for the raftlock command: --cacert,
	 * --cert, --key, --server-name, else $RAFTLOCK_CACERT, $RAFTLOCK_CERT,
	 * $RAFTLOCK_KEY, $RAFTLOCK_SERVER_NAME; NULL: not given */
	const char *cacert, *cert, *key, *server_name;
};

/* Parses argv into *o (defaults first). Prints usage and returns -1 on a bad
 * option, 1 after --help, 0 otherwise. */
int options_parse(struct options *o, int argc, char **argv, const char *prog,
		  const char *workloads);

#endif
