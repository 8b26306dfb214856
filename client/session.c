/* session.c: see session.h. */
#include "grow.h"
#include "session.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "errmsg.h"

#define SESSION_TTL_DEFAULT_MS 10000
#define SESSION_LOST_CLOSE_MS 1000 /* best-effort close of a lost session */

uint64_t session_validity_ms(uint64_t sent_ms, unsigned ttl_ms)
{
	uint64_t drift = ((uint64_t)ttl_ms * RAFTLOCK_CLOCK_RATE_PPM + 999999) / 1000000;
	uint64_t margin = drift + RAFTLOCK_LEASE_MARGIN_MS;
	if (margin >= ttl_ms)
		return sent_ms;
	return sent_ms + ttl_ms - margin;
}

/* ------------------------------------------------------ sequence numbers */

/* Takes the next seq of s and the ack_below to send with it (the lowest
 * seq whose outcome is unknown, queued acquires left out), and records
 * the seq as in flight. RAFTLOCK_ESESSION when s is lost; ENOMEM. */
static int session_seq_begin(raftlock_session *s, bool wait, uint64_t *seq, uint64_t *ack_below)
{
	if (s->lost && !s->closing)
		return RAFTLOCK_ESESSION;
	if (grow(&s->inflight, &s->cap_inflight, s->n_inflight + 1, 8, sizeof *s->inflight) != 0)
		return RAFTLOCK_ENOMEM;
	uint64_t n = s->next_seq++;
	uint64_t low = n;
	for (size_t i = 0; i < s->n_inflight; i++)
		if (!s->inflight[i].queued && s->inflight[i].seq < low)
			low = s->inflight[i].seq;
	s->inflight[s->n_inflight++] = (struct session_seq){.seq = n, .wait = wait};
	*seq = n;
	*ack_below = low;
	return 0;
}

static struct session_seq *session_seq_find(raftlock_session *s, uint64_t seq)
{
	for (size_t i = 0; i < s->n_inflight; i++)
		if (s->inflight[i].seq == seq)
			return &s->inflight[i];
	return NULL;
}

void session_seq_end(raftlock_session *s, uint64_t seq)
{
	struct session_seq *q = session_seq_find(s, seq);
	if (q == NULL)
		return;
	/* A blocking acquire's record may be kept for it on the server (it
	 * may have been queued there, even if the answer said granted):
	 * acknowledge it. Out of memory, the record stays until the session
	 * ends: that costs the server room, never correctness. */
	if (q->wait && grow(&s->acks, &s->cap_acks, s->n_acks + 1, 8, sizeof *s->acks) == 0)
		s->acks[s->n_acks++] = seq;
	*q = s->inflight[--s->n_inflight];
}

/* The transport's hook: the I/O thread got, for the mutating request req,
 * the answer "queued" (queued) or a result of apply: the first takes its
 * seq out of ack_below, the second ends the acknowledgements it carried. */
/* A lock event for the application, run on the I/O thread without t->mu;
 * the session's close waits for it (a call of the session). */
struct session_lock_event {
	struct transport_deferred d; /* first: the deferred callback is the event */
	raftlock_session *s;
	enum raftlock_lock_event kind;
	uint64_t token;
	char name[RAFTLOCK_NAME_MAX + 1];
};

static void session_lock_event_run(struct transport_deferred *d)
{
	struct session_lock_event *e = (struct session_lock_event *)d;
	raftlock_session *s = e->s;
	/* queued before the close began (behind another callback, say):
	 * none runs once it has (raftlock.h) */
	pthread_mutex_lock(&s->t->mu);
	bool run = !s->closing;
	pthread_mutex_unlock(&s->t->mu);
	if (run)
		s->on_lock_event(s, e->kind, e->name, e->token, s->on_lock_event_arg);
	pthread_mutex_lock(&s->t->mu);
	session_call_end(s);
	pthread_mutex_unlock(&s->t->mu);
	free(e);
}

