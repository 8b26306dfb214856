/*
 * test_fsm_multilock.c: atomic multi-acquire (server/multilock.c) and the
 * deadlock check of a new wait (server/deadlock.c), on the real state
 * machine and store (test_fsm_harness.h).
 */
#include "test_fsm_harness.h"

#define NAMES(...)                          \
	(const char *const[]){__VA_ARGS__}, \
		.n_names = sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)

/* A fresh fixture at cluster feature level 3: lock sets and the deadlock
 * check (feature_level.h). */
static struct fx *ready(void **state)
{
	struct fx *f = fx_ready(state);
	DO(f, SET_FEATURE_LEVEL, .level = 3);
	return f;
}

/* A multi-acquire that waits and must queue; returns its sequence. */
static uint64_t multi_enqueue(struct fx *f, struct op o)
{
	o.type = RAFTLOCK__COMMAND__OP_MULTI_ACQUIRE;
	o.wait = true;
	fx_number(f, &o);
	Raftlock__Result r = fx_do(f, o);
	assert_int_equal(r.status, 0);
	assert_true(r.queued);
	assert_int_equal(r.n_tokens, 0);
	return o.seq;
}

/* What the session keeps: its queued sets, or its lock names. */
enum listed { SETS, NAMES_HELD_OR_AWAITED };

static size_t listed(struct fx *f, uint64_t id, enum listed what)
{
	size_t n;
	if (what == NAMES_HELD_OR_AWAITED) {
		fx_session_names(f, id, &n);
		return n;
	}
	return fx_session_sets(f, id);
}

#define session_sets(f, id) listed((f), (id), SETS)
#define session_names(f, id) listed((f), (id), NAMES_HELD_OR_AWAITED)

/* ------------------------------------------------------------ granting -- */

static void test_free_set_granted_at_once(void **state)
{
	struct fx *f = ready(state);
	uint64_t s1 = fx_session(f);
	uint64_t next = fx_next_token(f);
	Raftlock__Result r =
		DO(f, MULTI_ACQUIRE, .session = s1, .owner = 7, .names = NAMES("a", "b", "c"));
	assert_int_equal(r.status, 0);
	assert_false(r.queued);
	assert_int_equal(r.n_tokens, 3);
	/* One token per lock, taken in the order of the names. */
	assert_int_equal(r.tokens[0], next);
	assert_int_equal(r.tokens[1], next + 1);
	assert_int_equal(r.tokens[2], next + 2);
	assert_int_equal(r.token, r.tokens[0]);
	assert_int_equal(HOLDERS(f, "a", s1, 7), next);
	assert_int_equal(HOLDERS(f, "b", s1, 7), next + 1);
	assert_int_equal(HOLDERS(f, "c", s1, 7), next + 2);
	assert_int_equal(session_names(f, s1), 3);
	/* Each lock is released on its own. */
	fx_release_ok(f, s1, 7, "b", 0);
	HOLDERS(f, "b", 0);
	HOLDERS(f, "a", s1, 7);
}

static void test_all_or_nothing(void **state)
{
	struct fx *f = ready(state);
	uint64_t s1 = fx_session(f), s2 = fx_session(f), s3 = fx_session(f);
	fx_take(f, s2, 1, "b");
	/* Without wait: refused whole, "a" not taken. */
	Raftlock__Result r =
		DO(f, MULTI_ACQUIRE, .session = s1, .owner = 7, .names = NAMES("a", "b"));
	assert_int_equal(r.status, RAFTLOCK_EBUSY);
	assert_false(fx_lock_exists(f, "a"));
	/* With wait: queued on both, holding neither. */
	uint64_t q = multi_enqueue(
		f, OP(MULTI_ACQUIRE, .session = s1, .owner = 7, .names = NAMES("a", "b")));
	HOLDERS(f, "a", 0);
	WAITERS(f, "a", s1, q);
	WAITERS(f, "b", s1, q);
	/* "a" is free, but its queue is FIFO: a single acquire waits behind. */
	uint64_t q3 = fx_enqueue(f, OP(ACQUIRE, .session = s3, .owner = 3, .name = "a"));
	WAITERS(f, "a", s1, q, s3, q3);
	assert_int_equal(session_sets(f, s1), 1);
	/* "b" released: the set is granted whole in that apply. */
	uint64_t next = fx_next_token(f);
	fx_release_ok(f, s2, 1, "b", 0);
	const struct fx_event *e = fx_push(f, s1, q);
	assert_non_null(e);
	assert_int_equal(e->result.status, 0);
	assert_int_equal(e->result.n_tokens, 2);
	assert_int_equal(e->result.tokens[0], next);
	assert_int_equal(e->result.tokens[1], next + 1);
	HOLDERS(f, "a", s1, 7);
	HOLDERS(f, "b", s1, 7);
	WAITERS(f, "a", s3, q3);
	WAITERS(f, "b", 0);
	assert_int_equal(session_sets(f, s1), 0);
	assert_null(fx_push(f, s3, q3));
}

