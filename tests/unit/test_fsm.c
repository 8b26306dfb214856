/*
 * test_fsm.c: the lock state machine driven by log entries on a real LMDB
 * store: INIT and the fencing floor, determinism, tokens across restarts and
 * restores, ownership, session end and expiry, exactly-once retries,
 * skipped entries, validation. Waits: test_fsm_waits.c; snapshot images:
 * test_fsm_snapshot.c.
 */
#include "test_fsm_harness.h"

/* ------------------------------------------------------------- INIT -- */

static void test_init_sets_fencing_floor(void **state)
{
	struct fx *f = *state;
	f->now = 1000;
	uint64_t s = fx_session(f); /* sessions open before INIT */

	Raftlock__Result r = DO(f, ACQUIRE, .session = s, .owner = 1, .name = "a");
	assert_int_equal(r.status, RAFTLOCK_EUNAVAILABLE);
	assert_int_equal(r.token, 0);
	r = DO(f, ACQUIRE, .session = s, .owner = 1, .name = "a", .wait = true);
	assert_int_equal(r.status, RAFTLOCK_EUNAVAILABLE);
	assert_false(r.queued);
	assert_int_equal(fx_count(f, FSM_EV_WAIT_DEADLINE), 0);
	assert_false(fx_lock_exists(f, "a"));
	assert_int_equal(fx_next_token(f), 0);

	fx_init(f, FX_FLOOR);
	assert_int_equal(fx_next_token(f), FX_FLOOR);
	assert_int_equal(fx_take(f, s, 1, "a"), FX_FLOOR);

	/* A second INIT, with a lower floor or none, lowers nothing. */
	fx_init(f, 5);
	assert_int_equal(fx_next_token(f), FX_FLOOR + 1);
	assert_int_equal(fx_take(f, s, 1, "b"), FX_FLOOR + 1);
	fx_init(f, 0);
	assert_int_equal(fx_take(f, s, 1, "c"), FX_FLOOR + 2);
	assert_int_equal(fx_next_token(f), FX_FLOOR + 3);
}

static void test_init_zero_floor_never_grants_token_zero(void **state)
{
	struct fx *f = *state;
	fx_init(f, 0);
	uint64_t s = fx_session(f);
	assert_int_equal(fx_take(f, s, 1, "a"), 1);
}

/* ------------------------------------------------------ determinism -- */

