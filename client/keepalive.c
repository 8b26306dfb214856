/* keepalive.c: see keepalive.h. */
#include "keepalive.h"

#include <stdlib.h>

#include "clock.h"
#include "session.h"

#define KEEPALIVE_IDLE_WAKE_MS 1000
/* Rounds in flight at once: a slow answer still counts while the next
 * round is already out. */
#define KEEPALIVE_ROUNDS 2

_Static_assert(KEEPALIVE_CHUNK <= RAFTLOCK_KEEPALIVE_MAX, "a chunk the server refuses");

/* One request of a round. */
struct keepalive {
	struct keepalive *next;
	struct request *req;
	uint64_t round;
	unsigned suspect_ms;    /* after each send on a connection */
	uint64_t suspected_gen; /* the connection it was suspected on */
	size_t n_ids;
	uint64_t ids[]; /* the sessions it names, in order */
};

/* The requests in flight, of the current round and the one before. */
struct keepalive_flight {
	struct keepalive *head;
	uint64_t round;
};

unsigned keepalive_suspect_ms(unsigned interval_ms, size_t ids)
{
	unsigned cap =
		interval_ms > KEEPALIVE_SUSPECT_MIN_MS ? interval_ms : KEEPALIVE_SUSPECT_MIN_MS;
	unsigned base = interval_ms / 2 > KEEPALIVE_SUSPECT_MIN_MS ? interval_ms / 2
								   : KEEPALIVE_SUSPECT_MIN_MS;
	size_t extra = ids / KEEPALIVE_SUSPECT_IDS_PER_MS;
	return extra >= cap - base ? cap : base + (unsigned)extra;
}

size_t keepalive_chunks(size_t n)
{
	return (n + KEEPALIVE_CHUNK - 1) / KEEPALIVE_CHUNK;
}

size_t keepalive_chunk_len(size_t n, size_t k)
{
	size_t chunks = keepalive_chunks(n);
	return n / chunks + (k < n % chunks);
}

static unsigned keepalive_interval(raftlock_client *c)
{
	unsigned iv = 0;
	for (raftlock_session *s = session_first(c); s != NULL; s = session_after(c, s))
		if (!s->lost && (iv == 0 || s->ttl_ms / 3 < iv))
			iv = s->ttl_ms / 3;
	return iv;
}

static void keepalive_end(raftlock_client *c, struct keepalive *ka)
{
	if (ka->req != NULL)
		client_take(c, ka->req, NULL);
	free(ka);
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
		if (i < kr->n_ttl_ms && kr->ttl_ms[i] != 0)
			s->ttl_ms = kr->ttl_ms[i];
		/* from the first time it went out: a lease renewed by it was
		 * renewed after that. An answer that comes after validity ran
		 * out (jeopardy) still counts: the server held the session. */
		session_renewed(s, ka->req->first_sent_boot, clock_boot_ms());
	}
}

/* Drops the requests of rounds older than `keep_from`: their sessions are
 * named again by a later round. */
static void keepalive_drop_rounds(raftlock_client *c, struct keepalive_flight *f,
				  uint64_t keep_from)
{
	for (struct keepalive **pp = &f->head; *pp != NULL;) {
		struct keepalive *ka = *pp;
		if (ka->round >= keep_from) {
			pp = &ka->next;
			continue;
		}
		*pp = ka->next;
		keepalive_end(c, ka);
	}
}

/* Sends one request naming the sessions in ka->ids. False if it could not
 * be encoded or queued (its sessions wait for the next round). */
static bool keepalive_submit(raftlock_client *c, struct keepalive *ka)
{
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__KeepAliveRequest req = RAFTLOCK__KEEP_ALIVE_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_KEEPALIVE;
	env.keepalive = &req;
	req.sessions = ka->ids;
	req.n_sessions = ka->n_ids;
	if (client_submit(c, &env, false, &ka->req) != 0)
		return false;
	client_watch(c, ka->req);
	return true;
}

/* Sends a round: every live session named once, in chunks. */
static void keepalive_send_round(raftlock_client *c, struct keepalive_flight *f, unsigned interval)
{
	f->round++;
	if (f->round >= KEEPALIVE_ROUNDS)
		keepalive_drop_rounds(c, f, f->round - KEEPALIVE_ROUNDS + 1);
	size_t n = 0;
	for (raftlock_session *s = session_first(c); s != NULL; s = session_after(c, s))
		n += !s->lost;
	raftlock_session *s = session_first(c);
	size_t ahead = 0;
	for (size_t k = 0; k < keepalive_chunks(n); k++) {
		size_t len = keepalive_chunk_len(n, k);
		struct keepalive *ka = calloc(1, sizeof *ka + len * sizeof ka->ids[0]);
		for (size_t i = 0; i < len; s = session_after(c, s)) {
			if (s->lost)
				continue;
			if (ka != NULL)
				ka->ids[i] = s->id;
			i++;
		}
		if (ka == NULL)
			continue; /* out of memory: these wait for the next round */
		ka->n_ids = len;
		ka->round = f->round;
		ahead += len;
		ka->suspect_ms = keepalive_suspect_ms(interval, ahead);
		if (!keepalive_submit(c, ka)) {
			free(ka);
			continue;
		}
		ka->next = f->head;
		f->head = ka;
	}
}

