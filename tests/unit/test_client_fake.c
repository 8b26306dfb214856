/*
 * test_client_fake.c: the client library against fake servers on loopback
 * that speak the real framing (proto/frame.h, proto/codec.h): redirects,
 * reconnects and retries with the original seq, ack_below, pushed grants
 * and canceled waits, and session loss.
 */
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "client.h"
#include "client_fakeserver.h"
#include "clock.h"
#include "keepalive.h"
#include "raftlock.h"
#include "session.h"

/* ------------------------------------------------------------ helpers -- */

static raftlock_client *client_for(const char *addr, unsigned timeout_ms)
{
	const char *addrs[] = {addr};
	struct raftlock_client_options o = {
		.addresses = addrs,
		.n_addresses = 1,
		.client_name = "test",
		.request_timeout_ms = timeout_ms,
		.connect_timeout_ms = 300,
	};
	raftlock_client *c = NULL;
	assert_int_equal(raftlock_client_open(&o, &c, NULL), 0);
	return c;
}

/* A fake leader, a client on it, a session and a lock handle. */
struct rig {
	struct fake *f;
	raftlock_client *c;
	raftlock_session *s;
	raftlock_lock *l;
};

static void rig_up(struct rig *r, const char *name, unsigned timeout_ms,
		   const struct raftlock_session_options *so)
{
	r->f = fake_start(FAKE_LEADER);
	r->c = client_for(r->f->addr, timeout_ms);
	assert_int_equal(raftlock_session_open(r->c, so, &r->s), 0);
	assert_int_equal(raftlock_lock_new(r->s, name, NULL, &r->l), 0);
}

/* ------------------------------------------------------ a stopped clock --
 * The tests of time stop the client's clocks (transport_clock_freeze) and
 * move them by hand: what the client does at each instant is then exact,
 * whatever the machine's load, and no test sleeps through a TTL. */

static uint64_t clock_now(raftlock_client *c)
{
	return transport_boot_ms(&c->t);
}

/* An answer the client still waits for gets this long (real time) before
 * the clock moves on: a silent fake never answers. */
#define CLOCK_ANSWER_WAIT_MS 30

enum clock_state { CLOCK_BUSY, CLOCK_UNANSWERED, CLOCK_SETTLED };

/* CLOCK_BUSY until the I/O and keepalive threads have looked at the last
 * step and wait, and every answer that came is taken in; then
 * CLOCK_UNANSWERED while a request sent on the connection awaits one. */
static enum clock_state clock_state(raftlock_client *c)
{
	struct transport *t = &c->t;
	enum clock_state st = CLOCK_SETTLED;
	pthread_mutex_lock(&t->mu);
	if (t->io_epoch != t->clock_epoch || c->ka.epoch != t->clock_epoch)
		st = CLOCK_BUSY;
	struct request *r;
	list_each_entry (r, &t->reqs, struct request, link) {
		if (r->done && r->watched)
			st = CLOCK_BUSY; /* answered, not yet taken in */
		else if (!r->done && transport_sent_here(t, r) && st == CLOCK_SETTLED)
			st = CLOCK_UNANSWERED;
	}
	pthread_mutex_unlock(&t->mu);
	return st;
}

/* Moves c's stopped clock ms forward, then waits (on the real clock) until
 * the client has done what is due at the new time. */
static void clock_step(raftlock_client *c, uint64_t ms)
{
	transport_clock_advance(&c->t, ms);
	uint64_t start = clock_mono_ms(), unanswered = 0;
	for (;;) {
		enum clock_state st = clock_state(c);
		uint64_t now = clock_mono_ms();
		assert_true(now - start < 5000); /* the client is stuck */
		if (st == CLOCK_SETTLED)
			return;
		if (st == CLOCK_UNANSWERED) {
			if (unanswered == 0)
				unanswered = now;
			if (now - unanswered >= CLOCK_ANSWER_WAIT_MS)
				return;
		} else {
			unanswered = 0;
		}
		sleep_ms(1);
	}
}

/* ms of the client's time, in steps of at most step ms. */
static void clock_run(raftlock_client *c, uint64_t ms, uint64_t step)
{
	for (uint64_t done = 0; done < ms; done += step)
		clock_step(c, ms - done < step ? ms - done : step);
}

/* rig_up() with the client's clocks stopped before the session opens. */
static void rig_up_stopped(struct rig *r, const char *name, unsigned timeout_ms,
			   const struct raftlock_session_options *so)
{
	r->f = fake_start(FAKE_LEADER);
	r->c = client_for(r->f->addr, timeout_ms);
	transport_clock_freeze(&r->c->t);
	assert_int_equal(raftlock_session_open(r->c, so, &r->s), 0);
	assert_int_equal(raftlock_lock_new(r->s, name, NULL, &r->l), 0);
}

/* Closes the client (and with it the session) and stops the fake. */
static void rig_down(struct rig *r)
{
	raftlock_client_close(r->c);
	fake_stop(r->f);
}

/* -------------------------------------------------------------- tests -- */

static void test_follows_not_leader_redirect(void **state)
{
	(void)state;
	struct fake *leader = fake_start(FAKE_LEADER);
	struct fake *follower = fake_start(FAKE_FOLLOWER);
	FAKE_SET(leader, next_session, 41);
	fake_set_leader(follower, leader->addr);
	raftlock_client *c = client_for(follower->addr, 3000);
	raftlock_session *s = NULL;
	assert_int_equal(raftlock_session_open(c, NULL, &s), 0);
	assert_int_equal(raftlock_session_id(s), 42);
	/* asked the follower once, then the leader, with the same nonce */
	assert_int_equal(fake_count(follower, OPEN), 1);
	assert_int_equal(fake_count(leader, OPEN), 1);
	struct fake_entry a = fake_nth(follower, OPEN, 0);
	struct fake_entry b = fake_nth(leader, OPEN, 0);
	assert_int_equal(a.nonce, b.nonce);
	assert_int_equal(a.id, b.id);
	/* and stays with the leader */
	raftlock_lock *l;
	uint64_t token = 0;
	assert_int_equal(raftlock_lock_new(s, "r", NULL, &l), 0);
	assert_int_equal(raftlock_lock_try(l, &token), 0);
	assert_true(token != 0);
	assert_int_equal(fake_count(follower, ACQUIRE), 0);
	assert_int_equal(raftlock_session_close(s), 0);
	raftlock_client_close(c);
	fake_stop(follower);
	fake_stop(leader);
}

static void test_reconnect_resends_with_same_seq(void **state)
{
	(void)state;
	struct rig r;
	uint64_t token = 0;
	rig_up(&r, "job", 3000, NULL);
	FAKE_SET(r.f, drop_first_acquire, true);
	assert_int_equal(raftlock_lock_try(r.l, &token), 0);
	assert_int_equal(token, 1);
	assert_int_equal(raftlock_lock_token(r.l), 1);
	assert_int_equal(fake_count(r.f, ACQUIRE), 2);
	struct fake_entry a = fake_nth(r.f, ACQUIRE, 0);
	struct fake_entry b = fake_nth(r.f, ACQUIRE, 1);
	assert_int_equal(a.seq, 1);
	assert_int_equal(b.seq, a.seq);
	assert_int_equal(b.ack_below, a.ack_below);
	assert_int_equal(b.id, a.id);
	assert_int_equal(b.other, a.other);
	assert_true(b.conn > a.conn); /* on a new connection */
	assert_int_equal(raftlock_session_close(r.s), 0);
	rig_down(&r);
}

static void test_unknown_outcome_retried_with_same_seq(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, "job", 3000, NULL);
	FAKE_SET(r.f, unknown_first_acquire, true);
	assert_int_equal(raftlock_lock_try(r.l, NULL), 0);
	assert_int_equal(fake_count(r.f, ACQUIRE), 2);
	struct fake_entry a = fake_nth(r.f, ACQUIRE, 0);
	struct fake_entry b = fake_nth(r.f, ACQUIRE, 1);
	assert_int_equal(b.seq, a.seq);
	assert_int_equal(b.conn, a.conn); /* same connection, after a pause */
	rig_down(&r);                     /* closes the session too */
}

static void test_client_close_closes_sessions(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	raftlock_client *c = client_for(f->addr, 3000);
	raftlock_session *s1, *s2;
	assert_int_equal(raftlock_session_open(c, NULL, &s1), 0);
	assert_int_equal(raftlock_session_open(c, NULL, &s2), 0);
	raftlock_client_close(c);
	assert_int_equal(fake_count(f, CLOSE), 2);
	fake_stop(f);
}

static void test_seq_and_ack_below(void **state)
{
	(void)state;
	struct rig r;
	raftlock_lock *l2;
	rig_up(&r, "a", 3000, NULL);
	assert_int_equal(raftlock_lock_new(r.s, "a", NULL, &l2), 0);
	assert_int_equal(raftlock_lock_try(r.l, NULL), 0);
	uint32_t left = 99;
	assert_int_equal(raftlock_lock_release(r.l, &left), 0);
	assert_int_equal(left, 0);
	assert_int_equal(raftlock_lock_token(r.l), 0);
	assert_int_equal(raftlock_lock_try(l2, NULL), 0);
	assert_int_equal(raftlock_session_close(r.s), 0);
	struct fake_entry a1 = fake_nth(r.f, ACQUIRE, 0);
	struct fake_entry r1 = fake_nth(r.f, RELEASE, 0);
	struct fake_entry a2 = fake_nth(r.f, ACQUIRE, 1);
	struct fake_entry cl = fake_nth(r.f, CLOSE, 0);
	assert_int_equal(a1.seq, 1);
	assert_int_equal(a1.ack_below, 1);
	assert_int_equal(r1.seq, 2);
	assert_int_equal(r1.ack_below, 2);
	assert_int_equal(a2.seq, 3);
	assert_int_equal(a2.ack_below, 3);
	assert_int_equal(cl.seq, 4);
	assert_int_equal(cl.ack_below, 4);
	/* two handles are two owners; the release names the first */
	assert_int_not_equal(a1.other, a2.other);
	assert_int_equal(r1.other, a1.other);
	assert_int_equal(a1.session, 1);
	rig_down(&r);
}

/* Rule 14: each session's open brings a secret of 16 bytes of its own,
 * and every request and keepalive of the session carries it. */
static void test_requests_carry_the_session_secret(void **state)
{
	(void)state;
	struct rig r;
	struct raftlock_session_options so = {.ttl_ms = RAFTLOCK_TTL_MIN_MS};
	rig_up(&r, "a", 3000, &so);
	raftlock_session *s2;
	assert_int_equal(raftlock_session_open(r.c, &so, &s2), 0);
	assert_int_equal(raftlock_lock_try(r.l, NULL), 0);
	assert_int_equal(raftlock_lock_release(r.l, NULL), 0);
	for (int i = 0; i < 500 && fake_count(r.f, KEEPALIVE) == 0; i++)
		sleep_ms(10); /* keepalives every TTL/3 */
	assert_true(fake_count(r.f, KEEPALIVE) > 0);
	struct fake_entry ka = fake_nth(r.f, KEEPALIVE, 0);
	assert_int_equal(raftlock_session_close(s2), 0);
	assert_int_equal(raftlock_session_close(r.s), 0);
	struct fake_entry o1 = fake_nth(r.f, OPEN, 0), o2 = fake_nth(r.f, OPEN, 1);
	assert_int_equal(o1.secret_len, 16);
	assert_int_equal(o2.secret_len, 16);
	assert_memory_not_equal(o1.secret, o2.secret, 16);
	struct fake_entry mine[] = {fake_nth(r.f, ACQUIRE, 0), fake_nth(r.f, RELEASE, 0),
				    fake_nth(r.f, CLOSE, 1)};
	for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++) {
		assert_int_equal(mine[i].secret_len, 16);
		assert_memory_equal(mine[i].secret, o1.secret, 16);
	}
	struct fake_entry c2 = fake_nth(r.f, CLOSE, 0);
	assert_memory_equal(c2.secret, o2.secret, 16);
	assert_int_equal(ka.n_secrets, 2);
	assert_memory_equal(ka.secret, ka.session == 1 ? o1.secret : o2.secret, 16);
	rig_down(&r);
}

static void test_abandoned_acquire_is_settled_and_released(void **state)
{
	(void)state;
	struct rig r;
	struct raftlock_session_options so = {.ttl_ms = 60000};
	rig_up(&r, "a", 400, &so);
	/* NOT_LEADER pointing at itself until the caller gives up */
	fake_set_leader(r.f, r.f->addr);
	FAKE_SET(r.f, role, FAKE_FOLLOWER);
	/* sent, never answered with a result: the outcome is unknown */
	int rv = raftlock_lock_try(r.l, NULL);
	assert_int_equal(rv, RAFTLOCK_EUNKNOWN);
	assert_non_null(strstr(raftlock_errmsg(r.c), "acquire 'a'"));
	assert_int_equal(raftlock_lock_token(r.l), 0);
	/* the client keeps asking with seq 1 until it knows the outcome:
	 * a grant nobody waits for any more is released */
	FAKE_SET(r.f, role, FAKE_LEADER);
	for (int i = 0; i < 300 && fake_count(r.f, RELEASE) == 0; i++)
		sleep_ms(10);
	int n = fake_count(r.f, ACQUIRE);
	struct fake_entry a = fake_nth(r.f, ACQUIRE, n - 1);
	struct fake_entry rel = fake_nth(r.f, RELEASE, 0);
	assert_int_equal(a.seq, 1);
	assert_int_equal(fake_count(r.f, RELEASE), 1);
	assert_int_equal(rel.other, a.other);
	assert_int_equal(rel.seq, 2);
	assert_int_equal(rel.ack_below, 2); /* seq 1 is settled now */
	sleep_ms(100);
	assert_int_equal(raftlock_lock_try(r.l, NULL), 0);
	struct fake_entry t = fake_nth(r.f, ACQUIRE, n);
	assert_int_equal(t.seq, 3);
	assert_int_equal(t.ack_below, 3);
	rig_down(&r);
}

