/*
 * test_client_fake.c: the client library against fake servers on loopback
 * that speak the real framing (proto/frame.h, proto/codec.h): redirects,
 * reconnects and retries with the original seq, ack_below, pushed grants
 * and canceled waits, and session loss.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "codec.h"
#include "frame.h"
#include "raftlock.h"

/* ------------------------------------------------------- fake server -- */

#define FAKE_CONNS 8
#define FAKE_LOG 256

enum fake_role {
	FAKE_LEADER,   /* answers everything */
	FAKE_FOLLOWER, /* NOT_LEADER, pointing at `leader` */
};

struct fake_entry {
	Raftlock__Envelope__BodyCase body;
	uint64_t id;
	uint64_t session;
	uint64_t seq;
	uint64_t ack_below;
	uint64_t nonce;     /* open session */
	uint64_t other;     /* acquire: owner; cancel: acquire_seq */
	bool wait;          /* acquire */
	int conn;           /* serial number of the connection */
};

struct fake {
	int lfd;
	int stop[2];
	char addr[32];
	pthread_t thread;
	pthread_mutex_t mu;
	/* behaviour, set by the test under mu */
	enum fake_role role;
	char leader[32];
	bool drop_first_acquire;   /* close the connection instead of answering */
	bool unknown_first_acquire;/* answer EUNKNOWN once */
	bool keepalive_silent;     /* never answer keepalives */
	bool keepalive_gone;       /* answer ESESSION */
	bool busy;                 /* try-locks: EBUSY */
	int grant_after_ms;        /* wait=true: push a grant after this; <0 never */
	int cancel_status;         /* CancelWait result */
	bool grant_on_cancel;      /* push the grant just before the cancel reply */
	/* state */
	int conns_seen;
	uint64_t next_session;
	uint64_t next_token;
	struct fake_entry log[FAKE_LOG];
	int n_log;
	/* one pending push */
	int push_fd;
	uint64_t push_id;
	uint64_t push_at;
	int fds[FAKE_CONNS];
	int serial[FAKE_CONNS];
	struct frame_reader readers[FAKE_CONNS];
};

static void fake_send(int fd, Raftlock__Envelope *env)
{
	uint8_t *buf;
	size_t n;
	assert_int_equal(codec_frame_envelope(env, &buf, &n), 0);
	size_t off = 0;
	while (off < n) {
		ssize_t w = send(fd, buf + off, n - off, MSG_NOSIGNAL);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	free(buf);
}

static void fake_send_result(int fd, uint64_t id, int status,
			     Raftlock__Result *res, bool push)
{
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	env.id = id;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_RESPONSE;
	env.response = &resp;
	resp.status = status;
	resp.push = push;
	if (res != NULL) {
		resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_RESULT;
		resp.result = res;
	}
	fake_send(fd, &env);
}

static void fake_push_grant(struct fake *f, int fd, uint64_t id)
{
	Raftlock__Result res = RAFTLOCK__RESULT__INIT;
	res.token = ++f->next_token;
	res.count = 1;
	fake_send_result(fd, id, 0, &res, true);
}

/* Every mutating request carries (session, seq, ack_below). */
#define FAKE_COPY_SEQ(e, m)                                                    \
	((e)->session = (m)->session, (e)->seq = (m)->seq,                     \
	 (e)->ack_below = (m)->ack_below)

static void fake_log(struct fake *f, const Raftlock__Envelope *env, int serial)
{
	if (f->n_log == FAKE_LOG)
		return;
	struct fake_entry *e = &f->log[f->n_log++];
	memset(e, 0, sizeof *e);
	e->body = env->body_case;
	e->id = env->id;
	e->conn = serial;
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION:
		e->nonce = env->open_session->nonce;
		break;
	case RAFTLOCK__ENVELOPE__BODY_ACQUIRE:
		FAKE_COPY_SEQ(e, env->acquire);
		e->other = env->acquire->acquire->owner;
		e->wait = env->acquire->acquire->wait;
		break;
	case RAFTLOCK__ENVELOPE__BODY_RELEASE:
		FAKE_COPY_SEQ(e, env->release);
		e->other = env->release->release->owner;
		break;
	case RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT:
		FAKE_COPY_SEQ(e, env->cancel_wait);
		e->other = env->cancel_wait->cancel->acquire_seq;
		break;
	case RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION:
		FAKE_COPY_SEQ(e, env->close_session);
		break;
	default:
		break;
	}
}

