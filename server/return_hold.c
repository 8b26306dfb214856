/* return_hold.c: see return_hold.h. */
#include "return_hold.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"

void return_hold_init(struct return_hold *h)
{
	memset(h, 0, sizeof *h);
}

void return_hold_free(struct return_hold *h)
{
	free(h->callers);
	return_hold_init(h);
}

void return_hold_begin(struct return_hold *h)
{
	h->n = 0;
	h->came = 0;
	h->failed = false;
	h->waited = false;
}

void return_hold_expect(struct return_hold *h, uint64_t session)
{
	if (h->failed || session == 0)
		return;
	if (grow(&h->callers, &h->cap, h->n + 1, 64, sizeof *h->callers) != 0) {
		h->failed = true;
		return;
	}
	h->callers[h->n++] = (struct return_hold_caller){session, false};
}

static int by_id(const void *a, const void *b)
{
	uint64_t x = ((const struct return_hold_caller *)a)->session,
		 y = ((const struct return_hold_caller *)b)->session;
	return x < y ? -1 : x > y;
}

void return_hold_arm(struct return_hold *h, uint64_t now)
{
	if (h->failed)
		h->n = 0;
	if (h->n == 0)
		return;
	if (h->skip > 0) {
		h->skip--;
		h->n = 0;
		return;
	}
	qsort(h->callers, h->n, sizeof *h->callers, by_id);
	size_t distinct = 1; /* one session's pipelined calls count once */
	for (size_t i = 1; i < h->n; i++)
		if (h->callers[i].session != h->callers[distinct - 1].session)
			h->callers[distinct++] = h->callers[i];
	h->n = distinct;
	h->until = now + RETURN_HOLD_MS;
}

void return_hold_note_call(struct return_hold *h, uint64_t session)
{
	if (h->n == 0)
		return;
	struct return_hold_caller key = {.session = session};
	struct return_hold_caller *c = bsearch(&key, h->callers, h->n, sizeof *h->callers, by_id);
	if (c != NULL && !c->seen) {
		c->seen = true;
		h->came++;
	}
}

static void ended(struct return_hold *h, bool back)
{
	if (h->waited && back) {
		h->filled++;
		h->backoff /= 2;
	} else if (h->waited) {
		h->expired++;
		h->backoff = h->backoff == 0 ? 1 : h->backoff * 2;
		if (h->backoff > RETURN_HOLD_SKIP_MAX)
			h->backoff = RETURN_HOLD_SKIP_MAX;
		h->skip = h->backoff;
	}
	h->n = 0;
}

bool return_hold_waits(struct return_hold *h, uint64_t now, uint64_t *wake_in)
{
	if (h->n == 0)
		return false;
	/* three in four: the last callers to be scheduled, on a loaded
	 * machine, ride the next entry rather than hold this one */
	bool back = (uint64_t)h->came * 4 >= (uint64_t)h->n * 3;
	if (back || now >= h->until) {
		ended(h, back);
		return false;
	}
	h->waited = true;
	*wake_in = h->until - now;
	return true;
}

void return_hold_reset(struct return_hold *h)
{
	h->n = 0;
	h->skip = 0;
	h->backoff = 0;
}
