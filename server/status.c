/* status.c: see status.h. */
#include "status.h"

#include <stdio.h>
#include <string.h>

#include "member_cn.h"

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
	char why[128];
	st->serving = status_serving(n, why, sizeof why);
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

bool status_serving(struct node *n, char *why, size_t len)
{
	unsigned long long term = raft_current_term(&n->raft);
	unsigned long long applied = raft_last_applied(&n->raft);
	uint64_t id = 0;
	node_leader_client_address(n, &id);
	if (n->ready) {
		snprintf(why, len, "serving as leader (term %llu)", term);
		return true;
	}
	if (n->leader) {
		snprintf(why, len, "elected in term %llu, waiting for its barrier to apply", term);
		return false;
	}
	if (id == 0) {
		snprintf(why, len, "no leader known (%s, term %llu)", node_role(n), term);
		return false;
	}
	if (n->leader_said_term != term) {
		snprintf(why, len, "leader %llu known, waiting for it to report (term %llu)",
			 (unsigned long long)id, term);
		return false;
	}
	/* Caught up once in this term, it stays so while it keeps within
	 * STATUS_LAG_MAX entries: under load a follower is always a few
	 * entries behind the leader's last report, and readiness must not
	 * flicker with each one. */
	uint64_t target = n->leader_said_commit;
	if (applied >= target)
		n->caught_up_term = term;
	if (n->caught_up_term != term || target > applied + STATUS_LAG_MAX) {
		snprintf(why, len, "catching up with leader %llu: applied %llu of %llu",
			 (unsigned long long)id, applied, (unsigned long long)target);
		return false;
	}
	snprintf(why, len, "serving as follower of leader %llu (term %llu)", (unsigned long long)id,
		 term);
	return true;
}

bool status_note_leader(struct node *n, uint64_t term, uint64_t applied, const char *cert_cn)
{
	uint64_t leader = 0;
	if (cert_cn == NULL || cert_cn[0] == '\0' || n->leader)
		return false;
	node_leader_client_address(n, &leader);
	if (leader == 0 || leader == n->cfg->id || term != raft_current_term(&n->raft))
		return false;
	/* The name of a member's certificate (deploy/make-certs): the CA of
	 * client-tls-ca must give it to that member alone. */
	char expect[MEMBER_CN_SIZE];
	member_cn(leader, expect);
	if (strcmp(cert_cn, expect) != 0)
		return false;
	n->leader_said_term = term;
	n->leader_said_commit = applied;
	n->leader_reported_term = term;
	return true;
}

bool status_wants_leader_answer(struct node *n, uint64_t *leader_id)
{
	*leader_id = 0;
	if (n->leader)
		return false;
	node_leader_client_address(n, leader_id); /* none while a candidate */
	return *leader_id != 0 && *leader_id != n->cfg->id &&
	       n->leader_reported_term != raft_current_term(&n->raft);
}

void status_note_leader_answer(struct node *n, const Raftlock__StatusInfo *st)
{
	uint64_t leader = 0;
	if (!status_wants_leader_answer(n, &leader) || st->node_id != leader || !st->ready ||
	    st->term != raft_current_term(&n->raft))
		return;
	n->leader_said_term = st->term;
	n->leader_said_commit = st->commit_index;
}
