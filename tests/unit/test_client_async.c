/*
 * test_client_async.c: raftlock_lock_try_async() and
 * raftlock_lock_release_async() against a fake node: results and tokens,
 * callbacks on the I/O thread that chain the next call, a timeout that
 * still releases a late grant, and a session close that waits for the
 * callbacks.
 */
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client_fakeserver.h"
#include "raftlock.h"

/* What the callbacks saw; the test waits for `calls` to reach a count. */
struct seen {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int calls;
	int status[4];
	uint64_t value[4];
	bool on_caller_thread;
	pthread_t caller;
	bool chain_release; /* the first callback releases from inside */
	int chained_rv;
	raftlock_client *client; /* set: keep a failure's message */
	char message[256];
};

static void seen_init(struct seen *s)
{
	memset(s, 0, sizeof *s);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->caller = pthread_self();
}

static void record(raftlock_lock *lock, int status, uint64_t value, void *arg)
{
	struct seen *s = arg;
	pthread_mutex_lock(&s->mu);
	int k = s->calls < 4 ? s->calls : 3;
	s->status[k] = status;
	s->value[k] = value;
	s->on_caller_thread |= pthread_equal(pthread_self(), s->caller);
	if (s->client != NULL && status != 0)
		snprintf(s->message, sizeof s->message, "%s", raftlock_errmsg(s->client));
	bool chain = s->chain_release && s->calls == 0 && status == 0;
	pthread_mutex_unlock(&s->mu);
	int rv = chain ? raftlock_lock_release_async(lock, record, s) : 0;
	pthread_mutex_lock(&s->mu);
	s->chained_rv = rv;
	s->calls++;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
}

/* Waits up to 5 s for n callbacks; returns how many came. */
static int wait_calls(struct seen *s, int n)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	pthread_mutex_lock(&s->mu);
	while (s->calls < n && pthread_cond_timedwait(&s->cond, &s->mu, &ts) == 0)
		;
	int got = s->calls;
	pthread_mutex_unlock(&s->mu);
	return got;
}

struct rig {
	struct fake *f;
	raftlock_client *c;
	raftlock_session *s;
	raftlock_lock *l;
};

static void rig_up(struct rig *r, unsigned timeout_ms)
{
	r->f = fake_start(FAKE_LEADER);
	const char *addrs[] = {r->f->addr};
	struct raftlock_client_options o = {.addresses = addrs,
					    .n_addresses = 1,
					    .client_name = "test",
					    .request_timeout_ms = timeout_ms,
					    .connect_timeout_ms = 300};
	assert_int_equal(raftlock_client_open(&o, &r->c, NULL), 0);
	struct raftlock_session_options so = {.ttl_ms = 60000};
	assert_int_equal(raftlock_session_open(r->c, &so, &r->s), 0);
	assert_int_equal(raftlock_lock_new(r->s, "a", NULL, &r->l), 0);
}

static void rig_down(struct rig *r)
{
	raftlock_client_close(r->c);
	fake_stop(r->f);
}

/* The fixture of every test: a rig and what its callbacks saw. */
struct fixture {
	struct rig r;
	struct seen s;
};

static int setup_with(void **state, unsigned timeout_ms)
{
	struct fixture *fx = calloc(1, sizeof *fx);
	assert_non_null(fx);
	rig_up(&fx->r, timeout_ms);
	seen_init(&fx->s);
	*state = fx;
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, 3000);
}

/* A short request timeout, for the tests of timeouts. */
static int setup_short(void **state)
{
	return setup_with(state, 300);
}

/* A request timeout near UINT_MAX (about 49 days): added to a wait's
 * timeout of 1,000 ms it would wrap around to 99 ms. */
static int setup_huge(void **state)
{
	return setup_with(state, UINT_MAX - 900);
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	rig_down(&fx->r);
	free(fx);
	return 0;
}

/* ------------------------------------------------------------- tests -- */

/* The wait's timeout plus the request timeout saturates: it wrapped
 * around, and the acquire ended with RAFTLOCK_EUNKNOWN long before its
 * grant came. */
static void test_huge_request_timeout_does_not_wrap(void **state)
{
	struct fixture *fx = *state;
	FAKE_SET(fx->r.f, grant_after_ms, 300);
	assert_int_equal(
		raftlock_lock_acquire_async(fx->r.l, RAFTLOCK_EXCLUSIVE, 1, 1000, record, &fx->s),
		0);
	assert_int_equal(wait_calls(&fx->s, 1), 1);
	assert_int_equal(fx->s.status[0], 0);
	assert_int_equal(fx->s.value[0], 1);
}

static void test_try_then_release_from_the_callback(void **state)
{
	struct fixture *fx = *state;
	struct rig *r = &fx->r;
	struct seen *s = &fx->s;
	s->chain_release = true;
	assert_int_equal(raftlock_lock_try_async(r->l, record, s), 0);
	assert_int_equal(wait_calls(s, 2), 2);
	assert_int_equal(s->status[0], 0);
	assert_true(s->value[0] != 0); /* the grant's token */
	assert_int_equal(s->chained_rv, 0);
	assert_int_equal(s->status[1], 0);
	assert_int_equal(s->value[1], 0); /* nothing left held */
	assert_false(s->on_caller_thread);
	assert_int_equal(raftlock_lock_token(r->l), 0);
	/* the same handle works with the blocking calls afterwards */
	uint64_t token = 0;
	assert_int_equal(raftlock_lock_try(r->l, &token), 0);
	assert_true(token > s->value[0]);
	assert_int_equal(raftlock_lock_token(r->l), token);
	assert_int_equal(fake_count(r->f, RAFTLOCK__ENVELOPE__BODY_ACQUIRE), 2);
	assert_int_equal(fake_count(r->f, RAFTLOCK__ENVELOPE__BODY_RELEASE), 1);
}

