/* lock.c: see lock.h and raftlock.h. */
#include "lock.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "errmsg.h"

#define LOCK_GIVE_UP_MAX_MS 1000 /* see lock_give_up_bound() */

static void lock_destroy(struct raftlock_lock *l)
{
	free(l->name);
	free(l->value);
	free(l);
}

void lock_free_all(raftlock_session *s)
{
	while (!list_empty(&s->attached)) {
		struct raftlock_lock *l = list_entry(s->attached.next, struct raftlock_lock, link);
		list_remove(&l->link);
		if (l->free_wrapper != NULL)
			l->free_wrapper(l->wrapper);
		lock_destroy(l);
	}
}

/* One of a lock's times against the bound a cluster puts on it
 * (raftlock.h), checked here so that a value it would refuse costs no
 * round trip. */
static int lock_check_time(const struct transport *t, const char *name, const char *field,
			   unsigned ms, unsigned max_ms)
{
	if (ms <= max_ms)
		return 0;
	return errmsg_set(t, RAFTLOCK_EINVAL, NULL, "lock '%s': %s %u is above its bound, %u ms",
			  name, field, ms, max_ms);
}

RAFTLOCK_API int raftlock_lock_new(raftlock_session *s, const char *name,
				   const struct raftlock_lock_options *opts, raftlock_lock **out)
{
	if (s == NULL)
		return RAFTLOCK_EINVAL;
	struct transport *t = s->t;
	if (out == NULL)
		return errmsg_set(t, RAFTLOCK_EINVAL, "out is NULL", "lock '%.64s'",
				  name != NULL ? name : "(null)");
	int rv = codec_check_name(name);
	if (rv != 0)
		return errmsg_set(t, rv, NULL, "lock '%.64s': name must be 1..%d bytes",
				  name != NULL ? name : "(null)", RAFTLOCK_NAME_MAX);
	if (opts != NULL && (opts->kind < 0 || opts->kind > RAFTLOCK_SEMAPHORE))
		return errmsg_set(t, RAFTLOCK_EINVAL, NULL, "lock '%s': unknown kind %d", name,
				  opts->kind);
	if (opts != NULL && opts->kind == RAFTLOCK_SEMAPHORE && opts->limit == 0)
		return errmsg_set(t, RAFTLOCK_EINVAL, NULL, "lock '%s': a semaphore needs a limit",
				  name);
	if (opts != NULL &&
	    ((rv = lock_check_time(t, name, "lock_delay_ms", opts->lock_delay_ms,
				   RAFTLOCK_LOCK_DELAY_MAX_MS)) != 0 ||
	     (rv = lock_check_time(t, name, "max_hold_ms", opts->max_hold_ms,
				   RAFTLOCK_MAX_HOLD_MAX_MS)) != 0 ||
	     (rv = lock_check_time(t, name, "revoke_grace_ms", opts->revoke_grace_ms,
				   RAFTLOCK_REVOKE_GRACE_MAX_MS)) != 0))
		return rv;
	struct raftlock_lock *l = calloc(1, sizeof *l);
	if (l == NULL || (l->name = strdup(name)) == NULL) {
		free(l);
		return errmsg_set(t, RAFTLOCK_ENOMEM, NULL, "lock '%s'", name);
	}
	if (opts != NULL)
		l->opts = *opts;
	if (l->opts.kind == 0)
		l->opts.kind = RAFTLOCK_MUTEX;
	l->session = s;
	pthread_mutex_lock(&t->mu);
	l->owner = sessions_new_owner(s->ss);
	list_add_head(&s->attached, &l->link);
	pthread_mutex_unlock(&t->mu);
	*out = l;
	return 0;
}

RAFTLOCK_API void raftlock_lock_free(raftlock_lock *l)
{
	if (l == NULL)
		return;
	struct transport *t = l->session->t;
	pthread_mutex_lock(&t->mu);
	list_remove(&l->link);
	pthread_mutex_unlock(&t->mu);
	lock_destroy(l);
}

RAFTLOCK_API uint64_t raftlock_lock_token(const raftlock_lock *l)
{
	if (l == NULL)
		return 0;
	pthread_mutex_lock(&l->session->t->mu);
	/* A lost session holds nothing any more (its locks may be granted
	 * to others now): the handle's token is void. */
	uint64_t t = l->session->lost ? 0 : l->token;
	pthread_mutex_unlock(&l->session->t->mu);
	return t;
}

/* ------------------------------------------------------------ release -- */

/* A ReleaseRequest envelope, ready but for its sequence header. */
struct lock_release_msg {
	Raftlock__Envelope env;
	Raftlock__ReleaseRequest req;
	Raftlock__Release rel;
};

/* name is borrowed for the life of the message. */
static void lock_release_msg_init(struct lock_release_msg *m, char *name, uint64_t owner)
{
	*m = (struct lock_release_msg){
		.env = RAFTLOCK__ENVELOPE__INIT,
		.req = RAFTLOCK__RELEASE_REQUEST__INIT,
		.rel = RAFTLOCK__RELEASE__INIT,
	};
	m->env.body_case = RAFTLOCK__ENVELOPE__BODY_RELEASE;
	m->env.release = &m->req;
	m->req.release = &m->rel;
	m->rel.name = name;
	m->rel.owner = owner;
}

/* The releases that undo a grant of l that nobody waits for: one, or one
 * per lock of l's set (then malloc'd). */
struct lock_undo {
	struct lock_release_msg one;
	const Raftlock__Envelope *one_env;
	struct lock_release_msg *msgs;
	const Raftlock__Envelope **envs;
	size_t n;
};

/* 0 or RAFTLOCK_ENOMEM; u is used in place (it points into itself). */
static int lock_undo_init(raftlock_lock *l, struct lock_undo *u)
{
	u->msgs = NULL;
	if (l->n_set == 0) {
		lock_release_msg_init(&u->one, l->name, l->owner);
		u->one_env = &u->one.env;
		u->envs = &u->one_env;
		u->n = 1;
		return 0;
	}
	u->msgs = calloc(l->n_set, sizeof *u->msgs);
	u->envs = calloc(l->n_set, sizeof *u->envs);
	if (u->msgs == NULL || u->envs == NULL) {
		free(u->msgs);
		free(u->envs);
		return RAFTLOCK_ENOMEM;
	}
	for (size_t i = 0; i < l->n_set; i++) {
		lock_release_msg_init(&u->msgs[i], l->set[i]->name, l->owner);
		u->envs[i] = &u->msgs[i].env;
	}
	u->n = l->n_set;
	return 0;
}

static void lock_undo_end(struct lock_undo *u)
{
	if (u->msgs != NULL) {
		free(u->msgs);
		free(u->envs);
	}
}

/* Sends a mutating request of l's session that grants nothing (a
 * cancel, a proclaim) with t->mu held, and waits for its answer. */
