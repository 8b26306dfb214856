/*
 * test_fsm_reload.c: a load refuses no state that apply produced.
 *
 * A load refuses an image that apply could never have produced
 * (store_check.h, GUARANTEES rule 12a); a refusal of one it did produce
 * would leave a follower that can never install a snapshot. So random
 * sequences of commands a cluster can apply (sessions opened, renewed,
 * closed, expired and dropped, single acquires and lock sets granted and
 * queued, releases, cancels, timeouts, retries, elections, revocations,
 * access rules, members, store limits, upgrades) drive the real apply,
 * and every 5 to 15 entries the state is dumped and loaded into another
 * store: the load must take it and give back the same image byte for
 * byte, the same record bytes and the same identities index, and that
 * store, applying the entries after, must reach the same state. Every
 * feature level the build writes is a test of its own, which also fails
 * when its states never held a kind of record a load checks (reach_*).
 *
 * Seeded: a failure names its seed, level and step; RELOAD_SEED=s
 * RELOAD_LEVEL=l run that one sequence alone.
 */
#include "test_fsm_harness.h"

#include "auth.h"

#define RUNS 12     /* seeds a level */
#define ENTRIES 600 /* entries a sequence */
#define BATCH 3     /* commands an entry, at most */
#define CLIENTS 8   /* sessions tracked at once */
#define RECENT 8    /* blocking acquires a client remembers */
#define SET_MAX 4   /* locks of a generated set */

/* ---------------------------------------------------------------- rng -- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* ------------------------------------------------------------- pools -- */

static char long_name[RAFTLOCK_NAME_MAX + 1];
/* Sorted, as a set names its locks. */
static const char *names[] = {"a", "b", "c", "db/x", "db/y", "elect", long_name};
#define N_NAMES (sizeof names / sizeof names[0])
static const char *identities[] = {"", "alice", "bob"};
static const char *prefixes[] = {"", "db/", "a"};
static const char *digests[] = {NULL, "digest-of-a-secret-32-bytes-long",
				"another-digest-of-32-bytes-long!"};
static const char *values[] = {"", "leader-1", "leader-2"};

/* ----------------------------------------------------------- clients -- */

/* A blocking acquire a client sent: to cancel, and to acknowledge once
 * its final outcome is known. */
struct wait_sent {
	uint64_t seq, owner;
	const char *name; /* one of its locks */
	bool queued;      /* told queued, final outcome not known */
};

/* One command as generated: the harness's op, and the fields and
 * commands it does not build. */
struct gen {
	struct op op;
	const char *names[SET_MAX];
	Raftlock__Mode modes[SET_MAX];
	uint64_t acked[RECENT];
	uint64_t renew[CLIENTS];
	uint32_t max_hold_ms, revoke_grace_ms, bind_grace_ms;
	uint64_t token, deadline, member;
	uint32_t grace_ms;
	struct client *client; /* a client command's */
	bool retry;            /* a client's last command again */
};

/* A client of one session, as client/session.c numbers its commands. */
struct client {
	uint64_t id;
	bool gone;        /* lost to its client, or ended */
	bool ended;       /* its session is no more: its place may be taken */
	bool acks_queued; /* false: an older client, whose mark covers queued acquires */
	uint64_t next_seq;
	struct wait_sent recent[RECENT];
	size_t n_recent;
	uint64_t acks[RECENT]; /* finished blocking acquires to acknowledge */
	size_t n_acks;
	struct gen last; /* its last command, to retry (type 0: none) */
};

/* The messages one generated command points into. */
struct built {
	struct cmd_buf b;
	Raftlock__Revoke revoke;
	Raftlock__RevokeDue due;
	Raftlock__DropBound drop;
	Raftlock__MemberAdd add;
	Raftlock__MemberRemove remove;
	char raft[32], addr[32];
};

struct run {
	uint64_t seed, rng;
	uint32_t start_level;
	uint32_t level; /* recorded now */
	size_t step;
	struct fx *f, *g; /* the state applied, and the one loaded */
	struct client clients[CLIENTS];
	size_t n_clients;
	uint64_t nonces; /* handed out */
	size_t loads;
	size_t *reach; /* the level's tally (reach_tally()) */
};

static uint32_t pick(struct run *r, uint32_t n)
{
	return n ? (uint32_t)(rng_next(&r->rng) % n) : 0;
}

static bool chance(struct run *r, uint32_t percent)
{
	return pick(r, 100) < percent;
}

static struct client *client_of(struct run *r, uint64_t id)
{
	for (size_t i = 0; i < r->n_clients; i++)
		if (r->clients[i].id == id)
			return &r->clients[i];
	return NULL;
}

/* A client, live or not (a command of a session gone is refused). */
static struct client *any_client(struct run *r)
{
	if (r->n_clients == 0)
		return NULL;
	struct client *c = &r->clients[pick(r, (uint32_t)r->n_clients)];
	if (c->gone && chance(r, 80)) /* mostly the live ones */
		for (size_t i = 0; i < r->n_clients; i++)
			if (!r->clients[i].gone)
				return &r->clients[i];
	return c;
}

static void recent_add(struct client *c, uint64_t seq, uint64_t owner, const char *name,
		       bool queued)
{
	if (c->n_recent == RECENT)
		memmove(c->recent, c->recent + 1, --c->n_recent * sizeof *c->recent);
	c->recent[c->n_recent++] = (struct wait_sent){seq, owner, name, queued};
}