/* A log that touches every command, with batching and time passing. */
static uint64_t mixed_log(struct fx *f)
{
	f->now = 1000;
	fx_init(f, FX_FLOOR);
	uint64_t s1 = DO(f, OPEN_SESSION, .nonce = 11, .ttl_ms = 5000).session;
	uint64_t s2 = DO(f, OPEN_SESSION, .nonce = 12, .ttl_ms = 5000).session;
	uint64_t s3 = fx_session(f);
	uint64_t s4 = fx_session(f);

	fx_take(f, s1, 1, "m");
	uint64_t s2_m = fx_enqueue(f, OP(ACQUIRE, .session = s2, .owner = 1, .name = "m"));
	DO(f, ACQUIRE, .session = s3, .owner = 1, .name = "rw", .kind = RAFTLOCK__LOCK_KIND__RWLOCK,
	   .mode = RAFTLOCK__MODE__SHARED);
	DO(f, ACQUIRE, .session = s1, .owner = 1, .name = "rw", .kind = RAFTLOCK__LOCK_KIND__RWLOCK,
	   .mode = RAFTLOCK__MODE__SHARED);
	uint64_t s2_rw = fx_enqueue(f, OP(ACQUIRE, .session = s2, .owner = 2, .name = "rw",
					  .kind = RAFTLOCK__LOCK_KIND__RWLOCK, .wait_ms = 2000));
	DO(f, ACQUIRE, .session = s3, .owner = 1, .name = "sem",
	   .kind = RAFTLOCK__LOCK_KIND__SEMAPHORE, .limit = 3, .permits = 2);
	DO(f, ACQUIRE, .session = s1, .owner = 2, .name = "sem", .permits = 1);
	fx_enqueue(f, OP(ACQUIRE, .session = s2, .owner = 3, .name = "sem", .permits = 2));
	DO(f, ACQUIRE, .session = s1, .owner = 1, .name = "m"); /* nests */
	fx_release_ok(f, s1, 1, "m", 1);
	DO(f, ACQUIRE, .session = s4, .owner = 1, .name = "gone");

	f->now = 2000;
	uint64_t renew[] = {s1, s3, 999};
	DO(f, RENEW, .renew = renew, .n_renew = 3);

	f->now = 3000;
	DO(f, WAIT_EXPIRE, .name = "rw", .target = s2, .acquire_seq = s2_rw);
	DO(f, ACQUIRE, .session = s1, .owner = 3, .name = "d", .lock_delay_ms = 500);
	struct op batch[] = {
		OP(RELEASE, .session = s1, .owner = 1, .name = "m"),
		OP(ACQUIRE, .session = s3, .owner = 2, .name = "x"),
		OP(CLOSE_SESSION, .session = s4),
	};
	fx_apply(f, batch, 3);
	DO(f, CANCEL_WAIT, .session = s2, .owner = 1, .name = "m", .acquire_seq = s2_m);

	f->now = 6000;
	DO(f, EXPIRE_SESSION, .target = s2);
	f->now = 6500;
	DO(f, EXPIRE_SESSION, .target = s1); /* renewed: still alive */
	f->now = 7000;
	DO(f, EXPIRE_SESSION, .target = s1);
	fx_enqueue(f, OP(ACQUIRE, .session = s3, .owner = 3, .name = "d"));
	f->now = 7500;
	DO(f, LOCK_DELAY_END, .name = "d");
	DO(f, RELEASE, .session = s3, .owner = 2, .name = "x", .ack_below = 5);
	return s3;
}

static void test_same_log_same_state(void **state)
{
	struct fx *f = *state;
	uint64_t s3 = mixed_log(f);
	/* The log left state behind worth comparing. */
	HOLDERS(f, "d", s3, 3);
	HOLDERS(f, "sem", s3, 1);
	HOLDERS(f, "rw", s3, 1);
	assert_false(fx_lock_exists(f, "gone"));
	assert_int_equal(fx_count_sessions(f), 1); /* s1, s2, s4 ended */
	char timed_out[32];                        /* a wait timed out */
	snprintf(timed_out, sizeof timed_out, "st=%d ", RAFTLOCK_ETIMEDOUT);
	assert_non_null(strstr(f->trace, timed_out));

	struct fx *g = fx_peer(f);
	fx_replay(g, f, 0, f->n_log);
	fx_assert_same_state(f, g);
	assert_string_equal(g->trace, f->trace);

	struct fx_image im = fx_dump(g);
	uint64_t index = 0;
	assert_int_equal(store_image_index(im.buf, im.len, &index), 0);
	assert_int_equal(index, f->index);
	fx_image_free(&im);

	/* Half the log, a restart, then the rest. */
	struct fx *h = fx_peer(f);
	fx_replay(h, f, 0, f->n_log / 2);
	fx_restart(h);
	fx_replay(h, f, 0, f->n_log); /* the first half is skipped */
	fx_assert_same_state(f, h);
	assert_string_equal(h->trace, f->trace);
}

static void test_same_short_log_same_state(void **state)
{
	struct fx *f = *state;
	f->now = 1000;
	fx_init(f, FX_FLOOR);
	uint64_t s = fx_session(f);
	fx_take(f, s, 7, "a");

	struct fx *g = fx_peer(f);
	fx_replay(g, f, 0, f->n_log);
	fx_assert_same_state(f, g);
	HOLDERS(g, "a", s, 7);
	assert_int_equal(fsm_applied_index(&g->fsm), f->index);
}

/* ----------------------------------------------------------- tokens -- */

/* Asserts that t is above every token seen so far and records it. */
static void token_above(uint64_t *max, uint64_t t)
{
	assert_true(t > *max);
	*max = t;
}

