/* timers.c: see timers.h. */
#include "timers.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "raftlock.h"

/* ---------------------------------------------------------- identity -- */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* The index key of an identity; the kinds hash apart, 0 is never a key. */
static uint64_t key_of(enum timer_kind kind, const char *name, uint64_t session, uint64_t seq)
{
	uint64_t h;
	if (kind == TIMER_LOCK_DELAY) {
		h = 0xcbf29ce484222325ull;
		for (const unsigned char *p = (const unsigned char *)name; *p; p++)
			h = (h ^ *p) * 0x100000001b3ull;
		h = mix(h) << 1;
	} else {
		h = mix(mix(session) ^ seq) << 1 | 1;
	}
	return h != 0 ? h : 2;
}

static bool same(const struct timer *tm, enum timer_kind kind, const char *name, uint64_t session,
		 uint64_t seq)
{
	if (tm->kind != kind)
		return false;
	return kind == TIMER_LOCK_DELAY ? strcmp(tm->name, name) == 0
					: tm->session == session && tm->seq == seq;
}

static struct timer *find(struct timers *t, uint64_t key, enum timer_kind kind, const char *name,
			  uint64_t session, uint64_t seq)
{
	struct timer **first = idmap_get(&t->index, key);
	for (struct timer *tm = first ? *first : NULL; tm != NULL; tm = tm->next)
		if (same(tm, kind, name, session, seq))
			return tm;
	return NULL;
}

static void unindex(struct timers *t, struct timer *tm)
{
	struct timer **first = idmap_get(&t->index, tm->key);
	struct timer **p = first;
	while (*p != tm)
		p = &(*p)->next;
	*p = tm->next;
	if (*first == NULL)
		idmap_del(&t->index, tm->key);
}

/* -------------------------------------------------------------- heap -- */

static void place(struct timers *t, size_t i, struct timer *tm)
{
	t->heap[i] = tm;
	tm->slot = i;
}

static void sift_up(struct timers *t, size_t i)
{
	struct timer *tm = t->heap[i];
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (t->heap[parent]->due <= tm->due)
			break;
		place(t, i, t->heap[parent]);
		i = parent;
	}
	place(t, i, tm);
}

static void sift_down(struct timers *t, size_t i)
{
	struct timer *tm = t->heap[i];
	for (;;) {
		size_t child = 2 * i + 1;
		if (child >= t->n)
			break;
		if (child + 1 < t->n && t->heap[child + 1]->due < t->heap[child]->due)
			child++;
		if (tm->due <= t->heap[child]->due)
			break;
		place(t, i, t->heap[child]);
		i = child;
	}
	place(t, i, tm);
}

/* Restores the heap order around slot i after its key changed. */
static void fix(struct timers *t, size_t i)
{
	if (i > 0 && t->heap[(i - 1) / 2]->due > t->heap[i]->due)
		sift_up(t, i);
	else
		sift_down(t, i);
}

static void heap_remove(struct timers *t, struct timer *tm)
{
	size_t i = tm->slot;
	struct timer *last = t->heap[--t->n];
	if (last != tm) {
		place(t, i, last);
		fix(t, i);
	}
}

/* ------------------------------------------------------------ public -- */

void timers_init(struct timers *t)
{
	memset(t, 0, sizeof *t);
	idmap_init(&t->index, sizeof(struct timer *));
}

void timers_clear(struct timers *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->heap[i]->name);
		free(t->heap[i]);
	}
	t->n = 0;
	idmap_clear(&t->index);
}

void timers_close(struct timers *t)
{
	timers_clear(t);
	free(t->heap);
	idmap_close(&t->index);
	memset(t, 0, sizeof *t);
}

int timers_set(struct timers *t, enum timer_kind kind, const char *name, uint64_t session,
	       uint64_t seq, uint64_t deadline)
{
	uint64_t key = key_of(kind, name, session, seq);
	struct timer *tm = find(t, key, kind, name, session, seq);
	if (tm != NULL) {
		tm->deadline = deadline;
		tm->due = deadline;
		fix(t, tm->slot);
		return 0;
	}
	if (grow(&t->heap, &t->cap, t->n + 1, 64, sizeof *t->heap) != 0)
		return RAFTLOCK_ENOMEM;
	tm = calloc(1, sizeof *tm);
	char *copy = strdup(name);
	struct timer **first = tm && copy ? idmap_put(&t->index, key) : NULL;
	if (first == NULL) {
		free(copy);
		free(tm);
		return RAFTLOCK_ENOMEM;
	}
	*tm = (struct timer){.kind = kind,
			     .name = copy,
			     .session = kind != TIMER_LOCK_DELAY ? session : 0,
			     .seq = kind != TIMER_LOCK_DELAY ? seq : 0,
			     .deadline = deadline,
			     .due = deadline,
			     .key = key,
			     .next = *first};
	*first = tm;
	place(t, t->n++, tm);
	sift_up(t, tm->slot);
	return 0;
}

static void drop(struct timers *t, enum timer_kind kind, const char *name, uint64_t session,
		 uint64_t seq)
{
	struct timer *tm = find(t, key_of(kind, name, session, seq), kind, name, session, seq);
	if (tm == NULL)
		return;
	unindex(t, tm);
	heap_remove(t, tm);
	free(tm->name);
	free(tm);
}

void timers_drop_revoke(struct timers *t, uint64_t token)
{
	drop(t, TIMER_REVOKE, "", token, 0);
}

void timers_drop_delay(struct timers *t, const char *name)
{
	drop(t, TIMER_LOCK_DELAY, name, 0, 0);
}

void timers_drop_wait(struct timers *t, uint64_t session, uint64_t seq)
{
	if (t->n > 0)
		drop(t, TIMER_WAIT, NULL, session, seq);
}

struct timer *timers_due(struct timers *t, uint64_t now)
{
	return t->n > 0 && t->heap[0]->due <= now ? t->heap[0] : NULL;
}

void timers_postpone(struct timers *t, struct timer *tm, uint64_t retry_at)
{
	tm->due = retry_at > tm->deadline ? retry_at : tm->deadline;
	fix(t, tm->slot);
}

void timers_reset(struct timers *t)
{
	for (size_t i = 0; i < t->n; i++)
		t->heap[i]->due = t->heap[i]->deadline;
	for (size_t i = t->n / 2; i-- > 0;)
		sift_down(t, i);
}