/* The final outcome of the blocking acquire seq is known: it is
 * acknowledged with the next command. */
static void client_final(struct client *c, uint64_t seq)
{
	for (size_t i = 0; i < c->n_recent; i++) {
		if (c->recent[i].seq != seq || !c->recent[i].queued)
			continue;
		c->recent[i].queued = false;
		if (c->n_acks < RECENT)
			c->acks[c->n_acks++] = seq;
	}
}

/* Numbers a client command: its seq, the mark (the lowest seq whose
 * outcome is unknown, queued acquires left out unless the client is an
 * older one) and the acknowledgements it carries. */
static void client_number(struct client *c, struct gen *g)
{
	g->client = c;
	g->op.session = c->id;
	g->op.seq = c->next_seq++;
	g->op.ack_below = g->op.seq;
	for (size_t i = 0; i < c->n_recent && !c->acks_queued; i++)
		if (c->recent[i].queued && c->recent[i].seq < g->op.ack_below)
			g->op.ack_below = c->recent[i].seq;
	memcpy(g->acked, c->acks, c->n_acks * sizeof *c->acks);
	g->op.acked = g->acked;
	g->op.n_acked = c->n_acks;
	c->n_acks = 0;
}

/* --------------------------------------------------------- the store -- */

/* A party of a lock, read from the store. */
struct party {
	const char *name;
	uint64_t session, owner, token, seq, revoke_at, deadline;
	bool found;
};

/* A random holder (waiter: false) or waiter of a random lock. */
static struct party some_party(struct run *r, bool waiter)
{
	struct party p = {.name = names[pick(r, N_NAMES)]};
	Raftlock__LockRecord *l = fx_lock(r->f, p.name);
	if (l == NULL)
		return p;
	if (!waiter && l->n_holders > 0) {
		const Raftlock__Holder *h = l->holders[pick(r, (uint32_t)l->n_holders)];
		p = (struct party){p.name, h->session,   h->owner, h->token,
				   0,      h->revoke_at, 0,        true};
	} else if (waiter && l->n_waiters > 0) {
		const Raftlock__Waiter *w = l->waiters[pick(r, (uint32_t)l->n_waiters)];
		p = (struct party){p.name, w->session, w->owner, 0, w->seq, 0, w->deadline, true};
	}
	raftlock__lock_record__free_unpacked(l, NULL);
	return p;
}

static bool lease_of(struct run *r, uint64_t id, uint64_t *deadline)
{
	uint32_t ttl;
	MDB_txn *txn = store_begin(&r->f->store, false);
	bool found = store_get_lease(&r->f->store, txn, id, deadline, &ttl);
	store_abort(txn);
	return found;
}

/* -------------------------------------------------------- generation -- */

