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
 * A position is of one cluster's history: every event carries the
 * cluster id whose log its position is in (Meta.cluster_id, 0 before
 * INIT), and a resume names it. A cluster restored from a backup has a
 * new id and numbers its log from 1 again, so a resume of another
 * cluster's id, or of none (a client of an older build), gets
 * HISTORY_LOST and the state; a floor for a state (a state no older than
 * an index) of another cluster's history holds nothing.
 *
 * A state goes out in pages (at most WATCH_STATE_PAGE locks and
 * WATCH_STATE_PAGE_EVENTS holders and waiters: a lock with a long queue
 * spans pages), the first at once, the others from watches_pump() while
 * the connection has room, each from one read snapshot the subscription
 * holds until its CURRENT (at most WATCH_STATES_READING at once,
 * WATCH_STATES_PER_CONN for one connection; those that wait for one get
 * it the oldest first, within a connection too, at the next
 * watches_pump() when it was let go of outside one; a state that waits
 * for room on its connection is not in that order: a newer watch of
 * that connection can take a reader first); the changes of its locks made
 * meanwhile are kept for it and follow its CURRENT, paced the same way,
 * as are the changes a resume gets from the ring. A client that takes
 * nothing of its state for WATCH_STATE_STALL_MS, or not all of it within
 * WATCH_STATE_MAX_MS, or whose state holds the store's pages while the
 * map fills, is given up (watch_stalled_cb), as one that does not read
 * its answers is. A state that cannot start (no reader free within
 * WATCH_STATE_WAIT_MS, its index not applied within WATCH_INDEX_WAIT_MS)
 * ends its watch alone, with an answer the client library sends the
 * watch again on (watch_ended_cb); those ends are counted per bound and
 * logged (a warning at a bounded rate, saying how many).
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

#include "log_rate.h"
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

/* Whether conn has room for more of a state now (few bytes waiting). */
typedef bool (*watch_room_cb)(void *arg, const struct service_conn *conn);

/* conn's state is given up (why says which bound it passed): close it,
 * which ends its watches (watches_forget_conn). */
typedef void (*watch_stalled_cb)(void *arg, struct service_conn *conn, const char *why);

/* The watch (conn, id) ended (it is no longer registered): answer its
 * request status (a negative RAFTLOCK_E* code) with why (borrowed for the
 * call). */
typedef void (*watch_ended_cb)(void *arg, struct service_conn *conn, uint64_t id, int status,
			       const char *why);

/* Locks per page of a state, and holders and waiters (one event each:
 * at most RAFTLOCK_NAME_MAX + RAFTLOCK_VALUE_MAX bytes and some, so a page
 * stays within a few MiB, well below what a connection may have unsent,
 * however long a lock's queue); states read at once (each holds an LMDB
 * reader, of the 126 the environment has); how long a state may wait for
 * a client that reads nothing. */
#define WATCH_STATE_PAGE 128
#define WATCH_STATE_PAGE_EVENTS (8 * WATCH_STATE_PAGE)
#define WATCH_STATES_READING 8
#define WATCH_STATES_PER_CONN 2
#define WATCH_STATE_STALL_MS 30000
/* A state holds its snapshot's pages from reuse: at most this long, and
 * never once the store's file passes 3/4 of its map. */
#define WATCH_STATE_MAX_MS 300000
/* How long a state may wait to start, counted from when it first waited
 * whatever the reasons since: at all (a reader, room on its connection),
 * a state's longest time and a stall more (every reader taken when the
 * wait began is back by then, the given-up state's included, and the
 * oldest waiter gets the first one: RAFTLOCK_EOVERLOAD past it); for the
 * index it must be no older than, as long as a client may take nothing (a
 * node that has not applied within 30 s an index the client saw applied
 * elsewhere is cut off from its leader or far behind it:
 * RAFTLOCK_EUNAVAILABLE, and the library goes to another node). */
#define WATCH_STATE_WAIT_MS (WATCH_STATE_MAX_MS + WATCH_STATE_STALL_MS)
#define WATCH_INDEX_WAIT_MS WATCH_STATE_STALL_MS
/* Changes of the ring looked at per call while catching a subscriber up
 * (most may be of other prefixes). */
#define WATCH_RING_SCAN (16 * WATCH_STATE_PAGE)
/* Changes of a state's locks kept to follow its CURRENT (for each
 * subscription), and the memory they may take (slots, names and values:
 * watch.c backlog_cost); past either they must come from the ring (or
 * HISTORY_LOST). A change with a name of a few dozen bytes and no value
 * takes about 130 bytes, so 8 MiB is about what the count bound holds of
 * those; one with a name of 256 bytes and a value of 4 KiB takes 4.4 KiB,
 * and 65536 of them would be 290 MB for one slow client (a node serves
 * several): 8 MiB holds about 1,880 of them. */
