/* id_sort.c: see id_sort.h. */
#include "id_sort.h"

#include <stdlib.h>
#include <string.h>

#include "raftlock.h"

/* The sort, inlined into id_sort() for each number of words it is
 * called with, so that the copy of a record is a load and a store. */
static inline __attribute__((always_inline)) int sort_records(uint64_t *v, size_t n, size_t words)
{
	size_t counts[8][256] = {{0}};
	for (size_t i = 0; i < n; i++)
		for (int d = 0; d < 8; d++)
			counts[d][v[i * words] >> (8 * d) & 0xff]++;
	uint64_t *from = v, *to = malloc(n * words * sizeof *to), *scratch = to;
	if (to == NULL)
		return RAFTLOCK_ENOMEM;
	for (int d = 0; d < 8; d++) {
		size_t *at = counts[d];
		if (at[from[0] >> (8 * d) & 0xff] == n)
			continue;
		for (size_t b = 0, sum = 0; b < 256; b++) {
			size_t c = at[b];
			at[b] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++) {
			const uint64_t *rec = from + i * words;
			uint64_t *dst = to + at[rec[0] >> (8 * d) & 0xff]++ * words;
			for (size_t w = 0; w < words; w++)
				dst[w] = rec[w];
		}
		uint64_t *was = from;
		from = to;
		to = was;
	}
	if (from != v)
		memcpy(v, from, n * words * sizeof *v);
	free(scratch);
	return 0;
}

int id_sort(uint64_t *v, size_t n, size_t words)
{
	if (n == 0)
		return 0;
	return words == 1   ? sort_records(v, n, 1)
	       : words == 2 ? sort_records(v, n, 2)
			    : sort_records(v, n, words);
}
