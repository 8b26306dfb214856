/*
 * fsm.h: the lock state machine. Applies committed log entries to the store.
 *
 * Pure and deterministic: no clock, no randomness, no I/O but LMDB. The only
 * time it knows is the cluster time carried by each entry. Every command has
 * a defined outcome: errors are results, never a failed apply (a node that
 * cannot apply an entry it does not understand stops: see fsm_apply_raw).
 *
 * What the outside world needs to learn from an apply (a command's result,
 * a grant to push to a waiter, a session's new deadline) is reported through
 * an event sink, called during the apply; event data is borrowed for the
 * duration of the call.
 */
#ifndef RAFTLOCK_FSM_H
#define RAFTLOCK_FSM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "contention.h"
#include "histogram.h"
#include "raftlock.pb-c.h"
#include "store.h"

/* Quotas, checked inside apply so every node decides alike. They are part
 * of the replicated semantics: changing them is a format change. The
 * settings max-sessions-per-identity and max-waiters-per-lock are not:
 * the proposing leader writes its own into the entry (OpenSession,
 * Acquire), and apply uses what the entry says. */
#define FSM_MAX_SESSIONS 1000000u
#define FSM_MAX_LOCKS 10000000u
#define FSM_MAX_WAITERS 100000u      /* per lock: the ceiling of max-waiters-per-lock */
#define FSM_MAX_HOLDERS 100000u      /* per lock */
#define FSM_MAX_OUTCOMES 4096u       /* remembered per session: acquires */
#define FSM_MAX_SESSION_LOCKS 65536u /* locks held or awaited per session */
/* RELEASE and CANCEL_WAIT may fill the outcome table this much further, so
 * that letting go is not refused when acquires have filled it; the sum is
 * the hard cap of one session's table. CLOSE_SESSION needs no record. */
#define FSM_OUTCOME_HEADROOM 4096u
/* Acknowledged queued acquires (Command.acked) one command may carry. */
#define FSM_MAX_ACKED 256u

/* Store full: a leader proposes STORE_LIMIT = its map-size / this share;
 * past that many bytes of records (store_record_bytes) new sessions, new
 * holders and new waiters are refused with RAFTLOCK_ELIMIT. A quarter
 * leaves room for LMDB's B-tree pages (half-full after splits), the pages
 * a transaction copies before it commits, and the growth of what still
 * applies when full (releases, outcomes, lock-delays). */
#define FSM_STORE_LIMIT_SHARE 4u

enum fsm_event_type {
	FSM_EV_RESULT,       /* command `command` of the entry: result */
	FSM_EV_PUSH,         /* final outcome of a queued acquire (session, seq) */
	FSM_EV_SESSION,      /* session's deadline is now `deadline` */
	FSM_EV_SESSION_GONE, /* session closed or expired */
	FSM_EV_LOCK_DELAY,   /* lock `name` is delayed until `deadline` (0: ended) */
	/* Revocation: the grant (name, token) of `session` through handle
	 * `owner` is revoked at `deadline` (cluster time); was revoked; its
	 * holder is asked to release before `deadline`. */
	FSM_EV_REVOKE_DEADLINE,
	FSM_EV_REVOKED,
	FSM_EV_RELEASE_REQUESTED,
	FSM_EV_CHANGE,        /* a change of lock `name` for watches: `change` */
	FSM_EV_WAIT_DEADLINE, /* waiter (name, session, seq) times out at deadline */
	/* A DROP_BOUND of session kept it: a RENEW had moved its lease past
	 * `deadline`, the one the drop carried (rule 11a). The leader drops it
	 * again if no live connection keeps it (bindings.h). */
	FSM_EV_DROP_KEPT
};

