/* sets_check.c: see sets_check.h. */
#include "sets_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "raftlock.h"
#include "record_peek.h"

void sets_check_begin(struct sets_check *c, struct store *s, MDB_txn *txn)
{
	*c = (struct sets_check){.store = s, .txn = txn};
	party_sessions_init(&c->parties);
}

void sets_check_free(struct sets_check *c)
{
	party_sessions_free(&c->parties);
}

static void note_party(void *arg, const struct record_party *p)
{
	struct sets_check *c = arg;
	c->waiters += p->waiter && p->multi;
	party_sessions_add(&c->parties, p->session);
}

void sets_check_lock(struct sets_check *c, const MDB_val *key, const MDB_val *val)
{
	if (record_peek_lock_parties(val->mv_data, val->mv_size, note_party, c) || c->unread)
		return;
	c->unread = true;
	snprintf(c->unread_name, sizeof c->unread_name, "%.*s", (int)key->mv_size,
		 (const char *)key->mv_data);
}

int sets_check_locks_read(struct sets_check *c)
{
	if (c->unread)
		return store_load_refuse(c->store, "the record of lock '%s' does not decode",
					 c->unread_name);
	return party_sessions_sort(&c->parties);
}

/* The waiters of one set on a lock, and the owner of the first whose
 * owner is not the set's. */
struct set_of {
	uint64_t session, seq, owner;
	unsigned found;
	bool other_owner;
	uint64_t their_owner;
};

static void count_set_waiter(void *arg, const struct record_party *p)
{
	struct set_of *w = arg;
	if (!p->waiter || !p->multi || p->session != w->session || p->seq != w->seq)
		return;
	w->found++;
	if (p->owner != w->owner && !w->other_owner) {
		w->other_owner = true;
		w->their_owner = p->owner;
	}
}

int sets_check_set(struct sets_check *c, uint64_t session, const Raftlock__MultiWait *mw)
{
	unsigned long long id = session, seq = mw->seq;
	if (mw->n_names == 0 || mw->n_names > RAFTLOCK_MULTI_MAX)
		return store_load_refuse(c->store,
					 "session %llu's lock set of seq %llu has %zu locks", id,
					 seq, mw->n_names);
	for (size_t i = 0; i < mw->n_names; i++) {
		const char *name = mw->names[i];
		if (i > 0 && strcmp(mw->names[i - 1], name) >= 0)
			return store_load_refuse(c->store,
						 "session %llu's lock set of seq %llu names its "
						 "locks out of order ('%s' after '%s')",
						 id, seq, name, mw->names[i - 1]);
		MDB_val key = {strlen(name), (void *)name}, val;
		struct set_of w = {.session = session, .seq = mw->seq, .owner = mw->owner};
		if (mdb_get(c->txn, c->store->locks, &key, &val) != 0)
			return store_load_refuse(c->store,
						 "session %llu's lock set of seq %llu names lock "
						 "'%s', which is not there",
						 id, seq, name);
		record_peek_lock_parties(val.mv_data, val.mv_size, count_set_waiter, &w);
		if (w.found != 1)
			return store_load_refuse(c->store,
						 "session %llu's lock set of seq %llu names lock "
						 "'%s', where it has %u waiters, not 1",
						 id, seq, name, w.found);
		/* a cancel finds a waiter by its owner, a grant gives it the lock */
		if (w.other_owner)
			return store_load_refuse(
				c->store,
				"session %llu's lock set of seq %llu, of owner %llu, "
				"names lock '%s', where its waiter is of owner %llu",
				id, seq, (unsigned long long)mw->owner, name,
				(unsigned long long)w.their_owner);
	}
	c->names += mw->n_names;
	return 0;
}

