/* leases.c: see leases.h. */
#include "grow.h"
#include "leases.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "raftlock.h"
#include "record_peek.h"
#include "secret.h"

#define EXPIRY_TICK_MS 50
/* While any deadline is pending, the leader writes its clock into the log
 * at least this often (an empty RENEW). A new leader's clock continues
 * from the last entry, so a leader that dies leaves at most this much
 * cluster time unwritten, beside the time without a ready leader: the
 * bound of GUARANTEES rule 11. */
#define CLOCK_ENTRY_MS 250
#define REPROPOSE_MS 1000 /* a proposal that did not take effect is retried */
enum digest_state {
	DIGEST_UNREAD, /* not read from the store yet (rebuilt from the lease table) */
	DIGEST_KNOWN,  /* in digest */
	DIGEST_NONE    /* a session opened without a secret: nothing acts on it */
};

/* What the leader knows of one live session (the value of l->sessions).
 * The secret's digest is here so that checking a keepalive or a mutation
 * costs no store read (rule 14); it never changes once the session is
 * opened. */
struct lease {
	uint64_t deadline;        /* cluster ms */
	uint64_t expire_proposed; /* cluster ms of this leader's EXPIRE proposal; 0: none */
	uint32_t window;          /* the renew window that last named it (window_gen) */
	uint32_t ttl_ms;
	uint32_t bind_grace_ms; /* OpenSession.bind_grace_ms, known with the digest */
	uint8_t digest_state;   /* enum digest_state */
	uint8_t digest[SECRET_DIGEST_LEN];
};
/* Every node holds one per session (72 bytes a slot with its key; 1.6
 * million slots at 1,000,000 sessions): keep it at 64. */
_Static_assert(sizeof(struct lease) <= 64, "struct lease grew");

/* Sessions one RENEW command names at most: a window's renewals are split
 * into commands of this size, so no entry grows past the node's batch
 * limit by more than one of them (about 160 KiB with 10-byte ids). */
#ifndef RENEW_MAX_IDS /* the unit test sets smaller caps */
#define RENEW_MAX_IDS 16384
#endif
/* Ids one window's flush proposes at most; the rest go out in the windows
 * that follow. A round of keepalives from every client of a large cluster
 * lands in one window, and proposed at once it commits at once: every node
 * then applies all of it in one turn of its loop, which libraft 0.22.1
 * does not split (1,000,000 ids: 0.5-1 s on a follower, with both
 * followers stalled together, past the leader's election timeout). Four
 * commands a window still renew 6.5 million ids a second. */
#ifndef RENEW_FLUSH_MAX_IDS
#define RENEW_FLUSH_MAX_IDS (4 * RENEW_MAX_IDS)
#endif
#define KA_BUDGET_MS 1000 /* the period of a connection's keepalive budget */
#define KA_RENEW 1        /* status placeholder: known once the RENEW applied */

struct keepalive_request {
	leases_keepalive_cb cb;
	void *arg;
	uint64_t *ids;
	int32_t *st; /* per id: a final status, or KA_RENEW */
	size_t n;
	struct keepalive_request *next;
};

struct renew_batch {
	struct leases *leases;
	struct keepalive_request *head;
	uint64_t *ids; /* each session once */
	size_t n_ids, cap_ids;
	uint32_t gen;         /* the window's mark in the session index */
	unsigned outstanding; /* RENEW commands not applied yet, + 1 while flushing */
	int status;           /* first failure of those commands */
	size_t flushed;       /* ids proposed so far (renew_flush) */
};

