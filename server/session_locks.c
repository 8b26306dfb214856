/* session_locks.c: see session_locks.h. */
#include "session_locks.h"

#include <stdlib.h>
#include <string.h>

#include "feature_level.h"
#include "grow.h"
#include "log.h"
#include "records.h"

struct session_locks session_locks_at(struct store *st, MDB_txn *txn, const Raftlock__Meta *m)
{
	return (struct session_locks){.store = st,
				      .txn = txn,
				      .indexed = features_recorded(m->feature_level) >=
						 FEATURES_SESSION_LOCK_INDEX};
}

bool session_locks_has(const struct session_locks *sl, const Raftlock__SessionRecord *sess,
		       const char *name)
{
	if (!sl->indexed)
		return records_has_name(sess, name);
	return store_session_lock_has(sl->store, sl->txn, sess->id, name);
}

void session_locks_add(const struct session_locks *sl, Raftlock__SessionRecord *sess,
		       const char *name)
{
	if (!sl->indexed)
		records_add_name(sess, name);
	else if (store_session_lock_add(sl->store, sl->txn, sess->id, name))
		sess->lock_count++;
}

void session_locks_remove(const struct session_locks *sl, Raftlock__SessionRecord *sess,
			  const char *name)
{
	if (!sl->indexed) {
		records_remove_name(sess, name);
	} else if (store_session_lock_del(sl->store, sl->txn, sess->id, name)) {
		if (sess->lock_count == 0)
			log_fatal(
				"session %llu had more names than its record counts: damaged store",
				(unsigned long long)sess->id);
		sess->lock_count--;
	}
}

size_t session_locks_count(const struct session_locks *sl, const Raftlock__SessionRecord *sess)
{
	return sl->indexed ? sess->lock_count : sess->n_locks;
}

struct names {
	char **v;
	size_t n, cap;
};

static int collect(void *arg, const char *name, size_t len)
{
	struct names *c = arg;
	char *copy = malloc(len + 1);
	if (copy == NULL)
		log_fatal("out of memory");
	memcpy(copy, name, len);
	copy[len] = '\0';
	if (grow(&c->v, &c->cap, c->n + 1, 16, sizeof *c->v) != 0)
		log_fatal("out of memory");
	c->v[c->n++] = copy;
	return 0;
}

char **session_locks_names_under(const struct session_locks *sl,
				 const Raftlock__SessionRecord *sess, const char *const *prefixes,
				 size_t n_prefixes, size_t *n)
{
	struct names c = {0};
	for (size_t p = 0; p < n_prefixes; p++) {
		if (sl->indexed) {
			store_scan_session_locks(sl->store, sl->txn, sess->id, prefixes[p], collect,
						 &c);
			continue;
		}
		size_t len = strlen(prefixes[p]);
		for (size_t i = 0; i < sess->n_locks; i++)
			if (strncmp(sess->locks[i], prefixes[p], len) == 0)
				collect(&c, sess->locks[i], strlen(sess->locks[i]));
	}
	*n = c.n;
	return c.v;
}

char **session_locks_names(const struct session_locks *sl, const Raftlock__SessionRecord *sess,
			   size_t *n)
{
	static const char *const every[] = {""};
	return session_locks_names_under(sl, sess, every, 1, n);
}

void session_locks_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

void session_locks_end(const struct session_locks *sl, const Raftlock__SessionRecord *sess)
{
	if (!sl->indexed)
		return;
	size_t n = store_drop_session_locks(sl->store, sl->txn, sess->id);
	if (n != sess->lock_count)
		log_fatal("session %llu had %zu names, its record counts %u: damaged store",
			  (unsigned long long)sess->id, n, sess->lock_count);
}

static bool listed(const Raftlock__SessionRecord *rec)
{
	return rec->n_locks > 0;
}

/* One session's list into the table. */
static void move_names(struct store *st, MDB_txn *txn, Raftlock__SessionRecord *sess)
{
	sess->lock_count = 0;
	for (size_t j = 0; j < sess->n_locks; j++) {
		if (store_session_lock_add(st, txn, sess->id, sess->locks[j]))
			sess->lock_count++;
		free(sess->locks[j]);
	}
	free(sess->locks);
	sess->locks = NULL;
	sess->n_locks = 0;
}

void session_locks_move(struct store *st, MDB_txn *txn)
{
	store_rewrite_sessions(st, txn, listed, move_names);
}
