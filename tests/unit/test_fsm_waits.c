/*
 * test_fsm_waits.c: blocking acquires and the grant rules: FIFO, pushed
 * grants, shared batches, writer preference, semaphores, nesting,
 * lock-delay, waits ended by expiry, cancel and server-side deadline.
 */
#include "test_fsm_harness.h"

#define RW RAFTLOCK__LOCK_KIND__RWLOCK
#define SEM RAFTLOCK__LOCK_KIND__SEMAPHORE
#define SHARED RAFTLOCK__MODE__SHARED
#define EXCL RAFTLOCK__MODE__EXCLUSIVE

/* Queues `session` (owner 1) for `name` in `mode` on a read-write lock. */
static uint64_t rw_wait(struct fx *f, uint64_t session, Raftlock__Mode mode)
{
	return fx_enqueue(f, OP(ACQUIRE, .session = session, .owner = 1, .name = "rw", .kind = RW,
				.mode = mode));
}

static Raftlock__Result rw_try(struct fx *f, uint64_t session, Raftlock__Mode mode)
{
	return DO(f, ACQUIRE, .session = session, .owner = 1, .name = "rw", .kind = RW,
		  .mode = mode);
}

static void assert_no_push(const struct fx *f)
{
	assert_int_equal(fx_count(f, FSM_EV_PUSH), 0);
}

/* Opens n sessions into ids. */
static void open_sessions(struct fx *f, uint64_t *ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ids[i] = fx_session(f);
}

/* ------------------------------------------------------------- FIFO -- */

static void test_fifo_grants_are_pushed(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s[4];
	open_sessions(f, s, 4);
	uint64_t t0 = fx_take(f, s[0], 1, "m");
	uint64_t seq[4];
	for (int i = 1; i < 4; i++) {
		seq[i] = fx_enqueue(f, OP(ACQUIRE, .session = s[i], .owner = 1, .name = "m"));
		assert_int_equal(fx_count(f, FSM_EV_WAIT_DEADLINE), 0);
	}
	WAITERS(f, "m", s[1], seq[1], s[2], seq[2], s[3], seq[3]);

	/* A retry of a queued acquire is still queued, and queued once. */
	Raftlock__Result r = DO(f, ACQUIRE, .session = s[1], .seq = seq[1], .owner = 1, .name = "m",
				.wait = true);
	assert_int_equal(r.status, 0);
	assert_true(r.queued);
	assert_int_equal(r.token, 0);
	WAITERS(f, "m", s[1], seq[1], s[2], seq[2], s[3], seq[3]);

	uint64_t last = t0;
	for (int i = 1; i < 4; i++) {
		fx_release_ok(f, s[i - 1], 1, "m", 0);
		assert_int_equal(fx_count(f, FSM_EV_PUSH), 1);
		uint64_t t = fx_pushed_grant(f, s[i], seq[i]);
		assert_true(t > last);
		last = t;
		assert_int_equal(HOLDERS(f, "m", s[i], 1), t);

		/* A retry now returns the grant, without nesting again. */
		r = DO(f, ACQUIRE, .session = s[i], .seq = seq[i], .owner = 1, .name = "m",
		       .wait = true);
		assert_int_equal(r.status, 0);
		assert_false(r.queued);
		assert_int_equal(r.token, t);
		assert_int_equal(r.count, 1);
	}
	WAITERS(f, "m", 0);
	fx_release_ok(f, s[3], 1, "m", 0);
	assert_no_push(f);
	assert_false(fx_lock_exists(f, "m"));
}

static bool queued(struct fx *f, const char *name, uint64_t session)
{
	MDB_txn *txn = store_begin(&f->store, false);
	bool q = store_lock_queued(&f->store, txn, name, session);
	store_abort(txn);
	return q;
}

/* store_lock_queued(), the leader's hint for parking an acquire
 * (node_propose_call, parked), follows the queue; the holder's own acquire is
 * granted at once (nested), so it is not queued; a name the store cannot
 * hold (a client's, not yet checked) is simply not queued. */
