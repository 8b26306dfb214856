/*
 * append_order.h: a leader sends a new entry to its followers before it
 * issues its own disk write of it.
 *
 * libraft 0.22.1's raft_apply() issues the leader's append (raft_uv: an
 * io_submit, which in a virtual machine costs a trip to the hypervisor)
 * and only then sends the entry to the followers. A commit waits for a
 * follower's write anyway, which starts only once the entry reached it,
 * so the leader's own write is better issued last. Raft allows it: the
 * leader counts itself toward a commit only once its append called back
 * (DESIGN.md), whatever the order of the two.
 *
 * Between append_order_hold() and append_order_release() (node.c brackets
 * its raft_apply() call with them, nothing else), appends raft issues are
 * kept, in order, instead of being passed on; the release passes them on
 * in the same order. By then raft was told the append was accepted and the
 * entry went out to the followers, so a backend that refuses it at the
 * release leaves no clean way back: libraft 0.22.1 takes an append's
 * failure through its callback only as a cancellation at close. The issue
 * function decides (node.c stops the node, as on running out of memory).
 * Loop thread only.
 */
#ifndef RAFTLOCK_APPEND_ORDER_H
#define RAFTLOCK_APPEND_ORDER_H

#include <stdbool.h>

#include <raft.h>

/* Appends kept at once; raft_apply() issues one. */
#define APPEND_ORDER_MAX 8

/* Passes one kept append on to the backend; handles a refusal itself. */
typedef void (*append_order_issue_fn)(void *arg, struct raft_io *io, struct raft_io_append *req,
				      const struct raft_entry entries[], unsigned n,
				      raft_io_append_cb cb);

struct append_order {
	bool holding;
	unsigned n;
	struct {
		struct raft_io *io;
		struct raft_io_append *req;
		const struct raft_entry *entries; /* raft's, valid until cb */
		unsigned n;
		raft_io_append_cb cb;
	} kept[APPEND_ORDER_MAX];
};

void append_order_hold(struct append_order *o);

/* While holding and with room: keeps the append and returns true (the
 * caller then returns 0 to raft). Otherwise false: the caller issues it
 * now (append_order_release() first passes on what is kept, so that the
 * order stays). */
bool append_order_keep(struct append_order *o, struct raft_io *io, struct raft_io_append *req,
		       const struct raft_entry entries[], unsigned n, raft_io_append_cb cb);

/* Passes on what is kept, in order, through issue(arg, ...), and stops
 * holding. */
void append_order_release(struct append_order *o, append_order_issue_fn issue, void *arg);

#endif
