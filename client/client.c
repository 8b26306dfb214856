/* client.c: see client.h. */
#include "grow.h"
#include "client.h"

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
#include "keepalive.h"
#include "session.h"

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

uint64_t client_random(raftlock_client *c)
{
	uint64_t v;
	if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
		return v;
	/* xorshift64*, seeded at open: good enough for jitter and ids when
	 * the kernel's pool is not ready. */
	uint64_t x = c != NULL ? c->rng : clock_mono_ms() | 1;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	if (c != NULL)
		c->rng = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* c->mu held. The I/O thread sends whatever is pending before it waits
 * again, so it only needs a write to its eventfd while it waits. */
static void client_wake_io(raftlock_client *c)
{
	if (!c->io_polling || c->wake_sent)
		return;
	c->wake_sent = true;
	uint64_t one = 1;
	ssize_t rv = write(c->wake_fd, &one, sizeof one);
	(void)rv; /* a full counter already means "wake up" */
}

/* ----------------------------------------------------------- requests -- */

static void client_send_now(raftlock_client *c, struct request *r);

int client_submit(raftlock_client *c, Raftlock__Envelope *env, bool wants_push,
		  struct request **out)
{
	struct request *r = calloc(1, sizeof *r);
	if (r == NULL)
		return RAFTLOCK_ENOMEM;
	env->id = ++c->next_id;
	int rv = codec_frame_envelope(env, &r->frame, &r->frame_len);
	if (rv != 0) {
		free(r);
		return rv;
	}
	r->id = env->id;
	r->wants_push = wants_push;
	pthread_cond_init(&r->cond, &c->condattr);
	r->wake = &r->cond;
	r->last_err = RAFTLOCK_ECONNECTION;
	bool alone = list_empty(&c->reqs);
	list_add_head(&c->reqs, &r->link);
	if (alone)
		client_send_now(c, r); /* nothing else in flight */
	else
		client_wake_io(c); /* sent with the others: fewer, larger writes */
	*out = r;
	return 0;
}

int client_wait(raftlock_client *c, struct request *req, uint64_t deadline)
{
	while (!req->done) {
		if (clock_mono_ms() >= deadline)
			return req->last_err;
		struct timespec ts = clock_mono_deadline(deadline);
		pthread_cond_timedwait(req->wake, &c->mu, &ts);
	}
	return 0;
}

void client_on_done(raftlock_client *c, struct request *req,
		    void (*on_done)(raftlock_client *c, struct request *req, int err), void *op,
		    unsigned timeout_ms)
{
	req->on_done = on_done;
	req->op = op;
	req->deadline = clock_mono_ms() + (timeout_ms ? timeout_ms : c->request_timeout_ms);
}

void client_defer(raftlock_client *c, struct client_deferred *d)
{
	d->next = NULL;
	if (c->deferred_tail != NULL)
		c->deferred_tail->next = d;
	else
		c->deferred = d;
	c->deferred_tail = d;
}

void client_wake_all(raftlock_client *c)
{
	pthread_cond_broadcast(&c->cond);
	struct request *r;
	list_each_entry (r, &c->reqs, struct request, link)
		if (r->wake == &r->cond)
			pthread_cond_signal(&r->cond);
}

void client_watch(raftlock_client *c, struct request *req)
{
	req->wake = &c->cond;
}

void client_take(raftlock_client *c, struct request *req, Raftlock__Envelope **reply)
{
	list_remove(&req->link);
	if (reply != NULL)
		*reply = req->reply;
	else if (req->reply != NULL)
		raftlock__envelope__free_unpacked(req->reply, NULL);
	pthread_cond_destroy(&req->cond);
	free(req->acks);
	free(req->frame);
	free(req);
}

void client_resend(raftlock_client *c, struct request *req)
{
	req->sent_gen = 0;
	req->not_before = 0;
	client_wake_io(c);
}

int client_call(raftlock_client *c, Raftlock__Envelope *env, unsigned timeout_ms,
		Raftlock__Envelope **reply)
{
	struct request *r;
	if (timeout_ms == 0)
		timeout_ms = c->request_timeout_ms;
	uint64_t deadline = clock_mono_ms() + timeout_ms;
	int rv = client_submit(c, env, false, &r);
	if (rv != 0)
		return rv;
	rv = client_wait(c, r, deadline);
	client_take(c, r, rv == 0 ? reply : NULL);
	return rv;
}

static struct request *client_find(raftlock_client *c, uint64_t id)
{
	struct request *r;
	list_each_entry (r, &c->reqs, struct request, link)
		if (r->id == id)
			return r;
	return NULL;
}

static void client_complete(raftlock_client *c, struct request *r, Raftlock__Envelope *env)
{
	r->reply = env;
	r->done = true;
	r->done_boot = clock_boot_ms();
	if (r->on_done != NULL) {
		r->on_done(c, r, 0);
		return;
	}
	if (r->wake == &c->cond)
		pthread_cond_broadcast(&c->cond);
	else
		pthread_cond_signal(&r->cond);
}

/* ---------------------------------------------------------- I/O thread -- */

static uint64_t io_hash(const char *text)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)text; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return h;
}

