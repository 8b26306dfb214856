/* feature_level.c: see feature_level.h. */
#include "feature_level.h"

void features_note(struct features *f, uint64_t id, uint32_t level)
{
	for (unsigned i = 0; i < f->n; i++)
		if (f->heard[i].id == id) {
			f->heard[i].level = level;
			return;
		}
	if (f->n < FEATURES_MAX_NODES) {
		f->heard[f->n].id = id;
		f->heard[f->n].level = level;
		f->n++;
	}
}

void features_clear(struct features *f)
{
	f->n = 0;
}

uint32_t features_voters_level(const struct features *f, uint64_t self, const uint64_t *ids,
			       unsigned n_voters)
{
	uint32_t lowest = FEATURE_LEVEL;
	for (unsigned v = 0; v < n_voters; v++) {
		if (ids[v] == self)
			continue;
		uint32_t level = 0;
		for (unsigned i = 0; i < f->n; i++)
			if (f->heard[i].id == ids[v])
				level = f->heard[i].level;
		if (level == 0)
			return 0;
		if (level < lowest)
			lowest = level;
	}
	return lowest;
}
