/*
 * test_fsm_harness.h: a state machine on a real LMDB store in a fresh
 * temporary directory, driven by log entries built in the test.
 *
 * Each entry gets the next log index and the fixture's current cluster time
 * (`now`, set by the test). Events of the last applied entry are kept in
 * `events`; every event so far is appended to `trace` as a line of text, and
 * every entry applied is kept encoded in `log`, so a test can replay the
 * same log onto another store and compare. Buffers and second stores a
 * test makes are tied to the fixture and freed at teardown even when an
 * assertion fails. Helpers are static inline so each test file uses only
 * what it needs.
 */
#ifndef TEST_FSM_HARNESS_H
#define TEST_FSM_HARNESS_H

#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "codec.h"
#include "feature_level.h"
#include "fsm.h"
#include "grow.h"
#include "outcomes.h"
#include "raftlock.h"
#include "raftlock.pb-c.h"
#include "session_locks.h"
#include "store.h"

#define FX_MAP_SIZE (64u << 20)
/* One apply's events: a set's grant or wait tells the watches of each
 * of its locks, besides the outcome. */
#define FX_MAX_EVENTS (2 * RAFTLOCK_MULTI_MAX + 64)
#define FX_TTL 10000u
/* A floor the size INIT carries in production: wall-clock ms << 20. */
#define FX_FLOOR (UINT64_C(1700000000000) << 20)
/* The cluster id INIT draws. */
#define FX_CLUSTER_ID 77

struct fx_event {
	enum fsm_event_type type;
	unsigned command;
	uint64_t session, seq, deadline;
	uint32_t ttl_ms;
	char name[RAFTLOCK_NAME_MAX + 1];
	bool has_result;
	Raftlock__Result result;
	uint64_t tokens[RAFTLOCK_MULTI_MAX]; /* result.tokens points here */
	bool has_change;                     /* FSM_EV_CHANGE: the change, its name in `name` */
	Raftlock__WatchEvent change;
	char value[RAFTLOCK_VALUE_MAX + 1]; /* the change's value */
};

struct fx_entry {
	uint64_t index;
	void *buf;
	size_t len;
};

struct fx {
	char dir[64];
	struct store store;
	struct fsm fsm;
	uint64_t index; /* index of the last entry applied */
	uint64_t now;   /* cluster time of the next entry */
	uint64_t seq;   /* last sequence number handed out */
	size_t n_events;
	struct fx_event events[FX_MAX_EVENTS];
	char *trace;
	size_t trace_len;
	size_t trace_cap; /* grow(): the sanitizer build maps a new block and
			     copies at every realloc of a large one */
	struct fx_entry *log;
	size_t n_log;
	/* Freed with the fixture, so a failed assertion leaks nothing. */
	void **kept;
	size_t n_kept;
	struct fx *peers[4];
	size_t n_peers;
};

/* One command, described by the fields its kind uses. */
struct op {
	Raftlock__Command__OpCase type;
	uint64_t session, seq, ack_below;
	const char *name;
	Raftlock__LockKind kind;
	Raftlock__Mode mode;
	uint32_t permits, limit;
	uint64_t owner;
	bool wait;
	uint32_t wait_ms, lock_delay_ms;
	uint64_t nonce;
	uint32_t ttl_ms;
	uint64_t floor;
	uint64_t restored_from; /* INIT: the backup image's checksum */
	uint32_t level;         /* INIT, SET_FEATURE_LEVEL */
	uint64_t target;        /* EXPIRE_SESSION, WAIT_EXPIRE: whose; MEMBER_REMOVE: its id */
	uint64_t acquire_seq;   /* CANCEL_WAIT, WAIT_EXPIRE */
	const uint64_t *renew;
	size_t n_renew;
	uint64_t store_limit;  /* STORE_LIMIT: bytes */
	const uint64_t *acked; /* client commands: queued acquires acknowledged */
	size_t n_acked;
	bool acks_queued;      /* OPEN_SESSION */
	const char *digest;    /* OPEN_SESSION: the secret's digest (32 bytes), or NULL */
	const char *identity;  /* OPEN_SESSION, ACL_SET, ACL_DELETE */
	const char *prefix;    /* ACL_SET, ACL_DELETE */
	uint32_t perms;        /* ACL_SET */
	uint32_t max_sessions; /* OPEN_SESSION: per identity, as the leader carries it */
	uint32_t max_waiters;  /* ACQUIRE: per lock, as the leader carries it */
	/* MULTI_ACQUIRE: the names of the set (n_names; `name` unused) and
	 * each one's mode (NULL: all `mode`); kind, permits, limit, owner,
	 * wait, wait_ms as for ACQUIRE, for every item. */
	const char *const *names;
	size_t n_names;
	const Raftlock__Mode *modes;
	const char *value; /* ACQUIRE, PROCLAIM: the election value */
	uint64_t token;    /* PROCLAIM */
};