/* The transport's event hook: a revocation (or a request to release) for
 * one of our sessions' grants. The handle lets go first (ss->revoked),
 * then the application hears of it. */
static void sessions_event(void *arg, const Raftlock__SessionEvent *ev)
{
	struct sessions *ss = arg;
	raftlock_session **slot = idmap_get(&ss->ids, ev->session);
	raftlock_session *s = slot != NULL ? *slot : NULL;
	if (s == NULL || s->lost || s->closing || ev->name == NULL ||
	    strlen(ev->name) > RAFTLOCK_NAME_MAX)
		return;
	bool revoked = ev->kind == RAFTLOCK__SESSION_EVENT_KIND__SESSION_EVENT_REVOKED;
	if (!revoked && ev->kind != RAFTLOCK__SESSION_EVENT_KIND__SESSION_EVENT_RELEASE_REQUESTED)
		return; /* a kind this library does not know */
	if (revoked && ss->revoked != NULL)
		ss->revoked(s, ev->owner, ev->name, ev->token);
	if (s->on_lock_event == NULL)
		return;
	struct session_lock_event *e = calloc(1, sizeof *e);
	if (e == NULL || session_call_begin(s) != 0) {
		free(e); /* out of memory: the event is lost, the token superseded all the same */
		return;
	}
	e->d = (struct transport_deferred){.fn = session_lock_event_run};
	e->s = s;
	e->kind = revoked ? RAFTLOCK_LOCK_REVOKED : RAFTLOCK_LOCK_RELEASE_REQUESTED;
	e->token = ev->token;
	strcpy(e->name, ev->name);
	transport_defer(s->t, &e->d);
}

/* The transport's conn_lost hook. Crash-fast release: the node that kept
 * a bound session on that connection ends it after its grace unless a
 * keepalive on another connection takes it over; so its validity ends
 * now, and the keepalive thread asks at once on the next connection. */
static void sessions_conn_lost(void *arg)
{
	struct sessions *ss = arg;
	uint64_t now = transport_boot_ms(ss->t);
	bool any = false;
	ss->lost_gen = ss->t->conn_gen; /* the connection now lost */
	for (raftlock_session *s = session_first(ss); s != NULL; s = session_after(ss, s)) {
		if (s->bind_grace_ms == 0 || s->lost || s->valid_until <= now)
			continue;
		s->valid_until = now;
		any = true;
	}
	if (any) {
		ss->check_at = now;
		ss->renew_now = true;
		pthread_cond_broadcast(&ss->t->cond);
	}
}

static void sessions_answered(void *arg, struct request *req, bool queued)
{
	raftlock_session *s = session_find(arg, req->seq_session);
	if (s == NULL)
		return;
	if (queued) {
		struct session_seq *q = session_seq_find(s, req->seq);
		if (q != NULL)
			q->queued = true;
	}
	/* Applied: the acknowledgements it carried are done with. */
	for (size_t i = 0; i < req->n_acks; i++) {
		for (size_t j = 0; j < s->n_acks; j++) {
			if (s->acks[j] == req->acks[i]) {
				s->acks[j] = s->acks[--s->n_acks];
				break;
			}
		}
	}
	free(req->acks);
	req->acks = NULL;
	req->n_acks = 0;
}

int session_call_begin(raftlock_session *s)
{
	if (s->closing)
		return RAFTLOCK_ECANCELED;
	s->calls++;
	return 0;
}

void session_call_end(raftlock_session *s)
{
	if (--s->calls == 0 && s->closing)
		pthread_cond_broadcast(&s->t->cond);
}

void session_mark_lost(raftlock_session *s, int reason)
{
	if (s->lost)
		return;
	s->lost = true;
	s->jeopardy = false;
	s->lost_reason = reason;
	s->valid_until = 0;
	s->ss->events_due = true;
	transport_wake_all(s->t); /* blocked acquires end */
	if (s->ss->ending != NULL)
		s->ss->ending(s); /* and asynchronous ones */
}

