/*
 * test_client_seq.c: what the client library tells its caller, against a
 * fake node that delays, drops or refuses answers (GUARANTEES rules 6 and
 * 12): which statuses settle a sequence, how queued acquires leave the
 * mark and are acknowledged, what a timed-out acquire or release means,
 * a retried close, and the token of a lost session's handle.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "client_fakeserver.h"
#include "clock.h"
#include "raftlock.h"

struct rig {
	struct fake *f;
	raftlock_client *c;
	raftlock_session *s;
	raftlock_lock *l;
};

static void rig_up_ttl(struct rig *r, unsigned timeout_ms, unsigned ttl_ms)
{
	r->f = fake_start(FAKE_LEADER);
	const char *addrs[] = {r->f->addr};
	struct raftlock_client_options o = {
		.addresses = addrs,
		.n_addresses = 1,
		.client_name = "test",
		.request_timeout_ms = timeout_ms,
		.connect_timeout_ms = 300,
	};
	struct raftlock_session_options so = {.ttl_ms = ttl_ms};
	assert_int_equal(raftlock_client_open(&o, &r->c, NULL), 0);
	assert_int_equal(raftlock_session_open(r->c, &so, &r->s), 0);
	assert_int_equal(raftlock_lock_new(r->s, "q", NULL, &r->l), 0);
}

static void rig_up(struct rig *r, unsigned timeout_ms)
{
	rig_up_ttl(r, timeout_ms, 60000);
}

static void rig_down(struct rig *r)
{
	raftlock_client_close(r->c);
	fake_stop(r->f);
}

/* Refusals that did not go through apply never settle a sequence: the
 * request is sent again with the same seq until a result comes. */
static void refused_then_granted(int status)
{
	struct rig r;
	uint64_t token = 0;
	rig_up(&r, 5000);
	FAKE_SET(r.f, refuse_status, status);
	FAKE_SET(r.f, refuse_acquires, 3);
	assert_int_equal(raftlock_lock_try(r.l, &token), 0);
	assert_int_equal(token, 1);
	assert_int_equal(fake_count(r.f, ACQUIRE), 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(fake_nth(r.f, ACQUIRE, i).seq, 1);
	rig_down(&r);
}

static void test_overload_is_retried_with_the_same_seq(void **state)
{
	(void)state;
	refused_then_granted(RAFTLOCK_EOVERLOAD);
	/* what an older node answers at its per-connection limit, or when a
	 * proposal fails for want of memory */
	refused_then_granted(RAFTLOCK_ELIMIT);
	refused_then_granted(RAFTLOCK_ENOMEM);
}

/* A refusal of the request itself is final: malformed (EPROTO), or
 * without its session's secret (EPERM, the same at every attempt). */
static void refused_for_good(int status)
{
	struct rig r;
	rig_up(&r, 5000);
	FAKE_SET(r.f, refuse_status, status);
	FAKE_SET(r.f, refuse_acquires, 1);
	assert_int_equal(raftlock_lock_try(r.l, NULL), status);
	assert_int_equal(fake_count(r.f, ACQUIRE), 1);
	/* settled: the next request's mark is past it */
	assert_int_equal(raftlock_lock_try(r.l, NULL), 0);
	assert_int_equal(fake_nth(r.f, ACQUIRE, 1).ack_below, 2);
	rig_down(&r);
}

static void test_malformed_request_is_final(void **state)
{
	(void)state;
	refused_for_good(RAFTLOCK_EPROTO);
	refused_for_good(RAFTLOCK_EPERM);
}

/* Refused until the caller's deadline: the outcome is unknown to the
 * caller, and the request goes on in the background. */
static void test_overload_past_the_deadline_is_unknown(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, 400);
	FAKE_SET(r.f, refuse_status, RAFTLOCK_EOVERLOAD);
	FAKE_SET(r.f, refuse_acquires, 1000000);
	assert_int_equal(raftlock_lock_try(r.l, NULL), RAFTLOCK_EUNKNOWN);
	int n = fake_count(r.f, ACQUIRE);
	assert_true(n >= 2);
	FAKE_SET(r.f, refuse_acquires, 0);
	/* the orphan is granted, nobody waits for it: it is given back */
	for (int i = 0; i < 300 && fake_count(r.f, RELEASE) == 0; i++)
		sleep_ms(10);
	assert_int_equal(fake_count(r.f, RELEASE), 1);
	assert_int_equal(fake_nth(r.f, ACQUIRE, fake_count(r.f, ACQUIRE) - 1).seq, 1);
	assert_int_equal(raftlock_lock_token(r.l), 0);
	rig_down(&r);
}

struct acquirer {
	raftlock_lock *l;
	int timeout_ms;
	uint64_t token;
	int rv;
};

