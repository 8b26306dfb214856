/* client_fakeserver.c: see client_fakeserver.h. */
#include "client_fakeserver.h"

#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
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

static bool fake_protocol_1;

void fake_speak_protocol_1(bool on)
{
	fake_protocol_1 = on;
}

/* The frame of env (freed by the caller): n bytes. */
static uint8_t *fake_frame(Raftlock__Envelope *env, size_t *n)
{
	uint8_t *buf;
	if (fake_protocol_1) {
		/* framed by hand: the codec would stamp the current protocol */
		size_t size = raftlock__envelope__get_packed_size(env);
		*n = FRAME_HEADER_SIZE + size;
		buf = malloc(*n);
		assert_non_null(buf);
		frame_put_header(buf, (uint32_t)size);
		raftlock__envelope__pack(env, buf + FRAME_HEADER_SIZE);
	} else {
		assert_int_equal(codec_frame_envelope(env, &buf, n), 0);
	}
	return buf;
}

static void fake_write(int fd, const uint8_t *buf, size_t n)
{
	size_t off = 0;
	while (off < n) {
		ssize_t w = send(fd, buf + off, n - off, MSG_NOSIGNAL);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
}

static void fake_send(int fd, Raftlock__Envelope *env)
{
	size_t n;
	uint8_t *buf = fake_frame(env, &n);
	fake_write(fd, buf, n);
	free(buf);
}

static void fake_send_response(int fd, uint64_t id, Raftlock__Response *resp)
{
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.id = id;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_RESPONSE;
	env.response = resp;
	fake_send(fd, &env);
}

static void fake_send_result(int fd, uint64_t id, int status, Raftlock__Result *res, bool push)
{
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.status = status;
	resp.push = push;
	if (res != NULL) {
		resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_RESULT;
		resp.result = res;
	}
	fake_send_response(fd, id, &resp);
}

/* The responses first (to request id) and second (to id2; 0: an event)
 * in one write(): the client reads both at once, and its I/O thread
 * dispatches both before a blocking call's caller wakes up. */
static void fake_send_both(int fd, uint64_t id, Raftlock__Response *first, uint64_t id2,
			   Raftlock__Response *second)
{
	Raftlock__Envelope env[2] = {RAFTLOCK__ENVELOPE__INIT, RAFTLOCK__ENVELOPE__INIT};
	env[0].id = id;
	env[1].id = id2;
	env[0].body_case = env[1].body_case = RAFTLOCK__ENVELOPE__BODY_RESPONSE;
	env[0].response = first;
	env[1].response = second;
	uint8_t *buf[2];
	size_t n[2];
	for (int i = 0; i < 2; i++)
		buf[i] = fake_frame(&env[i], &n[i]);
	uint8_t *both = malloc(n[0] + n[1]);
	assert_non_null(both);
	memcpy(both, buf[0], n[0]);
	memcpy(both + n[0], buf[1], n[1]);
	fake_write(fd, both, n[0] + n[1]);
	free(both);
	free(buf[0]);
	free(buf[1]);
}

/* The answer res to request id and, in the same write(), the lock event
 * ev, pushed as the server pushes them (service.c). push_answer: res is
 * the pushed grant of a queued acquire. */
static void fake_answer_with_event(int fd, uint64_t id, Raftlock__Result *res, bool push_answer,
				   Raftlock__SessionEvent *ev)
{
	Raftlock__Response answer = RAFTLOCK__RESPONSE__INIT;
	answer.push = push_answer;
	answer.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_RESULT;
	answer.result = res;
	Raftlock__Response event = RAFTLOCK__RESPONSE__INIT;
	event.push = true;
	event.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_SESSION_EVENT;
	event.session_event = ev;
	fake_send_both(fd, id, &answer, 0, &event);
}

/* The grant res, the answer to request id; with a try-lock held by
 * lose_with_grant on that connection, its answer RAFTLOCK_ESESSION
 * follows in the same write(). */
static void fake_send_grant(struct fake *f, int fd, uint64_t id, Raftlock__Result *res)
{
	if (f->loss_id == 0 || f->loss_fd != fd) {
		fake_send_result(fd, id, 0, res, false);
		return;
	}
	Raftlock__Response answer = RAFTLOCK__RESPONSE__INIT;
	answer.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_RESULT;
	answer.result = res;
	Raftlock__Result gone = RAFTLOCK__RESULT__INIT;
	gone.status = RAFTLOCK_ESESSION;
	Raftlock__Response loss = RAFTLOCK__RESPONSE__INIT;
	loss.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_RESULT;
	loss.result = &gone;
	fake_send_both(fd, id, &answer, f->loss_id, &loss);
	f->loss_id = 0;
	f->lose_with_grant = false;
}

/* The pushed grant res, then in the same write() its revocation (an
 * admin revoke or a short max_hold_ms racing the push). */
static void fake_push_revoked_grant(struct fake *f, int fd, uint64_t id, Raftlock__Result *res)
{
	Raftlock__SessionEvent ev = RAFTLOCK__SESSION_EVENT__INIT;
	ev.kind = RAFTLOCK__SESSION_EVENT_KIND__SESSION_EVENT_REVOKED;
	ev.session = f->push_session;
	ev.name = f->push_name;
	ev.owner = f->push_owner;
	ev.token = res->token;
	fake_answer_with_event(fd, id, res, true, &ev);
}

static void fake_push_grant(struct fake *f, int fd, uint64_t id)
{
	Raftlock__Result res = RAFTLOCK__RESULT__INIT;
	res.token = ++f->next_token;
	res.count = 1;
	if (f->revoke_with_grant)
		fake_push_revoked_grant(f, fd, id, &res);
	else
		fake_send_result(fd, id, 0, &res, true);
}

static void fake_copy_secret(struct fake_entry *e, const ProtobufCBinaryData *secret)
{
	e->secret_len = secret->len < sizeof e->secret ? secret->len : sizeof e->secret;
	memcpy(e->secret, secret->data, e->secret_len);
}

/* Every mutating request carries its sequence header in the envelope. */
static void fake_copy_seq(struct fake_entry *e, const Raftlock__Sequence *h)
{
	if (h == NULL)
		return;
	fake_copy_secret(e, &h->secret);
	e->session = h->session;
	e->seq = h->seq;
	e->ack_below = h->ack_below;
	e->n_acked = h->n_acked;
	for (size_t i = 0; i < h->n_acked && i < sizeof e->acked / sizeof e->acked[0]; i++)
		e->acked[i] = h->acked[i];
}

static void fake_log(struct fake *f, const Raftlock__Envelope *env, int serial)
{
	if (f->n_log == FAKE_LOG)
		return;
	struct fake_entry *e = &f->log[f->n_log++];
	memset(e, 0, sizeof *e);
	e->body = env->body_case;
	e->id = env->id;
	e->conn = serial;
	e->at_boot = clock_boot_ms();
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION:
		e->nonce = env->open_session->nonce;
		fake_copy_secret(e, &env->open_session->secret);
		break;
	case RAFTLOCK__ENVELOPE__BODY_WATCH:
		e->wait = env->watch->resume;
		e->other = env->watch->after_index;
		e->cluster = env->watch->cluster_id;
		break;
	case RAFTLOCK__ENVELOPE__BODY_KEEPALIVE:
		e->n_secrets = env->keepalive->n_secrets;
		if (env->keepalive->n_sessions > 0)
			e->session = env->keepalive->sessions[0];
		if (env->keepalive->n_secrets > 0)
			fake_copy_secret(e, &env->keepalive->secrets[0]);
		break;
	case RAFTLOCK__ENVELOPE__BODY_ACQUIRE:
		fake_copy_seq(e, env->sequence);
		e->other = env->acquire->acquire->owner;
		e->wait = env->acquire->acquire->wait;
		e->kind = env->acquire->acquire->kind;
		e->limit = env->acquire->acquire->limit;
		e->value_len = strlen(env->acquire->acquire->value);
		break;
	case RAFTLOCK__ENVELOPE__BODY_RELEASE:
		fake_copy_seq(e, env->sequence);
		e->other = env->release->release->owner;
		snprintf(e->name, sizeof e->name, "%s", env->release->release->name);
		break;
	case RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT:
		fake_copy_seq(e, env->sequence);
		e->other = env->cancel_wait->cancel->acquire_seq;
		break;
	case RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION:
	case RAFTLOCK__ENVELOPE__BODY_PROCLAIM: fake_copy_seq(e, env->sequence); break;
	default: break;
	}
}

