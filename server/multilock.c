/* multilock.c: see multilock.h. */
#include "multilock.h"

#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "deadlock.h"
#include "feature_level.h"
#include "fsm_rules.h"
#include "log.h"
#include "records.h"

void multilock_init(struct multilock_state *m)
{
	m->names = NULL;
	m->n = 0;
	m->cap = 0;
}

void multilock_free(struct multilock_state *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->names[i]);
	free(m->names);
	multilock_init(m);
}

/* Notes that the queue of `name` may move (once per name at a time). */
static void note_queue(struct apply *a, const char *name)
{
	struct multilock_state *m = &a->multi;
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->names[i], name) == 0)
			return;
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 8;
		char **names = realloc(m->names, cap * sizeof *names);
		if (names == NULL)
			log_fatal("out of memory");
		m->names = names;
		m->cap = cap;
	}
	m->names[m->n++] = records_strdup(name);
}

void multilock_run_queues(struct apply *a)
{
	struct multilock_state *m = &a->multi;
	/* A grant here may note more locks: run until none is left. */
	while (m->n > 0) {
		char *name = m->names[--m->n];
		Raftlock__LockRecord *lock = store_get_lock(a->fsm->store, a->txn, name);
		free(name);
		if (lock == NULL)
			continue;
		grant_waiters(a, lock, NULL);
		save_lock(a, lock);
		raftlock__lock_record__free_unpacked(lock, NULL);
	}
}

void multilock_keep_tokens(struct apply *a, Raftlock__Result *res)
{
	if (res->n_tokens > RAFTLOCK_MULTI_MAX)
		log_fatal("a result with %zu tokens: damaged store", res->n_tokens);
	if (res->n_tokens > 0 && res->tokens != a->multi.tokens) {
		memcpy(a->multi.tokens, res->tokens, res->n_tokens * sizeof *res->tokens);
		res->tokens = a->multi.tokens;
	}
}

/* ----------------------------------------------------- session's sets -- */

/* Whether this apply keeps the sets in their table (the level may rise
 * within an entry: ask each time). */
static bool sets_indexed(const struct apply *a)
{
	return features_recorded(a->meta->feature_level) >= FEATURES_SEQ_TABLES;
}

static ssize_t listed_set(const Raftlock__SessionRecord *sess, uint64_t seq)
{
	for (size_t i = 0; i < sess->n_multi_waits; i++)
		if (sess->multi_waits[i]->seq == seq)
			return (ssize_t)i;
	return -1;
}

/* The session's queued set of seq, or NULL: its row's copy, or the
 * record's own below the level. Release it with set_release() once done,
 * before set_remove(). */
static Raftlock__MultiWait *set_find(const struct apply *a, const Raftlock__SessionRecord *sess,
				     uint64_t seq)
{
	if (sets_indexed(a))
		return store_get_multi_wait(a->fsm->store, a->txn, sess->id, seq);
	ssize_t k = listed_set(sess, seq);
	return k < 0 ? NULL : sess->multi_waits[k];
}

static void set_release(const struct apply *a, Raftlock__MultiWait *mw)
{
	if (mw != NULL && sets_indexed(a))
		raftlock__multi_wait__free_unpacked(mw, NULL);
}

/* Removes the set of seq (after set_release() of what set_find() gave:
 * below the level that is the record's own). */
static void set_remove(const struct apply *a, Raftlock__SessionRecord *sess, uint64_t seq)
{
	if (sets_indexed(a)) {
		store_del_multi_wait(a->fsm->store, a->txn, sess->id, seq);
		return;
	}
	ssize_t i = listed_set(sess, seq);
	if (i < 0)
		return;
	raftlock__multi_wait__free_unpacked(sess->multi_waits[i], NULL);
	memmove(&sess->multi_waits[i], &sess->multi_waits[i + 1],
		(sess->n_multi_waits - (size_t)i - 1) * sizeof *sess->multi_waits);
	sess->n_multi_waits--;
}

/* Records a queued set of the session (every part malloc'd, as records
 * from the store are). */