static void test_queued_hint(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s[3];
	open_sessions(f, s, 3);
	fx_take(f, s[0], 1, "m");
	assert_false(queued(f, "m", s[2]));
	fx_enqueue(f, OP(ACQUIRE, .session = s[1], .owner = 1, .name = "m"));
	assert_true(queued(f, "m", s[2]));
	assert_true(queued(f, "m", s[1])); /* a retry of its queued acquire */
	assert_false(queued(f, "m", s[0]));
	Raftlock__Result r = DO(f, ACQUIRE, .session = s[0], .owner = 1, .name = "m", .wait = true);
	assert_int_equal(r.status, 0);
	assert_false(r.queued); /* nested, as the hint said */
	fx_release_ok(f, s[0], 1, "m", 1);
	fx_release_ok(f, s[0], 1, "m", 0);
	assert_false(queued(f, "m", s[2]));
	char *long_name = fx_alloc(f, 4097);
	memset(long_name, 'n', 4096);
	long_name[4096] = 0;
	assert_false(queued(f, "absent", s[2]));
	assert_false(queued(f, "", s[2]));
	assert_false(queued(f, long_name, s[2]));
}

static void test_shared_waiters_granted_together(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t h, r1, r2, w, r3;
	uint64_t ids[5];
	open_sessions(f, ids, 5);
	h = ids[0], r1 = ids[1], r2 = ids[2], w = ids[3], r3 = ids[4];
	assert_int_equal(rw_try(f, h, EXCL).status, 0);
	uint64_t q1 = rw_wait(f, r1, SHARED), q2 = rw_wait(f, r2, SHARED);
	uint64_t qw = rw_wait(f, w, EXCL), q3 = rw_wait(f, r3, SHARED);

	fx_release_ok(f, h, 1, "rw", 0);
	assert_int_equal(fx_count(f, FSM_EV_PUSH), 2);
	uint64_t t1 = fx_pushed_grant(f, r1, q1);
	uint64_t t2 = fx_pushed_grant(f, r2, q2);
	assert_true(t2 > t1);
	HOLDERS(f, "rw", r1, 1, r2, 1);
	/* r3 would fit with the readers but waits behind the writer. */
	WAITERS(f, "rw", w, qw, r3, q3);

	fx_release_ok(f, r1, 1, "rw", 0);
	assert_no_push(f);
	fx_release_ok(f, r2, 1, "rw", 0);
	uint64_t tw = fx_pushed_grant(f, w, qw);
	assert_true(tw > t2);
	HOLDERS(f, "rw", w, 1);
	fx_release_ok(f, w, 1, "rw", 0);
	assert_true(fx_pushed_grant(f, r3, q3) > tw);
	WAITERS(f, "rw", 0);
}

/* r1 reads "rw", w waits to write it; r2 is a third session. */
struct rw_scene {
	uint64_t r1, w, r2, qw;
};

static struct rw_scene reader_and_waiting_writer(struct fx *f)
{
	struct rw_scene sc;
	sc.r1 = fx_session(f);
	sc.w = fx_session(f);
	sc.r2 = fx_session(f);
	assert_int_equal(rw_try(f, sc.r1, SHARED).status, 0);
	sc.qw = rw_wait(f, sc.w, EXCL);
	return sc;
}

static void test_waiting_writer_blocks_later_readers(void **state)
{
	struct fx *f = fx_ready(state);
	struct rw_scene sc = reader_and_waiting_writer(f);
	uint64_t r1 = sc.r1, w = sc.w, r2 = sc.r2, qw = sc.qw;

	Raftlock__Result r = rw_try(f, r2, SHARED);
	assert_int_equal(r.status, RAFTLOCK_EBUSY);
	uint64_t q2 = rw_wait(f, r2, SHARED);
	HOLDERS(f, "rw", r1, 1);
	WAITERS(f, "rw", w, qw, r2, q2);

	fx_release_ok(f, r1, 1, "rw", 0);
	assert_int_equal(fx_count(f, FSM_EV_PUSH), 1);
	fx_pushed_grant(f, w, qw);
	WAITERS(f, "rw", r2, q2);
	fx_release_ok(f, w, 1, "rw", 0);
	fx_pushed_grant(f, r2, q2);
}

/* -------------------------------------------------------- semaphores -- */

/* The permits of each holder of `name`, in order, ended by 0. */
static void assert_permits(struct fx *f, const char *name, const uint32_t *want)
{
	Raftlock__LockRecord *l = fx_lock(f, name);
	assert_non_null(l);
	assert_int_equal(l->kind, SEM);
	size_t i = 0;
	for (; want[i] != 0; i++) {
		assert_true(i < l->n_holders);
		assert_int_equal(l->holders[i]->permits, want[i]);
	}
	assert_int_equal(l->n_holders, i);
	raftlock__lock_record__free_unpacked(l, NULL);
}

