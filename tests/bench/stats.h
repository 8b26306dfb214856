/*
 * stats: what every load generator in tests/bench measures and prints.
 *
 * Latency samples are collected per thread (no locking on the hot path) and
 * merged at the end. Server CPU comes from /proc/PID/stat of the server
 * processes read before and after the measurement window. The result is one
 * JSON line whose keys are the same for every system:
 *   system, workload, clients, pairs_per_s, p50_ms, p99_ms, max_ms, errors,
 *   server_cpu_s_per_1k, window_s, status, client_cpu_s_per_1k,
 *   client_switches_per_pair (the generator's context switches per pair;
 *   not from etcdbench)
 */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Samples of one thread, in milliseconds. Growth stops at a cap so that a
 * long run cannot exhaust memory; the count of dropped samples is kept. */
struct stats_samples {
	float *v;
	size_t n, cap;
	size_t dropped;
};

void stats_samples_add(struct stats_samples *s, double ms);
void stats_samples_free(struct stats_samples *s);

/* Merges parts[0..n) into one sorted array (owned by the caller, free()).
 * Returns NULL with *count 0 when there is nothing or memory runs out. */
float *stats_merge_sorted(struct stats_samples *const *parts, size_t n, size_t *count);

/* The q-quantile (0..1) of a sorted array; 0 if empty. */
double stats_quantile(const float *sorted, size_t n, double q);

/* Writes "q ms" lines at 1001 evenly spaced quantiles. 0 or -1. */
int stats_write_cdf(const char *path, const float *sorted, size_t n);

/* CLOCK_MONOTONIC in seconds. */
double stats_now(void);

/* Parses "PID,PID,..." into pids (at most max). Returns the count. */
size_t stats_parse_pids(const char *list, int *pids, size_t max);

/* Sum of user+system CPU seconds of the given processes (absent ones count
 * 0). */
double stats_proc_cpu(const int *pids, size_t n);

/* A field of /proc/PID/status given in kB ("VmRSS", "VmHWM": the highest
 * RSS the process ever had), 0 if unknown. */
uint64_t stats_proc_status_kib(int pid, const char *field);

/* Resident set size of one process in KiB, 0 if unknown. */
uint64_t stats_proc_rss_kib(int pid);

struct stats_result {
	const char *system;
	const char *workload;
	unsigned clients;
	double pairs_per_s;
	double p50_ms, p99_ms, max_ms;
	uint64_t errors;
	double server_cpu_s_per_1k;
	double window_s;
	double client_cpu_s_per_1k;      /* the generator's own CPU */
	double client_switches_per_pair; /* its context switches (getrusage) */
	const char *status;              /* "ok", "unsupported", "failed" */
	const char *detail;              /* NULL or a message printed as "detail" */
	const char *extra;               /* NULL or more members: ",\"key\":value,..." */
};

/* Prints the result line (and a trailing newline) to f, flushed. */
void stats_print(FILE *f, const struct stats_result *r);

#endif