static void set_add(const struct apply *a, Raftlock__SessionRecord *sess, uint64_t seq,
		    const Raftlock__MultiAcquire *op)
{
	Raftlock__MultiWait *mw = malloc(sizeof *mw);
	char **names = malloc(op->n_items * sizeof *names);
	if (mw == NULL || names == NULL)
		log_fatal("out of memory");
	raftlock__multi_wait__init(mw);
	mw->seq = seq;
	mw->owner = op->owner;
	for (size_t i = 0; i < op->n_items; i++)
		names[i] = records_strdup(op->items[i]->name);
	mw->names = names;
	mw->n_names = op->n_items;
	if (sets_indexed(a)) {
		store_put_multi_wait(a->fsm->store, a->txn, sess->id, mw);
		raftlock__multi_wait__free_unpacked(mw, NULL);
		return;
	}
	Raftlock__MultiWait **sets =
		realloc(sess->multi_waits, (sess->n_multi_waits + 1) * sizeof *sets);
	if (sets == NULL)
		log_fatal("out of memory");
	sess->multi_waits = sets;
	sess->multi_waits[sess->n_multi_waits++] = mw;
}

void multilock_end(struct apply *a, const Raftlock__SessionRecord *sess)
{
	if (sets_indexed(a))
		store_drop_multi_waits(a->fsm->store, a->txn, sess->id);
}

static bool has_sets(const Raftlock__SessionRecord *rec)
{
	return rec->n_multi_waits > 0;
}

/* One session's list of sets into the table. */
static void move_sets(struct store *st, MDB_txn *txn, Raftlock__SessionRecord *sess)
{
	for (size_t j = 0; j < sess->n_multi_waits; j++) {
		store_put_multi_wait(st, txn, sess->id, sess->multi_waits[j]);
		raftlock__multi_wait__free_unpacked(sess->multi_waits[j], NULL);
	}
	free(sess->multi_waits);
	sess->multi_waits = NULL;
	sess->n_multi_waits = 0;
}

void multilock_move(struct store *st, MDB_txn *txn)
{
	store_rewrite_sessions(st, txn, has_sets, move_sets);
}

static ssize_t waiter_index(const Raftlock__LockRecord *lock, uint64_t session, uint64_t seq)
{
	for (size_t i = 0; i < lock->n_waiters; i++)
		if (lock->waiters[i]->session == session && lock->waiters[i]->seq == seq)
			return (ssize_t)i;
	return -1;
}

/* ---------------------------------------------------------------- grant -- */

/* Whether the set's waiter (session, seq) may have this lock now. */
static bool head_ready(const struct apply *a, const Raftlock__LockRecord *lock, uint64_t session,
		       uint64_t seq)
{
	if (lock->n_waiters == 0)
		return false;
	const Raftlock__Waiter *w = lock->waiters[0];
	return w->multi && w->session == session && w->seq == seq && !delayed(a, lock) &&
	       compatible(lock, w->mode, w->permits);
}

bool multilock_grant(struct apply *a, Raftlock__LockRecord *lock, Raftlock__SessionRecord *sess)
{
	uint64_t seq = lock->waiters[0]->seq;
	Raftlock__MultiWait *mw = set_find(a, sess, seq);
	if (mw == NULL || mw->n_names > RAFTLOCK_MULTI_MAX)
		log_fatal("lock '%s': a waiter of a set its session %llu does not know: damaged "
			  "store",
			  lock->name, (unsigned long long)sess->id);
	Raftlock__LockRecord *locks[RAFTLOCK_MULTI_MAX];
	size_t n = 0;
	bool ready = true;
	for (size_t i = 0; ready && i < mw->n_names; i++) {
		Raftlock__LockRecord *l =
			strcmp(mw->names[i], lock->name) == 0
				? lock
				: store_get_lock(a->fsm->store, a->txn, mw->names[i]);
		if (l == NULL)
			break; /* cannot be: the set's waiter keeps the lock */
		locks[n++] = l;
		ready = head_ready(a, l, sess->id, seq);
	}
	ready = ready && n == mw->n_names;
	if (ready) {
		uint64_t tokens[RAFTLOCK_MULTI_MAX];
		for (size_t i = 0; i < n; i++) {
			const Raftlock__Waiter *w = locks[i]->waiters[0];
			tokens[i] =
				grant(a, locks[i], sess->id, w->owner, w->mode, w->permits, NULL)
					->token;
			histogram_observe(&a->fsm->stats.wait, elapsed_ns(a, w->queued_time));
			records_remove_waiter(locks[i], 0);
		}
		Raftlock__Result res = result_of(0);
		res.token = tokens[0];
		res.count = 1;
		res.tokens = tokens;
		res.n_tokens = n;
		finish_wait(a, sess, seq, &res);
	}
	for (size_t i = 0; i < n; i++) {
		if (locks[i] == lock)
			continue;
		if (ready) {
			save_lock(a, locks[i]);
			note_queue(a, locks[i]->name); /* shared grants may follow */
		}
		raftlock__lock_record__free_unpacked(locks[i], NULL);
	}
	set_release(a, mw);
	if (ready)
		set_remove(a, sess, seq);
	return ready;
}