static int fake_count(struct fake *f, Raftlock__Envelope__BodyCase body)
{
	pthread_mutex_lock(&f->mu);
	int n = 0;
	for (int i = 0; i < f->n_log; i++)
		n += f->log[i].body == body;
	pthread_mutex_unlock(&f->mu);
	return n;
}

/* The k-th logged request of that kind (copied). */
static struct fake_entry fake_nth(struct fake *f,
				  Raftlock__Envelope__BodyCase body, int k)
{
	struct fake_entry e = {0};
	pthread_mutex_lock(&f->mu);
	for (int i = 0; i < f->n_log; i++)
		if (f->log[i].body == body && k-- == 0) {
			e = f->log[i];
			break;
		}
	pthread_mutex_unlock(&f->mu);
	return e;
}

static void fake_keepalive(struct fake *f, int fd, const Raftlock__Envelope *req)
{
	if (f->keepalive_silent)
		return;
	size_t n = req->keepalive->n_sessions;
	int32_t *st = calloc(n + 1, sizeof *st);
	assert_non_null(st);
	for (size_t i = 0; i < n; i++)
		st[i] = f->keepalive_gone ? RAFTLOCK_ESESSION : 0;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	Raftlock__KeepAliveResult kr = RAFTLOCK__KEEP_ALIVE_RESULT__INIT;
	env.id = req->id;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_RESPONSE;
	env.response = &resp;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_KEEPALIVE;
	resp.keepalive = &kr;
	kr.statuses = st;
	kr.n_statuses = n;
	fake_send(fd, &env);
	free(st);
}

static void fake_acquire(struct fake *f, int fd, const Raftlock__Envelope *req)
{
	Raftlock__Result res = RAFTLOCK__RESULT__INIT;
	if (req->acquire->acquire->wait) {
		if (f->grant_after_ms >= 0) {
			f->push_fd = fd;
			f->push_id = req->id;
			f->push_at = clock_mono_ms() + (uint64_t)f->grant_after_ms;
		}
		res.queued = true;
	} else if (f->busy) {
		res.status = RAFTLOCK_EBUSY;
	} else {
		res.token = ++f->next_token;
		res.count = 1;
	}
	fake_send_result(fd, req->id, 0, &res, false);
}

/* Answers one request; returns false to drop the connection. */
static bool fake_answer(struct fake *f, int fd, const Raftlock__Envelope *req)
{
	Raftlock__Result res = RAFTLOCK__RESULT__INIT;
	if (f->role == FAKE_FOLLOWER) {
		Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
		Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
		env.id = req->id;
		env.body_case = RAFTLOCK__ENVELOPE__BODY_RESPONSE;
		env.response = &resp;
		resp.status = RAFTLOCK_ENOTLEADER;
		resp.leader = f->leader;
		fake_send(fd, &env);
		return true;
	}
	switch (req->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION:
		res.session = ++f->next_session;
		res.ttl_ms = req->open_session->ttl_ms;
		fake_send_result(fd, req->id, 0, &res, false);
		return true;
	case RAFTLOCK__ENVELOPE__BODY_KEEPALIVE:
		fake_keepalive(f, fd, req);
		return true;
	case RAFTLOCK__ENVELOPE__BODY_ACQUIRE:
		if (f->drop_first_acquire) {
			f->drop_first_acquire = false;
			return false;
		}
		if (f->unknown_first_acquire) {
			f->unknown_first_acquire = false;
			fake_send_result(fd, req->id, RAFTLOCK_EUNKNOWN, NULL, false);
			return true;
		}
		fake_acquire(f, fd, req);
		return true;
	case RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT:
		if (f->grant_on_cancel && f->push_id != 0) {
			fake_push_grant(f, f->push_fd, f->push_id);
			f->push_id = 0;
		}
		if (f->cancel_status == 0)
			f->push_id = 0;
		res.status = f->cancel_status;
		fake_send_result(fd, req->id, 0, &res, false);
		return true;
	default: /* release, close: done, nothing left */
		fake_send_result(fd, req->id, 0, &res, false);
		return true;
	}
}

static void fake_drop(struct fake *f, int i)
{
	close(f->fds[i]);
	f->fds[i] = -1;
	frame_reader_close(&f->readers[i]);
}

