/* apply_defer.c: see apply_defer.h. */
#include "apply_defer.h"

#include <stdlib.h>
#include <string.h>

bool apply_defer_hold(struct apply_defer *d, uint64_t index, const void *buf, size_t len)
{
	if (d->n == APPLY_DEFER_MAX_ENTRIES || len > APPLY_DEFER_MAX_BYTES - d->bytes)
		return false;
	void *copy = malloc(len ? len : 1);
	if (copy == NULL)
		return false;
	memcpy(copy, buf, len);
	if (d->n == 0)
		d->held_turn = d->turns;
	d->v[d->n++] = (struct apply_defer_entry){.index = index, .len = len, .buf = copy};
	d->bytes += len;
	return true;
}

bool apply_defer_turn(struct apply_defer *d)
{
	d->turns++;
	/* held during turn t (its poll, or before it): due at the end of t + 1,
	 * whose poll has come between */
	return d->n > 0 && d->turns >= d->held_turn + 2;
}

bool apply_defer_holding(const struct apply_defer *d)
{
	return d->n > 0;
}

void apply_defer_drain(struct apply_defer *d, apply_defer_fn apply, void *arg)
{
	for (size_t i = 0; i < d->n; i++) {
		apply(arg, d->v[i].index, d->v[i].buf, d->v[i].len);
		free(d->v[i].buf);
	}
	d->n = 0;
	d->bytes = 0;
}
