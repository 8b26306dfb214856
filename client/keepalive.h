/*
 * keepalive.h: the keepalive thread of a client, on the session layer.
 *
 * One thread serves all sessions of the client: every min(TTL)/3 it sends
 * a round of KeepAliveRequests that name every live session once, split
 * into requests of at most KEEPALIVE_CHUNK sessions, and moves each renewed
 * session's validity to the SEND time of the request that named it plus
 * its TTL minus the margin (session_validity_ms): a session counts as
 * renewed only once the request naming it is acknowledged. A session
 * whose validity passes is in jeopardy and still renewed; it is lost when
 * the server says it is gone or its grace period passes (session_tick).
 * The thread runs the application's on_event and on_lost callbacks
 * (without the client lock), and settles the orphaned requests of every
 * session (session.h).
 *
 * Up to two rounds are in flight, so that a slow answer still counts. A
 * request not answered within keepalive_suspect_ms() of being sent on the
 * current connection makes the client leave that node (transport_suspect) and
 * go on asking elsewhere; the limit grows with the number of sessions the
 * node must renew before it can answer, so that a large round on a healthy
 * but busy leader is not taken for a dead connection.
 */
#ifndef RAFTLOCK_KEEPALIVE_H
#define RAFTLOCK_KEEPALIVE_H

#include <stddef.h>

#include "session.h"

/* Sessions one keepalive request names at most. The leader renews all
 * the sessions of a batching window in one entry, about a microsecond a
 * session from send to answer: measured at 100,000 sessions, requests of
 * 1,024 to 32,768 sessions renew them equally fast. 8192 keeps a request
 * near 40 KB and the client lock held briefly while its answer applies.
 * A server refuses more than RAFTLOCK_KEEPALIVE_MAX, twice this: a frame
 * it decodes, holding its loop, costs it milliseconds. */
#define KEEPALIVE_CHUNK 8192
/* A healthy leader answers a small keepalive within milliseconds (one
 * batched commit)... */
#define KEEPALIVE_SUSPECT_MIN_MS 300
/* ...and renews more than this many sessions a millisecond: twenty times
 * slower than measured, room for a loaded machine. */
#define KEEPALIVE_SUSPECT_IDS_PER_MS 50

/* The keepalive thread of a client's sessions. */
struct keepalives {
	struct sessions *ss;
	pthread_t thread;
	bool stop;
	uint64_t next;     /* transport_mono_ms: the next round is due */
	unsigned interval; /* ms between rounds: a third of the shortest TTL
			      of the live sessions (0: none), as of the last
			      round or lower since */
	uint64_t epoch;    /* the clock step it last looked at before waiting */
};

/* Starts the thread for the sessions ss (t->mu not held), and hooks it to
 * their opening. RAFTLOCK_EINTERNAL if it cannot. */
int keepalive_start(struct keepalives *k, struct sessions *ss);

/* Stops and joins it (t->mu not held, not from a callback). */
void keepalive_stop(struct keepalives *k);

/*
 * How long (ms) a keepalive request may go unanswered on a connection
 * before its node is suspected, when keepalives go every interval_ms and
 * the node must renew `ids` sessions before it can answer (those the
 * request names and those of the requests of its round sent before it):
 * half an interval (at least KEEPALIVE_SUSPECT_MIN_MS) plus 1 ms for every
 * KEEPALIVE_SUSPECT_IDS_PER_MS sessions, but never more than one interval
 * (at least KEEPALIVE_SUSPECT_MIN_MS), so that a node that stopped
 * answering is left before the next round is due. Pure.
 */
unsigned keepalive_suspect_ms(unsigned interval_ms, size_t ids);

/* The number of requests a round naming n sessions is split into: none
 * above KEEPALIVE_CHUNK (0 for n = 0). Pure. */
size_t keepalive_chunks(size_t n);

/* How many of the n sessions request k (0 <= k < keepalive_chunks(n))
 * names: the chunks differ by one session at most. Pure. */
size_t keepalive_chunk_len(size_t n, size_t k);

#endif