static int id_order(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

#define T(name) RAFTLOCK__COMMAND__OP_##name

static void gen_open(struct run *r, struct gen *g)
{
	g->op.type = T(OPEN_SESSION);
	/* a retry of an earlier open, now and then: the same session, or
	 * refused for another secret or identity */
	g->op.nonce = r->nonces && chance(r, 10) ? 1 + pick(r, (uint32_t)r->nonces)
		      : chance(r, 70)            ? ++r->nonces
						 : 0;
	g->op.ttl_ms = RAFTLOCK_TTL_MIN_MS + pick(r, 8000);
	g->op.identity = identities[pick(r, 3)];
	g->op.digest = digests[pick(r, 3)];
	g->op.acks_queued = chance(r, 70);
	g->op.max_sessions = chance(r, 20) ? 1 + pick(r, 3) : 0;
	if (r->level >= 3 && chance(r, 25))
		g->bind_grace_ms = RAFTLOCK_BIND_GRACE_MIN_MS + pick(r, 2000);
}

static void gen_acquire(struct run *r, struct gen *g, struct client *c)
{
	static const Raftlock__LockKind kinds[] = {0, RAFTLOCK__LOCK_KIND__MUTEX,
						   RAFTLOCK__LOCK_KIND__RWLOCK,
						   RAFTLOCK__LOCK_KIND__SEMAPHORE};
	g->op.type = T(ACQUIRE);
	g->op.name = names[pick(r, N_NAMES)];
	g->op.kind = kinds[pick(r, 4)];
	g->op.mode = chance(r, 40) ? RAFTLOCK__MODE__SHARED : RAFTLOCK__MODE__EXCLUSIVE;
	g->op.permits = pick(r, 3);
	g->op.limit = g->op.kind == RAFTLOCK__LOCK_KIND__SEMAPHORE ? 1 + pick(r, 3) : 0;
	g->op.owner = 1 + pick(r, 3);
	g->op.wait = chance(r, 60);
	g->op.wait_ms = g->op.wait && chance(r, 50) ? 100 + pick(r, 5000) : 0;
	g->op.lock_delay_ms = chance(r, 20) ? 100 + pick(r, 3000) : 0;
	g->op.max_waiters = chance(r, 20) ? 1 + pick(r, 3) : 0;
	if (r->level >= 3) {
		g->op.value = chance(r, 20) ? values[1 + pick(r, 2)] : NULL;
		g->max_hold_ms = chance(r, 15) ? 500 + pick(r, 5000) : 0;
		g->revoke_grace_ms = chance(r, 15) ? 100 + pick(r, 2000) : 0;
	}
	client_number(c, g);
	if (g->op.wait)
		recent_add(c, g->op.seq, g->op.owner, g->op.name, false);
}

static void gen_multi(struct run *r, struct gen *g, struct client *c)
{
	g->op.type = T(MULTI_ACQUIRE);
	size_t want = 1 + pick(r, SET_MAX);
	/* distinct names, in order */
	for (size_t i = 0; i < N_NAMES && g->op.n_names < want; i++)
		if (pick(r, (uint32_t)(N_NAMES - i)) < want - g->op.n_names)
			g->names[g->op.n_names++] = names[i];
	g->op.names = g->names;
	uint32_t kind = pick(r, 100);
	g->op.kind = kind < 45   ? RAFTLOCK__LOCK_KIND__RWLOCK
		     : kind < 60 ? RAFTLOCK__LOCK_KIND__SEMAPHORE
				 : 0;
	if (g->op.kind == RAFTLOCK__LOCK_KIND__SEMAPHORE) {
		g->op.limit = 1 + pick(r, 3);
		g->op.permits = pick(r, 3);
	}
	for (size_t i = 0; i < g->op.n_names; i++)
		g->modes[i] = g->op.kind == RAFTLOCK__LOCK_KIND__RWLOCK && chance(r, 50)
				      ? RAFTLOCK__MODE__SHARED
				      : RAFTLOCK__MODE__EXCLUSIVE;
	g->op.modes = g->modes;
	g->op.owner = 1 + pick(r, 4);
	g->op.wait = chance(r, 70);
	g->op.wait_ms = g->op.wait && chance(r, 50) ? 100 + pick(r, 5000) : 0;
	g->op.max_waiters = chance(r, 20) ? 1 + pick(r, 3) : 0;
	client_number(c, g);
	if (g->op.wait)
		recent_add(c, g->op.seq, g->op.owner, g->names[pick(r, (uint32_t)g->op.n_names)],
			   false);
}

/* A release by a holder, or by a client that holds nothing there. */
static void gen_release(struct run *r, struct gen *g)
{
	struct party p = some_party(r, false);
	struct client *c = p.found ? client_of(r, p.session) : NULL;
	if (c == NULL || chance(r, 10)) {
		c = any_client(r);
		p.owner = 1 + pick(r, 3);
	}
	g->op.type = T(RELEASE);
	g->op.name = p.name;
	g->op.owner = p.owner;
	client_number(c, g);
}

/* A cancel of one of the client's blocking acquires, queued or not. */
static void gen_cancel(struct run *r, struct gen *g, struct client *c)
{
	g->op.type = T(CANCEL_WAIT);
	if (c->n_recent == 0) {
		g->op.name = names[pick(r, N_NAMES)];
		g->op.owner = 1;
		g->op.acquire_seq = 1 + pick(r, (uint32_t)c->next_seq);
	} else {
		const struct wait_sent *w = &c->recent[pick(r, (uint32_t)c->n_recent)];
		g->op.name = w->name;
		g->op.owner = w->owner;
		g->op.acquire_seq = w->seq;
	}
	client_number(c, g);
}

/* A holder publishes a value, fenced by its token (now and then not its
 * own). */
static void gen_proclaim(struct run *r, struct gen *g)
{
	struct party p = some_party(r, false);
	struct client *c = p.found ? client_of(r, p.session) : NULL;
	if (c == NULL)
		c = any_client(r);
	g->op.type = T(PROCLAIM);
	g->op.name = p.name;
	g->op.owner = p.owner;
	g->op.token = chance(r, 85) ? p.token : p.token + 1;
	g->op.value = values[pick(r, 3)];
	client_number(c, g);
}

/* The client's last command again, the same seq and all, as a client
 * sends it again when its connection was lost before the answer. */
static void gen_retry(struct gen *g, struct client *c)
{
	*g = c->last;
	g->op.names = g->names;
	g->op.modes = g->modes;
	g->op.acked = g->acked;
	g->retry = true;
}

/* A command of one of the clients. */
static void gen_client(struct run *r, struct gen *g)
{
	struct client *c = any_client(r);
	uint32_t w = pick(r, 100);
	if (c == NULL)
		gen_open(r, g);
	else if (w < 5 && c->last.op.type != 0)
		gen_retry(g, c);
	else if (w < 45)
		gen_acquire(r, g, c);
	else if (w < 60 && r->level >= 3)
		gen_multi(r, g, c);
	else if (w < 78)
		gen_release(r, g);
	else if (w < 89)
		gen_cancel(r, g, c);
	else if (w < 95 && r->level >= 3)
		gen_proclaim(r, g);
	else if (w < 98) {
		g->op.type = T(CLOSE_SESSION);
		client_number(c, g);
	} else {
		gen_acquire(r, g, c);
	}
}

/* What the leader proposes of itself, at its times: renewals, expiries,
 * the ends of waits, lock-delays and grants, drops of bound sessions. */
static void gen_leader(struct run *r, struct gen *g)
{
	uint32_t w = pick(r, 100);
	if (w < 35 && r->n_clients > 0) {
		/* the live sessions it heard from, in order */
		g->op.type = T(RENEW);
		size_t n = 0;
		for (size_t i = 0; i < r->n_clients; i++)
			if (!r->clients[i].gone && chance(r, 70))
				g->renew[n++] = r->clients[i].id;
		qsort(g->renew, n, sizeof *g->renew, id_order);
		g->op.renew = g->renew;
		g->op.n_renew = n;
	} else if (w < 55 && r->n_clients > 0) {
		/* due or not: apply decides */
		g->op.type = T(EXPIRE_SESSION);
		g->op.target = r->clients[pick(r, (uint32_t)r->n_clients)].id;
	} else if (w < 70) {
		struct party p = some_party(r, true);
		g->op.type = T(WAIT_EXPIRE);
		g->op.name = p.name;
		g->op.target = p.session;
		g->op.acquire_seq = p.seq;
	} else if (w < 78) {
		g->op.type = T(LOCK_DELAY_END);
		g->op.name = names[pick(r, N_NAMES)];
	} else if (w < 86 && r->level >= 3) {
		struct party p = some_party(r, false);
		g->op.type = T(REVOKE_DUE);
		g->op.name = p.name;
		g->token = p.token;
	} else if (w < 91 && r->level >= 3) {
		struct party p = some_party(r, false);
		g->op.type = T(REVOKE);
		g->op.name = p.name;
		g->token = chance(r, 50) ? p.token : 0;
		g->grace_ms = chance(r, 50) ? 100 + pick(r, 3000) : 0;
	} else if (w < 96 && r->level >= 3 && r->n_clients > 0) {
		g->op.type = T(DROP_BOUND);
		g->op.target = r->clients[pick(r, (uint32_t)r->n_clients)].id;
		uint64_t deadline = 0;
		if (r->level >= FEATURES_DROP_BOUND_DEADLINE &&
		    lease_of(r, g->op.target, &deadline))
			g->deadline = chance(r, 70) ? deadline : deadline - 1;
	} else {
		gen_client(r, g);
	}
}

/* The cluster's own changes: access rules, members, the store's limit. */
static void gen_admin(struct run *r, struct gen *g)
{
	uint32_t w = pick(r, 100);
	if (w < 35) {
		g->op.type = T(ACL_SET);
		g->op.identity = identities[1 + pick(r, 2)];
		g->op.prefix = prefixes[pick(r, 3)];
		g->op.perms = 1 + pick(r, AUTH_ALL);
	} else if (w < 55 && r->level >= 2) {
		g->op.type = T(ACL_DELETE);
		g->op.identity = identities[1 + pick(r, 2)];
		g->op.prefix = prefixes[pick(r, 3)];
	} else if (w < 75 && r->level >= 2) {
		g->op.type = chance(r, 60) ? T(MEMBER_ADD) : T(MEMBER_REMOVE);
		g->member = 1 + pick(r, 5);
	} else {
		/* none, or small enough to refuse new records now and then */
		g->op.type = T(STORE_LIMIT);
		g->op.store_limit = chance(r, 50) ? 0 : 2000 + pick(r, 6000);
	}
}

static void gen_one(struct run *r, struct gen *g)
{
	memset(g, 0, sizeof *g);
	uint32_t w = pick(r, 100);
	if (w < 8 || r->n_clients == 0)
		gen_open(r, g);
	else if (w < 60)
		gen_client(r, g);
	else if (w < 94)
		gen_leader(r, g);
	else
		gen_admin(r, g);
}

/* ---------------------------------------------------------- applying -- */

static Raftlock__Command *build(struct built *bt, const struct gen *g)
{
	Raftlock__Command *cmd = &bt->b.cmd;
	switch (g->op.type) {
	case T(REVOKE):
	case T(REVOKE_DUE):
	case T(DROP_BOUND):
	case T(MEMBER_ADD):
	case T(MEMBER_REMOVE): break;
	default:
		cmd_build(&bt->b, &g->op);
		bt->b.acquire.max_hold_ms = g->max_hold_ms;
		bt->b.acquire.revoke_grace_ms = g->revoke_grace_ms;
		bt->b.open.bind_grace_ms = g->bind_grace_ms;
		return cmd;
	}
	raftlock__command__init(cmd);
	cmd->op_case = g->op.type;
	if (g->op.type == T(REVOKE)) {
		raftlock__revoke__init(&bt->revoke);
		bt->revoke.name = (char *)g->op.name;
		bt->revoke.token = g->token;
		bt->revoke.grace_ms = g->grace_ms;
		cmd->revoke = &bt->revoke;
	} else if (g->op.type == T(REVOKE_DUE)) {
		raftlock__revoke_due__init(&bt->due);
		bt->due.name = (char *)g->op.name;
		bt->due.token = g->token;
		cmd->revoke_due = &bt->due;
	} else if (g->op.type == T(DROP_BOUND)) {
		raftlock__drop_bound__init(&bt->drop);
		bt->drop.session = g->op.target;
		bt->drop.deadline = g->deadline;
		cmd->drop_bound = &bt->drop;
	} else if (g->op.type == T(MEMBER_ADD)) {
		raftlock__member_add__init(&bt->add);
		snprintf(bt->raft, sizeof bt->raft, "127.0.0.1:%u", 7000 + (unsigned)g->member);
		snprintf(bt->addr, sizeof bt->addr, "127.0.0.1:%u", 8000 + (unsigned)g->member);
		bt->add.id = g->member;
		bt->add.raft_address = bt->raft;
		bt->add.client_address = bt->addr;
		cmd->member_add = &bt->add;
	} else {
		raftlock__member_remove__init(&bt->remove);
		bt->remove.id = g->member;
		cmd->member_remove = &bt->remove;
	}
	return cmd;
}

/* What the last entry answered and ended, as the leader hears it. */
struct heard {
	struct run *r;
	struct {
		bool answered;
		int status;
		bool queued;
		uint64_t session;
	} results[BATCH];
	struct {
		uint64_t session, seq;
	} finals[64];
	size_t n_finals;
};

static void hear(void *arg, const struct fsm_event *ev)
{
	struct heard *h = arg;
	if (ev->type == FSM_EV_RESULT) {
		assert_true(ev->command < BATCH);
		assert_false(h->results[ev->command].answered);
		h->results[ev->command].answered = true;
		h->results[ev->command].status = ev->result->status;
		h->results[ev->command].queued = ev->result->queued;
		h->results[ev->command].session = ev->result->session;
	} else if (ev->type == FSM_EV_PUSH && ev->result != NULL && !ev->result->queued &&
		   h->n_finals < sizeof h->finals / sizeof h->finals[0]) {
		h->finals[h->n_finals].session = ev->session;
		h->finals[h->n_finals++].seq = ev->seq;
	} else if (ev->type == FSM_EV_SESSION_GONE) {
		struct client *c = client_of(h->r, ev->session);
		if (c != NULL)
			c->gone = c->ended = true;
	}
}

static void hear_nothing(void *arg, const struct fsm_event *ev)
{
	(void)arg, (void)ev;
}

/* A session opened: its client joins the table, in the place of one
 * whose session ended when it is full. */
static void client_opened(struct run *r, const struct gen *g, uint64_t id)
{
	if (client_of(r, id) != NULL) /* a retried open */
		return;
	struct client *c = NULL;
	if (r->n_clients < CLIENTS)
		c = &r->clients[r->n_clients++];
	for (size_t i = 0; c == NULL && i < r->n_clients; i++)
		if (r->clients[i].ended)
			c = &r->clients[i];
	assert_non_null(c); /* gen_one opens only with room */
	*c = (struct client){.id = id, .acks_queued = g->op.acks_queued, .next_seq = 1};
}

/* What a client learns from its command's answer. */
static void client_answered(struct client *c, const struct gen *g, int status, bool queued)
{
	if (status == RAFTLOCK_ESESSION)
		c->gone = true; /* lost: it stops (its session ends by expiry) */
	if (!g->op.wait || (g->op.type != T(ACQUIRE) && g->op.type != T(MULTI_ACQUIRE)))
		return;
	for (size_t i = 0; i < c->n_recent; i++)
		if (c->recent[i].seq == g->op.seq)
			c->recent[i].queued = true;
	if (!queued)
		client_final(c, g->op.seq);
}

static void apply_entry(struct run *r, struct gen *gens, size_t n)
{
	struct built *bts = fx_keep(r->f, calloc(n, sizeof *bts));
	assert_non_null(bts);
	Raftlock__Command *cmds[BATCH];
	for (size_t i = 0; i < n; i++) {
		cmds[i] = build(&bts[i], &gens[i]);
		/* the leader proposes nothing the cluster's level lacks */
		assert_true(features_level_of(cmds[i]) <= r->level);
	}
	Raftlock__LogEntry entry = RAFTLOCK__LOG_ENTRY__INIT;
	entry.cluster_time = r->f->now;
	entry.commands = cmds;
	entry.n_commands = n;
	struct heard h = {.r = r};
	struct fsm_sink sink = {.emit = hear, .arg = &h};
	fsm_apply(&r->f->fsm, ++r->f->index, &entry, &sink);
	if (r->g != NULL) { /* the follower that loaded the last image */
		struct fsm_sink none = {.emit = hear_nothing};
		fsm_apply(&r->g->fsm, r->f->index, &entry, &none);
	}
	fx_drop(r->f, bts);
	for (size_t i = 0; i < n; i++) {
		assert_true(h.results[i].answered);
		const struct gen *g = &gens[i];
		if (g->op.type == T(OPEN_SESSION) && h.results[i].status == 0)
			client_opened(r, g, h.results[i].session);
		/* not a client whose place a session opened since took */
		else if (g->client != NULL && !g->retry && g->client->id == g->op.session) {
			client_answered(g->client, g, h.results[i].status, h.results[i].queued);
			g->client->last = *g;
		}
	}
	for (size_t i = 0; i < h.n_finals; i++) {
		struct client *c = client_of(r, h.finals[i].session);
		if (c != NULL)
			client_final(c, h.finals[i].seq);
	}
}

/* ------------------------------------------------------------- reach -- */

/* What the states checked held, so that the test tells when its
 * sequences stop reaching a kind of record a load checks. */
enum reach_kind {
	R_SESSION,
	R_DIGEST,
	R_IDENTITY,
	R_BOUND,
	R_NONCE,
	R_LEASE,
	R_LOCK,
	R_HOLDER,
	R_SHARED,
	R_SEMAPHORE,
	R_NESTED,
	R_WAITER,
	R_WAIT_DEADLINE,
	R_DELAY,
	R_VALUE,
	R_REVOKE_AT,
	R_RELEASE_ASKED,
	R_SET_WAITER,
	R_SET_LISTED, /* a session record's list of sets: below level 9 */
	R_SET_ROW,    /* the multi_waits table: from level 9 */
	R_NAMES_LISTED,
	R_NAMES_ROW,
	R_OUTCOME_LISTED,
	R_OUTCOME_ROW,
	R_PENDING,
	R_QUEUED_MARK,
	R_SET_TOKENS,
	R_PRUNE_DUE,
	R_ACL,
	R_MEMBER,
	R_STORE_LIMIT,
	R_KINDS
};

static const char *const reach_names[R_KINDS] = {
	[R_SESSION] = "session",
	[R_DIGEST] = "secret digest",
	[R_IDENTITY] = "identity",
	[R_BOUND] = "bound session",
	[R_NONCE] = "nonce",
	[R_LEASE] = "lease",
	[R_LOCK] = "lock",
	[R_HOLDER] = "holder",
	[R_SHARED] = "shared holder",
	[R_SEMAPHORE] = "semaphore",
	[R_NESTED] = "nested grant",
	[R_WAITER] = "waiter",
	[R_WAIT_DEADLINE] = "wait deadline",
	[R_DELAY] = "lock-delay",
	[R_VALUE] = "election value",
	[R_REVOKE_AT] = "revoke_at",
	[R_RELEASE_ASKED] = "release asked",
	[R_SET_WAITER] = "set waiter",
	[R_SET_LISTED] = "set in a list",
	[R_SET_ROW] = "set row",
	[R_NAMES_LISTED] = "names in a list",
	[R_NAMES_ROW] = "names row",
	[R_OUTCOME_LISTED] = "outcome in a list",
	[R_OUTCOME_ROW] = "outcome row",
	[R_PENDING] = "pending outcome",
	[R_QUEUED_MARK] = "queued mark",
	[R_SET_TOKENS] = "set tokens",
	[R_PRUNE_DUE] = "prune_due",
	[R_ACL] = "access rule",
	[R_MEMBER] = "member",
	[R_STORE_LIMIT] = "store limit",
};

static void reach_outcome(size_t *reach, const Raftlock__Outcome *o, enum reach_kind where)
{
	reach[where]++;
	reach[R_PENDING] += o->pending;
	reach[R_QUEUED_MARK] += o->queued;
	reach[R_SET_TOKENS] += o->result != NULL && o->result->n_tokens > 1;
}

static size_t entries(MDB_txn *txn, MDB_dbi dbi)
{
	MDB_stat st;
	assert_int_equal(mdb_stat(txn, dbi, &st), 0);
	return st.ms_entries;
}

static void reach_session(size_t *reach, const MDB_val *val)
{
	Raftlock__SessionRecord *rec =
		raftlock__session_record__unpack(NULL, val->mv_size, val->mv_data);
	assert_non_null(rec);
	reach[R_SESSION]++;
	reach[R_DIGEST] += rec->secret_digest.len != 0;
	reach[R_IDENTITY] += rec->identity[0] != '\0';
	reach[R_BOUND] += rec->bind_grace_ms != 0;
	reach[R_SET_LISTED] += rec->n_multi_waits;
	reach[R_NAMES_LISTED] += rec->n_locks;
	reach[R_PRUNE_DUE] += rec->n_prune_due;
	for (size_t i = 0; i < rec->n_outcomes; i++)
		reach_outcome(reach, rec->outcomes[i], R_OUTCOME_LISTED);
	raftlock__session_record__free_unpacked(rec, NULL);
}

static void reach_outcome_row(size_t *reach, const MDB_val *val)
{
	Raftlock__Outcome *o = raftlock__outcome__unpack(NULL, val->mv_size, val->mv_data);
	assert_non_null(o);
	reach_outcome(reach, o, R_OUTCOME_ROW);
	raftlock__outcome__free_unpacked(o, NULL);
}

static void reach_lock(size_t *reach, const MDB_val *val)
{
	Raftlock__LockRecord *l = raftlock__lock_record__unpack(NULL, val->mv_size, val->mv_data);
	assert_non_null(l);
	reach[R_LOCK]++;
	reach[R_SEMAPHORE] += l->kind == RAFTLOCK__LOCK_KIND__SEMAPHORE;
	reach[R_DELAY] += l->delay_until != 0;
	for (size_t i = 0; i < l->n_holders; i++) {
		const Raftlock__Holder *h = l->holders[i];
		reach[R_HOLDER]++;
		reach[R_SHARED] += h->mode == RAFTLOCK__MODE__SHARED;
		reach[R_NESTED] += h->count > 1;
		reach[R_VALUE] += h->value[0] != '\0';
		reach[R_REVOKE_AT] += h->revoke_at != 0;
		reach[R_RELEASE_ASKED] += h->release_requested;
	}
	for (size_t i = 0; i < l->n_waiters; i++) {
		reach[R_WAITER]++;
		reach[R_WAIT_DEADLINE] += l->waiters[i]->deadline != 0;
		reach[R_SET_WAITER] += l->waiters[i]->multi;
	}
	raftlock__lock_record__free_unpacked(l, NULL);
}

/* Runs each over every value of table dbi. */
static void reach_walk(MDB_txn *txn, MDB_dbi dbi, void (*each)(size_t *, const MDB_val *),
		       size_t *reach)
{
	MDB_cursor *cur;
	MDB_val key, val;
	assert_int_equal(mdb_cursor_open(txn, dbi, &cur), 0);
	for (int rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT))
		each(reach, &val);
	mdb_cursor_close(cur);
}