static void test_unanswered_request_holds_ack_below(void **state)
{
	(void)state;
	struct rig r;
	raftlock_lock *l2;
	uint32_t left;
	rig_up(&r, "a", 300, NULL);
	FAKE_SET(r.f, ignore_acquires, true);
	assert_int_equal(raftlock_lock_try(r.l, NULL), RAFTLOCK_EUNKNOWN);
	FAKE_SET(r.f, ignore_acquires, false);
	assert_int_equal(raftlock_lock_new(r.s, "b", NULL, &l2), 0);
	assert_int_equal(raftlock_lock_release(l2, &left), 0);
	struct fake_entry rel = fake_nth(r.f, RELEASE, 0);
	assert_int_equal(rel.seq, 2);
	assert_int_equal(rel.ack_below, 1); /* seq 1's outcome is unknown */
	/* A call through the same handle comes after the orphan: it is asked
	 * again, with its seq, on the same connection; the grant nobody
	 * waits for is released; then the call is sent. */
	uint64_t token = 0;
	assert_int_equal(raftlock_lock_try(r.l, &token), 0);
	struct fake_entry a1 = fake_nth(r.f, ACQUIRE, 0);
	struct fake_entry a2 = fake_nth(r.f, ACQUIRE, 1);
	struct fake_entry a3 = fake_nth(r.f, ACQUIRE, 2);
	assert_int_equal(a2.seq, 1);
	assert_int_equal(a2.id, a1.id);
	assert_int_equal(a2.conn, a1.conn);
	assert_int_equal(fake_count(r.f, RELEASE), 2);
	assert_int_equal(fake_nth(r.f, RELEASE, 1).seq, 3);
	assert_int_equal(fake_nth(r.f, RELEASE, 1).ack_below, 3);
	assert_int_equal(a3.seq, 4);
	assert_int_equal(a3.ack_below, 4);
	assert_int_equal(raftlock_lock_token(r.l), token);
	rig_down(&r);
}

static void test_try_lock_busy(void **state)
{
	(void)state;
	struct rig r;
	uint64_t token = 77;
	rig_up(&r, "db/primary", 3000, NULL);
	FAKE_SET(r.f, busy, true);
	assert_int_equal(raftlock_lock_try(r.l, &token), RAFTLOCK_EBUSY);
	assert_int_equal(token, 77); /* outputs unchanged on failure */
	assert_string_equal(raftlock_errmsg(r.c), "acquire 'db/primary': "
						  "the lock is held by another owner");
	raftlock_lock_free(r.l);
	rig_down(&r);
}

/* A server of protocol 1 would not see the sequence header in the
 * envelope: a mutating request answered by one ends with EPROTO (nothing
 * executed), the session is not lost, and once the server speaks protocol
 * 2 the next request goes through with the first one's seq settled. */
static void test_old_server_refused(void **state)
{
	(void)state;
	struct rig r;
	fake_speak_protocol_1(true);
	rig_up(&r, "db/primary", 3000, NULL);
	assert_int_equal(raftlock_lock_try(r.l, NULL), RAFTLOCK_EPROTO);
	assert_true(raftlock_session_valid(r.s));
	assert_int_equal(raftlock_lock_token(r.l), 0);
	fake_speak_protocol_1(false);
	assert_int_equal(raftlock_lock_try(r.l, NULL), 0);
	struct fake_entry a1 = fake_nth(r.f, ACQUIRE, 0);
	struct fake_entry a2 = fake_nth(r.f, ACQUIRE, 1);
	assert_int_equal(a1.seq, 1);
	assert_int_equal(a2.seq, 2);
	assert_int_equal(a2.ack_below, 2); /* seq 1 settled by its EPROTO */
	raftlock_lock_free(r.l);
	rig_down(&r);
}

static void test_lock_names(void **state)
{
	(void)state;
	struct rig r;
	raftlock_lock *l = NULL;
	char name[RAFTLOCK_NAME_MAX + 2];
	rig_up(&r, "n", 3000, NULL);
	assert_int_equal(raftlock_lock_new(r.s, "", NULL, &l), RAFTLOCK_EINVAL);
	assert_int_equal(raftlock_lock_new(r.s, NULL, NULL, &l), RAFTLOCK_EINVAL);
	memset(name, 'x', sizeof name - 1);
	name[sizeof name - 1] = '\0';
	assert_int_equal(raftlock_lock_new(r.s, name, NULL, &l), RAFTLOCK_ETOOBIG);
	assert_null(l);
	name[RAFTLOCK_NAME_MAX] = '\0';
	assert_int_equal(raftlock_lock_new(r.s, name, NULL, &l), 0);
	struct raftlock_lock_options so = {.kind = RAFTLOCK_SEMAPHORE};
	raftlock_lock *l2 = NULL;
	assert_int_equal(raftlock_lock_new(r.s, "sem", &so, &l2), RAFTLOCK_EINVAL);
	assert_null(l2);
	rig_down(&r); /* frees the session and its handles */
}

static void test_blocking_acquire_gets_pushed_grant(void **state)
{
	(void)state;
	struct rig r;
	uint64_t token = 0;
	rig_up(&r, "q", 3000, NULL);
	FAKE_SET(r.f, grant_after_ms, 150);
	uint64_t t0 = clock_mono_ms();
	assert_int_equal(raftlock_lock_acquire(r.l, RAFTLOCK_EXCLUSIVE, 1, 2000, &token), 0);
	assert_true(clock_mono_ms() - t0 >= 140);
	assert_int_equal(token, 1);
	assert_true(fake_nth(r.f, ACQUIRE, 0).wait);
	assert_int_equal(fake_count(r.f, CANCEL), 0);
	rig_down(&r);
}

static void test_blocking_acquire_timeout_cancels(void **state)
{
	(void)state;
	struct rig r;
	uint64_t token = 5;
	rig_up(&r, "q", 3000, NULL);
	assert_int_equal(raftlock_lock_acquire(r.l, RAFTLOCK_EXCLUSIVE, 1, 200, &token),
			 RAFTLOCK_ETIMEDOUT);
	assert_int_equal(token, 5);
	assert_int_equal(raftlock_lock_token(r.l), 0);
	struct fake_entry a = fake_nth(r.f, ACQUIRE, 0);
	struct fake_entry cw = fake_nth(r.f, CANCEL, 0);
	assert_int_equal(fake_count(r.f, CANCEL), 1);
	assert_int_equal(cw.other, a.seq);
	assert_int_equal(cw.seq, a.seq + 1);
	/* the canceled acquire's outcome is known: ack_below moves on */
	assert_int_equal(raftlock_lock_try(r.l, NULL), 0);
	struct fake_entry t = fake_nth(r.f, ACQUIRE, 1);
	assert_int_equal(t.ack_below, t.seq);
	assert_int_equal(fake_count(r.f, RELEASE), 0);
	rig_down(&r);
}

/* The caller's timeout runs out before the server has even answered
 * "queued": the call waits for that answer, then cancels the wait
 * (ETIMEDOUT, nothing held). The answer must wake it: a blocking acquire
 * that is not timing out sleeps through it, but this one would otherwise
 * sleep to the end of its give-up bound and abandon the acquire
 * (RAFTLOCK_EUNKNOWN, no cancel). */
static void test_late_queued_answer_wakes_a_timed_out_acquire(void **state)
{
	(void)state;
	struct rig r;
	uint64_t token = 5;
	rig_up(&r, "q", 3000, NULL); /* give-up bound: 1 s */
	FAKE_SET(r.f, queued_after_ms, 200);
	assert_int_equal(raftlock_lock_acquire(r.l, RAFTLOCK_EXCLUSIVE, 1, 50, &token),
			 RAFTLOCK_ETIMEDOUT);
	assert_int_equal(token, 5);
	assert_int_equal(raftlock_lock_token(r.l), 0);
	assert_int_equal(fake_count(r.f, CANCEL), 1);
	assert_int_equal(fake_nth(r.f, CANCEL, 0).other, fake_nth(r.f, ACQUIRE, 0).seq);
	rig_down(&r);
}

/* The grant races the cancel; the cancel answers "granted first" with the
 * token (cancel_status 0) or "knows neither" (ENOTFOUND, then the client
 * asks the acquire again). Either way the grant came first: the call
 * returns it, and the caller holds the lock (GUARANTEES rule 12). */
/* A rig whose grant is pushed with the answer to the cancel, which answers
 * cancel_status. */
static void rig_up_racing_cancel(struct rig *r, int cancel_status)
{
	rig_up(r, "q", 3000, NULL);
	FAKE_SET(r->f, grant_after_ms, 100000); /* not before the cancel */
	FAKE_SET(r->f, grant_on_cancel, true);
	FAKE_SET(r->f, cancel_status, cancel_status);
}

static void grant_racing_cancel(int cancel_status)
{
	struct rig r;
	uint64_t token = 0;
	rig_up_racing_cancel(&r, cancel_status);
	assert_int_equal(raftlock_lock_acquire(r.l, RAFTLOCK_EXCLUSIVE, 1, 200, &token), 0);
	assert_int_equal(token, 1);
	assert_int_equal(raftlock_lock_token(r.l), 1);
	assert_int_equal(fake_count(r.f, RELEASE), 0);
	uint32_t left = 9;
	assert_int_equal(raftlock_lock_release(r.l, &left), 0);
	assert_int_equal(left, 0);
	/* the release acknowledges the queued acquire's record */
	struct fake_entry a = fake_nth(r.f, ACQUIRE, 0);
	struct fake_entry rel = fake_nth(r.f, RELEASE, 0);
	assert_int_equal(rel.other, a.other);
	assert_int_equal(rel.n_acked, 1);
	assert_int_equal(rel.acked[0], a.seq);
	assert_int_equal(raftlock_lock_token(r.l), 0);
	rig_down(&r);
}

static void test_grant_racing_cancel_is_released(void **state)
{
	(void)state;
	grant_racing_cancel(0);
	grant_racing_cancel(RAFTLOCK_ENOTFOUND);
}

/* The grant's push comes while the cancel is in flight, then the grant is
 * revoked and its revocation's push is lost: the cancel's answer
 * ENOTHOLDER is final, and the pushed token is not held. */
static void test_grant_revoked_while_canceling_is_not_held(void **state)
{
	(void)state;
	struct rig r;
	uint64_t token = 0;
	rig_up_racing_cancel(&r, RAFTLOCK_ENOTHOLDER);
	assert_int_equal(raftlock_lock_acquire(r.l, RAFTLOCK_EXCLUSIVE, 1, 200, &token),
			 RAFTLOCK_ENOTHOLDER);
	assert_int_equal(raftlock_lock_token(r.l), 0);
	assert_int_equal(fake_count(r.f, CANCEL), 1);
	assert_int_equal(fake_count(r.f, ACQUIRE), 1); /* not asked again */
	assert_int_equal(fake_count(r.f, RELEASE), 0);
	rig_down(&r);
}

/* The RAFTLOCK_LOCK_REVOKED events a session's on_lock_event heard. */
struct revocations {
	pthread_mutex_t mu;
	int n;
	uint64_t token;
};

static void note_revocation(raftlock_session *s, enum raftlock_lock_event event, const char *name,
			    uint64_t token, void *arg)
{
	(void)s;
	(void)name;
	struct revocations *rv = arg;
	pthread_mutex_lock(&rv->mu);
	if (event == RAFTLOCK_LOCK_REVOKED) {
		rv->n++;
		rv->token = token;
	}
	pthread_mutex_unlock(&rv->mu);
}

/* Waits until on_lock_event told of one revocation, of token. */
static void revocation_seen(struct revocations *seen, uint64_t token)
{
	for (int i = 0; i < 200; i++) {
		pthread_mutex_lock(&seen->mu);
		int n = seen->n;
		pthread_mutex_unlock(&seen->mu);
		if (n > 0)
			break;
		sleep_ms(5);
	}
	pthread_mutex_lock(&seen->mu);
	assert_int_equal(seen->n, 1);
	assert_int_equal(seen->token, token);
	pthread_mutex_unlock(&seen->mu);
}

