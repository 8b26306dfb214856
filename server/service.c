/* service.c: see service.h. */
#include "service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "frame.h"
#include "grow.h"
#include "listener.h"
#include "log.h"
#include "raftlock.h"
#include "records.h"

#define READ_PAGE_DEFAULT 100
/* Bounds per connection: past this many requests in flight, more get
 * RAFTLOCK_EOVERLOAD (not executed: the client retries); a connection whose unread responses pile
 * up past the byte limit is closed (its client is not reading them). */
#define CONN_MAX_INFLIGHT 4096
#define CONN_MAX_UNSENT (64u << 20)
#define READ_PAGE_MAX 1000
#define RESUME_TICK_MS 50 /* how often paused connections are looked at */

struct conn {
	uv_tcp_t tcp;
	struct service *svc;
	struct frame_reader reader;
	int refs; /* the handle itself, plus each request and write in flight */
	bool closing;
	struct conn *prev, *next;
	/* Responses encoded since the last flush: written with one write per
	 * loop iteration, so that a batch of answers costs the client one
	 * wake-up rather than one each. */
	uint8_t *out;
	size_t out_len, out_cap;
	bool dirty; /* on the service's dirty list, holding a reference */
	struct conn *dirty_next;
	struct leases_budget keepalive_budget;
	bool paused; /* reads stopped until the keepalive budget refills */
};

/* A request waiting for its proposal, keepalive or barrier. */
struct pending {
	struct conn *conn;
	uint64_t id;
	uint64_t session, seq;
	Raftlock__Envelope *env; /* reads only: the request, owned */
	struct pending *next;
};

/* Where the final outcome of a queued acquire goes. It is registered when
 * the acquire is proposed: a release applied right after the acquire can
 * grant it before the acquire's own completion runs. Until the acquire is
 * answered, an outcome that arrives is kept and becomes the answer. */
struct push_target {
	uint64_t seq;
	struct conn *conn;
	uint64_t id;
	bool answered;
	bool have_result;
	Raftlock__Result result;
	struct push_target *next;
};

struct read_batch {
	struct raft_barrier barrier;
	struct service *svc;
	struct pending *head;
};

/* ---------------------------------------------------------- connections */

static void conn_unref(struct conn *c);

static void conn_closed(uv_handle_t *h)
{
	conn_unref(h->data);
}

static void push_forget_conn(struct service *s, struct conn *c);
static void conn_flush(struct conn *c);

static void conn_close(struct conn *c)
{
	if (c->closing)
		return;
	conn_flush(c); /* the last answers (an EPROTO, say) go out first */
	if (c->closing)
		return;
	c->closing = true;
	push_forget_conn(c->svc, c);
	uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void conn_unref(struct conn *c)
{
	if (--c->refs > 0)
		return;
	struct service *s = c->svc;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	frame_reader_close(&c->reader);
	free(c->out);
	free(c);
}

struct write_req {
	uv_write_t req;
	uint8_t *buf;
};

static void write_done(uv_write_t *req, int status)
{
	struct write_req *w = (struct write_req *)req;
	struct conn *c = req->data;
	free(w->buf);
	free(w);
	if (status != 0)
		conn_close(c);
	conn_unref(c);
}

/* Hands what the connection has buffered to libuv in one write. */
static void conn_flush(struct conn *c)
{
	if (c->closing || c->out_len == 0)
		return;
	if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) + c->out_len > CONN_MAX_UNSENT) {
		log_warn("a client is not reading its responses; closing its connection");
		conn_close(c);
		return;
	}
	struct write_req *w = malloc(sizeof *w);
	if (w == NULL) {
		conn_close(c);
		return;
	}
	w->buf = c->out;
	uv_buf_t b = uv_buf_init((char *)c->out, (unsigned)c->out_len);
	c->out = NULL;
	c->out_len = c->out_cap = 0;
	w->req.data = c;
	c->refs++;
	if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, write_done) != 0) {
		free(w->buf);
		free(w);
		c->refs--;
		conn_close(c);
	}
}

/* Runs once per loop iteration, before the loop waits for I/O. */
static void flush_all(struct service *s)
{
	struct conn *c = s->dirty;
	s->dirty = NULL;
	while (c != NULL) {
		struct conn *next = c->dirty_next;
		c->dirty = false;
		c->dirty_next = NULL;
		conn_flush(c);
		conn_unref(c);
		c = next;
	}
}

static void flusher_cb(uv_prepare_t *h)
{
	flush_all(h->data);
}

static void send_envelope(struct conn *c, const Raftlock__Envelope *env)
{
	if (c == NULL || c->closing)
		return;
	int rv = codec_frame_envelope_append(env, &c->out, &c->out_len, &c->out_cap);
	if (rv == RAFTLOCK_ETOOBIG && env->body_case == RAFTLOCK__ENVELOPE__BODY_RESPONSE &&
	    env->response->payload_case != RAFTLOCK__RESPONSE__PAYLOAD__NOT_SET) {
		/* An answer larger than a frame (a lock with a huge queue):
		 * say so instead of dropping the connection. */
		Raftlock__Response small = RAFTLOCK__RESPONSE__INIT;
		small.status = RAFTLOCK_ETOOBIG;
		small.message = "the answer is larger than a frame; read with a smaller page";
		small.leader = "";
		Raftlock__Envelope e = RAFTLOCK__ENVELOPE__INIT;
		e.id = env->id;
		e.body_case = RAFTLOCK__ENVELOPE__BODY_RESPONSE;
		e.response = &small;
		send_envelope(c, &e);
		return;
	}
	if (rv != 0) {
		log_warn("dropping a response that could not be encoded");
		conn_close(c);
		return;
	}
	if (c->out_len > CONN_MAX_UNSENT) {
		conn_flush(c); /* closes it */
		return;
	}
	if (!c->dirty) {
		struct service *s = c->svc;
		c->dirty = true;
		c->refs++;
		c->dirty_next = s->dirty;
		s->dirty = c;
	}
}