static void test_fifo_with_single_waiters(void **state)
{
	struct fx *f = ready(state);
	uint64_t s1 = fx_session(f), s2 = fx_session(f), s3 = fx_session(f), s4 = fx_session(f);
	fx_take(f, s2, 1, "a");
	uint64_t q3 = fx_enqueue(f, OP(ACQUIRE, .session = s3, .owner = 3, .name = "a"));
	uint64_t q1 = multi_enqueue(
		f, OP(MULTI_ACQUIRE, .session = s1, .owner = 7, .names = NAMES("a", "b")));
	/* "b" is free, but the set waits at its head: s4 queues behind. */
	uint64_t q4 = fx_enqueue(f, OP(ACQUIRE, .session = s4, .owner = 4, .name = "b"));
	WAITERS(f, "b", s1, q1, s4, q4);
	/* s3 came first on "a": it is granted, the set waits on. */
	fx_release_ok(f, s2, 1, "a", 0);
	fx_pushed_grant(f, s3, q3);
	assert_null(fx_push(f, s1, q1));
	HOLDERS(f, "b", 0);
	/* Now the set is at the head of both queues. */
	fx_release_ok(f, s3, 3, "a", 0);
	assert_int_equal(fx_push(f, s1, q1)->result.n_tokens, 2);
	assert_null(fx_push(f, s4, q4));
	fx_release_ok(f, s1, 7, "b", 0);
	fx_pushed_grant(f, s4, q4);
}

/* A shared set granted lets the shared waiters behind it through, on
 * its other locks too, in the same apply. */
static void test_shared_items_and_followers(void **state)
{
	struct fx *f = ready(state);
	uint64_t s1 = fx_session(f), s2 = fx_session(f), s3 = fx_session(f);
	fx_take(f, s2, 1, "b");
	const Raftlock__Mode shared[] = {RAFTLOCK__MODE__SHARED, RAFTLOCK__MODE__SHARED};
	uint64_t q1 = multi_enqueue(f, OP(MULTI_ACQUIRE, .session = s1, .owner = 7,
					  .kind = RAFTLOCK__LOCK_KIND__RWLOCK, .modes = shared,
					  .names = NAMES("b", "r")));
	uint64_t q3 = fx_enqueue(f, OP(ACQUIRE, .session = s3, .owner = 3, .name = "r",
				       .kind = RAFTLOCK__LOCK_KIND__RWLOCK,
				       .mode = RAFTLOCK__MODE__SHARED));
	fx_release_ok(f, s2, 1, "b", 0);
	assert_int_equal(fx_push(f, s1, q1)->result.n_tokens, 2);
	fx_pushed_grant(f, s3, q3);
	HOLDERS(f, "r", s1, 7, s3, 3);
	HOLDERS(f, "b", s1, 7);
}

/* ---------------------------------------------------------- bad input -- */

