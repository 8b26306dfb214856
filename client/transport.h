/*
 * transport.h: the bottom layer of the client: its connection to the
 * cluster, its I/O thread, its request table and its clocks.
 *
 * Callers submit requests (encoded envelopes with a client-wide unique id)
 * into the table and wait for its answer (transport_sleep), or leave
 * it to the I/O thread to end the request through on_done: asynchronous
 * calls, and blocking ones whose caller then waits on its own, without
 * t->mu (lock.c: a batch of answers then wakes its callers without each
 * of them waiting for t->mu to finish its call). The I/O
 * thread keeps one connection, to the leader as far as it knows: it sends
 * every request that has not been sent on the current connection (so a
 * reconnect re-sends in-flight requests byte for byte: same id, same seq),
 * follows NOT_LEADER redirects, backs off on EUNAVAILABLE/EUNKNOWN and
 * connection loss (a stream refused EUNAVAILABLE goes to another node, as
 * a suspect one's requests do), and completes requests with their
 * response.
 *
 * TLS (when the options ask for it): every connection runs a handshake
 * before the requests go out, and only the I/O thread touches it (a
 * lone request is not written by its caller, as it is over plain TCP).
 * A refused handshake is not a transient failure: when every address has
 * refused one since the last answer, the requests waiting then end their
 * waits with RAFTLOCK_ETLS (the background ones keep being sent), the
 * reason goes to the waiter's error message, and for a second new
 * requests end so too, before the next attempt.
 *
 * The transport knows nothing of sessions or locks: the layers above
 * (session.h, lock.h, client.h) call down into it, and it calls up only
 * through the hook they register (struct transport_hooks).
 *
 * Locking: one mutex (t->mu) guards the state of every layer, sessions
 * and lock handles included; t->cond is broadcast on every change of
 * shared state (a watched request done, keepalive wake, callback finished,
 * a session lost or closing, stop); a caller waiting for its own request
 * sleeps on its slot of t->waker (transport_sleep; waker.h), woken with
 * the other callers answered in the same batch.
 *
 * Names: an address given by name is looked up on a thread of its own
 * (resolve.h) while the I/O thread goes on serving its wake-ups, calls
 * and deadlines; the lookup counts in the connect timeout, and one the
 * I/O thread stopped waiting for is waited for again by the next attempt
 * at that address, not asked again.
 *
 * Time: every layer reads the clocks through transport_mono_ms() and
 * transport_boot_ms() and turns deadlines into waits with
 * transport_deadline(), so that a test can stop a client's clocks
 * (transport_clock_freeze) and move them by hand (transport_clock_advance)
 * instead of sleeping.
 */
#ifndef RAFTLOCK_TRANSPORT_H
#define RAFTLOCK_TRANSPORT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "conn.h"
#include "list.h"
#include "raftlock.h"
#include "raftlock.pb-c.h"
#include "waker.h"

struct transport;

struct request {
	struct list link; /* in raftlock_client.reqs, newest first */
	uint64_t id;
	uint8_t *frame; /* the encoded envelope, re-sent as is */
	size_t frame_len;
	uint64_t sent_gen;        /* connection generation it was last sent on */
	uint64_t not_before;      /* CLOCK_MONOTONIC ms: do not send before */
	uint64_t sent_at;         /* CLOCK_MONOTONIC ms of the last send */
	uint64_t first_sent_boot; /* CLOCK_BOOTTIME ms of the first send:
				     nothing happened to it before */
	bool wants_push;          /* a blocking acquire: "queued" is not final */
	bool queued;              /* the server queued it; a push will follow */
	bool awaits_queued;       /* its waiter wants the answer "queued" too;
				     otherwise that answer wakes nobody */
	bool ever_sent;           /* handed to a connection at least once */
	bool done;
	int last_err;       /* what a timeout reports: ECONNECTION, ... */
	uint64_t done_boot; /* CLOCK_BOOTTIME ms of completion */
	Raftlock__Envelope *reply;
	/* Whom completion wakes: the thread waiting for the request
	 * (transport_sleep: waiter, a slot claimed when it first waits), also
	 * for a blocking acquire, or, for requests the keepalive thread
	 * watches (watched), every waiter of t->cond. One waiter per request
	 * avoids waking every thread of a busy client for each answer or
	 * pushed grant; a lost or closing session wakes them all
	 * (transport_wake_all). */
	struct waiter waiter;
	bool has_waiter;
	bool watched;
	/* Asynchronous requests: nobody waits; the I/O thread calls on_done
	 * (t->mu held) with 0 when done, or with last_err once deadline
	 * (CLOCK_MONOTONIC ms) passes. on_done takes the request. */
	void (*on_done)(struct transport *t, struct request *req, int err);
	void *op;
	uint64_t deadline;
	/* A mutating request of a session: only a result of apply, or a
	 * status proving it can never execute, completes it; every other
	 * status is retried with back-off, with the same seq. The session
	 * layer fills these in; the transport only frees acks and spare. */
	bool sequenced;
	uint64_t seq_session, seq;
	uint64_t *acks; /* the queued acquires it acknowledges (owned) */
	size_t n_acks;
	/* Memory the layer above reserved for the request's later needs
	 * (one malloc'd block, or NULL): it may take it back; what is left
	 * is freed with the request. */
	void *spare;
	unsigned retries; /* refusals in a row (EOVERLOAD, ...): the back-off */
	bool refused;     /* every address refused TLS since it was last sent
			     (or just before it was submitted): its waiter
			     returns RAFTLOCK_ETLS now */
	/* A stream (a watch): never done; each push, and the answer once
	 * the transport's own retries (redirects, back-offs) are past, goes
	 * to on_stream (I/O thread, t->mu held), which takes env. It is sent
	 * again on every new connection, as its latest frame says. */
	void (*on_stream)(struct transport *t, struct request *req, Raftlock__Envelope *env);
	unsigned stream_moves; /* ends EUNAVAILABLE in a row, no push between */
	/* Not idempotent (transport_call_once): once it may have reached a
	 * node (maybe_ran), it is never sent again unless an answer proves
	 * that it did not run (a redirect, a refusal before the log); it ends
	 * RAFTLOCK_EUNKNOWN instead, done without a reply. */
	bool once;
	bool maybe_ran;
};

