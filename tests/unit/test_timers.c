/* test_timers.c: the leader's ordered deadlines against a plain array that
 * says which timers exist and when each is due, through random sets, drops,
 * proposals and resets; and 100,000 timers dropped one by one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "timers.h"

#define MODEL 600

struct model {
	bool present;
	enum timer_kind kind;
	char name[16];
	uint64_t session, seq, deadline, due;
};

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Model slot i: lock-delays of names "lock-<i>" below MODEL/3, waits
 * (session i % 7 + 1, seq i) above, so that sessions repeat. */
static void identity(struct model *m, size_t i)
{
	m->kind = i < MODEL / 3 ? TIMER_LOCK_DELAY : TIMER_WAIT;
	snprintf(m->name, sizeof m->name, "lock-%zu", i % 50);
	if (m->kind == TIMER_LOCK_DELAY)
		snprintf(m->name, sizeof m->name, "lock-%zu", i);
	m->session = m->kind == TIMER_WAIT ? i % 7 + 1 : 0;
	m->seq = m->kind == TIMER_WAIT ? i : 0;
}

static size_t model_find(struct model *ms, const struct timer *t)
{
	for (size_t i = 0; i < MODEL; i++) {
		struct model *m = &ms[i];
		if (!m->present || m->kind != t->kind)
			continue;
		if (m->kind == TIMER_LOCK_DELAY ? strcmp(m->name, t->name) == 0
						: m->session == t->session && m->seq == t->seq)
			return i;
	}
	fail_msg("timer %s/%llu/%llu is not in the model", t->name, (unsigned long long)t->session,
		 (unsigned long long)t->seq);
	return 0;
}

static uint64_t model_min_due(struct model *ms, size_t *count)
{
	uint64_t min = UINT64_MAX;
	*count = 0;
	for (size_t i = 0; i < MODEL; i++)
		if (ms[i].present) {
			(*count)++;
			if (ms[i].due < min)
				min = ms[i].due;
		}
	return min;
}

static void test_against_model(void **state)
{
	(void)state;
	static struct model ms[MODEL];
	memset(ms, 0, sizeof ms);
	struct timers t;
	timers_init(&t);
	uint64_t now = 1000;
	for (int step = 0; step < 200000; step++) {
		size_t i = next_rand() % MODEL;
		struct model *m = &ms[i];
		identity(m, i);
		switch (next_rand() % 5) {
		case 0:
		case 1: /* set (add or move) */
			m->deadline = now + next_rand() % 500;
			m->due = m->deadline;
			m->present = true;
			assert_int_equal(
				timers_set(&t, m->kind, m->name, m->session, m->seq, m->deadline),
				0);
			break;
		case 2: /* drop */
			if (m->kind == TIMER_LOCK_DELAY)
				timers_drop_delay(&t, m->name);
			else
				timers_drop_wait(&t, m->session, m->seq);
			m->present = false;
			break;
		case 3: { /* time passes: propose everything due, soonest first */
			now += next_rand() % 100;
			uint64_t last = 0;
			struct timer *tm;
			while ((tm = timers_due(&t, now)) != NULL) {
				assert_true(tm->due >= last);
				last = tm->due;
				size_t k = model_find(ms, tm);
				assert_true(ms[k].due <= now);
				assert_int_equal(ms[k].due, tm->due);
				timers_postpone(&t, tm, now + 1000);
				ms[k].due = now + 1000;
			}
			break;
		}
		default:
			if (next_rand() % 50 == 0) { /* a new leader */
				timers_reset(&t);
				for (size_t k = 0; k < MODEL; k++)
					ms[k].due = ms[k].deadline;
			}
			break;
		}
		size_t count;
		uint64_t min = model_min_due(ms, &count);
		assert_int_equal(timers_count(&t), count);
		struct timer *top = timers_due(&t, UINT64_MAX);
		if (count == 0)
			assert_null(top);
		else
			assert_int_equal(top->due, min);
	}
	timers_close(&t);
}

/* Identity: a wait is (session, seq), not its lock name; a lock-delay is
 * its name; the two kinds never match each other. */
static void test_identity(void **state)
{
	(void)state;
	struct timers t;
	timers_init(&t);
	assert_int_equal(timers_set(&t, TIMER_WAIT, "a", 1, 2, 50), 0);
	assert_int_equal(timers_set(&t, TIMER_WAIT, "b", 1, 2, 40), 0); /* moves it */
	assert_int_equal(timers_set(&t, TIMER_LOCK_DELAY, "a", 1, 2, 60), 0);
	assert_int_equal(timers_set(&t, TIMER_WAIT, "a", 2, 1, 70), 0);
	assert_int_equal(timers_count(&t), 3);
	assert_int_equal(timers_due(&t, 100)->due, 40);
	timers_drop_wait(&t, 1, 2);
	assert_int_equal(timers_due(&t, 100)->kind, TIMER_LOCK_DELAY);
	timers_drop_delay(&t, "b"); /* no such delay */
	timers_drop_wait(&t, 2, 2); /* no such wait */
	assert_int_equal(timers_count(&t), 2);
	timers_drop_delay(&t, "a");
	struct timer *w = timers_due(&t, 100);
	assert_int_equal(w->session, 2);
	assert_null(timers_due(&t, 69));
	timers_postpone(&t, w, 10); /* never before the deadline */
	assert_int_equal(w->due, 70);
	timers_close(&t);
}

/* 100,000 waits of one lock, dropped in the order their grants come: each
 * drop finds its timer through the index (the cost per grant is measured
 * in tests/bench, `waiters`). */
static void test_drop_is_not_linear(void **state)
{
	(void)state;
	enum { N = 100000 };
	struct timers t;
	timers_init(&t);
	for (uint64_t i = 0; i < N; i++)
		assert_int_equal(timers_set(&t, TIMER_WAIT, "lock", i + 1, i, 1000 + i % 977), 0);
	for (uint64_t i = 0; i < N; i++) {
		timers_drop_wait(&t, i + 1, i);
		assert_int_equal(timers_count(&t), N - 1 - i);
	}
	assert_null(timers_due(&t, UINT64_MAX));
	timers_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_against_model),
		cmocka_unit_test(test_identity),
		cmocka_unit_test(test_drop_is_not_linear),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
