/* reads.c: see reads.h. */
#include "reads.h"

#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "codec.h"
#include "log.h"
#include "raftlock.h"
#include "session_locks.h"

#define READ_PAGE_DEFAULT 100

struct reply {
	reads_reply_cb cb;
	void *arg;
	const struct reads_who *who; /* NULL: nothing left out */
	struct auth_view view;
};

/* Whether the reader may see perm on name. */
static bool may(const struct reply *r, uint32_t perm, const char *name)
{
	return r->who == NULL || auth_allows(&r->view, r->who->identity, perm, name);
}

/* The names under within on which the reader has perm (one AUTH_* bit), as
 * disjoint prefixes in name order (auth_ranges): a listing walks these
 * and no other name, so that what it costs is what it answers, however
 * much there is that the reader may not see. */
static void reader_ranges(const struct reply *r, uint32_t perm, const char *within,
			  struct auth_ranges *out)
{
	if (r->who != NULL) {
		auth_ranges(&r->view, r->who->identity, perm, within, out);
		return;
	}
	out->v = malloc(sizeof *out->v);
	if (out->v == NULL || (out->v[0] = strdup(within)) == NULL)
		log_fatal("out of memory");
	out->n = 1;
}

static void reply_status(const struct reply *r, int status, const char *message)
{
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.status = status;
	resp.message = (char *)message;
	resp.leader = "";
	r->cb(r->arg, &resp);
}

/* ------------------------------------------------------ store to proto -- */

/* The owner of session, if the reader may see it: the rule of
 * LIST_SESSIONS (auth_sees_session). */
static Raftlock__Owner *owner_of(struct store *st, MDB_txn *txn, const struct reply *r,
				 uint64_t session, Raftlock__SessionRecord **keep)
{
	*keep = store_get_session(st, txn, session);
	if (*keep == NULL)
		return NULL;
	if (r->who != NULL && !auth_sees_session(&r->view, r->who->identity, *keep))
		return NULL;
	return (*keep)->owner;
}

/* Fills a LockInfo from a record; the session records fetched for owner
 * info are appended to *sessions for the caller to free. */
struct lock_info_buf {
	Raftlock__LockInfo info;
	Raftlock__HolderInfo *holders;
	Raftlock__HolderInfo **holder_ptrs;
	Raftlock__WaiterInfo *waiters;
	Raftlock__WaiterInfo **waiter_ptrs;
	Raftlock__SessionRecord **sessions;
	size_t n_sessions;
	Raftlock__LockRecord *rec;
};

/* The most one lock's holders and waiters take in an answer: a lock may
 * have FSM_MAX_HOLDERS holders and FSM_MAX_WAITERS waiters, several
 * frames' worth with their owners; the lists are cut there, the totals
 * say so. A page of locks (PAGE_BYTES_MAX) plus one lock stays inside a
 * frame. A session's names are cut at the same size. */
#define LOCK_INFO_BYTES_MAX (RAFTLOCK_FRAME_MAX / 4)
/* A repeated field's tag and length, at most, beside each item. */
#define ITEM_OVERHEAD 6

/* Fills b from rec, listing the holders whose token is above
 * holders_after (0: all), in grant order, and the waiters in queue order,
 * as many as LOCK_INFO_BYTES_MAX holds. */