static void test_tokens_strictly_increase(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s1 = fx_session(f), s2 = fx_session(f), max = 0;

	uint64_t ta = fx_take(f, s1, 1, "a");
	token_above(&max, ta);
	Raftlock__Result r = DO(f, ACQUIRE, .session = s1, .owner = 1, .name = "a");
	assert_int_equal(r.status, 0);
	assert_int_equal(r.token, ta); /* re-entry keeps its token */
	assert_int_equal(r.count, 2);
	token_above(&max, fx_take(f, s2, 1, "b"));
	const uint64_t both[] = {s1, s2};
	for (size_t i = 0; i < 2; i++) {
		uint64_t s = both[i];
		r = DO(f, ACQUIRE, .session = s, .owner = 1, .name = "rw",
		       .kind = RAFTLOCK__LOCK_KIND__RWLOCK, .mode = RAFTLOCK__MODE__SHARED);
		assert_int_equal(r.status, 0);
		token_above(&max, r.token);
		r = DO(f, ACQUIRE, .session = s, .owner = 2, .name = "sem",
		       .kind = RAFTLOCK__LOCK_KIND__SEMAPHORE, .limit = 4);
		assert_int_equal(r.status, 0);
		token_above(&max, r.token);
	}
	fx_release_ok(f, s2, 1, "b", 0);
	token_above(&max, fx_take(f, s1, 2, "b"));

	fx_restart(f);
	token_above(&max, fx_take(f, s2, 3, "c"));
	assert_int_equal(fx_next_token(f), max + 1);

	struct fx *g = fx_peer(f);
	fx_restore_from(g, f);
	token_above(&max, fx_take(g, s2, 4, "d"));
	r = DO(g, ACQUIRE, .session = s1, .owner = 1, .name = "a");
	assert_int_equal(r.token, ta);
	assert_int_equal(r.count, 3);
}

/* -------------------------------------------------------- ownership -- */

static void test_only_holder_releases(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s1 = fx_session(f), s2 = fx_session(f);
	uint64_t t = fx_take(f, s1, 1, "a");

	Raftlock__Result r = DO(f, RELEASE, .session = s2, .owner = 1, .name = "a");
	assert_int_equal(r.status, RAFTLOCK_ENOTHOLDER);
	r = DO(f, RELEASE, .session = s1, .owner = 2, .name = "a");
	assert_int_equal(r.status, RAFTLOCK_ENOTHOLDER);
	r = DO(f, RELEASE, .session = s1, .owner = 1, .name = "nothing");
	assert_int_equal(r.status, RAFTLOCK_ENOTHOLDER);

	assert_int_equal(HOLDERS(f, "a", s1, 1), t);
	r = DO(f, ACQUIRE, .session = s2, .owner = 1, .name = "a");
	assert_int_equal(r.status, RAFTLOCK_EBUSY);
	r = DO(f, ACQUIRE, .session = s1, .owner = 2, .name = "a");
	assert_int_equal(r.status, RAFTLOCK_EBUSY);

	fx_release_ok(f, s1, 1, "a", 0);
	assert_false(fx_lock_exists(f, "a"));
	r = DO(f, RELEASE, .session = s1, .owner = 1, .name = "a");
	assert_int_equal(r.status, RAFTLOCK_ENOTHOLDER);
}

/* --------------------------------------------------------- sessions -- */

/* s holds "a" (mutex) and "rw" (shared); w waits for "a". Returns w's seq. */
static uint64_t hold_two_and_queue(struct fx *f, uint64_t s, uint64_t w)
{
	fx_take(f, s, 1, "a");
	Raftlock__Result r =
		DO(f, ACQUIRE, .session = s, .owner = 1, .name = "rw",
		   .kind = RAFTLOCK__LOCK_KIND__RWLOCK, .mode = RAFTLOCK__MODE__SHARED);
	assert_int_equal(r.status, 0);
	return fx_enqueue(f, OP(ACQUIRE, .session = w, .owner = 1, .name = "a"));
}