/* Work the I/O thread runs without t->mu: callbacks to the application.
 * settle (optional) runs first, with t->mu still held, once every answer
 * and event of the read that deferred d has been dispatched (a grant's
 * revocation read with it, say): what must be decided under t->mu before
 * fn, without fn taking t->mu again. */
struct transport_deferred {
	void (*settle)(struct transport_deferred *d);
	void (*fn)(struct transport_deferred *d);
	/* Instead of fn: a caller waiting without t->mu, woken with the
	 * others of the batch (waker.h); d is not touched after. */
	struct waiter *waiter;
	struct transport_deferred *next;
};

/* The hooks of the layer above, called by the I/O thread with t->mu held:
 * answered: for the sequenced request req, the answer "queued" (queued) or
 * a result of apply; event: a session event the node pushed (revocation,
 * borrowed for the call); conn_lost: a connection that was open is gone
 * (the node may end bound sessions it kept). */
struct transport_hooks {
	void (*answered)(void *arg, struct request *req, bool queued);
	void (*event)(void *arg, const Raftlock__SessionEvent *ev);
	void (*conn_lost)(void *arg);
	void *arg;
};

struct transport {
	pthread_mutex_t mu;
	pthread_cond_t cond;         /* on CLOCK_MONOTONIC */
	pthread_condattr_t condattr; /* CLOCK_MONOTONIC */
	struct transport_hooks hooks;

	struct conn_addr *addrs;
	size_t n_addrs;
	unsigned request_timeout_ms;
	unsigned connect_timeout_ms;
	struct conn_tls tls; /* tls.ctx NULL: plain TCP; name and context owned */
	/* A node that refuses the connection itself: its TLS (RAFTLOCK_ETLS),
	 * or its limit on connections from this address (RAFTLOCK_ELIMIT). */
	char refused_why[CONN_WHY_MAX + 64]; /* the last refusal: address, reason */
	int refused_err;                     /* and its status */
	/* Why the last address given by name could not be reached: its
	 * lookup failed or took longer than the connect timeout (address,
	 * reason); "" since an answer. A call that ends RAFTLOCK_ECONNECTION
	 * says it in its error message. */
	char unreached_why[CONN_WHY_MAX + 64];
	resolve_fn resolver;    /* NULL: getaddrinfo (transport_resolver_set) */
	size_t refusals;        /* addresses that refused since an answer */
	uint64_t refused_until; /* transport_mono_ms: new requests end at
				   once with refused_err until then */
	uint64_t rng;
	/* Tests: a clock that stands still (clock_frozen: both clocks are
	 * their value at the freeze plus clock_skew_ms) or runs ahead of the
	 * real one by clock_skew_ms; clock_epoch counts the steps, io_epoch is
	 * the last one the I/O thread looked at before it went to wait. */
	bool clock_frozen;
	uint64_t frozen_mono_ms, frozen_boot_ms;
	uint64_t clock_skew_ms;
	uint64_t clock_epoch, io_epoch;

