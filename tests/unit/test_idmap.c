/* test_idmap.c: the id map against a plain array that says what it must
 * hold, through growth and deletions that shift probe runs back, with a
 * caller-defined value type. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "idmap.h"

#define KEYS 5000

/* A value of an odd size, to check the stride and alignment. */
struct value {
	uint64_t times3;
	const uint64_t *ptr;
	uint8_t tag;
};

/* Every key of keys[0..n) is present with its value; no other key is. */
static void check_holds(struct idmap *m, const uint64_t *keys, const bool *present, size_t n)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		struct value *v = idmap_get(m, keys[i]);
		if (present[i]) {
			assert_non_null(v);
			assert_int_equal((uintptr_t)v % 8, 0);
			assert_int_equal(v->times3, keys[i] * 3);
			assert_ptr_equal(v->ptr, &keys[i]);
			assert_int_equal(v->tag, (uint8_t)keys[i]);
			len++;
		} else {
			assert_null(v);
		}
	}
	assert_int_equal(m->len, len);
	/* iteration visits each present key once, with its value */
	size_t seen = 0, pos = 0;
	uint64_t key;
	struct value *v;
	while ((v = idmap_next(m, &pos, &key)) != NULL) {
		assert_int_equal(v->times3, key * 3);
		seen++;
	}
	assert_int_equal(seen, len);
}

static void test_put_get_del(void **state)
{
	(void)state;
	static uint64_t keys[KEYS];
	static bool present[KEYS];
	struct idmap m;
	idmap_init(&m, sizeof(struct value));
	assert_null(idmap_get(&m, 1));
	assert_null(idmap_get(&m, 0));
	/* sequential ids (as session ids are) and scattered ones */
	for (size_t i = 0; i < KEYS; i++)
		keys[i] = i % 2 ? i + 1 : (i + 1) * 0x100000001ull;
	for (size_t i = 0; i < KEYS; i++) {
		struct value *v = idmap_put(&m, keys[i]);
		assert_non_null(v);
		assert_int_equal(v->times3, 0); /* inserted zeroed */
		assert_null(v->ptr);
		*v = (struct value){keys[i] * 3, &keys[i], (uint8_t)keys[i]};
		present[i] = true;
	}
	check_holds(&m, keys, present, KEYS);
	/* a second put finds the value */
	assert_int_equal(((struct value *)idmap_put(&m, keys[7]))->times3, keys[7] * 3);
	assert_int_equal(m.len, KEYS);
	/* deleting every third key keeps every other one reachable */
	for (size_t i = 0; i < KEYS; i += 3) {
		idmap_del(&m, keys[i]);
		present[i] = false;
	}
	idmap_del(&m, 999999999); /* absent: nothing happens */
	check_holds(&m, keys, present, KEYS);
	/* a deleted key put again comes back zeroed */
	struct value *v = idmap_put(&m, keys[0]);
	assert_non_null(v);
	assert_int_equal(v->times3, 0);
	idmap_del(&m, keys[0]);
	idmap_clear(&m);
	for (size_t i = 0; i < KEYS; i++)
		present[i] = false;
	check_holds(&m, keys, present, KEYS);
	idmap_close(&m);
}

/* A value size of 0 makes a set of ids. */
static void test_set(void **state)
{
	(void)state;
	struct idmap m;
	idmap_init(&m, 0);
	for (uint64_t k = 1; k <= 300; k++)
		assert_non_null(idmap_put(&m, k));
	for (uint64_t k = 1; k <= 300; k += 2)
		idmap_del(&m, k);
	for (uint64_t k = 1; k <= 300; k++)
		assert_true((idmap_get(&m, k) != NULL) == (k % 2 == 0));
	assert_int_equal(m.len, 150);
	idmap_close(&m);
}

/* Random puts and deletes at every fill up to 3/4 of capacities that are
 * no power of two: deletions shift runs back across the end of the table
 * (ids chosen to land in its last slots), and every step is checked. */
static void test_churn_any_capacity(void **state)
{
	(void)state;
	enum { IDS = 3000, STEPS = 60000 };
	static uint64_t keys[IDS];
	static bool present[IDS];
	struct idmap m;
	idmap_init(&m, sizeof(struct value));
	srand(7);
	for (size_t i = 0; i < IDS; i++)
		keys[i] = ((uint64_t)rand() << 31 ^ (uint64_t)rand()) | 1;
	size_t caps_seen = 0, last_cap = 0, wrapped = 0;
	for (size_t step = 0; step < STEPS; step++) {
		size_t i = (size_t)rand() % IDS;
		if (present[i] && rand() % 3 != 0) {
			idmap_del(&m, keys[i]);
			present[i] = false;
		} else if (!present[i]) {
			struct value *v = idmap_put(&m, keys[i]);
			assert_non_null(v);
			*v = (struct value){keys[i] * 3, &keys[i], (uint8_t)keys[i]};
			present[i] = true;
		}
		assert_true(m.len * 4 <= m.cap * 3); /* never fuller than 3/4 */
		if (m.cap != last_cap) {
			/* grows by half, from 64 */
			assert_int_equal(m.cap, last_cap ? last_cap + last_cap / 2 : 64);
			last_cap = m.cap;
			caps_seen++;
		}
		/* a run across the end of the table: its last and first slots taken */
		uint64_t k0, kl;
		memcpy(&k0, m.slots, sizeof k0);
		memcpy(&kl, m.slots + (m.cap - 1) * m.stride, sizeof kl);
		wrapped += k0 != 0 && kl != 0;
		if (step % 997 == 0)
			check_holds(&m, keys, present, IDS);
	}
	check_holds(&m, keys, present, IDS);
	assert_true(caps_seen >= 5); /* 64, 96, 144, 216, ... */
	assert_true(wrapped > 0);
	idmap_close(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_get_del),
		cmocka_unit_test(test_set),
		cmocka_unit_test(test_churn_any_capacity),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
