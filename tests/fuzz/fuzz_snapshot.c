/*
 * fuzz_snapshot.c: libFuzzer target for what a member reads from a raft
 * snapshot sent to it or left on its disk: snapshot_split() (the tail,
 * plain images and packed ones), the unpacking of packed images
 * (server/snapshot_tail.c, server/image_pack.c), and the load of every
 * image split accepts into a real LMDB store, as snapshot_load() does
 * (store_load(), image_unpack_load(): streamed through an image_reader).
 * Each input is tried as it is and, when its sum is wrong, again with the
 * sum made right for what it holds (a packed image's over its packed
 * bytes, a plain one's over the image): most mutations break the sum,
 * and the unpacker and the records' parser behind it would seldom see
 * them. Besides the sanitizers, it checks:
 *   - each call returns only its documented codes;
 *   - a snapshot split accepts lies inside the input: the image first, the
 *     entries right after it, then the trailer; the state's index is at
 *     least the image's;
 *   - a packed image split accepts (its sum is right) either unpacks to an
 *     image whose own sum, index and length agree with what split
 *     reported, or is refused as it is unpacked;
 *   - the image split accepts either loads, and the store then holds its
 *     records and nothing else, each table's in the image's order, with
 *     store_record_bytes() their size, or is refused and the store is as
 *     it was; a packed image that image_unpack() refused does not load;
 *   - what image_unpack() accepts, image_pack_head() accepts with the same
 *     length and index, and it is an image of that index;
 *   - read through an unpacker (image_pack.h) whose buffer starts at one
 *     byte, a few bytes taken at a time, it comes out as the same bytes,
 *     to the frame's end.
 * The store is opened once per process (a directory under /tmp, removed
 * at exit) with a map of 1 GiB, and put back to the same small content
 * after each input that loaded.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "fuzz_check.h"
#include "image.h"
#include "image_pack.h"
#include "raftlock.h"
#include "snapshot_tail.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool known(int rv)
{
	return rv == 0 || rv == RAFTLOCK_EDATA || rv == RAFTLOCK_ENOMEM;
}

/* ------------------------------------------------------ scratch store -- */

static struct store scratch;
static char scratch_dir[] = "/tmp/fuzz_snapshot.XXXXXX";
static bool scratch_open;

/* What the store holds between inputs: a nonce (1 -> session 2) and the
 * lease of session 2 (deadline 3, TTL 4 ms), their keys and values. */
#define BASE_RECORDS 2
#define BASE_BYTES ((8 + 8) + (8 + 12))

static void base_put(void)
{
	store_clear(&scratch);
	MDB_txn *txn = store_begin(&scratch, true);
	store_put_nonce(&scratch, txn, 1, 2);
	store_put_lease(&scratch, txn, 2, 3, 4);
	store_commit(txn);
}

static void scratch_close(void)
{
	char path[sizeof scratch_dir + 16];
	store_close(&scratch);
	snprintf(path, sizeof path, "%s/data.mdb", scratch_dir);
	remove(path);
	snprintf(path, sizeof path, "%s/lock.mdb", scratch_dir);
	remove(path);
	remove(scratch_dir);
}

static struct store *scratch_store(void)
{
	if (!scratch_open) {
		char err[256];
		CHECK(mkdtemp(scratch_dir) != NULL);
		CHECK(store_open(&scratch, scratch_dir, (size_t)1 << 30, err, sizeof err) == 0);
		scratch_open = true;
		atexit(scratch_close);
		base_put();
	}
	return &scratch;
}

/* Every table an image holds, by its tag (1 + its place in store.h's
 * list), then the identities index, which no image holds. */
#define TABLES 10

static void tables(MDB_dbi dbis[TABLES])
{
	const MDB_dbi all[TABLES] = {scratch.meta,          scratch.sessions, scratch.locks,
				     scratch.nonces,        scratch.leases,   scratch.acls,
				     scratch.session_locks, scratch.outcomes, scratch.multi_waits,
				     scratch.identities};
	memcpy(dbis, all, sizeof all);
}