static Raftlock__Result sem_try(struct fx *f, uint64_t session, uint32_t permits)
{
	return DO(f, ACQUIRE, .session = session, .owner = 1, .name = "sem", .permits = permits);
}

static void test_semaphore_permits_fifo(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s[5];
	open_sessions(f, s, 5);
	Raftlock__Result r = DO(f, ACQUIRE, .session = s[0], .owner = 1, .name = "sem", .kind = SEM,
				.limit = 3, .permits = 2);
	assert_int_equal(r.status, 0);
	assert_int_equal(sem_try(f, s[1], 1).status, 0);
	assert_permits(f, "sem", (const uint32_t[]){2, 1, 0});
	assert_int_equal(sem_try(f, s[2], 1).status, RAFTLOCK_EBUSY);
	assert_int_equal(sem_try(f, s[2], 4).status, RAFTLOCK_EINVAL);

	/* A big request at the head blocks a small one behind it. */
	uint64_t q2 = fx_enqueue(
		f, OP(ACQUIRE, .session = s[2], .owner = 1, .name = "sem", .permits = 2));
	uint64_t q3 = fx_enqueue(
		f, OP(ACQUIRE, .session = s[3], .owner = 1, .name = "sem", .permits = 1));
	fx_release_ok(f, s[1], 1, "sem", 0);
	assert_no_push(f);
	assert_permits(f, "sem", (const uint32_t[]){2, 0});
	WAITERS(f, "sem", s[2], q2, s[3], q3);
	assert_int_equal(sem_try(f, s[4], 1).status, RAFTLOCK_EBUSY);

	fx_release_ok(f, s[0], 1, "sem", 0);
	assert_int_equal(fx_count(f, FSM_EV_PUSH), 2);
	uint64_t t2 = fx_pushed_grant(f, s[2], q2);
	assert_true(fx_pushed_grant(f, s[3], q3) > t2);
	assert_permits(f, "sem", (const uint32_t[]){2, 1, 0});
	WAITERS(f, "sem", 0);
	assert_int_equal(sem_try(f, s[4], 1).status, RAFTLOCK_EBUSY);
}

static void test_kind_and_limit_must_agree(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f), b = fx_session(f);
	DO(f, ACQUIRE, .session = a, .owner = 1, .name = "sem", .kind = SEM, .limit = 3);
	fx_take(f, a, 1, "m");
	assert_int_equal(rw_try(f, a, SHARED).status, 0);

	struct op bad[] = {
		OP(ACQUIRE, .name = "sem", .kind = SEM, .limit = 5),
		OP(ACQUIRE, .name = "sem", .kind = RAFTLOCK__LOCK_KIND__MUTEX),
		OP(ACQUIRE, .name = "sem", .kind = RW),
		OP(ACQUIRE, .name = "m", .kind = SEM, .limit = 2),
		OP(ACQUIRE, .name = "rw", .kind = SEM, .limit = 2),
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		bad[i].session = b;
		bad[i].owner = 1;
		bad[i].wait = true;
		Raftlock__Result r = fx_do(f, bad[i]);
		assert_int_equal(r.status, RAFTLOCK_EKIND);
		assert_false(r.queued);
		WAITERS(f, bad[i].name, 0);
	}
	/* Kind 0 and limit 0 take the existing lock's. */
	Raftlock__Result r = sem_try(f, b, 0);
	assert_int_equal(r.status, 0);
	assert_permits(f, "sem", (const uint32_t[]){1, 1, 0});
	r = DO(f, ACQUIRE, .session = b, .owner = 2, .name = "sem", .kind = SEM, .limit = 3,
	       .permits = 1);
	assert_int_equal(r.status, 0);
}

/* ----------------------------------------------------------- nesting -- */

static void test_reentrant_nesting(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f), b = fx_session(f);
	uint64_t t = fx_take(f, a, 1, "m");
	Raftlock__Result r = DO(f, ACQUIRE, .session = a, .owner = 1, .name = "m");
	assert_int_equal(r.status, 0);
	assert_int_equal(r.count, 2);
	assert_int_equal(r.token, t);
	uint64_t qb = fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 1, .name = "m"));

	r = DO(f, RELEASE, .session = a, .owner = 1, .name = "m");
	assert_int_equal(r.status, 0);
	assert_int_equal(r.count, 1);
	assert_int_equal(r.token, t);
	assert_no_push(f);
	assert_int_equal(HOLDERS(f, "m", a, 1), t);

	fx_release_ok(f, a, 1, "m", 0);
	assert_true(fx_pushed_grant(f, b, qb) > t);
	r = DO(f, RELEASE, .session = a, .owner = 1, .name = "m");
	assert_int_equal(r.status, RAFTLOCK_ENOTHOLDER);
	HOLDERS(f, "m", b, 1);
}