#define OP(t, ...) ((struct op){.type = RAFTLOCK__COMMAND__OP_##t, __VA_ARGS__})
/* Applies one command in an entry of its own; yields its Raftlock__Result. */
#define DO(f, t, ...) fx_do((f), OP(t, __VA_ARGS__))

/* The message storage one command points into. */
struct cmd_buf {
	Raftlock__Command cmd;
	Raftlock__Init init;
	Raftlock__OpenSession open;
	Raftlock__Owner owner;
	Raftlock__Renew renew;
	Raftlock__CloseSession close;
	Raftlock__ExpireSession expire;
	Raftlock__Acquire acquire;
	Raftlock__Release release;
	Raftlock__CancelWait cancel;
	Raftlock__LockDelayEnd delay_end;
	Raftlock__WaitExpire wait_expire;
	Raftlock__StoreLimit store_limit;
	Raftlock__AclSet acl_set;
	Raftlock__AclDelete acl_delete;
	Raftlock__SetFeatureLevel set_level;
	Raftlock__MultiAcquire multi;
	Raftlock__MultiItem items[RAFTLOCK_MULTI_MAX + 1];
	Raftlock__MultiItem *item_ptrs[RAFTLOCK_MULTI_MAX + 1];
	Raftlock__Proclaim proclaim;
	Raftlock__MemberRemove member_remove;
};

static inline bool op_is_client(Raftlock__Command__OpCase t)
{
	return t == RAFTLOCK__COMMAND__OP_ACQUIRE || t == RAFTLOCK__COMMAND__OP_RELEASE ||
	       t == RAFTLOCK__COMMAND__OP_CANCEL_WAIT || t == RAFTLOCK__COMMAND__OP_CLOSE_SESSION ||
	       t == RAFTLOCK__COMMAND__OP_MULTI_ACQUIRE || t == RAFTLOCK__COMMAND__OP_PROCLAIM;
}

