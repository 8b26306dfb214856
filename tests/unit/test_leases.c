/* test_leases.c: the leader's leases (server/leases.c, the real file) on a
 * manual timebase, with a fake node underneath that records every proposed
 * command and completes it when the test says so. Nothing here sleeps or
 * opens a socket: time moves only in timebase_advance(). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster_clock.h"
#include "leases.h"
#include "raftlock.h"
#include "secret.h"
#include "timebase.h"

/* ------------------------------------------------------------ fake node */

#define MAX_PROPOSALS 256
#define MAX_IDS 64

struct proposed {
	Raftlock__Command__OpCase op;
	uint64_t session;      /* EXPIRE_SESSION */
	uint64_t ids[MAX_IDS]; /* RENEW */
	size_t n_ids;
	node_done_cb cb;
	void *arg;
	uint64_t stamp; /* cluster time its entry would carry */
};

static struct proposed proposed[MAX_PROPOSALS];
static size_t n_proposed;
static int refuse; /* nonzero: node_propose fails with it */

static int record(struct node *n, const Raftlock__Command *cmd, node_done_cb cb, void *arg)
{
	if (refuse != 0)
		return refuse;
	assert_true(n_proposed < MAX_PROPOSALS);
	struct proposed *p = &proposed[n_proposed++];
	memset(p, 0, sizeof *p);
	p->op = cmd->op_case;
	p->cb = cb;
	p->arg = arg;
	if (cmd->op_case == RAFTLOCK__COMMAND__OP_EXPIRE_SESSION)
		p->session = cmd->expire_session->session;
	if (cmd->op_case == RAFTLOCK__COMMAND__OP_RENEW) {
		assert_true(cmd->renew->n_sessions <= MAX_IDS);
		p->n_ids = cmd->renew->n_sessions;
		if (p->n_ids > 0) /* an empty RENEW (a clock entry) has no array */
			memcpy(p->ids, cmd->renew->sessions, p->n_ids * sizeof *p->ids);
	}
	/* As node.c's flush: the entry carries the cluster time. */
	p->stamp = cluster_clock_stamp(&n->clock);
	return 0;
}

int node_propose(struct node *n, const Raftlock__Command *cmd, node_done_cb cb, void *arg)
{
	return record(n, cmd, cb, arg);
}

int node_propose_quiet(struct node *n, const Raftlock__Command *cmd)
{
	return record(n, cmd, NULL, NULL);
}

/* The level the cluster records (feature_level.h); this build's unless a
 * test lowers it, as during a rolling upgrade. */
static uint32_t cluster_level;

bool node_level_admits(struct node *n, const Raftlock__Command *cmd)
{
	(void)n;
	return features_level_of(cmd) <= cluster_level;
}

uint64_t node_cluster_now(struct node *n)
{
	return cluster_clock_now(&n->clock);
}

/* ------------------------------------------------------------- fixture */

struct fx {
	struct timebase tb;
	struct config cfg;
	struct node node;
	struct leases leases;
	char dir[32]; /* the node's store, removed at teardown */
};

/* The applied next_session of the test's store: ids below it were given
 * out, those from it on not yet. */
#define NEXT_SESSION 100000

/* Keepalive answers, as the service would get them. */
struct answer {
	int calls;
	int status;
	int32_t st[MAX_IDS];
	uint32_t ttl[MAX_IDS];
	size_t n;
};

static void keepalive_cb(void *arg, int status, const int32_t *st, const uint32_t *ttls, size_t n)
{
	struct answer *a = arg;
	a->calls++;
	a->status = status;
	a->n = n;
	if (st != NULL)
		memcpy(a->st, st, n * sizeof *st);
	if (ttls != NULL)
		memcpy(a->ttl, ttls, n * sizeof *ttls);
}

