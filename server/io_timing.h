/*
 * io_timing.h: how long the raft log's disk writes take. libraft 0.22.1
 * has no hook for it, so the raft_io's append is wrapped: each append
 * request is stamped when raft issues it and observed when the backend
 * calls it back (raft_uv: the entries are written and synced).
 *
 * The callback gets only the request, so requests in flight are found in
 * a table of IO_TIMING_SLOTS keyed by request pointer, shared by every
 * wrapped io of the process (one, in raftlockd). A request that finds the
 * table full is passed through untimed. Loop thread only.
 */
#ifndef RAFTLOCK_IO_TIMING_H
#define RAFTLOCK_IO_TIMING_H

#include <raft.h>

#include "histogram.h"

#define IO_TIMING_SLOTS 4096

struct io_timing {
	int (*append)(struct raft_io *io, struct raft_io_append *req,
		      const struct raft_entry entries[], unsigned n,
		      raft_io_append_cb cb); /* the backend's own */
	struct histogram writes;             /* seconds per append request */
	uint64_t untimed;                    /* passed through: table full */
};

/* Remembers io->append in t and makes io call `wrapper`, which the owner
 * writes as a one-line call of io_timing_append with its own t (raft sets
 * io->data, so the owner finds t from its raft instance). */
void io_timing_wrap(struct io_timing *t, struct raft_io *io,
		    int (*wrapper)(struct raft_io *io, struct raft_io_append *req,
				   const struct raft_entry entries[], unsigned n,
				   raft_io_append_cb cb));

/* Issues the append through the backend, timed. Returns what the backend
 * returns; on failure cb is never called (raft_io's contract). */
int io_timing_append(struct io_timing *t, struct raft_io *io, struct raft_io_append *req,
		     const struct raft_entry entries[], unsigned n, raft_io_append_cb cb);

#endif
