/* deadlock.c: see deadlock.h. */
#include "deadlock.h"

#include <stdlib.h>
#include <string.h>

#include "fsm_rules.h"
#include "log.h"
#include "records.h"

/* Open addressing on 64-bit keys (never 0), a pointer with each; a key
 * may be there more than once (names whose hashes meet). */
struct table {
	struct slot {
		uint64_t key; /* 0: free */
		void *value;
	} * slot;
	size_t n, cap; /* cap: 0 or a power of two */
};

/* Session ids: a stack to visit and a set of those ever pushed; and the
 * locks with more than one waiter, by the hash of their names, kept for
 * the sessions visited after: on a queue of W waiters each of them is
 * visited, and each would otherwise decode the same record of W waiters
 * again. */
struct walk {
	uint64_t target; /* the session asking to wait */
	uint64_t *stack;
	size_t n, cap;
	struct table seen;  /* session id -> NULL */
	struct table locks; /* name hash -> Raftlock__LockRecord * */
	/* The new wait's locks whose every holder and waiter was pushed at
	 * the start, none of them the target: an edge through one of them
	 * leads to a session pushed already, so a visit passes them by. On a
	 * queue of W waiters that is every visit's only lock. name hash ->
	 * the caller's Raftlock__LockRecord (not freed here). */
	struct table all_pushed;
	bool cycle;
};

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n);
	if (q == NULL)
		log_fatal("out of memory");
	return q;
}

static size_t slot_of(uint64_t key, size_t cap)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 7) & (cap - 1);
}

static void table_put(struct table *t, uint64_t key, void *value)
{
	if (2 * (t->n + 1) > t->cap) {
		struct table bigger = {.cap = t->cap ? 2 * t->cap : 64};
		bigger.slot = calloc(bigger.cap, sizeof *bigger.slot);
		if (bigger.slot == NULL)
			log_fatal("out of memory");
		for (size_t i = 0; i < t->cap; i++)
			if (t->slot[i].key != 0)
				table_put(&bigger, t->slot[i].key, t->slot[i].value);
		free(t->slot);
		*t = bigger;
	}
	size_t s = slot_of(key, t->cap);
	while (t->slot[s].key != 0)
		s = (s + 1) & (t->cap - 1);
	t->slot[s] = (struct slot){key, value};
	t->n++;
}

/* The slots of key: for (s = table_first(); s != NULL; s = table_next()). */
static struct slot *table_next(const struct table *t, uint64_t key, struct slot *s)
{
	size_t i = (size_t)(s - t->slot);
	for (;;) { /* ends: at most half the slots are taken */
		i = (i + 1) & (t->cap - 1);
		if (t->slot[i].key == 0)
			return NULL;
		if (t->slot[i].key == key)
			return &t->slot[i];
	}
}

static struct slot *table_first(const struct table *t, uint64_t key)
{
	if (t->cap == 0)
		return NULL;
	struct slot *s = &t->slot[slot_of(key, t->cap)];
	if (s->key == 0)
		return NULL;
	return s->key == key ? s : table_next(t, key, s);
}

/* Adds id to the seen set; false when it was there already. */
static bool mark_seen(struct walk *w, uint64_t id)
{
	if (table_first(&w->seen, id) != NULL)
		return false;
	table_put(&w->seen, id, NULL);
	return true;
}

/* Session `id` is waited for (an edge of the graph); it is put on the
 * stack once, however many edges lead to it: on a queue of W waiters each
 * waits for all those ahead, W * W / 2 edges. */
static void push(struct walk *w, uint64_t from, uint64_t id)
{
	if (id == from)
		return; /* a session never waits for itself */
	if (id == w->target) {
		w->cycle = true;
		return;
	}
	if (!mark_seen(w, id))
		return;
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

/* FNV-1a of the len bytes of a name, never 0. */
static uint64_t name_hash(const char *name, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 1099511628211ull;
	}
	return h == 0 ? 1 : h;
}