	/* I/O thread */
	pthread_t io_thread;
	int wake_fd;
	bool io_polling; /* the I/O thread waits in poll() and must be woken */
	bool wake_sent;  /* ...and has been, since it went to wait */
	bool io_stop;
	bool io_connecting; /* t->conn is being set up without t->mu: no
			       caller may write to it meanwhile */
	struct inbox {      /* replies read and decoded outside the lock */
		Raftlock__Envelope **env;
		size_t n, cap;
		int err; /* the connection failed after these */
	} inbox;
	struct transport_deferred *deferred, *deferred_tail;
	/* Callers waiting without t->mu. Those of requests answered are
	 * collected in to_wake with t->mu held and woken once the I/O thread
	 * has let go of it (woken before, they would only wait for the lock),
	 * a batch at a time (waker.h). */
	struct waker waker;
	struct wake_batch to_wake;
	bool wake_pending; /* to_wake holds any */
	struct conn conn;
	struct conn_addr *conn_addr; /* the entry of addrs it reaches; NULL:
					a redirect's address */
	uint64_t conn_gen;
	uint64_t connect_deadline;
	size_t addr_next; /* next address to try */
	struct conn_addr redirect;
	bool has_redirect;
	uint64_t reconnect_at; /* transport_mono_ms */
	unsigned backoff_ms;
	unsigned hops;       /* failures and redirects since a good reply */
	bool drop_conn;      /* close after the frames in hand */
	char *conn_text;     /* address of the current connection */
	uint64_t owed_since; /* transport_mono_ms since which the connection
				owes an answer and has sent nothing; 0: none owed */
	struct {
		uint64_t hash;  /* of an address that could not be reached */
		uint64_t until; /* transport_mono_ms */
	} down[4];
	/* The AuthenticateRequest of the token (raftlock_client_options
	 * auth_token), framed once, sent first on each connection: auth_gen
	 * is the connection it was last queued on. Wiped when freed. */
	uint8_t *auth_frame;
	size_t auth_frame_len;
	uint64_t auth_gen;
	struct list reqs; /* struct request, newest first */
	uint64_t next_id;
};

/*
 * Sets up t from the client's options (already checked) and starts its I/O
 * thread; the TLS files are read here. Errors: RAFTLOCK_ENOMEM,
 * RAFTLOCK_EINVAL, RAFTLOCK_ECONFIG (a TLS file), RAFTLOCK_EINTERNAL (t is
 * then cleaned up; an error message is set). Without t->mu.
 */
int transport_open(struct transport *t, const struct raftlock_client_options *opts);

/* Stops the I/O thread and frees everything t holds (without t->mu; no
 * other thread may use t any more). */
void transport_close(struct transport *t);

/* Tests: host names are looked up with fn from now on (NULL:
 * getaddrinfo). Without t->mu. */
void transport_resolver_set(struct transport *t, resolve_fn fn);

/* Checks the options transport_open() reads; an error message is set. */
int transport_check_options(const struct raftlock_client_options *opts);

/* The client's clocks, in ms: CLOCK_MONOTONIC for timeouts and back-off,
 * CLOCK_BOOTTIME for lease validity (clock.h), each plus the test skew.
 * Any thread, with or without t->mu. */
uint64_t transport_mono_ms(const struct transport *t);
uint64_t transport_boot_ms(const struct transport *t);

/* The absolute CLOCK_MONOTONIC time at which transport_mono_ms() reaches
 * at_ms, for pthread_cond_timedwait on t->cond and transport_sleep(). */
struct timespec transport_deadline(const struct transport *t, uint64_t at_ms);

/* Tests: from now on the client's clocks stand still except when
 * transport_clock_advance() moves them (t->mu not held). */
void transport_clock_freeze(struct transport *t);

/* Moves the client's time forward by ms, as if that long had passed at
 * once, counts a step (clock_epoch) and wakes every thread of the client
 * so that each looks at the new time (tests; t->mu not held). */
void transport_clock_advance(struct transport *t, uint64_t ms);

/* Whether req went out on the connection that is open now (t->mu held). */
bool transport_sent_here(const struct transport *t, const struct request *req);

/* A uniformly random 64-bit number (getrandom, else the client's
 * generator). Call with t->mu held when t is not NULL. */
uint64_t transport_random(struct transport *t);

/*
 * Encodes env (its id is set here) and adds it to the table; the I/O thread
 * sends it. t->mu must be held. *out stays owned by the client: end it with
 * transport_take(). Errors: RAFTLOCK_ENOMEM, RAFTLOCK_ETOOBIG. Drops the
 * calling thread's pending note (errmsg_drop_note): it was an earlier
 * request's.
 */
