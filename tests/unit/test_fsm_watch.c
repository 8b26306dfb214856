/*
 * test_fsm_watch.c: the changes apply reports for watches (FSM_EV_CHANGE)
 * and the ring that keeps them (server/watch.c): every grant, release,
 * expiry and queue change, at (index, rank in the entry), alike on a node
 * that replays the log; resuming from a position in the ring, past it
 * (HISTORY_LOST and the current state), and after a restore.
 */
#include "test_fsm_harness.h"
#include "watch.h"

#define K(x) RAFTLOCK__WATCH_KIND__WATCH_##x

/* The changes of the last entry, in order. */
static size_t changes(const struct fx *f, const Raftlock__WatchEvent **out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < f->n_events && n < max; i++)
		if (f->events[i].type == FSM_EV_CHANGE) {
			assert_true(f->events[i].has_change);
			out[n++] = &f->events[i].change;
		}
	return n;
}

static void assert_change(const Raftlock__WatchEvent *c, Raftlock__WatchKind kind, uint64_t index,
			  uint32_t offset, uint64_t session, const char *name)
{
	assert_int_equal(c->kind, kind);
	assert_int_equal(c->index, index);
	assert_int_equal(c->offset, offset);
	assert_int_equal(c->session, session);
	assert_string_equal(c->name, name);
}

static void test_grant_release_queue(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f), b = fx_session(f), c = fx_session(f);
	const Raftlock__WatchEvent *ch[8];

	uint64_t ta = fx_take(f, a, 1, "m");
	assert_int_equal(changes(f, ch, 8), 1);
	assert_change(ch[0], K(GRANTED), f->index, 1, a, "m");
	assert_int_equal(ch[0]->token, ta);
	assert_int_equal(ch[0]->owner, 1);

	/* A nested acquire and a refused one change nothing. */
	assert_int_equal(DO(f, ACQUIRE, .session = a, .owner = 1, .name = "m").count, 2);
	assert_int_equal(changes(f, ch, 8), 0);
	assert_int_equal(DO(f, ACQUIRE, .session = b, .owner = 1, .name = "m").status,
			 RAFTLOCK_EBUSY);
	assert_int_equal(changes(f, ch, 8), 0);
	fx_release_ok(f, a, 1, "m", 1);
	assert_int_equal(changes(f, ch, 8), 0);

	uint64_t sb = fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 2, .name = "m"));
	assert_int_equal(changes(f, ch, 8), 1);
	assert_change(ch[0], K(QUEUED), f->index, 1, b, "m");
	assert_int_equal(ch[0]->owner, 2);
	uint64_t sc = fx_enqueue(f, OP(ACQUIRE, .session = c, .owner = 3, .name = "m"));
	(void)sc;

	/* Release and the grant it makes: one entry, ranks 1 and 2. */
	fx_release_ok(f, a, 1, "m", 0);
	uint64_t tb = fx_pushed_grant(f, b, sb);
	assert_int_equal(changes(f, ch, 8), 2);
	assert_change(ch[0], K(RELEASED), f->index, 1, a, "m");
	assert_int_equal(ch[0]->token, ta);
	assert_change(ch[1], K(GRANTED), f->index, 2, b, "m");
	assert_int_equal(ch[1]->token, tb);

	/* A cancelled wait leaves the queue: ECANCELED. */
	assert_int_equal(
		DO(f, CANCEL_WAIT, .session = c, .owner = 3, .name = "m", .acquire_seq = sc).status,
		0);
	assert_int_equal(changes(f, ch, 8), 1);
	assert_change(ch[0], K(DEQUEUED), f->index, 1, c, "m");
	assert_int_equal(ch[0]->status, RAFTLOCK_ECANCELED);

	/* A wait past its server-side deadline: ETIMEDOUT. */
	uint64_t sw =
		fx_enqueue(f, OP(ACQUIRE, .session = c, .owner = 3, .name = "m", .wait_ms = 100));
	f->now += 100;
	DO(f, WAIT_EXPIRE, .name = "m", .target = c, .acquire_seq = sw);
	assert_int_equal(changes(f, ch, 8), 1);
	assert_change(ch[0], K(DEQUEUED), f->index, 1, c, "m");
	assert_int_equal(ch[0]->status, RAFTLOCK_ETIMEDOUT);
}

/* An expiry: the holder EXPIRED, its other waits DEQUEUED (ESESSION), the
 * next waiter GRANTED, all at one index in that order; a close is a
 * RELEASE. */
static void test_expiry_and_close(void **state)
{
	/* below the deadlock check: a and b wait for each other */
	struct fx *f = fx_ready_at(state, 2);
	uint64_t a = fx_session_ttl(f, 1000), b = fx_session(f);
	const Raftlock__WatchEvent *ch[8];
	fx_take(f, a, 1, "x");
	fx_take(f, b, 1, "y");
	fx_enqueue(f, OP(ACQUIRE, .session = a, .owner = 2, .name = "y"));
	uint64_t sb = fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 2, .name = "x"));
	f->now += 1000;
	DO(f, EXPIRE_SESSION, .target = a);
	fx_pushed_grant(f, b, sb);
	size_t n = changes(f, ch, 8);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(ch[i]->index, f->index);
		assert_int_equal(ch[i]->offset, i + 1);
	}
	/* The session's locks in its own order: x (held), then y (awaited). */
	assert_change(ch[0], K(EXPIRED), f->index, 1, a, "x");
	assert_change(ch[1], K(GRANTED), f->index, 2, b, "x");
	assert_change(ch[2], K(DEQUEUED), f->index, 3, a, "y");
	assert_int_equal(ch[2]->status, RAFTLOCK_ESESSION);

	DO(f, CLOSE_SESSION, .session = b);
	n = changes(f, ch, 8);
	assert_int_equal(n, 2);
	assert_int_equal(ch[0]->kind, K(RELEASED));
	assert_int_equal(ch[1]->kind, K(RELEASED));
}

/* A node that replays the same log reports the same changes at the same
 * positions; a replay of entries already applied reports nothing. */
static void test_replay_same_changes(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f), b = fx_session(f);
	fx_take(f, a, 1, "m");
	fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 1, .name = "m"));
	fx_release_ok(f, a, 1, "m", 0);
	DO(f, CLOSE_SESSION, .session = b);
	assert_non_null(strstr(f->trace, " change "));

	struct fx *g = fx_peer(f);
	fx_replay(g, f, 0, f->n_log);
	assert_string_equal(g->trace, f->trace);

	size_t before = g->trace_len;
	fx_replay(g, f, 0, f->n_log);
	assert_int_equal(g->trace_len, before);
}

/* ----------------------------------------------------------- the ring -- */

struct sent {
	size_t n;
	Raftlock__WatchKind kind[64];
	uint64_t index[64];
	uint32_t offset[64];
	uint64_t cluster[64];
	char name[64][32];
};

static void record_send(void *arg, struct service_conn *conn, uint64_t id,
			const Raftlock__WatchEvent *ev)
{
	(void)conn;
	(void)id;
	struct sent *s = arg;
	assert_true(s->n < 64);
	s->kind[s->n] = ev->kind;
	s->index[s->n] = ev->index;
	s->offset[s->n] = ev->offset;
	s->cluster[s->n] = ev->cluster_id;
	snprintf(s->name[s->n], sizeof s->name[s->n], "%s", ev->name);
	s->n++;
}

/* Feeds the last entry's changes to the ring. */
static void feed(struct fx *f, struct watches *w)
{
	for (size_t i = 0; i < f->n_events; i++)
		if (f->events[i].type == FSM_EV_CHANGE)
			watches_on_change(w, &f->events[i].change);
}

static struct service_conn *const CONN = (struct service_conn *)0x1;

static void test_ring_resume_and_lost(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	struct sent got = {0};
	struct watches w;
	uint64_t start = f->index;
	watches_init(&w, 4, &f->store, start, record_send, &got);

	for (int i = 0; i < 3; i++) { /* 6 changes: the ring keeps the last 4 */
		fx_take(f, a, 1, i == 1 ? "other" : "p/m");
		feed(f, &w);
		fx_release_ok(f, a, 1, i == 1 ? "other" : "p/m", 0);
		feed(f, &w);
	}
	assert_int_equal(watches_kept(&w), 4);
	fx_take(f, a, 7, "p/held"); /* the state a lost watch gets */
	feed(f, &w);

	/* From inside the ring: only what follows, of the prefix. */
	Raftlock__WatchRequest req = RAFTLOCK__WATCH_REQUEST__INIT;
	req.prefix = "p/";
	req.resume = true;
	req.cluster_id = FX_CLUSTER_ID;
	req.after_index = start + 4; /* the second release of "other" */
	req.after_offset = 1;
	watches_add(&w, CONN, 1, &req);
	assert_int_equal(got.n, 3);
	assert_int_equal(got.kind[0], K(GRANTED));
	assert_int_equal(got.index[0], start + 5);
	assert_int_equal(got.kind[1], K(RELEASED));
	assert_int_equal(got.kind[2], K(GRANTED));
	assert_string_equal(got.name[2], "p/held");
	assert_true(watches_cancel(&w, CONN, 1));
	assert_false(watches_cancel(&w, CONN, 1));

	/* From before the ring: HISTORY_LOST, the state, CURRENT. */
	got.n = 0;
	req.after_index = start + 1;
	watches_add(&w, CONN, 2, &req);
	assert_int_equal(got.n, 3);
	assert_int_equal(got.kind[0], K(HISTORY_LOST));
	assert_int_equal(got.index[0], start + 1);
	assert_int_equal(got.kind[1], K(HOLDING));
	assert_string_equal(got.name[1], "p/held");
	assert_int_equal(got.kind[2], K(CURRENT));
	assert_int_equal(got.index[2], f->index);
	assert_int_equal(got.offset[2], WATCH_OFFSET_END);

	/* Live: a change of the prefix goes out at once, others do not. */
	got.n = 0;
	fx_take(f, a, 1, "other");
	feed(f, &w);
	assert_int_equal(got.n, 0);
	fx_take(f, a, 1, "p/m");
	feed(f, &w);
	assert_int_equal(got.n, 1);
	assert_int_equal(got.index[0], f->index);

	/* A restore drops the history: a watch behind it is told. */
	got.n = 0;
	f->index += 10;
	DO(f, RELEASE, .session = a, .owner = 1, .name = "p/m"); /* not fed: missed */
	watches_restored(&w);
	assert_int_equal(watches_kept(&w), 0);
	assert_int_equal(got.kind[0], K(HISTORY_LOST));
	assert_int_equal(got.kind[got.n - 1], K(CURRENT));
	assert_int_equal(got.index[got.n - 1], f->index);
	assert_int_equal(watches_subscribers(&w), 1);
	watches_forget_conn(&w, CONN);
	assert_int_equal(watches_subscribers(&w), 0);
	watches_close(&w);
}

