/* multi.c: lock sets (raftlock_multi_*), on the lock layer: a set is one
 * lock handle per item sharing one owner, led by the first by name
 * (lock.h), and one MultiAcquireRequest. */
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "lock.h"

struct raftlock_multi {
	raftlock_session *session;
	size_t n;
	raftlock_lock **locks; /* in name order; locks[0] leads the set */
	size_t *at;            /* item i of the caller is locks[at[i]] */
	Raftlock__Mode *modes; /* per lock, in name order */
	uint32_t *permits;
};

/* order[] (the item indices) sorted by name: an insertion sort, as a
 * set has at most RAFTLOCK_MULTI_MAX items. */
static void sort_by_name(const struct raftlock_multi_item *items, size_t *order, size_t n)
{
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	for (size_t i = 1; i < n; i++) {
		size_t x = order[i], j = i;
		for (; j > 0 && strcmp(items[order[j - 1]].name, items[x].name) > 0; j--)
			order[j] = order[j - 1];
		order[j] = x;
	}
}

/* The set without its handles: what its session's close frees (the
 * handles go with the session). */
static void multi_free_wrapper(void *arg)
{
	raftlock_multi *m = arg;
	free(m->locks);
	free(m->at);
	free(m->modes);
	free(m->permits);
	free(m);
}

RAFTLOCK_API void raftlock_multi_free(raftlock_multi *m)
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < m->n; i++)
		raftlock_lock_free(m->locks[i]);
	multi_free_wrapper(m);
}

/* The set's handles in name order (order[k]: the item at rank k). */
static int multi_make_locks(raftlock_multi *m, const struct raftlock_multi_item *items,
			    const size_t *order)
{
	for (size_t k = 0; k < m->n; k++) {
		const struct raftlock_multi_item *it = &items[order[k]];
		if (it->mode != RAFTLOCK_EXCLUSIVE && it->mode != RAFTLOCK_SHARED)
			return errmsg_set(m->session->t, RAFTLOCK_EINVAL, NULL,
					  "lock set: '%s' has an unknown mode %d", it->name,
					  it->mode);
		int rv = raftlock_lock_new(m->session, it->name, it->opts, &m->locks[k]);
		if (rv != 0)
			return rv;
		m->at[order[k]] = k;
		m->modes[k] = it->mode == RAFTLOCK_SHARED ? RAFTLOCK__MODE__SHARED
							  : RAFTLOCK__MODE__EXCLUSIVE;
		m->permits[k] = it->permits ? it->permits : 1;
	}
	return 0;
}

RAFTLOCK_API int raftlock_multi_new(raftlock_session *s, const struct raftlock_multi_item *items,
				    size_t n, raftlock_multi **out)
{
	if (s == NULL)
		return RAFTLOCK_EINVAL;
	struct transport *t = s->t;
	if (items == NULL || out == NULL)
		return errmsg_set(t, RAFTLOCK_EINVAL,
				  items == NULL ? "items is NULL" : "out is NULL", "lock set");
	if (n == 0 || n > RAFTLOCK_MULTI_MAX)
		return errmsg_set(t, RAFTLOCK_EINVAL, NULL, "lock set: %zu locks, not 1..%d", n,
				  RAFTLOCK_MULTI_MAX);
	for (size_t i = 0; i < n; i++) {
		const struct raftlock_lock_options *o = items[i].opts;
		if (items[i].name == NULL)
			return errmsg_set(t, RAFTLOCK_EINVAL, NULL,
					  "lock set: item %zu has no name", i);
		/* The set's request has no room for them: refused rather than
		 * dropped, so that no lock a set creates lacks a bound its
		 * creator asked for. */
		if (o != NULL && (o->max_hold_ms != 0 || o->revoke_grace_ms != 0))
			return errmsg_set(t, RAFTLOCK_EINVAL, NULL,
					  "lock set: '%s': max_hold_ms and revoke_grace_ms are not "
					  "taken for a set's locks (create the lock with "
					  "raftlock_lock_acquire first)",
					  items[i].name);
	}
	raftlock_multi *m = calloc(1, sizeof *m);
	size_t *order = calloc(n, sizeof *order);
	if (m == NULL || order == NULL || (m->locks = calloc(n, sizeof *m->locks)) == NULL ||
	    (m->at = calloc(n, sizeof *m->at)) == NULL ||
	    (m->modes = calloc(n, sizeof *m->modes)) == NULL ||
	    (m->permits = calloc(n, sizeof *m->permits)) == NULL) {
		free(order);
		raftlock_multi_free(m);
		return errmsg_set(t, RAFTLOCK_ENOMEM, NULL, "lock set");
	}
	m->session = s;
	m->n = n;
	sort_by_name(items, order, n);
	int rv = 0;
	for (size_t k = 1; k < n && rv == 0; k++)
		if (strcmp(items[order[k - 1]].name, items[order[k]].name) == 0)
			rv = errmsg_set(t, RAFTLOCK_EINVAL, NULL, "lock set: '%s' given twice",
					items[order[k]].name);
	if (rv == 0)
		rv = multi_make_locks(m, items, order);
	free(order);
	if (rv != 0) {
		raftlock_multi_free(m); /* frees the handles made so far */
		return rv;
	}
	pthread_mutex_lock(&t->mu);
	for (size_t k = 1; k < n; k++)
		m->locks[k]->owner = m->locks[0]->owner; /* one owner: one grant */
	m->locks[0]->set = m->locks;
	m->locks[0]->n_set = n;
	m->locks[0]->wrapper = m;
	m->locks[0]->free_wrapper = multi_free_wrapper;
	pthread_mutex_unlock(&t->mu);
	*out = m;
	return 0;
}