/*
 * Regression: a re-acquire through a handle that holds the lock
 * nests whatever it asks for. A handle holding SHARED that asks for
 * EXCLUSIVE is told it has the lock while another session also reads.
 */
static void test_reentry_cannot_upgrade_past_readers(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f), b = fx_session(f);
	assert_int_equal(rw_try(f, a, SHARED).status, 0);
	assert_int_equal(rw_try(f, b, SHARED).status, 0);
	Raftlock__Result r = rw_try(f, a, EXCL);
	/* An exclusive grant may not coexist with another holder. */
	assert_int_not_equal(r.status, 0);
	HOLDERS(f, "rw", a, 1, b, 1);
}

/*
 * Regression: a re-acquire of a semaphore for more permits nests
 * with the permits of the first grant, so the server hands out more
 * permits than the limit.
 */
static void test_reentry_cannot_exceed_semaphore_limit(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f), b = fx_session(f);
	Raftlock__Result r =
		DO(f, ACQUIRE, .session = a, .owner = 1, .name = "sem", .kind = SEM, .limit = 3);
	assert_int_equal(r.status, 0);
	Raftlock__Result more = sem_try(f, a, 3);
	Raftlock__Result other = sem_try(f, b, 2);
	uint32_t promised = (more.status == 0 ? 3 : 1) + (other.status == 0 ? 2 : 0);
	assert_true(promised <= 3);
}

/* -------------------------------------------------------- lock-delay -- */

static void test_lock_delay_after_expiry(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session_ttl(f, 5000), b = fx_session(f);
	DO(f, ACQUIRE, .session = a, .owner = 1, .name = "d", .lock_delay_ms = 2000);
	DO(f, ACQUIRE, .session = a, .owner = 1, .name = "e", .lock_delay_ms = 2000);

	f->now = 6000;
	DO(f, EXPIRE_SESSION, .target = a);
	assert_int_equal(fx_count(f, FSM_EV_SESSION_GONE), 1);
	assert_int_equal(fx_count(f, FSM_EV_LOCK_DELAY), 2);
	const struct fx_event *ev = fx_event(f, FSM_EV_LOCK_DELAY);
	assert_int_equal(ev->deadline, 8000);
	Raftlock__LockRecord *l = fx_lock(f, "d");
	assert_non_null(l);
	assert_int_equal(l->n_holders, 0);
	assert_int_equal(l->delay_until, 8000);
	raftlock__lock_record__free_unpacked(l, NULL);

	Raftlock__Result r = DO(f, ACQUIRE, .session = b, .owner = 1, .name = "e");
	assert_int_equal(r.status, RAFTLOCK_EBUSY);
	f->now = 7999;
	r = DO(f, ACQUIRE, .session = b, .owner = 1, .name = "e");
	assert_int_equal(r.status, RAFTLOCK_EBUSY);
	uint64_t qb = fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 1, .name = "d"));

	/* A LOCK_DELAY_END before delay_until changes nothing. */
	struct fx_image before = fx_dump(f);
	DO(f, LOCK_DELAY_END, .name = "d");
	DO(f, LOCK_DELAY_END, .name = "e");
	assert_int_equal(fx_count(f, FSM_EV_LOCK_DELAY), 0);
	fx_assert_records(f, &before);
	fx_image_free(&before);

	f->now = 8000;
	DO(f, LOCK_DELAY_END, .name = "d");
	ev = fx_event(f, FSM_EV_LOCK_DELAY);
	assert_non_null(ev);
	assert_string_equal(ev->name, "d");
	assert_int_equal(ev->deadline, 0);
	fx_pushed_grant(f, b, qb);
	DO(f, LOCK_DELAY_END, .name = "e");
	assert_false(fx_lock_exists(f, "e"));
	fx_take(f, b, 1, "e");
}