static void fake_read(struct fake *f, int i)
{
	uint8_t buf[4096];
	ssize_t r = recv(f->fds[i], buf, sizeof buf, 0);
	if (r <= 0 || frame_reader_feed(&f->readers[i], buf, (size_t)r) != 0) {
		fake_drop(f, i);
		return;
	}
	const uint8_t *p;
	size_t n;
	while (f->fds[i] >= 0 && frame_reader_next(&f->readers[i], &p, &n) == 1) {
		Raftlock__Envelope *req;
		assert_int_equal(codec_decode_envelope(p, n, &req), 0);
		pthread_mutex_lock(&f->mu);
		fake_log(f, req, f->serial[i]);
		bool keep = fake_answer(f, f->fds[i], req);
		pthread_mutex_unlock(&f->mu);
		raftlock__envelope__free_unpacked(req, NULL);
		if (!keep)
			fake_drop(f, i);
	}
}

static void fake_accept(struct fake *f)
{
	int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	for (int i = 0; i < FAKE_CONNS; i++) {
		if (f->fds[i] < 0) {
			f->fds[i] = fd;
			frame_reader_init(&f->readers[i], RAFTLOCK_FRAME_MAX);
			pthread_mutex_lock(&f->mu);
			f->serial[i] = ++f->conns_seen;
			pthread_mutex_unlock(&f->mu);
			return;
		}
	}
	close(fd);
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	for (;;) {
		struct pollfd p[FAKE_CONNS + 2];
		p[0] = (struct pollfd){.fd = f->stop[0], .events = POLLIN};
		p[1] = (struct pollfd){.fd = f->lfd, .events = POLLIN};
		for (int i = 0; i < FAKE_CONNS; i++)
			p[i + 2] = (struct pollfd){.fd = f->fds[i], .events = POLLIN};
		poll(p, FAKE_CONNS + 2, 10);
		if (p[0].revents)
			break;
		if (p[1].revents & POLLIN)
			fake_accept(f);
		for (int i = 0; i < FAKE_CONNS; i++)
			if (f->fds[i] >= 0 && p[i + 2].fd == f->fds[i] &&
			    p[i + 2].revents)
				fake_read(f, i);
		pthread_mutex_lock(&f->mu);
		if (f->push_id != 0 && clock_mono_ms() >= f->push_at) {
			fake_push_grant(f, f->push_fd, f->push_id);
			f->push_id = 0;
		}
		pthread_mutex_unlock(&f->mu);
	}
	return NULL;
}

static struct fake *fake_start(enum fake_role role)
{
	struct fake *f = calloc(1, sizeof *f);
	assert_non_null(f);
	f->role = role;
	f->grant_after_ms = -1;
	for (int i = 0; i < FAKE_CONNS; i++)
		f->fds[i] = -1;
	pthread_mutex_init(&f->mu, NULL);
	assert_int_equal(pipe(f->stop), 0);
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(f->lfd >= 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof sa;
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(f->lfd, 16), 0);
	assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&sa, &len), 0);
	snprintf(f->addr, sizeof f->addr, "127.0.0.1:%u", ntohs(sa.sin_port));
	assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
	return f;
}