/* The grant a blocking acquire waits for and its revocation (an admin
 * revoke, a short max_hold_ms) come in one read, so the I/O thread
 * dispatches both before the caller wakes up to take the grant in. The
 * call must not return the revoked token as a live grant, nor leave it on
 * the handle (raftlock.h: RAFTLOCK_ENOTHOLDER; GUARANTEES rule 11b). With
 * after_timeout both come while the cancel of the timed-out wait is in
 * flight, and the cancel then answers "granted first". */
static void revoked_grant_is_not_held(bool after_timeout)
{
	struct rig r;
	struct revocations seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct raftlock_session_options so = {.on_lock_event = note_revocation,
					      .on_lock_event_arg = &seen};
	uint64_t token = 7;
	rig_up(&r, "q", 3000, &so);
	FAKE_SET(r.f, revoke_with_grant, true);
	if (after_timeout) {
		FAKE_SET(r.f, grant_after_ms, 100000); /* not before the cancel */
		FAKE_SET(r.f, grant_on_cancel, true);
	} else {
		FAKE_SET(r.f, grant_after_ms, 100);
	}
	assert_int_equal(raftlock_lock_acquire(r.l, RAFTLOCK_EXCLUSIVE, 1,
					       after_timeout ? 200 : 5000, &token),
			 RAFTLOCK_ENOTHOLDER);
	assert_int_equal(token, 7);
	assert_int_equal(raftlock_lock_token(r.l), 0);
	assert_int_equal(fake_count(r.f, CANCEL), after_timeout ? 1 : 0);
	revocation_seen(&seen, 1);
	/* the next grant is held as any other */
	FAKE_SET(r.f, revoke_with_grant, false);
	assert_int_equal(raftlock_lock_try(r.l, &token), 0);
	assert_int_equal(token, 2);
	assert_int_equal(raftlock_lock_token(r.l), 2);
	rig_down(&r);
}

static void test_grant_revoked_before_the_caller_took_it_is_not_held(void **state)
{
	(void)state;
	revoked_grant_is_not_held(false);
	revoked_grant_is_not_held(true);
}

/* What a single lock's asynchronous acquire's callback was told, and the
 * handle's token as it ran. */
struct lock_done {
	pthread_mutex_t mu;
	int calls;
	int status;
	uint64_t value;
	uint64_t held;
};

static void note_lock_done(raftlock_lock *l, int status, uint64_t value, void *arg)
{
	struct lock_done *d = arg;
	pthread_mutex_lock(&d->mu);
	d->calls++;
	d->status = status;
	d->value = value;
	d->held = raftlock_lock_token(l);
	pthread_mutex_unlock(&d->mu);
}

/* Waits for the one call of note_lock_done on d and returns its status. */
static int lock_done_status(struct lock_done *d)
{
	int calls = 0;
	for (int i = 0; i < 400 && calls == 0; i++) {
		sleep_ms(5);
		pthread_mutex_lock(&d->mu);
		calls = d->calls;
		pthread_mutex_unlock(&d->mu);
	}
	sleep_ms(20); /* no second call */
	pthread_mutex_lock(&d->mu);
	int status = d->status, n = d->calls;
	pthread_mutex_unlock(&d->mu);
	assert_int_equal(n, 1);
	return status;
}

enum revoked_call { REVOKED_TRY, REVOKED_TRY_ASYNC, REVOKED_ACQUIRE_ASYNC };

/* As revoked_grant_is_not_held, for the calls whose answer the I/O thread
 * applies as it reads it: a try-lock (blocking or not) and an
 * asynchronous acquire that waits. The revocation read with the grant is
 * dispatched after it, yet before the caller (the callback) takes it in:
 * status RAFTLOCK_ENOTHOLDER, value 0, and the handle holds nothing, also
 * as the callback runs (raftlock.h; GUARANTEES rule 11b). */
static void revoked_grant_is_not_taken(enum revoked_call call)
{
	struct rig r;
	struct revocations seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct raftlock_session_options so = {.on_lock_event = note_revocation,
					      .on_lock_event_arg = &seen};
	struct lock_done d = {.mu = PTHREAD_MUTEX_INITIALIZER, .value = 7, .held = 7};
	uint64_t token = 7;
	rig_up(&r, "q", 3000, &so);
	FAKE_SET(r.f, event_with_grant, RAFTLOCK__SESSION_EVENT_KIND__SESSION_EVENT_REVOKED);
	FAKE_SET(r.f, revoke_with_grant, true);
	FAKE_SET(r.f, grant_after_ms, 100);
	switch (call) {
	case REVOKED_TRY:
		assert_int_equal(raftlock_lock_try(r.l, &token), RAFTLOCK_ENOTHOLDER);
		assert_int_equal(token, 7);
		break;
	case REVOKED_TRY_ASYNC:
		assert_int_equal(raftlock_lock_try_async(r.l, note_lock_done, &d), 0);
		break;
	case REVOKED_ACQUIRE_ASYNC:
		assert_int_equal(raftlock_lock_acquire_async(r.l, RAFTLOCK_EXCLUSIVE, 1, 5000,
							     note_lock_done, &d),
				 0);
		break;
	}
	if (call != REVOKED_TRY) {
		assert_int_equal(lock_done_status(&d), RAFTLOCK_ENOTHOLDER);
		assert_int_equal(d.value, 0);
		assert_int_equal(d.held, 0);
	}
	assert_int_equal(raftlock_lock_token(r.l), 0);
	revocation_seen(&seen, 1);
	/* the next grant is held as any other */
	FAKE_SET(r.f, event_with_grant, 0);
	FAKE_SET(r.f, revoke_with_grant, false);
	assert_int_equal(raftlock_lock_try(r.l, &token), 0);
	assert_int_equal(token, 2);
	assert_int_equal(raftlock_lock_token(r.l), 2);
	rig_down(&r);
}

/* An acquire of a handle that holds, answered ENOTHOLDER (the server read
 * it from its record after the grant was revoked, the revocation's push
 * lost with a connection): the handle's earlier hold is gone too. */
static void test_enotholder_answer_drops_the_hold(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, "a", 2000, NULL);
	uint64_t token = 0;
	assert_int_equal(raftlock_lock_try(r.l, &token), 0);
	assert_true(token != 0);
	assert_int_equal(raftlock_lock_token(r.l), token);
	FAKE_SET(r.f, revoked_acquires, 1);
	assert_int_equal(raftlock_lock_try(r.l, &token), RAFTLOCK_ENOTHOLDER);
	assert_int_equal(raftlock_lock_token(r.l), 0);
	rig_down(&r);
}

static void test_try_grant_revoked_before_the_caller_took_it_is_not_held(void **state)
{
	(void)state;
	revoked_grant_is_not_taken(REVOKED_TRY);
	revoked_grant_is_not_taken(REVOKED_TRY_ASYNC);
}

static void test_async_grant_revoked_before_the_callback_is_not_held(void **state)
{
	(void)state;
	revoked_grant_is_not_taken(REVOKED_ACQUIRE_ASYNC);
}

/* How many releases of the lock `name` the fake got. */
static int releases_of(struct fake *f, const char *name)
{
	int n = 0, all = fake_count(f, RELEASE);
	for (int k = 0; k < all; k++)
		n += strcmp(fake_nth(f, RELEASE, k).name, name) == 0;
	return n;
}

/* What an asynchronous set acquire's callback was told, and the set's
 * tokens as it ran. */
struct set_done {
	pthread_mutex_t mu;
	int calls;
	int status;
	uint64_t tokens[3];
};

static void note_set_done(raftlock_multi *set, int status, void *arg)
{
	struct set_done *d = arg;
	pthread_mutex_lock(&d->mu);
	d->calls++;
	d->status = status;
	for (size_t i = 0; i < 3; i++)
		d->tokens[i] = raftlock_multi_token(set, i);
	pthread_mutex_unlock(&d->mu);
}

/* Runs raftlock_multi_acquire_async() on m and waits for its callback:
 * its status, each token 0 as the callback ran unless want_tokens. The
 * call is made again while the releases of an earlier grant are still
 * being settled (RAFTLOCK_ESTATE, as raftlock.h says). */
static int set_acquire_async(raftlock_multi *m, bool want_tokens)
{
	struct set_done d = {.mu = PTHREAD_MUTEX_INITIALIZER};
	int rv = RAFTLOCK_ESTATE;
	for (int i = 0; i < 400 && rv == RAFTLOCK_ESTATE; i++)
		if ((rv = raftlock_multi_acquire_async(m, 5000, note_set_done, &d)) ==
		    RAFTLOCK_ESTATE)
			sleep_ms(5);
	assert_int_equal(rv, 0);
	int calls = 0;
	for (int i = 0; i < 400 && calls == 0; i++) {
		sleep_ms(5);
		pthread_mutex_lock(&d.mu);
		calls = d.calls;
		pthread_mutex_unlock(&d.mu);
	}
	sleep_ms(20); /* no second call */
	pthread_mutex_lock(&d.mu);
	int status = d.status, n = d.calls;
	uint64_t tokens[3];
	memcpy(tokens, d.tokens, sizeof tokens);
	pthread_mutex_unlock(&d.mu);
	assert_int_equal(n, 1);
	if (status != 0 && want_tokens)
		fail_msg("status %d", status);
	for (size_t i = 0; i < 3; i++)
		if ((tokens[i] != 0) != want_tokens)
			fail_msg("status %d, token %zu: %llu", status, i,
				 (unsigned long long)tokens[i]);
	return status;
}

/* How a test takes a set: raftlock_multi_acquire() that waits or does
 * not (a try), raftlock_multi_acquire_async(). */
enum set_call { SET_WAIT, SET_TRY, SET_ASYNC };

static int set_acquire(raftlock_multi *m, enum set_call how, bool want_tokens)
{
	if (how == SET_ASYNC)
		return set_acquire_async(m, want_tokens);
	return raftlock_multi_acquire(m, how == SET_TRY ? 0 : 5000);
}

/* A set's grant comes with the revocation of its lock `revoked` (in name
 * order) in one read, so the I/O thread dispatches both before the
 * caller of the set acquire (a try's woken caller, async: its callback)
 * takes the grant in. A
 * set is held whole or not at all: the call returns RAFTLOCK_ENOTHOLDER,
 * no handle of the set keeps a token, and the library releases the other
 * locks in the background (raftlock.h; GUARANTEES rule 11b), whether the
 * revoked lock leads the set or not. */
static void set_grant_with_a_lock_revoked(size_t revoked, enum set_call how)
{
	struct rig r;
	struct revocations seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct raftlock_session_options so = {.on_lock_event = note_revocation,
					      .on_lock_event_arg = &seen};
	rig_up(&r, "x", 3000, &so);
	const char *names[] = {"a", "b", "c"};
	struct raftlock_multi_item items[] = {{.name = "a"}, {.name = "b"}, {.name = "c"}};
	raftlock_multi *m = NULL;
	assert_int_equal(raftlock_multi_new(r.s, items, 3, &m), 0);
	FAKE_SET(r.f, revoke_set_item, (int)revoked);
	FAKE_SET(r.f, revoke_with_grant, true);
	assert_int_equal(set_acquire(m, how, false), RAFTLOCK_ENOTHOLDER);
	FAKE_SET(r.f, revoke_with_grant, false);
	assert_int_equal(fake_count(r.f, MULTI_ACQUIRE), 1);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(raftlock_multi_token(m, i), 0);
	assert_int_equal(raftlock_multi_release(m), RAFTLOCK_ENOTHOLDER);
	for (int i = 0; i < 200 && fake_count(r.f, RELEASE) < 2; i++)
		sleep_ms(5);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(releases_of(r.f, names[i]), i == revoked ? 0 : 1);
	revocation_seen(&seen, revoked + 1); /* the fake's tokens: 1, 2, 3 */
	/* the set's next grant is held as any other */
	assert_int_equal(set_acquire(m, how, true), 0);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(raftlock_multi_token(m, i), 4 + i);
	raftlock_multi_free(m);
	rig_down(&r);
}

static void test_set_grant_with_a_lock_revoked_holds_none(void **state)
{
	(void)state;
	set_grant_with_a_lock_revoked(0, SET_WAIT);
	set_grant_with_a_lock_revoked(2, SET_WAIT);
	set_grant_with_a_lock_revoked(0, SET_TRY);
	set_grant_with_a_lock_revoked(2, SET_TRY);
}

/* As test_set_grant_with_a_lock_revoked_holds_none, through
 * raftlock_multi_acquire_async(): the I/O thread applies the grant as it
 * reads it and the revocation read with it only after, both before the
 * callback runs, which is the caller taking the grant in. */
static void test_async_set_grant_with_a_lock_revoked_holds_none(void **state)
{
	(void)state;
	set_grant_with_a_lock_revoked(0, SET_ASYNC);
	set_grant_with_a_lock_revoked(1, SET_ASYNC);
	set_grant_with_a_lock_revoked(2, SET_ASYNC);
}

/* How a test takes the grant that comes with its session's loss. */
enum lost_call { LOST_TRY, LOST_SET_ASYNC, LOST_CANCEL };