static int seq_order(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int sets_check_list(struct sets_check *c, const Raftlock__SessionRecord *rec)
{
	size_t n = rec->n_multi_waits;
	for (size_t i = 0; i < n; i++) {
		int rv = sets_check_set(c, rec->id, rec->multi_waits[i]);
		if (rv != 0)
			return rv;
	}
	if (n < 2)
		return 0;
	uint64_t *seqs = malloc(n * sizeof *seqs);
	if (seqs == NULL)
		log_fatal("out of memory");
	for (size_t i = 0; i < n; i++)
		seqs[i] = rec->multi_waits[i]->seq;
	qsort(seqs, n, sizeof *seqs, seq_order);
	int rv = 0;
	for (size_t i = 1; i < n && rv == 0; i++)
		if (seqs[i] == seqs[i - 1])
			rv = store_load_refuse(
				c->store, "session %llu has two lock sets of seq %llu",
				(unsigned long long)rec->id, (unsigned long long)seqs[i]);
	free(seqs);
	return rv;
}

/* ----------------------------------- a set waiter no set names, found -- */

/* What a set waiter's session keeps of its set. */
enum kept { KEPT_NAMING_THE_LOCK, KEPT_NOT, KEPT_NOT_NAMING_THE_LOCK };

/* A lock's set waiters, each looked for among the sets. */
struct lost {
	struct sets_check *c;
	bool seq_tables;
	const MDB_val *name; /* the lock's */
	enum kept kept;      /* of the first waiter whose set is not kept so */
	uint64_t session, seq;
};

static bool names_lock(const Raftlock__MultiWait *mw, const MDB_val *name)
{
	for (size_t i = 0; i < mw->n_names; i++)
		if (strlen(mw->names[i]) == name->mv_size &&
		    memcmp(mw->names[i], name->mv_data, name->mv_size) == 0)
			return true;
	return false;
}

static enum kept kept_as(const Raftlock__MultiWait *mw, const MDB_val *name)
{
	if (mw == NULL)
		return KEPT_NOT;
	return names_lock(mw, name) ? KEPT_NAMING_THE_LOCK : KEPT_NOT_NAMING_THE_LOCK;
}

/* How session keeps its set of seq. The records were decoded once
 * already by the load: they decode. */
static enum kept set_kept(const struct lost *l, uint64_t session, uint64_t seq)
{
	struct store *s = l->c->store;
	enum kept kept = KEPT_NOT;
	if (l->seq_tables) {
		Raftlock__MultiWait *mw = store_get_multi_wait(s, l->c->txn, session, seq);
		kept = kept_as(mw, l->name);
		if (mw != NULL)
			raftlock__multi_wait__free_unpacked(mw, NULL);
		return kept;
	}
	Raftlock__SessionRecord *rec = store_get_session(s, l->c->txn, session);
	for (size_t i = 0; rec != NULL && i < rec->n_multi_waits; i++)
		if (rec->multi_waits[i]->seq == seq)
			kept = kept_as(rec->multi_waits[i], l->name);
	if (rec != NULL)
		raftlock__session_record__free_unpacked(rec, NULL);
	return kept;
}

static void find_lost(void *arg, const struct record_party *p)
{
	struct lost *l = arg;
	if (!p->waiter || !p->multi || l->kept != KEPT_NAMING_THE_LOCK)
		return; /* not a set's, or one found already */
	l->kept = set_kept(l, p->session, p->seq);
	l->session = p->session;
	l->seq = p->seq;
}

int sets_check_end(struct sets_check *c, bool seq_tables)
{
	if (c->waiters == c->names)
		return 0;
	MDB_cursor *cur;
	MDB_val key, val;
	struct lost l = {.c = c, .seq_tables = seq_tables, .name = &key};
	int rc = mdb_cursor_open(c->txn, c->store->locks, &cur);
	if (rc != 0)
		log_fatal("lmdb cursor: %s", mdb_strerror(rc));
	for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		record_peek_lock_parties(val.mv_data, val.mv_size, find_lost, &l);
		if (l.kept != KEPT_NAMING_THE_LOCK)
			break;
	}
	mdb_cursor_close(cur);
	if (l.kept == KEPT_NAMING_THE_LOCK) /* cannot be: each name has its own waiter */
		return store_load_refuse(c->store, "%llu waiters of lock sets, %llu names of sets",
					 (unsigned long long)c->waiters,
					 (unsigned long long)c->names);
	return store_load_refuse(c->store,
				 "lock '%.*s' has a waiter of session %llu's lock set of seq %llu, "
				 "%s",
				 (int)key.mv_size, (const char *)key.mv_data,
				 (unsigned long long)l.session, (unsigned long long)l.seq,
				 l.kept == KEPT_NOT ? "which the session does not have"
						    : "which does not name the lock");
}
