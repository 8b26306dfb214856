/*
 * leases.h: the leader's side of time. Keeps every session's deadline, each
 * running lock-delay and each server-side wait deadline (in cluster time,
 * learnt from apply events on every node, so a new leader knows them);
 * batches keepalives into RENEW entries and acknowledges them only once the
 * entry applied (DESIGN.md rule 3); proposes EXPIRE_SESSION, LOCK_DELAY_END,
 * WAIT_EXPIRE and REVOKE_DUE when cluster time passes a deadline (rule 4). It proposes
 * commands; it never changes replicated state itself.
 *
 * Loop thread only.
 */
#ifndef RAFTLOCK_LEASES_H
#define RAFTLOCK_LEASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "timebase.h"
#include "fsm.h"
#include "idmap.h"
#include "node.h"
#include "timers.h"

/* Completion of a keepalive: status 0 with one status per session (0,
 * RAFTLOCK_ESESSION, or a refusal that renewed nothing) and its TTL, or a
 * nonzero status (not leader, unknown) with NULL arrays. Called exactly
 * once per accepted keepalive. */
typedef void (*leases_keepalive_cb)(void *arg, int status, const int32_t *statuses,
				    const uint32_t *ttls, size_t n);

/* An id of a keepalive that will be renewed (this leader knows it and its
 * secret matched): called before leases_keepalive() returns, and so before
 * the RENEW that renews it is proposed (bindings.h relies on it). */
typedef void (*leases_accepted_cb)(void *arg, uint64_t id);

struct renew_batch;

/* A client connection's keepalive budget: the session ids it named in the
 * current period of one second. Owned by the caller, zeroed to start. */
struct leases_budget {
	uint64_t start; /* timebase_now() ms */
	size_t used;
};

/* Keepalive figures of this node as leader, for metrics. */
struct leases_stats {
	uint64_t renew_commands;      /* RENEW commands proposed */
	uint64_t renew_ids;           /* sessions named in them */
	uint64_t renew_ids_max;       /* the most one of them named */
	uint64_t renew_windows_split; /* windows too large for one flush */
	uint64_t ids_unknown;         /* keepalive ids not known, answered at once */
	uint64_t ids_refused;         /* keepalive ids refused past a budget */
	uint64_t ids_denied;          /* keepalive ids and mutations without their secret */
};

struct leases {
	struct timebase *clock;
	struct node *node;
	unsigned window_ms;
	struct idmap sessions; /* id -> struct lease (leases.c) */
	uint64_t expiry_floor; /* no session is due for expiry before this */
	struct timers timers;  /* lock-delay and wait deadlines */
	struct timebase_timer renew_timer;
	struct timebase_timer expiry_timer;
	struct renew_batch *pending;  /* keepalives waiting for the window */
	struct renew_batch *flushing; /* a batch partly proposed (renew_flush) */
	uint32_t window_gen;          /* marks of the windows, in struct lease */
	struct leases_stats stats;
	bool ready;
};

/* The leases of node, on clock (both borrowed until leases_close()). The
 * node provides proposals (node_propose, node_propose_quiet), the cluster
 * time (node_cluster_now) and the store to rebuild from. */
void leases_init(struct leases *l, struct timebase *clock, struct node *node, unsigned window_ms);

/* Rebuilds the indexes from the store (at start and after a restore). */
void leases_rebuild(struct leases *l);

void leases_on_event(struct leases *l, const struct fsm_event *ev);
void leases_on_ready(struct leases *l, bool ready);

/*
 * Renews the sessions (ids copied) for a connection whose budget is
 * *budget; secrets (n_secrets of them, borrowed for the call) are
 * parallel to ids. Bounded work per request and per window (GUARANTEES,
 * keepalive limits):
 *   - an id this leader does not know (not in its applied state) gets
 *     leases_unknown_status() at once and is never replicated;
 *   - an id without its session's secret (missing, wrong, or a session
 *     opened without one) gets RAFTLOCK_EPERM at once and is never
 *     replicated (rule 14);
 *   - a session named several times in a window is renewed once;
 *   - the connection may name cfg->keepalive_max_ids ids per second: the
 *     ids past it get RAFTLOCK_ELIMIT, unreplicated; a request made with
 *     the budget already spent is refused whole;
 *   - the window's renewals go out in RENEW commands of at most
 *     RENEW_MAX_IDS sessions each.
 * accepted (may be NULL) is told each id that will be renewed, with arg,
 * before this returns. Returns 0 (cb called once: after the RENEW commands
 * applied or failed, or before this returns when no id needs a RENEW) or
 * RAFTLOCK_ELIMIT (budget spent) / RAFTLOCK_ENOTLEADER /
 * RAFTLOCK_EUNAVAILABLE / RAFTLOCK_ENOMEM (neither callback called).
 */
int leases_keepalive(struct leases *l, struct leases_budget *budget, const uint64_t *ids,
		     const ProtobufCBinaryData *secrets, size_t n_secrets, size_t n,
		     leases_accepted_cb accepted, leases_keepalive_cb cb, void *arg);

/* The answer for session id, which this node does not know (not in its
 * applied state): RAFTLOCK_ESESSION below the applied next_session (the
 * session was given out and ended: final), RAFTLOCK_EUNAVAILABLE from it
 * on (not given out here yet: its open may be on its way, or a newer
 * leader opened it while this one was cut off; the client tries again,
 * elsewhere). Reads the node's store. */
int leases_unknown_status(struct leases *l, uint64_t id);

/* The lease deadline (cluster ms) of live session id as this node applied
 * it, 0 for a session it does not know. */
uint64_t leases_deadline(const struct leases *l, uint64_t id);

/*
 * Rule 14: whether secret (borrowed for the call) is the secret of
 * session id, checked in constant time against the digest the session
 * was opened with. Returns 0 (it is), RAFTLOCK_EPERM (missing, wrong, or
 * a session opened without a secret) or RAFTLOCK_ESESSION (no such live
 * session in the applied state: apply answers it).
 */
int leases_check_secret(struct leases *l, uint64_t id, const ProtobufCBinaryData *secret);

/* The bind grace of live session id (OpenSession.bind_grace_ms), 0 for a
 * session that is not bound or not known. */
uint32_t leases_bind_grace(struct leases *l, uint64_t id);

/* Whether the budget is spent for the rest of its period (which begins
 * with the first keepalive after the previous one ended). */
bool leases_budget_spent(const struct leases *l, const struct leases_budget *budget);

/* Number of live sessions this node knows of. */
size_t leases_session_count(const struct leases *l);

/* Stops the timers; pending keepalives get RAFTLOCK_ESHUTDOWN. */
void leases_close(struct leases *l);

#endif