/* After s ended: its record is gone, its locks are free, w got "a". */
static void assert_session_ended(struct fx *f, uint64_t s, uint64_t w, uint64_t wseq)
{
	const struct fx_event *gone = fx_event(f, FSM_EV_SESSION_GONE);
	assert_non_null(gone);
	assert_int_equal(gone->session, s);
	assert_null(fx_sess(f, s));
	uint64_t t = fx_pushed_grant(f, w, wseq);
	assert_int_equal(HOLDERS(f, "a", w, 1), t);
	WAITERS(f, "a", 0);
	assert_false(fx_lock_exists(f, "rw"));
	Raftlock__Result r = DO(f, ACQUIRE, .session = s, .owner = 1, .name = "b");
	assert_int_equal(r.status, RAFTLOCK_ESESSION);
	assert_false(fx_lock_exists(f, "b"));
}

static void test_close_releases_everything(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s = fx_session(f), w = fx_session(f);
	uint64_t wseq = hold_two_and_queue(f, s, w);

	Raftlock__Result r = DO(f, CLOSE_SESSION, .session = s);
	assert_int_equal(r.status, 0);
	assert_int_equal(fx_count(f, FSM_EV_LOCK_DELAY), 0);
	assert_session_ended(f, s, w, wseq);
}

static void test_expire_at_deadline_releases_everything(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s = fx_session_ttl(f, 5000);
	const struct fx_event *ev = fx_event(f, FSM_EV_SESSION);
	assert_non_null(ev);
	assert_int_equal(ev->session, s);
	assert_int_equal(ev->deadline, 6000);
	uint64_t w = fx_session(f);
	uint64_t wseq = hold_two_and_queue(f, s, w);

	/* Below the deadline: nothing changes. */
	struct fx_image before = fx_dump(f);
	f->now = 5999;
	Raftlock__Result r = DO(f, EXPIRE_SESSION, .target = s);
	assert_int_equal(r.status, 0);
	assert_int_equal(f->n_events, 1);
	fx_assert_records(f, &before);
	fx_image_free(&before);

	f->now = 6000;
	DO(f, EXPIRE_SESSION, .target = s);
	assert_session_ended(f, s, w, wseq);
}

static void test_renew_before_expire_wins(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s = fx_session_ttl(f, 5000); /* deadline 6000 */
	fx_take(f, s, 1, "a");

	f->now = 4000;
	uint64_t with_unknown[] = {s + 100, s};
	DO(f, RENEW, .renew = with_unknown, .n_renew = 2);
	assert_int_equal(fx_count(f, FSM_EV_SESSION), 1);
	assert_null(fx_sess(f, s + 100));
	const struct fx_event *ev = fx_event(f, FSM_EV_SESSION);
	assert_non_null(ev);
	assert_int_equal(ev->session, s);
	assert_int_equal(ev->deadline, 9000);
	assert_int_equal(ev->ttl_ms, 5000);

	/* An EXPIRE proposed for the old deadline lands after the RENEW. */
	struct fx_image before = fx_dump(f);
	f->now = 6000;
	DO(f, EXPIRE_SESSION, .target = s);
	assert_int_equal(f->n_events, 1);
	fx_assert_records(f, &before);
	fx_image_free(&before);

	/* RENEW then EXPIRE in one entry: the RENEW still wins. */
	f->now = 9000;
	uint64_t ids[] = {s};
	struct op batch[] = {
		OP(RENEW, .renew = ids, .n_renew = 1),
		OP(EXPIRE_SESSION, .target = s),
	};
	fx_apply(f, batch, 2);
	assert_int_equal(fx_count(f, FSM_EV_SESSION_GONE), 0);
	HOLDERS(f, "a", s, 1);

	f->now = 14000;
	DO(f, EXPIRE_SESSION, .target = s);
	assert_int_equal(fx_count(f, FSM_EV_SESSION_GONE), 1);
	assert_false(fx_lock_exists(f, "a"));
}

