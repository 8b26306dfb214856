/*
 * store.h: the LMDB schema behind the state machine.
 *
 * Named databases in one environment:
 *   meta      "meta" -> Meta (applied index, cluster time, next_token, ...)
 *   sessions  8-byte big-endian id -> SessionRecord
 *   locks     name bytes -> LockRecord
 *   nonces    8-byte big-endian nonce -> 8-byte session id
 *   leases    8-byte big-endian session id -> deadline (8 bytes) + TTL (4)
 *             kept apart from the session record so that a renewal, the
 *             most frequent write by far, rewrites 12 bytes
 *   acls      identity bytes, a 0 byte, prefix bytes -> permissions (4 bytes
 *             BE, a mask of RAFTLOCK__ACL_PERM__*): the access rules
 *   session_locks  8-byte big-endian session id, name bytes -> nothing: the
 *             names a session holds or awaits, from feature level
 *             FEATURES_SESSION_LOCK_INDEX (session_locks.h; below it they
 *             are SessionRecord.locks and this table is empty)
 *   outcomes  8-byte big-endian session id, 8-byte big-endian seq -> Outcome:
 *             what a session's commands were answered, for retries, from
 *             feature level FEATURES_SEQ_TABLES (outcomes.h; below it
 *             they are SessionRecord.outcomes and this table is empty)
 *   multi_waits  the same key -> MultiWait: a session's queued lock sets,
 *             from the same level (multilock.h; below it
 *             SessionRecord.multi_waits)
 *   identities identity bytes -> sessions it holds (8 bytes BE), for every
 *             identity that holds one: an index derived from the sessions,
 *             so that the limit of sessions per identity costs one lookup.
 *             Not in snapshots (rebuilt when one is loaded) and not counted
 *             in store_record_bytes() (the store-full rule reads records
 *             only, as older nodes do)
 *
 * Records are protobuf-c messages. Every part of a record returned by a get
 * is malloc'd, so callers may grow or shrink its repeated fields with
 * malloc/realloc/free and must free it with the type's free_unpacked().
 *
 * The environment is opened with MDB_NOSYNC: the Raft log is the write-ahead
 * log; store_sync() makes the file durable at a clean shutdown.
 * Write transactions run on the loop thread only. A write that fails (a
 * put, a delete, a commit: map full, disk full, an I/O error) stops the
 * node with one line and exit status STORE_FAIL_EXIT (store_fail.h);
 * other errors that leave the state unknown abort it via log_fatal().
 */
#ifndef RAFTLOCK_STORE_H
#define RAFTLOCK_STORE_H

#include <lmdb.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftlock.pb-c.h"

/* Version of the layout above, recorded in Meta.format. A node finding
 * another version in a trusted LMDB rebuilds it from the raft log. */
#define STORE_FORMAT 3 /* 3: the identities index */

/* Tables (dbi values) a write transaction keeps a cursor for: LMDB
 * numbers named tables from 2, and the store has 10. */
#define STORE_WRITE_CURSORS 16

struct store {
	MDB_env *env;
	MDB_dbi meta, sessions, locks, nonces, leases, acls, identities, session_locks, outcomes,
		multi_waits;
	size_t map_size;
	uint64_t bytes;     /* store_record_bytes() as of the last commit */
	MDB_txn *write_txn; /* the write transaction open, if any */
	int64_t txn_bytes;  /* what it added to bytes so far */
	/* A cursor per table of the write transaction, opened at its first
	 * put or delete there (by dbi); LMDB closes them when it ends. */
	MDB_cursor *write_cursors[STORE_WRITE_CURSORS];
	/* store_load_error() */
	char load_error[256];
};

/* Opens (creating if needed) the environment in directory `dir` with a map
 * of map_size bytes. Returns 0 or RAFTLOCK_EIO / RAFTLOCK_EDATA with a
 * message naming the file in err. */
int store_open(struct store *s, const char *dir, size_t map_size, char *err, size_t errlen);
void store_close(struct store *s);

/* Flushes the environment to disk (mdb_env_sync with force). */
int store_sync(struct store *s);

/* Transactions. store_begin aborts the node if LMDB cannot start one.
 * One write transaction at a time. A commit that fails stops the node
 * (store_fail.h: for a full map the line names --map-size, for a full
 * disk or an I/O error what to check); nothing of the transaction is
 * kept. */
MDB_txn *store_begin(struct store *s, bool write);
void store_commit(MDB_txn *txn);
void store_abort(MDB_txn *txn);

