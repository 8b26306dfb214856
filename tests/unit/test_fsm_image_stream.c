/*
 * test_fsm_image_stream.c: a packed image loaded as it is unpacked
 * (image_unpack_load, store_load_from), through a buffer much smaller than
 * the image. It gives the very store, and byte count, of the whole-buffer
 * load (image_unpack then store_load) whatever the buffer's size, so that
 * records straddle its end at every offset; and a stream or an image that
 * is cut, damaged, out of order or followed by other bytes, or a reader
 * that runs out of memory, fails with the target store as it was, although
 * records were put before the failure showed.
 */
#include "byteorder.h"
#include "image.h"
#include "image_pack.h"
#include "test_fsm_harness.h"

#define LOCKS 1800
#define STAGE (1u << 20) /* image_unpack_load()'s buffer */
#define FLIPS 40

/* A state of LOCKS locks whose records run from tens of bytes to over
 * 4 KiB (election values of every length), over SESSIONS sessions (at
 * level 0 a session's record lists its names: 600 a session took most of
 * the fill), one lock with waiters: an image of a few MiB. */
#define SESSIONS 30

static void fill(struct fx *f)
{
	fx_init(f, FX_FLOOR);
	uint64_t s[SESSIONS];
	for (int i = 0; i < SESSIONS; i++)
		s[i] = fx_session(f);
	static char values[20][RAFTLOCK_VALUE_MAX + 1];
	static char names[20][40];
	struct op ops[20];
	for (int i = 0; i < LOCKS; i += 20) {
		for (int k = 0; k < 20; k++) {
			int n = i + k;
			size_t len = (size_t)(n * 2731) % (RAFTLOCK_VALUE_MAX + 1);
			for (size_t j = 0; j < len; j++)
				values[k][j] = (char)('a' + (n + j * j) % 26);
			values[k][len] = '\0';
			snprintf(names[k], sizeof names[k], "stream/%d/%0*d", n % 5, 1 + n % 9, n);
			ops[k] = OP(ACQUIRE, .session = s[n % SESSIONS], .owner = (uint64_t)n + 1,
				    .name = names[k], .value = values[k]);
		}
		fx_apply(f, ops, 20);
	}
	fx_enqueue(f, OP(ACQUIRE, .session = s[1], .owner = 7, .name = "stream/0/0"));
	fx_enqueue(f, OP(ACQUIRE, .session = s[2], .owner = 7, .name = "stream/0/0"));
}

/* The target of a load: a store with a state of its own, and that state's
 * image and byte count, which a failed load must leave as they were. */
struct target {
	struct fx *fx;
	struct fx_image was;
	uint64_t bytes;
};

static struct target target_new(struct fx *f)
{
	struct target t = {.fx = fx_peer(f)};
	t.fx->now = 500;
	fx_init(t.fx, 7);
	fx_take(t.fx, fx_session(t.fx), 1, "mine");
	t.was = fx_dump(t.fx);
	t.bytes = store_record_bytes(&t.fx->store);
	return t;
}

static void assert_unchanged(const struct target *t)
{
	fx_assert_image(t->fx, &t->was);
	assert_int_equal(store_record_bytes(&t->fx->store), t->bytes);
}

/* Gives the target its own state again, after a load that succeeded. */
static void target_reset(struct target *t)
{
	assert_int_equal(store_load(&t->fx->store, t->was.buf, t->was.len), 0);
	assert_unchanged(t);
}

/* f's state as a snapshot's packed image (image_pack_at()), kept by f. */
static const uint8_t *packed_state(struct fx *f, size_t *n, size_t *raw_len)
{
	MDB_txn *txn = store_begin(&f->store, false);
	void *packed;
	assert_int_equal(image_pack_at(&f->store, txn, malloc, free, NULL, &packed, n, raw_len), 0);
	store_abort(txn);
	return fx_keep(f, packed);
}

/* f's state packed, a target, and a copy of the packed image (with room
 * for more bytes) to damage. */
struct damage {
	const uint8_t *packed;
	size_t n, frame; /* the packed image's bytes, its frame's */
	struct target t;
	uint8_t *copy;
};

static struct damage damage_setup(struct fx *f, size_t room)
{
	fill(f);
	struct damage d;
	size_t raw_len;
	d.packed = packed_state(f, &d.n, &raw_len);
	d.frame = d.n - IMAGE_PACK_HEAD - IMAGE_SUM_SIZE;
	d.t = target_new(f);
	d.copy = fx_alloc(f, d.n + room);
	return d;
}

/* Loads the packed image of n bytes at buf through a buffer that starts
 * at stage bytes. */
