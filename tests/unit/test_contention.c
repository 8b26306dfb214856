/* test_contention.c: the most contended lock name prefixes: what a prefix
 * is, that a heavy prefix stays on top among a thousand others while the
 * table stays at its fixed size, and that counts age out window by
 * window. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "contention.h"

static struct contention c;

static void prefixes(void **state)
{
	(void)state;
	char p[CONTENTION_PREFIX_MAX + 1];
	contention_prefix("db/migrate", p);
	assert_string_equal(p, "db");
	contention_prefix("a/b/c", p);
	assert_string_equal(p, "a");
	contention_prefix("plain", p);
	assert_string_equal(p, "plain");
	contention_prefix("/rooted", p);
	assert_string_equal(p, "");
	char name[200];
	memset(name, 'x', sizeof name);
	name[sizeof name - 1] = '\0';
	contention_prefix(name, p);
	assert_int_equal(strlen(p), CONTENTION_PREFIX_MAX);
	/* A two-byte UTF-8 character across the cut is left out whole. */
	memset(name, 'x', sizeof name);
	name[CONTENTION_PREFIX_MAX - 1] = (char)0xC3;
	name[CONTENTION_PREFIX_MAX] = (char)0xA9;
	name[sizeof name - 1] = '\0';
	contention_prefix(name, p);
	assert_int_equal(strlen(p), CONTENTION_PREFIX_MAX - 1);
}

static void heavy_prefix_stays_on_top(void **state)
{
	(void)state;
	contention_init(&c);
	char name[64];
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof name, "job-%d/x", i);
		contention_count(&c, name, 1000);
		if (i % 4 == 0)
			contention_count(&c, "hot/lock-7", 1000);
		if (i % 10 == 0)
			contention_count(&c, "warm/a", 1000);
	}
	assert_true(c.cur.n <= CONTENTION_SLOTS);
	struct contention_entry top[10];
	size_t n = contention_top(&c, 1000, top, 10);
	assert_int_equal(n, 10);
	assert_string_equal(top[0].prefix, "hot");
	assert_true(top[0].count >= 250);
	assert_true(top[0].count - top[0].error <= 250); /* the guaranteed part */
	assert_string_equal(top[1].prefix, "warm");
	for (size_t i = 1; i < n; i++)
		assert_true(top[i].count <= top[i - 1].count);
}

static void windows_age_out(void **state)
{
	(void)state;
	contention_init(&c);
	const uint64_t t0 = 5000, w = CONTENTION_WINDOW_MS;
	for (int i = 0; i < 3; i++)
		contention_count(&c, "old/x", t0);
	struct contention_entry top[4];
	assert_int_equal(contention_top(&c, t0 + w / 2, top, 4), 1);
	assert_int_equal(top[0].count, 3);
	/* One window on: still read, as the previous window. */
	contention_count(&c, "new/y", t0 + w + 1);
	assert_int_equal(contention_top(&c, t0 + w + 1, top, 4), 2);
	assert_string_equal(top[0].prefix, "old");
	/* Two windows on, nothing counted since: all gone. */
	assert_int_equal(contention_top(&c, t0 + 3 * w + 1, top, 4), 0);
	/* Counting late drops the old ones, merging what both windows hold. */
	contention_count(&c, "new/z", t0 + 2 * w + 2);
	assert_int_equal(contention_top(&c, t0 + 2 * w + 2, top, 4), 1);
	assert_string_equal(top[0].prefix, "new");
	assert_int_equal(top[0].count, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(prefixes),
		cmocka_unit_test(heavy_prefix_stays_on_top),
		cmocka_unit_test(windows_age_out),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