/* A position is of one cluster's history: every event names the cluster
 * (changes, the state and its CURRENT), and a resume from a position the
 * ring has goes on only when it names this node's cluster. Of another
 * (the cluster this one was restored from, whose log had other entries at
 * those indexes) or of none (a client of an older build), the node says
 * HISTORY_LOST at the position asked, of the cluster asked, then the
 * state: never the changes after a position of another history. */
static void test_resume_names_its_cluster(void **state)
{
	struct fx *f = fx_ready(state);
	struct sent got = {0};
	struct watches w;
	watches_init(&w, 16, &f->store, f->index, record_send, &got);
	uint64_t a = fx_session(f);
	fx_take(f, a, 1, "p/m");
	uint64_t start = f->index - 1; /* the grant of p/m at start + 1 */
	feed(f, &w);
	fx_release_ok(f, a, 1, "p/m", 0);
	feed(f, &w);
	fx_take(f, a, 7, "p/held");
	feed(f, &w);

	Raftlock__WatchRequest req = RAFTLOCK__WATCH_REQUEST__INIT;
	req.prefix = "p/";
	req.resume = true;
	req.after_index = start + 1; /* the grant of p/m */
	req.after_offset = 1;
	static const uint64_t asked[] = {FX_CLUSTER_ID, FX_CLUSTER_ID + 1, 0};
	for (uint64_t id = 0; id < 3; id++) {
		got.n = 0;
		req.cluster_id = asked[id];
		watches_add(&w, CONN, id, &req);
		if (asked[id] == FX_CLUSTER_ID) { /* the changes after it */
			assert_int_equal(got.n, 2);
			assert_int_equal(got.kind[0], K(RELEASED));
			assert_int_equal(got.kind[1], K(GRANTED));
			assert_int_equal(got.index[1], f->index);
			assert_int_equal(got.cluster[0], FX_CLUSTER_ID);
			assert_int_equal(got.cluster[1], FX_CLUSTER_ID);
			continue;
		}
		assert_int_equal(got.n, 3);
		assert_int_equal(got.kind[0], K(HISTORY_LOST));
		assert_int_equal(got.index[0], start + 1);
		assert_int_equal(got.offset[0], 1);
		assert_int_equal(got.cluster[0], asked[id]);
		assert_int_equal(got.kind[1], K(HOLDING));
		assert_string_equal(got.name[1], "p/held");
		assert_int_equal(got.kind[2], K(CURRENT));
		assert_int_equal(got.index[2], f->index);
		assert_int_equal(got.cluster[1], FX_CLUSTER_ID);
		assert_int_equal(got.cluster[2], FX_CLUSTER_ID);
	}

	/* Live: all three go on from here, in this cluster's history. */
	got.n = 0;
	fx_release_ok(f, a, 7, "p/held", 0);
	feed(f, &w);
	assert_int_equal(got.n, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(got.kind[i], K(RELEASED));
		assert_int_equal(got.cluster[i], FX_CLUSTER_ID);
	}

	/* A position of another cluster past this one's log: not waited
	 * for (its history never gets there), HISTORY_LOST at once. */
	got.n = 0;
	req.cluster_id = FX_CLUSTER_ID + 1;
	req.after_index = f->index + 1000;
	watches_add(&w, CONN, 9, &req);
	assert_int_equal(got.n, 2);
	assert_int_equal(got.kind[0], K(HISTORY_LOST));
	assert_int_equal(got.kind[1], K(CURRENT));
	assert_int_equal(got.index[1], f->index);
	watches_close(&w);
}

/* A send that closes its connection (service.c closes one whose unsent
 * answers pass a bound) ends the connection's watches in the middle of a
 * walk: nothing more goes to it, the other connections' watches go on, and
 * the ended subscriptions are freed after the walk (the ASan build checks
 * that none is used after it is freed). */
struct closer {
	struct watches *w;
	struct service_conn *victim;
	size_t close_at; /* close the victim at its close_at-th event (1-based) */
	size_t to_victim, to_others, after_close;
	bool closed;
};

static void closing_send(void *arg, struct service_conn *conn, uint64_t id,
			 const Raftlock__WatchEvent *ev)
{
	(void)id;
	(void)ev;
	struct closer *c = arg;
	if (conn != c->victim) {
		c->to_others++;
		return;
	}
	if (c->closed)
		c->after_close++;
	if (++c->to_victim == c->close_at) {
		c->closed = true;
		watches_forget_conn(c->w, conn);
	}
}

static struct service_conn *const OTHER = (struct service_conn *)0x2;

static void test_send_that_closes(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	for (int i = 0; i < 6; i++) {
		char name[16];
		snprintf(name, sizeof name, "p/%d", i);
		fx_take(f, a, 1, name);
	}
	struct watches w;
	struct closer c = {.w = &w, .victim = CONN};
	watches_init(&w, 16, &f->store, f->index, closing_send, &c);
	Raftlock__WatchRequest req = RAFTLOCK__WATCH_REQUEST__INIT;
	req.prefix = "p/";
	watches_add(&w, OTHER, 1, &req); /* 6 HOLDING + CURRENT */
	assert_int_equal(c.to_others, 7);
	watches_add(&w, CONN, 2, &req);
	watches_add(&w, CONN, 3, &req);
	assert_int_equal(watches_subscribers(&w), 3);

	/* Closed by the state a new watch gets: the scan stops there. */
	c.close_at = c.to_victim + 2;
	watches_add(&w, CONN, 4, &req);
	assert_true(c.closed);
	assert_int_equal(c.after_close, 0);
	assert_int_equal(watches_subscribers(&w), 1);

	/* Closed by a change, with other watches before and after it in the
	 * list: they still get it. */
	c = (struct closer){.w = &w, .victim = CONN, .close_at = 1};
	watches_add(&w, CONN, 5, &req); /* its state closes it at once */
	c = (struct closer){.w = &w, .victim = CONN};
	watches_add(&w, CONN, 6, &req);
	watches_add(&w, CONN, 7, &req);
	watches_add(&w, OTHER, 8, &req);
	c = (struct closer){.w = &w, .victim = CONN, .close_at = 1};
	fx_release_ok(f, a, 1, "p/0", 0);
	feed(f, &w);
	assert_true(c.closed);
	assert_int_equal(c.to_victim, 1);
	assert_int_equal(c.to_others, 2); /* watches 1 and 8 */
	assert_int_equal(watches_subscribers(&w), 2);
	assert_false(watches_cancel(&w, CONN, 6));
	watches_close(&w);
}

/* ------------------------------------------------------ states in pages -- */

/* What one watch got: its state's locks in name order, each once, all at
 * one position, then CURRENT at it, then changes only. */
struct paged {
	size_t holding, waiting, current, changes, lost, disorder;
	size_t room_until;   /* [0]: no room once [1] got this many changes */
	uintptr_t room_from; /* [0]: connections below it have no room */
	size_t in_state;     /* HOLDING since the state began */
	bool live;           /* a CURRENT since the last HISTORY_LOST (or a resume) */
	uint64_t state_index, current_index, current_cluster;
	char last[32];
	uint64_t last_owner; /* of the last HOLDING or WAITING of last */
	bool room;
	size_t stalled;
	/* [id]: how its watch was ended (watch_ended_cb) */
	size_t ended;
	int ended_status;
	char ended_why[384];
	struct watches *w;
	/* [id]: events it got; its connection closes at the close_at-th
	 * (1-based, 0: never), inside the send, as service.c closes one */
	size_t events, close_at;
	/* [id]: its state's first event was the first_rank-th of all
	 * watches' first ones ([0]: how many so far) */
	size_t first_rank;
};

/* A state event: names in order, one lock's holders and waiters in the
 * order of its record (owner ids that grow, in these tests). */
