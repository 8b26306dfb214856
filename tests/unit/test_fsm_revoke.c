/*
 * test_fsm_revoke.c: revocation (an admin's, cooperative, a maximum hold
 * time) and the end of bound sessions whose connection closed (issue 14,
 * items 5 and 6): what apply decides, on a real store.
 */
#include "test_fsm_harness.h"

#define RW RAFTLOCK__LOCK_KIND__RWLOCK
#define SHARED RAFTLOCK__MODE__SHARED

/* Applies one command built by the test in an entry of its own, at the
 * fixture's cluster time. */
static void apply_one(struct fx *f, Raftlock__Command *cmd)
{
	Raftlock__LogEntry entry = RAFTLOCK__LOG_ENTRY__INIT;
	entry.cluster_time = f->now;
	entry.commands = &cmd;
	entry.n_commands = 1;
	struct fsm_sink sink = {.emit = fx_emit, .arg = f};
	f->n_events = 0;
	fsm_apply(&f->fsm, ++f->index, &entry, &sink);
}

static Raftlock__Result do_revoke(struct fx *f, const char *name, uint64_t token, uint32_t grace)
{
	Raftlock__Revoke op = RAFTLOCK__REVOKE__INIT;
	op.name = (char *)name;
	op.token = token;
	op.grace_ms = grace;
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_REVOKE;
	cmd.revoke = &op;
	apply_one(f, &cmd);
	return fx_result(f, 0);
}

static void revoke_due(struct fx *f, const char *name, uint64_t token)
{
	Raftlock__RevokeDue op = RAFTLOCK__REVOKE_DUE__INIT;
	op.name = (char *)name;
	op.token = token;
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_REVOKE_DUE;
	cmd.revoke_due = &op;
	apply_one(f, &cmd);
}

static void drop_bound_seen(struct fx *f, uint64_t session, uint64_t deadline)
{
	Raftlock__DropBound op = RAFTLOCK__DROP_BOUND__INIT;
	op.session = session;
	op.deadline = deadline;
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_DROP_BOUND;
	cmd.drop_bound = &op;
	apply_one(f, &cmd);
}

/* A DROP_BOUND as proposed below level 8: without a deadline. */
static void drop_bound(struct fx *f, uint64_t session)
{
	drop_bound_seen(f, session, 0);
}

/* Session id's lease deadline in the applied state. */
static uint64_t lease_deadline(struct fx *f, uint64_t id)
{
	uint64_t deadline = 0;
	uint32_t ttl;
	MDB_txn *txn = store_begin(&f->store, false);
	assert_true(store_get_lease(&f->store, txn, id, &deadline, &ttl));
	store_abort(txn);
	return deadline;
}

static Raftlock__Result open_bound(struct fx *f, uint32_t grace)
{
	Raftlock__OpenSession op = RAFTLOCK__OPEN_SESSION__INIT;
	op.ttl_ms = FX_TTL;
	op.bind_grace_ms = grace;
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_OPEN_SESSION;
	cmd.open_session = &op;
	apply_one(f, &cmd);
	return fx_result(f, 0);
}

/* Takes `name` (must be free) with a maximum hold time and revoke grace. */
static uint64_t take_limited(struct fx *f, uint64_t session, const char *name, uint32_t max_hold,
			     uint32_t grace)
{
	Raftlock__Acquire op = RAFTLOCK__ACQUIRE__INIT;
	op.name = (char *)name;
	op.owner = 1;
	op.max_hold_ms = max_hold;
	op.revoke_grace_ms = grace;
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_ACQUIRE;
	cmd.acquire = &op;
	cmd.session = session;
	cmd.seq = ++f->seq;
	apply_one(f, &cmd);
	Raftlock__Result r = fx_result(f, 0);
	assert_int_equal(r.status, 0);
	assert_true(r.token != 0);
	return r.token;
}

static const struct fx_event *event_of(const struct fx *f, enum fsm_event_type type)
{
	return fx_event(f, type);
}

/* The session no longer lists the lock among those it holds or awaits. */
static void assert_session_forgot(struct fx *f, uint64_t session, const char *name)
{
	size_t n;
	char **names = fx_session_names(f, session, &n);
	for (size_t i = 0; i < n; i++)
		assert_string_not_equal(names[i], name);
}