static void lock_info_fill(struct store *st, MDB_txn *txn, const struct reply *r,
			   struct lock_info_buf *b, Raftlock__LockRecord *rec, uint64_t now,
			   uint64_t holders_after)
{
	size_t nh = rec->n_holders, nw = rec->n_waiters, bytes = 0;
	raftlock__lock_info__init(&b->info);
	b->rec = rec;
	b->holders = calloc(nh + 1, sizeof *b->holders);
	b->holder_ptrs = calloc(nh + 1, sizeof *b->holder_ptrs);
	b->waiters = calloc(nw + 1, sizeof *b->waiters);
	b->waiter_ptrs = calloc(nw + 1, sizeof *b->waiter_ptrs);
	b->sessions = calloc(nh + nw + 1, sizeof *b->sessions);
	if (!b->holders || !b->holder_ptrs || !b->waiters || !b->waiter_ptrs || !b->sessions)
		log_fatal("out of memory");
	b->n_sessions = 0;
	b->info.name = rec->name;
	b->info.kind = rec->kind;
	b->info.limit = rec->limit;
	b->info.delay_until = rec->delay_until;
	b->info.lock_delay_ms = rec->lock_delay_ms;
	b->info.max_hold_ms = rec->max_hold_ms;
	b->info.revoke_grace_ms = rec->revoke_grace_ms;
	b->info.cluster_time = now;
	b->info.holders_total = (uint32_t)nh;
	b->info.waiters_total = (uint32_t)nw;
	b->info.holders_after = holders_after;
	/* holders take at most half when there are waiters: a writer queued
	 * behind thousands of readers is shown */
	size_t shown = 0, holders_max = nw ? LOCK_INFO_BYTES_MAX / 2 : LOCK_INFO_BYTES_MAX;
	for (size_t i = 0; i < nh; i++) {
		if (holders_after > 0 && rec->holders[i]->token <= holders_after)
			continue;
		Raftlock__HolderInfo *h = &b->holders[shown];
		raftlock__holder_info__init(h);
		h->holder = rec->holders[i];
		h->owner = owner_of(st, txn, r, rec->holders[i]->session,
				    &b->sessions[b->n_sessions++]);
		bytes += raftlock__holder_info__get_packed_size(h) + ITEM_OVERHEAD;
		if (bytes > holders_max) {
			b->info.holders_more = true;
			break;
		}
		b->holder_ptrs[shown++] = h;
	}
	b->info.holders = b->holder_ptrs;
	b->info.n_holders = shown;
	if (bytes > holders_max) /* the one not shown */
		bytes = holders_max;
	shown = 0;
	for (; shown < nw && bytes <= LOCK_INFO_BYTES_MAX; shown++) {
		Raftlock__WaiterInfo *w = &b->waiters[shown];
		raftlock__waiter_info__init(w);
		w->waiter = rec->waiters[shown];
		w->owner = owner_of(st, txn, r, rec->waiters[shown]->session,
				    &b->sessions[b->n_sessions++]);
		bytes += raftlock__waiter_info__get_packed_size(w) + ITEM_OVERHEAD;
		if (bytes > LOCK_INFO_BYTES_MAX)
			break;
		b->waiter_ptrs[shown] = w;
	}
	b->info.waiters = b->waiter_ptrs;
	b->info.n_waiters = shown;
}

static void lock_info_free(struct lock_info_buf *b)
{
	for (size_t i = 0; i < b->n_sessions; i++)
		if (b->sessions[i] != NULL)
			raftlock__session_record__free_unpacked(b->sessions[i], NULL);
	free(b->sessions);
	free(b->holders);
	free(b->holder_ptrs);
	free(b->waiters);
	free(b->waiter_ptrs);
	if (b->rec != NULL)
		raftlock__lock_record__free_unpacked(b->rec, NULL);
}

static uint64_t store_now(struct store *st, MDB_txn *txn)
{
	Raftlock__Meta *m = store_get_meta(st, txn);
	uint64_t t = m->cluster_time;
	raftlock__meta__free_unpacked(m, NULL);
	return t;
}

static void read_get_lock(struct store *st, const struct reply *r, const Raftlock__Envelope *env,
			  MDB_txn *txn)
{
	Raftlock__LockRecord *rec = store_get_lock(st, txn, env->get_lock->name);
	if (rec == NULL) {
		reply_status(r, RAFTLOCK_ENOTFOUND, "no such lock");
		return;
	}
	struct lock_info_buf b;
	lock_info_fill(st, txn, r, &b, rec, store_now(st, txn), env->get_lock->holders_after);
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_LOCK;
	resp.lock = &b.info;
	r->cb(r->arg, &resp);
	lock_info_free(&b);
}

