/*
 * reads.h: the read requests (GET_LOCK, LIST_LOCKS, LIST_SESSIONS,
 * CHECK_TOKEN, ACL_LIST), served from LMDB without the log.
 *
 * reads_serve() turns the store's records into the protobuf answer; it
 * does no I/O and knows nothing of connections. A linearizable read is
 * served only after reads_wait() reports a raft barrier committed and
 * applied after the read arrived, while this node was still the ready
 * leader; reads that arrive while a barrier is in flight share the next
 * one (one barrier at a time). A stale read is served at once.
 *
 * Loop thread only. Aborts on out of memory inside a read (server rule).
 */
#ifndef RAFTLOCK_READS_H
#define RAFTLOCK_READS_H

#include <stdbool.h>

#include "node.h"
#include "raftlock.pb-c.h"
#include "store.h"

/* The answer to a read: resp and all it points to are valid only during
 * the call. */
typedef void (*reads_reply_cb)(void *arg, const Raftlock__Response *resp);

/* Whether env is one of the reads, and whether it asks for a stale one. */
bool reads_is_read(const Raftlock__Envelope *env);
bool reads_is_stale(const Raftlock__Envelope *env);

/* Who reads, with authentication on (auth.h). Reads of one name were
 * allowed before (auth_check_request); listings leave out what the
 * identity may not see: locks it has no read on, the owner (host, pid,
 * client name) of sessions not its own without read on every name (of a
 * session listed, and of a lock's holders and waiters, GET_LOCK included)
 * and their locks it may not read, rules on prefixes it is not admin of.
 * They walk only the ranges of names (auth_ranges) and rules it may see,
 * so that a page costs what it holds, plus a seek per range. */
struct reads_who {
	const char *identity;
	const char *root; /* auth-admin */
};

/* Serves env from the store as it is now: calls cb exactly once, before
 * returning, with a result payload, a status RAFTLOCK_ENOTFOUND (no such
 * lock) or RAFTLOCK_EPROTO (not a read). env and who (NULL: authentication
 * off, nothing left out) are borrowed. */
void reads_serve(struct store *st, const Raftlock__Envelope *env, const struct reads_who *who,
		 reads_reply_cb cb, void *arg);

/* Completion of reads_wait(): status 0 when the read may be served now,
 * else RAFTLOCK_ENOTLEADER or RAFTLOCK_ESHUTDOWN. */
typedef void (*reads_ready_cb)(void *arg, int status);

struct reads_batch;

struct reads {
	struct node *node;
	struct reads_batch *waiting;  /* arrived, no barrier yet */
	struct reads_batch *inflight; /* waiting for its barrier */
	bool closing;
};

void reads_init(struct reads *r, struct node *node);

/* Waits for a barrier for one read. Returns 0: cb is called exactly once,
 * from the barrier's completion, or before this returns with
 * RAFTLOCK_ENOTLEADER when raft refuses the barrier. Or RAFTLOCK_ENOMEM:
 * cb is never called. */
int reads_wait(struct reads *r, reads_ready_cb cb, void *arg);

/* Starts no more barriers; reads still waiting for one get
 * RAFTLOCK_ESHUTDOWN. A barrier in flight completes with raft. */
void reads_close(struct reads *r);

#endif