static int load_staged(struct fx *g, const void *buf, size_t n, size_t stage)
{
	struct image_unpacker u;
	int rv = image_unpacker_begin(&u, buf, n, stage);
	if (rv != 0)
		return rv;
	rv = store_load_from(&g->store, &u.r);
	image_unpacker_end(&u);
	return rv;
}

/* A packed image, as image_pack_at() writes one, of the n bytes at raw
 * (any bytes: the frame is good whatever they are). Kept by f. */
static uint8_t *pack_bytes(struct fx *f, const uint8_t *raw, size_t n, size_t *len)
{
	size_t cap = IMAGE_PACK_HEAD + ZSTD_compressBound(n) + IMAGE_SUM_SIZE;
	uint8_t *out = fx_alloc(f, cap);
	ZSTD_CCtx *c = ZSTD_createCCtx();
	assert_non_null(c);
	assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1)));
	size_t frame = ZSTD_compress2(c, out + IMAGE_PACK_HEAD, cap - IMAGE_PACK_HEAD, raw, n);
	assert_false(ZSTD_isError(frame));
	ZSTD_freeCCtx(c);
	memcpy(out, IMAGE_PACK_MAGIC, 8);
	be_put(out + 8, n, 8);
	memcpy(out + 16, raw + 8, 8); /* the image's index */
	*len = IMAGE_PACK_HEAD + frame + IMAGE_SUM_SIZE;
	be_put(out + *len - IMAGE_SUM_SIZE, image_sum_words_of(out, *len - IMAGE_SUM_SIZE), 8);
	return out;
}

/* Seals the packed image of n bytes at buf with the sum of what precedes
 * it, so that what it holds is judged by the deeper checks. */
static void reseal(uint8_t *buf, size_t n)
{
	be_put(buf + n - IMAGE_SUM_SIZE, image_sum_words_of(buf, n - IMAGE_SUM_SIZE), 8);
}

/* Sets the checksum that closes the image of n bytes at img. */
static void resum(uint8_t *img, size_t n)
{
	be_put(img + n - IMAGE_SUM_SIZE, image_sum_of(img, n - IMAGE_SUM_SIZE), 8);
}

/* The bytes of the record that starts at image offset at. */
static size_t record_len(const uint8_t *img, size_t at)
{
	size_t klen = (size_t)be_get(img + at + 1, 4);
	return 9 + klen + (size_t)be_get(img + at + 5 + klen, 4);
}

/* Asserts that the packed image of n bytes at buf is refused with rv,
 * by both loads, and leaves t as it was. */
static void assert_refused(struct target *t, const uint8_t *buf, size_t n, int rv)
{
	assert_int_equal(load_staged(t->fx, buf, n, 4096), rv);
	assert_unchanged(t);
	assert_int_equal(image_unpack_load(&t->fx->store, buf, n), rv);
	assert_unchanged(t);
}

static void test_same_store_as_the_whole_buffer_load(void **state)
{
	struct fx *f = *state;
	fill(f);
	size_t n, raw_len;
	const uint8_t *packed = packed_state(f, &n, &raw_len);
	print_message("measure: image %zu bytes (%.1f stages), packed %zu\n", raw_len,
		      (double)raw_len / STAGE, n);
	assert_true(raw_len > 3 * STAGE);

	/* The whole-buffer load. */
	struct fx *whole = fx_peer(f);
	void *img;
	assert_int_equal(image_unpack(packed, n, &img, &raw_len), 0);
	assert_int_equal(store_load(&whole->store, img, raw_len), 0);
	free(img);
	uint64_t bytes = store_record_bytes(&whole->store);
	assert_int_equal(bytes, store_record_bytes(&f->store));

	/* Streamed, through buffers that start from one byte to the real one,
	 * into a store that held another state. */
	const size_t stages[] = {1, 7, 64, 1000, 4096, 65536, 0};
	struct target t = target_new(f);
	for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
		target_reset(&t);
		if (stages[i] == 0)
			assert_int_equal(image_unpack_load(&t.fx->store, packed, n), 0);
		else
			assert_int_equal(load_staged(t.fx, packed, n, stages[i]), 0);
		fx_assert_same_state(whole, t.fx);
		assert_int_equal(store_record_bytes(&t.fx->store), bytes);
		fx_restart(t.fx); /* counts every record afresh */
		assert_int_equal(store_record_bytes(&t.fx->store), bytes);
		fx_assert_same_state(whole, t.fx);
	}
}

/* A frame cut at several points, or followed by other bytes, each sealed
 * with a right sum: refused once the stream runs out, after records of it
 * were put. */
