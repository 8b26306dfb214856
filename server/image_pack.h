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

/* Unpacks a packed image into a buffer from malloc (owned by the caller),
 * checking everything: the sum and header, the frame and zstd's checksum,
 * the length, the image's magic and own checksum, and its index against
 * the header's. Returns 0, RAFTLOCK_EDATA or RAFTLOCK_ENOMEM. */
int image_unpack(const void *buf, size_t n, void **out, size_t *raw_len);

#endif
