/* leases.c: see leases.h. */
#include "grow.h"
#include "leases.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "raftlock.h"

#define EXPIRY_TICK_MS 50
#define REPROPOSE_MS 1000 /* a proposal that did not take effect is retried */
/* A session's slot keeps its TTL in the low bits of b and the cluster
 * time of its EXPIRE proposal (0: none) above them. */
#define TTL_BITS 20
#define TTL_MASK ((UINT64_C(1) << TTL_BITS) - 1)
_Static_assert(RAFTLOCK_TTL_MAX_MS <= TTL_MASK, "a TTL that does not fit");

struct keepalive {
	leases_keepalive_cb cb;
	void *arg;
	uint64_t *ids;
	size_t n;
	struct keepalive *next;
};

struct renew_batch {
	struct leases *leases;
	struct keepalive *head;
	uint64_t *ids; /* of every keepalive, repeats included */
	size_t n_ids, cap_ids;
};

void leases_init(struct leases *l, uv_loop_t *loop, struct node *node, unsigned window_ms)
{
	memset(l, 0, sizeof *l);
	l->loop = loop;
	l->node = node;
	l->window_ms = window_ms;
	idmap_init(&l->sessions);
	uv_timer_init(loop, &l->renew_timer);
	uv_timer_init(loop, &l->expiry_timer);
	l->renew_timer.data = l;
	l->expiry_timer.data = l;
	timers_init(&l->timers);
}

size_t leases_session_count(const struct leases *l)
{
	return l->sessions.len;
}

static void add_timer(struct leases *l, enum timer_kind kind, const char *name, uint64_t session,
		      uint64_t seq, uint64_t deadline)
{
	if (timers_set(&l->timers, kind, name, session, seq, deadline) != 0)
		log_fatal("out of memory");
}

static void set_session(struct leases *l, uint64_t id, uint64_t deadline, uint32_t ttl)
{
	struct idmap_slot *s = idmap_put(&l->sessions, id);
	if (s == NULL)
		log_fatal("out of memory");
	s->a = deadline;
	s->b = ttl; /* a moved deadline forgets an earlier EXPIRE proposal */
	if (deadline < l->expiry_floor)
		l->expiry_floor = deadline;
}

static void rebuild_session(void *arg, uint64_t id, uint64_t deadline, uint32_t ttl_ms)
{
	set_session(arg, id, deadline, ttl_ms);
}

static int rebuild_lock(void *arg, Raftlock__LockRecord *rec)
{
	struct leases *l = arg;
	if (rec->delay_until != 0)
		add_timer(l, TIMER_LOCK_DELAY, rec->name, 0, 0, rec->delay_until);
	for (size_t i = 0; i < rec->n_waiters; i++)
		if (rec->waiters[i]->deadline != 0)
			add_timer(l, TIMER_WAIT, rec->name, rec->waiters[i]->session,
				  rec->waiters[i]->seq, rec->waiters[i]->deadline);
	raftlock__lock_record__free_unpacked(rec, NULL);
	return 0;
}

void leases_rebuild(struct leases *l)
{
	idmap_clear(&l->sessions);
	l->expiry_floor = UINT64_MAX;
	timers_clear(&l->timers);
	struct store *st = &l->node->store;
	MDB_txn *txn = store_begin(st, false);
	store_scan_leases(st, txn, rebuild_session, l);
	store_scan_locks(st, txn, "", NULL, rebuild_lock, l);
	store_abort(txn);
}

void leases_on_event(struct leases *l, const struct fsm_event *ev)
{
	switch (ev->type) {
	case FSM_EV_SESSION: set_session(l, ev->session, ev->deadline, ev->ttl_ms); break;
	case FSM_EV_SESSION_GONE: idmap_del(&l->sessions, ev->session); break;
	case FSM_EV_LOCK_DELAY:
		timers_drop_delay(&l->timers, ev->name);
		if (ev->deadline != 0)
			add_timer(l, TIMER_LOCK_DELAY, ev->name, 0, 0, ev->deadline);
		break;
	case FSM_EV_PUSH: timers_drop_wait(&l->timers, ev->session, ev->seq); break;
	case FSM_EV_WAIT_DEADLINE:
		add_timer(l, TIMER_WAIT, ev->name, ev->session, ev->seq, ev->deadline);
		break;
	default: break;
	}
}

