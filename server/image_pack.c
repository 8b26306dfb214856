/* image_pack.c: see image_pack.h. */
#include "image_pack.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "byteorder.h"
#include "image.h"
#include "raftlock.h"

#define PACK_LEVEL 1         /* zstd's fastest standard level */
#define PACK_WINDOW_LOG 20   /* 1 MiB: what a member needs to unpack */
#define UNPACK_WINDOW_LOG 24 /* the most a frame may ask of an unpacker */
#define PACK_STAGE (1u << 20)

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

/* Unpacks the frame into a buffer from malloc of exactly raw bytes: 0 once
 * the frame (its checksum checked) ended there and at the end of the
 * input. The buffer grows with what the frame gives, so that a header that
 * lies about the length costs no more memory than the frame makes. */
static int unpack_frame(const uint8_t *frame, size_t n, size_t raw, uint8_t **img)
{
	ZSTD_DCtx *d = ZSTD_createDCtx();
	size_t cap = n < raw / 4 ? n * 4 : raw;
	if (cap < (64u << 10))
		cap = raw < (64u << 10) ? raw : (64u << 10);
	uint8_t *buf = malloc(cap);
	int rv = RAFTLOCK_ENOMEM;
	if (d == NULL || buf == NULL)
		goto out;
	rv = RAFTLOCK_EDATA;
	if (ZSTD_isError(ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, UNPACK_WINDOW_LOG)))
		goto out;
	ZSTD_inBuffer in = {frame, n, 0};
	ZSTD_outBuffer out = {buf, cap, 0};
	for (;;) {
		if (out.pos == cap && cap < raw) {
			size_t more = cap > raw / 2 ? raw : cap * 2;
			uint8_t *grown = realloc(buf, more);
			if (grown == NULL) {
				rv = RAFTLOCK_ENOMEM;
				goto out;
			}
			buf = grown;
			cap = more;
			out = (ZSTD_outBuffer){buf, cap, out.pos};
		}
		size_t in_before = in.pos, out_before = out.pos;
		size_t left = ZSTD_decompressStream(d, &out, &in);
		if (ZSTD_isError(left))
			goto out;
		if (left == 0) { /* the frame ended */
			if (out.pos == raw && in.pos == in.size)
				rv = 0;
			goto out;
		}
		if (in.pos == in_before && out.pos == out_before)
			goto out; /* cut short, or longer than said */
	}
out:
	ZSTD_freeDCtx(d);
	if (rv == 0)
		*img = buf;
	else
		free(buf);
	return rv;
}

int image_unpack(const void *buf, size_t n, void **out, size_t *raw_len)
{
	uint64_t index, image_index;
	size_t raw;
	int rv = image_pack_head(buf, n, &index, &raw);
	if (rv != 0)
		return rv;
	uint8_t *img = NULL;
	rv = unpack_frame((const uint8_t *)buf + IMAGE_PACK_HEAD,
			  n - IMAGE_PACK_HEAD - IMAGE_SUM_SIZE, raw, &img);
	if (rv == 0 && (store_image_index(img, raw, &image_index) != 0 || image_index != index))
		rv = RAFTLOCK_EDATA;
	if (rv != 0) {
		free(img);
		return rv;
	}
	*out = img;
	*raw_len = raw;
	return 0;
}