/* An admin's revocation ends the grant whatever its nesting, tells the
 * holder's session, and passes the lock on with a larger token. */
static void test_revoke_passes_the_lock_on(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f), b = fx_session(f);
	uint64_t t1 = fx_take(f, a, 1, "m");
	assert_int_equal(DO(f, ACQUIRE, .session = a, .owner = 1, .name = "m").count, 2);
	uint64_t seq = fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 1, .name = "m"));

	Raftlock__Result r = do_revoke(f, "m", 0, 0);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.count, 1);
	assert_int_equal(r.token, t1);
	const struct fx_event *ev = event_of(f, FSM_EV_REVOKED);
	assert_non_null(ev);
	assert_int_equal(ev->session, a);
	assert_string_equal(ev->name, "m");
	uint64_t t2 = fx_pushed_grant(f, b, seq);
	assert_true(t2 > t1); /* the revoked token is superseded */
	HOLDERS(f, "m", b, 1);
	assert_session_forgot(f, a, "m");
	/* The revoked handle holds nothing: its release is refused. */
	assert_int_equal(DO(f, RELEASE, .session = a, .owner = 1, .name = "m").status,
			 RAFTLOCK_ENOTHOLDER);
	HOLDERS(f, "m", b, 1);
}

/* A token names one grant: the others stay. Nothing to revoke is
 * ENOTFOUND and changes nothing. */
static void test_revoke_by_token(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f), b = fx_session(f);
	uint64_t ta =
		DO(f, ACQUIRE, .session = a, .owner = 1, .name = "rw", .kind = RW, .mode = SHARED)
			.token;
	uint64_t tb =
		DO(f, ACQUIRE, .session = b, .owner = 1, .name = "rw", .kind = RW, .mode = SHARED)
			.token;
	assert_true(ta != 0 && tb > ta);
	Raftlock__Result r = do_revoke(f, "rw", ta, 0);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.count, 1);
	HOLDERS(f, "rw", b, 1);
	assert_int_equal(do_revoke(f, "rw", ta, 0).status, RAFTLOCK_ENOTFOUND);
	assert_int_equal(fx_count(f, FSM_EV_REVOKED), 0);
	assert_int_equal(do_revoke(f, "nothing", 0, 0).status, RAFTLOCK_ENOTFOUND);
	assert_int_equal(do_revoke(f, "", 0, 0).status, RAFTLOCK_EINVAL);
	HOLDERS(f, "rw", b, 1);
	/* Every holder at once. */
	DO(f, ACQUIRE, .session = a, .owner = 2, .name = "rw", .kind = RW, .mode = SHARED);
	assert_int_equal(do_revoke(f, "rw", 0, 0).count, 2);
	assert_int_equal(fx_count(f, FSM_EV_REVOKED), 2);
	assert_false(fx_lock_exists(f, "rw"));
}

/* A revoked holder did not let go by itself: the lock's lock-delay runs
 * before the next grant. */
static void test_revoke_starts_the_lock_delay(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f), b = fx_session(f);
	DO(f, ACQUIRE, .session = a, .owner = 1, .name = "d", .lock_delay_ms = 500);
	uint64_t seq = fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 1, .name = "d"));
	do_revoke(f, "d", 0, 0);
	assert_int_equal(fx_count(f, FSM_EV_PUSH), 0);
	const struct fx_event *ev = event_of(f, FSM_EV_LOCK_DELAY);
	assert_non_null(ev);
	assert_int_equal(ev->deadline, f->now + 500);
	f->now += 500;
	DO(f, LOCK_DELAY_END, .name = "d");
	assert_true(fx_pushed_grant(f, b, seq) != 0);
}

/* Cooperative: the holder is asked first and revoked only after the
 * grace; one that lets go in time is not revoked. */
