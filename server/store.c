/* store.c: see store.h. */
#include "store.h"

#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "byteorder.h"
#include "feature_level.h"
#include "grow.h"
#include "image.h"
#include "log.h"
#include "nonce_sessions.h"
#include "raftlock.h"
#include "record_peek.h"
#include "sets_check.h"
#include "store_check.h"
#include "store_fail.h"

#define SNAP_MAGIC IMAGE_MAGIC_WORDS /* summed by words (image.h) */
#define SNAP_MAGIC_04 "RLSNAP04"     /* with the access rules */
#define SNAP_MAGIC_03 "RLSNAP03"     /* with the lease table: still loaded */
#define SNAP_SUM_SIZE IMAGE_SUM_SIZE
#define SNAP_END 0xff

#define SNAP_MAGIC_06 "RLSNAP06" /* with the session_locks table */
#define SNAP_MAGIC_07 "RLSNAP07" /* and the outcomes and multi_waits tables */

enum {
	DB_META = 1,
	DB_SESSIONS = 2,
	DB_LOCKS = 3,
	DB_NONCES = 4,
	DB_LEASES = 5,
	DB_ACLS = 6,
	DB_SESSION_LOCKS = 7,
	DB_OUTCOMES = 8,
	DB_MULTI_WAITS = 9
};

static void write_failed(const struct store *s, int rc, const char *what);
static void count_records(struct store *s);
static int load_records(struct store *s, struct image_reader *r, MDB_txn **out);

int store_open(struct store *s, const char *dir, size_t map_size, char *err, size_t errlen)
{
	int rc;
	MDB_txn *txn = NULL;
	memset(s, 0, sizeof *s);
	if (mkdir(dir, 0750) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return RAFTLOCK_EIO;
	}
	if ((rc = mdb_env_create(&s->env)) != 0)
		goto fail;
	mdb_env_set_maxdbs(s->env, 12);
	mdb_env_set_mapsize(s->env, map_size);
	mdb_env_set_userctx(s->env, s);
	s->map_size = map_size;
	/* Not MDB_WRITEMAP. It saves the commit's page writes (6-8% more
	 * pairs/s at 16 and 64 clients, nothing at 1: tests/bench/RESULTS.md),
	 * but a full disk then kills the node with SIGBUS instead of a commit
	 * error that names the cause, and a stray write into the map would
	 * change this member's state silently instead of faulting. */
	rc = mdb_env_open(s->env, dir, MDB_NOSYNC | MDB_NOTLS, 0640);
	if (rc != 0)
		goto fail;
	if ((rc = mdb_txn_begin(s->env, NULL, 0, &txn)) != 0)
		goto fail;
	if ((rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &s->meta)) != 0 ||
	    (rc = mdb_dbi_open(txn, "sessions", MDB_CREATE, &s->sessions)) != 0 ||
	    (rc = mdb_dbi_open(txn, "locks", MDB_CREATE, &s->locks)) != 0 ||
	    (rc = mdb_dbi_open(txn, "nonces", MDB_CREATE, &s->nonces)) != 0 ||
	    (rc = mdb_dbi_open(txn, "leases", MDB_CREATE, &s->leases)) != 0 ||
	    (rc = mdb_dbi_open(txn, "acls", MDB_CREATE, &s->acls)) != 0 ||
	    (rc = mdb_dbi_open(txn, "identities", MDB_CREATE, &s->identities)) != 0 ||
	    (rc = mdb_dbi_open(txn, "session_locks", MDB_CREATE, &s->session_locks)) != 0 ||
	    (rc = mdb_dbi_open(txn, "outcomes", MDB_CREATE, &s->outcomes)) != 0 ||
	    (rc = mdb_dbi_open(txn, "multi_waits", MDB_CREATE, &s->multi_waits)) != 0)
		goto fail;
	if ((rc = mdb_txn_commit(txn)) != 0) {
		txn = NULL;
		goto fail;
	}
	count_records(s);
	return 0;
fail:
	snprintf(err, errlen, "%s/data.mdb: %s", dir, mdb_strerror(rc));
	if (txn != NULL)
		mdb_txn_abort(txn);
	if (s->env != NULL)
		mdb_env_close(s->env);
	s->env = NULL;
	return rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH || rc == MDB_CORRUPTED
		       ? RAFTLOCK_EDATA
		       : RAFTLOCK_EIO;
}

void store_close(struct store *s)
{
	if (s->env != NULL)
		mdb_env_close(s->env);
	s->env = NULL;
}

int store_sync(struct store *s)
{
	return mdb_env_sync(s->env, 1) == 0 ? 0 : RAFTLOCK_EIO;
}

bool store_map_filling(const struct store *s)
{
	MDB_envinfo info;
	MDB_stat st;
	if (mdb_env_info(s->env, &info) != 0 || mdb_env_stat(s->env, &st) != 0)
		return false;
	return (uint64_t)(info.me_last_pgno + 1) * st.ms_psize > info.me_mapsize / 4 * 3;
}

uint64_t store_file_pages(const struct store *s)
{
	MDB_envinfo info;
	if (mdb_env_info(s->env, &info) != 0)
		return 0;
	return (uint64_t)info.me_last_pgno + 1;
}

MDB_txn *store_begin(struct store *s, bool write)
{
	MDB_txn *txn;
	store_check_lmdb(mdb_txn_begin(s->env, NULL, write ? 0 : MDB_RDONLY, &txn), "txn begin");
	if (write) {
		s->write_txn = txn;
		s->txn_bytes = 0;
		memset(s->write_cursors, 0, sizeof s->write_cursors);
	}
	return txn;
}

/* The store whose write transaction txn is, or NULL (a read). */
static struct store *writer_of(MDB_txn *txn)
{
	struct store *s = mdb_env_get_userctx(mdb_txn_env(txn));
	return s != NULL && s->write_txn == txn ? s : NULL;
}

/* The end of s's write transaction: its bytes counted when it committed. */
static void ended(struct store *s, bool committed)
{
	if (s == NULL)
		return;
	if (committed)
		s->bytes += (uint64_t)s->txn_bytes;
	s->txn_bytes = 0;
	s->write_txn = NULL;
	memset(s->write_cursors, 0, sizeof s->write_cursors); /* LMDB freed them */
}

int store_commit_room(MDB_txn *txn)
{
	struct store *s = writer_of(txn);
	int rc = mdb_txn_commit(txn);
	if (rc == ENOSPC || rc == EDQUOT || rc == EIO) {
		ended(s, false); /* mdb_txn_commit() freed it, keeping nothing */
		return rc == EIO ? RAFTLOCK_EIO : RAFTLOCK_ENOSPC;
	}
	if (rc != 0)
		write_failed(s, rc, "txn commit");
	ended(s, true);
	return 0;
}

void store_commit(MDB_txn *txn)
{
	struct store *s = writer_of(txn);
	/* On a full disk diskguard.h waits for room before an apply; a
	 * commit still fails after a race with another writer, with the
	 * guard off, or on a failing disk. Nothing of it was kept. */
	int rc = mdb_txn_commit(txn);
	if (rc != 0)
		write_failed(s, rc, "txn commit");
	ended(s, true);
}

void store_abort(MDB_txn *txn)
{
	struct store *s = writer_of(txn);
	mdb_txn_abort(txn);
	ended(s, false);
}

uint64_t store_record_bytes(const struct store *s)
{
	return s->bytes + (uint64_t)s->txn_bytes;
}

/* A write of s's transaction failed (s NULL: not a write transaction of
 * a store). The entry's transaction is not committed: this node stops
 * with its store at the entry before. A full map stops it there again
 * after a restart until its map is raised; a node whose map is at least
 * as large as the leader's never gets there: the store limit (a quarter
 * of the leader's map) refuses growth long before. */
static void write_failed(const struct store *s, int rc, const char *what)
{
	struct store_fail f = {.rc = rc, .what = what, .dir = "the data directory"};
	if (s != NULL) {
		mdb_env_get_path(s->env, &f.dir);
		f.map_size = s->map_size;
		f.record_bytes = store_record_bytes(s);
	}
	store_fail(&f);
}