static uint64_t entries(MDB_txn *txn, MDB_dbi dbi)
{
	MDB_stat st;
	CHECK(mdb_stat(txn, dbi, &st) == 0);
	return st.ms_entries;
}

/* A load that failed changed nothing. */
static void check_base(void)
{
	CHECK(store_record_bytes(&scratch) == BASE_BYTES);
	MDB_txn *txn = store_begin(&scratch, false);
	MDB_dbi dbis[TABLES];
	tables(dbis);
	uint64_t n = 0;
	for (int t = 0; t < TABLES; t++)
		n += entries(txn, dbis[t]);
	CHECK(n == BASE_RECORDS);
	uint64_t deadline;
	uint32_t ttl;
	CHECK(store_get_nonce(&scratch, txn, 1) == 2);
	CHECK(store_get_lease(&scratch, txn, 2, &deadline, &ttl) && deadline == 3 && ttl == 4);
	store_abort(txn);
}

/* A load of the len bytes of the image at img that succeeded: each table
 * holds the image's records of its tag, in their order, and nothing else
 * (the identities index at most one entry a session); the records' bytes
 * are counted (meta aside). */
static void check_loaded(const uint8_t *img, size_t len)
{
	MDB_txn *txn = store_begin(&scratch, false);
	MDB_dbi dbis[TABLES];
	tables(dbis);
	MDB_cursor *cur[TABLES];
	MDB_cursor_op op[TABLES];
	for (int t = 0; t < TABLES; t++) {
		CHECK(mdb_cursor_open(txn, dbis[t], &cur[t]) == 0);
		op[t] = MDB_FIRST;
	}
	MDB_val key, val;
	uint64_t bytes = 0;
	size_t at = 16; /* magic, index */
	for (;;) {
		CHECK(at < len);
		if (img[at] == 0xff) /* the end byte */
			break;
		int t = img[at] - 1;
		CHECK(t >= 0 && t < TABLES - 1 && len - at >= 9);
		size_t klen = (size_t)be_get(img + at + 1, 4);
		CHECK(len - at - 9 >= klen);
		size_t vlen = (size_t)be_get(img + at + 5 + klen, 4);
		CHECK(len - at - 9 - klen >= vlen);
		CHECK(mdb_cursor_get(cur[t], &key, &val, op[t]) == 0);
		op[t] = MDB_NEXT;
		CHECK(key.mv_size == klen && memcmp(key.mv_data, img + at + 5, klen) == 0);
		CHECK(val.mv_size == vlen && memcmp(val.mv_data, img + at + 9 + klen, vlen) == 0);
		if (t != 0)
			bytes += klen + vlen;
		at += 9 + klen + vlen;
	}
	CHECK(len - at == 1 + IMAGE_SUM_SIZE);
	for (int t = 0; t < TABLES - 1; t++)
		CHECK(mdb_cursor_get(cur[t], &key, &val, op[t]) == MDB_NOTFOUND);
	CHECK(entries(txn, scratch.identities) <= entries(txn, scratch.sessions));
	CHECK(store_record_bytes(&scratch) == bytes);
	for (int t = 0; t < TABLES; t++)
		mdb_cursor_close(cur[t]);
	store_abort(txn);
}

/* Loads the image of p as snapshot_load() does; unpacked is what
 * image_unpack() made of a packed one (NULL: refused, with unpack_rv),
 * the image itself for a plain one. */
static void check_load(const struct snapshot_parts *p, const uint8_t *unpacked, size_t len,
		       int unpack_rv)
{
	struct store *s = scratch_store();
	int rv = p->packed ? image_unpack_load(s, p->image, p->image_len)
			   : store_load(s, p->image, p->image_len);
	CHECK(known(rv));
	if (rv != 0) {
		check_base();
		return;
	}
	CHECK(unpacked != NULL || unpack_rv == RAFTLOCK_ENOMEM);
	if (unpacked != NULL)
		check_loaded(unpacked, len);
	base_put();
}