static bool io_is_down(raftlock_client *c, const char *text, uint64_t now)
{
	uint64_t h = io_hash(text);
	for (size_t i = 0; i < sizeof c->down / sizeof c->down[0]; i++)
		if (c->down[i].hash == h && c->down[i].until > now)
			return true;
	return false;
}

/* Remembers that the current address could not be reached (or did not
 * answer), so that followers' redirects to it (a dead leader they still
 * believe in) are not followed for a while, and other addresses are tried
 * first. */
static void io_note_down(raftlock_client *c, uint64_t now)
{
	if (c->conn_text == NULL)
		return;
	size_t oldest = 0, n = sizeof c->down / sizeof c->down[0];
	for (size_t i = 1; i < n; i++)
		if (c->down[i].until < c->down[oldest].until)
			oldest = i;
	c->down[oldest].hash = io_hash(c->conn_text);
	c->down[oldest].until = now + CLIENT_DOWN_MS;
}

/* The connection is gone (or must go; unreachable: it never opened):
 * every request in flight will be sent again on the next one, after a
 * backoff once every address has failed. */
static void io_fail(raftlock_client *c, bool unreachable)
{
	uint64_t now = clock_mono_ms();
	if (unreachable)
		io_note_down(c, now);
	conn_close(&c->conn);
	c->drop_conn = false;
	c->hops++;
	if (c->has_redirect && c->hops <= c->n_addrs + 1) {
		c->reconnect_at = now;
		return;
	}
	if (c->hops < c->n_addrs) {
		c->reconnect_at = now;
		return;
	}
	unsigned b = c->backoff_ms * 2;
	if (b < CLIENT_BACKOFF_MIN_MS)
		b = CLIENT_BACKOFF_MIN_MS;
	if (b > CLIENT_BACKOFF_MAX_MS)
		b = CLIENT_BACKOFF_MAX_MS;
	c->backoff_ms = b;
	c->reconnect_at = now + b / 2 + client_random(c) % (b / 2 + 1);
}

static void io_connect(raftlock_client *c)
{
	struct conn_addr redirect = {0};
	const struct conn_addr *a;
	c->conn_gen++;
	c->owed_since = 0;
	if (c->has_redirect) {
		redirect = c->redirect;
		memset(&c->redirect, 0, sizeof c->redirect);
		c->has_redirect = false;
		a = &redirect;
	} else {
		/* the next address that is not known to be down, if any */
		uint64_t now = clock_mono_ms();
		for (size_t i = 0; i < c->n_addrs; i++) {
			size_t k = (c->addr_next + i) % c->n_addrs;
			if (!io_is_down(c, c->addrs[k].text, now)) {
				c->addr_next = k;
				break;
			}
		}
		a = &c->addrs[c->addr_next];
		c->addr_next = (c->addr_next + 1) % c->n_addrs;
	}
	free(c->conn_text);
	c->conn_text = strdup(a->text); /* NULL: only loses the memory above */
	/* Name resolution may block: not with the client locked. The conn
	 * and the addresses are the I/O thread's alone. */
	pthread_mutex_unlock(&c->mu);
	int rv = conn_start(&c->conn, a);
	pthread_mutex_lock(&c->mu);
	conn_addr_free(&redirect);
	if (rv != 0) {
		io_fail(c, true);
		return;
	}
	c->connect_deadline = clock_mono_ms() + c->connect_timeout_ms;
}

void client_suspect(raftlock_client *c, struct request *req)
{
	if (req->sent_gen == c->conn_gen && c->conn.state == CONN_OPEN && !c->drop_conn) {
		io_note_down(c, clock_mono_ms());
		c->drop_conn = true;
		client_wake_io(c);
	}
}

/* Whether a request sent on this connection before older_than is still
 * unanswered. Queued acquires wait for their push as long as they must. */
