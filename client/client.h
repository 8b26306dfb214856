/*
 * client.h: the client object, its I/O thread and its request table.
 *
 * Callers submit requests (encoded envelopes with a client-wide unique id)
 * into the table and wait on the client's condition variable. The I/O
 * thread keeps one connection, to the leader as far as it knows: it sends
 * every request that has not been sent on the current connection (so a
 * reconnect re-sends in-flight requests byte for byte: same id, same seq),
 * follows NOT_LEADER redirects, backs off on EUNAVAILABLE/EUNKNOWN and
 * connection loss, and completes requests with their response.
 *
 * Locking: one mutex (c->mu) guards the whole client state, sessions and
 * lock handles included; c->cond is broadcast on every change of shared
 * state (a watched request done, keepalive wake, callback finished, a
 * session lost or closing, stop); a caller waiting for its own request
 * waits on the request's condition variable.
 */
#ifndef RAFTLOCK_CLIENT_H
#define RAFTLOCK_CLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "conn.h"
#include "idmap.h"
#include "list.h"
#include "raftlock.h"
#include "raftlock.pb-c.h"

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
	bool ever_sent;           /* handed to a connection at least once */
	bool done;
	int last_err;       /* what a timeout reports: ECONNECTION, ... */
	uint64_t done_boot; /* CLOCK_BOOTTIME ms of completion */
	Raftlock__Envelope *reply;
	/* Whom completion wakes: the request's own waiter (cond), also for a
	 * blocking acquire, or, for requests the keepalive thread watches,
	 * every waiter of c->cond. One waiter per request avoids waking every
	 * thread of a busy client for each answer or pushed grant; a lost or
	 * closing session wakes them all (client_wake_all). */
	pthread_cond_t cond;
	pthread_cond_t *wake;
	/* Asynchronous requests: nobody waits; the I/O thread calls on_done
	 * (c->mu held) with 0 when done, or with last_err once deadline
	 * (CLOCK_MONOTONIC ms) passes. on_done takes the request. */
	void (*on_done)(raftlock_client *c, struct request *req, int err);
	void *op;
	uint64_t deadline;
	/* A mutating request of a session (session.h): only a result of
	 * apply, or a status proving it can never execute, completes it;
	 * every other status is retried with back-off, with the same seq. */
	bool sequenced;
	uint64_t seq_session, seq;
	uint64_t *acks; /* the queued acquires it acknowledges (owned) */
	size_t n_acks;
	unsigned retries; /* refusals in a row (EOVERLOAD, ...): the back-off */
};

/* Work the I/O thread runs without c->mu: callbacks to the application. */
struct client_deferred {
	void (*fn)(struct client_deferred *d);
	struct client_deferred *next;
};

struct raftlock_client {
	pthread_mutex_t mu;
	pthread_cond_t cond;         /* on CLOCK_MONOTONIC */
	pthread_condattr_t condattr; /* CLOCK_MONOTONIC, for requests */

	struct conn_addr *addrs;
	size_t n_addrs;
	char *client_name;
	char host[256];
	unsigned request_timeout_ms;
	unsigned connect_timeout_ms;
	uint64_t rng;

	/* I/O thread */
	pthread_t io_thread;
	int wake_fd;
	bool io_polling; /* the I/O thread waits in poll() and must be woken */
	bool wake_sent;  /* ...and has been, since it went to wait */
	bool io_stop;
	struct inbox { /* replies read and decoded outside the lock */
		Raftlock__Envelope **env;
		size_t n, cap;
		int err; /* the connection failed after these */
	} inbox;
	struct client_deferred *deferred, *deferred_tail;
	struct conn conn;
	uint64_t conn_gen;
	uint64_t connect_deadline;
	size_t addr_next; /* next address to try */
	struct conn_addr redirect;
	bool has_redirect;
	uint64_t reconnect_at; /* CLOCK_MONOTONIC ms */
	unsigned backoff_ms;
	unsigned hops;       /* failures and redirects since a good reply */
	bool drop_conn;      /* close after the frames in hand */
	char *conn_text;     /* address of the current connection */
	uint64_t owed_since; /* CLOCK_MONOTONIC ms since which the connection
				owes an answer and has sent nothing; 0: none owed */
	struct {
		uint64_t hash;  /* of an address that could not be reached */
		uint64_t until; /* CLOCK_MONOTONIC ms */
	} down[4];
	struct list reqs; /* struct request, newest first */
	uint64_t next_id;

