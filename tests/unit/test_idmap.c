/* test_idmap.c: the id map against a plain array that says what it must
 * hold, through growth and deletions that shift probe runs back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "idmap.h"

#define KEYS 5000

/* Every key of keys[0..n) is present with its value; no other key is. */
static void check_holds(struct idmap *m, const uint64_t *keys, const bool *present, size_t n)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		struct idmap_slot *s = idmap_get(m, keys[i]);
		if (present[i]) {
			assert_non_null(s);
			assert_int_equal(s->a, keys[i] * 3);
			assert_ptr_equal(s->ptr, &keys[i]);
			len++;
		} else {
			assert_null(s);
		}
	}
	assert_int_equal(m->len, len);
}

static void test_put_get_del(void **state)
{
	(void)state;
	static uint64_t keys[KEYS];
	static bool present[KEYS];
	struct idmap m;
	idmap_init(&m);
	assert_null(idmap_get(&m, 1));
	/* sequential ids (as session ids are) and scattered ones */
	for (size_t i = 0; i < KEYS; i++)
		keys[i] = i % 2 ? i + 1 : (i + 1) * 0x100000001ull;
	for (size_t i = 0; i < KEYS; i++) {
		struct idmap_slot *s = idmap_put(&m, keys[i]);
		assert_non_null(s);
		assert_int_equal(s->a, 0);
		s->a = keys[i] * 3;
		s->ptr = &keys[i];
		present[i] = true;
	}
	check_holds(&m, keys, present, KEYS);
	/* a second put finds the slot, with its value */
	assert_int_equal(idmap_put(&m, keys[7])->a, keys[7] * 3);
	assert_int_equal(m.len, KEYS);
	/* deleting every third key keeps every other one reachable */
	for (size_t i = 0; i < KEYS; i += 3) {
		idmap_del(&m, keys[i]);
		present[i] = false;
	}
	idmap_del(&m, 999999999); /* absent: nothing happens */
	check_holds(&m, keys, present, KEYS);
	idmap_clear(&m);
	for (size_t i = 0; i < KEYS; i++)
		present[i] = false;
	check_holds(&m, keys, present, KEYS);
	idmap_close(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_get_del),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