static void test_bad_sets_refused(void **state)
{
	struct fx *f = ready(state);
	uint64_t s1 = fx_session(f);
	Raftlock__Result r;
	r = DO(f, MULTI_ACQUIRE, .session = s1, .owner = 7, .names = NAMES("b", "a"));
	assert_int_equal(r.status, RAFTLOCK_EINVAL); /* not sorted */
	r = DO(f, MULTI_ACQUIRE, .session = s1, .owner = 7, .names = NAMES("a", "a"));
	assert_int_equal(r.status, RAFTLOCK_EINVAL); /* a name twice */
	r = DO(f, MULTI_ACQUIRE, .session = s1, .owner = 7, .names = NULL, .n_names = 0);
	assert_int_equal(r.status, RAFTLOCK_EINVAL);
	r = DO(f, MULTI_ACQUIRE, .session = s1, .owner = 7, .names = NAMES("a", ""));
	assert_int_equal(r.status, RAFTLOCK_EINVAL);
	char names[RAFTLOCK_MULTI_MAX + 1][8];
	const char *ptrs[RAFTLOCK_MULTI_MAX + 1];
	for (size_t i = 0; i <= RAFTLOCK_MULTI_MAX; i++) {
		snprintf(names[i], sizeof names[i], "n%03zu", i);
		ptrs[i] = names[i];
	}
	r = DO(f, MULTI_ACQUIRE, .session = s1, .owner = 7, .names = ptrs,
	       .n_names = RAFTLOCK_MULTI_MAX + 1);
	assert_int_equal(r.status, RAFTLOCK_EINVAL);
	/* The most allowed works. */
	r = DO(f, MULTI_ACQUIRE, .session = s1, .owner = 7, .names = ptrs,
	       .n_names = RAFTLOCK_MULTI_MAX);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.n_tokens, RAFTLOCK_MULTI_MAX);
	/* The owner of a set is new to its locks. */
	r = DO(f, MULTI_ACQUIRE, .session = s1, .owner = 7, .names = NAMES("n000", "zz"));
	assert_int_equal(r.status, RAFTLOCK_EBUSY);
	assert_false(fx_lock_exists(f, "zz"));
	/* A semaphore among mutexes: EKIND, and nothing taken. */
	fx_take(f, s1, 9, "m");
	r = DO(f, MULTI_ACQUIRE, .session = s1, .owner = 8, .kind = RAFTLOCK__LOCK_KIND__SEMAPHORE,
	       .limit = 3, .names = NAMES("m", "new"));
	assert_int_equal(r.status, RAFTLOCK_EKIND);
	assert_false(fx_lock_exists(f, "new"));
}

/* ------------------------------------------------- timeout and cancel -- */

static void test_timeout_leaves_nothing(void **state)
{
	struct fx *f = ready(state);
	uint64_t s1 = fx_session(f), s2 = fx_session(f);
	fx_take(f, s2, 1, "b");
	uint64_t q = multi_enqueue(f, OP(MULTI_ACQUIRE, .session = s1, .owner = 7, .wait_ms = 500,
					 .names = NAMES("a", "b", "c")));
	/* One deadline for the set, on its first lock. */
	const struct fx_event *d = fx_event(f, FSM_EV_WAIT_DEADLINE);
	assert_non_null(d);
	assert_string_equal(d->name, "a");
	assert_int_equal(fx_count(f, FSM_EV_WAIT_DEADLINE), 1);
	f->now += 500;
	DO(f, WAIT_EXPIRE, .name = "a", .target = s1, .acquire_seq = q);
	fx_pushed_error(f, s1, q, RAFTLOCK_ETIMEDOUT);
	WAITERS(f, "a", 0);
	WAITERS(f, "b", 0);
	WAITERS(f, "c", 0);
	assert_false(fx_lock_exists(f, "a"));
	assert_false(fx_lock_exists(f, "c"));
	assert_int_equal(session_sets(f, s1), 0);
	assert_int_equal(session_names(f, s1), 0);
	/* A retry of the acquire learns the outcome. */
	Raftlock__Result r = DO(f, MULTI_ACQUIRE, .session = s1, .seq = q, .owner = 7, .wait = true,
				.names = NAMES("a", "b", "c"));
	assert_int_equal(r.status, RAFTLOCK_ETIMEDOUT);
}

static void test_cancel_leaves_nothing(void **state)
{
	struct fx *f = ready(state);
	uint64_t s1 = fx_session(f), s2 = fx_session(f), s3 = fx_session(f);
	fx_take(f, s2, 1, "a");
	uint64_t q = multi_enqueue(
		f, OP(MULTI_ACQUIRE, .session = s1, .owner = 7, .names = NAMES("a", "b")));
	uint64_t q3 = fx_enqueue(f, OP(ACQUIRE, .session = s3, .owner = 3, .name = "b"));
	/* Canceled through any lock of the set: "b", where it is the head. */
	Raftlock__Result r =
		DO(f, CANCEL_WAIT, .session = s1, .owner = 7, .name = "b", .acquire_seq = q);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.token, 0);
	fx_pushed_error(f, s1, q, RAFTLOCK_ECANCELED);
	/* The single waiter behind it on "b" moves up and is granted. */
	fx_pushed_grant(f, s3, q3);
	WAITERS(f, "a", 0);
	HOLDERS(f, "a", s2, 1);
	assert_int_equal(session_sets(f, s1), 0);
	assert_int_equal(session_names(f, s1), 0);
}

