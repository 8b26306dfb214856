/*
 * cli_fault.h: test-only faults of the raftlock CLI, named in the
 * environment variable RAFTLOCK_TEST_FAULT (as the server's faults);
 * never set in production.
 *
 * "late-revoke": `raftlock lock/run` with a command hears of its lock's
 * revocation only once the command's exit has been handled, and waits
 * for the revocation then: the loss is found by the look at the release,
 * never while the command runs, whatever the timing. A test makes that
 * order certain with it; it happens by chance otherwise.
 */
#ifndef RAFTLOCK_CLI_FAULT_H
#define RAFTLOCK_CLI_FAULT_H

#include <stdbool.h>

#include "raftlock.h"

/* Reads RAFTLOCK_TEST_FAULT (saying on stderr which faults it injects):
 * once, before the session that may hear of a revocation is opened. */
void cli_fault_init(void);

/* From the session's on_lock_event, on the library's I/O thread: true
 * when the event ev is held back (late-revoke: a revocation, until
 * cli_fault_revoke_late()); the caller then does not record it. */
bool cli_fault_hold_back(enum raftlock_lock_event ev);

/* Once the command's exit is handled: true when a revocation was held
 * back (late-revoke), waiting up to CLI_FAULT_WAIT_MS for one; the caller
 * records it then. No event is held back after this. */
bool cli_fault_revoke_late(void);

#define CLI_FAULT_WAIT_MS 5000

#endif
