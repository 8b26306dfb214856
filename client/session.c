/* session.c: see session.h. */
#include "session.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "errmsg.h"
#include "lock.h"

#define SESSION_TTL_DEFAULT_MS 10000
#define KEEPALIVE_IDLE_WAKE_MS 1000

uint64_t session_validity_ms(uint64_t sent_ms, unsigned ttl_ms)
{
	uint64_t drift = ((uint64_t)ttl_ms * RAFTLOCK_CLOCK_RATE_PPM + 999999) /
			 1000000;
	uint64_t margin = drift + RAFTLOCK_LEASE_MARGIN_MS;
	if (margin >= ttl_ms)
		return sent_ms;
	return sent_ms + ttl_ms - margin;
}

/* ------------------------------------------------------ sequence numbers */

int session_seq_begin(raftlock_session *s, uint64_t *seq, uint64_t *ack_below)
{
	if (s->lost)
		return RAFTLOCK_ESESSION;
	if (s->n_inflight == s->cap_inflight) {
		size_t cap = s->cap_inflight ? s->cap_inflight * 2 : 8;
		uint64_t *v = realloc(s->inflight, cap * sizeof *v);
		if (v == NULL)
			return RAFTLOCK_ENOMEM;
		s->inflight = v;
		s->cap_inflight = cap;
	}
	uint64_t n = s->next_seq++;
	uint64_t low = n;
	for (size_t i = 0; i < s->n_inflight; i++)
		if (s->inflight[i] < low)
			low = s->inflight[i];
	s->inflight[s->n_inflight++] = n;
	*seq = n;
	*ack_below = low;
	return 0;
}

void session_seq_end(raftlock_session *s, uint64_t seq)
{
	for (size_t i = 0; i < s->n_inflight; i++) {
		if (s->inflight[i] == seq) {
			s->inflight[i] = s->inflight[--s->n_inflight];
			return;
		}
	}
}

void session_mark_lost(raftlock_session *s, int reason)
{
	if (s->lost)
		return;
	s->lost = true;
	s->lost_reason = reason;
	s->valid_until = 0;
	s->cb_pending = s->on_lost != NULL;
	pthread_cond_broadcast(&s->client->cond);
}

int session_reply_result(const Raftlock__Envelope *reply,
			 const Raftlock__Result **result)
{
	const Raftlock__Response *resp = reply->response;
	if (resp->status != 0)
		return resp->status;
	if (resp->payload_case != RAFTLOCK__RESPONSE__PAYLOAD_RESULT)
		return RAFTLOCK_EPROTO;
	*result = resp->result;
	return 0;
}

/* Whether a response status tells that the request was not executed (so
 * its seq is settled), as opposed to an outcome nobody knows. */
static bool session_status_settles(int status)
{
	return status != RAFTLOCK_ETIMEDOUT && status != RAFTLOCK_ECONNECTION &&
	       status != RAFTLOCK_EUNAVAILABLE && status != RAFTLOCK_EUNKNOWN &&
	       status != RAFTLOCK_ENOTLEADER && status != RAFTLOCK_ESHUTDOWN;
}

int session_mutate(raftlock_session *s, Raftlock__Envelope *env,
		   uint64_t *f_session, uint64_t *f_seq, uint64_t *f_ack_below,
		   Raftlock__Envelope **reply, const Raftlock__Result **result)
{
	Raftlock__Envelope *r = NULL;
	const Raftlock__Result *res = NULL;
	int rv = session_seq_begin(s, f_seq, f_ack_below);
	if (rv != 0)
		return rv;
	*f_session = s->id;
	uint64_t seq = *f_seq;
	rv = client_call(s->client, env, 0, &r);
	if (rv == 0)
		rv = session_reply_result(r, &res);
	if (rv == 0 || session_status_settles(rv))
		session_seq_end(s, seq);
	if (rv != 0) {
		if (r != NULL)
			raftlock__envelope__free_unpacked(r, NULL);
		return rv;
	}
	if (res->status == RAFTLOCK_ESESSION)
		session_mark_lost(s, RAFTLOCK_ESESSION);
	*reply = r;
	*result = res;
	return 0;
}

/* ----------------------------------------------------------- open/close */