static int lock_send(raftlock_lock *l, struct session_req sr, unsigned timeout_ms,
		     Raftlock__Envelope **reply, const Raftlock__Result **res)
{
	sr.owner = l->owner;
	sr.timeout_ms = timeout_ms;
	return session_mutate(l->session, &sr, reply, res);
}

/* Gives up waiting for a request of l (session_abandon), an acquire's
 * late grant to be released. RAFTLOCK_ENOMEM instead of
 * RAFTLOCK_EUNKNOWN when out of memory for that release: the acquire is
 * still sent until settled, but a late grant is held until the session
 * ends (raftlock.h). A release never ends ENOMEM here. */
static int lock_abandon(raftlock_lock *l, struct request *req, uint64_t seq, bool acquire)
{
	struct lock_undo undo;
	bool with_undo = acquire && lock_undo_init(l, &undo) == 0;
	int rv = session_abandon(l->session, req, seq, with_undo ? undo.envs : NULL,
				 with_undo ? undo.n : 0, l->owner);
	if (with_undo)
		lock_undo_end(&undo);
	else if (acquire && rv == RAFTLOCK_EUNKNOWN)
		rv = RAFTLOCK_ENOMEM;
	return rv;
}

/* Waits (t->mu held) until the handle's earlier requests that are still
 * being sent in the background (orphans) are settled, so that a new call
 * applies after them: a release that timed out, say, must not overtake
 * the acquire that follows it. 0, or nothing was sent: RAFTLOCK_ESTATE at
 * the deadline (transport_mono_ms), RAFTLOCK_ECANCELED once the session
 * began to close (a call that sent nothing yet is a new one to the close,
 * raftlock.h). */
static int lock_wait_orphans(raftlock_lock *l, uint64_t deadline)
{
	raftlock_session *s = l->session;
	struct transport *t = s->t;
	bool resend = true;
	while (session_has_orphans(s, l->owner, resend) && !s->lost && !s->closing) {
		resend = false;
		if (transport_mono_ms(t) >= deadline)
			return RAFTLOCK_ESTATE;
		struct timespec ts = transport_deadline(t, deadline);
		pthread_cond_timedwait(&t->cond, &t->mu, &ts);
	}
	return s->closing ? RAFTLOCK_ECANCELED : 0;
}

/* A release whose outcome is unknown (RAFTLOCK_EUNKNOWN) executes later:
 * the handle gives up the level it released, and its token with the
 * last one (the caller must not use it any more). */
static void lock_release_unknown(raftlock_lock *l)
{
	if (l->count > 1) {
		l->count--;
	} else {
		l->count = 0;
		l->token = 0;
	}
}

/* Applies a release result to the handle. */
static int lock_released(raftlock_lock *l, const Raftlock__Result *res, uint32_t *remaining)
{
	int rv = res->status;
	if (rv == 0) {
		l->count = res->count;
		if (res->count == 0)
			l->token = 0;
		*remaining = res->count;
	} else if (rv == RAFTLOCK_ENOTHOLDER || rv == RAFTLOCK_ESESSION) {
		l->count = 0;
		l->token = 0;
	}
	return rv;
}

/* ------------------------------------------------------------ acquire -- */

struct acquire_msg {
	Raftlock__Envelope env;
	Raftlock__AcquireRequest req;
	Raftlock__Acquire acq;
};

static void acquire_msg_init(struct acquire_msg *m, raftlock_lock *l, enum raftlock_mode mode,
			     uint32_t permits, int timeout_ms)
{
	*m = (struct acquire_msg){
		.env = RAFTLOCK__ENVELOPE__INIT,
		.req = RAFTLOCK__ACQUIRE_REQUEST__INIT,
		.acq = RAFTLOCK__ACQUIRE__INIT,
	};
	m->env.body_case = RAFTLOCK__ENVELOPE__BODY_ACQUIRE;
	m->env.acquire = &m->req;
	m->req.acquire = &m->acq;
	m->acq.name = l->name;
	m->acq.kind = (Raftlock__LockKind)l->opts.kind;
	m->acq.mode = mode == RAFTLOCK_SHARED ? RAFTLOCK__MODE__SHARED : RAFTLOCK__MODE__EXCLUSIVE;
	m->acq.permits = permits ? permits : 1;
	m->acq.limit = l->opts.limit;
	m->acq.owner = l->owner;
	m->acq.wait = timeout_ms != 0;
	m->acq.wait_ms = timeout_ms > 0 ? (uint32_t)timeout_ms : 0;
	m->acq.lock_delay_ms = l->opts.lock_delay_ms;
	m->acq.max_hold_ms = l->opts.max_hold_ms;
	m->acq.revoke_grace_ms = l->opts.revoke_grace_ms;
	/* acq.value: lock_attach_value, under t->mu */
}

/* Puts the handle's election value into env if it is an acquire of one
 * lock, as the request is submitted (t->mu held until it is encoded):
 * raftlock_lock_set_value() and lock_proclaim() in another thread free
 * the value they replace under t->mu. */
static void lock_attach_value(const raftlock_lock *l, Raftlock__Envelope *env)
{
	if (env->body_case == RAFTLOCK__ENVELOPE__BODY_ACQUIRE)
		env->acquire->acquire->value = l->value != NULL ? l->value : (char *)"";
}

/* Whether the grant of token to l was revoked before the caller took it
 * in: the I/O thread dispatched its revocation first (lock_revoked). */
static bool lock_grant_was_revoked(const raftlock_lock *l, uint64_t token)
{
	return l->revoked != 0 && token == l->revoked;
}

/* Gives a set up, a lock of it revoked before its caller took the grant
 * in: its locks still granted -- per res, those whose token in res was not
 * revoked; without res, those its handles still hold -- are released as
 * orphans of the set (a later call of it waits for them), and its handles
 * hold none. RAFTLOCK_ENOTHOLDER, or RAFTLOCK_ENOMEM when out of memory
 * for a release: that lock stays held until the session ends. */
static int lock_give_up_set(raftlock_lock *l, const Raftlock__Result *res)
{
	struct lock_undo undo;
	bool with_undo = lock_undo_init(l, &undo) == 0;
	bool kept = true;
	for (size_t i = 0; i < l->n_set; i++) {
		raftlock_lock *m = l->set[i];
		bool granted =
			res != NULL ? !lock_grant_was_revoked(m, res->tokens[i]) : m->token != 0;
		if (granted &&
		    !(with_undo && session_send_orphan(l->session, &undo.msgs[i].env, l->owner)))
			kept = false;
		m->token = 0;
		m->count = 0;
	}
	if (with_undo)
		lock_undo_end(&undo);
	return kept ? RAFTLOCK_ENOTHOLDER : RAFTLOCK_ENOMEM;
}