int transport_submit(struct transport *t, Raftlock__Envelope *env, bool wants_push,
		     struct request **out);

/* Makes a submitted request asynchronous (t->mu held): see struct request. */
void transport_on_done(struct transport *t, struct request *req,
		       void (*on_done)(struct transport *t, struct request *req, int err), void *op,
		       unsigned timeout_ms);

/* Makes a submitted request a stream (t->mu held): see struct request. */
void transport_on_stream(struct transport *t, struct request *req,
			 void (*on_stream)(struct transport *t, struct request *req,
					   Raftlock__Envelope *env),
			 void *op);

/* Replaces what req sends on the next connection by env (its id is set
 * to req's; t->mu held). Errors: RAFTLOCK_ENOMEM, RAFTLOCK_ETOOBIG (req
 * is unchanged). */
int transport_reframe(struct transport *t, struct request *req, Raftlock__Envelope *env);

/* Whether the calling thread is the client's I/O thread. */
bool transport_on_io_thread(const struct transport *t);

/* Makes the I/O thread end an asynchronous request now, as if its
 * deadline had passed (t->mu held, any thread). */
void transport_expire_now(struct transport *t, struct request *req);

/* Queues d to run on the I/O thread without t->mu (t->mu held). */
void transport_defer(struct transport *t, struct transport_deferred *d);

/* Wakes every waiter: those of t->cond and each request's own (t->mu
 * held), when a session is lost or closes. */
void transport_wake_all(struct transport *t);

/* Completion of req wakes every waiter of t->cond from now on (t->mu
 * held): for requests a background thread watches (keepalives, calls
 * given up by their callers); any waker slot req holds is let go. */
void transport_watch(struct transport *t, struct request *req);

/* Waits, with t->mu held, until req is done or CLOCK_MONOTONIC passes
 * deadline. Returns 0 when done with a reply, else req->last_err
 * (ETIMEDOUT, ECONNECTION, EUNAVAILABLE; EUNKNOWN for a request of
 * transport_call_once that may have run), or RAFTLOCK_ETLS before the deadline when
 * every address refused TLS (the next error message of the calling thread
 * on this client with that code then gives the address and reason; so
 * for ECONNECTION, when a name's lookup failed or took too long). */
int transport_wait(struct transport *t, struct request *req, uint64_t deadline);

/* Lets go of t->mu and sleeps until req's completion, an answer it waits
 * for ("queued", with awaits_queued), transport_wake_all() or the
 * CLOCK_MONOTONIC time until (transport_deadline()), then takes t->mu
 * again. It may also return early: the caller looks at req again. */
void transport_sleep(struct transport *t, struct request *req, const struct timespec *until);

/* Removes req from the table and frees it; its reply (NULL unless
 * done) is handed to the caller through *reply if not NULL, else freed.
 * A reply handed over that refused the request with a message (EPERM,
 * ESTATE, a limit of apply) notes it for the calling thread (errmsg_note);
 * a freed one notes nothing. Either way the caller may not touch req
 * again. t->mu held. */
void transport_take(struct transport *t, struct request *req, Raftlock__Envelope **reply);

/* req went unanswered for longer than a healthy node takes: if it was
 * sent on the current connection, the I/O thread drops that connection,
 * avoids that node for a while, and sends everything again elsewhere (a
 * paused or cut-off node keeps its TCP connections open). t->mu held. */
void transport_suspect(struct transport *t, struct request *req);

/* Makes the I/O thread send req again (to learn a recorded outcome). */
void transport_resend(struct transport *t, struct request *req);

/*
 * submit + wait + take, with t->mu held. On 0, *reply is a RESPONSE
 * envelope (owned by the caller) whose status may still be an error that
 * the I/O thread does not retry (EINVAL, EPROTO, ...).
 */
int transport_call(struct transport *t, Raftlock__Envelope *env, unsigned timeout_ms,
		   Raftlock__Envelope **reply);

/*
 * transport_call for a request that must not run twice (a revoke with
 * token 0 would revoke the next holder too): it is sent again only after
 * answers that prove it did not run. Once it may have reached a node, a
 * lost connection, a leader change or the deadline ends it with
 * RAFTLOCK_EUNKNOWN: it may have run, or may still run, and the library
 * does not send it again.
 */
int transport_call_once(struct transport *t, Raftlock__Envelope *env, unsigned timeout_ms,
			Raftlock__Envelope **reply);

/* The envelope's response, as a code: the response status, or 0. */
static inline int transport_reply_status(const Raftlock__Envelope *reply)
{
	return reply->response->status;
}

#endif
