/* service.c: see service.h. */
#include "service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "frame.h"
#include "grow.h"
#include "limit_message.h"
#include "listener.h"
#include "log.h"
#include "raftlock.h"
#include "reads.h"
#include "outcomes.h"
#include "secret.h"
#include "status.h"
#include "tls_stream.h"

/* Bounds per connection: past this many requests in flight, more get
 * RAFTLOCK_EOVERLOAD (not executed: the client retries); a connection whose unread responses pile
 * up past the byte limit is closed (its client is not reading them). */
#define CONN_MAX_INFLIGHT 4096
#define CONN_MAX_UNSENT (64u << 20)
#define CONN_OUT_KEEP (256u << 10) /* see conn_flush */
/* Answers that pile up while one read's requests are decoded go to the
 * kernel at this size, not only at the end of the loop turn: a read brings
 * thousands of small requests, also from a client that already reset the
 * connection, and the failed write closes it before the rest are decoded. */
#define CONN_FEED_FLUSH (64u << 10)
#define RESUME_TICK_MS 50 /* how often paused connections are looked at */
/* One connection's share of a loop turn: this many requests or this much
 * time, whichever ends first (at least one request). Its whole frames
 * past that wait in its reader, read no further, for its next share
 * (backlog_cb): a client that pipelines expensive requests holds neither
 * the other connections nor raft's timers and heartbeats. The count is
 * high so that cheap requests, which one client pipelines by the hundred,
 * still share a log entry: at 64, 256 clients on one connection lost a
 * tenth of their rate. */
#define CONN_TURN_REQUESTS 1024
#define CONN_TURN_NS (2u * 1000 * 1000)

struct service_conn {
	uv_tcp_t tcp;
	/* With client-tls on: the engine that owns tcp's reading, writing and
	 * closing. Below "bytes in, bytes out" (conn_feed, conn_flush) nothing
	 * knows whether it is there. */
	struct tls_stream *tls;
	char *identity;     /* see service_conn_identity(); owned */
	bool cert_identity; /* identity is its verified certificate's CN */
	bool token_refused; /* it sent a token this node does not know */
	struct service *svc;
	struct frame_reader reader;
	int refs; /* the handle itself, plus each request and write in flight */
	bool closing;
	struct list link; /* in svc->conns */
	/* Responses encoded since the last flush: written with one write per
	 * loop iteration, so that a batch of answers costs the client one
	 * wake-up rather than one each. */
	uint8_t *out;
	size_t out_len, out_cap;
	struct list dirty; /* on svc->dirty (holding a reference) while linked */
	struct leases_budget keepalive_budget;
	bool paused;            /* reads stopped until the keepalive budget refills */
	uint64_t admission_key; /* counted in svc->admission; 0: not counted */
	/* How it was counted: ADMISSION_REFUSE is told once its TLS handshake ends. */
	enum admission_verdict admitted;
	uint64_t frame_started; /* loop ms when the pending frame began; 0: none */
	uint64_t *kept;         /* sessions bindings_note() said it keeps */
	size_t n_kept, cap_kept;
	/* On svc->backlog while whole frames wait for its turn; no reference:
	 * conn_close takes it off, before the handle's close frees it. */
	struct list backlog;
};

/* A request waiting for its proposal, keepalive or barrier. */
struct service_request {
	struct service_conn *conn;
	uint64_t id;
	enum service_op op;
	uint64_t start_ns; /* uv_hrtime() when it arrived */
	uint64_t session, seq;
	Raftlock__Envelope *env; /* reads only: the request, owned */
};

/* ---------------------------------------------------------- connections */

static void conn_unref(struct service_conn *c);

static void conn_closed(uv_handle_t *h)
{
	conn_unref(h->data);
}

static void conn_tls_closed(struct tls_stream *ts)
{
	conn_unref(ts->data);
}

static void conn_flush(struct service_conn *c);

static void conn_close(struct service_conn *c)
{
	if (c->closing)
		return;
	conn_flush(c); /* the last answers (an EPROTO, say) go out first */
	if (c->closing)
		return;
	c->closing = true;
	list_remove(&c->backlog); /* what else it sent is not served */
	admission_leave(&c->svc->admission, c->admission_key, c->admitted);
	c->admission_key = 0;
	pushes_forget_conn(&c->svc->pushes, c);
	bindings_closed(&c->svc->bindings, c, c->kept, c->n_kept);
	watches_forget_conn(&c->svc->watches, c);
	if (c->tls != NULL)
		tls_stream_close(c->tls, conn_tls_closed); /* close_notify, then the TCP */
	else
		uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

/* Closes c without the last answers: for a connection whose writes failed
 * or that stopped reading (conn_close would try to flush them again). */
static void conn_abort(struct service_conn *c)
{
	c->out_len = 0;
	conn_close(c);
}

static void conn_unref(struct service_conn *c)
{
	if (--c->refs > 0)
		return;
	list_remove(&c->link);
	frame_reader_close(&c->reader);
	free(c->out);
	free(c->kept);
	free(c->tls);
	free(c->identity);
	free(c);
}

const char *service_conn_identity(const struct service_conn *c)
{
	return c->identity;
}

void service_set_tls(struct service *s, SSL_CTX *tls)
{
	if (s->tls != NULL && tls != NULL)
		s->tls = tls;
}

void service_auth_tokens(struct service *s, const struct auth_tokens *tokens)
{
	s->tokens = tokens;
}

struct write_req {
	union {
		uv_write_t req;             /* plaintext: first, see write_done */
		struct tls_stream_write tw; /* TLS */
	};
	struct service_conn *conn;
	uint8_t *buf;
};

static void written(struct write_req *w, int status)
{
	struct service_conn *c = w->conn;
	free(w->buf);
	free(w);
	if (status != 0)
		conn_close(c);
	conn_unref(c);
}

static void write_done(uv_write_t *req, int status)
{
	written((struct write_req *)req, status);
}

static void tls_write_done(struct tls_stream_write *req, int status)
{
	written(req->data, status);
}

/* Bytes handed over for this connection and not yet to the kernel. */
static size_t conn_unsent(const struct service_conn *c)
{
	if (c->tls != NULL)
		return tls_stream_write_queue_size(c->tls);
	return uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp);
}

/* Plaintext: hands what the kernel takes at once straight to it; only a
 * rest needs a write request. A uv_write that completes at once still
 * costs libuv a poll-interest change (epoll_ctl) and a callback on the
 * next loop turn. Returns the bytes sent, or -1 after closing c. */
static ssize_t conn_try_write(struct service_conn *c)
{
	uv_buf_t b = uv_buf_init((char *)c->out, (unsigned)c->out_len);
	/* UV_EAGAIN also while earlier writes wait in libuv's queue: the
	 * order of the bytes is kept. */
	int rv = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
	if (rv >= 0)
		return rv;
	if (rv == UV_EAGAIN)
		return 0;
	conn_abort(c);
	return -1;
}

/* Hands what the connection has buffered to the kernel, or to libuv in one
 * write. */
static void conn_flush(struct service_conn *c)
{
	if (c->closing || c->out_len == 0)
		return;
	if (conn_unsent(c) + c->out_len > CONN_MAX_UNSENT) {
		log_warn("a client is not reading its responses; closing its connection");
		conn_abort(c);
		return;
	}
	size_t sent = 0;
	if (c->tls == NULL) {
		ssize_t n = conn_try_write(c);
		if (n < 0)
			return;
		sent = (size_t)n;
		if (sent == c->out_len) {
			/* c->out keeps its room for the next answers, unless a
			 * burst made it large. */
			c->out_len = 0;
			if (c->out_cap > CONN_OUT_KEEP) {
				free(c->out);
				c->out = NULL;
				c->out_cap = 0;
			}
			return;
		}
	}
	struct write_req *w = malloc(sizeof *w);
	if (w == NULL) {
		conn_abort(c);
		return;
	}
	w->buf = c->out;
	uv_buf_t b = uv_buf_init((char *)c->out + sent, (unsigned)(c->out_len - sent));
	c->out = NULL;
	c->out_len = c->out_cap = 0;
	w->conn = c;
	c->refs++;
	int rv;
	if (c->tls != NULL) {
		w->tw.data = w;
		rv = tls_stream_write(&w->tw, c->tls, &b, 1, tls_write_done); /* one SSL_write */
		if (rv == TLS_STREAM_WRITTEN) {
			written(w, 0); /* c keeps the reference of its caller */
			return;
		}
	} else {
		rv = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, write_done);
	}
	if (rv != 0) {
		free(w->buf);
		free(w);
		c->refs--;
		conn_close(c);
	}
}

/* Runs once per loop iteration, before the loop waits for I/O. The answers
 * of a connection whose frames wait for their turn (conn_defer) go on
 * piling up, to leave with those of its last turn in one write, unless
 * they reach CONN_FEED_FLUSH. */
static void flush_all(struct service *s)
{
	struct list later, *l;
	list_init(&later);
	while ((l = list_first(&s->dirty)) != NULL) {
		struct service_conn *c = list_entry(l, struct service_conn, dirty);
		list_remove(l);
		if (!s->closing && list_linked(&c->backlog) && c->out_len < CONN_FEED_FLUSH) {
			list_add_tail(&later, l); /* keeps its reference */
			continue;
		}
		conn_flush(c);
		conn_unref(c);
	}
	while ((l = list_first(&later)) != NULL) {
		list_remove(l);
		list_add_tail(&s->dirty, l);
	}
}

