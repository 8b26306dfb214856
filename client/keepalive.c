/* keepalive.c: see keepalive.h. */
#include "keepalive.h"

#include <stdlib.h>
#include <string.h>

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
	uint8_t *secrets; /* n_ids secrets, parallel to ids, after them */
	uint64_t ids[];   /* the sessions it names, in order */
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

/* Lowers the round interval to a third of ttl_ms. */
static void keepalive_interval_at_most(struct keepalives *k, unsigned ttl_ms)
{
	if (k->interval == 0 || ttl_ms / 3 < k->interval)
		k->interval = ttl_ms / 3;
}

static void keepalive_end(struct transport *t, struct keepalive *ka)
{
	if (ka->req != NULL)
		transport_take(t, ka->req, NULL);
	free(ka);
}

/* Applies an answered keepalive to the sessions it names. */
static void keepalive_apply(struct keepalives *k, struct keepalive *ka)
{
	struct sessions *ss = k->ss;
	const Raftlock__Envelope *reply = ka->req->reply;
	const Raftlock__Response *resp = reply->response;
	if (resp->status != 0 || resp->payload_case != RAFTLOCK__RESPONSE__PAYLOAD_KEEPALIVE)
		return;
	const Raftlock__KeepAliveResult *kr = resp->keepalive;
	for (size_t i = 0; i < ka->n_ids && i < kr->n_statuses; i++) {
		raftlock_session *s = session_find(ss, ka->ids[i]);
		if (s == NULL || s->lost)
			continue;
		if (kr->statuses[i] == RAFTLOCK_ESESSION || kr->statuses[i] == RAFTLOCK_EPERM) {
			/* gone, or its secret refused for good (rule 14) */
			session_mark_lost(s, kr->statuses[i]);
			continue;
		}
		if (kr->statuses[i] != 0 || !session_renewal_counts(s, ka->req->sent_gen))
			continue;
		if (i < kr->n_ttl_ms && kr->ttl_ms[i] != 0) {
			s->ttl_ms = kr->ttl_ms[i];
			keepalive_interval_at_most(k, s->ttl_ms);
		}
		/* from the first time it went out: a lease renewed by it was
		 * renewed after that. An answer that comes after validity ran
		 * out (jeopardy) still counts: the server held the session. */
		session_renewed(s, ka->req->first_sent_boot, transport_boot_ms(ss->t));
	}
}

/* Drops the requests of rounds older than `keep_from`: their sessions are
 * named again by a later round. */
static void keepalive_drop_rounds(struct transport *t, struct keepalive_flight *f,
				  uint64_t keep_from)
{
	for (struct keepalive **pp = &f->head; *pp != NULL;) {
		struct keepalive *ka = *pp;
		if (ka->round >= keep_from) {
			pp = &ka->next;
			continue;
		}
		*pp = ka->next;
		keepalive_end(t, ka);
	}
}

/* Sends one request naming the sessions in ka->ids. False if it could not
 * be encoded or queued (its sessions wait for the next round). */
static bool keepalive_submit(struct transport *t, struct keepalive *ka)
{
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__KeepAliveRequest req = RAFTLOCK__KEEP_ALIVE_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_KEEPALIVE;
	env.keepalive = &req;
	req.sessions = ka->ids;
	req.n_sessions = ka->n_ids;
	/* Rule 14: each id with its session's secret. */
	ProtobufCBinaryData *secrets = malloc((ka->n_ids ? ka->n_ids : 1) * sizeof *secrets);
	if (secrets == NULL) {
		explicit_bzero(ka->secrets, ka->n_ids * SESSION_SECRET_LEN);
		return false;
	}
	for (size_t i = 0; i < ka->n_ids; i++)
		secrets[i] = (ProtobufCBinaryData){SESSION_SECRET_LEN,
						   ka->secrets + i * SESSION_SECRET_LEN};
	req.secrets = secrets;
	req.n_secrets = ka->n_ids;
	int rv = transport_submit(t, &env, false, &ka->req); /* encodes it */
	free(secrets);
	explicit_bzero(ka->secrets, ka->n_ids * SESSION_SECRET_LEN);
	if (rv != 0)
		return false;
	transport_watch(t, ka->req);
	return true;
}