uint64_t session_check_at(const raftlock_session *s)
{
	if (s->lost)
		return UINT64_MAX;
	return s->jeopardy ? s->valid_until + s->grace_ms : s->valid_until;
}

void session_tick(raftlock_session *s, uint64_t now)
{
	if (s->lost || now < s->valid_until)
		return;
	/* Validity ran out: the caller must stop acting, but the cluster
	 * may still hold the session (its clock stands still without a
	 * leader). Keep renewing through the grace period. */
	if (!s->jeopardy)
		s->ss->events_due = true;
	s->jeopardy = true;
	if (now >= s->valid_until + s->grace_ms)
		session_mark_lost(s, RAFTLOCK_ETIMEDOUT);
}

void session_renewed(raftlock_session *s, uint64_t sent_ms, uint64_t now)
{
	/* The renewal applied no earlier than the send, on a session the
	 * server still held (it answers ESESSION for one it expired): no
	 * expiry happened before it, so validity counts from the send even
	 * after it ran out (GUARANTEES rule 9). */
	uint64_t v = session_validity_ms(sent_ms, s->ttl_ms);
	if (v > s->valid_until)
		s->valid_until = v;
	if (s->jeopardy && now < s->valid_until) {
		s->jeopardy = false;
		s->ss->events_due = true;
	}
	/* out of jeopardy, it is due at valid_until, before valid_until +
	 * grace_ms */
	if (session_check_at(s) < s->ss->check_at)
		s->ss->check_at = session_check_at(s);
}

bool session_renewal_counts(const raftlock_session *s, uint64_t answered_gen)
{
	return s->bind_grace_ms == 0 || answered_gen > s->ss->lost_gen;
}

int session_event_due(const raftlock_session *s)
{
	if (s->lost)
		return s->told != RAFTLOCK_SESSION_LOST ? RAFTLOCK_SESSION_LOST : 0;
	int state = s->jeopardy ? RAFTLOCK_SESSION_JEOPARDY : RAFTLOCK_SESSION_SAFE;
	return state != s->told ? state : 0;
}

int session_reply_result(const Raftlock__Envelope *reply, const Raftlock__Result **result)
{
	const Raftlock__Response *resp = reply->response;
	if (resp->status != 0)
		return resp->status;
	if (resp->payload_case != RAFTLOCK__RESPONSE__PAYLOAD_RESULT)
		return RAFTLOCK_EPROTO;
	*result = resp->result;
	return 0;
}

int session_mutate_submit(raftlock_session *s, const struct session_req *sr, struct request **req)
{
	/* Its orphan, reserved before anything is sent: giving the request
	 * up must never need memory (session_abandon). */
	struct session_orphan *o = calloc(1, sizeof *o);
	if (o == NULL)
		return RAFTLOCK_ENOMEM;
	Raftlock__Sequence h = RAFTLOCK__SEQUENCE__INIT;
	int rv = session_seq_begin(s, sr->wait, &h.seq, &h.ack_below);
	if (rv != 0) {
		free(o);
		return rv;
	}
	size_t n_acks = s->n_acks < SESSION_ACKS_MAX ? s->n_acks : SESSION_ACKS_MAX;
	uint64_t *acks = NULL;
	if (n_acks > 0 && (acks = malloc(n_acks * sizeof *acks)) != NULL)
		memcpy(acks, s->acks, n_acks * sizeof *acks);
	else
		n_acks = 0; /* out of memory: on a later request */
	h.session = s->id;
	h.acked = acks;
	h.n_acked = n_acks;
	h.secret.data = s->secret;
	h.secret.len = sizeof s->secret;
	sr->env->sequence = &h;
	rv = transport_submit(s->t, sr->env, sr->wait, req);
	sr->env->sequence = NULL; /* encoded: the acks copy belongs to the request */
	if (rv != 0) {
		free(acks);
		free(o);
		session_seq_end(s, h.seq);
		return rv;
	}
	(*req)->spare = o;
	(*req)->sequenced = true;
	(*req)->seq_session = s->id;
	(*req)->seq = h.seq;
	(*req)->acks = acks;
	(*req)->n_acks = n_acks;
	return 0;
}