static void session_unlink(raftlock_session *s)
{
	raftlock_client *c = s->client;
	if (s->prev != NULL)
		s->prev->next = s->next;
	else
		c->sessions = s->next;
	if (s->next != NULL)
		s->next->prev = s->prev;
}

RAFTLOCK_API int raftlock_session_open(raftlock_client *c,
				       const struct raftlock_session_options *opts,
				       raftlock_session **out)
{
	unsigned ttl = opts != NULL && opts->ttl_ms ? opts->ttl_ms
						     : SESSION_TTL_DEFAULT_MS;
	if (c == NULL || out == NULL)
		return RAFTLOCK_EINVAL;
	if (ttl < RAFTLOCK_TTL_MIN_MS || ttl > RAFTLOCK_TTL_MAX_MS)
		return errmsg_set(c, RAFTLOCK_EINVAL, NULL,
				  "open session: ttl %u ms outside %u..%u", ttl,
				  RAFTLOCK_TTL_MIN_MS, RAFTLOCK_TTL_MAX_MS);
	raftlock_session *s = calloc(1, sizeof *s);
	if (s == NULL)
		return errmsg_set(c, RAFTLOCK_ENOMEM, NULL, "open session");

	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__OpenSessionRequest req = RAFTLOCK__OPEN_SESSION_REQUEST__INIT;
	Raftlock__Owner owner = RAFTLOCK__OWNER__INIT;
	Raftlock__Envelope *reply = NULL;
	const Raftlock__Result *res = NULL;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
	env.open_session = &req;
	req.ttl_ms = ttl;
	req.owner = &owner;
	owner.client_name = c->client_name;
	owner.host = c->host;
	owner.pid = (uint32_t)getpid();

	pthread_mutex_lock(&c->mu);
	req.nonce = client_random(c);
	/* The lease starts no earlier than the first send of the request. */
	uint64_t sent = clock_boot_ms();
	int rv = client_call(c, &env, 0, &reply);
	if (rv == 0)
		rv = session_reply_result(reply, &res);
	if (rv == 0)
		rv = res->status;
	if (rv == 0 && res->session == 0)
		rv = RAFTLOCK_EPROTO;
	if (rv != 0) {
		errmsg_set(c, rv,
			   reply != NULL ? reply->response->message : NULL,
			   "open session (ttl %u ms)", ttl);
		goto err;
	}
	s->client = c;
	s->id = res->session;
	s->ttl_ms = res->ttl_ms ? res->ttl_ms : ttl;
	s->valid_until = session_validity_ms(sent, s->ttl_ms);
	s->next_seq = 1;
	s->on_lost = opts != NULL ? opts->on_lost : NULL;
	s->on_lost_arg = opts != NULL ? opts->on_lost_arg : NULL;
	s->next = c->sessions;
	if (c->sessions != NULL)
		c->sessions->prev = s;
	c->sessions = s;
	uint64_t next = clock_mono_ms() + s->ttl_ms / 3;
	if (c->ka_next == 0 || s->next == NULL || next < c->ka_next)
		c->ka_next = next;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->mu);
	raftlock__envelope__free_unpacked(reply, NULL);
	*out = s;
	return 0;

err:
	pthread_mutex_unlock(&c->mu);
	if (reply != NULL)
		raftlock__envelope__free_unpacked(reply, NULL);
	free(s);
	return rv;
}

/* Sends CloseSession for s (not lost) with c->mu held. */
static int session_send_close(raftlock_session *s)
{
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__CloseSessionRequest req = RAFTLOCK__CLOSE_SESSION_REQUEST__INIT;
	Raftlock__Envelope *reply = NULL;
	const Raftlock__Result *res = NULL;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION;
	env.close_session = &req;
	int rv = session_mutate(s, &env, &req.session, &req.seq, &req.ack_below,
				&reply, &res);
	if (rv == 0) {
		rv = res->status;
		raftlock__envelope__free_unpacked(reply, NULL);
	}
	return rv;
}

static int session_close_locked(raftlock_session *s)
{
	raftlock_client *c = s->client;
	/* Its on_lost may be running on the keepalive thread right now. */
	while (c->cb_session == s && !pthread_equal(pthread_self(), c->ka_thread))
		pthread_cond_wait(&c->cond, &c->mu);
	int rv = 0;
	if (!s->lost) {
		rv = session_send_close(s);
		if (rv != 0)
			errmsg_set(c, rv, NULL, "close session %llu",
				   (unsigned long long)s->id);
		s->lost = true;
		s->valid_until = 0;
	}
	session_unlink(s);
	lock_free_all(s);
	pthread_cond_broadcast(&c->cond);
	free(s->inflight);
	free(s);
	return rv;
}

