/* test_store_leases.c: the lease walk that RENEW applies through (one
 * cursor, finds in any order, rewrites in place, other tables written in
 * between). */
#include "test_fsm_harness.h"

#define LEASES 3000 /* a few dozen LMDB pages */

/* Stores LEASES leases (id i: deadline 10 i, TTL 1000 + i % 7), then
 * begins a walk in a write transaction, which it returns. */
static MDB_txn *walk_start(struct store *st, struct store_lease_walk *w)
{
	MDB_txn *txn = store_begin(st, true);
	for (uint64_t id = 1; id <= LEASES; id++)
		store_put_lease(st, txn, id, id * 10, 1000 + id % 7);
	store_commit(txn);
	txn = store_begin(st, true);
	store_lease_walk_begin(st, txn, w);
	return txn;
}

/* Ascending ids, some without a lease; even ids move by 5; a session
 * record is written for every 97th id between finds. */
static void test_walk_finds_and_moves_leases(void **state)
{
	struct store *st = &((struct fx *)*state)->store;
	struct store_lease_walk w;
	MDB_txn *txn = walk_start(st, &w);
	size_t found = 0;
	for (uint64_t id = 0; id <= LEASES + 500; id++) {
		uint64_t deadline;
		uint32_t ttl;
		bool has = store_lease_walk_find(&w, id, &deadline, &ttl);
		assert_true(has == (id >= 1 && id <= LEASES));
		if (!has)
			continue;
		found++;
		assert_int_equal(deadline, id * 10);
		assert_int_equal(ttl, 1000 + id % 7);
		if (id % 2 == 0)
			store_lease_walk_set(&w, deadline + 5);
		if (id % 97 == 0) {
			Raftlock__SessionRecord rec = RAFTLOCK__SESSION_RECORD__INIT;
			rec.id = id;
			store_put_session(st, txn, &rec);
		}
	}
	store_lease_walk_end(&w);
	store_commit(txn);
	assert_int_equal(found, LEASES);

	txn = store_begin(st, false);
	for (uint64_t id = 1; id <= LEASES; id++) {
		uint64_t deadline;
		uint32_t ttl;
		assert_true(store_get_lease(st, txn, id, &deadline, &ttl));
		assert_int_equal(deadline, id * 10 + (id % 2 == 0 ? 5 : 0));
		assert_int_equal(ttl, 1000 + id % 7);
		Raftlock__SessionRecord *rec = store_get_session(st, txn, id);
		assert_true((rec != NULL) == (id % 97 == 0));
		if (rec != NULL)
			raftlock__session_record__free_unpacked(rec, NULL);
	}
	store_abort(txn);
}

/* Any order; a repeated id sees the change its first find made; a lease
 * written with store_put_lease between finds is seen by the next one. */
static void test_walk_any_order(void **state)
{
	struct store *st = &((struct fx *)*state)->store;
	struct store_lease_walk w;
	MDB_txn *txn = walk_start(st, &w);
	const uint64_t ids[] = {2000, 6, 6, 1501, 999999, 4, 7};
	const uint64_t want[] = {20000, 60, 61, 15010, 0, 40, 77};
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
		uint64_t deadline = 0;
		uint32_t ttl;
		bool has = store_lease_walk_find(&w, ids[i], &deadline, &ttl);
		assert_true(has == (want[i] != 0));
		assert_int_equal(deadline, want[i]);
		if (has)
			store_lease_walk_set(&w, deadline + 1);
		if (ids[i] == 4)
			store_put_lease(st, txn, 7, 77, 1000);
	}
	store_lease_walk_end(&w);
	store_commit(txn);
	txn = store_begin(st, false);
	uint64_t deadline;
	uint32_t ttl;
	assert_true(store_get_lease(st, txn, 6, &deadline, &ttl));
	assert_int_equal(deadline, 62);
	assert_true(store_get_lease(st, txn, 7, &deadline, &ttl));
	assert_int_equal(deadline, 78);
	assert_true(store_get_lease(st, txn, 5, &deadline, &ttl));
	assert_int_equal(deadline, 50);
	store_abort(txn);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
		T(test_walk_finds_and_moves_leases),
		T(test_walk_any_order),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