static void send_response(struct conn *c, uint64_t id, Raftlock__Response *resp)
{
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.id = id;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_RESPONSE;
	env.response = resp;
	send_envelope(c, &env);
}

static void send_status(struct service *s, struct conn *c, uint64_t id, int status,
			const char *message)
{
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.status = status;
	resp.message = (char *)(message ? message : raftlock_strerror(status));
	const char *leader = NULL;
	if (status == RAFTLOCK_ENOTLEADER)
		leader = node_leader_client_address(s->node, NULL);
	resp.leader = (char *)(leader ? leader : "");
	send_response(c, id, &resp);
}

static struct pending *pending_new(struct conn *c, uint64_t id)
{
	struct pending *p = calloc(1, sizeof *p);
	if (p == NULL)
		return NULL;
	p->conn = c;
	p->id = id;
	c->refs++;
	return p;
}

static void pending_free(struct pending *p)
{
	if (p->env != NULL)
		raftlock__envelope__free_unpacked(p->env, NULL);
	conn_unref(p->conn);
	free(p);
}

/* ------------------------------------------------------- push targets -- */

static void push_set(struct service *s, uint64_t session, uint64_t seq, struct conn *c, uint64_t id)
{
	struct push_target **first = idmap_put(&s->pushes, session);
	if (first == NULL)
		log_fatal("out of memory");
	for (struct push_target *t = *first; t != NULL; t = t->next) {
		if (t->seq == seq) { /* a retry moves the push (DESIGN.md) */
			t->conn = c;
			t->id = id;
			t->answered = false;
			return;
		}
	}
	struct push_target *t = calloc(1, sizeof *t);
	if (t == NULL)
		log_fatal("out of memory");
	*t = (struct push_target){.seq = seq, .conn = c, .id = id, .next = *first};
	*first = t;
}

static struct push_target *push_find(struct service *s, uint64_t session, uint64_t seq)
{
	struct push_target **first = idmap_get(&s->pushes, session);
	for (struct push_target *t = first ? *first : NULL; t != NULL; t = t->next)
		if (t->seq == seq)
			return t;
	return NULL;
}

static struct push_target *push_take(struct service *s, uint64_t session, uint64_t seq)
{
	struct push_target **first = idmap_get(&s->pushes, session);
	if (first == NULL)
		return NULL;
	for (struct push_target **pp = first; *pp; pp = &(*pp)->next) {
		struct push_target *t = *pp;
		if (t->seq == seq) {
			*pp = t->next;
			if (*first == NULL)
				idmap_del(&s->pushes, session);
			return t;
		}
	}
	return NULL;
}

static void push_forget_session(struct service *s, uint64_t session)
{
	struct push_target **first = idmap_get(&s->pushes, session);
	if (first == NULL)
		return;
	for (struct push_target *t = *first, *next; t != NULL; t = next) {
		next = t->next;
		free(t);
	}
	idmap_del(&s->pushes, session);
}

static void push_forget_conn(struct service *s, struct conn *c)
{
	struct push_target **first;
	for (size_t pos = 0; (first = idmap_next(&s->pushes, &pos, NULL)) != NULL;)
		for (struct push_target *t = *first; t != NULL; t = t->next)
			if (t->conn == c)
				t->conn = NULL; /* the client re-sends after reconnecting */
}

void service_on_event(struct service *s, const struct fsm_event *ev)
{
	if (ev->type == FSM_EV_SESSION_GONE) {
		push_forget_session(s, ev->session);
		return;
	}
	if (ev->type != FSM_EV_PUSH)
		return;
	struct push_target *t = push_find(s, ev->session, ev->seq);
	if (t == NULL)
		return;
	if (!t->answered) {
		/* The acquire's own answer has not gone out: it carries this. */
		t->result = *ev->result;
		t->have_result = true;
		return;
	}
	t = push_take(s, ev->session, ev->seq);
	/* Rule 10: a leader that is not ready pushes nothing; the client
	 * learns the outcome when it re-sends the acquire. */
	if (t->conn != NULL && s->node->ready) {
		Raftlock__Result res = *ev->result;
		Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
		resp.push = true;
		resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_RESULT;
		resp.result = &res;
		send_response(t->conn, t->id, &resp);
	}
	free(t);
}

/* ----------------------------------------------------------- mutations -- */

/* The status of a mutation that was not applied, as the client sees it:
 * the statuses it knows to retry stay; anything else (out of memory, a
 * batch that could not be encoded) means "not executed, retry" as well,
 * never a final answer: only apply settles a sequence (GUARANTEES rule 6). */
static int unapplied_status(int status)
{
	switch (status) {
	case RAFTLOCK_ENOTLEADER:
	case RAFTLOCK_EUNAVAILABLE:
	case RAFTLOCK_EUNKNOWN:
	case RAFTLOCK_ESHUTDOWN: return status;
	default: return RAFTLOCK_EOVERLOAD;
	}
}

