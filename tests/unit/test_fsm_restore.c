/*
 * test_fsm_restore.c: the base of a cluster restored from a backup image
 * (fsm_restore_base, docs/OPERATIONS.md) and the INIT that starts it; and
 * the cluster's recorded feature level (server/feature_level.h).
 */
#include "test_fsm_harness.h"
#include "feature_level.h"
#include "member_book.h"

#define SUM UINT64_C(0x1234567890abcdef)

/* A state with held locks (one with its own lock-delay), a waiter, and a
 * lock under lock-delay without holder. */
static void build_state(struct fx *f, uint64_t *a, uint64_t *b)
{
	f->now = 1000;
	fx_init(f, FX_FLOOR);
	*a = fx_session_ttl(f, 5000);
	*b = fx_session_ttl(f, 20000);
	DO(f, ACQUIRE, .session = *a, .owner = 1, .name = "own-delay", .lock_delay_ms = 30000);
	fx_take(f, *b, 1, "held");
	fx_enqueue(f, OP(ACQUIRE, .session = *a, .owner = 2, .name = "held"));
	fx_take(f, *a, 3, "gone-by-expiry");
	DO(f, ACQUIRE, .session = *b, .owner = 4, .name = "sem",
	   .kind = RAFTLOCK__LOCK_KIND__SEMAPHORE, .limit = 4, .permits = 2);
	fx_enqueue(f, OP(ACQUIRE, .session = *a, .owner = 5, .name = "sem", .permits = 3,
			 .kind = RAFTLOCK__LOCK_KIND__SEMAPHORE, .limit = 4));
}

/* Loads f's image into a peer and turns it into a restored base. */
static struct fx *restored(struct fx *f)
{
	struct fx_image im = fx_dump(f);
	struct fx *g = fx_peer(f);
	MDB_txn *txn;
	assert_int_equal(store_load_begin(&g->store, im.buf, im.len, &txn), 0);
	fx_image_free(&im);
	fsm_restore_base(&g->fsm, txn, SUM);
	assert_int_equal(store_commit_room(txn), 0);
	return g;
}

static void test_base_has_no_session_and_delays_held_locks(void **state)
{
	struct fx *f = *state;
	uint64_t a, b;
	build_state(f, &a, &b);
	uint64_t next = fx_next_token(f);
	uint64_t now = f->now;
	struct fx *g = restored(f);

	assert_int_equal(fx_count_sessions(g), 0);
	Raftlock__Meta *m = fx_meta(g);
	assert_int_equal(m->next_token, 0);
	assert_int_equal(m->restore_floor, next);
	assert_int_equal(m->restored_from, SUM);
	assert_int_equal(m->applied_index, 0);
	assert_string_equal(m->cluster, "");
	raftlock__meta__free_unpacked(m, NULL);

	/* Held: no holder, no waiter, delayed for max(own delay, holders'
	 * TTL) from the image's cluster time. */
	const char *names[] = {"own-delay", "held", "gone-by-expiry", "sem"};
	uint64_t until[] = {now + 30000, now + 20000, now + 5000, now + 20000};
	for (int i = 0; i < 4; i++) {
		Raftlock__LockRecord *l = fx_lock(g, names[i]);
		assert_non_null(l);
		assert_int_equal(l->n_holders, 0);
		assert_int_equal(l->n_waiters, 0);
		assert_int_equal(l->delay_until, until[i]);
		raftlock__lock_record__free_unpacked(l, NULL);
	}

	/* The same image gives every member the same base. */
	struct fx *h = restored(f);
	fx_assert_same_state(g, h);
}

/* The sessions of the image are gone, so are the counts of the limit of
 * sessions per identity and, at level FEATURES_SESSION_LOCK_INDEX, their
 * names: an identity at its limit in the image may open sessions again. */
static void test_base_forgets_identities_and_names(void **state)
{
	struct fx *f = *state;
	f->now = 1000;
	fx_init(f, FX_FLOOR);
	DO(f, SET_FEATURE_LEVEL, .level = FEATURES_SESSION_LOCK_INDEX);
	uint64_t s = DO(f, OPEN_SESSION, .ttl_ms = 60000, .identity = "alice", .max_sessions = 1)
			     .session;
	fx_take(f, s, 1, "x");
	assert_int_equal(
		DO(f, OPEN_SESSION, .ttl_ms = 60000, .identity = "alice", .max_sessions = 1).status,
		RAFTLOCK_ELIMIT);
	struct fx *g = restored(f);
	MDB_txn *txn = store_begin(&g->store, false);
	assert_int_equal(store_identity_sessions(&g->store, txn, "alice"), 0);
	assert_false(store_session_lock_has(&g->store, txn, s, "x"));
	store_abort(txn);
	g->now = f->now;
	assert_int_equal(DO(g, INIT, .floor = 1, .restored_from = SUM).status, 0);
	assert_int_equal(
		DO(g, OPEN_SESSION, .ttl_ms = 60000, .identity = "alice", .max_sessions = 1).status,
		0);
}

