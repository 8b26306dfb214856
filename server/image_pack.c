/* image_pack.c: see image_pack.h. */
#include "image_pack.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "byteorder.h"
#include "image.h"
#include "raftlock.h"

#define PACK_LEVEL 1         /* zstd's fastest standard level */
#define PACK_WINDOW_LOG 20   /* 1 MiB: what a member needs to unpack */
#define UNPACK_WINDOW_LOG 24 /* the most a frame may ask of an unpacker */
#define PACK_STAGE (1u << 20)
#define UNPACK_STAGE (1u << 20)

bool image_is_packed(const void *buf, size_t n)
{
	return n >= IMAGE_PACK_HEAD && memcmp(buf, IMAGE_PACK_MAGIC, 8) == 0;
}

/* ------------------------------------------------------------- packing -- */

struct packer {
	struct image_writer w; /* first: the dump's writer is the packer */
	ZSTD_CCtx *cctx;
	uint8_t *out;
	size_t out_len, out_cap;
	uint64_t raw;     /* image bytes packed so far */
	uint8_t head[16]; /* the image's first bytes: magic and index */
};

/* Packs n bytes at p with mode; RAFTLOCK_ENOMEM when out is full (its
 * bound was wrong) or zstd fails. */
static int pack(struct packer *k, const void *p, size_t n, ZSTD_EndDirective mode)
{
	for (size_t i = 0; i < n && k->raw + i < sizeof k->head; i++)
		k->head[k->raw + i] = ((const uint8_t *)p)[i];
	ZSTD_inBuffer in = {p, n, 0};
	for (;;) {
		ZSTD_outBuffer out = {k->out, k->out_cap, k->out_len};
		size_t left = ZSTD_compressStream2(k->cctx, &out, &in, mode);
		k->out_len = out.pos;
		if (ZSTD_isError(left))
			return RAFTLOCK_ENOMEM;
		bool done = mode == ZSTD_e_end ? left == 0 : in.pos == in.size;
		if (done)
			break;
		if (out.pos == out.size)
			return RAFTLOCK_ENOMEM;
	}
	k->raw += n;
	return 0;
}

static int pack_flush(struct image_writer *w, const uint8_t *more, size_t n)
{
	struct packer *k = (struct packer *)w;
	int rv = pack(k, w->buf, w->len, ZSTD_e_continue);
	w->len = 0;
	return rv != 0 ? rv : pack(k, more, n, ZSTD_e_continue);
}

int image_pack_at(struct store *s, MDB_txn *txn, void *(*alloc)(size_t), void (*release)(void *),
		  const atomic_bool *stop, void **out, size_t *n, size_t *raw_len)
{
	uint64_t bound = store_dump_bound(s, txn);
	/* zstd's bound for one pass, and room for the block headers a stream
	 * adds: the pages past the end are never touched. */
	size_t cap = IMAGE_PACK_HEAD + ZSTD_compressBound((size_t)bound) + (size_t)(bound >> 7) +
		     (64u << 10);
	struct packer k = {.w = {.cap = PACK_STAGE, .flush = pack_flush}, .out_cap = cap};
	k.w.buf = malloc(PACK_STAGE);
	k.cctx = ZSTD_createCCtx();
	k.out = alloc(cap);
	int rv = RAFTLOCK_ENOMEM;
	if (k.w.buf == NULL || k.cctx == NULL || k.out == NULL ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(k.cctx, ZSTD_c_compressionLevel, PACK_LEVEL)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(k.cctx, ZSTD_c_windowLog, PACK_WINDOW_LOG)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(k.cctx, ZSTD_c_checksumFlag, 1)))
		goto out;
	memcpy(k.out, IMAGE_PACK_MAGIC, 8);
	k.out_len = IMAGE_PACK_HEAD;
	rv = store_dump_to(s, txn, stop, &k.w);
	if (rv == 0)
		rv = pack(&k, k.w.buf, k.w.len, ZSTD_e_end);
	if (rv == 0 && k.out_cap - k.out_len < IMAGE_SUM_SIZE)
		rv = RAFTLOCK_ENOMEM;
	if (rv == 0) {
		be_put(k.out + 8, k.raw, 8);
		memcpy(k.out + 16, k.head + 8, 8); /* the image's index */
		be_put(k.out + k.out_len, image_sum_words_of(k.out, k.out_len), 8);
		*out = k.out;
		*n = k.out_len + IMAGE_SUM_SIZE;
		*raw_len = (size_t)k.raw;
		k.out = NULL;
	}
out:
	if (k.out != NULL)
		release(k.out);
	ZSTD_freeCCtx(k.cctx);
	free(k.w.buf);
	return rv;
}

/* ----------------------------------------------------------- unpacking -- */

int image_pack_head(const void *buf, size_t n, uint64_t *index, size_t *raw_len)
{
	const uint8_t *b = buf;
	if (!image_is_packed(buf, n) || n < IMAGE_PACK_HEAD + IMAGE_SUM_SIZE ||
	    image_sum_words_of(b, n - IMAGE_SUM_SIZE) != be_get(b + n - IMAGE_SUM_SIZE, 8))
		return RAFTLOCK_EDATA;
	uint64_t raw = be_get(b + 8, 8);
	if (raw < IMAGE_MIN_SIZE || raw > SIZE_MAX / 2)
		return RAFTLOCK_EDATA;
	*raw_len = (size_t)raw;
	*index = be_get(b + 16, 8);
	return 0;
}

