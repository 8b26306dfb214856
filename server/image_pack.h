/*
 * image_pack.h: packed images, a state image (store.h) compressed with
 * zstd, which the snapshots of feature level FEATURES_PACKED_IMAGE carry.
 *
 * An image repeats itself a lot (record layouts, owners, name prefixes):
 * packed, a million held locks take a tenth or less of the bytes, and so
 * does everything that holds or moves a snapshot whole (docs/RAFT-NOTES.md:
 * libraft writes it from memory, reads it back whole to send it, and a
 * member receives it whole).
 *
 * Layout: the magic "RLPACK07", the image's length and its applied index
 * (8 bytes BE each), one zstd frame of the image with zstd's content
 * checksum, and the sum (image.h, image_sum_words_of(), 8 bytes BE) of
 * everything before it. That sum covers every byte as written, so damage
 * is refused before zstd reads any of it, and a node that keeps its store
 * at a restart learns the snapshot's index without unpacking it; zstd's
 * checksum, and the image's own once unpacked, check the unpacking.
 *
 * No I/O. Any thread; nothing here is shared between calls.
 */
#ifndef RAFTLOCK_IMAGE_PACK_H
#define RAFTLOCK_IMAGE_PACK_H

#include <lmdb.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

#include "store.h"

#define IMAGE_PACK_MAGIC "RLPACK07"
#define IMAGE_PACK_HEAD 24 /* magic, image length, image index */

/* Whether the n bytes at buf begin as a packed image. */
bool image_is_packed(const void *buf, size_t n);

/* Dumps the image of what txn sees (store_dump_to()) and packs it as it
 * goes, so that the whole image is never in memory: the packed image goes
 * into a buffer from alloc (owned by the caller; the pages past its end are
 * never touched), *raw_len is the image's length. stop as in
 * store_dump_at(). Returns 0, RAFTLOCK_ENOMEM or RAFTLOCK_EUNAVAILABLE
 * (stopped); on an error nothing is left allocated. */
int image_pack_at(struct store *s, MDB_txn *txn, void *(*alloc)(size_t), void (*release)(void *),
		  const atomic_bool *stop, void **out, size_t *n, size_t *raw_len);

/* Checks a packed image's sum and header, without unpacking it: *index is
 * the image's applied index, *raw_len its length. Returns 0 or
 * RAFTLOCK_EDATA (damaged). */
int image_pack_head(const void *buf, size_t n, uint64_t *index, size_t *raw_len);

/* Loads a packed image into s (store_load_from()) as it unpacks it,
 * through a buffer of 1 MiB (more only for a record longer than that), so
 * that the image is never whole in memory: at ten million held locks it
 * is 1.7 GiB. Checks everything image_unpack() does, the records' order
 * too, before the load's transaction commits. Returns 0, RAFTLOCK_EDATA
 * or RAFTLOCK_ENOMEM; on an error s is unchanged. */
int image_unpack_load(struct store *s, const void *buf, size_t n);

/* Unpacks a packed image into a buffer from malloc (owned by the caller),
 * checking everything: the sum and header, the frame and zstd's checksum,
 * the length, the image's magic and own checksum, and its index against
 * the header's. Returns 0, RAFTLOCK_EDATA or RAFTLOCK_ENOMEM. A restore
 * uses image_unpack_load() instead. */
int image_unpack(const void *buf, size_t n, void **out, size_t *raw_len);

/*
 * An unpacking under way, read a piece at a time through r (store.h's
 * image_reader; store_load_from() takes it). Its buffer holds what r has
 * not taken, starting at the stage size and growing only when more is
 * wanted at once. r's fill returns RAFTLOCK_EDATA for a frame that is
 * damaged, cut short, longer than the header says or followed by other
 * bytes, or whose image has another index than the header's; it gives
 * fewer bytes than wanted only once the frame ended and passed those
 * checks. The image's magic and own checksum are the reader's to check.
 * The other fields are the unpacker's.
 */
struct image_unpacker {
	struct image_reader r; /* first: the reader is the unpacker */
	ZSTD_DCtx *dctx;
	ZSTD_inBuffer in; /* the frame */
	uint8_t *buf;
	size_t cap;
	size_t raw;       /* the image's length, as the header says */
	uint64_t index;   /* the image's index, as the header says */
	uint64_t made;    /* image bytes unpacked so far */
	uint8_t head[16]; /* the image's first bytes: magic and index */
	bool ended;       /* the frame ended, checked */
};

/* Starts unpacking the packed image of n bytes at buf (borrowed until
 * image_unpacker_end()) after checking its sum and header; stage is the
 * buffer's first size. Returns 0 (end it with image_unpacker_end()),
 * RAFTLOCK_EDATA or RAFTLOCK_ENOMEM (nothing to end). */
int image_unpacker_begin(struct image_unpacker *u, const void *buf, size_t n, size_t stage);

/* Frees what the unpacker holds; r's bytes go with it. */
void image_unpacker_end(struct image_unpacker *u);

#endif
