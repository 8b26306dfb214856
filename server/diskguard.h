/*
 * diskguard.h: the free space of the file system that holds a data
 * directory, and what a node does when it runs low (GUARANTEES, full disk).
 *
 * Below the reserve (--disk-reserve-mb) the disk counts as full: the
 * leader refuses the requests that make the state grow (service.c) with
 * RAFTLOCK_ENOSPC, before anything is proposed, while releases, closes,
 * cancels and renewals go on; they need little room, and the reserve
 * leaves it. As a last line, an entry is applied to LMDB only when the
 * file system has room for it: otherwise the node waits (its loop
 * blocked, so it serves nothing) until there is, rather than fail a write
 * half-way. raft_uv itself retries a segment it cannot allocate.
 *
 * Free space is read with statvfs(): for the refusals at most every
 * DISKGUARD_CHECK_MS; before an apply every time, as a reading kept from
 * earlier cannot see what another writer took since (test_disk_full
 * fills the disk between two applies a few ms apart, and a reading
 * trusted for 100 ms let the second apply go ahead with 1 MB left). It
 * costs one statfs per entry, a few us of the ~100 us a node spends per
 * entry (tests/bench/RESULTS.md, TLS cost).
 * Loop thread only.
 */
#ifndef RAFTLOCK_DISKGUARD_H
#define RAFTLOCK_DISKGUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "timebase.h"

#define DISKGUARD_CHECK_MS 100
/* Room an entry of n bytes needs to apply: LMDB copies the pages it
 * touches and may grow its file by several pages per record. */
#define DISKGUARD_APPLY_ROOM(n) (4 * (uint64_t)(n) + ((uint64_t)2 << 20))

struct diskguard {
	const char *path; /* borrowed: the data directory */
	uint64_t reserve; /* bytes */
	struct timebase *tb;
	uint64_t checked_ms;
	uint64_t free_bytes; /* at the last check */
	bool full;
	unsigned long long reads;       /* statvfs calls */
	unsigned long long refusals;    /* requests refused for it */
	unsigned long long apply_waits; /* entries that waited for room */
	/* Called at every reading while diskguard_wait_room() waits, with
	 * why it waits (NULL: nobody), so that a supervisor keeps hearing
	 * from a node whose loop is held on purpose. */
	void (*on_wait)(void *arg, const char *why);
	void *on_wait_arg;
};

void diskguard_init(struct diskguard *g, struct timebase *tb, const char *path, uint64_t reserve);

/* Whether the disk is full now (free space below the reserve). Logs each
 * change. */
bool diskguard_full(struct diskguard *g);

/* Writes the refusal a client gets into msg ("disk full on node N: ...").
 * Counts the refusal. */
void diskguard_refusal(struct diskguard *g, uint64_t node_id, char *msg, size_t len);

/* Returns once the file system has `need` bytes free, read now, then
 * every DISKGUARD_CHECK_MS (blocking the thread meanwhile, with a
 * message, and on_wait at each reading). */
void diskguard_wait_room(struct diskguard *g, uint64_t need, uint64_t index);

#endif
