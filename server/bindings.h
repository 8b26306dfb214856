/*
 * bindings.h: which client connection keeps each session, on the ready
 * leader. The connection a session's open or keepalive last came on keeps
 * it: revocation events of the session are pushed there. A bound session
 * (opened with bind_grace_ms: crash-fast release) is ended when that
 * connection closes and no other connection takes it over within the
 * grace: the leader proposes DROP_BOUND (fsm.c ends it as an expiry).
 *
 * The caller notes a keepalive's session when it accepts it (leases.h:
 * the secret matched), before the RENEW that renews it is proposed: a drop
 * not proposed by then is called off, and one proposed before precedes
 * that RENEW in the log, whose answer is then RAFTLOCK_ESESSION. The drop
 * also carries the lease deadline this leader had applied (from level 8),
 * and apply keeps a session that a RENEW moved on since (GUARANTEES 11a);
 * told so (bindings_drop_kept), this leader drops it again while no live
 * connection keeps it.
 *
 * While an end is pending the leader proposes an empty RENEW every half
 * heartbeat: libraft 0.22.1 puts an idle follower back to probing, where a
 * new entry waits for the next heartbeat (up to 100 ms more); the steady
 * trickle keeps replication streaming, so the drop commits at once.
 *
 * Soft state of this leader only: dropped when it stops being the ready
 * leader. A new leader learns a binding from the session's next keepalive;
 * until then a bound session lives by its TTL alone. Clients talk to the
 * leader only (a follower answers NOT_LEADER), so the connection that
 * keeps a session is always one of the leader's.
 *
 * Connections are opaque pointers to the caller; it tells bindings_closed()
 * the ids it was told it keeps (bindings_note) before the pointer dies.
 * Loop thread only.
 */
#ifndef RAFTLOCK_BINDINGS_H
#define RAFTLOCK_BINDINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "idmap.h"
#include "leases.h"
#include "node.h"
#include "timebase.h"

/* Drops proposed again for one close of a session's connection, each
 * after a drop that a renewal kept (bindings_drop_kept). Each needs a RENEW
 * that moved the lease between a drop's proposal and its apply, which the
 * keepalives already on their way at the close can do only a few times;
 * past this the session lives by its TTL. */
#define BINDINGS_REDROPS_MAX 8

struct bindings {
	struct node *node;
	struct timebase *clock;
	const struct leases *leases; /* the deadlines a drop carries */
	struct idmap sessions;       /* id -> struct binding (bindings.c) */
	struct timebase_timer timer;
	struct timebase_timer warm_timer; /* keeps replication streaming */
	bool ready;
	uint64_t drops; /* DROP_BOUND commands proposed */
};

/* clock, node and leases are borrowed until bindings_close(). */
void bindings_init(struct bindings *b, struct timebase *clock, struct node *node,
		   const struct leases *leases);

/* conn keeps session (grace_ms > 0: bound, ended grace_ms after conn
 * closes); called when its open applied or its keepalive was accepted.
 * Returns true when conn did not keep it before: the caller adds
 * the id to the list it passes to bindings_closed(). A pending end of the
 * session is called off. */
bool bindings_note(struct bindings *b, uint64_t session, void *conn, uint32_t grace_ms);

/* The connection that keeps session, or NULL. */
void *bindings_conn(const struct bindings *b, uint64_t session);

/* conn is closing; ids (n, borrowed) are the sessions it was told it
 * keeps (some may have moved on since). Each bound one it still keeps is
 * ended after its grace unless another connection takes it over. */
void bindings_closed(struct bindings *b, const void *conn, const uint64_t *ids, size_t n);

/* A DROP_BOUND of session that carried deadline `carried` applied and
 * kept it (FSM_EV_DROP_KEPT): a RENEW proposed before the drop moved its
 * lease, e.g. one of a keepalive that came on the connection before it
 * closed. If that drop is the last this leader proposed for the session
 * and no live connection keeps it, a new drop is proposed at once with
 * the deadline as now applied (at most a few times a close: then its TTL
 * ends it). */
void bindings_drop_kept(struct bindings *b, uint64_t session, uint64_t carried);

/* The session ended (FSM_EV_SESSION_GONE). */
void bindings_forget(struct bindings *b, uint64_t session);

void bindings_on_ready(struct bindings *b, bool ready);
void bindings_close(struct bindings *b);

#endif
