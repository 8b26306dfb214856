/*
 * session.h: the session layer, on the transport: sessions, their sequence
 * numbers, validity and orphans, and the client's registry of them.
 * keepalive.h sits on it (the thread that renews them); lock handles sit
 * on both, and reach the layer above them only through the hooks it sets
 * in struct sessions.
 *
 * Every mutating request of a session carries (session, seq, ack_below,
 * acked, secret): the secret is the session's capability, drawn at open
 * (GUARANTEES rule 14); seq counts from 1; ack_below is the lowest seq
 * whose outcome the client does not know yet (the request's own seq if
 * none is older), not counting blocking acquires the server answered
 * "queued": their records stay on the server until the client lists them
 * in `acked`, once it has learned their final outcome (GUARANTEES rule 6). Such a seq goes on the
 * session's next mutating requests (at most SESSION_ACKS_MAX each) until
 * one that carried it has been applied. A seq whose outcome stays unknown
 * (a timeout) keeps ack_below where it is until the answer comes: the
 * server then keeps answering a retry of it from its record.
 *
 * Only a result produced by apply, or a status that proves the request
 * can never execute (EPROTO, EINVAL, ETOOBIG: the request itself is
 * refused, identically at every attempt), settles a seq; the I/O thread
 * retries every other status with the same seq (transport.c).
 *
 * A mutating request whose caller stops waiting before its outcome is
 * known becomes an orphan of its session: it stays in the request table
 * (so it is sent again after a reconnect, with its seq, and once every
 * request timeout on the same connection) until an answer
 * comes; then the keepalive thread settles its seq, and, for an acquire,
 * releases a grant that nobody waits for any more (DESIGN.md rule 8). The
 * caller was told RAFTLOCK_EUNKNOWN. Calls through a lock handle wait for
 * the handle's orphans first (lock.c), so that they apply in call order.
 * The orphan's record is reserved when the request is submitted (struct
 * request's spare): giving a request up never fails for want of memory,
 * which would leave it unsent, its seq unsettled, and let the handle's
 * next call overtake it (GUARANTEES rule 6).
 *
 * Keepalives and loss detection are in keepalive.h. All functions here
 * expect t->mu (the transport's lock) held unless they say otherwise.
 */
#ifndef RAFTLOCK_SESSION_H
#define RAFTLOCK_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "idmap.h"
#include "transport.h"

/* The sessions of one client. */
struct sessions {
	struct transport *t;
	struct list list;                   /* raftlock_session, newest first */
	struct idmap ids;                   /* id -> raftlock_session *, for keepalive answers */
	raftlock_session *walk_next;        /* where sessions_walk_next() goes on */
	raftlock_session *callback_session; /* whose application callback */
	pthread_t callback_thread;          /* runs now, there, without t->mu */
	char *client_name;                  /* who opens them (OpenSessionRequest.owner) */
	char host[256];
	uint64_t owner_base; /* random: owner ids differ across clients */
	uint64_t owner_next;
	/* Hooks of the layers above (may be NULL), called with t->mu held:
	 * a session was opened; a session is lost or begins to close (what
	 * waits on it without a thread must end); a session is about to be
	 * freed (its `attached` objects must go). */
	void (*opened)(void *arg, raftlock_session *s);
	void *opened_arg;
	void (*ending)(raftlock_session *s);
	void (*freeing)(raftlock_session *s);
	/* A grant of lock name to s through handle owner with token was
	 * revoked: the handle must hold nothing any more (may be NULL). */
	void (*revoked)(raftlock_session *s, uint64_t owner, const char *name, uint64_t token);
	/* A connection was lost while bound sessions were valid: the
	 * keepalive thread renews them at once (on the next connection). */
	bool renew_now;
	/* The generation (transport conn_gen) of the last connection lost:
	 * an answer that came on it or an earlier one proves nothing about
	 * a bound session after that (session_renewal_counts). */
	uint64_t lost_gen;
	/* What spares the keepalive thread a walk over every session at each
	 * wake (a client may hold a million; sessions_tick()): */
	uint64_t check_at;    /* no session_tick() changes a session before
				 this (transport_boot_ms; a lower bound) */
	bool events_due;      /* a session's state may differ from what its
				 application was told (session_event_due) */
	struct list orphaned; /* raftlock_session with orphans, through
				 orphaned_link */
};