static void test_expire_unknown_session_is_noop(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s = fx_session(f);
	fx_take(f, s, 1, "a");
	struct fx_image before = fx_dump(f);
	f->now = 1000000;
	Raftlock__Result r = DO(f, EXPIRE_SESSION, .target = s + 100);
	assert_int_equal(r.status, 0);
	assert_int_equal(f->n_events, 1);
	fx_assert_records(f, &before);
	fx_image_free(&before);
}

/* ---------------------------------------------------------- retries -- */

static void test_retry_returns_first_answer(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s = fx_session(f), other = fx_session(f);

	Raftlock__Result first = DO(f, ACQUIRE, .session = s, .seq = 5, .owner = 1, .name = "a");
	assert_int_equal(first.status, 0);
	uint64_t next = fx_next_token(f);
	Raftlock__Result again = DO(f, ACQUIRE, .session = s, .seq = 5, .owner = 1, .name = "a");
	assert_int_equal(again.status, 0);
	assert_int_equal(again.token, first.token);
	assert_int_equal(again.count, 1); /* not a second nesting level */
	assert_int_equal(fx_next_token(f), next);
	Raftlock__LockRecord *l = fx_lock(f, "a");
	assert_int_equal(l->n_holders, 1);
	assert_int_equal(l->holders[0]->count, 1);
	raftlock__lock_record__free_unpacked(l, NULL);

	/* A refusal is a first answer too. */
	Raftlock__Result busy = DO(f, ACQUIRE, .session = other, .seq = 3, .owner = 1, .name = "a");
	assert_int_equal(busy.status, RAFTLOCK_EBUSY);
	fx_release_ok(f, s, 1, "a", 0);
	busy = DO(f, ACQUIRE, .session = other, .seq = 3, .owner = 1, .name = "a");
	assert_int_equal(busy.status, RAFTLOCK_EBUSY);
	assert_false(fx_lock_exists(f, "a"));

	Raftlock__Result rel = DO(f, RELEASE, .session = s, .seq = 6, .owner = 1, .name = "a");
	assert_int_equal(rel.status, RAFTLOCK_ENOTHOLDER);
	fx_take(f, s, 1, "a");
	rel = DO(f, RELEASE, .session = s, .seq = 6, .owner = 1, .name = "a");
	assert_int_equal(rel.status, RAFTLOCK_ENOTHOLDER);
	HOLDERS(f, "a", s, 1);
}

static void test_seq_below_mark_is_stale(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s = fx_session(f);
	Raftlock__Result r = DO(f, ACQUIRE, .session = s, .seq = 4, .owner = 1, .name = "a");
	assert_int_equal(r.status, 0);
	r = DO(f, ACQUIRE, .session = s, .seq = 10, .ack_below = 8, .owner = 1, .name = "b");
	assert_int_equal(r.status, 0);

	uint64_t next = fx_next_token(f);
	r = DO(f, ACQUIRE, .session = s, .seq = 4, .owner = 1, .name = "a");
	assert_int_equal(r.status, RAFTLOCK_ESTALESEQ);
	r = DO(f, ACQUIRE, .session = s, .seq = 7, .owner = 1, .name = "c");
	assert_int_equal(r.status, RAFTLOCK_ESTALESEQ);
	assert_false(fx_lock_exists(f, "c"));
	assert_int_equal(fx_next_token(f), next);
	Raftlock__LockRecord *l = fx_lock(f, "a");
	assert_int_equal(l->holders[0]->count, 1);
	raftlock__lock_record__free_unpacked(l, NULL);

	/* The mark itself is still awaited: a retry of 8 is answered. */
	r = DO(f, RELEASE, .session = s, .seq = 8, .owner = 1, .name = "a");
	assert_int_equal(r.status, 0);
	r = DO(f, RELEASE, .session = s, .seq = 8, .owner = 1, .name = "a");
	assert_int_equal(r.status, 0);
}