int session_mutate_finish(raftlock_session *s, struct request *req, uint64_t seq,
			  Raftlock__Envelope **reply, const Raftlock__Result **result)
{
	Raftlock__Envelope *r = NULL;
	const Raftlock__Result *res = NULL;
	transport_take(s->t, req, &r);
	session_seq_end(s, seq); /* only final answers complete a request */
	int rv = session_reply_result(r, &res);
	if (rv != 0) {
		raftlock__envelope__free_unpacked(r, NULL);
		return rv;
	}
	if (res->status == RAFTLOCK_ESESSION)
		session_mark_lost(s, RAFTLOCK_ESESSION);
	*reply = r;
	*result = res;
	return 0;
}

int session_mutate(raftlock_session *s, const struct session_req *sr, Raftlock__Envelope **reply,
		   const Raftlock__Result **result)
{
	struct transport *t = s->t;
	struct request *req;
	int rv = session_mutate_submit(s, sr, &req);
	if (rv != 0)
		return rv;
	uint64_t seq = req->seq;
	unsigned timeout = sr->timeout_ms ? sr->timeout_ms : t->request_timeout_ms;
	rv = transport_wait(t, req, transport_mono_ms(t) + timeout);
	if (rv != 0)
		return session_abandon(s, req, seq, sr->undo, sr->n_undo, sr->owner);
	return session_mutate_finish(s, req, seq, reply, result);
}

/* -------------------------------------------------------------- orphans */

/* Keeps req in the table as an orphan of s, in the memory reserved with
 * it (session_mutate_submit). */
static struct session_orphan *orphan_add(raftlock_session *s, struct request *req, uint64_t seq,
					 uint64_t owner)
{
	struct session_orphan *o = req->spare;
	req->spare = NULL;
	transport_watch(s->t, req); /* the keepalive thread settles it */
	o->req = req;
	o->seq = seq;
	o->owner = owner;
	o->resend_at = transport_mono_ms(s->t) + s->t->request_timeout_ms;
	if (!list_linked(&s->orphaned_link)) /* it may be settling now */
		list_add_tail(&s->ss->orphaned, &s->orphaned_link);
	list_add_head(&s->orphans, &o->link);
	return o;
}

/* Gives o a packed copy of the n_undo envelopes of undo (each behind its
 * 4-byte big-endian length); false when out of memory. */
static bool orphan_keep_undo(struct session_orphan *o, const Raftlock__Envelope *const *undo,
			     size_t n_undo)
{
	size_t len = 0;
	for (size_t i = 0; i < n_undo; i++)
		len += 4 + raftlock__envelope__get_packed_size(undo[i]);
	uint8_t *p = o->undo = malloc(len);
	if (p == NULL)
		return false;
	o->undo_len = len;
	for (size_t i = 0; i < n_undo; i++) {
		size_t n = raftlock__envelope__pack(undo[i], p + 4);
		p[0] = (uint8_t)(n >> 24);
		p[1] = (uint8_t)(n >> 16);
		p[2] = (uint8_t)(n >> 8);
		p[3] = (uint8_t)n;
		p += 4 + n;
	}
	return true;
}

int session_abandon(raftlock_session *s, struct request *req, uint64_t seq,
		    const Raftlock__Envelope *const *undo, size_t n_undo, uint64_t owner)
{
	if (!req->ever_sent) {
		int rv = req->last_err;
		transport_take(s->t, req, NULL); /* the server never saw it */
		session_seq_end(s, seq);
		return rv;
	}
	struct session_orphan *o = orphan_add(s, req, seq, owner);
	if (n_undo > 0 && !orphan_keep_undo(o, undo, n_undo))
		return RAFTLOCK_ENOMEM; /* still sent until its seq settles */
	return RAFTLOCK_EUNKNOWN;
}