/* A set is held whole or not at all (raftlock.h): if any lock of res was
 * revoked before the caller took the grant in, the set is given up
 * (lock_give_up_set, whose status this returns). 0: held whole. */
static int lock_hold_set(raftlock_lock *l, const Raftlock__Result *res)
{
	bool whole = true;
	for (size_t i = 0; i < l->n_set; i++)
		whole = whole && !lock_grant_was_revoked(l->set[i], res->tokens[i]);
	if (!whole)
		return lock_give_up_set(l, res);
	for (size_t i = 0; i < l->n_set; i++) {
		l->set[i]->token = res->tokens[i];
		l->set[i]->count = 1;
	}
	return 0;
}

/* The handle holds what res granted at nesting depth count, or if it
 * leads a set, the set's handles each the token of its lock
 * (lock_hold_set); but none a token whose revocation the I/O thread
 * dispatched before this caller took the grant in. 0, or the grant was
 * revoked so and the handle holds nothing: RAFTLOCK_ENOTHOLDER, or
 * RAFTLOCK_ENOMEM (a set, see lock_give_up_set). */
static int lock_hold(raftlock_lock *l, const Raftlock__Result *res, uint32_t count)
{
	if (l->n_set > 0 && res->n_tokens == l->n_set)
		return lock_hold_set(l, res);
	if (lock_grant_was_revoked(l, res->token))
		return RAFTLOCK_ENOTHOLDER;
	l->token = res->token;
	l->count = count;
	return 0;
}

/* What an acquire returns when its grant was revoked before the call
 * could return it (lock_hold, status): the handle holds nothing; a set's
 * other locks are released, or without memory for that (RAFTLOCK_ENOMEM)
 * held until the session ends (raftlock.h). */
static int lock_grant_revoked(int status)
{
	if (status == RAFTLOCK_ENOMEM)
		errmsg_note(status, "a lock of the set was revoked; the others stay held until "
				    "the session ends");
	else
		errmsg_note(status, "the grant was revoked before the call returned");
	return status;
}

/* Applies a final acquire result to the handle: a grant to a session
 * lost meanwhile is RAFTLOCK_ESESSION (it holds nothing). ENOTHOLDER is a
 * grant of this handle revoked (its push lost with a connection, the
 * answer read from the server's record): a hold it had is gone too. */
static int lock_granted(raftlock_lock *l, const Raftlock__Result *res, uint64_t *token)
{
	if (res->status != 0) {
		if (res->status == RAFTLOCK_ESESSION)
			session_mark_lost(l->session, RAFTLOCK_ESESSION);
		if (res->status == RAFTLOCK_ENOTHOLDER) {
			l->token = 0;
			l->count = 0;
		}
		return res->status;
	}
	if (l->session->lost)
		return RAFTLOCK_ESESSION;
	int rv = lock_hold(l, res, res->count ? res->count : l->count + 1);
	if (rv != 0)
		return lock_grant_revoked(rv);
	*token = res->token;
	return 0;
}

/* Waits for a blocking acquire with t->mu held, until it is done (or, with
 * until_queued, answered "queued"), deadline (CLOCK_MONOTONIC ms; 0:
 * none), every address refused the connection (req->refused), or the
 * session is lost or closing. */
static void lock_wait_push(struct transport *t, raftlock_session *s, struct request *req,
			   uint64_t deadline, bool until_queued)
{
	req->awaits_queued = until_queued; /* else "queued" need not wake us */
	while (!req->done && !(until_queued && req->queued) && !req->refused && !s->lost &&
	       !s->closing) {
		uint64_t now = transport_mono_ms(t);
		if (deadline != 0 && now >= deadline)
			return;
		uint64_t at = now + 1000;
		if (deadline != 0 && deadline < at)
			at = deadline;
		struct timespec ts = transport_deadline(t, at);
		transport_sleep(t, req, &ts);
	}
}

/* Cancels the wait of acquire_seq on the server, waiting up to timeout_ms.
 * Returns 0 when the server removed the wait; 1 when the acquire had been
 * granted first, with *held what lock_hold() made of it: 0, the handle
 * holds the lock and *granted is its token; else it holds nothing
 * (RAFTLOCK_ENOTHOLDER, or RAFTLOCK_ENOMEM for a set; ENOTHOLDER too when
 * the server says the grant was revoked since); 2 when the server
 * knows neither (the wait ended otherwise, or the acquire has not been
 * applied yet); or an error of session_mutate(): EUNKNOWN, the cancel is
 * still being sent; ECONNECTION, ENOMEM, it was never sent; ESESSION,
 * also for a grant to a session lost before its answer was taken in, as
 * lock_granted says. */
static int lock_cancel_wait(raftlock_lock *l, uint64_t acquire_seq, unsigned timeout_ms,
			    uint64_t *granted, int *held)
{
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__CancelWaitRequest req = RAFTLOCK__CANCEL_WAIT_REQUEST__INIT;
	Raftlock__CancelWait cw = RAFTLOCK__CANCEL_WAIT__INIT;
	Raftlock__Envelope *reply = NULL;
	const Raftlock__Result *res = NULL;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT;
	env.cancel_wait = &req;
	req.cancel = &cw;
	cw.name = l->name;
	cw.owner = l->owner;
	cw.acquire_seq = acquire_seq;
	int rv = lock_send(l, SESSION_REQ(&env), timeout_ms, &reply, &res);
	if (rv != 0)
		return rv;
	if (res->status == 0 && res->token != 0 && l->session->lost) {
		rv = RAFTLOCK_ESESSION; /* lost meanwhile: it holds nothing */
	} else if (res->status == 0 && res->token != 0) {
		/* a queued acquire is never a nested one */
		*held = lock_hold(l, res, 1);
		*granted = res->token;
		rv = 1;
	} else if (res->status == 0) {
		rv = 0;
	} else if (res->status == RAFTLOCK_ESESSION) {
		rv = RAFTLOCK_ESESSION;
	} else if (res->status == RAFTLOCK_ENOTHOLDER) {
		/* granted first, then revoked (its push may have come, its
		 * revocation's not): final, the handle holds nothing */
		l->token = 0;
		l->count = 0;
		*held = RAFTLOCK_ENOTHOLDER;
		rv = 1;
	} else {
		rv = 2;
		errmsg_drop_note(); /* ENOTFOUND, say: a retry of the acquire tells */
	}
	raftlock__envelope__free_unpacked(reply, NULL);
	return rv;
}

/* The bound past its timeout within which a blocking acquire establishes
 * that it is not queued (raftlock.h): min(request timeout, 1 s). */
static unsigned lock_give_up_bound(const struct transport *t)
{
	return t->request_timeout_ms < LOCK_GIVE_UP_MAX_MS ? t->request_timeout_ms
							   : LOCK_GIVE_UP_MAX_MS;
}