#define START_MS 100000 /* the timebase's origin */
#define APPLIED 5000    /* the highest cluster time in the log */
#define WINDOW_MS 20

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	char err[256];
	snprintf(f->dir, sizeof f->dir, "/tmp/test_leases.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	assert_int_equal(store_open(&f->node.store, f->dir, 64u << 20, err, sizeof err), 0);
	MDB_txn *txn = store_begin(&f->node.store, true);
	Raftlock__Meta *m = store_get_meta(&f->node.store, txn);
	m->next_session = NEXT_SESSION;
	store_put_meta(&f->node.store, txn, m);
	raftlock__meta__free_unpacked(m, NULL);
	store_commit(txn);
	timebase_init_manual(&f->tb, START_MS);
	f->cfg.keepalive_max_ids = 100;
	f->node.cfg = &f->cfg;
	f->node.leader = true;
	f->node.ready = true;
	cluster_clock_init(&f->node.clock, &f->tb);
	cluster_clock_start(&f->node.clock, APPLIED);
	leases_init(&f->leases, &f->tb, &f->node, WINDOW_MS);
	leases_on_ready(&f->leases, true);
	n_proposed = 0;
	refuse = 0;
	cluster_level = FEATURE_LEVEL;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	leases_close(&f->leases);
	store_close(&f->node.store);
	char path[sizeof f->dir + 16];
	snprintf(path, sizeof path, "%s/data.mdb", f->dir);
	remove(path);
	snprintf(path, sizeof path, "%s/lock.mdb", f->dir);
	remove(path);
	remove(f->dir);
	free(f);
	return 0;
}

/* The secret of the test's sessions, and another. */
static uint8_t secret_bytes[RAFTLOCK_SECRET_MIN] = "0123456789abcdef";
static uint8_t other_bytes[RAFTLOCK_SECRET_MIN] = "0123456789abcdeX";
static const ProtobufCBinaryData SECRET = {sizeof secret_bytes, secret_bytes};
static const ProtobufCBinaryData OTHER = {sizeof other_bytes, other_bytes};

/* Session id opened (as apply reports it) with SECRET's digest, or with
 * none (a session opened before secrets) when digest_len is 0. */
static void session_opened(struct fx *f, uint64_t id, uint64_t deadline, uint32_t ttl,
			   size_t digest_len)
{
	uint8_t digest[SECRET_DIGEST_LEN];
	secret_digest(&SECRET, digest);
	struct fsm_event ev = {.type = FSM_EV_SESSION,
			       .session = id,
			       .deadline = deadline,
			       .ttl_ms = ttl,
			       .opened = true,
			       .digest = digest,
			       .digest_len = digest_len};
	leases_on_event(&f->leases, &ev);
}

static void session(struct fx *f, uint64_t id, uint64_t deadline, uint32_t ttl)
{
	session_opened(f, id, deadline, ttl, SECRET_DIGEST_LEN);
}

/* A keepalive naming ids, each with SECRET, as the client library sends. */
static int keepalive(struct fx *f, struct leases_budget *b, const uint64_t *ids, size_t n,
		     leases_keepalive_cb cb, void *arg)
{
	ProtobufCBinaryData secrets[MAX_IDS];
	assert_true(n <= MAX_IDS);
	for (size_t i = 0; i < n; i++)
		secrets[i] = SECRET;
	return leases_keepalive(&f->leases, b, ids, secrets, n, n, NULL, cb, arg);
}

static size_t count(Raftlock__Command__OpCase op, uint64_t session)
{
	size_t n = 0;
	for (size_t i = 0; i < n_proposed; i++)
		n += proposed[i].op == op && (session == 0 || proposed[i].session == session);
	return n;
}

static size_t clock_entries(void)
{
	size_t n = 0;
	for (size_t i = 0; i < n_proposed; i++)
		n += proposed[i].op == RAFTLOCK__COMMAND__OP_RENEW && proposed[i].n_ids == 0;
	return n;
}

/* --------------------------------------------------------------- tests */

/* A session is proposed for expiry once cluster time reaches its deadline,
 * not before; an unapplied proposal is retried after REPROPOSE_MS (1 s),
 * not at every tick; a renewal (a new deadline) forgets it. */
