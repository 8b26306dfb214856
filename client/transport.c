/* transport.c: see transport.h. */
#include "grow.h"
#include "transport.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "clock.h"
#include "codec.h"
#include "errmsg.h"
#include "tls_ctx.h"

#define CLIENT_REQUEST_TIMEOUT_MS 10000
#define CLIENT_CONNECT_TIMEOUT_MS 1000
#define CLIENT_BACKOFF_MIN_MS 50
#define CLIENT_BACKOFF_MAX_MS 250 /* a failover must not wait long */
#define CLIENT_DOWN_MS 1000       /* no redirects to an unreachable node */
#define CLIENT_STALL_MS 5000      /* an unanswered request: try elsewhere */
#define CLIENT_RETRY_MIN_MS 50    /* EUNAVAILABLE: retry after 50..200 ms */
#define CLIENT_RETRY_SPAN_MS 151
#define CLIENT_OVERLOAD_MAX_MS 1000 /* EOVERLOAD: back-off doubles up to this */
#define CLIENT_POLL_MAX_MS 1000
#define CLIENT_REFUSED_MS 1000 /* every address refused TLS: try again after */
#define CLIENT_PARKED_LOOK 64  /* see transport_nothing_owed() */
/* A watch whose state nodes could not reach in time (EUNAVAILABLE) is moved
 * to another node this many times in a row, no event between; the next
 * such end is the application's (io_dispatch). */
#define CLIENT_STREAM_MOVES 3

