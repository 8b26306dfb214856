/*
 * node.h: canonical raft wiring. Owns the raft instance (raft_uv on disk,
 * raft_uv_tcp between nodes, or peer_tls.c's mutual TLS when configured),
 * the store and the state machine; batches proposed commands into log
 * entries; tracks leadership; takes and restores snapshots.
 *
 * Leadership (DESIGN.md rule 10): a node is "ready" only while it is leader
 * and the barrier it proposed after its election has been applied. Only a
 * ready node proposes client commands; it stamps every entry with its
 * cluster time (rule 2), which continues from the highest value applied.
 *
 * All functions run on the loop thread.
 */
#ifndef RAFTLOCK_NODE_H
#define RAFTLOCK_NODE_H

#include <raft.h>
#include <raft/uv.h>
#include <stdbool.h>
#include <uv.h>

#include "append_order.h"
#include "apply_defer.h"
#include "cluster_clock.h"
#include "config.h"
#include "diskguard.h"
#include "feature_level.h"
#include "fsm.h"
#include "histogram.h"
#include "image_build.h"
#include "io_timing.h"
#include "join.h"
#include "list.h"
#include "return_hold.h"
#include "store.h"

struct node;

/* Completion of a proposed command. status is 0 with the command's result
 * once its entry applied; otherwise RAFTLOCK_ENOTLEADER (never appended),
 * RAFTLOCK_EUNKNOWN (appended, then leadership was lost: it may still
 * commit), RAFTLOCK_EUNAVAILABLE or RAFTLOCK_ESHUTDOWN, with result NULL.
 * Called exactly once for every accepted proposal. */
typedef void (*node_done_cb)(void *arg, int status, const Raftlock__Result *result);

struct node_hooks {
	void *arg;
	/* Apply events other than command results (pushes, deadlines). */
	void (*on_event)(void *arg, const struct fsm_event *ev);
	/* The node became ready, or stopped being ready. */
	void (*on_ready)(void *arg, bool ready);
	/* The store's content was replaced by a snapshot: rebuild indexes. */
	void (*on_restore)(void *arg);
	/* The store is about to close (the node stopped): end its readers. */
	void (*on_store_closing)(void *arg);
	/* The loop is held on purpose (an apply waiting for disk space),
	 * with why: called every DISKGUARD_CHECK_MS meanwhile. Optional. */
	void (*on_stalled)(void *arg, const char *why);
};

struct proposal;

/* Test-only fault injection, named in the environment variable
 * RAFTLOCK_TEST_FAULT (a comma-separated list); never set in production. */
#define NODE_FAULT_RESTORE 1u    /* "restore": runtime snapshot restores fail */
#define NODE_FAULT_DROP_INIT 2u  /* "drop-init": the first INIT is lost */
#define NODE_FAULT_SLOW_IMAGE 4u /* "slow-image": an image off the loop waits 300 ms */
/* "room-unchecked": --restore goes ahead without its room check, and so
 * meets a full disk as it writes, as when another writer fills it */
#define NODE_FAULT_ROOM_UNCHECKED 8u

struct node {
	uv_loop_t *loop;
	const struct config *cfg;
	struct node_hooks hooks;
	struct store store;
	struct fsm fsm;
	struct raft raft;
	struct raft_io io;
	struct raft_uv_transport transport;
	bool peer_tls; /* transport is peer_tls.c's, not peer_tcp.c's */
	/* On a --join first start: the members the leader named when the
	 * claim held (join.h), admitted on the raft port with peer TLS. */
	struct join_members join_members;
	struct raft_fsm raft_fsm;
	bool raft_started;
	/* A follower's applies held for a loop turn (apply_defer.h); the idle
	 * handle keeps the loop from blocking while some are. */
	struct apply_defer held;
	uv_idle_t held_idle;

	/* leadership */
	uv_check_t watch;
	bool leader;
	bool ready;
	raft_term term;
	struct raft_barrier *barrier; /* the post-election barrier in flight */

	struct timebase *tb;        /* time and timers (borrowed) */
	struct cluster_clock clock; /* runs while ready */

	/* the batch being filled, flushed before the loop blocks */
	uv_prepare_t flusher;
	uv_timer_t stall_timer; /* stall_cb: a line for each long stall of the loop */
	uint64_t stall_seen;    /* uv_now at its last run */
	uint64_t loop_stalls;   /* stalls of half an election timeout or more */
	uint8_t *batch;
	size_t batch_len, batch_cap;
	unsigned batch_n;
	struct node_waiter *batch_waiters;
	size_t batch_waiters_cap;
	/* Of the batch's commands, those that may wait (node_propose_call,
	 * parked), and when the first of them came: a batch of only those is
	 * held back for at most NODE_PARK_MS, for a command that cannot wait. */
	unsigned batch_parked;
	uint64_t batch_parked_ms;
	struct timebase_timer park_timer; /* wakes the loop when a hold ends */
	uint64_t commands_parked;         /* proposed parked */
	struct return_hold hold;          /* return_hold.h */
	struct timebase_timer hold_timer; /* wakes the loop when it ends */
	struct append_order order;        /* our own append goes after the sends */

