/* cluster_clock.c: see cluster_clock.h. */
#include "cluster_clock.h"

void cluster_clock_init(struct cluster_clock *c, struct timebase *tb)
{
	*c = (struct cluster_clock){.tb = tb};
}

void cluster_clock_start(struct cluster_clock *c, uint64_t applied)
{
	/* From the log alone: a stamp of an earlier term of this node that
	 * did not commit must not move cluster time forward. */
	c->base = applied;
	c->last_stamp = applied;
	c->mono = timebase_now(c->tb);
	c->seen = c->mono;
	c->running = true;
}

void cluster_clock_stop(struct cluster_clock *c)
{
	if (!c->running)
		return;
	c->base = cluster_clock_now(c);
	c->running = false;
}

uint64_t cluster_clock_now(struct cluster_clock *c)
{
	if (!c->running)
		return c->base;
	uint64_t t = timebase_now(c->tb);
	if (t - c->seen > CLUSTER_CLOCK_STALL_MAX_MS)
		c->mono += t - c->seen - CLUSTER_CLOCK_STALL_MAX_MS;
	c->seen = t;
	return c->base + (t - c->mono);
}

uint64_t cluster_clock_stamp(struct cluster_clock *c)
{
	uint64_t t = cluster_clock_now(c);
	if (t < c->last_stamp)
		t = c->last_stamp;
	c->last_stamp = t;
	return t;
}