static int unpacker_fill(struct image_reader *r, size_t want);

int image_unpacker_begin(struct image_unpacker *u, const void *buf, size_t n, size_t stage)
{
	uint64_t index;
	size_t raw;
	int rv = image_pack_head(buf, n, &index, &raw);
	if (rv != 0)
		return rv;
	/* one byte past the image: a frame that makes more shows it */
	size_t cap = stage == 0 ? 1 : stage < raw + 1 ? stage : raw + 1;
	*u = (struct image_unpacker){
		.r = {.fill = unpacker_fill}, .cap = cap, .raw = raw, .index = index};
	u->in = (ZSTD_inBuffer){(const uint8_t *)buf + IMAGE_PACK_HEAD,
				n - IMAGE_PACK_HEAD - IMAGE_SUM_SIZE, 0};
	u->buf = malloc(cap);
	u->dctx = ZSTD_createDCtx();
	rv = RAFTLOCK_ENOMEM;
	if (u->buf == NULL || u->dctx == NULL)
		goto fail;
	rv = RAFTLOCK_EDATA;
	if (ZSTD_isError(ZSTD_DCtx_setParameter(u->dctx, ZSTD_d_windowLogMax, UNPACK_WINDOW_LOG)))
		goto fail;
	u->r.buf = u->buf;
	return 0;
fail:
	image_unpacker_end(u);
	return rv;
}

void image_unpacker_end(struct image_unpacker *u)
{
	ZSTD_freeDCtx(u->dctx);
	free(u->buf);
	u->dctx = NULL;
	u->buf = NULL;
	u->r = (struct image_reader){0};
}

/* Unpacks what fits after buf[len): 0, RAFTLOCK_EDATA for a frame that
 * is damaged, cut short or not the image its header describes, or
 * RAFTLOCK_ENOMEM when zstd cannot allocate its window. */
static int unpack_some(struct image_unpacker *u)
{
	ZSTD_outBuffer out = {u->buf, u->cap, u->r.len};
	size_t in_before = u->in.pos;
	size_t left = ZSTD_decompressStream(u->dctx, &out, &u->in);
	if (ZSTD_isError(left))
		return ZSTD_getErrorCode(left) == ZSTD_error_memory_allocation ? RAFTLOCK_ENOMEM
									       : RAFTLOCK_EDATA;
	size_t made = out.pos - u->r.len;
	for (size_t i = 0; i < made && u->made + i < sizeof u->head; i++)
		u->head[u->made + i] = u->buf[u->r.len + i];
	u->made += made;
	u->r.len = out.pos;
	if (u->made > u->raw)
		return RAFTLOCK_EDATA; /* longer than said */
	if (left == 0) {
		/* the frame ended, its checksum checked */
		if (u->made != u->raw || u->in.pos != u->in.size ||
		    be_get(u->head + 8, 8) != u->index)
			return RAFTLOCK_EDATA;
		u->ended = true;
		return 0;
	}
	if (u->in.pos == in_before && made == 0)
		return RAFTLOCK_EDATA; /* cut short */
	return 0;
}

/* The reader's fill: what is not taken moves to the buffer's start, and
 * the buffer grows only when a record longer than it is wanted, with
 * what the frame gives, so that a header or a record that lies about its
 * length costs no more memory than the frame makes. */
static int unpacker_fill(struct image_reader *r, size_t want)
{
	struct image_unpacker *u = (struct image_unpacker *)r;
	if (r->at > 0) {
		memmove(u->buf, u->buf + r->at, r->len - r->at);
		r->len -= r->at;
		r->at = 0;
	}
	while (r->len < want && !u->ended) {
		if (r->len == u->cap) {
			size_t more = u->cap > u->raw / 2 ? u->raw + 1 : u->cap * 2;
			uint8_t *grown = realloc(u->buf, more);
			if (grown == NULL)
				return RAFTLOCK_ENOMEM;
			u->buf = grown;
			u->cap = more;
			r->buf = grown;
		}
		int rv = unpack_some(u);
		if (rv != 0)
			return rv;
	}
	return 0;
}

int image_unpack_load(struct store *s, const void *buf, size_t n)
{
	struct image_unpacker u;
	int rv = image_unpacker_begin(&u, buf, n, UNPACK_STAGE);
	if (rv != 0)
		return rv;
	rv = store_load_from(s, &u.r);
	image_unpacker_end(&u);
	return rv;
}

int image_unpack(const void *buf, size_t n, void **out, size_t *raw_len)
{
	/* a first guess from the packed size; the buffer grows from there */
	size_t stage = n < SIZE_MAX / 4 ? n * 4 : n;
	struct image_unpacker u;
	int rv = image_unpacker_begin(&u, buf, n, stage < (64u << 10) ? 64u << 10 : stage);
	if (rv != 0)
		return rv;
	uint64_t image_index;
	rv = u.r.fill(&u.r, u.raw + 1); /* the whole frame, to its end */
	if (rv == 0 && (u.r.len != u.raw || store_image_index(u.buf, u.raw, &image_index) != 0 ||
			image_index != u.index))
		rv = RAFTLOCK_EDATA;
	if (rv == 0) {
		*out = u.buf;
		*raw_len = u.raw;
		u.buf = NULL;
	}
	image_unpacker_end(&u);
	return rv;
}
