/*
 * cli_top.h: `raftlock top`, the busiest locks and the longest waiters,
 * refreshed in the terminal like top(1).
 *
 * Each refresh lists the locks (all pages, up to CLI_TOP_MAX_LOCKS) through
 * the public read API, ranks them by waiters, then by their oldest wait,
 * then by holders, and prints the first --limit of them and of the waiters
 * (by time waited). Durations are in cluster time, as each answer carries
 * it. --once prints one screen and exits (scripts, tests); otherwise the
 * screen is redrawn every --interval ms until the command is interrupted.
 * --json prints each screen as one JSON object on a line of its own:
 *   {"locks":N,"contended":N,"waiters":N,"truncated":false,
 *    "top":[{"name":..,"kind":..,"holders":N,"waiters":N,
 *            "longest_wait_ms":N,"held_ms":N,"holder":OWNER|null}],
 *    "longest_waiters":[{"lock":..,"waited_ms":N,"owner":OWNER}]}
 * with OWNER {"host":..,"pid":N,"client_name":..}.
 */
#ifndef RAFTLOCK_CLI_TOP_H
#define RAFTLOCK_CLI_TOP_H

#include <stdbool.h>

#include "raftlock.h"

#define CLI_TOP_MAX_LOCKS 100000

struct cli_top_options {
	const char *prefix; /* "" = every lock */
	bool once;          /* one screen, then return */
	bool stale;         /* read from any node (raftlock_lock_list's stale) */
	bool json;          /* each screen as one JSON object on one line */
	long interval_ms;   /* between screens */
	long limit;         /* lines per section */
};

/* Runs top with the client (borrowed). Returns CLI_EXIT_OK after --once,
 * or CLI_EXIT_ERROR with the client's message on stderr; otherwise runs
 * until the process is interrupted. */
int cli_top(raftlock_client *client, const struct cli_top_options *o);

#endif
