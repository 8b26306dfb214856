/* test_client_errors.c: raftlock_strerror() and raftlock_errmsg() against the RAFTLOCK_ERRORS
 * table. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "raftlock.h"

static const int codes[] = {
#define ERROR_CODE(name, value, message) RAFTLOCK_##name,
	RAFTLOCK_ERRORS(ERROR_CODE)
#undef ERROR_CODE
};

#define N_CODES (sizeof codes / sizeof codes[0])

static void test_every_code_has_its_own_message(void **state)
{
	for (size_t i = 0; i < N_CODES; i++) {
		const char *msg = raftlock_strerror(codes[i]);
		assert_non_null(msg);
		assert_true(msg[0] != '\0');
		assert_string_not_equal(msg, "unknown error");
		assert_string_not_equal(msg, "success");
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(msg, raftlock_strerror(codes[j]));
	}
}

static void test_codes_are_negative_and_unique(void **state)
{
	for (size_t i = 0; i < N_CODES; i++) {
		assert_true(codes[i] < 0);
		for (size_t j = 0; j < i; j++)
			assert_int_not_equal(codes[i], codes[j]);
	}
}

/* Wire values: an error code is never renumbered. */
static void test_codes_are_stable(void **state)
{
	assert_int_equal(RAFTLOCK_EINVAL, -1);
	assert_int_equal(RAFTLOCK_ENOTLEADER, -5);
	assert_int_equal(RAFTLOCK_ESESSION, -7);
	assert_int_equal(RAFTLOCK_EUNKNOWN, -14);
	assert_int_equal(RAFTLOCK_EDATA, -23);
	assert_int_equal(RAFTLOCK_EOVERLOAD, -24);
	assert_int_equal(RAFTLOCK_EPERM, -25);
	assert_int_equal(RAFTLOCK_ETLS, -26);
	assert_int_equal(RAFTLOCK_ENOSPC, -27);
}

static void test_errmsg_without_error(void **state)
{
	assert_string_equal(raftlock_errmsg(NULL), "no error");
}

static void test_success(void **state)
{
	assert_int_equal(RAFTLOCK_OK, 0);
	assert_string_equal(raftlock_strerror(0), "success");
}

static void test_unknown_codes(void **state)
{
	int lowest = 0;
	for (size_t i = 0; i < N_CODES; i++)
		if (codes[i] < lowest)
			lowest = codes[i];
	const int unknown[] = {lowest - 1, 1, 12345, INT_MIN, INT_MAX};
	for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
		assert_string_equal(raftlock_strerror(unknown[i]), "unknown error");
}

/* Every watch event kind has a name of its own (the CLI prints them). */
static void test_watch_kind_names(void **state)
{
	const char *seen[RAFTLOCK_WATCH_ERROR + 1] = {0};
	for (int k = RAFTLOCK_WATCH_GRANTED; k <= RAFTLOCK_WATCH_ERROR; k++) {
		const char *name = raftlock_watch_kind_name((enum raftlock_watch_kind)k);
		assert_string_not_equal(name, "unknown");
		for (int j = RAFTLOCK_WATCH_GRANTED; j < k; j++)
			assert_string_not_equal(name, seen[j]);
		seen[k] = name;
	}
	assert_string_equal(raftlock_watch_kind_name(RAFTLOCK_WATCH_PROCLAIMED), "proclaimed");
	assert_string_equal(raftlock_watch_kind_name((enum raftlock_watch_kind)0), "unknown");
	assert_string_equal(raftlock_watch_kind_name((enum raftlock_watch_kind)13), "unknown");
}

/* Positions at their bounds: UINT64_MAX is an index as any other, one
 * past it is refused rather than taken for it (and so for the offset). */
static void test_position_parse_bounds(void **state)
{
	(void)state;
	struct raftlock_position p = {0};
	assert_int_equal(raftlock_position_parse("18446744073709551615", &p), 0);
	assert_true(p.index == UINT64_MAX);
	assert_int_equal(p.offset, RAFTLOCK_WATCH_OFFSET_END);
	/* the cluster, as the CLI prints it: 16 hex digits at most */
	assert_int_equal(raftlock_position_parse("7.2@ffffffffffffffff", &p), 0);
	assert_true(p.index == 7 && p.offset == 2 && p.cluster_id == UINT64_MAX);
	assert_int_equal(raftlock_position_parse("7@00000000000000A1", &p), 0);
	assert_true(p.offset == RAFTLOCK_WATCH_OFFSET_END && p.cluster_id == 0xa1);
	assert_int_equal(raftlock_position_parse("7.4294967295", &p), 0);
	assert_true(p.index == 7 && p.offset == RAFTLOCK_WATCH_OFFSET_END && p.cluster_id == 0);
	p.cluster_id = 5;
	const char *refused[] = {"18446744073709551616",
				 "18446744073709551616.1",
				 "7.4294967296",
				 "7.18446744073709551616",
				 "-1",
				 "7.-1",
				 "7.1x",
				 "7@",
				 "7.1@",
				 "7@10000000000000000",
				 "7@-1",
				 "7@0x1",
				 "7@1 ",
				 "7@1@1"};
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		assert_int_equal(raftlock_position_parse(refused[i], &p), RAFTLOCK_EINVAL);
		/* unchanged */
		assert_true(p.index == 7 && p.offset == RAFTLOCK_WATCH_OFFSET_END &&
			    p.cluster_id == 5);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_code_has_its_own_message),
		cmocka_unit_test(test_position_parse_bounds),
		cmocka_unit_test(test_codes_are_negative_and_unique),
		cmocka_unit_test(test_codes_are_stable),
		cmocka_unit_test(test_errmsg_without_error),
		cmocka_unit_test(test_success),
		cmocka_unit_test(test_unknown_codes),
		cmocka_unit_test(test_watch_kind_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
