/* Lock sets (raftlock_multi_*) and deadlock refusal on a real 3-node
 * cluster: a set is granted whole or not at all and waits in FIFO order
 * with single waiters; its timeout leaves nothing queued; two sessions
 * that would wait on each other get RAFTLOCK_EDEADLK at once, and the
 * wait that was first is granted once the other lets go; the asynchronous
 * acquire; bad sets. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"

#define ELECTION_MS 500

static struct tcluster cl;

/* Waiters of name (0 when the lock does not exist). */
static size_t waiters_of(raftlock_client *c, const char *name)
{
	struct raftlock_lock_info *info = NULL;
	int rv = raftlock_lock_get(c, name, false, &info);
	if (rv == RAFTLOCK_ENOTFOUND)
		return 0;
	assert_int_equal(rv, 0);
	size_t n = info->n_waiters;
	raftlock_lock_info_free(info);
	return n;
}

/* A blocking call in a thread of its own. */
struct call {
	pthread_t thread;
	raftlock_multi *set;
	raftlock_lock *lock;
	int timeout_ms;
	int status;
	uint64_t at; /* when it returned */
};

static void *call_run(void *arg)
{
	struct call *c = arg;
	if (c->set != NULL)
		c->status = raftlock_multi_acquire(c->set, c->timeout_ms);
	else
		c->status =
			raftlock_lock_acquire(c->lock, RAFTLOCK_EXCLUSIVE, 1, c->timeout_ms, NULL);
	c->at = tcluster_now_ms();
	return NULL;
}

static void call_start(struct call *c)
{
	assert_int_equal(pthread_create(&c->thread, NULL, call_run, c), 0);
}

static raftlock_multi *set_of(raftlock_session *s, const char *const *names, size_t n)
{
	struct raftlock_multi_item items[8];
	assert_true(n <= 8);
	for (size_t i = 0; i < n; i++)
		items[i] = (struct raftlock_multi_item){.name = names[i]};
	raftlock_multi *m = NULL;
	assert_int_equal(raftlock_multi_new(s, items, n, &m), 0);
	return m;
}

static void test_set_whole_or_nothing(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "ml/b", 5000);
	raftlock_session *third = tl_session(p.c, 5000);
	uint64_t held = tl_take(p.la);
	/* given out of order: the library sorts */
	raftlock_multi *m = set_of(p.b, (const char *const[]){"ml/c", "ml/a", "ml/b"}, 3);
	struct call c = {.set = m, .timeout_ms = 20000};
	call_start(&c);
	tl_await_waiters(p.c, "ml/a", 1);
	tl_await_waiters(p.c, "ml/b", 1);
	tl_await_waiters(p.c, "ml/c", 1);
	/* "ml/a" is free but the set waits there: a try-lock is refused,
	 * and the set holds none of its locks yet */
	raftlock_lock *other = tl_lock(third, "ml/a");
	assert_int_equal(raftlock_lock_try(other, NULL), RAFTLOCK_EBUSY);
	assert_int_equal(raftlock_multi_token(m, 1), 0);
	assert_int_equal(raftlock_lock_release(p.la, NULL), 0);
	pthread_join(c.thread, NULL);
	assert_int_equal(c.status, 0);
	uint64_t ta = raftlock_multi_token(m, 1), tb = raftlock_multi_token(m, 2),
		 tc = raftlock_multi_token(m, 0);
	/* one token per lock, taken in name order, after the old holder's */
	assert_true(ta > held);
	assert_int_equal(tb, ta + 1);
	assert_int_equal(tc, ta + 2);
	assert_int_equal(waiters_of(p.c, "ml/a"), 0);
	/* a single waiter behind the set gets its lock once the set lets go */
	struct call single = {.lock = other, .timeout_ms = 20000};
	call_start(&single);
	tl_await_waiters(p.c, "ml/a", 1);
	assert_int_equal(raftlock_multi_release(m), 0);
	pthread_join(single.thread, NULL);
	assert_int_equal(single.status, 0);
	assert_true(raftlock_lock_token(other) > tc);
	assert_int_equal(raftlock_multi_token(m, 0), 0);
	assert_int_equal(raftlock_multi_release(m), RAFTLOCK_ENOTHOLDER);
	assert_int_equal(raftlock_lock_release(other, NULL), 0);
	raftlock_lock_free(other);
	raftlock_multi_free(m);
	raftlock_session_close(third);
	tl_pair_close(&p);
}

static void test_set_timeout_leaves_nothing(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "mlt/b", 5000);
	tl_take(p.la);
	raftlock_multi *m = set_of(p.b, (const char *const[]){"mlt/a", "mlt/b"}, 2);
	uint64_t start = tcluster_now_ms();
	assert_int_equal(raftlock_multi_acquire(m, 300), RAFTLOCK_ETIMEDOUT);
	assert_true(tcluster_now_ms() - start < 300 + 1000 + 200);
	assert_int_equal(waiters_of(p.c, "mlt/a"), 0);
	assert_int_equal(waiters_of(p.c, "mlt/b"), 0);
	/* no wait: refused at once, whole */
	assert_int_equal(raftlock_multi_acquire(m, 0), RAFTLOCK_EBUSY);
	assert_int_equal(waiters_of(p.c, "mlt/a"), 0);
	raftlock_multi_free(m);
	tl_pair_close(&p);
}