/* A grant and its session's loss (another request of the session answered
 * RAFTLOCK_ESESSION) come in one read, so the I/O thread dispatches both
 * before the caller takes the grant in: a try-lock's woken caller, an
 * asynchronous set acquire's callback, or a blocking acquire whose timeout
 * ran out, taking its cancel's "granted first". A lost session holds
 * nothing: the call returns RAFTLOCK_ESESSION, no token (raftlock.h). */
static void grant_read_with_the_loss(enum lost_call call)
{
	struct rig r;
	struct lock_done other = {.mu = PTHREAD_MUTEX_INITIALIZER};
	raftlock_lock *l2 = NULL;
	uint64_t token = 7;
	rig_up(&r, "q", 3000, NULL);
	assert_int_equal(raftlock_lock_new(r.s, "o", NULL, &l2), 0);
	FAKE_SET(r.f, lose_with_grant, true);
	/* held by the fake, answered RAFTLOCK_ESESSION right after the grant */
	assert_int_equal(raftlock_lock_try_async(l2, note_lock_done, &other), 0);
	for (int i = 0; i < 400 && fake_count(r.f, ACQUIRE) == 0; i++)
		sleep_ms(5);
	if (call == LOST_TRY) {
		assert_int_equal(raftlock_lock_try(r.l, &token), RAFTLOCK_ESESSION);
	} else if (call == LOST_CANCEL) {
		FAKE_SET(r.f, grant_after_ms, 100000); /* not before the cancel */
		FAKE_SET(r.f, grant_on_cancel, true);
		assert_int_equal(raftlock_lock_acquire(r.l, RAFTLOCK_EXCLUSIVE, 1, 200, &token),
				 RAFTLOCK_ESESSION);
		assert_int_equal(fake_count(r.f, CANCEL), 1);
	} else {
		struct raftlock_multi_item items[] = {{.name = "a"}, {.name = "b"}, {.name = "c"}};
		raftlock_multi *m = NULL;
		assert_int_equal(raftlock_multi_new(r.s, items, 3, &m), 0);
		assert_int_equal(set_acquire_async(m, false), RAFTLOCK_ESESSION);
		raftlock_multi_free(m);
	}
	assert_int_equal(token, 7);
	assert_int_equal(raftlock_lock_token(r.l), 0);
	assert_int_equal(lock_done_status(&other), RAFTLOCK_ESESSION);
	assert_int_equal(raftlock_session_valid_until(r.s), 0);
	rig_down(&r);
}

static void test_try_grant_read_with_the_loss_is_esession(void **state)
{
	(void)state;
	grant_read_with_the_loss(LOST_TRY);
}

static void test_async_set_grant_read_with_the_loss_is_esession(void **state)
{
	(void)state;
	grant_read_with_the_loss(LOST_SET_ASYNC);
}

/* The cancel of a timed-out acquire answered "granted first" after the
 * session's loss was read: RAFTLOCK_ESESSION, not that token. */
static void test_cancel_granted_first_with_the_loss_is_esession(void **state)
{
	(void)state;
	grant_read_with_the_loss(LOST_CANCEL);
}

/* A lock's times above the bounds a cluster puts on them are refused by
 * raftlock_lock_new() and raftlock_multi_new() with RAFTLOCK_EINVAL,
 * naming the field, and nothing is sent; the bounds themselves are taken
 * and sent (raftlock.h). */
static void test_lock_times_above_bounds_refused_unsent(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, "x", 3000, NULL);
	const struct {
		struct raftlock_lock_options opts;
		const char *field;
	} over[] = {
		{{.lock_delay_ms = RAFTLOCK_LOCK_DELAY_MAX_MS + 1}, "lock_delay_ms"},
		{{.max_hold_ms = RAFTLOCK_MAX_HOLD_MAX_MS + 1}, "max_hold_ms"},
		{{.max_hold_ms = 1000, .revoke_grace_ms = RAFTLOCK_REVOKE_GRACE_MAX_MS + 1},
		 "revoke_grace_ms"},
		{{.lock_delay_ms = UINT_MAX}, "lock_delay_ms"},
	};
	for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
		raftlock_lock *l = NULL;
		assert_int_equal(raftlock_lock_new(r.s, "big", &over[i].opts, &l), RAFTLOCK_EINVAL);
		assert_null(l);
		if (strstr(raftlock_errmsg(r.c), over[i].field) == NULL)
			fail_msg("message: %s", raftlock_errmsg(r.c));
	}
	struct raftlock_multi_item items[] = {{.name = "a", .opts = &over[0].opts}, {.name = "b"}};
	raftlock_multi *m = NULL;
	assert_int_equal(raftlock_multi_new(r.s, items, 2, &m), RAFTLOCK_EINVAL);
	assert_null(m);
	assert_int_equal(fake_count(r.f, ACQUIRE), 0);
	assert_int_equal(fake_count(r.f, MULTI_ACQUIRE), 0);
	struct raftlock_lock_options at = {.lock_delay_ms = RAFTLOCK_LOCK_DELAY_MAX_MS,
					   .max_hold_ms = RAFTLOCK_MAX_HOLD_MAX_MS,
					   .revoke_grace_ms = RAFTLOCK_REVOKE_GRACE_MAX_MS};
	raftlock_lock *l = NULL;
	assert_int_equal(raftlock_lock_new(r.s, "bounds", &at, &l), 0);
	uint64_t token = 0;
	assert_int_equal(raftlock_lock_try(l, &token), 0);
	assert_int_equal(fake_count(r.f, ACQUIRE), 1);
	raftlock_lock_free(l);
	rig_down(&r);
}

/* Election values of several lengths (NULL: none), set over and over by
 * one thread while another acquires through the same handle. */
#define VALUE_LONG 3000
struct value_setter {
	raftlock_lock *l;
	atomic_bool stop;
	int failures;
};

static void *set_values(void *arg)
{
	struct value_setter *v = arg;
	static char long_value[VALUE_LONG + 1];
	memset(long_value, 'v', VALUE_LONG);
	const char *values[] = {"a", NULL, long_value, "", "leader 10.0.0.7:7000"};
	for (int i = 0; i < 1000000 && !atomic_load(&v->stop); i++)
		v->failures += raftlock_lock_set_value(v->l, values[i % 5]) != 0;
	return NULL;
}

/* raftlock_lock_set_value() frees the value it replaces: an acquire in
 * another thread reads it only as its request is encoded, under the
 * client's lock, so it never sends freed memory (the ASan build is the
 * check: a race shows as a use after free). */
static void test_set_value_races_acquires(void **state)
{
	(void)state;
	struct rig r;
	pthread_t t;
	rig_up(&r, "elect", 3000, NULL);
	struct value_setter v = {.l = r.l};
	atomic_init(&v.stop, false);
	assert_int_equal(pthread_create(&t, NULL, set_values, &v), 0);
	for (int i = 0; i < 2000; i++) {
		assert_int_equal(raftlock_lock_try(r.l, NULL), 0);
		assert_int_equal(raftlock_lock_release(r.l, NULL), 0);
	}
	atomic_store(&v.stop, true);
	pthread_join(t, NULL);
	assert_int_equal(v.failures, 0);
	int n = fake_count(r.f, ACQUIRE);
	assert_true(n > 0);
	for (int k = 0; k < n; k++) {
		size_t len = fake_nth(r.f, ACQUIRE, k).value_len;
		assert_true(len == 0 || len == 1 || len == VALUE_LONG ||
			    len == strlen("leader 10.0.0.7:7000"));
	}
	rig_down(&r);
}

struct acquirer {
	raftlock_lock *l;
	int rv;
};

static void *acquire_forever(void *arg)
{
	struct acquirer *a = arg;
	a->rv = raftlock_lock_acquire(a->l, RAFTLOCK_EXCLUSIVE, 1, -1, NULL);
	return NULL;
}

static void test_close_ends_a_blocked_acquire(void **state)
{
	(void)state;
	struct rig r;
	pthread_t t;
	rig_up(&r, "q", 3000, NULL);
	struct acquirer a = {.l = r.l, .rv = 1};
	assert_int_equal(pthread_create(&t, NULL, acquire_forever, &a), 0);
	while (fake_count(r.f, ACQUIRE) == 0)
		sleep_ms(5);
	sleep_ms(100);
	assert_int_equal(a.rv, 1); /* still waiting: nobody grants */
	assert_int_equal(raftlock_session_close(r.s), 0);
	pthread_join(t, NULL);
	assert_int_equal(a.rv, RAFTLOCK_ECANCELED);
	assert_int_equal(fake_count(r.f, CLOSE), 1);
	assert_int_equal(fake_count(r.f, CANCEL), 0);
	assert_true(fake_nth(r.f, ACQUIRE, 0).wait);
	/* the queued acquire is left out of ack_below (its record stays
	 * until acknowledged) */
	struct fake_entry cl = fake_nth(r.f, CLOSE, 0);
	assert_int_equal(cl.ack_below, cl.seq);
	rig_down(&r);
}

struct campaigner {
	raftlock_session *s;
	raftlock_leader *ld;
	int rv;
};

static void *campaign_now(void *arg)
{
	struct campaigner *c = arg;
	c->rv = raftlock_campaign(c->s, "lead", "me", 0, &c->ld);
	return NULL;
}

/* A close of the session in another thread waits for a campaign under
 * way, which frees its own handle: a lost session's close frees the
 * session's handles at once, without a word to the server, and must not
 * free the campaign's from under it (ASan sees the use after free).
 * Rounds, as the two threads race once the try-lock ends. */
static void test_close_during_a_campaign(void **state)
{
	(void)state;
	for (int round = 0; round < 5; round++) {
		struct rig r;
		pthread_t t;
		rig_up(&r, "q", 200, NULL);
		FAKE_SET(r.f, ignore_acquires, true);
		struct campaigner c = {.s = r.s, .rv = 1};
		assert_int_equal(pthread_create(&t, NULL, campaign_now, &c), 0);
		while (fake_count(r.f, ACQUIRE) == 0)
			sleep_ms(1);
		pthread_mutex_lock(&r.c->t.mu);
		session_mark_lost(r.s, RAFTLOCK_ESESSION);
		pthread_mutex_unlock(&r.c->t.mu);
		raftlock_session_close(r.s);
		pthread_join(t, NULL);
		assert_int_not_equal(c.rv, 0);
		assert_null(c.ld);
		rig_down(&r);
	}
}

/* A proclaim whose outcome is unknown is still being sent: the next one
 * of the leadership goes out only once it is answered, so the value
 * published last is the one proclaimed last (raftlock.h: the next call
 * through the same handle waits for that first). */
static void test_proclaims_apply_in_call_order(void **state)
{
	(void)state;
	struct rig r;
	raftlock_leader *ld = NULL;
	rig_up(&r, "a", 300, NULL);
	assert_int_equal(raftlock_campaign(r.s, "e", "first", 0, &ld), 0);
	FAKE_SET(r.f, ignore_proclaims, 1);
	assert_int_equal(raftlock_proclaim(ld, "second"), RAFTLOCK_EUNKNOWN);
	assert_int_equal(raftlock_proclaim(ld, "third"), 0);
	struct fake_entry second = fake_nth(r.f, PROCLAIM, 0);
	assert_int_equal(fake_count(r.f, PROCLAIM), 3);
	assert_int_equal(fake_nth(r.f, PROCLAIM, 1).seq, second.seq); /* asked again */
	assert_int_equal(fake_nth(r.f, PROCLAIM, 2).seq, second.seq + 1);
	assert_int_equal(raftlock_resign(ld), 0);
	rig_down(&r);
}

/* A close that returns 0 though the node answered RAFTLOCK_ESESSION with
 * a message (a session it no longer knows; lost: the best-effort close of
 * a session lost by time) leaves no note of it: a later RAFTLOCK_ESESSION
 * of the thread, on another session, says nothing of that node's text. */
static void close_answered_esession(bool lost)
{
	struct rig r;
	raftlock_session *other = NULL;
	raftlock_lock *l = NULL;
	rig_up(&r, "a", 1000, NULL);
	assert_int_equal(raftlock_session_open(r.c, NULL, &other), 0);
	assert_int_equal(raftlock_lock_new(other, "b", NULL, &l), 0);
	FAKE_SET(r.f, closed_session, raftlock_session_id(r.s));
	FAKE_SET(r.f, close_message, "said by node 3");
	pthread_mutex_lock(&r.c->t.mu);
	if (lost)
		session_mark_lost(r.s, RAFTLOCK_ETIMEDOUT);
	session_mark_lost(other, RAFTLOCK_ESESSION);
	pthread_mutex_unlock(&r.c->t.mu);
	assert_int_equal(raftlock_session_close(r.s), 0);
	assert_int_equal(fake_count(r.f, CLOSE), 1);
	assert_int_equal(raftlock_lock_try(l, NULL), RAFTLOCK_ESESSION);
	assert_non_null(strstr(raftlock_errmsg(r.c), "'b'"));
	if (strstr(raftlock_errmsg(r.c), "node 3") != NULL)
		fail_msg("message: %s", raftlock_errmsg(r.c));
	raftlock_client_close(r.c);
	fake_stop(r.f);
}

static void test_close_leaves_no_note(void **state)
{
	(void)state;
	close_answered_esession(false);
	close_answered_esession(true);
}