/* Whether the name (len bytes) is of a lock in w->all_pushed. */
static bool all_pushed_lock(const struct walk *w, const char *name, size_t len)
{
	uint64_t hash = name_hash(name, len);
	for (struct slot *s = table_first(&w->all_pushed, hash); s != NULL;
	     s = table_next(&w->all_pushed, hash, s)) {
		const Raftlock__LockRecord *rec = s->value;
		if (strncmp(rec->name, name, len) == 0 && rec->name[len] == '\0')
			return true;
	}
	return false;
}

struct names_scan {
	const struct walk *w;
	bool other; /* a name not in w->all_pushed */
};

static int find_other(void *arg, const char *name, size_t len)
{
	struct names_scan *scan = arg;
	scan->other = !all_pushed_lock(scan->w, name, len);
	return scan->other; /* stop at the first */
}

/* Lock `name` as stored (NULL: no such lock). A lock with more than one
 * waiter is read once per walk and kept, as each of its waiters may be
 * visited; another one is the caller's to free (*own). */
static const Raftlock__LockRecord *read_lock(struct apply *a, struct walk *w, const char *name,
					     Raftlock__LockRecord **own)
{
	*own = NULL;
	uint64_t hash = name_hash(name, strlen(name));
	for (struct slot *s = table_first(&w->locks, hash); s != NULL;
	     s = table_next(&w->locks, hash, s)) {
		const Raftlock__LockRecord *rec = s->value;
		if (strcmp(rec->name, name) == 0)
			return rec;
	}
	Raftlock__LockRecord *rec = store_get_lock(a->fsm->store, a->txn, name);
	if (rec != NULL && rec->n_waiters > 1)
		table_put(&w->locks, hash, rec);
	else
		*own = rec;
	return rec;
}

static void walk_free(struct walk *w)
{
	for (size_t i = 0; i < w->locks.cap; i++)
		if (w->locks.slot[i].key != 0)
			raftlock__lock_record__free_unpacked(w->locks.slot[i].value, NULL);
	free(w->locks.slot);
	free(w->all_pushed.slot);
	free(w->seen.slot);
	free(w->stack);
}

/* Pushes the sessions that session `id` waits for. */
static void visit(struct apply *a, struct walk *w, uint64_t id)
{
	struct store *st = a->fsm->store;
	struct session_locks names = apply_names(a);
	if (names.indexed && w->all_pushed.n > 0) {
		/* The names are rows of their own: no need to decode the
		 * session when each of them is passed by. */
		struct names_scan scan = {.w = w};
		store_scan_session_locks(st, a->txn, id, "", find_other, &scan);
		if (!scan.other)
			return;
	}
	Raftlock__SessionRecord *sess = store_get_session(st, a->txn, id);
	if (sess == NULL)
		return;
	/* Only a queued acquire waits: the others hold, and hold on. */
	struct outcomes oc = apply_outcomes(a);
	if (outcomes_any_pending(&oc, sess)) {
		size_t n_names;
		char **name = session_locks_names(&names, sess, &n_names);
		for (size_t i = 0; i < n_names && !w->cycle; i++) {
			if (all_pushed_lock(w, name[i], strlen(name[i])))
				continue;
			Raftlock__LockRecord *own;
			const Raftlock__LockRecord *lock = read_lock(a, w, name[i], &own);
			if (lock == NULL)
				continue;
			for (size_t j = 0; j < lock->n_waiters; j++)
				if (lock->waiters[j]->session == id)
					push_edges(w, lock, j, id);
			if (own != NULL)
				raftlock__lock_record__free_unpacked(own, NULL);
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
	for (size_t i = 0; i < n; i++) { /* never finds the cycle: from == session */
		push_edges(&w, locks[i], locks[i]->n_waiters, session);
		if (!records_session_on_lock(locks[i], session))
			table_put(&w.all_pushed, name_hash(locks[i]->name, strlen(locks[i]->name)),
				  locks[i]);
	}
	while (w.n > 0 && !w.cycle)
		visit(a, &w, w.stack[--w.n]); /* each once: push() saw to that */
	walk_free(&w);
	return w.cycle;
}