static void test_deadlock_refused_at_once(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "dl/x", 5000);
	raftlock_lock *ay = tl_lock(p.a, "dl/y"), *by = tl_lock(p.b, "dl/y");
	tl_take(p.la);                                         /* a holds x */
	tl_take(by);                                           /* b holds y */
	struct call first = {.lock = ay, .timeout_ms = 20000}; /* a waits for y */
	call_start(&first);
	tl_await_waiters(p.c, "dl/y", 1);
	uint64_t start = tcluster_now_ms();
	int rv = raftlock_lock_acquire(p.lb, RAFTLOCK_EXCLUSIVE, 1, 10000, NULL);
	assert_int_equal(rv, RAFTLOCK_EDEADLK);
	assert_true(tcluster_now_ms() - start < 2000);
	tl_assert_errmsg_has(p.c, "cycle");
	assert_int_equal(waiters_of(p.c, "dl/x"), 0);
	/* b backs off: a's wait is granted */
	assert_int_equal(raftlock_lock_release(by, NULL), 0);
	pthread_join(first.thread, NULL);
	assert_int_equal(first.status, 0);
	assert_int_equal(raftlock_lock_release(ay, NULL), 0);
	assert_int_equal(raftlock_lock_release(p.la, NULL), 0);
	raftlock_lock_free(ay);
	raftlock_lock_free(by);
	tl_pair_close(&p);
}

/* The outcome of an asynchronous set acquire. */
static struct {
	pthread_mutex_t mu;
	int calls, status;
	raftlock_multi *set;
} async_out = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void async_done(raftlock_multi *set, int status, void *arg)
{
	(void)arg;
	pthread_mutex_lock(&async_out.mu);
	async_out.calls++;
	async_out.status = status;
	async_out.set = set;
	pthread_mutex_unlock(&async_out.mu);
}

static int async_calls(void)
{
	pthread_mutex_lock(&async_out.mu);
	int n = async_out.calls;
	pthread_mutex_unlock(&async_out.mu);
	return n;
}

/* raftlock_multi_acquire_async: queued without a thread, the callback
 * runs once when the set is granted, with every token in place. */
static void test_set_async(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "mla/b", 5000);
	tl_take(p.la);
	raftlock_multi *m = set_of(p.b, (const char *const[]){"mla/a", "mla/b"}, 2);
	assert_int_equal(raftlock_multi_acquire_async(m, 20000, async_done, NULL), 0);
	tl_await_waiters(p.c, "mla/a", 1);
	assert_int_equal(async_calls(), 0);
	assert_int_equal(raftlock_lock_release(p.la, NULL), 0);
	for (int i = 0; i < 1000 && async_calls() == 0; i++)
		tl_sleep_ms(10);
	assert_int_equal(async_calls(), 1);
	assert_int_equal(async_out.status, 0);
	assert_ptr_equal(async_out.set, m);
	assert_true(raftlock_multi_token(m, 0) != 0);
	assert_int_equal(raftlock_multi_token(m, 1), raftlock_multi_token(m, 0) + 1);
	assert_int_equal(raftlock_multi_release(m), 0);
	raftlock_multi_free(m);
	tl_pair_close(&p);
}

static void test_bad_sets(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	raftlock_session *s = tl_session(c, 5000);
	raftlock_multi *m = NULL;
	struct raftlock_multi_item twice[] = {
		{.name = "bad/a"}, {.name = "bad/b"}, {.name = "bad/a"}};
	assert_int_equal(raftlock_multi_new(s, twice, 3, &m), RAFTLOCK_EINVAL);
	tl_assert_errmsg_has(c, "twice");
	assert_null(m);
	assert_int_equal(raftlock_multi_new(s, twice, 0, &m), RAFTLOCK_EINVAL);
	assert_int_equal(raftlock_multi_new(s, twice, RAFTLOCK_MULTI_MAX + 1, &m), RAFTLOCK_EINVAL);
	struct raftlock_multi_item empty[] = {{.name = "bad/a"}, {.name = ""}};
	assert_int_equal(raftlock_multi_new(s, empty, 2, &m), RAFTLOCK_EINVAL);
	raftlock_session_close(s);
	raftlock_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_set_whole_or_nothing),
		cmocka_unit_test(test_set_timeout_leaves_nothing),
		cmocka_unit_test(test_deadlock_refused_at_once),
		cmocka_unit_test(test_set_async),
		cmocka_unit_test(test_bad_sets),
	};
	return tcluster_run_group(tests, &cl, 3, ELECTION_MS);
}