/* What the calling thread's message says after a call that returned
 * RAFTLOCK_EINVAL: that call's error, not the one before it (a name too
 * long, failed first). */
#define ASSERT_EINVAL_SAID(c, call)                                                              \
	do {                                                                                     \
		struct raftlock_lock_list *ll_ = NULL;                                           \
		assert_int_equal(raftlock_lock_list(c, long_name, NULL, 0, false, &ll_),         \
				 RAFTLOCK_ETOOBIG);                                              \
		assert_int_equal((call), RAFTLOCK_EINVAL);                                       \
		assert_non_null(strstr(raftlock_errmsg(c), raftlock_strerror(RAFTLOCK_EINVAL))); \
	} while (0)

static void ignore_lock_cb(raftlock_lock *l, int status, uint64_t value, void *arg)
{
	(void)l, (void)status, (void)value, (void)arg;
}

/* A NULL pointer argument of a call on a client, session, handle, set or
 * leadership is RAFTLOCK_EINVAL, and raftlock_errmsg() says so. */
static void test_null_arguments_say_einval(void **state)
{
	(void)state;
	struct rig r;
	char long_name[RAFTLOCK_NAME_MAX + 2];
	memset(long_name, 'x', sizeof long_name - 1);
	long_name[sizeof long_name - 1] = '\0';
	rig_up(&r, "a", 1000, NULL);
	raftlock_client *c = r.c;
	struct raftlock_multi_item item = {.name = "m"};
	raftlock_multi *m = NULL;
	raftlock_leader *ld = NULL;
	assert_int_equal(raftlock_multi_new(r.s, &item, 1, &m), 0);
	assert_int_equal(raftlock_campaign(r.s, "e", "v", 0, &ld), 0);
	ASSERT_EINVAL_SAID(c, raftlock_session_open(c, NULL, NULL));
	ASSERT_EINVAL_SAID(c, raftlock_lock_new(r.s, "b", NULL, NULL));
	ASSERT_EINVAL_SAID(c, raftlock_lock_try_async(r.l, NULL, NULL));
	ASSERT_EINVAL_SAID(c,
			   raftlock_lock_acquire_async(r.l, RAFTLOCK_EXCLUSIVE, 1, -1, NULL, NULL));
	ASSERT_EINVAL_SAID(c, raftlock_lock_release_async(r.l, NULL, NULL));
	ASSERT_EINVAL_SAID(c, raftlock_lock_acquire_async(r.l, (enum raftlock_mode)7, 1, -1,
							  ignore_lock_cb, NULL));
	ASSERT_EINVAL_SAID(c, raftlock_multi_new(r.s, NULL, 1, &m));
	ASSERT_EINVAL_SAID(c, raftlock_multi_new(r.s, &item, 1, NULL));
	ASSERT_EINVAL_SAID(c, raftlock_multi_acquire_async(m, 0, NULL, NULL));
	ASSERT_EINVAL_SAID(c, raftlock_proclaim(ld, NULL));
	ASSERT_EINVAL_SAID(c, raftlock_check_token(c, "a", 1, NULL));
	ASSERT_EINVAL_SAID(c, raftlock_status_get(c, NULL, NULL));
	ASSERT_EINVAL_SAID(c, raftlock_lock_get(c, "a", false, NULL));
	ASSERT_EINVAL_SAID(c, raftlock_lock_list(c, "", NULL, 0, false, NULL));
	ASSERT_EINVAL_SAID(c, raftlock_session_list(c, 0, 0, false, NULL));
	ASSERT_EINVAL_SAID(c, raftlock_acl_list(c, NULL, NULL, 0, false, NULL));
	ASSERT_EINVAL_SAID(c, raftlock_member_list(c, NULL));
	ASSERT_EINVAL_SAID(c, raftlock_member_join_list(c, 1, 1, NULL, NULL));
	assert_int_equal(raftlock_resign(ld), 0);
	raftlock_multi_free(m);
	rig_down(&r);
}

struct lost_seen {
	pthread_mutex_t mu;
	int calls;
	int reason;
	raftlock_session *session;
};

static void on_lost(raftlock_session *s, int reason, void *arg)
{
	struct lost_seen *l = arg;
	pthread_mutex_lock(&l->mu);
	l->calls++;
	l->reason = reason;
	l->session = s;
	pthread_mutex_unlock(&l->mu);
}

static int lost_calls(struct lost_seen *l)
{
	pthread_mutex_lock(&l->mu);
	int n = l->calls;
	pthread_mutex_unlock(&l->mu);
	return n;
}

/* Waits up to max_ms for the first on_lost call. */
static void lost_wait(struct lost_seen *l, unsigned max_ms)
{
	for (unsigned i = 0; i < max_ms / 10 && lost_calls(l) == 0; i++)
		sleep_ms(10);
}

/* What on_event saw, in order. */
struct events_seen {
	pthread_mutex_t mu;
	int ev[16];
	int reason[16];
	uint64_t at[16];    /* the client's boot clock when it ran */
	uint64_t valid[16]; /* valid_until then */
	int n;
};

static void on_event(raftlock_session *s, enum raftlock_session_event ev, int reason, void *arg)
{
	struct events_seen *e = arg;
	uint64_t v = raftlock_session_valid_until(s);
	pthread_mutex_lock(&e->mu);
	if (e->n < 16) {
		e->ev[e->n] = ev;
		e->reason[e->n] = reason;
		e->at[e->n] = transport_boot_ms(s->t);
		e->valid[e->n] = v;
		e->n++;
	}
	pthread_mutex_unlock(&e->mu);
}

static int events_count(struct events_seen *e)
{
	pthread_mutex_lock(&e->mu);
	int n = e->n;
	pthread_mutex_unlock(&e->mu);
	return n;
}

/* Validity runs out while keepalives go unanswered: the session is in
 * jeopardy (not valid, not lost, still renewed) from the first instant its
 * validity ends; the first acknowledged keepalive makes it valid again,
 * from that keepalive's send time. */
static void test_silent_keepalives_bring_jeopardy_then_safe(void **state)
{
	(void)state;
	struct rig r;
	struct lost_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct events_seen ev = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct raftlock_session_options so = {.ttl_ms = 1000,
					      .on_lost = on_lost,
					      .on_lost_arg = &seen,
					      .on_event = on_event,
					      .on_event_arg = &ev};
	rig_up_stopped(&r, "x", 3000, &so);
	uint64_t t0 = clock_now(r.c);
	assert_int_equal(raftlock_session_valid_until(r.s), session_validity_ms(t0, 1000));
	/* a keepalive is due every 333 ms: the one sent at 400 is answered */
	clock_run(r.c, 500, 100);
	assert_int_equal(fake_count(r.f, KEEPALIVE), 1);
	assert_int_equal(raftlock_session_valid_until(r.s), session_validity_ms(t0 + 400, 1000));
	assert_true(raftlock_session_valid(r.s));

	FAKE_SET(r.f, keepalive_silent, true);
	uint64_t last_valid = raftlock_session_valid_until(r.s);
	clock_run(r.c, last_valid - 1 - clock_now(r.c), 100);
	assert_true(raftlock_session_valid(r.s));
	assert_int_equal(events_count(&ev), 0);
	clock_step(r.c, 1);
	assert_int_equal(events_count(&ev), 1);
	assert_int_equal(ev.ev[0], RAFTLOCK_SESSION_JEOPARDY);
	assert_int_equal(ev.reason[0], RAFTLOCK_ETIMEDOUT);
	assert_int_equal(ev.at[0], last_valid);
	assert_int_equal(ev.valid[0], last_valid);
	assert_false(raftlock_session_valid(r.s));
	assert_int_equal(raftlock_session_valid_until(r.s), last_valid);
	/* still renewed, and the handle still works */
	int sent = fake_count(r.f, KEEPALIVE);
	clock_run(r.c, 800, 100);
	assert_true(fake_count(r.f, KEEPALIVE) >= sent + 2);
	assert_int_equal(lost_calls(&seen), 0);
	assert_int_equal(raftlock_lock_try(r.l, NULL), 0);

	/* answers resume (a failover ended): valid again, told so */
	uint64_t resumed = clock_now(r.c);
	FAKE_SET(r.f, keepalive_silent, false);
	clock_run(r.c, 400, 100);
	assert_int_equal(events_count(&ev), 2);
	assert_int_equal(ev.ev[1], RAFTLOCK_SESSION_SAFE);
	assert_int_equal(ev.reason[1], 0);
	assert_true(ev.valid[1] > ev.at[1]);
	assert_true(raftlock_session_valid(r.s));
	/* from a keepalive of the last two rounds: sent after the answers
	 * resumed, or re-sent then */
	assert_true(raftlock_session_valid_until(r.s) <= session_validity_ms(clock_now(r.c), 1000));
	assert_true(raftlock_session_valid_until(r.s) > resumed);
	clock_run(r.c, 700, 100);
	assert_true(raftlock_session_valid(r.s));
	assert_int_equal(lost_calls(&seen), 0);
	assert_int_equal(events_count(&ev), 2);
	assert_int_equal(raftlock_session_close(r.s), 0);
	assert_int_equal(events_count(&ev), 2); /* nothing after the close */
	rig_down(&r);
}

/* A set's request cannot carry a maximum hold time: a set whose item asks
 * for one is refused, not made with the bound silently dropped. */
static void test_set_refuses_what_it_cannot_carry(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, "x", 3000, NULL);
	struct raftlock_lock_options o = {.max_hold_ms = 1000};
	struct raftlock_multi_item items[] = {{.name = "a"}, {.name = "b", .opts = &o}};
	raftlock_multi *m = NULL;
	assert_int_equal(raftlock_multi_new(r.s, items, 2, &m), RAFTLOCK_EINVAL);
	assert_null(m);
	assert_non_null(strstr(raftlock_errmsg(r.c), "'b': max_hold_ms"));
	o = (struct raftlock_lock_options){.revoke_grace_ms = 10};
	assert_int_equal(raftlock_multi_new(r.s, items, 2, &m), RAFTLOCK_EINVAL);
	o = (struct raftlock_lock_options){.lock_delay_ms = 10};
	assert_int_equal(raftlock_multi_new(r.s, items, 2, &m), 0);
	raftlock_multi_free(m);
	rig_down(&r);
}

/* A set and a leadership left open when their session closes are freed
 * with it, as its lock handles are (raftlock.h): the leak check of the
 * sanitizer build watches it. */
static void test_session_close_frees_sets_and_leaders(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, "x", 3000, NULL);
	struct raftlock_multi_item items[] = {{.name = "a"}, {.name = "b"}};
	raftlock_multi *m = NULL;
	assert_int_equal(raftlock_multi_new(r.s, items, 2, &m), 0);
	assert_int_equal(raftlock_multi_acquire(m, 0), 0);
	raftlock_leader *ld = NULL;
	FAKE_SET(r.f, grant_after_ms, 0);
	assert_int_equal(raftlock_campaign(r.s, "e", "me", 2000, &ld), 0);
	assert_int_not_equal(raftlock_leader_token(ld), 0);
	assert_int_equal(raftlock_session_close(r.s), 0);
	rig_down(&r);
}

/* A lock event queued behind a slow callback while the session begins
 * to close: what ran, and what ran once the close had begun. */
struct close_race {
	atomic_bool callback_started;
	atomic_bool closing;
	atomic_int events;
	atomic_int events_after_close;
};

static void slow_try_cb(raftlock_lock *l, int status, uint64_t value, void *arg)
{
	(void)l;
	(void)value;
	struct close_race *race = arg;
	assert_int_equal(status, 0);
	atomic_store(&race->callback_started, true);
	sleep_ms(200); /* the session's close begins meanwhile */
}

static void race_lock_event(raftlock_session *s, enum raftlock_lock_event ev, const char *name,
			    uint64_t token, void *arg)
{
	(void)s;
	(void)ev;
	(void)name;
	(void)token;
	struct close_race *race = arg;
	atomic_fetch_add(&race->events, 1);
	if (atomic_load(&race->closing))
		atomic_fetch_add(&race->events_after_close, 1);
}

/* No lock event callback runs once raftlock_session_close() has begun,
 * also one the I/O thread had queued before (here behind a try-lock's
 * callback, the grant and the event read in one batch). */
static void test_no_lock_event_once_close_began(void **state)
{
	(void)state;
	struct rig r;
	struct close_race race = {0};
	struct raftlock_session_options so = {.on_lock_event = race_lock_event,
					      .on_lock_event_arg = &race};
	rig_up(&r, "a", 3000, &so);
	FAKE_SET(r.f, event_with_grant,
		 RAFTLOCK__SESSION_EVENT_KIND__SESSION_EVENT_RELEASE_REQUESTED);
	assert_int_equal(raftlock_lock_try_async(r.l, slow_try_cb, &race), 0);
	for (int i = 0; i < 300 && !atomic_load(&race.callback_started); i++)
		sleep_ms(10);
	assert_true(atomic_load(&race.callback_started));
	atomic_store(&race.closing, true);
	assert_int_equal(raftlock_session_close(r.s), 0);
	assert_int_equal(atomic_load(&race.events_after_close), 0);
	assert_int_equal(atomic_load(&race.events), 0);
	rig_down(&r);
}