	/* sessions and keepalives (session.c) */
	struct list sessions;     /* raftlock_session, newest first */
	struct idmap session_ids; /* id -> raftlock_session *, for keepalive answers */
	pthread_t ka_thread;
	bool ka_stop;
	uint64_t ka_next;                    /* CLOCK_MONOTONIC ms */
	struct raftlock_session *cb_session; /* whose on_lost runs now */
	struct raftlock_session *cb_next;    /* where the callback walk goes on */
	uint64_t owner_base;
	uint64_t owner_next;
};

/* A uniformly random 64-bit number (getrandom, else the client's
 * generator). Call with c->mu held when c is not NULL. */
uint64_t client_random(raftlock_client *c);

/*
 * Encodes env (its id is set here) and adds it to the table; the I/O thread
 * sends it. c->mu must be held. *out stays owned by the client: end it with
 * client_take(). Errors: RAFTLOCK_ENOMEM, RAFTLOCK_ETOOBIG.
 */
int client_submit(raftlock_client *c, Raftlock__Envelope *env, bool wants_push,
		  struct request **out);

/* Makes a submitted request asynchronous (c->mu held): see struct request. */
void client_on_done(raftlock_client *c, struct request *req,
		    void (*on_done)(raftlock_client *c, struct request *req, int err), void *op,
		    unsigned timeout_ms);

/* Queues d to run on the I/O thread without c->mu (c->mu held). */
void client_defer(raftlock_client *c, struct client_deferred *d);

/* Wakes every waiter: those of c->cond and each request's own (c->mu
 * held), when a session is lost or closes. */
void client_wake_all(raftlock_client *c);

/* Completion of req wakes every waiter of c->cond from now on (c->mu
 * held): for requests a background thread or a blocking acquire watches. */
void client_watch(raftlock_client *c, struct request *req);

/* Waits, with c->mu held, until req is done or CLOCK_MONOTONIC passes
 * deadline. Returns 0 when done, else req->last_err (ETIMEDOUT,
 * ECONNECTION, EUNAVAILABLE). */
int client_wait(raftlock_client *c, struct request *req, uint64_t deadline);

/* Removes req from the table and frees it; its reply (NULL unless done) is
 * handed to the caller through *reply if not NULL, else freed. c->mu held. */
void client_take(raftlock_client *c, struct request *req, Raftlock__Envelope **reply);

/* req went unanswered for longer than a healthy node takes: if it was
 * sent on the current connection, the I/O thread drops that connection,
 * avoids that node for a while, and sends everything again elsewhere (a
 * paused or cut-off node keeps its TCP connections open). c->mu held. */
void client_suspect(raftlock_client *c, struct request *req);

/* Makes the I/O thread send req again (to learn a recorded outcome). */
void client_resend(raftlock_client *c, struct request *req);

/*
 * submit + wait + take, with c->mu held. On 0, *reply is a RESPONSE
 * envelope (owned by the caller) whose status may still be an error that
 * the I/O thread does not retry (EINVAL, EPROTO, ...).
 */
int client_call(raftlock_client *c, Raftlock__Envelope *env, unsigned timeout_ms,
		Raftlock__Envelope **reply);

/* The envelope's response, as a code: the response status, or 0. */
static inline int client_reply_status(const Raftlock__Envelope *reply)
{
	return reply->response->status;
}

#endif