/* write_failed() unless rc is 0. */
static void check_write(const struct store *s, int rc, const char *what)
{
	if (rc != 0)
		write_failed(s, rc, what);
}

/* Whether store_record_bytes() counts the records of dbi: not meta, not
 * the derived identities index. */
static bool counted(const struct store *s, MDB_dbi dbi)
{
	return dbi != s->meta && dbi != s->identities;
}

/* The size of the record at key, as store_record_bytes() counts it (key
 * and value), 0 if there is none or dbi is not counted. */
static uint64_t record_size(struct store *s, MDB_txn *txn, MDB_dbi dbi, MDB_val *key)
{
	MDB_val old;
	if (!counted(s, dbi))
		return 0;
	int rc = mdb_get(txn, dbi, key, &old);
	if (rc == MDB_NOTFOUND)
		return 0;
	store_check_lmdb(rc, "get");
	return key->mv_size + old.mv_size;
}

/* s's cursor on dbi when txn is s's write transaction, else NULL. */
static MDB_cursor *write_cursor(struct store *s, MDB_txn *txn, MDB_dbi dbi)
{
	if (txn != s->write_txn || dbi >= STORE_WRITE_CURSORS)
		return NULL;
	if (s->write_cursors[dbi] == NULL)
		store_check_lmdb(mdb_cursor_open(txn, dbi, &s->write_cursors[dbi]), "cursor");
	return s->write_cursors[dbi];
}

/* Puts cur on the record at key: its size as record_size() counts it, 0
 * and *found false when there is none. */
static uint64_t seek_record(struct store *s, MDB_cursor *cur, MDB_dbi dbi, const MDB_val *key,
			    bool *found)
{
	MDB_val k = *key, old;
	int rc = mdb_cursor_get(cur, &k, &old, MDB_SET_KEY);
	*found = rc == 0;
	if (rc == MDB_NOTFOUND)
		return 0;
	store_check_lmdb(rc, "get");
	return counted(s, dbi) ? key->mv_size + old.mv_size : 0;
}

/* A put or a delete of the write transaction finds the record once, by
 * its cursor: the size it had, and the place to write, in one search
 * (LMDB's own put searches again after a look-up by mdb_get). */
static void put_raw(struct store *s, MDB_txn *txn, MDB_dbi dbi, MDB_val *key, MDB_val *val,
		    unsigned flags, const char *what)
{
	MDB_cursor *cur = write_cursor(s, txn, dbi);
	uint64_t before;
	if (cur != NULL) {
		bool found;
		before = seek_record(s, cur, dbi, key, &found);
		check_write(s, mdb_cursor_put(cur, key, val, flags | (found ? MDB_CURRENT : 0)),
			    what);
	} else {
		before = record_size(s, txn, dbi, key);
		check_write(s, mdb_put(txn, dbi, key, val, flags), what);
	}
	if (counted(s, dbi))
		s->txn_bytes += (int64_t)(key->mv_size + val->mv_size) - (int64_t)before;
}

/* Packs a message straight into LMDB's page with MDB_RESERVE. */
static void put_msg(struct store *s, MDB_txn *txn, MDB_dbi dbi, MDB_val *key,
		    const ProtobufCMessage *msg)
{
	MDB_val val = {.mv_size = protobuf_c_message_get_packed_size(msg)};
	put_raw(s, txn, dbi, key, &val, MDB_RESERVE, "put");
	protobuf_c_message_pack(msg, val.mv_data);
}

static void *get_msg(MDB_txn *txn, MDB_dbi dbi, MDB_val *key,
		     const ProtobufCMessageDescriptor *desc)
{
	MDB_val val;
	int rc = mdb_get(txn, dbi, key, &val);
	if (rc == MDB_NOTFOUND)
		return NULL;
	store_check_lmdb(rc, "get");
	ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, val.mv_size, val.mv_data);
	if (m == NULL)
		log_fatal("lmdb record in %s does not decode: damaged store", desc->name);
	return m;
}

/* Deletes the record at key; returns whether there was one. */
static bool del_key(struct store *s, MDB_txn *txn, MDB_dbi dbi, MDB_val *key)
{
	MDB_cursor *cur = write_cursor(s, txn, dbi);
	bool found;
	uint64_t before;
	if (cur != NULL) {
		before = seek_record(s, cur, dbi, key, &found);
		if (found)
			check_write(s, mdb_cursor_del(cur, 0), "del");
	} else {
		before = record_size(s, txn, dbi, key);
		int rc = mdb_del(txn, dbi, key, NULL);
		found = rc != MDB_NOTFOUND;
		if (found)
			check_write(s, rc, "del");
	}
	s->txn_bytes -= (int64_t)before;
	return found;
}

static void del_u64(struct store *s, MDB_txn *txn, MDB_dbi dbi, uint64_t id)
{
	uint8_t k[8];
	be_put(k, id, 8);
	MDB_val key = {8, k};
	del_key(s, txn, dbi, &key);
}

MDB_val store_meta_key = {.mv_size = 4, .mv_data = "meta"};

Raftlock__Meta *store_get_meta(struct store *s, MDB_txn *txn)
{
	Raftlock__Meta *m = get_msg(txn, s->meta, &store_meta_key, &raftlock__meta__descriptor);
	if (m == NULL) {
		m = malloc(sizeof *m);
		if (m == NULL)
			log_fatal("out of memory");
		raftlock__meta__init(m);
	}
	return m;
}

void store_put_meta(struct store *s, MDB_txn *txn, const Raftlock__Meta *m)
{
	put_msg(s, txn, s->meta, &store_meta_key, &m->base);
}

Raftlock__SessionRecord *store_get_session(struct store *s, MDB_txn *txn, uint64_t id)
{
	uint8_t k[8];
	be_put(k, id, 8);
	MDB_val key = {8, k};
	return get_msg(txn, s->sessions, &key, &raftlock__session_record__descriptor);
}

void store_put_session(struct store *s, MDB_txn *txn, const Raftlock__SessionRecord *rec)
{
	uint8_t k[8];
	be_put(k, rec->id, 8);
	MDB_val key = {8, k};
	put_msg(s, txn, s->sessions, &key, &rec->base);
}

void store_del_session(struct store *s, MDB_txn *txn, uint64_t id)
{
	del_u64(s, txn, s->sessions, id);
}

Raftlock__LockRecord *store_get_lock(struct store *s, MDB_txn *txn, const char *name)
{
	MDB_val key = {strlen(name), (void *)name};
	return get_msg(txn, s->locks, &key, &raftlock__lock_record__descriptor);
}

bool store_lock_queued(struct store *s, MDB_txn *txn, const char *name, uint64_t session)
{
	MDB_val key = {strlen(name), (void *)name}, val;
	/* A client's name, not yet checked: one LMDB refuses (empty, too
	 * long) is simply not a queued lock. */
	if (mdb_get(txn, s->locks, &key, &val) != 0)
		return false;
	return record_peek_lock_queued(val.mv_data, val.mv_size, session);
}

void store_put_lock(struct store *s, MDB_txn *txn, const Raftlock__LockRecord *rec)
{
	MDB_val key = {strlen(rec->name), rec->name};
	put_msg(s, txn, s->locks, &key, &rec->base);
}

void store_del_lock(struct store *s, MDB_txn *txn, const char *name)
{
	MDB_val key = {strlen(name), (void *)name};
	del_key(s, txn, s->locks, &key);
}

/* The key of a session's name: the session id (8 bytes BE), the name. */
static MDB_val session_lock_key(uint8_t buf[8 + RAFTLOCK_NAME_MAX], uint64_t id, const char *name)
{
	size_t n = strlen(name);
	if (n > RAFTLOCK_NAME_MAX)
		log_fatal("lock name of %zu bytes in the session index", n);
	be_put(buf, id, 8);
	memcpy(buf + 8, name, n);
	return (MDB_val){8 + n, buf};
}