static void test_session_end_drops_sets(void **state)
{
	struct fx *f = ready(state);
	uint64_t s1 = fx_session(f), s2 = fx_session(f), s3 = fx_session(f);
	fx_take(f, s2, 1, "a");
	uint64_t q = multi_enqueue(
		f, OP(MULTI_ACQUIRE, .session = s1, .owner = 7, .names = NAMES("a", "b")));
	uint64_t q3 = fx_enqueue(f, OP(ACQUIRE, .session = s3, .owner = 3, .name = "b"));
	assert_int_equal(DO(f, CLOSE_SESSION, .session = s1).status, 0);
	fx_pushed_error(f, s1, q, RAFTLOCK_ESESSION);
	fx_pushed_grant(f, s3, q3);
	WAITERS(f, "a", 0);
	HOLDERS(f, "a", s2, 1);
}

/* A set granted by a release, its tokens answered again to a retry, and
 * the same state on a node that replays the log. */
static void test_retry_and_replay(void **state)
{
	struct fx *f = ready(state);
	uint64_t s1 = fx_session(f), s2 = fx_session(f);
	fx_take(f, s2, 1, "b");
	uint64_t q = multi_enqueue(
		f, OP(MULTI_ACQUIRE, .session = s1, .owner = 7, .names = NAMES("a", "b")));
	fx_release_ok(f, s2, 1, "b", 0);
	uint64_t t0 = fx_push(f, s1, q)->result.tokens[0];
	uint64_t t1 = fx_push(f, s1, q)->result.tokens[1];
	Raftlock__Result r = DO(f, MULTI_ACQUIRE, .session = s1, .seq = q, .owner = 7, .wait = true,
				.names = NAMES("a", "b"));
	assert_int_equal(r.status, 0);
	assert_int_equal(r.n_tokens, 2);
	assert_int_equal(r.tokens[0], t0);
	assert_int_equal(r.tokens[1], t1);
	struct fx *peer = fx_peer(f);
	fx_replay(peer, f, 0, f->n_log);
	fx_assert_same_state(f, peer);
	/* And from a snapshot. */
	struct fx *restored = fx_peer(f);
	fx_restore_from(restored, f);
	fx_assert_same_state(f, restored);
}

/* ---------------------------------------------------------- deadlocks -- */

/* n sessions in a ring: session i holds lock i and waits on lock i+1;
 * the last wait, which closes the ring, is refused. */
static void ring(struct fx *f, size_t n)
{
	uint64_t *s = fx_alloc(f, n * sizeof *s);
	uint64_t *q = fx_alloc(f, n * sizeof *q);
	char name[32];
	for (size_t i = 0; i < n; i++) {
		s[i] = fx_session(f);
		snprintf(name, sizeof name, "ring-%zu", i);
		fx_take(f, s[i], 100 + i, name);
	}
	for (size_t i = 0; i + 1 < n; i++) {
		snprintf(name, sizeof name, "ring-%zu", i + 1);
		q[i] = fx_enqueue(f, OP(ACQUIRE, .session = s[i], .owner = 200 + i, .name = name));
	}
	Raftlock__Result r =
		DO(f, ACQUIRE, .session = s[n - 1], .owner = 999, .name = "ring-0", .wait = true);
	assert_int_equal(r.status, RAFTLOCK_EDEADLK);
	assert_false(r.queued);
	WAITERS(f, "ring-0", 0); /* nothing queued */
	/* Decided alike on another node. */
	struct fx *peer = fx_peer(f);
	fx_replay(peer, f, 0, f->n_log);
	fx_assert_same_state(f, peer);
	/* The last session lets go: the ring unwinds, every wait granted. */
	snprintf(name, sizeof name, "ring-%zu", n - 1);
	fx_release_ok(f, s[n - 1], 100 + n - 1, name, 0);
	fx_pushed_grant(f, s[n - 2], q[n - 2]);
}

static void test_cycle_of_2(void **state)
{
	ring(ready(state), 2);
}

static void test_cycle_of_3(void **state)
{
	ring(ready(state), 3);
}