/* The final answer of a blocking acquire (req done, taken here). */
static int lock_acquire_final(raftlock_lock *l, struct request *req, uint64_t seq, uint64_t *token)
{
	raftlock_session *s = l->session;
	Raftlock__Envelope *reply = NULL;
	const Raftlock__Result *res = NULL;
	transport_take(s->t, req, &reply);
	session_seq_end(s, seq); /* only final answers complete a request */
	int rv = session_reply_result(reply, &res);
	if (rv == 0)
		rv = lock_granted(l, res, token);
	raftlock__envelope__free_unpacked(reply, NULL);
	return rv;
}

/*
 * The caller's timeout ran out before the acquire ended: by `end` at the
 * latest, leave it either holding (0, *token set: the grant came first)
 * or not queued (ETIMEDOUT); RAFTLOCK_EUNKNOWN when the cluster did not
 * say in time (the acquire and its cancel go on as orphans: a late grant
 * is released). Takes req.
 */
static int lock_give_up(raftlock_lock *l, struct request *req, uint64_t seq, uint64_t end,
			uint64_t *token)
{
	raftlock_session *s = l->session;
	struct transport *t = s->t;
	for (;;) {
		if (req->done) {
			int rv = lock_acquire_final(l, req, seq, token);
			/* ended by the server's own wait deadline, or canceled */
			return rv == RAFTLOCK_ECANCELED ? RAFTLOCK_ETIMEDOUT : rv;
		}
		uint64_t now = transport_mono_ms(t);
		if (s->lost || s->closing || now >= end || req->refused)
			break;
		if (!req->queued) {
			/* not answered yet: a cancel now could come first */
			lock_wait_push(t, s, req, end, true);
			continue;
		}
		uint64_t granted = 0;
		int held = 0;
		int rv = lock_cancel_wait(l, seq, (unsigned)(end - now), &granted, &held);
		if (rv == 0 || rv == 1) {
			/* the acquire's record is final: canceled, or granted */
			transport_take(t, req, NULL);
			session_seq_end(s, seq);
			if (rv == 0)
				return RAFTLOCK_ETIMEDOUT;
			if (held != 0)
				return lock_grant_revoked(held);
			*token = granted;
			return 0;
		}
		if (rv != 2)
			break; /* ESESSION, or the cancel's own outcome is unknown */
		/* ended otherwise: a retry of the acquire tells how */
		transport_resend(t, req);
		lock_wait_push(t, s, req, end, false);
	}
	if (s->lost || s->closing) {
		/* the server ends the wait with the session */
		transport_take(t, req, NULL);
		return s->lost ? RAFTLOCK_ESESSION : RAFTLOCK_ECANCELED;
	}
	/* the session releases a grant that comes later (ECONNECTION: it
	 * was never sent, nothing is queued) */
	return lock_abandon(l, req, seq, true);
}

/* A blocking acquire with t->mu held. */
static int lock_acquire_wait(raftlock_lock *l, Raftlock__Envelope *env, int timeout_ms,
			     uint64_t *token)
{
	raftlock_session *s = l->session;
	struct transport *t = s->t;
	struct request *req;
	uint64_t deadline = timeout_ms > 0 ? transport_mono_ms(t) + (uint64_t)timeout_ms : 0;
	struct session_req sr = SESSION_REQ(env);
	sr.wait = true;
	int rv = lock_wait_orphans(l, deadline ? deadline : UINT64_MAX);
	if (rv == RAFTLOCK_ESTATE)
		return RAFTLOCK_ETIMEDOUT; /* nothing was sent */
	if (rv != 0)
		return rv;
	lock_attach_value(l, env);
	rv = session_mutate_submit(s, &sr, &req);
	if (rv != 0)
		return rv;
	uint64_t seq = req->seq;
	lock_wait_push(t, s, req, deadline, false);
	if (!req->done && req->refused) {
		/* Every address refused the connection (TLS, a connection
		 * limit): the call ends now, as a try-lock does. Never sent:
		 * that refusal; sent before: EUNKNOWN, and a late grant is
		 * released. */
		rv = lock_abandon(l, req, seq, true);
		if (rv != RAFTLOCK_ENOMEM) /* else not why it failed */
			errmsg_note(rv, t->refused_why);
		return rv;
	}
	if (!req->done)
		return lock_give_up(l, req, seq, transport_mono_ms(t) + lock_give_up_bound(t),
				    token);
	return lock_acquire_final(l, req, seq, token);
}

/* A set's grant as its caller takes it in (lock_take_grant). The I/O
 * thread applied it as it read it, and a revocation read with it
 * (lock_revoked) came after: a set is held whole or not at all, as
 * lock_hold_set() holds it when the revocation comes first, so its locks
 * still granted are released (lock_give_up_set, whose status this
 * returns). 0: the set holds every lock. */
static int lock_take_set(raftlock_lock *l)
{
	bool whole = true;
	for (size_t i = 0; i < l->n_set; i++)
		whole = whole && l->set[i]->token != 0;
	if (whole)
		return 0;
	return lock_give_up_set(l, NULL);
}

/*
 * The grant of token to l, which the I/O thread applied as it read the
 * answer, taken in for its caller once the rest of that read is
 * dispatched (t->mu held, before the try-lock's caller is woken or the
 * asynchronous acquire's callback runs: transport_deferred.settle). A
 * revocation read with the grant came after it, yet before the caller
 * could know: the grant is not held then (lock_hold refuses it when the
 * revocation comes first). 0, or RAFTLOCK_ENOTHOLDER with the handle (its
 * set) emptied (RAFTLOCK_ENOMEM: a set without memory to release its
 * other locks), or RAFTLOCK_ESESSION: the session was lost meanwhile (read
 * with the grant, say), which holds nothing.
 */
static int lock_take_grant(raftlock_lock *l, uint64_t token)
{
	if (l->session->lost)
		return RAFTLOCK_ESESSION;
	if (l->n_set > 0)
		return lock_take_set(l);
	return lock_grant_was_revoked(l, token) ? RAFTLOCK_ENOTHOLDER : 0;
}

/* --------------------------------------------- ending on the I/O thread -- */

/* How a request that the I/O thread ended went, kept for its caller: the
 * call's status, the token of a grant or the levels a release left, and
 * why it failed as a lower layer knew it (errmsg_note). */
struct lock_outcome {
	int status;
	uint64_t value;
	int note_code;
	char note[ERRMSG_SIZE / 2];
};

/* A successful acquire's grant (o->value), taken in for its caller by the
 * I/O thread once the read that brought it is dispatched (t->mu held:
 * transport_deferred.settle). false: it was revoked meanwhile (the
 * outcome is then RAFTLOCK_ENOTHOLDER, or RAFTLOCK_ENOMEM for a set
 * (lock_give_up_set), with its note) or the session lost
 * (RAFTLOCK_ESESSION); value 0. */
