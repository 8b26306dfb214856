/* Session secrets on a real 3-node cluster (issue 11, item 1; GUARANTEES
 * rule 14). A stranger who knows a session's id and its lock handles'
 * owner ids (introspection shows them) but not its secret cannot release,
 * cancel, close, acquire under or renew the session: each attempt is
 * refused with RAFTLOCK_EPERM (EPROTO, naming the upgrade, from a sender
 * older than client protocol 3), changes nothing on the cluster and
 * settles no sequence of the real session. The secret appears in no node
 * log, introspection answer, CLI output, metric or data directory file;
 * its SHA-256 is what the cluster keeps. Spoken in raw frames, as a
 * stranger would. */
#include <ftw.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "cluster.h"
#include "codec.h"
#include "frame.h"
#include "raftlock.h"

#define CLI RAFTLOCK_BINARY_DIR "/bin/raftlock"
#define TTL_MS 60000
#define SECRET_LEN RAFTLOCK_SECRET_MIN

static struct tcluster cl;
static uint64_t next_id = 1;

static int setup(void **state)
{
	(void)state;
	cl.snapshot_threshold = 64; /* the secret test looks into snapshots too */
	tcluster_start(&cl, 3, 1000);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return tcluster_destroy(&cl);
}

struct secret {
	uint8_t b[SECRET_LEN];
};

static struct secret draw(void)
{
	struct secret s;
	assert_int_equal(getrandom(s.b, sizeof s.b, 0), (ssize_t)sizeof s.b);
	return s;
}

static ProtobufCBinaryData bin(struct secret *s)
{
	return (ProtobufCBinaryData){sizeof s->b, s->b};
}

static const ProtobufCBinaryData NONE = {0, NULL};

/* A grant pushed while call() waited for another answer. */
static Raftlock__Envelope *pushed;

/* Sends env with a fresh id and returns its answer. */
static Raftlock__Envelope *call(int fd, Raftlock__Envelope *env)
{
	env->id = next_id++;
	assert_int_equal(raw_send_envelope(fd, env), 0);
	for (;;) {
		Raftlock__Envelope *r = raw_recv_envelope(fd, 10000);
		assert_non_null(r);
		assert_int_equal(r->body_case, RAFTLOCK__ENVELOPE__BODY_RESPONSE);
		if (r->id == env->id && !r->response->push)
			return r;
		assert_true(r->response->push);
		assert_null(pushed);
		pushed = r;
	}
}

/* The next pushed grant on fd. */
static Raftlock__Envelope *next_push(int fd)
{
	Raftlock__Envelope *r = pushed != NULL ? pushed : raw_recv_envelope(fd, 10000);
	pushed = NULL;
	return r;
}

/* An answer's status: the response's, else its result's; *msg gets a copy
 * of the response's message when asked. */
static int status_of(Raftlock__Envelope *r, char *msg, size_t len, Raftlock__Result *res)
{
	int status = r->response->status;
	if (msg != NULL)
		snprintf(msg, len, "%s", r->response->message);
	if (status == 0 && r->response->payload_case == RAFTLOCK__RESPONSE__PAYLOAD_RESULT) {
		status = r->response->result->status;
		if (res != NULL) {
			*res = *r->response->result;
			res->base.unknown_fields = NULL;
			res->base.n_unknown_fields = 0;
		}
	}
	raftlock__envelope__free_unpacked(r, NULL);
	return status;
}

/* An OPEN_SESSION envelope (TTL_MS); the request it points to lives in m. */
struct open_msg {
	Raftlock__OpenSessionRequest op;
	Raftlock__Envelope env;
};

static Raftlock__Envelope *open_msg(struct open_msg *m, uint64_t nonce, ProtobufCBinaryData secret)
{
	m->op = (Raftlock__OpenSessionRequest)RAFTLOCK__OPEN_SESSION_REQUEST__INIT;
	m->op.ttl_ms = TTL_MS;
	m->op.nonce = nonce;
	m->op.secret = secret;
	m->op.acks_queued = true;
	m->env = (Raftlock__Envelope)RAFTLOCK__ENVELOPE__INIT;
	m->env.body_case = RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
	m->env.open_session = &m->op;
	return &m->env;
}

