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
	assert_int_equal(admission_enter(&a, x), ADMISSION_OPEN);
	assert_int_equal(admission_enter(&a, x), ADMISSION_OPEN);
	assert_int_equal(admission_enter(&a, x), ADMISSION_REFUSE); /* third from x */
	assert_int_equal(admission_enter(&a, y), ADMISSION_OPEN);   /* others unaffected */
	assert_int_equal(a.refused, 1);
	admission_leave(&a, x, ADMISSION_REFUSE); /* the refused one leaves: still full */
	assert_int_equal(admission_enter(&a, x), ADMISSION_REFUSE);
	admission_leave(&a, x, ADMISSION_REFUSE);
	admission_leave(&a, x, ADMISSION_OPEN);
	assert_int_equal(admission_enter(&a, x), ADMISSION_OPEN); /* room again */
	assert_int_equal(admission_enter(&a, 0), ADMISSION_OPEN); /* no key: never limited */
	admission_leave(&a, 0, ADMISSION_OPEN);
	admission_leave(&a, key4("192.0.2.9"), ADMISSION_OPEN); /* never entered: ignored */
	admission_close(&a);

	admission_init(&a, 0); /* no limit */
	for (int i = 0; i < 5000; i++)
		assert_int_equal(admission_enter(&a, x), ADMISSION_OPEN);
	assert_int_equal(a.refused, 0);
	admission_close(&a);
}

/* Past the limit, ADMISSION_MAX_REFUSING refusals from one address may be
 * being told at once; the next is dropped, counted nowhere but in
 * refused. Each refusal that ends makes room for one more, and an address
 * whose connections all left holds nothing. */
static void test_refusals_being_told_bounded(void **state)
{
	(void)state;
	struct admission a;
	admission_init(&a, 1);
	uint64_t x = key4("192.0.2.1"), y = key4("192.0.2.2");
	assert_int_equal(admission_enter(&a, x), ADMISSION_OPEN);
	for (int i = 0; i < ADMISSION_MAX_REFUSING; i++)
		assert_int_equal(admission_enter(&a, x), ADMISSION_REFUSE);
	for (int i = 0; i < 100; i++)
		assert_int_equal(admission_enter(&a, x), ADMISSION_DROP);
	assert_int_equal(a.refused, ADMISSION_MAX_REFUSING + 100);
	assert_int_equal(admission_enter(&a, y), ADMISSION_OPEN); /* others unaffected */
	assert_int_equal(admission_enter(&a, y), ADMISSION_REFUSE);

	admission_leave(&a, x, ADMISSION_DROP); /* holds nothing: changes nothing */
	assert_int_equal(admission_enter(&a, x), ADMISSION_DROP);
	admission_leave(&a, x, ADMISSION_REFUSE);
	assert_int_equal(admission_enter(&a, x), ADMISSION_REFUSE);
	assert_int_equal(admission_enter(&a, x), ADMISSION_DROP);

	for (int i = 0; i < ADMISSION_MAX_REFUSING; i++)
		admission_leave(&a, x, ADMISSION_REFUSE);
	admission_leave(&a, x, ADMISSION_OPEN);
	admission_leave(&a, y, ADMISSION_REFUSE);
	admission_leave(&a, y, ADMISSION_OPEN);
	assert_int_equal(a.counts.len, 0);
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
		cmocka_unit_test(test_refusals_being_told_bounded),
		cmocka_unit_test(test_frame_clock),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
