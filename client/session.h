/*
 * session.h: sessions, their sequence numbers, and the keepalive thread.
 *
 * Every mutating request of a session carries (session, seq, ack_below,
 * acked): seq counts from 1; ack_below is the lowest seq whose outcome the
 * client does not know yet (the request's own seq if none is older), not
 * counting blocking acquires the server answered "queued": their records
 * stay on the server until the client lists them in `acked`, once it has
 * learned their final outcome (GUARANTEES rule 6). Such a seq goes on the
 * session's next mutating requests (at most SESSION_ACKS_MAX each) until
 * one that carried it has been applied. A seq whose outcome stays unknown
 * (a timeout) keeps ack_below where it is until the answer comes: the
 * server then keeps answering a retry of it from its record.
 *
 * Only a result produced by apply, or a status that proves the request
 * can never execute (EPROTO, EINVAL, ETOOBIG: the request itself is
 * refused, identically at every attempt), settles a seq; the I/O thread
 * retries every other status with the same seq (client.c).
 *
 * A mutating request whose caller stops waiting before its outcome is
 * known becomes an orphan of its session: it stays in the request table
 * (so it is sent again after a reconnect, with its seq, and once every
 * request timeout on the same connection) until an answer
 * comes; then the keepalive thread settles its seq, and, for an acquire,
 * releases a grant that nobody waits for any more (DESIGN.md rule 8). The
 * caller was told RAFTLOCK_EUNKNOWN. Calls through a lock handle wait for
 * the handle's orphans first (lock.c), so that they apply in call order.
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

/* Acknowledged queued acquires one request carries (FSM_MAX_ACKED). */
#define SESSION_ACKS_MAX 256

/* A seq whose outcome is not known yet. */
struct session_seq {
	uint64_t seq;
	bool wait;   /* a blocking acquire: acknowledged once its outcome is known */
	bool queued; /* the server answered "queued": ack_below leaves it out */
};

struct session_orphan {
	struct list link; /* in the session's orphans */
	struct request *req;
	uint64_t seq;
	char *name;         /* an acquire: the lock to release if it was granted */
	uint64_t owner;     /* and the handle id it was granted to */
	uint64_t resend_at; /* CLOCK_MONOTONIC: ask again if still unanswered */
};

struct raftlock_session {
	struct list link; /* in the client's sessions */
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
	struct session_seq *inflight; /* seqs whose outcome is unknown */
	size_t n_inflight;
	size_t cap_inflight;
	uint64_t *acks; /* queued acquires to acknowledge (acked) */
	size_t n_acks;
	size_t cap_acks;
	struct list locks;   /* struct raftlock_lock: handles made on it */
	struct list orphans; /* struct session_orphan, newest first */
	unsigned calls;      /* lock calls in progress on this session */
	bool closing;        /* raftlock_session_close() has begun */
};

/*
 * The end of validity of a lease whose renewal was sent at sent_ms
 * (CLOCK_BOOTTIME) with the given TTL: sent + ttl - (ttl * rho + margin),
 * with rho = RAFTLOCK_CLOCK_RATE_PPM / 1e6 rounded up to whole ms, and
 * margin = RAFTLOCK_LEASE_MARGIN_MS. Pure; never below sent_ms.
 */
uint64_t session_validity_ms(uint64_t sent_ms, unsigned ttl_ms);

/* The outcome of seq is known: it no longer holds ack_below back; a
 * blocking acquire's seq is acknowledged on the next requests. */
void session_seq_end(raftlock_session *s, uint64_t seq);

/* The I/O thread (c->mu held) got, for the mutating request req, the
 * answer "queued" (queued) or a result of apply (applied): the first takes
 * its seq out of ack_below, the second ends the acknowledgements it
 * carried. */
void session_req_answered(raftlock_client *c, struct request *req, bool queued);

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

/* The client's first session, and the one after s: NULL at the end
 * (c->mu held). */
raftlock_session *session_first(raftlock_client *c);
raftlock_session *session_after(raftlock_client *c, raftlock_session *s);

/* The state change s owes its application's callbacks, 0 if none: the
 * caller records it in s->told before it runs them. */
int session_event_due(const raftlock_session *s);

/* One mutating request of a session: its envelope, whose sequence header
 * (Envelope.sequence) the session fills in when it sends it. */
struct session_req {
	Raftlock__Envelope *env;
	bool wait;              /* a blocking acquire (the push completes it) */
	unsigned timeout_ms;    /* 0: the client's request timeout */
	const char *grant_name; /* an acquire: what to release if it is */
	uint64_t grant_owner;   /* granted after the caller gave up */
};

/* The session_req of envelope env. */
#define SESSION_REQ(env_) ((struct session_req){.env = (env_)})

/*
 * Sends one mutating request of s with its sequence header (session, seq,
 * ack_below, acked), waits up to its timeout, and tracks the seq (an unanswered
 * request becomes an orphan). On 0 *result points into *reply (owned by
 * the caller) and holds the command's outcome; a result of
 * RAFTLOCK_ESESSION also marks s lost. Errors: EUNKNOWN (sent, no final
 * answer in time: it may still execute, see session_abandon), ECONNECTION
 * (never sent: it will not execute), EPROTO, EINVAL, ETOOBIG, ESESSION,
 * ENOMEM.
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
 * and its seq settled: returns its last transport error (it will not
 * execute). Any other becomes an orphan (see above): returns
 * RAFTLOCK_EUNKNOWN. name (may be NULL) and owner say what to release
 * should it turn out granted.
 */
int session_abandon(raftlock_session *s, struct request *req, uint64_t seq, const char *name,
		    uint64_t owner);

/* Whether s has orphans of the lock handle `owner` (still being sent, or
 * answered but not settled yet). With resend, those still unanswered are
 * asked again now rather than at their next request timeout: a call of
 * the handle waits for them. */
bool session_has_orphans(raftlock_session *s, uint64_t owner, bool resend);

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
