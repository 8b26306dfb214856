/*
 * admission.h: limits on what a client address may hold open on the client
 * port, so that one misbehaving or hostile host cannot take every
 * descriptor or buffer of a node:
 *   - connections open at once from one address (max-connections-per-address);
 *   - connections over that limit kept until they are told so (with TLS on,
 *     until their handshake ends): at most ADMISSION_MAX_REFUSING from one
 *     address, so that a host that never completes a handshake holds at
 *     most the limit plus that many;
 *   - time to complete a frame once its first byte arrived (frame-timeout-ms):
 *     a client that trickles a frame (slow-loris) is cut off. An idle
 *     connection between frames is fine: clients keep theirs for life.
 * The TLS handshake has its own deadline (tls_stream.h). No I/O here: the
 * service asks and reports; tests drive it with any clock.
 */
#ifndef RAFTLOCK_ADMISSION_H
#define RAFTLOCK_ADMISSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "idmap.h"

/* Refusals being told to one address at once (the one-address bound of
 * the raft port's connections in setup, PEER_TLS_MAX_HANDSHAKES_PER_ADDRESS,
 * for the same reason: enough for a client to hear why, too few to hold a
 * node's descriptors). */
#define ADMISSION_MAX_REFUSING 8

struct admission {
	unsigned max_per_address; /* 0: no limit */
	struct idmap counts;      /* address key -> struct admission_count */
	unsigned long long refused;
};

/* What admission_enter() makes of a new connection. */
enum admission_verdict {
	/* Counted among its address's connections: serve it. */
	ADMISSION_OPEN,
	/* Over the limit, counted among its address's refusals being told:
	 * tell it so, then close it. */
	ADMISSION_REFUSE,
	/* Over the limit, with ADMISSION_MAX_REFUSING refusals being told:
	 * close it at once, untold. Counted nowhere. */
	ADMISSION_DROP,
	/* No memory left to count it: close it at once. */
	ADMISSION_NO_MEMORY,
};

void admission_init(struct admission *a, unsigned max_per_address);
void admission_close(struct admission *a);

/* The key of a peer address (IPv4, IPv6; an IPv4-mapped IPv6 address is
 * its IPv4 address). 0 when the family is neither. */
uint64_t admission_key(const struct sockaddr *peer);

/*
 * Counts a new connection from key (see enum admission_verdict): a
 * connection over the limit, whether refused or dropped, is counted in
 * a->refused. Key 0 is never limited (ADMISSION_OPEN, counted nowhere).
 */
enum admission_verdict admission_enter(struct admission *a, uint64_t key);

/* A connection that admission_enter() gave verdict v for key closed: the
 * count it holds (ADMISSION_OPEN, ADMISSION_REFUSE) is released. Call once
 * per connection. */
void admission_leave(struct admission *a, uint64_t key, enum admission_verdict v);

/* Whether a frame begun at started_ms (0: none begun) is overdue at now_ms
 * under timeout_ms (0: no limit). */
bool admission_frame_overdue(uint64_t started_ms, uint64_t now_ms, unsigned timeout_ms);

#endif