void fake_set_leader(struct fake *f, const char *addr)
{
	pthread_mutex_lock(&f->mu);
	snprintf(f->leader, sizeof f->leader, "%s", addr);
	pthread_mutex_unlock(&f->mu);
}

int fake_count(struct fake *f, Raftlock__Envelope__BodyCase body)
{
	pthread_mutex_lock(&f->mu);
	int n = 0;
	for (int i = 0; i < f->n_log; i++)
		n += f->log[i].body == body;
	pthread_mutex_unlock(&f->mu);
	return n;
}

/* The k-th logged request of that kind (copied). */
struct fake_entry fake_nth(struct fake *f, Raftlock__Envelope__BodyCase body, int k)
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
	f->keepalives++;
	if (req->keepalive->n_sessions > f->keepalive_most)
		f->keepalive_most = req->keepalive->n_sessions;
	if (f->keepalive_silent)
		return;
	f->keepalive_answered_at = clock_boot_ms();
	if (f->keepalive_delay_ms > 0)
		sleep_ms((unsigned)f->keepalive_delay_ms); /* a slow commit */
	size_t n = req->keepalive->n_sessions;
	int32_t *st = calloc(n + 1, sizeof *st);
	assert_non_null(st);
	for (size_t i = 0; i < n; i++)
		st[i] = f->keepalive_gone ? RAFTLOCK_ESESSION : f->keepalive_status;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	Raftlock__KeepAliveResult kr = RAFTLOCK__KEEP_ALIVE_RESULT__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_KEEPALIVE;
	resp.keepalive = &kr;
	kr.statuses = st;
	kr.n_statuses = n;
	fake_send_response(fd, req->id, &resp);
	free(st);
}