struct fsm_event {
	enum fsm_event_type type;
	unsigned command;
	uint64_t session;
	uint64_t seq;
	uint64_t deadline;
	uint32_t ttl_ms; /* FSM_EV_SESSION */
	/* FSM_EV_SESSION of an open (opened): the session's secret digest
	 * (GUARANTEES rule 14), digest_len 0 for a session without one. */
	bool opened;
	const uint8_t *digest;
	size_t digest_len;
	const char *name;
	const Raftlock__Result *result;
	uint64_t owner, token; /* the revocation events */
	/* FSM_EV_SESSION of an open: the session's bind grace (0: not bound). */
	uint32_t bind_grace_ms;
	/* FSM_EV_CHANGE: the change at its log position (index, offset);
	 * its name points at `name`. Emitted on every node, in log order. */
	const Raftlock__WatchEvent *change;
};

/* emit is called during the apply; the event and everything it points to
 * (names, results, changes: parts of the entry or of records) are valid
 * only during the call, so a sink copies what it keeps. */
struct fsm_sink {
	void (*emit)(void *arg, const struct fsm_event *ev);
	void *arg;
};

/* What this node's applies did, for the metrics: observed, never read
 * back by apply (so they cannot make nodes diverge). Durations are in
 * cluster time, the only time apply knows. Entries replayed at a start
 * count again; a snapshot restore counts nothing. */
struct fsm_stats {
	uint64_t grants;              /* holders added (re-entries not counted) */
	uint64_t waits;               /* acquires queued */
	uint64_t expiries;            /* sessions expired (not closed) */
	uint64_t lock_delays;         /* lock-delays started by an expiry or a revocation */
	uint64_t revocations;         /* grants revoked (admin, maximum hold time) */
	uint64_t dropped;             /* bound sessions ended for their connection */
	struct histogram wait;        /* queued to granted */
	struct histogram hold;        /* granted to released (or its session ended) */
	struct contention contention; /* waits by lock name prefix */
};

struct fsm {
	struct store *store;
	uint64_t store_refusals; /* commands refused for the store limit */
	/* Membership commands applied: the member book (member_book.h) may
	 * have changed. Read by node.c to know when its copy is stale. */
	uint64_t member_changes;
	struct fsm_stats stats;
	/* fsm_apply_raw decodes its entry here and drops it after the apply:
	 * one chunk kept for all entries, not a malloc per field. */
	struct arena entry_arena;
};

void fsm_init(struct fsm *f, struct store *store);

/* Frees what fsm_init and the applies kept; the store is the caller's. */
void fsm_fini(struct fsm *f);

/* The store limit a leader with this map size proposes. */
uint64_t fsm_store_limit(size_t map_size);

/*
 * Applies one decoded entry at log index `index` in one write transaction,
 * recording index as applied. An entry at or below the store's applied index
 * was applied before a restart: it is skipped and reports nothing.
 */
void fsm_apply(struct fsm *f, uint64_t index, const Raftlock__LogEntry *entry,
	       const struct fsm_sink *sink);

/*
 * Decodes and applies an entry as stored in the log. A payload that does not
 * decode, or is of a newer format, stops the node with a message: applying
 * anything else would make this node diverge from the others.
 */
void fsm_apply_raw(struct fsm *f, uint64_t index, const void *buf, size_t n,
		   const struct fsm_sink *sink);

/*
 * Turns the state just loaded from a backup image (image_sum: its
 * checksum) into the base of a new cluster, in the load's write
 * transaction txn (store_load_begin), which the caller commits: every
 * session is gone (with its lease, nonce, outcomes and waits), every lock
 * that had a holder has none and is under lock-delay for its own delay
 * and at least the longest TTL of its holders' sessions, counted from the
 * image's cluster time; the image's next_token becomes the floor that the
 * new cluster's INIT starts the counter at or above; the applied index is
 * 0, the cluster's name and id are unset until INIT. Deterministic: the
 * same image gives every member the same base.
 */
void fsm_restore_base(struct fsm *f, MDB_txn *txn, uint64_t image_sum);

/* The applied index recorded in the store. */
uint64_t fsm_applied_index(struct fsm *f);

#endif