static void paged_state_event(struct paged *p, const Raftlock__WatchEvent *ev)
{
	int cmp = strcmp(ev->name, p->last);
	if (p->live || cmp < 0 || (cmp == 0 && ev->owner <= p->last_owner) ||
	    (p->in_state > 0 && ev->index != p->state_index))
		p->disorder++;
	p->state_index = ev->index;
	p->in_state++;
	p->last_owner = ev->owner;
	snprintf(p->last, sizeof p->last, "%s", ev->name);
}

static void paged_send(void *arg, struct service_conn *conn, uint64_t id,
		       const Raftlock__WatchEvent *ev)
{
	(void)conn;
	struct paged *p = &((struct paged *)arg)[id];
	if (p->first_rank == 0 && (ev->kind == K(HOLDING) || ev->kind == K(WAITING)))
		p->first_rank = ++((struct paged *)arg)[0].first_rank;
	switch (ev->kind) {
	case K(HOLDING):
		paged_state_event(p, ev);
		p->holding++;
		break;
	case K(WAITING):
		paged_state_event(p, ev);
		p->waiting++;
		break;
	case K(CURRENT):
		p->current++;
		p->live = true;
		p->current_index = ev->index;
		p->current_cluster = ev->cluster_id;
		if (p->in_state > 0 && ev->index != p->state_index)
			p->disorder++;
		break;
	case K(HISTORY_LOST):
		p->lost++;
		p->live = false;
		p->last[0] = '\0';
		p->in_state = 0;
		break;
	default:
		if (!p->live)
			p->disorder++; /* a change inside a state */
		p->changes++;
	}
	if (++p->events == p->close_at)
		watches_forget_conn(((struct paged *)arg)[0].w, conn);
}

static bool paged_room(void *arg, const struct service_conn *conn)
{
	const struct paged *p = arg;
	return p[0].room && (p[0].room_until == 0 || p[1].changes < p[0].room_until) &&
	       (uintptr_t)conn >= p[0].room_from;
}

static void paged_stalled(void *arg, struct service_conn *conn, const char *why)
{
	struct paged *p = arg;
	assert_non_null(why);
	p[0].stalled++;
	watches_forget_conn(p[0].w, conn);
}

static void paged_ended(void *arg, struct service_conn *conn, uint64_t id, int status,
			const char *why)
{
	(void)conn;
	struct paged *p = &((struct paged *)arg)[id];
	p->ended++;
	p->ended_status = status;
	snprintf(p->ended_why, sizeof p->ended_why, "%s", why);
}

/* A registry paced by got[0].room, whose stalls got[0] counts. */
static void paged_init(struct watches *w, size_t ring, struct fx *f, struct paged *got)
{
	got[0].w = w;
	watches_init(w, ring, &f->store, f->index, paged_send, got);
	watches_set_flow(w, paged_room, paged_stalled, paged_ended);
}

/* Watch id of conn subscribes to "p/", where take_many's locks are. */
static void watch_p_on(struct watches *w, struct service_conn *conn, uint64_t id)
{
	Raftlock__WatchRequest req = RAFTLOCK__WATCH_REQUEST__INIT;
	req.prefix = "p/";
	watches_add(w, conn, id, &req);
}

static void watch_p(struct watches *w, uint64_t id)
{
	watch_p_on(w, CONN, id);
}

/* Watch id of CONN subscribes to "p/", a state no older than index. */
static void watch_p_after(struct watches *w, uint64_t id, uint64_t index)
{
	Raftlock__WatchRequest req = RAFTLOCK__WATCH_REQUEST__INIT;
	req.prefix = "p/";
	req.after_index = index;
	watches_add(w, CONN, id, &req);
}

#define PAGED_LOCKS (2 * WATCH_STATE_PAGE + 44)

static void take_many(struct fx *f, uint64_t session)
{
	for (int i = 0; i < PAGED_LOCKS; i++) {
		char name[16];
		snprintf(name, sizeof name, "p/%03d", i);
		fx_take(f, session, 1, name);
	}
}

/* A state larger than a page: the first page at once, the others one per
 * pump, nothing of the changes made meanwhile before CURRENT, and those
 * changes right after it, the state being the one at its snapshot. */
static void test_state_in_pages(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	take_many(f, a);
	struct paged got[2] = {{.room = true}};
	struct watches w;
	paged_init(&w, 64, f, got);
	uint64_t at = f->index;
	watch_p(&w, 1);
	assert_int_equal(got[1].holding, WATCH_STATE_PAGE);
	assert_int_equal(got[1].current, 0);
	assert_int_equal(watches_states(&w), 1);

	/* Meanwhile: a lock already sent is released, a new one taken. */
	fx_release_ok(f, a, 1, "p/000", 0);
	feed(f, &w);
	fx_take(f, a, 1, "p/zzz");
	feed(f, &w);
	assert_int_equal(got[1].changes, 0);

	assert_true(watches_pump(&w, 1000));
	assert_int_equal(got[1].holding, 2 * WATCH_STATE_PAGE);
	assert_false(watches_pump(&w, 1001)); /* the last page: done */
	assert_int_equal(got[1].holding, PAGED_LOCKS);
	assert_int_equal(got[1].current, 1);
	assert_int_equal(got[1].current_index, at);
	assert_int_equal(got[1].changes, 2);
	assert_int_equal(got[1].disorder, 0);
	assert_int_equal(watches_states(&w), 0);

	/* Live again: the next change goes out at once. */
	fx_release_ok(f, a, 1, "p/zzz", 0);
	feed(f, &w);
	assert_int_equal(got[1].changes, 3);
	watches_close(&w);
}

/* No room: a page ends at the lock that filled it and nothing more goes
 * out; a client that takes nothing of its state for WATCH_STATE_STALL_MS
 * is given up, and its reader freed. */
static void test_state_waits_for_room(void **state)
{
	struct fx *f = fx_ready(state);
	take_many(f, fx_session(f));
	struct paged got[2] = {{.room = false}};
	struct watches w;
	paged_init(&w, 64, f, got);
	watch_p(&w, 1); /* the first page goes at once, ended by the room */
	assert_int_equal(got[1].holding, 1);
	assert_false(watches_pump(&w, 5000));
	assert_false(watches_pump(&w, 5000 + WATCH_STATE_STALL_MS - 1));
	assert_int_equal(got[1].holding, 1);
	assert_int_equal(got[0].stalled, 0);
	got[0].room = true; /* it read: progress, the clock starts again */
	watches_pump(&w, 5000 + WATCH_STATE_STALL_MS);
	assert_int_equal(got[1].holding, 1 + WATCH_STATE_PAGE);
	got[0].room = false;
	watches_pump(&w, 5000 + 2 * WATCH_STATE_STALL_MS - 1);
	assert_int_equal(got[0].stalled, 0);
	watches_pump(&w, 5000 + 2 * WATCH_STATE_STALL_MS);
	assert_int_equal(got[0].stalled, 1);
	assert_int_equal(watches_states(&w), 0);
	assert_int_equal(w.states_reading, 0);
	assert_int_equal(watches_subscribers(&w), 0);
	watches_close(&w);
}

/* More states at once than readers: the others wait for one, and every
 * watch gets its whole state once. */
static void test_states_share_the_readers(void **state)
{
	struct fx *f = fx_ready(state);
	take_many(f, fx_session(f));
	enum { N = WATCH_STATES_READING + 3 };
	struct paged got[N + 1] = {{.room = true}};
	struct watches w;
	paged_init(&w, 64, f, got);
	for (uint64_t id = 1; id <= N; id++)
		watch_p_on(&w, (struct service_conn *)(uintptr_t)(0x10 + id), id);
	assert_int_equal(w.states_reading, WATCH_STATES_READING);
	assert_int_equal(watches_states(&w), N);
	for (int turn = 0; turn < 20 && watches_states(&w) > 0; turn++) {
		assert_true(w.states_reading <= WATCH_STATES_READING);
		watches_pump(&w, 1000 + (uint64_t)turn);
	}
	assert_int_equal(watches_states(&w), 0);
	for (int id = 1; id <= N; id++) {
		assert_int_equal(got[id].holding, PAGED_LOCKS);
		assert_int_equal(got[id].current, 1);
		assert_int_equal(got[id].disorder, 0);
	}
	watches_close(&w);
}

/* More changes while a state goes out than the ring keeps: the state's
 * own backlog has them and they follow its CURRENT; past the backlog's
 * bound too, the watch is told (HISTORY_LOST) and gets the newer state,
 * never a gap. */
static void test_state_outrun_by_the_ring(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	take_many(f, a);
	for (size_t backlog = 64; backlog >= 4; backlog /= 16) {
		struct paged got[2] = {{.room = true}};
		struct watches w;
		paged_init(&w, 4, f, got);
		w.backlog_max = backlog;
		watch_p(&w, 1);
		for (int i = 0; i < 6; i++) { /* 12 changes: the ring keeps 4 */
			fx_release_ok(f, a, 1, i % 2 ? "p/001" : "p/000", 0);
			feed(f, &w);
			fx_take(f, a, 1, i % 2 ? "p/001" : "p/000");
			feed(f, &w);
		}
		for (int turn = 0; turn < 10 && watches_states(&w) > 0; turn++)
			watches_pump(&w, 1000 + (uint64_t)turn);
		assert_int_equal(watches_states(&w), 0);
		assert_int_equal(got[1].disorder, 0);
		if (backlog == 64) {
			assert_int_equal(got[1].lost, 0);
			assert_int_equal(got[1].current, 1);
			assert_int_equal(got[1].holding, PAGED_LOCKS);
			assert_int_equal(got[1].changes, 12);
		} else {
			assert_int_equal(got[1].lost, 1);
			assert_int_equal(got[1].current, 2);
			assert_int_equal(got[1].current_index, f->index);
			assert_int_equal(got[1].holding, 2 * PAGED_LOCKS);
			assert_int_equal(got[1].changes, 0);
		}
		watches_close(&w);
	}
}

