/* store_check.c: see store_check.h. */
#include "store_check.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "byteorder.h"
#include "feature_level.h"
#include "log.h"
#include "party_sessions.h"
#include "raftlock.h"
#include "record_peek.h"
#include "secret.h"

/* As store.c's: an LMDB failure the store does not expect stops the node. */
void store_check_lmdb(int rc, const char *what)
{
	if (rc != 0)
		log_fatal("lmdb %s: %s", what, mdb_strerror(rc));
}

/* A walk over the rows of a table keyed by session (by (session, seq), or
 * the leases by session alone) alongside the sessions a load put, both in
 * session order. */
struct row_walk {
	struct store *store;
	const ProtobufCMessageDescriptor *desc; /* NULL: not decoded (leases, names) */
	struct sets_check *sets;                /* the rows are sets: each checked there */
	MDB_cursor *cur;
	MDB_val key, val;
	int rc; /* of the cursor's last move: MDB_NOTFOUND past the end */
};

static void row_walk_begin(struct store *s, MDB_txn *txn, MDB_dbi dbi,
			   const ProtobufCMessageDescriptor *desc, struct sets_check *sets,
			   struct row_walk *w)
{
	w->store = s;
	w->desc = desc;
	w->sets = sets;
	store_check_lmdb(mdb_cursor_open(txn, dbi, &w->cur), "cursor");
	w->rc = mdb_cursor_get(w->cur, &w->key, &w->val, MDB_FIRST);
}

/* The seq a row carries. */
static uint64_t row_seq(const ProtobufCMessage *m)
{
	return m->descriptor == &raftlock__outcome__descriptor
		       ? ((const Raftlock__Outcome *)m)->seq
		       : ((const Raftlock__MultiWait *)m)->seq;
}

/* Whether an outcome's answer fits what apply keeps of one: a set's
 * tokens, at most one a lock (multilock_keep_tokens()). 0 or
 * RAFTLOCK_EDATA. */
static int outcome_check(struct store *s, uint64_t id, const Raftlock__Outcome *o)
{
	if (o->result == NULL || o->result->n_tokens <= RAFTLOCK_MULTI_MAX)
		return 0;
	return store_load_refuse(
		s, "session %llu's outcome of seq %llu has %zu tokens, not at most %d",
		(unsigned long long)id, (unsigned long long)o->seq, o->result->n_tokens,
		RAFTLOCK_MULTI_MAX);
}

/* Takes the rows of session id, counting them and their pending ones;
 * false for a row before them (of no session), one that does not decode,
 * one whose seq is not its key's, or an outcome or set the checks refuse
 * (outcome_check(), sets_check_set()). */
static bool row_walk_take(struct row_walk *w, uint64_t id, uint64_t *rows, uint64_t *pending)
{
	*rows = *pending = 0;
	for (; w->rc == 0; w->rc = mdb_cursor_get(w->cur, &w->key, &w->val, MDB_NEXT)) {
		uint64_t at = be_get(w->key.mv_data, 8);
		if (at > id)
			break;
		if (at < id)
			return false;
		(*rows)++;
		if (w->desc == NULL)
			continue;
		ProtobufCMessage *m =
			protobuf_c_message_unpack(w->desc, NULL, w->val.mv_size, w->val.mv_data);
		bool ok = m != NULL && row_seq(m) == be_get((const uint8_t *)w->key.mv_data + 8, 8);
		if (ok && w->desc == &raftlock__outcome__descriptor) {
			*pending += ((const Raftlock__Outcome *)m)->pending;
			ok = outcome_check(w->store, id, (const Raftlock__Outcome *)m) == 0;
		}
		if (ok && w->sets != NULL)
			ok = sets_check_set(w->sets, id, (const Raftlock__MultiWait *)m) == 0;
		if (m != NULL)
			protobuf_c_message_free_unpacked(m, NULL);
		if (!ok)
			return false;
	}
	if (w->rc != 0 && w->rc != MDB_NOTFOUND)
		store_check_lmdb(w->rc, "cursor get");
	return true;
}

/* Ends the walk: whether no row was left (rows of no session). */
static bool row_walk_end(struct row_walk *w)
{
	bool none_left = w->rc == MDB_NOTFOUND;
	mdb_cursor_close(w->cur);
	return none_left;
}