static void test_open_session_nonce_is_idempotent(void **state)
{
	struct fx *f = fx_ready(state);
	Raftlock__Result a = DO(f, OPEN_SESSION, .nonce = 77, .ttl_ms = 5000);
	assert_int_equal(a.status, 0);
	f->now = 2000;
	Raftlock__Result b = DO(f, OPEN_SESSION, .nonce = 77, .ttl_ms = 5000);
	assert_int_equal(b.status, 0);
	assert_int_equal(b.session, a.session);
	assert_int_equal(b.ttl_ms, 5000);
	assert_int_equal(fx_count_sessions(f), 1);

	Raftlock__Result c = DO(f, OPEN_SESSION, .nonce = 78, .ttl_ms = 5000);
	assert_int_equal(c.status, 0);
	assert_true(c.session != a.session);
	assert_int_equal(fx_count_sessions(f), 2);
}

/* Rule 14: the session keeps the digest its open carried, and tells it
 * in the open's event; a retried open (same nonce) is the same session
 * only with the same digest: another digest, or none, gets EPERM and
 * changes nothing. */
static void test_open_session_keeps_secret_digest(void **state)
{
	struct fx *f = fx_ready(state);
	const char *d1 = "0123456789abcdef0123456789abcdef";
	const char *d2 = "0123456789abcdef0123456789abcdeX";
	Raftlock__Result a = DO(f, OPEN_SESSION, .nonce = 77, .ttl_ms = 5000, .digest = d1);
	assert_int_equal(a.status, 0);
	assert_int_equal(fx_count(f, FSM_EV_SESSION), 1);
	Raftlock__SessionRecord *rec = fx_sess(f, a.session);
	assert_non_null(rec);
	assert_int_equal(rec->secret_digest.len, 32);
	assert_memory_equal(rec->secret_digest.data, d1, 32);
	raftlock__session_record__free_unpacked(rec, NULL);

	Raftlock__Result b = DO(f, OPEN_SESSION, .nonce = 77, .ttl_ms = 5000, .digest = d1);
	assert_int_equal(b.status, 0);
	assert_int_equal(b.session, a.session);
	Raftlock__Result c = DO(f, OPEN_SESSION, .nonce = 77, .ttl_ms = 5000, .digest = d2);
	assert_int_equal(c.status, RAFTLOCK_EPERM);
	assert_int_equal(c.session, 0);
	Raftlock__Result d = DO(f, OPEN_SESSION, .nonce = 77, .ttl_ms = 5000);
	assert_int_equal(d.status, RAFTLOCK_EPERM);
	assert_int_equal(fx_count_sessions(f), 1);
	rec = fx_sess(f, a.session);
	assert_memory_equal(rec->secret_digest.data, d1, 32);
	raftlock__session_record__free_unpacked(rec, NULL);

	/* An open of entry format 2 (no digest) makes a session without one,
	 * and its retries (no digest either) find it, as before. */
	Raftlock__Result e = DO(f, OPEN_SESSION, .nonce = 78, .ttl_ms = 5000);
	assert_int_equal(e.status, 0);
	rec = fx_sess(f, e.session);
	assert_int_equal(rec->secret_digest.len, 0);
	raftlock__session_record__free_unpacked(rec, NULL);
	assert_int_equal(DO(f, OPEN_SESSION, .nonce = 78, .ttl_ms = 5000).session, e.session);
}

/* The seqs in the session's de-duplication table, in seq order,
 * terminated by 0. */
static void assert_outcomes(struct fx *f, uint64_t s, const uint64_t *want)
{
	struct fx_outcome got[16];
	size_t n = fx_outcomes(f, s, got, 16);
	size_t i = 0;
	for (; want[i] != 0; i++) {
		assert_true(i < n);
		assert_int_equal(got[i].seq, want[i]);
	}
	assert_int_equal(n, i);
}

