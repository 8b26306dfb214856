/*
 * heap.h: gives the heap's free pages back to the system, with the
 * allocator raftlockd was linked with: jemalloc (RAFTLOCK_JEMALLOC) purges
 * every arena, glibc trims its heaps (it keeps them otherwise).
 *
 * Any thread; it may take a while on a large heap.
 */
#ifndef RAFTLOCK_HEAP_H
#define RAFTLOCK_HEAP_H

/* 0, or the allocator's error (an errno value). */
int heap_trim(void);

#endif