bool session_has_orphans(raftlock_session *s, uint64_t owner, bool resend)
{
	bool found = false;
	struct session_orphan *o;
	list_each_entry (o, &s->orphans, struct session_orphan, link) {
		if (o->owner != owner)
			continue;
		found = true;
		if (resend && !o->req->done && !o->req->queued) {
			transport_resend(s->t, o->req);
			o->resend_at = transport_mono_ms(s->t) + s->t->request_timeout_ms;
		}
	}
	return found;
}

static void orphan_free(struct transport *t, struct session_orphan *o)
{
	transport_take(t, o->req, NULL);
	free(o->undo);
	free(o);
}

bool session_send_orphan(raftlock_session *s, Raftlock__Envelope *env, uint64_t owner)
{
	struct request *r;
	struct session_req sr = SESSION_REQ(env);
	if (s->lost)
		return true;
	int rv = session_mutate_submit(s, &sr, &r);
	if (rv != 0)
		return rv != RAFTLOCK_ENOMEM;
	orphan_add(s, r, r->seq, owner);
	return true;
}

/* Sends one packed undo envelope (session_send_orphan); false when out of
 * memory, nothing sent. */
static bool orphan_undo_one(raftlock_session *s, const uint8_t *buf, size_t len, uint64_t owner)
{
	Raftlock__Envelope *env = raftlock__envelope__unpack(NULL, len, buf);
	if (env == NULL)
		return false;
	bool sent = session_send_orphan(s, env, owner);
	raftlock__envelope__free_unpacked(env, NULL);
	return sent;
}

/* Sends the undo of an orphan granted after its caller gave up (the
 * releases of a grant nobody waits for), from o->undo_at on. false when
 * out of memory: o->undo_at is the envelope still to send. */
static bool orphan_undo(raftlock_session *s, struct session_orphan *o)
{
	const uint8_t *end = o->undo + o->undo_len;
	while (end - (o->undo + o->undo_at) >= 4) {
		const uint8_t *p = o->undo + o->undo_at;
		size_t n = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
		if ((size_t)(end - p - 4) < n)
			break;
		if (!orphan_undo_one(s, p + 4, n, o->owner))
			return false;
		o->undo_at += 4 + n;
	}
	return true;
}

/* Settles the orphans of s that got their answer (c->mu held). An undo
 * that memory ran out for stays with its orphan, tried again at each
 * tick until sent or the session is lost: the handle's next call waits
 * for it meanwhile, so the release still lands before that call
 * (GUARANTEES rule 6). */
static void session_orphans_settle(raftlock_session *s)
{
	struct list *l, *tmp;
	bool settled = false;
	list_each_safe (l, tmp, &s->orphans) {
		struct session_orphan *o = list_entry(l, struct session_orphan, link);
		if (!o->req->done) {
			uint64_t now = transport_mono_ms(s->t);
			if (now >= o->resend_at) {
				/* a retry with the same seq is answered from
				 * the server's record */
				transport_resend(s->t, o->req);
				o->resend_at = now + s->t->request_timeout_ms;
			}
			continue;
		}
		if (!o->answered) {
			const Raftlock__Result *res;
			o->answered = true;
			session_seq_end(s, o->seq);
			o->undo_due = o->undo != NULL &&
				      session_reply_result(o->req->reply, &res) == 0 &&
				      res->status == 0 && res->token != 0 && !res->queued;
		}
		if (o->undo_due && !s->lost && !orphan_undo(s, o))
			continue; /* out of memory: at the next tick */
		list_remove(&o->link);
		settled = true;
		orphan_free(s->t, o);
	}
	if (list_empty(&s->orphans))
		list_remove(&s->orphaned_link);
	if (settled)
		pthread_cond_broadcast(&s->t->cond); /* calls of its handle may go on */
}

void sessions_tick(struct sessions *ss, uint64_t now)
{
	if (now >= ss->check_at) {
		uint64_t at = UINT64_MAX;
		for (raftlock_session *s = session_first(ss); s != NULL; s = session_after(ss, s)) {
			session_tick(s, now);
			if (session_check_at(s) < at)
				at = session_check_at(s);
		}
		ss->check_at = at;
	}
	struct list *l, *tmp;
	list_each_safe (l, tmp, &ss->orphaned)
		session_orphans_settle(list_entry(l, raftlock_session, orphaned_link));
}

