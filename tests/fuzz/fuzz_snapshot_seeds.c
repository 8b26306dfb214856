/*
 * fuzz_snapshot_seeds.c: writes the seed corpus of fuzz_snapshot into DIR:
 * the image of a small store (a record in each table, at the newest
 * image format), plain and packed, each alone and followed by a tail of
 * two entries; and that image, under right sums, with a session record
 * that does not decode, a lease of the wrong size, a session without its
 * lease, a holder of no session, a name (session_locks) of no session, a
 * set's waiter of another owner, a lock under a key not its name, a
 * nonce of no session (each refused by a load).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "feature_level.h"
#include "image_pack.h"
#include "snapshot_tail.h"
#include "store.h"

static const char *out_dir;

/* A session (1, of identity "fuzz") holding lock "a/1" with the outcome
 * of its seq 3 and a lock set of seq 4 queued on "a/2" and "a/3", and a
 * record in every other table, at applied index 7. */
static void fill(struct store *st)
{
	MDB_txn *txn = store_begin(st, true);
	Raftlock__Meta meta = RAFTLOCK__META__INIT;
	meta.applied_index = 7;
	meta.next_token = 11;
	meta.next_session = 2;
	meta.feature_level = FEATURE_LEVEL;
	store_put_meta(st, txn, &meta);
	Raftlock__SessionRecord session = RAFTLOCK__SESSION_RECORD__INIT;
	session.id = 1;
	session.ttl_ms = 5000;
	session.identity = "fuzz";
	session.nonce = 99; /* its row below */
	session.lock_count = 3;
	session.outcome_count = 1;
	store_put_session(st, txn, &session);
	Raftlock__Result result = RAFTLOCK__RESULT__INIT;
	result.token = 10;
	Raftlock__Outcome outcome = RAFTLOCK__OUTCOME__INIT;
	outcome.seq = 3;
	outcome.result = &result;
	store_put_outcome(st, txn, 1, &outcome);
	char *set_names[] = {"a/2", "a/3"};
	Raftlock__MultiWait set = RAFTLOCK__MULTI_WAIT__INIT;
	set.seq = 4;
	set.owner = 2;
	set.names = set_names;
	set.n_names = 2;
	store_put_multi_wait(st, txn, 1, &set);
	Raftlock__Holder holder = RAFTLOCK__HOLDER__INIT, *holders[] = {&holder};
	holder.session = 1;
	holder.owner = 1;
	holder.count = 1;
	holder.token = 10;
	Raftlock__LockRecord lock = RAFTLOCK__LOCK_RECORD__INIT;
	lock.name = "a/1";
	lock.holders = holders;
	lock.n_holders = 1;
	store_put_lock(st, txn, &lock);
	store_session_lock_add(st, txn, 1, "a/1");
	/* the set's waiter on each of its locks */
	Raftlock__Waiter waiter = RAFTLOCK__WAITER__INIT, *waiters[] = {&waiter};
	waiter.session = 1;
	waiter.owner = 2;
	waiter.seq = 4;
	waiter.multi = true;
	for (size_t i = 0; i < set.n_names; i++) {
		Raftlock__LockRecord queued = RAFTLOCK__LOCK_RECORD__INIT;
		queued.name = set_names[i];
		queued.waiters = waiters;
		queued.n_waiters = 1;
		store_put_lock(st, txn, &queued);
		store_session_lock_add(st, txn, 1, set_names[i]);
	}
	store_put_nonce(st, txn, 99, 1);
	store_put_lease(st, txn, 1, 5000, 5000);
	store_put_acl(st, txn, "fuzz", "a/", RAFTLOCK__ACL_PERM__ACL_LOCK);
	store_commit(txn);
}

static void write_seed(const char *name, const void *a, size_t na, const void *b, size_t nb)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", out_dir, name);
	FILE *f = fopen(path, "wb");
	if (f == NULL || fwrite(a, 1, na, f) != na || (nb > 0 && fwrite(b, 1, nb, f) != nb) ||
	    fclose(f) != 0) {
		fprintf(stderr, "fuzz_snapshot_seeds: cannot write %s\n", path);
		exit(1);
	}
}

/* The image of st (its good image, image_len bytes, loaded again) with
 * record (key, *val) of table dbi put as it is (val NULL: deleted): right
 * sums, refused whole as it is loaded (store_load, which says why).
 * Written as seed name. */
static int write_damaged(struct store *st, const void *image, size_t image_len, const char *name,
			 MDB_dbi dbi, MDB_val key, const MDB_val *val)
{
	void *damaged;
	size_t damaged_len;
	if (store_load(st, image, image_len) != 0)
		return -1;
	MDB_txn *txn = store_begin(st, true);
	int rc = val != NULL ? mdb_put(txn, dbi, &key, (MDB_val *)val, 0)
			     : mdb_del(txn, dbi, &key, NULL);
	store_commit(txn);
	if (rc != 0 || store_dump(st, malloc, &damaged, &damaged_len) != 0)
		return -1;
	write_seed(name, damaged, damaged_len, NULL, 0);
	rc = store_load(st, damaged, damaged_len);
	free(damaged);
	if (rc == 0 || store_load_error(st)[0] == '\0') {
		fprintf(stderr, "fuzz_snapshot_seeds: %s loads\n", name);
		return -1;
	}
	return 0;
}

/* A lock record: name with one party, a holder or a set's waiter of seq 4,
 * packed into buf. */