/* The RELEASE requests of distinct seqs the fake got: one sent again
 * keeps its seq. */
static int release_seqs(struct fake *f)
{
	uint64_t seen[FAKE_LOG];
	int n = 0, all = fake_count(f, RELEASE);
	for (int k = 0; k < all; k++) {
		uint64_t seq = fake_nth(f, RELEASE, k).seq;
		int j = 0;
		while (j < n && seen[j] != seq)
			j++;
		if (j == n)
			seen[n++] = seq;
	}
	return n;
}

/* A set of three, granted whole by the fake. */
static raftlock_multi *set_of_three(struct rig *r)
{
	struct raftlock_multi_item items[] = {{.name = "a"}, {.name = "b"}, {.name = "c"}};
	raftlock_multi *m = NULL;
	assert_int_equal(raftlock_multi_new(r->s, items, 3, &m), 0);
	assert_int_equal(raftlock_multi_acquire(m, 0), 0);
	for (size_t i = 0; i < 3; i++)
		assert_int_not_equal(raftlock_multi_token(m, i), 0);
	return m;
}

/* A set's release sends every lock's release before it waits for any,
 * and waits one request timeout for them all, not one per lock: with the
 * leader silent each was sent and will execute (RAFTLOCK_EUNKNOWN), and
 * the set holds nothing for the caller. */
static void test_set_release_sends_all_within_one_timeout(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, "x", 300, NULL);
	raftlock_multi *m = set_of_three(&r);
	FAKE_SET(r.f, silent, true);
	uint64_t start = clock_mono_ms();
	assert_int_equal(raftlock_multi_release(m), RAFTLOCK_EUNKNOWN);
	assert_true(clock_mono_ms() - start < 2 * 300);
	assert_int_equal(release_seqs(r.f), 3);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(raftlock_multi_token(m, i), 0);
	raftlock_multi_free(m);
	FAKE_SET(r.f, silent, false);
	rig_down(&r);
}

/* With no node to send them to, a set's releases end within one request
 * timeout in all, RAFTLOCK_ECONNECTION: never sent, so the set still
 * holds every lock, and says so. */
static void test_set_release_unsent_keeps_the_set(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, "x", 300, NULL);
	raftlock_multi *m = set_of_three(&r);
	fake_stop(r.f);
	/* the client saw the connection go: nothing can be sent any more */
	struct transport *t = &r.c->t;
	bool open = true;
	for (int i = 0; i < 300 && open; i++) {
		pthread_mutex_lock(&t->mu);
		open = t->conn.state == CONN_OPEN;
		pthread_mutex_unlock(&t->mu);
		if (open)
			sleep_ms(10);
	}
	assert_false(open);
	uint64_t start = clock_mono_ms();
	assert_int_equal(raftlock_multi_release(m), RAFTLOCK_ECONNECTION);
	assert_true(clock_mono_ms() - start < 2 * 300);
	for (size_t i = 0; i < 3; i++)
		assert_int_not_equal(raftlock_multi_token(m, i), 0);
	raftlock_multi_free(m);
	raftlock_client_close(r.c);
}

/* A blocking acquire that waits in the queue ends at once when every
 * address refuses the client (here a node's connections-per-address limit,
 * as for TLS), not at its timeout: the header promises it. Sent before the
 * refusal, its outcome is unknown (RAFTLOCK_EUNKNOWN, a late grant is
 * released); the message names the node's reason. */
static void test_waiting_acquire_ends_when_refused(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, "q", 3000, NULL);
	FAKE_SET(r.f, refuse_conns, true);
	FAKE_SET(r.f, drop_first_acquire, true); /* the acquire goes, then the connection */
	uint64_t t0 = clock_mono_ms();
	int rv = raftlock_lock_acquire(r.l, RAFTLOCK_EXCLUSIVE, 1, 10000, NULL);
	uint64_t took = clock_mono_ms() - t0;
	assert_int_equal(rv, RAFTLOCK_EUNKNOWN);
	assert_true(took < 3000);
	assert_non_null(strstr(raftlock_errmsg(r.c), "max-connections-per-address"));
	assert_int_equal(raftlock_lock_token(r.l), 0);
	FAKE_SET(r.f, refuse_conns, false);
	rig_down(&r);
}

/* The same refusal told to a try-lock: an asynchronous one's callback
 * reads the node's reason with raftlock_errmsg(), as the blocking caller
 * does. */
struct refused_done {
	raftlock_client *c;
	struct lock_done d;
	char msg[512];
};

static void note_refused_done(raftlock_lock *l, int status, uint64_t value, void *arg)
{
	struct refused_done *rd = arg;
	snprintf(rd->msg, sizeof rd->msg, "%s", raftlock_errmsg(rd->c));
	note_lock_done(l, status, value, &rd->d);
}

/* A try-lock sent, then cut off by the refusal (rig on its fake): done
 * through raftlock_lock_try() or, with rd, raftlock_lock_try_async(). */
static void try_refused(struct rig *r, struct refused_done *rd)
{
	FAKE_SET(r->f, refuse_conns, true);
	FAKE_SET(r->f, drop_first_acquire, true); /* the try goes, then the connection */
	uint64_t token = 0;
	int status;
	const char *msg;
	if (rd == NULL) {
		status = raftlock_lock_try(r->l, &token);
		msg = raftlock_errmsg(r->c);
	} else {
		assert_int_equal(raftlock_lock_try_async(r->l, note_refused_done, rd), 0);
		status = lock_done_status(&rd->d);
		msg = rd->msg;
	}
	if (status != RAFTLOCK_EUNKNOWN || strstr(msg, "max-connections-per-address") == NULL)
		fail_msg("%s: status %d, message: %s", rd ? "async" : "blocking", status, msg);
	FAKE_SET(r->f, refuse_conns, false);
}

static void test_try_refused_names_the_reason(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, "q", 3000, NULL);
	try_refused(&r, NULL);
	rig_down(&r);
	/* a fresh client: the last one refuses what it submits for a while */
	rig_up(&r, "q", 3000, NULL);
	struct refused_done rd = {.c = r.c, .d.mu = PTHREAD_MUTEX_INITIALIZER};
	try_refused(&r, &rd);
	rig_down(&r);
}

/* Rule 11a: a bound session's validity, ended by a lost connection, comes
 * back only with a keepalive answered on a later connection. An answer
 * that came on the lost one -- read by the keepalive thread after the
 * loss -- proves nothing: the node ends the session bind_grace_ms after the
 * close. Here the loss is told to the sessions while the connection stays
 * up, so that the answers after it all come on the lost generation; then
 * the connection goes for real, and the next one's answer counts. */
static void test_bound_session_renewed_only_on_a_new_connection(void **state)
{
	(void)state;
	struct rig r;
	struct raftlock_session_options so = {.ttl_ms = 1000, .bind_to_connection = true};
	rig_up_stopped(&r, "x", 3000, &so);
	clock_run(r.c, 500, 100); /* the keepalive sent at 400 is answered */
	assert_true(raftlock_session_valid(r.s));
	struct transport *t = &r.c->t;
	int sent = fake_count(r.f, KEEPALIVE); /* the keepalive thread sends at once */
	pthread_mutex_lock(&t->mu);
	uint64_t gen = t->conn_gen;
	t->hooks.conn_lost(t->hooks.arg);
	pthread_mutex_unlock(&t->mu);
	uint64_t lost_at = clock_now(r.c);
	clock_run(r.c, 100, 100);
	/* asked at once, on the same connection (the fake may take a moment
	 * to log it on a loaded machine) */
	uint64_t until = clock_mono_ms() + 5000;
	while (fake_count(r.f, KEEPALIVE) <= sent) {
		assert_true(clock_mono_ms() < until);
		sleep_ms(5);
	}
	clock_run(r.c, 200, 100); /* its answer comes and is taken in: not valid again */
	pthread_mutex_lock(&t->mu);
	assert_int_equal(t->conn_gen, gen);
	t->drop_conn = true;
	pthread_mutex_unlock(&t->mu);
	assert_false(raftlock_session_valid(r.s));
	assert_true(raftlock_session_valid_until(r.s) <= lost_at);
	/* on the next connection, the answer proves the session held */
	clock_run(r.c, 400, 100);
	pthread_mutex_lock(&t->mu);
	assert_true(t->conn_gen > gen);
	pthread_mutex_unlock(&t->mu);
	assert_true(raftlock_session_valid(r.s));
	assert_true(raftlock_session_valid_until(r.s) > lost_at);
	rig_down(&r);
}

/* The keepalive thread looks at every session only when one may be due
 * (sessions_tick): each of two sessions with different TTLs still enters
 * jeopardy at the very instant its own validity ends, the shorter one
 * first, and the rounds follow the shortest TTL of the live sessions. */
static void test_each_session_in_jeopardy_at_its_own_instant(void **state)
{
	(void)state;
	struct rig r;
	struct events_seen ea = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct events_seen eb = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct raftlock_session_options sa = {
		.ttl_ms = 3000, .on_event = on_event, .on_event_arg = &ea};
	struct raftlock_session_options sb = {
		.ttl_ms = 1000, .on_event = on_event, .on_event_arg = &eb};
	rig_up_stopped(&r, "x", 3000, &sa);
	clock_run(r.c, 1100, 50); /* a renewed: its validity is looked at later */
	/* b's keepalives go unanswered from its open on */
	FAKE_SET(r.f, keepalive_silent, true);
	raftlock_session *b;
	assert_int_equal(raftlock_session_open(r.c, &sb, &b), 0);
	uint64_t b_valid = raftlock_session_valid_until(b);
	uint64_t a_valid = raftlock_session_valid_until(r.s);
	assert_true(a_valid > b_valid + 500);
	/* rounds every 333 ms (b's TTL / 3), not every 1000 (a's) */
	int sent = fake_count(r.f, KEEPALIVE);
	clock_run(r.c, b_valid - 1 - clock_now(r.c), 50);
	assert_true(fake_count(r.f, KEEPALIVE) >= sent + 2);
	assert_int_equal(events_count(&eb), 0);
	clock_step(r.c, 1);
	assert_int_equal(events_count(&eb), 1);
	assert_int_equal(eb.ev[0], RAFTLOCK_SESSION_JEOPARDY);
	assert_int_equal(eb.at[0], b_valid);
	assert_int_equal(events_count(&ea), 0);
	assert_true(raftlock_session_valid(r.s));
	assert_int_equal(raftlock_session_close(b), 0);

	clock_run(r.c, a_valid - 1 - clock_now(r.c), 50);
	assert_int_equal(events_count(&ea), 0);
	clock_step(r.c, 1);
	assert_int_equal(events_count(&ea), 1);
	assert_int_equal(ea.ev[0], RAFTLOCK_SESSION_JEOPARDY);
	assert_int_equal(ea.at[0], a_valid);
	rig_down(&r);
}

/* A session in jeopardy is lost at the first instant its grace period has
 * passed without an acknowledgement; a lost session stays lost. */
static void test_silent_keepalives_lose_the_session(void **state)
{
	(void)state;
	struct rig r;
	struct lost_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct events_seen ev = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct raftlock_session_options so = {.ttl_ms = 1000,
					      .on_lost = on_lost,
					      .on_lost_arg = &seen,
					      .grace_ms = 600,
					      .on_event = on_event,
					      .on_event_arg = &ev};
	rig_up_stopped(&r, "x", 3000, &so);
	uint64_t t0 = clock_now(r.c);
	uint64_t v0 = raftlock_session_valid_until(r.s);
	assert_int_equal(v0, session_validity_ms(t0, 1000));
	/* answered keepalives (at 400, 800, 1200) carry it past its first TTL */
	clock_run(r.c, 1300, 100);
	assert_true(raftlock_session_valid(r.s));
	assert_int_equal(raftlock_session_valid_until(r.s), session_validity_ms(t0 + 1200, 1000));
	assert_int_equal(fake_count(r.f, KEEPALIVE), 3);
	assert_int_equal(lost_calls(&seen), 0);
	assert_int_equal(events_count(&ev), 0);

	FAKE_SET(r.f, keepalive_silent, true);
	uint64_t last_valid = raftlock_session_valid_until(r.s);
	clock_run(r.c, last_valid + 600 - 1 - clock_now(r.c), 100);
	assert_int_equal(lost_calls(&seen), 0);
	assert_int_equal(events_count(&ev), 1);
	assert_int_equal(ev.ev[0], RAFTLOCK_SESSION_JEOPARDY);
	clock_step(r.c, 1);
	assert_int_equal(lost_calls(&seen), 1);
	assert_ptr_equal(seen.session, r.s);
	assert_int_equal(seen.reason, RAFTLOCK_ETIMEDOUT);
	assert_int_equal(raftlock_session_valid_until(r.s), 0);
	assert_false(raftlock_session_valid(r.s));
	assert_int_equal(events_count(&ev), 2);
	assert_int_equal(ev.ev[1], RAFTLOCK_SESSION_LOST);
	assert_int_equal(ev.reason[1], RAFTLOCK_ETIMEDOUT);
	assert_int_equal(ev.at[1], last_valid + 600);

	/* answers resume: a lost session stays lost, the callbacks ran once */
	FAKE_SET(r.f, keepalive_silent, false);
	clock_run(r.c, 600, 100);
	assert_int_equal(raftlock_session_valid_until(r.s), 0);
	assert_int_equal(lost_calls(&seen), 1);
	assert_int_equal(events_count(&ev), 2);
	assert_int_equal(raftlock_lock_try(r.l, NULL), RAFTLOCK_ESESSION);
	assert_int_equal(fake_count(r.f, ACQUIRE), 0);
	/* lost in the client's view only: closing still asks the server to
	 * let go of it at once */
	assert_int_equal(raftlock_session_close(r.s), 0);
	assert_int_equal(fake_count(r.f, CLOSE), 1);
	rig_down(&r);
}