static void test_cycle_of_50(void **state)
{
	ring(ready(state), 50);
}

/* A chain is no cycle, nor is a session waiting for itself. */
static void test_no_false_cycles(void **state)
{
	struct fx *f = ready(state);
	uint64_t s1 = fx_session(f), s2 = fx_session(f), s3 = fx_session(f);
	fx_take(f, s1, 1, "a");
	fx_take(f, s2, 2, "b");
	fx_take(f, s3, 3, "c");
	fx_enqueue(f, OP(ACQUIRE, .session = s1, .owner = 11, .name = "b"));
	fx_enqueue(f, OP(ACQUIRE, .session = s2, .owner = 12, .name = "c"));
	/* s1's other handle waits for s1's own "a": not a deadlock here. */
	fx_enqueue(f, OP(ACQUIRE, .session = s1, .owner = 21, .name = "a"));
	/* A fourth waits at the end of the chain, behind s1's handle. */
	uint64_t s4 = fx_session(f);
	fx_enqueue(f, OP(ACQUIRE, .session = s4, .owner = 14, .name = "a"));
	/* But s3 waiting on "a" would close s3 -> s1 -> s2 -> s3. */
	Raftlock__Result r = DO(f, ACQUIRE, .session = s3, .owner = 23, .name = "a", .wait = true);
	assert_int_equal(r.status, RAFTLOCK_EDEADLK);
}

/* A wait behind a waiter counts: s2's set waits at the head of "l" for
 * s1's "a"; s1 queuing on "l" behind it would wait forever. */
static void test_cycle_through_queue_order(void **state)
{
	struct fx *f = ready(state);
	uint64_t s1 = fx_session(f), s2 = fx_session(f);
	fx_take(f, s1, 1, "a");
	multi_enqueue(f, OP(MULTI_ACQUIRE, .session = s2, .owner = 2, .names = NAMES("a", "l")));
	HOLDERS(f, "l", 0);
	Raftlock__Result r = DO(f, ACQUIRE, .session = s1, .owner = 3, .name = "l", .wait = true);
	assert_int_equal(r.status, RAFTLOCK_EDEADLK);
}

/* The walk reads a lock once (deadlock.c) and each waiter of a long queue
 * finds its own place in that one record: a session waits for the waiters
 * ahead of it, never for those behind. Lock "q" is held by h and has
 * waiters w[0..7]; w[5] holds "x" and w[2] holds "x2"; h waits on "z". */
static void test_long_queue_read_once(void **state)
{
	struct fx *f = ready(state);
	uint64_t h = fx_session(f), t = fx_session(f), w[8];
	fx_take(f, h, 1, "q");
	fx_take(f, t, 2, "z");
	for (size_t i = 0; i < 8; i++)
		w[i] = fx_session(f);
	fx_take(f, w[5], 3, "x");
	fx_take(f, w[2], 4, "x2");
	for (size_t i = 0; i < 8; i++)
		fx_enqueue(f, OP(ACQUIRE, .session = w[i], .owner = 10 + i, .name = "q"));
	fx_enqueue(f, OP(ACQUIRE, .session = h, .owner = 5, .name = "z"));
	/* w[7], last on "q", waiting on "x2" (held by w[2], ahead of it):
	 * w[2] waits for h and w[0..1] only, none of which waits for w[7]. */
	fx_enqueue(f, OP(ACQUIRE, .session = w[7], .owner = 30, .name = "x2"));
	/* t waiting on "x" would close t -> w[5] -> (h, w[0..4]) -> h -> t. */
	Raftlock__Result r = DO(f, ACQUIRE, .session = t, .owner = 6, .name = "x", .wait = true);
	assert_int_equal(r.status, RAFTLOCK_EDEADLK);
	WAITERS(f, "x", 0);
	/* w[3], holder of nothing, waiting on "x": it waits for w[5], which
	 * waits for w[3] (ahead of it on "q"), so that too is refused... */
	r = DO(f, ACQUIRE, .session = w[3], .owner = 31, .name = "x", .wait = true);
	assert_int_equal(r.status, RAFTLOCK_EDEADLK);
	/* ...while w[6], behind w[5] on "q", waits for it without a cycle. */
	fx_enqueue(f, OP(ACQUIRE, .session = w[6], .owner = 32, .name = "x"));
	struct fx *peer = fx_peer(f);
	fx_replay(peer, f, 0, f->n_log);
	fx_assert_same_state(f, peer);
}

