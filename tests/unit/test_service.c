/* test_service.c: the client service (server/service.c and the files it
 * dispatches to, the real ones) over a fake node that records proposals
 * and completes them when the test says so, and fakes of the few libraft
 * calls below. This test opens sockets: one listener on loopback and a
 * plain client socket, driven by running the loop until an answer is read
 * (bounded by a real-time limit, never a sleep). Every test closes the
 * loop cleanly (uv_loop_close() returns 0). The TLS tests speak to the
 * service through OpenSSL over memory BIOs, so that they can count the
 * records it sends. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "address.h"
#include "alloc_fail.h"
#include "codec.h"
#include "frame.h"
#include "leases.h"
#include "loopback.h"
#include "raftlock.h"
#include "records.h"
#include "secret.h"
#include "service.h"
#include "status.h"
#include "timebase.h"
#include "tls_certs.h"

#include <openssl/err.h>

/* ------------------------------------------------ fake node and libraft */

#define MAX_PROPOSALS 5000

struct proposed {
	node_done_cb cb;
	void *arg;
	Raftlock__Command__OpCase op;
	uint64_t session, seq, ack_below, acked0; /* acked0: the first acked, or 0 */
	size_t n_acked;
	uint8_t digest[SECRET_DIGEST_LEN]; /* OPEN_SESSION's secret_digest */
	size_t digest_len;
	uint32_t ttl_ms;                      /* OPEN_SESSION's */
	bool parked;                          /* through node_propose_call, parked */
	uint64_t drop_session, drop_deadline; /* DROP_BOUND's */
};

static struct proposed proposed[MAX_PROPOSALS];
static size_t n_proposed;

int node_propose(struct node *n, const Raftlock__Command *cmd, node_done_cb cb, void *arg)
{
	if (n->stopping)
		return RAFTLOCK_ESHUTDOWN;
	if (!n->leader)
		return RAFTLOCK_ENOTLEADER;
	assert_true(n_proposed < MAX_PROPOSALS);
	proposed[n_proposed++] = (struct proposed){cb,
						   arg,
						   cmd->op_case,
						   cmd->session,
						   cmd->seq,
						   cmd->ack_below,
						   cmd->n_acked ? cmd->acked[0] : 0,
						   cmd->n_acked,
						   {0},
						   0,
						   0,
						   false,
						   0,
						   0};
	if (cmd->op_case == RAFTLOCK__COMMAND__OP_DROP_BOUND) {
		proposed[n_proposed - 1].drop_session = cmd->drop_bound->session;
		proposed[n_proposed - 1].drop_deadline = cmd->drop_bound->deadline;
	}
	if (cmd->op_case == RAFTLOCK__COMMAND__OP_OPEN_SESSION) {
		proposed[n_proposed - 1].ttl_ms = cmd->open_session->ttl_ms;
		const ProtobufCBinaryData *d = &cmd->open_session->secret_digest;
		assert_true(d->len <= SECRET_DIGEST_LEN);
		memcpy(proposed[n_proposed - 1].digest, d->data, d->len);
		proposed[n_proposed - 1].digest_len = d->len;
	}
	return 0;
}

int node_propose_quiet(struct node *n, const Raftlock__Command *cmd)
{
	return node_propose(n, cmd, NULL, NULL);
}

int node_propose_call(struct node *n, const Raftlock__Command *cmd, node_done_cb cb, void *arg,
		      bool parked)
{
	int rv = node_propose(n, cmd, cb, arg);
	if (rv == 0)
		proposed[n_proposed - 1].parked = parked;
	return rv;
}

/* The one lock the fake node has waiters on, or NULL. */
static const char *queued_lock;

bool node_lock_queued(struct node *n, const char *name, uint64_t session)
{
	(void)n;
	assert_int_equal(session, 5); /* acquire_msg's */
	return queued_lock != NULL && strcmp(name, queued_lock) == 0;
}

uint64_t node_cluster_now(struct node *n)
{
	return cluster_clock_now(&n->clock);
}

uint32_t node_cluster_feature_level(struct node *n)
{
	(void)n;
	return FEATURE_LEVEL;
}

bool node_level_admits(struct node *n, const Raftlock__Command *cmd)
{
	return features_level_of(cmd) <= node_cluster_feature_level(n);
}

const char *node_role(struct node *n)
{
	return n->leader ? "leader" : "follower";
}

const char *node_leader_client_address(struct node *n, uint64_t *leader_id)
{
	if (leader_id != NULL)
		*leader_id = n->leader ? 1 : 2;
	return n->leader ? "127.0.0.1:1" : "127.0.0.1:2";
}

const char *node_member_client_address(struct node *n, uint64_t id)
{
	(void)n;
	return id == 1 ? "127.0.0.1:1" : NULL;
}

/* Membership (members.c, tested by test_membership over real nodes): the
 * service only routes member requests to it; here it answers that no
 * change can be made, which the routing test checks. */
void members_start(struct members *m, struct timebase *tb, struct node *node)
{
	(void)tb;
	m->node = node;
}

void members_close(struct members *m)
{
	(void)m;
}

bool members_is_request(const Raftlock__Envelope *env)
{
	return env->body_case == RAFTLOCK__ENVELOPE__BODY_MEMBER_LIST ||
	       env->body_case == RAFTLOCK__ENVELOPE__BODY_MEMBER_JOIN;
}

static unsigned n_member_requests; /* handed to members.c */

void members_handle(struct members *m, const Raftlock__Envelope *env, members_reply_cb reply,
		    void *arg)
{
	(void)m;
	(void)env;
	n_member_requests++;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.status = RAFTLOCK_EUNAVAILABLE;
	resp.message = "members";
	reply(arg, &resp);
}

raft_term raft_current_term(const struct raft *r)
{
	(void)r;
	return 1;
}

raft_index raft_commit_index(const struct raft *r)
{
	(void)r;
	return 0;
}

raft_index raft_last_applied(struct raft *r)
{
	(void)r;
	return 0;
}

raft_index raft_last_index(struct raft *r)
{
	(void)r;
	return 0;
}

int raft_barrier(struct raft *r, struct raft_barrier *req, raft_barrier_cb cb)
{
	(void)r;
	(void)req;
	(void)cb;
	return RAFT_NOTLEADER;
}

/* ------------------------------------------------------------- fixture */

struct fx {
	uv_loop_t loop;
	struct timebase tb;
	struct config cfg;
	struct node node;
	struct leases leases;
	struct service svc;
	int sock; /* the test's client connection */
	struct frame_reader reader;
	SSL_CTX *server_tls; /* client-tls on: the service's context */
	char store_dir[32];  /* follow(): the store's directory, removed at teardown */
};

static bool with_tls; /* the next setup starts the service with TLS */
/* The next setup's admission limits (0: none, as by default here). */
static unsigned next_max_conns, next_frame_timeout_ms;

/* A free loopback port (bound, read back, released). */
/* A nonblocking connection from the test to the service on port. */
static int connect_port(int port)
{
	int sock = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(connect(sock, (struct sockaddr *)&a, sizeof a), 0);
	fcntl(sock, F_SETFL, O_NONBLOCK);
	return sock;
}

/* Another connection from the test to the service. */
static int connect_again(struct fx *f)
{
	char host[64], port[ADDRESS_PORT_MAX];
	assert_int_equal(address_split(f->cfg.client_address, host, sizeof host, port), 0);
	return connect_port(atoi(port));
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	char err[256];
	assert_int_equal(uv_loop_init(&f->loop), 0);
	timebase_init_manual(&f->tb, 1000);
	int port = loopback_free_port();
	snprintf(f->cfg.client_address, sizeof f->cfg.client_address, "127.0.0.1:%d", port);
	f->cfg.id = 1;
	f->cfg.election_timeout_ms = 1000;
	f->cfg.keepalive_max_ids = 100;
	f->node.cfg = &f->cfg;
	cluster_clock_init(&f->node.clock, &f->tb);
	leases_init(&f->leases, &f->tb, &f->node, 20);
	f->cfg.tls_handshake_timeout_ms = 5000;
	f->cfg.max_connections_per_address = next_max_conns;
	f->cfg.frame_timeout_ms = next_frame_timeout_ms;
	if (with_tls)
		f->server_tls = tls_certs_server_ctx(false);
	assert_int_equal(service_start(&f->svc, &f->loop, &f->cfg, &f->node, &f->leases,
				       f->server_tls, err, sizeof err),
			 0);
	f->sock = connect_port(port);
	frame_reader_init(&f->reader, RAFTLOCK_FRAME_MAX);
	n_proposed = 0;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	/* Every request in flight gets its answer before the service closes. */
	for (size_t i = 0; i < n_proposed; i++)
		if (proposed[i].cb != NULL)
			proposed[i].cb(proposed[i].arg, RAFTLOCK_ESHUTDOWN, NULL);
	n_proposed = 0;
	queued_lock = NULL;
	close(f->sock);
	service_close(&f->svc);
	leases_close(&f->leases);
	assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&f->loop), 0);
	frame_reader_close(&f->reader);
	SSL_CTX_free(f->server_tls);
	if (f->store_dir[0] != '\0') {
		store_close(&f->node.store);
		char cmd[64];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->store_dir);
		assert_int_equal(system(cmd), 0);
	}
	free(f);
	return 0;
}

/* For a test that tears down itself (it must close the service before
 * what the service borrows). */
static int teardown_unless_done(void **state)
{
	return *state == NULL ? 0 : teardown(state);
}

static void send_bytes(struct fx *f, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = write(f->sock, p, len);
		if (n < 0 && errno == EAGAIN) {
			uv_run(&f->loop, UV_RUN_NOWAIT);
			continue;
		}
		assert_true(n > 0);
		p += n;
		len -= (size_t)n;
	}
}

static void send_env(struct fx *f, const Raftlock__Envelope *env)
{
	uint8_t *out;
	size_t len;
	assert_int_equal(codec_frame_envelope(env, &out, &len), 0);
	send_bytes(f, out, len);
	free(out);
}

struct tls_client;
static ssize_t tls_read(struct fx *f, struct tls_client *t, char *buf, size_t len);

/* Runs the loop until an envelope arrives (returned, the caller frees it)
 * or the connection is closed (NULL), through TLS client t unless NULL;
 * fails after 5 s of real time. */
static Raftlock__Envelope *next_env_via(struct fx *f, struct tls_client *t)
{
	uint64_t until = uv_hrtime() / 1000000u + 5000;
	for (;;) {
		const uint8_t *payload;
		size_t n;
		if (frame_reader_next(&f->reader, &payload, &n) == 1) {
			Raftlock__Envelope *env;
			assert_int_equal(codec_decode_envelope(payload, n, &env), 0);
			return env;
		}
		char buf[65536];
		ssize_t got = t != NULL ? tls_read(f, t, buf, sizeof buf)
					: read(f->sock, buf, sizeof buf);
		if (got == 0)
			return NULL;
		if (got > 0) {
			assert_int_equal(frame_reader_feed(&f->reader, buf, (size_t)got), 0);
			continue;
		}
		if (errno == ECONNRESET)
			return NULL;
		assert_int_equal(errno, EAGAIN);
		assert_true(uv_hrtime() / 1000000u < until);
		uv_run(&f->loop, UV_RUN_NOWAIT);
	}
}

static Raftlock__Envelope *next_env(struct fx *f)
{
	return next_env_via(f, NULL);
}

/* The next answer's status (its result payload when status 0). */
static int next_status(struct fx *f, uint64_t *id)
{
	Raftlock__Envelope *env = next_env(f);
	assert_non_null(env);
	assert_int_equal(env->body_case, RAFTLOCK__ENVELOPE__BODY_RESPONSE);
	int status = env->response->status;
	if (id != NULL)
		*id = env->id;
	raftlock__envelope__free_unpacked(env, NULL);
	return status;
}

/* The next answer has this status and a message that says `says`. */
static void assert_answer(struct fx *f, int status, const char *says)
{
	Raftlock__Envelope *env = next_env(f);
	assert_non_null(env);
	assert_int_equal(env->response->status, status);
	assert_non_null(strstr(env->response->message, says));
	raftlock__envelope__free_unpacked(env, NULL);
}

/* Session 5, which lead() opens on the leader, has this secret. */
static uint8_t secret_bytes[RAFTLOCK_SECRET_MIN] = "the right secret";
static uint8_t wrong_bytes[RAFTLOCK_SECRET_MIN] = "the wrong secret";
#define SECRET_5 ((ProtobufCBinaryData){sizeof secret_bytes, secret_bytes})

/* An ACQUIRE of session 5 with the sequence header in the envelope and the
 * given secret: the messages it points into live in m. */
struct acquire_msg {
	Raftlock__Acquire acq;
	Raftlock__AcquireRequest req;
	Raftlock__Sequence h;
	Raftlock__Envelope env;
};

/* An envelope id with the sequence header h (session 5, seq, secret). */
static void session_5_envelope(Raftlock__Envelope *env, Raftlock__Sequence *h, uint64_t id,
			       uint64_t seq, ProtobufCBinaryData secret)
{
	*h = (Raftlock__Sequence)RAFTLOCK__SEQUENCE__INIT;
	h->session = 5;
	h->seq = seq;
	h->secret = secret;
	*env = (Raftlock__Envelope)RAFTLOCK__ENVELOPE__INIT;
	env->id = id;
	env->sequence = h;
}