/* store_commit() for writes whose failure the caller can undo (a restore,
 * restore.h): a commit that fails writing is handed back instead of
 * stopping the node. Returns 0, RAFTLOCK_ENOSPC (LMDB met ENOSPC or
 * EDQUOT) or RAFTLOCK_EIO (a write error, or a short write, which LMDB
 * reports so: on a full disk too); txn is freed either way, and nothing of
 * it is kept on failure. Other failures stop the node as in
 * store_commit(). */
int store_commit_room(MDB_txn *txn);

/* Whether the store's file has used more than 3/4 of its map: a reader
 * held long (a snapshot's dump, a watch's state) keeps the pages freed
 * since from being used again, and should let go. */
bool store_map_filling(const struct store *s);

/* Pages the store's file has used (it never shrinks): a reader taken when
 * it had fewer saw the file grow while it held its pages. */
uint64_t store_file_pages(const struct store *s);

/*
 * Bytes of the records held: the sum of key and value sizes over sessions,
 * locks, nonces, leases, access rules, session_locks, outcomes and
 * multi_waits (meta excluded), including the writes of the open write
 * transaction. A function of the content alone,
 * so every node that applied the same entries has the same figure (unlike LMDB's page counts, which
 * depend on the history of the B-trees): the store-full rule of the state machine compares it with
 * the replicated limit. Counted once at open, and by a load as it puts the records; kept up to date
 * by every put and delete.
 */
uint64_t store_record_bytes(const struct store *s);

/* Meta: a missing record reads as a zeroed Meta. Never fails. */
Raftlock__Meta *store_get_meta(struct store *s, MDB_txn *txn);
void store_put_meta(struct store *s, MDB_txn *txn, const Raftlock__Meta *m);

/* Returns NULL when there is no such record. */
Raftlock__SessionRecord *store_get_session(struct store *s, MDB_txn *txn, uint64_t id);
void store_put_session(struct store *s, MDB_txn *txn, const Raftlock__SessionRecord *rec);
void store_del_session(struct store *s, MDB_txn *txn, uint64_t id);

Raftlock__LockRecord *store_get_lock(struct store *s, MDB_txn *txn, const char *name);
/* Whether an acquire of `session` on lock `name` will queue behind the
 * lock's waiters, from its record's bytes (no decoding;
 * record_peek_lock_queued): false when there is no such lock, or when
 * the session holds it. */
bool store_lock_queued(struct store *s, MDB_txn *txn, const char *name, uint64_t session);
void store_put_lock(struct store *s, MDB_txn *txn, const Raftlock__LockRecord *rec);
void store_del_lock(struct store *s, MDB_txn *txn, const char *name);

/* The session_locks table: whether session id holds or awaits name; add
 * and del return whether they changed the table. */
bool store_session_lock_has(struct store *s, MDB_txn *txn, uint64_t id, const char *name);
bool store_session_lock_add(struct store *s, MDB_txn *txn, uint64_t id, const char *name);
bool store_session_lock_del(struct store *s, MDB_txn *txn, uint64_t id, const char *name);
/* Visits session id's names that start with prefix (NULL or "": all; not
 * NUL-terminated: len bytes) in name order until visit returns nonzero.
 * Nothing may write the table meanwhile. */
void store_scan_session_locks(struct store *s, MDB_txn *txn, uint64_t id, const char *prefix,
			      int (*visit)(void *arg, const char *name, size_t len), void *arg);
/* Deletes every name of session id; returns how many there were. */
size_t store_drop_session_locks(struct store *s, MDB_txn *txn, uint64_t id);

/* The outcomes table: the outcome of session id's command seq (NULL when
 * there is none; the caller frees it with free_unpacked), put (created or
 * replaced) and del (returns whether there was one). */
Raftlock__Outcome *store_get_outcome(struct store *s, MDB_txn *txn, uint64_t id, uint64_t seq);
void store_put_outcome(struct store *s, MDB_txn *txn, uint64_t id, const Raftlock__Outcome *o);
bool store_del_outcome(struct store *s, MDB_txn *txn, uint64_t id, uint64_t seq);
/* Puts o if session id has no outcome of its seq yet; returns whether it
 * did (false: there is one, left as it was). */
bool store_add_outcome(struct store *s, MDB_txn *txn, uint64_t id, const Raftlock__Outcome *o);
/* Visits session id's outcomes of from <= seq < below in seq order, each
 * decoded and borrowed for the call, deleting those drop says to (and
 * nothing else may write the table meanwhile). Returns how many it
 * deleted. */