/* The grant res of the try-lock req and, in the same write, a lock event
 * of kind f->event_with_grant for it: the client reads both at once. */
static void fake_grant_with_event(struct fake *f, int fd, const Raftlock__Envelope *req,
				  Raftlock__Result *res)
{
	Raftlock__SessionEvent ev = RAFTLOCK__SESSION_EVENT__INIT;
	ev.kind = (Raftlock__SessionEventKind)f->event_with_grant;
	ev.session = req->sequence != NULL ? req->sequence->session : 0;
	ev.name = req->acquire->acquire->name;
	ev.owner = req->acquire->acquire->owner;
	ev.token = res->token;
	fake_answer_with_event(fd, req->id, res, false, &ev);
}

static void fake_acquire(struct fake *f, int fd, const Raftlock__Envelope *req)
{
	Raftlock__Result res = RAFTLOCK__RESULT__INIT;
	if (req->acquire->acquire->wait) {
		if (f->queued_after_ms > 0)
			sleep_ms((unsigned)f->queued_after_ms);
		if (f->grant_after_ms >= 0) {
			f->push_fd = fd;
			f->push_id = req->id;
			f->push_at = clock_mono_ms() + (uint64_t)f->grant_after_ms;
			f->push_session = req->sequence != NULL ? req->sequence->session : 0;
			f->push_owner = req->acquire->acquire->owner;
			snprintf(f->push_name, sizeof f->push_name, "%s",
				 req->acquire->acquire->name);
		}
		res.queued = true;
	} else if (f->busy) {
		res.status = RAFTLOCK_EBUSY;
	} else {
		res.token = ++f->next_token;
		res.count = 1;
		if (f->event_with_grant != 0)
			fake_grant_with_event(f, fd, req, &res);
		else
			fake_send_grant(f, fd, req->id, &res);
		return;
	}
	fake_send_result(fd, req->id, 0, &res, false);
}

