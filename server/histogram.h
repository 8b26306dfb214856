/*
 * histogram.h: a latency or duration histogram with fixed buckets, for the
 * metrics exposition. Observing is a short scan of the bucket bounds and a
 * few increments: no allocation, no lock, so it may sit on every request.
 * Loop thread only (the daemon has one thread).
 *
 * Counts are kept per bucket (not cumulative); metrics.c renders them as
 * Prometheus' cumulative `_bucket{le=...}` lines, in seconds.
 */
#ifndef RAFTLOCK_HISTOGRAM_H
#define RAFTLOCK_HISTOGRAM_H

#include <stdint.h>

#define HISTOGRAM_MAX_BOUNDS 20

/* A bucket layout: upper bounds in nanoseconds, increasing; a last,
 * unbounded bucket (+Inf) follows them. Shared, never changed. */
struct histogram_layout {
	unsigned n;
	uint64_t bound_ns[HISTOGRAM_MAX_BOUNDS];
};

/* Requests, applies, disk writes: 100 us to 10 s. */
extern const struct histogram_layout histogram_latency;
/* Lock waits and holds: 1 ms to 1 h. */
extern const struct histogram_layout histogram_duration;

struct histogram {
	const struct histogram_layout *layout; /* borrowed, static */
	uint64_t bucket[HISTOGRAM_MAX_BOUNDS + 1];
	uint64_t count;
	uint64_t sum_ns;
};

/* Empties h and gives it a layout. */
void histogram_init(struct histogram *h, const struct histogram_layout *layout);

/* Counts one observation of ns nanoseconds. */
void histogram_observe(struct histogram *h, uint64_t ns);

/* Observations at or below the i-th bound (i == layout->n: all of them). */
uint64_t histogram_cumulative(const struct histogram *h, unsigned i);

#endif