/* Adds what the store holds to reach. */
static void reach_tally(struct store *s, size_t *reach)
{
	MDB_txn *txn = store_begin(s, false);
	Raftlock__Meta *m = store_get_meta(s, txn);
	reach[R_MEMBER] += m->n_members;
	reach[R_STORE_LIMIT] += m->store_limit != 0;
	raftlock__meta__free_unpacked(m, NULL);
	reach[R_NONCE] += entries(txn, s->nonces);
	reach[R_LEASE] += entries(txn, s->leases);
	reach[R_ACL] += entries(txn, s->acls);
	reach[R_NAMES_ROW] += entries(txn, s->session_locks);
	reach[R_SET_ROW] += entries(txn, s->multi_waits);
	reach_walk(txn, s->sessions, reach_session, reach);
	reach_walk(txn, s->outcomes, reach_outcome_row, reach);
	reach_walk(txn, s->locks, reach_lock, reach);
	store_abort(txn);
}

/* Whether a level's sequences, started at level, must reach kind k in
 * some state checked: what the commands of that level make, in the
 * homes of that level's format (an upgrade may move them; prune_due is
 * made by the move to level 9, which not every sequence makes). */
static bool reach_needed(enum reach_kind k, uint32_t level)
{
	switch (k) {
	case R_MEMBER: return level >= 2;
	case R_BOUND:
	case R_VALUE:
	case R_REVOKE_AT:
	case R_RELEASE_ASKED:
	case R_SET_WAITER:
	case R_SET_TOKENS: return level >= 3;
	case R_SET_LISTED: return level >= 3 && level < FEATURES_SEQ_TABLES;
	case R_NAMES_LISTED: return level < FEATURES_SESSION_LOCK_INDEX;
	case R_NAMES_ROW: return level >= FEATURES_SESSION_LOCK_INDEX;
	case R_OUTCOME_LISTED: return level < FEATURES_SEQ_TABLES;
	case R_SET_ROW:
	case R_OUTCOME_ROW: return level >= FEATURES_SEQ_TABLES;
	case R_PRUNE_DUE: return false;
	default: return true;
	}
}

