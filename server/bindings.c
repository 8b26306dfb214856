/* bindings.c: see bindings.h. */
#include "bindings.h"

#include "config.h"
#include "log.h"

#define WARM_MS_DEFAULT 50

struct binding {
	void *conn;       /* NULL once it closed */
	uint64_t due;     /* timebase ms at which to end it; 0 = not due */
	uint64_t carried; /* the deadline the drop proposed last carried */
	uint32_t grace_ms;
	uint8_t redrops; /* since its connection closed */
	bool proposed;
};

void bindings_init(struct bindings *b, struct timebase *clock, struct node *node,
		   const struct leases *leases)
{
	b->node = node;
	b->clock = clock;
	b->leases = leases;
	b->ready = false;
	b->drops = 0;
	idmap_init(&b->sessions, sizeof(struct binding));
	timebase_timer_init(clock, &b->timer, b);
	timebase_timer_init(clock, &b->warm_timer, b);
}

/* An empty RENEW (it renews nothing, like the leader's clock entries). */
static void warm_cb(struct timebase_timer *h)
{
	struct bindings *b = h->data;
	Raftlock__Renew op = RAFTLOCK__RENEW__INIT;
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_RENEW;
	cmd.renew = &op;
	(void)node_propose_quiet(b->node, &cmd); /* else the next tick tries */
}

static void arm(struct bindings *b);

/* Proposes the end of each bound session whose grace has passed. */
static void due_cb(struct timebase_timer *h)
{
	struct bindings *b = h->data;
	uint64_t now = timebase_now(b->clock);
	struct binding *x;
	uint64_t id;
	for (size_t pos = 0; (x = idmap_next(&b->sessions, &pos, &id)) != NULL;) {
		if (x->due == 0 || x->due > now || x->proposed)
			continue;
		Raftlock__DropBound op = RAFTLOCK__DROP_BOUND__INIT;
		op.session = id;
		/* Apply keeps the session if a RENEW moves this on before the
		 * drop; below level 8 the drop goes without it. */
		op.deadline = leases_deadline(b->leases, id);
		Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
		cmd.op_case = RAFTLOCK__COMMAND__OP_DROP_BOUND;
		cmd.drop_bound = &op;
		if (!node_level_admits(b->node, &cmd))
			op.deadline = 0;
		if (!node_level_admits(b->node, &cmd)) {
			/* Cannot be bound below level 3: its TTL ends it. */
			x->proposed = true;
			continue;
		}
		if (node_propose_quiet(b->node, &cmd) != 0) {
			x->due = now + 100; /* try again soon */
			continue;
		}
		x->proposed = true;
		x->carried = op.deadline;
		b->drops++;
		log_debug("session %llu: its connection closed %u ms ago; ending it",
			  (unsigned long long)id, x->grace_ms);
	}
	arm(b);
}

/* Runs the timer for the earliest pending end. */
static void arm(struct bindings *b)
{
	uint64_t first = UINT64_MAX;
	struct binding *x;
	for (size_t pos = 0; (x = idmap_next(&b->sessions, &pos, NULL)) != NULL;)
		if (x->due != 0 && !x->proposed && x->due < first)
			first = x->due;
	if (first == UINT64_MAX) {
		timebase_timer_stop(&b->timer);
		timebase_timer_stop(&b->warm_timer);
		return;
	}
	uint64_t now = timebase_now(b->clock);
	timebase_timer_start(&b->timer, due_cb, first > now ? first - now : 0, 0);
	if (!timebase_timer_active(&b->warm_timer)) {
		unsigned every = b->node->cfg != NULL ? b->node->cfg->heartbeat_timeout_ms / 2
						      : WARM_MS_DEFAULT;
		timebase_timer_start(&b->warm_timer, warm_cb, 0, every ? every : 1);
	}
}

bool bindings_note(struct bindings *b, uint64_t session, void *conn, uint32_t grace_ms)
{
	if (!b->ready || session == 0)
		return false;
	struct binding *x = idmap_put(&b->sessions, session);
	if (x == NULL)
		return false; /* out of memory: the session lives by its TTL */
	bool moved = x->conn != conn;
	x->conn = conn;
	x->grace_ms = grace_ms;
	if (x->due != 0 && !x->proposed) {
		x->due = 0; /* taken over within its grace */
		arm(b);
	}
	return moved;
}

void *bindings_conn(const struct bindings *b, uint64_t session)
{
	const struct binding *x = idmap_get(&b->sessions, session);
	return x != NULL ? x->conn : NULL;
}

void bindings_closed(struct bindings *b, const void *conn, const uint64_t *ids, size_t n)
{
	uint64_t now = timebase_now(b->clock);
	bool pending = false;
	for (size_t i = 0; i < n; i++) {
		struct binding *x = idmap_get(&b->sessions, ids[i]);
		if (x == NULL || x->conn != conn)
			continue;
		if (x->grace_ms == 0) {
			idmap_del(&b->sessions, ids[i]);
			continue;
		}
		x->conn = NULL;
		x->due = now + x->grace_ms;
		x->proposed = false;
		x->redrops = 0;
		pending = true;
	}
	if (pending)
		arm(b);
}

void bindings_drop_kept(struct bindings *b, uint64_t session, uint64_t carried)
{
	struct binding *x = idmap_get(&b->sessions, session);
	if (!b->ready || x == NULL || !x->proposed || x->carried != carried)
		return; /* not the drop this leader proposed last */
	x->proposed = false;
	if (x->conn != NULL) {
		x->due = 0; /* a live connection keeps it again */
		return;
	}
	if (x->redrops >= BINDINGS_REDROPS_MAX) {
		log_warn("session %llu: its connection closed, but %u drops were kept by "
			 "renewals; it lives by its TTL",
			 (unsigned long long)session, (unsigned)x->redrops + 1);
		x->due = 0;
		return;
	}
	x->redrops++;
	x->due = timebase_now(b->clock); /* the grace has passed already */
	arm(b);
}

void bindings_forget(struct bindings *b, uint64_t session)
{
	idmap_del(&b->sessions, session);
}

void bindings_on_ready(struct bindings *b, bool ready)
{
	b->ready = ready;
	idmap_clear(&b->sessions);
	timebase_timer_stop(&b->timer);
	timebase_timer_stop(&b->warm_timer);
}

void bindings_close(struct bindings *b)
{
	bindings_on_ready(b, false);
	timebase_timer_close(&b->timer);
	timebase_timer_close(&b->warm_timer);
	idmap_close(&b->sessions);
}
