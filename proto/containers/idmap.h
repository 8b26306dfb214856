/*
 * idmap.h: a hash map from a nonzero 64-bit id to a value of a size the
 * caller chooses at idmap_init() (a struct of its own), kept inline in the
 * table: open addressing with linear probing. Shared by server and client:
 * the leader's in-memory indexes (session leases, push targets, timers)
 * and the client's index of its sessions. Not thread-safe. Never aborts: a
 * put that needs memory it cannot get returns NULL and leaves the map as
 * it was.
 *
 * Values are stored 8-byte aligned; a value pointer returned by the map is
 * borrowed and stays valid until the next idmap_put() of an absent key,
 * idmap_del(), idmap_clear() or idmap_close() (the table may move).
 */
#ifndef RAFTLOCK_IDMAP_H
#define RAFTLOCK_IDMAP_H

#include <stddef.h>
#include <stdint.h>

struct idmap {
	unsigned char *slots; /* cap slots of `stride` bytes: key (0 = empty), value */
	size_t stride;
	size_t value_size;
	size_t cap; /* slots; grows by half when 3/4 full */
	size_t len;
};

/* An empty map of values of value_size bytes (0: a set of ids). Allocates
 * nothing. */
void idmap_init(struct idmap *m, size_t value_size);
/* Frees the table; the map is empty and may be used again. */
void idmap_close(struct idmap *m);
/* Removes every id, keeping the table. */
void idmap_clear(struct idmap *m);

/* The value of key, or NULL when absent. */
void *idmap_get(const struct idmap *m, uint64_t key);

/* The value of key (nonzero), inserted zeroed if absent. NULL when out of
 * memory (nothing changed). */
void *idmap_put(struct idmap *m, uint64_t key);

/* Removes key, if present. */
void idmap_del(struct idmap *m, uint64_t key);

/* Iteration: start with *pos = 0; each call returns the next value (and
 * its id in *key when key is not NULL), NULL after the last. Values may be
 * changed during iteration; ids may not be added or deleted (collect them
 * first). */
void *idmap_next(const struct idmap *m, size_t *pos, uint64_t *key);

#endif