RAFTLOCK_API int raftlock_session_close(raftlock_session *s)
{
	if (s == NULL)
		return 0;
	raftlock_client *c = s->client;
	pthread_mutex_lock(&c->mu);
	int rv = session_close_locked(s);
	pthread_mutex_unlock(&c->mu);
	return rv;
}

void session_close_all(raftlock_client *c)
{
	pthread_mutex_lock(&c->mu);
	unsigned saved = c->request_timeout_ms;
	uint64_t deadline = clock_mono_ms() + saved;
	while (c->sessions != NULL) {
		uint64_t now = clock_mono_ms();
		/* Bound the whole close by one request timeout. */
		c->request_timeout_ms = now + 1 < deadline
						? (unsigned)(deadline - now)
						: 1;
		if (now >= deadline)
			c->sessions->lost = true;
		session_close_locked(c->sessions);
	}
	c->request_timeout_ms = saved;
	pthread_mutex_unlock(&c->mu);
}

/* -------------------------------------------------------------- access */

RAFTLOCK_API uint64_t raftlock_session_id(const raftlock_session *s)
{
	return s != NULL ? s->id : 0;
}

RAFTLOCK_API uint64_t raftlock_session_valid_until(const raftlock_session *s)
{
	if (s == NULL)
		return 0;
	pthread_mutex_lock(&s->client->mu);
	uint64_t v = s->valid_until;
	pthread_mutex_unlock(&s->client->mu);
	return v;
}

RAFTLOCK_API bool raftlock_session_valid(const raftlock_session *s)
{
	return raftlock_now_ms() < raftlock_session_valid_until(s);
}

/* ---------------------------------------------------------- keepalives */

struct keepalive {
	struct request *req;
	uint64_t *ids; /* the sessions the request names, in order */
	size_t n_ids;
	uint64_t sent_boot;
	uint64_t deadline; /* CLOCK_MONOTONIC: give up and send afresh */
};

