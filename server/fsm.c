/* fsm.c: see fsm.h. The grant rules of DESIGN.md live here. */
#include "fsm.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "codec.h"
#include "feature_level.h"
#include "grow.h"
#include "log.h"
#include "member_book.h"
#include "raftlock.h"
#include "fsm_rules.h"
#include "deadlock.h"
#include "multilock.h"
#include "records.h"

void emit(struct apply *a, struct fsm_event ev)
{
	if (a->sink != NULL && a->sink->emit != NULL)
		a->sink->emit(a->sink->arg, &ev);
}

void note_change_value(struct apply *a, Raftlock__WatchKind kind, const char *name,
		       uint64_t session, uint64_t owner, uint64_t token, Raftlock__Mode mode,
		       uint32_t permits, int status, const char *value)
{
	Raftlock__WatchEvent c = RAFTLOCK__WATCH_EVENT__INIT;
	c.value = (char *)value;
	c.index = a->index;
	c.offset = ++a->changes;
	c.cluster_id = a->meta->cluster_id; /* whose history the position is of */
	c.kind = kind;
	c.name = (char *)name;
	c.session = session;
	c.owner = owner;
	c.token = token;
	c.mode = mode;
	c.permits = permits;
	c.status = status;
	emit(a, (struct fsm_event){.type = FSM_EV_CHANGE, .name = name, .change = &c});
}

void note_change(struct apply *a, Raftlock__WatchKind kind, const char *name, uint64_t session,
		 uint64_t owner, uint64_t token, Raftlock__Mode mode, uint32_t permits, int status)
{
	note_change_value(a, kind, name, session, owner, token, mode, permits, status, "");
}

void note_holder_gone(struct apply *a, const Raftlock__LockRecord *lock, size_t i,
		      Raftlock__WatchKind kind)
{
	const Raftlock__Holder *h = lock->holders[i];
	note_change_value(a, kind, lock->name, h->session, h->owner, h->token, h->mode, h->permits,
			  0, h->value);
}

void note_waiter_gone(struct apply *a, const Raftlock__LockRecord *lock, size_t i, int status)
{
	const Raftlock__Waiter *w = lock->waiters[i];
	note_change(a, RAFTLOCK__WATCH_KIND__WATCH_DEQUEUED, lock->name, w->session, w->owner, 0,
		    w->mode, w->permits, status);
}

Raftlock__Result result_of(int status)
{
	Raftlock__Result r = RAFTLOCK__RESULT__INIT;
	r.status = status;
	return r;
}

void fsm_init(struct fsm *f, struct store *store)
{
	f->store = store;
	f->store_refusals = 0;
	f->member_changes = 0;
	memset(&f->stats, 0, sizeof f->stats);
	histogram_init(&f->stats.wait, &histogram_duration);
	histogram_init(&f->stats.hold, &histogram_duration);
	contention_init(&f->stats.contention);
	arena_init(&f->entry_arena);
}

void fsm_fini(struct fsm *f)
{
	arena_fini(&f->entry_arena);
}

/* Cluster-time milliseconds since `since`, in nanoseconds. */
uint64_t elapsed_ns(const struct apply *a, uint64_t since)
{
	return a->now > since ? (a->now - since) * 1000000ull : 0;
}

/* Removes holder i, counting how long it held. */
static void remove_holder(struct apply *a, Raftlock__LockRecord *lock, size_t i)
{
	histogram_observe(&a->fsm->stats.hold, elapsed_ns(a, lock->holders[i]->granted_time));
	records_remove_holder(lock, i);
}

uint64_t fsm_store_limit(size_t map_size)
{
	return map_size / FSM_STORE_LIMIT_SHARE;
}

uint64_t fsm_applied_index(struct fsm *f)
{
	MDB_txn *txn = store_begin(f->store, false);
	Raftlock__Meta *m = store_get_meta(f->store, txn);
	uint64_t index = m->applied_index;
	raftlock__meta__free_unpacked(m, NULL);
	store_abort(txn);
	return index;
}

/* Rule 6: a session is live until the cluster time reaches its deadline. */
bool session_live(struct apply *a, uint64_t id)
{
	uint64_t deadline;
	uint32_t ttl;
	return store_get_lease(a->fsm->store, a->txn, id, &deadline, &ttl) && a->now < deadline;
}

/* Store full (GUARANTEES, store full): past the replicated limit, nothing
 * that makes the state grow for long is accepted -- new sessions, grants
 * to new holders, new waiters -- while everything that frees space still
 * applies. Both sides are the same on every node: the limit comes from the
 * log, the bytes are a function of the records (store_record_bytes). */
bool store_full(struct apply *a)
{
	return a->meta->store_limit != 0 &&
	       store_record_bytes(a->fsm->store) >= a->meta->store_limit;
}

/* RAFTLOCK_ELIMIT, naming the limit and its value for the answer. */
Raftlock__Result refuse_limit(Raftlock__Limit limit, uint64_t value)
{
	Raftlock__Result r = result_of(RAFTLOCK_ELIMIT);
	r.limit = limit;
	r.limit_value = value;
	return r;
}

Raftlock__Result refuse_full(struct apply *a)
{
	a->fsm->store_refusals++;
	return refuse_limit(RAFTLOCK__LIMIT__LIMIT_STORE, a->meta->store_limit);
}

/* ------------------------------------------------------- grant rules -- */

bool delayed(const struct apply *a, const Raftlock__LockRecord *lock)
{
	return lock->delay_until != 0 && a->now < lock->delay_until;
}

/* Whether a request of (mode, permits) is compatible with the holders. */
bool compatible(const Raftlock__LockRecord *lock, Raftlock__Mode mode, uint32_t permits)
{
#ifdef RAFTLOCK_BROKEN_FENCING
	/* Test-only build (CMake option RAFTLOCK_BROKEN_FENCING): grants
	 * ignore the current holders, so the fault-injection checkers must
	 * catch two holders at once. Never in a real build. */
	(void)lock;
	(void)mode;
	(void)permits;
	return true;
#endif
	if (lock->kind == RAFTLOCK__LOCK_KIND__SEMAPHORE)
		return records_permits_held(lock) + permits <= lock->limit;
	if (lock->n_holders == 0)
		return true;
	if (mode == RAFTLOCK__MODE__EXCLUSIVE)
		return false;
	for (size_t i = 0; i < lock->n_holders; i++)
		if (lock->holders[i]->mode != RAFTLOCK__MODE__SHARED)
			return false;
	return true;
}

static uint64_t take_token(struct apply *a)
{
#ifdef RAFTLOCK_BROKEN_FENCING
	return a->meta->next_token; /* test-only: every grant reuses one token */
#else
	return a->meta->next_token++;
#endif
}

Raftlock__Holder *grant(struct apply *a, Raftlock__LockRecord *lock, uint64_t session,
			uint64_t owner, Raftlock__Mode mode, uint32_t permits, const char *value)
{
	Raftlock__Holder *h = records_add_holder(lock);
	h->session = session;
	h->owner = owner;
	h->mode = mode;
	h->permits = permits;
	h->count = 1;
	h->token = take_token(a);
	h->granted_index = a->index;
	h->granted_time = a->now;
	if (value != NULL && value[0] != '\0')
		records_set_string(&h->value, value);
	a->fsm->stats.grants++;
	if (lock->max_hold_ms > 0) {
		h->revoke_at = a->now + lock->max_hold_ms;
		emit(a, (struct fsm_event){.type = FSM_EV_REVOKE_DEADLINE,
					   .name = lock->name,
					   .session = session,
					   .owner = owner,
					   .token = h->token,
					   .deadline = h->revoke_at});
	}
	note_change_value(a, RAFTLOCK__WATCH_KIND__WATCH_GRANTED, lock->name, session, owner,
			  h->token, mode, permits, 0, h->value);
	return h;
}

/* Records the final outcome of a queued acquire in its session and tells
 * the service, which pushes it to the waiting client. */
