/* outcomes.c: see outcomes.h. */
#include "outcomes.h"

#include <stdlib.h>

#include "feature_level.h"
#include "grow.h"
#include "log.h"
#include "records.h"

struct outcomes outcomes_at(struct store *st, MDB_txn *txn, const Raftlock__Meta *m)
{
	return (struct outcomes){.store = st,
				 .txn = txn,
				 .indexed = features_recorded(m->feature_level) >=
					    FEATURES_SEQ_TABLES};
}

const Raftlock__Outcome *outcomes_find(const struct outcomes *oc,
				       const Raftlock__SessionRecord *sess, uint64_t seq)
{
	if (!oc->indexed)
		return records_find_outcome(sess, seq);
	return store_get_outcome(oc->store, oc->txn, sess->id, seq);
}

void outcomes_release(const struct outcomes *oc, const Raftlock__Outcome *o)
{
	if (oc->indexed && o != NULL)
		raftlock__outcome__free_unpacked((Raftlock__Outcome *)o, NULL);
}

/* A record of the table is gone (never a pending one): its session
 * counts one less. */
static void note_gone(Raftlock__SessionRecord *sess)
{
	if (sess->outcome_count == 0)
		log_fatal("session %llu had more outcomes than its record counts: damaged store",
			  (unsigned long long)sess->id);
	sess->outcome_count--;
}

void outcomes_set(const struct outcomes *oc, Raftlock__SessionRecord *sess, uint64_t seq,
		  const Raftlock__Result *res, bool pending)
{
	if (!oc->indexed) {
		records_set_outcome(sess, seq, res, pending);
		return;
	}
	/* A command's own outcome is new (dedup found none): one search adds
	 * it. A queued acquire's final outcome replaces its pending one. */
	Raftlock__Outcome *o = records_new_outcome(seq, pending && sess->acks_queued);
	records_fill_outcome(o, res, pending);
	if (store_add_outcome(oc->store, oc->txn, sess->id, o)) {
		sess->outcome_count++;
		sess->pending_outcomes += pending;
		raftlock__outcome__free_unpacked(o, NULL);
		return;
	}
	raftlock__outcome__free_unpacked(o, NULL);
	o = store_get_outcome(oc->store, oc->txn, sess->id, seq); /* there: not added */
	bool was_pending = o->pending;
	records_fill_outcome(o, res, pending); /* keeps its queued mark */
	if (pending && !was_pending)
		sess->pending_outcomes++;
	if (!pending && was_pending)
		sess->pending_outcomes--;
	store_put_outcome(oc->store, oc->txn, sess->id, o);
	if (was_pending && !pending && !o->queued && seq < sess->ack_below) {
		/* final below the mark, and nobody's acknowledgement to wait
		 * for: the next prune takes it (outcomes.h) */
		uint64_t *due =
			realloc(sess->prune_due, (sess->n_prune_due + 1) * sizeof *sess->prune_due);
		if (due == NULL)
			log_fatal("out of memory");
		due[sess->n_prune_due++] = seq;
		sess->prune_due = due;
	}
	raftlock__outcome__free_unpacked(o, NULL);
}

/* store_sweep_outcome_marks(): the records the mark passes that may go. */
static bool prunable(void *arg, const struct outcome_marks *o)
{
	Raftlock__SessionRecord *sess = arg;
	if (o->pending || o->queued)
		return false;
	note_gone(sess);
	return true;
}

void outcomes_ack(const struct outcomes *oc, Raftlock__SessionRecord *sess, const uint64_t *acked,
		  size_t n_acked, uint64_t ack_below)
{
	uint64_t mark = sess->ack_below;
	bool rises = ack_below > mark;
	if (!oc->indexed) {
		for (size_t i = 0; i < n_acked; i++)
			records_ack_outcome(sess, acked[i]);
		if (rises)
			sess->ack_below = ack_below;
		if (rises || n_acked > 0)
			records_prune_outcomes(sess, sess->ack_below);
		return;
	}
	for (size_t i = 0; i < n_acked; i++) {
		Raftlock__Outcome *o = store_get_outcome(oc->store, oc->txn, sess->id, acked[i]);
		if (o == NULL)
			continue;
		if (!o->pending && o->queued) {
			o->queued = false;
			if (o->seq < mark) {
				store_del_outcome(oc->store, oc->txn, sess->id, o->seq);
				note_gone(sess);
			} else {
				store_put_outcome(oc->store, oc->txn, sess->id,
						  o); /* the sweep below may take it */
			}
		}
		raftlock__outcome__free_unpacked(o, NULL);
	}
	if (rises || n_acked > 0) {
		for (size_t i = 0; i < sess->n_prune_due; i++)
			if (store_del_outcome(oc->store, oc->txn, sess->id, sess->prune_due[i]))
				note_gone(sess);
		free(sess->prune_due);
		sess->prune_due = NULL;
		sess->n_prune_due = 0;
	}
	if (rises) {
		store_sweep_outcome_marks(oc->store, oc->txn, sess->id, mark, ack_below, prunable,
					  sess);
		sess->ack_below = ack_below;
	}
}

size_t outcomes_count(const struct outcomes *oc, const Raftlock__SessionRecord *sess)
{
	return oc->indexed ? sess->outcome_count : sess->n_outcomes;
}

bool outcomes_any_pending(const struct outcomes *oc, const Raftlock__SessionRecord *sess)
{
	if (oc->indexed)
		return sess->pending_outcomes > 0;
	for (size_t i = 0; i < sess->n_outcomes; i++)
		if (sess->outcomes[i]->pending)
			return true;
	return false;
}

struct ending {
	size_t pending;
};

static bool every(void *arg, const struct outcome_marks *o)
{
	struct ending *e = arg;
	e->pending += o->pending;
	return true;
}

void outcomes_end(const struct outcomes *oc, const Raftlock__SessionRecord *sess)
{
	if (!oc->indexed)
		return;
	struct ending e = {0};
	size_t n =
		store_sweep_outcome_marks(oc->store, oc->txn, sess->id, 0, UINT64_MAX, every, &e);
	if (n != sess->outcome_count || e.pending != sess->pending_outcomes)
		log_fatal("session %llu had %zu outcomes (%zu pending), its record counts %u (%u): "
			  "damaged store",
			  (unsigned long long)sess->id, n, e.pending, sess->outcome_count,
			  sess->pending_outcomes);
}

static bool listed(const Raftlock__SessionRecord *rec)
{
	return rec->n_outcomes > 0;
}

/* One session's list into the table, pruned by its mark first: what the
 * table never holds are final records below the mark. */
static void move_outcomes(struct store *st, MDB_txn *txn, Raftlock__SessionRecord *sess)
{
	records_prune_outcomes(sess, sess->ack_below);
	sess->outcome_count = 0;
	sess->pending_outcomes = 0;
	for (size_t j = 0; j < sess->n_outcomes; j++) {
		Raftlock__Outcome *o = sess->outcomes[j];
		store_put_outcome(st, txn, sess->id, o);
		sess->outcome_count++;
		sess->pending_outcomes += o->pending;
		raftlock__outcome__free_unpacked(o, NULL);
	}
	free(sess->outcomes);
	sess->outcomes = NULL;
	sess->n_outcomes = 0;
}

void outcomes_move(struct store *st, MDB_txn *txn)
{
	store_rewrite_sessions(st, txn, listed, move_outcomes);
}