	/* observed for the metrics */
	struct io_timing disk;   /* raft log appends (io_timing.h) */
	struct histogram apply;  /* one log entry through the state machine */
	raft_id leader_seen;     /* the last leader this node knew, 0: none yet */
	uint64_t leader_changes; /* times the known leader became another */
	/* How far the ready leader had applied as it last told this node (a
	 * report taken from the STATUS it sends, or the commit index of its
	 * answer to this node's: status.c keeps it): a follower has caught up
	 * once it has applied that far in the same term. */
	raft_term leader_said_term;
	uint64_t leader_said_commit;
	raft_term leader_reported_term; /* a report was taken in this term */
	raft_term caught_up_term;       /* a follower reached that in this term */

	struct list inflight; /* struct proposal, oldest first */
	unsigned inflight_n;
	uint64_t entries_proposed, commands_proposed;
	uint64_t snapshots_restored; /* restores that replaced the store */
	uint64_t snapshot_index;     /* of the last snapshot taken or restored */
	bool snapshot_soon;          /* one is wanted at the next applied entry */
	uint64_t snapshots_taken;
	/* A snapshot was taken and the heap not yet trimmed (trim_after_snapshot). */
	bool trim_due;
	/* The raft log held in memory (libraft frees entries only when a
	 * snapshot compacts the log): bytes and entries applied since the last
	 * snapshot, and an estimate of the bytes of the trailing entries that
	 * snapshot kept. */
	uint64_t log_bytes_new, log_entries_new, log_bytes_kept, log_entries_kept;
	/* The time the entries since the last snapshot took to apply: about
	 * what replaying them takes after a restart or a catch-up. */
	uint64_t apply_ns_new;
	/* Added to the log limit and to the replay limit until the next
	 * snapshot (snapshot_phase in node.c), computed at the first apply
	 * after a start or a restore. */
	uint64_t log_phase_bytes, replay_phase_ns;
	bool phase_due;
	/* The store's applied index once raft started (after any restore it
	 * made then): later entries are applied by this run, and report
	 * their changes to the watches (watch.h). */
	uint64_t start_applied;
	size_t state_bytes;       /* size of the last snapshot image */
	uint64_t dump_ns;         /* the time the last snapshot's image took to dump */
	struct image_build build; /* from FEATURES_SNAPSHOT_TAIL: images off the loop */
	uint64_t builds_taken;    /* snapshots whose image was dumped off the loop */
	unsigned trailing;        /* trailing entries asked of libraft */
	unsigned faults;          /* NODE_FAULT_*, from RAFTLOCK_TEST_FAULT */

	/* INIT (rule 7) of a new cluster, retried until it applies */
	bool init_needed;
	bool init_inflight;
	uint64_t init_retry_ms;

	struct diskguard disk_space; /* free space under the data directory */
	struct features features;    /* the voters' levels, heard as leader */
	bool level_inflight;         /* a SET_FEATURE_LEVEL proposed, not applied */
	int datadir_fd;              /* holds the data directory's LOCK until stopped */
	/* The member book's client addresses (member_book.h), read from LMDB
	 * in one transaction when first asked for, and again only after apply
	 * ran a membership command (fsm.member_changes) or a snapshot replaced
	 * the store: STATUS, readiness and followers.c ask many times a second. */
	struct node_member_addr *book; /* owned, book_n of them */
	size_t book_n;
	bool book_valid;
	uint64_t book_changes; /* fsm.member_changes when read */
	bool stopping;
	bool closing_raft;
	void (*stop_cb)(struct node *n);
	struct raft_transfer transfer;
	uint64_t hand_over_to;                /* node_stop_to's target */
	struct timebase_timer transfer_timer; /* draining, then a transfer that
						 libraft may never call back */
	uint64_t drain_until;
};

/*
 * Opens the data directory (checking it belongs to this cluster and node),
 * decides whether LMDB can be trusted, bootstraps a pristine node with the
 * configured members and starts raft. Returns 0 or RAFTLOCK_EDATA /
 * RAFTLOCK_EIO / RAFTLOCK_ECONFIG with a message naming the file in err.
 */
int node_start(struct node *n, uv_loop_t *loop, struct timebase *tb, const struct config *cfg,
	       const struct node_hooks *hooks, char *err, size_t errlen);

/*
 * Proposes one command for the next log entry. The command is packed at
 * once: it and everything it points to may be freed when this returns.
 * Returns 0 (cb will be called exactly once) or RAFTLOCK_ENOTLEADER /
 * RAFTLOCK_EUNAVAILABLE / RAFTLOCK_ESHUTDOWN / RAFTLOCK_ENOMEM (cb never
 * called).
 */