static void test_expiry_at_deadline(void **state)
{
	struct fx *f = *state;
	session(f, 7, APPLIED + 1000, 1000);
	session(f, 8, APPLIED + 5000, 5000);
	timebase_advance(&f->tb, 990);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_EXPIRE_SESSION, 0), 0);
	timebase_advance(&f->tb, 60); /* the 50 ms tick after the deadline */
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_EXPIRE_SESSION, 7), 1);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_EXPIRE_SESSION, 8), 0);
	timebase_advance(&f->tb, 900);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_EXPIRE_SESSION, 7), 1);
	timebase_advance(&f->tb, 150);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_EXPIRE_SESSION, 7), 2);
	/* renewed in time after all: no expiry until the new deadline */
	uint64_t now = cluster_clock_now(&f->node.clock);
	session(f, 7, now + 1000, 1000);
	timebase_advance(&f->tb, 900);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_EXPIRE_SESSION, 7), 2);
	timebase_advance(&f->tb, 150);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_EXPIRE_SESSION, 7), 3);
	/* gone: never proposed again */
	struct fsm_event gone = {.type = FSM_EV_SESSION_GONE, .session = 7};
	leases_on_event(&f->leases, &gone);
	timebase_advance(&f->tb, 3000);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_EXPIRE_SESSION, 7), 3);
	assert_int_equal(leases_session_count(&f->leases), 1);
}

/* Keepalives of one window go out as one RENEW naming each known session
 * once, in id order; unknown ids are answered ESESSION at once and never
 * replicated; nobody is answered before the RENEW applied. */
static void test_keepalive_batch(void **state)
{
	struct fx *f = *state;
	session(f, 9, APPLIED + 10000, 3000);
	session(f, 4, APPLIED + 10000, 2000);
	struct leases_budget b1 = {0}, b2 = {0};
	struct answer a1 = {0}, a2 = {0}, a3 = {0};
	uint64_t ids1[] = {9, 9, 4, 99};
	uint64_t ids2[] = {4};
	uint64_t ids3[] = {12345};
	assert_int_equal(keepalive(f, &b1, ids1, 4, keepalive_cb, &a1), 0);
	assert_int_equal(keepalive(f, &b2, ids2, 1, keepalive_cb, &a2), 0);
	/* only unknown ids: answered before the call returns */
	assert_int_equal(keepalive(f, &b2, ids3, 1, keepalive_cb, &a3), 0);
	assert_int_equal(a3.calls, 1);
	assert_int_equal(a3.st[0], RAFTLOCK_ESESSION);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_RENEW, 0), 0);
	timebase_advance(&f->tb, WINDOW_MS);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_RENEW, 0), 1);
	struct proposed *p = &proposed[n_proposed - 1];
	assert_int_equal(p->n_ids, 2);
	assert_int_equal(p->ids[0], 4);
	assert_int_equal(p->ids[1], 9);
	assert_int_equal(a1.calls, 0); /* rule 3: acknowledged only once applied */
	assert_int_equal(a2.calls, 0);
	p->cb(p->arg, 0, NULL);
	assert_int_equal(a1.calls, 1);
	assert_int_equal(a1.status, 0);
	assert_int_equal(a1.n, 4);
	assert_int_equal(a1.st[0], 0);
	assert_int_equal(a1.st[1], 0);
	assert_int_equal(a1.st[2], 0);
	assert_int_equal(a1.st[3], RAFTLOCK_ESESSION);
	assert_int_equal(a1.ttl[0], 3000);
	assert_int_equal(a1.ttl[2], 2000);
	assert_int_equal(a2.calls, 1);
	assert_int_equal(a2.st[0], 0);
	assert_int_equal(f->leases.stats.ids_unknown, 2);
	assert_int_equal(f->leases.stats.renew_ids, 2);
}

/* An id this leader does not know is final (ESESSION) only below the
 * applied next_session: from it on the session is not open here yet (a
 * newer leader may have opened it while this one was cut off), and the
 * client tries again elsewhere (EUNAVAILABLE). Neither is replicated. */