/* Watches' states go out a page per loop turn while their connection has
 * fewer than WATCH_STATE_ROOM bytes waiting (watch.h); when none can go
 * on at once, they are looked at again every WATCH_STATE_POLL_MS. */
#define WATCH_STATE_ROOM (1u << 20)
#define WATCH_STATE_POLL_MS 10

static bool watch_room(void *arg, const struct service_conn *c)
{
	(void)arg;
	return !c->closing && conn_unsent(c) + c->out_len < WATCH_STATE_ROOM;
}

static void watch_stalled(void *arg, struct service_conn *c, const char *why)
{
	(void)arg;
	log_warn("closing a client's connection: %s", why);
	conn_abort(c);
}

static void state_timer_cb(uv_timer_t *h)
{
	struct service *s = h->data;
	bool more = watches_pump(&s->watches, uv_now(s->loop));
	/* until a held-back count of ended watches is said, states or not */
	if (more || watches_states(&s->watches) > 0 || watches_ends_unlogged(&s->watches))
		uv_timer_start(h, state_timer_cb, more ? 0 : WATCH_STATE_POLL_MS, 0);
}

static void flusher_cb(uv_prepare_t *h)
{
	struct service *s = h->data;
	flush_all(s);
	if (watches_states(&s->watches) > 0 && !uv_is_active((uv_handle_t *)&s->state_timer))
		uv_timer_start(&s->state_timer, state_timer_cb, 0, 0);
}

static void send_envelope(struct service_conn *c, const Raftlock__Envelope *env)
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
	if (!list_linked(&c->dirty)) {
		c->refs++;
		list_add_tail(&c->svc->dirty, &c->dirty);
	}
}

static void send_response(struct service_conn *c, uint64_t id, Raftlock__Response *resp)
{
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.id = id;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_RESPONSE;
	env.response = resp;
	send_envelope(c, &env);
}

static void send_status(struct service *s, struct service_conn *c, uint64_t id, int status,
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

const char *const service_op_names[SERVICE_OPS] = {"open_session", "close_session", "acquire",
						   "release",      "cancel_wait",   "acl",
						   "keepalive",    "read",          "member"};

static struct service_request *request_new(struct service_conn *c, uint64_t id, enum service_op op)
{
	struct service_request *p = calloc(1, sizeof *p);
	if (p == NULL)
		return NULL;
	p->conn = c;
	p->id = id;
	p->op = op;
	p->start_ns = uv_hrtime();
	c->refs++;
	return p;
}

/* Its answer is queued: how long it took. */
static void request_observe(const struct service_request *p)
{
	histogram_observe(&p->conn->svc->latency[p->op], uv_hrtime() - p->start_ns);
}

static void request_free(struct service_request *p)
{
	if (p->env != NULL)
		raftlock__envelope__free_unpacked(p->env, NULL);
	conn_unref(p->conn);
	free(p);
}

/* c keeps session (its open or keepalive came on c): revocation events
 * go there, and a bound session ends soon after c closes. */
static void conn_keeps(struct service_conn *c, uint64_t session)
{
	struct service *s = c->svc;
	if (c->closing)
		return;
	uint32_t grace = leases_bind_grace(s->leases, session);
	if (!bindings_note(&s->bindings, session, c, grace))
		return;
	if (grow(&c->kept, &c->cap_kept, c->n_kept + 1, 16, sizeof *c->kept) == 0)
		c->kept[c->n_kept++] = session;
}

/* Revocation events (fsm.c) go to the connection that keeps the holder's
 * session, if this node is the ready leader and one does. */
static void push_session_event(struct service *s, const struct fsm_event *ev)
{
	struct service_conn *c = bindings_conn(&s->bindings, ev->session);
	if (c == NULL || c->closing || !s->node->ready)
		return;
	Raftlock__SessionEvent se = RAFTLOCK__SESSION_EVENT__INIT;
	se.kind = ev->type == FSM_EV_REVOKED
			  ? RAFTLOCK__SESSION_EVENT_KIND__SESSION_EVENT_REVOKED
			  : RAFTLOCK__SESSION_EVENT_KIND__SESSION_EVENT_RELEASE_REQUESTED;
	se.session = ev->session;
	se.name = (char *)ev->name;
	se.owner = ev->owner;
	se.token = ev->token;
	se.deadline = ev->deadline;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.push = true;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_SESSION_EVENT;
	resp.session_event = &se;
	send_response(c, 0, &resp);
}

void service_on_event(struct service *s, const struct fsm_event *ev)
{
	if (ev->type == FSM_EV_CHANGE) {
		watches_on_change(&s->watches, ev->change);
		return;
	}
	if (ev->type == FSM_EV_SESSION_GONE) {
		pushes_forget_session(&s->pushes, ev->session);
		bindings_forget(&s->bindings, ev->session);
		return;
	}
	if (ev->type == FSM_EV_DROP_KEPT) {
		bindings_drop_kept(&s->bindings, ev->session, ev->deadline);
		return;
	}
	if (ev->type == FSM_EV_REVOKED || ev->type == FSM_EV_RELEASE_REQUESTED) {
		push_session_event(s, ev);
		return;
	}
	if (ev->type != FSM_EV_PUSH)
		return;
	struct push_target *t = pushes_find(&s->pushes, ev->session, ev->seq);
	if (t == NULL)
		return;
	if (!t->answered) {
		/* The acquire's own answer has not gone out: it carries this. */
		pushes_keep_result(t, ev->result);
		return;
	}
	t = pushes_take(&s->pushes, ev->session, ev->seq);
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
	pushes_target_free(t);
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
	struct service_request *p = arg;
	struct service *s = p->conn->svc;
	/* The push target this acquire registered, unless a retry moved it. */
	struct push_target *t = p->seq ? pushes_find(&s->pushes, p->session, p->seq) : NULL;
	if (t != NULL && (t->conn != p->conn || t->id != p->id))
		t = NULL;
	Raftlock__Result res = status == 0 ? *result : (Raftlock__Result)RAFTLOCK__RESULT__INIT;
	if (status == 0 && t != NULL && t->have_result)
		res = t->result;          /* granted (or ended) before we could answer */
	struct push_target *taken = NULL; /* freed once res is sent: its tokens */
	if (t != NULL) {
		if (status == 0 && res.queued && !p->conn->closing)
			t->answered = true;
		else
			taken = pushes_take(&s->pushes, p->session, p->seq);
	}
	if (status == 0 && p->op == SERVICE_OP_OPEN_SESSION && res.status == 0)
		conn_keeps(p->conn, res.session);
	if (status != 0) {
		send_status(s, p->conn, p->id, unapplied_status(status), NULL);
	} else {
		Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
		char why[RAFTLOCK_NAME_MAX + 160];
		resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_RESULT;
		resp.result = &res;
		if (res.status == RAFTLOCK_ELIMIT &&
		    limit_message(&res, p->conn->identity, why, sizeof why))
			resp.message = why;
		s->identity_sessions_refused +=
			res.limit == RAFTLOCK__LIMIT__LIMIT_SESSIONS_PER_IDENTITY;
		s->lock_waiters_refused += res.limit == RAFTLOCK__LIMIT__LIMIT_WAITERS_PER_LOCK;
		send_response(p->conn, p->id, &resp);
	}
	pushes_target_free(taken);
	request_observe(p);
	request_free(p);
}

static enum service_op op_of(const Raftlock__Command *cmd)
{
	switch (cmd->op_case) {
	case RAFTLOCK__COMMAND__OP_OPEN_SESSION: return SERVICE_OP_OPEN_SESSION;
	case RAFTLOCK__COMMAND__OP_CLOSE_SESSION: return SERVICE_OP_CLOSE_SESSION;
	case RAFTLOCK__COMMAND__OP_ACQUIRE:
	case RAFTLOCK__COMMAND__OP_MULTI_ACQUIRE: return SERVICE_OP_ACQUIRE;
	case RAFTLOCK__COMMAND__OP_RELEASE: return SERVICE_OP_RELEASE;
	case RAFTLOCK__COMMAND__OP_CANCEL_WAIT: return SERVICE_OP_CANCEL_WAIT;
	default: return SERVICE_OP_ACL;
	}
}

/* Proposes cmd for request id of c; a parked one may ride in a later
 * entry (node_propose_call). */
static void propose_for(struct service *s, struct service_conn *c, uint64_t id,
			const Raftlock__Command *cmd, bool pushable, bool parked)
{
	struct service_request *p = request_new(c, id, op_of(cmd));
	if (p == NULL) {
		send_status(s, c, id, RAFTLOCK_EOVERLOAD, NULL);
		return;
	}
	p->session = cmd->session;
	p->seq = pushable ? cmd->seq : 0;
	if (p->seq != 0)
		pushes_set(&s->pushes, p->session, p->seq, c, id);
	int rv = node_propose_call(s->node, cmd, mutation_done, p, parked);
	if (rv != 0) {
		if (p->seq != 0)
			pushes_target_free(pushes_take(&s->pushes, p->session, p->seq));
		send_status(s, c, id, unapplied_status(rv), NULL);
		request_free(p);
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
	dst->max_hold_ms = src->max_hold_ms;
	dst->revoke_grace_ms = src->revoke_grace_ms;
	dst->value = src->value;
}

/* Elections: PROCLAIM, rebuilt field by field like an acquire. The one
 * place where the command is made, so that a cluster feature level can
 * gate it. */
static void election_proclaim(Raftlock__Command *cmd, Raftlock__Proclaim *dst,
			      const Raftlock__Proclaim *src)
{
	raftlock__proclaim__init(dst);
	dst->name = src->name;
	dst->owner = src->owner;
	dst->token = src->token;
	dst->value = src->value;
	cmd->op_case = RAFTLOCK__COMMAND__OP_PROCLAIM;
	cmd->proclaim = dst;
}

/* The sequence header of a mutation: the envelope's (protocol 2), or the
 * fields a protocol 1 client put in the request itself, copied to *legacy. */
static const Raftlock__Sequence *request_sequence(const Raftlock__Envelope *env,
						  Raftlock__Sequence *legacy)
{
	if (env->sequence != NULL)
		return env->sequence;
	*legacy = (Raftlock__Sequence)RAFTLOCK__SEQUENCE__INIT;
#define LEGACY(req)                                   \
	do {                                          \
		legacy->session = (req)->session;     \
		legacy->seq = (req)->seq;             \
		legacy->ack_below = (req)->ack_below; \
		legacy->acked = (req)->acked;         \
		legacy->n_acked = (req)->n_acked;     \
	} while (0)
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION: LEGACY(env->close_session); break;
	case RAFTLOCK__ENVELOPE__BODY_ACQUIRE: LEGACY(env->acquire); break;
	case RAFTLOCK__ENVELOPE__BODY_RELEASE: LEGACY(env->release); break;
	case RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT: LEGACY(env->cancel_wait); break;
	default: break;
	}
#undef LEGACY
	return legacy;
}

/* Whether env acts on a session, named by its sequence header: the
 * mutations other than a session open, the access rules and revocations. */
static bool acts_on_session(const Raftlock__Envelope *env)
{
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION:
	case RAFTLOCK__ENVELOPE__BODY_ACQUIRE:
	case RAFTLOCK__ENVELOPE__BODY_RELEASE:
	case RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT:
	case RAFTLOCK__ENVELOPE__BODY_MULTI_ACQUIRE:
	case RAFTLOCK__ENVELOPE__BODY_PROCLAIM: return true;
	default: return false;
	}
}