/* ------------------------------------------------------------- expiry -- */

static bool due(uint64_t now, uint64_t deadline, uint64_t *proposed_at)
{
	if (now < deadline)
		return false;
	if (*proposed_at != 0 && now - *proposed_at < REPROPOSE_MS)
		return false;
	*proposed_at = now;
	return true;
}

/* Proposes the expiry of each session past its deadline. The walk over
 * every session runs only once cluster time reaches the floor (the lowest
 * deadline or re-proposal time it can have missed), not every tick. */
static void expire_sessions(struct leases *l, uint64_t now)
{
	if (now < l->expiry_floor)
		return;
	uint64_t floor = UINT64_MAX;
	for (size_t i = 0; i < l->sessions.cap; i++) {
		struct idmap_slot *s = &l->sessions.slots[i];
		if (s->key == 0)
			continue;
		uint64_t at = s->b >> TTL_BITS;
		if (!due(now, s->a, &at)) {
			uint64_t next = now < s->a ? s->a : at + REPROPOSE_MS;
			if (next < floor)
				floor = next;
			continue;
		}
		if (now + REPROPOSE_MS < floor)
			floor = now + REPROPOSE_MS;
		s->b = (s->b & TTL_MASK) | at << TTL_BITS;
		Raftlock__ExpireSession op = RAFTLOCK__EXPIRE_SESSION__INIT;
		op.session = s->key;
		Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
		cmd.op_case = RAFTLOCK__COMMAND__OP_EXPIRE_SESSION;
		cmd.expire_session = &op;
		if (node_propose_quiet(l->node, &cmd) != 0)
			return; /* the floor stays: the next tick walks again */
		log_debug("proposed expiry of session %llu", (unsigned long long)s->key);
	}
	l->expiry_floor = floor;
}

/* Proposes the end of each lock-delay and wait that is due, soonest
 * first: a heap pop each, never a walk over every timer. */
static void expire_timers(struct leases *l, uint64_t now)
{
	struct timer *t;
	while ((t = timers_due(&l->timers, now)) != NULL) {
		Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
		Raftlock__LockDelayEnd delay = RAFTLOCK__LOCK_DELAY_END__INIT;
		Raftlock__WaitExpire wait = RAFTLOCK__WAIT_EXPIRE__INIT;
		if (t->kind == TIMER_LOCK_DELAY) {
			delay.name = t->name;
			cmd.op_case = RAFTLOCK__COMMAND__OP_LOCK_DELAY_END;
			cmd.lock_delay_end = &delay;
		} else {
			wait.name = t->name;
			wait.session = t->session;
			wait.acquire_seq = t->seq;
			cmd.op_case = RAFTLOCK__COMMAND__OP_WAIT_EXPIRE;
			cmd.wait_expire = &wait;
		}
		if (node_propose_quiet(l->node, &cmd) != 0)
			return;
		timers_postpone(&l->timers, t, now + REPROPOSE_MS);
	}
}

static void expiry_cb(uv_timer_t *h)
{
	struct leases *l = h->data;
	if (!l->ready)
		return;
	uint64_t now = node_cluster_now(l->node);
	expire_sessions(l, now);
	expire_timers(l, now);
}

/* ----------------------------------------------------------- keepalive -- */

static void finish_batch(struct renew_batch *b, int status)
{
	struct leases *l = b->leases;
	while (b->head != NULL) {
		struct keepalive *k = b->head;
		b->head = k->next;
		if (status != 0) {
			k->cb(k->arg, status, NULL, NULL, 0);
		} else {
			int32_t *st = calloc(k->n ? k->n : 1, sizeof *st);
			uint32_t *ttl = calloc(k->n ? k->n : 1, sizeof *ttl);
			if (st == NULL || ttl == NULL)
				log_fatal("out of memory");
			for (size_t i = 0; i < k->n; i++) {
				struct idmap_slot *s = idmap_get(&l->sessions, k->ids[i]);
				st[i] = s ? 0 : RAFTLOCK_ESESSION;
				ttl[i] = s ? (uint32_t)(s->b & TTL_MASK) : 0;
			}
			k->cb(k->arg, 0, st, ttl, k->n);
			free(st);
			free(ttl);
		}
		free(k->ids);
		free(k);
	}
	free(b->ids);
	free(b);
}