static MDB_val lock_bytes(uint8_t *buf, const char *name, uint64_t session, uint64_t owner,
			  bool waiter)
{
	Raftlock__Holder holder = RAFTLOCK__HOLDER__INIT, *holders[] = {&holder};
	Raftlock__Waiter wait = RAFTLOCK__WAITER__INIT, *waiters[] = {&wait};
	Raftlock__LockRecord lock = RAFTLOCK__LOCK_RECORD__INIT;
	lock.name = (char *)name;
	holder.session = wait.session = session;
	holder.owner = wait.owner = owner;
	wait.seq = 4;
	wait.multi = true;
	lock.holders = waiter ? NULL : holders;
	lock.n_holders = !waiter;
	lock.waiters = waiter ? waiters : NULL;
	lock.n_waiters = waiter;
	return (MDB_val){raftlock__lock_record__pack(&lock, buf), buf};
}

/* The damaged images: session 2's record does not decode; session 1's
 * lease has 11 bytes, or is not there; lock a/1 is held by session 5,
 * which is not there, or session 5 has a name, a/1; the set's waiter on
 * a/2 is of owner 3, not the set's 2; a/1's record is under key a/9
 * too; nonce 98 names session 5. */
static int write_damaged_seeds(struct store *st, const void *image, size_t image_len)
{
	uint8_t id1[8] = {0, 0, 0, 0, 0, 0, 0, 1}, id2[8] = {0, 0, 0, 0, 0, 0, 0, 2};
	uint8_t name5[] = {0, 0, 0, 0, 0, 0, 0, 5, 'a', '/', '1'};
	uint8_t id5[8] = {0, 0, 0, 0, 0, 0, 0, 5}, nonce98[8] = {0, 0, 0, 0, 0, 0, 0, 98};
	uint8_t junk[12] = {0xff}, lock1[128], lock2[128], lock3[128];
	MDB_val held = lock_bytes(lock1, "a/1", 5, 1, false);
	MDB_val waiting = lock_bytes(lock2, "a/2", 1, 3, true);
	MDB_val own = lock_bytes(lock3, "a/1", 1, 1, false);
	return write_damaged(st, image, image_len, "damaged_session", st->sessions,
			     (MDB_val){8, id2}, &(MDB_val){1, junk}) ||
	       write_damaged(st, image, image_len, "short_lease", st->leases, (MDB_val){8, id1},
			     &(MDB_val){11, junk}) ||
	       write_damaged(st, image, image_len, "session_without_lease", st->leases,
			     (MDB_val){8, id1}, NULL) ||
	       write_damaged(st, image, image_len, "holder_of_no_session", st->locks,
			     (MDB_val){3, "a/1"}, &held) ||
	       write_damaged(st, image, image_len, "name_of_no_session", st->session_locks,
			     (MDB_val){sizeof name5, name5}, &(MDB_val){0, NULL}) ||
	       write_damaged(st, image, image_len, "set_waiter_of_another_owner", st->locks,
			     (MDB_val){3, "a/2"}, &waiting) ||
	       write_damaged(st, image, image_len, "lock_under_another_key", st->locks,
			     (MDB_val){3, "a/9"}, &own) ||
	       write_damaged(st, image, image_len, "nonce_of_no_session", st->nonces,
			     (MDB_val){8, nonce98}, &(MDB_val){8, id5});
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_snapshot_seeds DIR\n");
		return 2;
	}
	out_dir = argv[1];
	if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
		perror(out_dir);
		return 1;
	}
	char dir[] = "/tmp/fuzz_snapshot_seeds.XXXXXX";
	char err[256];
	struct store st;
	if (mkdtemp(dir) == NULL || store_open(&st, dir, 1u << 20, err, sizeof err) != 0) {
		fprintf(stderr, "fuzz_snapshot_seeds: no store: %s\n", err);
		return 1;
	}
	fill(&st);
	MDB_txn *txn = store_begin(&st, false);
	void *image, *packed, *tail;
	size_t image_len, packed_len, raw_len, tail_len;
	if (store_dump_at(&st, txn, malloc, free, NULL, &image, &image_len) != 0 ||
	    image_pack_at(&st, txn, malloc, free, NULL, &packed, &packed_len, &raw_len) != 0)
		return 1;
	store_abort(txn);
	/* the seeds of a whole image are images a node loads */
	if (store_load(&st, image, image_len) != 0) {
		fprintf(stderr, "fuzz_snapshot_seeds: the image does not load: %s\n",
			store_load_error(&st));
		return 1;
	}
	if (write_damaged_seeds(&st, image, image_len) != 0)
		return 1;
	store_close(&st);
	struct snapshot_tail t = {0};
	static const uint8_t entry[16] = {1, 2, 3};
	if (snapshot_tail_add(&t, 8, entry, sizeof entry) != 0 ||
	    snapshot_tail_add(&t, 9, entry, 3) != 0 ||
	    snapshot_tail_finish(&t, malloc, &tail, &tail_len) != 0)
		return 1;
	write_seed("image", image, image_len, NULL, 0);
	write_seed("image_tail", image, image_len, tail, tail_len);
	write_seed("packed", packed, packed_len, NULL, 0);
	write_seed("packed_tail", packed, packed_len, tail, tail_len);
	free(image);
	free(packed);
	free(tail);
	snapshot_tail_free(&t);
	char path[sizeof dir + 16];
	snprintf(path, sizeof path, "%s/data.mdb", dir);
	remove(path);
	snprintf(path, sizeof path, "%s/lock.mdb", dir);
	remove(path);
	remove(dir);
	return 0;
}
