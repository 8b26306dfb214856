/*
 * peer_tls.h: mutual TLS between cluster members on the raft port, as a
 * libraft transport (struct raft_uv_transport, raft/uv.h).
 *
 * libraft's own TCP transport hands raft a raw TCP stream. This one
 * terminates TLS in raftlockd and hands raft one end of a socket pair
 * instead, pumping bytes between its other end and the TLS connection on
 * the node's loop (no thread):
 *
 *   raft <-> uv_pipe_t ==socketpair== uv_pipe_t <-> tls_stream <-> TCP peer
 *
 * Connecting: resolving the member's address if it is a host name (on
 * libuv's thread pool, never on the loop), TCP connect, TLS handshake (the
 * server's certificate must be signed by the cluster's CA and carry the
 * common name "raftlock-node-<id>" of the member raft asked for), then
 * inside TLS the identity hello (protocol, this node's id, its raft
 * address), then the server's one-word acceptance; only then does raft get
 * its stream. The setup deadline counts from raft's request.
 *
 * Accepting: TLS handshake that requires a client certificate signed by the
 * cluster's CA, then the hello; the id it claims must be the one in the
 * certificate's common name ("raftlock-node-<id>"), so that a member cannot
 * pose as another, and a member this node knows (peer_tls_set_members), so
 * that a certificate of the cluster's CA for an id outside the cluster
 * admits nothing. Only then is raft told (accept callback with that id and
 * address). Anything else (no certificate, another CA, an expired one, a
 * claimed id that is not the certificate's, an id that is no member, a
 * malformed hello, random bytes, silence past the handshake deadline)
 * closes that connection with a log line that says why; the node goes on.
 *
 * Setup limits, so that hosts without a certificate cannot shut the port to
 * members: inbound connections not yet handed to raft hold one of
 * PEER_TLS_MAX_HANDSHAKES places, at most PEER_TLS_MAX_HANDSHAKES_PER_ADDRESS
 * of them from one address; a connection over its address's limit is
 * closed on accept. When every place is taken, a new connection takes the
 * place of the oldest one still in its TLS handshake (or, if every one is
 * past it, the oldest): to keep a member out, hosts must open connections
 * faster than a member sets one up, from at least
 * PEER_TLS_MAX_HANDSHAKES / PEER_TLS_MAX_HANDSHAKES_PER_ADDRESS addresses
 * (a member that shares its address with them is refused with them).
 * Each refusal is logged at a bounded rate, each kind on its own.
 *
 * Back-pressure: at most PEER_TLS_HIGH_WATER bytes wait in either direction
 * before the pump stops reading the side that feeds them; raft's writes then
 * wait in the socket pair, as they would in a TCP socket.
 *
 * Loop thread only.
 */
#ifndef RAFTLOCK_PEER_TLS_H
#define RAFTLOCK_PEER_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "tls_ctx.h"

/* Bytes queued in one direction of one connection before the pump stops
 * reading its source. */
#define PEER_TLS_HIGH_WATER (256 * 1024)

/* Inbound connections in setup at once (see "Setup limits" above): a new
 * one past this closes the oldest. */
#define PEER_TLS_MAX_HANDSHAKES 64

/* ... from one address: past this, a new one is closed on accept. */
#define PEER_TLS_MAX_HANDSHAKES_PER_ADDRESS 8

/* Default deadline from raft's connect request (the resolution included)
 * or the accept to a connection handed to raft (TLS handshake, hello and
 * acceptance). */
#define PEER_TLS_SETUP_MS 10000

struct peer_tls_stats {
	uint64_t accepted;  /* inbound connections handed to raft */
	uint64_t connected; /* outbound connections handed to raft */
	/* connections closed before raft saw them: refused, over a setup
	 * limit, past the deadline */
	uint64_t refused;
	/* The most bytes one connection held at once for raft (decrypted, not
	 * yet taken by raft) and for the peer (read from raft, not yet handed
	 * to the kernel): back-pressure keeps them near PEER_TLS_HIGH_WATER. */
	size_t peak_to_raft, peak_to_peer;
};

/*
 * Initializes t as the TLS transport of member id on loop: its contexts are
 * built from files (all three needed: this member's certificate, whose
 * common name must be member_cn(id) (member_cn.h), its key, the cluster's CA)
 * with tls_ctx_new. t->version is set; t->data is left to raft. Returns 0,
 * or -1 with a message naming the file in err (t then needs no close). On
 * success release it with peer_tls_close() once raft has closed it.
 */
int peer_tls_init(struct raft_uv_transport *t, uv_loop_t *loop, raft_id id,
		  const struct tls_files *files, char *err, size_t errlen);

/* Reads the files again (as peer_tls_init does, for member id) and, once
 * they load, sets up the connections started from then on with them;
 * connections already set up, or being set up, keep what they started
 * with. Returns 0, or -1 with a message naming the file in err, the
 * contexts in use then unchanged. */
int peer_tls_reload(struct raft_uv_transport *t, raft_id id, const struct tls_files *files,
		    char *err, size_t errlen);

/* Frees what peer_tls_init() allocated: after raft's close of the transport
 * completed (raft_close's callback), or when raft never used it. */
void peer_tls_close(struct raft_uv_transport *t);

/* Sets the setup deadline (PEER_TLS_SETUP_MS by default), for connections
 * started afterwards. */
void peer_tls_set_setup_timeout(struct raft_uv_transport *t, unsigned ms);

/* Whether id is a member this node knows; called on the loop thread for
 * every inbound connection, once its certificate proved the id. */
typedef bool (*peer_tls_member_fn)(void *arg, raft_id id);

/* Refuses inbound connections from ids for which is_member(arg, id) is
 * false. Without it (the default) every id the certificate proves is let
 * through. */
void peer_tls_set_members(struct raft_uv_transport *t, peer_tls_member_fn is_member, void *arg);

/* Sends now what raft has written to its streams and the pump has not
 * read yet, instead of on the loop's next poll: a leader calls it right
 * after raft_apply(), so that the followers get a new entry before the
 * leader issues its own disk write of it (append_order.h). */
void peer_tls_flush(struct raft_uv_transport *t);

/* Counters since init. */
struct peer_tls_stats peer_tls_stats(const struct raft_uv_transport *t);

#endif