static Raftlock__Envelope *acquire_msg(struct acquire_msg *m, uint64_t id, uint64_t seq,
				       ProtobufCBinaryData secret)
{
	m->acq = (Raftlock__Acquire)RAFTLOCK__ACQUIRE__INIT;
	m->acq.name = "a";
	m->acq.owner = 1;
	m->req = (Raftlock__AcquireRequest)RAFTLOCK__ACQUIRE_REQUEST__INIT;
	m->req.acquire = &m->acq;
	session_5_envelope(&m->env, &m->h, id, seq, secret);
	m->env.body_case = RAFTLOCK__ENVELOPE__BODY_ACQUIRE;
	m->env.acquire = &m->req;
	return &m->env;
}

/* A lock set of one item, lock "b", of session 5 with its secret. */
struct multi_msg {
	Raftlock__MultiItem item;
	Raftlock__MultiItem *items[1];
	Raftlock__MultiAcquire set;
	Raftlock__MultiAcquireRequest req;
	Raftlock__Sequence h;
	Raftlock__Envelope env;
};

static Raftlock__Envelope *multi_msg(struct multi_msg *m, uint64_t id, uint64_t seq)
{
	m->item = (Raftlock__MultiItem)RAFTLOCK__MULTI_ITEM__INIT;
	m->item.name = "b";
	m->items[0] = &m->item;
	m->set = (Raftlock__MultiAcquire)RAFTLOCK__MULTI_ACQUIRE__INIT;
	m->set.items = m->items;
	m->set.n_items = 1;
	m->set.owner = 1;
	m->req = (Raftlock__MultiAcquireRequest)RAFTLOCK__MULTI_ACQUIRE_REQUEST__INIT;
	m->req.acquire = &m->set;
	session_5_envelope(&m->env, &m->h, id, seq, SECRET_5);
	m->env.body_case = RAFTLOCK__ENVELOPE__BODY_MULTI_ACQUIRE;
	m->env.multi_acquire = &m->req;
	return &m->env;
}

/* Sends that ACQUIRE framed by the given protocol (packed by hand below
 * WIRE_PROTOCOL). */
static void send_acquire_as(struct fx *f, uint64_t id, uint64_t seq, ProtobufCBinaryData secret,
			    uint32_t protocol)
{
	struct acquire_msg m;
	Raftlock__Envelope *env = acquire_msg(&m, id, seq, secret);
	if (protocol == WIRE_PROTOCOL) {
		send_env(f, env);
		return;
	}
	env->protocol = protocol;
	uint8_t buf[512];
	size_t n = raftlock__envelope__pack(env, buf + FRAME_HEADER_SIZE);
	frame_put_header(buf, (uint32_t)n);
	send_bytes(f, buf, FRAME_HEADER_SIZE + n);
}

/* Appends the frame of an ACQUIRE of session 5 to buf. */
static void frame_acquire(uint64_t id, uint64_t seq, uint8_t **buf, size_t *len, size_t *cap)
{
	struct acquire_msg m;
	Raftlock__Envelope *env = acquire_msg(&m, id, seq, SECRET_5);
	assert_int_equal(codec_frame_envelope_append(env, buf, len, cap), 0);
}

/* An ACQUIRE of session 5, with its secret. */
static void send_acquire(struct fx *f, uint64_t id, uint64_t seq)
{
	send_acquire_as(f, id, seq, SECRET_5, WIRE_PROTOCOL);
}

/* Session id is open on the leader with SECRET_5 (as apply reports it),
 * bound to its connection with bind_grace_ms unless 0. */
static void open_bound_on_leader(struct fx *f, uint64_t id, uint32_t bind_grace_ms)
{
	uint8_t digest[SECRET_DIGEST_LEN];
	secret_digest(&SECRET_5, digest);
	struct fsm_event opened = {.type = FSM_EV_SESSION,
				   .session = id,
				   .deadline = 100000,
				   .ttl_ms = 10000,
				   .opened = true,
				   .digest = digest,
				   .digest_len = sizeof digest,
				   .bind_grace_ms = bind_grace_ms};
	leases_on_event(&f->leases, &opened);
}

static void open_on_leader(struct fx *f, uint64_t id)
{
	open_bound_on_leader(f, id, 0);
}

/* A ready leader, on which session 5 is open. */
static void lead(struct fx *f)
{
	f->node.leader = true;
	f->node.ready = true;
	cluster_clock_start(&f->node.clock, 0);
	leases_on_ready(&f->leases, true);
	open_on_leader(f, 5);
}

/* ---------------------------------------------------------------- tests */

/* A frame whose payload is not an envelope gets EPROTO (id 0) and its
 * connection is closed; nothing is proposed. */
static void test_malformed_frame(void **state)
{
	struct fx *f = *state;
	lead(f);
	const uint8_t junk[] = {0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff};
	send_bytes(f, junk, sizeof junk);
	uint64_t id = 99;
	assert_int_equal(next_status(f, &id), RAFTLOCK_EPROTO);
	assert_int_equal(id, 0);
	assert_null(next_env(f));
	assert_int_equal(n_proposed, 0);
	assert_int_equal(service_connections(&f->svc), 0);
}

/* A length above the frame limit is refused before its payload arrives. */
static void test_frame_too_long(void **state)
{
	struct fx *f = *state;
	const uint8_t header[] = {0x7f, 0xff, 0xff, 0xff};
	send_bytes(f, header, sizeof header);
	assert_int_equal(next_status(f, NULL), RAFTLOCK_EPROTO);
	assert_null(next_env(f));
}

/* A client that sends a response is not speaking the protocol. */
static void test_response_from_client(void **state)
{
	struct fx *f = *state;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.message = "";
	resp.leader = "";
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.id = 3;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_RESPONSE;
	env.response = &resp;
	send_env(f, &env);
	assert_int_equal(next_status(f, NULL), RAFTLOCK_EPROTO);
	assert_null(next_env(f));
}

/* A follower answers NOT_LEADER with the leader's address and proposes
 * nothing; the connection stays open. */
static void test_not_leader(void **state)
{
	struct fx *f = *state;
	send_acquire(f, 7, 1);
	Raftlock__Envelope *env = next_env(f);
	assert_non_null(env);
	assert_int_equal(env->id, 7);
	assert_int_equal(env->response->status, RAFTLOCK_ENOTLEADER);
	assert_string_equal(env->response->leader, "127.0.0.1:2");
	raftlock__envelope__free_unpacked(env, NULL);
	assert_int_equal(n_proposed, 0);
	assert_int_equal(service_connections(&f->svc), 1);
}

/* Member requests go to members.c on the ready leader only: a follower
 * redirects them like a mutation, the leader hands them over and sends
 * back what members.c answered. */
static void test_member_requests_routed(void **state)
{
	struct fx *f = *state;
	Raftlock__MemberListRequest list = RAFTLOCK__MEMBER_LIST_REQUEST__INIT;
	Raftlock__Envelope req = RAFTLOCK__ENVELOPE__INIT;
	req.id = 3;
	req.body_case = RAFTLOCK__ENVELOPE__BODY_MEMBER_LIST;
	req.member_list = &list;
	send_env(f, &req);
	Raftlock__Envelope *env = next_env(f);
	assert_non_null(env);
	assert_int_equal(env->response->status, RAFTLOCK_ENOTLEADER);
	raftlock__envelope__free_unpacked(env, NULL);
	lead(f);
	send_env(f, &req);
	assert_answer(f, RAFTLOCK_EUNAVAILABLE, "members");
	assert_int_equal(n_proposed, 0);
}

/* A session TTL below RAFTLOCK_TTL_ELECTION_FACTOR election timeouts is
 * refused before the log, with a message naming the minimum. */
static void test_ttl_below_minimum(void **state)
{
	struct fx *f = *state;
	lead(f);
	Raftlock__OpenSessionRequest open = RAFTLOCK__OPEN_SESSION_REQUEST__INIT;
	open.ttl_ms = RAFTLOCK_TTL_MIN_MS;
	Raftlock__Envelope req = RAFTLOCK__ENVELOPE__INIT;
	req.id = 1;
	req.body_case = RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
	req.open_session = &open;
	send_env(f, &req);
	assert_answer(f, RAFTLOCK_EINVAL, "shortest this cluster allows");
	assert_int_equal(n_proposed, 0);
}

/* A connection has at most 4,096 requests in flight: the next ones get
 * EOVERLOAD (not executed, the client retries) while the others wait for
 * their entries; once they apply, each gets its result. */
static void test_inflight_limit(void **state)
{
	struct fx *f = *state;
	lead(f);
	enum { SENT = 4100, LIMIT = 4096 };
	for (uint64_t i = 1; i <= SENT; i++)
		send_acquire(f, i, i);
	size_t overloaded = 0;
	for (size_t i = 0; i < SENT - LIMIT; i++) {
		uint64_t id;
		assert_int_equal(next_status(f, &id), RAFTLOCK_EOVERLOAD);
		assert_true(id > LIMIT);
		overloaded++;
	}
	assert_int_equal(n_proposed, LIMIT);
	assert_int_equal(overloaded, SENT - LIMIT);
	/* the entries apply: every proposed request is answered */
	Raftlock__Result res = RAFTLOCK__RESULT__INIT;
	for (size_t i = 0; i < n_proposed; i++)
		proposed[i].cb(proposed[i].arg, 0, &res);
	n_proposed = 0;
	for (size_t i = 0; i < LIMIT; i++)
		assert_int_equal(next_status(f, NULL), 0);
}

/* An acquire that will queue behind the lock's waiters is proposed parked
 * (node_propose_call, parked); one on a lock without waiters, or one that does
 * not wait, is proposed at once. */
static void test_queued_acquire_parked(void **state)
{
	struct fx *f = *state;
	lead(f);
	queued_lock = "a";
	struct acquire_msg m[4];
	const struct {
		const char *name;
		bool wait, parked;
	} want[] = {{"a", true, true}, {"a", false, false}, {"b", true, false}, {"a", true, true}};
	for (uint64_t i = 0; i < 4; i++) {
		Raftlock__Envelope *env = acquire_msg(&m[i], i + 1, i + 1, SECRET_5);
		m[i].acq.name = (char *)want[i].name;
		m[i].acq.wait = want[i].wait;
		send_env(f, env);
	}
	uint64_t until = uv_hrtime() / 1000000u + 5000;
	while (n_proposed < 4) {
		assert_true(uv_hrtime() / 1000000u < until);
		uv_run(&f->loop, UV_RUN_NOWAIT);
	}
	queued_lock = NULL;
	Raftlock__Result res = RAFTLOCK__RESULT__INIT;
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(proposed[i].op, RAFTLOCK__COMMAND__OP_ACQUIRE);
		assert_int_equal(proposed[i].seq, i + 1);
		assert_int_equal(proposed[i].parked, want[i].parked);
		proposed[i].cb(proposed[i].arg, 0, &res);
	}
	n_proposed = 0;
}

/* The sequence header reaches the log from the envelope (protocol 2);
 * when the request's own fields (protocol 1) hold one too, the envelope's
 * wins. Those fields alone cannot carry the session's secret: such a
 * request is refused before the log (rule 14). Every answer says which
 * protocol the server speaks. */
static void test_sequence_header(void **state)
{
	struct fx *f = *state;
	lead(f);
	open_on_leader(f, 7);
	open_on_leader(f, 8);
	uint64_t acked[] = {3};
	Raftlock__Release rel = RAFTLOCK__RELEASE__INIT;
	rel.name = "a";
	rel.owner = 1;
	Raftlock__ReleaseRequest req = RAFTLOCK__RELEASE_REQUEST__INIT;
	req.release = &rel;
	Raftlock__Sequence h = RAFTLOCK__SEQUENCE__INIT;
	h.session = 7;
	h.seq = 9;
	h.ack_below = 4;
	h.acked = acked;
	h.n_acked = 1;
	h.secret = SECRET_5;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_RELEASE;
	env.release = &req;

	env.id = 1; /* protocol 2 */
	env.sequence = &h;
	send_env(f, &env);
	env.id = 2; /* protocol 1: the fields inside the request */
	env.sequence = NULL;
	req.session = 8;
	req.seq = 10;
	req.ack_below = 5;
	send_env(f, &env);
	env.id = 3; /* both: the envelope's */
	env.sequence = &h;
	send_env(f, &env);

	Raftlock__Result res = RAFTLOCK__RESULT__INIT;
	uint64_t until = uv_hrtime() / 1000000u + 5000;
	while (n_proposed < 2) {
		assert_true(uv_hrtime() / 1000000u < until);
		uv_run(&f->loop, UV_RUN_NOWAIT);
	}
	uint64_t refused = 0;
	assert_int_equal(next_status(f, &refused), RAFTLOCK_EPERM);
	assert_int_equal(refused, 2);
	struct proposed want[] = {
		{.session = 7, .seq = 9, .ack_below = 4, .acked0 = 3, .n_acked = 1},
		{.session = 7, .seq = 9, .ack_below = 4, .acked0 = 3, .n_acked = 1},
	};
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(proposed[i].op, RAFTLOCK__COMMAND__OP_RELEASE);
		assert_int_equal(proposed[i].session, want[i].session);
		assert_int_equal(proposed[i].seq, want[i].seq);
		assert_int_equal(proposed[i].ack_below, want[i].ack_below);
		assert_int_equal(proposed[i].n_acked, want[i].n_acked);
		assert_int_equal(proposed[i].acked0, want[i].acked0);
		proposed[i].cb(proposed[i].arg, 0, &res);
	}
	n_proposed = 0;
	for (int i = 0; i < 2; i++) {
		Raftlock__Envelope *ans = next_env(f);
		assert_non_null(ans);
		assert_int_equal(ans->protocol, WIRE_PROTOCOL);
		assert_int_equal(ans->response->status, 0);
		raftlock__envelope__free_unpacked(ans, NULL);
	}
}