static void fake_stop(struct fake *f)
{
	assert_int_equal(write(f->stop[1], "x", 1), 1);
	pthread_join(f->thread, NULL);
	for (int i = 0; i < FAKE_CONNS; i++)
		if (f->fds[i] >= 0)
			fake_drop(f, i);
	close(f->lfd);
	close(f->stop[0]);
	close(f->stop[1]);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

/* ------------------------------------------------------------ helpers -- */

static raftlock_client *client_for(const char *addr, unsigned timeout_ms)
{
	const char *addrs[] = {addr};
	struct raftlock_client_options o = {
		.addresses = addrs,
		.n_addresses = 1,
		.client_name = "test",
		.request_timeout_ms = timeout_ms,
		.connect_timeout_ms = 300,
	};
	raftlock_client *c = NULL;
	assert_int_equal(raftlock_client_open(&o, &c, NULL), 0);
	return c;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}


/* A fake leader, a client on it, a session and a lock handle. */
struct rig {
	struct fake *f;
	raftlock_client *c;
	raftlock_session *s;
	raftlock_lock *l;
};

static void rig_up(struct rig *r, const char *name, unsigned timeout_ms,
		   const struct raftlock_session_options *so)
{
	r->f = fake_start(FAKE_LEADER);
	r->c = client_for(r->f->addr, timeout_ms);
	assert_int_equal(raftlock_session_open(r->c, so, &r->s), 0);
	assert_int_equal(raftlock_lock_new(r->s, name, NULL, &r->l), 0);
}

/* Closes the client (and with it the session) and stops the fake. */
static void rig_down(struct rig *r)
{
	raftlock_client_close(r->c);
	fake_stop(r->f);
}

/* Sets a behaviour field of a running fake. */
#define FAKE_SET(f, field, value)                                              \
	do {                                                                   \
		pthread_mutex_lock(&(f)->mu);                                  \
		(f)->field = (value);                                          \
		pthread_mutex_unlock(&(f)->mu);                                \
	} while (0)

#define ACQUIRE RAFTLOCK__ENVELOPE__BODY_ACQUIRE
#define RELEASE RAFTLOCK__ENVELOPE__BODY_RELEASE
#define CANCEL RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT
#define CLOSE RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION
#define OPEN RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION
#define KEEPALIVE RAFTLOCK__ENVELOPE__BODY_KEEPALIVE

/* -------------------------------------------------------------- tests -- */

static void test_follows_not_leader_redirect(void **state)
{
	(void)state;
	struct fake *leader = fake_start(FAKE_LEADER);
	struct fake *follower = fake_start(FAKE_FOLLOWER);
	leader->next_session = 41;
	strcpy(follower->leader, leader->addr);
	raftlock_client *c = client_for(follower->addr, 3000);
	raftlock_session *s = NULL;
	assert_int_equal(raftlock_session_open(c, NULL, &s), 0);
	assert_int_equal(raftlock_session_id(s), 42);
	/* asked the follower once, then the leader, with the same nonce */
	assert_int_equal(fake_count(follower, OPEN), 1);
	assert_int_equal(fake_count(leader, OPEN), 1);
	struct fake_entry a = fake_nth(follower, OPEN, 0);
	struct fake_entry b = fake_nth(leader, OPEN, 0);
	assert_int_equal(a.nonce, b.nonce);
	assert_int_equal(a.id, b.id);
	/* and stays with the leader */
	raftlock_lock *l;
	uint64_t token = 0;
	assert_int_equal(raftlock_lock_new(s, "r", NULL, &l), 0);
	assert_int_equal(raftlock_lock_try(l, &token), 0);
	assert_true(token != 0);
	assert_int_equal(fake_count(follower, ACQUIRE), 0);
	assert_int_equal(raftlock_session_close(s), 0);
	raftlock_client_close(c);
	fake_stop(follower);
	fake_stop(leader);
}

static void test_reconnect_resends_with_same_seq(void **state)
{
	(void)state;
	struct rig r;
	uint64_t token = 0;
	rig_up(&r, "job", 3000, NULL);
	FAKE_SET(r.f, drop_first_acquire, true);
	assert_int_equal(raftlock_lock_try(r.l, &token), 0);
	assert_int_equal(token, 1);
	assert_int_equal(raftlock_lock_token(r.l), 1);
	assert_int_equal(fake_count(r.f, ACQUIRE), 2);
	struct fake_entry a = fake_nth(r.f, ACQUIRE, 0);
	struct fake_entry b = fake_nth(r.f, ACQUIRE, 1);
	assert_int_equal(a.seq, 1);
	assert_int_equal(b.seq, a.seq);
	assert_int_equal(b.ack_below, a.ack_below);
	assert_int_equal(b.id, a.id);
	assert_int_equal(b.other, a.other);
	assert_true(b.conn > a.conn); /* on a new connection */
	assert_int_equal(raftlock_session_close(r.s), 0);
	rig_down(&r);
}

static void test_unknown_outcome_retried_with_same_seq(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, "job", 3000, NULL);
	FAKE_SET(r.f, unknown_first_acquire, true);
	assert_int_equal(raftlock_lock_try(r.l, NULL), 0);
	assert_int_equal(fake_count(r.f, ACQUIRE), 2);
	struct fake_entry a = fake_nth(r.f, ACQUIRE, 0);
	struct fake_entry b = fake_nth(r.f, ACQUIRE, 1);
	assert_int_equal(b.seq, a.seq);
	assert_int_equal(b.conn, a.conn); /* same connection, after a pause */
	rig_down(&r); /* closes the session too */
}