struct list_locks_ctx {
	const struct reply *reply;
	struct store *store;
	MDB_txn *txn;
	struct lock_info_buf *bufs;
	size_t n, limit;
	size_t bytes; /* encoded so far: a page stays well inside a frame */
	bool more;
	uint64_t now;
};

#define PAGE_BYTES_MAX (RAFTLOCK_FRAME_MAX / 2)

static int list_locks_visit(void *arg, Raftlock__LockRecord *rec)
{
	struct list_locks_ctx *ctx = arg;
	if (ctx->n == ctx->limit || ctx->bytes > PAGE_BYTES_MAX) {
		raftlock__lock_record__free_unpacked(rec, NULL);
		ctx->more = true;
		return 1;
	}
	/* The final word; the ranges walked hold only names it allows. */
	if (!may(ctx->reply, AUTH_READ, rec->name)) {
		raftlock__lock_record__free_unpacked(rec, NULL);
		return 0;
	}
	struct lock_info_buf *b = &ctx->bufs[ctx->n++];
	lock_info_fill(ctx->store, ctx->txn, ctx->reply, b, rec, ctx->now, 0);
	ctx->bytes += raftlock__lock_info__get_packed_size(&b->info);
	return 0;
}

/* At most CODEC_PAGE_MAX: clients refuse a page longer than
 * CODEC_ANSWER_HEADROOM times the one they were built with (codec.h). */
static size_t page_limit(uint32_t asked)
{
	if (asked == 0)
		return READ_PAGE_DEFAULT;
	return asked > CODEC_PAGE_MAX ? CODEC_PAGE_MAX : asked;
}

static void read_list_locks(struct store *st, const struct reply *r, const Raftlock__Envelope *env,
			    MDB_txn *txn)
{
	const Raftlock__ListLocksRequest *req = env->list_locks;
	struct list_locks_ctx ctx = {.reply = r,
				     .store = st,
				     .txn = txn,
				     .limit = page_limit(req->limit),
				     .now = store_now(st, txn)};
	ctx.bufs = calloc(ctx.limit, sizeof *ctx.bufs);
	Raftlock__LockInfo **ptrs = calloc(ctx.limit, sizeof *ptrs);
	if (ctx.bufs == NULL || ptrs == NULL)
		log_fatal("out of memory");
	/* The ranges are disjoint and in name order: the page is too, and
	 * paging after its last name goes on as over one range. */
	struct auth_ranges ranges;
	reader_ranges(r, AUTH_READ, req->prefix, &ranges);
	for (size_t i = 0; i < ranges.n && !ctx.more; i++)
		store_scan_locks(st, txn, ranges.v[i], req->after, list_locks_visit, &ctx);
	auth_ranges_free(&ranges);
	for (size_t i = 0; i < ctx.n; i++)
		ptrs[i] = &ctx.bufs[i].info;
	Raftlock__LockList list = RAFTLOCK__LOCK_LIST__INIT;
	list.locks = ptrs;
	list.n_locks = ctx.n;
	list.more = ctx.more;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_LOCKS;
	resp.locks = &list;
	r->cb(r->arg, &resp);
	for (size_t i = 0; i < ctx.n; i++)
		lock_info_free(&ctx.bufs[i]);
	free(ctx.bufs);
	free(ptrs);
}

struct list_sessions_ctx {
	const struct reply *reply;
	struct store *store;
	MDB_txn *txn;
	struct session_locks names;
	Raftlock__SessionInfo *infos;
	Raftlock__SessionInfo **ptrs;
	Raftlock__SessionRecord **recs;
	char ***names_of; /* per session: the names shown */
	size_t *n_names;
	struct auth_ranges readable; /* what the reader may read */
	size_t n, limit;
	size_t bytes;
	bool more;
};