/* A set's acquire: granted whole at once, one token per lock in name
 * order; with revoke_with_grant, item revoke_set_item's grant is revoked
 * in the same write(). */
static void fake_multi_acquire(struct fake *f, int fd, const Raftlock__Envelope *req)
{
	size_t n = req->multi_acquire->acquire->n_items;
	uint64_t *tokens = calloc(n + 1, sizeof *tokens);
	assert_non_null(tokens);
	for (size_t i = 0; i < n; i++)
		tokens[i] = ++f->next_token;
	Raftlock__Result res = RAFTLOCK__RESULT__INIT;
	res.token = tokens[0];
	res.count = 1;
	res.tokens = tokens;
	res.n_tokens = n;
	size_t k = (size_t)f->revoke_set_item;
	if (f->revoke_with_grant && k < n) {
		Raftlock__SessionEvent ev = RAFTLOCK__SESSION_EVENT__INIT;
		ev.kind = RAFTLOCK__SESSION_EVENT_KIND__SESSION_EVENT_REVOKED;
		ev.session = req->sequence != NULL ? req->sequence->session : 0;
		ev.name = req->multi_acquire->acquire->items[k]->name;
		ev.owner = req->multi_acquire->acquire->owner;
		ev.token = tokens[k];
		fake_answer_with_event(fd, req->id, &res, false, &ev);
	} else {
		fake_send_grant(f, fd, req->id, &res);
	}
	free(tokens);
}

/* ------------------------------------------------------------- reads -- */

/* Fixed answers to reads, for the introspection tests: one node (id 7) of
 * three; locks "a/1" (two shared holders, one waiter) and "a/2", listed
 * one per page; one session holding both. */

static Raftlock__Owner fake_owner = {PROTOBUF_C_MESSAGE_INIT(&raftlock__owner__descriptor), "svc",
				     "host-\"1\"", 4242};

static void fake_status(int fd, uint64_t id)
{
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	Raftlock__StatusInfo si = RAFTLOCK__STATUS_INFO__INIT;
	Raftlock__Member m[3] = {RAFTLOCK__MEMBER__INIT, RAFTLOCK__MEMBER__INIT,
				 RAFTLOCK__MEMBER__INIT};
	Raftlock__Member *mp[3] = {&m[0], &m[1], &m[2]};
	char raft[3][32], client[3][32];
	for (int i = 0; i < 3; i++) {
		snprintf(raft[i], sizeof raft[i], "10.0.0.%d:7201", i + 1);
		snprintf(client[i], sizeof client[i], "10.0.0.%d:7101", i + 1);
		m[i].id = (uint64_t)i + 6;
		m[i].raft_address = raft[i];
		m[i].client_address = client[i];
	}
	si.node_id = 7;
	si.role = "leader";
	si.ready = true;
	si.term = 3;
	si.commit_index = 100;
	si.applied_index = 99;
	si.last_index = 101;
	si.leader_id = 7;
	si.leader_address = client[1];
	si.members = mp;
	si.n_members = 3;
	si.cluster = "test";
	si.next_token = 5000;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_STATUS_INFO;
	resp.status_info = &si;
	fake_send_response(fd, id, &resp);
}