static void test_client_close_closes_sessions(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	raftlock_client *c = client_for(f->addr, 3000);
	raftlock_session *s1, *s2;
	assert_int_equal(raftlock_session_open(c, NULL, &s1), 0);
	assert_int_equal(raftlock_session_open(c, NULL, &s2), 0);
	raftlock_client_close(c);
	assert_int_equal(fake_count(f, CLOSE), 2);
	fake_stop(f);
}

static void test_seq_and_ack_below(void **state)
{
	(void)state;
	struct rig r;
	raftlock_lock *l2;
	rig_up(&r, "a", 3000, NULL);
	assert_int_equal(raftlock_lock_new(r.s, "a", NULL, &l2), 0);
	assert_int_equal(raftlock_lock_try(r.l, NULL), 0);
	uint32_t left = 99;
	assert_int_equal(raftlock_lock_release(r.l, &left), 0);
	assert_int_equal(left, 0);
	assert_int_equal(raftlock_lock_token(r.l), 0);
	assert_int_equal(raftlock_lock_try(l2, NULL), 0);
	assert_int_equal(raftlock_session_close(r.s), 0);
	struct fake_entry a1 = fake_nth(r.f, ACQUIRE, 0);
	struct fake_entry r1 = fake_nth(r.f, RELEASE, 0);
	struct fake_entry a2 = fake_nth(r.f, ACQUIRE, 1);
	struct fake_entry cl = fake_nth(r.f, CLOSE, 0);
	assert_int_equal(a1.seq, 1);
	assert_int_equal(a1.ack_below, 1);
	assert_int_equal(r1.seq, 2);
	assert_int_equal(r1.ack_below, 2);
	assert_int_equal(a2.seq, 3);
	assert_int_equal(a2.ack_below, 3);
	assert_int_equal(cl.seq, 4);
	assert_int_equal(cl.ack_below, 4);
	/* two handles are two owners; the release names the first */
	assert_int_not_equal(a1.other, a2.other);
	assert_int_equal(r1.other, a1.other);
	assert_int_equal(a1.session, 1);
	rig_down(&r);
}

static void test_unknown_outcome_holds_ack_below(void **state)
{
	(void)state;
	struct rig r;
	struct raftlock_session_options so = {.ttl_ms = 60000};
	rig_up(&r, "a", 400, &so);
	/* NOT_LEADER pointing at itself until the caller gives up */
	strcpy(r.f->leader, r.f->addr);
	FAKE_SET(r.f, role, FAKE_FOLLOWER);
	int rv = raftlock_lock_try(r.l, NULL);
	assert_true(rv == RAFTLOCK_EUNAVAILABLE || rv == RAFTLOCK_ETIMEDOUT);
	assert_non_null(strstr(raftlock_errmsg(r.c), "acquire 'a'"));
	FAKE_SET(r.f, role, FAKE_LEADER);
	assert_int_equal(raftlock_lock_try(r.l, NULL), 0);
	int n = fake_count(r.f, ACQUIRE);
	struct fake_entry last = fake_nth(r.f, ACQUIRE, n - 1);
	assert_int_equal(last.seq, 2);
	assert_int_equal(last.ack_below, 1); /* seq 1's outcome is unknown */
	rig_down(&r);
}

static void test_try_lock_busy(void **state)
{
	(void)state;
	struct rig r;
	uint64_t token = 77;
	rig_up(&r, "db/primary", 3000, NULL);
	FAKE_SET(r.f, busy, true);
	assert_int_equal(raftlock_lock_try(r.l, &token), RAFTLOCK_EBUSY);
	assert_int_equal(token, 77); /* outputs unchanged on failure */
	assert_string_equal(raftlock_errmsg(r.c), "acquire 'db/primary': "
				"the lock is held by another owner");
	raftlock_lock_free(r.l);
	rig_down(&r);
}

