/* test_reads.c: what reads_serve() answers about locks and sessions too
 * large for a frame. A lock may have FSM_MAX_HOLDERS holders and
 * FSM_MAX_WAITERS waiters, with their owners several frames' worth: GET_LOCK
 * and each page of LIST_LOCKS still fit in a frame (RAFTLOCK_FRAME_MAX, what
 * a client takes), the lists hold the first holders and waiters in their
 * order, and the totals say how many the lock has. A small lock's lists
 * are whole; the holders past those of one answer are read page by page,
 * after the last token. Likewise a session's names (FSM_MAX_SESSION_LOCKS of up to
 * RAFTLOCK_NAME_MAX bytes) in LIST_SESSIONS. */
#include "reads.h"
#include "session_locks.h"
#include "test_fsm_harness.h"

#define SESSIONS 2000

/* reads.c's barrier (reads_wait) is not exercised here. */
int raft_barrier(struct raft *r, struct raft_barrier *req, raft_barrier_cb cb)
{
	(void)r;
	(void)req;
	(void)cb;
	return RAFT_NOTLEADER;
}

/* One answer: its envelope's size, and what the test reads of it. */
struct answer {
	size_t frame_bytes;
	int status;
	size_t n_locks;
	bool more;
	char last[RAFTLOCK_NAME_MAX + 1];
	struct {
		char name[64];
		size_t n_holders, n_waiters, holders_total, waiters_total;
		uint64_t first_holder, first_waiter;
		uint64_t first_token, last_token, holders_after;
		bool holders_more;
	} locks[16];
	size_t n_sessions;
	uint64_t last_session;
	size_t session1_names, session1_total; /* session 1's, when listed */
};

static void note_lock(struct answer *a, const Raftlock__LockInfo *li)
{
	assert_true(a->n_locks < 16);
	size_t k = a->n_locks++;
	snprintf(a->locks[k].name, sizeof a->locks[k].name, "%s", li->name);
	snprintf(a->last, sizeof a->last, "%s", li->name);
	a->locks[k].n_holders = li->n_holders;
	a->locks[k].n_waiters = li->n_waiters;
	a->locks[k].holders_total = li->holders_total;
	a->locks[k].waiters_total = li->waiters_total;
	a->locks[k].first_holder = li->n_holders ? li->holders[0]->holder->owner : 0;
	a->locks[k].first_waiter = li->n_waiters ? li->waiters[0]->waiter->owner : 0;
	a->locks[k].first_token = li->n_holders ? li->holders[0]->holder->token : 0;
	a->locks[k].last_token = li->n_holders ? li->holders[li->n_holders - 1]->holder->token : 0;
	for (size_t i = 1; i < li->n_holders; i++) /* in grant order */
		assert_true(li->holders[i]->holder->token > li->holders[i - 1]->holder->token);
	a->locks[k].holders_after = li->holders_after;
	a->locks[k].holders_more = li->holders_more;
}

static void answered(void *arg, const Raftlock__Response *resp)
{
	struct answer *a = arg;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.id = UINT64_MAX;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_RESPONSE;
	env.response = (Raftlock__Response *)resp;
	a->frame_bytes = raftlock__envelope__get_packed_size(&env);
	a->status = resp->status;
	if (resp->payload_case == RAFTLOCK__RESPONSE__PAYLOAD_LOCK)
		note_lock(a, resp->lock);
	if (resp->payload_case == RAFTLOCK__RESPONSE__PAYLOAD_LOCKS) {
		for (size_t i = 0; i < resp->locks->n_locks; i++)
			note_lock(a, resp->locks->locks[i]);
		a->more = resp->locks->more;
	}
	if (resp->payload_case == RAFTLOCK__RESPONSE__PAYLOAD_SESSIONS) {
		const Raftlock__SessionList *sl = resp->sessions;
		for (size_t i = 0; i < sl->n_sessions; i++) {
			a->last_session = sl->sessions[i]->id;
			if (sl->sessions[i]->id == 1) {
				a->session1_names = sl->sessions[i]->n_locks;
				a->session1_total = sl->sessions[i]->locks_total;
			}
		}
		a->n_sessions = sl->n_sessions;
		a->more = sl->more;
	}
}

/* Sessions 1..SESSIONS, each with an owner of some length. */
static void put_sessions(struct fx *f, MDB_txn *txn)
{
	char host[64], name[64];
	for (uint64_t id = 1; id <= SESSIONS; id++) {
		snprintf(host, sizeof host, "host-%08llu.rack-17.example.internal",
			 (unsigned long long)id);
		snprintf(name, sizeof name, "billing-worker-%llu", (unsigned long long)id);
		Raftlock__Owner owner = RAFTLOCK__OWNER__INIT;
		owner.host = host;
		owner.client_name = name;
		owner.pid = 40000 + (uint32_t)id;
		Raftlock__SessionRecord rec = RAFTLOCK__SESSION_RECORD__INIT;
		rec.id = id;
		rec.owner = &owner;
		store_put_session(&f->store, txn, &rec);
	}
}

