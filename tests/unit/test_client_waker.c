/*
 * test_client_waker.c: the callers a blocking try-lock or release parks
 * without the client lock (client/waker.c). Each waiter wakes when, and
 * only when, its own wake is sent; slots are distinct until they run out,
 * then shared without a lost wake-up; a wake that comes before the wait,
 * or between its two looks, is not lost. A lost wake-up hangs a waiter, which the test's timeout
 * reports.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "waker.h"

struct sleeper {
	struct waker *k;
	struct waiter w;
	pthread_t thread;
	int woke; /* atomic: set once waiter_wait returned */
};

static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;
	waiter_wait(s->k, &s->w);
	__atomic_store_n(&s->woke, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {0, ms * 1000000L};
	nanosleep(&ts, NULL);
}

/* Distinct slots while there are free ones; a released slot is reused. */
static void test_slots_distinct_then_shared(void **state)
{
	(void)state;
	static struct waker k;
	static struct waiter w[WAKER_SLOTS + 2];
	memset(&k, 0, sizeof k);
	for (unsigned i = 0; i < WAKER_SLOTS - 1; i++) {
		waiter_init(&k, &w[i]);
		assert_int_equal(w[i].slot, i);
	}
	/* all claimed: the rest share the last slot */
	waiter_init(&k, &w[WAKER_SLOTS - 1]);
	waiter_init(&k, &w[WAKER_SLOTS]);
	assert_int_equal(w[WAKER_SLOTS - 1].slot, WAKER_SLOTS - 1);
	assert_int_equal(w[WAKER_SLOTS].slot, WAKER_SLOTS - 1);
	waiter_fini(&k, &w[37]);
	waiter_init(&k, &w[WAKER_SLOTS + 1]);
	assert_int_equal(w[WAKER_SLOTS + 1].slot, 37);
	for (unsigned i = 0; i < WAKER_SLOTS + 2; i++)
		if (i != 37)
			waiter_fini(&k, &w[i]);
	for (unsigned i = 0; i < WAKER_WORDS; i++)
		assert_int_equal(k.busy[i], 0);
}

/* A wake sent before the waiter sleeps ends its wait at once. */
static void test_wake_before_wait(void **state)
{
	(void)state;
	struct waker k = {0};
	struct waiter w;
	waiter_init(&k, &w);
	struct wake_batch b = {0};
	wake_batch_add(&b, &w);
	wake_batch_send(&k, &b);
	waiter_wait(&k, &w); /* returns: done was set */
	waiter_fini(&k, &w);
	for (unsigned i = 0; i < WAKER_WORDS; i++)
		assert_int_equal(b.bits[i], 0); /* sent empties the batch */
}

static struct timespec mono_in(long ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += ms * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	return ts;
}

static long ms_since(const struct timespec *t0)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t0->tv_sec) * 1000L + (now.tv_nsec - t0->tv_nsec) / 1000000L;
}

/* A timed wait that nobody ends returns, not woken, once its CLOCK_MONOTONIC
 * time passed (not before); woken, it says so; re-armed, a waiter waits
 * again, and a wake sent before the re-arm does not end the new wait. */
static void test_timed_wait_and_rearm(void **state)
{
	(void)state;
	struct waker k = {0};
	struct waiter w;
	waiter_init(&k, &w);
	struct timespec t0 = mono_in(0), until = mono_in(30);
	assert_false(waiter_wait_until(&k, &w, &until));
	assert_true(ms_since(&t0) >= 30);
	struct wake_batch b = {0};
	wake_batch_add(&b, &w);
	wake_batch_send(&k, &b);
	until = mono_in(10000);
	t0 = mono_in(0);
	assert_true(waiter_wait_until(&k, &w, &until));
	assert_true(ms_since(&t0) < 5000);
	waiter_rearm(&w);
	until = mono_in(20);
	assert_false(waiter_wait_until(&k, &w, &until));
	waiter_fini(&k, &w);
}

/* One batch ends its waiters' waits and no other's (a waiter woken for
 * nothing, as the sharer of a slot, waits again), across several words,
 * the shared slot included. */
