/*
 * feature_level.h: feature levels, for upgrades one node at a time
 * (docs/OPERATIONS.md, "Upgrades").
 *
 * Each build supports the commands up to its FEATURE_LEVEL. The cluster
 * records in its log the level every voter supports (Meta.feature_level;
 * none recorded reads as 1): a new cluster starts at its first leader's
 * level (INIT; start a new cluster with one build), and later a leader learns each
 * voter's level from its STATUS (followers.c asks every voter), and once
 * all of them, itself included, report a level above the recorded one it
 * proposes the lowest of them. A command is proposed only when its level
 * is at or below the recorded one, so a node never meets in its log a
 * command it cannot apply while the cluster is being upgraded. A node
 * whose build lacks the recorded level refuses to start (node.c), and one
 * that meets a SET_FEATURE_LEVEL above its own, or a command above it,
 * stops at that entry with a message (fsm.c).
 *
 * Levels: 1, every command up to the access rules' ACL_SET; 2, ACL_DELETE
 * and the membership book (MEMBER_ADD, MEMBER_REMOVE, MEMBER_JOIN); 3,
 * MULTI_ACQUIRE (lock sets, multilock.h), the deadlock check of a new
 * wait (deadlock.h), which apply runs only once level 3 is recorded: a
 * node of level 2 would queue the wait, and diverge; elections:
 * PROCLAIM and an ACQUIRE that publishes a value (Acquire.value, which an
 * older build would drop); revocation: REVOKE, REVOKE_DUE, DROP_BOUND, an
 * ACQUIRE with max_hold_ms or revoke_grace_ms and an OPEN_SESSION with
 * bind_grace_ms (fields an older build would drop, and so hold, or keep
 * bound, what the others revoke); 4, snapshot and backup images summed by
 * words (RLSNAP05, FEATURES_IMAGE_WORDS), which an older build refuses to
 * load: no new command; 5, the names a session holds or awaits in a table
 * of their own (session_locks.h, FEATURES_SESSION_LOCK_INDEX), moved there
 * from the session records by the apply that records level 5, and
 * RLSNAP06 images that carry that table: no new command; 6, snapshots whose
 * image is dumped off the loop and followed by the entries applied since
 * (snapshot_tail.h, FEATURES_SNAPSHOT_TAIL), which an older build cannot
 * load: no new command; 7, the images of those snapshots packed with zstd
 * (image_pack.h, FEATURES_PACKED_IMAGE), which an older build cannot load:
 * no new command; 8, a DROP_BOUND that carries the deadline its leader saw
 * (FEATURES_DROP_BOUND_DEADLINE: apply keeps a session renewed since, where
 * an older build would drop the field and end it); 9, the outcomes of a
 * session's commands and its queued lock sets in tables of their own
 * (outcomes.h, multilock.h, FEATURES_SEQ_TABLES), moved there by the apply
 * that records level 9, and RLSNAP07 images that carry those tables: no
 * new command; 10, a restored cluster's INIT forgets the saved cluster's
 * member book (FEATURES_RESTORED_BOOK), where an older build keeps it: no
 * new command; 11, MEMBER_REMOVE notes the id it removed in the book
 * (FEATURES_REMOVED_MEMBERS), where an older build does not: no new
 * command. A build made with
 * -DRAFTLOCK_FEATURE_LEVEL=1 (the test build raftlockd-level1) has level
 * 1: no ACL_DELETE, and it never proposes a membership command (a level-1
 * cluster refuses `member add`, `remove` and `--join` before the log, like
 * any request of a higher level).
 */
#ifndef RAFTLOCK_FEATURE_LEVEL_H
#define RAFTLOCK_FEATURE_LEVEL_H

#include <stdint.h>

#include "raftlock.pb-c.h"

#ifdef RAFTLOCK_FEATURE_LEVEL
#define FEATURE_LEVEL RAFTLOCK_FEATURE_LEVEL
#else
#define FEATURE_LEVEL 11u
#endif