static void test_lock_names(void **state)
{
	(void)state;
	struct rig r;
	raftlock_lock *l = NULL;
	char name[RAFTLOCK_NAME_MAX + 2];
	rig_up(&r, "n", 3000, NULL);
	assert_int_equal(raftlock_lock_new(r.s, "", NULL, &l), RAFTLOCK_EINVAL);
	assert_int_equal(raftlock_lock_new(r.s, NULL, NULL, &l), RAFTLOCK_EINVAL);
	memset(name, 'x', sizeof name - 1);
	name[sizeof name - 1] = '\0';
	assert_int_equal(raftlock_lock_new(r.s, name, NULL, &l), RAFTLOCK_ETOOBIG);
	assert_null(l);
	name[RAFTLOCK_NAME_MAX] = '\0';
	assert_int_equal(raftlock_lock_new(r.s, name, NULL, &l), 0);
	struct raftlock_lock_options so = {.kind = RAFTLOCK_SEMAPHORE};
	raftlock_lock *l2 = NULL;
	assert_int_equal(raftlock_lock_new(r.s, "sem", &so, &l2), RAFTLOCK_EINVAL);
	assert_null(l2);
	rig_down(&r); /* frees the session and its handles */
}

static void test_blocking_acquire_gets_pushed_grant(void **state)
{
	(void)state;
	struct rig r;
	uint64_t token = 0;
	rig_up(&r, "q", 3000, NULL);
	FAKE_SET(r.f, grant_after_ms, 150);
	uint64_t t0 = clock_mono_ms();
	assert_int_equal(raftlock_lock_acquire(r.l, RAFTLOCK_EXCLUSIVE, 1, 2000,
					       &token), 0);
	assert_true(clock_mono_ms() - t0 >= 140);
	assert_int_equal(token, 1);
	assert_true(fake_nth(r.f, ACQUIRE, 0).wait);
	assert_int_equal(fake_count(r.f, CANCEL), 0);
	rig_down(&r);
}

static void test_blocking_acquire_timeout_cancels(void **state)
{
	(void)state;
	struct rig r;
	uint64_t token = 5;
	rig_up(&r, "q", 3000, NULL);
	assert_int_equal(raftlock_lock_acquire(r.l, RAFTLOCK_EXCLUSIVE, 1, 200,
					       &token), RAFTLOCK_ETIMEDOUT);
	assert_int_equal(token, 5);
	assert_int_equal(raftlock_lock_token(r.l), 0);
	struct fake_entry a = fake_nth(r.f, ACQUIRE, 0);
	struct fake_entry cw = fake_nth(r.f, CANCEL, 0);
	assert_int_equal(fake_count(r.f, CANCEL), 1);
	assert_int_equal(cw.other, a.seq);
	assert_int_equal(cw.seq, a.seq + 1);
	/* the canceled acquire's outcome is known: ack_below moves on */
	assert_int_equal(raftlock_lock_try(r.l, NULL), 0);
	struct fake_entry t = fake_nth(r.f, ACQUIRE, 1);
	assert_int_equal(t.ack_below, t.seq);
	assert_int_equal(fake_count(r.f, RELEASE), 0);
	rig_down(&r);
}

static void test_grant_racing_cancel_is_released(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, "q", 3000, NULL);
	FAKE_SET(r.f, grant_after_ms, 100000); /* not before the cancel */
	FAKE_SET(r.f, grant_on_cancel, true);
	FAKE_SET(r.f, cancel_status, RAFTLOCK_ENOTFOUND);
	assert_int_equal(raftlock_lock_acquire(r.l, RAFTLOCK_EXCLUSIVE, 1, 200,
					       NULL), RAFTLOCK_ETIMEDOUT);
	/* the grant that raced the cancel was given back */
	assert_int_equal(fake_count(r.f, RELEASE), 1);
	struct fake_entry a = fake_nth(r.f, ACQUIRE, 0);
	struct fake_entry rel = fake_nth(r.f, RELEASE, 0);
	assert_int_equal(rel.other, a.other);
	assert_int_equal(raftlock_lock_token(r.l), 0);
	rig_down(&r);
}

struct lost_seen {
	pthread_mutex_t mu;
	int calls;
	int reason;
	raftlock_session *session;
};

static void on_lost(raftlock_session *s, int reason, void *arg)
{
	struct lost_seen *l = arg;
	pthread_mutex_lock(&l->mu);
	l->calls++;
	l->reason = reason;
	l->session = s;
	pthread_mutex_unlock(&l->mu);
}

static int lost_calls(struct lost_seen *l)
{
	pthread_mutex_lock(&l->mu);
	int n = l->calls;
	pthread_mutex_unlock(&l->mu);
	return n;
}

/* Waits up to max_ms for the first on_lost call. */
static void lost_wait(struct lost_seen *l, unsigned max_ms)
{
	for (unsigned i = 0; i < max_ms / 10 && lost_calls(l) == 0; i++)
		sleep_ms(10);
}

