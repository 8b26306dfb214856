/* test_fsm_store_full.c: the store-full rule (issue 9 item 8). Past the
 * replicated STORE_LIMIT, new sessions, new holders and new waiters are
 * refused with ELIMIT while re-entry, releases, closes, cancels, renewals
 * and expiries still apply; freeing space lets new locks in again; the
 * byte count is a function of the records (a replay and a reopened store
 * agree with it), so every node decides alike. */
#include "test_fsm_harness.h"

#define NAME_LEN 200

static void name_of(char *buf, unsigned i)
{
	memset(buf, 'x', NAME_LEN);
	snprintf(buf, 16, "lock-%05u-", i);
	buf[strlen(buf)] = 'x';
	buf[NAME_LEN] = '\0';
}

static void test_store_full(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f), b = fx_session(f);
	char name[NAME_LEN + 1];
	name_of(name, 99999);
	fx_take(f, b, 1, name); /* b holds a lock that a will want */
	uint64_t limit = store_record_bytes(&f->store) + 20000;
	Raftlock__Result r = DO(f, STORE_LIMIT, .store_limit = limit);
	assert_int_equal(r.status, 0);

	/* Fill: each lock adds its record and its name in a's session. */
	unsigned taken = 0;
	for (;; taken++) {
		name_of(name, taken);
		r = DO(f, ACQUIRE, .session = a, .owner = 1, .name = name);
		if (r.status != 0)
			break;
		assert_true(taken < 1000);
	}
	assert_int_equal(r.status, RAFTLOCK_ELIMIT);
	assert_true(taken > 10);
	assert_false(fx_lock_exists(f, name));
	assert_true(store_record_bytes(&f->store) >= limit);
	assert_int_equal(f->fsm.store_refusals, 1);

	/* Refused: a new session, a new waiter, a new holder of a lock that
	 * exists (a semaphore with room). */
	r = DO(f, OPEN_SESSION, .ttl_ms = FX_TTL);
	assert_int_equal(r.status, RAFTLOCK_ELIMIT);
	name_of(name, 99999);
	r = DO(f, ACQUIRE, .session = a, .owner = 1, .name = name, .wait = true);
	assert_int_equal(r.status, RAFTLOCK_ELIMIT);
	/* Not refused: what does not grow the state for long. */
	r = DO(f, ACQUIRE, .session = a, .owner = 1, .name = name); /* busy */
	assert_int_equal(r.status, RAFTLOCK_EBUSY);
	name_of(name, 0);
	r = DO(f, ACQUIRE, .session = a, .owner = 1, .name = name); /* re-entry */
	assert_int_equal(r.status, 0);
	assert_int_equal(r.count, 2);
	r = DO(f, RENEW, .renew = (const uint64_t[]){a, b}, .n_renew = 2);
	assert_int_equal(r.status, 0);
	assert_int_equal(f->fsm.store_refusals, 3);

	/* Releases apply and free space; then new locks are accepted. */
	fx_release_ok(f, a, 1, name, 1);
	fx_release_ok(f, a, 1, name, 0);
	for (unsigned i = 1; i < 6; i++) {
		name_of(name, i);
		fx_release_ok(f, a, 1, name, 0);
	}
	assert_true(store_record_bytes(&f->store) < limit);
	name_of(name, 50000);
	fx_take(f, a, 1, name);

	/* Closing the session frees everything it held. */
	r = DO(f, CLOSE_SESSION, .session = a);
	assert_int_equal(r.status, 0);
	assert_true(store_record_bytes(&f->store) < limit / 2);
	r = DO(f, OPEN_SESSION, .ttl_ms = FX_TTL);
	assert_int_equal(r.status, 0);

	/* A limit of 0 is no limit (as before the first STORE_LIMIT). */
	r = DO(f, STORE_LIMIT, .store_limit = 0);
	assert_int_equal(r.status, 0);

	/* Every node decides alike: a replica that replays the log refused
	 * the same commands (same trace) and counts the same bytes, and a
	 * reopened store counts what the running one counted. */
	struct fx *g = fx_peer(f);
	fx_replay(g, f, 0, f->n_log);
	fx_assert_same_state(f, g);
	assert_string_equal(g->trace, f->trace);
	assert_int_equal(store_record_bytes(&g->store), store_record_bytes(&f->store));
	uint64_t before = store_record_bytes(&f->store);
	fx_restart(f);
	assert_int_equal(store_record_bytes(&f->store), before);
}

/* The leader's proposal: a quarter of its map. */
static void test_store_limit_of_map(void **state)
{
	(void)state;
	assert_int_equal(fsm_store_limit((size_t)16 << 20), (uint64_t)4 << 20);
	assert_int_equal(fsm_store_limit((size_t)4096 << 20), (uint64_t)1024 << 20);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_store_full, fx_setup, fx_teardown),
		cmocka_unit_test(test_store_limit_of_map),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
