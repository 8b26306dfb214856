/* test_return_hold.c: when the leader's next entry waits for the callers
 * its last entry answered (server/return_hold.c), on a clock the test
 * moves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "return_hold.h"

/* A hold armed at `now` for the given sessions. */
static void arm(struct return_hold *h, uint64_t now, const uint64_t *sessions, size_t n)
{
	return_hold_begin(h);
	for (size_t i = 0; i < n; i++)
		return_hold_expect(h, sessions[i]);
	return_hold_arm(h, now);
}

/* Waits until three in four of the sessions answered call again; other
 * sessions' calls, a session's second call and session 0 do not count;
 * the wake-up is when the hold would end. */
static void test_waits_for_the_callers_answered(void **state)
{
	(void)state;
	struct return_hold h;
	return_hold_init(&h);
	arm(&h, 100, (uint64_t[]){4, 1, 3, 2, 0}, 5);
	uint64_t wake = 0;
	return_hold_note_call(&h, 99);
	assert_true(return_hold_waits(&h, 100, &wake));
	assert_int_equal(wake, RETURN_HOLD_MS);
	return_hold_note_call(&h, 1);
	return_hold_note_call(&h, 1);
	return_hold_note_call(&h, 2);
	assert_true(return_hold_waits(&h, 101, &wake)); /* 2 of 4 */
	assert_int_equal(wake, RETURN_HOLD_MS - 1);
	return_hold_note_call(&h, 4);
	assert_false(return_hold_waits(&h, 101, &wake)); /* 3 of 4 */
	assert_int_equal(h.filled, 1);
	assert_int_equal(h.expired, 0);
	assert_false(return_hold_waits(&h, 101, &wake)); /* ended */
	return_hold_free(&h);
}

/* A session's pipelined calls answered in one entry count once. */
static void test_one_session_counts_once(void **state)
{
	(void)state;
	struct return_hold h;
	return_hold_init(&h);
	arm(&h, 0, (uint64_t[]){7, 7, 7, 8}, 4);
	uint64_t wake;
	return_hold_note_call(&h, 7);
	assert_true(return_hold_waits(&h, 0, &wake)); /* 1 of 2 */
	return_hold_note_call(&h, 8);
	assert_false(return_hold_waits(&h, 0, &wake));
	return_hold_free(&h);
}

/* A wait that ends by time skips the next 1, 2, 4 ... 64 holds (holds of
 * entries that answered calls, not every entry); one that ends with the
 * callers back halves the count. */
static void test_expired_holds_back_off(void **state)
{
	(void)state;
	struct return_hold h;
	return_hold_init(&h);
	uint64_t now = 0, wake;
	unsigned want = 1;
	for (unsigned round = 0; round < 9; round++) {
		arm(&h, now, (uint64_t[]){5}, 1);
		assert_true(return_hold_waits(&h, now, &wake));
		now += RETURN_HOLD_MS;
		assert_false(return_hold_waits(&h, now, &wake));
		assert_int_equal(h.expired, round + 1);
		assert_int_equal(h.backoff, want);
		assert_int_equal(h.skip, want);
		for (unsigned i = 0; i < want; i++) {
			arm(&h, now, NULL, 0); /* answered no call: skips nothing */
			assert_int_equal(h.skip, want - i);
			arm(&h, now, (uint64_t[]){5}, 1);
			assert_false(return_hold_waits(&h, now, &wake)); /* skipped */
		}
		want = want * 2 > RETURN_HOLD_SKIP_MAX ? RETURN_HOLD_SKIP_MAX : want * 2;
	}
	assert_int_equal(h.backoff, RETURN_HOLD_SKIP_MAX);
	arm(&h, now, (uint64_t[]){5}, 1);
	assert_true(return_hold_waits(&h, now, &wake));
	return_hold_note_call(&h, 5);
	assert_false(return_hold_waits(&h, now, &wake));
	assert_int_equal(h.filled, 1);
	assert_int_equal(h.backoff, RETURN_HOLD_SKIP_MAX / 2);
	assert_int_equal(h.skip, 0);
	return_hold_free(&h);
}

/* A hold in which no batch waited counts neither way: a batch that comes
 * after it ended goes at once, and the back-off does not move. */
static void test_no_wait_no_count(void **state)
{
	(void)state;
	struct return_hold h;
	return_hold_init(&h);
	uint64_t wake;
	arm(&h, 10, (uint64_t[]){5}, 1);
	assert_false(return_hold_waits(&h, 10 + RETURN_HOLD_MS, &wake));
	arm(&h, 20, (uint64_t[]){5}, 1);
	return_hold_note_call(&h, 5);
	assert_false(return_hold_waits(&h, 20, &wake));
	assert_int_equal(h.filled, 0);
	assert_int_equal(h.expired, 0);
	assert_int_equal(h.backoff, 0);
	return_hold_free(&h);
}

/* A new leadership starts with no hold and nothing to skip. */
static void test_reset(void **state)
{
	(void)state;
	struct return_hold h;
	return_hold_init(&h);
	uint64_t wake;
	arm(&h, 0, (uint64_t[]){5}, 1);
	assert_true(return_hold_waits(&h, 0, &wake));
	assert_false(return_hold_waits(&h, RETURN_HOLD_MS, &wake));
	assert_int_equal(h.skip, 1);
	arm(&h, 10, (uint64_t[]){5}, 1);
	return_hold_reset(&h);
	assert_false(return_hold_waits(&h, 10, &wake));
	assert_int_equal(h.skip, 0);
	assert_int_equal(h.backoff, 0);
	arm(&h, 20, (uint64_t[]){5}, 1); /* not skipped */
	assert_true(return_hold_waits(&h, 20, &wake));
	return_hold_free(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_waits_for_the_callers_answered),
		cmocka_unit_test(test_one_session_counts_once),
		cmocka_unit_test(test_expired_holds_back_off),
		cmocka_unit_test(test_no_wait_no_count),
		cmocka_unit_test(test_reset),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