static void test_cooperative_revoke(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f), b = fx_session(f);
	uint64_t t1 = fx_take(f, a, 1, "c");
	uint64_t seq = fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 1, .name = "c"));
	Raftlock__Result r = do_revoke(f, "c", 0, 300);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.count, 1);
	const struct fx_event *ev = event_of(f, FSM_EV_RELEASE_REQUESTED);
	assert_non_null(ev);
	assert_int_equal(ev->session, a);
	assert_int_equal(ev->deadline, f->now + 300);
	assert_non_null(event_of(f, FSM_EV_REVOKE_DEADLINE));
	assert_int_equal(fx_count(f, FSM_EV_REVOKED), 0);
	HOLDERS(f, "c", a, 1);

	f->now += 299; /* early: the deadline is checked in apply */
	revoke_due(f, "c", t1);
	assert_int_equal(fx_count(f, FSM_EV_REVOKED), 0);
	HOLDERS(f, "c", a, 1);
	f->now += 1;
	revoke_due(f, "c", t1);
	assert_int_equal(fx_count(f, FSM_EV_REVOKED), 1);
	uint64_t t2 = fx_pushed_grant(f, b, seq);
	assert_true(t2 > t1);

	/* b lets go within its grace: the deadline finds no such grant. */
	do_revoke(f, "c", 0, 300);
	fx_release_ok(f, b, 1, "c", 0);
	f->now += 300;
	revoke_due(f, "c", t2);
	assert_int_equal(fx_count(f, FSM_EV_REVOKED), 0);
}

/* A cooperative revoke asked again (the CLI's re-send after a lost
 * answer): with no earlier deadline it changes nothing and tells the
 * holder nothing again; an earlier deadline moves it and tells it. */
static void test_second_ask_changes_nothing(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	uint64_t t1 = fx_take(f, a, 1, "c");
	Raftlock__Result r = do_revoke(f, "c", t1, 300);
	assert_int_equal(r.status, 0);
	assert_int_equal(fx_count(f, FSM_EV_RELEASE_REQUESTED), 1);
	uint64_t deadline = event_of(f, FSM_EV_REVOKE_DEADLINE)->deadline;
	f->now += 100;
	r = do_revoke(f, "c", t1, 300); /* would end later: the first stands */
	assert_int_equal(r.status, 0);
	assert_int_equal(r.count, 1);
	assert_int_equal(fx_count(f, FSM_EV_RELEASE_REQUESTED), 0);
	assert_int_equal(fx_count(f, FSM_EV_REVOKE_DEADLINE), 0);
	assert_int_equal(fx_count(f, FSM_EV_CHANGE), 0);
	r = do_revoke(f, "c", t1, 100); /* sooner */
	assert_int_equal(r.count, 1);
	assert_int_equal(fx_count(f, FSM_EV_RELEASE_REQUESTED), 1);
	assert_int_equal(event_of(f, FSM_EV_REVOKE_DEADLINE)->deadline, f->now + 100);
	assert_true(f->now + 100 < deadline);
	HOLDERS(f, "c", a, 1);
}

/* An acquire answered again from its record (a retry: its answer was
 * lost) after its grant was revoked (the push and the revocation lost with
 * a connection) says ENOTHOLDER, not the old token; so does the cancel of
 * its wait. Before the revoke, the record's grant is answered as it was. */
static void test_retried_acquire_after_revoke_not_held(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	struct op acq = OP(ACQUIRE, .session = a, .owner = 1, .name = "r");
	fx_number(f, &acq);
	Raftlock__Result r = fx_do(f, acq);
	assert_int_equal(r.status, 0);
	uint64_t t = r.token;
	r = fx_do(f, acq);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.token, t);
	assert_int_equal(do_revoke(f, "r", t, 0).status, 0);
	r = fx_do(f, acq);
	assert_int_equal(r.status, RAFTLOCK_ENOTHOLDER);
	assert_int_equal(r.token, 0);
	struct op cancel =
		OP(CANCEL_WAIT, .session = a, .owner = 1, .name = "r", .acquire_seq = acq.seq);
	fx_number(f, &cancel);
	r = fx_do(f, cancel);
	assert_int_equal(r.status, RAFTLOCK_ENOTHOLDER);
	assert_int_equal(r.token, 0);
	r = fx_do(f, cancel); /* sent again: answered from its record alike */
	assert_int_equal(r.status, RAFTLOCK_ENOTHOLDER);
}

