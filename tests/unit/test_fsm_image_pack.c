/*
 * test_fsm_image_pack.c: packed images (image_pack.h, feature level 7).
 * A packed image unpacks to the very bytes store_dump_at() makes of the
 * same transaction, is much smaller, loads as the state it was made from
 * with or without a tail, and every damaged, cut or lengthened one is
 * refused before a store is touched (by its own sum; damage sealed with a
 * right sum by the frame's and the image's checks). The dump's writer gives the same
 * bytes whatever pieces it is fed in.
 */
#include <endian.h>
#include <stdatomic.h>

#include "image.h"
#include "image_pack.h"
#include "snapshot_tail.h"
#include "test_fsm_harness.h"

/* A state of n locks over a few sessions, some waiting. A session per
 * 100 locks more: at level 0 a session's record lists its names, and
 * 1,250 a session took most of the time of a fill of 5,000. */
static void fill(struct fx *f, int n)
{
	fx_init(f, FX_FLOOR);
	int ns = 4 + n / 100;
	uint64_t *s = calloc((size_t)ns, sizeof *s);
	assert_non_null(s);
	for (int i = 0; i < ns; i++)
		s[i] = fx_session(f);
	struct op *ops = calloc((size_t)n, sizeof *ops);
	char(*names)[32] = calloc((size_t)n, sizeof *names);
	assert_non_null(ops);
	assert_non_null(names);
	for (int i = 0; i < n; i++) {
		snprintf(names[i], sizeof names[i], "app/%d/res-%d", i % 7, i);
		ops[i] = OP(ACQUIRE, .session = s[i % ns], .owner = (uint64_t)i + 1,
			    .name = names[i]);
	}
	for (int i = 0; i < n; i += 20) /* events of an entry are bounded */
		fx_apply(f, ops + i, (size_t)(n - i < 20 ? n - i : 20));
	fx_enqueue(f, OP(ACQUIRE, .session = s[1], .owner = 99, .name = "app/0/res-0",
			 .wait_ms = 60000));
	free(s);
	free(ops);
	free(names);
}

struct both {
	void *raw, *packed;
	size_t raw_len, packed_len, packed_raw_len;
};

static struct both dump_both(struct fx *f)
{
	struct both b = {0};
	MDB_txn *txn = store_begin(&f->store, false);
	assert_int_equal(store_dump_at(&f->store, txn, malloc, free, NULL, &b.raw, &b.raw_len), 0);
	assert_int_equal(image_pack_at(&f->store, txn, malloc, free, NULL, &b.packed, &b.packed_len,
				       &b.packed_raw_len),
			 0);
	store_abort(txn);
	return b;
}

static void both_free(struct both *b)
{
	free(b->raw);
	free(b->packed);
}

static void test_unpacks_to_the_dump_of_the_same_state(void **state)
{
	struct fx *f = *state;
	fill(f, 3000);
	struct both b = dump_both(f);
	assert_true(image_is_packed(b.packed, b.packed_len));
	assert_false(image_is_packed(b.raw, b.raw_len));
	assert_int_equal(b.packed_raw_len, b.raw_len);
	print_message("measure: image %zu bytes, packed %zu (%.1fx)\n", b.raw_len, b.packed_len,
		      (double)b.raw_len / (double)b.packed_len);
	assert_true(b.packed_len * 4 < b.raw_len);

	uint64_t index = 0, raw_index = 0;
	size_t raw_len = 0;
	assert_int_equal(image_pack_head(b.packed, b.packed_len, &index, &raw_len), 0);
	assert_int_equal(store_image_index(b.raw, b.raw_len, &raw_index), 0);
	assert_int_equal(index, raw_index);
	assert_int_equal(index, f->index);
	assert_int_equal(raw_len, b.raw_len);

	void *img = NULL;
	assert_int_equal(image_unpack(b.packed, b.packed_len, &img, &raw_len), 0);
	assert_int_equal(raw_len, b.raw_len);
	assert_memory_equal(img, b.raw, raw_len);
	free(img);
	both_free(&b);
}

/* A packed image, alone or followed by a tail, is a snapshot that loads
 * as the state it was made of, on a fresh node and on one that moved on
 * another way. */