/* ------------------------------------------------------------ registry */

int sessions_init(struct sessions *ss, struct transport *t, const char *client_name)
{
	*ss = (struct sessions){.t = t};
	list_init(&ss->list);
	list_init(&ss->orphaned);
	idmap_init(&ss->ids, sizeof(raftlock_session *));
	ss->client_name = strndup(client_name, RAFTLOCK_NAME_MAX);
	if (ss->client_name == NULL)
		return RAFTLOCK_ENOMEM;
	if (gethostname(ss->host, sizeof ss->host - 1) != 0)
		strcpy(ss->host, "unknown");
	pthread_mutex_lock(&t->mu);
	ss->owner_base = transport_random(t);
	t->hooks = (struct transport_hooks){.answered = sessions_answered,
					    .event = sessions_event,
					    .conn_lost = sessions_conn_lost,
					    .arg = ss};
	pthread_mutex_unlock(&t->mu);
	return 0;
}

void sessions_close(struct sessions *ss)
{
	idmap_close(&ss->ids);
	free(ss->client_name);
}

uint64_t sessions_new_owner(struct sessions *ss)
{
	return ss->owner_base + ++ss->owner_next;
}

raftlock_session *session_first(struct sessions *ss)
{
	struct list *l = list_first(&ss->list);
	return l != NULL ? list_entry(l, raftlock_session, link) : NULL;
}

raftlock_session *session_after(struct sessions *ss, raftlock_session *s)
{
	return s->link.next != &ss->list ? list_entry(s->link.next, raftlock_session, link) : NULL;
}

raftlock_session *sessions_walk_first(struct sessions *ss)
{
	raftlock_session *s = session_first(ss);
	ss->walk_next = s != NULL ? session_after(ss, s) : NULL;
	return s;
}

raftlock_session *sessions_walk_next(struct sessions *ss)
{
	raftlock_session *s = ss->walk_next;
	ss->walk_next = s != NULL ? session_after(ss, s) : NULL;
	return s;
}

raftlock_session *session_find(struct sessions *ss, uint64_t id)
{
	raftlock_session **slot = idmap_get(&ss->ids, id);
	return slot != NULL ? *slot : NULL;
}

static void session_unlink(raftlock_session *s)
{
	struct sessions *ss = s->ss;
	if (ss->walk_next == s)
		ss->walk_next = session_after(ss, s); /* closed during a walk */
	list_remove(&s->link);
	idmap_del(&ss->ids, s->id);
}

/* ----------------------------------------------------------- open/close */

/* A session's secret, from the kernel's random source and nothing else
 * (it waits for the pool at boot, as getrandom() does by default). */
static int session_draw_secret(uint8_t *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = getrandom(buf + got, n - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return RAFTLOCK_EINTERNAL;
		got += (size_t)r;
	}
	return 0;
}

