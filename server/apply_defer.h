/*
 * apply_defer.h: a follower's applies, held until its loop has polled
 * once more, so that the disk write raft issued just before them runs
 * beside them instead of after them.
 *
 * libraft 0.22.1 applies the entries a follower learns are committed in
 * the callback that receives the leader's next AppendEntries, right after
 * it issues that entry's disk write. raft_uv issues the write as Linux AIO
 * with RWF_NOWAIT, which ext4 refuses (EAGAIN) for blocks of a segment not
 * written yet (raft_uv fallocates its segments: unwritten extents), so
 * most writes of more than a few commands are refused. raft_uv learns of
 * the refusal on its eventfd and hands the write to its thread pool, but
 * only once the loop polls again: after the apply. The follower's answer,
 * which the leader's commit waits for, then came after the apply and the
 * write one after the other (strace at 64 clients: 0.5 ms of apply, then
 * the write). Held here, the applies run after that poll, beside the
 * write.
 *
 * The held entries are copies, applied in log order with the index raft
 * gave each. node.c applies them before anything that reads the state as
 * of raft's applied index: a snapshot, a restore, an apply as leader or
 * candidate, a change of role, the stop; and at once when the bounds below
 * would be passed. Reads on a follower are stale by design (GUARANTEES
 * rule 13), and the loop turn this adds is within that. Loop thread only.
 */
#ifndef RAFTLOCK_APPLY_DEFER_H
#define RAFTLOCK_APPLY_DEFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Entries and bytes held at most: past them, every held entry is applied
 * and the new one too, as without this module (a follower catching up, a
 * start's replay). */
#define APPLY_DEFER_MAX_ENTRIES 64
#define APPLY_DEFER_MAX_BYTES (4u << 20)

struct apply_defer_entry {
	uint64_t index;
	size_t len;
	void *buf; /* a copy, owned */
};

struct apply_defer {
	struct apply_defer_entry v[APPLY_DEFER_MAX_ENTRIES];
	size_t n, bytes;
	uint64_t turns;     /* loop turns counted by apply_defer_turn() */
	uint64_t held_turn; /* turns when the first held entry came */
};

typedef void (*apply_defer_fn)(void *arg, uint64_t index, const void *buf, size_t len);

/* Holds a copy of entry index; false when it would pass a bound, or the
 * copy cannot be made: the caller then drains and applies it itself. */
bool apply_defer_hold(struct apply_defer *d, uint64_t index, const void *buf, size_t len);

/* Counts a turn of the loop (its check phase, after the poll), and
 * returns whether the held entries are due: the loop has polled once
 * since the first of them came. */
bool apply_defer_turn(struct apply_defer *d);

/* Whether entries are held (the loop must then not block in its poll). */
bool apply_defer_holding(const struct apply_defer *d);

/* Applies every held entry through apply(arg, ...), in order, and frees
 * the copies; apply calls nothing of this module. */
void apply_defer_drain(struct apply_defer *d, apply_defer_fn apply, void *arg);

#endif