bool store_session_lock_has(struct store *s, MDB_txn *txn, uint64_t id, const char *name)
{
	uint8_t k[8 + RAFTLOCK_NAME_MAX];
	MDB_val key = session_lock_key(k, id, name), val;
	int rc = mdb_get(txn, s->session_locks, &key, &val);
	if (rc == MDB_NOTFOUND)
		return false;
	store_check_lmdb(rc, "get session lock");
	return true;
}

/* A row's value is empty: its size as store_record_bytes() counts it is
 * its key's, so add and del need no lookup of their own. */
bool store_session_lock_add(struct store *s, MDB_txn *txn, uint64_t id, const char *name)
{
	uint8_t k[8 + RAFTLOCK_NAME_MAX];
	MDB_val key = session_lock_key(k, id, name), val = {0, ""};
	int rc = mdb_put(txn, s->session_locks, &key, &val, MDB_NOOVERWRITE);
	if (rc == MDB_KEYEXIST)
		return false;
	check_write(s, rc, "put session lock");
	s->txn_bytes += (int64_t)key.mv_size;
	return true;
}

bool store_session_lock_del(struct store *s, MDB_txn *txn, uint64_t id, const char *name)
{
	uint8_t k[8 + RAFTLOCK_NAME_MAX];
	MDB_val key = session_lock_key(k, id, name);
	int rc = mdb_del(txn, s->session_locks, &key, NULL);
	if (rc == MDB_NOTFOUND)
		return false;
	check_write(s, rc, "del session lock");
	s->txn_bytes -= (int64_t)key.mv_size;
	return true;
}

void store_scan_session_locks(struct store *s, MDB_txn *txn, uint64_t id, const char *prefix,
			      int (*visit)(void *arg, const char *name, size_t len), void *arg)
{
	MDB_cursor *cur;
	uint8_t k[8 + RAFTLOCK_NAME_MAX];
	MDB_val from = session_lock_key(k, id, prefix ? prefix : ""), key = from, val;
	store_check_lmdb(mdb_cursor_open(txn, s->session_locks, &cur), "cursor");
	int rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
	for (; rc == 0; rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		if (key.mv_size < from.mv_size || memcmp(key.mv_data, k, from.mv_size) != 0)
			break;
		if (visit(arg, (const char *)key.mv_data + 8, key.mv_size - 8))
			break;
	}
	if (rc != MDB_NOTFOUND)
		store_check_lmdb(rc, "session locks");
	mdb_cursor_close(cur);
}

size_t store_drop_session_locks(struct store *s, MDB_txn *txn, uint64_t id)
{
	MDB_cursor *cur;
	uint8_t k[8];
	be_put(k, id, 8);
	MDB_val key = {8, k}, val;
	size_t n = 0;
	int rc;
	store_check_lmdb(mdb_cursor_open(txn, s->session_locks, &cur), "cursor");
	/* seek afresh after each delete: the simplest valid cursor */
	while ((rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE)) == 0 && key.mv_size >= 8 &&
	       memcmp(key.mv_data, k, 8) == 0) {
		s->txn_bytes -= (int64_t)(key.mv_size + val.mv_size);
		check_write(s, mdb_cursor_del(cur, 0), "del session lock");
		key = (MDB_val){8, k};
		n++;
	}
	if (rc != 0 && rc != MDB_NOTFOUND)
		store_check_lmdb(rc, "session locks");
	mdb_cursor_close(cur);
	return n;
}

/* The tables keyed by (session id, seq): outcomes and multi_waits. */
static MDB_val seq_key(uint8_t buf[16], uint64_t id, uint64_t seq)
{
	be_put(buf, id, 8);
	be_put(buf + 8, seq, 8);
	return (MDB_val){16, buf};
}

static void *seq_row_get(MDB_txn *txn, MDB_dbi dbi, uint64_t id, uint64_t seq,
			 const ProtobufCMessageDescriptor *desc)
{
	uint8_t k[16];
	MDB_val key = seq_key(k, id, seq);
	return get_msg(txn, dbi, &key, desc);
}

static void seq_row_put(struct store *s, MDB_txn *txn, MDB_dbi dbi, uint64_t id, uint64_t seq,
			const ProtobufCMessage *msg)
{
	uint8_t k[16];
	MDB_val key = seq_key(k, id, seq);
	put_msg(s, txn, dbi, &key, msg);
}

static bool seq_row_del(struct store *s, MDB_txn *txn, MDB_dbi dbi, uint64_t id, uint64_t seq)
{
	uint8_t k[16];
	MDB_val key = seq_key(k, id, seq);
	return del_key(s, txn, dbi, &key);
}

/* Visits session id's rows of from <= seq < below in seq order, deleting
 * those drop says to; returns how many it deleted. */
static size_t seq_rows_sweep(struct store *s, MDB_txn *txn, MDB_dbi dbi, uint64_t id, uint64_t from,
			     uint64_t below, bool (*drop)(void *arg, const MDB_val *val), void *arg)
{
	MDB_cursor *cur;
	uint8_t k[16];
	size_t n = 0;
	int rc = 0;
	store_check_lmdb(mdb_cursor_open(txn, dbi, &cur), "cursor");
	/* one seek a record: a delete leaves no cursor position to trust */
	for (uint64_t seq = from; seq < below;) {
		MDB_val key = seq_key(k, id, seq), val;
		rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
		if (rc != 0 || key.mv_size != 16 || memcmp(key.mv_data, k, 8) != 0)
			break;
		uint64_t at = be_get((const uint8_t *)key.mv_data + 8, 8);
		if (at >= below)
			break;
		if (drop(arg, &val)) {
			s->txn_bytes -= (int64_t)(key.mv_size + val.mv_size);
			check_write(s, mdb_cursor_del(cur, 0), "del");
			n++;
		}
		if (at == UINT64_MAX)
			break;
		seq = at + 1;
	}
	if (rc != 0 && rc != MDB_NOTFOUND)
		store_check_lmdb(rc, "cursor get");
	mdb_cursor_close(cur);
	return n;
}

Raftlock__Outcome *store_get_outcome(struct store *s, MDB_txn *txn, uint64_t id, uint64_t seq)
{
	return seq_row_get(txn, s->outcomes, id, seq, &raftlock__outcome__descriptor);
}

void store_put_outcome(struct store *s, MDB_txn *txn, uint64_t id, const Raftlock__Outcome *o)
{
	seq_row_put(s, txn, s->outcomes, id, o->seq, &o->base);
}

bool store_add_outcome(struct store *s, MDB_txn *txn, uint64_t id, const Raftlock__Outcome *o)
{
	uint8_t k[16];
	MDB_val key = seq_key(k, id, o->seq);
	MDB_val val = {.mv_size = protobuf_c_message_get_packed_size(&o->base)};
	/* one search: nothing to subtract for a row that was not there */
	int rc = mdb_put(txn, s->outcomes, &key, &val, MDB_NOOVERWRITE | MDB_RESERVE);
	if (rc == MDB_KEYEXIST)
		return false;
	check_write(s, rc, "put outcome");
	protobuf_c_message_pack(&o->base, val.mv_data);
	s->txn_bytes += (int64_t)(key.mv_size + val.mv_size);
	return true;
}

bool store_del_outcome(struct store *s, MDB_txn *txn, uint64_t id, uint64_t seq)
{
	return seq_row_del(s, txn, s->outcomes, id, seq);
}

struct outcome_sweep {
	bool (*drop)(void *arg, const Raftlock__Outcome *o);
	void *arg;
};

static bool drop_decoded_outcome(void *arg, const MDB_val *val)
{
	struct outcome_sweep *sw = arg;
	Raftlock__Outcome *o = raftlock__outcome__unpack(NULL, val->mv_size, val->mv_data);
	if (o == NULL)
		log_fatal("lmdb record in outcomes does not decode: damaged store");
	bool gone = sw->drop(sw->arg, o);
	raftlock__outcome__free_unpacked(o, NULL);
	return gone;
}

size_t store_sweep_outcomes(struct store *s, MDB_txn *txn, uint64_t id, uint64_t from,
			    uint64_t below, bool (*drop)(void *arg, const Raftlock__Outcome *o),
			    void *arg)
{
	struct outcome_sweep sw = {.drop = drop, .arg = arg};
	return seq_rows_sweep(s, txn, s->outcomes, id, from, below, drop_decoded_outcome, &sw);
}

