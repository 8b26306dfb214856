/* histogram.c: see histogram.h. */
#include "histogram.h"

#define US 1000ull
#define MS 1000000ull
#define S 1000000000ull

const struct histogram_layout histogram_latency = {
	16,
	{100 * US, 250 * US, 500 * US, 1 * MS, 2500 * US, 5 * MS, 10 * MS, 25 * MS, 50 * MS,
	 100 * MS, 250 * MS, 500 * MS, 1 * S, 2500 * MS, 5 * S, 10 * S}};

const struct histogram_layout histogram_duration = {14,
						    {1 * MS, 10 * MS, 100 * MS, 500 * MS, 1 * S,
						     5 * S, 10 * S, 30 * S, 60 * S, 300 * S,
						     600 * S, 1800 * S, 3600 * S, 4 * 3600 * S}};

void histogram_init(struct histogram *h, const struct histogram_layout *layout)
{
	*h = (struct histogram){.layout = layout};
}

void histogram_observe(struct histogram *h, uint64_t ns)
{
	unsigned i = 0;
	while (i < h->layout->n && ns > h->layout->bound_ns[i])
		i++;
	h->bucket[i]++;
	h->count++;
	h->sum_ns += ns;
}

uint64_t histogram_cumulative(const struct histogram *h, unsigned i)
{
	uint64_t n = 0;
	for (unsigned k = 0; k <= i && k <= h->layout->n; k++)
		n += h->bucket[k];
	return n;
}
