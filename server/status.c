/* status.c: see status.h. */
#include "status.h"

void status_read(struct node *n, struct status *st)
{
	st->role = node_role(n);
	st->term = raft_current_term(&n->raft);
	st->commit_index = raft_commit_index(&n->raft);
	st->applied_index = raft_last_applied(&n->raft);
	st->last_index = raft_last_index(&n->raft);
	const char *leader = node_leader_client_address(n, &st->leader_id);
	st->leader_address = leader ? leader : "";
	st->ready = n->ready;
	MDB_txn *txn = store_begin(&n->store, false);
	Raftlock__Meta *m = store_get_meta(&n->store, txn);
	st->state_applied_index = m->applied_index;
	st->applied_time = m->cluster_time;
	st->cluster_time = n->ready ? node_cluster_now(n) : m->cluster_time;
	st->next_token = m->next_token;
	st->cluster_id = m->cluster_id;
	st->feature_level = FEATURE_LEVEL;
	st->cluster_feature_level = features_recorded(m->feature_level);
	st->store_limit = m->store_limit;
	st->sessions = store_count_sessions(&n->store, txn);
	st->locks = store_count_locks(&n->store, txn);
	raftlock__meta__free_unpacked(m, NULL);
	store_abort(txn);
}