/* The locks the new wait is on have every holder and waiter pushed at
 * the start of the walk, and a visit skips them (deadlock.c) -- unless
 * the waiting session is itself on one: t holds "a" and s waits on it,
 * so t's second handle waiting on "a" waits for s, which waits for t. */
static void test_cycle_through_own_lock(void **state)
{
	struct fx *f = ready(state);
	uint64_t t = fx_session(f), s = fx_session(f);
	fx_take(f, t, 1, "a");
	uint64_t q = fx_enqueue(f, OP(ACQUIRE, .session = s, .owner = 2, .name = "a"));
	Raftlock__Result r = DO(f, ACQUIRE, .session = t, .owner = 3, .name = "a", .wait = true);
	assert_int_equal(r.status, RAFTLOCK_EDEADLK);
	WAITERS(f, "a", s, q);
}

/* A set is passed by lock by lock: of {"a", "c"}, "a" is passed by (its
 * holder u is pushed at the start), but "c" is not, as t holds it, and
 * s waits on it for t: t's set waiting for s closes t -> s -> t. */
static void test_set_cycle_through_own_lock(void **state)
{
	struct fx *f = ready(state);
	uint64_t t = fx_session(f), s = fx_session(f), u = fx_session(f);
	fx_take(f, t, 1, "c");
	fx_take(f, u, 2, "a");
	uint64_t q = fx_enqueue(f, OP(ACQUIRE, .session = s, .owner = 3, .name = "c"));
	Raftlock__Result r = DO(f, MULTI_ACQUIRE, .session = t, .owner = 4, .wait = true,
				.names = NAMES("a", "c"));
	assert_int_equal(r.status, RAFTLOCK_EDEADLK);
	WAITERS(f, "a", 0);
	WAITERS(f, "c", s, q);
}

/* A waiter ahead on the new wait's lock is skipped only through that
 * lock: w[2] also waits on "y", held by n, so n queuing on "q" behind
 * w[2] closes n -> w[2] -> n; queuing behind w[0] and w[1] alone would
 * not. */
static void test_cycle_through_other_lock_of_waiter(void **state)
{
	struct fx *f = ready(state);
	uint64_t h = fx_session(f), n = fx_session(f), w[4], q[4];
	fx_take(f, h, 1, "q");
	fx_take(f, n, 2, "y");
	for (size_t i = 0; i < 4; i++) {
		w[i] = fx_session(f);
		q[i] = fx_enqueue(f, OP(ACQUIRE, .session = w[i], .owner = 10 + i, .name = "q"));
	}
	fx_enqueue(f, OP(ACQUIRE, .session = w[2], .owner = 20, .name = "y"));
	Raftlock__Result r = DO(f, ACQUIRE, .session = n, .owner = 3, .name = "q", .wait = true);
	assert_int_equal(r.status, RAFTLOCK_EDEADLK);
	WAITERS(f, "q", w[0], q[0], w[1], q[1], w[2], q[2], w[3], q[3]);
	/* A session on "q" alone queues behind them all. */
	uint64_t m = fx_session(f);
	uint64_t qm = fx_enqueue(f, OP(ACQUIRE, .session = m, .owner = 4, .name = "q"));
	WAITERS(f, "q", w[0], q[0], w[1], q[1], w[2], q[2], w[3], q[3], m, qm);
	struct fx *peer = fx_peer(f);
	fx_replay(peer, f, 0, f->n_log);
	fx_assert_same_state(f, peer);
}

/* Below level 3 (a cluster not fully upgraded) apply queues the wait as a
 * node of level 2 does, so that both decide alike. */
static void test_no_check_below_level_3(void **state)
{
	struct fx *f = fx_ready_at(state, 2);
	uint64_t s1 = fx_session(f), s2 = fx_session(f);
	fx_take(f, s1, 1, "a");
	fx_take(f, s2, 2, "b");
	fx_enqueue(f, OP(ACQUIRE, .session = s1, .owner = 11, .name = "b"));
	fx_enqueue(f, OP(ACQUIRE, .session = s2, .owner = 12, .name = "a"));
}