/* Fills li as lock a/<n>. */
static void fake_lock_info(Raftlock__LockInfo *li, int n, Raftlock__HolderInfo **hp,
			   Raftlock__WaiterInfo **wp)
{
	li->name = n == 1 ? "a/1" : "a/2";
	li->kind = n == 1 ? RAFTLOCK__LOCK_KIND__RWLOCK : RAFTLOCK__LOCK_KIND__MUTEX;
	li->cluster_time = 10000;
	li->n_holders = n == 1 ? 2 : 1;
	li->holders = hp;
	li->n_waiters = n == 1 ? 1 : 0;
	li->waiters = wp;
	/* a/1: the answer holds 2 of its 5 holders, tokens 900 to 904 (a page
	 * of GET_LOCK holds 2, after the token asked); its waiters' total is
	 * not said (a server older than the totals) */
	li->holders_total = n == 1 ? 5 : 0;
	li->holders_more = n == 1;
}

/* a/1's page of GET_LOCK after holders_after, in h (2 holders at most). */
static void fake_holders_page(Raftlock__LockInfo *li, Raftlock__Holder *h, uint64_t after)
{
	uint64_t first = after < 900 ? 900 : after + 1;
	li->n_holders = 0;
	for (uint64_t t = first; t <= 904 && li->n_holders < 2; t++)
		h[li->n_holders++].token = t;
	li->holders_after = after;
	li->holders_more = first + li->n_holders <= 904;
}

/* The page of the LIST_LOCKS of lock_names that lists `after`'s next. */
static size_t fake_names_page(const char *const *names, const char *after)
{
	size_t k = 0;
	while (after[0] != '\0' && names[k] != NULL && strcmp(names[k++], after) != 0)
		;
	return k;
}

static void fake_lock_reads(struct fake *f, int fd, const Raftlock__Envelope *req)
{
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	Raftlock__Holder h[2] = {RAFTLOCK__HOLDER__INIT, RAFTLOCK__HOLDER__INIT};
	Raftlock__HolderInfo hi[2] = {RAFTLOCK__HOLDER_INFO__INIT, RAFTLOCK__HOLDER_INFO__INIT};
	Raftlock__HolderInfo *hp[2] = {&hi[0], &hi[1]};
	Raftlock__Waiter w = RAFTLOCK__WAITER__INIT;
	Raftlock__WaiterInfo wi = RAFTLOCK__WAITER_INFO__INIT;
	Raftlock__WaiterInfo *wp[1] = {&wi};
	Raftlock__LockInfo li = RAFTLOCK__LOCK_INFO__INIT;
	Raftlock__LockInfo *lp[1] = {&li};
	Raftlock__LockList ll = RAFTLOCK__LOCK_LIST__INIT;
	Raftlock__Owner owner = fake_owner;
	if (f->owner_host != NULL)
		owner.host = (char *)f->owner_host;
	for (int i = 0; i < 2; i++) {
		h[i].session = 11;
		h[i].owner = 100 + (uint64_t)i;
		h[i].mode = RAFTLOCK__MODE__SHARED;
		h[i].permits = 1;
		h[i].count = 1;
		h[i].token = 900 + (uint64_t)i;
		h[i].granted_time = 9000;
		hi[i].holder = &h[i];
		hi[i].owner = &owner; /* the second has none in the fake */
	}
	hi[1].owner = NULL;
	w.session = 12;
	w.owner = 200;
	w.queued_time = 9500;
	wi.waiter = &w;
	wi.owner = &owner;
	if (req->body_case == RAFTLOCK__ENVELOPE__BODY_GET_LOCK) {
		if (strcmp(req->get_lock->name, "a/1") != 0) {
			resp.status = RAFTLOCK_ENOTFOUND;
			fake_send_response(fd, req->id, &resp);
			return;
		}
		fake_lock_info(&li, 1, hp, wp);
		if (f->reads_before_paging)
			li.holders_more = false; /* no such field */
		else
			fake_holders_page(&li, h, req->get_lock->holders_after);
		resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_LOCK;
		resp.lock = &li;
	} else if (f->lock_names != NULL) {
		size_t k = fake_names_page(f->lock_names, req->list_locks->after);
		fake_lock_info(&li, 2, hp, wp);
		li.name = (char *)f->lock_names[k];
		ll.locks = lp;
		ll.n_locks = li.name != NULL;
		ll.more = li.name != NULL && f->lock_names[k + 1] != NULL;
		resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_LOCKS;
		resp.locks = &ll;
	} else {
		bool first = req->list_locks->after[0] == '\0';
		fake_lock_info(&li, first ? 1 : 2, hp, wp);
		ll.locks = lp;
		ll.n_locks = 1;
		ll.more = first;
		resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_LOCKS;
		resp.locks = &ll;
	}
	fake_send_response(fd, req->id, &resp);
}