void finish_wait(struct apply *a, Raftlock__SessionRecord *sess, uint64_t seq,
		 const Raftlock__Result *res)
{
	struct outcomes oc = apply_outcomes(a);
	outcomes_set(&oc, sess, seq, res, false);
	emit(a, (struct fsm_event){
			.type = FSM_EV_PUSH, .session = sess->id, .seq = seq, .result = res});
}

/* Grants waiters from the head of the queue while they fit: FIFO, so a
 * waiting writer blocks the readers behind it; consecutive readers (and
 * semaphore requests that fit) are granted together, in this apply. */
void grant_waiters(struct apply *a, Raftlock__LockRecord *lock, Raftlock__SessionRecord *current)
{
	struct store *st = a->fsm->store;
	while (lock->n_waiters > 0 && !delayed(a, lock)) {
		Raftlock__Waiter *w = lock->waiters[0];
		if (!compatible(lock, w->mode, w->permits))
			break;
		/* The caller's own session is in memory, not yet stored. */
		bool own = current != NULL && w->session == current->id;
		Raftlock__SessionRecord *sess =
			own ? current : store_get_session(st, a->txn, w->session);
		if (sess == NULL) {
			/* Cannot happen: ending a session removes its waiters.
			 * Dropping the waiter keeps rule 6 even so. */
			note_waiter_gone(a, lock, 0, RAFTLOCK_ESESSION);
			records_remove_waiter(lock, 0);
			continue;
		}
		if (!session_live(a, w->session)) {
			/* Rule 6: never grant to a session past its deadline;
			 * its EXPIRE (proposed by the leader) removes the
			 * waiter and lets the queue move on. */
			if (!own)
				raftlock__session_record__free_unpacked(sess, NULL);
			break;
		}
		if (w->multi) {
			/* One lock of a set: granted with all the others, or
			 * it stays at the head and holds the queue (FIFO). */
			bool granted = multilock_grant(a, lock, sess);
			if (!own) {
				if (granted)
					store_put_session(st, a->txn, sess);
				raftlock__session_record__free_unpacked(sess, NULL);
			}
			if (!granted)
				break;
			continue;
		}
		Raftlock__Holder *h =
			grant(a, lock, w->session, w->owner, w->mode, w->permits, w->value);
		histogram_observe(&a->fsm->stats.wait, elapsed_ns(a, w->queued_time));
		Raftlock__Result res = result_of(0);
		res.token = h->token;
		res.count = 1;
		uint64_t seq = w->seq;
		records_remove_waiter(lock, 0);
		finish_wait(a, sess, seq, &res);
		if (!own) {
			store_put_session(st, a->txn, sess);
			raftlock__session_record__free_unpacked(sess, NULL);
		}
	}
}

/* Stores the lock, or deletes it when nothing refers to it any more. */
void save_lock(struct apply *a, Raftlock__LockRecord *lock)
{
	if (lock->n_holders == 0 && lock->n_waiters == 0 && lock->delay_until == 0)
		store_del_lock(a->fsm->store, a->txn, lock->name);
	else
		store_put_lock(a->fsm->store, a->txn, lock);
}

/* Drops `name` from the session's names once it neither holds nor awaits it. */
void forget_lock_if_done(struct apply *a, Raftlock__SessionRecord *sess,
			 const Raftlock__LockRecord *lock)
{
	if (!records_session_on_lock(lock, sess->id)) {
		struct session_locks names = apply_names(a);
		session_locks_remove(&names, sess, lock->name);
	}
}

/* ------------------------------------------------------------ sessions -- */

/* Releases everything a session holds or awaits, then removes it. An
 * expiry (not a clean close) starts each held lock's lock-delay. */
static void end_session(struct apply *a, Raftlock__SessionRecord *sess, bool expired)
{
	struct store *st = a->fsm->store;
	struct session_locks names = apply_names(a);
	size_t n_names;
	char **name = session_locks_names(&names, sess, &n_names);
	for (size_t i = 0; i < n_names; i++) {
		Raftlock__LockRecord *lock = store_get_lock(st, a->txn, name[i]);
		if (lock == NULL)
			continue;
		bool held = false;
		for (size_t j = lock->n_holders; j-- > 0;) {
			if (lock->holders[j]->session == sess->id) {
				note_holder_gone(a, lock, j,
						 expired ? RAFTLOCK__WATCH_KIND__WATCH_EXPIRED
							 : RAFTLOCK__WATCH_KIND__WATCH_RELEASED);
				remove_holder(a, lock, j);
				held = true;
			}
		}
		for (size_t j = lock->n_waiters; j-- > 0;) {
			Raftlock__Waiter *w = lock->waiters[j];
			if (w->session != sess->id)
				continue;
			Raftlock__Result res = result_of(RAFTLOCK_ESESSION);
			emit(a, (struct fsm_event){.type = FSM_EV_PUSH,
						   .session = sess->id,
						   .seq = w->seq,
						   .result = &res});
			note_waiter_gone(a, lock, j, RAFTLOCK_ESESSION);
			records_remove_waiter(lock, j);
		}
		if (expired && held && lock->lock_delay_ms > 0) {
			lock->delay_until = a->now + lock->lock_delay_ms;
			a->fsm->stats.lock_delays++;
			emit(a, (struct fsm_event){.type = FSM_EV_LOCK_DELAY,
						   .name = lock->name,
						   .deadline = lock->delay_until});
		}
		grant_waiters(a, lock, NULL);
		save_lock(a, lock);
		raftlock__lock_record__free_unpacked(lock, NULL);
	}
	session_locks_free(name, n_names);
	session_locks_end(&names, sess);
	struct outcomes oc = apply_outcomes(a);
	outcomes_end(&oc, sess);
	multilock_end(a, sess);
	if (sess->nonce != 0)
		store_del_nonce(st, a->txn, sess->nonce);
	store_identity_sessions_add(st, a->txn, sess->identity, -1);
	store_del_lease(st, a->txn, sess->id);
	store_del_session(st, a->txn, sess->id);
	if (expired)
		a->fsm->stats.expiries++;
	emit(a, (struct fsm_event){.type = FSM_EV_SESSION_GONE, .session = sess->id});
}

/* Digests are not secrets (SHA-256 does not give the secret back), so a
 * plain comparison is fine here. */
static bool same_digest(const ProtobufCBinaryData *x, const ProtobufCBinaryData *y)
{
	return x->len == y->len && (x->len == 0 || memcmp(x->data, y->data, x->len) == 0);
}

