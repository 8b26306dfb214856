/*
 * image_build.h: a snapshot's image dumped off the loop.
 *
 * libraft 0.22.1 takes a snapshot on the loop and wants it whole at once;
 * a dump of the state stalls the loop for as long as it takes (223 ms at a
 * million locks, 6.5-10.8 s at ten million: tests/bench/RESULTS.md). From
 * feature level FEATURES_SNAPSHOT_TAIL node.c answers libraft's first ask
 * with RAFT_BUSY and starts a build instead: a read transaction begun on
 * the loop at applied index I, dumped by libuv's thread pool while the
 * loop goes on applying and every entry applied meanwhile is noted. At a
 * later ask, at index S, the image and the tail of entries I+1..S are the
 * snapshot (snapshot_tail.h).
 *
 * The loop thread calls everything here; the dump alone runs in a worker,
 * reading through its own transaction (store_dump_at()).
 */
#ifndef RAFTLOCK_IMAGE_BUILD_H
#define RAFTLOCK_IMAGE_BUILD_H

#include <lmdb.h>
#include <pthread.h>
#include <raft.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "snapshot_tail.h"
#include "store.h"

enum image_build_state {
	IMAGE_BUILD_IDLE,
	IMAGE_BUILD_RUNNING, /* a worker dumps; entries applied are noted */
	IMAGE_BUILD_READY,   /* the image is whole; entries applied are noted */
};

struct image_build {
	uv_loop_t *loop;
	struct store *store;
	enum image_build_state state;
	uv_work_t work;
	MDB_txn *txn; /* the dump's read transaction, the worker's while running */
	atomic_bool stop;
	bool discard;       /* what the running dump makes is not wanted */
	bool spoilt;        /* an entry could not be noted: the build is lost */
	bool failed;        /* the last build was lost: take the next on the loop */
	bool closed;        /* image_build_close() ran: the completion frees only */
	unsigned notes;     /* entries noted since the map's last check */
	pthread_mutex_t mu; /* with cond: worker_done, for image_build_close() */
	pthread_cond_t cond;
	bool worker_done;
	int rv;      /* the dump's: 0, RAFTLOCK_ENOMEM or RAFTLOCK_EUNAVAILABLE (stopped) */
	bool packed; /* the image is packed (image_pack.h): the state's level */
	void *image; /* from raft_malloc */
	size_t image_len;
	size_t raw_len;       /* the image's length unpacked */
	uint64_t image_index; /* the applied index the image holds */
	uint64_t started_ns;
	uint64_t dump_ns;  /* the worker's time on the last image made */
	unsigned delay_ms; /* tests: the worker waits this long before it dumps */
	struct snapshot_tail tail;
};

void image_build_init(struct image_build *b, uv_loop_t *loop, struct store *store);

/* Starts a build from the state as it is now (state IDLE). Returns 0 or
 * RAFTLOCK_ENOMEM / RAFTLOCK_EINTERNAL (nothing started). */
int image_build_start(struct image_build *b);

/* Whether the last build was lost (out of memory, or stopped because the
 * map filled while the dump held its pages): the caller then takes one
 * snapshot on the loop, and clears this with image_build_fallback_done(). */
bool image_build_failed(const struct image_build *b);
void image_build_fallback_done(struct image_build *b);

/* Notes an entry just applied at index (buf borrowed for the call). While
 * a dump runs, the pages the loop frees cannot be reused (the dump's
 * transaction still sees them), so the store's file grows; past 3/4 of
 * the map the dump is stopped and the build lost. */
void image_build_note(struct image_build *b, uint64_t index, const void *buf, size_t len);

/* Hands over a READY build as a snapshot of two buffers (the image, then
 * the tail), in an array from raft_malloc as libraft wants it (libraft
 * frees all of it). The build is IDLE after. Returns 0 or RAFTLOCK_ENOMEM
 * (the build dropped). */
int image_build_take(struct image_build *b, struct raft_buffer **bufs, unsigned *n_bufs);

/* Drops the build: a running dump is stopped and its image freed when it
 * returns. For a state replaced under it (a restore). */
void image_build_discard(struct image_build *b);

/* Drops the build and waits until no worker reads the store, which may
 * then close. What the worker made is freed here; the build's completion,
 * should the loop still run it, does nothing. */
void image_build_close(struct image_build *b);

#endif
