/* raftlock_lock_acquire_async() on a real 3-node cluster: many waiters
 * queued from one thread are granted one by one in FIFO order with
 * increasing tokens, shared waiters together, semaphore permits; the
 * server's wait deadline ends a wait with RAFTLOCK_ETIMEDOUT; closing the
 * session ends a wait with RAFTLOCK_ECANCELED at once, losing it with
 * RAFTLOCK_ESESSION; an unanswered wait is RAFTLOCK_EUNKNOWN and leaves no
 * grant behind; bad arguments. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"

#define ELECTION_MS 500
#define WAITERS 8

static struct tcluster cl;

/* The outcomes of the callbacks, in the order they ran. */
struct outcomes {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int n;
	raftlock_lock *lock[WAITERS];
	int status[WAITERS];
	uint64_t token[WAITERS];
	uint64_t at[WAITERS];
};

static struct outcomes out = {.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void outcomes_reset(void)
{
	pthread_mutex_lock(&out.mu);
	out.n = 0;
	pthread_mutex_unlock(&out.mu);
}

static void record(raftlock_lock *lock, int status, uint64_t value, void *arg)
{
	(void)arg;
	pthread_mutex_lock(&out.mu);
	if (out.n < WAITERS) {
		out.lock[out.n] = lock;
		out.status[out.n] = status;
		out.token[out.n] = value;
		out.at[out.n] = tcluster_now_ms();
		out.n++;
	}
	pthread_cond_broadcast(&out.cond);
	pthread_mutex_unlock(&out.mu);
}

/* Waits up to timeout_ms for n outcomes; returns how many came. */
static int await_outcomes(int n, int timeout_ms)
{
	uint64_t end = tcluster_now_ms() + (uint64_t)timeout_ms;
	pthread_mutex_lock(&out.mu);
	while (out.n < n && tcluster_now_ms() < end) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 20 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&out.cond, &out.mu, &ts);
	}
	int got = out.n;
	pthread_mutex_unlock(&out.mu);
	return got;
}

/* WAITERS handles of one session queue behind a holder of another; each
 * release hands the lock to the next in queue order, with a larger token. */
static void test_fifo_waiters_from_one_thread(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "async/fifo", 5000);
	uint64_t held = tl_take(p.la);
	raftlock_lock *w[WAITERS];
	outcomes_reset();
	for (int i = 0; i < WAITERS; i++) {
		w[i] = tl_lock(p.b, "async/fifo");
		assert_int_equal(
			raftlock_lock_acquire_async(w[i], RAFTLOCK_EXCLUSIVE, 1, -1, record, NULL),
			0);
		tl_await_waiters(p.c, "async/fifo", (size_t)i + 1); /* queue order = i */
	}
	/* a second wait through one handle is refused, nothing sent */
	assert_int_equal(raftlock_lock_acquire_async(w[0], RAFTLOCK_EXCLUSIVE, 1, -1, record, NULL),
			 RAFTLOCK_ESTATE);
	assert_int_equal(await_outcomes(1, 300), 0); /* nobody granted while held */
	assert_int_equal(raftlock_lock_release(p.la, NULL), 0);
	uint64_t last = held;
	for (int i = 0; i < WAITERS; i++) {
		assert_int_equal(await_outcomes(i + 1, 10000), i + 1);
		assert_ptr_equal(out.lock[i], w[i]);
		assert_int_equal(out.status[i], 0);
		assert_true(out.token[i] > last);
		assert_int_equal(raftlock_lock_token(w[i]), out.token[i]);
		last = out.token[i];
		assert_int_equal(raftlock_lock_release(w[i], NULL), 0);
	}
	for (int i = 0; i < WAITERS; i++)
		raftlock_lock_free(w[i]);
	tl_pair_close(&p);
}

/* Shared waiters behind a writer are granted together; a semaphore grants
 * as many waiters as it has permits. */