/* ----------------------------------------------------------- reloads -- */

/* The state as it is now, dumped and loaded into another store (a fresh
 * one at a sequence's first reload, the same one after, as a follower
 * installs one snapshot after another): taken, and the same. That store
 * applies the entries after it (apply_entry()), and must have come to
 * the same state by the next reload. */
static void check_reload(struct run *r)
{
	if (r->g == NULL)
		r->g = fx_new();
	struct fx *f = r->f, *g = r->g;
	struct fx_image im = fx_dump(f);
	if (r->loads > 0) {
		struct fx_image went_on = fx_dump(g);
		if (went_on.len != im.len || memcmp(went_on.buf, im.buf, im.len) != 0)
			fail_msg("seed %llu level %u (recorded %u) entry %zu: the state loaded "
				 "at the last reload, with the entries since, is not the state "
				 "applied",
				 (unsigned long long)r->seed, r->start_level, r->level, r->step);
		fx_image_free(&went_on);
	}
	if (store_load(&g->store, im.buf, im.len) != 0)
		fail_msg("seed %llu level %u (recorded %u) entry %zu: the load refused the state: "
			 "%s",
			 (unsigned long long)r->seed, r->start_level, r->level, r->step,
			 store_load_error(&g->store));
	struct fx_image back = fx_dump(g);
	if (back.len != im.len || memcmp(back.buf, im.buf, im.len) != 0)
		fail_msg("seed %llu level %u (recorded %u) entry %zu: the state loaded dumps "
			 "other bytes (%zu, not %zu)",
			 (unsigned long long)r->seed, r->start_level, r->level, r->step, back.len,
			 im.len);
	if (store_record_bytes(&g->store) != store_record_bytes(&f->store))
		fail_msg("seed %llu level %u entry %zu: %llu record bytes loaded, not %llu",
			 (unsigned long long)r->seed, r->start_level, r->step,
			 (unsigned long long)store_record_bytes(&g->store),
			 (unsigned long long)store_record_bytes(&f->store));
	MDB_txn *tf = store_begin(&f->store, false), *tg = store_begin(&g->store, false);
	for (size_t i = 0; i < sizeof identities / sizeof identities[0]; i++)
		if (store_identity_sessions(&f->store, tf, identities[i]) !=
		    store_identity_sessions(&g->store, tg, identities[i]))
			fail_msg("seed %llu level %u entry %zu: the loaded index counts other "
				 "sessions of identity '%s'",
				 (unsigned long long)r->seed, r->start_level, r->step,
				 identities[i]);
	store_abort(tg);
	store_abort(tf);
	fx_image_free(&back);
	fx_image_free(&im);
	reach_tally(&f->store, r->reach);
	r->loads++;
}