static void test_keepalive_unknown_ids(void **state)
{
	struct fx *f = *state;
	struct leases_budget b = {0};
	struct answer a = {0};
	uint64_t ids[] = {NEXT_SESSION - 1, NEXT_SESSION, NEXT_SESSION + 5};
	assert_int_equal(keepalive(f, &b, ids, 3, keepalive_cb, &a), 0);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.status, 0);
	assert_int_equal(a.st[0], RAFTLOCK_ESESSION);
	assert_int_equal(a.st[1], RAFTLOCK_EUNAVAILABLE);
	assert_int_equal(a.st[2], RAFTLOCK_EUNAVAILABLE);
	assert_int_equal(leases_unknown_status(&f->leases, NEXT_SESSION - 1), RAFTLOCK_ESESSION);
	assert_int_equal(leases_unknown_status(&f->leases, NEXT_SESSION), RAFTLOCK_EUNAVAILABLE);
	timebase_advance(&f->tb, WINDOW_MS);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_RENEW, 0), 0);
	assert_int_equal(f->leases.stats.ids_unknown, 3);
}

/* The windows' marks are 32-bit: when the count wraps, every lease's
 * mark is cleared, so that a session marked by a window long ago is still
 * named by the window that reuses that mark. Without the clearing,
 * session 4 (marked by window 1) would be answered as renewed by the
 * second window 1 without being in its RENEW. */
static void test_window_marks_wrap(void **state)
{
	struct fx *f = *state;
	session(f, 4, APPLIED + 10000, 3000);
	session(f, 9, APPLIED + 10000, 3000);
	uint64_t four[] = {4}, nine[] = {9};
	struct leases_budget b = {0};
	struct answer a = {0};
	assert_int_equal(f->leases.window_gen, 0);
	assert_int_equal(keepalive(f, &b, four, 1, keepalive_cb, &a), 0); /* window 1 */
	timebase_advance(&f->tb, WINDOW_MS);
	proposed[n_proposed - 1].cb(proposed[n_proposed - 1].arg, 0, NULL);
	assert_int_equal(a.calls, 1);
	f->leases.window_gen = UINT32_MAX - 1; /* as if 4 billion windows went by */
	assert_int_equal(keepalive(f, &b, nine, 1, keepalive_cb, &a), 0); /* window 2^32-1 */
	timebase_advance(&f->tb, WINDOW_MS);
	proposed[n_proposed - 1].cb(proposed[n_proposed - 1].arg, 0, NULL);
	assert_int_equal(a.calls, 2);
	assert_int_equal(keepalive(f, &b, four, 1, keepalive_cb, &a), 0); /* window 1 again */
	assert_int_equal(f->leases.window_gen, 1);
	timebase_advance(&f->tb, WINDOW_MS);
	struct proposed *p = &proposed[n_proposed - 1];
	assert_int_equal(p->op, RAFTLOCK__COMMAND__OP_RENEW);
	assert_int_equal(p->n_ids, 1);
	assert_int_equal(p->ids[0], 4);
	assert_int_equal(a.calls, 2); /* rule 3: not before the RENEW applied */
	p->cb(p->arg, 0, NULL);
	assert_int_equal(a.calls, 3);
	assert_int_equal(a.st[0], 0);
}

/* A window with more ids than one flush proposes (RENEW_FLUSH_MAX_IDS, 8
 * here, in commands of RENEW_MAX_IDS, 4) goes out over the next windows,
 * before a newer window; its keepalives are answered once all of its
 * commands applied. Losing readiness mid-way answers them ENOTLEADER once
 * the proposed ones came back, and proposes nothing more. */