/* Tells the application of each session's state change (on_event, then
 * on_lost for a loss) without the lock, in one walk over the sessions: a
 * callback may close sessions, and closing the one the walk goes to next
 * moves the walk on (session_unlink). A session being closed is told
 * nothing more. Returns true if it ran any callback. */
static bool keepalive_fire(raftlock_client *c)
{
	bool ran = false;
	for (raftlock_session *s = session_first(c); s != NULL; s = c->cb_next) {
		c->cb_next = session_after(c, s);
		int ev = s->closing ? 0 : session_event_due(s);
		if (ev == 0)
			continue;
		s->told = ev;
		raftlock_session_lost_cb lost = ev == RAFTLOCK_SESSION_LOST ? s->on_lost : NULL;
		if (s->on_event == NULL && lost == NULL)
			continue;
		int reason = ev == RAFTLOCK_SESSION_LOST       ? s->lost_reason
			     : ev == RAFTLOCK_SESSION_JEOPARDY ? RAFTLOCK_ETIMEDOUT
							       : 0;
		c->cb_session = s;
		pthread_mutex_unlock(&c->mu);
		if (s->on_event != NULL)
			s->on_event(s, (enum raftlock_session_event)ev, reason, s->on_event_arg);
		if (lost != NULL)
			lost(s, reason, s->on_lost_arg);
		pthread_mutex_lock(&c->mu);
		c->cb_session = NULL;
		pthread_cond_broadcast(&c->cond);
		ran = true;
	}
	c->cb_next = NULL;
	return ran;
}

/* Whether ka went out on the current connection and may still be
 * suspected there; *at is when it will be. */
static bool keepalive_watched(raftlock_client *c, const struct keepalive *ka, uint64_t *at)
{
	const struct request *r = ka->req;
	if (r->done || !r->ever_sent || r->sent_gen != c->conn_gen ||
	    ka->suspected_gen == r->sent_gen)
		return false;
	*at = r->sent_at + ka->suspect_ms;
	return true;
}

/* The CLOCK_MONOTONIC time at which the keepalive thread must look again. */
static uint64_t keepalive_wake_at(raftlock_client *c, const struct keepalive_flight *f,
				  unsigned interval)
{
	uint64_t now_m = clock_mono_ms();
	uint64_t now_b = clock_boot_ms();
	uint64_t at = now_m + KEEPALIVE_IDLE_WAKE_MS, t;
	for (const struct keepalive *ka = f->head; ka != NULL; ka = ka->next)
		if (keepalive_watched(c, ka, &t) && t < at)
			at = t;
	if (interval != 0 && c->ka_next < at)
		at = c->ka_next;
	for (raftlock_session *s = session_first(c); s != NULL; s = session_after(c, s)) {
		uint64_t due = session_check_at(s);
		uint64_t left = due > now_b ? due - now_b : 0;
		if (now_m + left < at)
			at = now_m + left;
	}
	return at;
}

/* Applies answered keepalives; leaves the node of one unanswered too long. */
static void keepalive_collect(raftlock_client *c, struct keepalive_flight *f)
{
	uint64_t now = clock_mono_ms(), at;
	for (struct keepalive **pp = &f->head; *pp != NULL;) {
		struct keepalive *ka = *pp;
		if (ka->req->done) {
			keepalive_apply(c, ka);
			*pp = ka->next;
			keepalive_end(c, ka);
			continue;
		}
		if (keepalive_watched(c, ka, &at) && now >= at) {
			/* paused, cut off or without a quorum: the request
			 * goes to another node */
			client_suspect(c, ka->req);
			ka->suspected_gen = ka->req->sent_gen;
		}
		pp = &ka->next;
	}
}

static void *keepalive_main(void *arg)
{
	raftlock_client *c = arg;
	struct keepalive_flight f = {0};
	pthread_mutex_lock(&c->mu);
	while (!c->ka_stop) {
		keepalive_collect(c, &f);
		uint64_t now_b = clock_boot_ms();
		for (raftlock_session *s = session_first(c); s != NULL; s = session_after(c, s)) {
			session_tick(s, now_b);
			session_orphans_settle(s);
		}
		if (keepalive_fire(c))
			continue;
		unsigned interval = keepalive_interval(c);
		uint64_t now_m = clock_mono_ms();
		if (interval != 0 && now_m >= c->ka_next) {
			c->ka_next = now_m + interval;
			keepalive_send_round(c, &f, interval);
		}
		uint64_t at = keepalive_wake_at(c, &f, interval);
		if (at > clock_mono_ms()) {
			struct timespec ts = clock_mono_deadline(at);
			pthread_cond_timedwait(&c->cond, &c->mu, &ts);
		}
	}
	keepalive_drop_rounds(c, &f, UINT64_MAX);
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