/* --------------------------------------------------------- sequences -- */

static bool room_for_one_more(const struct run *r)
{
	for (size_t i = 0; i < r->n_clients; i++)
		if (r->clients[i].ended)
			return true;
	return r->n_clients < CLIENTS;
}

/* One sequence of seed at level: INIT, then ENTRIES entries of up to
 * BATCH commands, the cluster time moving on between them, with an
 * upgrade to a higher level in some; a reload every 5 to 15 entries and
 * at the end. */
static void run_sequence(struct run *r)
{
	r->rng = r->seed;
	r->level = r->start_level;
	r->f->now = 1000;
	struct gen init = {.op = OP(INIT, .floor = FX_FLOOR, .level = r->level)};
	apply_entry(r, &init, 1);
	size_t upgrade_at = r->level < FEATURE_LEVEL && chance(r, 50) ? 1 + pick(r, ENTRIES) : 0;
	size_t next_check = 5 + pick(r, 10);
	for (r->step = 1; r->step <= ENTRIES; r->step++) {
		uint32_t t = pick(r, 100);
		r->f->now += t < 70   ? pick(r, 200)
			     : t < 95 ? 200 + pick(r, 2000)
				      : 2000 + pick(r, 10000);
		struct gen gens[BATCH];
		size_t n = 1 + pick(r, BATCH);
		if (r->step == upgrade_at) {
			uint32_t to = r->level + 1 + pick(r, FEATURE_LEVEL - r->level);
			gens[0] = (struct gen){.op = OP(SET_FEATURE_LEVEL, .level = to)};
			apply_entry(r, gens, 1);
			r->level = to;
		}
		bool opening = false; /* one open an entry, while there is room */
		for (size_t i = 0; i < n; i++) {
			gen_one(r, &gens[i]);
			if (gens[i].op.type != T(OPEN_SESSION))
				continue;
			if (opening || !room_for_one_more(r))
				gens[i].op = OP(RENEW); /* renews nothing */
			opening = true;
		}
		apply_entry(r, gens, n);
		if (r->step == next_check || r->step == ENTRIES) {
			check_reload(r);
			next_check += 5 + pick(r, 10);
		}
	}
}