static void test_prune_keeps_pending_outcome(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s = fx_session(f), h = fx_session(f);
	fx_take(f, h, 1, "q");

	uint64_t queued =
		fx_enqueue(f, OP(ACQUIRE, .session = s, .seq = 3, .owner = 1, .name = "q"));
	DO(f, ACQUIRE, .session = s, .seq = 4, .owner = 1, .name = "z");
	assert_outcomes(f, s, (const uint64_t[]){3, 4, 0});
	DO(f, ACQUIRE, .session = s, .seq = 6, .ack_below = 5, .owner = 2, .name = "z2");
	assert_outcomes(f, s, (const uint64_t[]){3, 6, 0});
	Raftlock__Result r = DO(f, ACQUIRE, .session = s, .seq = 4, .owner = 1, .name = "z");
	assert_int_equal(r.status, RAFTLOCK_ESTALESEQ);

	/* The kept outcome learns the grant: a late cancel reports it. */
	fx_release_ok(f, h, 1, "q", 0);
	uint64_t t = fx_pushed_grant(f, s, queued);
	r = DO(f, CANCEL_WAIT, .session = s, .seq = 7, .owner = 1, .name = "q",
	       .acquire_seq = queued);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.token, t);
	HOLDERS(f, "q", s, 1);

	DO(f, RELEASE, .session = s, .seq = 8, .ack_below = 8, .owner = 1, .name = "q");
	assert_outcomes(f, s, (const uint64_t[]){8, 0});
}

static void test_outcome_table_quota(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s = fx_session(f);
	for (unsigned i = 0; i < FSM_MAX_OUTCOMES; i++) {
		Raftlock__Result r = DO(f, RELEASE, .session = s, .owner = 1, .name = "n");
		assert_int_equal(r.status, RAFTLOCK_ENOTHOLDER);
	}
	Raftlock__Result r = DO(f, ACQUIRE, .session = s, .owner = 1, .name = "a");
	assert_int_equal(r.status, RAFTLOCK_ELIMIT);
	assert_false(fx_lock_exists(f, "a"));
	/* Acknowledging the answers makes room again. */
	r = DO(f, ACQUIRE, .session = s, .ack_below = f->seq + 1, .owner = 1, .name = "a");
	assert_int_equal(r.status, 0);
	assert_outcomes(f, s, (const uint64_t[]){f->seq, 0});
}

/* ------------------------------------------------- applied index, time -- */

static void test_applied_entries_are_skipped(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s = fx_session(f);
	fx_take(f, s, 1, "a");
	uint64_t applied = f->index;
	struct fx_image before = fx_dump(f);

	f->now = 99999;
	struct op grantable = OP(ACQUIRE, .session = s, .seq = 50, .owner = 1, .name = "b");
	uint64_t at[] = {applied, applied - 1, 1, 0};
	for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
		fx_apply_entry_at(f, at[i], &grantable, 1);
		assert_int_equal(f->n_events, 0);
		fx_assert_image(f, &before);
	}
	fx_image_free(&before);
	assert_int_equal(fsm_applied_index(&f->fsm), applied);

	/* The next index applies, with the time the skipped entries did not
	 * set. */
	f->now = 2000;
	fx_apply_entry_at(f, applied + 1, &grantable, 1);
	assert_int_equal(fx_result(f, 0).status, 0);
	assert_int_equal(fsm_applied_index(&f->fsm), applied + 1);
	f->index = applied + 1;
	fx_session(f);
	assert_int_equal(fx_event(f, FSM_EV_SESSION)->deadline, 2000 + FX_TTL);
}

static void test_cluster_time_never_goes_back(void **state)
{
	struct fx *f = fx_ready(state);
	f->now = 10000;
	fx_session(f);
	f->now = 500; /* an entry with an older time */
	fx_session(f);
	assert_int_equal(fx_event(f, FSM_EV_SESSION)->deadline, 10000 + FX_TTL);
	Raftlock__Meta *m = fx_meta(f);
	assert_int_equal(m->cluster_time, 10000);
	assert_int_equal(m->applied_index, f->index);
	raftlock__meta__free_unpacked(m, NULL);
}

/* ------------------------------------------------------- validation -- */