/* Runs the loop until n proposals were made (5 s of real time at most). */
static void wait_proposed(struct fx *f, size_t n)
{
	uint64_t until = uv_hrtime() / 1000000u + 5000;
	while (n_proposed < n) {
		assert_true(uv_hrtime() / 1000000u < until);
		uv_run(&f->loop, UV_RUN_NOWAIT);
	}
}

/* Waits for exactly one proposal, applies it with an empty result and
 * reads its answer (status 0): returns what was proposed. */
static struct proposed apply_only_proposal(struct fx *f)
{
	wait_proposed(f, 1);
	assert_int_equal(n_proposed, 1);
	struct proposed p = proposed[0];
	Raftlock__Result res = RAFTLOCK__RESULT__INIT;
	p.cb(p.arg, 0, &res);
	n_proposed = 0;
	assert_int_equal(next_status(f, NULL), 0);
	return p;
}

static void open_store(struct fx *f);

/* The next n answers are to requests 1..n, each with this status and a
 * message that says says[id - 1]. */
static void assert_refusals(struct fx *f, int status, const char *const *says, uint64_t n)
{
	for (uint64_t id = 1; id <= n; id++) {
		Raftlock__Envelope *ans = next_env(f);
		assert_non_null(ans);
		assert_int_equal(ans->id, id);
		assert_int_equal(ans->response->status, status);
		assert_non_null(strstr(ans->response->message, says[id - 1]));
		raftlock__envelope__free_unpacked(ans, NULL);
	}
}

/* protobuf-c keeps any int32 in an enum field: an acquire whose kind or
 * mode the protocol does not define (mode -1 on a read-write lock, which
 * apply would grant beside shared holders; kind -5, which apply would give
 * a new lock), alone or in a lock set, is answered EINVAL and never
 * reaches the log; the connection goes on serving. */
static void test_undefined_kind_or_mode_refused(void **state)
{
	struct fx *f = *state;
	open_store(f); /* where a retry's record would be */
	lead(f);
	struct acquire_msg m;
	Raftlock__Envelope *env = acquire_msg(&m, 1, 1, SECRET_5);
	m.acq.kind = RAFTLOCK__LOCK_KIND__RWLOCK;
	m.acq.mode = (Raftlock__Mode)-1;
	send_env(f, env);
	env = acquire_msg(&m, 2, 2, SECRET_5);
	m.acq.kind = (Raftlock__LockKind)-5;
	send_env(f, env);

	struct multi_msg set;
	env = multi_msg(&set, 3, 3);
	set.item.kind = RAFTLOCK__LOCK_KIND__RWLOCK;
	set.item.mode = (Raftlock__Mode)7;
	send_env(f, env);
	send_acquire(f, 4, 4); /* well formed */

	const char *says[] = {"mode -1", "kind -5", "mode 7"};
	assert_refusals(f, RAFTLOCK_EINVAL, says, 3);
	assert_int_equal(apply_only_proposal(f).seq, 4);
}

/* A lock-delay above RAFTLOCK_LOCK_DELAY_MAX_MS (of an acquire, or of a
 * lock set's item), a hold limit above RAFTLOCK_MAX_HOLD_MAX_MS or a
 * revocation grace above RAFTLOCK_REVOKE_GRACE_MAX_MS is answered EINVAL
 * and never proposed; the bounds themselves are taken. */
static void test_lock_time_limits_bounded(void **state)
{
	struct fx *f = *state;
	open_store(f); /* where a retry's record would be */
	lead(f);
	struct acquire_msg m;
	Raftlock__Envelope *env = acquire_msg(&m, 1, 1, SECRET_5);
	m.acq.lock_delay_ms = RAFTLOCK_LOCK_DELAY_MAX_MS + 1;
	send_env(f, env);
	env = acquire_msg(&m, 2, 2, SECRET_5);
	m.acq.max_hold_ms = RAFTLOCK_MAX_HOLD_MAX_MS + 1;
	send_env(f, env);
	struct multi_msg set;
	env = multi_msg(&set, 3, 3);
	set.item.lock_delay_ms = UINT32_MAX;
	send_env(f, env);
	env = acquire_msg(&m, 4, 4, SECRET_5);
	m.acq.max_hold_ms = 1000;
	m.acq.revoke_grace_ms = RAFTLOCK_REVOKE_GRACE_MAX_MS + 1;
	send_env(f, env);
	env = acquire_msg(&m, 5, 5, SECRET_5);
	m.acq.lock_delay_ms = RAFTLOCK_LOCK_DELAY_MAX_MS;
	m.acq.max_hold_ms = RAFTLOCK_MAX_HOLD_MAX_MS;
	m.acq.revoke_grace_ms = RAFTLOCK_REVOKE_GRACE_MAX_MS;
	send_env(f, env);

	const char *says[] = {"lock-delay 600001 ms", "max-hold 86400001 ms", "lock-delay",
			      "revoke-grace 600001 ms"};
	assert_refusals(f, RAFTLOCK_EINVAL, says, 4);
	assert_int_equal(apply_only_proposal(f).seq, 5);
}

/* An admin revoke's grace is bounded as a lock's revoke_grace_ms is: one
 * above RAFTLOCK_REVOKE_GRACE_MAX_MS is answered EINVAL and never
 * proposed; one at the bound is. */
static void test_revoke_grace_bounded(void **state)
{
	struct fx *f = *state;
	lead(f);
	Raftlock__RevokeRequest rv = RAFTLOCK__REVOKE_REQUEST__INIT;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_REVOKE;
	env.revoke = &rv;
	rv.name = "rv";
	env.id = 1;
	rv.grace_ms = RAFTLOCK_REVOKE_GRACE_MAX_MS + 1;
	send_env(f, &env);
	env.id = 2;
	rv.grace_ms = RAFTLOCK_REVOKE_GRACE_MAX_MS;
	send_env(f, &env);
	const char *says[] = {"grace 600001 ms"};
	assert_refusals(f, RAFTLOCK_EINVAL, says, 1);
	assert_int_equal(apply_only_proposal(f).op, RAFTLOCK__COMMAND__OP_REVOKE);
}

/* A lock name the protocol cannot carry -- one with a NUL byte, which a C
 * string would cut ("a\0x" would be lock "a"), an empty one, one over
 * RAFTLOCK_NAME_MAX bytes -- is answered EPROTO by its request's id and
 * never proposed; the connection goes on serving. */
static void test_bad_name_answered(void **state)
{
	struct fx *f = *state;
	lead(f);
	struct acquire_msg m;
	Raftlock__Envelope *env = acquire_msg(&m, 1, 1, SECRET_5);
	m.acq.name = "aXx";
	uint8_t buf[512];
	size_t n = raftlock__envelope__pack(env, buf + FRAME_HEADER_SIZE);
	uint8_t *x = memchr(buf + FRAME_HEADER_SIZE, 'X', n);
	assert_non_null(x);
	*x = '\0';
	frame_put_header(buf, (uint32_t)n);
	send_bytes(f, buf, FRAME_HEADER_SIZE + n);
	env = acquire_msg(&m, 2, 2, SECRET_5);
	m.acq.name = "";
	send_env(f, env);
	char longer[RAFTLOCK_NAME_MAX + 2];
	memset(longer, 'n', sizeof longer - 1);
	longer[sizeof longer - 1] = '\0';
	env = acquire_msg(&m, 3, 3, SECRET_5);
	m.acq.name = longer;
	send_env(f, env);
	send_acquire(f, 4, 4);

	const char *says[] = {"NUL byte", "empty", "longer than RAFTLOCK_NAME_MAX"};
	assert_refusals(f, RAFTLOCK_EPROTO, says, 3);
	assert_int_equal(apply_only_proposal(f).seq, 4);
}

/* Rule 14: a mutation without its session's secret is refused with EPERM
 * before the log -- no proposal, so no sequence of the session is run or
 * settled -- and one of an older protocol with EPROTO naming the upgrade;
 * with the secret it is proposed. Keepalive ids without it are answered
 * EPERM and not renewed. */
static void test_session_secret_checked(void **state)
{
	struct fx *f = *state;
	lead(f);
	ProtobufCBinaryData right = SECRET_5; /* session 5's, opened by lead() */
	ProtobufCBinaryData wrong = {sizeof wrong_bytes, wrong_bytes};
	ProtobufCBinaryData none = {0, NULL};

	send_acquire_as(f, 1, 7, wrong, WIRE_PROTOCOL);
	assert_answer(f, RAFTLOCK_EPERM, "secret");
	send_acquire_as(f, 2, 7, none, WIRE_PROTOCOL);
	assert_int_equal(next_status(f, NULL), RAFTLOCK_EPERM);
	send_acquire_as(f, 3, 7, none, 2);
	assert_answer(f, RAFTLOCK_EPROTO, "upgrade the client");
	assert_int_equal(n_proposed, 0);
	assert_int_equal(f->leases.stats.ids_denied, 2);

	send_acquire_as(f, 4, 7, right, WIRE_PROTOCOL);
	wait_proposed(f, 1);
	assert_int_equal(proposed[0].op, RAFTLOCK__COMMAND__OP_ACQUIRE);
	assert_int_equal(proposed[0].seq, 7);
	Raftlock__Result res = RAFTLOCK__RESULT__INIT;
	proposed[0].cb(proposed[0].arg, 0, &res);
	n_proposed = 0;
	assert_int_equal(next_status(f, NULL), 0);

	/* keepalives: the id with the wrong secret is not renewed */
	uint64_t ids[] = {5, 5};
	ProtobufCBinaryData secrets[] = {wrong};
	Raftlock__KeepAliveRequest ka = RAFTLOCK__KEEP_ALIVE_REQUEST__INIT;
	ka.sessions = ids;
	ka.n_sessions = 2;
	ka.secrets = secrets;
	ka.n_secrets = 1;
	Raftlock__Envelope req = RAFTLOCK__ENVELOPE__INIT;
	req.id = 5;
	req.body_case = RAFTLOCK__ENVELOPE__BODY_KEEPALIVE;
	req.keepalive = &ka;
	send_env(f, &req);
	Raftlock__Envelope *env = next_env(f);
	assert_non_null(env);
	assert_int_equal(env->response->keepalive->n_statuses, 2);
	assert_int_equal(env->response->keepalive->statuses[0], RAFTLOCK_EPERM);
	assert_int_equal(env->response->keepalive->statuses[1], RAFTLOCK_EPERM);
	raftlock__envelope__free_unpacked(env, NULL);
	timebase_advance(&f->tb, 100);
	assert_int_equal(n_proposed, 0);
}

/* Sends on f->sock a keepalive (request id) of session, with SECRET_5. */
static void send_keepalive(struct fx *f, uint64_t id, uint64_t session)
{
	ProtobufCBinaryData secrets[] = {SECRET_5};
	Raftlock__KeepAliveRequest ka = RAFTLOCK__KEEP_ALIVE_REQUEST__INIT;
	ka.sessions = &session;
	ka.n_sessions = 1;
	ka.secrets = secrets;
	ka.n_secrets = 1;
	Raftlock__Envelope req = RAFTLOCK__ENVELOPE__INIT;
	req.id = id;
	req.body_case = RAFTLOCK__ENVELOPE__BODY_KEEPALIVE;
	req.keepalive = &ka;
	send_env(f, &req);
}

/* The status the next answer, a keepalive of one id, gives that id. */
static int next_keepalive_status(struct fx *f)
{
	Raftlock__Envelope *env = next_env(f);
	assert_non_null(env);
	assert_int_equal(env->response->status, 0);
	assert_int_equal(env->response->payload_case, RAFTLOCK__RESPONSE__PAYLOAD_KEEPALIVE);
	assert_int_equal(env->response->keepalive->n_statuses, 1);
	int status = env->response->keepalive->statuses[0];
	raftlock__envelope__free_unpacked(env, NULL);
	return status;
}

/* The next answer, to request id, is the Result apply gives a session
 * that ended, with a message that says `says`. */
static void assert_session_ended(struct fx *f, uint64_t id, const char *says)
{
	Raftlock__Envelope *env = next_env(f);
	assert_non_null(env);
	assert_int_equal(env->id, id);
	assert_int_equal(env->response->status, 0);
	assert_int_equal(env->response->payload_case, RAFTLOCK__RESPONSE__PAYLOAD_RESULT);
	assert_int_equal(env->response->result->status, RAFTLOCK_ESESSION);
	assert_non_null(strstr(env->response->message, says));
	raftlock__envelope__free_unpacked(env, NULL);
}