int session_open(struct sessions *ss, const struct raftlock_session_options *opts,
		 raftlock_session **out)
{
	struct transport *t = ss->t;
	unsigned ttl = opts != NULL && opts->ttl_ms ? opts->ttl_ms : SESSION_TTL_DEFAULT_MS;
	if (ttl < RAFTLOCK_TTL_MIN_MS || ttl > RAFTLOCK_TTL_MAX_MS)
		return errmsg_set(t, RAFTLOCK_EINVAL, NULL,
				  "open session: ttl %u ms outside %u..%u", ttl,
				  RAFTLOCK_TTL_MIN_MS, RAFTLOCK_TTL_MAX_MS);
	raftlock_session *s = calloc(1, sizeof *s);
	if (s == NULL)
		return errmsg_set(t, RAFTLOCK_ENOMEM, NULL, "open session");
	list_init(&s->attached);
	list_init(&s->orphans);
	list_init(&s->orphaned_link);
	int rv = session_draw_secret(s->secret, sizeof s->secret);
	if (rv != 0) {
		free(s);
		return errmsg_set(t, rv, NULL, "open session: no secret from getrandom()");
	}

	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__OpenSessionRequest req = RAFTLOCK__OPEN_SESSION_REQUEST__INIT;
	Raftlock__Owner owner = RAFTLOCK__OWNER__INIT;
	Raftlock__Envelope *reply = NULL;
	const Raftlock__Result *res = NULL;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
	env.open_session = &req;
	req.ttl_ms = ttl;
	req.owner = &owner;
	req.acks_queued = true; /* GUARANTEES rule 6: acked */
	req.secret.data = s->secret;
	req.secret.len = sizeof s->secret;
	if (opts != NULL && opts->bind_to_connection)
		req.bind_grace_ms =
			opts->bind_grace_ms ? opts->bind_grace_ms : RAFTLOCK_BIND_GRACE_DEFAULT_MS;
	if (req.bind_grace_ms != 0 && (req.bind_grace_ms < RAFTLOCK_BIND_GRACE_MIN_MS ||
				       req.bind_grace_ms > RAFTLOCK_BIND_GRACE_MAX_MS)) {
		explicit_bzero(s->secret, sizeof s->secret);
		free(s);
		return errmsg_set(
			t, RAFTLOCK_EINVAL, NULL, "open session: bind grace %u ms outside %u..%u",
			req.bind_grace_ms, RAFTLOCK_BIND_GRACE_MIN_MS, RAFTLOCK_BIND_GRACE_MAX_MS);
	}
	owner.client_name = ss->client_name;
	owner.host = ss->host;
	owner.pid = (uint32_t)getpid();

	pthread_mutex_lock(&t->mu);
	req.nonce = transport_random(t);
	/* The lease starts no earlier than the first send of the request. */
	uint64_t sent = transport_boot_ms(t);
	rv = transport_call(t, &env, 0, &reply);
	if (rv == 0)
		rv = session_reply_result(reply, &res);
	if (rv == 0)
		rv = res->status;
	if (rv == 0 && (res->session == 0 || idmap_get(&ss->ids, res->session) != NULL))
		rv = RAFTLOCK_EPROTO;
	if (rv != 0) {
		errmsg_set(t, rv, reply != NULL ? reply->response->message : NULL,
			   "open session (ttl %u ms)", ttl);
		goto err;
	}
	/* Unindexed, the session would get no keepalives: the server lets
	 * it expire. */
	raftlock_session **slot = idmap_put(&ss->ids, res->session);
	if (slot == NULL) {
		rv = errmsg_set(t, RAFTLOCK_ENOMEM, NULL, "open session (ttl %u ms)", ttl);
		goto err;
	}
	*slot = s;
	s->ss = ss;
	s->t = t;
	s->id = res->session;
	s->ttl_ms = res->ttl_ms ? res->ttl_ms : ttl;
	s->valid_until = session_validity_ms(sent, s->ttl_ms);
	if (s->valid_until < ss->check_at)
		ss->check_at = s->valid_until;
	s->next_seq = 1;
	s->grace_ms = opts != NULL && opts->grace_ms != 0 ? opts->grace_ms
							  : RAFTLOCK_GRACE_TTLS * s->ttl_ms;
	s->told = RAFTLOCK_SESSION_SAFE;
	if (opts != NULL) {
		s->on_lost = opts->on_lost;
		s->on_lost_arg = opts->on_lost_arg;
		s->on_event = opts->on_event;
		s->on_event_arg = opts->on_event_arg;
		s->on_lock_event = opts->on_lock_event;
		s->on_lock_event_arg = opts->on_lock_event_arg;
	}
	s->bind_grace_ms = req.bind_grace_ms;
	list_add_head(&ss->list, &s->link);
	if (ss->opened != NULL)
		ss->opened(ss->opened_arg, s);
	pthread_mutex_unlock(&t->mu);
	raftlock__envelope__free_unpacked(reply, NULL);
	*out = s;
	return 0;

err:
	pthread_mutex_unlock(&t->mu);
	if (reply != NULL)
		raftlock__envelope__free_unpacked(reply, NULL);
	explicit_bzero(s->secret, sizeof s->secret);
	free(s);
	return rv;
}