static void test_large_window_split(void **state)
{
	struct fx *f = *state;
	uint64_t ids[20];
	for (uint64_t i = 0; i < 20; i++) {
		ids[i] = 100 + i;
		session(f, ids[i], APPLIED + 10000, 3000);
	}
	struct leases_budget b = {0}, b2 = {0};
	struct answer a = {0}, a2 = {0};
	assert_int_equal(keepalive(f, &b, ids, 20, keepalive_cb, &a), 0);
	timebase_advance(&f->tb, WINDOW_MS);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_RENEW, 0), 2); /* ids 100-107 */
	assert_int_equal(proposed[0].n_ids, 4);
	assert_int_equal(proposed[0].ids[0], 100);
	assert_int_equal(proposed[1].ids[3], 107);
	/* a newer window waits for the rest of this one */
	uint64_t late = 119;
	assert_int_equal(keepalive(f, &b2, &late, 1, keepalive_cb, &a2), 0);
	timebase_advance(&f->tb, WINDOW_MS);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_RENEW, 0), 4); /* 108-115 */
	assert_int_equal(proposed[2].ids[0], 108);
	timebase_advance(&f->tb, WINDOW_MS);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_RENEW, 0), 5); /* 116-119 */
	assert_int_equal(proposed[4].n_ids, 4);
	assert_int_equal(proposed[4].ids[3], 119);
	timebase_advance(&f->tb, WINDOW_MS);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_RENEW, 0), 6); /* the newer one */
	assert_int_equal(proposed[5].n_ids, 1);
	assert_int_equal(f->leases.stats.renew_windows_split, 2);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(a.calls, 0); /* rule 3: not before all applied */
		proposed[i].cb(proposed[i].arg, 0, NULL);
	}
	assert_int_equal(a.calls, 0);
	proposed[4].cb(proposed[4].arg, 0, NULL);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.status, 0);
	assert_int_equal(a.n, 20);
	assert_int_equal(a.st[19], 0);
	proposed[5].cb(proposed[5].arg, 0, NULL);
	assert_int_equal(a2.calls, 1);

	/* split, then leadership lost after the first flush */
	struct answer a3 = {0};
	struct leases_budget b3 = {0};
	size_t before = n_proposed;
	assert_int_equal(keepalive(f, &b3, ids, 20, keepalive_cb, &a3), 0);
	timebase_advance(&f->tb, WINDOW_MS);
	assert_int_equal(n_proposed, before + 2);
	leases_on_ready(&f->leases, false);
	timebase_advance(&f->tb, 10 * WINDOW_MS);
	assert_int_equal(n_proposed, before + 2); /* nothing more */
	assert_int_equal(a3.calls, 0);
	proposed[before].cb(proposed[before].arg, 0, NULL);
	proposed[before + 1].cb(proposed[before + 1].arg, 0, NULL);
	assert_int_equal(a3.calls, 1);
	assert_int_equal(a3.status, RAFTLOCK_ENOTLEADER);
}

/* A RENEW that fails (leadership lost) answers every keepalive of the
 * window with that status; losing readiness answers a window not yet
 * proposed with ENOTLEADER. */
static void test_keepalive_failures(void **state)
{
	struct fx *f = *state;
	session(f, 3, APPLIED + 10000, 3000);
	struct leases_budget b = {0};
	struct answer a1 = {0}, a2 = {0};
	uint64_t id = 3;
	assert_int_equal(keepalive(f, &b, &id, 1, keepalive_cb, &a1), 0);
	timebase_advance(&f->tb, WINDOW_MS);
	proposed[n_proposed - 1].cb(proposed[n_proposed - 1].arg, RAFTLOCK_EUNKNOWN, NULL);
	assert_int_equal(a1.calls, 1);
	assert_int_equal(a1.status, RAFTLOCK_EUNKNOWN);
	assert_int_equal(keepalive(f, &b, &id, 1, keepalive_cb, &a2), 0);
	leases_on_ready(&f->leases, false);
	assert_int_equal(a2.calls, 1);
	assert_int_equal(a2.status, RAFTLOCK_ENOTLEADER);
	assert_int_equal(keepalive(f, &b, &id, 1, keepalive_cb, &a2), RAFTLOCK_EUNAVAILABLE);
	f->node.leader = false;
	assert_int_equal(keepalive(f, &b, &id, 1, keepalive_cb, &a2), RAFTLOCK_ENOTLEADER);
	assert_int_equal(a2.calls, 1); /* refused calls never call back */
}