static int open_session(int fd, uint64_t nonce, ProtobufCBinaryData secret, uint64_t *id)
{
	struct open_msg m;
	Raftlock__Result res = RAFTLOCK__RESULT__INIT;
	int status = status_of(call(fd, open_msg(&m, nonce, secret)), NULL, 0, &res);
	*id = status == 0 ? res.session : 0;
	return status;
}

/* A mutating request's envelope: the sequence header with the secret. */
struct mutation {
	Raftlock__Envelope env;
	Raftlock__Sequence h;
	Raftlock__AcquireRequest acq_req;
	Raftlock__Acquire acq;
	Raftlock__ReleaseRequest rel_req;
	Raftlock__Release rel;
	Raftlock__CancelWaitRequest cancel_req;
	Raftlock__CancelWait cancel;
	Raftlock__CloseSessionRequest close_req;
};

static void mutation_init(struct mutation *m, uint64_t session, uint64_t seq,
			  ProtobufCBinaryData secret)
{
	memset(m, 0, sizeof *m);
	m->env = (Raftlock__Envelope)RAFTLOCK__ENVELOPE__INIT;
	m->h = (Raftlock__Sequence)RAFTLOCK__SEQUENCE__INIT;
	m->h.session = session;
	m->h.seq = seq;
	m->h.ack_below = seq;
	m->h.secret = secret;
	m->env.sequence = &m->h;
}

static int acquire(int fd, uint64_t session, uint64_t seq, ProtobufCBinaryData secret,
		   const char *name, uint64_t owner, bool wait, Raftlock__Result *res, char *msg)
{
	struct mutation m;
	mutation_init(&m, session, seq, secret);
	m.acq = (Raftlock__Acquire)RAFTLOCK__ACQUIRE__INIT;
	m.acq.name = (char *)name;
	m.acq.owner = owner;
	m.acq.wait = wait;
	m.acq_req = (Raftlock__AcquireRequest)RAFTLOCK__ACQUIRE_REQUEST__INIT;
	m.acq_req.acquire = &m.acq;
	m.env.body_case = RAFTLOCK__ENVELOPE__BODY_ACQUIRE;
	m.env.acquire = &m.acq_req;
	return status_of(call(fd, &m.env), msg, msg ? 200 : 0, res);
}

static void release_init(struct mutation *m, uint64_t session, uint64_t seq,
			 ProtobufCBinaryData secret, const char *name, uint64_t owner)
{
	mutation_init(m, session, seq, secret);
	m->rel = (Raftlock__Release)RAFTLOCK__RELEASE__INIT;
	m->rel.name = (char *)name;
	m->rel.owner = owner;
	m->rel_req = (Raftlock__ReleaseRequest)RAFTLOCK__RELEASE_REQUEST__INIT;
	m->rel_req.release = &m->rel;
	m->env.body_case = RAFTLOCK__ENVELOPE__BODY_RELEASE;
	m->env.release = &m->rel_req;
}

static int release(int fd, uint64_t session, uint64_t seq, ProtobufCBinaryData secret,
		   const char *name, uint64_t owner, char *msg)
{
	struct mutation m;
	release_init(&m, session, seq, secret, name, owner);
	return status_of(call(fd, &m.env), msg, msg ? 200 : 0, NULL);
}

static int cancel(int fd, uint64_t session, uint64_t seq, ProtobufCBinaryData secret,
		  const char *name, uint64_t owner, uint64_t acquire_seq)
{
	struct mutation m;
	mutation_init(&m, session, seq, secret);
	m.cancel = (Raftlock__CancelWait)RAFTLOCK__CANCEL_WAIT__INIT;
	m.cancel.name = (char *)name;
	m.cancel.owner = owner;
	m.cancel.acquire_seq = acquire_seq;
	m.cancel_req = (Raftlock__CancelWaitRequest)RAFTLOCK__CANCEL_WAIT_REQUEST__INIT;
	m.cancel_req.cancel = &m.cancel;
	m.env.body_case = RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT;
	m.env.cancel_wait = &m.cancel_req;
	return status_of(call(fd, &m.env), NULL, 0, NULL);
}

