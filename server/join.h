/*
 * join.h: the first start of a node given --join (docs/OPERATIONS.md).
 * Before raft starts on an empty data directory, the node claims its id at
 * the cluster's leader (MEMBER_JOIN, through the client protocol, with the
 * client library): the id must have been added by `raftlock member add`
 * and never started with another data directory. Only then does it start
 * raft, without bootstrapping: the leader sends it the log (it is a
 * standby) and promotes it once it caught up. The leader answers the claim
 * with its members: with peer TLS the node admits their links (the
 * leader's first of all) before its log names them (node.c).
 *
 * With auth = on, the cluster takes the claim for id N only from identity
 * "raftlock-node-N" (member_cn.h) or an admin of every name (auth.h): the
 * node presents its client certificate (client-tls = mutual) or the token
 * of its join-token-file.
 *
 * Blocking, before the loop runs; not thread-safe. While it waits, SIGTERM
 * and SIGINT end the process (their default action).
 */
#ifndef RAFTLOCK_JOIN_H
#define RAFTLOCK_JOIN_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "raftlock.h"

#define JOIN_TRY_MS 60000 /* keep asking this long while no leader answers */

/* The ids of the members the cluster named when the claim held. */
struct join_members {
	size_t n;
	uint64_t ids[CONFIG_MAX_MEMBERS];
};

/*
 * Reads the bearer token of a join-token-file (config.h) into token,
 * NUL-terminated: the file's one line that is neither blank nor a comment
 * ('#' first), without the blanks around it, 1 to RAFTLOCK_TOKEN_MAX
 * bytes. The file is read by line_file_read (its limits and messages).
 * Returns 0, or RAFTLOCK_ECONFIG with the file (and line) in err, which
 * never quotes the file's content; token is then all zeros. The caller
 * wipes token after use (explicit_bzero).
 */
int join_token_read(const char *path, char token[RAFTLOCK_TOKEN_MAX + 1], char *err, size_t errlen);

/*
 * Claims cfg->id for incarnation at the addresses of cfg->join (client TLS
 * settings as the node's own: its certificate and CA; the token of
 * cfg->join_token_file when set). Returns 0 with
 * *members set to the members of the leader's answer (or, from a leader
 * too old to name them, of a member list asked for after it; n = 0 when
 * that failed too, with a warning logged). Or returns RAFTLOCK_ECONFIG
 * (the token file does not read; the cluster refused: the id was not
 * added, was removed, or already started with another data directory;
 * another cluster; with auth on, the identity presented may not claim
 * the id) or
 * RAFTLOCK_EUNAVAILABLE (no leader answered within JOIN_TRY_MS), with the
 * reason in err and *members unchanged.
 */
int join_claim(const struct config *cfg, uint64_t incarnation, struct join_members *members,
	       char *err, size_t errlen);

#endif
