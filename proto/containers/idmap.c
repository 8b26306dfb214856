/* idmap.c: see idmap.h. */
#include "idmap.h"

#include <stdlib.h>
#include <string.h>

#include "raftlock.h"

#define KEY_BYTES sizeof(uint64_t)

/* Fibonacci hashing spreads sequential ids; the high half of the
 * product with cap maps the hash onto any capacity, so the table grows by
 * half instead of doubling (at 1,000,000 leases: 1.6 million slots instead
 * of 2.1 million). */
static size_t slot_of(const struct idmap *m, uint64_t key)
{
	uint64_t h = key * 0x9E3779B97F4A7C15ull;
	return (size_t)(((unsigned __int128)h * m->cap) >> 64);
}

static size_t next_slot(const struct idmap *m, size_t i)
{
	return i + 1 == m->cap ? 0 : i + 1;
}

static unsigned char *at(const struct idmap *m, size_t i)
{
	return m->slots + i * m->stride;
}

static uint64_t key_at(const struct idmap *m, size_t i)
{
	uint64_t k;
	memcpy(&k, at(m, i), sizeof k);
	return k;
}

static void set_key(struct idmap *m, size_t i, uint64_t key)
{
	memcpy(at(m, i), &key, sizeof key);
}

void idmap_init(struct idmap *m, size_t value_size)
{
	memset(m, 0, sizeof *m);
	m->value_size = value_size;
	m->stride = KEY_BYTES + (value_size + 7) / 8 * 8;
}

void idmap_close(struct idmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->len = 0;
}

void idmap_clear(struct idmap *m)
{
	if (m->slots != NULL)
		memset(m->slots, 0, m->cap * m->stride);
	m->len = 0;
}

/* The index of key's slot, or cap when absent. */
static size_t find(const struct idmap *m, uint64_t key)
{
	if (m->cap == 0 || key == 0)
		return m->cap;
	for (size_t i = slot_of(m, key);; i = next_slot(m, i)) {
		uint64_t k = key_at(m, i);
		if (k == key)
			return i;
		if (k == 0)
			return m->cap;
	}
}

void *idmap_get(const struct idmap *m, uint64_t key)
{
	size_t i = find(m, key);
	return i < m->cap ? at(m, i) + KEY_BYTES : NULL;
}

/* Places a key known to be absent, with room for it; its value zeroed. */
static size_t place(struct idmap *m, uint64_t key)
{
	size_t i = slot_of(m, key);
	while (key_at(m, i) != 0)
		i = next_slot(m, i);
	memset(at(m, i), 0, m->stride);
	set_key(m, i, key);
	m->len++;
	return i;
}

static int grow(struct idmap *m)
{
	size_t cap = m->cap ? m->cap + m->cap / 2 : 64;
	unsigned char *slots = calloc(cap, m->stride);
	if (slots == NULL)
		return RAFTLOCK_ENOMEM;
	struct idmap old = *m;
	m->slots = slots;
	m->cap = cap;
	m->len = 0;
	for (size_t i = 0; i < old.cap; i++) {
		uint64_t k = key_at(&old, i);
		if (k != 0)
			memcpy(at(m, place(m, k)), at(&old, i), m->stride);
	}
	free(old.slots);
	return 0;
}

void *idmap_put(struct idmap *m, uint64_t key)
{
	void *v = idmap_get(m, key);
	if (v != NULL)
		return v;
	if ((m->len + 1) * 4 > m->cap * 3 && grow(m) != 0)
		return NULL;
	return at(m, place(m, key)) + KEY_BYTES;
}

void idmap_del(struct idmap *m, uint64_t key)
{
	size_t i = find(m, key);
	if (i == m->cap)
		return;
	set_key(m, i, 0);
	m->len--;
	/* Backward-shift the cluster that follows so lookups stay correct. */
	for (size_t j = next_slot(m, i); key_at(m, j) != 0; j = next_slot(m, j)) {
		size_t home = slot_of(m, key_at(m, j));
		/* Move j into the hole i if its home is not in (i, j]. */
		if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
			memcpy(at(m, i), at(m, j), m->stride);
			set_key(m, j, 0);
			i = j;
		}
	}
}

void *idmap_next(const struct idmap *m, size_t *pos, uint64_t *key)
{
	for (size_t i = *pos; i < m->cap; i++) {
		uint64_t k = key_at(m, i);
		if (k != 0) {
			*pos = i + 1;
			if (key != NULL)
				*key = k;
			return at(m, i) + KEY_BYTES;
		}
	}
	*pos = m->cap;
	return NULL;
}