static bool lock_settle_grant(raftlock_lock *l, struct lock_outcome *o)
{
	o->status = lock_take_grant(l, o->value);
	if (o->status == 0)
		return true;
	o->value = 0;
	if (o->status == RAFTLOCK_ENOTHOLDER || o->status == RAFTLOCK_ENOMEM) {
		lock_grant_revoked(o->status);
		errmsg_take_note(&o->note_code, o->note, sizeof o->note);
	}
	return false;
}

/* One acquire (its envelope set) or release, with its results. */
struct lock_op {
	Raftlock__Envelope *acquire;
	int timeout_ms;
	uint64_t token;
	uint32_t left;
};

/*
 * Ends a request of l that the I/O thread watches (t->mu held): its reply
 * came (err 0), or its deadline passed (err: what a blocking call reports
 * then: a late grant is released, a release executes later). Applies the
 * outcome to the handle and returns the call's status, with *value the
 * token of a grant or the levels a release left. Takes req.
 */
static int lock_request_end(raftlock_lock *l, struct request *req, uint64_t seq, bool acquire,
			    bool wait, int err, uint64_t *value)
{
	if (err != 0) {
		int rv = lock_abandon(l, req, seq, acquire);
		if (rv == RAFTLOCK_EUNKNOWN && !acquire)
			lock_release_unknown(l);
		return rv;
	}
	Raftlock__Envelope *reply = NULL;
	const Raftlock__Result *res = NULL;
	int rv = session_mutate_finish(l->session, req, seq, &reply, &res);
	if (rv != 0)
		return rv;
	if (acquire) {
		rv = lock_granted(l, res, value);
		/* ended by the server's own wait deadline */
		if (wait && rv == RAFTLOCK_ECANCELED)
			rv = RAFTLOCK_ETIMEDOUT;
	} else {
		uint32_t left = 0;
		rv = lock_released(l, res, &left);
		*value = left;
	}
	raftlock__envelope__free_unpacked(reply, NULL);
	return rv;
}

/*
 * A blocking try-lock or release. Its caller waits without t->mu (a
 * waiter, woken with the others of its batch in one system call: waker.h),
 * and the I/O thread ends the request with the others of the same batch
 * of answers, as it ends an asynchronous one: woken
 * callers would otherwise all queue on t->mu at once to finish their
 * calls, and each wait there costs another sleep and wake-up. The call of
 * the session ends on the I/O thread too: from then on the caller touches
 * neither the handle nor the session (a close may free them), only this.
 * The blocking acquire that waits in the server's queue keeps its own
 * path (lock_acquire_wait): it cancels and re-asks as its timeout ends.
 */
struct lock_sync {
	struct transport_deferred d; /* wakes the caller, once t->mu is let go */
	struct waiter waiter;
	raftlock_lock *l;
	bool acquire;
	uint64_t seq;
	struct lock_outcome out;
	char name[RAFTLOCK_NAME_MAX + 1]; /* the handle's name, on failure */
};

/* Whether req, ended with err by the I/O thread, ended because every
 * address refused the connection (TLS, a node's limit). */
static bool lock_refused(const struct request *req, int err)
{
	return err != 0 && (err == RAFTLOCK_ETLS || req->refused);
}

/* Why a request of the lock layer failed with o->status, kept for its
 * caller in o once lock_request_end() is done (t->mu held): which address
 * refused the connection and why (refused, unless the call failed for
 * want of memory to release a late grant), else a lower layer's note,
 * else why no node could be reached. The code is the status's, whatever
 * the transport's was (a refused try-lock sent before ends
 * RAFTLOCK_EUNKNOWN), so that errmsg_set() prints the reason. */
static void lock_note_why(const struct transport *t, bool refused, struct lock_outcome *o)
{
	if (o->status == 0) {
		errmsg_take_note(&o->note_code, o->note, sizeof o->note);
		return;
	}
	const char *why = NULL;
	if (refused && o->status != RAFTLOCK_ENOMEM)
		why = t->refused_why;
	else
		errmsg_take_note(&o->note_code, o->note, sizeof o->note);
	if (why == NULL && o->status == RAFTLOCK_ECONNECTION && o->note_code == 0 &&
	    t->unreached_why[0] != '\0')
		why = t->unreached_why;
	if (why != NULL) {
		o->note_code = o->status;
		snprintf(o->note, sizeof o->note, "%.*s", (int)sizeof o->note - 1, why);
	}
}

/*
 * Ends req, a request of l (seq; an acquire, one queued on the server
 * with wait), into o on the I/O thread (t->mu held): see
 * lock_request_end(). ended (nonzero: ECANCELED or ESESSION, set by
 * lock_end_waits) ends it so without its answer, as the server ends the
 * wait with the session. A note the thread holds from before is not this
 * call's; the reason of a failure is kept (lock_note_why).
 */
static void lock_outcome_end(raftlock_lock *l, struct request *req, uint64_t seq, bool acquire,
			     bool wait, int err, int ended, struct lock_outcome *o)
{
	struct transport *t = l->session->t;
	bool refused = ended == 0 && lock_refused(req, err);
	errmsg_take_note(&o->note_code, o->note, sizeof o->note); /* not this call's */
	if (ended != 0) {
		transport_take(t, req, NULL);
		o->status = ended;
	} else {
		o->status = lock_request_end(l, req, seq, acquire, wait, err, &o->value);
	}
	lock_note_why(t, refused, o);
}

/* The I/O thread, t->mu held: see lock_request_end(). */
static void lock_sync_done(struct transport *t, struct request *req, int err)
{
	struct lock_sync *sync = req->op;
	raftlock_lock *l = sync->l;
	req->on_done = NULL;
	lock_outcome_end(l, req, sync->seq, sync->acquire, false, err, 0, &sync->out);
	if (sync->out.status != 0)
		snprintf(sync->name, sizeof sync->name, "%s", l->name);
	if (!sync->acquire || sync->out.status != 0)
		session_call_end(l->session); /* else lock_sync_settle: it reads l */
	/* woken with t->mu held, the caller would wait for it at once */
	transport_defer(t, &sync->d);
}

/* The I/O thread, t->mu held, the batch of answers dispatched: a grant is
 * taken in for the caller (lock_take_grant), and the call of the session
 * ends (lock_sync_done left it open for this). */
static void lock_sync_settle(struct transport_deferred *d)
{
	struct lock_sync *sync = (struct lock_sync *)d;
	if (!sync->acquire || sync->out.status != 0)
		return;
	raftlock_lock *l = sync->l;
	if (!lock_settle_grant(l, &sync->out))
		snprintf(sync->name, sizeof sync->name, "%s", l->name);
	session_call_end(l->session);
}

/* Submits the try-lock (op->acquire) or release of op for sync, to end
 * within timeout_ms (t->mu held, a call of l's session begun). */
