/* watch.c: see watch.h. */
#include "watch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "errmsg.h"

struct raftlock_watch_handle {
	struct transport *t;
	raftlock_watch_cb cb;
	void *userdata;
	char *prefix;
	struct request *req; /* NULL once ended (ERROR) or cancelled */
	unsigned pending;    /* events deferred, not yet run */
	bool cancelled;      /* no callback runs any more */
	bool free_when_idle; /* cancelled on the I/O thread while pending */
	/* A state delivered in part (HOLDING, WAITING, no CURRENT yet), at
	 * state_pos: a resubscription (a reconnect) starts it again. */
	bool in_state;
	struct raftlock_position state_pos;
	struct watch_delivery *last; /* the ERROR event's, kept from the start */
};

/* One event on its way to the application. */
struct watch_delivery {
	struct transport_deferred d; /* first: the deferred callback is the op */
	struct raftlock_watch_handle *w;
	struct raftlock_watch_event ev;
	char *value;
	char name[];
};

static void watch_free(struct raftlock_watch_handle *w)
{
	free(w->last);
	free(w->prefix);
	free(w);
}

/* The I/O thread, without t->mu. */
static void watch_deliver(struct transport_deferred *d)
{
	struct watch_delivery *dv = (struct watch_delivery *)d;
	struct raftlock_watch_handle *w = dv->w;
	struct transport *t = w->t;
	pthread_mutex_lock(&t->mu);
	bool run = !w->cancelled;
	pthread_mutex_unlock(&t->mu);
	if (run)
		w->cb(&dv->ev, w->userdata);
	free(dv->value);
	free(dv);
	pthread_mutex_lock(&t->mu);
	bool last = --w->pending == 0 && w->free_when_idle;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->mu);
	if (last)
		watch_free(w);
}

/* Encodes the request: after pos (resume), or from the start (state
 * first), then of a state no older than pos when there is one: a state
 * seen in part on a node must not come back older from a lagging one.
 * pos names its cluster: a node of another (restored from a backup
 * since), or of this build when it is 0, answers a resume with
 * HISTORY_LOST, and holds no state back for it; nodes of older builds
 * ignore it. */
static int watch_frame(struct raftlock_watch_handle *w, const struct raftlock_position *pos,
		       bool resume, Raftlock__Envelope *env, Raftlock__WatchRequest *req)
{
	*req = (Raftlock__WatchRequest)RAFTLOCK__WATCH_REQUEST__INIT;
	req->prefix = w->prefix;
	req->resume = resume && pos != NULL;
	if (pos != NULL) {
		req->after_index = pos->index;
		req->after_offset = pos->offset;
		req->cluster_id = pos->cluster_id;
	}
	*env = (Raftlock__Envelope)RAFTLOCK__ENVELOPE__INIT;
	env->body_case = RAFTLOCK__ENVELOPE__BODY_WATCH;
	env->watch = req;
	return 0;
}

/* t->mu held: queue ev for the application; false when out of memory
 * (the watch must end then: a later event would skip this one). */
static bool watch_queue(struct raftlock_watch_handle *w, const struct raftlock_watch_event *ev)
{
	size_t n = strlen(ev->name) + 1;
	struct watch_delivery *dv = malloc(sizeof *dv + n);
	if (dv == NULL)
		return false;
	dv->value = strdup(ev->value != NULL ? ev->value : "");
	if (dv->value == NULL) {
		free(dv);
		return false;
	}
	dv->d = (struct transport_deferred){.fn = watch_deliver};
	dv->w = w;
	dv->ev = *ev;
	memcpy(dv->name, ev->name, n);
	dv->ev.name = dv->name;
	dv->ev.value = dv->value;
	w->pending++;
	transport_defer(w->t, &dv->d);
	return true;
}

/* The I/O thread, t->mu held: the answer to a cancel; nobody waits. */
static void watch_cancel_done(struct transport *t, struct request *req, int err)
{
	(void)err;
	req->on_done = NULL;
	transport_take(t, req, NULL);
}

/* t->mu held: takes w's request out of the table and tells the node to
 * end its stream (best effort: a closed connection ends its watches
 * anyway). */
static void watch_stop(struct raftlock_watch_handle *w)
{
	struct transport *t = w->t;
	uint64_t id = w->req->id;
	bool sent_here = transport_sent_here(t, w->req);
	transport_take(t, w->req, NULL);
	w->req = NULL;
	Raftlock__WatchCancelRequest cr = RAFTLOCK__WATCH_CANCEL_REQUEST__INIT;
	cr.watch = id;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_WATCH_CANCEL;
	env.watch_cancel = &cr;
	struct request *r;
	if (sent_here && transport_submit(t, &env, false, &r) == 0)
		transport_on_done(t, r, watch_cancel_done, NULL, 0);
}

