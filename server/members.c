/* members.c: see members.h. */
#include "members.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "member_book.h"
#include "raftlock.h"

enum member_op_kind { OP_ADD, OP_REMOVE, OP_PROMOTE, OP_JOIN };

/* One request on its way through the log and the raft configuration. */
struct member_op {
	struct members *m;
	enum member_op_kind kind;
	uint64_t id;
	char raft_address[CONFIG_ADDR_MAX];
	members_reply_cb reply;
	void *arg;
	struct raft_change change;
	/* A voter's removal, before it is proposed: the remaining voters must
	 * hold an entry past `after` (the barrier's or a later one) by
	 * `deadline_ms`. */
	struct raft_barrier barrier;
	raft_index after;
	uint64_t deadline_ms;
	unsigned n_start;
	struct {
		uint64_t id;
		raft_index match;
	} start[CONFIG_MAX_MEMBERS]; /* the voters' match indexes when it came */
};

static const char *role_name(int role)
{
	switch (role) {
	case RAFT_VOTER: return "voter";
	case RAFT_STANDBY: return "standby";
	default: return "spare";
	}
}

static const struct raft_server *conf_find(struct raft *r, uint64_t id)
{
	for (unsigned i = 0; i < r->configuration.n; i++)
		if (r->configuration.servers[i].id == id)
			return &r->configuration.servers[i];
	return NULL;
}

static unsigned conf_voters(struct raft *r)
{
	unsigned n = 0;
	for (unsigned i = 0; i < r->configuration.n; i++)
		n += r->configuration.servers[i].role == RAFT_VOTER;
	return n;
}

/* The applied Meta (free with raftlock__meta__free_unpacked). */
static Raftlock__Meta *read_meta(struct node *n)
{
	MDB_txn *txn = store_begin(&n->store, false);
	Raftlock__Meta *meta = store_get_meta(&n->store, txn);
	store_abort(txn);
	return meta;
}

/* ---------------------------------------------------------- answering -- */

static void answer_v(members_reply_cb reply, void *arg, int status, const char *fmt, va_list ap)
{
	char msg[384] = "";
	if (fmt != NULL)
		vsnprintf(msg, sizeof msg, fmt, ap);
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.status = status;
	resp.message = msg[0] ? msg : (char *)(status ? raftlock_strerror(status) : "");
	resp.leader = "";
	reply(arg, &resp);
}