static bool io_owes(raftlock_client *c, uint64_t older_than)
{
	struct request *r;
	list_each_entry (r, &c->reqs, struct request, link)
		if (!r->done && !r->queued && r->sent_gen == c->conn_gen && r->sent_at < older_than)
			return true;
	return false;
}

/* Queues req on the connection; false when out of memory. */
static bool io_queue(raftlock_client *c, struct request *r, uint64_t now)
{
	if (conn_queue(&c->conn, r->frame, r->frame_len) != 0)
		return false;
	if (!r->ever_sent)
		r->first_sent_boot = clock_boot_ms();
	if (c->owed_since == 0)
		c->owed_since = now;
	r->sent_gen = c->conn_gen;
	r->sent_at = now;
	r->ever_sent = true;
	if (r->last_err == RAFTLOCK_ECONNECTION)
		r->last_err = RAFTLOCK_ETIMEDOUT;
	return true;
}

/* Whether a request sent on this connection has waited too long, or the
 * node has said nothing for as long while it owed an answer. The second
 * also counts requests whose callers gave up: calls shorter than
 * CLIENT_STALL_MS would otherwise keep a client on a node whose loop is
 * stuck (restoring a large snapshot, say) for as long as it is. */
static bool io_stalled(raftlock_client *c, uint64_t now)
{
	if (c->owed_since != 0 && now - c->owed_since > CLIENT_STALL_MS)
		return true;
	return now > CLIENT_STALL_MS && io_owes(c, now - CLIENT_STALL_MS);
}

static void io_send_pending(raftlock_client *c, uint64_t now)
{
	struct request *r;
	list_each_entry (r, &c->reqs, struct request, link) {
		if (r->done || r->sent_gen == c->conn_gen || r->not_before > now)
			continue;
		if (!io_queue(c, r, now))
			return; /* out of memory: try again on the next turn */
	}
}

/* A lone request is sent by the calling thread itself when the connection
 * is up and idle: a round trip then costs no wake-up of the I/O thread.
 * Sending only appends to the socket; the I/O thread reads without the
 * lock, and only it closes the connection. */
static void client_send_now(raftlock_client *c, struct request *r)
{
	if (c->conn.state != CONN_OPEN || c->drop_conn || conn_wants_write(&c->conn) ||
	    !io_queue(c, r, clock_mono_ms())) {
		client_wake_io(c);
		return;
	}
	if (conn_flush(&c->conn) != 0)
		c->drop_conn = true;
	if (c->drop_conn || conn_wants_write(&c->conn))
		client_wake_io(c); /* to fail the connection, or wait until writable */
}

static void io_redirect(raftlock_client *c, const char *leader)
{
	if (c->drop_conn)
		return; /* one redirect per connection */
	c->drop_conn = true;
	if (leader == NULL || leader[0] == '\0' || io_is_down(c, leader, clock_mono_ms()))
		return; /* the next address */
	if (c->has_redirect)
		conn_addr_free(&c->redirect);
	c->has_redirect = conn_addr_parse(leader, &c->redirect) == 0;
}

/* Whether a status answering a mutating request of a session proves that
 * it can never execute: the request itself is refused, identically at
 * every attempt. Anything else (a refusal before the log, an outcome the
 * node does not know) leaves it to be retried with its seq. */
static bool io_final_status(int status)
{
	return status == RAFTLOCK_EPROTO || status == RAFTLOCK_EINVAL || status == RAFTLOCK_ETOOBIG;
}

/* Sends r again after a back-off that doubles with each refusal in a row
 * (jittered, at most CLIENT_OVERLOAD_MAX_MS): the node was overloaded. */
static void io_retry_later(raftlock_client *c, struct request *r, int err)
{
	unsigned shift = r->retries < 5 ? r->retries : 5;
	unsigned b = CLIENT_RETRY_MIN_MS << shift;
	if (b > CLIENT_OVERLOAD_MAX_MS)
		b = CLIENT_OVERLOAD_MAX_MS;
	r->retries++;
	r->sent_gen = 0;
	r->not_before = clock_mono_ms() + b / 2 + client_random(c) % (b / 2 + 1);
	r->last_err = err;
}

/* An answer to a mutating request from a server older than protocol 2:
 * it did not see the envelope's sequence header and read the request as
 * one of no session, so nothing executed. The request ends with this
 * EPROTO answer (a final status: its seq is settled), or, if there is no
 * memory for it, is tried again later. */