static void check_split(const uint8_t *buf, size_t n)
{
	struct snapshot_parts p;
	int rv = snapshot_split(buf, n, &p);
	CHECK(known(rv));
	if (rv != 0)
		return;
	CHECK(p.image == buf && p.image_len <= n);
	if (p.entries != NULL) {
		CHECK(p.entries == buf + p.image_len);
		CHECK(p.image_len + p.entries_len + SNAPSHOT_TAIL_TRAILER == n);
	} else {
		CHECK(p.n_entries == 0 && p.image_len == n);
	}
	CHECK(p.index >= p.image_index);
	CHECK(p.index > p.image_index || p.n_entries == 0);
	if (!p.packed) {
		CHECK(p.raw_len == p.image_len);
		check_load(&p, p.image, p.image_len, 0);
		return;
	}
	void *img = NULL;
	size_t len = 0;
	rv = image_unpack(p.image, p.image_len, &img, &len);
	CHECK(known(rv)); /* split checks the packed sum only: a forged one passes */
	if (rv != 0) {
		CHECK(img == NULL);
	} else {
		uint64_t index;
		CHECK(len == p.raw_len);
		CHECK(store_image_index(img, len, &index) == 0 && index == p.image_index);
	}
	check_load(&p, img, len, rv);
	free(img);
}

/* What image_unpack() gave (img, len; NULL: refused), read again through
 * an unpacker from the n bytes at buf. */
static void check_stream(const uint8_t *buf, size_t n, const uint8_t *img, size_t len)
{
	struct image_unpacker u;
	int rv = image_unpacker_begin(&u, buf, n, 1);
	CHECK(known(rv));
	if (rv != 0) {
		CHECK(img == NULL);
		return;
	}
	size_t got = 0;
	for (size_t want = 1;; want = want % 7 + 1) {
		rv = u.r.fill(&u.r, want);
		CHECK(known(rv));
		size_t k = u.r.len - u.r.at;
		if (rv != 0 || k == 0)
			break;
		k = k < want ? k : want;
		CHECK(img == NULL ||
		      (got + k <= len && memcmp(u.r.buf + u.r.at, img + got, k) == 0));
		u.r.at += k;
		got += k;
	}
	CHECK(img == NULL || (rv == 0 && got == len));
	image_unpacker_end(&u);
}

static void check_pack(const uint8_t *buf, size_t n)
{
	uint64_t index = 0;
	size_t head_len = 0, len = 0;
	int head = image_pack_head(buf, n, &index, &head_len);
	CHECK(head == 0 || head == RAFTLOCK_EDATA);
	void *img = NULL;
	int rv = image_unpack(buf, n, &img, &len);
	CHECK(known(rv));
	check_stream(buf, n, img, len);
	if (rv != 0) {
		CHECK(img == NULL);
		return;
	}
	uint64_t image_index;
	CHECK(head == 0 && len == head_len);
	CHECK(store_image_index(img, len, &image_index) == 0 && image_index == index);
	free(img);
}

/* Makes the sum at the end of the n bytes at buf right for what they
 * hold, as a packed image or a plain one (by their magic); false when
 * they are neither, or their sum was right already. */
static bool resum(uint8_t *buf, size_t n)
{
	uint64_t sum;
	if (n < IMAGE_MIN_SIZE)
		return false;
	if (image_is_packed(buf, n))
		sum = image_sum_words_of(buf, n - IMAGE_SUM_SIZE);
	else if (store_image_magic_known(buf))
		sum = image_sum_of(buf, n - IMAGE_SUM_SIZE);
	else
		return false;
	if (be_get(buf + n - IMAGE_SUM_SIZE, IMAGE_SUM_SIZE) == sum)
		return false;
	be_put(buf + n - IMAGE_SUM_SIZE, sum, IMAGE_SUM_SIZE);
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy in a block of exactly its size: the sanitizer sees a read
	 * past the end. */
	uint8_t *copy = calloc(1, size ? size : 1);
	CHECK(copy != NULL);
	if (size > 0)
		memcpy(copy, data, size);
	check_split(copy, size);
	check_pack(copy, size);
	if (resum(copy, size)) {
		check_split(copy, size);
		check_pack(copy, size);
	}
	free(copy);
	return 0;
}