size_t store_sweep_outcomes(struct store *s, MDB_txn *txn, uint64_t id, uint64_t from,
			    uint64_t below, bool (*drop)(void *arg, const Raftlock__Outcome *o),
			    void *arg);
/* What store_sweep_outcome_marks() reads of an outcome. */
struct outcome_marks {
	bool pending, queued; /* Outcome.pending, Outcome.queued */
};
/* store_sweep_outcomes() for a drop that needs only each outcome's marks:
 * the rows are read without decoding them (a row the look cannot read is
 * decoded, and stops the node when it does not decode either). */
size_t store_sweep_outcome_marks(struct store *s, MDB_txn *txn, uint64_t id, uint64_t from,
				 uint64_t below,
				 bool (*drop)(void *arg, const struct outcome_marks *m), void *arg);

/* The multi_waits table: session id's queued lock set of seq (NULL when
 * none; free_unpacked by the caller), put, del (whether there was one),
 * and drop (every set of the session; returns how many). */
Raftlock__MultiWait *store_get_multi_wait(struct store *s, MDB_txn *txn, uint64_t id, uint64_t seq);
void store_put_multi_wait(struct store *s, MDB_txn *txn, uint64_t id,
			  const Raftlock__MultiWait *mw);
bool store_del_multi_wait(struct store *s, MDB_txn *txn, uint64_t id, uint64_t seq);
size_t store_drop_multi_waits(struct store *s, MDB_txn *txn, uint64_t id);
/* Deletes every outcome row of session id; returns how many there were. */
size_t store_drop_outcomes(struct store *s, MDB_txn *txn, uint64_t id);

/* Returns the session id for a nonce, 0 if none. */
uint64_t store_get_nonce(struct store *s, MDB_txn *txn, uint64_t nonce);
void store_put_nonce(struct store *s, MDB_txn *txn, uint64_t nonce, uint64_t id);
void store_del_nonce(struct store *s, MDB_txn *txn, uint64_t nonce);

/* A session's lease: returns false when there is none. */
bool store_get_lease(struct store *s, MDB_txn *txn, uint64_t id, uint64_t *deadline,
		     uint32_t *ttl_ms);
void store_put_lease(struct store *s, MDB_txn *txn, uint64_t id, uint64_t deadline,
		     uint32_t ttl_ms);
void store_del_lease(struct store *s, MDB_txn *txn, uint64_t id);

/*
 * A walk over leases with one cursor, for renewals that name many
 * sessions: each find seeks afresh (ids in ascending order touch each page
 * once), and set rewrites the lease found last in place. Between a find
 * and its set nothing else may write the lease table; anything may happen
 * between a set (or a find) and the next find. Valid until the end of the
 * transaction; end it before that.
 */
struct store_lease_walk {
	struct store *store;
	MDB_cursor *cur;
	uint8_t key[8], val[12];
};

void store_lease_walk_begin(struct store *s, MDB_txn *txn, struct store_lease_walk *w);
/* The lease of id, or false when there is none. */
bool store_lease_walk_find(struct store_lease_walk *w, uint64_t id, uint64_t *deadline,
			   uint32_t *ttl_ms);
/* Moves the deadline of the lease found last (the find returned true). */
void store_lease_walk_set(struct store_lease_walk *w, uint64_t deadline);
void store_lease_walk_end(struct store_lease_walk *w);

/* Visits every lease in id order. */
void store_scan_leases(struct store *s, MDB_txn *txn,
		       void (*visit)(void *arg, uint64_t id, uint64_t deadline, uint32_t ttl_ms),
		       void *arg);

/* Access rules (auth.h). put creates or replaces the rule of (identity,
 * prefix); del returns whether there was one. */
void store_put_acl(struct store *s, MDB_txn *txn, const char *identity, const char *prefix,
		   uint32_t perms);
bool store_del_acl(struct store *s, MDB_txn *txn, const char *identity, const char *prefix);

/* Visits identity's rules in prefix order (the prefix not NUL-terminated:
 * len bytes) until visit returns nonzero. */
void store_scan_acls_of(struct store *s, MDB_txn *txn, const char *identity,
			int (*visit)(void *arg, const char *prefix, size_t len, uint32_t perms),
			void *arg);

/* The union of the permissions of identity's rules whose prefix starts
 * name (prefix "" starts every name, "" included), from one cursor walk
 * over identity's rules. */
uint32_t store_acl_perms(struct store *s, MDB_txn *txn, const char *identity, const char *name);

/* Visits rules after (after_identity, after_prefix) (both "" or NULL: from
 * the first) in (identity, prefix) order until visit returns nonzero. */