/* Rule 14: a session this ready leader does not know is not proposed for:
 * apply would run the request on an open of that id not applied yet, ids
 * being sequential, without its secret. Below the next id to give, the
 * session ended: the Result apply gives (final); from it on, "not
 * executed" (EUNAVAILABLE: a newer leader may have opened it). A
 * keepalive's id is answered by the same rule, and so is session 0, which
 * a mutation sent without a sequence header names. The leader reads the
 * next id from a real store in a temporary directory. */
static void test_unknown_session_not_proposed(void **state)
{
	struct fx *f = *state;
	char dir[] = "/tmp/test_service.XXXXXX", err[256];
	assert_non_null(mkdtemp(dir));
	assert_int_equal(store_open(&f->node.store, dir, 16u << 20, err, sizeof err), 0);
	MDB_txn *txn = store_begin(&f->node.store, true);
	Raftlock__Meta *m = store_get_meta(&f->node.store, txn);
	m->next_session = 7; /* sessions 1..6 were opened */
	store_put_meta(&f->node.store, txn, m);
	raftlock__meta__free_unpacked(m, NULL);
	store_commit(txn);
	lead(f);
	struct acquire_msg am;
	Raftlock__Envelope *req = acquire_msg(&am, 1, 1, SECRET_5);
	am.h.session = 6; /* ended */
	send_env(f, req);
	assert_session_ended(f, 1, "session 6 is not open");
	req = acquire_msg(&am, 2, 1, SECRET_5);
	am.h.session = 7; /* the next one: its open may be on its way */
	send_env(f, req);
	assert_answer(f, RAFTLOCK_EUNAVAILABLE, "session 7 is not open on this node");
	/* Keepalives alike: an ended session is lost for good, one past the
	 * next id is not open here yet (a deposed leader cut off from the
	 * one that opened it): the client renews it elsewhere. */
	send_keepalive(f, 3, 6);
	assert_int_equal(next_keepalive_status(f), RAFTLOCK_ESESSION);
	send_keepalive(f, 4, 7 + 5);
	assert_int_equal(next_keepalive_status(f), RAFTLOCK_EUNAVAILABLE);
	/* Session 0 is never open: a mutation naming it, a set or a
	 * proclaim without a sequence header, gets the same answer. */
	req = acquire_msg(&am, 6, 1, SECRET_5);
	am.h.session = 0;
	send_env(f, req);
	assert_session_ended(f, 6, "session 0 is not open");
	struct multi_msg mm;
	req = multi_msg(&mm, 7, 1);
	req->sequence = NULL;
	send_env(f, req);
	assert_session_ended(f, 7, "session 0 is not open");
	Raftlock__Proclaim pc = RAFTLOCK__PROCLAIM__INIT;
	pc.name = "e";
	Raftlock__ProclaimRequest pr = RAFTLOCK__PROCLAIM_REQUEST__INIT;
	pr.proclaim = &pc;
	req = multi_msg(&mm, 8, 1); /* its envelope, with another body */
	req->sequence = NULL;
	req->body_case = RAFTLOCK__ENVELOPE__BODY_PROCLAIM;
	req->proclaim = &pr;
	send_env(f, req);
	assert_session_ended(f, 8, "session 0 is not open");
	timebase_advance(&f->tb, 100);
	assert_int_equal(n_proposed, 0);

	/* The open session is proposed for as before. */
	send_acquire(f, 5, 1);
	assert_int_equal(apply_only_proposal(f).session, 5);

	struct store st = f->node.store; /* f goes with the teardown */
	teardown(state);
	*state = NULL;
	store_close(&st);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* The index of the last proposal of kind op, or -1; with_cb: the last
 * one a request waits for (not the leader's empty RENEWs). */
static long last_proposed(Raftlock__Command__OpCase op, bool with_cb)
{
	for (size_t i = n_proposed; i > 0; i--)
		if (proposed[i - 1].op == op && (!with_cb || proposed[i - 1].cb != NULL))
			return (long)(i - 1);
	return -1;
}

/* Applies the RENEW a keepalive waits for (the last one proposed). */
static void renew_applies(void)
{
	long renew = last_proposed(RAFTLOCK__COMMAND__OP_RENEW, true);
	assert_true(renew >= 0);
	proposed[renew].cb(proposed[renew].arg, 0, NULL);
	proposed[renew].cb = NULL;
}

/* Runs the loop until cond(f) holds (5 s of real time at most). */
static void run_until(struct fx *f, bool (*cond)(struct fx *))
{
	uint64_t until = uv_hrtime() / 1000000u + 5000;
	while (!cond(f)) {
		assert_true(uv_hrtime() / 1000000u < until);
		uv_run(&f->loop, UV_RUN_NOWAIT);
	}
}

#define BOUND_ID 9
#define BOUND_GRACE_MS 200
#define WINDOW_MS 20 /* setup()'s renew window */

static bool bound_unkept(struct fx *f)
{
	return bindings_conn(&f->svc.bindings, BOUND_ID) == NULL;
}

static bool keepalive_waits(struct fx *f)
{
	return f->leases.pending != NULL;
}

/* Rule 11a: the keepalive of a bound session that comes on a new
 * connection within the grace calls off the drop when the leader accepts
 * it, not once its RENEW applied. Else a drop due while that RENEW is on
 * its way is proposed after it: the RENEW answers 0 (the client takes its
 * session as safe) and the drop then ends the session. */
static void test_bound_drop_called_off_on_accept(void **state)
{
	struct fx *f = *state;
	lead(f);
	service_on_ready(&f->svc, true); /* bindings are kept from now */
	open_bound_on_leader(f, BOUND_ID, BOUND_GRACE_MS);

	/* Kept by the first connection, which then closes. */
	send_keepalive(f, 1, BOUND_ID);
	run_until(f, keepalive_waits);
	timebase_advance(&f->tb, WINDOW_MS);
	renew_applies();
	assert_int_equal(next_keepalive_status(f), 0);
	assert_false(bound_unkept(f));
	close(f->sock);
	run_until(f, bound_unkept);

	/* A keepalive on a new connection, accepted before the grace ends,
	 * whose RENEW is proposed before and applies after it. */
	timebase_advance(&f->tb, BOUND_GRACE_MS - WINDOW_MS - 5);
	f->sock = connect_again(f);
	send_keepalive(f, 2, BOUND_ID);
	run_until(f, keepalive_waits);
	timebase_advance(&f->tb, WINDOW_MS);
	assert_true(last_proposed(RAFTLOCK__COMMAND__OP_RENEW, true) >= 0); /* on its way */
	timebase_advance(&f->tb, 10); /* the grace has passed */
	assert_int_equal(last_proposed(RAFTLOCK__COMMAND__OP_DROP_BOUND, false), -1);
	renew_applies();
	assert_int_equal(next_keepalive_status(f), 0);
	timebase_advance(&f->tb, 10 * BOUND_GRACE_MS);
	assert_int_equal(last_proposed(RAFTLOCK__COMMAND__OP_DROP_BOUND, false), -1);
	assert_int_equal(f->svc.bindings.drops, 0);
}

/* Rule 11a: a keepalive accepted on the connection just before it closed
 * sends a RENEW that is still on its way when the grace ends; the drop,
 * proposed after it with the deadline as then applied, is kept at apply
 * (FSM_EV_DROP_KEPT). No connection keeps the session: the leader drops it
 * again with the deadline that RENEW set, instead of leaving it to its
 * TTL. A stale report of that first drop proposes nothing more. */
static void test_bound_drop_kept_by_renewal_proposed_again(void **state)
{
	struct fx *f = *state;
	lead(f);
	service_on_ready(&f->svc, true);
	open_bound_on_leader(f, BOUND_ID, BOUND_GRACE_MS);

	send_keepalive(f, 1, BOUND_ID);
	run_until(f, keepalive_waits);
	timebase_advance(&f->tb, WINDOW_MS);
	assert_true(last_proposed(RAFTLOCK__COMMAND__OP_RENEW, true) >= 0); /* on its way */
	close(f->sock);
	run_until(f, bound_unkept);
	timebase_advance(&f->tb, BOUND_GRACE_MS + 1);
	long first = last_proposed(RAFTLOCK__COMMAND__OP_DROP_BOUND, false);
	assert_true(first >= 0);
	assert_int_equal(proposed[first].drop_session, BOUND_ID);
	assert_int_equal(proposed[first].drop_deadline, 100000); /* as opened */

	/* The RENEW applies first and moves the lease; the drop is kept. */
	struct fsm_event renewed = {
		.type = FSM_EV_SESSION, .session = BOUND_ID, .deadline = 110000, .ttl_ms = 10000};
	leases_on_event(&f->leases, &renewed);
	renew_applies();
	struct fsm_event kept = {.type = FSM_EV_DROP_KEPT, .session = BOUND_ID, .deadline = 100000};
	service_on_event(&f->svc, &kept);
	timebase_advance(&f->tb, 1);
	long again = last_proposed(RAFTLOCK__COMMAND__OP_DROP_BOUND, false);
	assert_true(again > first);
	assert_int_equal(proposed[again].drop_session, BOUND_ID);
	assert_int_equal(proposed[again].drop_deadline, 110000);
	assert_int_equal(f->svc.bindings.drops, 2);

	service_on_event(&f->svc, &kept); /* stale: not the last drop */
	timebase_advance(&f->tb, 10 * BOUND_GRACE_MS);
	assert_int_equal(f->svc.bindings.drops, 2);
}

/* Rule 14: an open brings a secret of 16 to 64 bytes, of which the log
 * gets only the SHA-256; without one, EPROTO (naming the upgrade for an
 * older protocol), nothing proposed. */
static void test_open_carries_digest_only(void **state)
{
	struct fx *f = *state;
	lead(f);
	Raftlock__OpenSessionRequest open = RAFTLOCK__OPEN_SESSION_REQUEST__INIT;
	open.ttl_ms = 10000;
	Raftlock__Envelope req = RAFTLOCK__ENVELOPE__INIT;
	req.id = 1;
	req.body_case = RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
	req.open_session = &open;
	send_env(f, &req);
	assert_answer(f, RAFTLOCK_EPROTO, "secret");
	open.secret = (ProtobufCBinaryData){RAFTLOCK_SECRET_MIN - 1, secret_bytes};
	send_env(f, &req);
	assert_int_equal(next_status(f, NULL), RAFTLOCK_EPROTO);
	assert_int_equal(n_proposed, 0);

	open.secret = (ProtobufCBinaryData){sizeof secret_bytes, secret_bytes};
	send_env(f, &req);
	wait_proposed(f, 1);
	uint8_t digest[SECRET_DIGEST_LEN];
	secret_digest(&open.secret, digest);
	assert_int_equal(proposed[0].op, RAFTLOCK__COMMAND__OP_OPEN_SESSION);
	assert_int_equal(proposed[0].digest_len, SECRET_DIGEST_LEN);
	assert_memory_equal(proposed[0].digest, digest, SECRET_DIGEST_LEN);
	assert_memory_not_equal(proposed[0].digest, secret_bytes, sizeof secret_bytes);
}

/* With auth = on: a connection without an identity, or whose identity
 * lacks the permission, gets EPERM naming it and nothing is proposed; a
 * token binds the connection to its name; the bootstrap admin's rule
 * change and a session open (with the identity) are proposed. The
 * service reads the rules from a real store in a temporary directory. */
/* An AUTHENTICATE with the bearer token `token` (its answer is left to
 * read). */
static void send_token(struct fx *f, uint64_t id, const char *token)
{
	Raftlock__AuthenticateRequest auth = RAFTLOCK__AUTHENTICATE_REQUEST__INIT;
	auth.token.data = (uint8_t *)token;
	auth.token.len = strlen(token);
	Raftlock__Envelope req = RAFTLOCK__ENVELOPE__INIT;
	req.id = id;
	req.body_case = RAFTLOCK__ENVELOPE__BODY_AUTHENTICATE;
	req.authenticate = &auth;
	send_env(f, &req);
}

/* Loads into tokens an auth-tokens file that it writes in dir with the
 * (name, token) pairs of list, NULL-terminated. */
static void load_tokens(const char *dir, struct auth_tokens *tokens, const char *const *list)
{
	char path[64], err[256], hex[2 * AUTH_DIGEST_SIZE + 1];
	snprintf(path, sizeof path, "%s/tokens", dir);
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	for (size_t i = 0; list[i] != NULL; i += 2) {
		auth_digest_hex(list[i + 1], strlen(list[i + 1]), hex);
		fprintf(fp, "%s %s\n", list[i], hex);
	}
	fclose(fp);
	assert_int_equal(auth_tokens_load(tokens, path, err, sizeof err), 0);
}

static void test_auth_refusals(void **state)
{
	struct fx *f = *state;
	char dir[] = "/tmp/test_service.XXXXXX", err[256];
	assert_non_null(mkdtemp(dir));
	assert_int_equal(store_open(&f->node.store, dir, 16u << 20, err, sizeof err), 0);
	struct auth_tokens tokens;
	load_tokens(dir, &tokens,
		    (const char *const[]){"alice", "tok-alice", "root", "tok-root", NULL});
	f->cfg.auth = true;
	strcpy(f->cfg.auth_admin, "root");
	service_auth_tokens(&f->svc, &tokens);
	lead(f);

	/* No identity yet: EPERM, nothing proposed. */
	send_acquire(f, 1, 1);
	Raftlock__Envelope *env = next_env(f);
	assert_int_equal(env->response->status, RAFTLOCK_EPERM);
	assert_non_null(strstr(env->response->message, "not authenticated"));
	raftlock__envelope__free_unpacked(env, NULL);

	/* An unknown token: EPERM, and the refusal is what later requests say. */
	send_token(f, 2, "tok-nobody");
	assert_int_equal(next_status(f, NULL), RAFTLOCK_EPERM);
	send_acquire(f, 3, 1);
	env = next_env(f);
	assert_non_null(strstr(env->response->message, "no such token"));
	raftlock__envelope__free_unpacked(env, NULL);

	/* alice's token: she is alice, and has no rule. */
	send_token(f, 4, "tok-alice");
	env = next_env(f);
	assert_int_equal(env->response->status, 0);
	assert_int_equal(env->response->payload_case, RAFTLOCK__RESPONSE__PAYLOAD_AUTH);
	assert_string_equal(env->response->auth->identity, "alice");
	assert_true(env->response->auth->required);
	raftlock__envelope__free_unpacked(env, NULL);
	send_acquire(f, 5, 1);
	env = next_env(f);
	assert_int_equal(env->response->status, RAFTLOCK_EPERM);
	assert_string_equal(env->response->message, "identity 'alice' has no 'lock' on 'a'");
	raftlock__envelope__free_unpacked(env, NULL);
	Raftlock__AclSet rule = RAFTLOCK__ACL_SET__INIT;
	rule.identity = "alice";
	rule.prefix = "";
	rule.perms = 7;
	Raftlock__AclSetRequest set = RAFTLOCK__ACL_SET_REQUEST__INIT;
	set.rule = &rule;
	Raftlock__Envelope setenv = RAFTLOCK__ENVELOPE__INIT;
	setenv.id = 6;
	setenv.body_case = RAFTLOCK__ENVELOPE__BODY_ACL_SET;
	setenv.acl_set = &set;
	send_env(f, &setenv);
	assert_int_equal(next_status(f, NULL), RAFTLOCK_EPERM);
	/* Another token does not change a connection's identity. */
	send_token(f, 7, "tok-root");
	assert_int_equal(next_status(f, NULL), RAFTLOCK_EPERM);
	assert_int_equal(n_proposed, 0);

	/* She may open a session; the command carries her identity. */
	Raftlock__OpenSessionRequest open = RAFTLOCK__OPEN_SESSION_REQUEST__INIT;
	open.ttl_ms = 10000;
	open.secret = (ProtobufCBinaryData){sizeof secret_bytes, secret_bytes};
	Raftlock__Envelope oenv = RAFTLOCK__ENVELOPE__INIT;
	oenv.id = 8;
	oenv.body_case = RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
	oenv.open_session = &open;
	send_env(f, &oenv);
	while (n_proposed < 1)
		uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(proposed[0].op, RAFTLOCK__COMMAND__OP_OPEN_SESSION);

	/* The bootstrap admin's rule change is proposed. */
	int sock = f->sock;
	f->sock = connect_again(f);
	send_token(f, 7, "tok-root");
	assert_int_equal(next_status(f, NULL), 0);
	send_env(f, &setenv);
	while (n_proposed < 2)
		uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(proposed[1].op, RAFTLOCK__COMMAND__OP_ACL_SET);
	close(f->sock);
	f->sock = sock;

	struct store st = f->node.store; /* f goes with the teardown */
	teardown(state);
	*state = NULL;
	store_close(&st);
	auth_tokens_free(&tokens);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* An empty store in a directory of f's own (both gone with the
 * teardown). */
static void open_store(struct fx *f)
{
	char err[256];
	snprintf(f->store_dir, sizeof f->store_dir, "/tmp/test_service.XXXXXX");
	assert_non_null(mkdtemp(f->store_dir));
	assert_int_equal(store_open(&f->node.store, f->store_dir, 16u << 20, err, sizeof err), 0);
}

/* A retry of a mutation the applied state shows already ran is proposed
 * again, for apply to answer it from its record, whatever a refusal before
 * the log would say now: acquire seq 5 of alice's session ran (token 42)
 * and her rule was deleted since; its retry is answered token 42, while a
 * new seq 6 gets EPERM. An open whose nonce opened a session is proposed
 * again though its TTL is now below the cluster's minimum. */
static void test_retry_answered_from_record(void **state)
{
	struct fx *f = *state;
	open_store(f);
	struct auth_tokens tokens;
	load_tokens(f->store_dir, &tokens, (const char *const[]){"alice", "tok-alice", NULL});
	f->cfg.auth = true;
	strcpy(f->cfg.auth_admin, "root");
	service_auth_tokens(&f->svc, &tokens);
	lead(f);
	struct store *st = &f->node.store;
	MDB_txn *txn = store_begin(st, true);
	Raftlock__SessionRecord *sess = records_new_session(NULL);
	sess->id = 5;
	records_set_string(&sess->identity, "alice");
	Raftlock__Result granted = RAFTLOCK__RESULT__INIT;
	granted.token = 42;
	records_set_outcome(sess, 5, &granted, false);
	uint8_t digest5[SECRET_DIGEST_LEN];
	secret_digest(&SECRET_5, digest5);
	sess->secret_digest = (ProtobufCBinaryData){SECRET_DIGEST_LEN, digest5};
	store_put_session(st, txn, sess);
	sess->secret_digest = (ProtobufCBinaryData){0, NULL}; /* not the record's to free */
	store_put_nonce(st, txn, 77, 5);
	store_commit(txn);
	raftlock__session_record__free_unpacked(sess, NULL);
	send_token(f, 1, "tok-alice");
	assert_int_equal(next_status(f, NULL), 0);

	send_acquire(f, 2, 6);
	assert_answer(f, RAFTLOCK_EPERM, "identity 'alice' has no 'lock' on 'a'");
	send_acquire(f, 3, 5);
	wait_proposed(f, 1);
	assert_int_equal(proposed[0].seq, 5);
	proposed[0].cb(proposed[0].arg, 0, &granted); /* apply's answer */
	n_proposed = 0;
	Raftlock__Envelope *env = next_env(f);
	assert_non_null(env);
	assert_int_equal(env->id, 3);
	assert_int_equal(env->response->status, 0);
	assert_int_equal(env->response->result->token, 42);
	raftlock__envelope__free_unpacked(env, NULL);

	Raftlock__OpenSessionRequest open = RAFTLOCK__OPEN_SESSION_REQUEST__INIT;
	open.ttl_ms = RAFTLOCK_TTL_MIN_MS; /* below twice the election timeout */
	open.secret = SECRET_5;
	open.nonce = 78;
	Raftlock__Envelope oenv = RAFTLOCK__ENVELOPE__INIT;
	oenv.id = 4;
	oenv.body_case = RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
	oenv.open_session = &open;
	send_env(f, &oenv);
	assert_answer(f, RAFTLOCK_EINVAL, "shortest this cluster allows");
	/* A live nonce with another secret is no retry of that open. */
	open.nonce = 77;
	open.secret = (ProtobufCBinaryData){sizeof wrong_bytes, wrong_bytes};
	send_env(f, &oenv);
	assert_answer(f, RAFTLOCK_EINVAL, "shortest this cluster allows");
	/* The retry goes to the log, with a TTL the cluster allows: should
	 * its session end before it applies, the session it opens is legal. */
	open.secret = SECRET_5;
	send_env(f, &oenv);
	struct proposed p = apply_only_proposal(f);
	assert_int_equal(p.op, RAFTLOCK__COMMAND__OP_OPEN_SESSION);
	assert_int_equal(p.ttl_ms, RAFTLOCK_TTL_ELECTION_FACTOR * f->cfg.election_timeout_ms);

	teardown(state);
	*state = NULL;
	auth_tokens_free(&tokens);
}

/* The answer to a MEMBER_JOIN of member 4 sent over a new connection that
 * first authenticates with token (none: NULL). */
static void join_as(struct fx *f, const char *token, int status, const char *says)
{
	Raftlock__MemberJoinRequest join = RAFTLOCK__MEMBER_JOIN_REQUEST__INIT;
	join.id = 4;
	join.incarnation = 9;
	join.cluster = "c";
	Raftlock__Envelope req = RAFTLOCK__ENVELOPE__INIT;
	req.id = 3;
	req.body_case = RAFTLOCK__ENVELOPE__BODY_MEMBER_JOIN;
	req.member_join = &join;
	int mine = f->sock;
	f->sock = connect_again(f);
	if (token != NULL) {
		send_token(f, 2, token);
		assert_int_equal(next_status(f, NULL), 0);
	}
	send_env(f, &req);
	assert_answer(f, status, says);
	close(f->sock);
	f->sock = mine;
}

/* A join (the claim of a node started with --join) reaches members.c from
 * anyone with auth off. With auth on (issue 11), only from identity
 * raftlock-node-<the id claimed> or an admin of every name: none, another
 * identity, another member's get RAFTLOCK_EPERM naming the identity it
 * takes, and nothing reaches members.c or the log. */
static void test_join_needs_member_identity(void **state)
{
	struct fx *f = *state;
	open_store(f);
	lead(f);
	n_member_requests = 0;
	join_as(f, NULL, RAFTLOCK_EUNAVAILABLE, "members"); /* auth off */
	assert_int_equal(n_member_requests, 1);

	struct auth_tokens tokens;
	load_tokens(f->store_dir, &tokens,
		    (const char *const[]){"alice", "tok-alice", "raftlock-node-4", "tok-node-4",
					  "raftlock-node-5", "tok-node-5", "root", "tok-root",
					  NULL});
	f->cfg.auth = true;
	strcpy(f->cfg.auth_admin, "root");
	service_auth_tokens(&f->svc, &tokens);
	join_as(f, NULL, RAFTLOCK_EPERM, "takes identity 'raftlock-node-4'");
	join_as(f, "tok-alice", RAFTLOCK_EPERM, "'alice' is neither");
	join_as(f, "tok-node-5", RAFTLOCK_EPERM, "'raftlock-node-5' is neither");
	assert_int_equal(n_member_requests, 1);
	assert_int_equal(f->svc.auth_denied, 3);
	join_as(f, "tok-node-4", RAFTLOCK_EUNAVAILABLE, "members");
	join_as(f, "tok-root", RAFTLOCK_EUNAVAILABLE, "members");
	assert_int_equal(n_member_requests, 3);
	assert_int_equal(n_proposed, 0);
	service_auth_tokens(&f->svc, NULL);
	auth_tokens_free(&tokens);
}

/* ----------------------------------------------------------------- TLS */

/* The test's TLS client: OpenSSL over memory BIOs, the bytes moved to and
 * from the socket by the test, which counts the records the server sends. */
struct tls_client {
	SSL_CTX *ctx;
	SSL *ssl;
	BIO *in, *out;
	uint8_t hdr[5];
	size_t hdr_len;   /* bytes of the next record header seen */
	size_t body_left; /* bytes of the current record still to come */
	size_t app_records;
};

/* Moves OpenSSL's output to the socket and the socket's input to OpenSSL
 * (counting application-data records), and runs the loop once. */
static void pump(struct fx *f, struct tls_client *t)
{
	char buf[65536];
	int n;
	while ((n = BIO_read(t->out, buf, sizeof buf)) > 0)
		send_bytes(f, buf, (size_t)n);
	ssize_t got;
	while ((got = read(f->sock, buf, sizeof buf)) > 0) {
		for (ssize_t i = 0; i < got;) {
			if (t->body_left > 0) {
				size_t k = (size_t)(got - i) < t->body_left ? (size_t)(got - i)
									    : t->body_left;
				t->body_left -= k;
				i += (ssize_t)k;
				continue;
			}
			t->hdr[t->hdr_len++] = (uint8_t)buf[i++];
			if (t->hdr_len == 5) {
				t->app_records += t->hdr[0] == 23;
				t->body_left = (size_t)t->hdr[3] << 8 | t->hdr[4];
				t->hdr_len = 0;
			}
		}
		assert_int_equal(BIO_write(t->in, buf, (int)got), (int)got);
	}
	uv_run(&f->loop, UV_RUN_NOWAIT);
}

/* A TLS client on f->sock presenting who's certificate (tls_certs.h;
 * NULL: none), its handshake done. */
static void tls_client_connect_as(struct fx *f, struct tls_client *t, const char *who)
{
	memset(t, 0, sizeof *t);
	t->ctx = tls_certs_client_ctx(who, "ca.pem");
	t->ssl = SSL_new(t->ctx);
	t->in = BIO_new(BIO_s_mem());
	t->out = BIO_new(BIO_s_mem());
	BIO_set_mem_eof_return(t->in, -1);
	SSL_set_bio(t->ssl, t->in, t->out);
	SSL_set_connect_state(t->ssl);
	uint64_t until = uv_hrtime() / 1000000u + 5000;
	int r;
	while ((r = SSL_do_handshake(t->ssl)) != 1) {
		assert_int_equal(SSL_get_error(t->ssl, r), SSL_ERROR_WANT_READ);
		assert_true(uv_hrtime() / 1000000u < until);
		pump(f, t);
	}
	pump(f, t); /* our Finished */
}

static void tls_client_connect(struct fx *f, struct tls_client *t)
{
	tls_client_connect_as(f, t, NULL);
}

static void tls_client_close(struct tls_client *t)
{
	SSL_free(t->ssl);
	SSL_CTX_free(t->ctx);
}

/* Plaintext from the service: up to len bytes, or -1 with errno EAGAIN
 * once the socket's bytes have been moved and the loop run once. */
static ssize_t tls_read(struct fx *f, struct tls_client *t, char *buf, size_t len)
{
	int got = SSL_read(t->ssl, buf, (int)len);
	if (got > 0)
		return got;
	assert_int_equal(SSL_get_error(t->ssl, got), SSL_ERROR_WANT_READ);
	pump(f, t);
	errno = EAGAIN;
	return -1;
}

static int setup_tls(void **state)
{
	with_tls = true;
	int rv = setup(state);
	with_tls = false;
	return rv;
}

/* With client-tls on, the same framing and dispatch answer through TLS,
 * and the answers to requests that arrive together leave in one batch: one
 * SSL_write, so one TLS record for a batch that fits one, not one per
 * answer. */
static void test_tls_batch(void **state)
{
	struct fx *f = *state;
	struct tls_client t;
	tls_client_connect(f, &t);
	enum { N = 60 };
	uint8_t *frames = NULL;
	size_t len = 0, cap = 0;
	for (uint64_t i = 1; i <= N; i++)
		frame_acquire(i, i, &frames, &len, &cap);
	/* One record from the client: every request arrives in one read. */
	assert_int_equal(SSL_write(t.ssl, frames, (int)len), (int)len);
	free(frames);
	size_t before = t.app_records;
	for (uint64_t i = 1; i <= N; i++) {
		Raftlock__Envelope *env = next_env_via(f, &t);
		assert_int_equal(env->id, i);
		assert_int_equal(env->response->status, RAFTLOCK_ENOTLEADER);
		assert_string_equal(env->response->leader, "127.0.0.1:2");
		raftlock__envelope__free_unpacked(env, NULL);
	}
	size_t records = t.app_records - before;
	printf("%d answers came in %zu TLS record(s)\n", N, records);
	assert_int_equal(records, 1);
	assert_int_equal(n_proposed, 0);
	assert_int_equal(service_connections(&f->svc), 1);
	tls_client_close(&t);
}

/* A client that speaks no TLS to a TLS port is closed; the service stays. */
static void test_tls_plaintext_refused(void **state)
{
	struct fx *f = *state;
	send_acquire(f, 7, 1);
	assert_null(next_env(f));
	assert_int_equal(f->svc.tls_failures, 1);
	assert_int_equal(n_proposed, 0);
}

/* --------------------------------------------------- readiness reports */

/* This node follows leader 2 in term 1 (the fakes' raft), having applied
 * nothing, with a store for STATUS to read (closed by the teardown). */
static void follow(struct fx *f)
{
	open_store(f);
	f->node.leader = false;
	f->node.ready = false;
}

static bool serving(struct fx *f)
{
	char why[160];
	return status_serving(&f->node, why, sizeof why);
}

/* A STATUS carrying a leader's readiness report, through TLS client t
 * unless NULL; returns once it is answered. */
static void send_report(struct fx *f, struct tls_client *t, uint64_t term, uint64_t applied)
{
	Raftlock__StatusRequest req = RAFTLOCK__STATUS_REQUEST__INIT;
	req.leader_term = term;
	req.leader_applied = applied;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.id = 77;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_STATUS;
	env.status = &req;
	if (t == NULL) {
		send_env(f, &env);
	} else {
		uint8_t *out;
		size_t len;
		assert_int_equal(codec_frame_envelope(&env, &out, &len), 0);
		assert_int_equal(SSL_write(t->ssl, out, (int)len), (int)len);
		free(out);
	}
	Raftlock__Envelope *answer = next_env_via(f, t);
	assert_non_null(answer);
	assert_int_equal(answer->id, 77);
	assert_int_equal(answer->response->payload_case, RAFTLOCK__RESPONSE__PAYLOAD_STATUS_INFO);
	raftlock__envelope__free_unpacked(answer, NULL);
}

/* The same over a new TLS connection presenting who's certificate. */
static void send_report_as(struct fx *f, const char *who, uint64_t term, uint64_t applied)
{
	int mine = f->sock;
	struct frame_reader saved = f->reader;
	frame_reader_init(&f->reader, RAFTLOCK_FRAME_MAX);
	f->sock = connect_again(f);
	struct tls_client t;
	tls_client_connect_as(f, &t, who);
	send_report(f, &t, term, applied);
	tls_client_close(&t);
	close(f->sock);
	frame_reader_close(&f->reader);
	f->reader = saved;
	f->sock = mine;
}

/* On a plaintext port anyone can send a STATUS with a leader's term and
 * applied index: none is taken, so no client can make a follower serve
 * before it caught up (applied 0 in the leader's term), nor stop one that
 * serves (an applied index far ahead), not even one that authenticated
 * with a token named like the leader's certificate. The follower serves on
 * its leader's own answer (status_note_leader_answer, asked by
 * followers.c over a connection to the leader's address). */
static void test_report_from_anyone_ignored(void **state)
{
	struct fx *f = *state;
	follow(f);
	assert_false(serving(f));
	send_report(f, NULL, 1, 0);
	assert_false(serving(f));
	Raftlock__StatusInfo info = RAFTLOCK__STATUS_INFO__INIT;
	info.node_id = 2;
	info.term = 1;
	info.ready = true;
	status_note_leader_answer(&f->node, &info);
	assert_true(serving(f));
	send_report(f, NULL, 1, UINT64_C(1) << 40);
	assert_true(serving(f));

	struct auth_tokens tokens;
	load_tokens(f->store_dir, &tokens,
		    (const char *const[]){"raftlock-node-2", "tok-node", NULL});
	service_auth_tokens(&f->svc, &tokens);
	send_token(f, 2, "tok-node");
	assert_int_equal(next_status(f, NULL), 0);
	send_report(f, NULL, 1, UINT64_C(1) << 40);
	assert_true(serving(f));
	assert_int_equal(f->svc.reports_ignored, 3);
	assert_int_equal(f->svc.reports_taken, 0);
	service_auth_tokens(&f->svc, NULL);
	auth_tokens_free(&tokens);
}

/* Over TLS a report is taken from the certificate of the leader this node
 * knows (raftlock-node-2), in its term: it makes the follower serve, and
 * the leader's next report replaces the one before, whatever it said.
 * Another client's certificate, another member's, none, or the leader's in
 * another term change nothing. */
static void test_tls_report_from_leader_only(void **state)
{
	struct fx *f = *state;
	follow(f);
	send_report_as(f, "client", 1, 0); /* CN client-a */
	assert_false(serving(f));
	send_report_as(f, "node-3", 1, 0); /* a member, not the leader */
	send_report_as(f, NULL, 1, 0);     /* no certificate */
	send_report_as(f, "node-2", 2, 0); /* the leader's, another term */
	assert_false(serving(f));
	assert_int_equal(f->svc.reports_ignored, 4);
	assert_int_equal(f->svc.reports_taken, 0);

	send_report_as(f, "node-2", 1, 0);
	assert_true(serving(f));
	send_report_as(f, "client", 1, UINT64_C(1) << 40);
	assert_true(serving(f));
	/* the leader's word, whatever it is, holds until its next */
	send_report_as(f, "node-2", 1, UINT64_C(1) << 40);
	assert_false(serving(f));
	send_report_as(f, "node-2", 1, 0);
	assert_true(serving(f));
	assert_int_equal(f->svc.reports_taken, 3);
	assert_int_equal(f->svc.reports_ignored, 5);
}

/* ----------------------------------------------------------- admission */

static int setup_limits(void **state)
{
	next_max_conns = 2;
	next_frame_timeout_ms = 300;
	int rv = setup(state);
	next_max_conns = next_frame_timeout_ms = 0;
	return rv;
}

static int setup_short_frames(void **state)
{
	next_frame_timeout_ms = 100;
	int rv = setup(state);
	next_frame_timeout_ms = 0;
	return rv;
}

/* Reads the next envelope from another connection (NULL: closed). */
static Raftlock__Envelope *next_env_on(struct fx *f, int sock)
{
	int mine = f->sock;
	struct frame_reader saved = f->reader;
	frame_reader_init(&f->reader, RAFTLOCK_FRAME_MAX);
	f->sock = sock;
	Raftlock__Envelope *env = next_env(f);
	frame_reader_close(&f->reader);
	f->reader = saved;
	f->sock = mine;
	return env;
}

/* Past max-connections-per-address, a connection from that address gets
 * ELIMIT naming the limit and is closed; the ones admitted are untouched,
 * and a closed one makes room again. */
static void test_connections_per_address(void **state)
{
	struct fx *f = *state;
	lead(f);
	int second = connect_again(f), third = connect_again(f);
	Raftlock__Envelope *env = next_env_on(f, third);
	assert_non_null(env);
	assert_int_equal(env->id, 0);
	assert_int_equal(env->response->status, RAFTLOCK_ELIMIT);
	assert_non_null(strstr(env->response->message, "max-connections-per-address 2"));
	raftlock__envelope__free_unpacked(env, NULL);
	assert_null(next_env_on(f, third));
	assert_int_equal(f->svc.admission.refused, 1);
	assert_int_equal(service_connections(&f->svc), 2);
	/* the first still serves */
	send_acquire(f, 7, 1);
	wait_proposed(f, 1);
	close(third);
	close(second);
	for (uint64_t until = uv_hrtime() / 1000000u + 5000; service_connections(&f->svc) > 1;) {
		assert_true(uv_hrtime() / 1000000u < until);
		uv_run(&f->loop, UV_RUN_NOWAIT);
	}
	int fourth = connect_again(f);
	for (uint64_t until = uv_hrtime() / 1000000u + 5000; service_connections(&f->svc) < 2;) {
		assert_true(uv_hrtime() / 1000000u < until);
		uv_run(&f->loop, UV_RUN_NOWAIT);
	}
	assert_int_equal(f->svc.admission.refused, 1);
	close(fourth);
}

/* A frame that trickles in (its header, then nothing) is cut off after
 * frame-timeout-ms with EPROTO naming the setting; a connection that idles
 * between frames is not. */
static void test_frame_timeout(void **state)
{
	struct fx *f = *state;
	int idle = connect_again(f);
	const uint8_t header[] = {0, 0, 0, 40, 1, 2};
	uint64_t t0 = uv_hrtime() / 1000000u;
	send_bytes(f, header, sizeof header);
	Raftlock__Envelope *env = next_env(f);
	uint64_t took = uv_hrtime() / 1000000u - t0;
	assert_non_null(env);
	assert_int_equal(env->response->status, RAFTLOCK_EPROTO);
	assert_non_null(strstr(env->response->message, "frame-timeout-ms"));
	raftlock__envelope__free_unpacked(env, NULL);
	assert_null(next_env(f));
	printf("a stalled frame was cut off after %llu ms (limit 300)\n", (unsigned long long)took);
	assert_true(took >= 300 && took < 2000);
	assert_int_equal(f->svc.frame_timeouts, 1);
	assert_int_equal(service_connections(&f->svc), 1); /* the idle one stays */
	close(idle);
}

/* Connections the service cannot allocate for are still accepted, and
 * closed at once: libuv stops watching a listener whose connection was left
 * pending, and the node would take no more clients. Two fail, the second
 * while the first one's close is under way (it waits for it, and fails
 * again then); the next is served. */
static void test_accept_without_memory(void **state)
{
	struct fx *f = *state;
	int second = connect_again(f); /* pending with f->sock: the loop has not run */
	alloc_fail_start(&(struct alloc_fail_rule){.calls = ALLOC_FAIL_CALLOC,
						   .one_thread = true,
						   .thread = pthread_self(),
						   .count = 3});
	assert_null(next_env(f)); /* closed */
	assert_null(next_env_on(f, second));
	assert_int_equal(alloc_fail_count(), 3);
	alloc_fail_stop();
	assert_int_equal(service_connections(&f->svc), 0);
	close(second);
	close(f->sock);
	f->sock = connect_again(f);
	send_acquire(f, 7, 1);
	assert_int_equal(next_status(f, NULL), RAFTLOCK_ENOTLEADER);
	assert_int_equal(service_connections(&f->svc), 1);
}

/* Bytes malloc holds for the process: the arenas' chunks in use and the
 * mmapped ones. */
static size_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}

/* A connection keeps no buffer the size of its largest frame once that
 * frame is done: a GET_LOCK with a 3 MiB name (refused by its id with
 * EPROTO; the connection stays) leaves less than 1 MiB more in use, and
 * the connection serves on. The reader kept the 4 MiB it grew to for as
 * long as the connection lived: the 1,024 idle connections one address
 * may hold kept 4 GiB of the node's memory. (Under ASan, mallinfo2 sees
 * none of it: the release build checks this.) */
static void test_big_frame_buffer_given_back(void **state)
{
	struct fx *f = *state;
	size_t before = heap_in_use();
	size_t n = 3u << 20;
	char *name = malloc(n + 1);
	assert_non_null(name);
	memset(name, 'n', n);
	name[n] = '\0';
	Raftlock__GetLockRequest get = RAFTLOCK__GET_LOCK_REQUEST__INIT;
	get.name = name;
	get.stale = true;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.id = 1;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_GET_LOCK;
	env.get_lock = &get;
	send_env(f, &env);
	free(name);
	assert_answer(f, RAFTLOCK_EPROTO, "longer than RAFTLOCK_NAME_MAX");
	size_t after = heap_in_use();
	printf("in use after a frame of 3 MiB: %zu KiB more\n",
	       after > before ? (after - before) >> 10 : 0);
	assert_true(after < before + (1u << 20));
	get.name = "";
	env.id = 2;
	send_env(f, &env);
	assert_answer(f, RAFTLOCK_EPROTO, "empty");
	assert_int_equal(service_connections(&f->svc), 1);
}

/* ------------------------------------------------------------ listings */

/* A store of map bytes in a temporary directory (removed at teardown) and
 * authentication on with the tokens of list (name, token, ..., NULL), the
 * test's connection authenticated with the first: the service borrows
 * tokens, so the test tears down itself before it frees them. */
static struct store *auth_store(struct fx *f, size_t map, struct auth_tokens *tokens,
				const char *const *list)
{
	char err[256];
	snprintf(f->store_dir, sizeof f->store_dir, "/tmp/test_service.XXXXXX");
	assert_non_null(mkdtemp(f->store_dir));
	assert_int_equal(store_open(&f->node.store, f->store_dir, map, err, sizeof err), 0);
	load_tokens(f->store_dir, tokens, list);
	f->cfg.auth = true;
	service_auth_tokens(&f->svc, tokens);
	send_token(f, 1, list[1]);
	assert_int_equal(next_status(f, NULL), 0);
	return &f->node.store;
}

static void tear_down_with(void **state, struct auth_tokens *tokens)
{
	teardown(state);
	*state = NULL;
	auth_tokens_free(tokens);
}

static void send_env_on(struct fx *f, int sock, const Raftlock__Envelope *env)
{
	int mine = f->sock;
	f->sock = sock;
	send_env(f, env);
	f->sock = mine;
}

/* Another connection, authenticated with token. */
static int connect_as(struct fx *f, const char *token)
{
	int sock = connect_again(f), mine = f->sock;
	f->sock = sock;
	send_token(f, 1, token);
	f->sock = mine;
	Raftlock__Envelope *env = next_env_on(f, sock);
	assert_non_null(env);
	assert_int_equal(env->response->status, 0);
	raftlock__envelope__free_unpacked(env, NULL);
	return sock;
}

/* The answer to a stale LIST_LOCKS (prefix, after, limit) on sock, checked
 * to be a page; the caller frees it. */
static Raftlock__Envelope *list_locks_on(struct fx *f, int sock, const char *prefix,
					 const char *after, uint32_t limit)
{
	Raftlock__ListLocksRequest list = RAFTLOCK__LIST_LOCKS_REQUEST__INIT;
	list.prefix = (char *)prefix;
	list.after = (char *)after;
	list.limit = limit;
	list.stale = true;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.id = 9;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS;
	env.list_locks = &list;
	send_env_on(f, sock, &env);
	Raftlock__Envelope *got = next_env_on(f, sock);
	assert_non_null(got);
	assert_int_equal(got->response->status, 0);
	assert_int_equal(got->response->payload_case, RAFTLOCK__RESPONSE__PAYLOAD_LOCKS);
	return got;
}

/* A page's names, joined by spaces, then "+" if more follow. */
static void page_names(const Raftlock__LockList *list, char *out, size_t len)
{
	out[0] = '\0';
	for (size_t i = 0; i < list->n_locks; i++)
		snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? " " : "",
			 list->locks[i]->name);
	if (list->more)
		snprintf(out + strlen(out), len - strlen(out), "+");
}

