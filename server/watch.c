/* watch.c: see watch.h. */
#include "watch.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

struct watch_sub {
	struct service_conn *conn; /* NULL once ended during a walk */
	uint64_t id;
	char *prefix;
	struct watch_pos after; /* the last position it was sent */
	struct watch_sub *next;
};

/* A send can close its connection (a client that does not read: service.c
 * closes it once its unsent answers pass a bound), and the close ends the
 * connection's watches. While the registry walks its subscribers or
 * sends one the state of its locks, an ended subscription is therefore
 * only marked (conn NULL, sent nothing more) and freed when the outermost
 * walk ends. */
static void walk_begin(struct watches *w)
{
	w->walking++;
}

static void sub_free(struct watch_sub *s)
{
	free(s->prefix);
	free(s);
}

static void walk_end(struct watches *w)
{
	if (--w->walking > 0 || w->n_ended == 0)
		return;
	for (struct watch_sub **pp = &w->subs; *pp != NULL;) {
		struct watch_sub *s = *pp;
		if (s->conn == NULL) {
			*pp = s->next;
			sub_free(s);
		} else {
			pp = &s->next;
		}
	}
	w->n_ended = 0;
}

static int pos_cmp(struct watch_pos a, struct watch_pos b)
{
	if (a.index != b.index)
		return a.index < b.index ? -1 : 1;
	return a.offset < b.offset ? -1 : a.offset > b.offset;
}

static struct watch_pos pos_of(const Raftlock__WatchEvent *ev)
{
	return (struct watch_pos){ev->index, ev->offset};
}

static bool matches(const struct watch_sub *s, const char *name)
{
	return strncmp(name, s->prefix, strlen(s->prefix)) == 0;
}

static uint64_t applied_index(struct store *st, MDB_txn *txn)
{
	Raftlock__Meta *m = store_get_meta(st, txn);
	uint64_t index = m->applied_index;
	raftlock__meta__free_unpacked(m, NULL);
	return index;
}

static void slot_free(Raftlock__WatchEvent *slot)
{
	free(slot->name);
	if (slot->value != protobuf_c_empty_string)
		free(slot->value);
}

static void ring_clear(struct watches *w)
{
	for (size_t i = 0; i < w->n; i++)
		slot_free(&w->ring[(w->first + i) % w->cap]);
	w->first = w->n = 0;
}

/* After a restore the history starts at the store's new applied index. */
static void ring_reset(struct watches *w)
{
	ring_clear(w);
	MDB_txn *txn = store_begin(w->store, false);
	w->base = (struct watch_pos){applied_index(w->store, txn), WATCH_OFFSET_END};
	store_abort(txn);
}

void watches_init(struct watches *w, size_t cap, struct store *store, uint64_t start_index,
		  watch_send_cb send, void *arg)
{
	*w = (struct watches){.store = store, .send = send, .arg = arg, .cap = cap};
	w->base = (struct watch_pos){start_index, WATCH_OFFSET_END};
	w->ring = calloc(cap, sizeof *w->ring);
	if (w->ring == NULL)
		log_fatal("out of memory");
}

void watches_close(struct watches *w)
{
	ring_clear(w);
	free(w->ring);
	w->ring = NULL;
	while (w->subs != NULL) {
		struct watch_sub *s = w->subs;
		w->subs = s->next;
		sub_free(s);
	}
}

static void send_to(struct watches *w, struct watch_sub *s, const Raftlock__WatchEvent *ev)
{
	if (s->conn != NULL)
		w->send(w->arg, s->conn, s->id, ev);
}

/* -------------------------------------------------------- current state */

struct state_walk {
	struct watches *w;
	struct watch_sub *sub;
	struct watch_pos at;
};

static int state_visit(void *arg, Raftlock__LockRecord *rec)
{
	struct state_walk *sw = arg;
	Raftlock__WatchEvent ev = RAFTLOCK__WATCH_EVENT__INIT;
	ev.index = sw->at.index;
	ev.offset = sw->at.offset;
	ev.name = rec->name;
	ev.kind = RAFTLOCK__WATCH_KIND__WATCH_HOLDING;
	for (size_t i = 0; i < rec->n_holders; i++) {
		const Raftlock__Holder *h = rec->holders[i];
		ev.session = h->session;
		ev.owner = h->owner;
		ev.token = h->token;
		ev.mode = h->mode;
		ev.permits = h->permits;
		ev.value = h->value;
		send_to(sw->w, sw->sub, &ev);
	}
	ev.kind = RAFTLOCK__WATCH_KIND__WATCH_WAITING;
	ev.token = 0;
	for (size_t i = 0; i < rec->n_waiters; i++) {
		const Raftlock__Waiter *q = rec->waiters[i];
		ev.session = q->session;
		ev.owner = q->owner;
		ev.mode = q->mode;
		ev.permits = q->permits;
		ev.value = q->value;
		send_to(sw->w, sw->sub, &ev);
	}
	raftlock__lock_record__free_unpacked(rec, NULL);
	return sw->sub->conn == NULL; /* ended: the rest would go nowhere */
}

/* The state of the subscriber's locks as the store has it now (which is
 * where the ring ends: both change only in apply, on this thread), then
 * CURRENT; the subscriber goes on after that position. */