struct marks_sweep {
	bool (*drop)(void *arg, const struct outcome_marks *m);
	void *arg;
};

static bool drop_by_marks(void *arg, const MDB_val *val)
{
	struct marks_sweep *sw = arg;
	struct outcome_marks m;
	if (!record_peek_outcome_marks(val->mv_data, val->mv_size, &m.pending, &m.queued)) {
		Raftlock__Outcome *o = raftlock__outcome__unpack(NULL, val->mv_size, val->mv_data);
		if (o == NULL)
			log_fatal("lmdb record in outcomes does not decode: damaged store");
		m = (struct outcome_marks){.pending = o->pending, .queued = o->queued};
		raftlock__outcome__free_unpacked(o, NULL);
	}
	return sw->drop(sw->arg, &m);
}

size_t store_sweep_outcome_marks(struct store *s, MDB_txn *txn, uint64_t id, uint64_t from,
				 uint64_t below,
				 bool (*drop)(void *arg, const struct outcome_marks *m), void *arg)
{
	struct marks_sweep sw = {.drop = drop, .arg = arg};
	return seq_rows_sweep(s, txn, s->outcomes, id, from, below, drop_by_marks, &sw);
}

Raftlock__MultiWait *store_get_multi_wait(struct store *s, MDB_txn *txn, uint64_t id, uint64_t seq)
{
	return seq_row_get(txn, s->multi_waits, id, seq, &raftlock__multi_wait__descriptor);
}

void store_put_multi_wait(struct store *s, MDB_txn *txn, uint64_t id, const Raftlock__MultiWait *mw)
{
	seq_row_put(s, txn, s->multi_waits, id, mw->seq, &mw->base);
}

bool store_del_multi_wait(struct store *s, MDB_txn *txn, uint64_t id, uint64_t seq)
{
	return seq_row_del(s, txn, s->multi_waits, id, seq);
}

static bool every_row(void *arg, const MDB_val *val)
{
	(void)arg, (void)val;
	return true;
}

size_t store_drop_multi_waits(struct store *s, MDB_txn *txn, uint64_t id)
{
	return seq_rows_sweep(s, txn, s->multi_waits, id, 0, UINT64_MAX, every_row, NULL);
}

size_t store_drop_outcomes(struct store *s, MDB_txn *txn, uint64_t id)
{
	return seq_rows_sweep(s, txn, s->outcomes, id, 0, UINT64_MAX, every_row, NULL);
}

uint64_t store_get_nonce(struct store *s, MDB_txn *txn, uint64_t nonce)
{
	uint8_t k[8];
	be_put(k, nonce, 8);
	MDB_val key = {8, k}, val;
	int rc = mdb_get(txn, s->nonces, &key, &val);
	if (rc == MDB_NOTFOUND)
		return 0;
	store_check_lmdb(rc, "get nonce");
	if (val.mv_size != 8)
		log_fatal("lmdb nonce record has %zu bytes: damaged store", val.mv_size);
	return be_get(val.mv_data, 8);
}

void store_put_nonce(struct store *s, MDB_txn *txn, uint64_t nonce, uint64_t id)
{
	uint8_t k[8], v[8];
	be_put(k, nonce, 8);
	be_put(v, id, 8);
	MDB_val key = {8, k}, val = {8, v};
	put_raw(s, txn, s->nonces, &key, &val, 0, "put nonce");
}

void store_del_nonce(struct store *s, MDB_txn *txn, uint64_t nonce)
{
	del_u64(s, txn, s->nonces, nonce);
}

/* A lease value: deadline (8 bytes BE), TTL (4 bytes BE). */
static void lease_decode(const uint8_t v[12], uint64_t *deadline, uint32_t *ttl_ms)
{
	*deadline = be_get(v, 8);
	*ttl_ms = (uint32_t)be_get(v + 8, 4);
}

/* The outcome of looking a lease up: false when there is none. */
static bool lease_found(int rc, const MDB_val *val, uint64_t *deadline, uint32_t *ttl_ms)
{
	if (rc == MDB_NOTFOUND)
		return false;
	store_check_lmdb(rc, "get lease");
	if (val->mv_size != 12)
		log_fatal("lmdb lease record has %zu bytes: damaged store", val->mv_size);
	lease_decode(val->mv_data, deadline, ttl_ms);
	return true;
}

bool store_get_lease(struct store *s, MDB_txn *txn, uint64_t id, uint64_t *deadline,
		     uint32_t *ttl_ms)
{
	uint8_t k[8];
	be_put(k, id, 8);
	MDB_val key = {8, k}, val;
	return lease_found(mdb_get(txn, s->leases, &key, &val), &val, deadline, ttl_ms);
}

void store_put_lease(struct store *s, MDB_txn *txn, uint64_t id, uint64_t deadline, uint32_t ttl_ms)
{
	uint8_t k[8], v[12];
	be_put(k, id, 8);
	be_put(v, deadline, 8);
	be_put(v + 8, ttl_ms, 4);
	MDB_val key = {8, k}, val = {12, v};
	put_raw(s, txn, s->leases, &key, &val, 0, "put lease");
}

void store_del_lease(struct store *s, MDB_txn *txn, uint64_t id)
{
	del_u64(s, txn, s->leases, id);
}

void store_lease_walk_begin(struct store *s, MDB_txn *txn, struct store_lease_walk *w)
{
	w->store = s;
	store_check_lmdb(mdb_cursor_open(txn, s->leases, &w->cur), "cursor");
}

bool store_lease_walk_find(struct store_lease_walk *w, uint64_t id, uint64_t *deadline,
			   uint32_t *ttl_ms)
{
	be_put(w->key, id, 8);
	MDB_val key = {8, w->key}, val;
	if (!lease_found(mdb_cursor_get(w->cur, &key, &val, MDB_SET_KEY), &val, deadline, ttl_ms))
		return false;
	memcpy(w->val, val.mv_data, 12);
	return true;
}

void store_lease_walk_set(struct store_lease_walk *w, uint64_t deadline)
{
	be_put(w->val, deadline, 8);
	MDB_val key = {8, w->key}, val = {12, w->val};
	/* in place: same key, same size */
	check_write(w->store, mdb_cursor_put(w->cur, &key, &val, MDB_CURRENT), "put lease");
}

void store_lease_walk_end(struct store_lease_walk *w)
{
	mdb_cursor_close(w->cur);
	w->cur = NULL;
}

void store_scan_leases(struct store *s, MDB_txn *txn,
		       void (*visit)(void *arg, uint64_t id, uint64_t deadline, uint32_t ttl_ms),
		       void *arg)
{
	MDB_cursor *cur;
	MDB_val key, val;
	store_check_lmdb(mdb_cursor_open(txn, s->leases, &cur), "cursor");
	for (int rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		if (key.mv_size != 8 || val.mv_size != 12)
			log_fatal("lmdb lease record is damaged");
		uint64_t deadline;
		uint32_t ttl;
		lease_decode(val.mv_data, &deadline, &ttl);
		visit(arg, be_get(key.mv_data, 8), deadline, ttl);
	}
	mdb_cursor_close(cur);
}

/* ---------------------------------------------------------- access rules -- */

/* The key of a rule: identity, a 0 byte, prefix. Both are at most
 * RAFTLOCK_NAME_MAX bytes (codec_check_rule). */
static MDB_val acl_key(uint8_t *buf, const char *identity, const char *prefix)
{
	size_t ni = strlen(identity), np = strlen(prefix);
	memcpy(buf, identity, ni);
	buf[ni] = 0;
	memcpy(buf + ni + 1, prefix, np);
	return (MDB_val){ni + 1 + np, buf};
}

#define ACL_KEY_MAX (2 * RAFTLOCK_NAME_MAX + 1)

