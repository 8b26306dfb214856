/*
 * driver: runs a closed-loop lock workload with one thread per client and
 * measures it: a fixed warm-up, then a fixed window in which every
 * acquire+release pair that starts is counted, its acquire latency sampled,
 * and the server processes' CPU read before and after.
 *
 * The pair function is called repeatedly from client threads; it returns 0
 * after a pair, a negative code after an error (counted; the thread backs off
 * 10 ms), or DRIVER_UNSUPPORTED when the server refuses the feature, which
 * ends the run with status "unsupported", or DRIVER_ABANDONED when it gave
 * up a wait because driver_stopping() became true. On error it writes a message to
 * err (the first one is reported as the result's detail).
 */
#ifndef BENCH_DRIVER_H
#define BENCH_DRIVER_H

#include <stdbool.h>
#include <stddef.h>

#include "stats.h"

#define DRIVER_UNSUPPORTED 1
/* A pair given up because the window ended: neither a pair nor an error. */
#define DRIVER_ABANDONED 2
#define DRIVER_CLIENTS_MAX 1024

typedef int (*driver_pair_fn)(void *arg, unsigned client, double *acquire_ms, char *err,
			      size_t errlen);

struct driver_config {
	unsigned clients;
	double warmup_s, window_s;
	const int *pids; /* server processes whose CPU is measured */
	size_t n_pids;
	const char *cdf_out; /* NULL or a file for the latency quantiles */
	/* NULL, or called from the driver's thread as the window starts
	 * (end false) and ends (end true), for measurements of the caller. */
	void (*window_hook)(void *arg, bool end);
	void *hook_arg;
};

/* True once the window has ended: long waits inside a pair should give up. */
bool driver_stopping(void);

/*
 * Runs the workload and fills the measured fields of *out (pairs_per_s,
 * quantiles, errors, server CPU, window, status, detail). system, workload
 * and clients are the caller's. Returns 0, or -1 if threads could not start.
 * The detail string stays valid until the next driver_run().
 */
int driver_run(const struct driver_config *cfg, driver_pair_fn pair, void *arg,
	       struct stats_result *out);

/*
 * The same measurement for asynchronous clients, many per thread: start()
 * begins client i's first pair and returns 0 (or nonzero: the run fails).
 * Whoever finishes a pair reports it with driver_pair_done(), from any
 * thread, passing driver_in_window() as read when the pair started (and rv
 * as for driver_pair_fn); it returns whether the client should start its
 * next pair. The run ends when every client has stopped.
 */
typedef int (*driver_start_fn)(void *arg, unsigned client);
bool driver_in_window(void);
bool driver_pair_done(unsigned client, bool in_window, int rv, double acquire_ms, const char *err);
int driver_run_async(const struct driver_config *cfg, driver_start_fn start, void *arg,
		     struct stats_result *out);

#endif