static void fake_session_reads(struct fake *f, int fd, const Raftlock__Envelope *req)
{
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	Raftlock__SessionInfo si = RAFTLOCK__SESSION_INFO__INIT;
	Raftlock__SessionInfo *sp[1] = {&si};
	Raftlock__SessionList sl = RAFTLOCK__SESSION_LIST__INIT;
	char *locks[2] = {"a/1", "a/2"};
	si.id = 11;
	si.ttl_ms = 10000;
	si.deadline = 19000;
	si.opened_time = 1000;
	Raftlock__Owner owner = fake_owner;
	if (f->owner_host != NULL)
		owner.host = (char *)f->owner_host;
	si.owner = &owner;
	si.locks = locks;
	si.n_locks = 2;
	si.locks_total = 7; /* the answer holds 2 of its 7 names */
	if (f->lock_names != NULL) {
		si.locks_total = 0; /* a server older than the total */
		si.locks = (char **)f->lock_names;
		for (si.n_locks = 0; f->lock_names[si.n_locks] != NULL; si.n_locks++)
			;
	}
	sl.sessions = sp;
	sl.n_sessions = req->list_sessions->after < 11 ? 1 : 0;
	sl.cluster_time = 10000;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_SESSIONS;
	resp.sessions = &sl;
	fake_send_response(fd, req->id, &resp);
}

static void fake_check_token(int fd, const Raftlock__Envelope *req)
{
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	Raftlock__CheckTokenResult ck = RAFTLOCK__CHECK_TOKEN_RESULT__INIT;
	ck.current = req->check_token->token == 900;
	ck.highest = 901;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_CHECK;
	resp.check = &ck;
	fake_send_response(fd, req->id, &resp);
}

/* Answers a read; false if req is not one. */
/* Members 1, 2 and 3; ids up to 5 were used. */
static void fake_member_list(int fd, uint64_t id)
{
	Raftlock__MemberInfo mi[3], *mp[3];
	for (int i = 0; i < 3; i++) {
		raftlock__member_info__init(&mi[i]);
		mi[i].id = (uint64_t)i + 1;
		mi[i].role = "voter";
		mp[i] = &mi[i];
	}
	Raftlock__MemberList ml = RAFTLOCK__MEMBER_LIST__INIT;
	ml.members = mp;
	ml.n_members = 3;
	ml.leader_id = 1;
	ml.max_member_id = 5;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_MEMBER_LIST;
	resp.member_list = &ml;
	fake_send_response(fd, id, &resp);
}

static bool fake_read_answer(struct fake *f, int fd, const Raftlock__Envelope *req)
{
	switch (req->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_STATUS: fake_status(fd, req->id); return true;
	case RAFTLOCK__ENVELOPE__BODY_GET_LOCK:
	case RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS: fake_lock_reads(f, fd, req); return true;
	case RAFTLOCK__ENVELOPE__BODY_LIST_SESSIONS: fake_session_reads(f, fd, req); return true;
	case RAFTLOCK__ENVELOPE__BODY_CHECK_TOKEN: fake_check_token(fd, req); return true;
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_LIST: fake_member_list(fd, req->id); return true;
	default: return false;
	}
}