static int lock_sync_submit(raftlock_lock *l, struct lock_op *op, struct lock_sync *sync,
			    unsigned timeout_ms)
{
	struct transport *t = l->session->t;
	struct lock_release_msg m;
	Raftlock__Envelope *env = op->acquire;
	if (env == NULL) {
		lock_release_msg_init(&m, l->name, l->owner);
		env = &m.env;
	}
	lock_attach_value(l, env);
	struct request *req;
	int rv = session_mutate_submit(l->session, &SESSION_REQ(env), &req);
	if (rv != 0)
		return rv;
	sync->seq = req->seq;
	transport_on_done(t, req, lock_sync_done, sync, timeout_ms);
	return 0;
}

/* A try-lock or release (op): submitted with t->mu, then waited for
 * without it. */
static int lock_call_now(raftlock_lock *l, struct lock_op *op)
{
	struct transport *t = l->session->t;
	const char *what = op->acquire ? "acquire" : "release";
	struct lock_sync sync = {.d.settle = lock_sync_settle,
				 .d.waiter = &sync.waiter,
				 .l = l,
				 .acquire = op->acquire != NULL};
	waiter_init(&t->waker, &sync.waiter);
	pthread_mutex_lock(&t->mu);
	int rv = session_call_begin(l->session);
	if (rv == 0) {
		/* one request timeout in all, the handle's orphans included */
		uint64_t deadline = transport_mono_ms(t) + t->request_timeout_ms;
		rv = lock_wait_orphans(l, deadline);
		uint64_t now = transport_mono_ms(t);
		unsigned left = deadline > now ? (unsigned)(deadline - now) : 1;
		if (rv == 0)
			rv = lock_sync_submit(l, op, &sync, left);
		if (rv != 0)
			session_call_end(l->session);
	}
	if (rv != 0) {
		errmsg_set(t, rv, NULL, "%s '%s'", what, l->name);
		pthread_mutex_unlock(&t->mu);
		goto out;
	}
	pthread_mutex_unlock(&t->mu);
	waiter_wait(&t->waker, &sync.waiter);
	rv = sync.out.status;
	if (rv != 0) {
		if (sync.out.note_code != 0)
			errmsg_note(sync.out.note_code, sync.out.note);
		errmsg_set(t, rv, NULL, "%s '%s'", what, sync.name);
	} else if (op->acquire != NULL) {
		op->token = sync.out.value;
	} else {
		op->left = (uint32_t)sync.out.value;
	}
out:
	waiter_fini(&t->waker, &sync.waiter);
	return rv;
}

/* How much the caller of a set's release needs to hear of one lock's
 * outcome: a lock still held first (it can be released again: not sent,
 * RAFTLOCK_ENOMEM say, or refused), then a release that will execute
 * (RAFTLOCK_EUNKNOWN: a release sent is never given up), then any other
 * error. */
static int lock_release_rank(int status, bool held)
{
	if (status == 0)
		return 0;
	if (held)
		return 3;
	return status == RAFTLOCK_EUNKNOWN ? 2 : 1;
}

int lock_release_set(raftlock_lock *const *locks, size_t n)
{
	raftlock_session *s = locks[0]->session;
	struct transport *t = s->t;
	struct lock_sync *syncs = calloc(n, sizeof *syncs);
	if (syncs == NULL)
		return errmsg_set(t, RAFTLOCK_ENOMEM, NULL, "release '%s'", locks[0]->name);
	size_t sent = 0;
	pthread_mutex_lock(&t->mu);
	/* The whole call is one of the session too: a close waits for it,
	 * so the handles can be read once their releases ended. */
	int rv = session_call_begin(s);
	if (rv != 0) {
		errmsg_set(t, rv, NULL, "release '%s'", locks[0]->name);
		pthread_mutex_unlock(&t->mu);
		free(syncs);
		return rv;
	}
	/* one request timeout in all (the set's handles share one owner,
	 * so one wait for their orphans), every release sent before any is
	 * waited for */
	uint64_t deadline = transport_mono_ms(t) + t->request_timeout_ms;
	int unsent = lock_wait_orphans(locks[0], deadline);
	uint64_t now = transport_mono_ms(t);
	unsigned left = deadline > now ? (unsigned)(deadline - now) : 1;
	while (sent < n && unsent == 0) {
		struct lock_sync *sync = &syncs[sent];
		*sync = (struct lock_sync){
			.d.settle = lock_sync_settle, .d.waiter = &sync->waiter, .l = locks[sent]};
		waiter_init(&t->waker, &sync->waiter);
		unsent = session_call_begin(s);
		if (unsent == 0 &&
		    (unsent = lock_sync_submit(locks[sent], &(struct lock_op){0}, sync, left)) != 0)
			session_call_end(s);
		if (unsent != 0)
			waiter_fini(&t->waker, &sync->waiter); /* not sent */
		else
			sent++;
	}
	pthread_mutex_unlock(&t->mu);
	for (size_t i = 0; i < sent; i++)
		waiter_wait(&t->waker, &syncs[i].waiter);
	pthread_mutex_lock(&t->mu);
	size_t worst = 0;
	int worst_rank = 0;
	for (size_t i = 0; i < n; i++) {
		int status = i < sent ? syncs[i].out.status : unsent;
		int rank = lock_release_rank(status, locks[i]->token != 0 && !s->lost);
		if (rank > worst_rank) {
			worst = i;
			worst_rank = rank;
		}
	}
	rv = 0;
	if (worst_rank > 0 && worst < sent) {
		struct lock_sync *sync = &syncs[worst];
		rv = sync->out.status;
		if (sync->out.note_code != 0)
			errmsg_note(sync->out.note_code, sync->out.note);
		errmsg_set(t, rv, NULL, "release '%s'", sync->name);
	} else if (worst_rank > 0) {
		rv = unsent;
		errmsg_set(t, rv, NULL, "release '%s'", locks[worst]->name);
	}
	session_call_end(s);
	pthread_mutex_unlock(&t->mu);
	for (size_t i = 0; i < sent; i++)
		waiter_fini(&t->waker, &syncs[i].waiter);
	free(syncs);
	return rv;
}

/* ---------------------------------------------------------------- calls -- */

/* Runs op on l as a call of its session, and writes the error message
 * while l is still safe to use: a close in another thread frees l as soon
 * as the client lock is let go. */
static int lock_call(raftlock_lock *l, struct lock_op *op)
{
	if (op->acquire == NULL || op->timeout_ms == 0)
		return lock_call_now(l, op);
	struct transport *t = l->session->t;
	pthread_mutex_lock(&t->mu);
	int rv = session_call_begin(l->session);
	if (rv == 0) {
		rv = lock_acquire_wait(l, op->acquire, op->timeout_ms, &op->token);
		session_call_end(l->session);
	}
	if (rv != 0)
		errmsg_set(t, rv, NULL, "acquire '%s'", l->name);
	pthread_mutex_unlock(&t->mu);
	return rv;
}

