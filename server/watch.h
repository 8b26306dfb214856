/*
 * watch.h: watches on lock names (docs/GUARANTEES.md, watches). Every
 * change the state machine reports (FSM_EV_CHANGE: grants, releases,
 * expiries, queue changes, revocations) goes into a bounded ring of recent
 * changes and, at once, to the subscribers whose prefix starts its name.
 * Every node fills its ring at apply, from the same log, so a position
 * (raft index, rank in the entry) names the same change on every node and
 * a client can resume on any of them after a reconnect.
 *
 * A subscriber asks for the changes after a position. When the ring
 * still holds them all, it gets them; when not (the ring moved on, the
 * node restarted or restored a snapshot since), it gets HISTORY_LOST, then
 * the current state of its locks (HOLDING and WAITING) and CURRENT, at the
 * position of that state, then the changes after it. A subscriber without a
 * position gets the current state and CURRENT first.
 *
 * The registry never looks inside a connection (an opaque pointer here):
 * it sends through the callback it was given. Loop thread only; aborts on
 * out of memory (server rule).
 */
#ifndef RAFTLOCK_WATCH_H
#define RAFTLOCK_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftlock.pb-c.h"
#include "store.h"

/* The offset of a state (HOLDING, WAITING, CURRENT): after every change of
 * its entry. */
#define WATCH_OFFSET_END UINT32_MAX

struct service_conn;

struct watch_pos {
	uint64_t index;
	uint32_t offset;
};

/* Sends ev (borrowed for the call) to the watch (conn, id). */
typedef void (*watch_send_cb)(void *arg, struct service_conn *conn, uint64_t id,
			      const Raftlock__WatchEvent *ev);

struct watch_sub;

struct watches {
	struct store *store;
	watch_send_cb send;
	void *arg;
	Raftlock__WatchEvent *ring; /* cap slots; names owned */
	size_t cap, first, n;
	/* Every change after base is in the ring. */
	struct watch_pos base;
	struct watch_sub *subs;
	unsigned walking; /* nested walks of subs under way (watch.c) */
	size_t n_ended;   /* subscriptions ended during them, not yet freed */
};

/* Keeps up to cap changes; the history starts after start_index (entries
 * up to it were applied before this node started: node.h start_applied).
 * Reads nothing yet. */
void watches_init(struct watches *w, size_t cap, struct store *store, uint64_t start_index,
		  watch_send_cb send, void *arg);
void watches_close(struct watches *w);

/* Subscribes (conn, id) and sends what req asks for first (see above).
 * req is borrowed. */
void watches_add(struct watches *w, struct service_conn *conn, uint64_t id,
		 const Raftlock__WatchRequest *req);

/* Ends the watch (conn, id); false when there is none. */
bool watches_cancel(struct watches *w, const struct service_conn *conn, uint64_t id);

/* The connection closed: its watches end. */
void watches_forget_conn(struct watches *w, const struct service_conn *conn);

/* A change, from apply (FSM_EV_CHANGE): kept and sent. */
void watches_on_change(struct watches *w, const Raftlock__WatchEvent *ev);

/* The store was replaced by a snapshot: the history before it is gone;
 * subscribers behind it get HISTORY_LOST and the new state. */
void watches_restored(struct watches *w);

/* The watches of conn. */
size_t watches_on_conn(const struct watches *w, const struct service_conn *conn);

/* Changes in the ring and subscribers, for the metrics. */
size_t watches_kept(const struct watches *w);
size_t watches_subscribers(const struct watches *w);

#endif