/* A set whose wait would close a cycle is refused whole. */
static void test_set_closing_cycle(void **state)
{
	struct fx *f = ready(state);
	uint64_t s1 = fx_session(f), s2 = fx_session(f);
	fx_take(f, s1, 1, "a");
	fx_take(f, s2, 2, "b");
	fx_enqueue(f, OP(ACQUIRE, .session = s1, .owner = 11, .name = "b"));
	Raftlock__Result r = DO(f, MULTI_ACQUIRE, .session = s2, .owner = 12, .wait = true,
				.names = NAMES("a", "c"));
	assert_int_equal(r.status, RAFTLOCK_EDEADLK);
	WAITERS(f, "a", 0);
	assert_false(fx_lock_exists(f, "c"));
	assert_int_equal(session_sets(f, s2), 0);
}

/* ------------------------------------------------------------ watches -- */

/* The watch changes (FSM_EV_CHANGE) of the last apply of this kind on
 * `name` with this status. */
static size_t changes(const struct fx *f, Raftlock__WatchKind kind, const char *name, int status)
{
	size_t n = 0;
	for (size_t i = 0; i < f->n_events; i++) {
		const struct fx_event *e = &f->events[i];
		n += e->has_change && e->change.kind == kind && strcmp(e->name, name) == 0 &&
		     e->change.status == status;
	}
	return n;
}

/* A set's wait, its timeout, its cancel and its grant reach the watches
 * on every lock of the set (docs/GUARANTEES.md, watches). */
static void test_set_changes_reach_watches(void **state)
{
	struct fx *f = ready(state);
	uint64_t s1 = fx_session(f), s2 = fx_session(f);
	fx_take(f, s2, 1, "b");
	uint64_t q = multi_enqueue(f, OP(MULTI_ACQUIRE, .session = s1, .owner = 7, .wait_ms = 500,
					 .names = NAMES("a", "b")));
	assert_int_equal(changes(f, RAFTLOCK__WATCH_KIND__WATCH_QUEUED, "a", 0), 1);
	assert_int_equal(changes(f, RAFTLOCK__WATCH_KIND__WATCH_QUEUED, "b", 0), 1);
	f->now += 500;
	DO(f, WAIT_EXPIRE, .name = "a", .target = s1, .acquire_seq = q);
	assert_int_equal(changes(f, RAFTLOCK__WATCH_KIND__WATCH_DEQUEUED, "a", RAFTLOCK_ETIMEDOUT),
			 1);
	assert_int_equal(changes(f, RAFTLOCK__WATCH_KIND__WATCH_DEQUEUED, "b", RAFTLOCK_ETIMEDOUT),
			 1);

	q = multi_enqueue(f,
			  OP(MULTI_ACQUIRE, .session = s1, .owner = 7, .names = NAMES("a", "b")));
	DO(f, CANCEL_WAIT, .session = s1, .owner = 7, .name = "a", .acquire_seq = q);
	assert_int_equal(changes(f, RAFTLOCK__WATCH_KIND__WATCH_DEQUEUED, "a", RAFTLOCK_ECANCELED),
			 1);
	assert_int_equal(changes(f, RAFTLOCK__WATCH_KIND__WATCH_DEQUEUED, "b", RAFTLOCK_ECANCELED),
			 1);

	multi_enqueue(f, OP(MULTI_ACQUIRE, .session = s1, .owner = 7, .names = NAMES("a", "b")));
	assert_int_equal(DO(f, RELEASE, .session = s2, .owner = 1, .name = "b").status, 0);
	assert_int_equal(changes(f, RAFTLOCK__WATCH_KIND__WATCH_RELEASED, "b", 0), 1);
	assert_int_equal(changes(f, RAFTLOCK__WATCH_KIND__WATCH_GRANTED, "a", 0), 1);
	assert_int_equal(changes(f, RAFTLOCK__WATCH_KIND__WATCH_GRANTED, "b", 0), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_free_set_granted_at_once, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_all_or_nothing, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_fifo_with_single_waiters, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_shared_items_and_followers, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_bad_sets_refused, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_set_changes_reach_watches, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_timeout_leaves_nothing, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_cancel_leaves_nothing, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_session_end_drops_sets, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_retry_and_replay, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_cycle_of_2, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_cycle_of_3, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_cycle_of_50, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_no_false_cycles, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_long_queue_read_once, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_cycle_through_queue_order, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_set_closing_cycle, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_cycle_through_own_lock, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_set_cycle_through_own_lock, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_cycle_through_other_lock_of_waiter, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_no_check_below_level_3, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