uint64_t transport_random(struct transport *t)
{
	uint64_t v;
	if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
		return v;
	/* xorshift64*, seeded at open: good enough for jitter and ids when
	 * the kernel's pool is not ready. */
	uint64_t x = t != NULL ? t->rng : clock_mono_ms() | 1;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	if (t != NULL)
		t->rng = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* t->mu held. The I/O thread sends whatever is pending before it waits
 * again, so it only needs a write to its eventfd while it waits. */
static void transport_wake_io(struct transport *t)
{
	if (!t->io_polling || t->wake_sent)
		return;
	t->wake_sent = true;
	uint64_t one = 1;
	ssize_t rv = write(t->wake_fd, &one, sizeof one);
	(void)rv; /* a full counter already means "wake up" */
}

/* ----------------------------------------------------------- requests -- */

static void transport_send_now(struct transport *t, struct request *r);

/* Whether no request is under way: each is done, or parked on this
 * connection (a queued acquire waiting for its push, a watch). A request
 * submitted then has nothing to share a write with, so its caller sends
 * it. Parked requests matter on a contended lock: a holder's release
 * would otherwise wait for the I/O thread to wake while every other
 * thread's acquire waits in the server's queue. The look stops after
 * CLIENT_PARKED_LOOK requests (then the I/O thread sends it), so that a
 * client with thousands of waits or watches pays no long scan per call. */
static bool transport_nothing_owed(const struct transport *t)
{
	const struct request *r;
	unsigned looked = 0;
	list_each_entry (r, &t->reqs, struct request, link) {
		if (!r->done && !(r->queued && r->sent_gen == t->conn_gen))
			return false;
		if (++looked == CLIENT_PARKED_LOOK)
			return false;
	}
	return true;
}

int transport_submit(struct transport *t, Raftlock__Envelope *env, bool wants_push,
		     struct request **out)
{
	errmsg_drop_note(); /* an earlier request's: not this one's */
	struct request *r = calloc(1, sizeof *r);
	if (r == NULL)
		return RAFTLOCK_ENOMEM;
	env->id = ++t->next_id;
	int rv = codec_frame_envelope(env, &r->frame, &r->frame_len);
	if (rv != 0) {
		free(r);
		return rv;
	}
	r->id = env->id;
	r->wants_push = wants_push;
	r->last_err = RAFTLOCK_ECONNECTION;
	if (t->refused_until > transport_mono_ms(t)) {
		/* every address refused us a moment ago: say so now */
		r->last_err = t->refused_err;
		r->refused = true;
	}
	bool alone = transport_nothing_owed(t);
	list_add_head(&t->reqs, &r->link);
	if (alone)
		transport_send_now(t, r); /* nothing else under way */
	else
		transport_wake_io(t); /* sent with the others: fewer, larger writes */
	*out = r;
	return 0;
}

int transport_wait(struct transport *t, struct request *req, uint64_t deadline)
{
	while (!req->done || req->reply == NULL) {
		if (req->done)
			return req->last_err; /* ended without a reply: io_lose() */
		if (req->refused || transport_mono_ms(t) >= deadline) {
			if (req->last_err == RAFTLOCK_ETLS || req->refused)
				errmsg_note(req->last_err, t->refused_why);
			else if (req->last_err == RAFTLOCK_ECONNECTION &&
				 t->unreached_why[0] != '\0')
				errmsg_note(req->last_err, t->unreached_why);
			return req->last_err;
		}
		struct timespec ts = transport_deadline(t, deadline);
		transport_sleep(t, req, &ts);
	}
	return 0;
}

void transport_sleep(struct transport *t, struct request *req, const struct timespec *until)
{
	if (req->watched) {
		pthread_cond_timedwait(&t->cond, &t->mu, until);
		return;
	}
	if (!req->has_waiter) {
		waiter_init(&t->waker, &req->waiter);
		req->has_waiter = true;
	}
	waiter_rearm(&req->waiter); /* its wakers hold t->mu */
	pthread_mutex_unlock(&t->mu);
	waiter_wait_until(&t->waker, &req->waiter, until);
	pthread_mutex_lock(&t->mu);
}

void transport_on_done(struct transport *t, struct request *req,
		       void (*on_done)(struct transport *t, struct request *req, int err), void *op,
		       unsigned timeout_ms)
{
	req->on_done = on_done;
	req->op = op;
	req->deadline = transport_mono_ms(t) + (timeout_ms ? timeout_ms : t->request_timeout_ms);
}

void transport_on_stream(struct transport *t, struct request *req,
			 void (*on_stream)(struct transport *t, struct request *req,
					   Raftlock__Envelope *env),
			 void *op)
{
	(void)t;
	req->on_stream = on_stream;
	req->op = op;
}

int transport_reframe(struct transport *t, struct request *req, Raftlock__Envelope *env)
{
	(void)t;
	uint8_t *frame;
	size_t len;
	env->id = req->id;
	int rv = codec_frame_envelope(env, &frame, &len);
	if (rv != 0)
		return rv;
	free(req->frame);
	req->frame = frame;
	req->frame_len = len;
	return 0;
}

bool transport_on_io_thread(const struct transport *t)
{
	return pthread_equal(pthread_self(), t->io_thread) != 0;
}

void transport_expire_now(struct transport *t, struct request *req)
{
	req->deadline = 0;
	transport_wake_io(t);
}

void transport_defer(struct transport *t, struct transport_deferred *d)
{
	d->next = NULL;
	if (t->deferred_tail != NULL)
		t->deferred_tail->next = d;
	else
		t->deferred = d;
	t->deferred_tail = d;
}

/* Wakes the thread waiting for req, if any, with the next batch the I/O
 * thread sends (t->mu held). */
static void transport_wake_req(struct transport *t, struct request *req)
{
	if (!req->has_waiter)
		return; /* its thread looks at req before it sleeps */
	wake_batch_add(&t->to_wake, &req->waiter);
	t->wake_pending = true;
}

void transport_wake_all(struct transport *t)
{
	pthread_cond_broadcast(&t->cond);
	struct request *r;
	list_each_entry (r, &t->reqs, struct request, link)
		if (!r->watched)
			transport_wake_req(t, r);
	wake_batch_send(&t->waker, &t->to_wake);
	t->wake_pending = false;
}

void transport_watch(struct transport *t, struct request *req)
{
	req->watched = true;
	if (req->has_waiter) {
		/* nobody waits on it again: not a slot held for nothing */
		waiter_fini(&t->waker, &req->waiter);
		req->has_waiter = false;
	}
}

/* Frees a request that is out of the table and whose reply was taken. */
static void request_free(struct transport *t, struct request *req)
{
	if (req->has_waiter)
		waiter_fini(&t->waker, &req->waiter);
	free(req->acks);
	free(req->frame);
	free(req->spare);
	free(req);
}

void transport_take(struct transport *t, struct request *req, Raftlock__Envelope **reply)
{
	list_remove(&req->link);
	/* an answer nobody takes is reported by nobody: no note of it */
	const Raftlock__Envelope *e = reply != NULL ? req->reply : NULL;
	const Raftlock__Response *resp =
		e != NULL && e->body_case == RAFTLOCK__ENVELOPE__BODY_RESPONSE ? e->response : NULL;
	if (resp != NULL && (resp->status == RAFTLOCK_EPERM || resp->status == RAFTLOCK_ESTATE))
		errmsg_note(resp->status, resp->message);
	/* A refusal by apply names what refused it (a limit, ...). */
	if (resp != NULL && resp->status == 0 &&
	    resp->payload_case == RAFTLOCK__RESPONSE__PAYLOAD_RESULT && resp->result->status != 0 &&
	    resp->message != NULL && resp->message[0] != '\0')
		errmsg_note(resp->result->status, resp->message);
	if (reply != NULL)
		*reply = req->reply;
	else if (req->reply != NULL)
		raftlock__envelope__free_unpacked(req->reply, NULL);
	req->reply = NULL;
	request_free(t, req);
}

void transport_resend(struct transport *t, struct request *req)
{
	req->sent_gen = 0;
	req->not_before = 0;
	transport_wake_io(t);
}

static int call(struct transport *t, Raftlock__Envelope *env, unsigned timeout_ms,
		Raftlock__Envelope **reply, bool once)
{
	struct request *r;
	if (timeout_ms == 0)
		timeout_ms = t->request_timeout_ms;
	uint64_t deadline = transport_mono_ms(t) + timeout_ms;
	int rv = transport_submit(t, env, false, &r);
	if (rv != 0)
		return rv;
	if (once) {
		r->once = true; /* before any second send: t->mu is held */
		if (r->maybe_ran)
			r->last_err = RAFTLOCK_EUNKNOWN; /* sent by transport_submit */
	}
	rv = transport_wait(t, r, deadline);
	transport_take(t, r, rv == 0 ? reply : NULL);
	return rv;
}

int transport_call(struct transport *t, Raftlock__Envelope *env, unsigned timeout_ms,
		   Raftlock__Envelope **reply)
{
	return call(t, env, timeout_ms, reply, false);
}

int transport_call_once(struct transport *t, Raftlock__Envelope *env, unsigned timeout_ms,
			Raftlock__Envelope **reply)
{
	return call(t, env, timeout_ms, reply, true);
}

static struct request *transport_find(struct transport *t, uint64_t id)
{
	struct request *r;
	list_each_entry (r, &t->reqs, struct request, link)
		if (r->id == id)
			return r;
	return NULL;
}

/* Wakes whoever waits for r, now done. */
static void transport_wake_done(struct transport *t, struct request *r)
{
	if (r->watched)
		pthread_cond_broadcast(&t->cond);
	else
		transport_wake_req(t, r);
}

static void transport_complete(struct transport *t, struct request *r, Raftlock__Envelope *env)
{
	r->reply = env;
	r->done = true;
	r->done_boot = transport_boot_ms(t);
	if (r->on_done != NULL) {
		r->on_done(t, r, 0);
		return;
	}
	transport_wake_done(t, r);
}

/* A request of transport_call_once that may have run would be sent again:
 * it ends here instead, done without a reply (its waiter returns
 * RAFTLOCK_EUNKNOWN). Such requests have a waiter, never on_done. */
static void io_lose(struct transport *t, struct request *r)
{
	r->last_err = RAFTLOCK_EUNKNOWN;
	r->done = true;
	r->done_boot = transport_boot_ms(t);
	transport_wake_done(t, r);
}

/* ---------------------------------------------------------- I/O thread -- */

static uint64_t io_hash(const char *text)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)text; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return h;
}