/* The RENEW entry applied: every session that is still known was renewed
 * at that entry's cluster time (rule 3: acknowledge only what committed). */
static void renew_done(void *arg, int status, const Raftlock__Result *res)
{
	(void)res;
	finish_batch(arg, status);
}

static int id_order(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Proposes one RENEW naming every session of the window once, in id
 * order: the apply on every node then walks the lease table page by page. */
static void renew_flush(uv_timer_t *h)
{
	struct leases *l = h->data;
	struct renew_batch *b = l->pending;
	if (b == NULL)
		return;
	l->pending = NULL;
	qsort(b->ids, b->n_ids, sizeof *b->ids, id_order);
	size_t n = 0;
	for (size_t i = 0; i < b->n_ids; i++)
		if (b->ids[i] != 0 && (n == 0 || b->ids[i] != b->ids[n - 1]))
			b->ids[n++] = b->ids[i];
	Raftlock__Renew op = RAFTLOCK__RENEW__INIT;
	op.sessions = b->ids;
	op.n_sessions = n;
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_RENEW;
	cmd.renew = &op;
	int rv = node_propose(l->node, &cmd, renew_done, b);
	if (rv != 0)
		finish_batch(b, rv);
}

/* Room for n more ids in the window's batch (made if there is none). */
static int renew_reserve(struct leases *l, size_t n)
{
	struct renew_batch *b = l->pending;
	if (b == NULL) {
		b = calloc(1, sizeof *b);
		if (b == NULL)
			return RAFTLOCK_ENOMEM;
		b->leases = l;
		l->pending = b;
		uv_timer_start(&l->renew_timer, renew_flush, l->window_ms, 0);
	}
	return grow(&b->ids, &b->cap_ids, b->n_ids + n, 1024, sizeof *b->ids);
}

int leases_keepalive(struct leases *l, const uint64_t *ids, size_t n, leases_keepalive_cb cb,
		     void *arg)
{
	if (!l->node->leader)
		return RAFTLOCK_ENOTLEADER;
	if (!l->ready)
		return RAFTLOCK_EUNAVAILABLE;
	struct keepalive *k = calloc(1, sizeof *k);
	uint64_t *copy = malloc((n ? n : 1) * sizeof *copy);
	if (k == NULL || copy == NULL || renew_reserve(l, n) != 0) {
		free(k);
		free(copy);
		return RAFTLOCK_ENOMEM;
	}
	*k = (struct keepalive){cb, arg, copy, n, NULL};
	struct renew_batch *b = l->pending;
	k->next = b->head;
	b->head = k;
	if (n > 0) {
		memcpy(copy, ids, n * sizeof *copy);
		memcpy(b->ids + b->n_ids, ids, n * sizeof *ids);
		b->n_ids += n;
	}
	return 0;
}

void leases_on_ready(struct leases *l, bool ready)
{
	l->ready = ready;
	if (ready) {
		/* Reset proposal marks: this leader has proposed nothing yet. */
		for (size_t i = 0; i < l->sessions.cap; i++)
			l->sessions.slots[i].b &= TTL_MASK;
		timers_reset(&l->timers);
		l->expiry_floor = 0;
		uv_timer_start(&l->expiry_timer, expiry_cb, EXPIRY_TICK_MS, EXPIRY_TICK_MS);
	} else {
		uv_timer_stop(&l->expiry_timer);
		uv_timer_stop(&l->renew_timer);
		if (l->pending != NULL) {
			struct renew_batch *b = l->pending;
			l->pending = NULL;
			finish_batch(b, RAFTLOCK_ENOTLEADER);
		}
	}
}

void leases_close(struct leases *l)
{
	leases_on_ready(l, false);
	uv_close((uv_handle_t *)&l->renew_timer, NULL);
	uv_close((uv_handle_t *)&l->expiry_timer, NULL);
	idmap_close(&l->sessions);
	timers_close(&l->timers);
}
