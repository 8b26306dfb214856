/* keepalive.c: see keepalive.h. */
#include "keepalive.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "session.h"

#define KEEPALIVE_IDLE_WAKE_MS 1000
/* Keepalives in flight at once: a slow answer still counts while the next
 * one is already out. */
#define KEEPALIVE_SLOTS 2
/* A healthy leader answers within milliseconds (one batched commit). */
#define KEEPALIVE_SUSPECT_MIN_MS 300

struct keepalive {
	struct request *req; /* NULL: a free slot */
	uint64_t *ids;       /* the sessions the request names, in order */
	size_t n_ids;
	uint64_t sent_at;    /* CLOCK_MONOTONIC */
	uint64_t suspect_at; /* CLOCK_MONOTONIC: unanswered, try elsewhere */
	bool suspected;
};

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
	if (resp->status != 0 || resp->payload_case != RAFTLOCK__RESPONSE__PAYLOAD_KEEPALIVE)
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
		/* from the first time it went out: a lease renewed by it was
		 * renewed after that */
		uint64_t v = session_validity_ms(ka->req->first_sent_boot, s->ttl_ms);
		if (v > s->valid_until)
			s->valid_until = v;
	}
}

static void keepalive_send(raftlock_client *c, struct keepalive *ka, unsigned interval)
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
	if (client_submit(c, &env, false, &ka->req) != 0) {
		free(ids);
		return;
	}
	client_watch(c, ka->req);
	ka->ids = ids;
	ka->n_ids = n;
	ka->sent_at = clock_mono_ms();
	ka->suspect_at =
		ka->sent_at +
		(interval / 2 > KEEPALIVE_SUSPECT_MIN_MS ? interval / 2 : KEEPALIVE_SUSPECT_MIN_MS);
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
static uint64_t keepalive_wake_at(raftlock_client *c, struct keepalive *ka, unsigned interval)
{
	uint64_t now_m = clock_mono_ms();
	uint64_t now_b = clock_boot_ms();
	uint64_t at = now_m + KEEPALIVE_IDLE_WAKE_MS;
	for (int i = 0; i < KEEPALIVE_SLOTS; i++)
		if (ka[i].req != NULL && !ka[i].suspected && ka[i].suspect_at < at)
			at = ka[i].suspect_at;
	if (interval != 0 && c->ka_next < at)
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

/* A slot for the next keepalive: a free one, else the oldest is dropped. */
static struct keepalive *keepalive_slot(raftlock_client *c, struct keepalive *ka)
{
	struct keepalive *oldest = &ka[0];
	for (int i = 0; i < KEEPALIVE_SLOTS; i++) {
		if (ka[i].req == NULL)
			return &ka[i];
		if (ka[i].sent_at < oldest->sent_at)
			oldest = &ka[i];
	}
	keepalive_end(c, oldest);
	return oldest;
}

/* Applies answered keepalives; leaves the node of one unanswered too long. */
static void keepalive_collect(raftlock_client *c, struct keepalive *ka)
{
	uint64_t now = clock_mono_ms();
	for (int i = 0; i < KEEPALIVE_SLOTS; i++) {
		if (ka[i].req == NULL)
			continue;
		if (ka[i].req->done) {
			keepalive_apply(c, &ka[i]);
			keepalive_end(c, &ka[i]);
		} else if (!ka[i].suspected && now >= ka[i].suspect_at) {
			/* paused, cut off or without a quorum: the request
			 * goes to another node */
			client_suspect(c, ka[i].req);
			ka[i].suspected = true;
		}
	}
}

static void *keepalive_main(void *arg)
{
	raftlock_client *c = arg;
	struct keepalive ka[KEEPALIVE_SLOTS];
	memset(ka, 0, sizeof ka);
	pthread_mutex_lock(&c->mu);
	while (!c->ka_stop) {
		keepalive_collect(c, ka);
		uint64_t now_b = clock_boot_ms();
		for (raftlock_session *s = c->sessions; s != NULL; s = s->next) {
			if (!s->lost && now_b >= s->valid_until)
				session_mark_lost(s, RAFTLOCK_ETIMEDOUT);
			session_orphans_settle(s);
		}
		if (keepalive_fire_one(c))
			continue;
		unsigned interval = keepalive_interval(c);
		uint64_t now_m = clock_mono_ms();
		if (interval != 0 && now_m >= c->ka_next) {
			c->ka_next = now_m + interval;
			keepalive_send(c, keepalive_slot(c, ka), interval);
		}
		uint64_t at = keepalive_wake_at(c, ka, interval);
		if (at > clock_mono_ms()) {
			struct timespec ts = clock_mono_deadline(at);
			pthread_cond_timedwait(&c->cond, &c->mu, &ts);
		}
	}
	for (int i = 0; i < KEEPALIVE_SLOTS; i++)
		keepalive_end(c, &ka[i]);
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int keepalive_start(raftlock_client *c)
{
	if (pthread_create(&c->ka_thread, NULL, keepalive_main, c) != 0)
		return RAFTLOCK_EINTERNAL;
	return 0;
}

void keepalive_stop(raftlock_client *c)
{
	pthread_mutex_lock(&c->mu);
	c->ka_stop = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->ka_thread, NULL);
}