static bool io_is_down(struct transport *t, const char *text, uint64_t now)
{
	uint64_t h = io_hash(text);
	for (size_t i = 0; i < sizeof t->down / sizeof t->down[0]; i++)
		if (t->down[i].hash == h && t->down[i].until > now)
			return true;
	return false;
}

/* Remembers that the current address could not be reached (or did not
 * answer), so that followers' redirects to it (a dead leader they still
 * believe in) are not followed for a while, and other addresses are tried
 * first. */
static void io_note_down(struct transport *t, uint64_t now)
{
	if (t->conn_text == NULL)
		return;
	size_t oldest = 0, n = sizeof t->down / sizeof t->down[0];
	for (size_t i = 1; i < n; i++)
		if (t->down[i].until < t->down[oldest].until)
			oldest = i;
	t->down[oldest].hash = io_hash(t->conn_text);
	t->down[oldest].until = now + CLIENT_DOWN_MS;
}

/* The connection is gone (or must go; unreachable: it never opened):
 * every request in flight will be sent again on the next one, after a
 * backoff once every address has failed. */
static void io_fail(struct transport *t, bool unreachable)
{
	uint64_t now = transport_mono_ms(t);
	if (unreachable)
		io_note_down(t, now);
	bool was_open = t->conn.state == CONN_OPEN;
	conn_close(&t->conn);
	/* what may have run on it ends now, rather than at the next connection */
	struct request *r;
	list_each_entry (r, &t->reqs, struct request, link)
		if (r->once && r->maybe_ran && !r->done)
			io_lose(t, r);
	if (was_open && t->hooks.conn_lost != NULL)
		t->hooks.conn_lost(t->hooks.arg);
	t->drop_conn = false;
	t->hops++;
	if (t->has_redirect && t->hops <= t->n_addrs + 1) {
		t->reconnect_at = now;
		return;
	}
	if (t->hops < t->n_addrs) {
		t->reconnect_at = now;
		return;
	}
	unsigned b = t->backoff_ms * 2;
	if (b < CLIENT_BACKOFF_MIN_MS)
		b = CLIENT_BACKOFF_MIN_MS;
	if (b > CLIENT_BACKOFF_MAX_MS)
		b = CLIENT_BACKOFF_MAX_MS;
	t->backoff_ms = b;
	t->reconnect_at = now + b / 2 + transport_random(t) % (b / 2 + 1);
}

/* The current address refused us with err and why: its node refused the
 * TLS handshake (or our certificate), we refused its certificate, or it
 * holds as many connections from this address as it takes. That does not
 * pass by itself, so once every address has refused since the last
 * answer, the requests waiting now end their waits with err (see
 * transport_wait), and so do those submitted in the next
 * CLIENT_REFUSED_MS, before the next attempt. */
static void io_refused(struct transport *t, int err, const char *why)
{
	snprintf(t->refused_why, sizeof t->refused_why, "%s: %s",
		 t->conn_text ? t->conn_text : "a node", why);
	t->refused_err = err;
	io_fail(t, true);
	if (++t->refusals < t->n_addrs)
		return;
	t->refusals = 0;
	struct request *r;
	list_each_entry (r, &t->reqs, struct request, link) {
		if (r->done)
			continue;
		r->last_err = err; /* a once request that may have run: io_fail() ended it */
		r->refused = true;
	}
	transport_wake_all(t);
	t->reconnect_at = t->refused_until = transport_mono_ms(t) + CLIENT_REFUSED_MS;
}

/* A connection failed with rv: refused TLS, or like any network failure
 * (a name's failed lookup says why). */
static void io_fail_with(struct transport *t, int rv, bool unreachable)
{
	if (rv == RAFTLOCK_ETLS) {
		io_refused(t, RAFTLOCK_ETLS, t->conn.why);
		return;
	}
	if (rv == RAFTLOCK_ECONNECTION && t->conn.why[0] != '\0')
		snprintf(t->unreached_why, sizeof t->unreached_why, "%s: %s",
			 t->conn_text ? t->conn_text : "a node", t->conn.why);
	io_fail(t, unreachable);
}

static void io_connect(struct transport *t)
{
	struct conn_addr redirect = {0};
	struct conn_addr *a;
	t->conn_gen++;
	t->owed_since = 0;
	if (t->has_redirect) {
		redirect = t->redirect;
		memset(&t->redirect, 0, sizeof t->redirect);
		t->has_redirect = false;
		a = &redirect;
	} else {
		/* the next address that is not known to be down, if any */
		uint64_t now = transport_mono_ms(t);
		for (size_t i = 0; i < t->n_addrs; i++) {
			size_t k = (t->addr_next + i) % t->n_addrs;
			if (!io_is_down(t, t->addrs[k].text, now)) {
				t->addr_next = k;
				break;
			}
		}
		a = &t->addrs[t->addr_next];
		t->addr_next = (t->addr_next + 1) % t->n_addrs;
	}
	t->conn_addr = a != &redirect ? a : NULL;
	free(t->conn_text);
	t->conn_text = strdup(a->text); /* NULL: only loses the memory above */
	/* A socket and a TLS object are set up (a name's lookup only starts
	 * here): not with the client locked. The conn and the addresses are
	 * the I/O thread's alone. */
	resolve_fn resolver = t->resolver;
	t->io_connecting = true;
	pthread_mutex_unlock(&t->mu);
	int rv = conn_start(&t->conn, a, t->tls.ctx != NULL ? &t->tls : NULL, resolver);
	pthread_mutex_lock(&t->mu);
	t->io_connecting = false;
	conn_addr_free(&redirect);
	if (rv != 0) {
		io_fail_with(t, rv, true);
		return;
	}
	/* one bound for the lookup, the TCP connect and the TLS handshake */
	t->connect_deadline = transport_mono_ms(t) + t->connect_timeout_ms;
}