static void put_lock_named(struct store *st, MDB_txn *txn, const char *name)
{
	Raftlock__LockRecord *rec = records_new_lock(name, RAFTLOCK__LOCK_KIND__MUTEX, 0);
	store_put_lock(st, txn, rec);
	raftlock__lock_record__free_unpacked(rec, NULL);
}

/* A listing walks the names its reader may read, each range once, in name
 * order: alice reads b/ (and b/x/, which b/ covers) and, through "*", d/;
 * her pages hold those locks alone, in order, and paging after a page's
 * last name goes on into the next range; a prefix narrows the ranges. */
static void test_listing_pages_through_readable_ranges(void **state)
{
	struct fx *f = *state;
	struct auth_tokens tokens;
	struct store *st =
		auth_store(f, 16u << 20, &tokens, (const char *const[]){"alice", "tok-a", NULL});
	MDB_txn *txn = store_begin(st, true);
	const char *names[] = {"a/1", "b", "b/1", "b/2", "b/x/1", "c/1", "d/1", "d/2", "e/1"};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		put_lock_named(st, txn, names[i]);
	store_put_acl(st, txn, "alice", "b/x/", AUTH_READ);
	store_put_acl(st, txn, "alice", "b/", AUTH_READ | AUTH_LOCK);
	store_put_acl(st, txn, "alice", "c/", AUTH_LOCK);
	store_put_acl(st, txn, AUTH_ANYONE, "d/", AUTH_READ);
	store_commit(txn);
	int sock = connect_as(f, "tok-a");
	struct {
		const char *prefix, *after;
		uint32_t limit;
		const char *want;
	} pages[] = {
		{"", "", 0, "b/1 b/2 b/x/1 d/1 d/2"},
		{"", "", 2, "b/1 b/2+"},
		{"", "b/2", 2, "b/x/1 d/1+"},
		{"", "d/1", 2, "d/2"},
		{"", "c", 1, "d/1+"},
		{"b/x", "", 0, "b/x/1"},
		{"d/2", "", 0, "d/2"},
		{"c/", "", 0, ""},
		{"b", "b/1", 0, "b/2 b/x/1"},
	};
	for (size_t i = 0; i < sizeof pages / sizeof *pages; i++) {
		Raftlock__Envelope *got =
			list_locks_on(f, sock, pages[i].prefix, pages[i].after, pages[i].limit);
		char out[256];
		page_names(got->response->locks, out, sizeof out);
		assert_string_equal(out, pages[i].want);
		raftlock__envelope__free_unpacked(got, NULL);
	}
	close(sock);
	tear_down_with(state, &tokens);
}

