/* test_store_bytes.c: the byte count of the store (store_record_bytes,
 * which the store-full rule reads) against a recount from the records,
 * through puts that keep, grow and shrink a record (in place and past a
 * page, onto overflow pages), deletes of keys there and not there, other
 * tables written in between, and an aborted transaction; and after a
 * snapshot's load, which counts the records as it puts them. */
#include "image_pack.h"
#include "test_fsm_harness.h"

#define SESSIONS 200
#define LOCKS 200

struct model {
	size_t session_len[SESSIONS + 1]; /* host length + 1, 0: no record */
	size_t lock_len[LOCKS];           /* limit + 1, 0: no record */
};

static char big[9000];

static void put_session(struct store *st, MDB_txn *txn, uint64_t id, size_t host_len)
{
	Raftlock__Owner owner = RAFTLOCK__OWNER__INIT;
	owner.host = big + sizeof big - 1 - host_len;
	Raftlock__SessionRecord rec = RAFTLOCK__SESSION_RECORD__INIT;
	rec.id = id;
	rec.nonce = id * 7919; /* put_every_table()'s row of it: a load checks both */
	rec.lock_count = 1;    /* and its one name's row, likewise */
	rec.owner = &owner;
	store_put_session(st, txn, &rec);
}

static void put_lock(struct store *st, MDB_txn *txn, size_t i, uint32_t limit)
{
	char name[32];
	snprintf(name, sizeof name, "bytes/%zu", i);
	Raftlock__LockRecord rec = RAFTLOCK__LOCK_RECORD__INIT;
	rec.name = name;
	rec.limit = limit;
	store_put_lock(st, txn, &rec);
}

/* What the records hold, read one by one, against the model. */
static void check_records(struct store *st, const struct model *m)
{
	MDB_txn *txn = store_begin(st, false);
	for (uint64_t id = 1; id <= SESSIONS; id++) {
		Raftlock__SessionRecord *rec = store_get_session(st, txn, id);
		assert_true((rec != NULL) == (m->session_len[id] != 0));
		if (rec != NULL) {
			assert_int_equal(strlen(rec->owner->host), m->session_len[id] - 1);
			raftlock__session_record__free_unpacked(rec, NULL);
		}
	}
	for (size_t i = 0; i < LOCKS; i++) {
		char name[32];
		snprintf(name, sizeof name, "bytes/%zu", i);
		Raftlock__LockRecord *rec = store_get_lock(st, txn, name);
		assert_true((rec != NULL) == (m->lock_len[i] != 0));
		if (rec != NULL) {
			assert_int_equal(rec->limit, m->lock_len[i] - 1);
			raftlock__lock_record__free_unpacked(rec, NULL);
		}
	}
	store_abort(txn);
}

static void test_bytes_match_a_recount(void **state)
{
	struct fx *f = *state;
	memset(big, 'h', sizeof big - 1);
	static struct model m;
	memset(&m, 0, sizeof m);
	unsigned seed = 7;
	for (unsigned round = 0; round < 40; round++) {
		MDB_txn *txn = store_begin(&f->store, true);
		struct model next = m;
		for (unsigned op = 0; op < 300; op++) {
			unsigned r = (unsigned)rand_r(&seed);
			uint64_t id = 1 + r % SESSIONS;
			size_t lock = (r >> 8) % LOCKS;
			switch ((r >> 16) % 6) {
			case 0: /* the same size again, written in place */
				put_session(&f->store, txn, id,
					    next.session_len[id] ? next.session_len[id] - 1 : 5);
				next.session_len[id] =
					next.session_len[id] ? next.session_len[id] : 6;
				break;
			case 1: { /* any size, sometimes past a page */
				size_t len = (r >> 20) % 8 == 0 ? 4000 + (r >> 4) % 5000
								: (r >> 4) % 300;
				put_session(&f->store, txn, id, len);
				next.session_len[id] = len + 1;
				break;
			}
			case 2:
				store_del_session(&f->store, txn, id);
				next.session_len[id] = 0;
				break;
			case 3: { /* a varint of another length: the record grows or shrinks */
				uint32_t limit = (r >> 4) % 2 ? (r >> 4) % 100 : (uint32_t)r;
				put_lock(&f->store, txn, lock, limit);
				next.lock_len[lock] = (size_t)limit + 1;
				break;
			}
			case 4: {
				char name[32];
				snprintf(name, sizeof name, "bytes/%zu", lock);
				store_del_lock(&f->store, txn, name);
				next.lock_len[lock] = 0;
				break;
			}
			default: /* another table in between */
				store_put_lease(&f->store, txn, id, r, 1000);
				break;
			}
		}
		uint64_t counted = store_record_bytes(&f->store);
		if (round % 5 == 4) {
			store_abort(txn); /* nothing of it counts */
		} else {
			store_commit(txn);
			m = next;
			assert_true(counted == store_record_bytes(&f->store));
		}
		uint64_t kept = store_record_bytes(&f->store);
		fx_restart(f); /* counts every record afresh */
		assert_int_equal(store_record_bytes(&f->store), kept);
		check_records(&f->store, &m);
	}
}

/* A record in every counted table (and meta, which is not counted). */
static void put_every_table(struct store *st, uint64_t first, unsigned n)
{
	MDB_txn *txn = store_begin(st, true);
	Raftlock__Meta meta = RAFTLOCK__META__INIT;
	meta.feature_level = FEATURE_LEVEL; /* an image with every table */
	meta.cluster = (char *)"bytes";
	store_put_meta(st, txn, &meta);
	for (uint64_t id = first; id < first + n; id++) {
		put_session(st, txn, id, (size_t)(id * 37 % 500));
		put_lock(st, txn, (size_t)id, (uint32_t)id);
		char name[32];
		snprintf(name, sizeof name, "bytes/%llu", (unsigned long long)id);
		store_session_lock_add(st, txn, id, name);
		store_put_nonce(st, txn, id * 7919, id);
		store_put_lease(st, txn, id, id * 1000, 5000);
		store_put_acl(st, txn, "ident", name, 3);
	}
	store_commit(txn);
}

static void test_load_counts_as_a_recount(void **state)
{
	struct fx *f = *state;
	memset(big, 'h', sizeof big - 1);
	put_every_table(&f->store, 1, 300);
	uint64_t bytes = store_record_bytes(&f->store);
	void *image, *packed;
	size_t len, packed_len, raw_len;
	assert_int_equal(store_dump(&f->store, malloc, &image, &len), 0);
	MDB_txn *txn = store_begin(&f->store, false);
	assert_int_equal(
		image_pack_at(&f->store, txn, malloc, free, NULL, &packed, &packed_len, &raw_len),
		0);
	store_abort(txn);
	fx_keep(f, image);
	fx_keep(f, packed);
	for (int packed_load = 0; packed_load <= 1; packed_load++) {
		struct fx *g = fx_peer(f);
		put_every_table(&g->store, 1000, 50); /* replaced, not added to */
		if (packed_load)
			assert_int_equal(image_unpack_load(&g->store, packed, packed_len), 0);
		else
			assert_int_equal(store_load(&g->store, image, len), 0);
		assert_int_equal(store_record_bytes(&g->store), bytes);
		fx_restart(g); /* counts every record afresh */
		assert_int_equal(store_record_bytes(&g->store), bytes);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_bytes_match_a_recount, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_load_counts_as_a_recount, fx_setup,
						fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
