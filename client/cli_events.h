/*
 * cli_events.h: `raftlock watch PREFIX [--from POS] [--count N] [--json]`,
 * which prints the changes of the locks under PREFIX as the cluster makes
 * them (raftlock_watch), one line each:
 *   POS KIND NAME session=S owner=O token=T mode=M permits=N [status=E]
 * POS is INDEX.OFFSET, or INDEX alone for the state events (HOLDING,
 * WAITING, CURRENT), whose offset is "after the whole entry"; either is
 * what --from takes to resume. --json prints one object a line:
 *   {"position":"I.O","index":I,"offset":O,"kind":"granted","name":..,
 *    "session":S,"owner":O,"token":T,"mode":"exclusive","permits":N,
 *    "status":E}
 * It runs until interrupted (SIGINT, SIGTERM, SIGHUP, SIGQUIT: exit 0),
 * until --count changes (not counting state events) have been printed, or
 * until the watch is refused or the standard output cannot be written
 * (exit 1).
 */
#ifndef RAFTLOCK_CLI_EVENTS_H
#define RAFTLOCK_CLI_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "raftlock.h"

struct cli_events_options {
	const char *prefix;
	const struct raftlock_position *from; /* NULL: the current state first */
	uint64_t count;                       /* 0: no limit */
	bool json;
};

/* Returns the exit code. Blocks those four signals in the calling thread
 * before the client's threads could take them: call it before any other
 * thread of the process starts, or with those signals blocked already. */
int cli_events(raftlock_client *client, const struct cli_events_options *o);

/* `raftlock observe NAME [--count N] [--json]` (raftlock_observe): one
 * line at each change of who leads NAME (o->prefix, a lock name):
 *   POS leader session=S token=T value=V   or   POS no leader
 * with " (history lost: read again)" when the changes in between were not
 * kept; --json: {"position":..,"leader":true,"session":S,"token":T,
 * "history_lost":false,"value":V}. The first line is the current state.
 * --count N: exit after N lines. Same signal rules as cli_events. */
int cli_observe(raftlock_client *client, const struct cli_events_options *o);

#endif