static raftlock_session *session_find(raftlock_client *c, uint64_t id)
{
	for (raftlock_session *s = c->sessions; s != NULL; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

static unsigned keepalive_interval(raftlock_client *c)
{
	unsigned iv = 0;
	for (raftlock_session *s = c->sessions; s != NULL; s = s->next)
		if (!s->lost && (iv == 0 || s->ttl_ms / 3 < iv))
			iv = s->ttl_ms / 3;
	return iv;
}

static void keepalive_end(raftlock_client *c, struct keepalive *ka)
{
	if (ka->req != NULL)
		client_take(c, ka->req, NULL);
	free(ka->ids);
	memset(ka, 0, sizeof *ka);
}

/* Applies an answered keepalive to the sessions it names. */
static void keepalive_apply(raftlock_client *c, struct keepalive *ka)
{
	const Raftlock__Envelope *reply = ka->req->reply;
	const Raftlock__Response *resp = reply->response;
	if (resp->status != 0 ||
	    resp->payload_case != RAFTLOCK__RESPONSE__PAYLOAD_KEEPALIVE)
		return;
	const Raftlock__KeepAliveResult *kr = resp->keepalive;
	for (size_t i = 0; i < ka->n_ids && i < kr->n_statuses; i++) {
		raftlock_session *s = session_find(c, ka->ids[i]);
		if (s == NULL || s->lost)
			continue;
		if (kr->statuses[i] == RAFTLOCK_ESESSION) {
			session_mark_lost(s, RAFTLOCK_ESESSION);
			continue;
		}
		if (kr->statuses[i] != 0)
			continue;
		/* An acknowledgement that arrives after validity ran out is
		 * late: the session is lost and stays lost. */
		if (ka->req->done_boot >= s->valid_until) {
			session_mark_lost(s, RAFTLOCK_ETIMEDOUT);
			continue;
		}
		if (i < kr->n_ttl_ms && kr->ttl_ms[i] != 0)
			s->ttl_ms = kr->ttl_ms[i];
		uint64_t v = session_validity_ms(ka->sent_boot, s->ttl_ms);
		if (v > s->valid_until)
			s->valid_until = v;
	}
}

static void keepalive_send(raftlock_client *c, struct keepalive *ka,
			   unsigned interval)
{
	size_t n = 0;
	for (raftlock_session *s = c->sessions; s != NULL; s = s->next)
		n += !s->lost;
	uint64_t *ids = calloc(n, sizeof *ids);
	if (ids == NULL)
		return;
	n = 0;
	for (raftlock_session *s = c->sessions; s != NULL; s = s->next)
		if (!s->lost)
			ids[n++] = s->id;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__KeepAliveRequest req = RAFTLOCK__KEEP_ALIVE_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_KEEPALIVE;
	env.keepalive = &req;
	req.sessions = ids;
	req.n_sessions = n;
	ka->sent_boot = clock_boot_ms();
	if (client_submit(c, &env, false, &ka->req) != 0) {
		free(ids);
		return;
	}
	ka->ids = ids;
	ka->n_ids = n;
	ka->deadline = clock_mono_ms() + interval;
}

/* Runs one due on_lost callback without the lock. Returns true if it did. */
static bool keepalive_fire_one(raftlock_client *c)
{
	for (raftlock_session *s = c->sessions; s != NULL; s = s->next) {
		if (!s->cb_pending)
			continue;
		s->cb_pending = false;
		c->cb_session = s;
		pthread_mutex_unlock(&c->mu);
		s->on_lost(s, s->lost_reason, s->on_lost_arg);
		pthread_mutex_lock(&c->mu);
		c->cb_session = NULL;
		pthread_cond_broadcast(&c->cond);
		return true;
	}
	return false;
}

/* The CLOCK_MONOTONIC time at which the keepalive thread must look again. */
static uint64_t keepalive_wake_at(raftlock_client *c, struct keepalive *ka,
				  unsigned interval)
{
	uint64_t now_m = clock_mono_ms();
	uint64_t now_b = clock_boot_ms();
	uint64_t at = now_m + KEEPALIVE_IDLE_WAKE_MS;
	if (ka->req != NULL && ka->deadline < at)
		at = ka->deadline;
	if (ka->req == NULL && interval != 0 && c->ka_next < at)
		at = c->ka_next;
	for (raftlock_session *s = c->sessions; s != NULL; s = s->next) {
		if (s->lost)
			continue;
		uint64_t left = s->valid_until > now_b ? s->valid_until - now_b : 0;
		if (now_m + left < at)
			at = now_m + left;
	}
	return at;
}

static void *keepalive_main(void *arg)
{
	raftlock_client *c = arg;
	struct keepalive ka = {0};
	pthread_mutex_lock(&c->mu);
	while (!c->ka_stop) {
		if (ka.req != NULL && ka.req->done) {
			keepalive_apply(c, &ka);
			keepalive_end(c, &ka);
		} else if (ka.req != NULL && clock_mono_ms() >= ka.deadline) {
			keepalive_end(c, &ka);
		}
		uint64_t now_b = clock_boot_ms();
		for (raftlock_session *s = c->sessions; s != NULL; s = s->next)
			if (!s->lost && now_b >= s->valid_until)
				session_mark_lost(s, RAFTLOCK_ETIMEDOUT);
		if (keepalive_fire_one(c))
			continue;
		unsigned interval = keepalive_interval(c);
		uint64_t now_m = clock_mono_ms();
		if (ka.req == NULL && interval != 0 && now_m >= c->ka_next) {
			c->ka_next = now_m + interval;
			keepalive_send(c, &ka, interval);
		}
		uint64_t at = keepalive_wake_at(c, &ka, interval);
		if (at > clock_mono_ms()) {
			struct timespec ts = clock_mono_deadline(at);
			pthread_cond_timedwait(&c->cond, &c->mu, &ts);
		}
	}
	keepalive_end(c, &ka);
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int session_keepalive_start(raftlock_client *c)
{
	if (pthread_create(&c->ka_thread, NULL, keepalive_main, c) != 0)
		return RAFTLOCK_EINTERNAL;
	return 0;
}

void session_keepalive_stop(raftlock_client *c)
{
	pthread_mutex_lock(&c->mu);
	c->ka_stop = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->ka_thread, NULL);
}