static int close_session(int fd, uint64_t session, uint64_t seq, ProtobufCBinaryData secret)
{
	struct mutation m;
	mutation_init(&m, session, seq, secret);
	m.close_req = (Raftlock__CloseSessionRequest)RAFTLOCK__CLOSE_SESSION_REQUEST__INIT;
	m.env.body_case = RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION;
	m.env.close_session = &m.close_req;
	return status_of(call(fd, &m.env), NULL, 0, NULL);
}

/* A keepalive naming ids with the given secrets; the statuses in st. */
static void keepalive(int fd, uint64_t *ids, ProtobufCBinaryData *secrets, size_t n, int32_t *st)
{
	Raftlock__KeepAliveRequest ka = RAFTLOCK__KEEP_ALIVE_REQUEST__INIT;
	ka.sessions = ids;
	ka.n_sessions = n;
	ka.secrets = secrets;
	ka.n_secrets = n;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_KEEPALIVE;
	env.keepalive = &ka;
	Raftlock__Envelope *r = call(fd, &env);
	assert_int_equal(r->response->status, 0);
	assert_int_equal(r->response->payload_case, RAFTLOCK__RESPONSE__PAYLOAD_KEEPALIVE);
	assert_int_equal(r->response->keepalive->n_statuses, n);
	memcpy(st, r->response->keepalive->statuses, n * sizeof *st);
	raftlock__envelope__free_unpacked(r, NULL);
}

/* A lock as a linearizable read shows it (the answer, owned), or NULL
 * when there is no such lock. */
static Raftlock__Envelope *get_lock(int fd, const char *name)
{
	Raftlock__GetLockRequest g = RAFTLOCK__GET_LOCK_REQUEST__INIT;
	g.name = (char *)name;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_GET_LOCK;
	env.get_lock = &g;
	Raftlock__Envelope *r = call(fd, &env);
	if (r->response->status == RAFTLOCK_ENOTFOUND) {
		raftlock__envelope__free_unpacked(r, NULL);
		return NULL;
	}
	assert_int_equal(r->response->status, 0);
	assert_int_equal(r->response->payload_case, RAFTLOCK__RESPONSE__PAYLOAD_LOCK);
	return r;
}

/* What a stranger's attempts must not change. */
struct view {
	uint64_t holder_session, holder_owner, token;
	uint32_t count;
	uint64_t waiter_session, waiter_owner, waiter_seq;
	size_t n_holders, n_waiters;
	uint64_t next_token, sessions, locks;
};

static struct view view_of(int fd, int node, const char *name)
{
	struct view v;
	memset(&v, 0, sizeof v); /* padding included: views are compared whole */
	Raftlock__Envelope *r = get_lock(fd, name);
	assert_non_null(r);
	const Raftlock__LockInfo *li = r->response->lock;
	v.n_holders = li->n_holders;
	v.n_waiters = li->n_waiters;
	if (li->n_holders > 0) {
		v.holder_session = li->holders[0]->holder->session;
		v.holder_owner = li->holders[0]->holder->owner;
		v.token = li->holders[0]->holder->token;
		v.count = li->holders[0]->holder->count;
	}
	if (li->n_waiters > 0) {
		v.waiter_session = li->waiters[0]->waiter->session;
		v.waiter_owner = li->waiters[0]->waiter->owner;
		v.waiter_seq = li->waiters[0]->waiter->seq;
	}
	raftlock__envelope__free_unpacked(r, NULL);
	Raftlock__StatusInfo *st = tcluster_status(&cl, node);
	assert_non_null(st);
	v.next_token = st->next_token;
	v.sessions = st->sessions;
	v.locks = st->locks;
	raftlock__status_info__free_unpacked(st, NULL);
	return v;
}

