/*
 * status.h: this node's own view of itself, read once for the STATUS
 * request (service.c) and the metrics exposition (metrics.c), so that the
 * two always report the same figures the same way. Reads raft's state and
 * one LMDB read transaction; no I/O, no side effect. Loop thread only.
 */
#ifndef RAFTLOCK_STATUS_H
#define RAFTLOCK_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node.h"

struct status {
	const char *role;           /* node_role(): static string */
	uint64_t term;              /* raft's current term */
	uint64_t commit_index;      /* raft's */
	uint64_t applied_index;     /* raft's last applied */
	uint64_t last_index;        /* of the local raft log */
	uint64_t leader_id;         /* 0: none known */
	const char *leader_address; /* its client address, "" if unknown; borrowed from cfg */
	bool ready;                 /* leader, and its post-election barrier applied */
	bool serving;               /* status_serving() */
	/* From the store. */
	uint64_t state_applied_index; /* applied to LMDB */
	uint64_t applied_time;        /* cluster time of the last applied entry */
	uint64_t cluster_time;        /* the leader's clock while ready, else applied_time */
	uint64_t next_token;
	uint64_t cluster_id;            /* Meta.cluster_id: 0 until INIT */
	uint32_t feature_level;         /* this build's (feature_level.h) */
	uint32_t cluster_feature_level; /* what the cluster records */
	uint64_t store_limit;           /* 0: none */
	uint64_t sessions, locks;
};

/* Fills *st. Never fails (the server aborts if LMDB cannot be read). */
void status_read(struct node *n, struct status *st);

/* A follower that caught up stays ready while within this many entries of
 * its leader's last report. */
#define STATUS_LAG_MAX 1024

/*
 * Whether this node can serve: it is the ready leader (its post-election
 * barrier applied), or it knows a leader and has applied at least as far
 * as that leader had applied when it last said so, in this term (so past
 * the leader's barrier); having done so once in a term, it stays ready
 * while it keeps within STATUS_LAG_MAX entries of the leader's reports
 * (remembered in the node). What the node waits for otherwise goes to why
 * (NUL-terminated, one line), for the readiness probe and systemd's
 * STATUS=; with true, why says what it serves as.
 */
bool status_serving(struct node *n, char *why, size_t len);

/*
 * A readiness report: the ready leader's term and applied index, carried
 * by the STATUS requests it sends this node's client port (followers.c)
 * every FOLLOWERS_CHECK_MS. Anyone who reaches the port can send such a
 * request, and a report decides this node's readiness (a forged one would
 * make a follower serve before it caught up, or never), so one is taken
 * only when it comes from the leader: this node follows a leader it knows
 * (not itself), term is its current raft term, and cert_cn, the common
 * name of the client certificate that the sender's TLS connection
 * presented and this node verified against client-tls-ca, is that
 * leader's: member_cn(<leader id>), as deploy/make-certs names a
 * member's certificate. Without such a certificate (cert_cn NULL or "":
 * a plaintext client port, or client-tls server without a CA; or another
 * name) the sender cannot be told from anyone else, and no report is
 * taken: this node then asks the leader's STATUS itself, over a connection
 * it opens to the leader's address (status_wants_leader_answer). cert_cn
 * is borrowed for the call. Returns whether the report was taken.
 */
bool status_note_leader(struct node *n, uint64_t term, uint64_t applied, const char *cert_cn);

/*
 * Whether this node should ask its leader's STATUS itself: it follows a
 * known leader (id in *leader_id) from which it took no report in the
 * current term. That is always so on a plaintext client port, where no
 * report is taken (status_note_leader), and behind a leader of a build
 * older than the reports (feature_level.h), which never sends one:
 * without the answer, such a follower would never be ready.
 */
bool status_wants_leader_answer(struct node *n, uint64_t *leader_id);

/*
 * The leader's answer to that STATUS: when it comes from the known leader,
 * in this node's term, and that leader is ready (its post-election barrier
 * applied), its commit index stands for a report (status_note_leader), so
 * the follower is judged as under a current leader, against an index at
 * least as far. Anything else is ignored.
 */
void status_note_leader_answer(struct node *n, const Raftlock__StatusInfo *st);

#endif