/* Session id of identity, whose owner's client name is client. */
static void put_owned_session(struct store *st, MDB_txn *txn, uint64_t id, const char *identity,
			      const char *client)
{
	Raftlock__Owner owner = RAFTLOCK__OWNER__INIT;
	owner.client_name = (char *)client;
	owner.host = "host";
	owner.pid = 7;
	Raftlock__SessionRecord *sess = records_new_session(&owner);
	sess->id = id;
	records_set_string(&sess->identity, identity);
	store_put_session(st, txn, sess);
	raftlock__session_record__free_unpacked(sess, NULL);
}

/* The client names a GET_LOCK and a LIST_LOCKS on sock show for jobs/a's
 * holder and waiter, "-" for an owner left out: both answers agree. */
static void owners_seen(struct fx *f, int sock, char *out, size_t len)
{
	Raftlock__GetLockRequest get = RAFTLOCK__GET_LOCK_REQUEST__INIT;
	get.name = "jobs/a";
	get.stale = true;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.id = 8;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_GET_LOCK;
	env.get_lock = &get;
	send_env_on(f, sock, &env);
	Raftlock__Envelope *one = next_env_on(f, sock);
	assert_non_null(one);
	assert_int_equal(one->response->payload_case, RAFTLOCK__RESPONSE__PAYLOAD_LOCK);
	Raftlock__Envelope *list = list_locks_on(f, sock, "jobs/", "", 0);
	assert_int_equal(list->response->locks->n_locks, 1);
	const Raftlock__LockInfo *infos[] = {one->response->lock, list->response->locks->locks[0]};
	char seen[2][64];
	for (int i = 0; i < 2; i++) {
		const Raftlock__LockInfo *li = infos[i];
		assert_int_equal(li->n_holders, 1);
		assert_int_equal(li->n_waiters, 1);
		const Raftlock__Owner *h = li->holders[0]->owner, *w = li->waiters[0]->owner;
		snprintf(seen[i], sizeof seen[i], "%s %s", h ? h->client_name : "-",
			 w ? w->client_name : "-");
	}
	assert_string_equal(seen[0], seen[1]);
	snprintf(out, len, "%s", seen[0]);
	raftlock__envelope__free_unpacked(one, NULL);
	raftlock__envelope__free_unpacked(list, NULL);
}