static int list_sessions_visit(void *arg, Raftlock__SessionRecord *rec)
{
	struct list_sessions_ctx *ctx = arg;
	if (ctx->n == ctx->limit || ctx->bytes > PAGE_BYTES_MAX) {
		raftlock__session_record__free_unpacked(rec, NULL);
		ctx->more = true;
		return 1;
	}
	ctx->bytes += raftlock__session_record__get_packed_size(rec);
	Raftlock__SessionInfo *info = &ctx->infos[ctx->n];
	raftlock__session_info__init(info);
	info->id = rec->id;
	info->ttl_ms = rec->ttl_ms;
	uint32_t ttl;
	if (!store_get_lease(ctx->store, ctx->txn, rec->id, &info->deadline, &ttl))
		info->deadline = 0;
	info->owner = rec->owner;
	info->opened_time = rec->opened_time;
	const struct reply *r = ctx->reply;
	bool sees = r->who == NULL || auth_sees_session(&r->view, r->who->identity, rec);
	size_t n_names;
	char **names;
	if (sees) {
		names = session_locks_names(&ctx->names, rec, &n_names);
	} else {
		/* Someone else's session: no owner, only the locks it may read,
		 * looked for where it may read (not among all the names). */
		info->owner = NULL;
		names = session_locks_names_under(&ctx->names, rec,
						  (const char *const *)ctx->readable.v,
						  ctx->readable.n, &n_names);
		size_t kept = 0;
		for (size_t i = 0; i < n_names; i++) {
			if (may(r, AUTH_READ, names[i]))
				names[kept++] = names[i];
			else
				free(names[i]);
		}
		n_names = kept;
	}
	/* A session may hold or await FSM_MAX_SESSION_LOCKS names, several
	 * frames' worth: the list is cut as a lock's holders are. */
	info->locks_total = (uint32_t)n_names;
	size_t shown = 0, bytes = 0;
	for (; shown < n_names; shown++) {
		bytes += strlen(names[shown]) + ITEM_OVERHEAD;
		if (bytes > LOCK_INFO_BYTES_MAX)
			break;
	}
	for (size_t i = shown; i < n_names; i++)
		free(names[i]);
	n_names = shown;
	ctx->names_of[ctx->n] = names;
	ctx->n_names[ctx->n] = n_names;
	if (ctx->names.indexed) /* not in the record's size */
		for (size_t i = 0; i < n_names; i++)
			ctx->bytes += strlen(names[i]) + 3;
	info->locks = names;
	info->n_locks = n_names;
	ctx->ptrs[ctx->n] = info;
	ctx->recs[ctx->n++] = rec;
	return 0;
}

static void read_list_sessions(struct store *st, const struct reply *r,
			       const Raftlock__Envelope *env, MDB_txn *txn)
{
	const Raftlock__ListSessionsRequest *req = env->list_sessions;
	struct list_sessions_ctx ctx = {0};
	ctx.reply = r;
	ctx.store = st;
	ctx.txn = txn;
	ctx.limit = page_limit(req->limit);
	ctx.infos = calloc(ctx.limit, sizeof *ctx.infos);
	ctx.ptrs = calloc(ctx.limit, sizeof *ctx.ptrs);
	ctx.recs = calloc(ctx.limit, sizeof *ctx.recs);
	ctx.names_of = calloc(ctx.limit, sizeof *ctx.names_of);
	ctx.n_names = calloc(ctx.limit, sizeof *ctx.n_names);
	if (!ctx.infos || !ctx.ptrs || !ctx.recs || !ctx.names_of || !ctx.n_names)
		log_fatal("out of memory");
	reader_ranges(r, AUTH_READ, "", &ctx.readable);
	Raftlock__Meta *meta = store_get_meta(st, txn);
	ctx.names = session_locks_at(st, txn, meta);
	raftlock__meta__free_unpacked(meta, NULL);
	store_scan_sessions(st, txn, req->after, list_sessions_visit, &ctx);
	Raftlock__SessionList list = RAFTLOCK__SESSION_LIST__INIT;
	list.sessions = ctx.ptrs;
	list.n_sessions = ctx.n;
	list.more = ctx.more;
	list.cluster_time = store_now(st, txn);
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_SESSIONS;
	resp.sessions = &list;
	r->cb(r->arg, &resp);
	for (size_t i = 0; i < ctx.n; i++) {
		raftlock__session_record__free_unpacked(ctx.recs[i], NULL);
		session_locks_free(ctx.names_of[i], ctx.n_names[i]);
	}
	auth_ranges_free(&ctx.readable);
	free(ctx.names_of);
	free(ctx.n_names);
	free(ctx.infos);
	free(ctx.ptrs);
	free(ctx.recs);
}

