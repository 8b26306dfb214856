/*
 * backup.h: the images that `raftlock snapshot save` reads (SNAPSHOT_READ).
 *
 * The leader takes an image of its whole state (store_dump: the raft
 * snapshot format, closed by its checksum) once a read barrier has applied
 * (service.c), and hands it out in chunks of at most BACKUP_CHUNK_MAX
 * bytes, so that an image larger than a frame (RAFTLOCK_FRAME_MAX) travels
 * whole and consistent: every chunk comes from the one image. Each image
 * has a random id; the node holds at most BACKUP_MAX_IMAGES, each until its
 * last byte was handed out or it has been idle for BACKUP_IDLE_MS.
 *
 * Taking an image stalls the loop as a raft snapshot does (store_dump).
 * Loop thread only; no I/O.
 */
#ifndef RAFTLOCK_BACKUP_H
#define RAFTLOCK_BACKUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftlock.pb-c.h"
#include "store.h"

#define BACKUP_CHUNK_MAX (1u << 20)
#define BACKUP_MAX_IMAGES 2
#define BACKUP_IDLE_MS 60000

struct backup_image {
	uint64_t id; /* 0: a free slot */
	uint8_t *buf;
	size_t len;
	uint64_t index;   /* the applied index it holds */
	uint64_t used_ms; /* when it was last read */
	bool done;        /* its last byte went out: dropped at the next call */
};

struct backup {
	struct backup_image images[BACKUP_MAX_IMAGES];
};

void backup_init(struct backup *b);

/* Takes an image of st as it is now. Returns 0 with its id, or
 * RAFTLOCK_EOVERLOAD (BACKUP_MAX_IMAGES are being read) or
 * RAFTLOCK_ENOMEM. */
int backup_take(struct backup *b, struct store *st, uint64_t now_ms, uint64_t *id);

/*
 * Fills out with the bytes of image id from offset (at most
 * BACKUP_CHUNK_MAX; out->data borrows the image's buffer until the next
 * call on b). Returns 0, RAFTLOCK_ENOTFOUND (no such image here: start
 * again) or RAFTLOCK_EINVAL (offset past its end).
 */
int backup_chunk(struct backup *b, uint64_t id, uint64_t offset, uint64_t now_ms,
		 Raftlock__SnapshotChunk *out);

/* Frees every image. */
void backup_close(struct backup *b);

#endif
