/* image.c: see image.h. */
#include "image.h"

#include <endian.h>
#include <string.h>

#define FNV_PRIME 0x100000001b3ull

void image_sum_begin(struct image_sum *s)
{
	memset(s, 0, sizeof *s);
	s->lane[0] = IMAGE_SUM_INIT;
	for (int i = 1; i < 4; i++)
		s->lane[i] = s->lane[i - 1] * FNV_PRIME + (uint64_t)i;
}

static uint64_t rotl(uint64_t x, int r)
{
	return x << r | x >> (64 - r);
}

/* One word into its lane: a bijection of the lane for a given word, and
 * the rotation brings the high bits of the product back down. */
static uint64_t mix(uint64_t h, uint64_t w)
{
	return rotl((h ^ w) * FNV_PRIME, 29);
}

static uint64_t word_at(const uint8_t *p)
{
	uint64_t w;
	memcpy(&w, p, sizeof w);
	return le64toh(w); /* little-endian whatever the host */
}

static void add_words(struct image_sum *s, const uint8_t *p, size_t n)
{
	/* finish the word begun by an earlier piece */
	while (n > 0 && s->bytes % 8 != 0) {
		s->part[s->bytes % 8] = *p++;
		n--;
		if (++s->bytes % 8 == 0) {
			uint64_t k = (s->bytes / 8 - 1) % 4;
			s->lane[k] = mix(s->lane[k], word_at(s->part));
		}
	}
	uint64_t k = s->bytes / 8 % 4;
	uint64_t l0 = s->lane[0], l1 = s->lane[1], l2 = s->lane[2], l3 = s->lane[3];
	/* rotate so that the next word goes to l0 */
	for (uint64_t i = 0; i < k; i++) {
		uint64_t t = l0;
		l0 = l1, l1 = l2, l2 = l3, l3 = t;
	}
	size_t i = 0;
	for (; i + 32 <= n; i += 32) {
		l0 = mix(l0, word_at(p + i));
		l1 = mix(l1, word_at(p + i + 8));
		l2 = mix(l2, word_at(p + i + 16));
		l3 = mix(l3, word_at(p + i + 24));
	}
	for (; i + 8 <= n; i += 8) {
		uint64_t t = mix(l0, word_at(p + i));
		l0 = l1, l1 = l2, l2 = l3, l3 = t;
		k = (k + 1) % 4;
	}
	for (uint64_t j = 0; j < k; j++) {
		uint64_t t = l3;
		l3 = l2, l2 = l1, l1 = l0, l0 = t;
	}
	s->lane[0] = l0, s->lane[1] = l1, s->lane[2] = l2, s->lane[3] = l3;
	s->bytes += i;
	for (; i < n; i++)
		s->part[s->bytes++ % 8] = p[i];
}

void image_sum_add(struct image_sum *s, const void *data, size_t n)
{
	const uint8_t *p = data;
	/* the magic decides the sum: keep it until it is whole */
	while (n > 0 && s->bytes < IMAGE_MAGIC_SIZE) {
		s->magic[s->bytes++] = *p++;
		n--;
		if (s->bytes == IMAGE_MAGIC_SIZE) {
			s->words = memcmp(s->magic, IMAGE_MAGIC_WORDS, IMAGE_MAGIC_SIZE) >= 0 &&
				   memcmp(s->magic, "RLSNAP", 6) == 0;
			uint64_t h = s->lane[0];
			if (s->words) {
				s->bytes = 0;
				add_words(s, s->magic, IMAGE_MAGIC_SIZE);
			} else {
				for (int i = 0; i < IMAGE_MAGIC_SIZE; i++)
					h = (h ^ s->magic[i]) * FNV_PRIME;
				s->lane[0] = h;
			}
		}
	}
	if (n == 0)
		return;
	if (s->words) {
		add_words(s, p, n);
		return;
	}
	uint64_t h = s->lane[0];
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * FNV_PRIME;
	s->lane[0] = h;
	s->bytes += n;
}

uint64_t image_sum_end(const struct image_sum *s)
{
	if (!s->words) {
		/* FNV-1a of every byte, also of a piece shorter than a magic */
		uint64_t h = s->bytes < IMAGE_MAGIC_SIZE ? IMAGE_SUM_INIT : s->lane[0];
		for (uint64_t i = 0; s->bytes < IMAGE_MAGIC_SIZE && i < s->bytes; i++)
			h = (h ^ s->magic[i]) * FNV_PRIME;
		return h;
	}
	uint64_t lane[4] = {s->lane[0], s->lane[1], s->lane[2], s->lane[3]};
	if (s->bytes % 8 != 0) {
		uint8_t last[8] = {0};
		memcpy(last, s->part, s->bytes % 8);
		uint64_t k = s->bytes / 8 % 4;
		lane[k] = mix(lane[k], word_at(last));
	}
	uint64_t h = mix(IMAGE_SUM_INIT, s->bytes);
	for (int i = 0; i < 4; i++)
		h = mix(h, lane[i]);
	return h;
}

uint64_t image_sum_words_of(const void *p, size_t n)
{
	struct image_sum s;
	image_sum_begin(&s);
	image_sum_add(&s, IMAGE_MAGIC_WORDS, IMAGE_MAGIC_SIZE);
	image_sum_add(&s, p, n);
	return image_sum_end(&s);
}

uint64_t image_sum_of(const void *p, size_t n)
{
	struct image_sum s;
	image_sum_begin(&s);
	image_sum_add(&s, p, n);
	return image_sum_end(&s);
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
	       image_sum_of(image, n - IMAGE_SUM_SIZE) == image_sum_stored(image, n);
}
