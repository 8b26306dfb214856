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
 * Free space is read with statvfs() at most every DISKGUARD_CHECK_MS
 * while it is far above what is asked; diskguard_wait_room() reads it
 * again sooner once the room the entries applied since the last reading
 * may have used, plus DISKGUARD_APPLY_MARGIN for writes it does not
 * count (raft's log segments, other programs), could have eaten it.
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
/* Room an earlier reading must still leave, beyond what the applies
 * since counted, to be trusted for the next apply: a few of raft's log
 * segments and LMDB file growth. Nearer to full, every apply reads. */
#define DISKGUARD_APPLY_MARGIN ((uint64_t)64 << 20)

struct diskguard {
	const char *path; /* borrowed: the data directory */
	uint64_t reserve; /* bytes */
	struct timebase *tb;
	uint64_t checked_ms;
	uint64_t free_bytes; /* at the last check */
	bool full;
	uint64_t room_ms;               /* diskguard_wait_room(): its last reading, */
	uint64_t room_free;             /* the free bytes it found */
	uint64_t room_spent;            /* and the room applied since (worst case) */
	unsigned long long reads;       /* statvfs calls */
	unsigned long long refusals;    /* requests refused for it */
	unsigned long long apply_waits; /* entries that waited for room */
};

void diskguard_init(struct diskguard *g, struct timebase *tb, const char *path, uint64_t reserve);

/* Whether the disk is full now (free space below the reserve). Logs each
 * change. */
bool diskguard_full(struct diskguard *g);

/* Writes the refusal a client gets into msg ("disk full on node N: ...").
 * Counts the refusal. */
void diskguard_refusal(struct diskguard *g, uint64_t node_id, char *msg, size_t len);

/* Returns once the file system has `need` bytes free, checking every
 * DISKGUARD_CHECK_MS (blocking the thread meanwhile, with a message).
 * The caller then writes at most `need` bytes (counted against the last
 * reading: see the top of this file). */
void diskguard_wait_room(struct diskguard *g, uint64_t need, uint64_t index);

#endif
