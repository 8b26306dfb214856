/*
 * followers.h: the leader's check that every follower still holds the log
 * that raft believes it has replicated to it.
 *
 * A member whose log went back in time (its data directory restored from
 * an older copy, or wiped and started again with --bootstrap by mistake:
 * a node with an empty data directory is otherwise refused, and a lost
 * machine comes back under a new id, docs/OPERATIONS.md). Raft assumes a
 * server never loses what it acknowledged, and libraft 0.22.1 keeps the
 * match index it had for the old incarnation: it then never sends the
 * new one any entry (see followers.c). The members checked are those of
 * the raft configuration (they change with `raftlock member`). While this node is the ready leader
 * it asks each other member's STATUS every FOLLOWERS_CHECK_MS over the client protocol; a member
 * whose raft log ends below the index this leader had matched on it (read before asking, in the
 * same term) has lost its data. The leader then hands leadership to the most up-to-date other
 * voter: a new leader starts with fresh replication state and brings the member back by snapshot
 * and log. libraft refuses writes while a transfer is pending: one lasts at most an election
 * timeout, and after one that did not hand over the next waits, backing off exponentially
 * (followers_backoff_ms). A member that lags by more than the snapshot threshold while this
 * leader's last snapshot is as old makes it take a new snapshot first (node_snapshot_soon), so that
 * the member restores a recent state instead of replaying a long log; but not while the member's
 * applied index moves (it may be writing a snapshot of its own, see docs/RAFT-NOTES.md).
 *
 * While this node follows a leader from which it took no readiness report
 * in the current term (status.h: a plaintext client port, where none is
 * taken, or a build older than the reports), the same connection machinery
 * asks that leader's STATUS every FOLLOWERS_CHECK_MS instead, for
 * status_note_leader_answer().
 *
 * Loop thread only. Every handle and request is released by
 * followers_close(); the loop can be closed after its close callbacks ran.
 */
#ifndef RAFTLOCK_FOLLOWERS_H
#define RAFTLOCK_FOLLOWERS_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "frame.h"
#include "log_rate.h"
#include "node.h"
#include "timebase.h"
#include "tls_stream.h"

#define FOLLOWERS_CHECK_MS 500
/* The longest frame read from a member: a STATUS answer of the largest
 * cluster, every address and name at its longest, packs to 1,726 bytes
 * (test_followers); a longer frame is not one (what is on a member's
 * client address may be anyone), and the connection is dropped. */
#define FOLLOWERS_ANSWER_MAX 8192
/* A member whose log rests at this leader's match index for it, behind
 * the leader, with the next entry still in the leader's log, this long is
 * stalled (followers.c, stalled()); a stall cures a member at most once
 * per FOLLOWERS_STALL_AGAIN_MS. */
#define FOLLOWERS_STALL_MS 3000
#define FOLLOWERS_STALL_AGAIN_MS 60000
/* After a hand-over that did not complete: wait this many election timeouts,
 * doubling after each failure, up to the cap (ms). */
#define FOLLOWERS_BACKOFF_ELECTIONS 2
/* Within this leadership: a member is alive when it answered this
 * leader's STATUS within this long (ms) and no connection to it failed or
 * ended since; gone when, after its last answer, a connection to it could
 * not be made (a stopped node refuses them, a cut-off one lets them time
 * out) or one that had answered ended or stopped answering. A connection
 * refused after it was made (TLS, a limit) says neither. */
#define FOLLOWERS_ALIVE_MS (3 * FOLLOWERS_CHECK_MS)
#define FOLLOWERS_BACKOFF_CAP_MS 60000

struct followers;

/* One other member, reached on its client address; a slot of
 * followers.members, free when !used. */
