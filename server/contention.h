/*
 * contention.h: the lock name prefixes that see the most waits, with
 * bounded memory and so a bounded number of metric labels, whatever names
 * clients use.
 *
 * A prefix is a lock name up to its first '/' (the whole name without
 * one), cut to CONTENTION_PREFIX_MAX bytes. Counting follows the
 * space-saving scheme: CONTENTION_SLOTS prefixes are tracked; a new one
 * takes the slot of the least counted, inheriting its count (recorded as
 * its possible overcount), so a prefix with more waits than a slot's share
 * is always among those tracked. Counts live in windows of
 * CONTENTION_WINDOW_MS of the time the caller passes (the fsm passes
 * cluster time): the current window and the previous one are kept, so a
 * reading covers the last one to two windows.
 *
 * No allocation. Loop thread only.
 */
#ifndef RAFTLOCK_CONTENTION_H
#define RAFTLOCK_CONTENTION_H

#include <stddef.h>
#include <stdint.h>

#define CONTENTION_SLOTS 64
#define CONTENTION_PREFIX_MAX 64
#define CONTENTION_WINDOW_MS 60000u

struct contention_entry {
	char prefix[CONTENTION_PREFIX_MAX + 1];
	uint32_t hash;
	uint64_t count; /* waits counted (an upper bound when error > 0) */
	uint64_t error; /* of which possibly other prefixes' */
};

struct contention_window {
	struct contention_entry slot[CONTENTION_SLOTS];
	unsigned n;
	uint64_t start_ms;
};

struct contention {
	struct contention_window cur, prev;
};

void contention_init(struct contention *c);

/* Writes the prefix of lock name `name` into out (NUL-terminated). */
void contention_prefix(const char *name, char out[CONTENTION_PREFIX_MAX + 1]);

/* Counts one wait on lock `name` at time now_ms. */
void contention_count(struct contention *c, const char *name, uint64_t now_ms);

/* The (at most k) prefixes with the most waits over the current and the
 * previous window as of now_ms, most first (ties by prefix); returns how
 * many were written to out. Does not change c. */
size_t contention_top(const struct contention *c, uint64_t now_ms, struct contention_entry *out,
		      size_t k);

#endif