/* The session a session open's nonce opened, if it is still open; 0 if
 * none. */
static uint64_t nonce_session(struct store *st, uint64_t nonce)
{
	if (nonce == 0)
		return 0;
	MDB_txn *txn = store_begin(st, false);
	uint64_t id = store_get_nonce(st, txn, nonce);
	store_abort(txn);
	return id;
}

/*
 * Whether env is the retry of a mutation the applied state shows already
 * ran: a session open whose nonce opened a session still open, or a
 * sequenced request whose (session, seq) has an outcome in the session's
 * record; either sent by the session's identity (with auth on, an
 * authenticated one) with its secret. Such a retry is proposed again
 * whatever the refusals made before the log would say now (an access rule
 * deleted since, a minimum TTL raised since): apply answers it from its
 * record, as the first execution was answered (GUARANTEES rules 6, 15).
 * The session may end before an open's retry applies, which then opens a
 * new one: ttl_allowed() gives it a legal TTL.
 */
static bool already_ran(struct service *s, struct service_conn *c, const Raftlock__Envelope *env)
{
	struct store *st = &s->node->store;
	Raftlock__Sequence legacy;
	const Raftlock__Sequence *seq = request_sequence(env, &legacy);
	bool opening = env->body_case == RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION:
	case RAFTLOCK__ENVELOPE__BODY_ACQUIRE:
	case RAFTLOCK__ENVELOPE__BODY_RELEASE:
	case RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT:
	case RAFTLOCK__ENVELOPE__BODY_MULTI_ACQUIRE:
	case RAFTLOCK__ENVELOPE__BODY_PROCLAIM: break;
	default: return false;
	}
	const char *identity = c->identity != NULL ? c->identity : "";
	uint64_t id = opening ? nonce_session(st, env->open_session->nonce) : seq->session;
	const ProtobufCBinaryData *secret = opening ? &env->open_session->secret : &seq->secret;
	if (id == 0 || (!opening && seq->seq == 0) || (s->cfg->auth && identity[0] == '\0') ||
	    leases_check_secret(s->leases, id, secret) != 0)
		return false;
	bool ran = false;
	MDB_txn *txn = store_begin(st, false);
	Raftlock__SessionRecord *sess = store_get_session(st, txn, id);
	if (sess != NULL) {
		ran = strcmp(sess->identity, identity) == 0;
		if (ran && !opening) {
			Raftlock__Meta *meta = store_get_meta(st, txn);
			struct outcomes oc = outcomes_at(st, txn, meta);
			const Raftlock__Outcome *o = outcomes_find(&oc, sess, seq->seq);
			ran = o != NULL;
			outcomes_release(&oc, o);
			raftlock__meta__free_unpacked(meta, NULL);
		}
		raftlock__session_record__free_unpacked(sess, NULL);
	}
	store_abort(txn);
	return ran;
}

/* protobuf-c keeps any int32 it reads into an enum field. A lock kind or
 * mode the protocol does not define is refused here, before the log, with
 * EINVAL; apply still takes such an entry as older builds logged and
 * applied it (the lock gets that kind, the grant that mode), so that a
 * replay of an existing log ends in the same state. The same holds for a
 * lock-delay or hold limit above its bound (raftlock.h). */
static bool enum_defined(const ProtobufCEnumDescriptor *desc, int value)
{
	return protobuf_c_enum_descriptor_get_value(desc, value) != NULL;
}

/* The fields of an acquire, or of a lock set's item, that the state
 * machine takes as they come but the protocol bounds. */
struct lock_fields {
	const char *name;
	int kind, mode;
	uint32_t lock_delay_ms, max_hold_ms, revoke_grace_ms;
};

/* Whether a time field `what` of the request on `name` is above its
 * bound; if so, the refusal in msg. */
static bool ms_above(char *msg, size_t len, const char *request, const char *name, const char *what,
		     uint32_t ms, uint32_t max_ms)
{
	if (ms <= max_ms)
		return false;
	snprintf(msg, len, "%s '%s': %s %u ms is above the most allowed, %u ms; nothing done",
		 request, name, what, ms, max_ms);
	return true;
}

/* Whether f is within the protocol's values; answers EINVAL naming the
 * field when not. */
static bool lock_fields_allowed(struct service *s, struct service_conn *c,
				const Raftlock__Envelope *env, const struct lock_fields *f)
{
	char msg[RAFTLOCK_NAME_MAX + 128];
	if (!enum_defined(&raftlock__lock_kind__descriptor, f->kind))
		snprintf(msg, sizeof msg, "lock '%s': kind %d is not a lock kind; nothing done",
			 f->name, f->kind);
	else if (!enum_defined(&raftlock__mode__descriptor, f->mode))
		snprintf(msg, sizeof msg,
			 "lock '%s': mode %d is neither exclusive nor shared; nothing done",
			 f->name, f->mode);
	else if (!ms_above(msg, sizeof msg, "lock", f->name, "lock-delay", f->lock_delay_ms,
			   RAFTLOCK_LOCK_DELAY_MAX_MS) &&
		 !ms_above(msg, sizeof msg, "lock", f->name, "max-hold", f->max_hold_ms,
			   RAFTLOCK_MAX_HOLD_MAX_MS) &&
		 !ms_above(msg, sizeof msg, "lock", f->name, "revoke-grace", f->revoke_grace_ms,
			   RAFTLOCK_REVOKE_GRACE_MAX_MS))
		return true;
	if (already_ran(s, c, env))
		return true; /* an older build logged it: apply answers it */
	send_status(s, c, env->id, RAFTLOCK_EINVAL, msg);
	return false;
}

static bool acquire_allowed(struct service *s, struct service_conn *c,
			    const Raftlock__Envelope *env)
{
	const Raftlock__Acquire *a = env->acquire->acquire;
	struct lock_fields f = {.name = a->name,
				.kind = a->kind,
				.mode = a->mode,
				.lock_delay_ms = a->lock_delay_ms,
				.max_hold_ms = a->max_hold_ms,
				.revoke_grace_ms = a->revoke_grace_ms};
	return lock_fields_allowed(s, c, env, &f);
}

static bool multi_acquire_allowed(struct service *s, struct service_conn *c,
				  const Raftlock__Envelope *env)
{
	const Raftlock__MultiAcquire *m = env->multi_acquire->acquire;
	for (size_t i = 0; i < m->n_items; i++) {
		const Raftlock__MultiItem *it = m->items[i];
		/* a set's items carry no max-hold nor revoke-grace */
		struct lock_fields f = {.name = it->name,
					.kind = it->kind,
					.mode = it->mode,
					.lock_delay_ms = it->lock_delay_ms};
		if (!lock_fields_allowed(s, c, env, &f))
			return false;
	}
	return true;
}

/* The storage of a MULTI_ACQUIRE command built from a request. */
struct multi_acquire_buf {
	Raftlock__MultiAcquire op;
	Raftlock__MultiItem items[RAFTLOCK_MULTI_MAX];
	Raftlock__MultiItem *ptrs[RAFTLOCK_MULTI_MAX];
};