#define FEATURES_MAX_NODES 16

/* Whether a ready leader tells its followers its term and applied index in
 * the STATUS it sends them (StatusRequest.leader_term/leader_applied, the
 * readiness reports of status.h). Builds older than those fields send
 * none; the level-1 test build stands for them, so that a test can put an
 * upgraded follower behind such a leader (test_sd_notify). */
#define FEATURES_READINESS_REPORTS (FEATURE_LEVEL >= 2u)

/* The level from which snapshots are RLSNAP05 images, summed by words
 * (image.h, store.h): an older build cannot read them. */
#define FEATURES_IMAGE_WORDS 4u

/* The level from which a session's names are rows of the session_locks
 * table, not a list in its record (session_locks.h): an acquire then
 * rewrites one row and a small record, however many names the session
 * has. */
#define FEATURES_SESSION_LOCK_INDEX 5u

/* The level from which a node dumps its snapshot's image off the loop and
 * sends it with a tail of the entries applied meanwhile (snapshot_tail.h,
 * image_build.h): an older build cannot load such a snapshot. */
#define FEATURES_SNAPSHOT_TAIL 6u

/* The level from which the image a snapshot dumped off the loop carries is
 * packed with zstd (image_pack.h): an older build cannot load it. */
#define FEATURES_PACKED_IMAGE 7u

/* The level from which a DROP_BOUND carries the lease deadline its leader
 * saw (DropBound.deadline), which apply checks. */
#define FEATURES_DROP_BOUND_DEADLINE 8u

/* The level from which what a session keeps by seq, the outcomes of its
 * commands (outcomes.h) and its queued lock sets (multilock.h), are rows
 * of tables of their own keyed by (session, seq), not lists in its
 * record: a command then reads and writes the rows of its own seq,
 * however many the session keeps (up to 8,192 outcomes when its client
 * holds its mark back, 4,096 sets of 64 names). */
#define FEATURES_SEQ_TABLES 9u

/* The level from which the INIT of a cluster restored from a backup image
 * forgets the member book the image carried (the saved cluster's members:
 * their client addresses, the data directories that claimed their ids),
 * keeping only the highest id used. The restored cluster's first leader
 * then records its own members from its --member list, so member list and
 * redirects never name the saved cluster's machines, which may still run
 * it. Decided by INIT's level, so every member of the restored cluster
 * decides alike (a build below it stops at that INIT). */
#define FEATURES_RESTORED_BOOK 10u

/* The level from which MEMBER_REMOVE notes the id it removed in the member
 * book (Meta.removed_members), and the apply that records it notes that
 * the ids used until then may have been removed unnoted: the leader then
 * answers a remove of an id never used "no member N", where it could not
 * tell one from a retried removal (member_book.h). */
#define FEATURES_REMOVED_MEMBERS 11u

/* The level from which apply refuses a wait that would close a cycle. */
#define FEATURES_DEADLOCK_CHECK 3u

/*
 * The one table of what each command needs. Every kind is listed: 0 means
 * a kind this table does not know (a command added without a level), which
 * test_feature_level catches by walking every kind of the proto. NOT_SET
 * (a request that proposes no command of its own) is level 1.
 */