/* Sends a round: every live session named once, in chunks. Sets the
 * interval to the next round from the sessions it counts (0: none left). */
static void keepalive_send_round(struct keepalives *k, struct keepalive_flight *f)
{
	struct sessions *ss = k->ss;
	f->round++;
	if (f->round >= KEEPALIVE_ROUNDS)
		keepalive_drop_rounds(ss->t, f, f->round - KEEPALIVE_ROUNDS + 1);
	size_t n = 0;
	k->interval = 0;
	for (raftlock_session *s = session_first(ss); s != NULL; s = session_after(ss, s)) {
		if (s->lost)
			continue;
		n++;
		keepalive_interval_at_most(k, s->ttl_ms);
	}
	raftlock_session *s = session_first(ss);
	size_t ahead = 0;
	for (size_t c = 0; c < keepalive_chunks(n); c++) {
		size_t len = keepalive_chunk_len(n, c);
		struct keepalive *ka =
			calloc(1, sizeof *ka + len * (sizeof ka->ids[0] + SESSION_SECRET_LEN));
		if (ka != NULL)
			ka->secrets = (uint8_t *)&ka->ids[len];
		for (size_t i = 0; i < len; s = session_after(ss, s)) {
			if (s->lost)
				continue;
			if (ka != NULL) {
				ka->ids[i] = s->id;
				memcpy(ka->secrets + i * SESSION_SECRET_LEN, s->secret,
				       SESSION_SECRET_LEN);
			}
			i++;
		}
		if (ka == NULL)
			continue; /* out of memory: these wait for the next round */
		ka->n_ids = len;
		ka->round = f->round;
		ahead += len;
		ka->suspect_ms = keepalive_suspect_ms(k->interval, ahead);
		if (!keepalive_submit(ss->t, ka)) {
			free(ka);
			continue;
		}
		ka->next = f->head;
		f->head = ka;
	}
}

/* Tells the application of each session's state change (on_event, then
 * on_lost for a loss) without the lock, in one walk over the sessions
 * that a callback closing sessions does not break (sessions_walk_next),
 * made only when some state changed (ss->events_due). A session being
 * closed is told nothing more. Returns true if it ran any callback. */
static bool keepalive_fire(struct sessions *ss)
{
	struct transport *t = ss->t;
	bool ran = false;
	if (!ss->events_due)
		return false;
	ss->events_due = false; /* a change during the walk sets it again */
	for (raftlock_session *s = sessions_walk_first(ss); s != NULL; s = sessions_walk_next(ss)) {
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
		/* s may be closed by its callback: on this thread only
		 * (session_close waits for the callback in any other) */
		raftlock_session_event_cb on_event = s->on_event;
		void *event_arg = s->on_event_arg, *lost_arg = s->on_lost_arg;
		ss->callback_session = s;
		ss->callback_thread = pthread_self();
		pthread_mutex_unlock(&t->mu);
		if (on_event != NULL)
			on_event(s, (enum raftlock_session_event)ev, reason, event_arg);
		if (lost != NULL)
			lost(s, reason, lost_arg);
		pthread_mutex_lock(&t->mu);
		ss->callback_session = NULL;
		pthread_cond_broadcast(&t->cond);
		ran = true;
	}
	return ran;
}

/* Whether ka went out on the current connection and may still be
 * suspected there; *at is when it will be. */
static bool keepalive_watched(struct transport *t, const struct keepalive *ka, uint64_t *at)
{
	const struct request *r = ka->req;
	if (r->done || !transport_sent_here(t, r) || ka->suspected_gen == r->sent_gen)
		return false;
	*at = r->sent_at + ka->suspect_ms;
	return true;
}