static Raftlock__Result do_open_session(struct apply *a, const Raftlock__OpenSession *op)
{
	struct store *st = a->fsm->store;
	Raftlock__Result res = result_of(0);
	if (op->nonce != 0) {
		uint64_t id = store_get_nonce(st, a->txn, op->nonce);
		if (id != 0) {
			Raftlock__SessionRecord *sess = store_get_session(st, a->txn, id);
			if (sess != NULL && strcmp(sess->identity, op->identity) != 0) {
				/* Another identity's nonce opens nothing of hers. */
				raftlock__session_record__free_unpacked(sess, NULL);
				return result_of(RAFTLOCK_EPERM);
			}
			if (sess != NULL) {
				/* Rule 14: a retry is the same open only with the
				 * same secret; a replayed nonce learns nothing. */
				if (same_digest(&sess->secret_digest, &op->secret_digest)) {
					res.session = id;
					res.ttl_ms = sess->ttl_ms;
				} else {
					res.status = RAFTLOCK_EPERM;
				}
				raftlock__session_record__free_unpacked(sess, NULL);
				return res;
			}
		}
	}
	if (op->ttl_ms < RAFTLOCK_TTL_MIN_MS || op->ttl_ms > RAFTLOCK_TTL_MAX_MS)
		return result_of(RAFTLOCK_EINVAL);
	if (op->bind_grace_ms != 0 && (op->bind_grace_ms < RAFTLOCK_BIND_GRACE_MIN_MS ||
				       op->bind_grace_ms > RAFTLOCK_BIND_GRACE_MAX_MS))
		return result_of(RAFTLOCK_EINVAL);
	if (store_count_sessions(st, a->txn) >= FSM_MAX_SESSIONS)
		return refuse_limit(RAFTLOCK__LIMIT__LIMIT_SESSIONS, FSM_MAX_SESSIONS);
	/* The limit is the proposing leader's (the entry carries it), so
	 * every node decides alike whatever its own setting. */
	uint32_t per_identity = op->max_sessions_per_identity;
	if (per_identity != 0 && store_identity_sessions(st, a->txn, op->identity) >= per_identity)
		return refuse_limit(RAFTLOCK__LIMIT__LIMIT_SESSIONS_PER_IDENTITY, per_identity);
	if (store_full(a))
		return refuse_full(a);
	Raftlock__SessionRecord *sess = records_new_session(op->owner);
	if (a->meta->next_session == 0)
		a->meta->next_session = 1;
	sess->id = a->meta->next_session++;
	sess->ttl_ms = op->ttl_ms;
	sess->nonce = op->nonce;
	sess->acks_queued = op->acks_queued;
	sess->bind_grace_ms = op->bind_grace_ms;
	records_set_bytes(&sess->secret_digest, &op->secret_digest);
	records_set_string(&sess->identity, op->identity);
	sess->opened_time = a->now;
	sess->opened_index = a->index;
	store_put_session(st, a->txn, sess);
	store_put_lease(st, a->txn, sess->id, a->now + op->ttl_ms, op->ttl_ms);
	if (op->nonce != 0)
		store_put_nonce(st, a->txn, op->nonce, sess->id);
	store_identity_sessions_add(st, a->txn, sess->identity, +1);
	emit(a, (struct fsm_event){.type = FSM_EV_SESSION,
				   .session = sess->id,
				   .deadline = a->now + op->ttl_ms,
				   .ttl_ms = sess->ttl_ms,
				   .opened = true,
				   .bind_grace_ms = sess->bind_grace_ms,
				   .digest = sess->secret_digest.data,
				   .digest_len = sess->secret_digest.len});
	res.session = sess->id;
	res.ttl_ms = sess->ttl_ms;
	raftlock__session_record__free_unpacked(sess, NULL);
	return res;
}

/* grant_waiters() stops at a head waiter whose session is past its
 * deadline; a RENEW that lands before the EXPIRE makes it live again, so
 * its queues must move now (nothing else would run them). */
static void resume_waits(struct apply *a, uint64_t id)
{
	struct store *st = a->fsm->store;
	Raftlock__SessionRecord *sess = store_get_session(st, a->txn, id);
	if (sess == NULL)
		return;
	struct session_locks names = apply_names(a);
	size_t n_names;
	char **name = session_locks_names(&names, sess, &n_names);
	for (size_t j = 0; j < n_names; j++) {
		Raftlock__LockRecord *lock = store_get_lock(st, a->txn, name[j]);
		if (lock == NULL)
			continue;
		grant_waiters(a, lock, sess);
		save_lock(a, lock);
		raftlock__lock_record__free_unpacked(lock, NULL);
	}
	session_locks_free(name, n_names);
	store_put_session(st, a->txn, sess);
	raftlock__session_record__free_unpacked(sess, NULL);
}

/* Renewals touch only the lease table: the most frequent command by far,
 * naming up to every session at once (the leader lists them in order). */
static void do_renew(struct apply *a, const Raftlock__Renew *op)
{
	struct store_lease_walk w;
	store_lease_walk_begin(a->fsm->store, a->txn, &w);
	for (size_t i = 0; i < op->n_sessions; i++) {
		uint64_t deadline;
		uint32_t ttl;
		if (!store_lease_walk_find(&w, op->sessions[i], &deadline, &ttl))
			continue;
		if (a->now + ttl > deadline) {
			bool revived = a->now >= deadline;
			deadline = a->now + ttl;
			store_lease_walk_set(&w, deadline);
			if (revived)
				resume_waits(a, op->sessions[i]);
		}
		emit(a, (struct fsm_event){.type = FSM_EV_SESSION,
					   .session = op->sessions[i],
					   .deadline = deadline,
					   .ttl_ms = ttl});
	}
	store_lease_walk_end(&w);
}

/* Rule 4: expire only if this entry's cluster time is at or past the
 * deadline as of this point in the log; a RENEW that landed first wins. */
static void do_expire_session(struct apply *a, const Raftlock__ExpireSession *op)
{
	struct store *st = a->fsm->store;
	uint64_t deadline;
	uint32_t ttl;
	if (!store_get_lease(st, a->txn, op->session, &deadline, &ttl) || a->now < deadline)
		return;
	Raftlock__SessionRecord *sess = store_get_session(st, a->txn, op->session);
	if (sess == NULL)
		log_fatal("session %llu has a lease but no record: damaged store",
			  (unsigned long long)op->session);
	end_session(a, sess, true);
	raftlock__session_record__free_unpacked(sess, NULL);
}

/* ---------------------------------------------------------------- locks -- */

/* The waiters a lock may have for this acquire to queue: the proposing
 * leader's setting, carried in the entry (0 in entries older than format
 * 4), never above FSM_MAX_WAITERS. */
uint32_t max_waiters(const Raftlock__Acquire *op)
{
	return op->max_waiters != 0 && op->max_waiters < FSM_MAX_WAITERS ? op->max_waiters
									 : FSM_MAX_WAITERS;
}

Raftlock__Result open_lock(struct apply *a, const Raftlock__Acquire *op,
			   Raftlock__LockRecord **lockp, Raftlock__Mode *modep, uint32_t *permitsp)
{
	struct store *st = a->fsm->store;
	*lockp = NULL;
	if (codec_check_name(op->name) != 0)
		return result_of(RAFTLOCK_EINVAL);
	if (op->kind > RAFTLOCK__LOCK_KIND__SEMAPHORE || op->mode > RAFTLOCK__MODE__SHARED ||
	    strlen(op->value) > RAFTLOCK_VALUE_MAX)
		return result_of(RAFTLOCK_EINVAL);
	uint32_t permits = op->permits ? op->permits : 1;

	Raftlock__LockRecord *lock = store_get_lock(st, a->txn, op->name);
	if (lock == NULL) {
		if (store_count_locks(st, a->txn) >= FSM_MAX_LOCKS)
			return refuse_limit(RAFTLOCK__LIMIT__LIMIT_LOCKS, FSM_MAX_LOCKS);
		Raftlock__LockKind kind = op->kind ? op->kind : RAFTLOCK__LOCK_KIND__MUTEX;
		if (kind == RAFTLOCK__LOCK_KIND__SEMAPHORE && op->limit == 0)
			return result_of(RAFTLOCK_EINVAL);
		lock = records_new_lock(op->name, kind,
					kind == RAFTLOCK__LOCK_KIND__SEMAPHORE ? op->limit : 0);
		lock->lock_delay_ms = op->lock_delay_ms;
		lock->max_hold_ms = op->max_hold_ms;
		lock->revoke_grace_ms = op->revoke_grace_ms;
	} else if ((op->kind != 0 && (op->kind == RAFTLOCK__LOCK_KIND__SEMAPHORE) !=
					     (lock->kind == RAFTLOCK__LOCK_KIND__SEMAPHORE)) ||
		   (lock->kind == RAFTLOCK__LOCK_KIND__SEMAPHORE && op->limit != 0 &&
		    op->limit != lock->limit)) {
		raftlock__lock_record__free_unpacked(lock, NULL);
		return result_of(RAFTLOCK_EKIND);
	} else if (op->kind == RAFTLOCK__LOCK_KIND__RWLOCK) {
		/* A mutex is a read-write lock nobody has taken shared: the
		 * two kinds are one family, and the first read-write request
		 * makes the lock a read-write lock. */
		lock->kind = RAFTLOCK__LOCK_KIND__RWLOCK;
	}

	Raftlock__Result res = result_of(0);
	Raftlock__Mode mode = op->mode;
	if (lock->kind != RAFTLOCK__LOCK_KIND__RWLOCK)
		mode = RAFTLOCK__MODE__EXCLUSIVE;
	if (lock->kind != RAFTLOCK__LOCK_KIND__SEMAPHORE)
		permits = 1;
	if (((lock->kind == RAFTLOCK__LOCK_KIND__MUTEX || op->kind == RAFTLOCK__LOCK_KIND__MUTEX) &&
	     op->mode != RAFTLOCK__MODE__EXCLUSIVE) ||
	    (lock->kind == RAFTLOCK__LOCK_KIND__SEMAPHORE && permits > lock->limit))
		res.status = RAFTLOCK_EINVAL;
	*lockp = lock;
	*modep = mode;
	*permitsp = permits;
	return res;
}