/* Bytes of a session's secret: 128 bits. */
#define SESSION_SECRET_LEN RAFTLOCK_SECRET_MIN

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
	uint64_t owner;     /* the handle it was sent for */
	uint8_t *undo;      /* an envelope to send should it turn out to have */
	size_t undo_len;    /* been granted (packed), or NULL */
	size_t undo_at;     /* the envelope of undo still to send */
	bool answered;      /* its seq settled (session_seq_end) */
	bool undo_due;      /* granted: undo must be sent, memory permitting */
	uint64_t resend_at; /* transport_mono_ms: ask again if still unanswered */
};

struct raftlock_session {
	struct list link; /* in the client's sessions */
	struct sessions *ss;
	struct transport *t;
	uint64_t id;
	/* The session's capability (GUARANTEES rule 14), from getrandom():
	 * sent with its open, its keepalives and its mutating requests, never
	 * shown; wiped when the session is freed. */
	uint8_t secret[SESSION_SECRET_LEN];
	unsigned ttl_ms;
	uint64_t valid_until; /* transport_boot_ms ms; 0 once lost */
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
	raftlock_lock_event_cb on_lock_event;
	void *on_lock_event_arg;
	unsigned bind_grace_ms; /* bound to its connection (0: not bound) */
	uint64_t next_seq;
	struct session_seq *inflight; /* seqs whose outcome is unknown */
	size_t n_inflight;
	size_t cap_inflight;
	uint64_t *acks; /* queued acquires to acknowledge (acked) */
	size_t n_acks;
	size_t cap_acks;
	struct list attached;      /* the layer above's objects made on it (lock
				      handles): freed through ss->freeing */
	struct list orphans;       /* struct session_orphan, newest first */
	struct list orphaned_link; /* in ss->orphaned while it has orphans */
	unsigned calls;            /* lock calls in progress on this session */
	bool closing;              /* session_close() has begun */
};

/*
 * The end of validity of a lease whose renewal was sent at sent_ms
 * (transport_boot_ms) with the given TTL: sent + ttl - (ttl * rho + margin),
 * with rho = RAFTLOCK_CLOCK_RATE_PPM / 1e6 rounded up to whole ms, and
 * margin = RAFTLOCK_LEASE_MARGIN_MS. Pure; never below sent_ms.
 */
uint64_t session_validity_ms(uint64_t sent_ms, unsigned ttl_ms);

/* The outcome of seq is known: it no longer holds ack_below back; a
 * blocking acquire's seq is acknowledged on the next requests. */
void session_seq_end(raftlock_session *s, uint64_t seq);

/* Sets up the registry of the sessions of t (t->mu not held; the
 * transport's answered hook is set to this layer). Errors: ENOMEM. */
int sessions_init(struct sessions *ss, struct transport *t, const char *client_name);

/* Frees the registry, which must be empty. */
void sessions_close(struct sessions *ss);

/* A new lock-handle id, never used before by this client (DESIGN.md rule
 * 9: the client's random base plus a counter). */
uint64_t sessions_new_owner(struct sessions *ss);

/* A walk over the sessions, one at a time, that survives the closing of
 * any session during it (by a callback run without t->mu): NULL at the
 * end. One walk at a time. */
raftlock_session *sessions_walk_first(struct sessions *ss);
raftlock_session *sessions_walk_next(struct sessions *ss);

/* Brackets a lock call on s (t->mu held), so that closing the session
 * waits for it: session_call_begin() returns RAFTLOCK_ECANCELED once the
 * session is closing. A blocking wait ends early when s->closing is set. */
int session_call_begin(raftlock_session *s);
void session_call_end(raftlock_session *s);

/* Marks s lost for good (valid_until 0); on_lost will run once from the
 * keepalive thread. No-op when already lost. */
void session_mark_lost(raftlock_session *s, int reason);

/*
 * Validity and loss as time passes (keepalive thread, t->mu held; now is
 * transport_boot_ms): a session whose validity ran out enters jeopardy,
 * and one in jeopardy at valid_until + grace_ms is lost (RAFTLOCK_ETIMEDOUT).
 */
void session_tick(raftlock_session *s, uint64_t now);

/* When (transport_boot_ms ms) session_tick() may next change s: UINT64_MAX
 * for a lost session. Pure. */
uint64_t session_check_at(const raftlock_session *s);

/*
 * A keepalive first sent at sent_ms (transport_boot_ms) renewed s on the
 * server: validity resumes from that send, and s leaves jeopardy if that
 * brings valid_until past now. Not for lost sessions.
 */
void session_renewed(raftlock_session *s, uint64_t sent_ms, uint64_t now);

/* Whether a keepalive answered on connection generation answered_gen may
 * renew s (t->mu held). A bound session's node ends it bind_grace_ms
 * after its connection closes unless a keepalive on another connection
 * takes it over: so once a connection is lost, only an answer that came
 * on a later one renews it (GUARANTEES rule 11a), even one the keepalive
 * thread reads only after the loss. */