#define WATCH_STATE_BACKLOG 65536
#define WATCH_STATE_BACKLOG_BYTES ((size_t)8 << 20)

struct watch_sub;

/* The watches one wait bound ended (state_wait in watch.c): all of them,
 * for the metrics, and those not yet said in a log line (a warning at
 * most every watches_pump, rate-limited: a line held back adds its count,
 * and what they waited for, to the next one). */
struct watch_wait_ends {
	uint64_t total;
	uint64_t unlogged;
	unsigned waited_for; /* what those not yet said waited for (1 << each reason) */
	struct log_rate log;
};

/* The states of one connection that wait for its share of the readers. */
struct watch_share_waits {
	const struct service_conn *conn;
	size_t n;
};

struct watches {
	struct store *store;
	watch_send_cb send;
	void *arg;
	Raftlock__WatchEvent *ring; /* cap slots; names owned */
	size_t cap, first, n;
	/* Every change after base is in the ring. */
	struct watch_pos base;
	struct watch_sub *subs, *subs_last; /* oldest first */
	unsigned walking;                   /* nested walks of subs under way (watch.c) */
	size_t n_ended;                     /* subscriptions ended during them, not yet freed */
	watch_room_cb room;                 /* NULL: always room */
	watch_stalled_cb stalled;
	watch_ended_cb ended;
	size_t states;            /* states under way */
	size_t states_reading;    /* of them, with a snapshot */
	size_t backlog_max;       /* WATCH_STATE_BACKLOG (tests make it small) */
	size_t backlog_bytes_max; /* WATCH_STATE_BACKLOG_BYTES (the same) */
	bool store_closed;        /* watches_end_states: no snapshot any more */
	/* Ended by WATCH_STATE_WAIT_MS (no reader or room: EOVERLOAD) and by
	 * WATCH_INDEX_WAIT_MS (the index not applied: EUNAVAILABLE). */
	struct watch_wait_ends state_wait_ends, index_wait_ends;
	/* The connection of each snapshot reader taken, NULL for a free one.
	 * One let go of while states that could take it wait (for any
	 * reader, or for its connection's share) is kept for them (kept:
	 * still its connection's, NULL once it closed, with no snapshot)
	 * until the next watches_pump, which walks them oldest first: no
	 * newer state takes it before them, not even one of the same
	 * connection. */
	const struct service_conn *readers[WATCH_STATES_READING];
	bool kept[WATCH_STATES_READING];
	size_t reader_waiters; /* states that wait for a reader or their connection's share */
	/* Of those, the ones that wait for their connection's share, in
	 * all and by connection (few: each held its share as they began to
	 * wait). A reader another connection lets go of is no use to them,
	 * so it is kept only for a state that waits for any reader. */
	size_t share_waiters;
	struct watch_share_waits *share_waits;
	size_t n_share_waits, share_waits_cap;
};

/* Keeps up to cap changes; the history starts after start_index (entries
 * up to it were applied before this node started: node.h start_applied).
 * Reads nothing yet. */
void watches_init(struct watches *w, size_t cap, struct store *store, uint64_t start_index,
		  watch_send_cb send, void *arg);
void watches_close(struct watches *w);

/* Paces the states by the connections' room (see above); without it a
 * state has room always, and a state that cannot start waits for ever. */
void watches_set_flow(struct watches *w, watch_room_cb room, watch_stalled_cb stalled,
		      watch_ended_cb ended);

/* Sends a page of every state under way whose connection has room, and
 * gives up the stalled ones. Returns whether a state could go on at once
 * (call again on the next loop turn); while watches_states() is not 0,
 * call it now and then anyway (a connection's room, a free reader). */
bool watches_pump(struct watches *w, uint64_t now_ms);
size_t watches_states(const struct watches *w);

/* Whether watches a wait bound ended are not yet said in the log (a line
 * held back by its rate): call watches_pump() now and then until they
 * are, even with no state left; watches_close() says the rest. */
bool watches_ends_unlogged(const struct watches *w);

/* The store closes next: every state lets go of its snapshot, and no
 * state gets one any more. */
void watches_end_states(struct watches *w);

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

/* Watches ended since watches_init because their state could not start
 * in time, for the metrics: no reader or room within WATCH_STATE_WAIT_MS
 * (RAFTLOCK_EOVERLOAD); the index not applied within WATCH_INDEX_WAIT_MS
 * (RAFTLOCK_EUNAVAILABLE). */
uint64_t watches_state_wait_ends(const struct watches *w);
uint64_t watches_index_wait_ends(const struct watches *w);

#endif