void multilock_drop(struct apply *a, Raftlock__LockRecord *lock, Raftlock__SessionRecord *sess,
		    uint64_t seq, int status)
{
	Raftlock__MultiWait *mw = set_find(a, sess, seq);
	if (mw == NULL)
		return;
	for (size_t i = 0; i < mw->n_names; i++) {
		if (strcmp(mw->names[i], lock->name) == 0)
			continue;
		Raftlock__LockRecord *l = store_get_lock(a->fsm->store, a->txn, mw->names[i]);
		if (l == NULL)
			continue;
		ssize_t j = waiter_index(l, sess->id, seq);
		if (j >= 0) {
			note_waiter_gone(a, l, (size_t)j, status);
			records_remove_waiter(l, (size_t)j);
			forget_lock_if_done(a, sess, l);
			if (j == 0)
				note_queue(a, l->name); /* a new head */
			save_lock(a, l);
		}
		raftlock__lock_record__free_unpacked(l, NULL);
	}
	set_release(a, mw);
	set_remove(a, sess, seq);
}

/* -------------------------------------------------------------- acquire -- */

/* The items of a request: 1..RAFTLOCK_MULTI_MAX, names valid and strictly
 * increasing (sorted, no name twice). */
static bool items_valid(const Raftlock__MultiAcquire *op)
{
	if (op->n_items == 0 || op->n_items > RAFTLOCK_MULTI_MAX)
		return false;
	for (size_t i = 0; i < op->n_items; i++) {
		if (op->items[i] == NULL || codec_check_name(op->items[i]->name) != 0)
			return false;
		if (i > 0 && strcmp(op->items[i - 1]->name, op->items[i]->name) >= 0)
			return false;
	}
	return true;
}

/* The session may hold or await this many more names. */
static bool session_has_room(struct apply *a, const Raftlock__SessionRecord *sess,
			     const Raftlock__MultiAcquire *op)
{
	struct session_locks names = apply_names(a);
	size_t fresh = 0;
	for (size_t i = 0; i < op->n_items; i++)
		fresh += !session_locks_has(&names, sess, op->items[i]->name);
	return session_locks_count(&names, sess) + fresh <= FSM_MAX_SESSION_LOCKS;
}

/* One queued set: a waiter on every lock, the set in the session. */
static void queue_set(struct apply *a, Raftlock__SessionRecord *sess, const Raftlock__Command *cmd,
		      Raftlock__LockRecord **locks, const Raftlock__Mode *modes,
		      const uint32_t *permits)
{
	const Raftlock__MultiAcquire *op = cmd->multi_acquire;
	struct session_locks names = apply_names(a);
	uint64_t deadline = op->wait_ms ? a->now + op->wait_ms : 0;
	for (size_t i = 0; i < op->n_items; i++) {
		Raftlock__Waiter *w = records_add_waiter(locks[i]);
		w->session = sess->id;
		w->owner = op->owner;
		w->mode = modes[i];
		w->permits = permits[i];
		w->seq = cmd->seq;
		w->queued_time = a->now;
		w->deadline = deadline;
		w->multi = true;
		note_change(a, RAFTLOCK__WATCH_KIND__WATCH_QUEUED, locks[i]->name, w->session,
			    w->owner, 0, w->mode, w->permits, 0);
		session_locks_add(&names, sess, locks[i]->name);
		contention_count(&a->fsm->stats.contention, locks[i]->name, a->now);
	}
	set_add(a, sess, cmd->seq, op);
	a->fsm->stats.waits++;
	/* One deadline for the set, on its first lock: its WAIT_EXPIRE
	 * drops the whole set (multilock_drop). */
	if (deadline != 0)
		emit(a, (struct fsm_event){.type = FSM_EV_WAIT_DEADLINE,
					   .name = locks[0]->name,
					   .session = sess->id,
					   .seq = cmd->seq,
					   .deadline = deadline});
}

