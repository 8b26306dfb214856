/*
 * deadlock.h: the wait-for graph check of a new wait, part of apply
 * (fsm_rules.h; docs/GUARANTEES.md, deadlock detection).
 *
 * Nodes are sessions. A session that waits on a lock waits for every
 * other session that holds that lock, and for every other session with a
 * waiter ahead of its own in that queue (FIFO: those go first). A
 * session's handles count as one party (the server cannot tell its
 * threads apart), and a session never waits for itself. A new wait that
 * would close a cycle is refused at once with RAFTLOCK_EDEADLK: no waiter
 * is added, nothing else changes. The graph is read from the records
 * only, so every node decides alike.
 *
 * Cost: a depth-first walk from the sessions the new wait would wait for;
 * each session is pushed and visited once, only a session with a queued
 * acquire (a pending outcome) has its locks read, and a lock with more
 * than one waiter is read once per walk (on a queue of W waiters each is
 * visited: W decodes of a record of W waiters took a third of a node's
 * CPU on a lock with 15). The new wait's own locks have every party
 * pushed at the start, so a visit passes them by, and a session whose
 * names (session_locks.h, from the table) are all such locks is not even
 * decoded; unless the waiting session is on that lock, whose edges to it
 * must then be followed. Run on a new wait only.
 */
#ifndef RAFTLOCK_DEADLOCK_H
#define RAFTLOCK_DEADLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftlock.pb-c.h"

struct apply;

/* Whether session `session` queuing a waiter at the tail of each of the
 * n locks (as in memory, not yet changed) would close a cycle. */
bool deadlock_would_close_cycle(struct apply *a, uint64_t session,
				Raftlock__LockRecord *const *locks, size_t n);

#endif