/* A connection names at most keepalive_max_ids ids per second: the ids
 * past it get ELIMIT, a request with the budget spent is refused whole,
 * and the budget refills a second after the period began. */
static void test_keepalive_budget(void **state)
{
	struct fx *f = *state;
	f->cfg.keepalive_max_ids = 3;
	session(f, 1, APPLIED + 10000, 3000);
	session(f, 2, APPLIED + 10000, 3000);
	struct leases_budget b = {0};
	struct answer a = {0};
	uint64_t ids[] = {1, 2, 1, 2};
	assert_int_equal(keepalive(f, &b, ids, 4, keepalive_cb, &a), 0);
	assert_true(leases_budget_spent(&f->leases, &b));
	assert_int_equal(keepalive(f, &b, ids, 1, keepalive_cb, &a), RAFTLOCK_ELIMIT);
	timebase_advance(&f->tb, WINDOW_MS);
	proposed[n_proposed - 1].cb(proposed[n_proposed - 1].arg, 0, NULL);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.st[0], 0);
	assert_int_equal(a.st[2], 0);
	assert_int_equal(a.st[3], RAFTLOCK_ELIMIT);
	assert_int_equal(f->leases.stats.ids_refused, 2);
	timebase_advance(&f->tb, 1000 - WINDOW_MS - 1);
	assert_true(leases_budget_spent(&f->leases, &b));
	timebase_advance(&f->tb, 1);
	assert_false(leases_budget_spent(&f->leases, &b));
	assert_int_equal(keepalive(f, &b, ids, 2, keepalive_cb, &a), 0);
	leases_on_ready(&f->leases, false); /* answers it before `a` goes */
	assert_int_equal(a.calls, 2);
	assert_int_equal(a.status, RAFTLOCK_ENOTLEADER);
}

/* Rule 14: a keepalive id without its session's secret (wrong, missing,
 * or a session opened without one) is answered EPERM at once and never
 * replicated; the same check answers a mutation's secret. */
static void test_keepalive_secret(void **state)
{
	struct fx *f = *state;
	session(f, 1, APPLIED + 10000, 3000);
	session_opened(f, 2, APPLIED + 10000, 3000, 0); /* no secret */
	struct leases_budget b = {0};
	struct answer a = {0};
	uint64_t ids[] = {1, 1, 2, 1};
	ProtobufCBinaryData secrets[] = {OTHER, SECRET, SECRET}; /* the 4th: none */
	assert_int_equal(
		leases_keepalive(&f->leases, &b, ids, secrets, 3, 4, NULL, keepalive_cb, &a), 0);
	timebase_advance(&f->tb, WINDOW_MS);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_RENEW, 0), 1);
	struct proposed *p = &proposed[n_proposed - 1];
	assert_int_equal(p->n_ids, 1);
	assert_int_equal(p->ids[0], 1);
	p->cb(p->arg, 0, NULL);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.st[0], RAFTLOCK_EPERM);
	assert_int_equal(a.st[1], 0);
	assert_int_equal(a.st[2], RAFTLOCK_EPERM);
	assert_int_equal(a.st[3], RAFTLOCK_EPERM);
	assert_int_equal(f->leases.stats.ids_denied, 3);

	/* only refused ids: answered at once, nothing proposed */
	struct answer a2 = {0};
	uint64_t one = 1;
	size_t before = n_proposed;
	assert_int_equal(
		leases_keepalive(&f->leases, &b, &one, &OTHER, 1, 1, NULL, keepalive_cb, &a2), 0);
	assert_int_equal(a2.calls, 1);
	assert_int_equal(a2.st[0], RAFTLOCK_EPERM);
	timebase_advance(&f->tb, WINDOW_MS);
	assert_int_equal(n_proposed, before);

	assert_int_equal(leases_check_secret(&f->leases, 1, &SECRET), 0);
	assert_int_equal(leases_check_secret(&f->leases, 1, &OTHER), RAFTLOCK_EPERM);
	ProtobufCBinaryData empty = {0, NULL}, shorter = {RAFTLOCK_SECRET_MIN - 1, secret_bytes};
	assert_int_equal(leases_check_secret(&f->leases, 1, &empty), RAFTLOCK_EPERM);
	assert_int_equal(leases_check_secret(&f->leases, 1, &shorter), RAFTLOCK_EPERM);
	assert_int_equal(leases_check_secret(&f->leases, 2, &SECRET), RAFTLOCK_EPERM);
	assert_int_equal(leases_check_secret(&f->leases, 77, &SECRET), RAFTLOCK_ESESSION);
	/* a renewal's event keeps the digest the open gave */
	struct fsm_event renew = {
		.type = FSM_EV_SESSION, .session = 1, .deadline = APPLIED + 20000, .ttl_ms = 3000};
	leases_on_event(&f->leases, &renew);
	assert_int_equal(leases_check_secret(&f->leases, 1, &SECRET), 0);
}