/* The one place a MULTI_ACQUIRE command (feature level 3, checked by
 * refused_for_level() first) is made: rebuilt field by field, as
 * copy_acquire() does, with the leader's waiter limit. The request was
 * checked by the decoder (at most RAFTLOCK_MULTI_MAX items, valid names). */
static void multi_acquire_command(struct service *s, const Raftlock__MultiAcquire *src,
				  struct multi_acquire_buf *b, Raftlock__Command *cmd)
{
	raftlock__multi_acquire__init(&b->op);
	for (size_t i = 0; i < src->n_items; i++) {
		const Raftlock__MultiItem *it = src->items[i];
		raftlock__multi_item__init(&b->items[i]);
		b->items[i].name = it->name;
		b->items[i].kind = it->kind;
		b->items[i].mode = it->mode;
		b->items[i].permits = it->permits;
		b->items[i].limit = it->limit;
		b->items[i].lock_delay_ms = it->lock_delay_ms;
		b->ptrs[i] = &b->items[i];
	}
	b->op.items = b->ptrs;
	b->op.n_items = src->n_items;
	b->op.owner = src->owner;
	b->op.wait = src->wait;
	b->op.wait_ms = src->wait_ms;
	if (src->wait)
		b->op.max_waiters = s->cfg->max_waiters_per_lock;
	cmd->op_case = RAFTLOCK__COMMAND__OP_MULTI_ACQUIRE;
	cmd->multi_acquire = &b->op;
}

/* Rule 8: every mutating request carries (session, seq, ack_below), and
 * the queued acquires it acknowledges (at most FSM_MAX_ACKED reach the
 * log; the client never sends more). */
static void set_sequence(Raftlock__Command *cmd, const Raftlock__Sequence *h)
{
	cmd->session = h->session;
	cmd->seq = h->seq;
	cmd->ack_below = h->ack_below;
	cmd->acked = h->acked;
	cmd->n_acked = h->n_acked < FSM_MAX_ACKED ? h->n_acked : FSM_MAX_ACKED;
}

/* GUARANTEES rule 8: a TTL below RAFTLOCK_TTL_ELECTION_FACTOR election
 * timeouts is refused before it reaches the log, with a message that names
 * the minimum. Such a session's validity would not outlast even the
 * shortest failover. A TTL outside the protocol's range is the state
 * machine's to refuse. The retry of an open that already ran is not
 * refused: its session exists. */
static bool ttl_allowed(struct service *s, struct service_conn *c, const Raftlock__Envelope *env,
			uint32_t *ttl_ms)
{
	uint32_t ttl = env->open_session->ttl_ms;
	unsigned et = s->cfg->election_timeout_ms;
	uint64_t min = (uint64_t)RAFTLOCK_TTL_ELECTION_FACTOR * et;
	*ttl_ms = ttl;
	if (ttl < RAFTLOCK_TTL_MIN_MS || ttl >= min)
		return true;
	if (already_ran(s, c, env)) {
		/* Apply answers a retry from its session (its TTL); should that
		 * session end first, the new one it opens has a legal TTL. */
		*ttl_ms = (uint32_t)min;
		return true;
	}
	char msg[200];
	snprintf(msg, sizeof msg,
		 "ttl %u ms is below %llu ms, the shortest this cluster allows (%d times its "
		 "election timeout of %u ms)",
		 ttl, (unsigned long long)min, RAFTLOCK_TTL_ELECTION_FACTOR, et);
	send_status(s, c, env->id, RAFTLOCK_EINVAL, msg);
	return false;
}

/* Rule 14: a session open brings a secret, of which the log gets only the
 * digest (into digest, which open->secret_digest points to); any other
 * mutating request acts on its session only with the session's secret.
 * The check comes before the log, and so before the session's
 * de-duplication table: a stranger can neither run nor settle a sequence
 * of the session. A session this leader does not know is not proposed
 * either: it is answered as apply answers a session that ended. */
static bool secret_admitted(struct service *s, struct service_conn *c,
			    const Raftlock__Envelope *env, const Raftlock__Sequence *seq,
			    Raftlock__OpenSession *open, uint8_t digest[SECRET_DIGEST_LEN])
{
	bool opening = env->body_case == RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
	const ProtobufCBinaryData *secret = opening ? &env->open_session->secret : &seq->secret;
	char msg[200];
	int rv = secret_refusal(env->protocol, secret, opening, msg, sizeof msg);
	if (rv == 0 && opening) {
		secret_digest(secret, digest);
		open->secret_digest = (ProtobufCBinaryData){SECRET_DIGEST_LEN, digest};
		return true;
	}
	int known = rv == 0 ? leases_check_secret(s->leases, seq->session, secret) : 0;
	if (known == RAFTLOCK_EPERM) {
		rv = RAFTLOCK_EPERM;
		snprintf(msg, sizeof msg,
			 "session %llu: the request does not carry the session's secret; nothing "
			 "done",
			 (unsigned long long)seq->session);
	} else if (known == RAFTLOCK_ESESSION && (seq->session != 0 || acts_on_session(env))) {
		/* Not open here (session 0 never is: a set or a proclaim
		 * without a sequence header names it, which apply would
		 * answer ESESSION). Proposed, the request would apply after an
		 * open of that id not applied yet and act on the new session
		 * without its secret (ids are sequential): it is not proposed.
		 * An id this leader has not given out yet is such an open, or
		 * one a newer leader made while this one was cut off: "not
		 * executed", and the client tries again (elsewhere). Below it,
		 * the session ended: the answer apply gives, a Result, which
		 * the client takes as final (a retried close learns it is
		 * done). */
		if (leases_unknown_status(s->leases, seq->session) == RAFTLOCK_EUNAVAILABLE) {
			snprintf(msg, sizeof msg,
				 "session %llu is not open on this node (yet); nothing done",
				 (unsigned long long)seq->session);
			send_status(s, c, env->id, RAFTLOCK_EUNAVAILABLE, msg);
			return false;
		}
		Raftlock__Result res = RAFTLOCK__RESULT__INIT;
		res.status = RAFTLOCK_ESESSION;
		Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
		resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_RESULT;
		resp.result = &res;
		snprintf(msg, sizeof msg, "session %llu is not open; nothing done",
			 (unsigned long long)seq->session);
		resp.message = msg;
		send_response(c, env->id, &resp);
		return false;
	}
	if (rv != 0)
		send_status(s, c, env->id, rv, msg);
	return rv == 0;
}

/* An access rule change (allowed by auth_check_request) as a command;
 * false when it was answered instead. */
static bool acl_change(struct service *s, struct service_conn *c, const Raftlock__Envelope *env,
		       Raftlock__Command *cmd, Raftlock__AclSet *set, Raftlock__AclDelete *del)
{
	if (!s->cfg->auth) {
		send_status(s, c, env->id, RAFTLOCK_EPERM,
			    "authentication is off at this node (auth = off): turn it on to "
			    "change the access rules");
		return false;
	}
	if (env->body_case == RAFTLOCK__ENVELOPE__BODY_ACL_DELETE) {
		del->identity = env->acl_delete->rule->identity;
		del->prefix = env->acl_delete->rule->prefix;
		cmd->op_case = RAFTLOCK__COMMAND__OP_ACL_DELETE;
		cmd->acl_delete = del;
		return true;
	}
	const Raftlock__AclSet *rule = env->acl_set->rule;
	if (rule->perms == 0 || (rule->perms & ~(uint32_t)AUTH_ALL) != 0) {
		send_status(s, c, env->id, RAFTLOCK_EINVAL,
			    "permissions are a non-empty set of lock, read and admin");
		return false;
	}
	set->identity = rule->identity;
	set->prefix = rule->prefix;
	set->perms = rule->perms;
	cmd->op_case = RAFTLOCK__COMMAND__OP_ACL_SET;
	cmd->acl_set = set;
	return true;
}