/* The sequences of one level: RUNS seeds, or RELOAD_SEED's alone when
 * RELOAD_LEVEL names this level. The state is the sequence running, whose
 * stores teardown frees when it fails. */
static void run_level(void **state, uint32_t level)
{
	const char *seed = getenv("RELOAD_SEED"), *only = getenv("RELOAD_LEVEL");
	if (level > FEATURE_LEVEL ||
	    (seed != NULL && only != NULL && strtoul(only, NULL, 10) != level))
		skip();
	size_t loads = 0, reach[R_KINDS] = {0};
	for (unsigned i = 0; i < (seed != NULL ? 1u : RUNS); i++) {
		struct run *r = *state;
		fx_free(r->f);
		fx_free(r->g);
		*r = (struct run){
			.seed = seed != NULL ? strtoull(seed, NULL, 0)
					     : UINT64_C(0x5eed00) + level * 100 + i,
			.start_level = level,
			.f = fx_new(),
			.reach = reach,
		};
		run_sequence(r);
		loads += r->loads;
	}
	if (getenv("RELOAD_VERBOSE") != NULL)
		for (int k = 0; k < R_KINDS; k++)
			print_message("level %u: %zu states, %zu %s\n", level, loads, reach[k],
				      reach_names[k]);
	if (seed != NULL)
		return;
	assert_true(loads >= RUNS * ENTRIES / 15);
	for (int k = 0; k < R_KINDS; k++)
		if (reach[k] == 0 && reach_needed((enum reach_kind)k, level))
			fail_msg("level %u: no state checked had a %s", level, reach_names[k]);
}