static void io_old_server(raftlock_client *c, struct request *r, Raftlock__Envelope *env)
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
		io_retry_later(c, r, RAFTLOCK_ENOMEM);
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
	client_complete(c, r, e);
}

static void io_dispatch(raftlock_client *c, Raftlock__Envelope *env)
{
	struct request *r = client_find(c, env->id);
	if (r == NULL || r->done || env->body_case != RAFTLOCK__ENVELOPE__BODY_RESPONSE) {
		/* a reply to a request its caller gave up on */
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	}
	if (r->sequenced && env->protocol < WIRE_PROTOCOL_MIN_SERVER) {
		io_old_server(c, r, env);
		return;
	}
	const Raftlock__Response *resp = env->response;
	bool result = resp->status == 0 && resp->payload_case == RAFTLOCK__RESPONSE__PAYLOAD_RESULT;
	if (resp->push) {
		client_complete(c, r, env);
		return;
	}
	switch (resp->status) {
	case RAFTLOCK_ENOTLEADER:
		r->sent_gen = 0;
		r->last_err = RAFTLOCK_EUNAVAILABLE;
		io_redirect(c, resp->leader);
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	case RAFTLOCK_EUNAVAILABLE:
	case RAFTLOCK_EUNKNOWN:
		r->sent_gen = 0;
		r->not_before = clock_mono_ms() + CLIENT_RETRY_MIN_MS +
				client_random(c) % CLIENT_RETRY_SPAN_MS;
		r->last_err = resp->status == RAFTLOCK_EUNAVAILABLE ? RAFTLOCK_EUNAVAILABLE
								    : RAFTLOCK_ETIMEDOUT;
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	case RAFTLOCK_ESHUTDOWN:
		r->sent_gen = 0;
		c->drop_conn = true;
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	case RAFTLOCK_EOVERLOAD:
		io_retry_later(c, r, RAFTLOCK_EOVERLOAD);
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	}
	if (r->sequenced && !result && !io_final_status(resp->status)) {
		/* not applied (an older node's ELIMIT or ENOMEM, ...): the seq
		 * is not settled; a Result carries any outcome of apply */
		io_retry_later(c, r, RAFTLOCK_EOVERLOAD);
		raftlock__envelope__free_unpacked(env, NULL);
		return;
	}
	c->hops = 0;
	c->backoff_ms = 0;
	r->retries = 0;
	bool queued = result && r->wants_push && resp->result->queued;
	if (r->sequenced && result && resp->result->status != RAFTLOCK_EUNAVAILABLE)
		session_req_answered(c, r, queued);
	if (queued) {
		r->queued = true;
		raftlock__envelope__free_unpacked(env, NULL);
		pthread_cond_broadcast(r->wake);
		return;
	}
	client_complete(c, r, env);
}

/* Reads and decodes what arrived, without c->mu: the connection is the
 * I/O thread's alone, and user threads then wait for the lock only while
 * the replies are handed out. */
static void io_receive(raftlock_client *c)
{
	struct inbox *in = &c->inbox;
	int rv = conn_read(&c->conn);
	Raftlock__Envelope *env;
	int nr;
	while ((nr = conn_next(&c->conn, &env)) == 1) {
		if (grow(&in->env, &in->cap, in->n + 1, 64, sizeof *in->env) != 0) {
			raftlock__envelope__free_unpacked(env, NULL);
			nr = RAFTLOCK_ENOMEM;
			break;
		}
		in->env[in->n++] = env;
	}
	in->err = rv != 0 ? rv : nr < 0 ? nr : 0;
}

/* c->mu held; the replies were read by io_receive(). */
static void io_handle(raftlock_client *c, short revents)
{
	struct inbox *in = &c->inbox;
	for (size_t i = 0; i < in->n; i++)
		io_dispatch(c, in->env[i]);
	if (in->n > 0) {
		/* the node spoke: it owes nothing, or owes since now */
		uint64_t now = clock_mono_ms();
		c->owed_since = io_owes(c, now + 1) ? now : 0;
	}
	in->n = 0;
	if (in->err != 0) {
		in->err = 0;
		io_fail(c, false);
		return;
	}
	if (c->conn.state == CONN_CONNECTING) {
		if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
			return;
		if (conn_finish_connect(&c->conn) != 0) {
			io_fail(c, true);
			return;
		}
		/* anything already readable is reported by the next poll */
		io_send_pending(c, clock_mono_ms());
	}
	if ((revents & POLLOUT) && conn_flush(&c->conn) != 0)
		io_fail(c, false);
}

