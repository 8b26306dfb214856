/* timebase.c: see timebase.h. */
#include "timebase.h"

#include <string.h>

void timebase_init_uv(struct timebase *c, uv_loop_t *loop)
{
	memset(c, 0, sizeof *c);
	c->kind = TIMEBASE_UV;
	c->loop = loop;
	list_init(&c->timers);
}

void timebase_init_manual(struct timebase *c, uint64_t start_ms)
{
	memset(c, 0, sizeof *c);
	c->kind = TIMEBASE_MANUAL;
	c->now = start_ms;
	list_init(&c->timers);
}

uint64_t timebase_now(struct timebase *c)
{
	return c->kind == TIMEBASE_UV ? uv_hrtime() / 1000000u : c->now;
}

/* The active manual timer due first, or NULL. */
static struct timebase_timer *first_due(struct timebase *c)
{
	struct timebase_timer *best = NULL;
	struct list *l;
	list_each (l, &c->timers) {
		struct timebase_timer *t = list_entry(l, struct timebase_timer, link);
		if (best == NULL || t->due < best->due)
			best = t;
	}
	return best;
}

void timebase_advance(struct timebase *c, uint64_t ms)
{
	uint64_t until = c->now + ms;
	struct timebase_timer *t;
	while ((t = first_due(c)) != NULL && t->due <= until) {
		c->now = t->due;
		if (t->repeat != 0) {
			t->due += t->repeat;
		} else {
			t->active = false;
			list_remove(&t->link);
		}
		t->cb(t);
	}
	c->now = until;
}

static void uv_fired(uv_timer_t *h)
{
	struct timebase_timer *t = h->data;
	if (uv_timer_get_repeat(h) == 0)
		t->active = false;
	t->cb(t);
}

void timebase_timer_init(struct timebase *c, struct timebase_timer *t, void *data)
{
	memset(t, 0, sizeof *t);
	t->clock = c;
	t->data = data;
	list_init(&t->link);
	if (c->kind == TIMEBASE_UV) {
		uv_timer_init(c->loop, &t->uv);
		t->uv.data = t;
	}
}

void timebase_timer_start(struct timebase_timer *t, timebase_timer_cb cb, uint64_t timeout_ms,
			  uint64_t repeat_ms)
{
	t->cb = cb;
	t->active = true;
	if (t->clock->kind == TIMEBASE_UV) {
		uv_timer_start(&t->uv, uv_fired, timeout_ms, repeat_ms);
		return;
	}
	t->due = t->clock->now + timeout_ms;
	t->repeat = repeat_ms;
	if (!list_linked(&t->link))
		list_add_tail(&t->clock->timers, &t->link);
}

void timebase_timer_stop(struct timebase_timer *t)
{
	t->active = false;
	if (t->clock->kind == TIMEBASE_UV)
		uv_timer_stop(&t->uv);
	else
		list_remove(&t->link);
}

bool timebase_timer_active(const struct timebase_timer *t)
{
	return t->active;
}

void timebase_timer_close(struct timebase_timer *t)
{
	timebase_timer_stop(t);
	if (t->clock->kind == TIMEBASE_UV)
		uv_close((uv_handle_t *)&t->uv, NULL);
}