static void test_cut_or_lengthened_stream_refused(void **state)
{
	struct fx *f = *state;
	struct damage d = damage_setup(f, 16);
	size_t n = d.n, frame = d.frame;
	/* its first bytes, its quarters, all but zstd's checksum, or a byte */
	size_t q = frame / 4;
	const size_t cuts[] = {0, 1, 100, q, 2 * q, 3 * q, frame - 4, frame - 1};
	for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
		size_t m = IMAGE_PACK_HEAD + cuts[i] + IMAGE_SUM_SIZE;
		memcpy(d.copy, d.packed, IMAGE_PACK_HEAD + cuts[i]);
		reseal(d.copy, m);
		assert_refused(&d.t, d.copy, m, RAFTLOCK_EDATA);
	}
	/* Other bytes after the frame: garbage, and a second frame. */
	for (size_t more = 1; more <= 16; more += 15) {
		memcpy(d.copy, d.packed, n - IMAGE_SUM_SIZE);
		for (size_t i = 0; i < more; i++)
			d.copy[n - IMAGE_SUM_SIZE + i] = (uint8_t)(0x28 + i);
		reseal(d.copy, n + more);
		assert_refused(&d.t, d.copy, n + more, RAFTLOCK_EDATA);
	}
	uint8_t *two = fx_alloc(f, n + frame);
	memcpy(two, d.packed, n - IMAGE_SUM_SIZE);
	memcpy(two + n - IMAGE_SUM_SIZE, d.packed + IMAGE_PACK_HEAD, frame);
	reseal(two, n + frame);
	assert_refused(&d.t, two, n + frame, RAFTLOCK_EDATA);
	/* A header that says one byte less or more, or another index. */
	for (int field = 8; field <= 16; field += 8) {
		for (int delta = -1; delta <= 1; delta += 2) {
			memcpy(d.copy, d.packed, n);
			be_put(d.copy + field, be_get(d.copy + field, 8) + (uint64_t)(int64_t)delta,
			       8);
			reseal(d.copy, n);
			assert_refused(&d.t, d.copy, n, RAFTLOCK_EDATA);
		}
	}
	/* The same bytes as they were load. */
	assert_int_equal(load_staged(d.t.fx, d.packed, n, 4096), 0);
	fx_assert_same_state(f, d.t.fx);
}

/* A bit changed at several points of the frame, sealed: the stream fails
 * (zstd's checks, its checksum at the end at the latest) with the target
 * as it was, or unpacks to the very image. */
static void test_damaged_stream_refused(void **state)
{
	struct fx *f = *state;
	struct damage d = damage_setup(f, 0);
	unsigned refused = 0;
	for (size_t k = 0; k < FLIPS; k++) {
		memcpy(d.copy, d.packed, d.n);
		d.copy[IMAGE_PACK_HEAD + k * (d.frame - 1) / (FLIPS - 1)] ^=
			(uint8_t)(1u << (k % 8));
		reseal(d.copy, d.n);
		int rv = load_staged(d.t.fx, d.copy, d.n, 4096);
		if (rv == 0) { /* a bit zstd does not read */
			fx_assert_same_state(f, d.t.fx);
			target_reset(&d.t);
			continue;
		}
		assert_int_equal(rv, RAFTLOCK_EDATA);
		assert_unchanged(&d.t);
		refused++;
	}
	print_message("measure: %u of %d sealed bit flips refused\n", refused, FLIPS);
	assert_true(refused > 0);
}

/* Images that a good frame carries but that are not whole images: each is
 * refused after records of it were put. The frame of the image as it is
 * loads, so what fails is the image. */