static void test_shared_and_semaphore_waiters(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "async/rw", 5000);
	uint64_t token = 0;
	assert_int_equal(raftlock_lock_acquire(p.la, RAFTLOCK_EXCLUSIVE, 1, 0, &token), 0);
	struct raftlock_lock_options rw = {.kind = RAFTLOCK_RWLOCK};
	raftlock_lock *r1, *r2;
	assert_int_equal(raftlock_lock_new(p.b, "async/rw", &rw, &r1), 0);
	assert_int_equal(raftlock_lock_new(p.b, "async/rw", &rw, &r2), 0);
	outcomes_reset();
	assert_int_equal(raftlock_lock_acquire_async(r1, RAFTLOCK_SHARED, 1, 10000, record, NULL),
			 0);
	assert_int_equal(raftlock_lock_acquire_async(r2, RAFTLOCK_SHARED, 1, 10000, record, NULL),
			 0);
	tl_await_waiters(p.c, "async/rw", 2);
	assert_int_equal(raftlock_lock_release(p.la, NULL), 0);
	assert_int_equal(await_outcomes(2, 10000), 2);
	assert_int_equal(out.status[0], 0);
	assert_int_equal(out.status[1], 0);
	assert_true(raftlock_lock_token(r1) != 0 && raftlock_lock_token(r2) != 0);
	raftlock_lock_free(r1); /* still held: the session close releases */
	raftlock_lock_free(r2);
	tl_pair_close(&p);

	/* a semaphore of 2: two of three waiters get a permit */
	tl_pair_open(&p, &cl, "async/sem-unused", 5000);
	struct raftlock_lock_options sem = {.kind = RAFTLOCK_SEMAPHORE, .limit = 2};
	raftlock_lock *s[3];
	outcomes_reset();
	for (int i = 0; i < 3; i++) {
		assert_int_equal(raftlock_lock_new(p.b, "async/sem", &sem, &s[i]), 0);
		assert_int_equal(raftlock_lock_acquire_async(s[i], RAFTLOCK_EXCLUSIVE, 1, 1000,
							     record, NULL),
				 0);
	}
	assert_int_equal(await_outcomes(3, 10000), 3);
	int granted = 0, timed_out = 0;
	for (int i = 0; i < 3; i++) {
		granted += out.status[i] == 0;
		timed_out += out.status[i] == RAFTLOCK_ETIMEDOUT;
	}
	assert_int_equal(granted, 2);
	assert_int_equal(timed_out, 1);
	for (int i = 0; i < 3; i++)
		raftlock_lock_free(s[i]);
	tl_pair_close(&p);
}

/* The server ends a wait at its timeout: RAFTLOCK_ETIMEDOUT, no sooner,
 * and the handle holds nothing. */
static void test_wait_deadline(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "async/deadline", 5000);
	tl_take(p.la);
	outcomes_reset();
	uint64_t start = tcluster_now_ms();
	assert_int_equal(
		raftlock_lock_acquire_async(p.lb, RAFTLOCK_EXCLUSIVE, 1, 400, record, NULL), 0);
	assert_int_equal(await_outcomes(1, 10000), 1);
	assert_int_equal(out.status[0], RAFTLOCK_ETIMEDOUT);
	/* the cluster's wait deadline counts whole milliseconds of its own clock */
	assert_true(out.at[0] - start >= 400 - 20);
	assert_int_equal(raftlock_lock_token(p.lb), 0);
	/* and the handle can wait again */
	assert_int_equal(raftlock_lock_acquire_async(p.lb, RAFTLOCK_EXCLUSIVE, 1, 0, record, NULL),
			 0);
	assert_int_equal(await_outcomes(2, 10000), 2);
	assert_int_equal(out.status[1], RAFTLOCK_EBUSY);
	tl_pair_close(&p);
}

/* Closing a session ends its waits at once with RAFTLOCK_ECANCELED (the
 * callback has run when the close returns), and the server drops them. */
static void test_close_ends_the_wait(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "async/close", 5000);
	tl_take(p.la);
	outcomes_reset();
	assert_int_equal(raftlock_lock_acquire_async(p.lb, RAFTLOCK_EXCLUSIVE, 1, -1, record, NULL),
			 0);
	tl_await_waiters(p.c, "async/close", 1);
	uint64_t start = tcluster_now_ms();
	assert_int_equal(raftlock_session_close(p.b), 0);
	p.b = NULL;
	p.lb = NULL; /* freed with its session */
	assert_true(tcluster_now_ms() - start < 3000);
	assert_int_equal(await_outcomes(1, 0), 1);
	assert_int_equal(out.status[0], RAFTLOCK_ECANCELED);
	tl_await_waiters(p.c, "async/close", 0);
	tl_pair_close(&p);
}

/* A session lost while its acquire waits (no majority: no keepalive is
 * acknowledged, the grace period runs out) ends the wait with
 * RAFTLOCK_ESESSION, without waiting for the cluster. */