RAFTLOCK_API size_t raftlock_multi_size(const raftlock_multi *m)
{
	return m != NULL ? m->n : 0;
}

RAFTLOCK_API uint64_t raftlock_multi_token(const raftlock_multi *m, size_t i)
{
	if (m == NULL || i >= m->n)
		return 0;
	return raftlock_lock_token(m->locks[m->at[i]]);
}

/* A MultiAcquireRequest of the set, pointing into m and itself. */
struct multi_msg {
	Raftlock__Envelope env;
	Raftlock__MultiAcquireRequest req;
	Raftlock__MultiAcquire acq;
	Raftlock__MultiItem items[RAFTLOCK_MULTI_MAX];
	Raftlock__MultiItem *ptrs[RAFTLOCK_MULTI_MAX];
};

static void multi_msg_init(struct multi_msg *mm, const raftlock_multi *m, int timeout_ms)
{
	raftlock__envelope__init(&mm->env);
	raftlock__multi_acquire_request__init(&mm->req);
	raftlock__multi_acquire__init(&mm->acq);
	mm->env.body_case = RAFTLOCK__ENVELOPE__BODY_MULTI_ACQUIRE;
	mm->env.multi_acquire = &mm->req;
	mm->req.acquire = &mm->acq;
	for (size_t k = 0; k < m->n; k++) {
		const struct raftlock_lock *l = m->locks[k];
		Raftlock__MultiItem *it = &mm->items[k];
		raftlock__multi_item__init(it);
		it->name = l->name;
		it->kind = (Raftlock__LockKind)l->opts.kind;
		it->mode = m->modes[k];
		it->permits = m->permits[k];
		it->limit = l->opts.limit;
		it->lock_delay_ms = l->opts.lock_delay_ms;
		mm->ptrs[k] = it;
	}
	mm->acq.items = mm->ptrs;
	mm->acq.n_items = m->n;
	mm->acq.owner = m->locks[0]->owner;
	mm->acq.wait = timeout_ms != 0;
	mm->acq.wait_ms = timeout_ms > 0 ? (uint32_t)timeout_ms : 0;
}

RAFTLOCK_API int raftlock_multi_acquire(raftlock_multi *m, int timeout_ms)
{
	if (m == NULL)
		return RAFTLOCK_EINVAL;
	struct multi_msg *mm = malloc(sizeof *mm);
	if (mm == NULL)
		return errmsg_set(m->session->t, RAFTLOCK_ENOMEM, NULL, "lock set");
	multi_msg_init(mm, m, timeout_ms);
	uint64_t token;
	int rv = lock_acquire_env(m->locks[0], &mm->env, timeout_ms, &token);
	free(mm);
	return rv;
}

/* The asynchronous acquire's callback, as the lock layer calls it. */
struct multi_async {
	raftlock_multi *m;
	raftlock_multi_cb cb;
	void *arg;
};

static void multi_async_done(raftlock_lock *l, int status, uint64_t value, void *arg)
{
	(void)l;
	(void)value;
	struct multi_async *a = arg;
	a->cb(a->m, status, a->arg);
	free(a);
}

RAFTLOCK_API int raftlock_multi_acquire_async(raftlock_multi *m, int timeout_ms,
					      raftlock_multi_cb cb, void *arg)
{
	if (m == NULL)
		return RAFTLOCK_EINVAL;
	if (cb == NULL)
		return errmsg_set(m->session->t, RAFTLOCK_EINVAL, "no callback", "lock set");
	struct multi_msg *mm = malloc(sizeof *mm);
	struct multi_async *a = malloc(sizeof *a);
	if (mm == NULL || a == NULL) {
		free(mm);
		free(a);
		return errmsg_set(m->session->t, RAFTLOCK_ENOMEM, NULL, "lock set");
	}
	*a = (struct multi_async){.m = m, .cb = cb, .arg = arg};
	multi_msg_init(mm, m, timeout_ms);
	int rv = lock_acquire_env_async(m->locks[0], &mm->env, timeout_ms, multi_async_done, a);
	free(mm); /* packed when submitted */
	if (rv != 0)
		free(a);
	return rv;
}

/* Whether the handle holds its lock as far as it knows, its session lost
 * or not: a release then tells the caller what the cluster says
 * (RAFTLOCK_ESESSION for a lost session), as raftlock_lock_release() does. */
static bool multi_lock_held(raftlock_lock *l)
{
	struct transport *t = l->session->t;
	pthread_mutex_lock(&t->mu);
	bool held = l->token != 0;
	pthread_mutex_unlock(&t->mu);
	return held;
}

RAFTLOCK_API int raftlock_multi_release(raftlock_multi *m)
{
	if (m == NULL)
		return RAFTLOCK_EINVAL;
	raftlock_lock *held[RAFTLOCK_MULTI_MAX];
	size_t n = 0;
	for (size_t k = m->n; k-- > 0;)
		if (multi_lock_held(m->locks[k]))
			held[n++] = m->locks[k];
	if (n == 0)
		return errmsg_set(m->session->t, RAFTLOCK_ENOTHOLDER, NULL,
				  "lock set: holds nothing");
	return lock_release_set(held, n);
}