static unsigned long long metric(int i, const char *name)
{
	static char buf[1 << 16];
	assert_int_equal(tcluster_http_get(&cl, i, "/metrics", buf, sizeof buf), 0);
	char key[128];
	snprintf(key, sizeof key, "\nraftlock_%s ", name);
	const char *p = strstr(buf, key);
	assert_non_null(p);
	return strtoull(p + strlen(key), NULL, 10);
}

/* A release of session as a sender of client protocol 2 would frame it:
 * the sequence header in the envelope, no secret, protocol 2. */
static int release_as_protocol_2(int fd, uint64_t session, uint64_t seq, char *msg, size_t len)
{
	struct mutation m;
	release_init(&m, session, seq, NONE, "guarded", 1);
	Raftlock__Envelope env = m.env;
	env.id = next_id++;
	env.protocol = 2; /* packed by hand: codec_frame_envelope says 3 */
	size_t n = raftlock__envelope__get_packed_size(&env);
	uint8_t *buf = malloc(FRAME_HEADER_SIZE + n);
	assert_non_null(buf);
	frame_put_header(buf, (uint32_t)n);
	raftlock__envelope__pack(&env, buf + FRAME_HEADER_SIZE);
	assert_int_equal(raw_send(fd, buf, FRAME_HEADER_SIZE + n), 0);
	free(buf);
	Raftlock__Envelope *r = raw_recv_envelope(fd, 10000);
	assert_non_null(r);
	assert_int_equal(r->id, env.id);
	return status_of(r, msg, len, NULL);
}

/* The stranger holds every id (read from introspection) and tries each
 * mutation and a keepalive with no secret, a wrong one and its own
 * session's; then a client of protocol 2, and a replayed open nonce.
 * Everything is refused and nothing changes; the real session then uses
 * the very sequences the stranger tried. */