static void read_check_token(struct store *st, const struct reply *r, const Raftlock__Envelope *env,
			     MDB_txn *txn)
{
	Raftlock__CheckTokenResult check = RAFTLOCK__CHECK_TOKEN_RESULT__INIT;
	Raftlock__LockRecord *rec = store_get_lock(st, txn, env->check_token->name);
	if (rec != NULL) {
		for (size_t i = 0; i < rec->n_holders; i++) {
			uint64_t t = rec->holders[i]->token;
			if (t == env->check_token->token)
				check.current = true;
			if (t > check.highest)
				check.highest = t;
		}
		raftlock__lock_record__free_unpacked(rec, NULL);
	}
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_CHECK;
	resp.check = &check;
	r->cb(r->arg, &resp);
}

struct acl_list_ctx {
	const struct reply *reply;
	Raftlock__AclSet *rules;
	Raftlock__AclSet **ptrs;
	char (*names)[2][RAFTLOCK_NAME_MAX + 1];
	size_t n, limit;
	bool more;
};

static int acl_list_visit(void *arg, const char *identity, const char *prefix, uint32_t perms)
{
	struct acl_list_ctx *ctx = arg;
	if (!may(ctx->reply, AUTH_ADMIN, prefix))
		return 0;
	if (ctx->n == ctx->limit) {
		ctx->more = true;
		return 1;
	}
	Raftlock__AclSet *rule = &ctx->rules[ctx->n];
	raftlock__acl_set__init(rule);
	strcpy(ctx->names[ctx->n][0], identity);
	strcpy(ctx->names[ctx->n][1], prefix);
	rule->identity = ctx->names[ctx->n][0];
	rule->prefix = ctx->names[ctx->n][1];
	rule->perms = perms;
	ctx->ptrs[ctx->n++] = rule;
	return 0;
}

static void read_acl_list(struct store *st, const struct reply *r, const Raftlock__Envelope *env,
			  MDB_txn *txn)
{
	const Raftlock__AclListRequest *req = env->acl_list;
	struct acl_list_ctx ctx = {.reply = r, .limit = page_limit(req->limit)};
	ctx.rules = calloc(ctx.limit, sizeof *ctx.rules);
	ctx.ptrs = calloc(ctx.limit, sizeof *ctx.ptrs);
	ctx.names = calloc(ctx.limit, sizeof *ctx.names);
	if (!ctx.rules || !ctx.ptrs || !ctx.names)
		log_fatal("out of memory");
	/* Only the rules on prefixes it administers are walked. */
	struct auth_ranges ranges;
	reader_ranges(r, AUTH_ADMIN, "", &ranges);
	store_scan_acls_under(st, txn, req->after_identity, req->after_prefix,
			      (const char *const *)ranges.v, ranges.n, acl_list_visit, &ctx);
	auth_ranges_free(&ranges);
	Raftlock__AclList list = RAFTLOCK__ACL_LIST__INIT;
	list.rules = ctx.ptrs;
	list.n_rules = ctx.n;
	list.more = ctx.more;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_ACLS;
	resp.acls = &list;
	r->cb(r->arg, &resp);
	free(ctx.rules);
	free(ctx.ptrs);
	free(ctx.names);
}

bool reads_is_read(const Raftlock__Envelope *env)
{
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_GET_LOCK:
	case RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS:
	case RAFTLOCK__ENVELOPE__BODY_LIST_SESSIONS:
	case RAFTLOCK__ENVELOPE__BODY_CHECK_TOKEN:
	case RAFTLOCK__ENVELOPE__BODY_ACL_LIST: return true;
	default: return false;
	}
}