/* While a deadline is pending the leader writes its clock into the log at
 * least every 250 ms (an empty RENEW), so a leader that dies leaves at most
 * that much cluster time unwritten; with nothing pending it writes none. */
static void test_clock_entries(void **state)
{
	struct fx *f = *state;
	timebase_advance(&f->tb, 2000);
	assert_int_equal(clock_entries(), 0);
	session(f, 5, APPLIED + 60000, 60000);
	uint64_t from = cluster_clock_now(&f->node.clock);
	timebase_advance(&f->tb, 1000);
	assert_int_equal(clock_entries(), 4);
	for (size_t i = 0; i < n_proposed; i++) {
		uint64_t gap = proposed[i].stamp - (i ? proposed[i - 1].stamp : from);
		assert_true(gap <= 250);
	}
}

/* Without a ready leader cluster time stands still: nothing expires however
 * long the pause, and a new leadership counts a deadline from where the log
 * left the clock, not from the real time that passed. */
static void test_time_stands_still_without_leader(void **state)
{
	struct fx *f = *state;
	session(f, 6, APPLIED + 500, 500);
	timebase_advance(&f->tb, 200);
	f->node.ready = false;
	leases_on_ready(&f->leases, false);
	cluster_clock_stop(&f->node.clock);
	uint64_t stood = cluster_clock_now(&f->node.clock);
	assert_int_equal(stood, APPLIED + 200);
	timebase_advance(&f->tb, 60000);
	assert_int_equal(cluster_clock_now(&f->node.clock), stood);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_EXPIRE_SESSION, 0), 0);
	/* the next leader continues from the highest stamp applied */
	f->node.ready = true;
	cluster_clock_start(&f->node.clock, stood);
	leases_on_ready(&f->leases, true);
	timebase_advance(&f->tb, 250);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_EXPIRE_SESSION, 6), 0);
	timebase_advance(&f->tb, 100);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_EXPIRE_SESSION, 6), 1);
}

/* Lock-delays and server-side waits end by proposal when they are due. */
static void test_timers_proposed(void **state)
{
	struct fx *f = *state;
	struct fsm_event delay = {
		.type = FSM_EV_LOCK_DELAY, .name = "a", .deadline = APPLIED + 300};
	struct fsm_event wait = {.type = FSM_EV_WAIT_DEADLINE,
				 .name = "b",
				 .session = 2,
				 .seq = 9,
				 .deadline = APPLIED + 100};
	leases_on_event(&f->leases, &delay);
	leases_on_event(&f->leases, &wait);
	timebase_advance(&f->tb, 150);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_WAIT_EXPIRE, 0), 1);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_LOCK_DELAY_END, 0), 0);
	/* granted meanwhile: the wait's timer is dropped */
	struct fsm_event push = {.type = FSM_EV_PUSH, .session = 2, .seq = 9};
	leases_on_event(&f->leases, &push);
	timebase_advance(&f->tb, 2000);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_WAIT_EXPIRE, 0), 1);
	assert_true(count(RAFTLOCK__COMMAND__OP_LOCK_DELAY_END, 0) >= 1);
}