static void mutation_done(void *arg, int status, const Raftlock__Result *result)
{
	struct pending *p = arg;
	struct service *s = p->conn->svc;
	/* The push target this acquire registered, unless a retry moved it. */
	struct push_target *t = p->seq ? push_find(s, p->session, p->seq) : NULL;
	if (t != NULL && (t->conn != p->conn || t->id != p->id))
		t = NULL;
	Raftlock__Result res = status == 0 ? *result : (Raftlock__Result)RAFTLOCK__RESULT__INIT;
	if (status == 0 && t != NULL && t->have_result)
		res = t->result; /* granted (or ended) before we could answer */
	if (t != NULL) {
		if (status == 0 && res.queued && !p->conn->closing)
			t->answered = true;
		else
			free(push_take(s, p->session, p->seq));
	}
	if (status != 0) {
		send_status(s, p->conn, p->id, unapplied_status(status), NULL);
	} else {
		Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
		resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_RESULT;
		resp.result = &res;
		send_response(p->conn, p->id, &resp);
	}
	pending_free(p);
}

static void propose_for(struct service *s, struct conn *c, uint64_t id,
			const Raftlock__Command *cmd, bool pushable)
{
	struct pending *p = pending_new(c, id);
	if (p == NULL) {
		send_status(s, c, id, RAFTLOCK_EOVERLOAD, NULL);
		return;
	}
	p->session = cmd->session;
	p->seq = pushable ? cmd->seq : 0;
	if (p->seq != 0)
		push_set(s, p->session, p->seq, c, id);
	int rv = node_propose(s->node, cmd, mutation_done, p);
	if (rv != 0) {
		if (p->seq != 0)
			free(push_take(s, p->session, p->seq));
		send_status(s, c, id, unapplied_status(rv), NULL);
		pending_free(p);
	}
}

/* Commands are rebuilt field by field from the request, so that fields
 * this version does not know never reach the log (a newer node replaying
 * it would act on them, and diverge from the nodes that applied it). */
static void copy_acquire(Raftlock__Acquire *dst, const Raftlock__Acquire *src)
{
	raftlock__acquire__init(dst);
	dst->name = src->name;
	dst->kind = src->kind;
	dst->mode = src->mode;
	dst->permits = src->permits;
	dst->limit = src->limit;
	dst->owner = src->owner;
	dst->wait = src->wait;
	dst->wait_ms = src->wait_ms;
	dst->lock_delay_ms = src->lock_delay_ms;
}

/* Rule 8: every mutating request carries (session, seq, ack_below), and
 * the queued acquires it acknowledges (at most FSM_MAX_ACKED reach the
 * log; the client never sends more). */
static void set_sequence(Raftlock__Command *cmd, uint64_t session, uint64_t seq, uint64_t ack_below,
			 uint64_t *acked, size_t n_acked)
{
	cmd->session = session;
	cmd->seq = seq;
	cmd->ack_below = ack_below;
	cmd->acked = acked;
	cmd->n_acked = n_acked < FSM_MAX_ACKED ? n_acked : FSM_MAX_ACKED;
}

/* GUARANTEES rule 8: a TTL below RAFTLOCK_TTL_ELECTION_FACTOR election
 * timeouts is refused before it reaches the log, with a message that names
 * the minimum. Such a session's validity would not outlast even the
 * shortest failover. A TTL outside the protocol's range is the state
 * machine's to refuse. */
static bool ttl_allowed(struct service *s, struct conn *c, const Raftlock__Envelope *env)
{
	uint32_t ttl = env->open_session->ttl_ms;
	unsigned et = s->cfg->election_timeout_ms;
	uint64_t min = (uint64_t)RAFTLOCK_TTL_ELECTION_FACTOR * et;
	if (ttl < RAFTLOCK_TTL_MIN_MS || ttl >= min)
		return true;
	char msg[200];
	snprintf(msg, sizeof msg,
		 "ttl %u ms is below %llu ms, the shortest this cluster allows (%d times its "
		 "election timeout of %u ms)",
		 ttl, (unsigned long long)min, RAFTLOCK_TTL_ELECTION_FACTOR, et);
	send_status(s, c, env->id, RAFTLOCK_EINVAL, msg);
	return false;
}