static inline void cmd_build(struct cmd_buf *b, const struct op *o)
{
	raftlock__command__init(&b->cmd);
	b->cmd.session = o->session;
	b->cmd.seq = o->seq;
	b->cmd.ack_below = o->ack_below;
	b->cmd.acked = (uint64_t *)o->acked;
	b->cmd.n_acked = o->n_acked;
	b->cmd.op_case = o->type;
	char *name = (char *)(o->name ? o->name : "");
	switch (o->type) {
	case RAFTLOCK__COMMAND__OP_INIT:
		raftlock__init__init(&b->init);
		b->init.token_floor = o->floor;
		b->init.cluster = (char *)"test";
		b->init.cluster_id = FX_CLUSTER_ID;
		b->init.restored_from = o->restored_from;
		b->init.feature_level = o->level;
		b->cmd.init = &b->init;
		break;
	case RAFTLOCK__COMMAND__OP_SET_FEATURE_LEVEL:
		raftlock__set_feature_level__init(&b->set_level);
		b->set_level.level = o->level;
		b->cmd.set_feature_level = &b->set_level;
		break;
	case RAFTLOCK__COMMAND__OP_OPEN_SESSION:
		raftlock__open_session__init(&b->open);
		raftlock__owner__init(&b->owner);
		b->owner.client_name = (char *)"test_fsm";
		b->owner.host = (char *)"localhost";
		b->owner.pid = 4242;
		b->open.nonce = o->nonce;
		b->open.ttl_ms = o->ttl_ms;
		b->open.acks_queued = o->acks_queued;
		if (o->digest != NULL)
			b->open.secret_digest = (ProtobufCBinaryData){32, (uint8_t *)o->digest};
		b->open.identity = (char *)(o->identity ? o->identity : "");
		b->open.max_sessions_per_identity = o->max_sessions;
		b->open.owner = &b->owner;
		b->cmd.open_session = &b->open;
		break;
	case RAFTLOCK__COMMAND__OP_RENEW:
		raftlock__renew__init(&b->renew);
		b->renew.sessions = (uint64_t *)o->renew;
		b->renew.n_sessions = o->n_renew;
		b->cmd.renew = &b->renew;
		break;
	case RAFTLOCK__COMMAND__OP_CLOSE_SESSION:
		raftlock__close_session__init(&b->close);
		b->cmd.close_session = &b->close;
		break;
	case RAFTLOCK__COMMAND__OP_EXPIRE_SESSION:
		raftlock__expire_session__init(&b->expire);
		b->expire.session = o->target;
		b->cmd.expire_session = &b->expire;
		break;
	case RAFTLOCK__COMMAND__OP_ACQUIRE:
		raftlock__acquire__init(&b->acquire);
		b->acquire.name = name;
		b->acquire.kind = o->kind;
		b->acquire.mode = o->mode;
		b->acquire.permits = o->permits;
		b->acquire.limit = o->limit;
		b->acquire.owner = o->owner;
		b->acquire.wait = o->wait;
		b->acquire.wait_ms = o->wait_ms;
		b->acquire.lock_delay_ms = o->lock_delay_ms;
		b->acquire.max_waiters = o->max_waiters;
		b->acquire.value = (char *)(o->value ? o->value : "");
		b->cmd.acquire = &b->acquire;
		break;
	case RAFTLOCK__COMMAND__OP_PROCLAIM:
		raftlock__proclaim__init(&b->proclaim);
		b->proclaim.name = name;
		b->proclaim.owner = o->owner;
		b->proclaim.token = o->token;
		b->proclaim.value = (char *)(o->value ? o->value : "");
		b->cmd.proclaim = &b->proclaim;
		break;
	case RAFTLOCK__COMMAND__OP_RELEASE:
		raftlock__release__init(&b->release);
		b->release.name = name;
		b->release.owner = o->owner;
		b->cmd.release = &b->release;
		break;
	case RAFTLOCK__COMMAND__OP_CANCEL_WAIT:
		raftlock__cancel_wait__init(&b->cancel);
		b->cancel.name = name;
		b->cancel.owner = o->owner;
		b->cancel.acquire_seq = o->acquire_seq;
		b->cmd.cancel_wait = &b->cancel;
		break;
	case RAFTLOCK__COMMAND__OP_LOCK_DELAY_END:
		raftlock__lock_delay_end__init(&b->delay_end);
		b->delay_end.name = name;
		b->cmd.lock_delay_end = &b->delay_end;
		break;
	case RAFTLOCK__COMMAND__OP_WAIT_EXPIRE:
		raftlock__wait_expire__init(&b->wait_expire);
		b->wait_expire.name = name;
		b->wait_expire.session = o->target;
		b->wait_expire.acquire_seq = o->acquire_seq;
		b->cmd.wait_expire = &b->wait_expire;
		break;
	case RAFTLOCK__COMMAND__OP_STORE_LIMIT:
		raftlock__store_limit__init(&b->store_limit);
		b->store_limit.bytes = o->store_limit;
		b->cmd.store_limit = &b->store_limit;
		break;
	case RAFTLOCK__COMMAND__OP_ACL_SET:
		raftlock__acl_set__init(&b->acl_set);
		b->acl_set.identity = (char *)(o->identity ? o->identity : "");
		b->acl_set.prefix = (char *)(o->prefix ? o->prefix : "");
		b->acl_set.perms = o->perms;
		b->cmd.acl_set = &b->acl_set;
		break;
	case RAFTLOCK__COMMAND__OP_ACL_DELETE:
		raftlock__acl_delete__init(&b->acl_delete);
		b->acl_delete.identity = (char *)(o->identity ? o->identity : "");
		b->acl_delete.prefix = (char *)(o->prefix ? o->prefix : "");
		b->cmd.acl_delete = &b->acl_delete;
		break;
	case RAFTLOCK__COMMAND__OP_MULTI_ACQUIRE:
		raftlock__multi_acquire__init(&b->multi);
		assert_true(o->n_names <= RAFTLOCK_MULTI_MAX + 1);
		for (size_t i = 0; i < o->n_names; i++) {
			Raftlock__MultiItem *it = &b->items[i];
			raftlock__multi_item__init(it);
			it->name = (char *)o->names[i];
			it->kind = o->kind;
			it->mode = o->modes ? o->modes[i] : o->mode;
			it->permits = o->permits;
			it->limit = o->limit;
			it->lock_delay_ms = o->lock_delay_ms;
			b->item_ptrs[i] = it;
		}
		b->multi.items = b->item_ptrs;
		b->multi.n_items = o->n_names;
		b->multi.owner = o->owner;
		b->multi.wait = o->wait;
		b->multi.wait_ms = o->wait_ms;
		b->multi.max_waiters = o->max_waiters;
		b->cmd.multi_acquire = &b->multi;
		break;
	case RAFTLOCK__COMMAND__OP_MEMBER_REMOVE:
		raftlock__member_remove__init(&b->member_remove);
		b->member_remove.id = o->target;
		b->cmd.member_remove = &b->member_remove;
		break;
	default: fail_msg("op type %d not supported by the harness", (int)o->type);
	}
}

/* ------------------------------------------------------------- events -- */

