/*
 * cli_acl.h: raftlock acl: the access rules (set, delete, list) and the
 * making of a bearer token (token), which needs no cluster.
 */
#ifndef RAFTLOCK_CLI_ACL_H
#define RAFTLOCK_CLI_ACL_H

#include "raftlock.h"

/* argv[0] is "acl". json: list prints JSON (also with its own --json).
 * Returns a CLI_EXIT_* code. */
int cli_acl(raftlock_client *client, int argc, char **argv, bool json);

/* Whether argv (argv[0] "acl") is "acl token ...", run without a client. */
bool cli_acl_offline(int argc, char **argv);

/* raftlock acl token NAME [--json]: prints a new random token and the line
 * of an auth-tokens file that names it (as JSON with json or --json). */
int cli_acl_token(int argc, char **argv, bool json);

#endif
