/*
 * outcomes.h: what a session's commands were answered, kept for retries
 * (GUARANTEES rule 6: exactly once by (session, seq)).
 *
 * Below feature level FEATURES_SEQ_TABLES they are the list
 * SessionRecord.outcomes, so every command of a session decodes and
 * re-encodes all of them with its record: up to 8,192 when a client holds
 * its mark back, about a millisecond of every node's apply a command. From
 * that level on they are rows of the store's outcomes table, keyed by
 * (session, seq), and the record keeps only their number (outcome_count)
 * and how many of them are pending (pending_outcomes). The apply that
 * records the level moves every list into the table (outcomes_move), on
 * every node at the same entry.
 *
 * Which records exist is the rule's, at either level: a record goes once
 * its seq is below the session's mark (ack_below) unless it is pending (a
 * queued acquire whose final outcome is not known) or queued (a final one
 * the client has not acknowledged, in a session that acknowledges queued
 * acquires). In the table that is kept true as it changes, so no step
 * walks the session's records: the mark's rise sweeps only the seqs it
 * passed, and a record below the mark goes when it stops being pending or
 * queued. (The list, below the level, is pruned whole when the mark rises
 * or an acknowledgement comes, as before: a final record below the mark
 * may wait there for the next prune.)
 *
 * Functions that change the outcomes change sess (the list, or its
 * counts): the caller stores the record afterwards, as for any other
 * change of it. They run on the loop thread, inside the transaction given
 * (a read transaction for outcomes_find); out of memory and store errors
 * abort the node (records.h, store.h).
 */
#ifndef RAFTLOCK_OUTCOMES_H
#define RAFTLOCK_OUTCOMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftlock.pb-c.h"
#include "store.h"

struct outcomes {
	struct store *store;
	MDB_txn *txn;
	bool indexed; /* the table, not the list */
};

/* The outcomes' home at the feature level recorded in m. */
struct outcomes outcomes_at(struct store *st, MDB_txn *txn, const Raftlock__Meta *m);

/* The outcome of seq, or NULL. Release it with outcomes_release() before
 * sess changes or is freed: below the level it is sess's own. */
const Raftlock__Outcome *outcomes_find(const struct outcomes *oc,
				       const Raftlock__SessionRecord *sess, uint64_t seq);
void outcomes_release(const struct outcomes *oc, const Raftlock__Outcome *o);

/* Records the outcome of seq, or replaces it (records.h,
 * records_set_outcome: a new record of a queued acquire in a session that
 * acknowledges them is marked queued; a replacement keeps the mark). */
void outcomes_set(const struct outcomes *oc, Raftlock__SessionRecord *sess, uint64_t seq,
		  const Raftlock__Result *res, bool pending);

/* The commands of one entry: the client acknowledges the final outcomes
 * of the queued acquires acked[0..n_acked) and moves its mark to
 * ack_below (only upwards); records that may go then go. */
void outcomes_ack(const struct outcomes *oc, Raftlock__SessionRecord *sess, const uint64_t *acked,
		  size_t n_acked, uint64_t ack_below);

/* How many records the session keeps, and whether one is pending (the
 * session waits on a lock). */
size_t outcomes_count(const struct outcomes *oc, const Raftlock__SessionRecord *sess);
bool outcomes_any_pending(const struct outcomes *oc, const Raftlock__SessionRecord *sess);

/* The session ends: its rows go (its record goes with the caller). */
void outcomes_end(const struct outcomes *oc, const Raftlock__SessionRecord *sess);

/* Moves every session's list into the table and sets its counts, after
 * pruning it by its mark: the apply that raises the recorded level to
 * FEATURES_SEQ_TABLES, once. */
void outcomes_move(struct store *st, MDB_txn *txn);

#endif
