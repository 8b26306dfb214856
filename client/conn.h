/*
 * conn.h: one TCP connection to a cluster node, and node addresses.
 *
 * A conn is driven by its owner's poll loop: conn_start() begins a
 * non-blocking connect, conn_finish_connect() completes it when the socket
 * turns writable, conn_queue()/conn_flush() write whole frames, and
 * conn_read()/conn_next() hand out decoded envelopes. A conn is used by one
 * thread at a time. Errors: RAFTLOCK_ECONNECTION for anything the network
 * did (refused, reset, closed by the peer), RAFTLOCK_EPROTO/ETOOBIG for bytes
 * that are not a valid frame, RAFTLOCK_ENOMEM.
 */
#ifndef RAFTLOCK_CONN_H
#define RAFTLOCK_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frame.h"
#include "raftlock.pb-c.h"

/* A parsed "host:port" ("[v6]:port" for IPv6 literals). Owns its strings. */
struct conn_addr {
	char *host;
	char *port;
	char *text; /* as given */
};

/* Parses text. Returns 0, RAFTLOCK_EINVAL (no port, port not in 1..65535,
 * empty host) or RAFTLOCK_ENOMEM; *out is unchanged on failure. */
int conn_addr_parse(const char *text, struct conn_addr *out);
void conn_addr_free(struct conn_addr *a);

enum conn_state {
	CONN_CLOSED,
	CONN_CONNECTING,
	CONN_OPEN,
};

struct conn {
	int fd;
	enum conn_state state;
	uint8_t *out; /* bytes waiting to be written: out[out_off..out_len) */
	size_t out_off;
	size_t out_len;
	size_t out_cap;
	struct frame_reader reader;
};

void conn_init(struct conn *c);

/* Starts connecting to a (name resolution blocks). On success the conn is
 * CONNECTING, or OPEN if the connect finished at once. */
int conn_start(struct conn *c, const struct conn_addr *a);

/* Completes a connect after the socket polled writable. 0: OPEN. */
int conn_finish_connect(struct conn *c);

/* Appends a whole frame (copied) to the write queue. */
int conn_queue(struct conn *c, const uint8_t *frame, size_t n);

/* Writes what the socket takes now. */
int conn_flush(struct conn *c);

bool conn_wants_write(const struct conn *c);

/* Reads what the socket has now into the frame reader. */
int conn_read(struct conn *c);

/* Takes the next decoded envelope: 1 and *env (owned by the caller, freed
 * with raftlock__envelope__free_unpacked), 0 when no whole frame is
 * buffered, or a negative code (the connection must be closed). */
int conn_next(struct conn *c, Raftlock__Envelope **env);

/* Closes the socket and drops buffered bytes; the conn may start again. */
void conn_close(struct conn *c);

/*
 * One blocking exchange on a connection of its own: connects to a, sends
 * frame, and waits for the envelope with the given id, all within
 * timeout_ms. *reply is owned by the caller. Errors: RAFTLOCK_ECONNECTION,
 * RAFTLOCK_ETIMEDOUT, RAFTLOCK_EPROTO, RAFTLOCK_ENOMEM.
 */
int conn_exchange(const struct conn_addr *a, const uint8_t *frame, size_t n, uint64_t id,
		  unsigned timeout_ms, Raftlock__Envelope **reply);

#endif
