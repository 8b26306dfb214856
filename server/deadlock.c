/* deadlock.c: see deadlock.h. */
#include "deadlock.h"

#include <stdlib.h>
#include <string.h>

#include "fsm_rules.h"
#include "log.h"

/* Session ids: a stack to visit and a set of those seen (open addressing;
 * ids are never 0). */
struct walk {
	uint64_t target; /* the session asking to wait */
	uint64_t *stack;
	size_t n, cap;
	uint64_t *seen;
	size_t n_seen, seen_cap; /* seen_cap: a power of two */
	bool cycle;
};

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n);
	if (q == NULL)
		log_fatal("out of memory");
	return q;
}

static size_t slot_of(uint64_t id, size_t cap)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 7) & (cap - 1);
}

/* Adds id to the seen set; false when it was there already. */
static bool mark_seen(struct walk *w, uint64_t id)
{
	if (2 * (w->n_seen + 1) > w->seen_cap) {
		size_t cap = w->seen_cap ? 2 * w->seen_cap : 64;
		uint64_t *seen = calloc(cap, sizeof *seen);
		if (seen == NULL)
			log_fatal("out of memory");
		for (size_t i = 0; i < w->seen_cap; i++) {
			if (w->seen[i] == 0)
				continue;
			size_t s = slot_of(w->seen[i], cap);
			while (seen[s] != 0)
				s = (s + 1) & (cap - 1);
			seen[s] = w->seen[i];
		}
		free(w->seen);
		w->seen = seen;
		w->seen_cap = cap;
	}
	size_t s = slot_of(id, w->seen_cap);
	while (w->seen[s] != 0) {
		if (w->seen[s] == id)
			return false;
		s = (s + 1) & (w->seen_cap - 1);
	}
	w->seen[s] = id;
	w->n_seen++;
	return true;
}

/* Session `id` is waited for (an edge of the graph). */
static void push(struct walk *w, uint64_t from, uint64_t id)
{
	if (id == from)
		return; /* a session never waits for itself */
	if (id == w->target) {
		w->cycle = true;
		return;
	}
	if (w->n == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 64;
		w->stack = xrealloc(w->stack, w->cap * sizeof *w->stack);
	}
	w->stack[w->n++] = id;
}

/* The edges of a waiter at position `pos` of lock's queue, of session
 * `from`: the lock's holders and the waiters ahead of it. */
static void push_edges(struct walk *w, const Raftlock__LockRecord *lock, size_t pos, uint64_t from)
{
	for (size_t i = 0; i < lock->n_holders; i++)
		push(w, from, lock->holders[i]->session);
	for (size_t i = 0; i < pos && i < lock->n_waiters; i++)
		push(w, from, lock->waiters[i]->session);
}

static bool has_pending(const Raftlock__SessionRecord *sess)
{
	for (size_t i = 0; i < sess->n_outcomes; i++)
		if (sess->outcomes[i]->pending)
			return true;
	return false;
}

/* Pushes the sessions that session `id` waits for. */
static void visit(struct apply *a, struct walk *w, uint64_t id)
{
	struct store *st = a->fsm->store;
	Raftlock__SessionRecord *sess = store_get_session(st, a->txn, id);
	if (sess == NULL)
		return;
	/* Only a queued acquire waits: the others hold, and hold on. */
	if (has_pending(sess)) {
		struct session_locks names = apply_names(a);
		size_t n_names;
		char **name = session_locks_names(&names, sess, &n_names);
		for (size_t i = 0; i < n_names && !w->cycle; i++) {
			Raftlock__LockRecord *lock = store_get_lock(st, a->txn, name[i]);
			if (lock == NULL)
				continue;
			for (size_t j = 0; j < lock->n_waiters; j++)
				if (lock->waiters[j]->session == id)
					push_edges(w, lock, j, id);
			raftlock__lock_record__free_unpacked(lock, NULL);
		}
		session_locks_free(name, n_names);
	}
	raftlock__session_record__free_unpacked(sess, NULL);
}

bool deadlock_would_close_cycle(struct apply *a, uint64_t session,
				Raftlock__LockRecord *const *locks, size_t n)
{
	struct walk w = {.target = session};
	/* The new waiter goes to the tail: it waits for every holder and
	 * every waiter already there. */
	for (size_t i = 0; i < n && !w.cycle; i++)
		push_edges(&w, locks[i], locks[i]->n_waiters, session);
	while (w.n > 0 && !w.cycle) {
		uint64_t id = w.stack[--w.n];
		if (mark_seen(&w, id))
			visit(a, &w, id);
	}
	free(w.stack);
	free(w.seen);
	return w.cycle;
}