static void handle_mutation(struct service *s, struct conn *c, const Raftlock__Envelope *env)
{
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	Raftlock__OpenSession open = RAFTLOCK__OPEN_SESSION__INIT;
	Raftlock__Owner owner = RAFTLOCK__OWNER__INIT;
	Raftlock__CloseSession close = RAFTLOCK__CLOSE_SESSION__INIT;
	Raftlock__Acquire acquire;
	Raftlock__Release release = RAFTLOCK__RELEASE__INIT;
	Raftlock__CancelWait cancel = RAFTLOCK__CANCEL_WAIT__INIT;
	bool pushable = false;
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION:
		if (!ttl_allowed(s, c, env))
			return;
		open.nonce = env->open_session->nonce;
		open.ttl_ms = env->open_session->ttl_ms;
		open.acks_queued = env->open_session->acks_queued;
		if (env->open_session->owner != NULL) {
			owner.client_name = env->open_session->owner->client_name;
			owner.host = env->open_session->owner->host;
			owner.pid = env->open_session->owner->pid;
			open.owner = &owner;
		}
		cmd.op_case = RAFTLOCK__COMMAND__OP_OPEN_SESSION;
		cmd.open_session = &open;
		break;
	case RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION:
		set_sequence(&cmd, env->close_session->session, env->close_session->seq,
			     env->close_session->ack_below, env->close_session->acked,
			     env->close_session->n_acked);
		cmd.op_case = RAFTLOCK__COMMAND__OP_CLOSE_SESSION;
		cmd.close_session = &close;
		break;
	case RAFTLOCK__ENVELOPE__BODY_ACQUIRE:
		set_sequence(&cmd, env->acquire->session, env->acquire->seq,
			     env->acquire->ack_below, env->acquire->acked, env->acquire->n_acked);
		cmd.op_case = RAFTLOCK__COMMAND__OP_ACQUIRE;
		copy_acquire(&acquire, env->acquire->acquire);
		cmd.acquire = &acquire;
		pushable = env->acquire->acquire->wait;
		break;
	case RAFTLOCK__ENVELOPE__BODY_RELEASE:
		set_sequence(&cmd, env->release->session, env->release->seq,
			     env->release->ack_below, env->release->acked, env->release->n_acked);
		cmd.op_case = RAFTLOCK__COMMAND__OP_RELEASE;
		release.name = env->release->release->name;
		release.owner = env->release->release->owner;
		cmd.release = &release;
		break;
	case RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT:
		set_sequence(&cmd, env->cancel_wait->session, env->cancel_wait->seq,
			     env->cancel_wait->ack_below, env->cancel_wait->acked,
			     env->cancel_wait->n_acked);
		cmd.op_case = RAFTLOCK__COMMAND__OP_CANCEL_WAIT;
		cancel.name = env->cancel_wait->cancel->name;
		cancel.owner = env->cancel_wait->cancel->owner;
		cancel.acquire_seq = env->cancel_wait->cancel->acquire_seq;
		cmd.cancel_wait = &cancel;
		break;
	default: send_status(s, c, env->id, RAFTLOCK_EPROTO, "not a mutation"); return;
	}
	propose_for(s, c, env->id, &cmd, pushable);
}

/* ---------------------------------------------------------- keepalive -- */

static void keepalive_done(void *arg, int status, const int32_t *statuses, const uint32_t *ttls,
			   size_t n)
{
	struct pending *p = arg;
	if (status != 0) {
		send_status(p->conn->svc, p->conn, p->id, status, NULL);
	} else {
		Raftlock__KeepAliveResult ka = RAFTLOCK__KEEP_ALIVE_RESULT__INIT;
		ka.statuses = (int32_t *)statuses;
		ka.n_statuses = n;
		ka.ttl_ms = (uint32_t *)ttls;
		ka.n_ttl_ms = n;
		Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
		resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_KEEPALIVE;
		resp.keepalive = &ka;
		send_response(p->conn, p->id, &resp);
	}
	pending_free(p);
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);

/* Reads again from the connections whose keepalive budget refilled. */
static void resume_cb(uv_timer_t *h)
{
	struct service *s = h->data;
	bool still = false;
	for (struct conn *c = s->conns; c != NULL; c = c->next) {
		if (!c->paused || c->closing)
			continue;
		if (leases_budget_spent(s->leases, &c->keepalive_budget)) {
			still = true;
			continue;
		}
		c->paused = false;
		log_debug("keepalive budget refilled: reading a paused connection again");
		uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
	}
	if (!still)
		uv_timer_stop(h);
}

/* A connection past its keepalive budget is not read until the budget
 * refills: it can cost the leader no more than the budget's worth of
 * decoding and lookups per second, whatever it sends. */
static void pause_reads(struct service *s, struct conn *c)
{
	if (c->paused || c->closing)
		return;
	c->paused = true;
	log_debug("keepalive budget spent: a connection is not read until it refills");
	uv_read_stop((uv_stream_t *)&c->tcp);
	if (!uv_is_active((uv_handle_t *)&s->resume_timer))
		uv_timer_start(&s->resume_timer, resume_cb, RESUME_TICK_MS, RESUME_TICK_MS);
}

static void handle_keepalive(struct service *s, struct conn *c, const Raftlock__Envelope *env)
{
	struct pending *p = pending_new(c, env->id);
	if (p == NULL) {
		send_status(s, c, env->id, RAFTLOCK_ENOMEM, NULL);
		return;
	}
	int rv = leases_keepalive(s->leases, &c->keepalive_budget, env->keepalive->sessions,
				  env->keepalive->n_sessions, keepalive_done, p);
	if (rv != 0) {
		send_status(s, c, env->id, rv,
			    rv == RAFTLOCK_ELIMIT ? "keepalive budget of this connection spent: "
						    "too many session ids in one second"
						  : NULL);
		pending_free(p);
	}
	if (leases_budget_spent(s->leases, &c->keepalive_budget))
		pause_reads(s, c);
}

/* --------------------------------------------------------------- reads -- */

static Raftlock__Owner *owner_of(struct service *s, MDB_txn *txn, uint64_t session,
				 Raftlock__SessionRecord **keep)
{
	*keep = store_get_session(&s->node->store, txn, session);
	return *keep ? (*keep)->owner : NULL;
}

/* Fills a LockInfo from a record; the session records fetched for owner
 * info are appended to *sessions for the caller to free. */
