/*
 * removal.h: a member that the cluster removed learns it and leaves
 * (docs/OPERATIONS.md, "Removing a member").
 *
 * `raftlock member remove ID` commits MEMBER_REMOVE of ID (the id is never
 * used again), then the leader takes ID out of the raft configuration
 * (members.h). The removed node applies the first, a committed entry that
 * no leader rolls back, but libraft sends it nothing after the second:
 * not the configuration that lacks it, not its commit. Left alone it
 * would keep its last known leader (a standby never campaigns), say it is
 * ready and serve stale reads forever. So:
 *   - once this node applied MEMBER_REMOVE of its own id (fsm.h's
 *     self_removed) it is *retired*: REMOVED is written in its data
 *     directory, and it answers clients ESHUTDOWN (they try another
 *     node) and is not ready (status.h);
 *   - a retired node leaves once raft confirms it is out, or is about to
 *     be: its committed configuration lacks it, or no leader has reached
 *     it for an election timeout (the leader stops replicating to it as
 *     soon as it appends the configuration without it), or it is the
 *     leader itself (it then hands leadership over as it stops). The
 *     process then exits with REMOVAL_EXIT_STATUS, which the systemd unit
 *     does not restart (RestartPreventExitStatus=);
 *   - a node whose data directory holds REMOVED refuses to start, with
 *     the same status and message.
 * Nothing else retires a node: a configuration that libraft appended but
 * did not commit, or a member added and not yet promoted (a standby that
 * a snapshot's older configuration leaves out), never does.
 */
#ifndef RAFTLOCK_REMOVAL_H
#define RAFTLOCK_REMOVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* raftlockd's exit status when this node was removed from the cluster
 * (docs/man/raftlockd.8.in): not a failure that a restart would mend. */
#define REMOVAL_EXIT_STATUS 3

/* What removal_should_leave() judges, read from raft by node.c. */
struct removal_view {
	bool retired;         /* MEMBER_REMOVE of this node applied */
	bool leader;          /* raft_state() is RAFT_LEADER */
	bool follower;        /* raft_state() is RAFT_FOLLOWER */
	uint64_t silent_ms;   /* since a leader last reached this follower */
	unsigned election_ms; /* the election timeout */
	bool committed_known; /* raft has a committed configuration */
	bool in_committed;    /* ... and this node is in it */
};

/* Whether a node in state v should stop now. Never true unless retired. */
bool removal_should_leave(const struct removal_view *v);

/* The line logged and printed when the node stops for it (into out, len
 * bytes, NUL-terminated). */
void removal_message(char *out, size_t len, uint64_t id);

/*
 * Records in data_dir that member id was removed (REMOVED, written whole
 * and synced). Returns 0, or -1 with errno set.
 */
int removal_mark(const char *data_dir, uint64_t id);

/*
 * Whether data_dir holds REMOVED: true with the message to print in out
 * (len bytes, NUL-terminated), naming the id REMOVED names.
 */
bool removal_marked(const char *data_dir, char *out, size_t len);

#endif