static void test_release_and_close_start_no_delay(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f), b = fx_session(f), c = fx_session(f);
	DO(f, ACQUIRE, .session = a, .owner = 1, .name = "d", .lock_delay_ms = 2000);
	fx_release_ok(f, a, 1, "d", 0);
	assert_int_equal(fx_count(f, FSM_EV_LOCK_DELAY), 0);
	fx_take(f, b, 1, "d");

	DO(f, ACQUIRE, .session = c, .owner = 1, .name = "e", .lock_delay_ms = 2000);
	DO(f, CLOSE_SESSION, .session = c);
	assert_int_equal(fx_count(f, FSM_EV_LOCK_DELAY), 0);
	fx_take(f, b, 1, "e");
}

/* ------------------------------------------------ waits that end early -- */

static void test_expiry_removes_waiters(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t h = fx_session_ttl(f, 5000), a = fx_session_ttl(f, 5000);
	uint64_t b = fx_session(f);
	fx_take(f, h, 1, "m");
	fx_take(f, h, 1, "m2");
	uint64_t qa = fx_enqueue(f, OP(ACQUIRE, .session = a, .owner = 1, .name = "m"));
	uint64_t qa2 = fx_enqueue(f, OP(ACQUIRE, .session = a, .owner = 1, .name = "m2"));
	uint64_t qb = fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 1, .name = "m"));

	/* Both end in one entry, the waiter first: it is never granted. */
	f->now = 6000;
	struct op batch[] = {
		OP(EXPIRE_SESSION, .target = a),
		OP(EXPIRE_SESSION, .target = h),
	};
	fx_apply(f, batch, 2);
	fx_pushed_error(f, a, qa, RAFTLOCK_ESESSION);
	fx_pushed_error(f, a, qa2, RAFTLOCK_ESESSION);
	fx_pushed_grant(f, b, qb);
	assert_int_equal(fx_count(f, FSM_EV_PUSH), 3);
	assert_int_equal(fx_count(f, FSM_EV_SESSION_GONE), 2);
	HOLDERS(f, "m", b, 1);
	WAITERS(f, "m", 0);
	assert_false(fx_lock_exists(f, "m2"));
}

static void test_cancel_wait_removes_waiter(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t h = fx_session(f), a = fx_session(f), b = fx_session(f);
	fx_take(f, h, 1, "m");
	uint64_t qa = fx_enqueue(f, OP(ACQUIRE, .session = a, .owner = 1, .name = "m"));
	uint64_t qb = fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 1, .name = "m"));

	Raftlock__Result r =
		DO(f, CANCEL_WAIT, .session = a, .owner = 1, .name = "m", .acquire_seq = qa);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.token, 0);
	fx_pushed_error(f, a, qa, RAFTLOCK_ECANCELED);
	WAITERS(f, "m", b, qb);

	/* The acquire's final outcome is the cancel. */
	r = DO(f, ACQUIRE, .session = a, .seq = qa, .owner = 1, .name = "m", .wait = true);
	assert_int_equal(r.status, RAFTLOCK_ECANCELED);
	assert_false(r.queued);
	WAITERS(f, "m", b, qb);
	r = DO(f, CANCEL_WAIT, .session = a, .owner = 1, .name = "m", .acquire_seq = qa);
	assert_int_equal(r.status, RAFTLOCK_ENOTFOUND);
	r = DO(f, CANCEL_WAIT, .session = a, .owner = 1, .name = "none", .acquire_seq = 999);
	assert_int_equal(r.status, RAFTLOCK_ENOTFOUND);

	fx_release_ok(f, h, 1, "m", 0);
	assert_int_equal(fx_count(f, FSM_EV_PUSH), 1);
	fx_pushed_grant(f, b, qb);
}

static void test_cancel_after_grant_returns_token(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t h = fx_session(f), a = fx_session(f);
	fx_take(f, h, 1, "m");
	uint64_t qa = fx_enqueue(f, OP(ACQUIRE, .session = a, .owner = 1, .name = "m"));
	fx_release_ok(f, h, 1, "m", 0);
	uint64_t t = fx_pushed_grant(f, a, qa);

	Raftlock__Result r =
		DO(f, CANCEL_WAIT, .session = a, .owner = 1, .name = "m", .acquire_seq = qa);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.token, t);
	assert_no_push(f);
	assert_int_equal(HOLDERS(f, "m", a, 1), t);
	fx_release_ok(f, a, 1, "m", 0);
}

