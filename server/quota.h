/*
 * quota.h: the leader's side of the store limit. A node that becomes a
 * ready leader proposes STORE_LIMIT with fsm_store_limit(its map-size) when
 * the limit recorded in the replicated state differs; the state machine
 * applies the rule (fsm.h, FSM_STORE_LIMIT_SHARE). Loop thread only.
 */
#ifndef RAFTLOCK_QUOTA_H
#define RAFTLOCK_QUOTA_H

#include "node.h"

/* Called when the node became ready. Proposes nothing when the recorded
 * limit is this node's already; a failed proposal is retried at the next
 * leadership (logged). */
void quota_on_ready(struct node *n);

#endif
