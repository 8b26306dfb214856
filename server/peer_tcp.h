/*
 * peer_tcp.h: the plaintext raft transport: libraft's own TCP transport
 * (raft_uv_tcp) with Nagle's algorithm off on every stream it hands raft.
 *
 * libraft 0.22.1's TCP transport leaves TCP_NODELAY unset. Raft writes a
 * message as a header and then its entries, and the follower answers only
 * once the whole message arrived; with Nagle on, a small second write
 * waits for the ACK of the first, which the receiver delays by up to
 * 40 ms. A commit then now and again takes 40 ms instead of a fraction of
 * a millisecond. This transport wraps raft_uv_tcp and sets TCP_NODELAY on
 * each accepted and each connected stream before raft sees it; everything
 * else is raft_uv_tcp's.
 *
 * Loop thread only.
 */
#ifndef RAFTLOCK_PEER_TCP_H
#define RAFTLOCK_PEER_TCP_H

#include <stddef.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

/* Initializes t as the plaintext transport on loop. Returns 0, or -1 with
 * a message in err (out of memory, or raft_uv_tcp_init's error); t is then
 * unusable and needs no close. */
int peer_tcp_init(struct raft_uv_transport *t, uv_loop_t *loop, char *err, size_t errlen);

/* Frees what peer_tcp_init() allocated: after raft's close of the transport
 * completed (raft_close's callback), or when raft never used it. */
void peer_tcp_close(struct raft_uv_transport *t);

#endif
