/* image.c: see image.h. */
#include "image.h"

uint64_t image_sum(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

uint64_t image_sum_stored(const void *image, size_t n)
{
	const uint8_t *b = (const uint8_t *)image + n - IMAGE_SUM_SIZE;
	uint64_t v = 0;
	for (int i = 0; i < IMAGE_SUM_SIZE; i++)
		v = v << 8 | b[i];
	return v;
}

bool image_sum_ok(const void *image, size_t n)
{
	return n >= IMAGE_MIN_SIZE &&
	       image_sum(IMAGE_SUM_INIT, image, n - IMAGE_SUM_SIZE) == image_sum_stored(image, n);
}