/* A watch: subscribed, then (HISTORY_LOST first for a resume) a state of
 * two locks (or lock_names) at position 7 of cluster watch_cluster; false
 * when watch_cut drops the connection in the middle of it (or after it). */
static bool fake_watch(struct fake *f, int fd, const Raftlock__Envelope *req)
{
	uint64_t id = req->id;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.leader = "";
	fake_send_response(fd, id, &resp);
	if (f->watch_ends > 0) {
		f->watch_ends--;
		resp.status = f->watch_end_status;
		resp.message = "the watch's state could not start in time";
		fake_send_response(fd, id, &resp);
		return true;
	}
	static const char *const watch_names[] = {"w/a", "w/b", NULL};
	const char *const *names = f->lock_names != NULL ? f->lock_names : watch_names;
	Raftlock__WatchEvent ev = RAFTLOCK__WATCH_EVENT__INIT;
	ev.index = 7;
	ev.offset = UINT32_MAX;
	ev.cluster_id = f->watch_cluster;
	resp.push = true;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_WATCH_EVENT;
	resp.watch_event = &ev;
	if (req->watch->resume) {
		ev.kind = RAFTLOCK__WATCH_KIND__WATCH_HISTORY_LOST;
		ev.name = "w/";
		fake_send_response(fd, id, &resp);
	}
	for (int i = 0; names[i] != NULL; i++) {
		if (f->watch_cut > 0 && i == f->watch_cut) {
			f->watch_cut = 0;
			return false;
		}
		ev.kind = RAFTLOCK__WATCH_KIND__WATCH_HOLDING;
		ev.name = (char *)names[i];
		ev.value = i == 0 && f->watch_value != NULL ? (char *)f->watch_value : "";
		fake_send_response(fd, id, &resp);
	}
	ev.kind = RAFTLOCK__WATCH_KIND__WATCH_CURRENT;
	ev.name = "w/";
	ev.value = "";
	fake_send_response(fd, id, &resp);
	if (f->watch_cut == 3) {
		f->watch_cut = 0;
		return false;
	}
	return true;
}