static void answer(members_reply_cb reply, void *arg, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void answer(members_reply_cb reply, void *arg, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	answer_v(reply, arg, status, fmt, ap);
	va_end(ap);
}

/* Answers 0 with the raft configuration (MEMBER_LIST's payload): to LIST,
 * and to a JOIN that held, whose node admits on its raft port the members
 * named here until it has a configuration of its own (node.c). */
static void answer_members(struct members *m, members_reply_cb reply, void *arg)
{
	struct raft *r = &m->node->raft;
	unsigned n = r->configuration.n;
	Raftlock__MemberInfo *infos = calloc(n ? n : 1, sizeof *infos);
	Raftlock__MemberInfo **ptrs = calloc(n ? n : 1, sizeof *ptrs);
	if (infos == NULL || ptrs == NULL) {
		free(infos);
		free(ptrs);
		answer(reply, arg, RAFTLOCK_ENOMEM, NULL);
		return;
	}
	Raftlock__Meta *meta = read_meta(m->node);
	for (unsigned i = 0; i < n; i++) {
		const struct raft_server *s = &r->configuration.servers[i];
		Raftlock__MemberInfo *mi = &infos[i];
		raftlock__member_info__init(mi);
		mi->id = s->id;
		mi->raft_address = s->address;
		const Raftlock__MemberRecord *rec = member_book_find(meta, s->id);
		const struct config_member *cm = config_member_by_id(m->node->cfg, s->id);
		mi->client_address = rec  ? rec->client_address
				     : cm ? (char *)cm->client_address
					  : "";
		mi->role = (char *)role_name(s->role);
		mi->joined = rec != NULL && rec->incarnation != 0;
		raft_index match = 0;
		if (s->id == m->node->cfg->id)
			match = raft_last_index(r);
		else if (raft_match_index(r, s->id, &match) != 0)
			match = 0;
		mi->match_index = match;
		ptrs[i] = mi;
	}
	Raftlock__MemberList list = RAFTLOCK__MEMBER_LIST__INIT;
	list.members = ptrs;
	list.n_members = n;
	list.leader_id = m->node->cfg->id;
	list.last_index = raft_last_index(r);
	list.max_member_id = meta->max_member_id;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_MEMBER_LIST;
	resp.member_list = &list;
	reply(arg, &resp);
	raftlock__meta__free_unpacked(meta, NULL);
	free(infos);
	free(ptrs);
}

static const char *op_name(const struct member_op *op)
{
	static const char *names[] = {"add", "remove", "promote", "join"};
	return names[op->kind];
}

/* Answers op's request and frees op. */
static void op_done(struct member_op *op, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void op_done(struct member_op *op, int status, const char *fmt, ...)
{
	if (op->m->removing == op)
		op->m->removing = NULL;
	if (op->kind != OP_JOIN)
		op->m->ops--;
	if (status == 0)
		log_info("member %s %llu: done", op_name(op), (unsigned long long)op->id);
	else
		log_info("member %s %llu: %s", op_name(op), (unsigned long long)op->id,
			 raftlock_strerror(status));
	va_list ap;
	va_start(ap, fmt);
	answer_v(op->reply, op->arg, status, fmt, ap);
	va_end(ap);
	free(op);
}

/* A raft change that failed or could not start, as the client sees it:
 * what was not done may be retried (the client library does, on these). */
static int change_status(int rv)
{
	switch (rv) {
	case RAFT_LEADERSHIPLOST: return RAFTLOCK_EUNKNOWN;
	case RAFT_NOTLEADER: return RAFTLOCK_ENOTLEADER;
	case RAFT_SHUTDOWN: return RAFTLOCK_ESHUTDOWN;
	case RAFT_NOCONNECTION: return RAFTLOCK_ETIMEDOUT; /* final: say why */
	default: return RAFTLOCK_EUNAVAILABLE;
	}
}

static void change_failed(struct member_op *op, int rv)
{
	if (rv == RAFT_CANTCHANGE)
		op_done(op, change_status(rv),
			"another membership change is in progress (a promotion waits for its "
			"member to catch up): retry");
	else if (rv == RAFT_NOCONNECTION)
		op_done(op, change_status(rv),
			"member %llu did not catch up with the leader's log in time: is its node "
			"running (raftlockd --join)?",
			(unsigned long long)op->id);
	else
		op_done(op, change_status(rv), "raft: %s", raft_strerror(rv));
}

/* ------------------------------------------------------- raft changes -- */

static void change_cb(struct raft_change *req, int status);

/* Starts the raft side of op: 0 when a change is in flight (change_cb
 * follows), 1 when there is nothing to change, or a raft error. */
static int start_change(struct member_op *op, int role)
{
	struct raft *r = &op->m->node->raft;
	const struct raft_server *s = conf_find(r, op->id);
	op->change.data = op;
	int rv;
	if (op->kind == OP_REMOVE) {
		if (s == NULL)
			return 1;
		rv = raft_remove(r, &op->change, op->id, change_cb);
	} else if (s == NULL) {
		rv = raft_add(r, &op->change, op->id, op->raft_address, change_cb);
	} else if (s->role == role || (role == RAFT_STANDBY && s->role == RAFT_VOTER)) {
		return 1;
	} else {
		rv = raft_assign(r, &op->change, op->id, role, change_cb);
	}
	if (rv == 0)
		op->m->busy++;
	return rv;
}

/* Drives op to its raft configuration: add → standby; promote → voter;
 * remove → gone. Called again after each change. */
static void advance(struct member_op *op)
{
	int role = op->kind == OP_PROMOTE ? RAFT_VOTER : RAFT_STANDBY;
	int rv = start_change(op, role);
	if (rv == 1)
		op_done(op, 0, NULL);
	else if (rv != 0)
		change_failed(op, rv);
}

static void change_cb(struct raft_change *req, int status)
{
	struct member_op *op = req->data;
	op->m->busy--;
	if (status != 0) {
		change_failed(op, status);
		return;
	}
	advance(op);
}

/* ---------------------------------------------------- through the log -- */

static void logged(void *arg, int status, const Raftlock__Result *result)
{
	struct member_op *op = arg;
	if (status != 0) {
		op_done(op, status, NULL);
		return;
	}
	int st = result->status;
	if (st == 0 && op->kind != OP_JOIN) {
		if (!op->m->node->ready) {
			op_done(op, RAFTLOCK_EUNKNOWN, "leadership lost");
			return;
		}
		advance(op);
		return;
	}
	if (st == 0) {
		log_info("member join %llu: done", (unsigned long long)op->id);
		answer_members(op->m, op->reply, op->arg);
		free(op);
		return;
	}
	Raftlock__Meta *meta = read_meta(op->m->node);
	unsigned long long id = op->id, max = meta->max_member_id;
	raftlock__meta__free_unpacked(meta, NULL);
	if (op->kind == OP_ADD && st == RAFTLOCK_EINVAL)
		op_done(op, st,
			"member id %llu was used before in this cluster (the highest id used is "
			"%llu): ids are never reused, pick a higher one",
			id, max);
	else if (op->kind == OP_JOIN && st == RAFTLOCK_ENOTFOUND)
		op_done(op, st,
			"member %llu is not waiting to join: add it first (raftlock member add "
			"%llu RAFTADDR CLIENTADDR), or it was removed",
			id, id);
	else if (op->kind == OP_JOIN && st == RAFTLOCK_EPERM)
		op_done(op, st,
			"member %llu already started once with another data directory: a node "
			"that lost its data comes back under a new id (raftlock member replace "
			"%llu NEWID RAFTADDR CLIENTADDR)",
			id, id);
	else
		op_done(op, st, NULL);
}

static void propose(struct member_op *op, Raftlock__Command *cmd)
{
	int rv = node_propose(op->m->node, cmd, logged, op);
	if (rv != 0)
		op_done(op, rv, NULL);
}

/* ------------------------------------------- a voter's removal: quorum -- */

/* MEMBER_REMOVE for op's member: its id is never used again; raft_remove
 * follows once it is applied (logged, advance). */
static void propose_removal(struct member_op *op)
{
	Raftlock__MemberRemove rm = RAFTLOCK__MEMBER_REMOVE__INIT;
	rm.id = op->id;
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_MEMBER_REMOVE;
	cmd.member_remove = &rm;
	propose(op, &cmd);
}

/* Whether voter id answers op's check: it holds an entry appended after
 * the request came, or its match index moved since (a live voter catching
 * up). */
static bool answers(const struct member_op *op, uint64_t id)
{
	raft_index match;
	if (raft_match_index(&op->m->node->raft, id, &match) != 0)
		return false;
	if (match > op->after)
		return true;
	for (unsigned i = 0; i < op->n_start; i++)
		if (op->start[i].id == id)
			return match > op->start[i].match;
	return false;
}

/* The voters that would remain without op's member, and how many of them
 * answer (this leader does: the entry is in its log). Those that do not
 * are named in `silent`. */
struct remaining {
	unsigned voters, need, answered;
	char silent[160];
};

static void count_remaining(const struct member_op *op, struct remaining *q)
{
	struct node *n = op->m->node;
	struct raft *r = &n->raft;
	memset(q, 0, sizeof *q);
	size_t len = 0;
	for (unsigned i = 0; i < r->configuration.n; i++) {
		const struct raft_server *s = &r->configuration.servers[i];
		if (s->role != RAFT_VOTER || s->id == op->id)
			continue;
		q->voters++;
		if (s->id == n->cfg->id || answers(op, s->id)) {
			q->answered++;
			continue;
		}
		if (len < sizeof q->silent) {
			int k = snprintf(q->silent + len, sizeof q->silent - len, "%s%llu",
					 len ? ", " : "", (unsigned long long)s->id);
			len += k > 0 ? (size_t)k : 0;
		}
	}
	q->need = q->voters / 2 + 1;
}

/* How long a voter's removal waits for the remaining voters, from the
 * request: MEMBERS_QUORUM_ELECTIONS election timeouts, at most
 * MEMBERS_QUORUM_WAIT_MAX_MS (the client gives up on a connection that
 * owes an answer for CLIENT_STALL_MS, and would send the request again). */
static uint64_t quorum_wait_ms(const struct members *m)
{
	uint64_t wait = MEMBERS_QUORUM_ELECTIONS * (uint64_t)m->node->cfg->election_timeout_ms;
	return wait < MEMBERS_QUORUM_WAIT_MAX_MS ? wait : MEMBERS_QUORUM_WAIT_MAX_MS;
}

static void quorum_stop(struct members *m)
{
	if (!m->closing)
		timebase_timer_stop(&m->quorum_timer);
}

static void quorum_poll(struct timebase_timer *t);

/* Proposes op's removal once a majority of the remaining voters answer;
 * refuses it, nothing proposed, when they have not by its deadline. */
static void judge_quorum(struct member_op *op)
{
	struct members *m = op->m;
	if (m->closing || m->node->stopping) {
		quorum_stop(m);
		op_done(op, RAFTLOCK_ESHUTDOWN, "the node is stopping: nothing was changed");
		return;
	}
	if (!m->node->ready) {
		quorum_stop(m);
		op_done(op, RAFTLOCK_ENOTLEADER, "leadership lost: nothing was changed");
		return;
	}
	struct remaining q;
	count_remaining(op, &q);
	if (q.answered >= q.need) {
		quorum_stop(m);
		propose_removal(op);
		return;
	}
	if (timebase_now(m->tb) < op->deadline_ms) {
		if (!timebase_timer_active(&m->quorum_timer))
			timebase_timer_start(&m->quorum_timer, quorum_poll, MEMBERS_QUORUM_POLL_MS,
					     MEMBERS_QUORUM_POLL_MS);
		return;
	}
	quorum_stop(m);
	log_warn("member remove %llu refused: %u of the %u voters that would remain answer, %u "
		 "must (silent: %s)",
		 (unsigned long long)op->id, q.answered, q.voters, q.need, q.silent);
	op_done(op, RAFTLOCK_ESTATE,
		"removing member %llu would leave %u voters of which %u must answer for the "
		"cluster to commit, and %u did within %llu ms (silent: %s): start them, or remove "
		"a silent member first",
		(unsigned long long)op->id, q.voters, q.need, q.answered,
		(unsigned long long)quorum_wait_ms(m), q.silent);
}

static void quorum_poll(struct timebase_timer *t)
{
	struct members *m = t->data;
	if (m->removing == NULL) {
		quorum_stop(m);
		return;
	}
	judge_quorum(m->removing);
}

static void quorum_barrier_done(struct raft_barrier *req, int status)
{
	struct member_op *op = req->data;
	if (status != 0) {
		op_done(op, status == RAFT_SHUTDOWN ? RAFTLOCK_ESHUTDOWN : RAFTLOCK_ENOTLEADER,
			"leadership lost before the check of the remaining voters: nothing was "
			"changed");
		return;
	}
	/* A barrier slower than the whole wait (a loaded leader) leaves the
	 * voters a few polls to show that they hold it. */
	uint64_t now = timebase_now(op->m->tb), least = now + 5 * MEMBERS_QUORUM_POLL_MS;
	if (op->deadline_ms < least)
		op->deadline_ms = least;
	judge_quorum(op);
}

/* Starts the check of op's removal, a voter's: a barrier, so that live
 * voters hold an entry appended after the request came, then
 * judge_quorum. */
static void check_quorum(struct member_op *op)
{
	struct members *m = op->m;
	struct raft *r = &m->node->raft;
	m->removing = op;
	op->after = raft_last_index(r);
	op->deadline_ms = timebase_now(m->tb) + quorum_wait_ms(m);
	for (unsigned i = 0; i < r->configuration.n && i < CONFIG_MAX_MEMBERS; i++) {
		const struct raft_server *s = &r->configuration.servers[i];
		if (s->role == RAFT_VOTER &&
		    raft_match_index(r, s->id, &op->start[op->n_start].match) == 0)
			op->start[op->n_start++].id = s->id;
	}
	struct remaining q;
	count_remaining(op, &q);
	if (q.need == 1) { /* this leader alone */
		propose_removal(op);
		return;
	}
	op->barrier.data = op;
	int rv = raft_barrier(r, &op->barrier, quorum_barrier_done);
	if (rv != 0)
		op_done(op, change_status(rv), "raft: %s", raft_strerror(rv));
}

/* ----------------------------------------------------------- requests -- */

static struct member_op *op_new(struct members *m, enum member_op_kind kind, uint64_t id,
				members_reply_cb reply, void *arg)
{
	struct member_op *op = calloc(1, sizeof *op);
	if (op == NULL) {
		answer(reply, arg, RAFTLOCK_ENOMEM, NULL);
		return NULL;
	}
	op->m = m;
	op->kind = kind;
	op->id = id;
	op->reply = reply;
	op->arg = arg;
	if (kind != OP_JOIN)
		m->ops++;
	return op;
}

static void handle_add(struct members *m, const Raftlock__MemberAdd *req, members_reply_cb reply,
		       void *arg)
{
	if (req == NULL || req->id == 0 || req->id > INT64_MAX || req->raft_address[0] == '\0' ||
	    req->client_address[0] == '\0' || strlen(req->raft_address) >= CONFIG_ADDR_MAX ||
	    strlen(req->client_address) >= CONFIG_ADDR_MAX) {
		/* above INT64_MAX no raftlockd could run as it (--id), and
		 * ids are never reused: no member could be added after it */
		answer(reply, arg, RAFTLOCK_EINVAL,
		       "member add: an id of 1..%lld and two addresses", (long long)INT64_MAX);
		return;
	}
	/* A member of the bootstrap configuration has no record: its id is
	 * taken all the same. */
	Raftlock__Meta *meta = read_meta(m->node);
	bool recorded = member_book_find(meta, req->id) != NULL;
	raftlock__meta__free_unpacked(meta, NULL);
	if (!recorded && conf_find(&m->node->raft, req->id) != NULL) {
		answer(reply, arg, RAFTLOCK_EINVAL, "member %llu is in the cluster already",
		       (unsigned long long)req->id);
		return;
	}
	if (m->removing != NULL) {
		answer(reply, arg, RAFTLOCK_EUNAVAILABLE,
		       "a voter's removal is in progress: retry");
		return;
	}
	if (!recorded && m->node->raft.configuration.n >= CONFIG_MAX_MEMBERS) {
		answer(reply, arg, RAFTLOCK_ELIMIT,
		       "the cluster has %d members, the most it may have", CONFIG_MAX_MEMBERS);
		return;
	}
	struct member_op *op = op_new(m, OP_ADD, req->id, reply, arg);
	if (op == NULL)
		return;
	snprintf(op->raft_address, sizeof op->raft_address, "%s", req->raft_address);
	Raftlock__MemberAdd add = RAFTLOCK__MEMBER_ADD__INIT;
	add.id = req->id;
	add.raft_address = req->raft_address;
	add.client_address = req->client_address;
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_MEMBER_ADD;
	cmd.member_add = &add;
	propose(op, &cmd);
}

static void transfer_cb(struct raft_transfer *req)
{
	(void)req; /* libraft may never call back: nothing waits for this */
}

/* Removing the leader: hand leadership over first, so that the cluster
 * keeps a leader that is a member; the client's retry reaches the new
 * leader, which removes this node. */
static void hand_over_first(struct members *m, members_reply_cb reply, void *arg)
{
	struct raft *r = &m->node->raft;
	if (raft_transferee(r) == 0) {
		m->transfer.data = m;
		int rv = raft_transfer(r, &m->transfer, 0, transfer_cb);
		if (rv != 0) {
			answer(reply, arg, RAFTLOCK_EUNAVAILABLE,
			       "cannot hand leadership over before removing this node: %s",
			       raft_strerror(rv));
			return;
		}
		log_warn("member remove %llu (this node): handing leadership over first",
			 (unsigned long long)m->node->cfg->id);
	}
	answer(reply, arg, RAFTLOCK_EUNAVAILABLE,
	       "handing leadership over before removing this node: retry at the new leader");
}

static void handle_remove(struct members *m, uint64_t id, members_reply_cb reply, void *arg)
{
	struct raft *r = &m->node->raft;
	const struct raft_server *s = conf_find(r, id);
	Raftlock__Meta *meta = read_meta(m->node);
	/* an added member whose raft_add did not happen is still in the book */
	bool recorded = member_book_find(meta, id) != NULL;
	bool removed = member_book_removed(meta, id);
	raftlock__meta__free_unpacked(meta, NULL);
	if (s == NULL && !recorded) {
		/* Nothing proposed: a retry of a removal done, or no such id. */
		if (removed)
			answer(reply, arg, 0, NULL);
		else
			answer(reply, arg, RAFTLOCK_ENOTFOUND,
			       "no member %llu in this cluster (raftlock member list shows them)",
			       (unsigned long long)id);
		return;
	}
	if (s != NULL && s->role == RAFT_VOTER && conf_voters(r) == 1) {
		answer(reply, arg, RAFTLOCK_EINVAL, "member %llu is the last voter",
		       (unsigned long long)id);
		return;
	}
	bool voter = s != NULL && s->role == RAFT_VOTER;
	if (voter ? m->ops > 0 || m->busy > 0 || m->promoting : m->removing != NULL) {
		answer(reply, arg, RAFTLOCK_EUNAVAILABLE, "%s",
		       voter ? "another membership change is in progress: retry"
			     : "a voter's removal is in progress: retry");
		return;
	}
	if (s != NULL && id == m->node->cfg->id) {
		hand_over_first(m, reply, arg);
		return;
	}
	struct member_op *op = op_new(m, OP_REMOVE, id, reply, arg);
	if (op == NULL)
		return;
	if (voter)
		check_quorum(op);
	else
		propose_removal(op);
}

static void handle_promote(struct members *m, uint64_t id, members_reply_cb reply, void *arg)
{
	if (conf_find(&m->node->raft, id) == NULL) {
		answer(reply, arg, RAFTLOCK_ENOTFOUND, "no member %llu", (unsigned long long)id);
		return;
	}
	if (m->removing != NULL) {
		answer(reply, arg, RAFTLOCK_EUNAVAILABLE,
		       "a voter's removal is in progress: retry");
		return;
	}
	struct member_op *op = op_new(m, OP_PROMOTE, id, reply, arg);
	if (op != NULL)
		advance(op);
}

static void handle_join(struct members *m, const Raftlock__MemberJoinRequest *req,
			members_reply_cb reply, void *arg)
{
	if (strcmp(req->cluster, m->node->cfg->cluster) != 0) {
		answer(reply, arg, RAFTLOCK_EINVAL, "this is cluster '%s', not '%s'",
		       m->node->cfg->cluster, req->cluster);
		return;
	}
	struct member_op *op = op_new(m, OP_JOIN, req->id, reply, arg);
	if (op == NULL)
		return;
	Raftlock__MemberJoin join = RAFTLOCK__MEMBER_JOIN__INIT;
	join.id = req->id;
	join.incarnation = req->incarnation;
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_MEMBER_JOIN;
	cmd.member_join = &join;
	propose(op, &cmd);
}

bool members_is_request(const Raftlock__Envelope *env)
{
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_LIST:
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_ADD:
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_REMOVE:
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_PROMOTE:
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_JOIN: return true;
	default: return false;
	}
}

void members_handle(struct members *m, const Raftlock__Envelope *env, members_reply_cb reply,
		    void *arg)
{
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_LIST: answer_members(m, reply, arg); break;
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_ADD:
		handle_add(m, env->member_add->member, reply, arg);
		break;
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_REMOVE:
		handle_remove(m, env->member_remove->id, reply, arg);
		break;
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_PROMOTE:
		handle_promote(m, env->member_promote->id, reply, arg);
		break;
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_JOIN:
		handle_join(m, env->member_join, reply, arg);
		break;
	default: answer(reply, arg, RAFTLOCK_EPROTO, "not a member request"); break;
	}
}

