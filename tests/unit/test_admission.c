/* test_admission: the per-address connection count and the frame clock of
 * server/admission.c, without sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <netinet/in.h>

#include "admission.h"

static uint64_t key4(const char *ip)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	assert_int_equal(inet_pton(AF_INET, ip, &a.sin_addr), 1);
	return admission_key((struct sockaddr *)&a);
}

static uint64_t key6(const char *ip)
{
	struct sockaddr_in6 a = {.sin6_family = AF_INET6};
	assert_int_equal(inet_pton(AF_INET6, ip, &a.sin6_addr), 1);
	return admission_key((struct sockaddr *)&a);
}

static void test_keys(void **state)
{
	(void)state;
	assert_int_not_equal(key4("127.0.0.1"), 0);
	assert_int_equal(key4("10.1.2.3"), key6("::ffff:10.1.2.3")); /* one host */
	assert_int_not_equal(key4("10.1.2.3"), key4("10.1.2.4"));
	assert_int_not_equal(key6("::1"), key6("::2"));
	struct sockaddr other = {.sa_family = AF_UNIX};
	assert_int_equal(admission_key(&other), 0);
}

static void test_limit_per_address(void **state)
{
	(void)state;
	struct admission a;
	admission_init(&a, 2);
	uint64_t x = key4("192.0.2.1"), y = key4("192.0.2.2");
	assert_true(admission_enter(&a, x));
	assert_true(admission_enter(&a, x));
	assert_false(admission_enter(&a, x)); /* third from x */
	assert_true(admission_enter(&a, y));  /* others unaffected */
	assert_int_equal(a.refused, 1);
	admission_leave(&a, x);
	assert_true(admission_enter(&a, x)); /* room again */
	assert_true(admission_enter(&a, 0)); /* no key: never limited */
	admission_leave(&a, 0);
	admission_leave(&a, key4("192.0.2.9")); /* never entered: ignored */
	admission_close(&a);

	admission_init(&a, 0); /* no limit */
	for (int i = 0; i < 5000; i++)
		assert_true(admission_enter(&a, x));
	assert_int_equal(a.refused, 0);
	admission_close(&a);
}

static void test_frame_clock(void **state)
{
	(void)state;
	assert_false(admission_frame_overdue(0, 100000, 300)); /* between frames */
	assert_false(admission_frame_overdue(1000, 1299, 300));
	assert_true(admission_frame_overdue(1000, 1300, 300));
	assert_false(admission_frame_overdue(1000, 999999, 0)); /* no limit */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keys),
		cmocka_unit_test(test_limit_per_address),
		cmocka_unit_test(test_frame_clock),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