/* Lock name with n holders and m waiters (owners 1.. and 1000001..),
 * spread over the sessions. */
static void put_lock(struct fx *f, MDB_txn *txn, const char *name, size_t n, size_t m)
{
	Raftlock__Holder *h = calloc(n ? n : 1, sizeof *h);
	Raftlock__Holder **hp = calloc(n ? n : 1, sizeof *hp);
	Raftlock__Waiter *w = calloc(m ? m : 1, sizeof *w);
	Raftlock__Waiter **wp = calloc(m ? m : 1, sizeof *wp);
	assert_true(h && hp && w && wp);
	for (size_t i = 0; i < n; i++) {
		raftlock__holder__init(&h[i]);
		h[i].session = 1 + i % SESSIONS;
		h[i].owner = 1 + i;
		h[i].mode = RAFTLOCK__MODE__SHARED;
		h[i].permits = 1;
		h[i].count = 1;
		h[i].token = 1000 + i;
		h[i].granted_time = 5000;
		hp[i] = &h[i];
	}
	for (size_t i = 0; i < m; i++) {
		raftlock__waiter__init(&w[i]);
		w[i].session = 1 + i % SESSIONS;
		w[i].owner = 1000001 + i;
		w[i].permits = 1;
		w[i].queued_time = 6000 + i;
		wp[i] = &w[i];
	}
	Raftlock__LockRecord rec = RAFTLOCK__LOCK_RECORD__INIT;
	rec.name = (char *)name;
	rec.kind = RAFTLOCK__LOCK_KIND__SEMAPHORE;
	rec.limit = (uint32_t)(n ? n : 1);
	rec.holders = hp;
	rec.n_holders = n;
	rec.waiters = wp;
	rec.n_waiters = m;
	store_put_lock(&f->store, txn, &rec);
	free(h);
	free(hp);
	free(w);
	free(wp);
}

/* Serves env into *a: answered, and inside a frame. */
static void serve(struct fx *f, const Raftlock__Envelope *env, struct answer *a)
{
	memset(a, 0, sizeof *a);
	reads_serve(&f->store, env, NULL, answered, a);
	assert_int_equal(a->status, 0);
	assert_true(a->frame_bytes <= RAFTLOCK_FRAME_MAX);
}

static void serve_get_after(struct fx *f, const char *name, uint64_t holders_after,
			    struct answer *a)
{
	Raftlock__GetLockRequest g = RAFTLOCK__GET_LOCK_REQUEST__INIT;
	g.name = (char *)name;
	g.holders_after = holders_after;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_GET_LOCK;
	env.get_lock = &g;
	serve(f, &env, a);
	assert_int_equal(a->n_locks, 1);
	assert_int_equal(a->locks[0].holders_after, holders_after);
}

static void serve_get(struct fx *f, const char *name, struct answer *a)
{
	serve_get_after(f, name, 0, a);
}

static void test_huge_locks_fit_a_frame(void **state)
{
	struct fx *f = fx_ready(state);
	MDB_txn *txn = store_begin(&f->store, true);
	put_sessions(f, txn);
	put_lock(f, txn, "big/holders", FSM_MAX_HOLDERS, 0);
	put_lock(f, txn, "big/queue", 1, FSM_MAX_WAITERS);
	put_lock(f, txn, "big/zsmall", 3, 2);
	put_lock(f, txn, "big/rw", FSM_MAX_HOLDERS, 3);
	store_commit(txn);

	struct answer a;
	serve_get(f, "big/holders", &a);
	assert_int_equal(a.locks[0].holders_total, FSM_MAX_HOLDERS);
	assert_true(a.locks[0].n_holders > 1000 && a.locks[0].n_holders < FSM_MAX_HOLDERS);
	assert_int_equal(a.locks[0].first_holder, 1);
	assert_int_equal(a.locks[0].waiters_total, 0);
	assert_true(a.frame_bytes <= RAFTLOCK_FRAME_MAX / 4 + 1024);

	serve_get(f, "big/queue", &a);
	assert_int_equal(a.locks[0].n_holders, 1);
	assert_int_equal(a.locks[0].holders_total, 1);
	assert_int_equal(a.locks[0].waiters_total, FSM_MAX_WAITERS);
	assert_true(a.locks[0].n_waiters > 1000 && a.locks[0].n_waiters < FSM_MAX_WAITERS);
	assert_int_equal(a.locks[0].first_waiter, 1000001); /* the head of the queue */

	/* Many holders leave room for the waiters: the writer queued behind
	 * the readers is shown. */
	serve_get(f, "big/rw", &a);
	assert_int_equal(a.locks[0].holders_total, FSM_MAX_HOLDERS);
	assert_true(a.locks[0].n_holders > 1000);
	assert_int_equal(a.locks[0].n_waiters, 3);
	assert_int_equal(a.locks[0].waiters_total, 3);

	serve_get(f, "big/zsmall", &a);
	assert_int_equal(a.locks[0].n_holders, 3);
	assert_false(a.locks[0].holders_more);
	assert_int_equal(a.locks[0].holders_total, 3);
	assert_int_equal(a.locks[0].n_waiters, 2);
	assert_int_equal(a.locks[0].waiters_total, 2);

	/* Every page of a listing fits a frame, and the pages list each lock
	 * once. */
	const char *want[] = {"big/holders", "big/queue", "big/rw", "big/zsmall"};
	size_t seen = 0, pages = 0;
	char after[RAFTLOCK_NAME_MAX + 1] = "";
	do {
		Raftlock__ListLocksRequest ll = RAFTLOCK__LIST_LOCKS_REQUEST__INIT;
		ll.prefix = "big/";
		ll.after = after;
		Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
		env.body_case = RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS;
		env.list_locks = &ll;
		serve(f, &env, &a);
		for (size_t i = 0; i < a.n_locks; i++) {
			assert_true(seen < 4);
			assert_string_equal(a.locks[i].name, want[seen++]);
		}
		snprintf(after, sizeof after, "%s", a.last);
		pages++;
	} while (a.more && pages < 10);
	assert_int_equal(seen, 4);
}