/* The transport_mono_ms time at which the keepalive thread must look again. */
static uint64_t keepalive_wake_at(struct keepalives *k, const struct keepalive_flight *f)
{
	struct transport *t = k->ss->t;
	uint64_t now_m = transport_mono_ms(t);
	uint64_t now_b = transport_boot_ms(t);
	uint64_t at = now_m + KEEPALIVE_IDLE_WAKE_MS, w;
	for (const struct keepalive *ka = f->head; ka != NULL; ka = ka->next)
		if (keepalive_watched(t, ka, &w) && w < at)
			at = w;
	if (k->interval != 0 && k->next < at)
		at = k->next;
	uint64_t due = k->ss->check_at;
	uint64_t left = due > now_b ? due - now_b : 0;
	if (now_m + left < at)
		at = now_m + left;
	return at;
}

/* Applies answered keepalives; leaves the node of one unanswered too long. */
static void keepalive_collect(struct keepalives *k, struct keepalive_flight *f)
{
	struct transport *t = k->ss->t;
	uint64_t now = transport_mono_ms(t), at;
	for (struct keepalive **pp = &f->head; *pp != NULL;) {
		struct keepalive *ka = *pp;
		if (ka->req->done) {
			keepalive_apply(k, ka);
			*pp = ka->next;
			keepalive_end(t, ka);
			continue;
		}
		if (keepalive_watched(t, ka, &at) && now >= at) {
			/* paused, cut off or without a quorum: the request
			 * goes to another node */
			transport_suspect(t, ka->req);
			ka->suspected_gen = ka->req->sent_gen;
		}
		pp = &ka->next;
	}
}

static void *keepalive_main(void *arg)
{
	struct keepalives *k = arg;
	struct sessions *ss = k->ss;
	struct transport *t = ss->t;
	struct keepalive_flight f = {0};
	pthread_mutex_lock(&t->mu);
	while (!k->stop) {
		keepalive_collect(k, &f);
		sessions_tick(ss, transport_boot_ms(t));
		if (keepalive_fire(ss))
			continue;
		uint64_t now_m = transport_mono_ms(t);
		if (ss->renew_now) {
			ss->renew_now = false; /* bound sessions lost their connection */
			k->next = now_m;
		}
		if (k->interval != 0 && now_m >= k->next) {
			keepalive_send_round(k, &f);
			k->next = now_m + k->interval;
		}
		uint64_t at = keepalive_wake_at(k, &f);
		if (at > transport_mono_ms(t)) {
			struct timespec ts = transport_deadline(t, at);
			k->epoch = t->clock_epoch;
			pthread_cond_timedwait(&t->cond, &t->mu, &ts);
		}
	}
	keepalive_drop_rounds(t, &f, UINT64_MAX);
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

/* The session hook: a new session. Wakes the thread only if this session
 * needs a keepalive sooner than planned: each wake walks every session,
 * and opening many sessions must not cost a walk each. */
static void keepalive_opened(void *arg, raftlock_session *s)
{
	struct keepalives *k = arg;
	bool alone = session_first(k->ss) == s && session_after(k->ss, s) == NULL;
	uint64_t next = transport_mono_ms(s->t) + s->ttl_ms / 3;
	keepalive_interval_at_most(k, s->ttl_ms);
	if (k->next == 0 || alone || next < k->next) {
		k->next = next;
		pthread_cond_broadcast(&s->t->cond);
	}
}

int keepalive_start(struct keepalives *k, struct sessions *ss)
{
	*k = (struct keepalives){.ss = ss};
	pthread_mutex_lock(&ss->t->mu);
	ss->opened = keepalive_opened;
	ss->opened_arg = k;
	pthread_mutex_unlock(&ss->t->mu);
	if (pthread_create(&k->thread, NULL, keepalive_main, k) != 0)
		return RAFTLOCK_EINTERNAL;
	return 0;
}

void keepalive_stop(struct keepalives *k)
{
	struct transport *t = k->ss->t;
	pthread_mutex_lock(&t->mu);
	k->stop = true;
	k->ss->opened = NULL;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->mu);
	pthread_join(k->thread, NULL);
}
