/* contention.c: see contention.h. */
#include "contention.h"

#include <stdlib.h>
#include <string.h>

void contention_init(struct contention *c)
{
	memset(c, 0, sizeof *c);
}

void contention_prefix(const char *name, char out[CONTENTION_PREFIX_MAX + 1])
{
	size_t n = strcspn(name, "/");
	if (n > CONTENTION_PREFIX_MAX) {
		n = CONTENTION_PREFIX_MAX;
		/* Never cut a UTF-8 sequence: the prefix becomes a label. */
		while (n > 0 && ((unsigned char)name[n] & 0xC0) == 0x80)
			n--;
	}
	memcpy(out, name, n);
	out[n] = '\0';
}

static uint32_t hash_of(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

static struct contention_entry *find(struct contention_window *w, const char *prefix, uint32_t hash)
{
	for (unsigned i = 0; i < w->n; i++)
		if (w->slot[i].hash == hash && strcmp(w->slot[i].prefix, prefix) == 0)
			return &w->slot[i];
	return NULL;
}

/* Moves the windows on to the one that holds now_ms. */
static void rotate(struct contention *c, uint64_t now_ms)
{
	uint64_t age = now_ms - c->cur.start_ms;
	if (now_ms < c->cur.start_ms || age < CONTENTION_WINDOW_MS)
		return;
	if (age < 2ull * CONTENTION_WINDOW_MS)
		c->prev = c->cur;
	else
		memset(&c->prev, 0, sizeof c->prev);
	memset(&c->cur, 0, sizeof c->cur);
	c->cur.start_ms = now_ms - age % CONTENTION_WINDOW_MS;
}

void contention_count(struct contention *c, const char *name, uint64_t now_ms)
{
	char prefix[CONTENTION_PREFIX_MAX + 1];
	contention_prefix(name, prefix);
	uint32_t hash = hash_of(prefix);
	if (c->cur.n == 0 && c->cur.start_ms == 0)
		c->cur.start_ms = now_ms;
	rotate(c, now_ms);
	struct contention_window *w = &c->cur;
	struct contention_entry *e = find(w, prefix, hash);
	if (e == NULL && w->n < CONTENTION_SLOTS) {
		e = &w->slot[w->n++];
		*e = (struct contention_entry){.hash = hash};
		memcpy(e->prefix, prefix, sizeof prefix);
	} else if (e == NULL) {
		e = &w->slot[0];
		for (unsigned i = 1; i < w->n; i++)
			if (w->slot[i].count < e->count)
				e = &w->slot[i];
		e->error = e->count;
		e->hash = hash;
		memcpy(e->prefix, prefix, sizeof prefix);
	}
	e->count++;
}

static int by_count(const void *a, const void *b)
{
	const struct contention_entry *x = a, *y = b;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return strcmp(x->prefix, y->prefix);
}

size_t contention_top(const struct contention *c, uint64_t now_ms, struct contention_entry *out,
		      size_t k)
{
	struct contention view = *c;
	rotate(&view, now_ms);
	/* Both windows merged: at most 2 * CONTENTION_SLOTS prefixes. */
	struct contention_entry all[2 * CONTENTION_SLOTS];
	size_t n = 0;
	for (unsigned i = 0; i < view.cur.n; i++)
		all[n++] = view.cur.slot[i];
	for (unsigned i = 0; i < view.prev.n; i++) {
		const struct contention_entry *p = &view.prev.slot[i];
		struct contention_entry *e = NULL;
		for (size_t j = 0; j < view.cur.n; j++)
			if (all[j].hash == p->hash && strcmp(all[j].prefix, p->prefix) == 0)
				e = &all[j];
		if (e != NULL) {
			e->count += p->count;
			e->error += p->error;
		} else {
			all[n++] = *p;
		}
	}
	qsort(all, n, sizeof all[0], by_count);
	if (n > k)
		n = k;
	memcpy(out, all, n * sizeof all[0]);
	return n;
}
