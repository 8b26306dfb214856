/* test_client_errors.c: every error code has its own message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "raftlock.h"

static const int codes[] = {
#define CODE(name, value, message) RAFTLOCK_##name,
	RAFTLOCK_ERRORS(CODE)
#undef CODE
};
#define N_CODES (sizeof codes / sizeof codes[0])

static void test_every_code_has_a_message(void **state)
{
	(void)state;
	assert_true(N_CODES >= 23);
	for (size_t i = 0; i < N_CODES; i++) {
		const char *m = raftlock_strerror(codes[i]);
		assert_non_null(m);
		assert_true(strlen(m) > 0);
		assert_string_not_equal(m, "unknown error");
		assert_string_not_equal(m, raftlock_strerror(RAFTLOCK_OK));
	}
}

static void test_messages_are_distinct(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_CODES; i++)
		for (size_t j = i + 1; j < N_CODES; j++) {
			assert_int_not_equal(codes[i], codes[j]);
			assert_string_not_equal(raftlock_strerror(codes[i]),
						raftlock_strerror(codes[j]));
		}
}

static void test_codes_are_negative_and_stable(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_CODES; i++)
		assert_true(codes[i] < 0);
	/* wire values: never renumbered */
	assert_int_equal(RAFTLOCK_EINVAL, -1);
	assert_int_equal(RAFTLOCK_ENOTLEADER, -5);
	assert_int_equal(RAFTLOCK_ESESSION, -7);
	assert_int_equal(RAFTLOCK_EUNKNOWN, -14);
	assert_int_equal(RAFTLOCK_EDATA, -23);
}

static void test_unknown_code(void **state)
{
	(void)state;
	assert_string_equal(raftlock_strerror(12345), "unknown error");
	assert_string_equal(raftlock_strerror(-999), "unknown error");
}

static void test_errmsg_without_error(void **state)
{
	(void)state;
	assert_string_equal(raftlock_errmsg(NULL), "no error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_code_has_a_message),
		cmocka_unit_test(test_messages_are_distinct),
		cmocka_unit_test(test_codes_are_negative_and_stable),
		cmocka_unit_test(test_unknown_code),
		cmocka_unit_test(test_errmsg_without_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
