/* test_fsm_limits.c: the limits a leader carries in its entries (issue 11,
 * item 4): sessions per identity and waiters per lock. Apply refuses past
 * the carried limit with RAFTLOCK_ELIMIT naming the limit and its value,
 * changes nothing else, and decides alike on every node (a replay, a
 * reopened store and a store loaded from a snapshot agree); an entry of an
 * older format (no limit carried) keeps the old rule. */
#include "test_fsm_harness.h"

static uint64_t open_as(struct fx *f, const char *identity, uint32_t max, int want)
{
	Raftlock__Result r =
		DO(f, OPEN_SESSION, .ttl_ms = FX_TTL, .identity = identity, .max_sessions = max);
	assert_int_equal(r.status, want);
	if (want == RAFTLOCK_ELIMIT) {
		assert_int_equal(r.limit, RAFTLOCK__LIMIT__LIMIT_SESSIONS_PER_IDENTITY);
		assert_int_equal(r.limit_value, max);
		assert_int_equal(r.session, 0);
	}
	return r.session;
}

static uint64_t held_by(struct fx *f, const char *identity)
{
	MDB_txn *txn = store_begin(&f->store, false);
	uint64_t n = store_identity_sessions(&f->store, txn, identity);
	store_abort(txn);
	return n;
}

static void test_sessions_per_identity(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a1 = open_as(f, "alice", 2, 0);
	uint64_t a2 = open_as(f, "alice", 2, 0);
	assert_int_equal(held_by(f, "alice"), 2);

	/* The third is refused and leaves nothing behind. */
	uint64_t sessions = fx_count_sessions(f), bytes = store_record_bytes(&f->store);
	open_as(f, "alice", 2, RAFTLOCK_ELIMIT);
	assert_int_equal(fx_count_sessions(f), sessions);
	assert_int_equal(store_record_bytes(&f->store), bytes);
	assert_int_equal(held_by(f, "alice"), 2);

	/* Other identities, and sessions without one, are not alice's. */
	open_as(f, "bob", 2, 0);
	open_as(f, "", 2, 0);
	open_as(f, "", 2, 0);
	open_as(f, "", 2, 0);
	assert_int_equal(held_by(f, "bob"), 1);
	assert_int_equal(held_by(f, ""), 0);

	/* The limit is the entry's: a leader with a higher one lets a third
	 * in, and 0 is no limit. */
	uint64_t a3 = open_as(f, "alice", 3, 0);
	open_as(f, "alice", 3, RAFTLOCK_ELIMIT);
	uint64_t a4 = open_as(f, "alice", 0, 0);
	assert_int_equal(held_by(f, "alice"), 4);

	/* A close and an expiry give their places back. */
	Raftlock__Result r = DO(f, CLOSE_SESSION, .session = a1);
	assert_int_equal(r.status, 0);
	f->now += FX_TTL;
	DO(f, RENEW, .renew = (const uint64_t[]){a2, a3}, .n_renew = 2);
	DO(f, EXPIRE_SESSION, .target = a4);
	assert_int_equal(held_by(f, "alice"), 2);
	open_as(f, "alice", 3, 0);
	open_as(f, "alice", 3, RAFTLOCK_ELIMIT);

	/* A retried open (same nonce) is the session it opened, not a new one:
	 * the limit does not refuse it. */
	r = DO(f, OPEN_SESSION, .ttl_ms = FX_TTL, .identity = "carol", .nonce = 77,
	       .max_sessions = 1);
	assert_int_equal(r.status, 0);
	uint64_t c = r.session;
	r = DO(f, OPEN_SESSION, .ttl_ms = FX_TTL, .identity = "carol", .nonce = 77,
	       .max_sessions = 1);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.session, c);
	open_as(f, "carol", 1, RAFTLOCK_ELIMIT);

	/* Every node decides alike: a replay refuses the same opens (same
	 * trace, same records) and counts the same; so do a reopened store
	 * and a store loaded from a snapshot, which rebuilds the index. */
	struct fx *g = fx_peer(f);
	fx_replay(g, f, 0, f->n_log);
	assert_string_equal(g->trace, f->trace);
	fx_assert_same_state(f, g);
	assert_int_equal(held_by(g, "alice"), 3);
	fx_restart(f);
	assert_int_equal(held_by(f, "alice"), 3);
	struct fx *h = fx_peer(f);
	fx_restore_from(h, f);
	assert_int_equal(held_by(h, "alice"), 3);
	assert_int_equal(held_by(h, "bob"), 1);
	assert_int_equal(held_by(h, "carol"), 1);
	open_as(h, "alice", 3, RAFTLOCK_ELIMIT);
	open_as(h, "alice", 4, 0);
}

/* Waits on "w", held by another session; the answer of the acquire. */
static Raftlock__Result wait_on(struct fx *f, uint64_t session, uint32_t max_waiters)
{
	return DO(f, ACQUIRE, .session = session, .owner = 1, .name = "w", .wait = true,
		  .max_waiters = max_waiters);
}

static void test_waiters_per_lock(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t holder = fx_session(f), s1 = fx_session(f), s2 = fx_session(f), s3 = fx_session(f);
	fx_take(f, holder, 1, "w");
	Raftlock__Result r = wait_on(f, s1, 2);
	assert_true(r.status == 0 && r.queued);
	r = wait_on(f, s2, 2);
	assert_true(r.status == 0 && r.queued);

	/* The third waiter is refused and the queue is unchanged. */
	uint64_t seq = f->seq + 1;
	r = wait_on(f, s3, 2);
	assert_int_equal(r.status, RAFTLOCK_ELIMIT);
	assert_int_equal(r.limit, RAFTLOCK__LIMIT__LIMIT_WAITERS_PER_LOCK);
	assert_int_equal(r.limit_value, 2);
	assert_false(r.queued);
	WAITERS(f, "w", s1, seq - 2, s2, seq - 1);
	size_t n_names;
	fx_session_names(f, s3, &n_names);
	assert_int_equal(n_names, 0);
	/* Its outcome is kept for a retry, without the limit's name (the
	 * table holds what older nodes hold). */
	struct fx_outcome kept[2];
	assert_int_equal(fx_outcomes(f, s3, kept, 2), 1);
	assert_int_equal(kept[0].status, RAFTLOCK_ELIMIT);
	assert_int_equal(kept[0].limit, 0);
	r = DO(f, ACQUIRE, .session = s3, .seq = seq, .owner = 1, .name = "w", .wait = true,
	       .max_waiters = 2);
	assert_int_equal(r.status, RAFTLOCK_ELIMIT);
	assert_int_equal(r.limit, 0);

	/* A try-lock is answered EBUSY as ever; the limit is for queueing. */
	r = DO(f, ACQUIRE, .session = s3, .owner = 1, .name = "w", .max_waiters = 2);
	assert_int_equal(r.status, RAFTLOCK_EBUSY);

	/* The limit is the entry's: a leader allowing three queues it; an
	 * entry without one (format 3) allows FSM_MAX_WAITERS. */
	r = wait_on(f, s3, 3);
	assert_true(r.status == 0 && r.queued);
	uint64_t s4 = fx_session(f);
	r = wait_on(f, s4, 0);
	assert_true(r.status == 0 && r.queued);

	struct fx *g = fx_peer(f);
	fx_replay(g, f, 0, f->n_log);
	assert_string_equal(g->trace, f->trace);
	fx_assert_same_state(f, g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sessions_per_identity, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_waiters_per_lock, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
