/*
 * admission.h: limits on what a client address may hold open on the client
 * port, so that one misbehaving or hostile host cannot take every
 * descriptor or buffer of a node:
 *   - connections open at once from one address (max-connections-per-address);
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

struct admission {
	unsigned max_per_address; /* 0: no limit */
	struct idmap open;        /* address key -> unsigned count */
	unsigned long long refused;
};

void admission_init(struct admission *a, unsigned max_per_address);
void admission_close(struct admission *a);

/* The key of a peer address (IPv4, IPv6; an IPv4-mapped IPv6 address is
 * its IPv4 address). 0 when the family is neither. */
uint64_t admission_key(const struct sockaddr *peer);

/*
 * Counts a new connection from key. Returns true, or false when the address
 * already holds max_per_address connections (counted in a->refused) or no
 * memory is left to count it; a refused connection must not be left. Key 0
 * is never limited.
 */
bool admission_enter(struct admission *a, uint64_t key);

/* A connection admitted with key closed. */
void admission_leave(struct admission *a, uint64_t key);

/* Whether a frame begun at started_ms (0: none begun) is overdue at now_ms
 * under timeout_ms (0: no limit). */
bool admission_frame_overdue(uint64_t started_ms, uint64_t now_ms, unsigned timeout_ms);

#endif