/* A cancel answered while the grant was still held says so; sent again
 * after the grant was revoked, its record's answer says ENOTHOLDER. */
static void test_retried_cancel_after_revoke_not_held(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	uint64_t t = fx_take(f, a, 1, "c");
	struct op cancel =
		OP(CANCEL_WAIT, .session = a, .owner = 1, .name = "c", .acquire_seq = f->seq);
	fx_number(f, &cancel);
	Raftlock__Result r = fx_do(f, cancel);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.token, t); /* granted first: the caller holds it */
	assert_int_equal(do_revoke(f, "c", t, 0).status, 0);
	r = fx_do(f, cancel);
	assert_int_equal(r.status, RAFTLOCK_ENOTHOLDER);
}

/* A maximum hold time: each grant gets its deadline, and is revoked at
 * it; a lock with a revoke grace asks first. */
static void test_max_hold_time(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f), b = fx_session(f);
	uint64_t t1 = take_limited(f, a, "h", 1000, 0);
	const struct fx_event *ev = event_of(f, FSM_EV_REVOKE_DEADLINE);
	assert_non_null(ev);
	assert_int_equal(ev->deadline, f->now + 1000);
	uint64_t seq = fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 1, .name = "h"));
	f->now += 999;
	revoke_due(f, "h", t1);
	HOLDERS(f, "h", a, 1);
	f->now += 1;
	revoke_due(f, "h", t1);
	assert_int_equal(fx_count(f, FSM_EV_REVOKED), 1);
	assert_true(fx_pushed_grant(f, b, seq) > t1);
	/* The next grant has its own deadline, from its own grant time. */
	ev = event_of(f, FSM_EV_REVOKE_DEADLINE);
	assert_non_null(ev);
	assert_int_equal(ev->deadline, f->now + 1000);
	Raftlock__LockRecord *l = fx_lock(f, "h");
	assert_int_equal(l->max_hold_ms, 1000);
	assert_int_equal(l->holders[0]->revoke_at, f->now + 1000);
	raftlock__lock_record__free_unpacked(l, NULL);
}

static void test_max_hold_time_cooperative(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	uint64_t t1 = take_limited(f, a, "hc", 1000, 200);
	f->now += 1000;
	revoke_due(f, "hc", t1);
	const struct fx_event *ev = event_of(f, FSM_EV_RELEASE_REQUESTED);
	assert_non_null(ev);
	assert_int_equal(ev->deadline, f->now + 200);
	HOLDERS(f, "hc", a, 1);
	f->now += 199;
	revoke_due(f, "hc", t1);
	HOLDERS(f, "hc", a, 1);
	f->now += 1;
	revoke_due(f, "hc", t1);
	assert_int_equal(fx_count(f, FSM_EV_REVOKED), 1);
	assert_false(fx_lock_exists(f, "hc"));
}

/* Crash-fast release: DROP_BOUND ends a bound session as an expiry does
 * (its waiters go, its locks pass on after their lock-delay); it leaves
 * an unbound session alone. A grace outside the bounds is refused. */
static void test_drop_bound(void **state)
{
	struct fx *f = fx_ready(state);
	Raftlock__Result r = open_bound(f, RAFTLOCK_BIND_GRACE_DEFAULT_MS);
	assert_int_equal(r.status, 0);
	uint64_t a = r.session, b = fx_session(f);
	Raftlock__SessionRecord *rec = fx_sess(f, a);
	assert_int_equal(rec->bind_grace_ms, RAFTLOCK_BIND_GRACE_DEFAULT_MS);
	raftlock__session_record__free_unpacked(rec, NULL);
	uint64_t t1 = fx_take(f, a, 1, "x");
	DO(f, ACQUIRE, .session = a, .owner = 2, .name = "y", .lock_delay_ms = 100);
	uint64_t seq = fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 1, .name = "x"));

	drop_bound(f, b); /* not bound: nothing happens */
	assert_int_equal(fx_count(f, FSM_EV_SESSION_GONE), 0);
	drop_bound(f, a);
	assert_int_equal(fx_count(f, FSM_EV_SESSION_GONE), 1);
	assert_true(fx_pushed_grant(f, b, seq) > t1);
	const struct fx_event *ev = event_of(f, FSM_EV_LOCK_DELAY);
	assert_non_null(ev);
	assert_string_equal(ev->name, "y");
	assert_null(fx_sess(f, a));
	drop_bound(f, a); /* gone: nothing */
	assert_int_equal(fx_count(f, FSM_EV_SESSION_GONE), 0);

	assert_int_equal(open_bound(f, RAFTLOCK_BIND_GRACE_MIN_MS - 1).status, RAFTLOCK_EINVAL);
	assert_int_equal(open_bound(f, RAFTLOCK_BIND_GRACE_MAX_MS + 1).status, RAFTLOCK_EINVAL);
}