/* A leader that stops answering (paused: its TCP connections stay open)
 * is left for another node well before the session's validity ends. */
static void test_paused_leader_is_left(void **state)
{
	(void)state;
	struct fake *a = fake_start(FAKE_LEADER);
	struct fake *b = fake_start(FAKE_FOLLOWER);
	fake_set_leader(b, a->addr);
	const char *addrs[] = {a->addr, b->addr};
	struct raftlock_client_options o = {
		.addresses = addrs, .n_addresses = 2, .request_timeout_ms = 3000};
	raftlock_client *c;
	assert_int_equal(raftlock_client_open(&o, &c, NULL), 0);
	transport_clock_freeze(&c->t);
	struct lost_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct raftlock_session_options so = {
		.ttl_ms = 1500, .on_lost = on_lost, .on_lost_arg = &seen};
	raftlock_session *s;
	assert_int_equal(raftlock_session_open(c, &so, &s), 0);
	/* a pauses; b takes over the session */
	FAKE_SET(a, keepalive_silent, true);
	FAKE_SET(b, next_session, 0);
	FAKE_SET(b, role, FAKE_LEADER);
	uint64_t t0 = clock_now(c);
	clock_run(c, 2500, 100);
	assert_int_equal(lost_calls(&seen), 0);
	assert_true(raftlock_session_valid(s));
	assert_true(fake_count(b, KEEPALIVE) >= 2);
	/* renewed by b: from a keepalive sent within the last round or two */
	assert_true(raftlock_session_valid_until(s) >= session_validity_ms(t0 + 1500, 1500));
	raftlock_client_close(c);
	fake_stop(a);
	fake_stop(b);
}

/* A node that answers nothing any more (its loop stuck, its connections
 * open) is left for another one even when every call gives up before the
 * stall shows: each call alone is shorter than the stall window. */
static void test_silent_node_is_left_across_short_calls(void **state)
{
	(void)state;
	struct fake *a = fake_start(FAKE_LEADER);
	struct fake *b = fake_start(FAKE_LEADER);
	const char *addrs[] = {a->addr, b->addr};
	struct raftlock_client_options o = {
		.addresses = addrs, .n_addresses = 2, .request_timeout_ms = 1000};
	raftlock_client *c;
	struct raftlock_lock_info *li = NULL;
	assert_int_equal(raftlock_client_open(&o, &c, NULL), 0);
	assert_int_equal(raftlock_lock_get(c, "a/1", false, &li), 0);
	raftlock_lock_info_free(li);
	/* the client starts at a random address: silence the one it chose */
	struct fake *first = fake_count(a, RAFTLOCK__ENVELOPE__BODY_GET_LOCK) == 1 ? a : b;
	struct fake *other = first == a ? b : a;
	assert_int_equal(fake_count(first, RAFTLOCK__ENVELOPE__BODY_GET_LOCK), 1);
	FAKE_SET(first, silent, true);
	uint64_t t0 = clock_mono_ms();
	int rv = RAFTLOCK_ETIMEDOUT, calls = 0;
	while (rv != 0 && calls++ < 12)
		rv = raftlock_lock_get(c, "a/1", false, &li);
	assert_int_equal(rv, 0);
	raftlock_lock_info_free(li);
	assert_int_equal(fake_count(other, RAFTLOCK__ENVELOPE__BODY_GET_LOCK), 1);
	assert_true(clock_mono_ms() - t0 < 8000);
	raftlock_client_close(c);
	fake_stop(a);
	fake_stop(b);
}

/* Validity counts from when the keepalive was sent, not from its answer. */
static void test_validity_counts_from_the_send(void **state)
{
	(void)state;
	struct rig r;
	struct raftlock_session_options so = {.ttl_ms = 1200};
	rig_up(&r, "x", 3000, &so);
	FAKE_SET(r.f, keepalive_delay_ms, 150);
	uint64_t v0 = raftlock_session_valid_until(r.s);
	/* the first keepalive goes at 400 ms and is answered 150 ms later */
	for (int i = 0; i < 200 && raftlock_session_valid_until(r.s) == v0; i++)
		sleep_ms(5);
	uint64_t v = raftlock_session_valid_until(r.s);
	assert_true(v > v0);
	struct fake_entry k = fake_nth(r.f, KEEPALIVE, 0);
	/* sent no later than it arrived; the answer came 150 ms after */
	assert_true(v <= k.at_boot + 1200 - 12 - RAFTLOCK_LEASE_MARGIN_MS);
	assert_true(v + 50 >= k.at_boot + 1200 - 12 - RAFTLOCK_LEASE_MARGIN_MS);
	rig_down(&r);
}

/* The cluster says the session is gone, or refuses its secret (a session
 * opened before the cluster required secrets): lost at once, with that
 * reason. */
static void keepalive_answer_loses_the_session(int status)
{
	struct rig r;
	struct lost_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct raftlock_session_options so = {
		.ttl_ms = 3000, .on_lost = on_lost, .on_lost_arg = &seen};
	rig_up_stopped(&r, "x", 3000, &so);
	FAKE_SET(r.f, keepalive_status, status);
	/* well before validity ends: the next keepalive (at 1 s) says so */
	clock_run(r.c, 1000, 100);
	lost_wait(&seen, 2000);
	assert_int_equal(lost_calls(&seen), 1);
	assert_int_equal(seen.reason, status);
	assert_int_equal(raftlock_session_valid_until(r.s), 0);
	rig_down(&r);
}

static void test_server_says_session_gone(void **state)
{
	(void)state;
	keepalive_answer_loses_the_session(RAFTLOCK_ESESSION);
	keepalive_answer_loses_the_session(RAFTLOCK_EPERM);
}

/* More sessions than one keepalive request may name: a round goes out as
 * several requests, none above KEEPALIVE_CHUNK, on the one connection,
 * and every session is renewed. */
static void test_keepalive_rounds_are_split(void **state)
{
	(void)state;
	enum { N = KEEPALIVE_CHUNK + 1000 };
	static raftlock_session *s[N];
	static uint64_t v0[N];
	struct fake *f = fake_start(FAKE_LEADER);
	raftlock_client *c = client_for(f->addr, 3000);
	struct raftlock_session_options so = {.ttl_ms = 3000};
	for (int i = 0; i < N; i++) {
		assert_int_equal(raftlock_session_open(c, &so, &s[i]), 0);
		v0[i] = raftlock_session_valid_until(s[i]);
	}
	int renewed = 0;
	for (int t = 0; t < 200 && renewed < N; t++) {
		sleep_ms(50);
		for (renewed = 0; renewed < N; renewed++)
			if (raftlock_session_valid_until(s[renewed]) <= v0[renewed])
				break;
	}
	assert_int_equal(renewed, N);
	pthread_mutex_lock(&f->mu);
	assert_true(f->keepalives >= 2);
	assert_true(f->keepalive_most <= KEEPALIVE_CHUNK);
	assert_int_equal(f->conns_seen, 1);
	pthread_mutex_unlock(&f->mu);
	for (int i = 0; i < N; i++)
		assert_true(raftlock_session_valid(s[i]));
	raftlock_client_close(c);
	fake_stop(f);
}

static void test_nobody_listening(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char addr[32];
	strcpy(addr, f->addr);
	fake_stop(f); /* the port is free again: connections are refused */
	raftlock_client *c = client_for(addr, 300);
	raftlock_session *s = NULL;
	uint64_t t0 = clock_mono_ms();
	assert_int_equal(raftlock_session_open(c, NULL, &s), RAFTLOCK_ECONNECTION);
	uint64_t took = clock_mono_ms() - t0;
	assert_true(took >= 290 && took < 1500);
	assert_null(s);
	struct raftlock_status *st = NULL;
	assert_int_equal(raftlock_status_get(c, NULL, &st), RAFTLOCK_ECONNECTION);
	assert_null(st);
	raftlock_client_close(c);
}

/* A revoke runs at most once per call (GUARANTEES rule 11b): sent again
 * only after an answer that proves it did not run; once it may have run,
 * a lost connection, an outcome the node does not know or the timeout end
 * it with RAFTLOCK_EUNKNOWN, and nothing is sent again. */
static void revoke_expect(struct fake *f, raftlock_client *c, int want, int sends)
{
	int before = fake_count(f, REVOKE);
	uint32_t count = 0;
	assert_int_equal(raftlock_revoke(c, "rv/a", 0, 0, &count), want);
	sleep_ms(100); /* a send after the answer would show by now */
	assert_int_equal(fake_count(f, REVOKE) - before, sends);
	if (want == 0)
		assert_int_equal(count, 1);
	else if (want == RAFTLOCK_EUNKNOWN)
		assert_non_null(strstr(raftlock_errmsg(c), "may have run"));
}

static void test_revoke_runs_at_most_once(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	raftlock_client *c = client_for(f->addr, 2000);
	revoke_expect(f, c, 0, 1);
	/* it ran, and the connection closed before the answer */
	FAKE_SET(f, revoke_drops, 1);
	revoke_expect(f, c, RAFTLOCK_EUNKNOWN, 1);
	/* the leader lost its leadership with the entry on its way */
	FAKE_SET(f, revoke_status, RAFTLOCK_EUNKNOWN);
	FAKE_SET(f, revoke_refusals, 1);
	revoke_expect(f, c, RAFTLOCK_EUNKNOWN, 1);
	/* refused before the log: sent again until it runs */
	FAKE_SET(f, revoke_status, RAFTLOCK_EUNAVAILABLE);
	FAKE_SET(f, revoke_refusals, 2);
	revoke_expect(f, c, 0, 3);
	FAKE_SET(f, revoke_status, RAFTLOCK_EOVERLOAD);
	FAKE_SET(f, revoke_refusals, 1);
	revoke_expect(f, c, 0, 2);
	FAKE_SET(f, revoke_status, RAFTLOCK_ENOTLEADER);
	FAKE_SET(f, revoke_refusals, 1);
	revoke_expect(f, c, 0, 2);
	/* refused before the log, then lost: unknown */
	FAKE_SET(f, revoke_status, RAFTLOCK_EUNAVAILABLE);
	FAKE_SET(f, revoke_refusals, 1);
	FAKE_SET(f, revoke_drops, 1);
	revoke_expect(f, c, RAFTLOCK_EUNKNOWN, 2);
	raftlock_client_close(c);
	/* sent, never answered: its timeout is an unknown outcome */
	c = client_for(f->addr, 400);
	FAKE_SET(f, silent, true);
	revoke_expect(f, c, RAFTLOCK_EUNKNOWN, 1);
	raftlock_client_close(c);
	fake_stop(f);
}

/* A reconnect in the middle of a watch's state: the library says
 * HISTORY_LOST before the state comes again, so that the application
 * drops the part it got (the state's events do not move the position a
 * resume starts from). */
struct watch_seen {
	pthread_mutex_t mu;
	int n;
	enum raftlock_watch_kind kind[16];
	char name[16][8];
};

static void on_watch(const struct raftlock_watch_event *ev, void *arg)
{
	struct watch_seen *w = arg;
	pthread_mutex_lock(&w->mu);
	if (w->n < 16) {
		w->kind[w->n] = ev->kind;
		snprintf(w->name[w->n], sizeof w->name[w->n], "%s", ev->name);
		w->n++;
	}
	pthread_mutex_unlock(&w->mu);
}

/* Waits up to 10 s for n events. */
static void await_seen(struct watch_seen *seen, int n)
{
	for (int i = 0; i < 1000; i++) {
		pthread_mutex_lock(&seen->mu);
		bool done = seen->n >= n;
		pthread_mutex_unlock(&seen->mu);
		if (done)
			break;
		sleep_ms(10);
	}
}