static void test_batch_wakes_only_its_own(void **state)
{
	(void)state;
	enum { N = 80 };
	static struct waker k;
	static struct sleeper s[N];
	static struct waiter filler[WAKER_SLOTS];
	memset(&k, 0, sizeof k);
	/* the last two sleepers share the last slot */
	for (unsigned i = 0; i < WAKER_SLOTS - 1 - (N - 2); i++)
		waiter_init(&k, &filler[i]);
	for (unsigned i = 0; i < N; i++) {
		s[i] = (struct sleeper){.k = &k};
		waiter_init(&k, &s[i].w);
		assert_int_equal(pthread_create(&s[i].thread, NULL, sleeper_main, &s[i]), 0);
	}
	assert_int_equal(s[N - 1].w.slot, WAKER_SLOTS - 1);
	assert_int_equal(s[N - 2].w.slot, WAKER_SLOTS - 1);
	sleep_ms(50); /* most are asleep now; the rest find done set */
	/* the even ones, the second sharer of the shared slot included */
	struct wake_batch b = {0};
	for (unsigned i = 0; i < N; i += 2)
		wake_batch_add(&b, &s[i].w);
	wake_batch_send(&k, &b);
	for (unsigned i = 0; i < N; i += 2)
		assert_int_equal(pthread_join(s[i].thread, NULL), 0);
	sleep_ms(50); /* a wrongly woken odd one would have returned by now */
	for (unsigned i = 1; i < N; i += 2)
		assert_int_equal(__atomic_load_n(&s[i].woke, __ATOMIC_ACQUIRE), 0);
	for (unsigned i = 1; i < N; i += 2)
		wake_batch_add(&b, &s[i].w);
	wake_batch_send(&k, &b);
	for (unsigned i = 1; i < N; i += 2)
		assert_int_equal(pthread_join(s[i].thread, NULL), 0);
	for (unsigned i = 0; i < N; i++)
		waiter_fini(&k, &s[i].w);
	for (unsigned i = 0; i < WAKER_SLOTS - 1 - (N - 2); i++)
		waiter_fini(&k, &filler[i]);
}

/* A wake that lands between the waiter's look at the word and its look
 * at done (the hook runs there, on the waiter's thread) is not lost: the
 * waiter sees done, or the word moved, and does not sleep for good. */
static struct waker between_k;

static void wake_between(struct waiter *w)
{
	waker_test_between = NULL; /* once */
	struct wake_batch b = {0};
	wake_batch_add(&b, w);
	wake_batch_send(&between_k, &b);
}

static void *between_main(void *arg)
{
	struct waiter *w = arg;
	waiter_wait(&between_k, w);
	return NULL;
}

static void test_wake_between_looks(void **state)
{
	(void)state;
	memset(&between_k, 0, sizeof between_k);
	struct waiter w;
	waiter_init(&between_k, &w);
	waker_test_between = wake_between;
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, between_main, &w), 0);
	/* a lost wake-up hangs here: the test's timeout reports it */
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_null(waker_test_between);
	waiter_fini(&between_k, &w);
}

/* Waits and wakes racing, slots reused at once: no wake-up is lost. */
struct racer {
	struct waker *k;
	struct waiter **post; /* where the waker finds it */
	unsigned rounds;
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	for (unsigned i = 0; i < r->rounds; i++) {
		struct waiter w;
		waiter_init(r->k, &w);
		__atomic_store_n(r->post, &w, __ATOMIC_RELEASE);
		waiter_wait(r->k, &w);
		waiter_fini(r->k, &w);
	}
	return NULL;
}

static void test_no_lost_wakeup(void **state)
{
	(void)state;
	enum { THREADS = 8, ROUNDS = 2000 };
	static struct waker k;
	memset(&k, 0, sizeof k);
	struct waiter *posted[THREADS] = {0};
	struct racer r[THREADS];
	pthread_t th[THREADS];
	for (unsigned i = 0; i < THREADS; i++) {
		r[i] = (struct racer){.k = &k, .post = &posted[i], .rounds = ROUNDS};
		assert_int_equal(pthread_create(&th[i], NULL, racer_main, &r[i]), 0);
	}
	unsigned woken = 0;
	while (woken < THREADS * ROUNDS) {
		struct wake_batch b = {0};
		unsigned n = 0;
		for (unsigned i = 0; i < THREADS; i++) {
			struct waiter *w = __atomic_exchange_n(&posted[i], NULL, __ATOMIC_ACQUIRE);
			if (w != NULL) {
				wake_batch_add(&b, w);
				n++;
			}
		}
		wake_batch_send(&k, &b);
		woken += n;
	}
	for (unsigned i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slots_distinct_then_shared),
		cmocka_unit_test(test_wake_before_wait),
		cmocka_unit_test(test_wake_between_looks),
		cmocka_unit_test(test_batch_wakes_only_its_own),
		cmocka_unit_test(test_timed_wait_and_rearm),
		cmocka_unit_test(test_no_lost_wakeup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