/* A restore keeps none of the rows its sessions kept by (session, seq):
 * outcomes and queued lock sets go with them, and the record bytes the
 * store-full rule reads are what a fresh count finds. */
static void test_base_forgets_outcomes_and_sets(void **state)
{
	struct fx *f = *state;
	f->now = 1000;
	fx_init(f, FX_FLOOR);
	DO(f, SET_FEATURE_LEVEL, .level = FEATURES_SEQ_TABLES);
	uint64_t s = fx_session(f), h = fx_session(f);
	fx_take(f, h, 1, "m2");
	for (int i = 0; i < 10; i++)
		assert_int_equal(DO(f, RELEASE, .session = s, .owner = 1, .name = "none").status,
				 RAFTLOCK_ENOTHOLDER);
	struct op set = OP(MULTI_ACQUIRE, .session = s, .owner = 2,
			   .names = (const char *const[]){"m1", "m2"}, .n_names = 2, .wait = true);
	fx_number(f, &set);
	assert_true(fx_do(f, set).queued);
	struct fx *g = restored(f);
	MDB_txn *txn = store_begin(&g->store, false);
	struct fx_outcomes_copy rows = {0};
	store_sweep_outcomes(&g->store, txn, s, 0, UINT64_MAX, fx_outcome_copy, &rows);
	store_sweep_outcomes(&g->store, txn, h, 0, UINT64_MAX, fx_outcome_copy, &rows);
	assert_int_equal(rows.n, 0);
	assert_null(store_get_multi_wait(&g->store, txn, s, set.seq));
	store_abort(txn);
	uint64_t bytes = store_record_bytes(&g->store);
	struct fx *fresh = fx_peer(f);
	fx_restore_from(fresh, g);
	assert_int_equal(store_record_bytes(&fresh->store), bytes);
}

static void test_init_after_restore(void **state)
{
	struct fx *f = *state;
	uint64_t a, b;
	build_state(f, &a, &b);
	uint64_t next = fx_next_token(f);
	struct fx *g = restored(f);
	g->index = 0;
	g->now = f->now;

	/* No grant before INIT; INIT with a floor below the image's counter
	 * starts the counter at the image's. */
	uint64_t s = fx_session(g);
	assert_true(s > b);
	assert_int_equal(DO(g, ACQUIRE, .session = s, .owner = 1, .name = "x").status,
			 RAFTLOCK_EUNAVAILABLE);
	assert_int_equal(DO(g, INIT, .floor = 1, .restored_from = SUM).status, 0);
	assert_int_equal(fx_next_token(g), next);
	assert_true(fx_take(g, s, 1, "x") >= next);

	/* A floor above it wins, and new sessions start above its ms. */
	struct fx *h = restored(f);
	h->index = 0;
	h->now = f->now;
	uint64_t floor = FX_FLOOR + (UINT64_C(1000) << 20);
	assert_int_equal(DO(h, INIT, .floor = floor, .restored_from = SUM).status, 0);
	assert_int_equal(fx_next_token(h), floor);
	assert_true(fx_session(h) >= floor >> 20);

	/* Held locks stay delayed until their lock-delay ends. */
	uint64_t t = fx_session(h);
	assert_int_equal(DO(h, ACQUIRE, .session = t, .owner = 1, .name = "held").status,
			 RAFTLOCK_EBUSY);
	h->now = f->now + 20000;
	DO(h, LOCK_DELAY_END, .name = "held");
	assert_true(fx_take(h, fx_session(h), 1, "held") >= floor);
}

/* Records member id in f's member book, as MEMBER_ADD (founding: as the
 * first leader records a member of its --member list) and, when
 * incarnation is not 0, MEMBER_JOIN apply them. */