/* Answers one request; returns false to drop the connection. */
static bool fake_answer(struct fake *f, int fd, const Raftlock__Envelope *req)
{
	Raftlock__Result res = RAFTLOCK__RESULT__INIT;
	if (f->silent)
		return true;
	if (f->role == FAKE_FOLLOWER) {
		Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
		resp.status = RAFTLOCK_ENOTLEADER;
		resp.leader = f->leader;
		fake_send_response(fd, req->id, &resp);
		return true;
	}
	if (fake_read_answer(f, fd, req))
		return true;
	if (req->body_case == RAFTLOCK__ENVELOPE__BODY_MEMBER_JOIN && f->join_names_members) {
		fake_member_list(fd, req->id);
		return true;
	}
	switch (req->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION:
		res.session = ++f->next_session;
		res.ttl_ms = req->open_session->ttl_ms;
		fake_send_result(fd, req->id, 0, &res, false);
		return true;
	case RAFTLOCK__ENVELOPE__BODY_KEEPALIVE: fake_keepalive(f, fd, req); return true;
	case RAFTLOCK__ENVELOPE__BODY_WATCH: return fake_watch(f, fd, req);
	case RAFTLOCK__ENVELOPE__BODY_ACQUIRE:
		if (f->refuse_acquires > 0) {
			f->refuse_acquires--;
			Raftlock__Response refusal = RAFTLOCK__RESPONSE__INIT;
			refusal.status = f->refuse_status;
			refusal.message = (char *)f->refuse_message;
			fake_send_response(fd, req->id, &refusal);
			return true;
		}
		if (f->revoked_acquires > 0) {
			f->revoked_acquires--;
			Raftlock__Result gone = RAFTLOCK__RESULT__INIT;
			gone.status = RAFTLOCK_ENOTHOLDER; /* apply's, as the server sends it */
			fake_send_result(fd, req->id, 0, &gone, false);
			return true;
		}
		if (f->drop_first_acquire) {
			f->drop_first_acquire = false;
			return false;
		}
		if (f->ignore_acquires)
			return true;
		if (f->lose_with_grant && f->loss_id == 0 && !req->acquire->acquire->wait) {
			f->loss_id = req->id; /* fake_send_grant answers it */
			f->loss_fd = fd;
			return true;
		}
		if (f->unknown_first_acquire) {
			f->unknown_first_acquire = false;
			fake_send_result(fd, req->id, RAFTLOCK_EUNKNOWN, NULL, false);
			return true;
		}
		fake_acquire(f, fd, req);
		return true;
	case RAFTLOCK__ENVELOPE__BODY_MULTI_ACQUIRE: fake_multi_acquire(f, fd, req); return true;
	case RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT:
		if (f->ignore_cancels)
			return true;
		if (f->grant_on_cancel && f->push_id != 0) {
			fake_push_grant(f, f->push_fd, f->push_id);
			f->push_id = 0;
			/* as the server does: "granted first", with the token */
			if (f->cancel_status == 0)
				res.token = f->next_token;
		}
		if (f->cancel_status == 0)
			f->push_id = 0;
		res.status = f->cancel_status;
		if (res.token != 0)
			fake_send_grant(f, fd, req->id, &res);
		else
			fake_send_result(fd, req->id, 0, &res, false);
		return true;
	case RAFTLOCK__ENVELOPE__BODY_RELEASE:
		if (!f->ignore_releases)
			fake_send_result(fd, req->id, 0, &res, false);
		return true;
	case RAFTLOCK__ENVELOPE__BODY_PROCLAIM:
		if (f->ignore_proclaims > 0)
			f->ignore_proclaims--;
		else
			fake_send_result(fd, req->id, 0, &res, false);
		return true;
	case RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION:
		if (f->closed_session == (req->sequence ? req->sequence->session : 0)) {
			res.status = RAFTLOCK_ESESSION; /* as a retry finds it */
			Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
			resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_RESULT;
			resp.result = &res;
			resp.message = (char *)f->close_message;
			fake_send_response(fd, req->id, &resp);
			return true;
		} else if (f->drop_first_close) {
			f->drop_first_close = false;
			f->closed_session = (req->sequence ? req->sequence->session : 0);
			return false;
		}
		fake_send_result(fd, req->id, 0, &res, false);
		return true;
	case RAFTLOCK__ENVELOPE__BODY_REVOKE:
		if (f->revoke_refusals > 0) {
			f->revoke_refusals--;
			fake_send_result(fd, req->id, f->revoke_status, NULL, false);
			return true;
		}
		if (f->revoke_drops > 0) {
			f->revoke_drops--;
			return false;
		}
		res.count = 1;
		fake_send_result(fd, req->id, 0, &res, false);
		return true;
	default: fake_send_result(fd, req->id, 0, &res, false); return true;
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
	pthread_mutex_lock(&f->mu);
	bool refuse = f->refuse_conns;
	if (refuse)
		f->conns_seen++;
	pthread_mutex_unlock(&f->mu);
	if (refuse) {
		Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
		resp.status = RAFTLOCK_ELIMIT;
		resp.message = "this node holds max-connections-per-address 1 from 127.0.0.1";
		fake_send_response(fd, 0, &resp);
		close(fd);
		return;
	}
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
			if (f->fds[i] >= 0 && p[i + 2].fd == f->fds[i] && p[i + 2].revents)
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

struct fake *fake_start(enum fake_role role)
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
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof sa;
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(f->lfd, 16), 0);
	assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&sa, &len), 0);
	snprintf(f->addr, sizeof f->addr, "127.0.0.1:%u", ntohs(sa.sin_port));
	assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
	return f;
}

void fake_stop(struct fake *f)
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

void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}
