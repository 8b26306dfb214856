/*
 * cli_revoke.h: `raftlock revoke NAME [--token T] [--grace MS] [--json]`,
 * an admin's revocation of the current grants of a lock (raftlock_revoke).
 */
#ifndef RAFTLOCK_CLI_REVOKE_H
#define RAFTLOCK_CLI_REVOKE_H

#include <stdbool.h>

#include "raftlock.h"

/* argv[0] is "revoke". Without --token it reads the lock's holders and
 * revokes each by its token, so that a retried request cannot revoke the
 * next holder too. Returns a CLI_EXIT_* code: CLI_EXIT_BUSY when there was
 * nothing to revoke. */
int cli_revoke(raftlock_client *client, int argc, char **argv, bool json);

#endif