static void test_names_are_validated(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s = fx_session(f);
	char longest[RAFTLOCK_NAME_MAX + 2];
	memset(longest, 'n', sizeof longest);
	longest[RAFTLOCK_NAME_MAX] = '\0';
	fx_take(f, s, 1, longest);
	longest[RAFTLOCK_NAME_MAX] = 'n';
	longest[RAFTLOCK_NAME_MAX + 1] = '\0';

	const char *bad[] = {"", longest};
	for (size_t i = 0; i < 2; i++) {
		Raftlock__Result r = DO(f, ACQUIRE, .session = s, .owner = 1, .name = bad[i]);
		assert_int_equal(r.status, RAFTLOCK_EINVAL);
		r = DO(f, ACQUIRE, .session = s, .owner = 1, .name = bad[i], .wait = true);
		assert_int_equal(r.status, RAFTLOCK_EINVAL);
		r = DO(f, RELEASE, .session = s, .owner = 1, .name = bad[i]);
		assert_int_equal(r.status, RAFTLOCK_EINVAL);
		r = DO(f, CANCEL_WAIT, .session = s, .owner = 1, .name = bad[i], .acquire_seq = 1);
		assert_int_equal(r.status, RAFTLOCK_EINVAL);
	}
	MDB_txn *txn = store_begin(&f->store, false);
	assert_int_equal(store_count_locks(&f->store, txn), 1);
	store_abort(txn);
}

static void test_ttl_bounds(void **state)
{
	struct fx *f = fx_ready(state);
	const uint32_t bad[] = {0, RAFTLOCK_TTL_MIN_MS - 1, RAFTLOCK_TTL_MAX_MS + 1};
	for (size_t i = 0; i < 3; i++) {
		Raftlock__Result r = DO(f, OPEN_SESSION, .ttl_ms = bad[i], .nonce = 5);
		assert_int_equal(r.status, RAFTLOCK_EINVAL);
		assert_int_equal(r.session, 0);
		assert_int_equal(fx_count(f, FSM_EV_SESSION), 0);
	}
	assert_int_equal(fx_count_sessions(f), 0);
	fx_session_ttl(f, RAFTLOCK_TTL_MIN_MS);
	fx_session_ttl(f, RAFTLOCK_TTL_MAX_MS);
	assert_int_equal(fx_count_sessions(f), 2);
}

static void test_unknown_session_refused(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s = fx_session(f);
	uint64_t unknown = s + 1000;
	struct op ops[] = {
		OP(ACQUIRE, .session = unknown, .owner = 1, .name = "a"),
		OP(ACQUIRE, .session = unknown, .owner = 1, .name = "a", .wait = true),
		OP(RELEASE, .session = unknown, .owner = 1, .name = "a"),
		OP(CANCEL_WAIT, .session = unknown, .owner = 1, .name = "a", .acquire_seq = 1),
		OP(CLOSE_SESSION, .session = unknown),
		OP(ACQUIRE, .session = 0, .owner = 1, .name = "a"),
	};
	fx_apply(f, ops, 6);
	for (unsigned i = 0; i < 6; i++)
		assert_int_equal(fx_result(f, i).status, RAFTLOCK_ESESSION);
	assert_int_equal(f->n_events, 6);
	assert_false(fx_lock_exists(f, "a"));
	assert_null(fx_sess(f, unknown));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
		T(test_init_sets_fencing_floor),
		T(test_init_zero_floor_never_grants_token_zero),
		T(test_same_log_same_state),
		T(test_same_short_log_same_state),
		T(test_tokens_strictly_increase),
		T(test_only_holder_releases),
		T(test_close_releases_everything),
		T(test_expire_at_deadline_releases_everything),
		T(test_renew_before_expire_wins),
		T(test_expire_unknown_session_is_noop),
		T(test_retry_returns_first_answer),
		T(test_seq_below_mark_is_stale),
		T(test_open_session_nonce_is_idempotent),
		T(test_open_session_keeps_secret_digest),
		T(test_prune_keeps_pending_outcome),
		T(test_outcome_table_quota),
		T(test_applied_entries_are_skipped),
		T(test_cluster_time_never_goes_back),
		T(test_names_are_validated),
		T(test_ttl_bounds),
		T(test_unknown_session_refused),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