/* A backlog of large changes is bounded in bytes, not only in count:
 * changes whose names and values pass backlog_bytes_max (far fewer than
 * backlog_max) must come from the ring, which here kept too few:
 * HISTORY_LOST and the newer state, never a gap. Half as many are kept
 * and follow the CURRENT. */
static void test_backlog_bounded_in_bytes(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	take_many(f, a);
	static char value[RAFTLOCK_VALUE_MAX + 1];
	memset(value, 'v', RAFTLOCK_VALUE_MAX);
	Raftlock__Result r = DO(f, ACQUIRE, .session = a, .owner = 2, .name = "p/leader");
	assert_int_equal(r.status, 0);
	enum { BOUND = 64 << 10, OVER = BOUND / RAFTLOCK_VALUE_MAX + 1 };
	for (int n = OVER / 2; n <= OVER; n += OVER - OVER / 2) {
		struct paged got[2] = {{.room = true}};
		struct watches w;
		paged_init(&w, 4, f, got);
		w.backlog_bytes_max = BOUND;
		watch_p(&w, 1);               /* its first page: the state holds its snapshot */
		for (int i = 0; i < n; i++) { /* a value of 4 KiB each */
			value[0] = (char)('a' + i % 26);
			assert_int_equal(DO(f, PROCLAIM, .session = a, .owner = 2,
					    .name = "p/leader", .token = r.token, .value = value)
						 .status,
					 0);
			feed(f, &w);
		}
		for (int turn = 0; turn < 10 && watches_states(&w) > 0; turn++)
			watches_pump(&w, 1000 + (uint64_t)turn);
		assert_int_equal(watches_states(&w), 0);
		assert_int_equal(got[1].disorder, 0);
		if (n < OVER) {
			assert_int_equal(got[1].lost, 0);
			assert_int_equal(got[1].current, 1);
			assert_int_equal(got[1].changes, n);
		} else {
			assert_int_equal(got[1].lost, 1);
			assert_int_equal(got[1].current, 2);
			assert_int_equal(got[1].current_index, f->index);
			assert_int_equal(got[1].changes, 0);
		}
		watches_close(&w);
	}
}

/* A restore while a state goes out: the changes up to the restored
 * position were never applied here, so the watch is told (HISTORY_LOST)
 * at once, its old snapshot let go, and gets the restored state, then the
 * changes after it. */
static void test_state_across_a_restore(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	take_many(f, a);
	struct paged got[2] = {{.room = true}};
	struct watches w;
	paged_init(&w, 64, f, got);
	watch_p(&w, 1);
	f->index += 10;
	DO(f, RELEASE, .session = a, .owner = 1, .name = "p/000"); /* not fed: missed */
	watches_restored(&w);
	assert_int_equal(got[1].lost, 1);
	uint64_t restored = f->index;
	fx_release_ok(f, a, 1, "p/001", 0);
	feed(f, &w);
	for (int turn = 0; turn < 10 && watches_states(&w) > 0; turn++)
		watches_pump(&w, 1000 + (uint64_t)turn);
	assert_int_equal(watches_states(&w), 0);
	assert_int_equal(got[1].disorder, 0);
	assert_int_equal(got[1].lost, 1);
	assert_int_equal(got[1].current, 1);
	assert_int_equal(got[1].current_index, restored);
	assert_int_equal(got[1].holding, WATCH_STATE_PAGE + PAGED_LOCKS - 1);
	assert_int_equal(got[1].changes, 1);
	watches_close(&w);
}

/* One connection holds at most WATCH_STATES_PER_CONN snapshots; its other
 * states wait, and all end whole. A state not taken within
 * WATCH_STATE_MAX_MS is given up, however steadily it is read. */
static void test_state_bounds_per_client(void **state)
{
	struct fx *f = fx_ready(state);
	take_many(f, fx_session(f));
	struct paged got[5] = {{.room = true}};
	struct watches w;
	paged_init(&w, 64, f, got);
	for (uint64_t id = 1; id <= 4; id++)
		watch_p(&w, id);
	assert_int_equal(w.states_reading, WATCH_STATES_PER_CONN);
	for (int turn = 0; turn < 20 && watches_states(&w) > 0; turn++) {
		assert_true(w.states_reading <= WATCH_STATES_PER_CONN);
		watches_pump(&w, 1000 + (uint64_t)turn);
	}
	for (int id = 1; id <= 4; id++)
		assert_int_equal(got[id].holding, PAGED_LOCKS);

	watch_p(&w, 1); /* the same id again: a new subscription */
	watches_pump(&w, 5000);
	assert_int_equal(got[0].stalled, 0);
	watches_pump(&w, 5000 + WATCH_STATE_MAX_MS); /* room, but too late */
	assert_int_equal(got[0].stalled, 1);
	assert_int_equal(w.states_reading, 0);

	/* The store closes (the node stops): the states let go of it, and
	 * none takes it again. */
	got[0].room = false;
	watch_p(&w, 2);
	watch_p(&w, 3);
	assert_int_equal(w.states_reading, 2);
	watches_end_states(&w);
	assert_int_equal(w.states_reading, 0);
	got[0].room = true;
	watches_pump(&w, 6000);
	assert_int_equal(w.states_reading, 0);
	watches_close(&w);
}

/* The changes kept during a state go out at the pace of the room too. */
static void test_backlog_waits_for_room(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	take_many(f, a);
	struct paged got[2] = {{.room = true}};
	struct watches w;
	paged_init(&w, 1024, f, got);
	watch_p(&w, 1);
	for (int i = 0; i < WATCH_STATE_PAGE + 10; i++) { /* 2 changes each */
		fx_release_ok(f, a, 1, "p/000", 0);
		feed(f, &w);
		fx_take(f, a, 1, "p/000");
		feed(f, &w);
	}
	got[0].room_until = 100; /* room goes during the changes */
	watches_pump(&w, 1000);
	watches_pump(&w, 1001); /* the last page, CURRENT, a page of changes */
	assert_int_equal(got[1].current, 1);
	assert_int_equal(got[1].changes, WATCH_STATE_PAGE);
	watches_pump(&w, 1002);
	assert_int_equal(got[1].changes, WATCH_STATE_PAGE);
	fx_release_ok(f, a, 1, "p/000", 0); /* behind the rest, in order */
	feed(f, &w);
	got[0].room_until = 0;
	while (watches_states(&w) > 0)
		watches_pump(&w, 1003);
	assert_int_equal(got[1].changes, 2 * (WATCH_STATE_PAGE + 10) + 1);
	assert_int_equal(got[1].disorder, 0);
	watches_close(&w);
}

/* A resume from inside the ring gets its changes at the pace of the room,
 * in order, then goes live; the ring passing its position meanwhile makes
 * it HISTORY_LOST, never a gap. */
static void test_resume_paced_from_the_ring(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	struct paged got[2] = {{.room = true}};
	struct watches w;
	paged_init(&w, 4096, f, got);
	uint64_t start = f->index;
	for (int i = 0; i < 3 * WATCH_STATE_PAGE; i++) { /* 768 changes, half not p/ */
		fx_take(f, a, 1, i % 2 ? "q/x" : "p/x");
		feed(f, &w);
		fx_release_ok(f, a, 1, i % 2 ? "q/x" : "p/x", 0);
		feed(f, &w);
	}
	got[0].room_until = 100;
	got[1].live = true; /* a resume: changes only, no state */
	Raftlock__WatchRequest req = RAFTLOCK__WATCH_REQUEST__INIT;
	req.prefix = "p/";
	req.resume = true;
	req.cluster_id = FX_CLUSTER_ID;
	req.after_index = start;
	req.after_offset = WATCH_OFFSET_END;
	watches_add(&w, CONN, 1, &req);
	assert_int_equal(got[1].changes, WATCH_STATE_PAGE); /* then no room */
	assert_int_equal(watches_states(&w), 1);
	fx_take(f, a, 1, "p/y"); /* live meanwhile: behind the rest */
	feed(f, &w);
	got[0].room_until = 0;
	for (int turn = 0; turn < 10 && watches_states(&w) > 0; turn++)
		watches_pump(&w, 1000 + (uint64_t)turn);
	assert_int_equal(watches_states(&w), 0);
	assert_int_equal(got[1].changes, 3 * WATCH_STATE_PAGE + 1);
	assert_int_equal(got[1].disorder, 0);
	assert_int_equal(got[1].lost, 0);
	fx_release_ok(f, a, 1, "p/y", 0); /* live again */
	feed(f, &w);
	assert_int_equal(got[1].changes, 3 * WATCH_STATE_PAGE + 2);
	watches_close(&w);
}

/* A state asked no older than an index this node has not applied yet (the
 * client saw one on a node further ahead) waits for it. */