static void stranger_cannot_act(void **state)
{
	(void)state;
	int L = tcluster_leader(&cl, 10000);
	assert_true(L >= 0);
	int fh = raw_connect(cl.client_port[L]); /* the honest client */
	int fs = raw_connect(cl.client_port[L]); /* the stranger */
	assert_true(fh >= 0 && fs >= 0);
	struct secret sh = draw(), sw = draw(), sx = draw(), wrong = draw();
	uint64_t nonce_h, H, W, X;
	assert_int_equal(getrandom(&nonce_h, sizeof nonce_h, 0), (ssize_t)sizeof nonce_h);
	nonce_h |= 1;
	assert_int_equal(open_session(fh, nonce_h, bin(&sh), &H), 0);
	assert_int_equal(open_session(fh, nonce_h + 2, bin(&sw), &W), 0);
	/* a retry of the open (same nonce, same secret) is the same session */
	uint64_t again;
	assert_int_equal(open_session(fh, nonce_h, bin(&sh), &again), 0);
	assert_int_equal(again, H);
	Raftlock__Result res = RAFTLOCK__RESULT__INIT;
	assert_int_equal(acquire(fh, H, 1, bin(&sh), "guarded", 1, false, &res, NULL), 0);
	uint64_t token = res.token;
	assert_int_equal(acquire(fh, W, 1, bin(&sw), "guarded", 2, true, &res, NULL), 0);
	assert_true(res.queued);

	/* The stranger: a session of its own, and the ids from a read. */
	assert_int_equal(open_session(fs, 0, bin(&sx), &X), 0);
	struct view before = view_of(fs, L, "guarded");
	assert_int_equal(before.holder_session, H);
	assert_int_equal(before.holder_owner, 1);
	assert_int_equal(before.token, token);
	assert_int_equal(before.waiter_session, W);
	assert_int_equal(before.waiter_owner, 2);
	assert_int_equal(before.waiter_seq, 1);
	unsigned long long denied0 = metric(L, "secret_denied_total");

	ProtobufCBinaryData tries[] = {NONE, bin(&wrong), bin(&sx)};
	unsigned denied = 0;
	for (size_t t = 0; t < sizeof tries / sizeof tries[0]; t++) {
		char msg[200] = "";
		assert_int_equal(release(fs, H, 2, tries[t], "guarded", 1, msg), RAFTLOCK_EPERM);
		assert_non_null(strstr(msg, "secret"));
		assert_int_equal(acquire(fs, H, 3, tries[t], "elsewhere", 1, false, NULL, NULL),
				 RAFTLOCK_EPERM);
		assert_int_equal(acquire(fs, H, 3, tries[t], "guarded", 1, false, NULL, NULL),
				 RAFTLOCK_EPERM);
		assert_int_equal(cancel(fs, W, 2, tries[t], "guarded", 2, 1), RAFTLOCK_EPERM);
		assert_int_equal(close_session(fs, H, 4, tries[t]), RAFTLOCK_EPERM);
		assert_int_equal(close_session(fs, W, 2, tries[t]), RAFTLOCK_EPERM);
		uint64_t ids[] = {H, W};
		ProtobufCBinaryData secrets[] = {tries[t], tries[t]};
		int32_t st[2];
		keepalive(fs, ids, secrets, 2, st);
		assert_int_equal(st[0], RAFTLOCK_EPERM);
		assert_int_equal(st[1], RAFTLOCK_EPERM);
		denied += 8;
	}
	/* A sender of an older protocol: EPROTO, naming the upgrade. */
	char msg[200] = "";
	assert_int_equal(release_as_protocol_2(fs, H, 2, msg, sizeof msg), RAFTLOCK_EPROTO);
	assert_non_null(strstr(msg, "upgrade the client"));
	/* The honest open's nonce replayed with another secret: refused by
	 * apply, no session id learnt; without a secret, refused at once. */
	uint64_t got = 99;
	assert_int_equal(open_session(fs, nonce_h, bin(&wrong), &got), RAFTLOCK_EPERM);
	assert_int_equal(got, 0);
	assert_int_equal(open_session(fs, nonce_h, NONE, &got), RAFTLOCK_EPROTO);

	/* Nothing changed: same holder, token, count and waiter; no new lock,
	 * session or token; each refusal counted. */
	struct view after = view_of(fs, L, "guarded");
	assert_memory_equal(&after, &before, sizeof after);
	assert_null(get_lock(fs, "elsewhere"));
	assert_int_equal(metric(L, "secret_denied_total") - denied0, denied);

	/* The real sessions use the sequences the stranger tried: they were
	 * neither run nor settled. The release hands the lock to W. */
	assert_int_equal(release(fh, H, 2, bin(&sh), "guarded", 1, NULL), 0);
	Raftlock__Envelope *push = next_push(fh);
	assert_non_null(push);
	assert_true(push->response->push);
	assert_int_equal(push->response->result->status, 0);
	assert_true(push->response->result->token > token);
	raftlock__envelope__free_unpacked(push, NULL);
	assert_int_equal(acquire(fh, H, 3, bin(&sh), "elsewhere", 1, false, &res, NULL), 0);
	assert_int_equal(release(fh, H, 4, bin(&sh), "elsewhere", 1, NULL), 0);
	assert_int_equal(close_session(fh, H, 5, bin(&sh)), 0);
	assert_int_equal(close_session(fh, W, 2, bin(&sw)), 0);
	assert_int_equal(close_session(fs, X, 1, bin(&sx)), 0);
	close(fh);
	close(fs);
}

/* Ids are sequential, so a stranger can name the session an open will
 * create before it is applied. Sent right behind that open (here in the
 * same write, so that the leader reads both before the open applies), a
 * close or an acquire of the coming id with a wrong secret must not reach
 * the log: there it would apply after the open and act on the new session
 * without its secret. It is answered "not executed" (EUNAVAILABLE) and
 * the new session is untouched: open, its first sequence unused. */