void store_scan_acls(struct store *s, MDB_txn *txn, const char *after_identity,
		     const char *after_prefix,
		     int (*visit)(void *arg, const char *identity, const char *prefix,
				  uint32_t perms),
		     void *arg);

/* The same, visiting only the rules whose prefix starts with one of
 * prefixes[0..n) (disjoint: none starts another; in name order; n = 0
 * visits nothing). It steps over the others by seeking, per identity, to
 * the next of prefixes, then to the next identity: at most n + 1 seeks an
 * identity whatever the rules it holds. */
void store_scan_acls_under(struct store *s, MDB_txn *txn, const char *after_identity,
			   const char *after_prefix, const char *const *prefixes, size_t n,
			   int (*visit)(void *arg, const char *identity, const char *prefix,
					uint32_t perms),
			   void *arg);

/* Sessions held by identity (the identities index); 0 for "" and for an
 * identity that holds none. */
uint64_t store_identity_sessions(struct store *s, MDB_txn *txn, const char *identity);

/* Moves the count of identity's sessions by +1 (a session opened) or -1 (one
 * ended); does nothing for "". The caller keeps it in step with the session
 * records: the state machine, on open and on end. */
void store_identity_sessions_add(struct store *s, MDB_txn *txn, const char *identity, int delta);

uint64_t store_count_sessions(struct store *s, MDB_txn *txn);
uint64_t store_count_locks(struct store *s, MDB_txn *txn);

/* Visits sessions with id > after in id order until visit returns nonzero.
 * The visitor owns each record it is given (free_unpacked when done). */
void store_scan_sessions(struct store *s, MDB_txn *txn, uint64_t after,
			 int (*visit)(void *arg, Raftlock__SessionRecord *rec), void *arg);

/* Changes every session want accepts with rewrite and stores it: the
 * migrations of feature_level.h. The ids are noted first, so that no
 * scan's cursor sees the records rewritten under it. */
void store_rewrite_sessions(struct store *s, MDB_txn *txn,
			    bool (*want)(const Raftlock__SessionRecord *rec),
			    void (*rewrite)(struct store *s, MDB_txn *txn,
					    Raftlock__SessionRecord *rec));

/* Visits, in name order, the locks whose stored bytes want accepts (without
 * decoding the others), until visit returns nonzero. For scans that look
 * for a few records among many (record_peek.h). */
void store_scan_locks_where(struct store *s, MDB_txn *txn, bool (*want)(const void *, size_t),
			    int (*visit)(void *arg, Raftlock__LockRecord *rec), void *arg);

/* Visits locks whose name starts with prefix and is > after (NULL or "" =
 * from the start) in name order until visit returns nonzero. */
void store_scan_locks(struct store *s, MDB_txn *txn, const char *prefix, const char *after,
		      int (*visit)(void *arg, Raftlock__LockRecord *rec), void *arg);

/*
 * Snapshot image: "RLSNAP07" once the cluster's feature level is
 * FEATURES_SEQ_TABLES, "RLSNAP06" from FEATURES_SESSION_LOCK_INDEX,
 * "RLSNAP05" from FEATURES_IMAGE_WORDS, "RLSNAP04" before ("RLSNAP04" and
 * "RLSNAP03", without access rules, still load; below level
 * FEATURES_SESSION_LOCK_INDEX the session_locks table is empty, below
 * FEATURES_SEQ_TABLES the outcomes and multi_waits tables, so the older
 * formats hold
 * every record), the applied index (8
 * bytes BE), then records
 * (1 byte database, 4 bytes key length, key, 4 bytes value length, value),
 * a 0xff end byte, and the checksum of all that precedes it (image.h: by
 * words from RLSNAP05, FNV-1a 64 before). The records are the tables'
 * bytes as they are, in key order: no decoding. store_dump() writes it
 * into a buffer from alloc() (owned by the caller), walking the tables
 * once. Returns 0 or RAFTLOCK_ENOMEM.
 */
int store_dump(struct store *s, void *(*alloc)(size_t), void **out, size_t *n);

/* The same image of the state txn sees (a read transaction from
 * store_begin()). It reads through txn and the tables' handles only, so a
 * transaction begun on the loop can be dumped on another thread (the
 * environment is MDB_NOTLS) while the loop writes; the caller ends txn.
 * stop (NULL: never) is polled as the tables are walked: once it reads
 * true the buffer goes back to release and RAFTLOCK_EUNAVAILABLE is
 * returned. Otherwise as store_dump(). */