static Raftlock__Result do_acquire(struct apply *a, Raftlock__SessionRecord *sess,
				   const Raftlock__Command *cmd)
{
	const Raftlock__Acquire *op = cmd->acquire;
	Raftlock__LockRecord *lock;
	Raftlock__Mode mode;
	uint32_t permits;
	Raftlock__Result res = open_lock(a, op, &lock, &mode, &permits);
	if (lock == NULL)
		return res;
	if (res.status != 0)
		goto out;

	/* Re-entry through the same handle nests and keeps its token. */
	Raftlock__Holder *h = records_find_holder(lock, sess->id, op->owner);
	if (h != NULL) {
		/* Nesting keeps what the handle holds: no upgrade from shared
		 * to exclusive, no change in the number of permits. */
		if (h->mode == RAFTLOCK__MODE__SHARED && mode == RAFTLOCK__MODE__EXCLUSIVE) {
			res.status = RAFTLOCK_EBUSY;
			goto out;
		}
		if (permits != h->permits) {
			res.status = RAFTLOCK_EINVAL;
			goto out;
		}
		h->count++;
		res.token = h->token;
		res.count = h->count;
		goto out;
	}
	if (records_find_waiter(lock, sess->id, op->owner) >= 0) {
		res.status = RAFTLOCK_EBUSY; /* this handle already waits */
		goto out;
	}
	struct session_locks names = apply_names(a);
	if (session_locks_count(&names, sess) >= FSM_MAX_SESSION_LOCKS &&
	    !session_locks_has(&names, sess, op->name)) {
		res = refuse_limit(RAFTLOCK__LIMIT__LIMIT_LOCKS_PER_SESSION, FSM_MAX_SESSION_LOCKS);
		goto out;
	}

	if (lock->n_waiters == 0 && !delayed(a, lock) && compatible(lock, mode, permits)) {
		if (lock->n_holders >= FSM_MAX_HOLDERS) {
			res = refuse_limit(RAFTLOCK__LIMIT__LIMIT_HOLDERS_PER_LOCK,
					   FSM_MAX_HOLDERS);
			goto out;
		}
		if (store_full(a)) {
			res = refuse_full(a);
			goto out;
		}
		h = grant(a, lock, sess->id, op->owner, mode, permits, op->value);
		res.token = h->token;
		res.count = 1;
	} else if (!op->wait) {
		res.status = RAFTLOCK_EBUSY;
		goto out;
	} else if (lock->n_waiters >= max_waiters(op)) {
		res = refuse_limit(RAFTLOCK__LIMIT__LIMIT_WAITERS_PER_LOCK, max_waiters(op));
		goto out;
	} else if (store_full(a)) {
		res = refuse_full(a);
		goto out;
	} else if (features_recorded(a->meta->feature_level) >= FEATURES_DEADLOCK_CHECK &&
		   deadlock_would_close_cycle(a, sess->id, &lock, 1)) {
		res.status = RAFTLOCK_EDEADLK;
		goto out;
	} else {
		Raftlock__Waiter *w = records_add_waiter(lock);
		w->session = sess->id;
		w->owner = op->owner;
		w->mode = mode;
		w->permits = permits;
		w->seq = cmd->seq;
		w->queued_time = a->now;
		w->deadline = op->wait_ms ? a->now + op->wait_ms : 0;
		if (op->value[0] != '\0')
			records_set_string(&w->value, op->value);
		note_change(a, RAFTLOCK__WATCH_KIND__WATCH_QUEUED, lock->name, w->session, w->owner,
			    0, w->mode, w->permits, 0);
		res.queued = true;
		a->fsm->stats.waits++;
		contention_count(&a->fsm->stats.contention, lock->name, a->now);
		if (w->deadline != 0)
			emit(a, (struct fsm_event){.type = FSM_EV_WAIT_DEADLINE,
						   .name = lock->name,
						   .session = sess->id,
						   .seq = w->seq,
						   .deadline = w->deadline});
	}
	session_locks_add(&names, sess, lock->name);
out:
	save_lock(a, lock);
	raftlock__lock_record__free_unpacked(lock, NULL);
	return res;
}

static Raftlock__Result do_release(struct apply *a, Raftlock__SessionRecord *sess,
				   const Raftlock__Release *op)
{
	struct store *st = a->fsm->store;
	if (codec_check_name(op->name) != 0)
		return result_of(RAFTLOCK_EINVAL);
	Raftlock__LockRecord *lock = store_get_lock(st, a->txn, op->name);
	if (lock == NULL)
		return result_of(RAFTLOCK_ENOTHOLDER);
	Raftlock__Result res = result_of(0);
	ssize_t i = records_holder_index(lock, sess->id, op->owner);
	if (i < 0) {
		res.status = RAFTLOCK_ENOTHOLDER;
	} else if (--lock->holders[i]->count > 0) {
		res.count = lock->holders[i]->count;
		res.token = lock->holders[i]->token;
	} else {
		note_holder_gone(a, lock, (size_t)i, RAFTLOCK__WATCH_KIND__WATCH_RELEASED);
		remove_holder(a, lock, (size_t)i);
		forget_lock_if_done(a, sess, lock);
		grant_waiters(a, lock, sess);
	}
	save_lock(a, lock);
	raftlock__lock_record__free_unpacked(lock, NULL);
	return res;
}

/* Removes a queued acquire. Its final outcome is ECANCELED. The cancel's
 * own result is 0 with token 0 when the waiter was removed; when the
 * acquire was granted first, 0 with the grant's token (the caller holds
 * the lock and should release it); ENOTFOUND when it knows neither. */
static Raftlock__Result do_cancel_wait(struct apply *a, Raftlock__SessionRecord *sess,
				       const Raftlock__CancelWait *op)
{
	struct store *st = a->fsm->store;
	Raftlock__Result res = result_of(0);
	if (codec_check_name(op->name) != 0)
		return result_of(RAFTLOCK_EINVAL);
	Raftlock__LockRecord *lock = store_get_lock(st, a->txn, op->name);
	ssize_t i = lock ? records_find_waiter(lock, sess->id, op->owner) : -1;
	if (i >= 0 && lock->waiters[i]->seq == op->acquire_seq) {
		note_waiter_gone(a, lock, (size_t)i, RAFTLOCK_ECANCELED);
		if (lock->waiters[i]->multi)
			multilock_drop(a, lock, sess, op->acquire_seq, RAFTLOCK_ECANCELED);
		records_remove_waiter(lock, (size_t)i);
		Raftlock__Result canceled = result_of(RAFTLOCK_ECANCELED);
		finish_wait(a, sess, op->acquire_seq, &canceled);
		forget_lock_if_done(a, sess, lock);
		grant_waiters(a, lock, sess); /* a removed writer may unblock readers */
	} else {
		struct outcomes oc = apply_outcomes(a);
		const Raftlock__Outcome *o = outcomes_find(&oc, sess, op->acquire_seq);
		if (o != NULL && o->result != NULL && o->result->status == 0 && !o->pending) {
			res.token = o->result->token;
			res.tokens = o->result->tokens; /* a set's: each lock's */
			res.n_tokens = o->result->n_tokens;
			multilock_keep_tokens(a, &res); /* before the record goes */
		} else
			res.status = RAFTLOCK_ENOTFOUND;
		outcomes_release(&oc, o);
	}
	if (lock != NULL) {
		save_lock(a, lock);
		raftlock__lock_record__free_unpacked(lock, NULL);
	}
	return res;
}