void transport_suspect(struct transport *t, struct request *req)
{
	if (req->sent_gen == t->conn_gen && t->conn.state == CONN_OPEN && !t->drop_conn) {
		io_note_down(t, transport_mono_ms(t));
		t->drop_conn = true;
		transport_wake_io(t);
	}
}

/* Whether a request sent on this connection before older_than is still
 * unanswered. Queued acquires wait for their push as long as they must. */
static bool io_owes(struct transport *t, uint64_t older_than)
{
	struct request *r;
	list_each_entry (r, &t->reqs, struct request, link)
		if (!r->done && !r->queued && r->sent_gen == t->conn_gen && r->sent_at < older_than)
			return true;
	return false;
}

/* Queues req on the connection, after the token the first time on this
 * connection; false when out of memory. */
static bool io_queue(struct transport *t, struct request *r, uint64_t now)
{
	if (r->once && r->maybe_ran) {
		io_lose(t, r);
		return true;
	}
	if (t->auth_frame != NULL && t->auth_gen != t->conn_gen) {
		if (conn_queue(&t->conn, t->auth_frame, t->auth_frame_len) != 0)
			return false;
		t->auth_gen = t->conn_gen; /* its answer (id 0) is not awaited */
	}
	if (conn_queue(&t->conn, r->frame, r->frame_len) != 0)
		return false;
	if (!r->ever_sent)
		r->first_sent_boot = transport_boot_ms(t);
	if (t->owed_since == 0)
		t->owed_since = now;
	r->sent_gen = t->conn_gen;
	r->sent_at = now;
	r->ever_sent = true;
	r->maybe_ran = true;
	r->refused = false;
	if (r->once)
		r->last_err = RAFTLOCK_EUNKNOWN; /* what its deadline then means */
	else if (r->last_err == RAFTLOCK_ECONNECTION)
		r->last_err = RAFTLOCK_ETIMEDOUT;
	return true;
}

/* Whether a request sent on this connection has waited too long, or the
 * node has said nothing for as long while it owed an answer. The second
 * also counts requests whose callers gave up: calls shorter than
 * CLIENT_STALL_MS would otherwise keep a client on a node whose loop is
 * stuck (restoring a large snapshot, say) for as long as it is. */
static bool io_stalled(struct transport *t, uint64_t now)
{
	if (t->owed_since != 0 && now - t->owed_since > CLIENT_STALL_MS)
		return true;
	return now > CLIENT_STALL_MS && io_owes(t, now - CLIENT_STALL_MS);
}

static void io_send_pending(struct transport *t, uint64_t now)
{
	struct request *r;
	list_each_entry (r, &t->reqs, struct request, link) {
		if (r->done || r->sent_gen == t->conn_gen || r->not_before > now)
			continue;
		if (!io_queue(t, r, now))
			return; /* out of memory: try again on the next turn */
	}
}

/* A request with nothing else under way (transport_nothing_owed) is sent
 * by the calling thread itself when the connection is up and idle: a
 * round trip then costs no wake-up of the I/O thread. Sending only
 * appends to the socket; the I/O thread reads without the lock, and only
 * it sets up (io_connecting) and closes the connection. */
static void transport_send_now(struct transport *t, struct request *r)
{
	if (t->tls.ctx != NULL) {
		/* OpenSSL's reads and writes of one connection must not run
		 * at once: the I/O thread alone drives it (t->tls is set at
		 * open; t->conn.ssl changes without t->mu) */
		transport_wake_io(t);
		return;
	}
	if (t->io_connecting || t->conn.state != CONN_OPEN || t->drop_conn ||
	    conn_wants_write(&t->conn) || !io_queue(t, r, transport_mono_ms(t))) {
		transport_wake_io(t);
		return;
	}
	if (conn_flush(&t->conn) != 0)
		t->drop_conn = true;
	if (t->drop_conn || conn_wants_write(&t->conn))
		transport_wake_io(t); /* to fail the connection, or wait until writable */
}

static void io_redirect(struct transport *t, const char *leader)
{
	if (t->drop_conn)
		return; /* one redirect per connection */
	t->drop_conn = true;
	if (leader == NULL || leader[0] == '\0' || io_is_down(t, leader, transport_mono_ms(t)))
		return; /* the next address */
	if (t->has_redirect)
		conn_addr_free(&t->redirect);
	t->has_redirect = conn_addr_parse(leader, &t->redirect) == 0;
}

/* Whether a status answering a mutating request of a session proves that
 * it can never execute: the request itself is refused, identically at
 * every attempt (EPERM: the session's secret is refused, and it is the
 * same secret at every attempt; ESTATE: the cluster's feature level is
 * below what the request needs, until every node is upgraded, so the
 * caller hears it now rather than at its timeout). Anything else (a
 * refusal before the log for want of room, an outcome the node does not
 * know) leaves it to be retried with its seq. */
static bool io_final_status(int status)
{
	return status == RAFTLOCK_EPROTO || status == RAFTLOCK_EINVAL ||
	       status == RAFTLOCK_ETOOBIG || status == RAFTLOCK_EPERM || status == RAFTLOCK_ESTATE;
}

/* Sends r again after a back-off that doubles with each refusal in a row
 * (jittered, at most CLIENT_OVERLOAD_MAX_MS): the node was overloaded. */
static void io_retry_later(struct transport *t, struct request *r, int err)
{
	unsigned shift = r->retries < 5 ? r->retries : 5;
	unsigned b = CLIENT_RETRY_MIN_MS << shift;
	if (b > CLIENT_OVERLOAD_MAX_MS)
		b = CLIENT_OVERLOAD_MAX_MS;
	r->retries++;
	r->sent_gen = 0;
	r->maybe_ran = false; /* not executed */
	r->not_before = transport_mono_ms(t) + b / 2 + transport_random(t) % (b / 2 + 1);
	r->last_err = err;
}

/* An answer to a mutating request from a server older than protocol 2:
 * it did not see the envelope's sequence header and read the request as
 * one of no session, so nothing executed. The request ends with this
 * EPROTO answer (a final status: its seq is settled), or, if there is no
 * memory for it, is tried again later. */