void store_put_acl(struct store *s, MDB_txn *txn, const char *identity, const char *prefix,
		   uint32_t perms)
{
	uint8_t k[ACL_KEY_MAX], v[4];
	MDB_val key = acl_key(k, identity, prefix);
	be_put(v, perms, 4);
	MDB_val val = {4, v};
	put_raw(s, txn, s->acls, &key, &val, 0, "put acl");
}

bool store_del_acl(struct store *s, MDB_txn *txn, const char *identity, const char *prefix)
{
	uint8_t k[ACL_KEY_MAX];
	MDB_val key = acl_key(k, identity, prefix);
	if (record_size(s, txn, s->acls, &key) == 0)
		return false;
	del_key(s, txn, s->acls, &key);
	return true;
}

static uint32_t acl_value(const MDB_val *val)
{
	if (val->mv_size != 4)
		log_fatal("lmdb access rule has %zu bytes: damaged store", val->mv_size);
	return (uint32_t)be_get(val->mv_data, 4);
}

void store_scan_acls_of(struct store *s, MDB_txn *txn, const char *identity,
			int (*visit)(void *arg, const char *prefix, size_t len, uint32_t perms),
			void *arg)
{
	uint8_t k[ACL_KEY_MAX];
	MDB_val key = acl_key(k, identity, ""), val;
	size_t head = key.mv_size;
	MDB_cursor *cur;
	store_check_lmdb(mdb_cursor_open(txn, s->acls, &cur), "cursor");
	for (int rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		if (key.mv_size < head || memcmp(key.mv_data, k, head) != 0)
			break; /* past identity's rules */
		if (visit(arg, (const char *)key.mv_data + head, key.mv_size - head,
			  acl_value(&val)))
			break;
	}
	mdb_cursor_close(cur);
}

struct acl_perms {
	const char *name;
	size_t len;
	uint32_t perms;
};

static int add_perms(void *arg, const char *prefix, size_t len, uint32_t perms)
{
	struct acl_perms *p = arg;
	if (len <= p->len && memcmp(prefix, p->name, len) == 0)
		p->perms |= perms;
	return 0;
}

uint32_t store_acl_perms(struct store *s, MDB_txn *txn, const char *identity, const char *name)
{
	struct acl_perms p = {name, strlen(name), 0};
	store_scan_acls_of(s, txn, identity, add_perms, &p);
	return p.perms;
}

/* Compares bytes a[0..na) with b[0..nb) in LMDB's order of keys. */
static int bytes_cmp(const void *a, size_t na, const void *b, size_t nb)
{
	int c = memcmp(a, b, na < nb ? na : nb);
	return c != 0 ? c : (na > nb) - (na < nb);
}

/* Puts cur on the first rule whose key is at least k[0..n). */
static int acl_seek(MDB_cursor *cur, const uint8_t *k, size_t n, MDB_val *key, MDB_val *val)
{
	*key = (MDB_val){n, (void *)k};
	return mdb_cursor_get(cur, key, val, MDB_SET_RANGE);
}

/* Where a walk over prefixes[0..n) (disjoint, in order) goes from rule
 * (identity, prefix), a rule under none of them: the first of them after
 * prefix within identity's rules, or else the next identity. The key is
 * written to k (room for ACL_KEY_MAX bytes); returns its size. */
static size_t acl_skip(uint8_t *k, const uint8_t *identity, size_t ni, const uint8_t *prefix,
		       size_t np, const char *const *prefixes, size_t n)
{
	memcpy(k, identity, ni);
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(prefixes[i]);
		if (bytes_cmp(prefixes[i], len, prefix, np) > 0) {
			k[ni] = 0;
			memcpy(k + ni + 1, prefixes[i], len);
			return ni + 1 + len;
		}
	}
	/* Every key of identity is identity, 0, ...: identity, 1 follows
	 * them all and precedes the next identity's. */
	k[ni] = 1;
	return ni + 1;
}

/* Whether one of prefixes[0..n) starts p[0..np). */
static bool acl_under(const uint8_t *p, size_t np, const char *const *prefixes, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(prefixes[i]);
		if (len <= np && memcmp(p, prefixes[i], len) == 0)
			return true;
	}
	return false;
}

void store_scan_acls_under(struct store *s, MDB_txn *txn, const char *after_identity,
			   const char *after_prefix, const char *const *prefixes, size_t n,
			   int (*visit)(void *arg, const char *identity, const char *prefix,
					uint32_t perms),
			   void *arg)
{
	uint8_t k[ACL_KEY_MAX];
	char ident[RAFTLOCK_NAME_MAX + 1], prefix[RAFTLOCK_NAME_MAX + 1];
	MDB_val key, val;
	MDB_cursor *cur;
	int rc;
	if (n == 0)
		return;
	store_check_lmdb(mdb_cursor_open(txn, s->acls, &cur), "cursor");
	if (after_identity != NULL && after_identity[0] != '\0') {
		MDB_val from = acl_key(k, after_identity, after_prefix ? after_prefix : "");
		rc = acl_seek(cur, k, from.mv_size, &key, &val);
		if (rc == 0 && bytes_cmp(key.mv_data, key.mv_size, k, from.mv_size) == 0)
			rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
	} else {
		rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST);
	}
	while (rc == 0) {
		const uint8_t *zero = memchr(key.mv_data, 0, key.mv_size);
		size_t ni = zero ? (size_t)(zero - (const uint8_t *)key.mv_data) : 0;
		size_t np = key.mv_size - ni - 1;
		if (zero == NULL || ni > RAFTLOCK_NAME_MAX || np > RAFTLOCK_NAME_MAX)
			log_fatal("lmdb access rule key is damaged");
		if (!acl_under(zero + 1, np, prefixes, n)) {
			/* Under none: on to where the next one may be. */
			size_t len = acl_skip(k, key.mv_data, ni, zero + 1, np, prefixes, n);
			rc = acl_seek(cur, k, len, &key, &val);
			continue;
		}
		memcpy(ident, key.mv_data, ni);
		ident[ni] = '\0';
		memcpy(prefix, zero + 1, np);
		prefix[np] = '\0';
		if (visit(arg, ident, prefix, acl_value(&val)))
			break;
		rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
	}
	mdb_cursor_close(cur);
}

void store_scan_acls(struct store *s, MDB_txn *txn, const char *after_identity,
		     const char *after_prefix,
		     int (*visit)(void *arg, const char *identity, const char *prefix,
				  uint32_t perms),
		     void *arg)
{
	static const char *const every[] = {""};
	store_scan_acls_under(s, txn, after_identity, after_prefix, every, 1, visit, arg);
}

uint64_t store_identity_sessions(struct store *s, MDB_txn *txn, const char *identity)
{
	MDB_val key = {strlen(identity), (void *)identity}, val;
	if (key.mv_size == 0)
		return 0;
	int rc = mdb_get(txn, s->identities, &key, &val);
	if (rc == MDB_NOTFOUND)
		return 0;
	store_check_lmdb(rc, "get identity");
	if (val.mv_size != 8)
		log_fatal("identities index entry of %zu bytes: damaged store", val.mv_size);
	return be_get(val.mv_data, 8);
}

void store_identity_sessions_add(struct store *s, MDB_txn *txn, const char *identity, int delta)
{
	MDB_val key = {strlen(identity), (void *)identity};
	if (key.mv_size == 0)
		return;
	uint64_t n = store_identity_sessions(s, txn, identity);
	if (delta < 0 && n < (uint64_t)-delta)
		log_fatal("identity '%s' ends more sessions than it held: damaged store", identity);
	n += (uint64_t)(int64_t)delta;
	if (n == 0) {
		del_key(s, txn, s->identities, &key);
		return;
	}
	uint8_t v[8];
	be_put(v, n, 8);
	MDB_val val = {8, v};
	put_raw(s, txn, s->identities, &key, &val, 0, "put identity");
}

static uint64_t count(MDB_txn *txn, MDB_dbi dbi)
{
	MDB_stat st;
	store_check_lmdb(mdb_stat(txn, dbi, &st), "stat");
	return st.ms_entries;
}

uint64_t store_count_sessions(struct store *s, MDB_txn *txn)
{
	return count(txn, s->sessions);
}