static void do_lock_delay_end(struct apply *a, const Raftlock__LockDelayEnd *op)
{
	Raftlock__LockRecord *lock = store_get_lock(a->fsm->store, a->txn, op->name);
	if (lock == NULL)
		return;
	if (lock->delay_until != 0 && a->now >= lock->delay_until) {
		lock->delay_until = 0;
		emit(a, (struct fsm_event){.type = FSM_EV_LOCK_DELAY, .name = lock->name});
		grant_waiters(a, lock, NULL);
		save_lock(a, lock);
	}
	raftlock__lock_record__free_unpacked(lock, NULL);
}

static void do_wait_expire(struct apply *a, const Raftlock__WaitExpire *op)
{
	struct store *st = a->fsm->store;
	Raftlock__LockRecord *lock = store_get_lock(st, a->txn, op->name);
	if (lock == NULL)
		return;
	for (size_t i = 0; i < lock->n_waiters; i++) {
		Raftlock__Waiter *w = lock->waiters[i];
		if (w->session != op->session || w->seq != op->acquire_seq)
			continue;
		if (w->deadline == 0 || a->now < w->deadline)
			break;
		Raftlock__SessionRecord *sess = store_get_session(st, a->txn, w->session);
		note_waiter_gone(a, lock, i, RAFTLOCK_ETIMEDOUT);
		if (sess != NULL && w->multi)
			multilock_drop(a, lock, sess, op->acquire_seq, RAFTLOCK_ETIMEDOUT);
		records_remove_waiter(lock, i);
		if (sess != NULL) {
			Raftlock__Result res = result_of(RAFTLOCK_ETIMEDOUT);
			finish_wait(a, sess, op->acquire_seq, &res);
			forget_lock_if_done(a, sess, lock);
			store_put_session(st, a->txn, sess);
			raftlock__session_record__free_unpacked(sess, NULL);
		}
		grant_waiters(a, lock, NULL);
		save_lock(a, lock);
		break;
	}
	raftlock__lock_record__free_unpacked(lock, NULL);
}

/* ---------------------------------------------------------- revocation -- */

/* Starts the lock's lock-delay, as an expiry does: a holder that did not
 * let go by itself may still be acting on what the lock protects. */
static void start_lock_delay(struct apply *a, Raftlock__LockRecord *lock)
{
	if (lock->lock_delay_ms == 0 || lock->delay_until >= a->now + lock->lock_delay_ms)
		return;
	lock->delay_until = a->now + lock->lock_delay_ms;
	a->fsm->stats.lock_delays++;
	emit(a, (struct fsm_event){.type = FSM_EV_LOCK_DELAY,
				   .name = lock->name,
				   .deadline = lock->delay_until});
}

/* Ends the grant of holder i now, whatever its nesting: its token is no
 * longer current, its session is told (FSM_EV_REVOKED), and the caller
 * lets the queue move on (grant_waiters) once it is done with the lock. */
static void revoke_holder(struct apply *a, Raftlock__LockRecord *lock, size_t i)
{
	struct store *st = a->fsm->store;
	const Raftlock__Holder *h = lock->holders[i];
	uint64_t session = h->session, owner = h->owner, token = h->token;
	note_holder_gone(a, lock, i, RAFTLOCK__WATCH_KIND__WATCH_REVOKED);
	remove_holder(a, lock, i);
	a->fsm->stats.revocations++;
	Raftlock__SessionRecord *sess = store_get_session(st, a->txn, session);
	if (sess != NULL) {
		forget_lock_if_done(a, sess, lock);
		store_put_session(st, a->txn, sess);
		raftlock__session_record__free_unpacked(sess, NULL);
	}
	emit(a, (struct fsm_event){.type = FSM_EV_REVOKED,
				   .name = lock->name,
				   .session = session,
				   .owner = owner,
				   .token = token});
	start_lock_delay(a, lock);
}

/* Chubby's conflicting-lock event: the holder is asked to release, and is
 * revoked at `at` (RevokeDue) unless it lets go first. */
static void ask_release(struct apply *a, const Raftlock__LockRecord *lock, Raftlock__Holder *h,
			uint64_t at)
{
	if (h->release_requested && h->revoke_at != 0 && at >= h->revoke_at)
		return; /* asked already, by then: a second ask changes nothing */
	if (h->revoke_at == 0 || at < h->revoke_at)
		h->revoke_at = at;
	h->release_requested = true;
	struct fsm_event ev = {.type = FSM_EV_REVOKE_DEADLINE,
			       .name = lock->name,
			       .session = h->session,
			       .owner = h->owner,
			       .token = h->token,
			       .deadline = h->revoke_at};
	emit(a, ev);
	ev.type = FSM_EV_RELEASE_REQUESTED;
	emit(a, ev);
}

/* An admin's revocation (who may is decided before the log). count is the
 * number of grants revoked or asked to release, token the highest. */
static Raftlock__Result do_revoke(struct apply *a, const Raftlock__Revoke *op)
{
	if (codec_check_name(op->name) != 0)
		return result_of(RAFTLOCK_EINVAL);
	Raftlock__LockRecord *lock = store_get_lock(a->fsm->store, a->txn, op->name);
	if (lock == NULL)
		return result_of(RAFTLOCK_ENOTFOUND);
	Raftlock__Result res = result_of(0);
	bool revoked = false;
	for (size_t i = lock->n_holders; i-- > 0;) {
		Raftlock__Holder *h = lock->holders[i];
		if (op->token != 0 && h->token != op->token)
			continue;
		res.count++;
		if (h->token > res.token)
			res.token = h->token;
		if (op->grace_ms == 0) {
			revoke_holder(a, lock, i);
			revoked = true;
		} else {
			ask_release(a, lock, h, a->now + op->grace_ms);
		}
	}
	if (res.count == 0)
		res.status = RAFTLOCK_ENOTFOUND; /* no such grant (any more) */
	if (revoked)
		grant_waiters(a, lock, NULL);
	save_lock(a, lock);
	raftlock__lock_record__free_unpacked(lock, NULL);
	return res;
}

/* Rule 4's pattern: the grant is revoked only if this entry's cluster time
 * is at or past its deadline as of this point in the log; a release that
 * landed first wins (the token is gone). A maximum hold time of a lock
 * with a revoke grace first asks the holder to release. */
static void do_revoke_due(struct apply *a, const Raftlock__RevokeDue *op)
{
	Raftlock__LockRecord *lock = store_get_lock(a->fsm->store, a->txn, op->name);
	if (lock == NULL)
		return;
	for (size_t i = 0; i < lock->n_holders; i++) {
		Raftlock__Holder *h = lock->holders[i];
		if (h->token != op->token)
			continue;
		if (h->revoke_at == 0 || a->now < h->revoke_at)
			break;
		if (!h->release_requested && lock->revoke_grace_ms > 0) {
			h->revoke_at = 0;
			ask_release(a, lock, h, a->now + lock->revoke_grace_ms);
		} else {
			revoke_holder(a, lock, i);
			grant_waiters(a, lock, NULL);
		}
		save_lock(a, lock);
		break;
	}
	raftlock__lock_record__free_unpacked(lock, NULL);
}

/* Crash-fast release: the leader saw the connection of a bound session
 * close and no other take it over. Ends it as an expiry would, unless a
 * RENEW applied since the leader read op->deadline moved the lease on
 * (rule 11a): that renewal may have been acknowledged, and the session
 * must outlive it. The leader hears of it (FSM_EV_DROP_KEPT) and drops the
 * session again if that renewal's connection is gone too. An entry
 * without a deadline (below level 8) ends it whatever came before, as
 * older builds do. */