RAFTLOCK_API int raftlock_lock_acquire(raftlock_lock *l, enum raftlock_mode mode, uint32_t permits,
				       int timeout_ms, uint64_t *token)
{
	if (l == NULL)
		return RAFTLOCK_EINVAL;
	if (mode != RAFTLOCK_EXCLUSIVE && mode != RAFTLOCK_SHARED)
		return errmsg_set(l->session->t, RAFTLOCK_EINVAL, NULL,
				  "acquire '%s': unknown mode %d", l->name, mode);
	struct acquire_msg m;
	acquire_msg_init(&m, l, mode, permits, timeout_ms);
	return lock_acquire_env(l, &m.env, timeout_ms, token);
}

int lock_acquire_env(raftlock_lock *l, Raftlock__Envelope *env, int timeout_ms, uint64_t *token)
{
	struct lock_op op = {.acquire = env, .timeout_ms = timeout_ms};
	int rv = lock_call(l, &op);
	if (rv == 0 && token != NULL)
		*token = op.token;
	return rv;
}

RAFTLOCK_API int raftlock_lock_release(raftlock_lock *l, uint32_t *remaining)
{
	if (l == NULL)
		return RAFTLOCK_EINVAL;
	struct lock_op op = {0};
	int rv = lock_call(l, &op);
	if (rv == 0 && remaining != NULL)
		*remaining = op.left;
	return rv;
}

RAFTLOCK_API int raftlock_lock_try(raftlock_lock *l, uint64_t *token)
{
	return raftlock_lock_acquire(l, RAFTLOCK_EXCLUSIVE, 1, 0, token);
}

/* ------------------------------------------------------------ elections -- */

RAFTLOCK_API int raftlock_lock_set_value(raftlock_lock *l, const char *value)
{
	if (l == NULL)
		return RAFTLOCK_EINVAL;
	struct transport *t = l->session->t;
	if (value != NULL && strlen(value) > RAFTLOCK_VALUE_MAX)
		return errmsg_set(t, RAFTLOCK_EINVAL, NULL, "'%s': a value of at most %d bytes",
				  l->name, RAFTLOCK_VALUE_MAX);
	char *copy = NULL;
	if (value != NULL && value[0] != '\0' && (copy = strdup(value)) == NULL)
		return errmsg_set(t, RAFTLOCK_ENOMEM, NULL, "'%s': value", l->name);
	pthread_mutex_lock(&t->mu);
	free(l->value);
	l->value = copy;
	pthread_mutex_unlock(&t->mu);
	return 0;
}

/* Sends the PROCLAIM of value on l's grant (t->mu held, a call of its
 * session begun) and waits up to timeout_ms: its status. */
static int lock_send_proclaim(raftlock_lock *l, const char *value, unsigned timeout_ms)
{
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__ProclaimRequest req = RAFTLOCK__PROCLAIM_REQUEST__INIT;
	Raftlock__Proclaim pr = RAFTLOCK__PROCLAIM__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_PROCLAIM;
	env.proclaim = &req;
	req.proclaim = &pr;
	pr.name = l->name;
	pr.owner = l->owner;
	pr.token = l->token;
	pr.value = (char *)value;
	Raftlock__Envelope *reply = NULL;
	const Raftlock__Result *res = NULL;
	int rv = lock_send(l, SESSION_REQ(&env), timeout_ms, &reply, &res);
	if (rv == 0) {
		rv = res->status;
		raftlock__envelope__free_unpacked(reply, NULL);
	}
	return rv;
}

int lock_proclaim(raftlock_lock *l, const char *value)
{
	struct transport *t = l->session->t;
	if (strlen(value) > RAFTLOCK_VALUE_MAX)
		return errmsg_set(t, RAFTLOCK_EINVAL, NULL,
				  "proclaim '%s': a value of at most %d bytes", l->name,
				  RAFTLOCK_VALUE_MAX);
	char *copy = strdup(value); /* later grants publish it too */
	if (copy == NULL)
		return errmsg_set(t, RAFTLOCK_ENOMEM, NULL, "proclaim '%s'", l->name);
	pthread_mutex_lock(&t->mu);
	int rv = session_call_begin(l->session);
	if (rv == 0) {
		/* one request timeout in all, after the handle's earlier
		 * requests still being sent (ESTATE, nothing sent, if they do
		 * not settle): a proclaim whose outcome was unknown must not
		 * publish its value over this one */
		uint64_t deadline = transport_mono_ms(t) + t->request_timeout_ms;
		rv = lock_wait_orphans(l, deadline);
		if (rv == 0 && l->token == 0)
			rv = RAFTLOCK_ENOTHOLDER;
		if (rv == 0) {
			uint64_t now = transport_mono_ms(t);
			rv = lock_send_proclaim(l, value,
						deadline > now ? (unsigned)(deadline - now) : 1);
		}
		if (rv == 0) {
			free(l->value);
			l->value = copy;
			copy = NULL;
		}
		session_call_end(l->session);
	}
	if (rv != 0)
		errmsg_set(t, rv, NULL, "proclaim '%s'", l->name);
	pthread_mutex_unlock(&t->mu);
	free(copy);
	return rv;
}

/* ------------------------------------------------------- asynchronous -- */

struct lock_async {
	struct transport_deferred d; /* first: the deferred callback is the op */
	raftlock_lock *l;
	raftlock_lock_cb cb;
	void *arg;
	bool acquire;
	bool wait;           /* an acquire queued on the server (l->waiting) */
	struct request *req; /* while it waits */
	int ended;           /* ECANCELED or ESESSION: lock_end_waits ended it */
	uint64_t seq;
	struct lock_outcome out;
};

/* The I/O thread, t->mu held, the batch of answers dispatched: a grant is
 * taken in for the callback (lock_take_grant). */
static void lock_async_settle(struct transport_deferred *d)
{
	struct lock_async *op = (struct lock_async *)d;
	if (op->acquire && op->out.status == 0)
		lock_settle_grant(op->l, &op->out);
}

/* The I/O thread, without t->mu: the application's callback. The call of
 * the session ends after it, so that a close waits for it. */
static void lock_async_callback(struct transport_deferred *d)
{
	struct lock_async *op = (struct lock_async *)d;
	const struct lock_outcome *o = &op->out;
	raftlock_session *s = op->l->session; /* the callback may free the handle */
	struct transport *t = s->t;
	if (o->status != 0) {
		/* the callback reads its message with raftlock_errmsg(), as
		 * the caller of a blocking call does; a note left on this
		 * thread by another request is not this call's */
		int stale;
		char none[1];
		errmsg_take_note(&stale, none, sizeof none);
		errmsg_set(t, o->status, o->note_code == o->status ? o->note : NULL, "%s '%s'",
			   op->acquire ? "acquire" : "release", op->l->name);
	}
	op->cb(op->l, o->status, o->value, op->arg);
	pthread_mutex_lock(&t->mu);
	session_call_end(s);
	pthread_mutex_unlock(&t->mu);
	free(op);
}