uint64_t store_count_locks(struct store *s, MDB_txn *txn)
{
	return count(txn, s->locks);
}

void store_scan_sessions(struct store *s, MDB_txn *txn, uint64_t after,
			 int (*visit)(void *arg, Raftlock__SessionRecord *rec), void *arg)
{
	MDB_cursor *cur;
	uint8_t k[8];
	be_put(k, after + 1, 8);
	MDB_val key = {8, k}, val;
	if (after == UINT64_MAX)
		return;
	store_check_lmdb(mdb_cursor_open(txn, s->sessions, &cur), "cursor");
	int rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
	for (; rc == 0; rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		Raftlock__SessionRecord *rec =
			raftlock__session_record__unpack(NULL, val.mv_size, val.mv_data);
		if (rec == NULL)
			log_fatal("session record does not decode: damaged store");
		if (visit(arg, rec))
			break;
	}
	mdb_cursor_close(cur);
}

struct session_ids {
	bool (*want)(const Raftlock__SessionRecord *rec);
	uint64_t *ids;
	size_t n, cap;
};

static int note_session_id(void *arg, Raftlock__SessionRecord *rec)
{
	struct session_ids *c = arg;
	if (c->want(rec)) {
		if (grow(&c->ids, &c->cap, c->n + 1, 64, sizeof *c->ids) != 0)
			log_fatal("out of memory");
		c->ids[c->n++] = rec->id;
	}
	raftlock__session_record__free_unpacked(rec, NULL);
	return 0;
}

void store_rewrite_sessions(struct store *s, MDB_txn *txn,
			    bool (*want)(const Raftlock__SessionRecord *rec),
			    void (*rewrite)(struct store *s, MDB_txn *txn,
					    Raftlock__SessionRecord *rec))
{
	struct session_ids c = {.want = want};
	store_scan_sessions(s, txn, 0, note_session_id, &c);
	for (size_t i = 0; i < c.n; i++) {
		Raftlock__SessionRecord *rec = store_get_session(s, txn, c.ids[i]);
		rewrite(s, txn, rec);
		store_put_session(s, txn, rec);
		raftlock__session_record__free_unpacked(rec, NULL);
	}
	free(c.ids);
}

/* Decodes a stored lock record and hands it to visit; visit's answer. */
static int visit_lock(const MDB_val *val, int (*visit)(void *arg, Raftlock__LockRecord *rec),
		      void *arg)
{
	Raftlock__LockRecord *rec = raftlock__lock_record__unpack(NULL, val->mv_size, val->mv_data);
	if (rec == NULL)
		log_fatal("lock record does not decode: damaged store");
	return visit(arg, rec);
}

void store_scan_locks(struct store *s, MDB_txn *txn, const char *prefix, const char *after,
		      int (*visit)(void *arg, Raftlock__LockRecord *rec), void *arg)
{
	MDB_cursor *cur;
	size_t plen = prefix ? strlen(prefix) : 0;
	MDB_val key, val;
	int rc;
	store_check_lmdb(mdb_cursor_open(txn, s->locks, &cur), "cursor");
	if (after != NULL && after[0] != '\0' && (plen == 0 || strncmp(after, prefix, plen) >= 0)) {
		key.mv_size = strlen(after);
		key.mv_data = (void *)after;
		rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
		if (rc == 0 && key.mv_size == strlen(after) &&
		    memcmp(key.mv_data, after, key.mv_size) == 0)
			rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
	} else if (plen > 0) {
		key.mv_size = plen;
		key.mv_data = (void *)prefix;
		rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
	} else {
		rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST);
	}
	for (; rc == 0; rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		if (plen > 0 && (key.mv_size < plen || memcmp(key.mv_data, prefix, plen) != 0))
			break;
		if (visit_lock(&val, visit, arg))
			break;
	}
	mdb_cursor_close(cur);
}

void store_scan_locks_where(struct store *s, MDB_txn *txn, bool (*want)(const void *, size_t),
			    int (*visit)(void *arg, Raftlock__LockRecord *rec), void *arg)
{
	MDB_cursor *cur;
	MDB_val key, val;
	store_check_lmdb(mdb_cursor_open(txn, s->locks, &cur), "cursor");
	for (int rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		if (!want(val.mv_data, val.mv_size))
			continue;
		if (visit_lock(&val, visit, arg))
			break;
	}
	mdb_cursor_close(cur);
}

/* ------------------------------------------------------------ snapshots -- */

/* At least the bytes dump_dbi() writes for dbi, without walking it: every
 * key and value lies in a leaf or an overflow page (no table is
 * MDB_DUPSORT), and each record adds a tag and two lengths. */
static uint64_t dbi_bytes_bound(MDB_txn *txn, MDB_dbi dbi)
{
	MDB_stat st;
	store_check_lmdb(mdb_stat(txn, dbi, &st), "stat");
	return (uint64_t)(st.ms_leaf_pages + st.ms_overflow_pages) * st.ms_psize +
	       (uint64_t)st.ms_entries * 9;
}

/* A dump on its way to a writer: what of the writer's buffer is summed. */
struct dump {
	struct image_writer *w;
	struct image_sum sum;
	size_t summed; /* w->buf[0..summed) is in sum */
	bool closing;  /* the checksum itself: not summed */
};

/* n bytes at p into the image: into the writer's buffer while they fit,
 * else through its flush with what the buffer holds. */
static int put(struct dump *d, const void *p, size_t n)
{
	struct image_writer *w = d->w;
	if (w->cap - w->len >= n) {
		memcpy(w->buf + w->len, p, n);
		w->len += n;
		return 0;
	}
	if (!d->closing) {
		image_sum_add(&d->sum, w->buf + d->summed, w->len - d->summed);
		image_sum_add(&d->sum, p, n);
	}
	d->summed = 0;
	return w->flush(w, p, n);
}

/* Writes the records of dbi; RAFTLOCK_EUNAVAILABLE once *stop turned true,
 * or the writer's error. */
static int dump_dbi(MDB_txn *txn, MDB_dbi dbi, uint8_t tag, struct dump *d, const atomic_bool *stop)
{
	MDB_cursor *cur;
	MDB_val key, val;
	unsigned n = 0;
	int rv = 0;
	store_check_lmdb(mdb_cursor_open(txn, dbi, &cur), "cursor");
	for (int rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0 && rv == 0;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		if (stop != NULL && ++n % 4096 == 0 && atomic_load(stop)) {
			rv = RAFTLOCK_EUNAVAILABLE;
			break;
		}
		uint8_t head[9];
		head[0] = tag;
		be_put(head + 1, key.mv_size, 4);
		be_put(head + 5, val.mv_size, 4);
		if ((rv = put(d, head, 5)) == 0 && (rv = put(d, key.mv_data, key.mv_size)) == 0 &&
		    (rv = put(d, head + 5, 4)) == 0)
			rv = put(d, val.mv_data, val.mv_size);
	}
	mdb_cursor_close(cur);
	return rv;
}

/* The tables an image holds, in its order, and each one's tag. */
#define IMAGE_TABLES 9
static const uint8_t image_tags[IMAGE_TABLES] = {DB_META,          DB_SESSIONS, DB_LOCKS,
						 DB_NONCES,        DB_LEASES,   DB_ACLS,
						 DB_SESSION_LOCKS, DB_OUTCOMES, DB_MULTI_WAITS};

static void image_tables(const struct store *s, MDB_dbi dbis[IMAGE_TABLES])
{
	const MDB_dbi all[IMAGE_TABLES] = {s->meta,          s->sessions, s->locks,
					   s->nonces,        s->leases,   s->acls,
					   s->session_locks, s->outcomes, s->multi_waits};
	memcpy(dbis, all, sizeof all);
}

uint64_t store_dump_bound(struct store *s, MDB_txn *txn)
{
	MDB_dbi dbis[IMAGE_TABLES];
	image_tables(s, dbis);
	uint64_t total = 16 + 1 + SNAP_SUM_SIZE;
	for (int i = 0; i < IMAGE_TABLES; i++)
		total += dbi_bytes_bound(txn, dbis[i]);
	return total;
}