static void do_drop_bound(struct apply *a, const Raftlock__DropBound *op)
{
	uint64_t deadline;
	uint32_t ttl;
	if (op->deadline != 0 &&
	    store_get_lease(a->fsm->store, a->txn, op->session, &deadline, &ttl) &&
	    deadline > op->deadline) {
		emit(a, (struct fsm_event){.type = FSM_EV_DROP_KEPT,
					   .session = op->session,
					   .deadline = op->deadline});
		return;
	}
	Raftlock__SessionRecord *sess = store_get_session(a->fsm->store, a->txn, op->session);
	if (sess == NULL)
		return;
	if (sess->bind_grace_ms != 0) {
		a->fsm->stats.dropped++;
		end_session(a, sess, true);
	}
	raftlock__session_record__free_unpacked(sess, NULL);
}

/* Elections: the holder whose grant carries op->token publishes a new
 * value; fenced by the token, so a deposed leader's proclaim is refused. */
static Raftlock__Result do_proclaim(struct apply *a, Raftlock__SessionRecord *sess,
				    const Raftlock__Proclaim *op)
{
	if (codec_check_name(op->name) != 0 || strlen(op->value) > RAFTLOCK_VALUE_MAX)
		return result_of(RAFTLOCK_EINVAL);
	Raftlock__LockRecord *lock = store_get_lock(a->fsm->store, a->txn, op->name);
	if (lock == NULL)
		return result_of(RAFTLOCK_ENOTHOLDER);
	Raftlock__Result res = result_of(0);
	Raftlock__Holder *h = records_find_holder(lock, sess->id, op->owner);
	if (h == NULL || h->token != op->token) {
		res.status = RAFTLOCK_ENOTHOLDER;
	} else {
		records_set_string(&h->value, op->value);
		res.token = h->token;
		note_change_value(a, RAFTLOCK__WATCH_KIND__WATCH_PROCLAIMED, lock->name, h->session,
				  h->owner, h->token, h->mode, h->permits, 0, h->value);
		save_lock(a, lock);
	}
	raftlock__lock_record__free_unpacked(lock, NULL);
	return res;
}

/* ----------------------------------------------------- client commands -- */

/*
 * Rule 8: (session, seq) de-duplication, refined by GUARANTEES rule 6: the
 * records of queued acquires stay, below the mark or not, until the
 * client acknowledges them (acked). Returns true when the command was
 * answered from the session's table (or refused), with *res set.
 */
static bool dedup(struct apply *a, Raftlock__SessionRecord *sess, const Raftlock__Command *cmd,
		  Raftlock__Result *res)
{
	struct outcomes oc = apply_outcomes(a);
	size_t n_acked = cmd->n_acked < FSM_MAX_ACKED ? cmd->n_acked : FSM_MAX_ACKED;
	outcomes_ack(&oc, sess, cmd->acked, n_acked, cmd->ack_below);
	if (cmd->seq == 0) {
		*res = result_of(RAFTLOCK_EINVAL);
		return true;
	}
	/* A queued acquire below the mark is still answered from its record. */
#ifdef RAFTLOCK_BROKEN_DEDUP
	/* Test-only build (CMake option RAFTLOCK_BROKEN_DEDUP): the recorded
	 * outcomes are never consulted, so a retried command executes again;
	 * the fault-injection checkers must catch it. Never in a real build. */
	const Raftlock__Outcome *o = NULL;
#else
	const Raftlock__Outcome *o = outcomes_find(&oc, sess, cmd->seq);
#endif
	if (o != NULL) {
		*res = o->result ? *o->result : result_of(0);
		res->queued = o->pending;
		/* fields a newer build wrote stay with the record, freed below */
		res->base.n_unknown_fields = 0;
		res->base.unknown_fields = NULL;
		multilock_keep_tokens(a, res); /* a recorded answer's, before it goes */
		outcomes_release(&oc, o);
		return true;
	}
	if (cmd->seq < sess->ack_below) {
		*res = result_of(RAFTLOCK_ESTALESEQ);
		return true;
	}
	size_t limit = FSM_MAX_OUTCOMES;
	if (cmd->op_case != RAFTLOCK__COMMAND__OP_ACQUIRE)
		limit += FSM_OUTCOME_HEADROOM; /* letting go is not refused first */
	if (outcomes_count(&oc, sess) >= limit) {
		*res = refuse_limit(RAFTLOCK__LIMIT__LIMIT_OUTCOMES, limit);
		return true;
	}
	return false;
}

/* Whether (session, owner) still holds name's grant of token: a revoke
 * may have ended it since its answer was recorded, and an answer read
 * again from the record must not say it is held (rule 11b). */
static bool grant_current(struct apply *a, const char *name, uint64_t session, uint64_t owner,
			  uint64_t token)
{
	Raftlock__LockRecord *lock = store_get_lock(a->fsm->store, a->txn, name);
	bool held = false;
	for (size_t i = 0; lock != NULL && i < lock->n_holders && !held; i++) {
		const Raftlock__Holder *h = lock->holders[i];
		held = h->session == session && h->owner == owner && h->token == token;
	}
	if (lock != NULL)
		raftlock__lock_record__free_unpacked(lock, NULL);
	return held;
}

/* A grant answered from a record (an acquire sent again, its answer lost
 * with a connection; a cancel of a wait the grant came first to, sent
 * again or not) whose grant was revoked since, its push and the
 * revocation lost too, is answered ENOTHOLDER, not with a token the caller
 * would believe held (rule 11b). The answer only: the records keep what
 * they hold, so that every build applies the log alike. A set's grant
 * (tokens) is left to the library, which checks a set's pushes. */
static void answer_current(struct apply *a, const Raftlock__SessionRecord *sess,
			   const Raftlock__Command *cmd, Raftlock__Result *res)
{
	const char *name;
	uint64_t owner;
	if (res->status != 0 || res->queued || res->token == 0 || res->n_tokens != 0)
		return;
	if (cmd->op_case == RAFTLOCK__COMMAND__OP_ACQUIRE) {
		name = cmd->acquire->name;
		owner = cmd->acquire->owner;
	} else if (cmd->op_case == RAFTLOCK__COMMAND__OP_CANCEL_WAIT) {
		name = cmd->cancel_wait->name;
		owner = cmd->cancel_wait->owner;
	} else {
		return;
	}
	if (codec_check_name(name) != 0)
		return; /* refused before the log; never read the store with it */
	if (!grant_current(a, name, sess->id, owner, res->token))
		*res = result_of(RAFTLOCK_ENOTHOLDER);
}