void leases_init(struct leases *l, struct timebase *clock, struct node *node, unsigned window_ms)
{
	memset(l, 0, sizeof *l);
	l->clock = clock;
	l->node = node;
	l->window_ms = window_ms;
	idmap_init(&l->sessions, sizeof(struct lease));
	timebase_timer_init(clock, &l->renew_timer, l);
	timebase_timer_init(clock, &l->expiry_timer, l);
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

static struct lease *set_session(struct leases *l, uint64_t id, uint64_t deadline, uint32_t ttl)
{
	struct lease *s = idmap_put(&l->sessions, id);
	if (s == NULL)
		log_fatal("out of memory");
	s->deadline = deadline;
	s->ttl_ms = ttl;
	s->expire_proposed = 0; /* a moved deadline forgets an earlier EXPIRE proposal */
	if (deadline < l->expiry_floor)
		l->expiry_floor = deadline;
	return s;
}

/* Records the digest an open event carries (ev->digest_len 0: none). */
static void set_digest(struct lease *s, const uint8_t *digest, size_t len)
{
	if (len == SECRET_DIGEST_LEN) {
		memcpy(s->digest, digest, SECRET_DIGEST_LEN);
		s->digest_state = DIGEST_KNOWN;
	} else {
		s->digest_state = DIGEST_NONE;
	}
}

/* The digest of a lease rebuilt from the store, read once; *txn is a
 * read transaction the caller aborts (begun here if NULL). */
static void load_digest(struct leases *l, uint64_t id, struct lease *s, MDB_txn **txn)
{
	struct store *st = &l->node->store;
	if (*txn == NULL)
		*txn = store_begin(st, false);
	Raftlock__SessionRecord *rec = store_get_session(st, *txn, id);
	if (rec == NULL) {
		s->digest_state = DIGEST_NONE; /* cannot happen: a lease has a record */
		return;
	}
	set_digest(s, rec->secret_digest.data, rec->secret_digest.len);
	s->bind_grace_ms = rec->bind_grace_ms;
	raftlock__session_record__free_unpacked(rec, NULL);
}

/* Whether secret is the one of session s (rule 14). */
static bool lease_secret_matches(struct leases *l, uint64_t id, struct lease *s,
				 const ProtobufCBinaryData *secret, MDB_txn **txn)
{
	if (s->digest_state == DIGEST_UNREAD)
		load_digest(l, id, s, txn);
	return s->digest_state == DIGEST_KNOWN &&
	       secret_matches(secret, s->digest, SECRET_DIGEST_LEN);
}

/* The answer for id, not in this node's applied state (leases.h),
 * reading the applied next_session in *txn (begun if NULL) into *next
 * (0: not read yet). */
static int unknown_status(struct leases *l, uint64_t id, MDB_txn **txn, uint64_t *next)
{
	if (*next == 0) {
		struct store *st = &l->node->store;
		if (*txn == NULL)
			*txn = store_begin(st, false);
		Raftlock__Meta *m = store_get_meta(st, *txn);
		*next = m->next_session ? m->next_session : 1;
		raftlock__meta__free_unpacked(m, NULL);
	}
	return id >= *next ? RAFTLOCK_EUNAVAILABLE : RAFTLOCK_ESESSION;
}

int leases_unknown_status(struct leases *l, uint64_t id)
{
	MDB_txn *txn = NULL;
	uint64_t next = 0;
	int status = unknown_status(l, id, &txn, &next);
	store_abort(txn);
	return status;
}

uint64_t leases_deadline(const struct leases *l, uint64_t id)
{
	const struct lease *s = idmap_get(&l->sessions, id);
	return s != NULL ? s->deadline : 0;
}

uint32_t leases_bind_grace(struct leases *l, uint64_t id)
{
	struct lease *s = idmap_get(&l->sessions, id);
	if (s == NULL)
		return 0;
	if (s->digest_state == DIGEST_UNREAD) {
		MDB_txn *txn = NULL;
		load_digest(l, id, s, &txn);
		if (txn != NULL)
			store_abort(txn);
	}
	return s->bind_grace_ms;
}

int leases_check_secret(struct leases *l, uint64_t id, const ProtobufCBinaryData *secret)
{
	struct lease *s = idmap_get(&l->sessions, id);
	if (s == NULL)
		return RAFTLOCK_ESESSION;
	MDB_txn *txn = NULL;
	bool ok = lease_secret_matches(l, id, s, secret, &txn);
	if (txn != NULL)
		store_abort(txn);
	if (ok)
		return 0;
	l->stats.ids_denied++;
	return RAFTLOCK_EPERM;
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
	for (size_t i = 0; i < rec->n_holders; i++)
		if (rec->holders[i]->revoke_at != 0)
			add_timer(l, TIMER_REVOKE, rec->name, rec->holders[i]->token, 0,
				  rec->holders[i]->revoke_at);
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
	/* Only locks with a timer are decoded: at ten million held locks
	 * decoding them all took seconds of every start and restore. */
	store_scan_locks_where(st, txn, record_peek_lock_timed, rebuild_lock, l);
	store_abort(txn);
}

void leases_on_event(struct leases *l, const struct fsm_event *ev)
{
	switch (ev->type) {
	case FSM_EV_SESSION: {
		struct lease *s = set_session(l, ev->session, ev->deadline, ev->ttl_ms);
		if (ev->opened) {
			set_digest(s, ev->digest, ev->digest_len);
			s->bind_grace_ms = ev->bind_grace_ms;
		}
		break;
	}
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
	case FSM_EV_REVOKE_DEADLINE:
		add_timer(l, TIMER_REVOKE, ev->name, ev->token, 0, ev->deadline);
		break;
	case FSM_EV_REVOKED: timers_drop_revoke(&l->timers, ev->token); break;
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
	struct lease *s;
	uint64_t id;
	for (size_t pos = 0; (s = idmap_next(&l->sessions, &pos, &id)) != NULL;) {
		uint64_t at = s->expire_proposed;
		if (!due(now, s->deadline, &at)) {
			uint64_t next = now < s->deadline ? s->deadline : at + REPROPOSE_MS;
			if (next < floor)
				floor = next;
			continue;
		}
		if (now + REPROPOSE_MS < floor)
			floor = now + REPROPOSE_MS;
		s->expire_proposed = at;
		Raftlock__ExpireSession op = RAFTLOCK__EXPIRE_SESSION__INIT;
		op.session = id;
		Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
		cmd.op_case = RAFTLOCK__COMMAND__OP_EXPIRE_SESSION;
		cmd.expire_session = &op;
		if (node_propose_quiet(l->node, &cmd) != 0)
			return; /* the floor stays: the next tick walks again */
		log_debug("proposed expiry of session %llu", (unsigned long long)id);
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
		Raftlock__RevokeDue revoke = RAFTLOCK__REVOKE_DUE__INIT;
		if (t->kind == TIMER_REVOKE) {
			revoke.name = t->name;
			revoke.token = t->session;
			cmd.op_case = RAFTLOCK__COMMAND__OP_REVOKE_DUE;
			cmd.revoke_due = &revoke;
		} else if (t->kind == TIMER_LOCK_DELAY) {
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
		/* A revocation deadline exists only if a level-3 acquire was
		 * applied; still, nothing above the recorded level is proposed. */
		if (node_level_admits(l->node, &cmd) && node_propose_quiet(l->node, &cmd) != 0)
			return;
		timers_postpone(&l->timers, t, now + REPROPOSE_MS);
	}
}

/* Puts the cluster time into the log when no entry did for CLOCK_ENTRY_MS
 * while a deadline is pending (see CLOCK_ENTRY_MS). */
static void write_clock(struct leases *l, uint64_t now)
{
	if (l->sessions.len == 0 && timers_count(&l->timers) == 0)
		return;
	if (now < l->node->clock.last_stamp + CLOCK_ENTRY_MS || l->node->batch_n != 0)
		return;
	Raftlock__Renew op = RAFTLOCK__RENEW__INIT; /* renews nothing */
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_RENEW;
	cmd.renew = &op;
	(void)node_propose_quiet(l->node, &cmd); /* else the next tick tries */
}

static void expiry_cb(struct timebase_timer *h)
{
	struct leases *l = h->data;
	if (!l->ready)
		return;
	uint64_t now = node_cluster_now(l->node);
	expire_sessions(l, now);
	expire_timers(l, now);
	write_clock(l, now);
}

/* ----------------------------------------------------------- keepalive -- */

/* Answers one keepalive: each id that waited for the RENEW is 0 with its
 * TTL if the session is still known (it was renewed at that entry's cluster
 * time: rule 3, acknowledge only what committed), ESESSION if it ended. */
static void answer(struct leases *l, struct keepalive_request *k, int status)
{
	if (status != 0) {
		k->cb(k->arg, status, NULL, NULL, 0);
	} else {
		uint32_t *ttl = calloc(k->n ? k->n : 1, sizeof *ttl);
		if (ttl == NULL)
			log_fatal("out of memory");
		for (size_t i = 0; i < k->n; i++) {
			if (k->st[i] != KA_RENEW)
				continue;
			const struct lease *s = idmap_get(&l->sessions, k->ids[i]);
			k->st[i] = s ? 0 : RAFTLOCK_ESESSION;
			ttl[i] = s ? s->ttl_ms : 0;
		}
		k->cb(k->arg, 0, k->st, ttl, k->n);
		free(ttl);
	}
	free(k->ids);
	free(k->st);
	free(k);
}

static void finish_batch(struct renew_batch *b)
{
	while (b->head != NULL) {
		struct keepalive_request *k = b->head;
		b->head = k->next;
		answer(b->leases, k, b->status);
	}
	free(b->ids);
	free(b);
}

static void renew_release(struct renew_batch *b, int status)
{
	if (b->status == 0)
		b->status = status;
	if (--b->outstanding == 0)
		finish_batch(b);
}

/* One RENEW command of the window applied (or failed). */
static void renew_done(void *arg, int status, const Raftlock__Result *res)
{
	(void)res;
	renew_release(arg, status);
}

static int id_order(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Proposes the window's renewals in id order (the apply on every node then
 * walks the lease table page by page), in commands of RENEW_MAX_IDS, at
 * most RENEW_FLUSH_MAX_IDS a window: a batch with more stays l->flushing
 * and goes on in the next window, before any newer batch. The keepalives
 * are answered once all of a batch's commands applied. */
static void renew_flush(struct timebase_timer *h)
{
	struct leases *l = h->data;
	struct renew_batch *b = l->flushing;
	if (b == NULL) {
		b = l->pending;
		if (b == NULL)
			return;
		l->pending = NULL;
		qsort(b->ids, b->n_ids, sizeof *b->ids, id_order);
		b->outstanding = 1;
		b->flushed = 0;
	}
	size_t end = b->n_ids - b->flushed > RENEW_FLUSH_MAX_IDS ? b->flushed + RENEW_FLUSH_MAX_IDS
								 : b->n_ids;
	for (size_t at = b->flushed; at < end; at += RENEW_MAX_IDS) {
		size_t n = end - at < RENEW_MAX_IDS ? end - at : RENEW_MAX_IDS;
		Raftlock__Renew op = RAFTLOCK__RENEW__INIT;
		op.sessions = b->ids + at;
		op.n_sessions = n;
		Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
		cmd.op_case = RAFTLOCK__COMMAND__OP_RENEW;
		cmd.renew = &op;
		b->outstanding++;
		int rv = node_propose(l->node, &cmd, renew_done, b);
		if (rv != 0) {
			b->outstanding--;
			b->status = rv;
			end = b->n_ids; /* the rest is not proposed either */
			break;
		}
		l->stats.renew_commands++;
		l->stats.renew_ids += n;
		if (n > l->stats.renew_ids_max)
			l->stats.renew_ids_max = n;
	}
	b->flushed = end;
	if (b->flushed < b->n_ids) {
		l->flushing = b;
		l->stats.renew_windows_split++;
		timebase_timer_start(&l->renew_timer, renew_flush, l->window_ms, 0);
		return;
	}
	l->flushing = NULL;
	if (l->pending != NULL) /* came while this one was going out */
		timebase_timer_start(&l->renew_timer, renew_flush, l->window_ms, 0);
	renew_release(b, 0);
}

/* The mark of a new window, never 0 (a new lease's) nor one that a lease
 * still carries: when the 32-bit count wraps (a window every millisecond
 * for 49 days), every mark is cleared first. */
static uint32_t next_window_gen(struct leases *l)
{
	if (l->window_gen == UINT32_MAX) {
		struct lease *s;
		for (size_t pos = 0; (s = idmap_next(&l->sessions, &pos, NULL)) != NULL;)
			s->window = 0;
		l->window_gen = 0;
	}
	return ++l->window_gen;
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
		b->gen = next_window_gen(l);
		l->pending = b;
		timebase_timer_start(&l->renew_timer, renew_flush, l->window_ms, 0);
	}
	return grow(&b->ids, &b->cap_ids, b->n_ids + n, 1024, sizeof *b->ids);
}

/* What is left of the connection's budget in the current period. */
static size_t budget_left(const struct leases *l, struct leases_budget *budget, uint64_t now)
{
	size_t limit = l->node->cfg->keepalive_max_ids;
	if (now - budget->start >= KA_BUDGET_MS) {
		budget->start = now;
		budget->used = 0;
	}
	return budget->used < limit ? limit - budget->used : 0;
}

bool leases_budget_spent(const struct leases *l, const struct leases_budget *budget)
{
	/* A query: the next period begins with the next keepalive, not here. */
	return timebase_now(l->clock) - budget->start < KA_BUDGET_MS &&
	       budget->used >= l->node->cfg->keepalive_max_ids;
}

int leases_keepalive(struct leases *l, struct leases_budget *budget, const uint64_t *ids,
		     const ProtobufCBinaryData *secrets, size_t n_secrets, size_t n,
		     leases_accepted_cb accepted, leases_keepalive_cb cb, void *arg)
{
	if (!l->node->leader)
		return RAFTLOCK_ENOTLEADER;
	if (!l->ready)
		return RAFTLOCK_EUNAVAILABLE;
	size_t take = budget_left(l, budget, timebase_now(l->clock));
	if (n > 0 && take == 0) {
		l->stats.ids_refused += n;
		return RAFTLOCK_ELIMIT;
	}
	if (take > n)
		take = n;
	struct keepalive_request *k = calloc(1, sizeof *k);
	uint64_t *copy = malloc((n ? n : 1) * sizeof *copy);
	int32_t *st = malloc((n ? n : 1) * sizeof *st);
	if (k == NULL || copy == NULL || st == NULL || (take > 0 && renew_reserve(l, take) != 0)) {
		free(k);
		free(copy);
		free(st);
		return RAFTLOCK_ENOMEM;
	}
	budget->used += take;
	*k = (struct keepalive_request){cb, arg, copy, st, n, NULL};
	memcpy(copy, ids, n * sizeof *copy);
	/* One index lookup per id: an id this leader does not know is
	 * answered now and never replicated; a known one joins the window's
	 * batch once, however often it is named. */
	struct renew_batch *b = l->pending;
	bool waits = false;
	MDB_txn *txn = NULL;
	uint64_t next = 0; /* the applied next_session, read at the first unknown id */
	static const ProtobufCBinaryData none = {0, NULL};
	for (size_t i = 0; i < take; i++) {
		struct lease *s = idmap_get(&l->sessions, ids[i]);
		if (s == NULL) {
			st[i] = unknown_status(l, ids[i], &txn, &next);
			l->stats.ids_unknown++;
			continue;
		}
		/* Rule 14: without its secret, an id renews nothing. */
		if (!lease_secret_matches(l, ids[i], s, i < n_secrets ? &secrets[i] : &none,
					  &txn)) {
			st[i] = RAFTLOCK_EPERM;
			l->stats.ids_denied++;
			continue;
		}
		st[i] = KA_RENEW;
		waits = true;
		if (s->window != b->gen) {
			s->window = b->gen;
			b->ids[b->n_ids++] = ids[i];
		}
	}
	if (txn != NULL)
		store_abort(txn);
	for (size_t i = 0; accepted != NULL && i < take; i++)
		if (st[i] == KA_RENEW)
			accepted(arg, ids[i]);
	for (size_t i = take; i < n; i++)
		st[i] = RAFTLOCK_ELIMIT;
	l->stats.ids_refused += n - take;
	if (!waits) {
		answer(l, k, 0);
		return 0;
	}
	k->next = b->head;
	b->head = k;
	return 0;
}

void leases_on_ready(struct leases *l, bool ready)
{
	l->ready = ready;
	if (ready) {
		/* Reset proposal marks: this leader has proposed nothing yet. */
		struct lease *s;
		for (size_t pos = 0; (s = idmap_next(&l->sessions, &pos, NULL)) != NULL;)
			s->expire_proposed = 0;
		timers_reset(&l->timers);
		l->expiry_floor = 0;
		timebase_timer_start(&l->expiry_timer, expiry_cb, EXPIRY_TICK_MS, EXPIRY_TICK_MS);
	} else {
		timebase_timer_stop(&l->expiry_timer);
		timebase_timer_stop(&l->renew_timer);
		if (l->flushing != NULL) {
			/* what was proposed still answers; the rest never will */
			struct renew_batch *b = l->flushing;
			l->flushing = NULL;
			renew_release(b, RAFTLOCK_ENOTLEADER);
		}
		if (l->pending != NULL) {
			struct renew_batch *b = l->pending;
			l->pending = NULL;
			b->status = RAFTLOCK_ENOTLEADER;
			finish_batch(b);
		}
	}
}

void leases_close(struct leases *l)
{
	leases_on_ready(l, false);
	timebase_timer_close(&l->renew_timer);
	timebase_timer_close(&l->expiry_timer);
	idmap_close(&l->sessions);
	timers_close(&l->timers);
}