static void test_busy_is_reported_to_the_callback(void **state)
{
	struct fixture *fx = *state;
	struct rig *r = &fx->r;
	struct seen *s = &fx->s;
	FAKE_SET(r->f, busy, true);
	assert_int_equal(raftlock_lock_try_async(r->l, record, s), 0);
	assert_int_equal(wait_calls(s, 1), 1);
	assert_int_equal(s->status[0], RAFTLOCK_EBUSY);
	assert_int_equal(raftlock_lock_token(r->l), 0);
}

static void test_a_refusal_gives_its_message_to_the_callback(void **state)
{
	struct fixture *fx = *state;
	struct rig *r = &fx->r;
	struct seen *s = &fx->s;
	s->client = r->c;
	pthread_mutex_lock(&r->f->mu);
	r->f->refuse_acquires = 1;
	r->f->refuse_status = RAFTLOCK_EPERM;
	r->f->refuse_message = "identity 'test' has no 'lock' on 'a'";
	pthread_mutex_unlock(&r->f->mu);
	assert_int_equal(raftlock_lock_acquire_async(r->l, RAFTLOCK_EXCLUSIVE, 1, 5000, record, s),
			 0);
	assert_int_equal(wait_calls(s, 1), 1);
	assert_int_equal(s->status[0], RAFTLOCK_EPERM);
	assert_string_equal(s->message, "acquire 'a': permission denied "
					"(identity 'test' has no 'lock' on 'a')");
}

static void test_timeout_then_late_grant_is_released(void **state)
{
	struct fixture *fx = *state;
	struct rig *r = &fx->r;
	struct seen *s = &fx->s;
	FAKE_SET(r->f, ignore_acquires, true);
	assert_int_equal(raftlock_lock_try_async(r->l, record, s), 0);
	assert_int_equal(wait_calls(s, 1), 1);
	assert_int_equal(s->status[0], RAFTLOCK_EUNKNOWN);
	/* as for a blocking call: the library asks again with the same seq
	 * and gives back the grant nobody waits for */
	FAKE_SET(r->f, ignore_acquires, false);
	for (int i = 0; i < 300 && fake_count(r->f, RAFTLOCK__ENVELOPE__BODY_RELEASE) == 0; i++)
		sleep_ms(10);
	assert_int_equal(fake_count(r->f, RAFTLOCK__ENVELOPE__BODY_RELEASE), 1);
	struct fake_entry a = fake_nth(r->f, RAFTLOCK__ENVELOPE__BODY_ACQUIRE, 0);
	struct fake_entry b = fake_nth(r->f, RAFTLOCK__ENVELOPE__BODY_ACQUIRE, 1);
	assert_int_equal(a.seq, b.seq);
	assert_int_equal(raftlock_lock_token(r->l), 0);
}

static void test_close_waits_for_the_callback(void **state)
{
	struct fixture *fx = *state;
	struct rig *r = &fx->r;
	struct seen *s = &fx->s;
	FAKE_SET(r->f, ignore_acquires, true);
	assert_int_equal(raftlock_lock_try_async(r->l, record, s), 0);
	raftlock_session_close(r->s); /* frees the handle: after the callback */
	pthread_mutex_lock(&s->mu);
	assert_int_equal(s->calls, 1);
	assert_int_equal(s->status[0], RAFTLOCK_EUNKNOWN);
	pthread_mutex_unlock(&s->mu);
}

static void test_bad_arguments(void **state)
{
	struct fixture *fx = *state;
	struct rig *r = &fx->r;
	struct seen *s = &fx->s;
	assert_int_equal(raftlock_lock_try_async(NULL, record, s), RAFTLOCK_EINVAL);
	assert_int_equal(raftlock_lock_try_async(r->l, NULL, s), RAFTLOCK_EINVAL);
	assert_int_equal(raftlock_lock_release_async(r->l, NULL, s), RAFTLOCK_EINVAL);
	/* a release of a lock this handle does not hold: the server's answer */
	assert_int_equal(raftlock_lock_release_async(r->l, record, s), 0);
	assert_int_equal(wait_calls(s, 1), 1);
	assert_int_equal(fake_count(r->f, RAFTLOCK__ENVELOPE__BODY_RELEASE), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_huge_request_timeout_does_not_wrap, setup_huge,
						teardown),
		cmocka_unit_test_setup_teardown(test_try_then_release_from_the_callback, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_busy_is_reported_to_the_callback, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_refusal_gives_its_message_to_the_callback,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_then_late_grant_is_released,
						setup_short, teardown),
		cmocka_unit_test_setup_teardown(test_close_waits_for_the_callback, setup_short,
						teardown),
		cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