struct lock_info_buf {
	Raftlock__LockInfo info;
	Raftlock__HolderInfo *holders;
	Raftlock__HolderInfo **holder_ptrs;
	Raftlock__WaiterInfo *waiters;
	Raftlock__WaiterInfo **waiter_ptrs;
	Raftlock__SessionRecord **sessions;
	size_t n_sessions;
	Raftlock__LockRecord *rec;
};

static void lock_info_fill(struct service *s, MDB_txn *txn, struct lock_info_buf *b,
			   Raftlock__LockRecord *rec, uint64_t now)
{
	size_t nh = rec->n_holders, nw = rec->n_waiters;
	raftlock__lock_info__init(&b->info);
	b->rec = rec;
	b->holders = calloc(nh + 1, sizeof *b->holders);
	b->holder_ptrs = calloc(nh + 1, sizeof *b->holder_ptrs);
	b->waiters = calloc(nw + 1, sizeof *b->waiters);
	b->waiter_ptrs = calloc(nw + 1, sizeof *b->waiter_ptrs);
	b->sessions = calloc(nh + nw + 1, sizeof *b->sessions);
	if (!b->holders || !b->holder_ptrs || !b->waiters || !b->waiter_ptrs || !b->sessions)
		log_fatal("out of memory");
	b->n_sessions = 0;
	b->info.name = rec->name;
	b->info.kind = rec->kind;
	b->info.limit = rec->limit;
	b->info.delay_until = rec->delay_until;
	b->info.lock_delay_ms = rec->lock_delay_ms;
	b->info.cluster_time = now;
	for (size_t i = 0; i < nh; i++) {
		raftlock__holder_info__init(&b->holders[i]);
		b->holders[i].holder = rec->holders[i];
		b->holders[i].owner =
			owner_of(s, txn, rec->holders[i]->session, &b->sessions[b->n_sessions++]);
		b->holder_ptrs[i] = &b->holders[i];
	}
	for (size_t i = 0; i < nw; i++) {
		raftlock__waiter_info__init(&b->waiters[i]);
		b->waiters[i].waiter = rec->waiters[i];
		b->waiters[i].owner =
			owner_of(s, txn, rec->waiters[i]->session, &b->sessions[b->n_sessions++]);
		b->waiter_ptrs[i] = &b->waiters[i];
	}
	b->info.holders = b->holder_ptrs;
	b->info.n_holders = nh;
	b->info.waiters = b->waiter_ptrs;
	b->info.n_waiters = nw;
}

static void lock_info_free(struct lock_info_buf *b)
{
	for (size_t i = 0; i < b->n_sessions; i++)
		if (b->sessions[i] != NULL)
			raftlock__session_record__free_unpacked(b->sessions[i], NULL);
	free(b->sessions);
	free(b->holders);
	free(b->holder_ptrs);
	free(b->waiters);
	free(b->waiter_ptrs);
	if (b->rec != NULL)
		raftlock__lock_record__free_unpacked(b->rec, NULL);
}

static uint64_t store_now(struct service *s, MDB_txn *txn)
{
	Raftlock__Meta *m = store_get_meta(&s->node->store, txn);
	uint64_t t = m->cluster_time;
	raftlock__meta__free_unpacked(m, NULL);
	return t;
}

static void read_get_lock(struct service *s, struct conn *c, const Raftlock__Envelope *env,
			  MDB_txn *txn)
{
	Raftlock__LockRecord *rec = store_get_lock(&s->node->store, txn, env->get_lock->name);
	if (rec == NULL) {
		send_status(s, c, env->id, RAFTLOCK_ENOTFOUND, "no such lock");
		return;
	}
	struct lock_info_buf b;
	lock_info_fill(s, txn, &b, rec, store_now(s, txn));
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_LOCK;
	resp.lock = &b.info;
	send_response(c, env->id, &resp);
	lock_info_free(&b);
}

struct list_locks_ctx {
	struct service *svc;
	MDB_txn *txn;
	struct lock_info_buf *bufs;
	size_t n, limit;
	size_t bytes; /* encoded so far: a page stays well inside a frame */
	bool more;
	uint64_t now;
};

#define PAGE_BYTES_MAX (RAFTLOCK_FRAME_MAX / 2)

static int list_locks_visit(void *arg, Raftlock__LockRecord *rec)
{
	struct list_locks_ctx *ctx = arg;
	if (ctx->n == ctx->limit || ctx->bytes > PAGE_BYTES_MAX) {
		raftlock__lock_record__free_unpacked(rec, NULL);
		ctx->more = true;
		return 1;
	}
	struct lock_info_buf *b = &ctx->bufs[ctx->n++];
	lock_info_fill(ctx->svc, ctx->txn, b, rec, ctx->now);
	ctx->bytes += raftlock__lock_info__get_packed_size(&b->info);
	return 0;
}

static size_t page_limit(uint32_t asked)
{
	if (asked == 0)
		return READ_PAGE_DEFAULT;
	return asked > READ_PAGE_MAX ? READ_PAGE_MAX : asked;
}

