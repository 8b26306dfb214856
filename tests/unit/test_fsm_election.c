/*
 * test_fsm_election.c: elections in the state machine: a grant publishes
 * its acquire's value (also a queued one, when granted later), PROCLAIM
 * changes it only for the holder with that token (a deposed leader's is
 * refused), every change is reported with the value, values survive a
 * snapshot, and a retried PROCLAIM is answered from the outcome table.
 */
#include "test_fsm_harness.h"

#define K(x) RAFTLOCK__WATCH_KIND__WATCH_##x

static const Raftlock__WatchEvent *only_change(const struct fx *f)
{
	const Raftlock__WatchEvent *c = NULL;
	for (size_t i = 0; i < f->n_events; i++)
		if (f->events[i].type == FSM_EV_CHANGE) {
			assert_null(c);
			c = &f->events[i].change;
		}
	assert_non_null(c);
	return c;
}

static const char *holder_value(struct fx *f, const char *name, char *buf, size_t len)
{
	Raftlock__LockRecord *l = fx_lock(f, name);
	assert_non_null(l);
	assert_int_equal(l->n_holders, 1);
	snprintf(buf, len, "%s", l->holders[0]->value);
	raftlock__lock_record__free_unpacked(l, NULL);
	return buf;
}

static void test_campaign_proclaim_resign(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f), b = fx_session(f);
	char buf[64];

	Raftlock__Result r = DO(f, ACQUIRE, .session = a, .owner = 1, .name = "e", .value = "A1");
	assert_int_equal(r.status, 0);
	uint64_t ta = r.token;
	assert_int_equal(only_change(f)->kind, K(GRANTED));
	assert_string_equal(only_change(f)->value, "A1");
	assert_string_equal(holder_value(f, "e", buf, sizeof buf), "A1");

	uint64_t sb =
		fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 1, .name = "e", .value = "B1"));

	r = DO(f, PROCLAIM, .session = a, .owner = 1, .name = "e", .token = ta, .value = "A2");
	assert_int_equal(r.status, 0);
	assert_int_equal(r.token, ta);
	const Raftlock__WatchEvent *c = only_change(f);
	assert_int_equal(c->kind, K(PROCLAIMED));
	assert_int_equal(c->token, ta);
	assert_string_equal(c->value, "A2");
	assert_string_equal(holder_value(f, "e", buf, sizeof buf), "A2");

	/* Not the leader, or a stale token: refused, nothing changes. */
	assert_int_equal(
		DO(f, PROCLAIM, .session = b, .owner = 1, .name = "e", .token = ta, .value = "X")
			.status,
		RAFTLOCK_ENOTHOLDER);
	assert_int_equal(DO(f, PROCLAIM, .session = a, .owner = 1, .name = "e", .token = ta + 1,
			    .value = "X")
				 .status,
			 RAFTLOCK_ENOTHOLDER);
	assert_int_equal(fx_count(f, FSM_EV_CHANGE), 0);
	char big[RAFTLOCK_VALUE_MAX + 2];
	memset(big, 'v', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	assert_int_equal(
		DO(f, PROCLAIM, .session = a, .owner = 1, .name = "e", .token = ta, .value = big)
			.status,
		RAFTLOCK_EINVAL);
	assert_int_equal(
		DO(f, ACQUIRE, .session = b, .owner = 2, .name = "e2", .value = big).status,
		RAFTLOCK_EINVAL);
	assert_string_equal(holder_value(f, "e", buf, sizeof buf), "A2");

	/* Resign: the waiter leads with the value it queued with. */
	fx_release_ok(f, a, 1, "e", 0);
	uint64_t tb = fx_pushed_grant(f, b, sb);
	assert_true(tb > ta);
	assert_string_equal(holder_value(f, "e", buf, sizeof buf), "B1");
	size_t n = 0;
	for (size_t i = 0; i < f->n_events; i++) {
		if (f->events[i].type != FSM_EV_CHANGE)
			continue;
		const Raftlock__WatchEvent *e = &f->events[i].change;
		if (n == 0) {
			assert_int_equal(e->kind, K(RELEASED));
			assert_string_equal(e->value, "A2");
		} else {
			assert_int_equal(e->kind, K(GRANTED));
			assert_string_equal(e->value, "B1");
		}
		n++;
	}
	assert_int_equal(n, 2);

	/* The deposed leader's proclaim, even with its old token: refused. */
	assert_int_equal(
		DO(f, PROCLAIM, .session = a, .owner = 1, .name = "e", .token = ta, .value = "late")
			.status,
		RAFTLOCK_ENOTHOLDER);
	assert_string_equal(holder_value(f, "e", buf, sizeof buf), "B1");
}

/* A retried PROCLAIM (same seq) is answered from the outcome table and
 * not applied again; values travel in snapshots; a replay agrees. */
static void test_retry_snapshot_replay(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	char buf[64];
	uint64_t ta = DO(f, ACQUIRE, .session = a, .owner = 1, .name = "e", .value = "v1").token;
	uint64_t seq = ++f->seq;
	assert_int_equal(DO(f, PROCLAIM, .session = a, .seq = seq, .owner = 1, .name = "e",
			    .token = ta, .value = "v2")
				 .status,
			 0);
	assert_int_equal(DO(f, PROCLAIM, .session = a, .seq = seq, .owner = 1, .name = "e",
			    .token = ta, .value = "v3")
				 .status,
			 0);
	assert_int_equal(fx_count(f, FSM_EV_CHANGE), 0); /* answered, not applied */
	assert_string_equal(holder_value(f, "e", buf, sizeof buf), "v2");

	struct fx *g = fx_peer(f);
	fx_restore_from(g, f);
	assert_string_equal(holder_value(g, "e", buf, sizeof buf), "v2");

	struct fx *h = fx_peer(f);
	fx_replay(h, f, 0, f->n_log);
	fx_assert_same_state(f, h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_campaign_proclaim_resign, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_retry_snapshot_replay, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