static void *acquire_thread(void *arg)
{
	struct acquirer *a = arg;
	a->rv = raftlock_lock_acquire(a->l, RAFTLOCK_EXCLUSIVE, 1, a->timeout_ms, &a->token);
	return NULL;
}

/* Issue 9, item 1: an acquire waiting behind another handle does not hold
 * the mark back, and is acknowledged once its outcome is known, until a
 * request that carried the acknowledgement has been applied. */
static void test_queued_acquire_leaves_the_mark(void **state)
{
	(void)state;
	struct rig r;
	raftlock_lock *other;
	pthread_t t;
	rig_up(&r, 5000);
	assert_int_equal(raftlock_lock_new(r.s, "x", NULL, &other), 0);
	FAKE_SET(r.f, grant_after_ms, 400);
	struct acquirer a = {.l = r.l, .timeout_ms = 5000, .rv = 1};
	assert_int_equal(pthread_create(&t, NULL, acquire_thread, &a), 0);
	while (fake_count(r.f, ACQUIRE) == 0)
		sleep_ms(5);
	sleep_ms(50); /* answered "queued" */
	uint64_t qseq = fake_nth(r.f, ACQUIRE, 0).seq;
	for (int i = 1; i <= 5; i++) {
		assert_int_equal(raftlock_lock_try(other, NULL), 0);
		struct fake_entry e = fake_nth(r.f, ACQUIRE, i);
		assert_int_equal(e.ack_below, e.seq); /* not qseq */
		assert_int_equal(e.n_acked, 0);
	}
	pthread_join(t, NULL);
	assert_int_equal(a.rv, 0);
	assert_true(a.token != 0);
	/* the next request acknowledges it; once that one is applied, the
	 * acknowledgement is not sent again */
	assert_int_equal(raftlock_lock_try(other, NULL), 0);
	struct fake_entry e = fake_nth(r.f, ACQUIRE, 6);
	assert_int_equal(e.n_acked, 1);
	assert_int_equal(e.acked[0], qseq);
	assert_int_equal(raftlock_lock_try(other, NULL), 0);
	assert_int_equal(fake_nth(r.f, ACQUIRE, 7).n_acked, 0);
	rig_down(&r);
}

/* A blocking acquire with timeout_ms returns RAFTLOCK_EUNKNOWN after
 * timeout_ms + bound_ms (give or take scheduling), not later. */
static void acquire_unknown_after(struct rig *r, int timeout_ms, unsigned bound_ms)
{
	uint64_t t0 = clock_mono_ms();
	assert_int_equal(raftlock_lock_acquire(r->l, RAFTLOCK_EXCLUSIVE, 1, timeout_ms, NULL),
			 RAFTLOCK_EUNKNOWN);
	uint64_t took = clock_mono_ms() - t0;
	assert_true(took >= (uint64_t)timeout_ms + bound_ms - 10);
	assert_true(took <= (uint64_t)timeout_ms + bound_ms + 150);
	assert_int_equal(raftlock_lock_token(r->l), 0);
}

/* Issue 9, item 3: a blocking acquire whose cancel gets no answer returns
 * RAFTLOCK_EUNKNOWN within its timeout plus min(request timeout, 1 s),
 * never a plain timeout while it may still be queued. */
static void test_acquire_timeout_is_bounded(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, 5000);
	FAKE_SET(r.f, ignore_cancels, true);
	acquire_unknown_after(&r, 200, 1000);
	assert_int_equal(fake_count(r.f, CANCEL), 1);
	rig_down(&r);
}

/* The acquire itself is not answered before the deadline: no cancel is
 * sent that could overtake it; the call still ends within the bound. */
static void test_unanswered_acquire_timeout_is_bounded(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, 700);
	FAKE_SET(r.f, ignore_acquires, true);
	acquire_unknown_after(&r, 100, 700); /* bound: the request timeout */
	assert_int_equal(fake_count(r.f, CANCEL), 0);
	rig_down(&r);
}

/* Issue 9, item 3: a release that is not confirmed executes later: the
 * call says so, the handle no longer holds, and a new acquire through it
 * is sent only after the release was applied. */
