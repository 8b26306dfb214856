/* test_client_validity.c: the lease arithmetic of the client (DESIGN.md
 * rule 5) and its clocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "clock.h"
#include "raftlock.h"
#include "session.h"

static void test_margin_is_rate_times_ttl_plus_constant(void **state)
{
	(void)state;
	/* 10 s at 1%: 100 ms of drift + the constant */
	assert_int_equal(session_validity_ms(5000, 10000),
			 5000 + 10000 - 100 - RAFTLOCK_LEASE_MARGIN_MS);
	assert_int_equal(session_validity_ms(0, 1000), 1000 - 10 - RAFTLOCK_LEASE_MARGIN_MS);
	assert_int_equal(session_validity_ms(1, RAFTLOCK_TTL_MAX_MS),
			 1 + 600000 - 6000 - RAFTLOCK_LEASE_MARGIN_MS);
}

static void test_drift_rounds_up(void **state)
{
	(void)state;
	/* 1001 ms at 1% is 10.01 ms: the margin takes 11 */
	assert_int_equal(session_validity_ms(0, 1001), 1001 - 11 - RAFTLOCK_LEASE_MARGIN_MS);
}

static void test_validity_ends_before_the_server_lease(void **state)
{
	(void)state;
	for (unsigned ttl = RAFTLOCK_TTL_MIN_MS; ttl <= RAFTLOCK_TTL_MAX_MS; ttl += 997) {
		uint64_t v = session_validity_ms(1000000, ttl);
		/* the server's deadline is at least sent + ttl; even a client
		 * clock running 1% fast stays inside it */
		assert_true(v > 1000000);
		assert_true((v - 1000000) * 101 / 100 < ttl);
	}
}

static void test_margin_never_goes_below_send_time(void **state)
{
	(void)state;
	assert_int_equal(session_validity_ms(777, 40), 777);
	assert_int_equal(session_validity_ms(777, 0), 777);
}

static void test_now_is_boottime(void **state)
{
	(void)state;
	uint64_t a = clock_boot_ms();
	uint64_t n = raftlock_now_ms();
	uint64_t b = clock_boot_ms();
	assert_true(a <= n && n <= b);
	/* BOOTTIME counts suspend too, so it is never behind MONOTONIC */
	assert_true(clock_boot_ms() + 1 >= clock_mono_ms());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_margin_is_rate_times_ttl_plus_constant),
		cmocka_unit_test(test_drift_rounds_up),
		cmocka_unit_test(test_validity_ends_before_the_server_lease),
		cmocka_unit_test(test_margin_never_goes_below_send_time),
		cmocka_unit_test(test_now_is_boottime),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