static void test_loads_as_a_snapshot(void **state)
{
	struct fx *f = *state;
	fill(f, 500);
	struct both b = dump_both(f);
	struct snapshot_parts p;
	assert_int_equal(snapshot_split(b.packed, b.packed_len, &p), 0);
	assert_true(p.packed);
	assert_int_equal(p.raw_len, b.raw_len);
	assert_int_equal(p.index, f->index);
	struct fx *g = fx_peer(f);
	fx_init(g, FX_FLOOR);
	fx_take(g, fx_session(g), 9, "other");
	assert_int_equal(snapshot_load(&g->store, &g->fsm, &p, NULL), 0);
	assert_int_equal(fsm_applied_index(&g->fsm), f->index);
	fx_assert_same_state(f, g);

	/* With a tail of entries applied after the image. */
	MDB_txn *txn = store_begin(&f->store, false);
	void *packed;
	size_t packed_len, raw_len;
	assert_int_equal(
		image_pack_at(&f->store, txn, malloc, free, NULL, &packed, &packed_len, &raw_len),
		0);
	store_abort(txn);
	size_t first = f->n_log;
	uint64_t s = fx_session(f);
	fx_take(f, s, 5, "after/1");
	DO(f, RELEASE, .session = s, .owner = 5, .name = "after/1");
	struct snapshot_tail tail = {0};
	for (size_t i = first; i < f->n_log; i++)
		assert_int_equal(
			snapshot_tail_add(&tail, f->log[i].index, f->log[i].buf, f->log[i].len), 0);
	void *rest;
	size_t rest_len;
	assert_int_equal(snapshot_tail_finish(&tail, malloc, &rest, &rest_len), 0);
	snapshot_tail_free(&tail);
	uint8_t *snap = malloc(packed_len + rest_len);
	assert_non_null(snap);
	memcpy(snap, packed, packed_len);
	memcpy(snap + packed_len, rest, rest_len);
	assert_int_equal(snapshot_split(snap, packed_len + rest_len, &p), 0);
	assert_true(p.packed);
	assert_int_equal(p.index, f->index);
	struct fx *h = fx_peer(f);
	assert_int_equal(snapshot_load(&h->store, &h->fsm, &p, NULL), 0);
	fx_assert_same_state(f, h);
	free(snap);
	free(rest);
	free(packed);
	both_free(&b);
}

static void refused(const uint8_t *buf, size_t n)
{
	uint64_t index;
	size_t raw_len;
	void *img = NULL;
	struct snapshot_parts p;
	assert_int_equal(image_pack_head(buf, n, &index, &raw_len), RAFTLOCK_EDATA);
	assert_int_equal(image_unpack(buf, n, &img, &raw_len), RAFTLOCK_EDATA);
	assert_null(img);
	assert_int_equal(snapshot_split(buf, n, &p), RAFTLOCK_EDATA);
}

static void put_be64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

/* Seals n bytes of a packed image with the sum of what precedes it, as if
 * the packer had written them: damage that only the deeper checks see. */
static void seal(uint8_t *buf, size_t n)
{
	put_be64(buf + n - 8, image_sum_words_of(buf, n - 8));
}

/* Every bit changed, every length cut, a byte more: refused by the packed
 * image's own sum, before zstd reads a byte. */
static void test_damage_refused(void **state)
{
	struct fx *f = *state;
	fill(f, 60);
	struct both b = dump_both(f);
	uint8_t *copy = malloc(b.packed_len + 1);
	assert_non_null(copy);
	for (size_t i = 0; i < b.packed_len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			memcpy(copy, b.packed, b.packed_len);
			copy[i] ^= (uint8_t)(1u << bit);
			refused(copy, b.packed_len);
		}
	}
	memcpy(copy, b.packed, b.packed_len);
	for (size_t n = 0; n < b.packed_len; n++)
		refused(copy, n);
	copy[b.packed_len] = 0;
	refused(copy, b.packed_len + 1);
	free(copy);
	both_free(&b);
}

/* Damage sealed with a right sum (a packer gone wrong): a changed frame
 * unpacks to the very image or not at all; a header that says another
 * length or index is refused. */