static void read_list_locks(struct service *s, struct conn *c, const Raftlock__Envelope *env,
			    MDB_txn *txn)
{
	const Raftlock__ListLocksRequest *req = env->list_locks;
	struct list_locks_ctx ctx = {
		.svc = s, .txn = txn, .limit = page_limit(req->limit), .now = store_now(s, txn)};
	ctx.bufs = calloc(ctx.limit, sizeof *ctx.bufs);
	Raftlock__LockInfo **ptrs = calloc(ctx.limit, sizeof *ptrs);
	if (ctx.bufs == NULL || ptrs == NULL)
		log_fatal("out of memory");
	store_scan_locks(&s->node->store, txn, req->prefix, req->after, list_locks_visit, &ctx);
	for (size_t i = 0; i < ctx.n; i++)
		ptrs[i] = &ctx.bufs[i].info;
	Raftlock__LockList list = RAFTLOCK__LOCK_LIST__INIT;
	list.locks = ptrs;
	list.n_locks = ctx.n;
	list.more = ctx.more;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_LOCKS;
	resp.locks = &list;
	send_response(c, env->id, &resp);
	for (size_t i = 0; i < ctx.n; i++)
		lock_info_free(&ctx.bufs[i]);
	free(ctx.bufs);
	free(ptrs);
}

struct list_sessions_ctx {
	struct store *store;
	MDB_txn *txn;
	Raftlock__SessionInfo *infos;
	Raftlock__SessionInfo **ptrs;
	Raftlock__SessionRecord **recs;
	size_t n, limit;
	size_t bytes;
	bool more;
};

static int list_sessions_visit(void *arg, Raftlock__SessionRecord *rec)
{
	struct list_sessions_ctx *ctx = arg;
	if (ctx->n == ctx->limit || ctx->bytes > PAGE_BYTES_MAX) {
		raftlock__session_record__free_unpacked(rec, NULL);
		ctx->more = true;
		return 1;
	}
	ctx->bytes += raftlock__session_record__get_packed_size(rec);
	Raftlock__SessionInfo *info = &ctx->infos[ctx->n];
	raftlock__session_info__init(info);
	info->id = rec->id;
	info->ttl_ms = rec->ttl_ms;
	uint32_t ttl;
	if (!store_get_lease(ctx->store, ctx->txn, rec->id, &info->deadline, &ttl))
		info->deadline = 0;
	info->owner = rec->owner;
	info->opened_time = rec->opened_time;
	info->locks = rec->locks;
	info->n_locks = rec->n_locks;
	ctx->ptrs[ctx->n] = info;
	ctx->recs[ctx->n++] = rec;
	return 0;
}

static void read_list_sessions(struct service *s, struct conn *c, const Raftlock__Envelope *env,
			       MDB_txn *txn)
{
	const Raftlock__ListSessionsRequest *req = env->list_sessions;
	struct list_sessions_ctx ctx = {0};
	ctx.store = &s->node->store;
	ctx.txn = txn;
	ctx.limit = page_limit(req->limit);
	ctx.infos = calloc(ctx.limit, sizeof *ctx.infos);
	ctx.ptrs = calloc(ctx.limit, sizeof *ctx.ptrs);
	ctx.recs = calloc(ctx.limit, sizeof *ctx.recs);
	if (!ctx.infos || !ctx.ptrs || !ctx.recs)
		log_fatal("out of memory");
	store_scan_sessions(&s->node->store, txn, req->after, list_sessions_visit, &ctx);
	Raftlock__SessionList list = RAFTLOCK__SESSION_LIST__INIT;
	list.sessions = ctx.ptrs;
	list.n_sessions = ctx.n;
	list.more = ctx.more;
	list.cluster_time = store_now(s, txn);
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_SESSIONS;
	resp.sessions = &list;
	send_response(c, env->id, &resp);
	for (size_t i = 0; i < ctx.n; i++)
		raftlock__session_record__free_unpacked(ctx.recs[i], NULL);
	free(ctx.infos);
	free(ctx.ptrs);
	free(ctx.recs);
}

static void read_check_token(struct service *s, struct conn *c, const Raftlock__Envelope *env,
			     MDB_txn *txn)
{
	Raftlock__CheckTokenResult check = RAFTLOCK__CHECK_TOKEN_RESULT__INIT;
	Raftlock__LockRecord *rec = store_get_lock(&s->node->store, txn, env->check_token->name);
	if (rec != NULL) {
		for (size_t i = 0; i < rec->n_holders; i++) {
			uint64_t t = rec->holders[i]->token;
			if (t == env->check_token->token)
				check.current = true;
			if (t > check.highest)
				check.highest = t;
		}
		raftlock__lock_record__free_unpacked(rec, NULL);
	}
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_CHECK;
	resp.check = &check;
	send_response(c, env->id, &resp);
}

static void serve_read(struct service *s, struct conn *c, const Raftlock__Envelope *env)
{
	MDB_txn *txn = store_begin(&s->node->store, false);
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_GET_LOCK: read_get_lock(s, c, env, txn); break;
	case RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS: read_list_locks(s, c, env, txn); break;
	case RAFTLOCK__ENVELOPE__BODY_LIST_SESSIONS: read_list_sessions(s, c, env, txn); break;
	case RAFTLOCK__ENVELOPE__BODY_CHECK_TOKEN: read_check_token(s, c, env, txn); break;
	default: send_status(s, c, env->id, RAFTLOCK_EPROTO, "not a read"); break;
	}
	store_abort(txn);
}

static bool is_stale_read(const Raftlock__Envelope *env)
{
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_GET_LOCK: return env->get_lock->stale;
	case RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS: return env->list_locks->stale;
	case RAFTLOCK__ENVELOPE__BODY_LIST_SESSIONS: return env->list_sessions->stale;
	case RAFTLOCK__ENVELOPE__BODY_CHECK_TOKEN: return env->check_token->stale;
	default: return false;
	}
}

