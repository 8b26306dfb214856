/* arena.c: see arena.h. */
#include "arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>

struct arena_chunk {
	struct arena_chunk *next;
	size_t used, cap;
	alignas(max_align_t) unsigned char data[];
};

#define ARENA_ALIGN alignof(max_align_t)

static void *pb_alloc(void *data, size_t n)
{
	return arena_alloc(data, n);
}

/* A message's parts are dropped together by arena_reset(). */
static void pb_free(void *data, void *p)
{
	(void)data;
	(void)p;
}

void arena_init(struct arena *a)
{
	a->pb.alloc = pb_alloc;
	a->pb.free = pb_free;
	a->pb.allocator_data = a;
	a->head = NULL;
}

void *arena_alloc(struct arena *a, size_t n)
{
	if (n > SIZE_MAX / 2)
		return NULL;
	n = (n + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
	if (n == 0)
		n = ARENA_ALIGN;
	struct arena_chunk *c = a->head;
	if (c == NULL || c->cap - c->used < n) {
		size_t cap = c == NULL ? ARENA_FIRST : c->cap * 2;
		if (cap < n)
			cap = n;
		struct arena_chunk *more = malloc(sizeof *more + cap);
		if (more == NULL)
			return NULL;
		more->next = c;
		more->used = 0;
		more->cap = cap;
		a->head = c = more;
	}
	void *p = c->data + c->used;
	c->used += n;
	return p;
}

void arena_reset(struct arena *a)
{
	struct arena_chunk *keep = a->head;
	if (keep == NULL)
		return;
	for (struct arena_chunk *c = keep->next, *next; c != NULL; c = next) {
		next = c->next;
		free(c);
	}
	keep->next = NULL;
	keep->used = 0;
	if (keep->cap > ARENA_KEEP_MAX) {
		free(keep);
		a->head = NULL;
	}
}

void arena_fini(struct arena *a)
{
	arena_reset(a);
	free(a->head);
	a->head = NULL;
}