/* Lock listings (GET_LOCK, LIST_LOCKS) show a holder's or waiter's owner
 * by the rule of LIST_SESSIONS (docs/GUARANTEES.md, rule 15): to its
 * session's own identity, or to one with read on every name. jobs/a is
 * held by alice's session and awaited by bob's: bob, who reads jobs/, sees
 * the lock and his own owner but not alice's; alice the other way round;
 * carol, who reads every name, sees both. They showed to anyone who could
 * read the lock. */
static void test_lock_owners_shown_as_sessions(void **state)
{
	struct fx *f = *state;
	struct auth_tokens tokens;
	struct store *st = auth_store(
		f, 16u << 20, &tokens,
		(const char *const[]){"alice", "tok-a", "bob", "tok-b", "carol", "tok-c", NULL});
	MDB_txn *txn = store_begin(st, true);
	put_owned_session(st, txn, 1, "alice", "alice-app");
	put_owned_session(st, txn, 2, "bob", "bob-app");
	Raftlock__LockRecord *rec = records_new_lock("jobs/a", RAFTLOCK__LOCK_KIND__MUTEX, 0);
	records_add_holder(rec)->session = 1;
	records_add_waiter(rec)->session = 2;
	store_put_lock(st, txn, rec);
	raftlock__lock_record__free_unpacked(rec, NULL);
	store_put_acl(st, txn, "alice", "jobs/", AUTH_READ);
	store_put_acl(st, txn, "bob", "jobs/", AUTH_READ);
	store_put_acl(st, txn, "carol", "", AUTH_READ);
	store_commit(txn);
	const char *tok[] = {"tok-a", "tok-b", "tok-c"};
	const char *want[] = {"alice-app -", "- bob-app", "alice-app bob-app"};
	for (int i = 0; i < 3; i++) {
		int sock = connect_as(f, tok[i]);
		char out[64];
		owners_seen(f, sock, out, sizeof out);
		assert_string_equal(out, want[i]);
		close(sock);
	}
	tear_down_with(state, &tokens);
}

/* Sends n copies of env on the test's connection (ids from 10), all in
 * one write, and checks that each is answered with status 0 within
 * limit_ms of real time; returns the last answer (the caller frees it). */
static Raftlock__Envelope *pipelined(struct fx *f, Raftlock__Envelope *env, unsigned n,
				     uint64_t limit_ms, const char *what)
{
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	for (env->id = 10; env->id < 10 + n; env->id++)
		assert_int_equal(codec_frame_envelope_append(env, &buf, &len, &cap), 0);
	uint64_t t0 = uv_hrtime();
	send_bytes(f, buf, len);
	free(buf);
	Raftlock__Envelope *got = NULL;
	for (uint64_t id = 10; id < 10 + n; id++) {
		if (got != NULL)
			raftlock__envelope__free_unpacked(got, NULL);
		got = next_env(f);
		assert_non_null(got);
		assert_int_equal(got->id, id);
		assert_int_equal(got->response->status, 0);
	}
	uint64_t took = (uv_hrtime() - t0) / 1000000u;
	printf("%u %s took %llu ms (limit %llu)\n", n, what, (unsigned long long)took,
	       (unsigned long long)limit_ms);
	assert_true(took < limit_ms);
	return got;
}

/* A listing walks the locks its reader may read, not every lock: with
 * 200,000 locks, none of which alice may read, ten stale LIST_LOCKS of
 * hers pipelined (150 bytes) are all answered, empty, within 300 ms of
 * real time. Each one walked every lock, with two rule lookups apiece,
 * and answered nothing, so that nothing held it back: a few kilobytes of
 * them held the node's loop (the leader's heartbeats, every client) for
 * minutes. */