static inline void fx_trace(struct fx *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	assert_true(n >= 0);
	assert_int_equal(grow(&f->trace, &f->trace_cap, f->trace_len + (size_t)n + 1, 4096, 1), 0);
	va_start(ap, fmt);
	vsnprintf(f->trace + f->trace_len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	f->trace_len += (size_t)n;
}

static inline void fx_emit(void *arg, const struct fsm_event *ev)
{
	struct fx *f = arg;
	assert_true(f->n_events < FX_MAX_EVENTS);
	struct fx_event *e = &f->events[f->n_events++];
	memset(e, 0, sizeof *e);
	e->type = ev->type;
	e->command = ev->command;
	e->session = ev->session;
	e->seq = ev->seq;
	e->deadline = ev->deadline;
	e->ttl_ms = ev->ttl_ms;
	if (ev->name != NULL) {
		assert_true(strlen(ev->name) <= RAFTLOCK_NAME_MAX);
		strcpy(e->name, ev->name);
	}
	if (ev->result != NULL) {
		e->has_result = true;
		e->result = *ev->result;
		assert_true(e->result.n_tokens <= RAFTLOCK_MULTI_MAX);
		if (e->result.n_tokens > 0)
			memcpy(e->tokens, e->result.tokens, e->result.n_tokens * sizeof *e->tokens);
		e->result.tokens = e->tokens;
	}
	if (ev->change != NULL) {
		e->has_change = true;
		e->change = *ev->change;
		e->change.name = e->name;
		snprintf(e->value, sizeof e->value, "%s", ev->change->value);
		e->change.value = e->value;
		fx_trace(f, "@%llu change %llu.%u kind=%d s=%llu o=%llu tok=%llu st=%d\n",
			 (unsigned long long)f->index, (unsigned long long)ev->change->index,
			 ev->change->offset, (int)ev->change->kind,
			 (unsigned long long)ev->change->session,
			 (unsigned long long)ev->change->owner,
			 (unsigned long long)ev->change->token, ev->change->status);
	}
	fx_trace(f,
		 "@%llu ev=%d cmd=%u s=%llu seq=%llu dl=%llu ttl=%u name=%s "
		 "st=%d tok=%llu sess=%llu n=%u q=%d\n",
		 (unsigned long long)f->index, (int)e->type, e->command,
		 (unsigned long long)e->session, (unsigned long long)e->seq,
		 (unsigned long long)e->deadline, e->ttl_ms, e->name, e->result.status,
		 (unsigned long long)e->result.token, (unsigned long long)e->result.session,
		 e->result.count, (int)e->result.queued);
}

/* Counts events of `type` reported by the last entry. */
static inline size_t fx_count(const struct fx *f, enum fsm_event_type type)
{
	size_t n = 0;
	for (size_t i = 0; i < f->n_events; i++)
		n += f->events[i].type == type;
	return n;
}

/* The PUSH of the last entry for (session, seq), or NULL. */
static inline const struct fx_event *fx_push(const struct fx *f, uint64_t session, uint64_t seq)
{
	for (size_t i = 0; i < f->n_events; i++)
		if (f->events[i].type == FSM_EV_PUSH && f->events[i].session == session &&
		    f->events[i].seq == seq)
			return &f->events[i];
	return NULL;
}

/* The first event of `type` of the last entry, or NULL. */
static inline const struct fx_event *fx_event(const struct fx *f, enum fsm_event_type type)
{
	for (size_t i = 0; i < f->n_events; i++)
		if (f->events[i].type == type)
			return &f->events[i];
	return NULL;
}

/* Asserts that the last entry pushed a grant to (session, seq); returns its
 * token. */
static inline uint64_t fx_pushed_grant(const struct fx *f, uint64_t session, uint64_t seq)
{
	const struct fx_event *e = fx_push(f, session, seq);
	assert_non_null(e);
	assert_true(e->has_result);
	assert_int_equal(e->result.status, 0);
	assert_false(e->result.queued);
	assert_int_equal(e->result.count, 1);
	assert_true(e->result.token != 0);
	return e->result.token;
}

/* Asserts that the last entry pushed the final error `status` to
 * (session, seq). */
static inline void fx_pushed_error(const struct fx *f, uint64_t session, uint64_t seq, int status)
{
	const struct fx_event *e = fx_push(f, session, seq);
	assert_non_null(e);
	assert_true(e->has_result);
	assert_int_equal(e->result.status, status);
	assert_int_equal(e->result.token, 0);
}

/* ------------------------------------------------------------ fixture -- */

static inline void fx_open_store(struct fx *f)
{
	char err[256] = "";
	int rv = store_open(&f->store, f->dir, FX_MAP_SIZE, err, sizeof err);
	if (rv != 0)
		fail_msg("store_open %s: %d %s", f->dir, rv, err);
	fsm_init(&f->fsm, &f->store);
}

/* Ties p to the fixture; returns p. */
static inline void *fx_keep(struct fx *f, void *p)
{
	void **kept = realloc(f->kept, (f->n_kept + 1) * sizeof *kept);
	assert_non_null(kept);
	f->kept = kept;
	f->kept[f->n_kept++] = p;
	return p;
}

/* Frees p now (it was kept by fx_keep). */
static inline void fx_drop(struct fx *f, void *p)
{
	for (size_t i = 0; i < f->n_kept; i++) {
		if (f->kept[i] == p) {
			f->kept[i] = f->kept[--f->n_kept];
			break;
		}
	}
	free(p);
}

static inline void *fx_alloc(struct fx *f, size_t n)
{
	void *p = malloc(n ? n : 1);
	assert_non_null(p);
	return fx_keep(f, p);
}

static inline struct fx *fx_new(void)
{
	struct fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	strcpy(f->dir, "/tmp/test_fsm.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	fx_open_store(f);
	return f;
}

/* Closes and reopens the store in the same directory: a restart. */
static inline void fx_restart(struct fx *f)
{
	fsm_fini(&f->fsm);
	store_close(&f->store);
	fx_open_store(f);
}

static inline void fx_free(struct fx *f)
{
	if (f == NULL)
		return;
	for (size_t i = 0; i < f->n_peers; i++)
		fx_free(f->peers[i]);
	for (size_t i = 0; i < f->n_kept; i++)
		free(f->kept[i]);
	free(f->kept);
	fsm_fini(&f->fsm);
	store_close(&f->store);
	DIR *d = opendir(f->dir);
	if (d != NULL) {
		struct dirent *de;
		while ((de = readdir(d)) != NULL)
			if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
				unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
	rmdir(f->dir);
	for (size_t i = 0; i < f->n_log; i++)
		free(f->log[i].buf);
	free(f->log);
	free(f->trace);
	free(f);
}

/* A second fixture, freed with f. */
static inline struct fx *fx_peer(struct fx *f)
{
	assert_true(f->n_peers < sizeof f->peers / sizeof f->peers[0]);
	struct fx *p = fx_new();
	f->peers[f->n_peers++] = p;
	return p;
}

static inline int fx_setup(void **state)
{
	*state = fx_new();
	return 0;
}

static inline int fx_teardown(void **state)
{
	fx_free(*state);
	return 0;
}

/* ---------------------------------------------------------- applying -- */

/* Applies an entry of n commands at `index` with the fixture's cluster
 * time, keeping it in the log. Does not move f->index. */
static inline void fx_apply_entry_at(struct fx *f, uint64_t index, const struct op *ops, size_t n)
{
	struct cmd_buf *bufs = calloc(n ? n : 1, sizeof *bufs);
	Raftlock__Command **cmds = calloc(n ? n : 1, sizeof *cmds);
	assert_non_null(bufs);
	assert_non_null(cmds);
	for (size_t i = 0; i < n; i++) {
		cmd_build(&bufs[i], &ops[i]);
		cmds[i] = &bufs[i].cmd;
	}
	Raftlock__LogEntry entry = RAFTLOCK__LOG_ENTRY__INIT;
	entry.cluster_time = f->now;
	entry.commands = cmds;
	entry.n_commands = n;

	struct fx_entry *log = realloc(f->log, (f->n_log + 1) * sizeof *log);
	assert_non_null(log);
	f->log = log;
	struct fx_entry *e = &f->log[f->n_log++];
	e->index = index;
	assert_int_equal(codec_encode_entry(&entry, malloc, &e->buf, &e->len), 0);

	struct fsm_sink sink = {.emit = fx_emit, .arg = f};
	f->n_events = 0;
	fsm_apply(&f->fsm, index, &entry, &sink);
	free(cmds);
	free(bufs);
}

/* Gives client commands without a sequence the next one of the fixture. */
static inline void fx_number(struct fx *f, struct op *o)
{
	if (op_is_client(o->type) && o->seq == 0)
		o->seq = ++f->seq;
}

/* Applies an entry of n commands at the next index; the ops' sequence
 * numbers are filled in. */
static inline void fx_apply(struct fx *f, struct op *ops, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fx_number(f, &ops[i]);
	fx_apply_entry_at(f, ++f->index, ops, n);
}

/* The result of command `command` of the last entry. */
static inline Raftlock__Result fx_result(const struct fx *f, unsigned command)
{
	const struct fx_event *found = NULL;
	for (size_t i = 0; i < f->n_events; i++) {
		if (f->events[i].type != FSM_EV_RESULT || f->events[i].command != command)
			continue;
		assert_null(found); /* exactly one result per command */
		found = &f->events[i];
	}
	assert_non_null(found);
	assert_true(found->has_result);
	return found->result;
}

static inline Raftlock__Result fx_do(struct fx *f, struct op o)
{
	fx_apply(f, &o, 1);
	assert_int_equal(fx_count(f, FSM_EV_RESULT), 1);
	return fx_result(f, 0);
}

/* ----------------------------------------------------- common steps -- */

/* The feature level INIT records: none (read as 1) unless the environment
 * names one in RAFTLOCK_FX_LEVEL (a number, or "current": the build's).
 * ctest runs the state machine's tests once as they are and once at the
 * build's level, where a session's names live in their own table
 * (session_locks.h). */
static inline uint32_t fx_level(void)
{
	const char *v = getenv("RAFTLOCK_FX_LEVEL");
	if (v != NULL && strcmp(v, "current") == 0)
		return FEATURE_LEVEL;
	return v != NULL ? (uint32_t)strtoul(v, NULL, 10) : 0;
}

static inline void fx_init(struct fx *f, uint64_t floor)
{
	Raftlock__Result r = DO(f, INIT, .floor = floor, .level = fx_level());
	assert_int_equal(r.status, 0);
}

/* Opens a session with the given TTL at the current time; returns its id. */
static inline uint64_t fx_session_ttl(struct fx *f, uint32_t ttl_ms)
{
	Raftlock__Result r = DO(f, OPEN_SESSION, .ttl_ms = ttl_ms);
	assert_int_equal(r.status, 0);
	assert_true(r.session != 0);
	assert_int_equal(r.ttl_ms, ttl_ms);
	return r.session;
}

static inline uint64_t fx_session(struct fx *f)
{
	return fx_session_ttl(f, FX_TTL);
}

/* A fresh fixture with INIT applied, at cluster time 1000. */
static inline struct fx *fx_ready(void **state)
{
	struct fx *f = *state;
	f->now = 1000;
	fx_init(f, FX_FLOOR);
	return f;
}

/* The same at feature level `level`, whatever RAFTLOCK_FX_LEVEL says: for
 * a test of what a level does. */
static inline struct fx *fx_ready_at(void **state, uint32_t level)
{
	struct fx *f = *state;
	f->now = 1000;
	assert_int_equal(DO(f, INIT, .floor = FX_FLOOR, .level = level).status, 0);
	return f;
}

/* Takes a mutex that must be free; returns the token. */
static inline uint64_t fx_take(struct fx *f, uint64_t session, uint64_t owner, const char *name)
{
	Raftlock__Result r = DO(f, ACQUIRE, .session = session, .owner = owner, .name = name);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.count, 1);
	assert_false(r.queued);
	assert_true(r.token != 0);
	return r.token;
}

/* Queues a blocking acquire that must wait; returns its sequence. */
static inline uint64_t fx_enqueue(struct fx *f, struct op o)
{
	o.type = RAFTLOCK__COMMAND__OP_ACQUIRE;
	o.wait = true;
	fx_number(f, &o);
	Raftlock__Result r = fx_do(f, o);
	assert_int_equal(r.status, 0);
	assert_true(r.queued);
	assert_int_equal(r.token, 0);
	return o.seq;
}

static inline void fx_release_ok(struct fx *f, uint64_t session, uint64_t owner, const char *name,
				 uint32_t remaining)
{
	Raftlock__Result r = DO(f, RELEASE, .session = session, .owner = owner, .name = name);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.count, remaining);
}

/* --------------------------------------------------------- the store -- */

static inline Raftlock__LockRecord *fx_lock(struct fx *f, const char *name)
{
	MDB_txn *txn = store_begin(&f->store, false);
	Raftlock__LockRecord *l = store_get_lock(&f->store, txn, name);
	store_abort(txn);
	return l;
}

static inline Raftlock__SessionRecord *fx_sess(struct fx *f, uint64_t id)
{
	MDB_txn *txn = store_begin(&f->store, false);
	Raftlock__SessionRecord *s = store_get_session(&f->store, txn, id);
	store_abort(txn);
	return s;
}

/* The names session id holds or awaits, wherever the recorded feature
 * level keeps them (session_locks.h); the array is freed with the
 * fixture. *n is their number. Their count as the session record keeps
 * it must agree. */
static inline char **fx_session_names(struct fx *f, uint64_t id, size_t *n)
{
	MDB_txn *txn = store_begin(&f->store, false);
	Raftlock__Meta *m = store_get_meta(&f->store, txn);
	struct session_locks sl = session_locks_at(&f->store, txn, m);
	raftlock__meta__free_unpacked(m, NULL);
	Raftlock__SessionRecord *s = store_get_session(&f->store, txn, id);
	assert_non_null(s);
	char **names = session_locks_names(&sl, s, n);
	assert_int_equal(session_locks_count(&sl, s), *n);
	raftlock__session_record__free_unpacked(s, NULL);
	store_abort(txn);
	char **kept = fx_keep(f, calloc(*n + 1, sizeof *kept));
	for (size_t i = 0; i < *n; i++)
		kept[i] = fx_keep(f, names[i]);
	free(names);
	return kept;
}

/* An outcome a session keeps (outcomes.h), as fx_outcomes() copies it. */
struct fx_outcome {
	uint64_t seq;
	int status, limit;
	bool pending, queued;
};

struct fx_outcomes_copy {
	struct fx_outcome *out;
	size_t n, cap, pending;
};

static inline bool fx_outcome_copy(void *arg, const Raftlock__Outcome *o)
{
	struct fx_outcomes_copy *c = arg;
	if (c->n < c->cap)
		c->out[c->n] = (struct fx_outcome){.seq = o->seq,
						   .status = o->result ? o->result->status : 0,
						   .limit = o->result ? (int)o->result->limit : 0,
						   .pending = o->pending,
						   .queued = o->queued};
	c->n++;
	c->pending += o->pending;
	return false; /* kept */
}

static inline int fx_outcome_order(const void *x, const void *y)
{
	const struct fx_outcome *a = x, *b = y;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* The outcomes session id keeps, at either level, in seq order: up to cap
 * of them into out; returns how many there are. At the level of the
 * table, its rows must agree with the counts in the session's record. */
static inline size_t fx_outcomes(struct fx *f, uint64_t id, struct fx_outcome *out, size_t cap)
{
	MDB_txn *txn = store_begin(&f->store, false);
	Raftlock__Meta *m = store_get_meta(&f->store, txn);
	struct outcomes oc = outcomes_at(&f->store, txn, m);
	raftlock__meta__free_unpacked(m, NULL);
	Raftlock__SessionRecord *s = store_get_session(&f->store, txn, id);
	assert_non_null(s);
	struct fx_outcomes_copy c = {.out = out, .cap = cap};
	if (oc.indexed) {
		store_sweep_outcomes(&f->store, txn, id, 0, UINT64_MAX, fx_outcome_copy, &c);
		assert_int_equal(s->n_outcomes, 0);
		assert_int_equal(s->outcome_count, c.n);
		assert_int_equal(s->pending_outcomes, c.pending);
	} else {
		for (size_t i = 0; i < s->n_outcomes; i++)
			fx_outcome_copy(&c, s->outcomes[i]);
		assert_int_equal(s->outcome_count, 0);
	}
	assert_int_equal(outcomes_count(&oc, s), c.n);
	assert_int_equal(outcomes_any_pending(&oc, s), c.pending > 0);
	raftlock__session_record__free_unpacked(s, NULL);
	store_abort(txn);
	if (out != NULL)
		qsort(out, c.n < cap ? c.n : cap, sizeof *out, fx_outcome_order);
	return c.n;
}

/* The lock sets session id has queued, at either level (multilock.h):
 * its record's list, or its rows of the multi_waits table. */
static inline size_t fx_session_sets(struct fx *f, uint64_t id)
{
	MDB_txn *txn = store_begin(&f->store, false);
	Raftlock__SessionRecord *s = store_get_session(&f->store, txn, id);
	assert_non_null(s);
	size_t n = s->n_multi_waits, rows = 0;
	raftlock__session_record__free_unpacked(s, NULL);
	MDB_cursor *cur;
	uint8_t k[16] = {0};
	for (int i = 0; i < 8; i++)
		k[i] = (uint8_t)(id >> (56 - 8 * i));
	MDB_val key = {16, k}, val;
	assert_int_equal(mdb_cursor_open(txn, f->store.multi_waits, &cur), 0);
	for (int rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
	     rc == 0 && memcmp(key.mv_data, k, 8) == 0;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT))
		rows++;
	mdb_cursor_close(cur);
	store_abort(txn);
	assert_true(n == 0 || rows == 0); /* one home or the other */
	return n + rows;
}

static inline Raftlock__Meta *fx_meta(struct fx *f)
{
	MDB_txn *txn = store_begin(&f->store, false);
	Raftlock__Meta *m = store_get_meta(&f->store, txn);
	store_abort(txn);
	return m;
}

static inline uint64_t fx_next_token(struct fx *f)
{
	Raftlock__Meta *m = fx_meta(f);
	uint64_t t = m->next_token;
	raftlock__meta__free_unpacked(m, NULL);
	return t;
}

static inline uint64_t fx_count_sessions(struct fx *f)
{
	MDB_txn *txn = store_begin(&f->store, false);
	uint64_t n = store_count_sessions(&f->store, txn);
	store_abort(txn);
	return n;
}

static inline bool fx_lock_exists(struct fx *f, const char *name)
{
	Raftlock__LockRecord *l = fx_lock(f, name);
	raftlock__lock_record__free_unpacked(l, NULL);
	return l != NULL;
}

/*
 * Asserts the holders of `name`, in order: (session, owner) pairs ended by a
 * 0 session. Returns the first holder's token (0 if none).
 */
static inline uint64_t fx_assert_holders(struct fx *f, const char *name, const uint64_t *want)
{
	Raftlock__LockRecord *l = fx_lock(f, name);
	size_t n = l ? l->n_holders : 0, i = 0;
	for (; want[2 * i] != 0; i++) {
		assert_true(i < n);
		assert_int_equal(l->holders[i]->session, want[2 * i]);
		assert_int_equal(l->holders[i]->owner, want[2 * i + 1]);
	}
	assert_int_equal(i, n);
	uint64_t token = n ? l->holders[0]->token : 0;
	if (l != NULL)
		raftlock__lock_record__free_unpacked(l, NULL);
	return token;
}

/* Asserts the waiters of `name`, in order: (session, seq) pairs ended by a
 * 0 session. */
static inline void fx_assert_waiters(struct fx *f, const char *name, const uint64_t *want)
{
	Raftlock__LockRecord *l = fx_lock(f, name);
	size_t n = l ? l->n_waiters : 0, i = 0;
	for (; want[2 * i] != 0; i++) {
		assert_true(i < n);
		assert_int_equal(l->waiters[i]->session, want[2 * i]);
		assert_int_equal(l->waiters[i]->seq, want[2 * i + 1]);
	}
	assert_int_equal(i, n);
	if (l != NULL)
		raftlock__lock_record__free_unpacked(l, NULL);
}

/* HOLDERS(f, name, s1, o1, s2, o2) or HOLDERS(f, name, 0) for none. */
#define HOLDERS(f, name, ...) fx_assert_holders((f), (name), (const uint64_t[]){__VA_ARGS__, 0, 0})
#define WAITERS(f, name, ...) fx_assert_waiters((f), (name), (const uint64_t[]){__VA_ARGS__, 0, 0})

/* -------------------------------------------------- images and replay -- */

struct fx_image {
	struct fx *owner;
	void *buf;
	size_t len;
};

static inline struct fx_image fx_dump(struct fx *f)
{
	struct fx_image im = {.owner = f};
	assert_int_equal(store_dump(&f->store, malloc, &im.buf, &im.len), 0);
	assert_non_null(im.buf);
	fx_keep(f, im.buf);
	return im;
}

static inline void fx_image_free(struct fx_image *im)
{
	fx_drop(im->owner, im->buf);
	im->buf = NULL;
	im->len = 0;
}

static inline void fx_assert_same_image(const struct fx_image *a, const struct fx_image *b)
{
	assert_int_equal(a->len, b->len);
	assert_memory_equal(a->buf, b->buf, a->len);
}

/* Asserts that two stores have byte-identical dumps. */
static inline void fx_assert_same_state(struct fx *a, struct fx *b)
{
	struct fx_image ia = fx_dump(a), ib = fx_dump(b);
	fx_assert_same_image(&ia, &ib);
	fx_image_free(&ia);
	fx_image_free(&ib);
}

/* Asserts that the store's dump is `im`. */
static inline void fx_assert_image(struct fx *f, const struct fx_image *im)
{
	struct fx_image now = fx_dump(f);
	fx_assert_same_image(&now, im);
	fx_image_free(&now);
}

/* Bytes of checksum at the end of an image (store.h). */
#define FX_IMAGE_SUM 8

/* Where the records after the meta record start in an image. */
static inline size_t fx_image_records(const struct fx_image *im)
{
	const uint8_t *p = im->buf;
	assert_true(im->len > 16 + 9);
	assert_int_equal(p[16], 1); /* the meta database comes first */
	size_t klen = (size_t)p[17] << 24 | (size_t)p[18] << 16 | (size_t)p[19] << 8 | p[20];
	size_t at = 21 + klen;
	assert_true(im->len > at + 4);
	size_t vlen =
		(size_t)p[at] << 24 | (size_t)p[at + 1] << 16 | (size_t)p[at + 2] << 8 | p[at + 3];
	at += 4 + vlen;
	assert_true(im->len >= at);
	return at;
}

/* Asserts that sessions, locks and nonces are byte for byte those of `im`
 * (the meta record, with applied index and cluster time, may differ). */
static inline void fx_assert_records(struct fx *f, const struct fx_image *im)
{
	struct fx_image now = fx_dump(f);
	size_t a = fx_image_records(&now), b = fx_image_records(im);
	/* The trailing checksum covers the meta record too: leave it out. */
	assert_int_equal(now.len - a, im->len - b);
	assert_memory_equal((uint8_t *)now.buf + a, (uint8_t *)im->buf + b,
			    im->len - b - FX_IMAGE_SUM);
	fx_image_free(&now);
}

/* Applies src's log, as stored (encoded), entries [from, to) onto dst. */
static inline void fx_replay(struct fx *dst, const struct fx *src, size_t from, size_t to)
{
	struct fsm_sink sink = {.emit = fx_emit, .arg = dst};
	for (size_t i = from; i < to; i++) {
		if (src->log[i].index > dst->index)
			dst->index = src->log[i].index;
		dst->n_events = 0;
		fsm_apply_raw(&dst->fsm, src->log[i].index, src->log[i].buf, src->log[i].len,
			      &sink);
	}
}

/* Loads src's dump into dst and continues from src's index and time. */
static inline void fx_restore_from(struct fx *dst, struct fx *src)
{
	struct fx_image im = fx_dump(src);
	assert_int_equal(store_load(&dst->store, im.buf, im.len), 0);
	fx_image_free(&im);
	dst->index = src->index;
	dst->now = src->now;
	dst->seq = src->seq;
}

#endif