static void start_read_barrier(struct service *s);

/* A committed barrier proves this node was leader after every read in the
 * batch arrived, and everything committed before is applied. */
static void read_barrier_done(struct raft_barrier *req, int status)
{
	struct read_batch *b = req->data;
	struct service *s = b->svc;
	if (s->reads_inflight == b)
		s->reads_inflight = NULL;
	bool ok = status == 0 && s->node->ready;
	for (struct pending *p = b->head, *next; p != NULL; p = next) {
		next = p->next;
		if (ok)
			serve_read(s, p->conn, p->env);
		else
			send_status(s, p->conn, p->id,
				    status == RAFT_SHUTDOWN ? RAFTLOCK_ESHUTDOWN
							    : RAFTLOCK_ENOTLEADER,
				    NULL);
		pending_free(p);
	}
	free(b);
	if (!s->closing)
		start_read_barrier(s);
}

static void start_read_barrier(struct service *s)
{
	struct read_batch *b = s->reads_waiting;
	if (b == NULL || s->reads_inflight != NULL)
		return;
	s->reads_waiting = NULL;
	b->barrier.data = b;
	if (raft_barrier(&s->node->raft, &b->barrier, read_barrier_done) != 0) {
		for (struct pending *p = b->head, *next; p != NULL; p = next) {
			next = p->next;
			send_status(s, p->conn, p->id, RAFTLOCK_ENOTLEADER, NULL);
			pending_free(p);
		}
		free(b);
		return;
	}
	s->reads_inflight = b;
}

static void handle_read(struct service *s, struct conn *c, Raftlock__Envelope *env)
{
	struct pending *p = pending_new(c, env->id);
	struct read_batch *b = s->reads_waiting;
	if (b == NULL) {
		b = calloc(1, sizeof *b);
		if (b != NULL)
			b->svc = s;
	}
	if (p == NULL || b == NULL) {
		send_status(s, c, env->id, RAFTLOCK_ENOMEM, NULL);
		raftlock__envelope__free_unpacked(env, NULL);
		if (p)
			pending_free(p);
		if (b != s->reads_waiting)
			free(b);
		return;
	}
	p->env = env;
	p->next = b->head;
	b->head = p;
	s->reads_waiting = b;
	start_read_barrier(s);
}

/* -------------------------------------------------------------- status -- */

static void handle_status(struct service *s, struct conn *c, uint64_t id)
{
	struct node *n = s->node;
	Raftlock__StatusInfo st = RAFTLOCK__STATUS_INFO__INIT;
	Raftlock__Member members[CONFIG_MAX_MEMBERS], *mptrs[CONFIG_MAX_MEMBERS];
	st.node_id = s->cfg->id;
	st.role = (char *)node_role(n);
	st.term = raft_current_term(&n->raft);
	st.commit_index = raft_commit_index(&n->raft);
	st.applied_index = raft_last_applied(&n->raft);
	st.last_index = raft_last_index(&n->raft);
	const char *leader = node_leader_client_address(n, &st.leader_id);
	st.leader_address = (char *)(leader ? leader : "");
	st.ready = n->ready;
	st.cluster = (char *)s->cfg->cluster;
	for (unsigned i = 0; i < s->cfg->n_members; i++) {
		raftlock__member__init(&members[i]);
		members[i].id = s->cfg->members[i].id;
		members[i].raft_address = (char *)s->cfg->members[i].raft_address;
		members[i].client_address = (char *)s->cfg->members[i].client_address;
		mptrs[i] = &members[i];
	}
	st.members = mptrs;
	st.n_members = s->cfg->n_members;
	MDB_txn *txn = store_begin(&n->store, false);
	Raftlock__Meta *m = store_get_meta(&n->store, txn);
	st.cluster_time = n->ready ? node_cluster_now(n) : m->cluster_time;
	st.next_token = m->next_token;
	st.sessions = store_count_sessions(&n->store, txn);
	st.locks = store_count_locks(&n->store, txn);
	raftlock__meta__free_unpacked(m, NULL);
	store_abort(txn);
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_STATUS_INFO;
	resp.status_info = &st;
	send_response(c, id, &resp);
}

/* ------------------------------------------------------------ dispatch -- */

static void dispatch(struct service *s, struct conn *c, Raftlock__Envelope *env)
{
	if (env->body_case == RAFTLOCK__ENVELOPE__BODY_STATUS) {
		handle_status(s, c, env->id);
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	}
	if (env->body_case == RAFTLOCK__ENVELOPE__BODY_RESPONSE) {
		send_status(s, c, env->id, RAFTLOCK_EPROTO, "clients send requests, not responses");
		raftlock__envelope__free_unpacked(env, NULL);
		conn_close(c);
		return;
	}
	bool read = env->body_case == RAFTLOCK__ENVELOPE__BODY_GET_LOCK ||
		    env->body_case == RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS ||
		    env->body_case == RAFTLOCK__ENVELOPE__BODY_LIST_SESSIONS ||
		    env->body_case == RAFTLOCK__ENVELOPE__BODY_CHECK_TOKEN;
	if (read && is_stale_read(env)) {
		serve_read(s, c, env);
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	}
	if (c->refs > CONN_MAX_INFLIGHT) {
		send_status(s, c, env->id, RAFTLOCK_EOVERLOAD,
			    "too many requests in flight on this connection");
	} else if (s->node->stopping) {
		send_status(s, c, env->id, RAFTLOCK_ESHUTDOWN, NULL);
	} else if (!s->node->leader) {
		send_status(s, c, env->id, RAFTLOCK_ENOTLEADER, NULL);
	} else if (!s->node->ready) {
		send_status(s, c, env->id, RAFTLOCK_EUNAVAILABLE,
			    "new leader not ready yet (its barrier has not applied)");
	} else if (read) {
		handle_read(s, c, env); /* takes env */
		return;
	} else if (env->body_case == RAFTLOCK__ENVELOPE__BODY_KEEPALIVE) {
		handle_keepalive(s, c, env);
	} else {
		handle_mutation(s, c, env);
	}
	raftlock__envelope__free_unpacked(env, NULL);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	static char slab[65536]; /* loop thread only; copied into the reader */
	(void)suggested;
	*buf = uv_buf_init(slab, sizeof slab);
}

