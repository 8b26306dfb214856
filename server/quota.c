/* quota.c: see quota.h. */
#include "quota.h"

#include "log.h"

void quota_on_ready(struct node *n)
{
	uint64_t want = fsm_store_limit(n->cfg->map_size);
	MDB_txn *txn = store_begin(&n->store, false);
	Raftlock__Meta *m = store_get_meta(&n->store, txn);
	uint64_t have = m->store_limit;
	raftlock__meta__free_unpacked(m, NULL);
	store_abort(txn);
	if (have == want)
		return;
	Raftlock__StoreLimit op = RAFTLOCK__STORE_LIMIT__INIT;
	op.bytes = want;
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_STORE_LIMIT;
	cmd.store_limit = &op;
	if (node_propose_quiet(n, &cmd) != 0)
		log_warn("could not propose the store limit; retried at next leadership");
}