int store_dump_to(struct store *s, MDB_txn *txn, const atomic_bool *stop, struct image_writer *w)
{
	MDB_dbi dbis[IMAGE_TABLES];
	image_tables(s, dbis);
	struct dump d = {.w = w, .summed = w->len}; /* what w held before is not the image's */
	image_sum_begin(&d.sum);
	Raftlock__Meta *m = store_get_meta(s, txn);
	/* Each format once every voter can read it (feature_level.h): the
	 * faster sum, then the session_locks table, then the outcomes and
	 * multi_waits tables (each empty below its level, so the older format
	 * holds every byte there). */
	uint32_t level = features_recorded(m->feature_level);
	bool names = level >= FEATURES_SESSION_LOCK_INDEX;
	bool seq_tables = level >= FEATURES_SEQ_TABLES;
	uint8_t head[16];
	memcpy(head,
	       seq_tables                      ? SNAP_MAGIC_07
	       : names                         ? SNAP_MAGIC_06
	       : level >= FEATURES_IMAGE_WORDS ? SNAP_MAGIC
					       : SNAP_MAGIC_04,
	       8);
	be_put(head + 8, m->applied_index, 8);
	raftlock__meta__free_unpacked(m, NULL);
	int rv = put(&d, head, sizeof head);
	for (int i = 0; i < IMAGE_TABLES && rv == 0; i++) {
		if ((names || image_tags[i] != DB_SESSION_LOCKS) &&
		    (seq_tables ||
		     (image_tags[i] != DB_OUTCOMES && image_tags[i] != DB_MULTI_WAITS)))
			rv = dump_dbi(txn, dbis[i], image_tags[i], &d, stop);
	}
	uint8_t end = SNAP_END;
	if (rv == 0)
		rv = put(&d, &end, 1);
	if (rv != 0)
		return rv;
	image_sum_add(&d.sum, w->buf + d.summed, w->len - d.summed);
	d.summed = w->len;
	d.closing = true;
	uint8_t sum[SNAP_SUM_SIZE];
	be_put(sum, image_sum_end(&d.sum), 8);
	return put(&d, sum, sizeof sum);
}

/* The writer of store_dump_at: one buffer, sized so that it never
 * flushes. */
static int flush_never(struct image_writer *w, const uint8_t *more, size_t n)
{
	(void)w, (void)more, (void)n;
	return RAFTLOCK_EINTERNAL; /* dbi_bytes_bound() was wrong */
}

int store_dump_at(struct store *s, MDB_txn *txn, void *(*alloc)(size_t), void (*release)(void *),
		  const atomic_bool *stop, void **out, size_t *n)
{
	/* One walk, into a buffer sized from the tables' page counts: the
	 * pages past the image's end are never touched, so they cost
	 * address space, not memory. */
	size_t total = (size_t)store_dump_bound(s, txn);
	uint8_t *buf = alloc(total);
	if (buf == NULL)
		return RAFTLOCK_ENOMEM;
	struct image_writer w = {.buf = buf, .cap = total, .flush = flush_never};
	int rv = store_dump_to(s, txn, stop, &w);
	if (rv != 0) {
		release(buf);
		return rv;
	}
	*out = buf;
	*n = w.len;
	return 0;
}

int store_dump(struct store *s, void *(*alloc)(size_t), void **out, size_t *n)
{
	MDB_txn *txn = store_begin(s, false);
	int rv = store_dump_at(s, txn, alloc, free, NULL, out, n); /* never stopped: no free */
	store_abort(txn);
	return rv;
}

bool store_image_magic_known(const void *magic)
{
	return memcmp(magic, SNAP_MAGIC_07, 8) == 0 || memcmp(magic, SNAP_MAGIC_06, 8) == 0 ||
	       memcmp(magic, SNAP_MAGIC, 8) == 0 || memcmp(magic, SNAP_MAGIC_04, 8) == 0 ||
	       memcmp(magic, SNAP_MAGIC_03, 8) == 0;
}

bool store_image_magic_newer(const void *magic)
{
	/* "RLSNAPnn": the two digits grow with each format */
	const char *m = magic;
	return memcmp(m, SNAP_MAGIC_07, 6) == 0 && isdigit((unsigned char)m[6]) &&
	       isdigit((unsigned char)m[7]) && memcmp(m, SNAP_MAGIC_07, 8) > 0;
}

int store_image_index(const void *data, size_t n, uint64_t *index)
{
	const uint8_t *buf = data;
	if (!image_sum_ok(buf, n) || !store_image_magic_known(buf))
		return RAFTLOCK_EDATA;
	*index = be_get(buf + 8, 8);
	return 0;
}

/* A reader of an image whole in memory: there is nothing more to fill. */
static int fill_none(struct image_reader *r, size_t want)
{
	(void)r, (void)want;
	return 0;
}

/* The records of an image read through a reader, each a tag, a key and a
 * value, and the image's checksum as they go. */
struct image_records {
	struct image_reader *r;
	struct image_sum sum;
	size_t summed; /* r->buf[summed..at) is taken and not yet summed */
};

/* Makes n bytes readable at the reader's position: 0, RAFTLOCK_EDATA when
 * the image ends before (cut short) or the reader's error. What was taken
 * goes into the sum first, since the reader may move it. */
static int records_need(struct image_records *rs, size_t n)
{
	struct image_reader *r = rs->r;
	if (r->len - r->at >= n)
		return 0;
	if (r->at > rs->summed)
		image_sum_add(&rs->sum, r->buf + rs->summed, r->at - rs->summed);
	int rv = r->fill(r, n);
	rs->summed = r->at;
	if (rv != 0)
		return rv;
	return r->len - r->at >= n ? 0 : RAFTLOCK_EDATA;
}

/* Takes the image's header (its magic, copied to magic, must be known;
 * then the applied index). */
static int image_records_begin(struct image_records *rs, struct image_reader *r,
			       uint8_t magic[IMAGE_MAGIC_SIZE])
{
	*rs = (struct image_records){.r = r, .summed = r->at};
	image_sum_begin(&rs->sum);
	int rv = records_need(rs, 16);
	if (rv != 0)
		return rv;
	const uint8_t *head = r->buf + r->at;
	if (!store_image_magic_known(head))
		return RAFTLOCK_EDATA;
	memcpy(magic, head, IMAGE_MAGIC_SIZE);
	r->at += 16;
	return 0;
}

/* The next record: 1 (key and val point into the reader's buffer until
 * the next call), 0 at the end byte (taken), or an error (a record cut
 * short: RAFTLOCK_EDATA). */
_Static_assert(SIZE_MAX >= UINT64_MAX, "a record's lengths (4 bytes each) add up in size_t");

static int image_records_next(struct image_records *rs, uint8_t *tag, MDB_val *key, MDB_val *val)
{
	struct image_reader *r = rs->r;
	int rv = records_need(rs, 1);
	if (rv != 0)
		return rv;
	if (r->buf[r->at] == SNAP_END) {
		r->at++;
		return 0;
	}
	if ((rv = records_need(rs, 5)) != 0)
		return rv;
	size_t klen = (size_t)be_get(r->buf + r->at + 1, 4);
	if ((rv = records_need(rs, 9 + klen)) != 0)
		return rv;
	size_t vlen = (size_t)be_get(r->buf + r->at + 5 + klen, 4);
	if ((rv = records_need(rs, 9 + klen + vlen)) != 0)
		return rv;
	const uint8_t *p = r->buf + r->at;
	*tag = p[0];
	*key = (MDB_val){.mv_size = klen, .mv_data = (void *)(p + 5)};
	*val = (MDB_val){.mv_size = vlen, .mv_data = (void *)(p + 9 + klen)};
	r->at += 9 + klen + vlen;
	return 1;
}

/* After the end byte: the checksum of everything before it, then nothing
 * more. Returns 0, RAFTLOCK_EDATA or the reader's error. */