/* The I/O thread, t->mu held: the reply came (err 0), or the deadline
 * passed (err: what a blocking call would report). */
static void lock_async_done(struct transport *t, struct request *req, int err)
{
	struct lock_async *op = req->op;
	raftlock_lock *l = op->l;
	req->on_done = NULL;
	if (op->wait)
		l->waiting = NULL;
	lock_outcome_end(l, req, op->seq, op->acquire, op->wait, err, op->ended, &op->out);
	transport_defer(t, &op->d);
}

void lock_revoked(raftlock_session *s, uint64_t owner, const char *name, uint64_t token)
{
	struct raftlock_lock *l;
	list_each_entry (l, &s->attached, struct raftlock_lock, link) {
		if (l->owner != owner)
			continue;
		if (l->token == token) {
			l->token = 0;
			l->count = 0;
		}
		/* a blocking acquire woken by that grant (or the cancel that
		 * answers it) takes it in only after this: it must not hold it */
		if (token > l->revoked && strcmp(l->name, name) == 0)
			l->revoked = token;
	}
}

void lock_end_waits(raftlock_session *s)
{
	int err = s->closing ? RAFTLOCK_ECANCELED : RAFTLOCK_ESESSION;
	struct raftlock_lock *l;
	list_each_entry (l, &s->attached, struct raftlock_lock, link) {
		struct lock_async *op = l->waiting;
		if (op != NULL && op->ended == 0) {
			op->ended = err;
			/* the I/O thread may be walking its requests: it ends
			 * this one itself */
			transport_expire_now(s->t, op->req);
		}
	}
}

/* The arguments of an asynchronous call (what: its name): 0, or
 * RAFTLOCK_EINVAL for a NULL handle or callback. */
static int lock_check_async(const raftlock_lock *l, raftlock_lock_cb cb, const char *what)
{
	if (l == NULL)
		return RAFTLOCK_EINVAL;
	if (cb == NULL)
		return errmsg_set(l->session->t, RAFTLOCK_EINVAL, "no callback", "%s '%s'", what,
				  l->name);
	return 0;
}

/* Submits an asynchronous request of l; sr.wait: an acquire that waits
 * up to timeout_ms (negative: without end). */
static int lock_async_submit(raftlock_lock *l, struct session_req sr, bool acquire, int timeout_ms,
			     raftlock_lock_cb cb, void *arg)
{
	raftlock_session *s = l->session;
	struct transport *t = s->t;
	const char *what = sr.wait ? "acquire" : acquire ? "try-lock" : "release";
	struct lock_async *op = calloc(1, sizeof *op);
	if (op == NULL)
		return errmsg_set(t, RAFTLOCK_ENOMEM, NULL, "%s '%s'", what, l->name);
	*op = (struct lock_async){.d.settle = lock_async_settle,
				  .d.fn = lock_async_callback,
				  .l = l,
				  .cb = cb,
				  .arg = arg,
				  .acquire = acquire,
				  .wait = sr.wait};
	struct request *req;
	pthread_mutex_lock(&t->mu);
	int rv = session_call_begin(s);
	if (rv == 0) {
		/* an earlier request of the handle is still being sent: this
		 * one must not overtake it, and an event loop cannot wait */
		rv = session_has_orphans(s, l->owner, true) && !s->lost ? RAFTLOCK_ESTATE : 0;
		if (rv == 0 && sr.wait && l->waiting != NULL)
			rv = RAFTLOCK_ESTATE; /* one wait per handle */
		if (rv == 0) {
			lock_attach_value(l, sr.env);
			rv = session_mutate_submit(s, &sr, &req);
		}
		if (rv == 0) {
			op->seq = req->seq;
			/* a wait ends by the server's deadline; past it and a
			 * request timeout, the outcome is unknown (the sum
			 * saturates: a request timeout may be near UINT_MAX) */
			uint64_t give_up = (uint64_t)timeout_ms + t->request_timeout_ms;
			transport_on_done(t, req, lock_async_done, op,
					  timeout_ms <= 0      ? 0
					  : give_up > UINT_MAX ? UINT_MAX
							       : (unsigned)give_up);
			if (sr.wait) {
				if (timeout_ms < 0)
					req->deadline = UINT64_MAX;
				op->req = req;
				l->waiting = op;
			}
		} else {
			session_call_end(s);
		}
	}
	if (rv != 0)
		errmsg_set(t, rv, NULL, "%s '%s'", what, l->name);
	pthread_mutex_unlock(&t->mu);
	if (rv != 0)
		free(op);
	return rv;
}

RAFTLOCK_API int raftlock_lock_try_async(raftlock_lock *l, raftlock_lock_cb cb, void *arg)
{
	int rv = lock_check_async(l, cb, "try-lock");
	if (rv != 0)
		return rv;
	struct acquire_msg m;
	acquire_msg_init(&m, l, RAFTLOCK_EXCLUSIVE, 1, 0);
	return lock_async_submit(l, SESSION_REQ(&m.env), true, 0, cb, arg);
}

RAFTLOCK_API int raftlock_lock_acquire_async(raftlock_lock *l, enum raftlock_mode mode,
					     uint32_t permits, int timeout_ms, raftlock_lock_cb cb,
					     void *arg)
{
	int rv = lock_check_async(l, cb, "acquire");
	if (rv != 0)
		return rv;
	if (mode != RAFTLOCK_EXCLUSIVE && mode != RAFTLOCK_SHARED)
		return errmsg_set(l->session->t, RAFTLOCK_EINVAL, NULL,
				  "acquire '%s': unknown mode %d", l->name, mode);
	struct acquire_msg m;
	acquire_msg_init(&m, l, mode, permits, timeout_ms);
	return lock_acquire_env_async(l, &m.env, timeout_ms, cb, arg);
}

int lock_acquire_env_async(raftlock_lock *l, Raftlock__Envelope *env, int timeout_ms,
			   raftlock_lock_cb cb, void *arg)
{
	struct session_req sr = SESSION_REQ(env);
	sr.wait = timeout_ms != 0;
	return lock_async_submit(l, sr, true, timeout_ms, cb, arg);
}

RAFTLOCK_API int raftlock_lock_release_async(raftlock_lock *l, raftlock_lock_cb cb, void *arg)
{
	int rv = lock_check_async(l, cb, "release");
	if (rv != 0)
		return rv;
	struct lock_release_msg m;
	lock_release_msg_init(&m, l->name, l->owner);
	return lock_async_submit(l, SESSION_REQ(&m.env), false, 0, cb, arg);
}