static void protocol_error(struct service *s, struct conn *c, const char *what)
{
	char peer[64] = "?";
	struct sockaddr_storage ss;
	int len = sizeof ss;
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0)
		uv_ip4_name((struct sockaddr_in *)&ss, peer, sizeof peer);
	log_warn("client %s: %s; closing its connection", peer, what);
	send_status(s, c, 0, RAFTLOCK_EPROTO, what);
	conn_close(c);
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
	struct conn *c = stream->data;
	struct service *s = c->svc;
	if (nread < 0) {
		conn_close(c);
		return;
	}
	if (nread == 0 || c->closing)
		return;
	if (frame_reader_feed(&c->reader, buf->base, (size_t)nread) != 0) {
		protocol_error(s, c, "out of memory buffering a frame");
		return;
	}
	const uint8_t *payload;
	size_t n;
	int rv;
	while (!c->closing && (rv = frame_reader_next(&c->reader, &payload, &n)) == 1) {
		Raftlock__Envelope *env;
		if (codec_decode_envelope(payload, n, &env) != 0) {
			protocol_error(s, c, "malformed or unknown message");
			return;
		}
		dispatch(s, c, env);
	}
	if (rv == RAFTLOCK_ETOOBIG)
		protocol_error(s, c, "frame length above the limit");
}

static void accept_cb(uv_stream_t *server, int status)
{
	struct service *s = server->data;
	if (status != 0 || s->closing)
		return;
	struct conn *c = calloc(1, sizeof *c);
	if (c == NULL)
		return;
	c->svc = s;
	c->refs = 1;
	frame_reader_init(&c->reader, RAFTLOCK_FRAME_MAX);
	uv_tcp_init(s->loop, &c->tcp);
	c->tcp.data = c;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
		conn_close(c);
		return;
	}
	uv_tcp_nodelay(&c->tcp, 1);
	uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
}

int service_start(struct service *s, uv_loop_t *loop, const struct config *cfg, struct node *node,
		  struct leases *leases, char *err, size_t errlen)
{
	memset(s, 0, sizeof *s);
	s->loop = loop;
	s->cfg = cfg;
	s->node = node;
	s->leases = leases;
	idmap_init(&s->pushes, sizeof(struct push_target *));
	int rv = listener_start(loop, &s->listener, s, "client-address", cfg->client_address, 511,
				accept_cb, err, errlen);
	if (rv != 0)
		return rv;
	uv_prepare_init(loop, &s->flusher);
	s->flusher.data = s;
	uv_prepare_start(&s->flusher, flusher_cb);
	uv_timer_init(loop, &s->resume_timer);
	s->resume_timer.data = s;
	return 0;
}

void service_on_ready(struct service *s, bool ready)
{
	if (ready)
		return;
	/* A node that stops serving forgets where grants go: the clients of
	 * queued acquires lose their connection, so that they re-send the
	 * acquire wherever the leader is now (even here, if this node wins
	 * again) and learn its outcome from the de-duplication table. Their
	 * connections are collected first: closing one edits the targets. */
	size_t n = 0, cap = 0;
	struct conn **victims = NULL;
	struct push_target **first;
	for (size_t pos = 0; (first = idmap_next(&s->pushes, &pos, NULL)) != NULL;) {
		for (struct push_target *t = *first, *next; t; t = next) {
			next = t->next;
			if (t->conn != NULL && !t->conn->closing) {
				if (grow(&victims, &cap, n + 1, 16, sizeof *victims) != 0)
					log_fatal("out of memory");
				victims[n++] = t->conn;
			}
			free(t);
		}
	}
	idmap_clear(&s->pushes);
	for (size_t i = 0; i < n; i++)
		conn_close(victims[i]); /* closing twice is a no-op */
	free(victims);
}

unsigned service_connections(const struct service *s)
{
	unsigned n = 0;
	for (const struct conn *c = s->conns; c != NULL; c = c->next)
		n += !c->closing;
	return n;
}

void service_close(struct service *s)
{
	s->closing = true;
	uv_close((uv_handle_t *)&s->listener, NULL);
	flush_all(s); /* the last answers go out before their connections close */
	uv_close((uv_handle_t *)&s->flusher, NULL);
	uv_close((uv_handle_t *)&s->resume_timer, NULL);
	for (struct conn *c = s->conns; c != NULL; c = c->next)
		conn_close(c);
	service_on_ready(s, false);
	idmap_close(&s->pushes);
}