static void send_state(struct watches *w, struct watch_sub *s)
{
	MDB_txn *txn = store_begin(w->store, false);
	struct state_walk sw = {w, s, {applied_index(w->store, txn), WATCH_OFFSET_END}};
	store_scan_locks(w->store, txn, s->prefix, NULL, state_visit, &sw);
	store_abort(txn);
	Raftlock__WatchEvent ev = RAFTLOCK__WATCH_EVENT__INIT;
	ev.index = sw.at.index;
	ev.offset = sw.at.offset;
	ev.kind = RAFTLOCK__WATCH_KIND__WATCH_CURRENT;
	ev.name = s->prefix;
	send_to(w, s, &ev);
	if (pos_cmp(sw.at, s->after) > 0)
		s->after = sw.at;
}

static void send_lost(struct watches *w, struct watch_sub *s)
{
	Raftlock__WatchEvent ev = RAFTLOCK__WATCH_EVENT__INIT;
	ev.index = s->after.index;
	ev.offset = s->after.offset;
	ev.kind = RAFTLOCK__WATCH_KIND__WATCH_HISTORY_LOST;
	ev.name = s->prefix;
	send_to(w, s, &ev);
	send_state(w, s);
}

/* ------------------------------------------------------- subscriptions */

/* What a subscriber resuming after `after` is owed. */
static void send_after(struct watches *w, struct watch_sub *s, struct watch_pos after)
{
	s->after = after;
	if (pos_cmp(s->after, w->base) < 0) {
		send_lost(w, s);
		return;
	}
	/* A position this node has not reached yet (the client came from a
	 * node further ahead) waits: changes up to it are not sent again. */
	for (size_t i = 0; i < w->n && s->conn != NULL; i++) {
		const Raftlock__WatchEvent *ev = &w->ring[(w->first + i) % w->cap];
		if (pos_cmp(pos_of(ev), s->after) > 0 && matches(s, ev->name)) {
			send_to(w, s, ev);
			s->after = pos_of(ev);
		}
	}
}

void watches_add(struct watches *w, struct service_conn *conn, uint64_t id,
		 const Raftlock__WatchRequest *req)
{
	struct watch_sub *s = calloc(1, sizeof *s);
	if (s == NULL || (s->prefix = strdup(req->prefix)) == NULL)
		log_fatal("out of memory");
	s->conn = conn;
	s->id = id;
	s->next = w->subs;
	w->subs = s;
	walk_begin(w);
	if (req->resume)
		send_after(w, s, (struct watch_pos){req->after_index, req->after_offset});
	else
		send_state(w, s);
	walk_end(w);
}

static bool unlink_where(struct watches *w, const struct service_conn *conn, bool any_id,
			 uint64_t id)
{
	bool found = false;
	for (struct watch_sub **pp = &w->subs; *pp != NULL;) {
		struct watch_sub *s = *pp;
		if (s->conn != conn || !(any_id || s->id == id)) {
			pp = &s->next;
			continue;
		}
		found = true;
		if (w->walking > 0) {
			s->conn = NULL; /* freed by walk_end() */
			w->n_ended++;
			pp = &s->next;
		} else {
			*pp = s->next;
			sub_free(s);
		}
	}
	return found;
}

bool watches_cancel(struct watches *w, const struct service_conn *conn, uint64_t id)
{
	return unlink_where(w, conn, false, id);
}

void watches_forget_conn(struct watches *w, const struct service_conn *conn)
{
	unlink_where(w, conn, true, 0);
}

/* ------------------------------------------------------------- changes */

void watches_on_change(struct watches *w, const Raftlock__WatchEvent *ev)
{
	if (w->n == w->cap) {
		Raftlock__WatchEvent *old = &w->ring[w->first];
		w->base = pos_of(old); /* the changes after it are still here */
		slot_free(old);
		w->first = (w->first + 1) % w->cap;
		w->n--;
	}
	Raftlock__WatchEvent *slot = &w->ring[(w->first + w->n) % w->cap];
	*slot = *ev;
	slot->value = (char *)protobuf_c_empty_string;
	if ((slot->name = strdup(ev->name)) == NULL ||
	    (ev->value[0] != '\0' && (slot->value = strdup(ev->value)) == NULL))
		log_fatal("out of memory");
	w->n++;
	walk_begin(w);
	for (struct watch_sub *s = w->subs; s != NULL; s = s->next) {
		if (s->conn != NULL && pos_cmp(pos_of(ev), s->after) > 0 && matches(s, ev->name)) {
			send_to(w, s, ev);
			s->after = pos_of(ev);
		}
	}
	walk_end(w);
}

void watches_restored(struct watches *w)
{
	if (w->ring == NULL)
		return; /* a restore as the node starts, before the service */
	ring_reset(w);
	walk_begin(w);
	for (struct watch_sub *s = w->subs; s != NULL; s = s->next)
		if (s->conn != NULL && pos_cmp(s->after, w->base) < 0)
			send_lost(w, s);
	walk_end(w);
}

size_t watches_kept(const struct watches *w)
{
	return w->n;
}

size_t watches_on_conn(const struct watches *w, const struct service_conn *conn)
{
	size_t n = 0;
	for (const struct watch_sub *s = w->subs; s != NULL; s = s->next)
		n += s->conn == conn;
	return n;
}

size_t watches_subscribers(const struct watches *w)
{
	size_t n = 0;
	for (const struct watch_sub *s = w->subs; s != NULL; s = s->next)
		n += s->conn != NULL;
	return n;
}