static void handle_mutation(struct service *s, struct service_conn *c,
			    const Raftlock__Envelope *env)
{
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	Raftlock__OpenSession open = RAFTLOCK__OPEN_SESSION__INIT;
	Raftlock__Owner owner = RAFTLOCK__OWNER__INIT;
	Raftlock__CloseSession close = RAFTLOCK__CLOSE_SESSION__INIT;
	Raftlock__Acquire acquire;
	Raftlock__Release release = RAFTLOCK__RELEASE__INIT;
	Raftlock__CancelWait cancel = RAFTLOCK__CANCEL_WAIT__INIT;
	Raftlock__AclSet acl_set = RAFTLOCK__ACL_SET__INIT;
	Raftlock__AclDelete acl_delete = RAFTLOCK__ACL_DELETE__INIT;
	struct multi_acquire_buf multi;
	Raftlock__Revoke revoke = RAFTLOCK__REVOKE__INIT;
	Raftlock__Proclaim proclaim;
	Raftlock__Sequence legacy;
	const Raftlock__Sequence *seq = request_sequence(env, &legacy);
	uint8_t digest[SECRET_DIGEST_LEN];
	char refusal[RAFTLOCK_NAME_MAX + 128];
	bool pushable = false, parked = false;
	if (env->body_case != RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION &&
	    !secret_admitted(s, c, env, seq, NULL, NULL))
		return;
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION:
		if (!ttl_allowed(s, c, env, &open.ttl_ms) ||
		    !secret_admitted(s, c, env, seq, &open, digest))
			return;
		open.nonce = env->open_session->nonce;
		open.acks_queued = env->open_session->acks_queued;
		open.bind_grace_ms = env->open_session->bind_grace_ms;
		if (env->open_session->owner != NULL) {
			owner.client_name = env->open_session->owner->client_name;
			owner.host = env->open_session->owner->host;
			owner.pid = env->open_session->owner->pid;
			open.owner = &owner;
		}
		/* The session serves this identity only (auth.h). */
		open.identity = (char *)(c->identity != NULL ? c->identity : "");
		if (s->cfg->auth)
			open.max_sessions_per_identity = s->cfg->max_sessions_per_identity;
		cmd.op_case = RAFTLOCK__COMMAND__OP_OPEN_SESSION;
		cmd.open_session = &open;
		break;
	case RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION:
		set_sequence(&cmd, seq);
		cmd.op_case = RAFTLOCK__COMMAND__OP_CLOSE_SESSION;
		cmd.close_session = &close;
		break;
	case RAFTLOCK__ENVELOPE__BODY_ACQUIRE:
		if (!acquire_allowed(s, c, env))
			return;
		set_sequence(&cmd, seq);
		cmd.op_case = RAFTLOCK__COMMAND__OP_ACQUIRE;
		copy_acquire(&acquire, env->acquire->acquire);
		if (acquire.wait)
			acquire.max_waiters = s->cfg->max_waiters_per_lock;
		cmd.acquire = &acquire;
		pushable = env->acquire->acquire->wait;
		/* It will queue behind the lock's waiters: see
		 * node_propose_call(). */
		parked = acquire.wait && node_lock_queued(s->node, acquire.name, cmd.session);
		break;
	case RAFTLOCK__ENVELOPE__BODY_MULTI_ACQUIRE:
		if (!multi_acquire_allowed(s, c, env))
			return;
		set_sequence(&cmd, seq);
		multi_acquire_command(s, env->multi_acquire->acquire, &multi, &cmd);
		pushable = env->multi_acquire->acquire->wait;
		break;
	case RAFTLOCK__ENVELOPE__BODY_RELEASE:
		set_sequence(&cmd, seq);
		cmd.op_case = RAFTLOCK__COMMAND__OP_RELEASE;
		release.name = env->release->release->name;
		release.owner = env->release->release->owner;
		cmd.release = &release;
		break;
	case RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT:
		set_sequence(&cmd, seq);
		cmd.op_case = RAFTLOCK__COMMAND__OP_CANCEL_WAIT;
		cancel.name = env->cancel_wait->cancel->name;
		cancel.owner = env->cancel_wait->cancel->owner;
		cancel.acquire_seq = env->cancel_wait->cancel->acquire_seq;
		cmd.cancel_wait = &cancel;
		break;
	case RAFTLOCK__ENVELOPE__BODY_PROCLAIM:
		set_sequence(&cmd, seq);
		election_proclaim(&cmd, &proclaim, env->proclaim->proclaim);
		break;
	case RAFTLOCK__ENVELOPE__BODY_ACL_SET:
	case RAFTLOCK__ENVELOPE__BODY_ACL_DELETE:
		if (!acl_change(s, c, env, &cmd, &acl_set, &acl_delete))
			return;
		break;
	case RAFTLOCK__ENVELOPE__BODY_REVOKE:
		/* Admin on the name (auth.c) when auth is on. */
		if (ms_above(refusal, sizeof refusal, "revoke", env->revoke->name, "grace",
			     env->revoke->grace_ms, RAFTLOCK_REVOKE_GRACE_MAX_MS)) {
			send_status(s, c, env->id, RAFTLOCK_EINVAL, refusal);
			return;
		}
		revoke.name = env->revoke->name;
		revoke.token = env->revoke->token;
		revoke.grace_ms = env->revoke->grace_ms;
		cmd.op_case = RAFTLOCK__COMMAND__OP_REVOKE;
		cmd.revoke = &revoke;
		break;
	default: send_status(s, c, env->id, RAFTLOCK_EPROTO, "not a mutation"); return;
	}
	propose_for(s, c, env->id, &cmd, pushable, parked);
}

/* ---------------------------------------------------------- keepalive -- */

/* A keepalive's id will be renewed (its secret was right): its connection
 * keeps it from now, before the RENEW is proposed, so that a drop of the
 * session this leader has not proposed yet is called off (bindings.h). */
static void keepalive_accepted(void *arg, uint64_t id)
{
	struct service_request *p = arg;
	conn_keeps(p->conn, id);
}

static void keepalive_done(void *arg, int status, const int32_t *statuses, const uint32_t *ttls,
			   size_t n)
{
	struct service_request *p = arg;
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
	request_observe(p);
	request_free(p);
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);

static void conn_read_start(struct service_conn *c)
{
	if (c->tls != NULL)
		tls_stream_read_start(c->tls);
	else
		uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
}

static void conn_read_stop(struct service_conn *c)
{
	if (c->tls != NULL)
		tls_stream_read_stop(c->tls);
	else
		uv_read_stop((uv_stream_t *)&c->tcp);
}

/* Reads c again, unless something still holds its reading: its keepalive
 * budget (paused) or whole frames waiting for their turn (backlog). */
static void conn_read_resume(struct service_conn *c)
{
	if (!c->closing && !c->paused && !list_linked(&c->backlog))
		conn_read_start(c);
}

/* Reads again from the connections whose keepalive budget refilled. */
static void resume_cb(uv_timer_t *h)
{
	struct service *s = h->data;
	bool still = false;
	struct list *l;
	list_each (l, &s->conns) {
		struct service_conn *c = list_entry(l, struct service_conn, link);
		if (!c->paused || c->closing)
			continue;
		if (leases_budget_spent(s->leases, &c->keepalive_budget)) {
			still = true;
			continue;
		}
		c->paused = false;
		log_debug("keepalive budget refilled: reading a paused connection again");
		conn_read_resume(c);
	}
	if (!still)
		uv_timer_stop(h);
}

/* A connection past its keepalive budget is not read until the budget
 * refills: it can cost the leader no more than the budget's worth of
 * decoding and lookups per second, whatever it sends. */
static void pause_reads(struct service *s, struct service_conn *c)
{
	if (c->paused || c->closing)
		return;
	c->paused = true;
	log_debug("keepalive budget spent: a connection is not read until it refills");
	conn_read_stop(c);
	if (!uv_is_active((uv_handle_t *)&s->resume_timer))
		uv_timer_start(&s->resume_timer, resume_cb, RESUME_TICK_MS, RESUME_TICK_MS);
}

static void handle_keepalive(struct service *s, struct service_conn *c,
			     const Raftlock__Envelope *env)
{
	struct service_request *p = request_new(c, env->id, SERVICE_OP_KEEPALIVE);
	if (p == NULL) {
		send_status(s, c, env->id, RAFTLOCK_ENOMEM, NULL);
		return;
	}
	const Raftlock__KeepAliveRequest *ka = env->keepalive;
	int rv = leases_keepalive(s->leases, &c->keepalive_budget, ka->sessions, ka->secrets,
				  ka->n_secrets, ka->n_sessions, keepalive_accepted, keepalive_done,
				  p);
	if (rv != 0) {
		send_status(s, c, env->id, rv,
			    rv == RAFTLOCK_ELIMIT ? "keepalive budget of this connection spent: "
						    "too many session ids in one second"
						  : NULL);
		request_free(p);
	}
	if (leases_budget_spent(s->leases, &c->keepalive_budget))
		pause_reads(s, c);
}

/* --------------------------------------------------------------- reads -- */

/* -------------------------------------------------------------- status -- */

static void handle_status(struct service *s, struct service_conn *c, uint64_t id)
{
	struct status now;
	status_read(s->node, &now);
	Raftlock__StatusInfo st = RAFTLOCK__STATUS_INFO__INIT;
	Raftlock__Member members[CONFIG_MAX_MEMBERS], *mptrs[CONFIG_MAX_MEMBERS];
	st.node_id = s->cfg->id;
	st.role = (char *)now.role;
	st.term = now.term;
	st.commit_index = now.commit_index;
	st.applied_index = now.applied_index;
	st.last_index = now.last_index;
	st.leader_id = now.leader_id;
	st.leader_address = (char *)now.leader_address;
	st.ready = now.ready;
	st.cluster = (char *)s->cfg->cluster;
	/* The raft configuration as this node knows it (members come and go:
	 * docs/OPERATIONS.md); before it has one, the --member list. */
	const struct raft_configuration *conf = &s->node->raft.configuration;
	char client_addrs[CONFIG_MAX_MEMBERS][CONFIG_ADDR_MAX];
	unsigned n = 0;
	for (unsigned i = 0; i < conf->n && n < CONFIG_MAX_MEMBERS; i++, n++) {
		raftlock__member__init(&members[n]);
		members[n].id = conf->servers[i].id;
		members[n].raft_address = conf->servers[i].address;
		const char *ca = node_member_client_address(s->node, conf->servers[i].id);
		snprintf(client_addrs[n], sizeof client_addrs[n], "%s", ca ? ca : "");
		members[n].client_address = client_addrs[n];
		mptrs[n] = &members[n];
	}
	for (unsigned i = 0; conf->n == 0 && i < s->cfg->n_members; i++, n++) {
		raftlock__member__init(&members[n]);
		members[n].id = s->cfg->members[i].id;
		members[n].raft_address = (char *)s->cfg->members[i].raft_address;
		members[n].client_address = (char *)s->cfg->members[i].client_address;
		mptrs[n] = &members[n];
	}
	st.members = mptrs;
	st.n_members = n;
	st.cluster_time = now.cluster_time;
	st.next_token = now.next_token;
	st.cluster_id = now.cluster_id;
	st.feature_level = now.feature_level;
	st.cluster_feature_level = now.cluster_feature_level;
	st.sessions = now.sessions;
	st.locks = now.locks;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_STATUS_INFO;
	resp.status_info = &st;
	send_response(c, id, &resp);
}