/* ---------------------------------------------- founding members' book -- */

static void founding_recorded(void *arg, int status, const Raftlock__Result *result)
{
	(void)status;
	(void)result;
	struct members *m = arg;
	m->recording--; /* recorded, or tried again at a later check */
}

/* Records the addresses of the members of the bootstrap configuration that
 * the book lacks, from this leader's --member list: members that joined
 * later have no such list, and redirect clients by the book. */
static void record_founding(struct members *m, const Raftlock__Meta *meta)
{
	struct raft *r = &m->node->raft;
	for (unsigned i = 0; i < r->configuration.n; i++) {
		const struct raft_server *s = &r->configuration.servers[i];
		const struct config_member *cm = config_member_by_id(m->node->cfg, s->id);
		if (member_book_find(meta, s->id) != NULL || cm == NULL ||
		    strcmp(cm->raft_address, s->address) != 0)
			continue;
		Raftlock__MemberAdd add = RAFTLOCK__MEMBER_ADD__INIT;
		add.id = s->id;
		add.raft_address = s->address;
		add.client_address = (char *)cm->client_address;
		add.founding = true;
		Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
		cmd.op_case = RAFTLOCK__COMMAND__OP_MEMBER_ADD;
		cmd.member_add = &add;
		if (node_propose(m->node, &cmd, founding_recorded, m) == 0)
			m->recording++;
	}
}

