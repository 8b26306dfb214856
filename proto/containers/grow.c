/* grow.c: see grow.h. */
#include "grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "raftlock.h"

int grow(void *array, size_t *cap, size_t need, size_t first, size_t size)
{
	if (need <= *cap)
		return 0;
	if (need > SIZE_MAX / size / 2)
		return RAFTLOCK_ENOMEM; /* the doubling below could overflow */
	size_t c = *cap ? *cap : first;
	while (c < need)
		c *= 2;
	void *old;
	memcpy(&old, array, sizeof old); /* the caller's T *, whatever T is */
	void *p = realloc(old, c * size);
	if (p == NULL)
		return RAFTLOCK_ENOMEM;
	memcpy(array, &p, sizeof p);
	*cap = c;
	return 0;
}
