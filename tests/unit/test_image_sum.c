/*
 * test_image_sum.c: the image checksum (proto/image.h): the byte-wise
 * FNV-1a of images before RLSNAP05 is unchanged, a sum fed in pieces
 * equals the sum of the whole at every split, and any damage to an
 * RLSNAP05 image changes its sum.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "image.h"

#define LEN 1000

static void fill(uint8_t *buf, size_t n, const char *magic)
{
	uint32_t x = 12345;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
	memcpy(buf, magic, IMAGE_MAGIC_SIZE);
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t in_two(const uint8_t *p, size_t n, size_t split)
{
	struct image_sum s;
	image_sum_begin(&s);
	image_sum_add(&s, p, split);
	image_sum_add(&s, p + split, n - split);
	return image_sum_end(&s);
}

/* Older images keep their sum: images and backups written before load. */
static void test_older_images_keep_fnv(void **state)
{
	(void)state;
	uint8_t buf[LEN];
	for (const char *const *m = (const char *const[]){"RLSNAP03", "RLSNAP04", NULL}; *m; m++) {
		fill(buf, sizeof buf, *m);
		assert_true(image_sum_of(buf, sizeof buf) == fnv1a(buf, sizeof buf));
		for (size_t split = 0; split <= 40; split++)
			assert_true(in_two(buf, sizeof buf, split) == fnv1a(buf, sizeof buf));
	}
	/* shorter than a magic */
	assert_true(image_sum_of(buf, 3) == fnv1a(buf, 3));
	assert_true(image_sum_of(buf, 0) == 0xcbf29ce484222325ull);
}

/* The client sums a backup as its chunks arrive: the same at any split,
 * in any number of pieces. */
static void test_pieces_equal_the_whole(void **state)
{
	(void)state;
	uint8_t buf[LEN];
	fill(buf, sizeof buf, IMAGE_MAGIC_WORDS);
	for (size_t n = 0; n <= 80; n++) {
		uint64_t whole = image_sum_of(buf, n);
		for (size_t split = 0; split <= n; split++)
			assert_true(in_two(buf, n, split) == whole);
	}
	uint64_t whole = image_sum_of(buf, sizeof buf);
	for (size_t step = 1; step <= 37; step++) {
		struct image_sum s;
		image_sum_begin(&s);
		for (size_t at = 0; at < sizeof buf; at += step)
			image_sum_add(&s, buf + at,
				      at + step <= sizeof buf ? step : sizeof buf - at);
		assert_true(image_sum_end(&s) == whole);
	}
	assert_true(whole != fnv1a(buf, sizeof buf)); /* a sum of its own */
}

/* Every bit flipped, a byte cut off or added, two words swapped, or the
 * top bit flipped in two words of the same lane: the sum changes. */
static void test_damage_changes_the_sum(void **state)
{
	(void)state;
	uint8_t buf[LEN + 1];
	fill(buf, sizeof buf, IMAGE_MAGIC_WORDS);
	uint64_t sum = image_sum_of(buf, LEN);
	for (size_t i = 0; i < LEN; i++)
		for (int b = 0; b < 8; b++) {
			buf[i] ^= (uint8_t)(1u << b);
			assert_true(image_sum_of(buf, LEN) != sum);
			buf[i] ^= (uint8_t)(1u << b);
		}
	assert_true(image_sum_of(buf, LEN - 1) != sum);
	assert_true(image_sum_of(buf, LEN + 1) != sum);
	uint8_t copy[LEN];
	memcpy(copy, buf, LEN);
	memcpy(copy + 16, buf + 24, 8);
	memcpy(copy + 24, buf + 16, 8);
	assert_true(image_sum_of(copy, LEN) != sum);
	memcpy(copy, buf, LEN);
	copy[16 + 7] ^= 0x80; /* word 2 */
	copy[48 + 7] ^= 0x80; /* word 6: the same lane */
	assert_true(image_sum_of(copy, LEN) != sum);
	/* a zero byte added at the end is not the word's zero padding */
	uint8_t padded[LEN + 1];
	memcpy(padded, buf, LEN);
	padded[LEN] = 0;
	assert_true(image_sum_of(padded, LEN + 1) != image_sum_of(buf, LEN));
}

/* image_sum_ok checks the sum written big-endian at the end. */
static void test_sum_ok(void **state)
{
	(void)state;
	uint8_t buf[LEN];
	fill(buf, sizeof buf, IMAGE_MAGIC_WORDS);
	uint64_t h = image_sum_of(buf, LEN - IMAGE_SUM_SIZE);
	for (int i = IMAGE_SUM_SIZE - 1; i >= 0; i--, h >>= 8)
		buf[LEN - IMAGE_SUM_SIZE + (size_t)i] = (uint8_t)h;
	assert_true(image_sum_ok(buf, LEN));
	buf[100] ^= 1;
	assert_false(image_sum_ok(buf, LEN));
	buf[100] ^= 1;
	assert_false(image_sum_ok(buf, LEN - 1));
	assert_false(image_sum_ok(buf, IMAGE_MIN_SIZE - 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_older_images_keep_fnv),
		cmocka_unit_test(test_pieces_equal_the_whole),
		cmocka_unit_test(test_damage_changes_the_sum),
		cmocka_unit_test(test_sum_ok),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