bool session_renewal_counts(const raftlock_session *s, uint64_t answered_gen);

/* The client's first session, and the one after s: NULL at the end
 * (t->mu held). */
raftlock_session *session_first(struct sessions *ss);
raftlock_session *session_after(struct sessions *ss, raftlock_session *s);

/* The state change s owes its application's callbacks, 0 if none: the
 * caller records it in s->told before it runs them. */
int session_event_due(const raftlock_session *s);

/* One mutating request of a session: its envelope, whose sequence header
 * (Envelope.sequence) the session fills in when it sends it. */
struct session_req {
	Raftlock__Envelope *env;
	bool wait;           /* a blocking acquire (the push completes it) */
	unsigned timeout_ms; /* 0: the client's request timeout */
	uint64_t owner;      /* the handle it is sent for */
	/* sent if it is granted after the caller gave up (n_undo 0: none):
	 * one release, or one per lock of a set */
	const Raftlock__Envelope *const *undo;
	size_t n_undo;
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
 * ENOMEM (nothing sent), and those of session_abandon.
 */
/* session_mutate() in two halves, for callers that do not block: the
 * submit (seq tracked, *req owned by the caller until finished or
 * abandoned, its orphan's record reserved with it; RAFTLOCK_ENOMEM:
 * nothing sent), and the finish of a done request (takes req). */
int session_mutate_submit(raftlock_session *s, const struct session_req *sr, struct request **req);
int session_mutate_finish(raftlock_session *s, struct request *req, uint64_t seq,
			  Raftlock__Envelope **reply, const Raftlock__Result **result);

int session_mutate(raftlock_session *s, const struct session_req *sr, Raftlock__Envelope **reply,
		   const Raftlock__Result **result);

/*
 * Gives up waiting for req (a request of s with the given seq; taken over
 * from the caller). A request that never reached a connection is dropped
 * and its seq settled: returns its last transport error (it will not
 * execute). Any other becomes an orphan (see above) of the handle owner:
 * returns RAFTLOCK_EUNKNOWN. The n_undo envelopes of undo (copied) are sent, as
 * orphan of the same handle, should req turn out granted (a Result with a
 * token, not queued). RAFTLOCK_ENOMEM when there was no memory to copy
 * them: req is an orphan all the same (sent until its seq settles), but a
 * late grant is held until the session ends. Nothing else needs memory.
 */
int session_abandon(raftlock_session *s, struct request *req, uint64_t seq,
		    const Raftlock__Envelope *const *undo, size_t n_undo, uint64_t owner);

/* Sends env (a release of a grant that nobody holds) now, t->mu held, as
 * an orphan of the handle owner: calls of the handle wait for it. Not
 * when s is lost (the server ends its grants with it). false: out of
 * memory, nothing is sent (the session's end releases the grant). */
bool session_send_orphan(raftlock_session *s, Raftlock__Envelope *env, uint64_t owner);

/* Whether s has orphans of the lock handle `owner` (still being sent, or
 * answered but not settled yet). With resend, those still unanswered are
 * asked again now rather than at their next request timeout: a call of
 * the handle waits for them. */
bool session_has_orphans(raftlock_session *s, uint64_t owner, bool resend);

/* Checks a completed reply of a mutating request: 0 with *result, or the
 * response's error (EPROTO when it carries no result). */
int session_reply_result(const Raftlock__Envelope *reply, const Raftlock__Result **result);

/*
 * The keepalive thread's look at its sessions at each wake (t->mu held;
 * now is transport_boot_ms): session_tick() on every session once one may
 * be due (ss->check_at), then the orphans of the sessions that have some
 * are settled, and those unanswered for a request timeout asked again.
 * Costs a walk over all sessions only when a validity may have run out,
 * not at every wake.
 */
void sessions_tick(struct sessions *ss, uint64_t now);

/* The session with that id, or NULL. */
raftlock_session *session_find(struct sessions *ss, uint64_t id);

/* Opens a session (t->mu not held): raftlock_session_open(). */
int session_open(struct sessions *ss, const struct raftlock_session_options *opts,
		 raftlock_session **out);

/* Closes and frees s, waiting up to timeout_ms (0: the request timeout)
 * for the server, with t->mu held: raftlock_session_close(). */
int session_close(raftlock_session *s, unsigned timeout_ms);

/* Closes every session within one request timeout in total (t->mu not
 * held). */
void sessions_close_all(struct sessions *ss);

#endif
