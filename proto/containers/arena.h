/*
 * arena.h: a bump allocator for messages that are decoded, used and
 * dropped together, such as a log entry during its apply. protobuf-c's
 * unpack takes it as its allocator (&arena->pb): one malloc'd chunk
 * serves every submessage, string and array of the message, freeing one
 * of them does nothing, and arena_reset() drops them all at once. No I/O;
 * one owner at a time (not thread-safe).
 *
 * Under AddressSanitizer what a reset drops is poisoned, and allocations
 * are kept apart by a poisoned gap, so a pointer kept past the reset or
 * an overrun is still reported.
 */
#ifndef RAFTLOCK_ARENA_H
#define RAFTLOCK_ARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

/* The first chunk's size; each next one doubles. */
#define ARENA_FIRST 4096
/* The largest chunk a reset keeps: a larger one served a rare message. */
#define ARENA_KEEP_MAX (1u << 20)

struct arena_chunk;

struct arena {
	ProtobufCAllocator pb;    /* hand &pb to protobuf-c */
	struct arena_chunk *head; /* newest and largest chunk first */
};

/* An empty arena: no memory until the first allocation. */
void arena_init(struct arena *a);

/*
 * n bytes aligned for any type, valid until the next arena_reset() or
 * arena_fini(); owned by the arena. Returns NULL when out of memory (or n
 * is beyond what can be allocated).
 */
void *arena_alloc(struct arena *a, size_t n);

/*
 * Ends every allocation made since the last reset. The largest chunk of
 * at most ARENA_KEEP_MAX bytes is kept, so a message of the same size
 * needs no malloc the next time.
 */
void arena_reset(struct arena *a);

/* Frees all the arena's memory; a can be initialized again. */
void arena_fini(struct arena *a);

#endif