static int run_setup(void **state)
{
	*state = calloc(1, sizeof(struct run));
	return *state == NULL;
}

static int run_teardown(void **state)
{
	struct run *r = *state;
	fx_free(r->g);
	fx_free(r->f);
	free(r);
	return 0;
}

#define LEVEL_TEST(n)                            \
	static void test_level_##n(void **state) \
	{                                        \
		run_level(state, n);             \
	}
LEVEL_TEST(1)
LEVEL_TEST(2)
LEVEL_TEST(3)
LEVEL_TEST(4)
LEVEL_TEST(5)
LEVEL_TEST(6)
LEVEL_TEST(7)
LEVEL_TEST(8)
LEVEL_TEST(9)
LEVEL_TEST(10)
LEVEL_TEST(11)

/* A level added to the build needs its test above. */
static void test_every_level_has_its_test(void **state)
{
	(void)state;
	assert_true(FEATURE_LEVEL <= 11);
}

int main(void)
{
	memset(long_name, 'z', RAFTLOCK_NAME_MAX);
	const struct CMUnitTest tests[] = {
#define L(n) cmocka_unit_test_setup_teardown(test_level_##n, run_setup, run_teardown)
		L(1),
		L(2),
		L(3),
		L(4),
		L(5),
		L(6),
		L(7),
		L(8),
		L(9),
		L(10),
		L(11),
#undef L
		cmocka_unit_test(test_every_level_has_its_test),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
