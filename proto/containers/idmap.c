/* idmap.c: see idmap.h. */
#include "idmap.h"

#include <stdlib.h>
#include <string.h>

#include "raftlock.h"

static size_t slot_of(const struct idmap *m, uint64_t key)
{
	/* Fibonacci hashing spreads sequential ids. */
	return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (m->cap - 1);
}

void idmap_init(struct idmap *m)
{
	memset(m, 0, sizeof *m);
}

void idmap_close(struct idmap *m)
{
	free(m->slots);
	memset(m, 0, sizeof *m);
}

void idmap_clear(struct idmap *m)
{
	if (m->slots != NULL)
		memset(m->slots, 0, m->cap * sizeof *m->slots);
	m->len = 0;
}

struct idmap_slot *idmap_get(struct idmap *m, uint64_t key)
{
	if (m->cap == 0 || key == 0)
		return NULL;
	for (size_t i = slot_of(m, key);; i = (i + 1) & (m->cap - 1)) {
		if (m->slots[i].key == key)
			return &m->slots[i];
		if (m->slots[i].key == 0)
			return NULL;
	}
}

/* Places a key known to be absent, with room for it. */
static struct idmap_slot *place(struct idmap *m, uint64_t key)
{
	size_t i = slot_of(m, key);
	while (m->slots[i].key != 0)
		i = (i + 1) & (m->cap - 1);
	memset(&m->slots[i], 0, sizeof m->slots[i]);
	m->slots[i].key = key;
	m->len++;
	return &m->slots[i];
}

static int grow(struct idmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	struct idmap_slot *slots = calloc(cap, sizeof *slots);
	if (slots == NULL)
		return RAFTLOCK_ENOMEM;
	struct idmap old = *m;
	m->slots = slots;
	m->cap = cap;
	m->len = 0;
	for (size_t i = 0; i < old.cap; i++)
		if (old.slots[i].key != 0)
			*place(m, old.slots[i].key) = old.slots[i];
	free(old.slots);
	return 0;
}

struct idmap_slot *idmap_put(struct idmap *m, uint64_t key)
{
	struct idmap_slot *s = idmap_get(m, key);
	if (s != NULL)
		return s;
	if ((m->len + 1) * 4 > m->cap * 3 && grow(m) != 0)
		return NULL;
	return place(m, key);
}

void idmap_del(struct idmap *m, uint64_t key)
{
	struct idmap_slot *s = idmap_get(m, key);
	if (s == NULL)
		return;
	size_t i = (size_t)(s - m->slots);
	m->slots[i].key = 0;
	m->len--;
	/* Backward-shift the cluster that follows so lookups stay correct. */
	for (size_t j = (i + 1) & (m->cap - 1); m->slots[j].key != 0; j = (j + 1) & (m->cap - 1)) {
		size_t home = slot_of(m, m->slots[j].key);
		/* Move j into the hole i if its home is not in (i, j]. */
		if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
			m->slots[i] = m->slots[j];
			m->slots[j].key = 0;
			i = j;
		}
	}
}