static int image_records_end(struct image_records *rs)
{
	struct image_reader *r = rs->r;
	int rv = records_need(rs, SNAP_SUM_SIZE);
	if (rv != 0)
		return rv;
	image_sum_add(&rs->sum, r->buf + rs->summed, r->at - rs->summed);
	uint64_t stored = be_get(r->buf + r->at, SNAP_SUM_SIZE);
	r->at += SNAP_SUM_SIZE;
	rs->summed = r->at;
	if (stored != image_sum_end(&rs->sum))
		return RAFTLOCK_EDATA;
	if ((rv = r->fill(r, 1)) != 0)
		return rv;
	return r->len == r->at ? 0 : RAFTLOCK_EDATA;
}

int store_image_feature_level(const void *data, size_t n, uint32_t *level)
{
	uint64_t index;
	*level = 0;
	if (store_image_index(data, n, &index) != 0)
		return RAFTLOCK_EDATA;
	struct image_reader r = {.buf = data, .len = n, .fill = fill_none};
	struct image_records rs;
	uint8_t magic[IMAGE_MAGIC_SIZE];
	int rv = image_records_begin(&rs, &r, magic);
	uint8_t tag;
	MDB_val key, val;
	while (rv == 0 && (rv = image_records_next(&rs, &tag, &key, &val)) == 1) {
		rv = 0;
		if (tag != DB_META)
			continue;
		Raftlock__Meta *m = raftlock__meta__unpack(NULL, val.mv_size, val.mv_data);
		if (m == NULL)
			return RAFTLOCK_EDATA;
		*level = m->feature_level;
		raftlock__meta__free_unpacked(m, NULL);
		return 0;
	}
	return rv;
}

static void drop_all(struct store *s, MDB_txn *txn)
{
	check_write(s, mdb_drop(txn, s->meta, 0), "drop");
	check_write(s, mdb_drop(txn, s->sessions, 0), "drop");
	check_write(s, mdb_drop(txn, s->locks, 0), "drop");
	check_write(s, mdb_drop(txn, s->nonces, 0), "drop");
	check_write(s, mdb_drop(txn, s->leases, 0), "drop");
	check_write(s, mdb_drop(txn, s->acls, 0), "drop");
	check_write(s, mdb_drop(txn, s->identities, 0), "drop");
	check_write(s, mdb_drop(txn, s->session_locks, 0), "drop");
	check_write(s, mdb_drop(txn, s->outcomes, 0), "drop");
	check_write(s, mdb_drop(txn, s->multi_waits, 0), "drop");
}

int store_load(struct store *s, const void *data, size_t n)
{
	struct image_reader r = {.buf = data, .len = n, .fill = fill_none};
	return store_load_from(s, &r);
}

int store_load_from(struct store *s, struct image_reader *r)
{
	MDB_txn *txn;
	int rv = load_records(s, r, &txn);
	if (rv == 0)
		store_commit(txn);
	return rv;
}

int store_load_begin(struct store *s, const void *data, size_t n, MDB_txn **txn)
{
	struct image_reader r = {.buf = data, .len = n, .fill = fill_none};
	return load_records(s, &r, txn);
}

/* store_load_from() up to its commit: on success the records are in the
 * write transaction *out. */
static int load_records(struct store *s, struct image_reader *r, MDB_txn **out)
{
	struct image_records rs;
	uint8_t magic[IMAGE_MAGIC_SIZE];
	s->load_error[0] = '\0';
	int rv = image_records_begin(&rs, r, magic);
	if (rv != 0)
		return rv;
	/* the formats with the tables */
	bool seq_tables = memcmp(magic, SNAP_MAGIC_07, 8) == 0;
	bool names = seq_tables || memcmp(magic, SNAP_MAGIC_06, 8) == 0;
	MDB_txn *txn = store_begin(s, true);
	drop_all(s, txn);
	/* store_record_bytes() from here: the records loaded so far, counted
	 * as they are put rather than by a second walk of every table (the
	 * commit makes it those of the image; a full map's line names it) */
	s->txn_bytes = -(int64_t)s->bytes;
	struct sets_check lock_sets;
	sets_check_begin(&lock_sets, s, txn);
	struct nonce_sessions nonces;
	nonce_sessions_init(&nonces);
	/* the first record of the wrong sizes, reported once the sums are
	 * right (damage is theirs to report) */
	char misshapen[160] = "";
	uint8_t tag;
	MDB_val key, val;
	/* A cursor a table, left at its last record: each append starts
	 * there, not with a search from the root through the dirty pages.
	 * The transaction's end closes them. */
	MDB_cursor *appender[DB_MULTI_WAITS + 1] = {0};
	while ((rv = image_records_next(&rs, &tag, &key, &val)) == 1) {
		MDB_dbi dbi;
		switch (tag) {
		case DB_META: dbi = s->meta; break;
		case DB_SESSIONS: dbi = s->sessions; break;
		case DB_LOCKS: dbi = s->locks; break;
		case DB_NONCES: dbi = s->nonces; break;
		case DB_LEASES: dbi = s->leases; break;
		case DB_ACLS: dbi = s->acls; break;
		case DB_SESSION_LOCKS:
			/* rows are an id and a name, with nothing in them */
			if (!names || key.mv_size <= 8 || val.mv_size != 0)
				goto damaged;
			dbi = s->session_locks;
			break;
		case DB_OUTCOMES:
		case DB_MULTI_WAITS:
			/* rows are a session id and a seq */
			if (!seq_tables || key.mv_size != 16)
				goto damaged;
			dbi = tag == DB_OUTCOMES ? s->outcomes : s->multi_waits;
			break;
		default: goto damaged;
		}
		/* the sets' waiters counted from the bytes in hand, not
		 * read again after the load */
		if (dbi == s->locks)
			sets_check_lock(&lock_sets, &key, &val);
		if (dbi == s->nonces)
			nonce_sessions_add(&nonces, &key, &val);
		if (misshapen[0] == '\0')
			store_check_misshapen(s, dbi, &key, &val, misshapen, sizeof misshapen);
		int rc = 0;
		if (appender[tag] == NULL)
			rc = mdb_cursor_open(txn, dbi, &appender[tag]);
		if (rc == 0)
			rc = mdb_cursor_put(appender[tag], &key, &val, MDB_APPEND);
		/* keys out of order, or one LMDB cannot hold: not an image we
		 * wrote */
		if (rc == MDB_KEYEXIST || rc == MDB_BAD_VALSIZE)
			goto damaged;
		if (rc == ENOMEM) {
			rv = RAFTLOCK_ENOMEM;
			goto out;
		}
		/* the store's failure, not the image's: a full map, a full or
		 * failing disk (LMDB writes pages out as a large load goes) */
		if (rc != 0)
			write_failed(s, rc, "put");
		if (counted(s, dbi))
			s->txn_bytes += (int64_t)(key.mv_size + val.mv_size);
	}
	if (rv == 0)
		rv = image_records_end(&rs);
	if (rv == 0)
		rv = store_check_loaded(s, txn, seq_tables, misshapen, &lock_sets, &nonces);
	if (rv != 0)
		goto out;
	sets_check_free(&lock_sets);
	nonce_sessions_free(&nonces);
	*out = txn;
	return 0;
damaged:
	rv = RAFTLOCK_EDATA;
out:
	store_abort(txn);
	sets_check_free(&lock_sets);
	nonce_sessions_free(&nonces);
	return rv;
}

void store_clear(struct store *s)
{
	MDB_txn *txn = store_begin(s, true);
	drop_all(s, txn);
	store_commit(txn);
	s->bytes = 0;
}

static void count_records(struct store *s)
{
	MDB_txn *txn = store_begin(s, false);
	MDB_dbi dbis[] = {s->sessions, s->locks,         s->nonces,   s->leases,
			  s->acls,     s->session_locks, s->outcomes, s->multi_waits};
	s->bytes = 0;
	for (size_t i = 0; i < sizeof dbis / sizeof dbis[0]; i++) {
		MDB_cursor *cur;
		MDB_val key, val;
		store_check_lmdb(mdb_cursor_open(txn, dbis[i], &cur), "cursor");
		for (int rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
		     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT))
			s->bytes += key.mv_size + val.mv_size;
		mdb_cursor_close(cur);
	}
	store_abort(txn);
}