/* A row walk's refusal at session id: a check's, which said why, or a
 * row of no session before id, or one that does not decode or whose seq
 * is not its key's. */
static int rows_refused(struct store *s, struct row_walk *w, const char *table, uint64_t id)
{
	if (s->load_error[0] != '\0')
		return RAFTLOCK_EDATA;
	if (w->desc == NULL) /* rows not decoded: one of no session */
		return store_load_refuse(s,
					 "the %s table has a row of session %llu, which the image "
					 "does not have",
					 table, (unsigned long long)be_get(w->key.mv_data, 8));
	return store_load_refuse(s,
				 "a row of the %s table at session %llu, or before it, is of no "
				 "session, does not decode or is not at its seq",
				 table, (unsigned long long)id);
}

/* The rows of a loaded session's tables: its outcomes, its sets, its
 * lease, the names it holds or awaits (session_locks.h). */
struct session_rows {
	struct row_walk outcomes, sets, leases, names;
};

/* Whether a loaded session and its rows agree: below the level of the
 * tables by (session, seq) (seq_tables false) it has no counts, and the
 * tables no rows (the loader refused them), and the outcomes and sets of
 * its lists pass their checks; from it no lists, and as many outcome
 * rows, pending ones too, as it counts (each outcome and set row is
 * checked as it is taken). Every session has a lease, every lease is a
 * session's; from the level that indexes names (session_locks.h), a
 * session has as many name rows as its record counts. 0 or
 * RAFTLOCK_EDATA. */
static int session_rows_check(struct store *s, const Raftlock__SessionRecord *rec, bool seq_tables,
			      bool names_indexed, struct session_rows *r,
			      struct sets_check *lock_sets)
{
	uint64_t rows, pending, set_rows, leases, names, unused;
	if (!row_walk_take(&r->outcomes, rec->id, &rows, &pending))
		return rows_refused(s, &r->outcomes, "outcomes", rec->id);
	if (!row_walk_take(&r->sets, rec->id, &set_rows, &unused))
		return rows_refused(s, &r->sets, "multi_waits", rec->id);
	if (!row_walk_take(&r->leases, rec->id, &leases, &unused))
		return rows_refused(s, &r->leases, "leases", rec->id);
	/* apply opens a session with its lease and ends both together: one
	 * without would never expire, holding its locks for good */
	if (leases == 0)
		return store_load_refuse(s, "session %llu has no lease",
					 (unsigned long long)rec->id);
	/* apply adds a name for a session it has and drops them all when it
	 * ends: a name of no session would stay for good */
	if (!row_walk_take(&r->names, rec->id, &names, &unused))
		return rows_refused(s, &r->names, "session_locks", rec->id);
	/* from the level that indexes them, the record counts its names:
	 * apply stops the node when the two disagree as the session ends */
	if (names_indexed && names != rec->lock_count)
		return store_load_refuse(s,
					 "session %llu: %llu rows of the session_locks table, its "
					 "record counts %u",
					 (unsigned long long)rec->id, (unsigned long long)names,
					 rec->lock_count);
	bool agree = seq_tables ? rec->n_outcomes == 0 && rec->n_multi_waits == 0 &&
					  rows == rec->outcome_count &&
					  pending == rec->pending_outcomes
				: rec->outcome_count == 0 && rec->pending_outcomes == 0 &&
					  rec->n_prune_due == 0;
	if (!agree)
		return store_load_refuse(s,
					 "session %llu: its record's outcomes and sets do not "
					 "agree with the rows of its image's format",
					 (unsigned long long)rec->id);
	for (size_t i = 0; i < rec->n_outcomes; i++) {
		int rv = outcome_check(s, rec->id, rec->outcomes[i]);
		if (rv != 0)
			return rv;
	}
	return seq_tables ? 0 : sets_check_list(lock_sets, rec);
}

/* Ends the walks of r: the table of the first with rows left after the
 * last session (rows of no session), or NULL. */
static const char *session_rows_end(struct session_rows *r)
{
	struct row_walk *walks[] = {&r->outcomes, &r->sets, &r->leases, &r->names};
	const char *tables[] = {"outcomes", "multi_waits", "leases", "session_locks"};
	const char *left = NULL;
	for (size_t i = 0; i < sizeof walks / sizeof walks[0]; i++)
		if (!row_walk_end(walks[i]) && left == NULL)
			left = tables[i];
	return left;
}