static Raftlock__Result do_session_command(struct apply *a, const Raftlock__Command *cmd)
{
	struct store *st = a->fsm->store;
	Raftlock__SessionRecord *sess = store_get_session(st, a->txn, cmd->session);
	if (sess == NULL)
		return result_of(RAFTLOCK_ESESSION);
	Raftlock__Result res;
	if (cmd->op_case != RAFTLOCK__COMMAND__OP_CLOSE_SESSION && !session_live(a, sess->id)) {
		/* Rule 6: past its deadline the session is not live, even
		 * before its EXPIRE applies; nothing is granted to it. */
		raftlock__session_record__free_unpacked(sess, NULL);
		return result_of(RAFTLOCK_ESESSION);
	}
	if (cmd->op_case == RAFTLOCK__COMMAND__OP_CLOSE_SESSION) {
		/* Past its deadline the session has expired (rule 6): keep the
		 * lock-delay even when the CLOSE beats the EXPIRE. */
		end_session(a, sess, !session_live(a, sess->id));
		raftlock__session_record__free_unpacked(sess, NULL);
		return result_of(0);
	}
	bool recorded = dedup(a, sess, cmd, &res);
	if (!recorded) {
		bool pending = false;
		switch (cmd->op_case) {
		case RAFTLOCK__COMMAND__OP_ACQUIRE:
			res = do_acquire(a, sess, cmd);
			pending = res.queued;
			break;
		case RAFTLOCK__COMMAND__OP_RELEASE: res = do_release(a, sess, cmd->release); break;
		case RAFTLOCK__COMMAND__OP_CANCEL_WAIT:
			res = do_cancel_wait(a, sess, cmd->cancel_wait);
			break;
		case RAFTLOCK__COMMAND__OP_MULTI_ACQUIRE:
			res = multilock_acquire(a, sess, cmd);
			pending = res.queued;
			break;
		case RAFTLOCK__COMMAND__OP_PROCLAIM:
			res = do_proclaim(a, sess, cmd->proclaim);
			break;
		default: res = result_of(RAFTLOCK_EINVAL); break;
		}
		struct outcomes oc = apply_outcomes(a);
		outcomes_set(&oc, sess, cmd->seq, &res, pending);
	}
	/* a fresh grant is current: only a recorded one, or a cancel's */
	if (recorded || cmd->op_case == RAFTLOCK__COMMAND__OP_CANCEL_WAIT)
		answer_current(a, sess, cmd, &res);
	multilock_keep_tokens(a, &res); /* res may point into sess, freed below */
	store_put_session(st, a->txn, sess);
	raftlock__session_record__free_unpacked(sess, NULL);
	return res;
}

/* feature_level.h: the cluster's level only rises, and only to one this build
 * supports; past it, applying on would diverge from the others. */
static void raise_feature_level(struct apply *a, uint32_t level)
{
	if (level > FEATURE_LEVEL)
		log_fatal("log entry %llu raises the cluster to feature level %u; this raftlockd "
			  "supports level %u: start a build of level %u or more on this data "
			  "directory",
			  (unsigned long long)a->index, level, FEATURE_LEVEL, level);
	uint32_t before = features_recorded(a->meta->feature_level);
	if (level > a->meta->feature_level)
		a->meta->feature_level = level;
	if (before < FEATURES_SESSION_LOCK_INDEX && level >= FEATURES_SESSION_LOCK_INDEX)
		session_locks_move(a->fsm->store, a->txn);
	if (before < FEATURES_SEQ_TABLES && level >= FEATURES_SEQ_TABLES) {
		outcomes_move(a->fsm->store, a->txn);
		multilock_move(a->fsm->store, a->txn);
	}
	if (before < FEATURES_REMOVED_MEMBERS && level >= FEATURES_REMOVED_MEMBERS)
		member_book_note_removals(a->meta);
}

static Raftlock__Result do_init(struct apply *a, const Raftlock__Init *op)
{
	if (a->meta->next_token != 0)
		return result_of(0);
	/* A cluster restored from a backup: every member must have built its
	 * state from the same image (raftlockd --restore), or it would apply
	 * this log to another state and diverge: stop instead. */
	if (op->restored_from != a->meta->restored_from)
		log_fatal("the cluster was started from backup image %016llx, this node's state "
			  "from %016llx (0: none): start every member of a restored cluster with "
			  "--restore and the same image, on an empty data directory",
			  (unsigned long long)op->restored_from,
			  (unsigned long long)a->meta->restored_from);
	uint64_t floor = op->token_floor ? op->token_floor : 1;
	/* Rule 7, and for a restore: above every token of the image too. */
	if (a->meta->restore_floor > floor)
		floor = a->meta->restore_floor;
	a->meta->next_token = floor;
	a->meta->cluster_id = op->cluster_id;
	records_set_string(&a->meta->cluster, op->cluster);
	/* A new cluster runs at its first leader's level (feature_level.h). */
	uint32_t level = op->feature_level ? op->feature_level : 1u;
	raise_feature_level(a, level);
	if (op->restored_from != 0 && level >= FEATURES_RESTORED_BOOK) {
		member_book_forget(a->meta); /* the saved cluster's members */
		a->fsm->member_changes++;    /* the node's copy of the book is stale */
	}
	/* A restored cluster's new sessions get ids that the cluster it was
	 * copied from has not reached: above its bootstrap milliseconds. */
	if (op->restored_from != 0 && a->meta->next_session < (op->token_floor >> 20))
		a->meta->next_session = op->token_floor >> 20;
	return result_of(0);
}

static void do_store_limit(struct apply *a, const Raftlock__StoreLimit *op)
{
	a->meta->store_limit = op->bytes;
	if (op->bytes > a->fsm->store->map_size / FSM_STORE_LIMIT_SHARE)
		log_warn("the cluster's store limit is now %llu bytes of records, more than this "
			 "node's map-size (%zu MB) / %u: this node may stop with 'map full'; "
			 "give it the map-size of the leader",
			 (unsigned long long)op->bytes, a->fsm->store->map_size >> 20,
			 FSM_STORE_LIMIT_SHARE);
}

/* ---------------------------------------------------------- access rules -- */

/* The access rules (auth.h). Who may change them is decided by the leader
 * before it proposes; apply checks only that the rule is well formed, so
 * that every node stores the same rules. */
static Raftlock__Result do_acl_set(struct apply *a, const Raftlock__AclSet *op)
{
	if (codec_check_rule(op->identity, op->prefix) != 0 || op->perms == 0 ||
	    (op->perms & ~(uint32_t)AUTH_ALL) != 0)
		return result_of(RAFTLOCK_EINVAL);
	if (store_full(a))
		return refuse_full(a);
	store_put_acl(a->fsm->store, a->txn, op->identity, op->prefix, op->perms);
	return result_of(0);
}

#if FEATURE_LEVEL >= 2
static Raftlock__Result do_acl_delete(struct apply *a, const Raftlock__AclDelete *op)
{
	if (codec_check_rule(op->identity, op->prefix) != 0)
		return result_of(RAFTLOCK_EINVAL);
	if (!store_del_acl(a->fsm->store, a->txn, op->identity, op->prefix))
		return result_of(RAFTLOCK_ENOTFOUND);
	return result_of(0);
}
#endif

