/*
 * session_locks.h: the names a session holds or awaits.
 *
 * Below feature level FEATURES_SESSION_LOCK_INDEX they are the list
 * SessionRecord.locks, so every acquire decodes and re-encodes all of
 * them with the record (3 ms an entry at 1,000 names a session). From
 * that level on they are rows of the store's session_locks table, and
 * the record keeps only their number (lock_count). The apply that records
 * the level moves every list into the table (session_locks_move), on
 * every node at the same entry.
 *
 * Functions that change the names change sess (the list, or lock_count):
 * the caller stores the record afterwards, as for any other change of it.
 * They run on the loop thread, inside the transaction given; out of
 * memory and store errors abort the node (records.h, store.h).
 */
#ifndef RAFTLOCK_SESSION_LOCKS_H
#define RAFTLOCK_SESSION_LOCKS_H

#include <stdbool.h>
#include <stddef.h>

#include "raftlock.pb-c.h"
#include "store.h"

struct session_locks {
	struct store *store;
	MDB_txn *txn;
	bool indexed; /* the table, not the list */
};

/* The names' home at the feature level recorded in m. */
struct session_locks session_locks_at(struct store *st, MDB_txn *txn, const Raftlock__Meta *m);

bool session_locks_has(const struct session_locks *sl, const Raftlock__SessionRecord *sess,
		       const char *name);
/* Adds name (nothing if the session has it already). */
void session_locks_add(const struct session_locks *sl, Raftlock__SessionRecord *sess,
		       const char *name);
/* Removes name (nothing if the session does not have it). */
void session_locks_remove(const struct session_locks *sl, Raftlock__SessionRecord *sess,
			  const char *name);
size_t session_locks_count(const struct session_locks *sl, const Raftlock__SessionRecord *sess);

/* A copy of the session's names, in a malloc'd array of *n malloc'd
 * strings that the caller frees with session_locks_free(): the names may
 * change while the caller walks it. */
char **session_locks_names(const struct session_locks *sl, const Raftlock__SessionRecord *sess,
			   size_t *n);
/* The same, of the names that start with one of prefixes[0..n_prefixes)
 * (disjoint: none starts another), by prefix: from the table, the work is
 * a seek per prefix and the names found, not the session's every name. */
char **session_locks_names_under(const struct session_locks *sl,
				 const Raftlock__SessionRecord *sess, const char *const *prefixes,
				 size_t n_prefixes, size_t *n);
void session_locks_free(char **names, size_t n);

/* The session ends: its rows go (its record goes with the caller). */
void session_locks_end(const struct session_locks *sl, const Raftlock__SessionRecord *sess);

/* Moves every session's list into the table and sets its lock_count:
 * the apply that raises the recorded level to FEATURES_SESSION_LOCK_INDEX,
 * once. */
void session_locks_move(struct store *st, MDB_txn *txn);

#endif