/* A revocation deadline (level 3) comes due while the cluster records
 * level 2, a voter still on an older build: REVOKE_DUE is held back, as
 * an older node could not apply it, while the other timers go on; once
 * level 3 is recorded it is proposed at the next retry. */
static void test_revoke_due_held_below_level_3(void **state)
{
	struct fx *f = *state;
	cluster_level = 2;
	struct fsm_event revoke = {.type = FSM_EV_REVOKE_DEADLINE,
				   .name = "r",
				   .token = 77,
				   .deadline = APPLIED + 100};
	struct fsm_event delay = {
		.type = FSM_EV_LOCK_DELAY, .name = "d", .deadline = APPLIED + 100};
	leases_on_event(&f->leases, &revoke);
	leases_on_event(&f->leases, &delay);
	timebase_advance(&f->tb, 3000);
	assert_int_equal(count(RAFTLOCK__COMMAND__OP_REVOKE_DUE, 0), 0);
	assert_true(count(RAFTLOCK__COMMAND__OP_LOCK_DELAY_END, 0) >= 1);

	cluster_level = 3;
	timebase_advance(&f->tb, 1100);
	assert_true(count(RAFTLOCK__COMMAND__OP_REVOKE_DUE, 0) >= 1);
}

/* After a start or a restore the timers come back from the store, of the
 * locks that have one and only those (leases_rebuild() decodes a lock
 * only when record_peek.h says it may hold a timer): a lock-delay, a
 * timed waiter and a revocation among a thousand plain held locks. */
static void test_rebuild_finds_every_timer(void **state)
{
	struct fx *f = *state;
	MDB_txn *txn = store_begin(&f->node.store, true);
	Raftlock__Holder h = RAFTLOCK__HOLDER__INIT, *hs[1] = {&h};
	Raftlock__Waiter w = RAFTLOCK__WAITER__INIT, *ws[1] = {&w};
	for (int i = 0; i < 1000; i++) {
		Raftlock__LockRecord rec = RAFTLOCK__LOCK_RECORD__INIT;
		char name[32];
		snprintf(name, sizeof name, "plain/%04d", i);
		rec.name = name;
		rec.kind = RAFTLOCK__LOCK_KIND__MUTEX;
		h.session = 1;
		h.token = (uint64_t)i + 1;
		h.revoke_at = 0;
		rec.n_holders = 1;
		rec.holders = hs;
		if (i == 100) {
			rec.name = "timed/delay";
			rec.n_holders = 0;
			rec.delay_until = APPLIED + 300;
		} else if (i == 500) {
			rec.name = "timed/wait";
			w.session = 2;
			w.seq = 9;
			w.deadline = APPLIED + 100;
			rec.n_waiters = 1;
			rec.waiters = ws;
		} else if (i == 900) {
			rec.name = "timed/revoke";
			h.revoke_at = APPLIED + 200;
		}
		store_put_lock(&f->node.store, txn, &rec);
	}
	store_commit(txn);
	leases_rebuild(&f->leases);
	assert_int_equal(timers_count(&f->leases.timers), 3);
	timebase_advance(&f->tb, 3000);
	assert_true(count(RAFTLOCK__COMMAND__OP_WAIT_EXPIRE, 0) >= 1);
	assert_true(count(RAFTLOCK__COMMAND__OP_LOCK_DELAY_END, 0) >= 1);
	assert_true(count(RAFTLOCK__COMMAND__OP_REVOKE_DUE, 0) >= 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_expiry_at_deadline, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keepalive_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keepalive_unknown_ids, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keepalive_failures, setup, teardown),
		cmocka_unit_test_setup_teardown(test_large_window_split, setup, teardown),
		cmocka_unit_test_setup_teardown(test_window_marks_wrap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keepalive_budget, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keepalive_secret, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clock_entries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_time_stands_still_without_leader, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_timers_proposed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revoke_due_held_below_level_3, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rebuild_finds_every_timer, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