static void test_cancel_of_writer_unblocks_readers(void **state)
{
	struct fx *f = fx_ready(state);
	struct rw_scene sc = reader_and_waiting_writer(f);
	uint64_t r1 = sc.r1, w = sc.w, r2 = sc.r2, qw = sc.qw;
	uint64_t q2 = rw_wait(f, r2, SHARED);

	Raftlock__Result r =
		DO(f, CANCEL_WAIT, .session = w, .owner = 1, .name = "rw", .acquire_seq = qw);
	assert_int_equal(r.status, 0);
	fx_pushed_error(f, w, qw, RAFTLOCK_ECANCELED);
	fx_pushed_grant(f, r2, q2);
	HOLDERS(f, "rw", r1, 1, r2, 1);
}

static void test_wait_expire_at_deadline(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t h = fx_session(f), a = fx_session(f), b = fx_session(f);
	fx_take(f, h, 1, "m");
	uint64_t qa =
		fx_enqueue(f, OP(ACQUIRE, .session = a, .owner = 1, .name = "m", .wait_ms = 3000));
	const struct fx_event *ev = fx_event(f, FSM_EV_WAIT_DEADLINE);
	assert_non_null(ev);
	assert_string_equal(ev->name, "m");
	assert_int_equal(ev->session, a);
	assert_int_equal(ev->seq, qa);
	assert_int_equal(ev->deadline, 4000);
	uint64_t qb = fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 1, .name = "m"));
	assert_int_equal(fx_count(f, FSM_EV_WAIT_DEADLINE), 0);

	struct fx_image before = fx_dump(f);
	f->now = 3999;
	DO(f, WAIT_EXPIRE, .name = "m", .target = a, .acquire_seq = qa);
	assert_int_equal(f->n_events, 1);
	DO(f, WAIT_EXPIRE, .name = "m", .target = b, .acquire_seq = qb);
	assert_int_equal(f->n_events, 1);
	fx_assert_records(f, &before);
	fx_image_free(&before);

	f->now = 4000;
	DO(f, WAIT_EXPIRE, .name = "m", .target = a, .acquire_seq = qa);
	fx_pushed_error(f, a, qa, RAFTLOCK_ETIMEDOUT);
	assert_int_equal(fx_count(f, FSM_EV_PUSH), 1);
	WAITERS(f, "m", b, qb);
	Raftlock__Result r =
		DO(f, ACQUIRE, .session = a, .seq = qa, .owner = 1, .name = "m", .wait = true);
	assert_int_equal(r.status, RAFTLOCK_ETIMEDOUT);

	/* A waiter without a deadline does not time out. Its session and
	 * the holder's stay live through renewals (rule 6). */
	uint64_t live[] = {h, b};
	for (uint64_t t = 10000; t <= 1000000; t += 9000) {
		f->now = t;
		DO(f, RENEW, .renew = live, .n_renew = 2);
	}
	DO(f, WAIT_EXPIRE, .name = "m", .target = b, .acquire_seq = qb);
	assert_no_push(f);
	fx_release_ok(f, h, 1, "m", 0);
	fx_pushed_grant(f, b, qb);
}

/* Rule 6: a session past its deadline is not live even before its EXPIRE
 * applies: its commands get RAFTLOCK_ESESSION and its waiters are not
 * granted; the EXPIRE then removes them with a push of the error. */
static void test_session_past_deadline_gets_nothing(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t h = fx_session_ttl(f, 2000), w = fx_session_ttl(f, 2000);
	fx_take(f, h, 1, "m");
	uint64_t q = fx_enqueue(f, OP(ACQUIRE, .session = w, .owner = 1, .name = "m"));
	uint64_t keep[] = {h};
	f->now = 2500;
	DO(f, RENEW, .renew = keep, .n_renew = 1);
	f->now = 3000; /* w's deadline, not yet expired */
	Raftlock__Result r = DO(f, ACQUIRE, .session = w, .owner = 2, .name = "x");
	assert_int_equal(r.status, RAFTLOCK_ESESSION);
	fx_release_ok(f, h, 1, "m", 0);
	assert_int_equal(fx_count(f, FSM_EV_PUSH), 0);
	DO(f, EXPIRE_SESSION, .target = w);
	fx_pushed_error(f, w, q, RAFTLOCK_ESESSION);
}