static void io_old_server(struct transport *t, struct request *r, Raftlock__Envelope *env)
{
	char msg[160];
	snprintf(msg, sizeof msg,
		 "the server speaks client protocol %u, older than %d: upgrade the servers "
		 "before the clients",
		 env->protocol, WIRE_PROTOCOL_MIN_SERVER);
	uint64_t id = env->id;
	raftlock__envelope__free_unpacked(env, NULL);
	Raftlock__Envelope *e = malloc(sizeof *e);
	Raftlock__Response *resp = malloc(sizeof *resp);
	char *text = strdup(msg);
	if (e == NULL || resp == NULL || text == NULL) {
		free(e);
		free(resp);
		free(text);
		io_retry_later(t, r, RAFTLOCK_ENOMEM);
		return;
	}
	/* Built with malloc like a decoded message, so that
	 * raftlock__envelope__free_unpacked() frees it. */
	*resp = (Raftlock__Response)RAFTLOCK__RESPONSE__INIT;
	resp->status = RAFTLOCK_EPROTO;
	resp->message = text;
	*e = (Raftlock__Envelope)RAFTLOCK__ENVELOPE__INIT;
	e->id = id;
	e->body_case = RAFTLOCK__ENVELOPE__BODY_RESPONSE;
	e->response = resp;
	transport_complete(t, r, e);
}

static void io_dispatch(struct transport *t, Raftlock__Envelope *env)
{
	if (env->id == 0 && env->body_case == RAFTLOCK__ENVELOPE__BODY_RESPONSE &&
	    env->response->status == RAFTLOCK_ELIMIT) {
		/* the node holds as many connections from this address as it
		 * takes, and closes ours: a refusal, as a TLS one is */
		io_refused(t, RAFTLOCK_ELIMIT, env->response->message);
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	}
	if (env->id == 0 && env->body_case == RAFTLOCK__ENVELOPE__BODY_RESPONSE &&
	    env->response->payload_case == RAFTLOCK__RESPONSE__PAYLOAD_SESSION_EVENT) {
		if (t->hooks.event != NULL)
			t->hooks.event(t->hooks.arg, env->response->session_event);
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	}
	struct request *r = transport_find(t, env->id);
	if (r == NULL || r->done || env->body_case != RAFTLOCK__ENVELOPE__BODY_RESPONSE) {
		/* a reply to a request its caller gave up on */
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	}
	if (r->sequenced && env->protocol < WIRE_PROTOCOL_MIN_SERVER) {
		io_old_server(t, r, env);
		return;
	}
	const Raftlock__Response *resp = env->response;
	bool result = resp->status == 0 && resp->payload_case == RAFTLOCK__RESPONSE__PAYLOAD_RESULT;
	if (resp->push && r->on_stream != NULL) {
		r->stream_moves = 0; /* a node serves it */
		r->on_stream(t, r, env);
		return;
	}
	if (resp->push) {
		transport_complete(t, r, env);
		return;
	}
	switch (resp->status) {
	case RAFTLOCK_ENOTLEADER:
		r->sent_gen = 0;
		r->maybe_ran = false; /* refused before the log */
		r->last_err = RAFTLOCK_EUNAVAILABLE;
		io_redirect(t, resp->leader);
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	case RAFTLOCK_EUNAVAILABLE:
	case RAFTLOCK_EUNKNOWN:
		/* A stream the node cannot serve (a watch whose state it
		 * could not reach in time): another node may. When none did,
		 * CLIENT_STREAM_MOVES times in a row, every node is behind
		 * what the client saw (a cluster restored from an older
		 * backup, one without a quorum for long): the end is the
		 * application's, below, rather than a search without end. */
		if (r->on_stream != NULL && resp->status == RAFTLOCK_EUNAVAILABLE) {
			if (r->stream_moves++ == CLIENT_STREAM_MOVES)
				break;
			transport_suspect(t, r);
		}
		r->sent_gen = 0;
		r->not_before = transport_mono_ms(t) + CLIENT_RETRY_MIN_MS +
				transport_random(t) % CLIENT_RETRY_SPAN_MS;
		if (resp->status == RAFTLOCK_EUNKNOWN && r->once) {
			/* the node lost its leadership with the entry on its way */
			io_lose(t, r);
			raftlock__envelope__free_unpacked(env, NULL);
			return;
		}
		if (resp->status == RAFTLOCK_EUNAVAILABLE)
			r->maybe_ran = false; /* refused before the log */
		r->last_err = resp->status == RAFTLOCK_EUNAVAILABLE ? RAFTLOCK_EUNAVAILABLE
								    : RAFTLOCK_ETIMEDOUT;
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	case RAFTLOCK_ESHUTDOWN:
		r->sent_gen = 0;
		t->drop_conn = true;
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	case RAFTLOCK_EOVERLOAD:
	case RAFTLOCK_ENOSPC: /* not executed; there may be room again soon */
		io_retry_later(t, r, resp->status);
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	}
	if (r->sequenced && !result && !io_final_status(resp->status)) {
		/* not applied (an older node's ELIMIT or ENOMEM, ...): the seq
		 * is not settled; a Result carries any outcome of apply */
		io_retry_later(t, r, RAFTLOCK_EOVERLOAD);
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	}
	t->hops = 0;
	t->backoff_ms = 0;
	t->refusals = 0;
	t->refused_until = 0;
	t->unreached_why[0] = '\0';
	r->retries = 0;
	if (r->on_stream != NULL) {
		r->queued = true; /* answered: what follows comes when it comes */
		r->on_stream(t, r, env);
		return;
	}
	bool queued = result && r->wants_push && resp->result->queued;
	if (r->sequenced && result && resp->result->status != RAFTLOCK_EUNAVAILABLE &&
	    t->hooks.answered != NULL)
		t->hooks.answered(t->hooks.arg, r, queued);
	if (queued) {
		r->queued = true;
		raftlock__envelope__free_unpacked(env, NULL);
		if (r->awaits_queued)
			transport_wake_done(t, r);
		return;
	}
	transport_complete(t, r, env);
}