/* Asynchronous requests past their deadline end with their last error. */
static void io_expire(raftlock_client *c, uint64_t now)
{
	struct list *l, *tmp;
	list_each_safe (l, tmp, &c->reqs) {
		struct request *r = list_entry(l, struct request, link);
		if (r->on_done != NULL && !r->done && now >= r->deadline)
			r->on_done(c, r, r->last_err);
	}
}

/* Runs the deferred callbacks without c->mu (held on entry and return). */
static void io_run_deferred(raftlock_client *c)
{
	struct client_deferred *d = c->deferred;
	c->deferred = c->deferred_tail = NULL;
	pthread_mutex_unlock(&c->mu);
	while (d != NULL) {
		struct client_deferred *next = d->next;
		d->fn(d);
		d = next;
	}
	pthread_mutex_lock(&c->mu);
}

static int io_poll_timeout(raftlock_client *c, uint64_t now)
{
	uint64_t until = now + CLIENT_POLL_MAX_MS;
	if (c->conn.state == CONN_CLOSED && !list_empty(&c->reqs) && c->reconnect_at < until)
		until = c->reconnect_at;
	if (c->conn.state == CONN_CONNECTING && c->connect_deadline < until)
		until = c->connect_deadline;
	struct request *r;
	list_each_entry (r, &c->reqs, struct request, link) {
		if (!r->done && r->sent_gen != c->conn_gen && r->not_before < until)
			until = r->not_before;
		if (!r->done && r->on_done != NULL && r->deadline < until)
			until = r->deadline;
	}
	return until > now ? (int)(until - now) : 0;
}