/* Mutexes and read-write locks are one family: an exclusive request of
 * either kind contends with the other; the first read-write request turns
 * a mutex into a read-write lock; a mutex request is never shared. */
static void test_mutex_and_rwlock_are_one_family(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f), b = fx_session(f);
	fx_take(f, a, 1, "m"); /* a mutex */
	Raftlock__Result r = DO(f, ACQUIRE, .session = b, .owner = 1, .name = "m", .kind = RW);
	assert_int_equal(r.status, RAFTLOCK_EBUSY);
	r = DO(f, ACQUIRE, .session = b, .owner = 1, .name = "m", .kind = RW,
	       .mode = RAFTLOCK__MODE__SHARED);
	assert_int_equal(r.status, RAFTLOCK_EBUSY); /* an exclusive holder */
	fx_release_ok(f, a, 1, "m", 0);
	assert_int_equal(rw_try(f, a, SHARED).status, 0);
	r = DO(f, ACQUIRE, .session = b, .owner = 2, .name = "rw",
	       .kind = RAFTLOCK__LOCK_KIND__MUTEX, .mode = RAFTLOCK__MODE__SHARED);
	assert_int_equal(r.status, RAFTLOCK_EINVAL);
	r = DO(f, ACQUIRE, .session = b, .owner = 2, .name = "rw",
	       .kind = RAFTLOCK__LOCK_KIND__MUTEX);
	assert_int_equal(r.status, RAFTLOCK_EBUSY); /* a shared holder */
}

/* A RENEW that lands after a waiter's deadline but before its EXPIRE makes
 * the session live again (rule 4): the queue it was blocking moves. */
static void test_renew_after_deadline_resumes_queue(void **state)
{
	struct fx *f = fx_ready(state);                /* now 1000 */
	uint64_t a = fx_session(f), b = fx_session(f); /* deadlines 11000 */
	fx_take(f, a, 1, "m");
	uint64_t seq_b = fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 1, .name = "m"));
	f->now = 10500;
	DO(f, RENEW, .renew = (uint64_t[]){a}, .n_renew = 1);
	f->now = 11000; /* B's deadline: skipped by the release (rule 6) */
	fx_release_ok(f, a, 1, "m", 0);
	assert_int_equal(fx_count(f, FSM_EV_PUSH), 0);
	f->now = 11010; /* B's renewal lands before its EXPIRE */
	DO(f, RENEW, .renew = (uint64_t[]){b}, .n_renew = 1);
	fx_pushed_grant(f, b, seq_b);
	f->now = 11050;
	DO(f, EXPIRE_SESSION, .target = b); /* a no-op now */
	HOLDERS(f, "m", b, 1);
	WAITERS(f, "m", 0);
}

/* A CLOSE applied after the session's deadline (before its EXPIRE) is an
 * expiry as far as lock-delay goes. */
static void test_close_after_deadline_keeps_lock_delay(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session_ttl(f, 5000), b = fx_session_ttl(f, 60000);
	DO(f, ACQUIRE, .session = a, .owner = 1, .name = "d", .lock_delay_ms = 2000);
	f->now = 6000;
	DO(f, CLOSE_SESSION, .session = a);
	assert_int_equal(fx_count(f, FSM_EV_LOCK_DELAY), 1);
	Raftlock__Result r = DO(f, ACQUIRE, .session = b, .owner = 1, .name = "d");
	assert_int_equal(r.status, RAFTLOCK_EBUSY);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
		T(test_fifo_grants_are_pushed),
		T(test_queued_hint),
		T(test_shared_waiters_granted_together),
		T(test_waiting_writer_blocks_later_readers),
		T(test_semaphore_permits_fifo),
		T(test_kind_and_limit_must_agree),
		T(test_reentrant_nesting),
		T(test_reentry_cannot_upgrade_past_readers),
		T(test_reentry_cannot_exceed_semaphore_limit),
		T(test_lock_delay_after_expiry),
		T(test_release_and_close_start_no_delay),
		T(test_expiry_removes_waiters),
		T(test_cancel_wait_removes_waiter),
		T(test_cancel_after_grant_returns_token),
		T(test_cancel_of_writer_unblocks_readers),
		T(test_wait_expire_at_deadline),
		T(test_session_past_deadline_gets_nothing),
		T(test_mutex_and_rwlock_are_one_family),
		T(test_renew_after_deadline_resumes_queue),
		T(test_close_after_deadline_keeps_lock_delay),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