/* Sends CloseSession for s (not lost) with t->mu held. */
static int session_send_close(raftlock_session *s, unsigned timeout_ms)
{
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__CloseSessionRequest req = RAFTLOCK__CLOSE_SESSION_REQUEST__INIT;
	Raftlock__Envelope *reply = NULL;
	const Raftlock__Result *res = NULL;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION;
	env.close_session = &req;
	struct session_req sr = SESSION_REQ(&env);
	sr.timeout_ms = timeout_ms;
	int rv = session_mutate(s, &sr, &reply, &res);
	if (rv == 0) {
		rv = res->status;
		raftlock__envelope__free_unpacked(reply, NULL);
	}
	/* The server has no such session: closed by an earlier attempt of
	 * this very close (its answer lost), or expired. Either way nothing
	 * is left to close, and the node's words on it are nobody's. */
	if (rv != RAFTLOCK_ESESSION)
		return rv;
	errmsg_drop_note();
	return 0;
}

int session_close(raftlock_session *s, unsigned timeout_ms)
{
	struct transport *t = s->t;
	/* Its on_lost may be running on the keepalive thread right now. */
	while (s->ss->callback_session == s &&
	       !pthread_equal(pthread_self(), s->ss->callback_thread))
		pthread_cond_wait(&t->cond, &t->mu);
	/* Calls in other threads end first: a blocked acquire gives up.
	 * Nobody else needs waking: every wake costs the keepalive thread a
	 * walk over the sessions, and closing many must not cost one each. */
	s->closing = true;
	if (s->calls > 0)
		transport_wake_all(t);
	if (s->ss->ending != NULL)
		s->ss->ending(s);
	while (s->calls > 0)
		pthread_cond_wait(&t->cond, &t->mu);
	int rv = 0;
	if (!s->lost) {
		rv = session_send_close(s, timeout_ms);
		if (rv != 0)
			errmsg_set(t, rv, NULL, "close session %llu", (unsigned long long)s->id);
		s->lost = true;
		s->valid_until = 0;
	} else if (s->lost_reason == RAFTLOCK_ETIMEDOUT) {
		/* Lost in our view only (the grace period passed): the server
		 * may still hold its locks
		 * until the lease ends there. Ask it to let go now, briefly;
		 * the outcome does not change what the caller gets. */
		if (timeout_ms == 0 || timeout_ms > SESSION_LOST_CLOSE_MS)
			timeout_ms = SESSION_LOST_CLOSE_MS;
		session_send_close(s, timeout_ms);
		errmsg_drop_note(); /* its failure is not reported */
	}
	while (!list_empty(&s->orphans)) {
		struct session_orphan *o = list_entry(s->orphans.next, struct session_orphan, link);
		list_remove(&o->link);
		orphan_free(t, o);
	}
	if (list_linked(&s->orphaned_link))
		list_remove(&s->orphaned_link);
	session_unlink(s);
	if (s->ss->freeing != NULL)
		s->ss->freeing(s);
	free(s->inflight);
	free(s->acks);
	explicit_bzero(s->secret, sizeof s->secret);
	free(s);
	return rv;
}

void sessions_close_all(struct sessions *ss)
{
	struct transport *t = ss->t;
	pthread_mutex_lock(&t->mu);
	uint64_t deadline = transport_mono_ms(t) + t->request_timeout_ms;
	raftlock_session *s;
	while ((s = session_first(ss)) != NULL) {
		uint64_t now = transport_mono_ms(t);
		/* One request timeout for them all: past it, just free. */
		if (now >= deadline)
			s->lost = true;
		session_close(s, now < deadline ? (unsigned)(deadline - now) : 1);
	}
	pthread_mutex_unlock(&t->mu);
}