static void *io_main(void *arg)
{
	raftlock_client *c = arg;
	pthread_mutex_lock(&c->mu);
	while (!c->io_stop) {
		uint64_t now = clock_mono_ms();
		io_expire(c, now);
		if (c->deferred != NULL) {
			/* callbacks may submit: send what they did before waiting */
			io_run_deferred(c);
			continue;
		}
		if (c->drop_conn || (c->conn.state == CONN_OPEN && io_stalled(c, now)))
			io_fail(c, false);
		if (c->conn.state == CONN_CLOSED && !list_empty(&c->reqs) && now >= c->reconnect_at)
			io_connect(c);
		if (c->conn.state == CONN_CONNECTING && now >= c->connect_deadline)
			io_fail(c, true);
		if (c->conn.state == CONN_OPEN) {
			io_send_pending(c, now);
			if (conn_flush(&c->conn) != 0)
				io_fail(c, false);
		}
		struct pollfd p[2] = {
			{.fd = c->wake_fd, .events = POLLIN},
			{.fd = c->conn.fd,
			 .events = (short)(POLLIN | (conn_wants_write(&c->conn) ? POLLOUT : 0))},
		};
		int timeout = io_poll_timeout(c, now);
		nfds_t n = c->conn.fd >= 0 ? 2 : 1;
		c->io_polling = true;
		pthread_mutex_unlock(&c->mu);
		int pr = poll(p, n, timeout);
		if (pr > 0 && n == 2 && c->conn.state == CONN_OPEN &&
		    (p[1].revents & (POLLIN | POLLERR | POLLHUP)))
			io_receive(c);
		pthread_mutex_lock(&c->mu);
		c->io_polling = false;
		c->wake_sent = false;
		if (pr <= 0)
			continue;
		if (p[0].revents & POLLIN) {
			uint64_t v;
			ssize_t rv = read(c->wake_fd, &v, sizeof v);
			(void)rv;
		}
		if (n == 2 && p[1].revents != 0 && c->conn.fd == p[1].fd)
			io_handle(c, p[1].revents);
		if (c->drop_conn)
			io_fail(c, false);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* ---------------------------------------------------------- lifecycle -- */

static void client_free(raftlock_client *c)
{
	while (!list_empty(&c->reqs))
		client_take(c, list_entry(c->reqs.next, struct request, link), NULL);
	for (size_t i = 0; i < c->inbox.n; i++)
		raftlock__envelope__free_unpacked(c->inbox.env[i], NULL);
	free(c->inbox.env);
	idmap_close(&c->session_ids);
	conn_close(&c->conn);
	frame_reader_close(&c->conn.reader);
	if (c->has_redirect)
		conn_addr_free(&c->redirect);
	for (size_t i = 0; i < c->n_addrs; i++)
		conn_addr_free(&c->addrs[i]);
	free(c->addrs);
	free(c->client_name);
	free(c->conn_text);
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	pthread_cond_destroy(&c->cond);
	pthread_condattr_destroy(&c->condattr);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static int client_check_options(const struct raftlock_client_options *opts)
{
	if (opts == NULL)
		return errmsg_set(NULL, RAFTLOCK_EINVAL, NULL, "open client: no options");
	if (opts->addresses == NULL || opts->n_addresses == 0)
		return errmsg_set(NULL, RAFTLOCK_EINVAL, NULL,
				  "open client: no node address given");
	for (size_t i = 0; i < opts->n_addresses; i++) {
		struct conn_addr a;
		int rv = conn_addr_parse(opts->addresses[i], &a);
		if (rv != 0)
			return errmsg_set(NULL, rv, "expected host:port",
					  "open client: address '%s'",
					  opts->addresses[i] ? opts->addresses[i] : "(null)");
		conn_addr_free(&a);
	}
	return 0;
}

static int client_init(raftlock_client *c, const struct raftlock_client_options *opts)
{
	c->wake_fd = -1;
	conn_init(&c->conn);
	c->addrs = calloc(opts->n_addresses, sizeof *c->addrs);
	if (c->addrs == NULL)
		return RAFTLOCK_ENOMEM;
	for (size_t i = 0; i < opts->n_addresses; i++) {
		int rv = conn_addr_parse(opts->addresses[i], &c->addrs[i]);
		if (rv != 0)
			return rv;
		c->n_addrs++;
	}
	const char *name =
		opts->client_name != NULL ? opts->client_name : program_invocation_short_name;
	c->client_name = strndup(name, RAFTLOCK_NAME_MAX);
	if (c->client_name == NULL)
		return RAFTLOCK_ENOMEM;
	if (gethostname(c->host, sizeof c->host - 1) != 0)
		strcpy(c->host, "unknown");
	c->request_timeout_ms =
		opts->request_timeout_ms ? opts->request_timeout_ms : CLIENT_REQUEST_TIMEOUT_MS;
	c->connect_timeout_ms =
		opts->connect_timeout_ms ? opts->connect_timeout_ms : CLIENT_CONNECT_TIMEOUT_MS;
	c->rng = clock_mono_ms() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)c;
	c->rng |= 1;
	c->owner_base = client_random(c);
	c->addr_next = (size_t)(client_random(c) % c->n_addrs);
	c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->wake_fd < 0)
		return RAFTLOCK_EINTERNAL;
	return 0;
}

RAFTLOCK_API int raftlock_client_open(const struct raftlock_client_options *opts,
				      raftlock_client **out, const char **errmsg_out)
{
	int rv = client_check_options(opts);
	if (rv != 0)
		goto out;
	raftlock_client *c = calloc(1, sizeof *c);
	if (c == NULL) {
		rv = errmsg_set(NULL, RAFTLOCK_ENOMEM, NULL, "open client");
		goto out;
	}
	pthread_mutex_init(&c->mu, NULL);
	list_init(&c->reqs);
	list_init(&c->sessions);
	idmap_init(&c->session_ids, sizeof(raftlock_session *));
	pthread_condattr_init(&c->condattr);
	pthread_condattr_setclock(&c->condattr, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &c->condattr);
	rv = client_init(c, opts);
	if (rv != 0) {
		errmsg_set(NULL, rv, NULL, "open client");
		goto err_free;
	}
	if (pthread_create(&c->io_thread, NULL, io_main, c) != 0) {
		rv = errmsg_set(NULL, RAFTLOCK_EINTERNAL, NULL,
				"open client: start the I/O thread");
		goto err_free;
	}
	rv = keepalive_start(c);
	if (rv != 0) {
		errmsg_set(NULL, rv, NULL, "open client: start the keepalive thread");
		goto err_io;
	}
	*out = c;
	return 0;

err_io:
	pthread_mutex_lock(&c->mu);
	c->io_stop = true;
	client_wake_io(c);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->io_thread, NULL);
err_free:
	client_free(c);
out:
	if (errmsg_out != NULL)
		*errmsg_out = errmsg_get(NULL);
	return rv;
}

RAFTLOCK_API void raftlock_client_close(raftlock_client *client)
{
	if (client == NULL)
		return;
	session_close_all(client);
	keepalive_stop(client);
	pthread_mutex_lock(&client->mu);
	client->io_stop = true;
	client_wake_io(client);
	pthread_mutex_unlock(&client->mu);
	pthread_join(client->io_thread, NULL);
	client_free(client);
}
