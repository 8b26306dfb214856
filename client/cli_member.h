/*
 * cli_member.h: raftlock member: list, add, remove, promote and replace
 * the members of the cluster (docs/OPERATIONS.md, "Membership").
 */
#ifndef RAFTLOCK_CLI_MEMBER_H
#define RAFTLOCK_CLI_MEMBER_H

#include "raftlock.h"

/* argv[0] is "member". Returns a CLI_EXIT_* code. */
int cli_member(raftlock_client *client, int argc, char **argv);

#endif