bool reads_is_stale(const Raftlock__Envelope *env)
{
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_GET_LOCK: return env->get_lock->stale;
	case RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS: return env->list_locks->stale;
	case RAFTLOCK__ENVELOPE__BODY_LIST_SESSIONS: return env->list_sessions->stale;
	case RAFTLOCK__ENVELOPE__BODY_CHECK_TOKEN: return env->check_token->stale;
	case RAFTLOCK__ENVELOPE__BODY_ACL_LIST: return env->acl_list->stale;
	default: return false;
	}
}

void reads_serve(struct store *st, const Raftlock__Envelope *env, const struct reads_who *who,
		 reads_reply_cb cb, void *arg)
{
	struct reply r = {cb, arg, who, {0}};
	MDB_txn *txn = store_begin(st, false);
	r.view = (struct auth_view){.store = st, .txn = txn, .root = who ? who->root : NULL};
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_GET_LOCK: read_get_lock(st, &r, env, txn); break;
	case RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS: read_list_locks(st, &r, env, txn); break;
	case RAFTLOCK__ENVELOPE__BODY_LIST_SESSIONS: read_list_sessions(st, &r, env, txn); break;
	case RAFTLOCK__ENVELOPE__BODY_CHECK_TOKEN: read_check_token(st, &r, env, txn); break;
	case RAFTLOCK__ENVELOPE__BODY_ACL_LIST: read_acl_list(st, &r, env, txn); break;
	default: reply_status(&r, RAFTLOCK_EPROTO, "not a read"); break;
	}
	store_abort(txn);
}

/* ----------------------------------------------------- read barriers -- */

struct reads_waiter {
	reads_ready_cb cb;
	void *arg;
	struct reads_waiter *next;
};

struct reads_batch {
	struct raft_barrier barrier;
	struct reads *reads;
	struct reads_waiter *head;
};

static void batch_finish(struct reads_batch *b, int status)
{
	for (struct reads_waiter *w = b->head, *next; w != NULL; w = next) {
		next = w->next;
		w->cb(w->arg, status);
		free(w);
	}
	free(b);
}

static void start_barrier(struct reads *r);

/* A committed barrier proves this node was leader after every read in the
 * batch arrived, and everything committed before is applied. */
static void barrier_done(struct raft_barrier *req, int status)
{
	struct reads_batch *b = req->data;
	struct reads *r = b->reads;
	if (r->inflight == b)
		r->inflight = NULL;
	int st = status == 0 && r->node->ready ? 0
		 : status == RAFT_SHUTDOWN     ? RAFTLOCK_ESHUTDOWN
					       : RAFTLOCK_ENOTLEADER;
	batch_finish(b, st);
	if (!r->closing)
		start_barrier(r);
}

static void start_barrier(struct reads *r)
{
	struct reads_batch *b = r->waiting;
	if (b == NULL || r->inflight != NULL)
		return;
	r->waiting = NULL;
	b->barrier.data = b;
	if (raft_barrier(&r->node->raft, &b->barrier, barrier_done) != 0) {
		batch_finish(b, RAFTLOCK_ENOTLEADER);
		return;
	}
	r->inflight = b;
}

void reads_init(struct reads *r, struct node *node)
{
	r->node = node;
	r->waiting = r->inflight = NULL;
	r->closing = false;
}

int reads_wait(struct reads *r, reads_ready_cb cb, void *arg)
{
	struct reads_waiter *w = calloc(1, sizeof *w);
	struct reads_batch *b = r->waiting;
	if (b == NULL) {
		b = calloc(1, sizeof *b);
		if (b != NULL)
			b->reads = r;
	}
	if (w == NULL || b == NULL) {
		free(w);
		if (b != r->waiting)
			free(b);
		return RAFTLOCK_ENOMEM;
	}
	*w = (struct reads_waiter){cb, arg, b->head};
	b->head = w;
	r->waiting = b;
	start_barrier(r);
	return 0;
}

void reads_close(struct reads *r)
{
	r->closing = true;
	struct reads_batch *b = r->waiting;
	r->waiting = NULL;
	if (b != NULL)
		batch_finish(b, RAFTLOCK_ESHUTDOWN);
}