/* Whether a session record read at key may be trusted as it is: its key
 * is its id (store_get_session() finds it by its id), its secret's
 * digest is none or a SHA-256 (secret_matches() reads it with that
 * length), its identity fits in a key (the identities index). 0 or
 * RAFTLOCK_EDATA. */
static int session_check(struct store *s, const MDB_val *key, const Raftlock__SessionRecord *rec)
{
	unsigned long long id = rec->id;
	if (key->mv_size != 8 || be_get(key->mv_data, 8) != rec->id)
		return store_load_refuse(s,
					 "session %llu's record is under a key of %zu bytes "
					 "that is not its id",
					 id, key->mv_size);
	size_t digest = rec->secret_digest.len;
	if (digest != 0 && digest != SECRET_DIGEST_LEN)
		return store_load_refuse(s,
					 "session %llu's secret digest has %zu bytes, not %d (or "
					 "none)",
					 id, digest, SECRET_DIGEST_LEN);
	if (strlen(rec->identity) > (size_t)mdb_env_get_maxkeysize(s->env))
		return store_load_refuse(s, "session %llu's identity is longer than a key", id);
	return 0;
}

/* Counts every session of the sessions table in the identities index,
 * which must be empty: after a snapshot is loaded. RAFTLOCK_EDATA for a
 * session record that does not decode or session_check() refuses, or
 * whose rows disagree with it, or a row of no session, or a holder or
 * waiter of no session (party_sessions.h), a nonce that disagrees with
 * its session (nonce_sessions.h), or a queued lock set that
 * disagrees with its waiters (sets_check.h): the image's sums were
 * right, but this build never wrote it (a load refuses it whole rather
 * than stop the node, as apply would when such a session ends). One walk
 * of each table. */
static int index_sessions(struct store *s, MDB_txn *txn, bool seq_tables, bool names_indexed,
			  struct sets_check *lock_sets, struct nonce_sessions *nonces)
{
	MDB_cursor *cur;
	MDB_val key, val;
	int rv = 0;
	struct session_rows r;
	row_walk_begin(s, txn, s->outcomes, &raftlock__outcome__descriptor, NULL, &r.outcomes);
	row_walk_begin(s, txn, s->multi_waits, &raftlock__multi_wait__descriptor, lock_sets,
		       &r.sets);
	row_walk_begin(s, txn, s->leases, NULL, NULL, &r.leases);
	row_walk_begin(s, txn, s->session_locks, NULL, NULL, &r.names);
	store_check_lmdb(mdb_cursor_open(txn, s->sessions, &cur), "cursor");
	for (int rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0 && rv == 0;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		Raftlock__SessionRecord *rec =
			raftlock__session_record__unpack(NULL, val.mv_size, val.mv_data);
		if (rec == NULL)
			rv = store_load_refuse(s, "a session record does not decode");
		else if ((rv = session_check(s, &key, rec)) == 0 &&
			 (rv = party_sessions_meet(&lock_sets->parties, s, txn, rec->id)) == 0 &&
			 (rv = nonce_sessions_meet(nonces, s, rec)) == 0)
			rv = session_rows_check(s, rec, seq_tables, names_indexed, &r, lock_sets);
		if (rv == 0)
			store_identity_sessions_add(s, txn, rec->identity, +1);
		if (rec != NULL)
			raftlock__session_record__free_unpacked(rec, NULL);
	}
	mdb_cursor_close(cur);
	const char *left = session_rows_end(&r);
	if (rv == 0 && left != NULL)
		rv = store_load_refuse(s, "rows of the %s table after the last session", left);
	if (rv == 0)
		rv = party_sessions_end(&lock_sets->parties, s, txn);
	if (rv == 0)
		rv = nonce_sessions_end(nonces, s);
	return rv == 0 ? sets_check_end(lock_sets, seq_tables) : rv;
}

/* Whether a lock record is under a key that is not its name, saying so
 * into why (len bytes): apply finds a lock by its name and stores it
 * under it, so such a record is never found, and its lock's next write
 * makes a second record. Bytes that cannot be read are not (the check of
 * the parties reports them: sets_check_locks_read()). */