static void test_state_waits_for_its_index(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	take_many(f, a);
	struct paged got[2] = {{.room = true}};
	struct watches w;
	paged_init(&w, 64, f, got);
	uint64_t after = f->index + 2;
	watch_p_after(&w, 1, after);
	watches_pump(&w, 1000);
	assert_int_equal(got[1].holding, 0);
	fx_release_ok(f, a, 1, "p/000", 0);
	feed(f, &w);
	watches_pump(&w, 1001);
	assert_int_equal(got[1].holding, 0);
	fx_release_ok(f, a, 1, "p/001", 0);
	feed(f, &w);
	for (int turn = 0; turn < 10 && watches_states(&w) > 0; turn++)
		watches_pump(&w, 1002 + (uint64_t)turn);
	assert_int_equal(got[1].holding, PAGED_LOCKS - 2);
	assert_int_equal(got[1].current_index, after);
	assert_int_equal(got[1].changes, 0);
	assert_int_equal(got[1].disorder, 0);
	watches_close(&w);
}

/* A state is of a cluster's history, which a node that has not applied
 * its INIT does not know yet: every state waits for it there (the bound
 * of an index's wait, ended with a message that says so), then names the
 * id INIT gave. A state asked no older than an index is held back for it
 * only when the index is of this cluster's history, or of none named (a
 * client of an older build); one of another cluster (restored since)
 * holds nothing. */
static void test_state_waits_for_its_cluster(void **state)
{
	struct fx *f = *state; /* INIT not applied yet: no cluster id */
	f->now = 1000;
	struct paged got[6] = {{.room = true}};
	struct watches w;
	paged_init(&w, 64, f, got);
	Raftlock__WatchRequest req = RAFTLOCK__WATCH_REQUEST__INIT;
	req.prefix = "p/";
	watches_add(&w, CONN, 5, &req); /* no floor: waits too */
	req.after_index = 1000;
	req.cluster_id = FX_CLUSTER_ID + 1;
	watches_add(&w, CONN, 1, &req);
	req.resume = true;
	req.cluster_id = FX_CLUSTER_ID;
	watches_add(&w, CONN, 2, &req); /* HISTORY_LOST, then waits as well */
	req.resume = false;
	watches_add(&w, CONN, 3, &req);
	assert_int_equal(got[2].lost, 1);
	watches_pump(&w, 1000);
	watches_pump(&w, 1000 + WATCH_INDEX_WAIT_MS - 1);
	for (int id = 1; id <= 5; id++) {
		assert_int_equal(got[id].current, 0);
		assert_int_equal(got[id].ended, 0);
	}
	watches_pump(&w, 1000 + WATCH_INDEX_WAIT_MS);
	for (int id = 1; id <= 5; id++)
		assert_int_equal(got[id].ended, id != 4);
	assert_int_equal(got[5].ended_status, RAFTLOCK_EUNAVAILABLE);
	assert_non_null(strstr(got[5].ended_why, "not yet its cluster's first entry"));

	/* Once INIT applied: the state names the cluster; a floor of another
	 * cluster holds nothing, one of this cluster (or of none) holds. */
	req.cluster_id = FX_CLUSTER_ID + 1;
	watches_add(&w, CONN, 1, &req);
	fx_init(f, FX_FLOOR);
	req.cluster_id = FX_CLUSTER_ID;
	watches_add(&w, CONN, 2, &req);
	req.cluster_id = 0;
	watches_add(&w, CONN, 4, &req);
	req.after_index = 0;
	watches_add(&w, CONN, 5, &req);
	for (int turn = 0; turn < 4; turn++)
		watches_pump(&w, 2000 + (uint64_t)turn);
	for (int id = 1; id <= 5; id += 4) {
		assert_int_equal(got[id].current, 1);
		assert_int_equal(got[id].current_index, f->index);
		assert_int_equal(got[id].current_cluster, FX_CLUSTER_ID);
	}
	assert_int_equal(got[2].current, 0);
	assert_int_equal(got[4].current, 0);
	f->index = 999;
	fx_session(f); /* applied: 1000 */
	for (int turn = 0; turn < 4; turn++)
		watches_pump(&w, 3000 + (uint64_t)turn);
	for (int id = 2; id <= 4; id += 2) {
		assert_int_equal(got[id].current, 1);
		assert_int_equal(got[id].current_index, 1000);
	}
	watches_close(&w);
}

/* A state whose index this node never reaches (a node cut off from its
 * leader, or an index it will never have) is not kept waiting for ever:
 * after WATCH_INDEX_WAIT_MS its watch alone ends with EUNAVAILABLE and a
 * message, not its connection; the node's readers are untouched. */
static void test_state_index_wait_ends(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	take_many(f, a);
	struct paged got[3] = {{.room = true}};
	struct watches w;
	paged_init(&w, 64, f, got);
	uint64_t after = f->index + 1000;
	watch_p_after(&w, 1, after);
	watch_p(&w, 2); /* another watch of the same client */
	watches_pump(&w, 1000);
	fx_release_ok(f, a, 1, "p/000", 0); /* progress, but not that far */
	feed(f, &w);
	for (uint64_t t = 1001; watches_states(&w) > 1; t++)
		watches_pump(&w, t);
	assert_int_equal(got[2].current, 1);
	watches_pump(&w, 1000 + WATCH_INDEX_WAIT_MS - 1);
	assert_int_equal(got[1].ended, 0);
	assert_int_equal(watches_subscribers(&w), 2);
	assert_int_equal(watches_index_wait_ends(&w), 0);
	watches_pump(&w, 1000 + WATCH_INDEX_WAIT_MS);
	assert_int_equal(got[1].ended, 1);
	assert_int_equal(got[1].ended_status, RAFTLOCK_EUNAVAILABLE);
	assert_int_equal(watches_index_wait_ends(&w), 1); /* counted, for the metrics */
	assert_int_equal(watches_state_wait_ends(&w), 0);
	char want[64];
	snprintf(want, sizeof want, "applied index %llu, not yet %llu",
		 (unsigned long long)f->index, (unsigned long long)after);
	assert_non_null(strstr(got[1].ended_why, want));
	assert_int_equal(got[1].holding, 0);
	assert_int_equal(got[0].stalled, 0);
	assert_int_equal(watches_states(&w), 0);
	assert_int_equal(w.states_reading, 0);
	assert_int_equal(watches_subscribers(&w), 1); /* the other one goes on */
	fx_release_ok(f, a, 1, "p/001", 0);
	feed(f, &w);
	assert_int_equal(got[2].changes, 2);
	assert_int_equal(got[1].changes, 0);
	watches_pump(&w, 2 * WATCH_INDEX_WAIT_MS);
	assert_int_equal(got[1].ended, 1);
	assert_int_equal(watches_index_wait_ends(&w), 1);
	watches_close(&w);
}

/* Readers go to the states waiting for one, the oldest first: a new watch
 * does not take a reader freed before an older waiter had it. A state
 * that gets none within WATCH_STATE_WAIT_MS (here every reader is held by
 * states whose clients read nothing, and no stall ends them) ends its
 * watch alone with EOVERLOAD. */
static void test_reader_wait_ends(void **state)
{
	struct fx *f = fx_ready(state);
	take_many(f, fx_session(f));
	enum { HOLDERS = WATCH_STATES_READING, OLD = HOLDERS + 1, NEW = HOLDERS + 2 };
	struct paged got[NEW + 1] = {{.room = true, .room_from = 0x100}};
	struct watches w;
	got[0].w = &w;
	watches_init(&w, 64, &f->store, f->index, paged_send, got);
	watches_set_flow(&w, paged_room, NULL, paged_ended); /* nobody given up */
	for (uint64_t id = 1; id <= HOLDERS; id++)
		watch_p_on(&w, (struct service_conn *)(uintptr_t)(0x10 + id), id);
	assert_int_equal(w.states_reading, WATCH_STATES_READING);
	struct service_conn *old = (struct service_conn *)0x100;
	struct service_conn *young = (struct service_conn *)0x101;
	watch_p_on(&w, old, OLD);
	watches_pump(&w, 1000);
	assert_int_equal(got[OLD].holding, 0);

	watches_forget_conn(&w, (struct service_conn *)(uintptr_t)0x11); /* a reader frees */
	watch_p_on(&w, young, NEW);
	assert_int_equal(got[NEW].holding, 0); /* behind the older waiter */
	watches_pump(&w, 1001);
	assert_int_equal(got[OLD].holding, WATCH_STATE_PAGE);
	assert_int_equal(got[NEW].holding, 0);

	got[0].room_from = (uintptr_t)young; /* OLD reads no more either */
	watches_pump(&w, 1001 + WATCH_STATE_WAIT_MS - 1);
	assert_int_equal(got[NEW].ended, 0);
	assert_int_equal(watches_state_wait_ends(&w), 0);
	watches_pump(&w, 1001 + WATCH_STATE_WAIT_MS);
	assert_int_equal(got[NEW].ended, 1);
	assert_int_equal(got[NEW].ended_status, RAFTLOCK_EOVERLOAD);
	assert_int_equal(watches_state_wait_ends(&w), 1); /* counted, for the metrics */
	assert_int_equal(watches_index_wait_ends(&w), 0);
	assert_non_null(strstr(got[NEW].ended_why, "no snapshot reader"));
	assert_int_equal(got[NEW].holding, 0);
	assert_int_equal(got[OLD].ended, 0);
	assert_int_equal(got[OLD].holding, WATCH_STATE_PAGE); /* holds its reader */
	for (uint64_t id = 2; id <= HOLDERS; id++)
		assert_int_equal(got[id].ended, 0);
	assert_int_equal(watches_subscribers(&w), HOLDERS); /* 7 holders, OLD */
	assert_int_equal(w.states_reading, WATCH_STATES_READING);
	watches_close(&w);
}