/* ------------------------------------------------- automatic promotion -- */

static void promoted(struct raft_change *req, int status)
{
	struct members *m = req->data;
	m->promoting = false;
	if (status == 0)
		m->promotions++;
	else /* its node is down or slow: others' changes go first a while */
		m->promote_again_ms = timebase_now(m->tb) + MEMBERS_PROMOTE_AGAIN_MS;
	log_info("member %llu: automatic promotion to voter %s", (unsigned long long)m->promotee,
		 status == 0 ? "done" : raft_strerror(status));
}

static void check(struct timebase_timer *t)
{
	struct members *m = t->data;
	struct node *n = m->node;
	struct raft *r = &n->raft;
	if (!n->ready || n->stopping)
		return;
	/* The book is a level-2 command (feature_level.h): not in a cluster
	 * still being upgraded from level 1. */
	if (m->recording == 0 && node_cluster_feature_level(n) >= 2) {
		Raftlock__Meta *meta = read_meta(n);
		record_founding(m, meta);
		raftlock__meta__free_unpacked(meta, NULL);
	}
	if (m->promoting || m->busy > 0 || m->removing != NULL ||
	    timebase_now(m->tb) < m->promote_again_ms)
		return;
	raft_index last = raft_last_index(r);
	Raftlock__Meta *meta = NULL;
	for (unsigned i = 0; i < r->configuration.n; i++) {
		const struct raft_server *s = &r->configuration.servers[i];
		raft_index match;
		if (s->role != RAFT_STANDBY || raft_match_index(r, s->id, &match) != 0 ||
		    match + MEMBERS_PROMOTE_GAP < last)
			continue;
		if (meta == NULL)
			meta = read_meta(n);
		const Raftlock__MemberRecord *rec = member_book_find(meta, s->id);
		if (rec == NULL || rec->incarnation == 0)
			continue; /* its node has not started: nothing to catch up */
		m->promotion.data = m;
		uint64_t id = s->id;
		if (raft_assign(r, &m->promotion, id, RAFT_VOTER, promoted) == 0) {
			m->promoting = true;
			m->promotee = id;
			log_info("member %llu is %llu entries behind: promoting it to voter",
				 (unsigned long long)id, (unsigned long long)(last - match));
		}
		break;
	}
	if (meta != NULL)
		raftlock__meta__free_unpacked(meta, NULL);
}

void members_start(struct members *m, struct timebase *tb, struct node *node)
{
	memset(m, 0, sizeof *m);
	m->node = node;
	m->tb = tb;
	timebase_timer_init(tb, &m->timer, m);
	timebase_timer_init(tb, &m->quorum_timer, m);
	timebase_timer_start(&m->timer, check, MEMBERS_CHECK_MS, MEMBERS_CHECK_MS);
}

void members_close(struct members *m)
{
	/* Called once raft has closed (main.c): libraft called back every
	 * barrier and change, so a removal still here waits for its voters:
	 * it is answered now. */
	if (m->removing != NULL && timebase_timer_active(&m->quorum_timer)) {
		timebase_timer_stop(&m->quorum_timer);
		m->closing = true;
		judge_quorum(m->removing);
	}
	m->closing = true;
	timebase_timer_close(&m->timer);
	timebase_timer_close(&m->quorum_timer);
}