int node_propose(struct node *n, const Raftlock__Command *cmd, node_done_cb cb, void *arg);

#define NODE_PARK_MS 2 /* the longest hold of a parked call */

/*
 * As node_propose, for a client's call (service.c): the entry that answers
 * it expects the caller's next command soon (return_hold.h).
 *
 * parked: a command that may ride in a later entry: an
 * acquire that will queue behind the waiters the lock already has. A batch
 * of only such commands is not proposed until a command that cannot wait
 * joins it, or NODE_PARK_MS after the first of them came. On a contended
 * lock the next holder's release is such a command: the queuing acquire
 * then goes out in the release's entry, instead of in an entry of its own
 * that the release would wait behind (one commit a hand-over, not two).
 * Holding it back does not delay its grant: the waiters ahead of it are
 * granted first, each by an entry that takes the batch along. Only a
 * stale hint (node_lock_queued) costs it up to NODE_PARK_MS.
 */
int node_propose_call(struct node *n, const Raftlock__Command *cmd, node_done_cb cb, void *arg,
		      bool parked);

/*
 * Whether an acquire of `session` on lock `name` would queue behind the
 * lock's waiters in the state this node has applied (store_lock_queued):
 * a hint for node_propose_call's parked, which an entry in flight may have made
 * stale. False unless this node is the ready leader.
 */
bool node_lock_queued(struct node *n, const char *name, uint64_t session);

/* Proposes a command whose result nobody waits for (leader housekeeping). */
int node_propose_quiet(struct node *n, const Raftlock__Command *cmd);

/*
 * Reads the peer TLS files (peer-tls-cert, -key, -ca) again for the raft
 * connections set up from now on (peer_tls_reload). Returns 0 (also when
 * peer TLS is off: nothing to read), or -1 with a message in err and the
 * material in use unchanged.
 */
int node_reload_peer_tls(struct node *n, char *err, size_t errlen);

/*
 * Takes a snapshot at the next applied entry instead of waiting for the
 * snapshot threshold; a leader also proposes a barrier so that one comes.
 * For a follower far behind: it then gets a recent snapshot and a short log
 * tail, not an old snapshot and every entry since (replaying is far slower
 * than restoring).
 */
void node_snapshot_soon(struct node *n);

/*
 * The byte limit of the raft log held in memory: max(snapshot-log-bytes,
 * state image * snapshot-log-ratio / 100). Crossing it takes a snapshot
 * (whatever the entry count), and the trailing entries a snapshot keeps are
 * capped to a quarter of it.
 */
uint64_t node_log_limit(const struct node *n);

/*
 * As leader: voter id reports feature level `level` (feature_level.h). Once
 * every voter has reported a level above the one the cluster records, the
 * ready leader proposes the lowest of them.
 */
void node_note_feature_level(struct node *n, uint64_t id, uint32_t level);

/* The feature level the cluster records (its applied state). */
uint32_t node_cluster_feature_level(struct node *n);

/* Whether the recorded level admits cmd (feature_level.h): what the
 * leader proposes on its own checks this, as requests are checked before
 * they are proposed. */
bool node_level_admits(struct node *n, const Raftlock__Command *cmd);

/* The leader's cluster time now, in ms (cluster_clock.h). Only meaningful
 * while ready. */
uint64_t node_cluster_now(struct node *n);

/* Role name for STATUS: "leader", "follower", "candidate", "unavailable". */
const char *node_role(struct node *n);

/* The client address of the leader as this node knows it, or NULL. */
const char *node_leader_client_address(struct node *n, uint64_t *leader_id);

/* The client address of member id: from the --member list, or, for a
 * member added at run time, from the replicated member book (read once,
 * kept until apply changes it or a snapshot replaces the store: no LMDB
 * transaction per call); NULL when unknown. Borrowed: valid until the
 * node next applies an entry. */
const char *node_member_client_address(struct node *n, uint64_t id);

/*
 * Stops: no new proposals; the commands already proposed get their answers
 * (for up to a second); a leader then hands leadership to another voter
 * (libraft's pick; bounded by the election timeout; node_stop_to names the
 * voter, or none); then raft is closed, LMDB synced and
 * the clean-shutdown marker written. cb runs when done; the loop may then
 * be closed.
 */
void node_stop(struct node *n, void (*cb)(struct node *n));

/* The target of node_stop_to's hand-over: let libraft pick the voter; or
 * hand over to nobody (no other voter is alive: a transfer could only
 * time out, an election timeout later). */
#define NODE_HAND_OVER_ANY 0
#define NODE_HAND_OVER_NONE UINT64_MAX

/* node_stop, handing leadership to voter `target` (or as above). A target
 * that libraft refuses (no longer a voter) falls back to its pick. */
void node_stop_to(struct node *n, uint64_t target, void (*cb)(struct node *n));

#endif