/* The log lines of what runs between stderr_capture and stderr_lines. */
static int stderr_capture(int *saved)
{
	char path[] = "/tmp/test_fsm_watch.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	fflush(stderr);
	*saved = dup(STDERR_FILENO);
	assert_true(*saved >= 0);
	dup2(fd, STDERR_FILENO);
	return fd;
}

static void stderr_lines(int fd, int saved, char *buf, size_t len)
{
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	ssize_t n = pread(fd, buf, len - 1, 0);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
}

/* A state that waited for room, then for its index, ends by the bound of
 * the whole wait (EOVERLOAD, counted so) with a message, and a log line,
 * that say what it waited for, not a reader it never waited for. */
static void test_room_wait_ends_named(void **state)
{
	struct fx *f = fx_ready(state); /* no lock: the state never starts */
	struct paged got[2] = {{.room = true}};
	struct watches w;
	paged_init(&w, 64, f, got);
	watch_p_after(&w, 1, f->index + 1000);
	got[0].room = false;
	watches_pump(&w, 1000);
	watches_pump(&w, 1000 + WATCH_STATE_WAIT_MS - WATCH_INDEX_WAIT_MS / 2);
	got[0].room = true;
	watches_pump(&w, 1000 + WATCH_STATE_WAIT_MS - WATCH_INDEX_WAIT_MS / 3);
	assert_int_equal(got[1].ended, 0);
	char log[4096];
	int saved, fd = stderr_capture(&saved);
	watches_pump(&w, 1000 + WATCH_STATE_WAIT_MS);
	stderr_lines(fd, saved, log, sizeof log);
	assert_int_equal(got[1].ended, 1);
	assert_int_equal(got[1].ended_status, RAFTLOCK_EOVERLOAD);
	assert_int_equal(watches_state_wait_ends(&w), 1);
	assert_int_equal(watches_index_wait_ends(&w), 0);
	const char *said[] = {got[1].ended_why, strstr(log, "1 watch ended (RAFTLOCK_EOVERLOAD)")};
	for (size_t i = 0; i < 2; i++) {
		assert_non_null(said[i]);
		assert_non_null(strstr(said[i], "its connection had no room"));
		assert_non_null(strstr(said[i], "had not applied its index"));
		assert_null(strstr(said[i], "reader"));
	}
	watches_close(&w);
}

/* A connection's states take its share of the readers the oldest first
 * too: a reader its connection let go of while an older state of it waits
 * for its share goes to that state, not to a newer one of the connection,
 * whether it was let go of between pumps (a cancel, then a new watch) or
 * in the middle of one (a state that ends, then a newer waiting one). */
static void test_share_goes_to_the_oldest_of_a_connection(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = fx_session(f);
	take_many(f, a); /* a state is 3 pages */
	struct paged got[9] = {{.room = true}};
	struct watches w;
	paged_init(&w, 64, f, got);
	watch_p(&w, 1);
	watch_p(&w, 2);
	watch_p(&w, 3); /* waits for its connection's share */
	assert_int_equal(got[3].holding, 0);
	assert_true(watches_cancel(&w, CONN, 1));
	watch_p(&w, 4);
	assert_int_equal(got[4].holding, 0); /* behind 3 */
	watches_pump(&w, 1000);
	assert_int_equal(got[3].holding, WATCH_STATE_PAGE);
	assert_int_equal(got[4].holding, 0);
	for (uint64_t t = 1001; t < 1101 && watches_states(&w) > 0; t++)
		watches_pump(&w, t);
	assert_int_equal(watches_states(&w), 0);
	for (int id = 2; id <= 4; id++)
		assert_int_equal(got[id].holding, PAGED_LOCKS);

	/* 5 waits for its index, 6 and 7 read, 8 waits for the share; then
	 * 5 waits for the share, and 6 and 7 end in the pump that meets
	 * them after 5 and before 8. */
	watch_p_after(&w, 5, f->index + 1);
	watch_p(&w, 6);
	watch_p(&w, 7);
	watch_p(&w, 8);
	fx_take(f, a, 1, "q/x"); /* the index 5 waits for, not one of its locks */
	feed(f, &w);
	watches_pump(&w, 2000); /* 6 and 7: their second pages */
	assert_int_equal(got[5].holding + got[8].holding, 0);
	assert_true(watches_pump(&w, 2001)); /* 6 and 7: their last pages */
	assert_int_equal(got[6].current + got[7].current, 2);
	assert_int_equal(got[8].holding, 0); /* behind 5 */
	watches_pump(&w, 2002);
	assert_int_equal(got[5].holding, WATCH_STATE_PAGE);
	for (uint64_t t = 2003; t < 2103 && watches_states(&w) > 0; t++)
		watches_pump(&w, t);
	assert_int_equal(watches_states(&w), 0);
	for (int id = 5; id <= 8; id++) {
		assert_int_equal(got[id].holding, PAGED_LOCKS);
		assert_int_equal(got[id].disorder, 0);
	}
	watches_close(&w);
}

/* Readers go to the states in the order they were asked for, whatever
 * the connection, however readers are let go of (states that end in a
 * pump, a cancel, a closed connection) and whenever new watches come: a
 * new watch finds no reader free while older states wait for one, so it
 * need not look for them (no walk of the subscriptions per watch). */
static void test_readers_go_oldest_first(void **state)
{
	struct fx *f = fx_ready(state);
	take_many(f, fx_session(f)); /* a state is 3 pages */
	enum { FIRST = 2 * WATCH_STATES_READING, LATE = 6, N = FIRST + LATE };
	struct paged got[N + 1] = {{.room = true}};
	struct watches w;
	paged_init(&w, 64, f, got);
	struct service_conn *conn[N + 1];
	for (uint64_t id = 1; id <= N; id++)
		conn[id] = (struct service_conn *)(uintptr_t)(0x100 + id);
	for (uint64_t id = 1; id <= FIRST; id++)
		watch_p_on(&w, conn[id], id);
	assert_int_equal(w.states_reading, WATCH_STATES_READING);
	assert_int_equal(got[0].first_rank, WATCH_STATES_READING);
	uint64_t late = FIRST + 1;
	assert_true(watches_cancel(&w, conn[2], 2));
	watch_p_on(&w, conn[late], late);
	late++;
	watches_forget_conn(&w, conn[3]);
	watch_p_on(&w, conn[late], late);
	late++;
	for (uint64_t t = 1000; t < 1100 && watches_states(&w) > 0; t++) {
		watches_pump(&w, t);
		if (late <= N) { /* between pumps that let readers go */
			watch_p_on(&w, conn[late], late);
			late++;
		}
	}
	assert_int_equal(watches_states(&w), 0);
	size_t rank = 0;
	for (uint64_t id = 1; id <= N; id++) {
		if (id == 2 || id == 3)
			continue; /* ended while they read */
		assert_true(got[id].first_rank > rank);
		rank = got[id].first_rank;
		assert_int_equal(got[id].holding, PAGED_LOCKS);
		assert_int_equal(got[id].disorder, 0);
	}
	assert_int_equal(rank, N);
	watches_close(&w);
}

/* A reader let go of as its connection closed counts in no connection's
 * share: a new connection at the closed one's address takes its share at
 * once, not after the next pump. */
static void test_closed_conn_keeps_no_share(void **state)
{
	struct fx *f = fx_ready(state);
	take_many(f, fx_session(f)); /* a state is 3 pages */
	struct paged got[8] = {{.room = true}};
	struct watches w;
	paged_init(&w, 64, f, got);
	struct service_conn *busy = (struct service_conn *)0x200;
	struct service_conn *closed = (struct service_conn *)0x100;
	for (uint64_t id = 1; id <= 3; id++) /* 3 waits for its share */
		watch_p_on(&w, busy, id);
	watch_p_on(&w, closed, 4);
	watch_p_on(&w, closed, 5);
	assert_int_equal(w.states_reading, 4);
	watches_forget_conn(&w, closed); /* of no use to 3 (busy's share): free */
	watch_p_on(&w, closed, 6);       /* a new connection, at the same address */
	watch_p_on(&w, closed, 7);
	assert_int_equal(got[6].holding, WATCH_STATE_PAGE);
	assert_int_equal(got[7].holding, WATCH_STATE_PAGE);
	for (uint64_t t = 1000; t < 1100 && watches_states(&w) > 0; t++)
		watches_pump(&w, t);
	assert_int_equal(watches_states(&w), 0);
	for (uint64_t id = 1; id <= 7; id++)
		if (id != 4 && id != 5)
			assert_int_equal(got[id].holding, PAGED_LOCKS);
	watches_close(&w);
}

static bool any_reader_kept(const struct watches *w)
{
	for (size_t i = 0; i < WATCH_STATES_READING; i++)
		if (w->kept[i])
			return true;
	return false;
}

/* A state that waits for its connection's share can take no reader of
 * another connection: one let go of while only such states wait is free
 * at once (a new watch of a third connection takes it before any pump),
 * not kept for them until the next pump. So whether the share-waiter
 * began to wait while a reader was free or none was; its turn within
 * its connection stays the oldest first. */
