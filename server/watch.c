/* watch.c: see watch.h. */
#include "watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "raftlock.h"

/* Why a state has not started (watch_sub.waits). */
enum state_wait {
	STATE_STARTED = 0,
	WAIT_ROOM,    /* its connection has no room (the client reads slowly) */
	WAIT_STORE,   /* the store closes: the node stops */
	WAIT_READERS, /* every reader is taken, or kept for the states that waited first */
	WAIT_SHARE,   /* its connection's states hold their share of them */
	WAIT_INDEX,   /* the node has not applied the index it must be of */
};

struct watch_sub {
	struct service_conn *conn; /* NULL once ended during a walk */
	uint64_t id;
	char *prefix;
	struct watch_pos after; /* the last position it was sent */
	uint64_t cluster;       /* whose history `after` is of (0: not known) */
	uint64_t not_before;    /* its state is of this index or later */
	/* whose history not_before is of (0: not known, or this node's): a
	 * floor of another cluster's (restored since) holds nothing here */
	uint64_t floor_cluster;
	/* While its state goes out in pages (in_state): the snapshot it is
	 * read from (NULL while it waits for a reader), the last lock name
	 * sent, the snapshot's position and when a page last went out. */
	bool in_state;
	MDB_txn *txn;
	char *state_after;
	struct watch_pos state_at;
	uint64_t state_cluster;           /* the snapshot's cluster id */
	uint64_t started_ms, progress_ms; /* 0: not pumped yet */
	size_t reader_slot;               /* 1 + its index in w->readers, 0: none */
	uint64_t pages_at_open;           /* the store file's pages when it was taken */
	/* Before it has a reader: why it waits, since when it waits at all
	 * and since when for its index (0: not yet; each kept whatever the
	 * reasons in between, so that no churn of them keeps it waiting past
	 * its bound), and the index the node was at. */
	enum state_wait waits;
	const struct service_conn *share_conn; /* WAIT_SHARE: the connection counted */
	uint64_t wait_ms, index_wait_ms;
	unsigned waited_for; /* 1 << each reason it waited for since wait_ms */
	uint64_t applied_seen;
	bool wait_cluster; /* WAIT_INDEX: for the node's cluster id (cluster_place) */
	/* A lock whose holders and waiters did not all fit in the last page
	 * (owned), and how many of them went. */
	Raftlock__LockRecord *state_rec;
	size_t rec_sent;
	/* Its changes made since the snapshot, to follow its CURRENT; past
	 * w->backlog_max of them, or w->backlog_bytes_max, the ring must
	 * have them (or HISTORY_LOST). */
	Raftlock__WatchEvent *backlog;
	size_t n_backlog, backlog_cap;
	size_t backlog_bytes; /* backlog_cost() of each */
	size_t backlog_sent;  /* draining: its CURRENT went, these followed */
	bool backlog_full;    /* draining: the changes come from the ring */
	bool draining;
	struct watch_pos scanned; /* from the ring: looked at up to here */
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

static void state_end(struct watches *w, struct watch_sub *s);
static void wait_ends_log(struct watches *w, uint64_t now_ms, bool closing);

static void sub_free(struct watches *w, struct watch_sub *s)
{
	state_end(w, s);
	free(s->prefix);
	free(s);
}

static void walk_end(struct watches *w)
{
	if (--w->walking > 0 || w->n_ended == 0)
		return;
	w->subs_last = NULL;
	for (struct watch_sub **pp = &w->subs; *pp != NULL;) {
		struct watch_sub *s = *pp;
		if (s->conn == NULL) {
			*pp = s->next;
			sub_free(w, s);
		} else {
			w->subs_last = s;
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

/* Where the store stands: its applied index and the cluster whose
 * history that is (0 until its INIT applied). */
struct watch_meta {
	uint64_t applied, cluster;
};

static struct watch_meta meta_of(struct store *st, MDB_txn *txn)
{
	Raftlock__Meta *m = store_get_meta(st, txn);
	struct watch_meta at = {m->applied_index, m->cluster_id};
	raftlock__meta__free_unpacked(m, NULL);
	return at;
}

/* ev went to s: where it stands now, and in whose history. */
static void moved_to(struct watch_sub *s, const Raftlock__WatchEvent *ev)
{
	s->after = pos_of(ev);
	s->cluster = ev->cluster_id;
}

static void slot_free(Raftlock__WatchEvent *slot)
{
	free(slot->name);
	if (slot->value != protobuf_c_empty_string)
		free(slot->value);
}

/* A copy of ev whose strings it owns (slot_free). */
static void event_copy(Raftlock__WatchEvent *slot, const Raftlock__WatchEvent *ev)
{
	*slot = *ev;
	slot->value = (char *)protobuf_c_empty_string;
	if ((slot->name = strdup(ev->name)) == NULL ||
	    (ev->value[0] != '\0' && (slot->value = strdup(ev->value)) == NULL))
		log_fatal("out of memory");
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
	w->base = (struct watch_pos){meta_of(w->store, txn).applied, WATCH_OFFSET_END};
	store_abort(txn);
}

void watches_init(struct watches *w, size_t cap, struct store *store, uint64_t start_index,
		  watch_send_cb send, void *arg)
{
	*w = (struct watches){.store = store,
			      .send = send,
			      .arg = arg,
			      .cap = cap,
			      .backlog_max = WATCH_STATE_BACKLOG,
			      .backlog_bytes_max = WATCH_STATE_BACKLOG_BYTES};
	w->base = (struct watch_pos){start_index, WATCH_OFFSET_END};
	w->ring = calloc(cap, sizeof *w->ring);
	if (w->ring == NULL)
		log_fatal("out of memory");
}

void watches_close(struct watches *w)
{
	wait_ends_log(w, 0, true); /* the ends a line held back, said at last */
	ring_clear(w);
	free(w->ring);
	w->ring = NULL;
	while (w->subs != NULL) {
		struct watch_sub *s = w->subs;
		w->subs = s->next;
		sub_free(w, s);
	}
	w->subs_last = NULL;
	free(w->share_waits); /* empty: no state waits any more */
	w->share_waits = NULL;
	w->n_share_waits = w->share_waits_cap = 0;
}

static void send_to(struct watches *w, struct watch_sub *s, const Raftlock__WatchEvent *ev)
{
	if (s->conn != NULL)
		w->send(w->arg, s->conn, s->id, ev);
}

/* -------------------------------------------------------- current state */

/* A state is sent in pages of WATCH_STATE_PAGE locks and at most
 * WATCH_STATE_PAGE_EVENTS holders and waiters (a lock with a long queue
 * goes out over several), one per loop turn and only while the
 * connection has room (watches_pump), from a read snapshot that the
 * subscription holds meanwhile: the loop is never held by a large prefix
 * or a long queue, the client gets it at the pace it reads, and the
 * state is still the one of a single position. The changes of its locks
 * made meanwhile are kept for it (its backlog) and follow its CURRENT. */

static bool has_room(struct watches *w, const struct watch_sub *s)
{
	return w->room == NULL || w->room(w->arg, s->conn);
}

struct state_walk {
	struct watches *w;
	struct watch_sub *sub;
	size_t left;   /* locks this page may still send */
	size_t events; /* holders and waiters it may still send */
	bool cut;      /* the page ended before the locks did */
};

/* Sends rec's holders, then its waiters in queue order, from where the
 * last page left off, as many as the page may; true once all went. */
static bool state_lock(struct state_walk *sw, const Raftlock__LockRecord *rec)
{
	struct watch_sub *s = sw->sub;
	size_t n = rec->n_holders + rec->n_waiters;
	while (s->rec_sent < n && sw->events > 0 && s->conn != NULL) {
		Raftlock__WatchEvent ev = RAFTLOCK__WATCH_EVENT__INIT;
		ev.index = s->state_at.index;
		ev.offset = s->state_at.offset;
		ev.cluster_id = s->state_cluster;
		ev.name = rec->name;
		size_t i = s->rec_sent++;
		if (i < rec->n_holders) {
			const Raftlock__Holder *h = rec->holders[i];
			ev.kind = RAFTLOCK__WATCH_KIND__WATCH_HOLDING;
			ev.session = h->session;
			ev.owner = h->owner;
			ev.token = h->token;
			ev.mode = h->mode;
			ev.permits = h->permits;
			ev.value = h->value;
		} else {
			const Raftlock__Waiter *q = rec->waiters[i - rec->n_holders];
			ev.kind = RAFTLOCK__WATCH_KIND__WATCH_WAITING;
			ev.session = q->session;
			ev.owner = q->owner;
			ev.mode = q->mode;
			ev.permits = q->permits;
			ev.value = q->value;
		}
		send_to(sw->w, s, &ev);
		sw->events--;
	}
	return s->rec_sent == n;
}

/* One lock of a page (rec owned): kept in s->state_rec when the page ends
 * inside it, so that a long queue goes out over several pages. */
static int state_visit(void *arg, Raftlock__LockRecord *rec)
{
	struct state_walk *sw = arg;
	struct watch_sub *s = sw->sub;
	bool whole = state_lock(sw, rec);
	if (whole) {
		s->rec_sent = 0;
		free(s->state_after);
		if ((s->state_after = strdup(rec->name)) == NULL)
			log_fatal("out of memory");
		raftlock__lock_record__free_unpacked(rec, NULL);
		sw->left--;
	} else {
		s->state_rec = rec;
	}
	/* ended: the rest would go nowhere; a lock with a long queue may
	 * have filled the connection's room alone */
	sw->cut = !whole || s->conn == NULL || sw->left == 0 || sw->events == 0 ||
		  !has_room(sw->w, s);
	return sw->cut;
}

/* The count of conn's states that wait for its share (watches.share_waits). */
static struct watch_share_waits *share_waits_of(const struct watches *w,
						const struct service_conn *conn)
{
	for (size_t i = 0; i < w->n_share_waits; i++)
		if (w->share_waits[i].conn == conn)
			return &w->share_waits[i];
	return NULL;
}

static void share_waits_add(struct watches *w, const struct service_conn *conn)
{
	struct watch_share_waits *c = share_waits_of(w, conn);
	if (c == NULL) {
		if (w->n_share_waits == w->share_waits_cap) {
			size_t cap = w->share_waits_cap ? 2 * w->share_waits_cap : 4;
			c = realloc(w->share_waits, cap * sizeof *c);
			if (c == NULL)
				log_fatal("out of memory");
			w->share_waits = c;
			w->share_waits_cap = cap;
		}
		c = &w->share_waits[w->n_share_waits++];
		*c = (struct watch_share_waits){.conn = conn};
	}
	c->n++;
	w->share_waiters++;
}

static void share_waits_del(struct watches *w, const struct service_conn *conn)
{
	struct watch_share_waits *c = share_waits_of(w, conn);
	if (--c->n == 0)
		*c = w->share_waits[--w->n_share_waits];
	w->share_waiters--;
}

/* Whether a reader conn lets go of (NULL: closed) is of use to a state
 * that waits: one that waits for any reader, or one of conn's that
 * waits for its share. Kept for another connection's share-waiters, it
 * would be taken by none of them, and by no one else until the next
 * pump. */
static bool reader_wanted(const struct watches *w, const struct service_conn *conn)
{
	return w->reader_waiters > w->share_waiters ||
	       (conn != NULL && share_waits_of(w, conn) != NULL);
}

/* Readers kept for the states that wait (watches.readers) go to whoever
 * comes first: all of them, or those no state that waits could take. */
static void readers_unkeep(struct watches *w, bool all)
{
	for (size_t i = 0; i < WATCH_STATES_READING; i++)
		if (w->kept[i] && (all || !reader_wanted(w, w->readers[i]))) {
			w->kept[i] = false;
			w->readers[i] = NULL;
		}
}

static bool waits_for_reader(enum state_wait why)
{
	return why == WAIT_READERS || why == WAIT_SHARE;
}

/* Why s waits from now on (STATE_STARTED: it does not), in the counts of
 * the states that wait for a reader; a reader kept that none of them
 * could take any more is kept no longer. */
static enum state_wait waits_set(struct watches *w, struct watch_sub *s, enum state_wait why)
{
	w->reader_waiters -= waits_for_reader(s->waits);
	w->reader_waiters += waits_for_reader(why);
	if (s->waits == WAIT_SHARE)
		share_waits_del(w, s->share_conn);
	if (why == WAIT_SHARE) {
		s->share_conn = s->conn;
		share_waits_add(w, s->share_conn);
	}
	s->waits = why;
	if (w->reader_waiters == w->share_waiters)
		readers_unkeep(w, false);
	return why;
}

/* Where the store stands, read once per walk (*now: applied UINT64_MAX
 * until then). */
static const struct watch_meta *meta_now(struct watches *w, struct watch_meta *now)
{
	if (now->applied == UINT64_MAX) {
		MDB_txn *txn = store_begin(w->store, false);
		*now = meta_of(w->store, txn);
		store_abort(txn);
	}
	return now;
}

/* A state is of this node's cluster, whose id it names (its positions
 * are of that cluster's history): a node that has not applied its INIT
 * knows none yet, and waits for it as for an index (WAIT_INDEX). A floor
 * of another cluster's history (a client of the cluster this one was
 * restored from) holds nothing here. */
static enum state_wait cluster_place(struct watches *w, struct watch_sub *s, struct watch_meta *now)
{
	uint64_t cluster = meta_now(w, now)->cluster;
	s->wait_cluster = cluster == 0;
	if (s->wait_cluster) {
		s->applied_seen = now->applied;
		return waits_set(w, s, WAIT_INDEX);
	}
	if (s->floor_cluster != 0 && s->floor_cluster != cluster)
		s->not_before = 0;
	s->floor_cluster = 0; /* placed */
	return STATE_STARTED;
}

/* Takes a reader for s's state, once the node has applied its INIT and
 * the index the state must be no older than (checked first: a node that
 * lags answers so, whether readers are free or not), if one is free and
 * its connection holds fewer than its share. No state that waits for a
 * reader could take a free one (a reader let go of while states that
 * could take it wait is kept for them until the next pump, which walks
 * them oldest first: watches.readers; one that waits for its
 * connection's share takes none of another's), so one that finds it free
 * is behind no other, with no look at them. Its snapshot is the store
 * now, which is where the ring ends (both change only in apply, on this
 * thread). Returns STATE_STARTED, or why it must wait (also in
 * s->waits). */
static enum state_wait state_open(struct watches *w, struct watch_sub *s, struct watch_meta *now)
{
	if (s->txn != NULL)
		return STATE_STARTED;
	if (w->store_closed)
		return waits_set(w, s, WAIT_STORE);
	if (cluster_place(w, s, now) != STATE_STARTED)
		return s->waits;
	if (s->not_before > 0 && meta_now(w, now)->applied < s->not_before) {
		s->applied_seen = now->applied; /* the client saw a newer state: wait for it */
		return waits_set(w, s, WAIT_INDEX);
	}
	s->index_wait_ms = 0;
	size_t mine = 0, slot = WATCH_STATES_READING; /* none free */
	for (size_t i = 0; i < WATCH_STATES_READING; i++) {
		if (w->readers[i] == NULL && !w->kept[i])
			slot = i;
		else
			mine += w->readers[i] == s->conn; /* kept ones too */
	}
	/* its share first: free or not, another connection's reader is no
	 * use to it (one client does not take every reader) */
	if (mine >= WATCH_STATES_PER_CONN)
		return waits_set(w, s, WAIT_SHARE);
	if (slot == WATCH_STATES_READING)
		return waits_set(w, s, WAIT_READERS);
	MDB_txn *txn = store_begin(w->store, false);
	struct watch_meta at = meta_of(w->store, txn); /* >= not_before: applies only grow */
	w->readers[slot] = s->conn;
	s->reader_slot = slot + 1;
	s->pages_at_open = store_file_pages(w->store);
	s->txn = txn;
	s->state_at = (struct watch_pos){at.applied, WATCH_OFFSET_END};
	s->state_cluster = at.cluster;
	w->states_reading++;
	s->wait_ms = s->index_wait_ms = 0;
	return waits_set(w, s, STATE_STARTED);
}

static void backlog_clear(struct watch_sub *s)
{
	for (size_t i = 0; i < s->n_backlog; i++)
		slot_free(&s->backlog[i]);
	free(s->backlog);
	s->backlog = NULL;
	s->n_backlog = s->backlog_cap = s->backlog_sent = 0;
	s->backlog_bytes = 0;
}

/* The memory a copy of ev takes in a backlog: its slot and its strings
 * (event_copy), allocator overhead aside. */
static size_t backlog_cost(const Raftlock__WatchEvent *ev)
{
	size_t value = ev->value[0] != '\0' ? strlen(ev->value) + 1 : 0;
	return sizeof *ev + strlen(ev->name) + 1 + value;
}

/* A change of s's locks while its state goes out from a snapshot. */
static void backlog_add(struct watches *w, struct watch_sub *s, const Raftlock__WatchEvent *ev)
{
	if (s->backlog_full || pos_cmp(pos_of(ev), s->state_at) <= 0)
		return;
	size_t cost = backlog_cost(ev);
	if (s->n_backlog == w->backlog_max || cost > w->backlog_bytes_max - s->backlog_bytes) {
		backlog_clear(s);
		s->backlog_full = true;
		return;
	}
	if (s->n_backlog == s->backlog_cap) {
		size_t cap = s->backlog_cap ? 2 * s->backlog_cap : 16;
		Raftlock__WatchEvent *b = realloc(s->backlog, cap * sizeof *b);
		if (b == NULL)
			log_fatal("out of memory");
		s->backlog = b;
		s->backlog_cap = cap;
	}
	event_copy(&s->backlog[s->n_backlog++], ev);
	s->backlog_bytes += cost;
}

/* s's state is done with, sent or not: its snapshot goes at once, and its
 * reader to the states that wait for one and could take it, if any, at
 * the next watches_pump, the oldest first (free at once when none). A kept reader still counts in
 * its connection's share, unless the watch ended with its connection (conn NULL:
 * watches_forget_conn, or an end in a walk), whose address a new connection may get. */
static void reader_release(struct watches *w, struct watch_sub *s)
{
	if (s->txn != NULL) {
		store_abort(s->txn);
		s->txn = NULL;
		size_t i = s->reader_slot - 1;
		w->kept[i] = reader_wanted(w, s->conn);
		w->readers[i] = w->kept[i] ? s->conn : NULL;
		s->reader_slot = 0;
		w->states_reading--;
	}
}

static void state_end(struct watches *w, struct watch_sub *s)
{
	backlog_clear(s);
	s->backlog_full = false;
	s->draining = false;
	s->scanned = (struct watch_pos){0, 0};
	reader_release(w, s);
	if (s->in_state) {
		s->in_state = false;
		w->states--;
	}
	free(s->state_after);
	s->state_after = NULL;
	if (s->state_rec != NULL)
		raftlock__lock_record__free_unpacked(s->state_rec, NULL);
	s->state_rec = NULL;
	s->rec_sent = 0;
	waits_set(w, s, STATE_STARTED);
	s->wait_ms = s->index_wait_ms = 0;
}

static void send_lost(struct watches *w, struct watch_sub *s);

/* The first slot of the ring (0..n) whose change comes after pos. */
static size_t ring_after(const struct watches *w, struct watch_pos pos)
{
	size_t lo = 0, hi = w->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (pos_cmp(pos_of(&w->ring[(w->first + mid) % w->cap]), pos) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Sends s's changes in the ring after where it looked last, while its
 * connection has room, looking at WATCH_RING_SCAN changes at most; true
 * once it reached the ring's end. */
static bool ring_page(struct watches *w, struct watch_sub *s)
{
	size_t sent = 0, looked = 0;
	for (size_t i = ring_after(w, s->scanned); i < w->n; i++) {
		if (s->conn == NULL || looked++ == WATCH_RING_SCAN)
			return false;
		const Raftlock__WatchEvent *ev = &w->ring[(w->first + i) % w->cap];
		if (pos_cmp(pos_of(ev), s->after) > 0 && matches(s, ev->name)) {
			if (sent++ % WATCH_STATE_PAGE == 0 && !has_room(w, s))
				return false;
			send_to(w, s, ev);
			moved_to(s, ev);
		}
		s->scanned = pos_of(ev);
	}
	return s->conn != NULL;
}

/* Sends the changes owed to s while its connection has room (the rest from
 * watches_pump): those kept for it during its state, or, past what it
 * could keep, from the ring (HISTORY_LOST if the ring lost some). Once all
 * went, it is live again. */
static void backlog_drain(struct watches *w, struct watch_sub *s)
{
	if (s->backlog_full) {
		if (pos_cmp(s->after, w->base) < 0) {
			state_end(w, s);
			send_lost(w, s);
		} else {
			if (pos_cmp(s->scanned, s->after) < 0)
				s->scanned = s->after;
			if (ring_page(w, s))
				state_end(w, s);
		}
		return;
	}
	while (s->backlog_sent < s->n_backlog && s->conn != NULL) {
		if (s->backlog_sent % WATCH_STATE_PAGE == 0 && !has_room(w, s))
			return;
		const Raftlock__WatchEvent *ev = &s->backlog[s->backlog_sent++];
		send_to(w, s, ev);
		moved_to(s, ev);
	}
	if (s->conn != NULL)
		state_end(w, s);
}

/* The last page went out: CURRENT, then the changes made since. */
static void state_finish(struct watches *w, struct watch_sub *s)
{
	Raftlock__WatchEvent ev = RAFTLOCK__WATCH_EVENT__INIT;
	ev.index = s->state_at.index;
	ev.offset = s->state_at.offset;
	ev.cluster_id = s->state_cluster;
	ev.kind = RAFTLOCK__WATCH_KIND__WATCH_CURRENT;
	ev.name = s->prefix;
	send_to(w, s, &ev);
	/* where it stands now, even below the position it asked for: that
	 * one may be of another cluster's history (HISTORY_LOST said so) */
	moved_to(s, &ev);
	reader_release(w, s);
	s->draining = true;
	backlog_drain(w, s);
}

/* One page of s's state, when it has a reader (state_open): the rest of
 * a lock the last page ended in, then the locks after it. */
static void state_step(struct watches *w, struct watch_sub *s)
{
	struct watch_meta now = {.applied = UINT64_MAX};
	if (s->conn == NULL || state_open(w, s, &now) != STATE_STARTED)
		return;
	struct state_walk sw = {w, s, WATCH_STATE_PAGE, WATCH_STATE_PAGE_EVENTS, false};
	Raftlock__LockRecord *rec = s->state_rec;
	s->state_rec = NULL;
	if (rec != NULL && state_visit(&sw, rec))
		return;
	store_scan_locks(w->store, s->txn, s->prefix, s->state_after, state_visit, &sw);
	if (s->conn != NULL && !sw.cut)
		state_finish(w, s);
}

/* The state of the subscriber's locks, then CURRENT at its position; the
 * subscriber goes on after that. The first page goes out at once. */
static void send_state(struct watches *w, struct watch_sub *s)
{
	if (!s->in_state) {
		s->in_state = true;
		w->states++;
	}
	s->started_ms = s->progress_ms = 0;
	waits_set(w, s, STATE_STARTED);
	s->wait_ms = s->index_wait_ms = 0;
	free(s->state_after);
	if ((s->state_after = strdup("")) == NULL)
		log_fatal("out of memory");
	state_step(w, s);
}

/* Why s's client is given up, or NULL. */
static const char *state_overdue(const struct watch_sub *s, uint64_t now_ms, bool grew, bool room)
{
	static char why[128];
	if (grew)
		return "the store's file passed 3/4 of its map while its watch's state held "
		       "its pages";
	if (now_ms - s->started_ms >= WATCH_STATE_MAX_MS)
		snprintf(why, sizeof why, "it did not take its watch's state within %d s",
			 WATCH_STATE_MAX_MS / 1000);
	else if (!room && now_ms - s->progress_ms >= WATCH_STATE_STALL_MS)
		snprintf(why, sizeof why, "it took none of its watch's state for %d s",
			 WATCH_STATE_STALL_MS / 1000);
	else
		return NULL;
	return why;
}

/* Ends s's watch, in a walk: its client is told why. */
static void sub_end(struct watches *w, struct watch_sub *s, int status, const char *why)
{
	struct service_conn *conn = s->conn;
	s->conn = NULL; /* freed by walk_end() */
	w->n_ended++;
	w->ended(w->arg, conn, s->id, status, why);
}

/* What a state that waited for the reasons in waited (1 << each) waited
 * for, in an EOVERLOAD message or log line: the bound is one, whatever
 * the reasons. */
static const char *waited_why(unsigned waited)
{
	static char why[160];
	unsigned readers = 1u << WAIT_READERS | 1u << WAIT_SHARE;
	snprintf(why, sizeof why, "%s%s%s%s%s",
		 waited & 1u << WAIT_ROOM ? "its connection had no room" : "",
		 waited & 1u << WAIT_ROOM && waited & readers ? ", at times " : "",
		 waited & readers ? "no snapshot reader was free" : "",
		 waited & 1u << WAIT_INDEX && waited & ~(1u << WAIT_INDEX) ? ", at times " : "",
		 waited & 1u << WAIT_INDEX ? "this node had not applied its index" : "");
	return why;
}

/* How many watches ended by ends' bound are not yet said, if a line may
 * say them at now_ms, or at once when closing (0 if none or not now). */
static uint64_t wait_ends_to_log(struct watch_wait_ends *ends, uint64_t now_ms, bool closing)
{
	uint64_t lines_held_back, n = ends->unlogged;
	if (n == 0 || !(closing || log_rate_allow(&ends->log, now_ms, &lines_held_back)))
		return 0;
	ends->unlogged = 0;
	return n;
}

/* One warning per bound that ended watches since its last one: a burst of
 * ends (every state opened in the same second) is one line, and a client
 * that opens watches all the time cannot flood the log. An EOVERLOAD line
 * names what the states waited for, as each watch's message does. */
static void wait_ends_log(struct watches *w, uint64_t now_ms, bool closing)
{
	uint64_t n = wait_ends_to_log(&w->state_wait_ends, now_ms, closing);
	if (n > 0) {
		log_warn("%llu watch%s ended (RAFTLOCK_EOVERLOAD): %s could not start within "
			 "%d s (%s; %d states read at once, %d per connection)",
			 (unsigned long long)n, n == 1 ? "" : "es",
			 n == 1 ? "its state" : "their states", WATCH_STATE_WAIT_MS / 1000,
			 waited_why(w->state_wait_ends.waited_for), WATCH_STATES_READING,
			 WATCH_STATES_PER_CONN);
		w->state_wait_ends.waited_for = 0;
	}
	n = wait_ends_to_log(&w->index_wait_ends, now_ms, closing);
	if (n > 0)
		log_warn("%llu watch%s ended (RAFTLOCK_EUNAVAILABLE): this node had not applied "
			 "within %d s the index the state must be no older than (it is cut off "
			 "from its leader, or far behind it)",
			 (unsigned long long)n, n == 1 ? "" : "es", WATCH_INDEX_WAIT_MS / 1000);
}

/* s could not start its state (why: state_open, or WAIT_ROOM) at now_ms:
 * its watch ends once it waited longer than it may (watch.h). Each bound
 * counts from the first time it waited so, whatever the reasons in
 * between: a reader freed now and then, or room that comes and goes,
 * does not start the count again. */
static void state_wait(struct watches *w, struct watch_sub *s, enum state_wait why, uint64_t now_ms)
{
	if (s->wait_ms == 0) {
		s->wait_ms = now_ms;
		s->waited_for = 0;
	}
	s->waited_for |= 1u << why;
	if (why == WAIT_INDEX && s->index_wait_ms == 0)
		s->index_wait_ms = now_ms;
	char msg[384];
	struct watch_wait_ends *ends;
	if (w->ended == NULL || why == WAIT_STORE)
		return;
	if (why == WAIT_INDEX && now_ms - s->index_wait_ms >= WATCH_INDEX_WAIT_MS) {
		if (s->wait_cluster)
			snprintf(msg, sizeof msg,
				 "this node has applied index %llu, not yet its cluster's first "
				 "entry (the watch's state is of a cluster's history), within "
				 "%d s: try another node",
				 (unsigned long long)s->applied_seen, WATCH_INDEX_WAIT_MS / 1000);
		else
			snprintf(msg, sizeof msg,
				 "this node has applied index %llu, not yet %llu that the watch's "
				 "state must be no older than, within %d s: try another node",
				 (unsigned long long)s->applied_seen,
				 (unsigned long long)s->not_before, WATCH_INDEX_WAIT_MS / 1000);
		sub_end(w, s, RAFTLOCK_EUNAVAILABLE, msg);
		ends = &w->index_wait_ends;
	} else if (now_ms - s->wait_ms >= WATCH_STATE_WAIT_MS) {
		snprintf(msg, sizeof msg,
			 "the watch's state could not start within %d s (%s; %d states read at "
			 "once, %d per connection): try again later",
			 WATCH_STATE_WAIT_MS / 1000, waited_why(s->waited_for),
			 WATCH_STATES_READING, WATCH_STATES_PER_CONN);
		sub_end(w, s, RAFTLOCK_EOVERLOAD, msg);
		ends = &w->state_wait_ends;
		ends->waited_for |= s->waited_for; /* for the log line */
	} else {
		return;
	}
	ends->total++;
	ends->unlogged++; /* said after the walk: wait_ends_log */
}

bool watches_pump(struct watches *w, uint64_t now_ms)
{
	bool more = false;
	bool filling = w->states_reading > 0 && store_map_filling(w->store);
	uint64_t pages = filling ? store_file_pages(w->store) : 0;
	struct watch_meta now = {.applied = UINT64_MAX};
	readers_unkeep(w, true); /* the waiting states take them first: the walk is oldest first */
	walk_begin(w);
	for (struct watch_sub *s = w->subs; s != NULL; s = s->next) {
		if (s->conn == NULL || !s->in_state)
			continue;
		bool room = has_room(w, s);
		if (!s->draining && s->txn == NULL) {
			/* waits for room, then for a reader and its index */
			enum state_wait why =
				room ? state_open(w, s, &now) : waits_set(w, s, WAIT_ROOM);
			if (why != STATE_STARTED) {
				state_wait(w, s, why, now_ms);
				continue;
			}
		}
		if (s->started_ms == 0)
			s->started_ms = s->progress_ms = now_ms;
		/* the file grew past 3/4 of its map while s held its pages */
		bool grew = filling && s->txn != NULL && pages > s->pages_at_open;
		const char *why = state_overdue(s, now_ms, grew, room);
		if (why != NULL && w->stalled != NULL) {
			w->stalled(w->arg, s->conn, why); /* ends its watches */
			continue;
		}
		if (!room)
			continue;
		s->progress_ms = now_ms;
		if (s->draining)
			backlog_drain(w, s);
		else
			state_step(w, s); /* it has its reader */
		more |= s->conn != NULL && s->in_state;
	}
	walk_end(w);
	wait_ends_log(w, now_ms, false);
	for (size_t i = 0; i < WATCH_STATES_READING; i++)
		more |= w->kept[i]; /* a reader freed now goes on at the next call */
	return more;
}

void watches_end_states(struct watches *w)
{
	for (struct watch_sub *s = w->subs; s != NULL; s = s->next)
		reader_release(w, s);
	w->store_closed = true;
}

size_t watches_states(const struct watches *w)
{
	return w->states;
}

bool watches_ends_unlogged(const struct watches *w)
{
	return w->state_wait_ends.unlogged > 0 || w->index_wait_ends.unlogged > 0;
}

void watches_set_flow(struct watches *w, watch_room_cb room, watch_stalled_cb stalled,
		      watch_ended_cb ended)
{
	w->room = room;
	w->stalled = stalled;
	w->ended = ended;
}

static void send_lost(struct watches *w, struct watch_sub *s)
{
	Raftlock__WatchEvent ev = RAFTLOCK__WATCH_EVENT__INIT;
	ev.index = s->after.index;
	ev.offset = s->after.offset;
	ev.cluster_id = s->cluster;
	ev.kind = RAFTLOCK__WATCH_KIND__WATCH_HISTORY_LOST;
	ev.name = s->prefix;
	send_to(w, s, &ev);
	send_state(w, s);
}

/* ------------------------------------------------------- subscriptions */

/* What a subscriber whose last position is s->after is owed: HISTORY_LOST
 * and the state when the ring no longer has every change after it, else
 * those changes, paced as a state's are (the first page at once). A
 * position this node has not reached yet (the client came from a node
 * further ahead) waits: changes up to it are not sent again. A position
 * of another cluster's history (a client of the cluster this one was
 * restored from, whose log this one numbers from 1 again), or of one not
 * named (a client of an older build), is no position here: HISTORY_LOST,
 * and a state no older than it if it is of this history after all (one
 * not named, or this node has not applied its INIT yet: its state waits
 * for that). */
static void replay(struct watches *w, struct watch_sub *s)
{
	struct watch_meta now = {.applied = UINT64_MAX};
	if (s->cluster == 0 || s->cluster != meta_now(w, &now)->cluster) {
		s->not_before = s->after.index;
		s->floor_cluster = s->cluster;
		send_lost(w, s);
		return;
	}
	if (pos_cmp(s->after, w->base) < 0) {
		send_lost(w, s);
		return;
	}
	if (!s->in_state) {
		s->in_state = true;
		w->states++;
	}
	s->draining = true;
	s->backlog_full = true;
	s->started_ms = s->progress_ms = 0;
	backlog_drain(w, s);
}

void watches_add(struct watches *w, struct service_conn *conn, uint64_t id,
		 const Raftlock__WatchRequest *req)
{
	struct watch_sub *s = calloc(1, sizeof *s);
	if (s == NULL || (s->prefix = strdup(req->prefix)) == NULL)
		log_fatal("out of memory");
	s->conn = conn;
	s->id = id;
	/* last: the walks meet the oldest first (a free reader goes to it) */
	if (w->subs_last != NULL)
		w->subs_last->next = s;
	else
		w->subs = s;
	w->subs_last = s;
	walk_begin(w);
	if (req->resume) {
		s->after = (struct watch_pos){req->after_index, req->after_offset};
		s->cluster = req->cluster_id;
		replay(w, s);
	} else {
		s->not_before = req->after_index;
		s->floor_cluster = req->cluster_id;
		send_state(w, s);
	}
	walk_end(w);
}

static bool unlink_where(struct watches *w, const struct service_conn *conn, bool any_id,
			 uint64_t id)
{
	bool found = false;
	w->subs_last = NULL;
	for (struct watch_sub **pp = &w->subs; *pp != NULL;) {
		struct watch_sub *s = *pp;
		if (s->conn != conn || !(any_id || s->id == id)) {
			w->subs_last = s;
			pp = &s->next;
			continue;
		}
		found = true;
		if (any_id)
			s->conn = NULL; /* closed: a reader it kept names it no more */
		if (w->walking > 0) {
			s->conn = NULL; /* freed by walk_end() */
			w->n_ended++;
			w->subs_last = s;
			pp = &s->next;
		} else {
			*pp = s->next;
			sub_free(w, s);
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
	event_copy(&w->ring[(w->first + w->n) % w->cap], ev);
	w->n++;
	walk_begin(w);
	for (struct watch_sub *s = w->subs; s != NULL; s = s->next) {
		if (s->conn == NULL || !matches(s, ev->name))
			continue;
		if (s->in_state) {
			if (s->txn != NULL || s->draining)
				backlog_add(w, s, ev);
		} else if (pos_cmp(pos_of(ev), s->after) > 0) {
			send_to(w, s, ev);
			moved_to(s, ev);
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
	for (struct watch_sub *s = w->subs; s != NULL; s = s->next) {
		if (s->conn == NULL)
			continue;
		if (s->in_state && s->txn != NULL) {
			/* Its snapshot is from before the restore, whose
			 * changes were never applied here: let go of it now. */
			state_end(w, s);
			send_lost(w, s);
		} else if (s->in_state && s->draining) {
			/* what it is owed comes from the ring, which lost it */
			backlog_clear(s);
			s->backlog_full = true;
		} else if (!s->in_state && pos_cmp(s->after, w->base) < 0) {
			send_lost(w, s);
		}
	}
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

uint64_t watches_state_wait_ends(const struct watches *w)
{
	return w->state_wait_ends.total;
}

uint64_t watches_index_wait_ends(const struct watches *w)
{
	return w->index_wait_ends.total;
}