/* The I/O thread, t->mu held: ends the watch with its last event, ERROR
 * of status, from the delivery kept for it (out of memory too). The node
 * ended the stream (ended), else it is told to. */
static void watch_end(struct raftlock_watch_handle *w, int status, bool ended)
{
	if (ended) {
		transport_take(w->t, w->req, NULL);
		w->req = NULL;
	} else {
		watch_stop(w);
	}
	struct watch_delivery *dv = w->last;
	w->last = NULL;
	dv->ev = (struct raftlock_watch_event){
		.kind = RAFTLOCK_WATCH_ERROR, .name = dv->name, .status = status, .value = ""};
	w->pending++;
	transport_defer(w->t, &dv->d);
}

/* The I/O thread, t->mu held: an answer or an event of the stream. */
static void watch_on_stream(struct transport *t, struct request *req, Raftlock__Envelope *env)
{
	struct raftlock_watch_handle *w = req->op;
	const Raftlock__Response *resp = env->response;
	struct raftlock_watch_event ev = {.name = w->prefix};
	if (!resp->push) {
		if (resp->status != 0) {
			watch_end(w, resp->status, true);
		} else if (w->in_state) { /* subscribed: events follow */
			/* A reconnect cut a state short: the application
			 * drops what it got of it. */
			ev.kind = RAFTLOCK_WATCH_HISTORY_LOST;
			ev.position = w->state_pos;
			w->in_state = false;
			if (!watch_queue(w, &ev))
				watch_end(w, RAFTLOCK_ENOMEM, false);
		}
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	}
	const Raftlock__WatchEvent *e = resp->watch_event;
	if (resp->payload_case != RAFTLOCK__RESPONSE__PAYLOAD_WATCH_EVENT || e == NULL) {
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	}
	ev.kind = (enum raftlock_watch_kind)e->kind;
	ev.position = (struct raftlock_position){e->index, e->offset, e->cluster_id};
	ev.name = e->name;
	ev.session = e->session;
	ev.owner = e->owner;
	ev.token = e->token;
	ev.mode = e->mode == RAFTLOCK__MODE__SHARED ? RAFTLOCK_SHARED : RAFTLOCK_EXCLUSIVE;
	ev.permits = e->permits;
	ev.status = e->status;
	ev.value = e->value;
	/* A state (HOLDING, WAITING) is complete only at its CURRENT: a
	 * resume from inside it would miss the rest of it. */
	bool state_event = ev.kind == RAFTLOCK_WATCH_HOLDING || ev.kind == RAFTLOCK_WATCH_WAITING;
	bool state = state_event || ev.kind == RAFTLOCK_WATCH_HISTORY_LOST;
	/* after HISTORY_LOST a reconnect must get the state again (another
	 * node could still have the changes after the old position, but the
	 * application has let go of what it knew), and once a state began,
	 * one no older than it */
	bool begins = ev.kind == RAFTLOCK_WATCH_HISTORY_LOST || (state_event && !w->in_state);
	/* The position a reconnect resumes from moves before the event goes
	 * out: without memory for it, a reconnect would deliver the event
	 * again (or a state again, without HISTORY_LOST), so the watch ends
	 * here, as without memory for the event. */
	Raftlock__Envelope next;
	Raftlock__WatchRequest wr;
	if (!state || begins) {
		watch_frame(w, &ev.position, !state, &next, &wr);
		if (transport_reframe(t, req, &next) != 0) {
			watch_end(w, RAFTLOCK_ENOMEM, false);
			raftlock__envelope__free_unpacked(env, NULL);
			return;
		}
	}
	if (!watch_queue(w, &ev)) {
		watch_end(w, RAFTLOCK_ENOMEM, false);
	} else {
		w->in_state = state_event;
		w->state_pos = ev.position;
	}
	raftlock__envelope__free_unpacked(env, NULL);
}