static void test_share_waiters_keep_no_other_reader(void **state)
{
	struct fx *f = fx_ready(state);
	take_many(f, fx_session(f)); /* a state is 3 pages */
	enum { SHARER = 3, LATE = WATCH_STATES_READING + 2, SHARER2, LATE2 };
	struct paged got[LATE2 + 1] = {{.room = true}};
	struct watches w;
	paged_init(&w, 64, f, got);
	watch_p(&w, 1);
	watch_p(&w, 2);
	watch_p(&w, SHARER); /* a reader is free: it waits for CONN's share */
	for (uint64_t id = SHARER + 1; id < LATE; id++)
		watch_p_on(&w, (struct service_conn *)(uintptr_t)(0x10 + id), id);
	assert_int_equal(w.states_reading, WATCH_STATES_READING);
	assert_true(watches_cancel(&w, (struct service_conn *)(uintptr_t)0x14, 4));
	assert_false(any_reader_kept(&w));
	watch_p_on(&w, (struct service_conn *)0x100, LATE);
	assert_int_equal(got[LATE].holding, WATCH_STATE_PAGE); /* at once */

	watch_p(&w, SHARER2); /* none is free: it waits for CONN's share too */
	assert_true(watches_cancel(&w, (struct service_conn *)(uintptr_t)0x15, 5));
	assert_false(any_reader_kept(&w));
	watch_p_on(&w, (struct service_conn *)0x101, LATE2);
	assert_int_equal(got[LATE2].holding, WATCH_STATE_PAGE);
	assert_int_equal(got[SHARER].holding + got[SHARER2].holding, 0);

	for (uint64_t t = 1000; t < 1100 && watches_states(&w) > 0; t++)
		watches_pump(&w, t);
	assert_int_equal(watches_states(&w), 0);
	for (uint64_t id = 1; id <= LATE2; id++) {
		if (id == 4 || id == 5)
			continue; /* cancelled */
		assert_int_equal(got[id].holding, PAGED_LOCKS);
		assert_int_equal(got[id].disorder, 0);
	}
	assert_true(got[SHARER].first_rank < got[SHARER2].first_rank);
	watches_close(&w);
}

/* Each bound counts from the first time the state waited, whatever the
 * reasons since: a state whose connection's room comes and goes while the
 * node lags still ends at WATCH_INDEX_WAIT_MS, and one that waits for a
 * reader and for room by turns ends at WATCH_STATE_WAIT_MS (when each
 * change of reason started the count again, neither ever ended). */
static void test_wait_bounds_through_churn(void **state)
{
	struct fx *f = fx_ready(state);
	take_many(f, fx_session(f));
	struct paged got[WATCH_STATES_READING + 2] = {{.room = true}};
	struct watches w;
	paged_init(&w, 64, f, got);
	watch_p_after(&w, 1, f->index + 1000);
	uint64_t t = 1000;
	for (; got[1].ended == 0 && t <= 1000 + WATCH_INDEX_WAIT_MS + 20; t += 10) {
		got[0].room = (t / 10) % 2 == 0; /* room, none, room, ... */
		watches_pump(&w, t);
	}
	assert_int_equal(got[1].ended, 1);
	assert_int_equal(got[1].ended_status, RAFTLOCK_EUNAVAILABLE);
	assert_true(t - 10 >= 1000 + WATCH_INDEX_WAIT_MS);
	assert_true(t - 10 <= 1000 + WATCH_INDEX_WAIT_MS + 10);
	assert_int_equal(watches_index_wait_ends(&w), 1);
	assert_int_equal(watches_state_wait_ends(&w), 0);
	watches_close(&w);

	/* every reader held by clients that read nothing (never given up
	 * here); the last watch's connection has room by turns */
	enum { LAST = WATCH_STATES_READING + 1 };
	memset(got, 0, sizeof got);
	got[0].room = true;
	got[0].w = &w;
	watches_init(&w, 64, &f->store, f->index, paged_send, got);
	watches_set_flow(&w, paged_room, NULL, paged_ended);
	for (uint64_t id = 1; id <= WATCH_STATES_READING; id++)
		watch_p_on(&w, (struct service_conn *)(uintptr_t)(0x10 + id), id);
	watch_p_on(&w, (struct service_conn *)0x100, LAST);
	for (t = 1000; got[LAST].ended == 0 && t <= 1000 + WATCH_STATE_WAIT_MS + 20; t += 10) {
		got[0].room_from = (t / 10) % 2 == 0 ? 0x100 : 0x101; /* 0x100: room by turns */
		watches_pump(&w, t);
	}
	assert_int_equal(got[LAST].ended, 1);
	assert_int_equal(got[LAST].ended_status, RAFTLOCK_EOVERLOAD);
	assert_true(t - 10 >= 1000 + WATCH_STATE_WAIT_MS);
	assert_true(t - 10 <= 1000 + WATCH_STATE_WAIT_MS + 10);
	for (uint64_t id = 1; id <= WATCH_STATES_READING; id++)
		assert_int_equal(got[id].ended, 0);
	assert_int_equal(watches_state_wait_ends(&w), 1);
	assert_int_equal(watches_index_wait_ends(&w), 0);
	watches_close(&w);
}

/* A watch of CONN at each of N pumps within a second ends by its index's
 * bound, the last state there is: the last N - LOG_RATE_BURST are held
 * back from the log. */
static void end_by_the_index_bound(struct fx *f, struct watches *w, struct paged *got, size_t n)
{
	paged_init(w, 64, f, got);
	uint64_t t = 1000;
	for (uint64_t id = 1; id <= n; id++) { /* each first waits at its own pump */
		watch_p_after(w, id, f->index + 1000);
		watches_pump(w, t++);
	}
	for (uint64_t id = 1; id <= n; id++) {
		watches_pump(w, 1000 + WATCH_INDEX_WAIT_MS + id - 1);
		assert_int_equal(got[id].ended, 1);
		assert_int_equal(watches_index_wait_ends(w), id);
	}
	assert_int_equal(watches_states(w), 0);
}

/* The watches a wait bound ends are counted at once, and said in a
 * warning per pump that ended some, at a bounded rate (log_rate.h): a
 * line held back adds its count to the next one, so that the lines
 * together name every end. Here a watch ends at each of 12 pumps within a
 * second: 10 lines, then the next says the other 2, though no state is
 * left (the pumps go on until it is said: watches_ends_unlogged), or
 * watches_close says them. */
static void test_wait_ends_logged_at_a_bounded_rate(void **state)
{
	struct fx *f = fx_ready(state);
	enum { N = LOG_RATE_BURST + 2 };
	struct paged got[N + 1] = {{.room = true}};
	struct watches w;
	end_by_the_index_bound(f, &w, got, N);
	assert_int_equal(w.index_wait_ends.unlogged, N - LOG_RATE_BURST);
	assert_true(watches_ends_unlogged(&w));
	char out[4096], want[64];
	snprintf(want, sizeof want, " %d watches ended (RAFTLOCK_EUNAVAILABLE)",
		 N - LOG_RATE_BURST);
	int saved, fd = stderr_capture(&saved);
	uint64_t t = 1000 + WATCH_INDEX_WAIT_MS + N;
	for (int turn = 0; turn < 200 && watches_ends_unlogged(&w); turn++, t += 10)
		watches_pump(&w, t); /* a pump every WATCH_STATE_POLL_MS */
	stderr_lines(fd, saved, out, sizeof out);
	assert_false(watches_ends_unlogged(&w));
	assert_true(t - 10 >= 1000 + WATCH_INDEX_WAIT_MS + LOG_RATE_INTERVAL_MS);
	assert_non_null(strstr(out, want));
	assert_int_equal(watches_index_wait_ends(&w), N);
	assert_int_equal(watches_state_wait_ends(&w), 0);
	watches_close(&w);

	memset(got, 0, sizeof got);
	got[0].room = true;
	end_by_the_index_bound(f, &w, got, N);
	fd = stderr_capture(&saved);
	watches_close(&w); /* the node stops before the next line may go */
	stderr_lines(fd, saved, out, sizeof out);
	assert_non_null(strstr(out, want));
}

/* A lock whose queue is far longer than a page (and many holders): its
 * state goes out over pages of at most WATCH_STATE_PAGE_EVENTS holders and
 * waiters, one a pump, holders then waiters in queue order, between the
 * locks before and after it, then CURRENT and the changes made meanwhile. */
enum { BIG_HOLDERS = 1500, BIG_WAITERS = 20000 };

static void put_big_lock(struct fx *f, const char *name)
{
	Raftlock__LockRecord rec = RAFTLOCK__LOCK_RECORD__INIT;
	rec.name = (char *)name;
	rec.kind = RAFTLOCK__LOCK_KIND__RWLOCK;
	Raftlock__Holder *h = calloc(BIG_HOLDERS, sizeof *h);
	Raftlock__Waiter *q = calloc(BIG_WAITERS, sizeof *q);
	rec.holders = calloc(BIG_HOLDERS, sizeof *rec.holders);
	rec.waiters = calloc(BIG_WAITERS, sizeof *rec.waiters);
	assert_true(h != NULL && q != NULL && rec.holders != NULL && rec.waiters != NULL);
	for (size_t i = 0; i < BIG_HOLDERS; i++) {
		h[i] = (Raftlock__Holder)RAFTLOCK__HOLDER__INIT;
		h[i].session = 100 + i;
		h[i].owner = 1 + i;
		h[i].mode = RAFTLOCK__MODE__SHARED;
		h[i].count = 1;
		h[i].token = 1000 + i;
		rec.holders[i] = &h[i];
	}
	for (size_t i = 0; i < BIG_WAITERS; i++) {
		q[i] = (Raftlock__Waiter)RAFTLOCK__WAITER__INIT;
		q[i].session = 100000 + i;
		q[i].owner = 1 + BIG_HOLDERS + i;
		q[i].seq = 1;
		rec.waiters[i] = &q[i];
	}
	rec.n_holders = BIG_HOLDERS;
	rec.n_waiters = BIG_WAITERS;
	MDB_txn *txn = store_begin(&f->store, true);
	store_put_lock(&f->store, txn, &rec);
	store_commit(txn);
	free(rec.holders);
	free(rec.waiters);
	free(h);
	free(q);
}