static bool lock_misplaced(const MDB_val *key, const MDB_val *val, char *why, size_t len)
{
	const char *name;
	size_t n;
	if (!record_peek_lock_name(val->mv_data, val->mv_size, &name, &n) ||
	    (n == key->mv_size && memcmp(name, key->mv_data, n) == 0))
		return false;
	snprintf(why, len, "the record of lock '%.*s' is under the key '%.*s', not its name",
		 (int)(n < 50 ? n : 50), name, (int)(key->mv_size < 50 ? key->mv_size : 50),
		 (const char *)key->mv_data);
	return true;
}

bool store_check_misshapen(const struct store *s, MDB_dbi dbi, const MDB_val *key,
			   const MDB_val *val, char *why, size_t len)
{
	if (dbi == s->locks)
		return lock_misplaced(key, val, why, len);
	if (dbi == s->nonces || dbi == s->leases) {
		bool nonce = dbi == s->nonces;
		size_t want = nonce ? 8 : 12;
		if (key->mv_size != 8)
			snprintf(why, len, "a key of %zu bytes in the %s table", key->mv_size,
				 nonce ? "nonces" : "leases");
		else if (val->mv_size != want)
			snprintf(why, len, "%s %llu's %s has %zu bytes, not %zu",
				 nonce ? "nonce" : "session",
				 (unsigned long long)be_get(key->mv_data, 8),
				 nonce ? "record" : "lease", val->mv_size, want);
		return key->mv_size != 8 || val->mv_size != want;
	}
	if (dbi != s->acls)
		return false;
	const char *k = key->mv_data, *zero = memchr(k, 0, key->mv_size);
	size_t ni = zero != NULL ? (size_t)(zero - k) : 0, np = key->mv_size - ni - 1;
	if (zero == NULL || ni > RAFTLOCK_NAME_MAX || np > RAFTLOCK_NAME_MAX)
		snprintf(why, len,
			 "an access rule's key of %zu bytes is not an identity and a prefix",
			 key->mv_size);
	else if (val->mv_size != 4)
		snprintf(why, len, "the access rule of '%.*s' on '%.*s' has %zu bytes, not 4",
			 (int)ni, k, (int)np, zero + 1, val->mv_size);
	return zero == NULL || ni > RAFTLOCK_NAME_MAX || np > RAFTLOCK_NAME_MAX ||
	       val->mv_size != 4;
}

int store_check_loaded(struct store *s, MDB_txn *txn, bool seq_tables, const char *misshapen,
		       struct sets_check *lock_sets, struct nonce_sessions *nonces)
{
	if (misshapen[0] != '\0')
		return store_load_refuse(s, "%s", misshapen);
	/* not store_get_meta(): it stops the node on a record that does
	 * not decode, which a load refuses instead */
	MDB_val val;
	uint32_t level = features_recorded(0); /* no meta record: none recorded */
	int rc = mdb_get(txn, s->meta, &store_meta_key, &val);
	if (rc != MDB_NOTFOUND) {
		store_check_lmdb(rc, "get");
		Raftlock__Meta *m = raftlock__meta__unpack(NULL, val.mv_size, val.mv_data);
		if (m == NULL)
			return store_load_refuse(s, "the meta record does not decode");
		level = features_recorded(m->feature_level);
		raftlock__meta__free_unpacked(m, NULL);
	}
	if ((level >= FEATURES_SEQ_TABLES) != seq_tables)
		return store_load_refuse(s, "an image of the format %s for a state of level %u",
					 seq_tables ? "RLSNAP07" : "before RLSNAP07", level);
	int rv = sets_check_locks_read(lock_sets);
	if (rv == 0)
		rv = nonce_sessions_sort(nonces);
	return rv != 0 ? rv
		       : index_sessions(s, txn, seq_tables, level >= FEATURES_SESSION_LOCK_INDEX,
					lock_sets, nonces);
}

const char *store_load_error(const struct store *s)
{
	return s->load_error;
}

int store_load_refuse(struct store *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->load_error, sizeof s->load_error, fmt, ap);
	va_end(ap);
	return RAFTLOCK_EDATA;
}