static void apply_command(struct apply *a, const Raftlock__Command *cmd)
{
	Raftlock__Result res = result_of(0);
	if (features_level_of(cmd) > FEATURE_LEVEL)
		log_fatal("log entry %llu holds a command of feature level %u; this raftlockd "
			  "supports level %u: start a newer build on this data directory",
			  (unsigned long long)a->index, features_level_of(cmd), FEATURE_LEVEL);
	switch (cmd->op_case) {
	case RAFTLOCK__COMMAND__OP_INIT: res = do_init(a, cmd->init); break;
	case RAFTLOCK__COMMAND__OP_OPEN_SESSION: res = do_open_session(a, cmd->open_session); break;
	case RAFTLOCK__COMMAND__OP_RENEW: do_renew(a, cmd->renew); break;
	case RAFTLOCK__COMMAND__OP_EXPIRE_SESSION: do_expire_session(a, cmd->expire_session); break;
	case RAFTLOCK__COMMAND__OP_LOCK_DELAY_END: do_lock_delay_end(a, cmd->lock_delay_end); break;
	case RAFTLOCK__COMMAND__OP_WAIT_EXPIRE: do_wait_expire(a, cmd->wait_expire); break;
	case RAFTLOCK__COMMAND__OP_STORE_LIMIT: do_store_limit(a, cmd->store_limit); break;
	case RAFTLOCK__COMMAND__OP_ACL_SET: res = do_acl_set(a, cmd->acl_set); break;
#if FEATURE_LEVEL >= 2
	case RAFTLOCK__COMMAND__OP_ACL_DELETE: res = do_acl_delete(a, cmd->acl_delete); break;
#endif
	case RAFTLOCK__COMMAND__OP_REVOKE: res = do_revoke(a, cmd->revoke); break;
	case RAFTLOCK__COMMAND__OP_REVOKE_DUE: do_revoke_due(a, cmd->revoke_due); break;
	case RAFTLOCK__COMMAND__OP_DROP_BOUND: do_drop_bound(a, cmd->drop_bound); break;
	case RAFTLOCK__COMMAND__OP_SET_FEATURE_LEVEL:
		raise_feature_level(a, cmd->set_feature_level->level);
		break;
	/* Membership (member_book.h): who may change it is decided by the
	 * leader before it proposes, like the access rules. */
	case RAFTLOCK__COMMAND__OP_MEMBER_ADD:
		res = result_of(member_book_add(a->meta, cmd->member_add));
		a->fsm->member_changes++;
		break;
	case RAFTLOCK__COMMAND__OP_MEMBER_REMOVE:
		res = result_of(member_book_remove(a->meta, cmd->member_remove));
		a->fsm->member_changes++;
		break;
	case RAFTLOCK__COMMAND__OP_MEMBER_JOIN:
		res = result_of(member_book_join(a->meta, cmd->member_join));
		a->fsm->member_changes++;
		break;
	case RAFTLOCK__COMMAND__OP_ACQUIRE:
	case RAFTLOCK__COMMAND__OP_RELEASE:
	case RAFTLOCK__COMMAND__OP_CANCEL_WAIT:
	case RAFTLOCK__COMMAND__OP_PROCLAIM:
	case RAFTLOCK__COMMAND__OP_CLOSE_SESSION:
	case RAFTLOCK__COMMAND__OP_MULTI_ACQUIRE:
		/* Rule 1 of the grant path: no grant before INIT set the
		 * fencing counter's floor. */
		if (a->meta->next_token == 0)
			res = result_of(RAFTLOCK_EUNAVAILABLE);
		else
			res = do_session_command(a, cmd);
		break;
	default: res = result_of(RAFTLOCK_EINVAL); break;
	}
	multilock_run_queues(a);
	emit(a, (struct fsm_event){.type = FSM_EV_RESULT, .command = a->command, .result = &res});
}

void fsm_apply(struct fsm *f, uint64_t index, const Raftlock__LogEntry *entry,
	       const struct fsm_sink *sink)
{
	struct apply a = {.fsm = f, .index = index, .sink = sink};
	multilock_init(&a.multi);
	a.txn = store_begin(f->store, true);
	a.meta = store_get_meta(f->store, a.txn);
	if (index <= a.meta->applied_index) {
		raftlock__meta__free_unpacked(a.meta, NULL);
		store_abort(a.txn);
		return;
	}
	/* Cluster time never goes backwards along the log (rule 2). */
	if (entry->cluster_time > a.meta->cluster_time)
		a.meta->cluster_time = entry->cluster_time;
	a.now = a.meta->cluster_time;
	for (size_t i = 0; i < entry->n_commands; i++) {
		a.command = (unsigned)i;
		apply_command(&a, entry->commands[i]);
	}
	multilock_free(&a.multi);
	a.meta->applied_index = index;
	a.meta->format = STORE_FORMAT;
	store_put_meta(f->store, a.txn, a.meta);
	raftlock__meta__free_unpacked(a.meta, NULL);
	store_commit(a.txn);
}

void fsm_apply_raw(struct fsm *f, uint64_t index, const void *buf, size_t n,
		   const struct fsm_sink *sink)
{
	Raftlock__LogEntry *entry;
	int rv = codec_decode_entry(buf, n, &f->entry_arena, &entry);
	if (rv == RAFTLOCK_EDATA)
		log_fatal("log entry %llu has a newer format than this raftlockd "
			  "understands: upgrade this node",
			  (unsigned long long)index);
	if (rv != 0)
		log_fatal("log entry %llu (%zu bytes) does not decode: damaged log",
			  (unsigned long long)index, n);
	fsm_apply(f, index, entry, sink);
	arena_reset(&f->entry_arena);
}

/* ------------------------------------------------------------- restore -- */

struct name_list {
	char **v;
	size_t n, cap;
};

static int collect_lock(void *arg, Raftlock__LockRecord *rec)
{
	struct name_list *l = arg;
	if (grow(&l->v, &l->cap, l->n + 1, 1024, sizeof *l->v) != 0)
		log_fatal("out of memory");
	if ((l->v[l->n++] = strdup(rec->name)) == NULL)
		log_fatal("out of memory");
	raftlock__lock_record__free_unpacked(rec, NULL);
	return 0;
}

struct id_list {
	uint64_t *v;
	size_t n, cap;
};

static int collect_session(void *arg, Raftlock__SessionRecord *rec)
{
	struct id_list *l = arg;
	if (grow(&l->v, &l->cap, l->n + 1, 1024, sizeof *l->v) != 0)
		log_fatal("out of memory");
	l->v[l->n++] = rec->id;
	raftlock__session_record__free_unpacked(rec, NULL);
	return 0;
}

/* The lock-delay a restored lock gets: its own, and at least the longest
 * TTL of the sessions that held it, so that a holder of the copied
 * cluster has seen its validity run out before the lock is granted again. */
static uint64_t restored_delay(struct apply *a, const Raftlock__LockRecord *lock)
{
	uint64_t delay = lock->lock_delay_ms;
	for (size_t i = 0; i < lock->n_holders; i++) {
		uint64_t deadline;
		uint32_t ttl = RAFTLOCK_TTL_MAX_MS;
		store_get_lease(a->fsm->store, a->txn, lock->holders[i]->session, &deadline, &ttl);
		if (ttl > delay)
			delay = ttl;
	}
	return delay;
}

void fsm_restore_base(struct fsm *f, MDB_txn *txn, uint64_t image_sum)
{
	struct store *st = f->store;
	struct apply a = {.fsm = f};
	a.txn = txn;
	a.meta = store_get_meta(st, a.txn);
	a.now = a.meta->cluster_time;

	struct name_list locks = {0};
	store_scan_locks(st, a.txn, "", NULL, collect_lock, &locks);
	for (size_t i = 0; i < locks.n; i++) {
		Raftlock__LockRecord *lock = store_get_lock(st, a.txn, locks.v[i]);
		if (lock->n_holders > 0) {
			uint64_t until = a.now + restored_delay(&a, lock);
			if (until > lock->delay_until)
				lock->delay_until = until;
		}
		while (lock->n_holders > 0)
			records_remove_holder(lock, lock->n_holders - 1);
		while (lock->n_waiters > 0)
			records_remove_waiter(lock, lock->n_waiters - 1);
		save_lock(&a, lock);
		raftlock__lock_record__free_unpacked(lock, NULL);
		free(locks.v[i]);
	}
	free(locks.v);

	struct id_list sessions = {0};
	store_scan_sessions(st, a.txn, 0, collect_session, &sessions);
	for (size_t i = 0; i < sessions.n; i++) {
		Raftlock__SessionRecord *sess = store_get_session(st, a.txn, sessions.v[i]);
		if (sess->nonce != 0)
			store_del_nonce(st, a.txn, sess->nonce);
		store_identity_sessions_add(st, a.txn, sess->identity, -1);
		store_drop_session_locks(st, a.txn, sess->id);
		store_drop_outcomes(st, a.txn, sess->id);
		store_drop_multi_waits(st, a.txn, sess->id);
		store_del_lease(st, a.txn, sess->id);
		store_del_session(st, a.txn, sess->id);
		raftlock__session_record__free_unpacked(sess, NULL);
	}
	free(sessions.v);

	a.meta->restore_floor = a.meta->next_token ? a.meta->next_token : 1;
	a.meta->next_token = 0; /* until the new cluster's INIT */
	a.meta->restored_from = image_sum;
	a.meta->cluster_id = 0;
	a.meta->applied_index = 0; /* the new cluster's log starts afresh */
	records_set_string(&a.meta->cluster, "");
	a.meta->format = STORE_FORMAT;
	store_put_meta(st, a.txn, a.meta);
	raftlock__meta__free_unpacked(a.meta, NULL);
}