struct follower {
	struct followers *fw;
	bool used;
	struct config_member member; /* copied: members come and go */
	enum {
		FOLLOWER_IDLE,
		FOLLOWER_RESOLVING,
		FOLLOWER_CONNECTING,
		FOLLOWER_OPEN,
		FOLLOWER_CLOSING
	} state;
	uint64_t since_ms; /* when the current state began */
	uv_getaddrinfo_t resolve;
	uv_connect_t connect;
	uv_tcp_t tcp;
	uv_write_t write;
	/* client-tls on: the member's client port speaks TLS; the engine owns
	 * tcp once the connection is made. */
	struct tls_stream tls;
	struct tls_stream_write tls_write;
	bool tls_on;     /* the engine was started on tcp */
	bool tls_warned; /* a failed handshake was logged (until one succeeds) */
	uint8_t *out;    /* the request being written, owned until written */
	struct frame_reader reader;
	char in[4096];
	/* The STATUS request in flight. */
	bool asking;
	uint64_t asked_ms;
	uint64_t request_id;
	raft_term term;     /* this leader's term when it asked */
	raft_index matched; /* its match index for the member when it asked */
	uint64_t applied;   /* the member's applied index in its last answer */
	bool applied_seen;
	raft_index stall_at;     /* its last index when it was first seen resting */
	uint64_t stall_since_ms; /* then; 0: not resting */
	uint64_t stall_seen_ms;  /* when it was last seen resting */
	uint64_t stall_cured_ms; /* the last hand-over for it as stalled */
	/* Whether the member is alive, for a hand-over
	 * (followers_hand_over_target): */
	uint64_t answered_ms; /* its last STATUS answer to this node leading; 0: none */
	uint64_t lost_ms;     /* the last connection that failed or ended (ended()) */
	bool conn_answered;   /* the current connection has answered */
};

struct followers {
	uv_loop_t *loop;     /* connections to the members */
	struct timebase *tb; /* time and the check timer */
	const struct config *cfg;
	struct node *node;
	SSL_CTX *tls; /* NULL: the client ports are plaintext */
	struct timebase_timer timer;
	struct follower members[CONFIG_MAX_MEMBERS];
	unsigned n;
	struct raft_transfer transfer; /* the hand-over, owned by raft while on */
	bool transferring;             /* ours is pending (raft_transferee) */
	uint64_t target;               /* its target */
	uint64_t transfer_ms;          /* when it started */
	unsigned failures;             /* in a row, this leadership */
	uint64_t next_transfer_ms;     /* none before this (back-off) */
	struct log_rate log_answer;    /* answers that do not decode or are too long */
	bool was_leading;              /* at the last check */
	uint64_t leading_since_ms;     /* when check() first saw this leadership */
	raft_term leading_term;        /* its term */
	bool closing;
};

/* The wait before the next hand-over after `failures` (>= 1) in a row that
 * did not complete: FOLLOWERS_BACKOFF_ELECTIONS election timeouts, doubled
 * for each further failure, at most max(FOLLOWERS_BACKOFF_CAP_MS, first). */
uint64_t followers_backoff_ms(unsigned election_timeout_ms, unsigned failures);

/* Starts the periodic check, on tb's timers; connections on loop. With tls
 * (a client context, borrowed until followers_close; NULL: plaintext) the
 * members' client ports are spoken to in TLS: the member's certificate must
 * verify and carry the host of its client address, and this node presents
 * the context's certificate (client-tls-cert: in mutual mode it needs the
 * clientAuth usage). A handshake that fails is logged once until one
 * succeeds. Never fails. */
void followers_start(struct followers *fw, uv_loop_t *loop, struct timebase *tb,
		     const struct config *cfg, struct node *node, SSL_CTX *tls);

/* Connections started from now on use tls (borrowed likewise; NULL only if
 * it was NULL at start: a reload changes certificates, not the mode). */
void followers_set_tls(struct followers *fw, SSL_CTX *tls);

/* Judges a member's STATUS answer to the request f made (in term f->term,
 * with f->matched read before asking): a raft log that ends below what
 * this leader matched on it means lost data, and leadership is handed
 * over (subject to the back-off); a member far behind may make this leader
 * take a snapshot first. Called by the connection's reader; exposed for
 * tests. */
void followers_judge(struct follower *f, const Raftlock__StatusInfo *st);

/* For this leader about to stop (node_stop_to): the voter to hand
 * leadership to, the alive one with the highest match index; when no other
 * voter is alive and every one is gone, NODE_HAND_OVER_NONE (a transfer
 * could not complete, the node would wait an election timeout for it);
 * otherwise (not leading, or a voter whose state is not known yet)
 * NODE_HAND_OVER_ANY. */
uint64_t followers_hand_over_target(struct followers *fw);

/* Stops checking and closes every connection and the timer. */
void followers_close(struct followers *fw);

#endif