/* "p/a" and "p/z", held by the session returned, and "p/m" between them
 * with its long queue. */
static uint64_t put_big_state(struct fx *f)
{
	uint64_t a = fx_session(f);
	fx_take(f, a, 1, "p/a");
	fx_take(f, a, 1, "p/z");
	put_big_lock(f, "p/m");
	return a;
}

static void test_long_queue_in_pages(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = put_big_state(f);
	struct paged got[2] = {{.room = true}};
	struct watches w;
	paged_init(&w, 64, f, got);
	uint64_t at = f->index;
	watch_p(&w, 1);
	size_t events = got[1].holding + got[1].waiting, pages = 1;
	assert_int_equal(events, WATCH_STATE_PAGE_EVENTS); /* p/a and 1023 of p/m */
	fx_release_ok(f, a, 1, "p/a", 0);                  /* meanwhile: after CURRENT */
	feed(f, &w);
	while (watches_states(&w) > 0) {
		watches_pump(&w, 1000 + pages);
		size_t now = got[1].holding + got[1].waiting;
		assert_true(now - events <= WATCH_STATE_PAGE_EVENTS);
		assert_true(got[1].current == 1 || now - events == WATCH_STATE_PAGE_EVENTS);
		events = now;
		pages++;
	}
	assert_int_equal(got[1].holding, 2 + BIG_HOLDERS);
	assert_int_equal(got[1].waiting, BIG_WAITERS);
	assert_int_equal(pages, (2 + BIG_HOLDERS + BIG_WAITERS + WATCH_STATE_PAGE_EVENTS - 1) /
					WATCH_STATE_PAGE_EVENTS);
	assert_string_equal(got[1].last, "p/z");
	assert_int_equal(got[1].current, 1);
	assert_int_equal(got[1].current_index, at);
	assert_int_equal(got[1].changes, 1);
	assert_int_equal(got[1].disorder, 0);

	/* No room after a page that ended inside the queue: nothing more
	 * goes until there is room, then the rest of it. */
	struct paged more[3] = {{.room = true}};
	struct watches v;
	paged_init(&v, 64, f, more);
	watch_p(&v, 2);
	assert_int_equal(more[2].holding, WATCH_STATE_PAGE_EVENTS); /* p/a is gone */
	more[0].room = false;
	watches_pump(&v, 1000);
	assert_int_equal(more[2].holding + more[2].waiting, WATCH_STATE_PAGE_EVENTS);
	more[0].room = true;
	for (int turn = 0; turn < 100 && watches_states(&v) > 0; turn++)
		watches_pump(&v, 1001 + (uint64_t)turn);
	assert_int_equal(more[2].holding, 1 + BIG_HOLDERS);
	assert_int_equal(more[2].waiting, BIG_WAITERS);
	assert_int_equal(more[2].current, 1);
	assert_int_equal(more[2].disorder, 0);
	watches_close(&v);
	watches_close(&w);
}

/* A watch whose page stopped inside a lock keeps the rest of that lock
 * (state_rec) for its next page. Ended there, in every way a watch ends,
 * it lets go of that lock once (the ASan build checks that it is neither
 * leaked nor used after it is freed); the other watch, in the same lock,
 * and a new watch of the same connection get their states whole. */
enum lock_end {
	END_BY_CANCEL,          /* the client cancels it */
	END_BY_CLOSE,           /* its connection closes between pages */
	END_BY_CLOSE_IN_A_PAGE, /* ... in the middle of a page, inside the lock */
	END_BY_STALL,           /* its client is given up, in watches_pump */
	END_BY_RESTORE,         /* a snapshot install: its state starts again */
	END_BY_SHUTDOWN,        /* the node stops */
};                              /* each after the one before it, on the same store */

/* p has all of the state of "p/a" (if held_a), "p/m" (put_big_lock) and
 * "p/z" since its last HISTORY_LOST, then CURRENT. */
static void assert_whole_big_state(const struct paged *p, bool held_a)
{
	assert_int_equal(p->in_state, (held_a ? 2 : 1) + BIG_HOLDERS + BIG_WAITERS);
	assert_string_equal(p->last, "p/z");
	assert_true(p->live);
	assert_int_equal(p->disorder, 0);
}

/* f holds put_big_state's locks, of session a ("p/a" until END_BY_RESTORE
 * releases it, missed). */
static void end_inside_a_lock(struct fx *f, uint64_t a, enum lock_end how)
{
	enum { BYSTANDER = 1, VICTIM = 2, AFTER = 3 };
	struct paged got[AFTER + 1] = {{.room = true}};
	struct watches w;
	paged_init(&w, 64, f, got);
	watch_p_on(&w, OTHER, BYSTANDER);
	watch_p(&w, VICTIM);
	watches_pump(&w, 1000); /* a page more each, still inside p/m */
	for (uint64_t id = BYSTANDER; id <= VICTIM; id++) {
		assert_int_equal(got[id].events, 2 * WATCH_STATE_PAGE_EVENTS);
		assert_string_equal(got[id].last, "p/m");
	}
	assert_int_equal(w.states_reading, 2);
	size_t events = got[VICTIM].events;

	uint64_t t = 1001;
	switch (how) {
	case END_BY_CANCEL: assert_true(watches_cancel(&w, CONN, VICTIM)); break;
	case END_BY_CLOSE: watches_forget_conn(&w, CONN); break;
	case END_BY_CLOSE_IN_A_PAGE:
		got[VICTIM].close_at = events + 10;
		events += 10;
		watches_pump(&w, t++);
		assert_int_equal(got[VICTIM].events, events);
		break;
	case END_BY_STALL:
		got[0].room_from = (uintptr_t)OTHER; /* CONN reads nothing more */
		watches_pump(&w, 1000 + WATCH_STATE_STALL_MS);
		assert_int_equal(got[0].stalled, 1);
		t = 1001 + WATCH_STATE_STALL_MS;
		break;
	case END_BY_RESTORE:
		f->index += 10;
		DO(f, RELEASE, .session = a, .owner = 1, .name = "p/a"); /* not fed: missed */
		watches_restored(&w);
		for (uint64_t id = BYSTANDER; id <= VICTIM; id++) {
			assert_int_equal(got[id].lost, 1);
			assert_int_equal(got[id].in_state, WATCH_STATE_PAGE_EVENTS); /* again */
		}
		break;
	case END_BY_SHUTDOWN:
		watches_end_states(&w);
		assert_int_equal(w.states_reading, 0);
		watches_pump(&w, t);
		watches_close(&w); /* the ASan build: nothing leaked */
		return;
	}
	if (how != END_BY_RESTORE) {
		assert_int_equal(watches_subscribers(&w), 1);
		assert_int_equal(watches_states(&w), 1);
		assert_int_equal(w.states_reading, 1);
	}
	for (int turn = 0; turn < 100 && watches_states(&w) > 0; turn++)
		watches_pump(&w, t++);
	assert_int_equal(watches_states(&w), 0);
	assert_int_equal(w.states_reading, 0);
	bool held_a = how < END_BY_RESTORE; /* "p/a" */
	assert_whole_big_state(&got[BYSTANDER], held_a);
	if (how == END_BY_RESTORE)
		assert_whole_big_state(&got[VICTIM], false);
	else
		assert_int_equal(got[VICTIM].events, events); /* nothing after its end */

	/* A new watch of the same connection (or of a new one at its
	 * address): its state in pages, whole. */
	got[0].room_from = 0;
	watch_p(&w, AFTER);
	for (int turn = 0; turn < 100 && watches_states(&w) > 0; turn++)
		watches_pump(&w, t++);
	assert_whole_big_state(&got[AFTER], held_a);
	assert_int_equal(got[AFTER].current, 1);
	watches_close(&w);
}

static void test_ended_inside_a_lock(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = put_big_state(f);
	for (enum lock_end how = END_BY_CANCEL; how <= END_BY_SHUTDOWN; how++)
		end_inside_a_lock(f, a, how);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_grant_release_queue, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_expiry_and_close, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_replay_same_changes, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_ring_resume_and_lost, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_resume_names_its_cluster, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_state_waits_for_its_cluster, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_backlog_bounded_in_bytes, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_send_that_closes, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_state_in_pages, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_state_waits_for_its_index, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_resume_paced_from_the_ring, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_state_bounds_per_client, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_backlog_waits_for_room, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_state_across_a_restore, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_state_waits_for_room, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_states_share_the_readers, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_state_outrun_by_the_ring, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_state_index_wait_ends, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_wait_bounds_through_churn, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_reader_wait_ends, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_share_goes_to_the_oldest_of_a_connection,
						fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_readers_go_oldest_first, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_closed_conn_keeps_no_share, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_share_waiters_keep_no_other_reader, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_room_wait_ends_named, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_wait_ends_logged_at_a_bounded_rate, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_long_queue_in_pages, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_ended_inside_a_lock, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