/* Reads and decodes what arrived, without t->mu: the connection is the
 * I/O thread's alone, and user threads then wait for the lock only while
 * the replies are handed out. */
static void io_receive(struct transport *t)
{
	struct inbox *in = &t->inbox;
	int rv = conn_read(&t->conn);
	Raftlock__Envelope *env;
	int nr;
	while ((nr = conn_next(&t->conn, &env)) == 1) {
		if (grow(&in->env, &in->cap, in->n + 1, 64, sizeof *in->env) != 0) {
			raftlock__envelope__free_unpacked(env, NULL);
			nr = RAFTLOCK_ENOMEM;
			break;
		}
		in->env[in->n++] = env;
	}
	in->err = rv != 0 ? rv : nr < 0 ? nr : 0;
}

/* t->mu held; the replies were read by io_receive(). */
static void io_handle(struct transport *t, short revents)
{
	struct inbox *in = &t->inbox;
	for (size_t i = 0; i < in->n; i++)
		io_dispatch(t, in->env[i]);
	if (in->n > 0) {
		/* the node spoke: it owes nothing, or owes since now */
		uint64_t now = transport_mono_ms(t);
		t->owed_since = io_owes(t, now + 1) ? now : 0;
	}
	in->n = 0;
	if (t->conn.state == CONN_CLOSED) {
		in->err = 0; /* a refusal read above closed it (io_dispatch) */
		return;
	}
	if (in->err != 0) {
		int err = in->err;
		in->err = 0;
		io_fail_with(t, err, false);
		return;
	}
	int rv;
	if (t->conn.state == CONN_RESOLVING) {
		if ((rv = conn_finish_resolve(&t->conn)) != 0)
			io_fail_with(t, rv, true);
		return; /* the connect's socket is polled next */
	}
	if (t->conn.state == CONN_CONNECTING) {
		if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
			return;
		if ((rv = conn_finish_connect(&t->conn)) != 0) {
			io_fail_with(t, rv, true);
			return;
		}
		if (t->conn.state != CONN_OPEN)
			return; /* a TLS handshake's first step, or the name's next
				   address, is on its way */
		/* anything already readable is reported by the next poll */
		io_send_pending(t, transport_mono_ms(t));
	} else if (t->conn.state == CONN_HANDSHAKE) {
		if ((rv = conn_handshake(&t->conn)) != 0) {
			io_fail_with(t, rv, true);
			return;
		}
		if (t->conn.state != CONN_OPEN)
			return;
		io_send_pending(t, transport_mono_ms(t));
		revents = POLLOUT;
	}
	if (conn_can_write(&t->conn, revents) && (rv = conn_flush(&t->conn)) != 0)
		io_fail_with(t, rv, false);
}

/* Asynchronous requests past their deadline end with their last error. */
static void io_expire(struct transport *t, uint64_t now)
{
	struct list *l, *tmp;
	list_each_safe (l, tmp, &t->reqs) {
		struct request *r = list_entry(l, struct request, link);
		if (r->on_done != NULL && !r->done && (now >= r->deadline || r->refused))
			r->on_done(t, r, r->last_err);
	}
}

/* Settles the deferred callbacks (t->mu held), then wakes the waiters of
 * completed requests and runs the callbacks without t->mu (held on entry
 * and return). Nothing here touches a request once t->mu is let go: its
 * waiter may take it at once. */
static void io_run_deferred(struct transport *t)
{
	struct transport_deferred *d = t->deferred;
	struct wake_batch batch = t->to_wake;
	t->deferred = t->deferred_tail = NULL;
	memset(&t->to_wake, 0, sizeof t->to_wake);
	t->wake_pending = false;
	for (struct transport_deferred *s = d; s != NULL; s = s->next)
		if (s->settle != NULL)
			s->settle(s);
	pthread_mutex_unlock(&t->mu);
	wake_batch_send(&t->waker, &batch);
	/* In order; the waiters between two callbacks woken with one system
	 * call for many. */
	while (d != NULL) {
		struct transport_deferred *next = d->next;
		if (d->waiter != NULL) {
			wake_batch_add(&batch, d->waiter); /* the last touch of d */
		} else {
			wake_batch_send(&t->waker, &batch);
			d->fn(d);
		}
		d = next;
	}
	wake_batch_send(&t->waker, &batch);
	pthread_mutex_lock(&t->mu);
}

static int io_poll_timeout(struct transport *t, uint64_t now)
{
	uint64_t until = now + CLIENT_POLL_MAX_MS;
	if (t->conn.state == CONN_CLOSED && !list_empty(&t->reqs) && t->reconnect_at < until)
		until = t->reconnect_at;
	if (conn_connecting(&t->conn) && t->connect_deadline < until)
		until = t->connect_deadline;
	/* a silent node is left when it is found so (io_stalled), not up to a
	 * poll later */
	if (t->conn.state == CONN_OPEN && t->owed_since != 0 &&
	    t->owed_since + CLIENT_STALL_MS + 1 < until)
		until = t->owed_since + CLIENT_STALL_MS + 1;
	struct request *r;
	list_each_entry (r, &t->reqs, struct request, link) {
		if (!r->done && r->sent_gen != t->conn_gen && r->not_before < until)
			until = r->not_before;
		if (!r->done && r->on_done != NULL && r->deadline < until)
			until = r->deadline;
	}
	return until > now ? (int)(until - now) : 0;
}