static void test_damaged_image_in_a_good_frame_refused(void **state)
{
	struct fx *f = *state;
	fill(f);
	struct fx_image im = fx_dump(f);
	struct target t = target_new(f);
	size_t len, good_len;
	const uint8_t *good = pack_bytes(f, im.buf, im.len, &good_len);
	uint8_t *img = fx_alloc(f, im.len + 8);

	/* A checksum or a record's byte changed. */
	const size_t flips[] = {im.len - 1, im.len - IMAGE_SUM_SIZE, im.len / 2, 20};
	for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
		memcpy(img, im.buf, im.len);
		img[flips[i]] ^= 0x10;
		const uint8_t *p = pack_bytes(f, img, im.len, &len);
		assert_refused(&t, p, len, RAFTLOCK_EDATA);
	}

	/* Two records swapped, far into the image, under a right checksum:
	 * out of order. */
	memcpy(img, im.buf, im.len);
	size_t at = 16, seen = 0;
	while (seen < LOCKS / 2 || img[at] != 3 || img[at + record_len(img, at)] != 3) {
		seen += img[at] == 3;
		at += record_len(img, at);
	}
	size_t a = record_len(img, at), b = record_len(img, at + a);
	uint8_t *swap = fx_alloc(f, a + b);
	memcpy(swap, img + at + a, b);
	memcpy(swap + b, img + at, a);
	memcpy(img + at, swap, a + b);
	resum(img, im.len);
	const uint8_t *p = pack_bytes(f, img, im.len, &len);
	assert_refused(&t, p, len, RAFTLOCK_EDATA);

	/* A record twice in a row (the second in place of its successor), and
	 * a record whose key length says 4 GiB, each under a right checksum. */
	uint8_t *dup = fx_alloc(f, im.len + a);
	memcpy(dup, im.buf, at + a);
	memcpy(dup + at + a, im.buf + at, a);
	memcpy(dup + at + 2 * a, im.buf + at + a + b, im.len - (at + a + b));
	resum(dup, im.len - b + a);
	p = pack_bytes(f, dup, im.len - b + a, &len);
	assert_refused(&t, p, len, RAFTLOCK_EDATA);
	memcpy(img, im.buf, im.len);
	memset(img + at + 1, 0xff, 4);
	resum(img, im.len);
	p = pack_bytes(f, img, im.len, &len);
	assert_refused(&t, p, len, RAFTLOCK_EDATA);

	/* Cut in the middle of a record, or before its end byte, and summed. */
	const size_t keep[] = {at + a / 2 + IMAGE_SUM_SIZE, im.len - 1};
	for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
		memcpy(img, im.buf, keep[i] - IMAGE_SUM_SIZE);
		resum(img, keep[i]);
		p = pack_bytes(f, img, keep[i], &len);
		assert_refused(&t, p, len, RAFTLOCK_EDATA);
	}

	/* Bytes after the image's checksum. */
	memcpy(img, im.buf, im.len);
	memset(img + im.len, 0, 8);
	p = pack_bytes(f, img, im.len + 8, &len);
	assert_refused(&t, p, len, RAFTLOCK_EDATA);

	assert_int_equal(image_unpack_load(&t.fx->store, good, good_len), 0);
	fx_assert_same_state(f, t.fx);
}

/* A reader over an image in memory that gives it `piece` bytes at a time,
 * and fails with `error` when asked for bytes past `fail_at`. */
struct pieces {
	struct image_reader r;
	const uint8_t *image;
	size_t n, given, piece, fail_at;
	uint8_t *buf;
	int error;
};

static int pieces_fill(struct image_reader *r, size_t want)
{
	struct pieces *p = (struct pieces *)r;
	size_t kept = r->len - r->at;
	uint8_t *buf = malloc(kept + want + p->piece);
	assert_non_null(buf);
	if (kept > 0)
		memcpy(buf, r->buf + r->at, kept);
	free(p->buf);
	p->buf = buf;
	r->buf = buf;
	r->at = 0;
	r->len = kept;
	while (r->len < want && p->given < p->n) {
		if (p->given + p->piece > p->fail_at)
			return p->error;
		size_t k = p->n - p->given < p->piece ? p->n - p->given : p->piece;
		memcpy(buf + r->len, p->image + p->given, k);
		r->len += k;
		p->given += k;
	}
	return 0;
}

static int load_pieces(struct fx *g, const struct fx_image *im, size_t piece, size_t fail_at,
		       int error)
{
	struct pieces p = {.r = {.fill = pieces_fill},
			   .image = im->buf,
			   .n = im->len,
			   .piece = piece,
			   .fail_at = fail_at,
			   .error = error};
	int rv = store_load_from(&g->store, &p.r);
	free(p.buf);
	return rv;
}

/* Any piece size loads the same store; a reader's error at any point
 * is the load's, with nothing of the image kept. */
static void test_reader_pieces_and_errors(void **state)
{
	struct fx *f = *state;
	fill(f);
	struct fx_image im = fx_dump(f);
	const size_t pieces[] = {1, 2, 3, 5, 13, 4093};
	struct target t = target_new(f);
	for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
		target_reset(&t);
		assert_int_equal(load_pieces(t.fx, &im, pieces[i], SIZE_MAX, 0), 0);
		fx_assert_same_state(f, t.fx);
		assert_int_equal(store_record_bytes(&t.fx->store), store_record_bytes(&f->store));
	}
	target_reset(&t);
	const size_t fails[] = {0, 10, 17, im.len / 3, im.len - 9, im.len - 1};
	for (size_t i = 0; i < sizeof fails / sizeof fails[0]; i++) {
		assert_int_equal(load_pieces(t.fx, &im, 1000, fails[i], RAFTLOCK_ENOMEM),
				 RAFTLOCK_ENOMEM);
		assert_unchanged(&t);
		assert_int_equal(load_pieces(t.fx, &im, 1000, fails[i], RAFTLOCK_EDATA),
				 RAFTLOCK_EDATA);
		assert_unchanged(&t);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
		T(test_same_store_as_the_whole_buffer_load),
		T(test_cut_or_lengthened_stream_refused),
		T(test_damaged_stream_refused),
		T(test_damaged_image_in_a_good_frame_refused),
		T(test_reader_pieces_and_errors),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
