/* test_grow.c: grow() makes room by doubling, keeps what the array held,
 * and leaves it as it was when it cannot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "grow.h"
#include "raftlock.h"

static void test_grows_from_null_by_doubling(void **state)
{
	(void)state;
	uint64_t *a = NULL;
	size_t cap = 0;
	assert_int_equal(grow(&a, &cap, 1, 4, sizeof *a), 0);
	assert_non_null(a);
	assert_int_equal(cap, 4);
	for (uint64_t i = 0; i < 4; i++)
		a[i] = i * 7;
	assert_int_equal(grow(&a, &cap, 4, 4, sizeof *a), 0); /* fits: unchanged */
	assert_int_equal(cap, 4);
	assert_int_equal(grow(&a, &cap, 9, 4, sizeof *a), 0);
	assert_int_equal(cap, 16);
	for (uint64_t i = 0; i < 4; i++)
		assert_int_equal(a[i], i * 7);
	free(a);
}

static void test_impossible_size_leaves_the_array(void **state)
{
	(void)state;
	uint8_t *b = NULL;
	size_t cap = 0;
	assert_int_equal(grow(&b, &cap, 10, 8, 1), 0);
	uint8_t *before = b;
	assert_int_equal(grow(&b, &cap, SIZE_MAX / 2, 8, 64), RAFTLOCK_ENOMEM);
	assert_ptr_equal(b, before);
	assert_int_equal(cap, 16);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grows_from_null_by_doubling),
		cmocka_unit_test(test_impossible_size_leaves_the_array),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