static void *io_main(void *arg)
{
	struct transport *t = arg;
	pthread_mutex_lock(&t->mu);
	while (!t->io_stop) {
		uint64_t now = transport_mono_ms(t);
		io_expire(t, now);
		if (t->deferred != NULL || t->wake_pending) {
			/* callbacks may submit: send what they did before waiting */
			io_run_deferred(t);
			continue;
		}
		if (t->drop_conn || (t->conn.state == CONN_OPEN && io_stalled(t, now)))
			io_fail(t, false);
		if (t->conn.state == CONN_CLOSED && !list_empty(&t->reqs) && now >= t->reconnect_at)
			io_connect(t);
		if (conn_connecting(&t->conn) && now >= t->connect_deadline) {
			/* a lookup still under way is waited for by the next
			 * attempt at this address */
			conn_give_up(&t->conn, t->conn_addr, t->connect_timeout_ms);
			io_fail_with(t, RAFTLOCK_ECONNECTION, true);
		}
		if (t->conn.state == CONN_OPEN) {
			io_send_pending(t, now);
			int err = conn_flush(&t->conn);
			if (err != 0)
				io_fail_with(t, err, false);
		}
		/* the socket, or the lookup of the address's name */
		int conn_fd = conn_poll_fd(&t->conn);
		struct pollfd p[2] = {
			{.fd = t->wake_fd, .events = POLLIN},
			{.fd = conn_fd, .events = conn_poll_events(&t->conn)},
		};
		/* decrypted bytes in OpenSSL do not make the socket readable */
		bool buffered = conn_buffered(&t->conn);
		int timeout = buffered || t->wake_pending || t->deferred != NULL
				      ? 0
				      : io_poll_timeout(t, now);
		nfds_t n = conn_fd >= 0 ? 2 : 1;
		t->io_polling = true;
		t->io_epoch = t->clock_epoch;
		pthread_mutex_unlock(&t->mu);
		int pr = poll(p, n, timeout);
		if (buffered && pr >= 0) {
			pr += p[1].revents == 0;
			p[1].revents |= POLLIN;
		}
		if (pr > 0 && n == 2 && t->conn.state == CONN_OPEN &&
		    conn_can_read(&t->conn, p[1].revents))
			io_receive(t);
		pthread_mutex_lock(&t->mu);
		t->io_polling = false;
		t->wake_sent = false;
		if (pr <= 0)
			continue;
		if (p[0].revents & POLLIN) {
			uint64_t v;
			ssize_t rv = read(t->wake_fd, &v, sizeof v);
			(void)rv;
		}
		if (n == 2 && p[1].revents != 0 && conn_poll_fd(&t->conn) == p[1].fd)
			io_handle(t, p[1].revents);
		if (t->drop_conn)
			io_fail(t, false);
	}
	/* stopping: whatever completed last is woken now, lock held */
	wake_batch_send(&t->waker, &t->to_wake);
	t->wake_pending = false;
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

/* -------------------------------------------------------------- time -- */

uint64_t transport_mono_ms(const struct transport *t)
{
	uint64_t skew = __atomic_load_n(&t->clock_skew_ms, __ATOMIC_RELAXED);
	if (__atomic_load_n(&t->clock_frozen, __ATOMIC_ACQUIRE))
		return t->frozen_mono_ms + skew;
	return clock_mono_ms() + skew;
}

uint64_t transport_boot_ms(const struct transport *t)
{
	uint64_t skew = __atomic_load_n(&t->clock_skew_ms, __ATOMIC_RELAXED);
	if (__atomic_load_n(&t->clock_frozen, __ATOMIC_ACQUIRE))
		return t->frozen_boot_ms + skew;
	return clock_boot_ms() + skew;
}

/* As long from now, on the real clock, as at_ms is ahead of the client's:
 * a stopped clock's waiter wakes after that long, finds its time not yet
 * come and waits again, until transport_clock_advance() wakes it. */
struct timespec transport_deadline(const struct transport *t, uint64_t at_ms)
{
	uint64_t now = transport_mono_ms(t), real = clock_mono_ms();
	uint64_t left = at_ms > now ? at_ms - now : 0;
	/* no deadline (UINT64_MAX) stays none, whatever the test clocks */
	return clock_mono_deadline(left > UINT64_MAX - real ? UINT64_MAX : real + left);
}

void transport_clock_freeze(struct transport *t)
{
	pthread_mutex_lock(&t->mu);
	if (!t->clock_frozen) {
		t->frozen_mono_ms = clock_mono_ms();
		t->frozen_boot_ms = clock_boot_ms();
		__atomic_store_n(&t->clock_frozen, true, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&t->mu);
}

void transport_clock_advance(struct transport *t, uint64_t ms)
{
	pthread_mutex_lock(&t->mu);
	__atomic_add_fetch(&t->clock_skew_ms, ms, __ATOMIC_RELAXED);
	t->clock_epoch++;
	transport_wake_all(t);
	transport_wake_io(t);
	pthread_mutex_unlock(&t->mu);
}

bool transport_sent_here(const struct transport *t, const struct request *req)
{
	return req->ever_sent && req->sent_gen == t->conn_gen;
}

/* ---------------------------------------------------------- lifecycle -- */

/* Frees what t holds; the I/O thread is not running. */
static void transport_free(struct transport *t)
{
	while (!list_empty(&t->reqs))
		transport_take(t, list_entry(t->reqs.next, struct request, link), NULL);
	for (size_t i = 0; i < t->inbox.n; i++)
		raftlock__envelope__free_unpacked(t->inbox.env[i], NULL);
	free(t->inbox.env);
	conn_close(&t->conn);
	frame_reader_close(&t->conn.reader);
	if (t->has_redirect)
		conn_addr_free(&t->redirect);
	for (size_t i = 0; i < t->n_addrs; i++)
		conn_addr_free(&t->addrs[i]);
	free(t->addrs);
	free(t->conn_text);
	SSL_CTX_free(t->tls.ctx);
	free((char *)t->tls.server_name);
	if (t->auth_frame != NULL)
		explicit_bzero(t->auth_frame, t->auth_frame_len);
	free(t->auth_frame);
	if (t->wake_fd >= 0)
		close(t->wake_fd);
	pthread_cond_destroy(&t->cond);
	pthread_condattr_destroy(&t->condattr);
	pthread_mutex_destroy(&t->mu);
}

void transport_resolver_set(struct transport *t, resolve_fn fn)
{
	pthread_mutex_lock(&t->mu);
	t->resolver = fn;
	pthread_mutex_unlock(&t->mu);
}

int transport_check_options(const struct raftlock_client_options *opts)
{
	if (opts == NULL)
		return errmsg_set(NULL, RAFTLOCK_EINVAL, NULL, "open client: no options");
	if (opts->addresses == NULL || opts->n_addresses == 0)
		return errmsg_set(NULL, RAFTLOCK_EINVAL, NULL,
				  "open client: no node address given");
	if (opts->auth_token != NULL &&
	    (opts->auth_token[0] == '\0' ||
	     strnlen(opts->auth_token, RAFTLOCK_TOKEN_MAX + 1) > RAFTLOCK_TOKEN_MAX))
		return errmsg_set(NULL, RAFTLOCK_EINVAL, NULL,
				  "open client: the token is empty or longer than %d bytes",
				  RAFTLOCK_TOKEN_MAX);
	for (size_t i = 0; i < opts->n_addresses; i++) {
		struct conn_addr a;
		int rv = conn_addr_parse(opts->addresses[i], &a);
		if (rv != 0)
			return errmsg_set(NULL, rv, "expected host:port",
					  "open client: address '%s'",
					  opts->addresses[i] ? opts->addresses[i] : "(null)");
		conn_addr_free(&a);
	}
	bool tls = opts->tls || opts->tls_ca_file != NULL;
	const char *stray = opts->tls_cert_file != NULL     ? "tls_cert_file"
			    : opts->tls_key_file != NULL    ? "tls_key_file"
			    : opts->tls_server_name != NULL ? "tls_server_name"
							    : NULL;
	if (!tls && stray != NULL)
		return errmsg_set(NULL, RAFTLOCK_EINVAL, "set tls_ca_file, or tls",
				  "open client: %s given with TLS off", stray);
	if ((opts->tls_cert_file == NULL) != (opts->tls_key_file == NULL))
		return errmsg_set(NULL, RAFTLOCK_EINVAL, NULL,
				  "open client: a TLS client certificate needs its key, and a key "
				  "its certificate");
	if (opts->tls_server_name != NULL && opts->tls_server_name[0] == '\0')
		return errmsg_set(NULL, RAFTLOCK_EINVAL, NULL,
				  "open client: empty tls_server_name");
	return 0;
}

/* The TLS context of the options; err gets a message naming the file. */
static int transport_tls_init(struct transport *t, const struct raftlock_client_options *opts,
			      char *err, size_t errlen)
{
	if (!opts->tls && opts->tls_ca_file == NULL)
		return 0;
	if (opts->tls_server_name != NULL) {
		t->tls.server_name = strdup(opts->tls_server_name);
		if (t->tls.server_name == NULL)
			return RAFTLOCK_ENOMEM;
	}
	struct tls_files files = {
		.cert = opts->tls_cert_file,
		.key = opts->tls_key_file,
		.ca = opts->tls_ca_file,
	};
	if (tls_ctx_new(&t->tls.ctx, TLS_ROLE_CLIENT, &files, false, err, errlen) != 0)
		return RAFTLOCK_ECONFIG;
	return 0;
}

static int transport_init(struct transport *t, const struct raftlock_client_options *opts,
			  char *err, size_t errlen)
{
	t->wake_fd = -1;
	conn_init(&t->conn);
	t->addrs = calloc(opts->n_addresses, sizeof *t->addrs);
	if (t->addrs == NULL)
		return RAFTLOCK_ENOMEM;
	for (size_t i = 0; i < opts->n_addresses; i++) {
		int rv = conn_addr_parse(opts->addresses[i], &t->addrs[i]);
		if (rv != 0)
			return rv;
		t->n_addrs++;
	}
	t->request_timeout_ms =
		opts->request_timeout_ms ? opts->request_timeout_ms : CLIENT_REQUEST_TIMEOUT_MS;
	t->connect_timeout_ms =
		opts->connect_timeout_ms ? opts->connect_timeout_ms : CLIENT_CONNECT_TIMEOUT_MS;
	int rv = transport_tls_init(t, opts, err, errlen);
	if (rv != 0)
		return rv;
	t->auth_gen = UINT64_MAX; /* no connection yet */
	if (opts->auth_token != NULL) {
		Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
		Raftlock__AuthenticateRequest req = RAFTLOCK__AUTHENTICATE_REQUEST__INIT;
		req.token.data = (uint8_t *)opts->auth_token;
		req.token.len = strlen(opts->auth_token);
		env.body_case = RAFTLOCK__ENVELOPE__BODY_AUTHENTICATE;
		env.authenticate = &req;
		rv = codec_frame_envelope(&env, &t->auth_frame, &t->auth_frame_len);
		if (rv != 0)
			return rv;
	}
	t->rng = clock_mono_ms() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)t;
	t->rng |= 1;
	t->addr_next = (size_t)(transport_random(t) % t->n_addrs);
	t->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->wake_fd < 0)
		return RAFTLOCK_EINTERNAL;
	return 0;
}

int transport_open(struct transport *t, const struct raftlock_client_options *opts)
{
	pthread_mutex_init(&t->mu, NULL);
	list_init(&t->reqs);
	pthread_condattr_init(&t->condattr);
	pthread_condattr_setclock(&t->condattr, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cond, &t->condattr);
	char err[ERRMSG_SIZE / 2] = "";
	int rv = transport_init(t, opts, err, sizeof err);
	if (rv != 0) {
		errmsg_set(NULL, rv, err, "open client");
		goto err;
	}
	if (pthread_create(&t->io_thread, NULL, io_main, t) != 0) {
		rv = errmsg_set(NULL, RAFTLOCK_EINTERNAL, NULL,
				"open client: start the I/O thread");
		goto err;
	}
	return 0;
err:
	transport_free(t);
	return rv;
}

void transport_close(struct transport *t)
{
	pthread_mutex_lock(&t->mu);
	t->io_stop = true;
	transport_wake_io(t);
	pthread_mutex_unlock(&t->mu);
	pthread_join(t->io_thread, NULL);
	transport_free(t);
}