/* Rule 11a: a drop carries the deadline its leader had applied; a RENEW
 * that lands before it in the log and moves the lease on (and may have
 * been acknowledged) keeps the session, and the drop reports it kept
 * (FSM_EV_DROP_KEPT, with the deadline it carried: its leader may drop
 * the session again). A drop that saw the renewal, and one without a
 * deadline (below level 8), end it. */
static void test_drop_bound_after_renewal(void **state)
{
	struct fx *f = fx_ready(state);
	Raftlock__Result r = open_bound(f, RAFTLOCK_BIND_GRACE_DEFAULT_MS);
	assert_int_equal(r.status, 0);
	uint64_t a = r.session;
	uint64_t seen = lease_deadline(f, a); /* when the leader proposed */
	f->now += 300;
	DO(f, RENEW, .renew = &a, .n_renew = 1);
	assert_true(lease_deadline(f, a) > seen);
	drop_bound_seen(f, a, seen);
	assert_int_equal(fx_count(f, FSM_EV_SESSION_GONE), 0);
	const struct fx_event *kept = fx_event(f, FSM_EV_DROP_KEPT);
	assert_non_null(kept);
	assert_int_equal(kept->session, a);
	assert_int_equal(kept->deadline, seen);
	Raftlock__SessionRecord *rec = fx_sess(f, a);
	assert_non_null(rec);
	raftlock__session_record__free_unpacked(rec, NULL);
	drop_bound_seen(f, a, lease_deadline(f, a));
	assert_int_equal(fx_count(f, FSM_EV_SESSION_GONE), 1);
	assert_int_equal(fx_count(f, FSM_EV_DROP_KEPT), 0);

	r = open_bound(f, RAFTLOCK_BIND_GRACE_DEFAULT_MS);
	uint64_t b = r.session;
	f->now += 300;
	DO(f, RENEW, .renew = &b, .n_renew = 1);
	drop_bound(f, b);
	assert_int_equal(fx_count(f, FSM_EV_SESSION_GONE), 1);
}

/* The revocation state goes through a snapshot, and the restored store
 * goes on alike. */
static void test_revocation_state_in_snapshot(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	uint64_t t1 = take_limited(f, a, "s", 1000, 100);
	Raftlock__Result r = open_bound(f, 300);
	struct fx_image im = fx_dump(f);
	struct fx *g = fx_peer(f);
	assert_int_equal(store_load(&g->store, im.buf, im.len), 0);
	g->index = f->index;
	g->now = f->now = f->now + 1000;
	revoke_due(f, "s", t1);
	revoke_due(g, "s", t1);
	assert_non_null(event_of(g, FSM_EV_RELEASE_REQUESTED));
	drop_bound(f, r.session);
	drop_bound(g, r.session);
	assert_int_equal(fx_count(g, FSM_EV_SESSION_GONE), 1);
	fx_assert_same_state(f, g);
	fx_image_free(&im);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		T(test_revoke_passes_the_lock_on),
		T(test_revoke_by_token),
		T(test_revoke_starts_the_lock_delay),
		T(test_cooperative_revoke),
		T(test_second_ask_changes_nothing),
		T(test_max_hold_time),
		T(test_retried_acquire_after_revoke_not_held),
		T(test_retried_cancel_after_revoke_not_held),
		T(test_max_hold_time_cooperative),
		T(test_drop_bound),
		T(test_revocation_state_in_snapshot),
		T(test_drop_bound_after_renewal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
