/*
 * cli_print.h: what the raftlock command prints, as text for people or as
 * JSON (--json) for programs. A listing is begun, fed item by item (pages
 * of a listing may arrive in several answers) and ended.
 */
#ifndef RAFTLOCK_CLI_PRINT_H
#define RAFTLOCK_CLI_PRINT_H

#include <stdbool.h>
#include <stdio.h>

#include "raftlock.h"

struct cli_out {
	FILE *f;
	bool json;
	bool listing; /* JSON: an array of items, else one object */
	size_t items; /* printed so far */
};

void cli_out_begin(struct cli_out *o, FILE *f, bool json, bool listing);
void cli_out_end(struct cli_out *o);

/* One node's own view, or the error that kept it from answering. */
void cli_print_status(struct cli_out *o, const char *endpoint, const struct raftlock_status *st,
		      const char *error);
/* The members as one node sees them (text mode only; JSON has them in
 * each status). */
void cli_print_members(struct cli_out *o, const struct raftlock_status *st);

/* A lock with its holders; `waiters` adds the queue. */
void cli_print_lock(struct cli_out *o, const struct raftlock_lock_info *li, bool waiters);

void cli_print_session(struct cli_out *o, const struct raftlock_session_info *si,
		       uint64_t cluster_time);

#endif
