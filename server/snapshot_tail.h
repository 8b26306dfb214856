/*
 * snapshot_tail.h: a raft snapshot made of a state image and the entries
 * applied after it.
 *
 * libraft 0.22.1 asks for a snapshot on the loop and wants it whole at
 * once (docs/RAFT-NOTES.md). From feature level FEATURES_SNAPSHOT_TAIL a
 * node dumps its image off the loop instead (image_build.h), from a read
 * transaction at applied index I, while the loop goes on applying. When
 * libraft next asks, at index S, the snapshot is that image followed by a
 * tail: the log entries the node applied after I, up to S, as they were in
 * the log. State at S = image at I + those entries applied again, which
 * apply's determinism guarantees (GUARANTEES, "Snapshots").
 *
 * Layout of the tail, after the image's own bytes: entries (index 8 bytes
 * BE, length 4 bytes BE, the entry's bytes), then a trailer of
 * SNAPSHOT_TAIL_TRAILER bytes: the entry count (4 BE), the entries' bytes
 * (8 BE), the sum (image.h, by words: as of an image of magic
 * IMAGE_MAGIC_WORDS followed by everything in the tail before the sum),
 * and the magic "RLTAIL01". A snapshot without that magic at its end is an
 * image alone. The image keeps its own magic and checksum.
 *
 * No I/O; allocation only where said. Any thread.
 */
#ifndef RAFTLOCK_SNAPSHOT_TAIL_H
#define RAFTLOCK_SNAPSHOT_TAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsm.h"
#include "store.h"

#define SNAPSHOT_TAIL_MAGIC "RLTAIL01"
#define SNAPSHOT_TAIL_TRAILER (4 + 8 + 8 + 8)
#define SNAPSHOT_TAIL_ENTRY_HEAD (8 + 4)

/* Entries being collected; zeroed to start, snapshot_tail_reset() to empty,
 * snapshot_tail_free() to end. */
struct snapshot_tail {
	uint8_t *buf;
	size_t len, cap;
	uint32_t n;
	uint64_t last; /* the index of the last entry added, 0 if none */
};

/* Appends an entry (its bytes copied). Indexes must grow. Returns 0 or
 * RAFTLOCK_ENOMEM (the tail as it was). */
int snapshot_tail_add(struct snapshot_tail *t, uint64_t index, const void *entry, size_t n);

/* Closes the tail with its trailer into a buffer from alloc (owned by the
 * caller: the second buffer of a snapshot); t is left empty. Returns 0 or
 * RAFTLOCK_ENOMEM (t unchanged). */
int snapshot_tail_finish(struct snapshot_tail *t, void *(*alloc)(size_t), void **out, size_t *n);

void snapshot_tail_reset(struct snapshot_tail *t);
void snapshot_tail_free(struct snapshot_tail *t);

/* A snapshot taken apart: the image, and the tail's entries if any. */
struct snapshot_parts {
	const uint8_t *image;
	size_t image_len;
	const uint8_t *entries; /* NULL: no tail */
	size_t entries_len;
	uint32_t n_entries;
	bool packed;          /* a packed image (image_pack.h) */
	size_t raw_len;       /* the image's length, unpacked */
	uint64_t image_index; /* the image's applied index */
	uint64_t index;       /* the state's index: the last entry's, or the image's */
};

/* Splits a snapshot of n bytes and checks both sums (of a packed image,
 * the sum over its packed bytes: snapshot_load() checks the rest as it
 * unpacks it), every entry's frame and that the entries' indexes grow
 * past the image's. Returns 0 or RAFTLOCK_EDATA (damaged). */
int snapshot_split(const void *buf, size_t n, struct snapshot_parts *out);

/* Loads a snapshot into a store whose applied index is below the
 * snapshot's: the image (store_load; a packed one as it is unpacked,
 * image_unpack_load), then each entry of the tail applied
 * by f as a log entry of its index, with sink (NULL: events dropped; the
 * caller rebuilds what it derives from the store). Returns 0,
 * RAFTLOCK_EDATA (damaged: the store is as the image left it, or as it was
 * when the image itself was refused) or RAFTLOCK_ENOMEM (unchanged). An
 * entry that does not apply stops the node as in the log (fsm_apply_raw). */
int snapshot_load(struct store *s, struct fsm *f, const struct snapshot_parts *parts,
		  const struct fsm_sink *sink);

#endif