static inline uint32_t features_command_level(Raftlock__Command__OpCase op)
{
	switch (op) {
	case RAFTLOCK__COMMAND__OP__NOT_SET:
	case RAFTLOCK__COMMAND__OP_INIT:
	case RAFTLOCK__COMMAND__OP_OPEN_SESSION:
	case RAFTLOCK__COMMAND__OP_RENEW:
	case RAFTLOCK__COMMAND__OP_CLOSE_SESSION:
	case RAFTLOCK__COMMAND__OP_EXPIRE_SESSION:
	case RAFTLOCK__COMMAND__OP_ACQUIRE:
	case RAFTLOCK__COMMAND__OP_RELEASE:
	case RAFTLOCK__COMMAND__OP_CANCEL_WAIT:
	case RAFTLOCK__COMMAND__OP_LOCK_DELAY_END:
	case RAFTLOCK__COMMAND__OP_WAIT_EXPIRE:
	case RAFTLOCK__COMMAND__OP_STORE_LIMIT:
	case RAFTLOCK__COMMAND__OP_ACL_SET:
	case RAFTLOCK__COMMAND__OP_SET_FEATURE_LEVEL: return 1u;
	case RAFTLOCK__COMMAND__OP_ACL_DELETE:
	case RAFTLOCK__COMMAND__OP_MEMBER_ADD:
	case RAFTLOCK__COMMAND__OP_MEMBER_REMOVE:
	case RAFTLOCK__COMMAND__OP_MEMBER_JOIN: return 2u;
	case RAFTLOCK__COMMAND__OP_MULTI_ACQUIRE:
	case RAFTLOCK__COMMAND__OP_PROCLAIM:
	case RAFTLOCK__COMMAND__OP_REVOKE:
	case RAFTLOCK__COMMAND__OP_REVOKE_DUE:
	case RAFTLOCK__COMMAND__OP_DROP_BOUND: return 3u;
	default: return 0u;
	}
}

/* The level an acquire needs for its fields: 3 for an election value or
 * a revocation limit, which an older build would not see. */
static inline uint32_t features_acquire_level(const Raftlock__Acquire *a)
{
	if (a->value[0] != '\0' || a->max_hold_ms != 0 || a->revoke_grace_ms != 0)
		return 3u;
	return 1u;
}

/* The level a whole command needs: its kind's, or more for a field that
 * an older build would not see (an election value, a revocation limit, a
 * bound session, a drop's deadline). */
static inline uint32_t features_level_of(const Raftlock__Command *cmd)
{
	uint32_t level = features_command_level(cmd->op_case);
	uint32_t fields = 1u;
	if (cmd->op_case == RAFTLOCK__COMMAND__OP_ACQUIRE && cmd->acquire != NULL)
		fields = features_acquire_level(cmd->acquire);
	else if (cmd->op_case == RAFTLOCK__COMMAND__OP_OPEN_SESSION && cmd->open_session != NULL &&
		 cmd->open_session->bind_grace_ms != 0)
		fields = 3u;
	else if (cmd->op_case == RAFTLOCK__COMMAND__OP_DROP_BOUND && cmd->drop_bound != NULL &&
		 cmd->drop_bound->deadline != 0)
		fields = FEATURES_DROP_BOUND_DEADLINE;
	return level == 0 || fields <= level ? level : fields;
}

/*
 * The level a client request needs: that of the command it becomes
 * (features_level_of, so the leader's refusal before the log and apply's
 * check read the same table); a request that proposes no command of its
 * own (a read, STATUS, a keepalive, a watch) needs level 1. 0 for an
 * envelope kind this function does not know (test_feature_level).
 */
uint32_t features_request_level(const Raftlock__Envelope *env);

/* A recorded level: none (0) is level 1. */
static inline uint32_t features_recorded(uint32_t meta_level)
{
	return meta_level ? meta_level : 1u;
}

/* What a leader heard from the voters, by node id. */
struct features {
	struct {
		uint64_t id;
		uint32_t level;
	} heard[FEATURES_MAX_NODES];
	unsigned n;
};

/* Notes that node id reports level. */
void features_note(struct features *f, uint64_t id, uint32_t level);

/* Forgets every report (a new term: reports are asked again). */
void features_clear(struct features *f);

/*
 * The level every voter of (ids, n_voters) supports, from the reports
 * (self's own: FEATURE_LEVEL): the lowest, or 0 while a voter has not
 * reported.
 */
uint32_t features_voters_level(const struct features *f, uint64_t self, const uint64_t *ids,
			       unsigned n_voters);

#endif
