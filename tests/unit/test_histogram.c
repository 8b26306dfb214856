/* test_histogram.c: the fixed-bucket histograms of the metrics: which
 * bucket an observation lands in (bounds inclusive), cumulative counts as
 * Prometheus reads them, the sum, and both layouts increasing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "histogram.h"

#define US 1000ull
#define S 1000000000ull

static void bounds_are_inclusive(void **state)
{
	(void)state;
	struct histogram h;
	histogram_init(&h, &histogram_latency);
	histogram_observe(&h, 0);
	histogram_observe(&h, 100 * US);     /* on the first bound: first bucket */
	histogram_observe(&h, 100 * US + 1); /* just past it: the second */
	histogram_observe(&h, 10 * S);       /* the last bound */
	histogram_observe(&h, 3600 * S);     /* past every bound: +Inf */
	assert_int_equal(h.count, 5);
	assert_int_equal(h.bucket[0], 2);
	assert_int_equal(h.bucket[1], 1);
	assert_int_equal(h.bucket[histogram_latency.n - 1], 1);
	assert_int_equal(h.bucket[histogram_latency.n], 1);
	assert_int_equal(h.sum_ns, 0 + 100 * US + 100 * US + 1 + 10 * S + 3600 * S);
}

static void cumulative_counts(void **state)
{
	(void)state;
	struct histogram h;
	histogram_init(&h, &histogram_duration);
	for (uint64_t ms = 0; ms < 2000; ms++)
		histogram_observe(&h, ms * 1000000ull);
	/* 0..1 ms: 2; up to 10 ms: 11; 100 ms: 101; 500 ms: 501; 1 s: 1001 */
	assert_int_equal(histogram_cumulative(&h, 0), 2);
	assert_int_equal(histogram_cumulative(&h, 1), 11);
	assert_int_equal(histogram_cumulative(&h, 2), 101);
	assert_int_equal(histogram_cumulative(&h, 3), 501);
	assert_int_equal(histogram_cumulative(&h, 4), 1001);
	assert_int_equal(histogram_cumulative(&h, 5), 2000);
	assert_int_equal(histogram_cumulative(&h, histogram_duration.n), 2000);
	for (unsigned i = 1; i <= histogram_duration.n; i++)
		assert_true(histogram_cumulative(&h, i) >= histogram_cumulative(&h, i - 1));
}

static void layouts_increase(void **state)
{
	(void)state;
	const struct histogram_layout *all[] = {&histogram_latency, &histogram_duration};
	for (size_t k = 0; k < 2; k++) {
		assert_true(all[k]->n > 0 && all[k]->n <= HISTOGRAM_MAX_BOUNDS);
		for (unsigned i = 1; i < all[k]->n; i++)
			assert_true(all[k]->bound_ns[i] > all[k]->bound_ns[i - 1]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bounds_are_inclusive),
		cmocka_unit_test(cumulative_counts),
		cmocka_unit_test(layouts_increase),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