/* --------------------------------------------------------------- reads -- */

static void reply_to(void *arg, const Raftlock__Response *resp)
{
	struct service_request *p = arg;
	send_response(p->conn, p->id, (Raftlock__Response *)resp);
}

static void serve_read(struct service *s, struct service_conn *c, const Raftlock__Envelope *env)
{
	struct service_request p = {.conn = c, .id = env->id};
	struct reads_who who = {.identity = c->identity, .root = s->cfg->auth_admin};
	reads_serve(&s->node->store, env, s->cfg->auth ? &who : NULL, reply_to, &p);
}

static void read_ready(void *arg, int status)
{
	struct service_request *p = arg;
	struct service *s = p->conn->svc;
	if (status == 0)
		serve_read(s, p->conn, p->env);
	else
		send_status(s, p->conn, p->id, status, NULL);
	request_observe(p);
	request_free(p);
}

static void handle_read(struct service *s, struct service_conn *c, Raftlock__Envelope *env)
{
	struct service_request *p = request_new(c, env->id, SERVICE_OP_READ);
	if (p == NULL) {
		send_status(s, c, env->id, RAFTLOCK_ENOMEM, NULL);
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	}
	p->env = env;
	if (reads_wait(&s->reads, read_ready, p) != 0) {
		send_status(s, c, env->id, RAFTLOCK_ENOMEM, NULL);
		request_free(p);
	}
}

/* ------------------------------------------------------------- backups -- */

/* One chunk of image id (backup.h), or the error. */
static void send_chunk(struct service *s, struct service_conn *c, uint64_t req_id, uint64_t image,
		       uint64_t offset)
{
	Raftlock__SnapshotChunk chunk = RAFTLOCK__SNAPSHOT_CHUNK__INIT;
	int rv = backup_chunk(&s->backup, image, offset, uv_now(s->loop), &chunk);
	if (rv != 0) {
		send_status(s, c, req_id, rv,
			    rv == RAFTLOCK_ENOTFOUND
				    ? "this node holds no such snapshot image (another leader, or "
				      "idle too long): start the save again"
				    : "offset past the end of the snapshot image");
		return;
	}
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_SNAPSHOT_CHUNK;
	resp.snapshot_chunk = &chunk;
	send_response(c, req_id, &resp);
}

static void snapshot_ready(void *arg, int status)
{
	struct service_request *p = arg;
	struct service *s = p->conn->svc;
	uint64_t image = 0;
	if (status == 0)
		status = backup_take(&s->backup, &s->node->store, uv_now(s->loop), &image);
	if (status == 0)
		send_chunk(s, p->conn, p->id, image, 0);
	else
		send_status(s, p->conn, p->id, status,
			    status == RAFTLOCK_EOVERLOAD ? "other snapshot saves are in progress"
							 : NULL);
	request_free(p);
}

/* SNAPSHOT_READ: a new image once a barrier proves this node has every
 * acknowledged write (as a linearizable read), or a chunk of one it holds. */
static void handle_snapshot_read(struct service *s, struct service_conn *c, Raftlock__Envelope *env)
{
	const Raftlock__SnapshotReadRequest *req = env->snapshot_read;
	if (req->image != 0) {
		send_chunk(s, c, env->id, req->image, req->offset);
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	}
	uint64_t id = env->id;
	raftlock__envelope__free_unpacked(env, NULL);
	struct service_request *p = request_new(c, id, SERVICE_OP_READ);
	if (p == NULL) {
		send_status(s, c, id, RAFTLOCK_ENOMEM, NULL);
		return;
	}
	if (reads_wait(&s->reads, snapshot_ready, p) != 0) {
		send_status(s, c, p->id, RAFTLOCK_ENOMEM, NULL);
		request_free(p);
	}
}

/* ---------------------------------------------------------- membership -- */

static void member_reply(void *arg, const Raftlock__Response *resp)
{
	struct service_request *p = arg;
	send_response(p->conn, p->id, (Raftlock__Response *)resp);
	request_free(p);
}

static void handle_member(struct service *s, struct service_conn *c, const Raftlock__Envelope *env)
{
	struct service_request *p = request_new(c, env->id, SERVICE_OP_MEMBER);
	if (p == NULL) {
		send_status(s, c, env->id, RAFTLOCK_EOVERLOAD, NULL);
		return;
	}
	members_handle(&s->members, env, member_reply, p);
}

/* ------------------------------------------------------ authorization -- */

static void conn_peer(struct service_conn *c, char *peer, size_t len);

/* With auth on: whether the connection's identity may send env here and
 * now (auth_check_request, on this node's applied state); when not, the
 * client gets RAFTLOCK_EPERM naming what it lacks, and nothing is proposed
 * or read. */
static bool authorized(struct service *s, struct service_conn *c, const Raftlock__Envelope *env)
{
	Raftlock__Sequence legacy;
	uint64_t session = acts_on_session(env) ? request_sequence(env, &legacy)->session : 0;
	struct store *st = &s->node->store;
	struct auth_view v = {.store = st, .root = s->cfg->auth_admin};
	char msg[2 * RAFTLOCK_NAME_MAX + 128];
	int rv = RAFTLOCK_EPERM;
	if (c->identity == NULL && c->token_refused) {
		snprintf(msg, sizeof msg, "not authenticated: this node knows no such token");
	} else {
		v.txn = store_begin(st, false);
		rv = auth_check_request(&v, c->identity, env, session, msg, sizeof msg);
		store_abort(v.txn);
	}
	if (rv == 0 || already_ran(s, c, env))
		return true;
	s->auth_denied++;
	log_debug("refused: %s", msg);
	send_status(s, c, env->id, rv, msg);
	return false;
}

/* Binds the connection to the identity of its token (auth-tokens). A
 * connection keeps the first identity it proved. */
static void handle_authenticate(struct service *s, struct service_conn *c,
				const Raftlock__Envelope *env)
{
	const ProtobufCBinaryData *tok = &env->authenticate->token;
	const char *name = s->tokens ? auth_tokens_check(s->tokens, tok->data, tok->len) : NULL;
	char msg[RAFTLOCK_NAME_MAX + 128];
	if (name == NULL && s->cfg->auth) {
		char peer[64];
		conn_peer(c, peer, sizeof peer);
		log_rate_warn(&s->log_auth, uv_now(s->loop),
			      "client %s: a token this node does not know", peer);
		c->token_refused = true;
		s->auth_denied++;
		send_status(s, c, env->id, RAFTLOCK_EPERM, "this node knows no such token");
		return;
	}
	if (name != NULL && c->identity != NULL && strcmp(c->identity, name) != 0) {
		snprintf(msg, sizeof msg, "this connection is already identity '%s'", c->identity);
		s->auth_denied++;
		send_status(s, c, env->id, RAFTLOCK_EPERM, msg);
		return;
	}
	if (name != NULL && c->identity == NULL && (c->identity = strdup(name)) == NULL) {
		send_status(s, c, env->id, RAFTLOCK_ENOMEM, NULL);
		return;
	}
	Raftlock__AuthResult res = RAFTLOCK__AUTH_RESULT__INIT;
	res.identity = (char *)(c->identity != NULL ? c->identity : "");
	res.required = s->cfg->auth;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_AUTH;
	resp.auth = &res;
	send_response(c, env->id, &resp);
}

/* ------------------------------------------------------------- watches -- */

static void watch_send(void *arg, struct service_conn *c, uint64_t id,
		       const Raftlock__WatchEvent *ev)
{
	(void)arg;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.push = true;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_WATCH_EVENT;
	resp.watch_event = (Raftlock__WatchEvent *)ev;
	send_response(c, id, &resp);
}

/* A watch whose state could not start in time (watch.h): its request is
 * answered now, with why; the client library sends it again. */
static void watch_ended(void *arg, struct service_conn *c, uint64_t id, int status, const char *why)
{
	send_status(arg, c, id, status, why);
}

/* Any node serves watches, from its own applies (watch.h): the answer
 * first, then the events, in order on the connection. */
static void handle_watch(struct service *s, struct service_conn *c, const Raftlock__Envelope *env)
{
	if (env->body_case == RAFTLOCK__ENVELOPE__BODY_WATCH_CANCEL) {
		bool found = watches_cancel(&s->watches, c, env->watch_cancel->watch);
		send_status(s, c, env->id, found ? 0 : RAFTLOCK_ENOTFOUND,
			    found ? "" : "no such watch on this connection");
		return;
	}
	if (watches_on_conn(&s->watches, c) >= RAFTLOCK_WATCH_MAX) {
		/* each costs a walk at every change: bounded per client */
		char msg[96];
		snprintf(msg, sizeof msg, "at most %d watches on one connection",
			 RAFTLOCK_WATCH_MAX);
		send_status(s, c, env->id, RAFTLOCK_ELIMIT, msg);
		return;
	}
	send_status(s, c, env->id, 0, "");
	if (c->closing)
		return; /* that answer passed the bound on unsent ones: closed */
	watches_add(&s->watches, c, env->id, env->watch);
}