static void test_watch_state_cut_by_a_reconnect(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	FAKE_SET(f, watch_cut, 1);
	raftlock_client *c = client_for(f->addr, 3000);
	struct watch_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	raftlock_watch_handle *w;
	assert_int_equal(raftlock_watch(c, "w/", NULL, on_watch, &seen, &w), 0);
	await_seen(&seen, 5);
	raftlock_watch_cancel(w);
	static const enum raftlock_watch_kind want[] = {
		RAFTLOCK_WATCH_HOLDING, RAFTLOCK_WATCH_HISTORY_LOST, RAFTLOCK_WATCH_HOLDING,
		RAFTLOCK_WATCH_HOLDING, RAFTLOCK_WATCH_CURRENT};
	assert_int_equal(seen.n, 5);
	for (int i = 0; i < 5; i++)
		assert_int_equal(seen.kind[i], want[i]);
	assert_string_equal(seen.name[0], "w/a");
	assert_string_equal(seen.name[1], "w/");
	assert_string_equal(seen.name[2], "w/a");
	assert_true(fake_count(f, RAFTLOCK__ENVELOPE__BODY_WATCH) == 2);
	assert_int_equal(fake_nth(f, RAFTLOCK__ENVELOPE__BODY_WATCH, 0).other, 0);
	assert_int_equal(fake_nth(f, RAFTLOCK__ENVELOPE__BODY_WATCH, 1).other, 7);
	raftlock_client_close(c);
	fake_stop(f);
}

/* From a position the node no longer has: HISTORY_LOST and a state; a
 * reconnect inside that state asks for the state again, not for the
 * changes after the old position (which another node might still have,
 * though the application let go of what it knew). */
static void test_watch_lost_then_cut_asks_for_the_state(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	FAKE_SET(f, watch_cut, 1);
	raftlock_client *c = client_for(f->addr, 3000);
	struct watch_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	raftlock_watch_handle *w;
	FAKE_SET(f, watch_cluster, 0x77);
	struct raftlock_position from = {5, 1, 0x55};
	assert_int_equal(raftlock_watch(c, "w/", &from, on_watch, &seen, &w), 0);
	await_seen(&seen, 6);
	raftlock_watch_cancel(w);
	static const enum raftlock_watch_kind want[] = {
		RAFTLOCK_WATCH_HISTORY_LOST, RAFTLOCK_WATCH_HOLDING, RAFTLOCK_WATCH_HISTORY_LOST,
		RAFTLOCK_WATCH_HOLDING,      RAFTLOCK_WATCH_HOLDING, RAFTLOCK_WATCH_CURRENT};
	assert_int_equal(seen.n, 6);
	for (int i = 0; i < 6; i++)
		assert_int_equal(seen.kind[i], want[i]);
	assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_WATCH), 2);
	assert_true(fake_nth(f, RAFTLOCK__ENVELOPE__BODY_WATCH, 0).wait); /* a resume */
	assert_int_equal(fake_nth(f, RAFTLOCK__ENVELOPE__BODY_WATCH, 0).cluster, 0x55);
	assert_false(fake_nth(f, RAFTLOCK__ENVELOPE__BODY_WATCH, 1).wait);
	/* a state no older than the one cut (the fake's is at index 7, of
	 * its cluster) */
	assert_int_equal(fake_nth(f, RAFTLOCK__ENVELOPE__BODY_WATCH, 1).other, 7);
	assert_int_equal(fake_nth(f, RAFTLOCK__ENVELOPE__BODY_WATCH, 1).cluster, 0x77);
	raftlock_client_close(c);
	fake_stop(f);
}

/* A reconnect after the state: the library resumes after its CURRENT and
 * names the cluster that position is of, as the node's events said (a
 * node restored from a backup since has another, and answers
 * HISTORY_LOST: rule 19); a node of an older build says none, and the
 * resume names none (the node ignores the field). */
static void test_watch_resume_names_its_cluster(void **state)
{
	(void)state;
	static const uint64_t clusters[] = {0x77, 0};
	for (size_t i = 0; i < 2; i++) {
		struct fake *f = fake_start(FAKE_LEADER);
		FAKE_SET(f, watch_cluster, clusters[i]);
		FAKE_SET(f, watch_cut, 3); /* after CURRENT */
		raftlock_client *c = client_for(f->addr, 3000);
		struct watch_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
		raftlock_watch_handle *w;
		assert_int_equal(raftlock_watch(c, "w/", NULL, on_watch, &seen, &w), 0);
		await_seen(&seen, 7); /* the state, then HISTORY_LOST and the state */
		raftlock_watch_cancel(w);
		assert_int_equal(seen.n, 7);
		assert_int_equal(seen.kind[2], RAFTLOCK_WATCH_CURRENT);
		assert_int_equal(seen.kind[3], RAFTLOCK_WATCH_HISTORY_LOST);
		assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_WATCH), 2);
		struct fake_entry first = fake_nth(f, RAFTLOCK__ENVELOPE__BODY_WATCH, 0);
		struct fake_entry again = fake_nth(f, RAFTLOCK__ENVELOPE__BODY_WATCH, 1);
		assert_false(first.wait);
		assert_int_equal(first.cluster, 0);
		assert_true(again.wait);
		assert_int_equal(again.other, 7);
		assert_int_equal(again.cluster, clusters[i]);
		raftlock_client_close(c);
		fake_stop(f);
	}
}

/* A node that takes a watch, then ends it because it cannot start its
 * state in time (EUNAVAILABLE: it has not applied the index the state
 * must be of): the library sends the watch to another node, where it
 * goes on; the application sees the state there and no ERROR. When every
 * node ends it so, the fourth end in a row is the application's: an
 * ERROR with EUNAVAILABLE, the last event. A node
 * that ends a watch with a status it does not retry (here ETIMEDOUT)
 * ends it for the application: an ERROR with that status, the last
 * event. */
struct watch_status_seen {
	struct watch_seen seen;
	int status;
};

static void on_watch_status(const struct raftlock_watch_event *ev, void *arg)
{
	struct watch_status_seen *w = arg;
	if (ev->kind == RAFTLOCK_WATCH_ERROR)
		w->status = ev->status;
	on_watch(ev, &w->seen);
}

/* A watch of c on "w/" gets one event, an ERROR with status want, and
 * nothing after it. */
static void watch_ends_in_one_error(raftlock_client *c, int want)
{
	struct watch_status_seen got = {.seen = {.mu = PTHREAD_MUTEX_INITIALIZER}};
	raftlock_watch_handle *w;
	assert_int_equal(raftlock_watch(c, "w/", NULL, on_watch_status, &got, &w), 0);
	await_seen(&got.seen, 1);
	sleep_ms(300); /* nothing follows */
	raftlock_watch_cancel(w);
	assert_int_equal(got.seen.n, 1);
	assert_int_equal(got.seen.kind[0], RAFTLOCK_WATCH_ERROR);
	assert_int_equal(got.status, want);
}

static void test_watch_ended_by_a_node_goes_elsewhere(void **state)
{
	(void)state;
	struct fake *a = fake_start(FAKE_LEADER);
	struct fake *b = fake_start(FAKE_LEADER);
	FAKE_SET(a, watch_end_status, RAFTLOCK_EUNAVAILABLE);
	FAKE_SET(b, watch_end_status, RAFTLOCK_EUNAVAILABLE);
	FAKE_SET(a, watch_ends, 1);
	FAKE_SET(b, watch_ends, 1);
	const char *addrs[] = {a->addr, b->addr};
	struct raftlock_client_options o = {
		.addresses = addrs, .n_addresses = 2, .request_timeout_ms = 3000};
	raftlock_client *c;
	assert_int_equal(raftlock_client_open(&o, &c, NULL), 0);
	struct watch_status_seen got = {.seen = {.mu = PTHREAD_MUTEX_INITIALIZER}};
	raftlock_watch_handle *w;
	assert_int_equal(raftlock_watch(c, "w/", NULL, on_watch_status, &got, &w), 0);
	await_seen(&got.seen, 3);
	raftlock_watch_cancel(w);
	static const enum raftlock_watch_kind want[] = {
		RAFTLOCK_WATCH_HOLDING, RAFTLOCK_WATCH_HOLDING, RAFTLOCK_WATCH_CURRENT};
	assert_int_equal(got.seen.n, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(got.seen.kind[i], want[i]);
	/* the node that ended it was left: each got it */
	assert_true(fake_count(a, RAFTLOCK__ENVELOPE__BODY_WATCH) >= 1);
	assert_true(fake_count(b, RAFTLOCK__ENVELOPE__BODY_WATCH) >= 1);
	raftlock_client_close(c);

	/* every node ends it so, again and again (all behind what the
	 * client saw): after CLIENT_STREAM_MOVES moves (3), the application
	 * gets the end, not a search without end */
	FAKE_SET(a, watch_ends, 100);
	FAKE_SET(b, watch_ends, 100);
	int asked = fake_count(a, RAFTLOCK__ENVELOPE__BODY_WATCH) +
		    fake_count(b, RAFTLOCK__ENVELOPE__BODY_WATCH);
	assert_int_equal(raftlock_client_open(&o, &c, NULL), 0);
	watch_ends_in_one_error(c, RAFTLOCK_EUNAVAILABLE);
	assert_int_equal(fake_count(a, RAFTLOCK__ENVELOPE__BODY_WATCH) +
				 fake_count(b, RAFTLOCK__ENVELOPE__BODY_WATCH) - asked,
			 4);
	raftlock_client_close(c);

	FAKE_SET(a, watch_end_status, RAFTLOCK_ETIMEDOUT);
	FAKE_SET(a, watch_ends, 1);
	c = client_for(a->addr, 3000);
	watch_ends_in_one_error(c, RAFTLOCK_ETIMEDOUT);
	raftlock_client_close(c);
	fake_stop(a);
	fake_stop(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_follows_not_leader_redirect),
		cmocka_unit_test(test_reconnect_resends_with_same_seq),
		cmocka_unit_test(test_unknown_outcome_retried_with_same_seq),
		cmocka_unit_test(test_client_close_closes_sessions),
		cmocka_unit_test(test_seq_and_ack_below),
		cmocka_unit_test(test_requests_carry_the_session_secret),
		cmocka_unit_test(test_abandoned_acquire_is_settled_and_released),
		cmocka_unit_test(test_unanswered_request_holds_ack_below),
		cmocka_unit_test(test_try_lock_busy),
		cmocka_unit_test(test_old_server_refused),
		cmocka_unit_test(test_lock_names),
		cmocka_unit_test(test_blocking_acquire_gets_pushed_grant),
		cmocka_unit_test(test_blocking_acquire_timeout_cancels),
		cmocka_unit_test(test_late_queued_answer_wakes_a_timed_out_acquire),
		cmocka_unit_test(test_grant_racing_cancel_is_released),
		cmocka_unit_test(test_grant_revoked_before_the_caller_took_it_is_not_held),
		cmocka_unit_test(test_try_grant_revoked_before_the_caller_took_it_is_not_held),
		cmocka_unit_test(test_enotholder_answer_drops_the_hold),
		cmocka_unit_test(test_grant_revoked_while_canceling_is_not_held),
		cmocka_unit_test(test_async_grant_revoked_before_the_callback_is_not_held),
		cmocka_unit_test(test_set_grant_with_a_lock_revoked_holds_none),
		cmocka_unit_test(test_async_set_grant_with_a_lock_revoked_holds_none),
		cmocka_unit_test(test_try_grant_read_with_the_loss_is_esession),
		cmocka_unit_test(test_async_set_grant_read_with_the_loss_is_esession),
		cmocka_unit_test(test_cancel_granted_first_with_the_loss_is_esession),
		cmocka_unit_test(test_lock_times_above_bounds_refused_unsent),
		cmocka_unit_test(test_set_value_races_acquires),
		cmocka_unit_test(test_close_ends_a_blocked_acquire),
		cmocka_unit_test(test_close_during_a_campaign),
		cmocka_unit_test(test_proclaims_apply_in_call_order),
		cmocka_unit_test(test_close_leaves_no_note),
		cmocka_unit_test(test_null_arguments_say_einval),
		cmocka_unit_test(test_silent_keepalives_bring_jeopardy_then_safe),
		cmocka_unit_test(test_silent_keepalives_lose_the_session),
		cmocka_unit_test(test_each_session_in_jeopardy_at_its_own_instant),
		cmocka_unit_test(test_bound_session_renewed_only_on_a_new_connection),
		cmocka_unit_test(test_waiting_acquire_ends_when_refused),
		cmocka_unit_test(test_try_refused_names_the_reason),
		cmocka_unit_test(test_set_refuses_what_it_cannot_carry),
		cmocka_unit_test(test_set_release_sends_all_within_one_timeout),
		cmocka_unit_test(test_set_release_unsent_keeps_the_set),
		cmocka_unit_test(test_no_lock_event_once_close_began),
		cmocka_unit_test(test_session_close_frees_sets_and_leaders),
		cmocka_unit_test(test_paused_leader_is_left),
		cmocka_unit_test(test_silent_node_is_left_across_short_calls),
		cmocka_unit_test(test_validity_counts_from_the_send),
		cmocka_unit_test(test_server_says_session_gone),
		cmocka_unit_test(test_keepalive_rounds_are_split),
		cmocka_unit_test(test_nobody_listening),
		cmocka_unit_test(test_revoke_runs_at_most_once),
		cmocka_unit_test(test_watch_state_cut_by_a_reconnect),
		cmocka_unit_test(test_watch_lost_then_cut_asks_for_the_state),
		cmocka_unit_test(test_watch_resume_names_its_cluster),
		cmocka_unit_test(test_watch_ended_by_a_node_goes_elsewhere),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
