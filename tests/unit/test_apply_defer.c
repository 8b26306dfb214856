/* test_apply_defer.c: server/apply_defer.c, a follower's applies held for
 * a loop turn. Held entries are copies (the caller's buffer may change at
 * once), applied by a drain in the order held with their own indexes and
 * bytes; they fall due only at the end of the turn after the one they came
 * in (a poll has come between), not at the end of their own; a bound of
 * entries or of bytes refuses the next one (the caller applies it
 * itself), and a drain makes room again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "apply_defer.h"

struct applied {
	uint64_t index[APPLY_DEFER_MAX_ENTRIES + 1];
	char text[APPLY_DEFER_MAX_ENTRIES + 1][16];
	size_t n;
};

static void record(void *arg, uint64_t index, const void *buf, size_t len)
{
	struct applied *a = arg;
	assert_true(len < sizeof a->text[0]);
	a->index[a->n] = index;
	memcpy(a->text[a->n], buf, len);
	a->text[a->n][len] = '\0';
	a->n++;
}

static void count(void *arg, uint64_t index, const void *buf, size_t len)
{
	(void)index, (void)buf, (void)len;
	(*(size_t *)arg)++;
}

static void test_held_copies_applied_in_order(void **state)
{
	(void)state;
	static struct apply_defer d;
	memset(&d, 0, sizeof d);
	char buf[8] = "first";
	assert_false(apply_defer_holding(&d));
	assert_true(apply_defer_hold(&d, 7, buf, strlen(buf)));
	strcpy(buf, "second"); /* raft's buffer is its own again */
	assert_true(apply_defer_hold(&d, 8, buf, strlen(buf)));
	assert_true(apply_defer_hold(&d, 9, "", 0));
	assert_true(apply_defer_holding(&d));
	struct applied a = {0};
	apply_defer_drain(&d, record, &a);
	assert_int_equal(a.n, 3);
	assert_int_equal(a.index[0], 7);
	assert_string_equal(a.text[0], "first");
	assert_int_equal(a.index[1], 8);
	assert_string_equal(a.text[1], "second");
	assert_int_equal(a.index[2], 9);
	assert_string_equal(a.text[2], "");
	assert_false(apply_defer_holding(&d));
	apply_defer_drain(&d, record, &a); /* nothing held: nothing applied */
	assert_int_equal(a.n, 3);
}

/* Held in a turn's poll: the check of that turn is too early (the write
 * raft issued is refused only on the next poll); the next turn's is due. */
static void test_due_after_one_more_poll(void **state)
{
	(void)state;
	static struct apply_defer d;
	memset(&d, 0, sizeof d);
	assert_false(apply_defer_turn(&d)); /* nothing held: never due */
	assert_true(apply_defer_hold(&d, 1, "a", 1));
	assert_false(apply_defer_turn(&d)); /* the turn it came in */
	assert_true(apply_defer_hold(&d, 2, "b", 1));
	assert_true(apply_defer_turn(&d)); /* one poll later: due, with the second */
	struct applied a = {0};
	apply_defer_drain(&d, record, &a);
	assert_int_equal(a.n, 2);
	/* the next one held counts from its own turn */
	assert_true(apply_defer_hold(&d, 3, "c", 1));
	assert_false(apply_defer_turn(&d));
	assert_true(apply_defer_turn(&d));
	apply_defer_drain(&d, record, &a);
	assert_int_equal(a.n, 3);
	assert_int_equal(a.index[2], 3);
}

static void test_bounds_refuse_until_drained(void **state)
{
	(void)state;
	static struct apply_defer d;
	memset(&d, 0, sizeof d);
	for (uint64_t i = 0; i < APPLY_DEFER_MAX_ENTRIES; i++)
		assert_true(apply_defer_hold(&d, i + 1, "x", 1));
	assert_false(apply_defer_hold(&d, 100, "y", 1));
	struct applied a = {0};
	apply_defer_drain(&d, record, &a);
	assert_int_equal(a.n, APPLY_DEFER_MAX_ENTRIES);
	assert_int_equal(a.index[APPLY_DEFER_MAX_ENTRIES - 1], APPLY_DEFER_MAX_ENTRIES);

	/* bytes: one entry of the whole bound fits, a byte more does not */
	static char big[APPLY_DEFER_MAX_BYTES + 1];
	assert_false(apply_defer_hold(&d, 1, big, sizeof big));
	assert_true(apply_defer_hold(&d, 1, big, APPLY_DEFER_MAX_BYTES));
	assert_false(apply_defer_hold(&d, 2, "z", 1));
	size_t n = 0;
	apply_defer_drain(&d, count, &n);
	assert_int_equal(n, 1);
	assert_true(apply_defer_hold(&d, 2, "z", 1)); /* room again */
	apply_defer_drain(&d, count, &n);
	assert_int_equal(n, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_held_copies_applied_in_order),
		cmocka_unit_test(test_due_after_one_more_poll),
		cmocka_unit_test(test_bounds_refuse_until_drained),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