#define UNREADABLE_LOCKS 200000
static void test_listing_walks_only_readable_locks(void **state)
{
	struct fx *f = *state;
	struct auth_tokens tokens;
	struct store *st = auth_store(f, 256u << 20, &tokens,
				      (const char *const[]){"alice", "tok-alice", NULL});
	MDB_txn *txn = store_begin(st, true);
	for (unsigned i = 0; i < UNREADABLE_LOCKS; i++) {
		char name[32];
		snprintf(name, sizeof name, "jobs/%07u", i);
		put_lock_named(st, txn, name);
	}
	store_put_acl(st, txn, "alice", "mine/", AUTH_READ);
	store_commit(txn);

	Raftlock__ListLocksRequest list = RAFTLOCK__LIST_LOCKS_REQUEST__INIT;
	list.limit = 1;
	list.stale = true;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS;
	env.list_locks = &list;
	Raftlock__Envelope *got =
		pipelined(f, &env, 10, 300, "listings of 200,000 unreadable locks");
	assert_int_equal(got->response->payload_case, RAFTLOCK__RESPONSE__PAYLOAD_LOCKS);
	assert_int_equal(got->response->locks->n_locks, 0);
	assert_false(got->response->locks->more);
	raftlock__envelope__free_unpacked(got, NULL);
	tear_down_with(state, &tokens);
}

/* ACL_LIST walks the rules on prefixes its reader administers, not every
 * rule: with 200,000 rules of identity bulk on x/, alice, admin of mine/,
 * gets the rules there (her own, then bulk's and zed's, in order), and
 * ten of her listings after her own, pipelined, are answered within
 * 300 ms. Each checked every rule past hers against her rules before. */
#define OTHER_RULES 200000
static void test_acl_list_walks_only_administered_rules(void **state)
{
	struct fx *f = *state;
	struct auth_tokens tokens;
	struct store *st =
		auth_store(f, 256u << 20, &tokens, (const char *const[]){"alice", "tok-a", NULL});
	MDB_txn *txn = store_begin(st, true);
	for (unsigned i = 0; i < OTHER_RULES; i++) {
		char prefix[32];
		snprintf(prefix, sizeof prefix, "x/%07u", i);
		store_put_acl(st, txn, "bulk", prefix, AUTH_LOCK);
	}
	store_put_acl(st, txn, "bulk", "mine/b", AUTH_LOCK);
	store_put_acl(st, txn, "zed", "mine/a", AUTH_READ);
	store_put_acl(st, txn, "alice", "mine/", AUTH_ADMIN);
	store_commit(txn);

	Raftlock__AclListRequest list = RAFTLOCK__ACL_LIST_REQUEST__INIT;
	list.limit = 1;
	list.stale = true;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_ACL_LIST;
	env.acl_list = &list;
	Raftlock__Envelope *got = pipelined(f, &env, 1, 300, "rule listing");
	const Raftlock__AclList *acls = got->response->acls;
	assert_int_equal(acls->n_rules, 1); /* her own */
	assert_string_equal(acls->rules[0]->identity, "alice");
	assert_true(acls->more);
	raftlock__envelope__free_unpacked(got, NULL);
	list.after_identity = "alice";
	list.after_prefix = "mine/";
	list.limit = 0;
	got = pipelined(f, &env, 10, 300, "rule listings past 200,000 others");
	acls = got->response->acls;
	assert_int_equal(acls->n_rules, 2);
	assert_string_equal(acls->rules[0]->identity, "bulk");
	assert_string_equal(acls->rules[0]->prefix, "mine/b");
	assert_string_equal(acls->rules[1]->identity, "zed");
	assert_string_equal(acls->rules[1]->prefix, "mine/a");
	assert_false(acls->more);
	raftlock__envelope__free_unpacked(got, NULL);
	tear_down_with(state, &tokens);
}

/* LIST_SESSIONS looks for another identity's names where its reader may
 * read, not among them all: alice's session holds 100,000 names under
 * jobs/ and one under mine/; bob, who reads mine/, is shown that one
 * (and no owner), and 30 of his listings pipelined are answered within
 * 300 ms. Each copied and checked every name before. */
#define SESSION_NAMES 100000
static void test_session_listing_walks_only_readable_names(void **state)
{
	struct fx *f = *state;
	struct auth_tokens tokens;
	struct store *st =
		auth_store(f, 256u << 20, &tokens, (const char *const[]){"bob", "tok-b", NULL});
	MDB_txn *txn = store_begin(st, true);
	Raftlock__Meta meta = RAFTLOCK__META__INIT;
	meta.feature_level = FEATURE_LEVEL; /* names in the session_locks table */
	store_put_meta(st, txn, &meta);
	put_owned_session(st, txn, 1, "alice", "alice-app");
	for (unsigned i = 0; i < SESSION_NAMES; i++) {
		char name[32];
		snprintf(name, sizeof name, "jobs/%07u", i);
		store_session_lock_add(st, txn, 1, name);
	}
	store_session_lock_add(st, txn, 1, "mine/x");
	store_put_acl(st, txn, "bob", "mine/", AUTH_READ);
	store_commit(txn);

	Raftlock__ListSessionsRequest list = RAFTLOCK__LIST_SESSIONS_REQUEST__INIT;
	list.stale = true;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_LIST_SESSIONS;
	env.list_sessions = &list;
	Raftlock__Envelope *got = pipelined(f, &env, 30, 300, "session listings of 100,000 names");
	const Raftlock__SessionList *sl = got->response->sessions;
	assert_int_equal(sl->n_sessions, 1);
	assert_null(sl->sessions[0]->owner);
	assert_int_equal(sl->sessions[0]->n_locks, 1);
	assert_string_equal(sl->sessions[0]->locks[0], "mine/x");
	raftlock__envelope__free_unpacked(got, NULL);
	tear_down_with(state, &tokens);
}

/* ------------------------------------------------- a turn of the loop */

/* A store of n locks that nobody holds, every one readable (auth off). */
#define SHARED_LOCKS 20000
static void fill_locks(struct fx *f, unsigned n)
{
	open_store(f);
	MDB_txn *txn = store_begin(&f->node.store, true);
	for (unsigned i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof name, "jobs/%07u", i);
		put_lock_named(&f->node.store, txn, name);
	}
	store_commit(txn);
}

/* Appends to buf n stale LIST_LOCKS of 1,000 locks each (ids from 10). */
static void frame_big_listings(unsigned n, uint8_t **buf, size_t *len, size_t *cap)
{
	Raftlock__ListLocksRequest list = RAFTLOCK__LIST_LOCKS_REQUEST__INIT;
	list.limit = 1000;
	list.stale = true;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS;
	env.list_locks = &list;
	for (env.id = 10; env.id < 10 + n; env.id++)
		assert_int_equal(codec_frame_envelope_append(&env, buf, len, cap), 0);
}

/* Reads the test connection's answers to the n listings of
 * frame_big_listings, the first `got` of which were read already. */
static void read_big_listings(struct fx *f, unsigned got, unsigned n)
{
	for (uint64_t id = 10 + got; id < 10 + n; id++) {
		Raftlock__Envelope *env = next_env(f);
		assert_non_null(env);
		assert_int_equal(env->id, id);
		assert_int_equal(env->response->status, 0);
		assert_int_equal(env->response->locks->n_locks, 1000);
		raftlock__envelope__free_unpacked(env, NULL);
	}
}

/* The answers of the test connection that arrived, read without running
 * the loop: what the node had sent by then. */
static unsigned answers_arrived(struct fx *f)
{
	char buf[65536];
	ssize_t got;
	while ((got = read(f->sock, buf, sizeof buf)) > 0)
		assert_int_equal(frame_reader_feed(&f->reader, buf, (size_t)got), 0);
	unsigned n = 0;
	const uint8_t *payload;
	size_t len;
	while (frame_reader_next(&f->reader, &payload, &len) == 1) {
		Raftlock__Envelope *env;
		assert_int_equal(codec_decode_envelope(payload, len, &env), 0);
		assert_int_equal(env->id, 10 + n);
		assert_int_equal(env->response->status, 0);
		raftlock__envelope__free_unpacked(env, NULL);
		n++;
	}
	return n;
}

/* One connection's pipelined reads share the loop with the others: 600
 * stale listings of 1,000 locks each (about 18 KB) sent at once, then a
 * STATUS on another connection, answered within 100 ms. The node decoded
 * and answered every whole frame of a read before its loop turned: the
 * STATUS (and raft's heartbeats) waited for them all. */
#define BIG_LISTINGS 600
static void test_pipelined_reads_share_the_loop(void **state)
{
	struct fx *f = *state;
	fill_locks(f, SHARED_LOCKS);
	int other = connect_again(f);
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	frame_big_listings(BIG_LISTINGS, &buf, &len, &cap);
	send_bytes(f, buf, len);
	free(buf);
	Raftlock__StatusRequest req = RAFTLOCK__STATUS_REQUEST__INIT;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.id = 1;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_STATUS;
	env.status = &req;
	uint64_t t0 = uv_hrtime();
	send_env_on(f, other, &env);
	Raftlock__Envelope *status = next_env_on(f, other);
	uint64_t took = (uv_hrtime() - t0) / 1000000u;
	assert_non_null(status);
	assert_int_equal(status->response->payload_case, RAFTLOCK__RESPONSE__PAYLOAD_STATUS_INFO);
	raftlock__envelope__free_unpacked(status, NULL);
	unsigned before = answers_arrived(f);
	printf("STATUS behind %d pipelined listings took %llu ms (limit 100); %u of their "
	       "answers had come\n",
	       BIG_LISTINGS, (unsigned long long)took, before);
	assert_true(took < 100);
	read_big_listings(f, before, BIG_LISTINGS);
	close(other);
}

/* Frames that wait for their turn are not slow frames: a connection whose
 * frame began (its header came, the clock started) and then came whole,
 * with listings behind it that take the node longer than frame-timeout-ms
 * (100 ms here) to serve, gets every answer and stays. Its clock kept
 * running while its whole frames waited, and cut it off. */
static void test_waiting_frames_not_timed_out(void **state)
{
	struct fx *f = *state;
	fill_locks(f, SHARED_LOCKS);
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	frame_big_listings(BIG_LISTINGS, &buf, &len, &cap);
	send_bytes(f, buf, 3); /* a frame begins */
	for (uint64_t until = uv_hrtime() / 1000000u + 30; uv_hrtime() / 1000000u < until;)
		uv_run(&f->loop, UV_RUN_NOWAIT);
	uint64_t t0 = uv_hrtime();
	send_bytes(f, buf + 3, len - 3);
	free(buf);
	read_big_listings(f, 0, BIG_LISTINGS);
	uint64_t took = (uv_hrtime() - t0) / 1000000u;
	printf("%d listings served in %llu ms (frame-timeout-ms 100)\n", BIG_LISTINGS,
	       (unsigned long long)took);
	assert_true(took > 100); /* else this proves nothing */
	assert_int_equal(f->svc.frame_timeouts, 0);
	assert_int_equal(service_connections(&f->svc), 1);
}

static int group_setup(void **state)
{
	(void)state;
	return tls_certs_make();
}

static int group_teardown(void **state)
{
	(void)state;
	return tls_certs_remove();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_malformed_frame, setup, teardown),
		cmocka_unit_test_setup_teardown(test_big_frame_buffer_given_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_listing_walks_only_readable_locks, setup,
						teardown_unless_done),
		cmocka_unit_test_setup_teardown(test_frame_too_long, setup, teardown),
		cmocka_unit_test_setup_teardown(test_response_from_client, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_leader, setup, teardown),
		cmocka_unit_test_setup_teardown(test_member_requests_routed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ttl_below_minimum, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inflight_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_name_answered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_time_limits_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revoke_grace_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_undefined_kind_or_mode_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sequence_header, setup, teardown),
		cmocka_unit_test_setup_teardown(test_queued_acquire_parked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_session_secret_checked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_session_not_proposed, setup,
						teardown_unless_done),
		cmocka_unit_test_setup_teardown(test_bound_drop_called_off_on_accept, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bound_drop_kept_by_renewal_proposed_again,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_carries_digest_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_auth_refusals, setup, teardown_unless_done),
		cmocka_unit_test_setup_teardown(test_retry_answered_from_record, setup,
						teardown_unless_done),
		cmocka_unit_test_setup_teardown(test_join_needs_member_identity, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tls_batch, setup_tls, teardown),
		cmocka_unit_test_setup_teardown(test_tls_plaintext_refused, setup_tls, teardown),
		cmocka_unit_test_setup_teardown(test_report_from_anyone_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tls_report_from_leader_only, setup_tls,
						teardown),
		cmocka_unit_test_setup_teardown(test_connections_per_address, setup_limits,
						teardown),
		cmocka_unit_test_setup_teardown(test_frame_timeout, setup_limits, teardown),
		cmocka_unit_test_setup_teardown(test_accept_without_memory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_listing_pages_through_readable_ranges, setup,
						teardown_unless_done),
		cmocka_unit_test_setup_teardown(test_lock_owners_shown_as_sessions, setup,
						teardown_unless_done),
		cmocka_unit_test_setup_teardown(test_acl_list_walks_only_administered_rules, setup,
						teardown_unless_done),
		cmocka_unit_test_setup_teardown(test_session_listing_walks_only_readable_names,
						setup, teardown_unless_done),
		cmocka_unit_test_setup_teardown(test_pipelined_reads_share_the_loop, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_waiting_frames_not_timed_out,
						setup_short_frames, teardown),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
