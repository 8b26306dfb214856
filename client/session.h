/*
 * session.h: sessions, their sequence numbers, and the keepalive thread.
 *
 * Every mutating request of a session carries (session, seq, ack_below):
 * seq counts from 1; ack_below is the lowest seq whose outcome the client
 * does not know yet (the request's own seq if none is older). A seq whose
 * outcome stays unknown (a timeout) keeps ack_below where it is forever:
 * the server then keeps answering a retry of it from its record.
 *
 * A mutating request whose caller stops waiting before its outcome is
 * known becomes an orphan of its session: it stays in the request table
 * (so it is sent again after a reconnect, with its seq, and once every
 * request timeout on the same connection) until an answer
 * comes; then the keepalive thread settles its seq, and, for an acquire,
 * releases a grant that nobody waits for any more (DESIGN.md rule 8).
 *
 * Keepalives and loss detection are in keepalive.h. All functions here expect c->mu held unless
 * they say otherwise.
 */
#ifndef RAFTLOCK_SESSION_H
#define RAFTLOCK_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "client.h"

struct raftlock_lock;

struct session_orphan {
	struct session_orphan *next;
	struct request *req;
	uint64_t seq;
	char *name;         /* an acquire: the lock to release if it was granted */
	uint64_t owner;     /* and the handle id it was granted to */
	uint64_t resend_at; /* CLOCK_MONOTONIC: ask again if still unanswered */
};

struct raftlock_session {
	struct raftlock_session *prev, *next; /* in the client's list */
	raftlock_client *client;
	uint64_t id;
	unsigned ttl_ms;
	uint64_t valid_until; /* CLOCK_BOOTTIME ms; 0 once lost */
	unsigned grace_ms;    /* renewed in jeopardy this long past valid_until */
	bool jeopardy;        /* validity ran out; still renewing */
	bool lost;
	int lost_reason;
	int told; /* the last state the application was told (enum
		     raftlock_session_event), RAFTLOCK_SESSION_SAFE at first */
	raftlock_session_lost_cb on_lost;
	void *on_lost_arg;
	raftlock_session_event_cb on_event;
	void *on_event_arg;
	uint64_t next_seq;
	uint64_t *inflight; /* seqs whose outcome is unknown */
	size_t n_inflight;
	size_t cap_inflight;
	struct raftlock_lock *locks; /* handles made on this session */
	struct session_orphan *orphans;
	unsigned calls; /* lock calls in progress on this session */
	bool closing;   /* raftlock_session_close() has begun */
};

/*
 * The end of validity of a lease whose renewal was sent at sent_ms
 * (CLOCK_BOOTTIME) with the given TTL: sent + ttl - (ttl * rho + margin),
 * with rho = RAFTLOCK_CLOCK_RATE_PPM / 1e6 rounded up to whole ms, and
 * margin = RAFTLOCK_LEASE_MARGIN_MS. Pure; never below sent_ms.
 */
uint64_t session_validity_ms(uint64_t sent_ms, unsigned ttl_ms);

/* Takes the next seq of s and the ack_below to send with it, and records
 * the seq as in flight. RAFTLOCK_ESESSION when s is lost; ENOMEM. */
int session_seq_begin(raftlock_session *s, uint64_t *seq, uint64_t *ack_below);

/* The outcome of seq is known: it no longer holds ack_below back. */
void session_seq_end(raftlock_session *s, uint64_t seq);

/* Brackets a lock call on s (c->mu held), so that closing the session
 * waits for it: session_call_begin() returns RAFTLOCK_ECANCELED once the
 * session is closing. A blocking wait ends early when s->closing is set. */
int session_call_begin(raftlock_session *s);
void session_call_end(raftlock_session *s);

/* Marks s lost for good (valid_until 0); on_lost will run once from the
 * keepalive thread. No-op when already lost. */
void session_mark_lost(raftlock_session *s, int reason);

/*
 * Validity and loss as time passes (keepalive thread, c->mu held; now is
 * CLOCK_BOOTTIME ms): a session whose validity ran out enters jeopardy,
 * and one in jeopardy at valid_until + grace_ms is lost (RAFTLOCK_ETIMEDOUT).
 */
void session_tick(raftlock_session *s, uint64_t now);

/* When (CLOCK_BOOTTIME ms) session_tick() may next change s: UINT64_MAX
 * for a lost session. Pure. */
uint64_t session_check_at(const raftlock_session *s);

/*
 * A keepalive first sent at sent_ms (CLOCK_BOOTTIME) renewed s on the
 * server: validity resumes from that send, and s leaves jeopardy if that
 * brings valid_until past now. Not for lost sessions.
 */
void session_renewed(raftlock_session *s, uint64_t sent_ms, uint64_t now);

/* The state change s owes its application's callbacks, 0 if none: the
 * caller records it in s->told before it runs them. */
int session_event_due(const raftlock_session *s);

/* One mutating request of a session. */
struct session_req {
	Raftlock__Envelope *env;
	uint64_t *f_session; /* the request's fields inside env */
	uint64_t *f_seq;
	uint64_t *f_ack_below;
	unsigned timeout_ms;    /* 0: the client's request timeout */
	const char *grant_name; /* an acquire: what to release if it is */
	uint64_t grant_owner;   /* granted after the caller gave up */
};

/*
 * Sends one mutating request of s: sets its session, seq and ack_below,
 * waits up to its timeout, and tracks the seq (an unanswered request
 * becomes an orphan). On 0 *result points into *reply (owned by the
 * caller) and holds the command's outcome; a result of RAFTLOCK_ESESSION
 * also marks s lost. Errors: transport and response errors (ETIMEDOUT,
 * ECONNECTION, EUNAVAILABLE, EPROTO, ...), ESESSION.
 */
/* session_mutate() in two halves, for callers that do not block: the
 * submit (seq tracked, *req owned by the caller until finished or
 * abandoned), and the finish of a done request (takes req). */
int session_mutate_submit(raftlock_session *s, const struct session_req *sr, struct request **req);
int session_mutate_finish(raftlock_session *s, struct request *req, uint64_t seq,
			  Raftlock__Envelope **reply, const Raftlock__Result **result);

int session_mutate(raftlock_session *s, const struct session_req *sr, Raftlock__Envelope **reply,
		   const Raftlock__Result **result);

/*
 * Gives up waiting for req (a request of s with the given seq; taken over
 * from the caller). A request that never reached a connection is dropped
 * and its seq settled; any other becomes an orphan (see above). name (may
 * be NULL) and owner say what to release should it turn out granted.
 */
void session_abandon(raftlock_session *s, struct request *req, uint64_t seq, const char *name,
		     uint64_t owner);

/* Checks a completed reply of a mutating request: 0 with *result, or the
 * response's error (EPROTO when it carries no result). */
int session_reply_result(const Raftlock__Envelope *reply, const Raftlock__Result **result);

/* Settles the orphans of s that got their answer, and asks again for
 * those unanswered for a request timeout (keepalive thread, c->mu held). */
void session_orphans_settle(raftlock_session *s);

/* The session of c with that id, or NULL. */
raftlock_session *session_find(raftlock_client *c, uint64_t id);

/* Closes every session of c within one request timeout in total (called
 * without c->mu held). */
void session_close_all(raftlock_client *c);

#endif