static void stranger_cannot_act_on_a_session_being_opened(void **state)
{
	(void)state;
	int L = tcluster_leader(&cl, 10000);
	assert_true(L >= 0);
	int fd = raw_connect(cl.client_port[L]);
	assert_true(fd >= 0);
	struct secret sv = draw(), wrong = draw();
	for (int round = 0; round < 2; round++) {
		uint64_t last;
		struct secret sl = draw();
		assert_int_equal(open_session(fd, 0, bin(&sl), &last), 0);
		uint64_t coming = last + 1; /* nobody else opens sessions here */

		struct open_msg om;
		Raftlock__Envelope *open = open_msg(&om, 0, bin(&sv));
		open->id = next_id++;
		struct mutation m;
		mutation_init(&m, coming, 1, bin(&wrong));
		if (round == 0) {
			m.close_req = (Raftlock__CloseSessionRequest)
				RAFTLOCK__CLOSE_SESSION_REQUEST__INIT;
			m.env.body_case = RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION;
			m.env.close_session = &m.close_req;
		} else {
			m.acq = (Raftlock__Acquire)RAFTLOCK__ACQUIRE__INIT;
			m.acq.name = "being-opened";
			m.acq.owner = 1;
			m.acq_req = (Raftlock__AcquireRequest)RAFTLOCK__ACQUIRE_REQUEST__INIT;
			m.acq_req.acquire = &m.acq;
			m.env.body_case = RAFTLOCK__ENVELOPE__BODY_ACQUIRE;
			m.env.acquire = &m.acq_req;
		}
		m.env.id = next_id++;
		uint8_t *buf = NULL;
		size_t len = 0, cap = 0;
		assert_int_equal(codec_frame_envelope_append(open, &buf, &len, &cap), 0);
		assert_int_equal(codec_frame_envelope_append(&m.env, &buf, &len, &cap), 0);
		assert_int_equal(raw_send(fd, buf, len), 0);
		free(buf);

		uint64_t opened = 0;
		int stranger = 1;
		for (int answers = 0; answers < 2; answers++) {
			Raftlock__Envelope *r = raw_recv_envelope(fd, 10000);
			assert_non_null(r);
			assert_false(r->response->push);
			bool is_open = r->id == open->id;
			assert_true(is_open || r->id == m.env.id);
			Raftlock__Result res = RAFTLOCK__RESULT__INIT;
			int status = status_of(r, NULL, 0, &res);
			if (is_open) {
				assert_int_equal(status, 0);
				opened = res.session;
			} else {
				stranger = status;
			}
		}
		assert_int_equal(opened, coming);
		assert_int_equal(stranger, RAFTLOCK_EUNAVAILABLE); /* not executed */
		/* The new session is open and its sequence 1 unused. */
		Raftlock__Result res = RAFTLOCK__RESULT__INIT;
		assert_int_equal(
			acquire(fd, coming, 1, bin(&sv), "being-opened", 2, false, &res, NULL), 0);
		assert_int_equal(res.status, 0);
		assert_int_equal(close_session(fd, coming, 2, bin(&sv)), 0);
		assert_int_equal(close_session(fd, last, 1, bin(&sl)), 0);
	}
	close(fd);
}

/* Keepalives without the secret renew nothing: the session expires on
 * time and its lock goes, however often a stranger names it. */
static void stranger_cannot_keep_a_session_alive(void **state)
{
	(void)state;
	int L = tcluster_leader(&cl, 10000);
	assert_true(L >= 0);
	int fh = raw_connect(cl.client_port[L]);
	int fs = raw_connect(cl.client_port[L]);
	assert_true(fh >= 0 && fs >= 0);
	struct secret se = draw(), wrong = draw();
	Raftlock__OpenSessionRequest op = RAFTLOCK__OPEN_SESSION_REQUEST__INIT;
	op.ttl_ms = 2 * cl.election_ms; /* the shortest allowed */
	op.secret = bin(&se);
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
	env.open_session = &op;
	Raftlock__Result res = RAFTLOCK__RESULT__INIT;
	assert_int_equal(status_of(call(fh, &env), NULL, 0, &res), 0);
	uint64_t E = res.session;
	uint64_t opened = tcluster_now_ms();
	assert_int_equal(acquire(fh, E, 1, bin(&se), "expiring", 1, false, NULL, NULL), 0);
	bool freed = false;
	while (!freed && tcluster_now_ms() - opened < 4ull * op.ttl_ms) {
		uint64_t ids[] = {E};
		ProtobufCBinaryData secrets[] = {bin(&wrong)};
		int32_t st[1];
		keepalive(fs, ids, secrets, 1, st);
		assert_true(st[0] == RAFTLOCK_EPERM || st[0] == RAFTLOCK_ESESSION);
		Raftlock__Envelope *r = get_lock(fs, "expiring");
		freed = r == NULL;
		if (r != NULL)
			raftlock__envelope__free_unpacked(r, NULL);
		usleep(200 * 1000);
	}
	assert_true(freed);
	/* expired before 1 TTL + the checks' slack */
	assert_true(tcluster_now_ms() - opened < op.ttl_ms + 1500ull);
	close(fh);
	close(fs);
}