static void test_silent_keepalives_lose_the_session(void **state)
{
	(void)state;
	struct rig r;
	struct lost_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct raftlock_session_options so = {
		.ttl_ms = 1000, .on_lost = on_lost, .on_lost_arg = &seen};
	uint64_t t0 = raftlock_now_ms();
	rig_up(&r, "x", 3000, &so);
	uint64_t v0 = raftlock_session_valid_until(r.s);
	assert_true(v0 >= t0 + 1000 - 60 && v0 <= raftlock_now_ms() + 1000 - 60);
	/* answered keepalives carry it past its first TTL */
	sleep_ms(1300);
	assert_true(raftlock_session_valid(r.s));
	assert_true(raftlock_session_valid_until(r.s) > v0 + 300);
	assert_true(fake_count(r.f, KEEPALIVE) >= 3);
	assert_int_equal(lost_calls(&seen), 0);

	FAKE_SET(r.f, keepalive_silent, true);
	uint64_t last_valid = raftlock_session_valid_until(r.s);
	lost_wait(&seen, 3000);
	assert_int_equal(lost_calls(&seen), 1);
	assert_true(raftlock_now_ms() >= last_valid);
	assert_ptr_equal(seen.session, r.s);
	assert_int_equal(seen.reason, RAFTLOCK_ETIMEDOUT);
	assert_int_equal(raftlock_session_valid_until(r.s), 0);
	assert_false(raftlock_session_valid(r.s));

	/* answers resume: a lost session stays lost, the callback ran once */
	FAKE_SET(r.f, keepalive_silent, false);
	sleep_ms(600);
	assert_int_equal(raftlock_session_valid_until(r.s), 0);
	assert_int_equal(lost_calls(&seen), 1);
	assert_int_equal(raftlock_lock_try(r.l, NULL), RAFTLOCK_ESESSION);
	assert_int_equal(fake_count(r.f, ACQUIRE), 0);
	raftlock_session_close(r.s);
	assert_int_equal(fake_count(r.f, CLOSE), 0);
	rig_down(&r);
}

static void test_server_says_session_gone(void **state)
{
	(void)state;
	struct rig r;
	struct lost_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct raftlock_session_options so = {
		.ttl_ms = 3000, .on_lost = on_lost, .on_lost_arg = &seen};
	rig_up(&r, "x", 3000, &so);
	FAKE_SET(r.f, keepalive_gone, true);
	/* well before validity ends: the next keepalive (after 1 s) says so */
	lost_wait(&seen, 2000);
	assert_int_equal(lost_calls(&seen), 1);
	assert_int_equal(seen.reason, RAFTLOCK_ESESSION);
	assert_int_equal(raftlock_session_valid_until(r.s), 0);
	rig_down(&r);
}

static void test_nobody_listening(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char addr[32];
	strcpy(addr, f->addr);
	fake_stop(f); /* the port is free again: connections are refused */
	raftlock_client *c = client_for(addr, 300);
	raftlock_session *s = NULL;
	uint64_t t0 = clock_mono_ms();
	assert_int_equal(raftlock_session_open(c, NULL, &s), RAFTLOCK_ECONNECTION);
	uint64_t took = clock_mono_ms() - t0;
	assert_true(took >= 290 && took < 1500);
	assert_null(s);
	struct raftlock_status *st = NULL;
	assert_int_equal(raftlock_status_get(c, NULL, &st), RAFTLOCK_ECONNECTION);
	assert_null(st);
	raftlock_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_follows_not_leader_redirect),
		cmocka_unit_test(test_reconnect_resends_with_same_seq),
		cmocka_unit_test(test_unknown_outcome_retried_with_same_seq),
		cmocka_unit_test(test_client_close_closes_sessions),
		cmocka_unit_test(test_seq_and_ack_below),
		cmocka_unit_test(test_unknown_outcome_holds_ack_below),
		cmocka_unit_test(test_try_lock_busy),
		cmocka_unit_test(test_lock_names),
		cmocka_unit_test(test_blocking_acquire_gets_pushed_grant),
		cmocka_unit_test(test_blocking_acquire_timeout_cancels),
		cmocka_unit_test(test_grant_racing_cancel_is_released),
		cmocka_unit_test(test_silent_keepalives_lose_the_session),
		cmocka_unit_test(test_server_says_session_gone),
		cmocka_unit_test(test_nobody_listening),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