/* ------------------------------------------------------------ dispatch -- */

/* Upgrades (feature_level.h): a request whose command needs a feature level
 * that not every voter supports yet is refused before the log. */
static bool refused_for_level(struct service *s, struct service_conn *c,
			      const Raftlock__Envelope *env)
{
	uint32_t need = features_request_level(env); /* 0: none listed, as 1 */
	uint32_t have = need > 1 ? node_cluster_feature_level(s->node) : need;
	if (need <= have)
		return false;
	char msg[256];
	snprintf(msg, sizeof msg,
		 "this request needs cluster feature level %u; the cluster is at level %u until "
		 "every voter runs a build that supports it (upgrade every node)",
		 need, have);
	send_status(s, c, env->id, RAFTLOCK_ESTATE, msg);
	return true;
}

/* Full disk (diskguard.h): the requests that make the state grow are
 * refused before the log; letting go and renewing are not. */
static bool refused_for_disk(struct service *s, struct service_conn *c,
			     const Raftlock__Envelope *env)
{
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION:
	case RAFTLOCK__ENVELOPE__BODY_ACQUIRE:
	case RAFTLOCK__ENVELOPE__BODY_MULTI_ACQUIRE:
	case RAFTLOCK__ENVELOPE__BODY_ACL_SET: break;
	default: return false;
	}
	if (!diskguard_full(&s->node->disk_space))
		return false;
	char msg[256];
	diskguard_refusal(&s->node->disk_space, s->cfg->id, msg, sizeof msg);
	send_status(s, c, env->id, RAFTLOCK_ENOSPC, msg);
	return true;
}

/* A STATUS that carries a leader's readiness report (status.h): taken
 * only from the leader's certificate, never from a token's name. */
static void note_report(struct service *s, struct service_conn *c,
			const Raftlock__StatusRequest *req)
{
	const char *cn = c->cert_identity ? c->identity : NULL;
	if (status_note_leader(s->node, req->leader_term, req->leader_applied, cn))
		s->reports_taken++;
	else
		s->reports_ignored++;
}

static void dispatch(struct service *s, struct service_conn *c, Raftlock__Envelope *env)
{
	if (env->body_case == RAFTLOCK__ENVELOPE__BODY_STATUS) {
		if (env->status->leader_term != 0)
			note_report(s, c, env->status);
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
	if (env->body_case == RAFTLOCK__ENVELOPE__BODY_AUTHENTICATE) {
		handle_authenticate(s, c, env);
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	}
	if (env->body_case == RAFTLOCK__ENVELOPE__BODY_WATCH ||
	    env->body_case == RAFTLOCK__ENVELOPE__BODY_WATCH_CANCEL) {
		if (!s->cfg->auth || authorized(s, c, env))
			handle_watch(s, c, env);
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	}
	bool read = reads_is_read(env);
	if (read && reads_is_stale(env)) {
		if (!s->cfg->auth || authorized(s, c, env))
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
	} else if (s->cfg->auth && !authorized(s, c, env)) {
		/* answered: RAFTLOCK_EPERM */
	} else if (refused_for_disk(s, c, env) || refused_for_level(s, c, env)) {
		/* answered: RAFTLOCK_ENOSPC, RAFTLOCK_ESTATE */
	} else if (read) {
		handle_read(s, c, env); /* takes env */
		return;
	} else if (env->body_case == RAFTLOCK__ENVELOPE__BODY_SNAPSHOT_READ) {
		handle_snapshot_read(s, c, env); /* takes env */
		return;
	} else if (env->body_case == RAFTLOCK__ENVELOPE__BODY_KEEPALIVE) {
		handle_keepalive(s, c, env);
	} else if (members_is_request(env)) {
		handle_member(s, c, env);
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

/* The client's address, for the log. */
static void conn_peer(struct service_conn *c, char *peer, size_t len)
{
	struct sockaddr_storage ss;
	int n = sizeof ss;
	snprintf(peer, len, "?");
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &n) != 0)
		return;
	if (ss.ss_family == AF_INET6)
		uv_ip6_name((struct sockaddr_in6 *)&ss, peer, len);
	else
		uv_ip4_name((struct sockaddr_in *)&ss, peer, len);
}

static void protocol_error(struct service *s, struct service_conn *c, const char *what)
{
	char peer[64];
	conn_peer(c, peer, sizeof peer);
	log_rate_warn(&s->log_protocol, uv_now(s->loop), "client %s: %s; closing its connection",
		      peer, what);
	send_status(s, c, 0, RAFTLOCK_EPROTO, what);
	conn_close(c);
}

static void backlog_cb(uv_idle_t *h);

/* c's share of this turn is spent with whole frames left: they wait, and
 * c is not read, until its next share. */
static void conn_defer(struct service_conn *c)
{
	struct service *s = c->svc;
	c->frame_started = 0; /* the frames wait for this node, not the client */
	conn_read_stop(c);
	list_add_tail(&s->backlog, &c->backlog);
	if (!uv_is_active((uv_handle_t *)&s->backlog_idle))
		uv_idle_start(&s->backlog_idle, backlog_cb);
}

/* Serves c's whole frames, a turn's share of them (conn_defer). */
static void conn_serve(struct service_conn *c)
{
	struct service *s = c->svc;
	const uint8_t *payload;
	size_t len;
	int rv;
	bool whole = false;
	uint64_t until = uv_hrtime() + CONN_TURN_NS;
	for (unsigned served = 0;; served++) {
		if (c->closing)
			return;
		if ((served == CONN_TURN_REQUESTS || (served > 0 && uv_hrtime() >= until)) &&
		    frame_reader_ready(&c->reader)) {
			conn_defer(c);
			return;
		}
		if ((rv = frame_reader_next(&c->reader, &payload, &len)) != 1)
			break;
		Raftlock__Envelope *env;
		const char *refusal;
		whole = true;
		if (codec_decode_request(payload, len, &env, &refusal) != 0) {
			protocol_error(s, c, "malformed or unknown message");
			return;
		}
		if (refusal != NULL) {
			/* The request is refused; the stream is still whole. */
			char msg[160];
			snprintf(msg, sizeof msg, "%s; nothing done", refusal);
			send_status(s, c, env->id, RAFTLOCK_EPROTO, msg);
			raftlock__envelope__free_unpacked(env, NULL);
		} else {
			dispatch(s, c, env);
		}
		if (c->out_len >= CONN_FEED_FLUSH)
			conn_flush(c); /* closes c if its client is gone */
	}
	if (rv == RAFTLOCK_ETOOBIG) {
		char what[96];
		snprintf(what, sizeof what,
			 "frame length above the limit of %u bytes (RAFTLOCK_FRAME_MAX)",
			 (unsigned)RAFTLOCK_FRAME_MAX);
		protocol_error(s, c, what);
		return;
	}
	frame_reader_trim(&c->reader); /* the payloads above are done with */
	/* The frame clock runs from the first byte of a frame to its last
	 * (from when c is read again, if its frames waited for a turn). */
	if (frame_reader_pending(&c->reader) == 0)
		c->frame_started = 0;
	else if (whole || c->frame_started == 0)
		c->frame_started = uv_now(s->loop) + 1; /* never 0 */
}

/* Gives each connection that waits at the start of the turn its share,
 * in the order they began to wait; one left with whole frames waits again
 * behind the others, one done with them is read again. */
static void backlog_cb(uv_idle_t *h)
{
	struct service *s = h->data;
	size_t n = 0;
	struct list *l;
	list_each (l, &s->backlog)
		n++;
	/* a connection closed meanwhile leaves the list (conn_close) */
	for (; n > 0 && (l = list_first(&s->backlog)) != NULL; n--) {
		struct service_conn *c = list_entry(l, struct service_conn, backlog);
		list_remove(l);
		conn_serve(c); /* c lives on: its handle closes later, if at all */
		conn_read_resume(c);
	}
	if (list_empty(&s->backlog))
		uv_idle_stop(h);
}

/* Bytes from the client, whether they came in clear or through TLS. */
static void conn_feed(struct service_conn *c, const char *bytes, size_t n)
{
	if (frame_reader_feed(&c->reader, bytes, n) != 0) {
		protocol_error(c->svc, c, "out of memory buffering a frame");
		return;
	}
	if (!list_linked(&c->backlog)) /* else they wait behind its frames */
		conn_serve(c);
}

/* Cuts off the connections whose frame has been arriving for too long. */
static void frame_timer_cb(uv_timer_t *h)
{
	struct service *s = h->data;
	unsigned limit = s->cfg->frame_timeout_ms;
	uint64_t now = uv_now(s->loop) + 1;
	struct service_conn *c;
	/* closing unlinks nothing until the close callback, which runs later */
	list_each_entry (c, &s->conns, struct service_conn, link) {
		if (c->closing || !admission_frame_overdue(c->frame_started, now, limit))
			continue;
		char what[96];
		snprintf(what, sizeof what, "a frame not completed within %u ms (frame-timeout-ms)",
			 limit);
		s->frame_timeouts++;
		protocol_error(s, c, what);
	}
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
	struct service_conn *c = stream->data;
	if (nread < 0) {
		conn_close(c);
		return;
	}
	if (nread == 0 || c->closing)
		return;
	conn_feed(c, buf->base, (size_t)nread);
}

static void tls_read_cb(struct tls_stream *ts, ssize_t nread, const char *buf)
{
	struct service_conn *c = ts->data;
	if (nread < 0) {
		/* A refused or stalled handshake, or a corrupt record, is worth a
		 * line; a client that leaves is not. */
		if (!tls_stream_established(ts) || nread == UV_EPROTO) {
			char peer[64];
			conn_peer(c, peer, sizeof peer);
			log_rate_warn(&c->svc->log_tls, uv_now(c->svc->loop),
				      "client %s: %s; closing its connection", peer,
				      tls_stream_error(ts));
			if (!tls_stream_established(ts))
				c->svc->tls_failures++;
		}
		conn_close(c);
		return;
	}
	if (!c->closing)
		conn_feed(c, buf, (size_t)nread);
}

/* Tells a connection over its address's limit why it is closed. */
static void refuse(struct service_conn *c)
{
	struct service *s = c->svc;
	char peer[64], what[160];
	conn_peer(c, peer, sizeof peer);
	snprintf(what, sizeof what, "too many connections from %s (max-connections-per-address %u)",
		 peer, s->cfg->max_connections_per_address);
	log_rate_warn(&s->log_admission, uv_now(s->loop),
		      "client %s: %s; refused (%llu refused in all)", peer, what,
		      s->admission.refused);
	send_status(s, c, 0, RAFTLOCK_ELIMIT, what);
	conn_close(c);
}

/* Closes at once, untold, a connection over its address's limit that
 * finds as many refusals being told as may be, or that admission had no
 * memory to count: telling it would hold it for a TLS handshake. */
static void drop(struct service_conn *c, enum admission_verdict v)
{
	struct service *s = c->svc;
	char peer[64];
	conn_peer(c, peer, sizeof peer);
	if (v == ADMISSION_NO_MEMORY)
		log_rate_warn(&s->log_admission, uv_now(s->loop),
			      "client %s: out of memory to count its connection; closed", peer);
	else
		log_rate_warn(&s->log_admission, uv_now(s->loop),
			      "client %s: too many connections from it (max-connections-per-"
			      "address %u) and %u refusals being told; closed at once (%llu "
			      "refused in all)",
			      peer, s->cfg->max_connections_per_address, ADMISSION_MAX_REFUSING,
			      s->admission.refused);
	conn_close(c);
}

/* Counts a new connection against its address's limit (one whose address
 * cannot be read is served, counted nowhere). */
static enum admission_verdict admit(struct service *s, struct service_conn *c)
{
	struct sockaddr_storage ss;
	int n = sizeof ss;
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &n) != 0)
		return ADMISSION_OPEN;
	uint64_t key = admission_key((struct sockaddr *)&ss);
	enum admission_verdict v = admission_enter(&s->admission, key);
	if (v == ADMISSION_OPEN || v == ADMISSION_REFUSE) {
		c->admission_key = key;
		c->admitted = v;
	}
	return v;
}