static void test_lost_session_ends_the_wait(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "async/lost", 5000);
	tl_take(p.la);
	struct raftlock_session_options so = {.ttl_ms = 2 * ELECTION_MS, .grace_ms = 1000};
	raftlock_session *s;
	raftlock_lock *l;
	assert_int_equal(raftlock_session_open(p.c, &so, &s), 0);
	l = tl_lock(s, "async/lost");
	outcomes_reset();
	assert_int_equal(raftlock_lock_acquire_async(l, RAFTLOCK_EXCLUSIVE, 1, -1, record, NULL),
			 0);
	tl_await_waiters(p.c, "async/lost", 1);
	int leader = tcluster_leader(&cl, 5000), other = (leader + 1) % 3;
	tcluster_signal(&cl, leader, SIGSTOP);
	tcluster_signal(&cl, other, SIGSTOP);
	int got = await_outcomes(1, 15000);
	tcluster_signal(&cl, leader, SIGCONT);
	tcluster_signal(&cl, other, SIGCONT);
	assert_int_equal(got, 1);
	assert_int_equal(out.status[0], RAFTLOCK_ESESSION);
	assert_int_equal(raftlock_lock_token(l), 0);
	assert_true(tcluster_leader(&cl, 20000) >= 0);
	raftlock_session_close(s);
	tl_pair_close(&p);
}

/* A wait the cluster does not answer within its timeout plus the request
 * timeout (every node paused) ends with RAFTLOCK_EUNKNOWN, holding
 * nothing; once the cluster runs again, no grant is left behind. */
static void test_unanswered_wait_is_unknown(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "async/unknown", 10000);
	tl_take(p.la);
	struct raftlock_client_options o = {
		.addresses = cl.addrs, .n_addresses = 3, .request_timeout_ms = 1000};
	raftlock_client *c;
	raftlock_session *s;
	raftlock_lock *l;
	assert_int_equal(raftlock_client_open(&o, &c, NULL), 0);
	s = tl_session(c, 10000);
	l = tl_lock(s, "async/unknown");
	outcomes_reset();
	uint64_t start = tcluster_now_ms();
	assert_int_equal(raftlock_lock_acquire_async(l, RAFTLOCK_EXCLUSIVE, 1, 800, record, NULL),
			 0);
	tl_await_waiters(p.c, "async/unknown", 1);
	for (int i = 0; i < 3; i++)
		tcluster_signal(&cl, i, SIGSTOP);
	int got = await_outcomes(1, 10000);
	for (int i = 0; i < 3; i++)
		tcluster_signal(&cl, i, SIGCONT);
	assert_int_equal(got, 1);
	assert_int_equal(out.status[0], RAFTLOCK_EUNKNOWN);
	assert_true(out.at[0] - start >= 800 + 1000);
	assert_int_equal(raftlock_lock_token(l), 0);
	assert_true(tcluster_leader(&cl, 20000) >= 0);
	/* the holder lets go: nobody may be left holding */
	assert_int_equal(raftlock_lock_release(p.la, NULL), 0);
	uint64_t end = tcluster_now_ms() + 10000;
	struct raftlock_lock_info *info = NULL;
	int rv;
	while ((rv = raftlock_lock_get(p.c, "async/unknown", false, &info)) == 0 &&
	       tcluster_now_ms() < end) {
		raftlock_lock_info_free(info);
		tl_sleep_ms(50);
	}
	if (rv == 0)
		raftlock_lock_info_free(info);
	assert_int_equal(rv, RAFTLOCK_ENOTFOUND);
	raftlock_session_close(s);
	raftlock_client_close(c);
	tl_pair_close(&p);
}

static void test_bad_arguments(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "async/bad", 5000);
	assert_int_equal(raftlock_lock_acquire_async(NULL, RAFTLOCK_EXCLUSIVE, 1, 0, record, NULL),
			 RAFTLOCK_EINVAL);
	assert_int_equal(raftlock_lock_acquire_async(p.la, RAFTLOCK_EXCLUSIVE, 1, 0, NULL, NULL),
			 RAFTLOCK_EINVAL);
	assert_int_equal(
		raftlock_lock_acquire_async(p.la, (enum raftlock_mode)7, 1, 0, record, NULL),
		RAFTLOCK_EINVAL);
	assert_non_null(strstr(raftlock_errmsg(p.c), "unknown mode"));
	tl_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fifo_waiters_from_one_thread),
		cmocka_unit_test(test_shared_and_semaphore_waiters),
		cmocka_unit_test(test_wait_deadline),
		cmocka_unit_test(test_close_ends_the_wait),
		cmocka_unit_test(test_lost_session_ends_the_wait),
		cmocka_unit_test(test_unanswered_wait_is_unknown),
		cmocka_unit_test(test_bad_arguments),
	};
	return tcluster_run_group(tests, &cl, 3, ELECTION_MS);
}