/* Reads name's holders page by page, each after the last token listed:
 * every holder once, in grant order, each page inside a frame (serve), the
 * waiters and totals the whole lock's on each; the last page says no more
 * follow. */
static void page_holders(struct fx *f, const char *name, size_t holders, size_t waiters)
{
	struct answer a;
	uint64_t after = 0, next = 1000; /* put_lock's first token */
	size_t pages = 0;
	do {
		serve_get_after(f, name, after, &a);
		assert_int_equal(a.locks[0].holders_total, holders);
		assert_int_equal(a.locks[0].n_waiters, waiters);
		assert_true(a.locks[0].n_holders > 0);
		assert_int_equal(a.locks[0].first_token, next);
		next = a.locks[0].last_token + 1;
		after = a.locks[0].last_token;
		pages++;
	} while (a.locks[0].holders_more && pages < 1000);
	assert_int_equal(next, 1000 + holders);
	assert_true(pages > 1);
	/* past the last holder: none listed, none more */
	serve_get_after(f, name, after, &a);
	assert_int_equal(a.locks[0].n_holders, 0);
	assert_false(a.locks[0].holders_more);
}

static void test_holders_read_page_by_page(void **state)
{
	struct fx *f = fx_ready(state);
	MDB_txn *txn = store_begin(&f->store, true);
	put_sessions(f, txn);
	put_lock(f, txn, "big/holders", FSM_MAX_HOLDERS, 0);
	put_lock(f, txn, "big/rw", FSM_MAX_HOLDERS, 3);
	store_commit(txn);
	page_holders(f, "big/holders", FSM_MAX_HOLDERS, 0);
	page_holders(f, "big/rw", FSM_MAX_HOLDERS, 3);
}

/* Session 1 holds or awaits `n` names of RAFTLOCK_NAME_MAX bytes. */
static void give_names(struct fx *f, MDB_txn *txn, size_t n)
{
	Raftlock__Meta *meta = store_get_meta(&f->store, txn);
	struct session_locks sl = session_locks_at(&f->store, txn, meta);
	Raftlock__SessionRecord *rec = store_get_session(&f->store, txn, 1);
	assert_non_null(rec);
	char name[RAFTLOCK_NAME_MAX + 1];
	memset(name, 'n', RAFTLOCK_NAME_MAX);
	name[RAFTLOCK_NAME_MAX] = '\0';
	for (size_t i = 0; i < n; i++) {
		snprintf(name, sizeof name, "many/%06zu", i);
		name[strlen(name)] = 'n'; /* the rest of the name stays 'n's */
		session_locks_add(&sl, rec, name);
	}
	store_put_session(&f->store, txn, rec);
	raftlock__session_record__free_unpacked(rec, NULL);
	raftlock__meta__free_unpacked(meta, NULL);
}

static void test_session_with_many_names_fits_a_frame(void **state)
{
	struct fx *f = fx_ready(state);
	MDB_txn *txn = store_begin(&f->store, true);
	put_sessions(f, txn);
	give_names(f, txn, 20000); /* 5 MB of names */
	store_commit(txn);

	struct answer a;
	uint64_t after = 0;
	size_t seen = 0, pages = 0;
	bool session1 = false;
	do {
		Raftlock__ListSessionsRequest ls = RAFTLOCK__LIST_SESSIONS_REQUEST__INIT;
		ls.after = after;
		Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
		env.body_case = RAFTLOCK__ENVELOPE__BODY_LIST_SESSIONS;
		env.list_sessions = &ls;
		serve(f, &env, &a);
		if (a.session1_total != 0) {
			session1 = true;
			assert_int_equal(a.session1_total, 20000);
			assert_true(a.session1_names > 1000 && a.session1_names < 20000);
		}
		seen += a.n_sessions;
		after = a.last_session;
		pages++;
	} while (a.more && pages < 1000);
	assert_true(session1);
	assert_int_equal(seen, SESSIONS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_huge_locks_fit_a_frame, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_holders_read_page_by_page, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_session_with_many_names_fits_a_frame, fx_setup,
						fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