static void tls_handshake_cb(struct tls_stream *ts)
{
	struct service_conn *c = ts->data;
	if (c->admitted == ADMISSION_REFUSE) {
		refuse(c);
		return;
	}
	const char *cn = tls_stream_peer_cn(ts);
	if (cn[0] != '\0')
		c->identity = strdup(cn); /* NULL if out of memory: no identity */
	c->cert_identity = c->identity != NULL;
}

static void accept_cb(uv_stream_t *server, int status)
{
	struct service *s = server->data;
	if (status != 0)
		return; /* nothing pending */
	struct service_conn *c = s->closing ? NULL : calloc(1, sizeof *c);
	if (c == NULL) {
		listener_reject(&s->reject);
		return;
	}
	c->svc = s;
	c->refs = 1;
	frame_reader_init(&c->reader, RAFTLOCK_FRAME_MAX);
	uv_tcp_init(s->loop, &c->tcp);
	c->tcp.data = c;
	list_init(&c->dirty);
	list_init(&c->backlog);
	list_add_tail(&s->conns, &c->link);
	if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
		conn_close(c);
		return;
	}
	uv_tcp_nodelay(&c->tcp, 1);
	enum admission_verdict v = admit(s, c);
	if (v == ADMISSION_DROP || v == ADMISSION_NO_MEMORY) {
		drop(c, v);
		return;
	}
	if (s->tls == NULL) {
		if (v == ADMISSION_REFUSE) {
			refuse(c);
			return;
		}
		uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
		return;
	}
	/* A refusal is told once the handshake lets it hear (tls_handshake_cb). */
	struct tls_stream_options o = {
		.role = TLS_ROLE_SERVER,
		.handshake_timeout_ms = s->cfg->tls_handshake_timeout_ms,
		.on_handshake = tls_handshake_cb,
		.on_read = tls_read_cb,
	};
	c->tls = calloc(1, sizeof *c->tls);
	if (c->tls == NULL || tls_stream_start(c->tls, (uv_stream_t *)&c->tcp, s->tls, &o) != 0) {
		free(c->tls);
		c->tls = NULL;
		conn_close(c);
		return;
	}
	c->tls->data = c;
}

int service_start(struct service *s, uv_loop_t *loop, const struct config *cfg, struct node *node,
		  struct leases *leases, SSL_CTX *tls, char *err, size_t errlen)
{
	memset(s, 0, sizeof *s);
	s->tls = tls;
	s->loop = loop;
	s->cfg = cfg;
	s->node = node;
	s->leases = leases;
	list_init(&s->conns);
	list_init(&s->dirty);
	for (unsigned i = 0; i < SERVICE_OPS; i++)
		histogram_init(&s->latency[i], &histogram_latency);
	pushes_init(&s->pushes);
	bindings_init(&s->bindings, leases->clock, node, leases);
	reads_init(&s->reads, node);
	backup_init(&s->backup);
	watches_init(&s->watches, cfg->watch_history, &node->store, node->start_applied, watch_send,
		     s);
	int rv = listener_start(loop, &s->listener, s, "client-address", cfg->client_address, 511,
				accept_cb, err, errlen);
	if (rv != 0)
		return rv;
	listener_reject_init(&s->reject, loop, &s->listener, accept_cb);
	members_start(&s->members, node->tb, node);
	uv_prepare_init(loop, &s->flusher);
	s->flusher.data = s;
	uv_prepare_start(&s->flusher, flusher_cb);
	uv_timer_init(loop, &s->resume_timer);
	s->resume_timer.data = s;
	list_init(&s->backlog);
	uv_idle_init(loop, &s->backlog_idle);
	s->backlog_idle.data = s;
	admission_init(&s->admission, cfg->max_connections_per_address);
	uv_timer_init(loop, &s->frame_timer);
	s->frame_timer.data = s;
	uv_timer_init(loop, &s->state_timer);
	s->state_timer.data = s;
	watches_set_flow(&s->watches, watch_room, watch_stalled, watch_ended);
	if (cfg->frame_timeout_ms != 0) {
		uint64_t every =
			cfg->frame_timeout_ms / 4 < 1000 ? cfg->frame_timeout_ms / 4 : 1000;
		uv_timer_start(&s->frame_timer, frame_timer_cb, every, every);
	}
	return 0;
}

void service_on_ready(struct service *s, bool ready)
{
	bindings_on_ready(&s->bindings, ready);
	if (ready)
		return;
	/* A node that stops serving forgets where grants go: the clients of
	 * queued acquires lose their connection, so that they re-send the
	 * acquire wherever the leader is now (even here, if this node wins
	 * again) and learn its outcome from the de-duplication table. Their
	 * connections are collected first: closing one edits the targets. */
	struct service_conn **victims;
	size_t n = pushes_drop_all(&s->pushes, &victims);
	for (size_t i = 0; i < n; i++)
		conn_close(victims[i]); /* closing twice is a no-op */
	free(victims);
}

void service_on_restore(struct service *s)
{
	watches_restored(&s->watches);
}

void service_on_store_closing(struct service *s)
{
	watches_end_states(&s->watches);
}

unsigned service_connections(const struct service *s)
{
	unsigned n = 0;
	const struct list *l;
	list_each (l, &s->conns)
		n += !list_entry(l, const struct service_conn, link)->closing;
	return n;
}

void service_close(struct service *s)
{
	s->closing = true;
	uv_close((uv_handle_t *)&s->listener, NULL);
	flush_all(s); /* the last answers go out before their connections close */
	uv_close((uv_handle_t *)&s->flusher, NULL);
	uv_close((uv_handle_t *)&s->resume_timer, NULL);
	uv_close((uv_handle_t *)&s->backlog_idle, NULL);
	uv_close((uv_handle_t *)&s->frame_timer, NULL);
	uv_close((uv_handle_t *)&s->state_timer, NULL);
	struct list *l;
	list_each (l, &s->conns)
		conn_close(list_entry(l, struct service_conn, link));
	service_on_ready(s, false);
	reads_close(&s->reads);
	backup_close(&s->backup);
	members_close(&s->members);
	pushes_close(&s->pushes);
	bindings_close(&s->bindings);
	watches_close(&s->watches);
	admission_close(&s->admission);
}