/* The digests outlive a whole-cluster kill -9 (LMDB and the log, read
 * back when a leader first checks a session): after it, a stranger is
 * still refused and the session's own secret still works. */
static void secret_checked_after_restart(void **state)
{
	(void)state;
	int L = tcluster_leader(&cl, 10000);
	assert_true(L >= 0);
	int fd = raw_connect(cl.client_port[L]);
	assert_true(fd >= 0);
	struct secret sr = draw(), wrong = draw();
	uint64_t R;
	assert_int_equal(open_session(fd, 0, bin(&sr), &R), 0);
	assert_int_equal(acquire(fd, R, 1, bin(&sr), "restarted", 1, false, NULL, NULL), 0);
	close(fd);
	for (int i = 0; i < cl.n; i++)
		tcluster_signal(&cl, i, SIGKILL);
	for (int i = 0; i < cl.n; i++)
		tcluster_restart(&cl, i);
	L = tcluster_leader(&cl, 20000);
	assert_true(L >= 0);
	fd = raw_connect(cl.client_port[L]);
	assert_true(fd >= 0);
	uint64_t ids[] = {R, R};
	ProtobufCBinaryData secrets[] = {bin(&wrong), bin(&sr)};
	int32_t st[2];
	keepalive(fd, ids, secrets, 2, st);
	assert_int_equal(st[0], RAFTLOCK_EPERM);
	assert_int_equal(st[1], 0);
	assert_int_equal(release(fd, R, 2, bin(&wrong), "restarted", 1, NULL), RAFTLOCK_EPERM);
	assert_int_equal(close_session(fd, R, 2, NONE), RAFTLOCK_EPERM);
	assert_int_equal(release(fd, R, 2, bin(&sr), "restarted", 1, NULL), 0);
	assert_int_equal(close_session(fd, R, 3, bin(&sr)), 0);
	close(fd);
}

/* ------------------------------------------- the secret is never shown */

static char secret_hex[2 * SECRET_LEN + 1], secret_HEX[2 * SECRET_LEN + 1];
static struct secret shown;
static uint8_t shown_digest[32];
static int files_with_secret, files_with_digest, files_seen;

static bool contains(const void *hay, size_t n, const void *needle, size_t len)
{
	return memmem(hay, n, needle, len) != NULL;
}

/* Whether text (or bytes) carry the secret in any form we can think of:
 * raw, hex either case. */
static bool shows_secret(const void *buf, size_t n)
{
	return contains(buf, n, shown.b, sizeof shown.b) ||
	       contains(buf, n, secret_hex, strlen(secret_hex)) ||
	       contains(buf, n, secret_HEX, strlen(secret_HEX));
}

static int look_at_file(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (type != FTW_F)
		return 0;
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return 0;
	static uint8_t buf[64 << 20];
	size_t n = fread(buf, 1, sizeof buf, f);
	fclose(f);
	files_seen++;
	if (shows_secret(buf, n)) {
		fprintf(stderr, "the secret is in %s\n", path);
		files_with_secret++;
	}
	files_with_digest += contains(buf, n, shown_digest, sizeof shown_digest);
	return 0;
}

/* Runs the CLI with args and returns its output (static buffer). */
static const char *cli(int node, const char *args)
{
	static char out[1 << 16];
	char cmd[512];
	snprintf(cmd, sizeof cmd, CLI " --endpoints %s %s 2>&1", cl.client_addr[node], args);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(out, 1, sizeof out - 1, p);
	out[n] = '\0';
	assert_int_equal(pclose(p), 0);
	return out;
}

