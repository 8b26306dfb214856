/* test_client_keepalive.c: how the keepalive thread splits a round into
 * requests, and how long it lets each go unanswered (keepalive.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "keepalive.h"
#include "raftlock.h"

static void test_chunks_name_every_session_once(void **state)
{
	(void)state;
	const size_t ns[] = {1,
			     2,
			     KEEPALIVE_CHUNK - 1,
			     KEEPALIVE_CHUNK,
			     KEEPALIVE_CHUNK + 1,
			     2 * KEEPALIVE_CHUNK + 7,
			     100000,
			     RAFTLOCK_KEEPALIVE_MAX + 3};
	assert_int_equal(keepalive_chunks(0), 0);
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		size_t n = ns[i], chunks = keepalive_chunks(n), sum = 0;
		size_t lo = SIZE_MAX, hi = 0;
		assert_int_equal(chunks, (n + KEEPALIVE_CHUNK - 1) / KEEPALIVE_CHUNK);
		for (size_t k = 0; k < chunks; k++) {
			size_t len = keepalive_chunk_len(n, k);
			sum += len;
			lo = len < lo ? len : lo;
			hi = len > hi ? len : hi;
		}
		assert_int_equal(sum, n);
		assert_true(lo >= 1);
		assert_true(hi <= KEEPALIVE_CHUNK);
		assert_true(hi - lo <= 1); /* no tiny last request */
	}
}

static void test_chunk_fits_what_the_server_accepts(void **state)
{
	(void)state;
	assert_true(KEEPALIVE_CHUNK <= RAFTLOCK_KEEPALIVE_MAX);
}

/* TTL 10 s: keepalives every 3333 ms, half of it for a small request. */
static void test_suspect_grows_with_the_sessions_ahead(void **state)
{
	(void)state;
	unsigned base = keepalive_suspect_ms(3333, 0);
	assert_int_equal(base, 1666);
	assert_int_equal(keepalive_suspect_ms(3333, KEEPALIVE_CHUNK),
			 base + KEEPALIVE_CHUNK / KEEPALIVE_SUSPECT_IDS_PER_MS);
	unsigned last = base;
	for (size_t ids = 0; ids <= 1000000; ids += 997) {
		unsigned t = keepalive_suspect_ms(3333, ids);
		assert_true(t >= last);
		last = t;
	}
}

/* A dead node is still left before the next round is due. */
static void test_suspect_never_above_an_interval(void **state)
{
	(void)state;
	assert_int_equal(keepalive_suspect_ms(3333, 100000000), 3333);
	assert_int_equal(keepalive_suspect_ms(200000, SIZE_MAX), 200000);
}

/* Short TTLs: never below the floor a healthy node needs, and the cap is
 * at least that floor too. */
static void test_suspect_floor(void **state)
{
	(void)state;
	assert_int_equal(keepalive_suspect_ms(333, 0), KEEPALIVE_SUSPECT_MIN_MS);
	assert_int_equal(keepalive_suspect_ms(333, 100000000), 333);
	assert_int_equal(keepalive_suspect_ms(100, 0), KEEPALIVE_SUSPECT_MIN_MS);
	assert_int_equal(keepalive_suspect_ms(100, 100000000), KEEPALIVE_SUSPECT_MIN_MS);
	assert_int_equal(keepalive_suspect_ms(0, 5), KEEPALIVE_SUSPECT_MIN_MS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chunks_name_every_session_once),
		cmocka_unit_test(test_chunk_fits_what_the_server_accepts),
		cmocka_unit_test(test_suspect_grows_with_the_sessions_ahead),
		cmocka_unit_test(test_suspect_never_above_an_interval),
		cmocka_unit_test(test_suspect_floor),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