static void book_add(struct fx *f, uint64_t id, bool founding, uint64_t incarnation)
{
	char raft[32], client[32];
	snprintf(raft, sizeof raft, "old-%llu:7200", (unsigned long long)id);
	snprintf(client, sizeof client, "old-%llu:7100", (unsigned long long)id);
	Raftlock__MemberAdd add = RAFTLOCK__MEMBER_ADD__INIT;
	add.id = id;
	add.raft_address = raft;
	add.client_address = client;
	add.founding = founding;
	Raftlock__MemberJoin join = RAFTLOCK__MEMBER_JOIN__INIT;
	join.id = id;
	join.incarnation = incarnation;
	MDB_txn *txn = store_begin(&f->store, true);
	Raftlock__Meta *m = store_get_meta(&f->store, txn);
	assert_int_equal(member_book_add(m, &add), 0);
	if (incarnation != 0)
		assert_int_equal(member_book_join(m, &join), 0);
	store_put_meta(&f->store, txn, m);
	raftlock__meta__free_unpacked(m, NULL);
	store_commit(txn);
}

/* The number of records in g's member book and its highest id used. */
static size_t book_size(struct fx *g, uint64_t *max)
{
	Raftlock__Meta *m = fx_meta(g);
	size_t n = m->n_members;
	*max = m->max_member_id;
	raftlock__meta__free_unpacked(m, NULL);
	return n;
}

/* The image's member book names the members of the cluster it was saved
 * from: their client addresses (which a member that joined redirects
 * clients to, and `member list` shows) and the data directories that
 * claimed their ids. The restored cluster is a new one, maybe on other
 * machines while the old one still runs: its INIT forgets that book (from
 * FEATURES_RESTORED_BOOK: every member decides by INIT's level), keeping
 * the highest id used, and its first leader records its own members. The
 * base itself keeps the book: each node's build makes it before any log
 * entry, so it must not depend on the build. */
static void test_restored_init_forgets_the_member_book(void **state)
{
	struct fx *f = *state;
	f->now = 1000;
	fx_init(f, FX_FLOOR);
	book_add(f, 1, true, 0);
	book_add(f, 2, true, 0);
	book_add(f, 3, true, 0);
	book_add(f, 4, false, UINT64_C(0xfeed));
	uint64_t max;

	struct fx *g = restored(f);
	g->index = 0;
	g->now = f->now;
	assert_int_equal(book_size(g, &max), 4); /* the base: any build's */
	uint64_t changes = g->fsm.member_changes;
	assert_int_equal(DO(g, INIT, .floor = FX_FLOOR, .restored_from = SUM,
			    .level = FEATURES_RESTORED_BOOK)
				 .status,
			 0);
	size_t n = book_size(g, &max);
	if (n != 0)
		fail_msg("the restored cluster's INIT kept %zu members of the saved book", n);
	assert_int_equal(max, 4);
	assert_true(g->fsm.member_changes > changes); /* node.c reads it again */

	/* Below that level (a cluster started by an older build), the book
	 * stays, as every member of that build keeps it. */
	struct fx *h = restored(f);
	h->index = 0;
	h->now = f->now;
	assert_int_equal(DO(h, INIT, .floor = FX_FLOOR, .restored_from = SUM,
			    .level = FEATURES_RESTORED_BOOK - 1)
				 .status,
			 0);
	assert_int_equal(book_size(h, &max), 4);

	/* A new cluster's INIT forgets nothing. */
	struct fx *k = fx_peer(f);
	book_add(k, 1, true, 0);
	assert_int_equal(DO(k, INIT, .floor = FX_FLOOR, .level = FEATURE_LEVEL).status, 0);
	assert_int_equal(book_size(k, &max), 1);
}

static void test_feature_level(void **state)
{
	struct fx *f = *state;
	f->now = 1000;
	/* INIT of a level-1 proposer, then the leader raises it. */
	assert_int_equal(DO(f, INIT, .floor = FX_FLOOR, .level = 1).status, 0);
	Raftlock__Meta *m = fx_meta(f);
	assert_int_equal(m->feature_level, 1);
	raftlock__meta__free_unpacked(m, NULL);
	DO(f, SET_FEATURE_LEVEL, .level = FEATURE_LEVEL);
	DO(f, SET_FEATURE_LEVEL, .level = 1); /* never goes down */
	m = fx_meta(f);
	assert_int_equal(m->feature_level, FEATURE_LEVEL);
	raftlock__meta__free_unpacked(m, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
		T(test_base_has_no_session_and_delays_held_locks),
		T(test_base_forgets_identities_and_names),
		T(test_base_forgets_outcomes_and_sets),
		T(test_init_after_restore),
		T(test_restored_init_forgets_the_member_book),
		T(test_feature_level),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