static void secret_never_shown(void **state)
{
	(void)state;
	int L = tcluster_leader(&cl, 10000);
	assert_true(L >= 0);
	shown = draw();
	for (size_t i = 0; i < SECRET_LEN; i++) {
		snprintf(secret_hex + 2 * i, 3, "%02x", shown.b[i]);
		snprintf(secret_HEX + 2 * i, 3, "%02X", shown.b[i]);
	}
	unsigned dn = 0;
	assert_int_equal(EVP_Digest(shown.b, sizeof shown.b, shown_digest, &dn, EVP_sha256(), NULL),
			 1);
	int fd = raw_connect(cl.client_port[L]);
	assert_true(fd >= 0);
	uint64_t S;
	assert_int_equal(open_session(fd, 7, bin(&shown), &S), 0);
	assert_int_equal(acquire(fd, S, 1, bin(&shown), "visible", 1, false, NULL, NULL), 0);
	/* Enough entries for every node to take a snapshot (threshold 64). */
	uint64_t seq = 2;
	for (int i = 0; i < 80; i++) {
		assert_int_equal(acquire(fd, S, seq, bin(&shown), "churn", 2, false, NULL, NULL),
				 0);
		seq++;
		assert_int_equal(release(fd, S, seq, bin(&shown), "churn", 2, NULL), 0);
		seq++;
	}
	uint64_t ids[] = {S};
	ProtobufCBinaryData secrets[] = {bin(&shown)};
	int32_t st[1];
	keepalive(fd, ids, secrets, 1, st);
	assert_int_equal(st[0], 0);
	/* a wrong attempt too: refusals log nothing of what they were given */
	assert_int_equal(release(fd, S, seq, NONE, "visible", 1, NULL), RAFTLOCK_EPERM);

	/* Introspection, raw and through the CLI, plain and JSON. */
	Raftlock__ListSessionsRequest ls = RAFTLOCK__LIST_SESSIONS_REQUEST__INIT;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_LIST_SESSIONS;
	env.list_sessions = &ls;
	Raftlock__Envelope *r = call(fd, &env);
	uint8_t packed[1 << 16];
	size_t n = raftlock__envelope__pack(r, packed);
	assert_true(n > 0);
	assert_true(r->response->sessions->n_sessions >= 1);
	raftlock__envelope__free_unpacked(r, NULL);
	assert_false(shows_secret(packed, n));
	r = get_lock(fd, "visible");
	n = raftlock__envelope__pack(r, packed);
	raftlock__envelope__free_unpacked(r, NULL);
	assert_false(shows_secret(packed, n));
	const char *commands[] = {
		"show visible", "show visible --json", "sessions",     "sessions --json",
		"holders",      "holders --json",      "status --json"};
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
		const char *out = cli(L, commands[i]);
		assert_false(shows_secret(out, strlen(out)));
	}
	for (int i = 0; i < cl.n; i++) {
		static char metrics[1 << 16];
		assert_int_equal(tcluster_http_get(&cl, i, "/metrics", metrics, sizeof metrics), 0);
		assert_false(shows_secret(metrics, strlen(metrics)));
	}

	/* Every file of the cluster, the session still open: node logs, raft
	 * logs, snapshots, LMDB. The digest is there (this looked in the
	 * right places); the secret is not. */
	usleep(500 * 1000);
	assert_int_equal(nftw(cl.dir, look_at_file, 16, FTW_PHYS), 0);
	assert_true(files_seen > 3 * 3);
	assert_int_equal(files_with_secret, 0);
	assert_true(files_with_digest > 0);
	assert_int_equal(close_session(fd, S, seq + 1, bin(&shown)), 0);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(stranger_cannot_act),
		cmocka_unit_test(stranger_cannot_act_on_a_session_being_opened),
		cmocka_unit_test(stranger_cannot_keep_a_session_alive),
		cmocka_unit_test(secret_checked_after_restart),
		cmocka_unit_test(secret_never_shown),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
