/*
 * member_cn.h: the name of member <id>, "raftlock-node-<id>": the common
 * name of its certificate (deploy/make-certs), which the raft port checks
 * against the id a link claims (peer_tls.h), a follower against its leader
 * for readiness reports (status.h), and, as an identity with auth = on,
 * the one a node joining under that id may claim it with (auth.h). Written
 * here only, so that the three cannot drift apart. Header only; any thread.
 */
#ifndef RAFTLOCK_MEMBER_CN_H
#define RAFTLOCK_MEMBER_CN_H

#include <stdint.h>
#include <stdio.h>

#define MEMBER_CN_PREFIX "raftlock-node-"

/* Bytes member_cn writes at most: the prefix, 20 digits and the NUL. */
#define MEMBER_CN_SIZE (sizeof MEMBER_CN_PREFIX + 20)

/* Writes member id's name in out, NUL-terminated. */
static inline void member_cn(uint64_t id, char out[MEMBER_CN_SIZE])
{
	snprintf(out, MEMBER_CN_SIZE, MEMBER_CN_PREFIX "%llu", (unsigned long long)id);
}

#endif
