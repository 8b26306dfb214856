/* arena.c: see arena.h. */
#include "arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ASAN 1
#endif
#endif

#ifdef ARENA_ASAN
#include <sanitizer/asan_interface.h>
#define ARENA_GAP alignof(max_align_t) /* poisoned, between allocations */
#define poison(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define ARENA_GAP 0
#define poison(p, n) ((void)(p), (void)(n))
#define unpoison(p, n) ((void)(p), (void)(n))
#endif

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
	size_t size = (n + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
	if (size == 0)
		size = ARENA_ALIGN;
	size += ARENA_GAP;
	struct arena_chunk *c = a->head;
	if (c == NULL || c->cap - c->used < size) {
		size_t cap = c == NULL ? ARENA_FIRST : c->cap * 2;
		if (cap < size)
			cap = size;
		struct arena_chunk *more = malloc(sizeof *more + cap);
		if (more == NULL)
			return NULL;
		poison(more->data, cap);
		more->next = c;
		more->used = 0;
		more->cap = cap;
		a->head = c = more;
	}
	void *p = c->data + c->used;
	c->used += size;
	unpoison(p, n);
	return p;
}

void arena_reset(struct arena *a)
{
	struct arena_chunk *keep = NULL;
	for (struct arena_chunk *c = a->head, *next; c != NULL; c = next) {
		next = c->next;
		if (keep == NULL && c->cap <= ARENA_KEEP_MAX)
			keep = c; /* the first that fits is the largest */
		else
			free(c);
	}
	a->head = keep;
	if (keep != NULL) {
		keep->next = NULL;
		keep->used = 0;
		poison(keep->data, keep->cap);
	}
}

void arena_fini(struct arena *a)
{
	arena_reset(a);
	if (a->head != NULL)
		unpoison(a->head->data, a->head->cap);
	free(a->head);
	a->head = NULL;
}