static void test_sealed_damage_never_gives_another_image(void **state)
{
	struct fx *f = *state;
	fill(f, 60);
	struct both b = dump_both(f);
	uint8_t *copy = malloc(b.packed_len);
	assert_non_null(copy);
	void *img;
	size_t len;
	unsigned same = 0;
	for (size_t i = IMAGE_PACK_HEAD; i < b.packed_len - 8; i++) {
		for (int bit = 0; bit < 8; bit++) {
			memcpy(copy, b.packed, b.packed_len);
			copy[i] ^= (uint8_t)(1u << bit);
			seal(copy, b.packed_len);
			img = NULL;
			int rv = image_unpack(copy, b.packed_len, &img, &len);
			if (rv == 0) { /* zstd may read some header bits as "don't care" */
				assert_int_equal(len, b.raw_len);
				assert_memory_equal(img, b.raw, len);
				free(img);
				same++;
			} else {
				assert_int_equal(rv, RAFTLOCK_EDATA);
				assert_null(img);
			}
		}
	}
	print_message("measure: %u of %zu sealed bit flips unpacked to the same image\n", same,
		      (b.packed_len - IMAGE_PACK_HEAD - 8) * 8);
	for (int field = 8; field <= 16; field += 8) {
		for (int d = -1; d <= 1; d += 2) {
			memcpy(copy, b.packed, b.packed_len);
			uint64_t v;
			memcpy(&v, copy + field, 8);
			put_be64(copy + field, be64toh(v) + (uint64_t)(int64_t)d);
			seal(copy, b.packed_len);
			img = NULL;
			assert_int_equal(image_unpack(copy, b.packed_len, &img, &len),
					 RAFTLOCK_EDATA);
			assert_null(img);
		}
	}
	free(copy);
	both_free(&b);
}

/* The writer of store_dump_to() collecting into one buffer, fed pieces of
 * at most cap bytes at a time. */
struct collect {
	struct image_writer w;
	uint8_t *all;
	size_t len;
	unsigned flushes;
};

static int collect_flush(struct image_writer *w, const uint8_t *more, size_t n)
{
	struct collect *c = (struct collect *)w;
	c->all = realloc(c->all, c->len + w->len + n);
	assert_non_null(c->all);
	memcpy(c->all + c->len, w->buf, w->len);
	c->len += w->len;
	memcpy(c->all + c->len, more, n);
	c->len += n;
	w->len = 0;
	c->flushes++;
	return 0;
}

static void test_writer_pieces_give_the_same_image(void **state)
{
	struct fx *f = *state;
	fill(f, 200);
	struct both b = dump_both(f);
	size_t caps[] = {1, 7, 64, 4096};
	for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
		/* bytes the writer held before the image are not summed */
		for (size_t before = 0; before <= 1 && before < caps[k]; before++) {
			uint8_t *stage = malloc(caps[k]);
			struct collect c = {.w = {.buf = stage,
						  .len = before,
						  .cap = caps[k],
						  .flush = collect_flush}};
			memset(stage, 0xab, before);
			MDB_txn *txn = store_begin(&f->store, false);
			assert_int_equal(store_dump_to(&f->store, txn, NULL, &c.w), 0);
			store_abort(txn);
			static const uint8_t none[1];
			collect_flush(&c.w, none, 0);
			assert_true(c.flushes > 1);
			assert_int_equal(c.len, before + b.raw_len);
			assert_memory_equal(c.all + before, b.raw, b.raw_len);
			free(c.all);
			free(stage);
		}
	}
	both_free(&b);
}

static unsigned released;
static void count_release(void *p)
{
	released++;
	free(p);
}

/* A pack told to stop frees what it took and says so. */
static void test_pack_stops_when_told(void **state)
{
	struct fx *f = *state;
	fill(f, 5000);
	atomic_bool stop;
	atomic_init(&stop, true);
	MDB_txn *txn = store_begin(&f->store, false);
	void *out = NULL;
	size_t n = 0, raw_len = 0;
	released = 0;
	assert_int_equal(
		image_pack_at(&f->store, txn, malloc, count_release, &stop, &out, &n, &raw_len),
		RAFTLOCK_EUNAVAILABLE);
	assert_null(out);
	assert_int_equal(released, 1);
	atomic_store(&stop, false);
	assert_int_equal(
		image_pack_at(&f->store, txn, malloc, count_release, &stop, &out, &n, &raw_len), 0);
	assert_int_equal(released, 1);
	store_abort(txn);
	void *img;
	assert_int_equal(image_unpack(out, n, &img, &raw_len), 0);
	free(img);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
		T(test_unpacks_to_the_dump_of_the_same_state),
		T(test_loads_as_a_snapshot),
		T(test_damage_refused),
		T(test_sealed_damage_never_gives_another_image),
		T(test_writer_pieces_give_the_same_image),
		T(test_pack_stops_when_told),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