static void test_unconfirmed_release(void **state)
{
	(void)state;
	struct rig r;
	uint64_t token = 0;
	rig_up(&r, 300);
	assert_int_equal(raftlock_lock_try(r.l, &token), 0);
	FAKE_SET(r.f, ignore_releases, true);
	assert_int_equal(raftlock_lock_release(r.l, NULL), RAFTLOCK_EUNKNOWN);
	assert_int_equal(raftlock_lock_token(r.l), 0);
	FAKE_SET(r.f, ignore_releases, false);
	assert_int_equal(raftlock_lock_try(r.l, &token), 0);
	assert_int_equal(token, 2);
	int nr = fake_count(r.f, RELEASE);
	assert_true(nr >= 2);
	struct fake_entry rel = fake_nth(r.f, RELEASE, nr - 1);
	struct fake_entry acq = fake_nth(r.f, ACQUIRE, 1);
	assert_int_equal(rel.seq, 2);
	assert_true(rel.at_boot <= acq.at_boot);
	assert_int_equal(acq.seq, 3);
	assert_int_equal(acq.ack_below, 3); /* the release was applied */
	rig_down(&r);
}

/* A call that waits for its handle's release still being sent when the
 * session's close begins ends RAFTLOCK_ECANCELED and sends nothing, as a
 * call begun after the close does (raftlock.h): timeout_ms 0 is a
 * try-lock, else a blocking acquire (its wait's own end is ETIMEDOUT).
 * Nothing: not even a seq taken, which the close's would show, for the
 * acquire's request could be taken back unsent. */
static void close_ends_a_call_behind_an_orphan(int timeout_ms)
{
	struct rig r;
	pthread_t th;
	uint64_t token = 0;
	rig_up(&r, 2000);
	assert_int_equal(raftlock_lock_try(r.l, &token), 0);
	FAKE_SET(r.f, ignore_releases, true);
	assert_int_equal(raftlock_lock_release(r.l, NULL), RAFTLOCK_EUNKNOWN);
	int sent = fake_count(r.f, RELEASE);
	struct acquirer a = {.l = r.l, .timeout_ms = timeout_ms, .rv = 1};
	assert_int_equal(pthread_create(&th, NULL, acquire_thread, &a), 0);
	/* the call's wait for the release begins by sending it again */
	for (int i = 0; i < 1000 && fake_count(r.f, RELEASE) == sent; i++)
		sleep_ms(1);
	assert_true(fake_count(r.f, RELEASE) > sent);
	assert_int_equal(raftlock_session_close(r.s), 0);
	pthread_join(th, NULL);
	assert_int_equal(a.rv, RAFTLOCK_ECANCELED);
	assert_int_equal(fake_count(r.f, ACQUIRE), 1);
	assert_int_equal(fake_nth(r.f, CLOSE, 0).seq, fake_nth(r.f, RELEASE, 0).seq + 1);
	rig_down(&r);
}

static void test_close_ends_a_try_behind_an_orphan(void **state)
{
	(void)state;
	close_ends_a_call_behind_an_orphan(0);
}

static void test_close_ends_an_acquire_behind_an_orphan(void **state)
{
	(void)state;
	close_ends_a_call_behind_an_orphan(10000);
}

/* Issue 9, item 3: a close whose first answer was lost, and whose retry
 * finds the session gone, succeeds. */
static void test_retried_close_succeeds(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, 3000);
	FAKE_SET(r.f, drop_first_close, true);
	assert_int_equal(raftlock_session_close(r.s), 0);
	assert_int_equal(fake_count(r.f, CLOSE), 2);
	assert_int_equal(fake_nth(r.f, CLOSE, 0).seq, fake_nth(r.f, CLOSE, 1).seq);
	rig_down(&r);
}

/* Issue 9, item 14: the handles of a lost session hold nothing. */
static void test_lost_session_token_is_zero(void **state)
{
	(void)state;
	struct rig r;
	uint64_t token = 0;
	rig_up_ttl(&r, 3000, 1500); /* a keepalive every 500 ms */
	assert_int_equal(raftlock_lock_try(r.l, &token), 0);
	assert_int_equal(raftlock_lock_token(r.l), token);
	FAKE_SET(r.f, keepalive_gone, true);
	for (int i = 0; i < 600 && raftlock_session_valid_until(r.s) != 0; i++)
		sleep_ms(50);
	assert_int_equal(raftlock_session_valid_until(r.s), 0);
	assert_int_equal(raftlock_lock_token(r.l), 0);
	rig_down(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_overload_is_retried_with_the_same_seq),
		cmocka_unit_test(test_malformed_request_is_final),
		cmocka_unit_test(test_overload_past_the_deadline_is_unknown),
		cmocka_unit_test(test_queued_acquire_leaves_the_mark),
		cmocka_unit_test(test_acquire_timeout_is_bounded),
		cmocka_unit_test(test_unanswered_acquire_timeout_is_bounded),
		cmocka_unit_test(test_unconfirmed_release),
		cmocka_unit_test(test_close_ends_a_try_behind_an_orphan),
		cmocka_unit_test(test_close_ends_an_acquire_behind_an_orphan),
		cmocka_unit_test(test_retried_close_succeeds),
		cmocka_unit_test(test_lost_session_token_is_zero),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