/* Grants every lock of the set now; res gets the tokens. */
static void grant_set(struct apply *a, Raftlock__SessionRecord *sess,
		      const Raftlock__MultiAcquire *op, Raftlock__LockRecord **locks,
		      const Raftlock__Mode *modes, const uint32_t *permits, Raftlock__Result *res)
{
	struct session_locks names = apply_names(a);
	for (size_t i = 0; i < op->n_items; i++) {
		a->multi.tokens[i] =
			grant(a, locks[i], sess->id, op->owner, modes[i], permits[i], NULL)->token;
		session_locks_add(&names, sess, locks[i]->name);
	}
	res->token = a->multi.tokens[0];
	res->count = 1;
	res->tokens = a->multi.tokens;
	res->n_tokens = op->n_items;
}

Raftlock__Result multilock_acquire(struct apply *a, Raftlock__SessionRecord *sess,
				   const Raftlock__Command *cmd)
{
	const Raftlock__MultiAcquire *op = cmd->multi_acquire;
	if (!items_valid(op))
		return result_of(RAFTLOCK_EINVAL);
	if (!session_has_room(a, sess, op))
		return refuse_limit(RAFTLOCK__LIMIT__LIMIT_LOCKS_PER_SESSION,
				    FSM_MAX_SESSION_LOCKS);
	size_t n = op->n_items, opened = 0;
	Raftlock__LockRecord *locks[RAFTLOCK_MULTI_MAX];
	Raftlock__Mode modes[RAFTLOCK_MULTI_MAX];
	uint32_t permits[RAFTLOCK_MULTI_MAX];
	Raftlock__Result res = result_of(0);
	bool free_now = true;
	for (size_t i = 0; i < n; i++) {
		const Raftlock__MultiItem *it = op->items[i];
		Raftlock__Acquire acq = RAFTLOCK__ACQUIRE__INIT;
		acq.name = it->name;
		acq.kind = it->kind;
		acq.mode = it->mode;
		acq.permits = it->permits;
		acq.limit = it->limit;
		acq.lock_delay_ms = it->lock_delay_ms;
		acq.owner = op->owner;
		res = open_lock(a, &acq, &locks[i], &modes[i], &permits[i]);
		if (locks[i] != NULL)
			opened++;
		if (res.status != 0)
			goto out;
		/* A set is one grant: its owner must be new to every lock. */
		if (records_find_holder(locks[i], sess->id, op->owner) != NULL ||
		    records_find_waiter(locks[i], sess->id, op->owner) >= 0) {
			res.status = RAFTLOCK_EBUSY;
			goto out;
		}
		free_now = free_now && locks[i]->n_waiters == 0 && !delayed(a, locks[i]) &&
			   compatible(locks[i], modes[i], permits[i]);
	}
	Raftlock__Acquire limits = RAFTLOCK__ACQUIRE__INIT;
	limits.max_waiters = op->max_waiters;
	for (size_t i = 0; i < n; i++) {
		if (free_now && locks[i]->n_holders >= FSM_MAX_HOLDERS) {
			res = refuse_limit(RAFTLOCK__LIMIT__LIMIT_HOLDERS_PER_LOCK,
					   FSM_MAX_HOLDERS);
			goto out;
		}
		if (!free_now && op->wait && locks[i]->n_waiters >= max_waiters(&limits)) {
			res = refuse_limit(RAFTLOCK__LIMIT__LIMIT_WAITERS_PER_LOCK,
					   max_waiters(&limits));
			goto out;
		}
	}
	if (!free_now && !op->wait) {
		res.status = RAFTLOCK_EBUSY;
	} else if (store_full(a)) {
		res = refuse_full(a);
	} else if (free_now) {
		grant_set(a, sess, op, locks, modes, permits, &res);
	} else if (deadlock_would_close_cycle(a, sess->id, locks, n)) {
		res.status = RAFTLOCK_EDEADLK;
	} else {
		queue_set(a, sess, cmd, locks, modes, permits);
		res.queued = true;
	}
out:
	for (size_t i = 0; i < opened; i++) {
		save_lock(a, locks[i]);
		raftlock__lock_record__free_unpacked(locks[i], NULL);
	}
	return res;
}