int store_dump_at(struct store *s, MDB_txn *txn, void *(*alloc)(size_t), void (*release)(void *),
		  const atomic_bool *stop, void **out, size_t *n);

/* Where store_dump_to() writes an image, a piece at a time: it fills
 * buf[len..cap); a piece that does not fit goes to flush(w, more, n),
 * which takes buf[0..len) and then the n bytes at more, and sets len to 0.
 * flush returns 0 or a RAFTLOCK_ error, which ends the dump. */
struct image_writer {
	uint8_t *buf;
	size_t len, cap;
	int (*flush)(struct image_writer *w, const uint8_t *more, size_t n);
};

/* At least the bytes of the image of what txn sees, without walking the
 * tables (their page counts). */
uint64_t store_dump_bound(struct store *s, MDB_txn *txn);

/* The image of what txn sees, as store_dump_at() makes it, into w. stop
 * as there. Returns 0, RAFTLOCK_EUNAVAILABLE (stopped) or the error of
 * w's flush. */
int store_dump_to(struct store *s, MDB_txn *txn, const atomic_bool *stop, struct image_writer *w);

/* Whether the IMAGE_MAGIC_SIZE bytes at magic begin an image this build
 * loads. */
bool store_image_magic_known(const void *magic);

/* Whether the IMAGE_MAGIC_SIZE bytes at magic name an image format newer
 * than any this build loads (a later build's backup). */
bool store_image_magic_newer(const void *magic);

/* Reads the applied index of a snapshot image after checking its checksum.
 * RAFTLOCK_EDATA if damaged. */
int store_image_index(const void *buf, size_t n, uint64_t *index);

/* The feature level an image's state records (Meta.feature_level, as
 * stored: see features_recorded()), 0 when it has no meta record.
 * Returns 0 or RAFTLOCK_EDATA. */
int store_image_feature_level(const void *buf, size_t n, uint32_t *level);

/* Replaces the whole content with a snapshot image, in one transaction,
 * and rebuilds the identities index from its sessions.
 * Returns 0 or RAFTLOCK_EDATA (damaged image, or one with right sums
 * whose session records do not decode, or whose rows by (session, seq)
 * disagree with their sessions or with its format, or whose queued lock
 * sets disagree with the waiters on its locks (sets_check.h), or whose
 * values have not the sizes the store reads them with, or whose locks'
 * holders and waiters, leases, or rows of the session_locks table name
 * sessions it does not have (party_sessions.h), or one of whose sessions
 * has no lease, or whose nonces and sessions disagree (nonce_sessions.h):
 * store_load_error() says which; nothing changed), or RAFTLOCK_ENOMEM. A
 * write that fails (a map too small for the image, a full or failing
 * disk) is the store's failure, not the image's: store_fail, as for
 * every write. */
int store_load(struct store *s, const void *buf, size_t n);

/* store_load() up to its commit: on success the image's records are in
 * the write transaction *txn, left open for the caller to change further
 * and to end (store_commit, store_commit_room or store_abort). On failure
 * there is no transaction and nothing changed. */
int store_load_begin(struct store *s, const void *buf, size_t n, MDB_txn **txn);

/* Where store_load_from() reads an image, a piece at a time (the other
 * side of image_writer): buf[at..len) are bytes read and not yet taken;
 * the loader takes them by moving at. fill(r, want) makes at least want
 * bytes readable at buf[at..len), keeping those not yet taken (buf, at
 * and len may change: they move to the buffer's start), or every byte
 * left when the image has fewer. It returns 0, RAFTLOCK_EDATA (damaged)
 * or RAFTLOCK_ENOMEM, which end the load. */
struct image_reader {
	const uint8_t *buf;
	size_t at, len;
	int (*fill)(struct image_reader *r, size_t want);
};

/* As store_load(), from an image read through r as it is loaded, so that
 * it never needs to be whole in memory: each record is put as it comes,
 * and the image's checksum, its end and that nothing follows it are
 * checked before the transaction commits. Returns 0, RAFTLOCK_EDATA
 * (damaged image) or r's error; on an error nothing changed. */
int store_load_from(struct store *s, struct image_reader *r);

/* Why the last load refused an image whose sums were right: the
 * records that disagree (a session, a lock, a seq), or "" when it did
 * not refuse one for that. Valid until the next load. */
const char *store_load_error(const struct store *s);

/* For the checks of a load (store_check.h, sets_check.h): notes why it
 * refuses the image, printf-style, for store_load_error(). Returns
 * RAFTLOCK_EDATA. */
int store_load_refuse(struct store *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Removes every record, in one transaction. */
void store_clear(struct store *s);

#endif
