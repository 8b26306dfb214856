/*
 * idmap.h: a hash map from a nonzero 64-bit id to a small fixed-size value,
 * open addressing with linear probing. Shared by server and client: the
 * leader's in-memory indexes (session deadlines, push targets) and the
 * client's index of its sessions. Not thread-safe. Never aborts: a put
 * that needs memory it cannot get returns NULL and leaves the map as it
 * was.
 */
#ifndef RAFTLOCK_IDMAP_H
#define RAFTLOCK_IDMAP_H

#include <stddef.h>
#include <stdint.h>

struct idmap_slot {
	uint64_t key; /* 0 = empty */
	uint64_t a, b;
	void *ptr;
};

struct idmap {
	struct idmap_slot *slots;
	size_t cap; /* power of two */
	size_t len;
};

void idmap_init(struct idmap *m);
void idmap_close(struct idmap *m);
void idmap_clear(struct idmap *m);

/* The slot of key, or NULL. Valid until the next insert or delete. */
struct idmap_slot *idmap_get(struct idmap *m, uint64_t key);

/* The slot of key (nonzero), inserted zeroed if absent; valid until the
 * next insert or delete. NULL when out of memory (nothing changed). */
struct idmap_slot *idmap_put(struct idmap *m, uint64_t key);

void idmap_del(struct idmap *m, uint64_t key);

/* Iteration: for (i = 0; i < m->cap; i++) if (m->slots[i].key) ... ;
 * deleting during iteration is not allowed (collect keys first). */

#endif