RAFTLOCK_API int raftlock_watch(raftlock_client *c, const char *prefix,
				const struct raftlock_position *from, raftlock_watch_cb cb,
				void *userdata, raftlock_watch_handle **out)
{
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	if (prefix == NULL || cb == NULL || out == NULL || strlen(prefix) > RAFTLOCK_NAME_MAX)
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, NULL,
				  "watch: a prefix of at most %d bytes, a callback and out",
				  RAFTLOCK_NAME_MAX);
	struct raftlock_watch_handle *w = calloc(1, sizeof *w);
	size_t n = strlen(prefix) + 1;
	if (w == NULL || (w->prefix = strdup(prefix)) == NULL ||
	    (w->last = calloc(1, sizeof *w->last + n)) == NULL) {
		if (w != NULL)
			watch_free(w);
		return errmsg_set(&c->t, RAFTLOCK_ENOMEM, NULL, "watch '%s'", prefix);
	}
	*w->last = (struct watch_delivery){.d.fn = watch_deliver, .w = w};
	memcpy(w->last->name, prefix, n);
	w->t = &c->t;
	w->cb = cb;
	w->userdata = userdata;
	Raftlock__Envelope env;
	Raftlock__WatchRequest req;
	watch_frame(w, from, true, &env, &req);
	pthread_mutex_lock(&c->t.mu);
	int rv = transport_submit(&c->t, &env, false, &w->req);
	if (rv == 0) {
		transport_on_stream(&c->t, w->req, watch_on_stream, w);
		*out = w; /* before its first event: a callback may halt it */
	} else {
		errmsg_set(&c->t, rv, NULL, "watch '%s'", prefix);
	}
	pthread_mutex_unlock(&c->t.mu);
	if (rv != 0)
		watch_free(w);
	return rv;
}

/* t->mu held: no more events for the application, none from the node. */
static void watch_halt_locked(raftlock_watch_handle *w)
{
	w->cancelled = true;
	if (w->req != NULL)
		watch_stop(w);
}

void watch_halt(raftlock_watch_handle *w)
{
	pthread_mutex_lock(&w->t->mu);
	watch_halt_locked(w);
	pthread_mutex_unlock(&w->t->mu);
}

RAFTLOCK_API void raftlock_watch_cancel(raftlock_watch_handle *w)
{
	if (w == NULL)
		return;
	struct transport *t = w->t;
	pthread_mutex_lock(&t->mu);
	watch_halt_locked(w);
	bool now = w->pending == 0;
	if (!now && transport_on_io_thread(t)) {
		w->free_when_idle = true; /* the last delivery frees it */
		pthread_mutex_unlock(&t->mu);
		return;
	}
	while (w->pending > 0)
		pthread_cond_wait(&t->cond, &t->mu);
	pthread_mutex_unlock(&t->mu);
	watch_free(w);
}

RAFTLOCK_API int raftlock_position_parse(const char *text, struct raftlock_position *pos)
{
	if (text == NULL || pos == NULL)
		return RAFTLOCK_EINVAL;
	char *end;
	if (text[0] < '0' || text[0] > '9')
		return RAFTLOCK_EINVAL;
	errno = 0;
	unsigned long long index = strtoull(text, &end, 10);
	/* past UINT64_MAX: refused, not taken for UINT64_MAX (strtoull's
	 * answer), from which a watch would wait forever; UINT64_MAX itself
	 * is a position as any other */
	if (errno == ERANGE)
		return RAFTLOCK_EINVAL;
	unsigned long long offset = RAFTLOCK_WATCH_OFFSET_END;
	if (*end == '.') {
		const char *o = end + 1;
		if (o[0] < '0' || o[0] > '9')
			return RAFTLOCK_EINVAL;
		offset = strtoull(o, &end, 10);
		if (offset > RAFTLOCK_WATCH_OFFSET_END)
			return RAFTLOCK_EINVAL;
	}
	uint64_t cluster = 0;
	if (*end == '@') {
		const char *c = end + 1;
		size_t n = strspn(c, "0123456789abcdefABCDEF");
		if (n == 0 || n > 16 || c[n] != '\0')
			return RAFTLOCK_EINVAL;
		cluster = strtoull(c, &end, 16);
	}
	if (*end != '\0')
		return RAFTLOCK_EINVAL;
	pos->index = index;
	pos->offset = (uint32_t)offset;
	pos->cluster_id = cluster;
	return 0;
}

RAFTLOCK_API const char *raftlock_watch_kind_name(enum raftlock_watch_kind kind)
{
	static const char *const names[] = {
		[RAFTLOCK_WATCH_GRANTED] = "granted",
		[RAFTLOCK_WATCH_RELEASED] = "released",
		[RAFTLOCK_WATCH_EXPIRED] = "expired",
		[RAFTLOCK_WATCH_QUEUED] = "queued",
		[RAFTLOCK_WATCH_DEQUEUED] = "dequeued",
		[RAFTLOCK_WATCH_REVOKED] = "revoked",
		[RAFTLOCK_WATCH_HISTORY_LOST] = "history-lost",
		[RAFTLOCK_WATCH_HOLDING] = "holding",
		[RAFTLOCK_WATCH_WAITING] = "waiting",
		[RAFTLOCK_WATCH_CURRENT] = "current",
		[RAFTLOCK_WATCH_PROCLAIMED] = "proclaimed",
		[RAFTLOCK_WATCH_ERROR] = "error",
	};
	if ((unsigned)kind < sizeof names / sizeof names[0] && names[kind] != NULL)
		return names[kind];
	return "unknown";
}
