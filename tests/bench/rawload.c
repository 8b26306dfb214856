/*
 * rawload.c: workloads that speak the wire protocol below libraftlock, for
 * loads no honest library client makes (issue 9 items 6 and 7):
 *
 * `park` (--count N): queues N timed waiters (wait 9 min, sessions of TTL
 * 10 min, 100 waiters per session) on 1,000 locks "park/<k>" that one
 * holder session takes first, then exits; the waiters stay queued on the
 * server. Run it again to add more. Then `contended` measures the leader's
 * CPU per grant with that many wait timers (tests/bench/bounds).
 *
 * `hostile` (--window S): one connection sends keepalives of
 * RAFTLOCK_KEEPALIVE_MAX (16,384) random session ids, the most one request
 * may name, back to back for S seconds, each answered before the next: the
 * connection's budget of ids per second (--keepalive-max-ids) is spent
 * every second. Prints what the leader answered and the raft term before
 * and after.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../proto/codec.h"
#include "../../proto/frame.h"
#include "rlbench.h"
#include "stats.h"

#define PARK_LOCKS 1000
#define PARK_PER_SESSION 100
#define PARK_WAIT_MS 540000
#define PARK_TTL_MS 600000
#define PIPELINE 2000
#define HOSTILE_IDS RAFTLOCK_KEEPALIVE_MAX

struct raw {
	int fd;
	struct frame_reader reader;
	uint64_t next_id;
};

/* Connects to the leader's client address (from STATUS). */
static int raw_open(struct rlbench *b, struct raw *r)
{
	struct raftlock_status *st = NULL;
	char addr[128] = "";
	if (raftlock_status_get(b->client, NULL, &st) != 0)
		return -1;
	uint64_t leader =
		st->role != NULL && strcmp(st->role, "leader") == 0 ? st->node_id : st->leader_id;
	for (size_t i = 0; i < st->n_members; i++)
		if (st->members[i].id == leader)
			snprintf(addr, sizeof addr, "%s", st->members[i].client_address);
	raftlock_status_free(st);
	char *colon = strrchr(addr, ':');
	if (colon == NULL)
		return -1;
	*colon = '\0';
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)atoi(colon + 1))};
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		return -1;
	r->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (r->fd < 0 || connect(r->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
		return -1;
	int one = 1;
	setsockopt(r->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	frame_reader_init(&r->reader, RAFTLOCK_FRAME_MAX + 64);
	r->next_id = 1;
	return 0;
}

static void raw_close(struct raw *r)
{
	close(r->fd);
	frame_reader_close(&r->reader);
}

static int raw_send(struct raw *r, Raftlock__Envelope *env)
{
	uint8_t *buf;
	size_t n;
	env->id = r->next_id++;
	if (codec_frame_envelope(env, &buf, &n) != 0)
		return -1;
	for (size_t off = 0; off < n;) {
		ssize_t w = write(r->fd, buf + off, n - off);
		if (w <= 0) {
			free(buf);
			return -1;
		}
		off += (size_t)w;
	}
	free(buf);
	return 0;
}

/* The next envelope (NULL on EOF, error or timeout). */
static Raftlock__Envelope *raw_recv(struct raw *r, int timeout_ms)
{
	for (;;) {
		const uint8_t *payload;
		size_t n;
		if (frame_reader_next(&r->reader, &payload, &n) == 1) {
			Raftlock__Envelope *env;
			return codec_decode_envelope(payload, n, &env) == 0 ? env : NULL;
		}
		struct pollfd p = {.fd = r->fd, .events = POLLIN};
		if (poll(&p, 1, timeout_ms) <= 0)
			return NULL;
		static uint8_t buf[1 << 16];
		ssize_t got = read(r->fd, buf, sizeof buf);
		if (got <= 0 || frame_reader_feed(&r->reader, buf, (size_t)got) != 0)
			return NULL;
	}
}

/* The outcome of a request: the transport status, else the command's. */
static int raw_status(const Raftlock__Envelope *env, bool *queued)
{
	const Raftlock__Response *resp = env->response;
	if (resp == NULL)
		return RAFTLOCK_EPROTO;
	if (resp->status == 0 && resp->payload_case == RAFTLOCK__RESPONSE__PAYLOAD_RESULT) {
		if (queued != NULL)
			*queued = resp->result->queued;
		return resp->result->status;
	}
	return resp->status;
}

/* The secret every session of this load opens with and sends (GUARANTEES
 * rule 14); a load generator needs no secrecy. */
static uint8_t load_secret[RAFTLOCK_SECRET_MIN] = "rawload secret!";

static int open_session(struct raw *r, uint64_t *id)
{
	Raftlock__OpenSessionRequest op = RAFTLOCK__OPEN_SESSION_REQUEST__INIT;
	op.ttl_ms = PARK_TTL_MS;
	op.secret = (ProtobufCBinaryData){sizeof load_secret, load_secret};
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
	env.open_session = &op;
	if (raw_send(r, &env) != 0)
		return -1;
	Raftlock__Envelope *got = raw_recv(r, 10000);
	if (got == NULL)
		return -1;
	int rv = raw_status(got, NULL);
	if (rv == 0)
		*id = got->response->result->session;
	raftlock__envelope__free_unpacked(got, NULL);
	return rv;
}

static int send_acquire(struct raw *r, uint64_t session, uint64_t seq, uint64_t owner,
			const char *name, bool wait)
{
	Raftlock__Acquire acq = RAFTLOCK__ACQUIRE__INIT;
	acq.name = (char *)name;
	acq.owner = owner;
	acq.wait = wait;
	acq.wait_ms = wait ? PARK_WAIT_MS : 0;
	Raftlock__AcquireRequest req = RAFTLOCK__ACQUIRE_REQUEST__INIT;
	req.acquire = &acq;
	Raftlock__Sequence h = RAFTLOCK__SEQUENCE__INIT;
	h.session = session;
	h.seq = seq;
	h.secret = (ProtobufCBinaryData){sizeof load_secret, load_secret};
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.sequence = &h;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_ACQUIRE;
	env.acquire = &req;
	return raw_send(r, &env);
}

int scale_park(struct rlbench *b)
{
	struct options *o = b->o;
	struct raw r;
	unsigned long queued = 0, granted = 0, failed = 0;
	double t0 = stats_now();
	if (raw_open(b, &r) != 0) {
		fprintf(stderr, "rlbench: park: cannot reach the leader\n");
		return 1;
	}
	/* The holder: takes every free park lock (EBUSY: an earlier run's). */
	uint64_t holder;
	if (open_session(&r, &holder) != 0)
		goto fail;
	char name[64];
	for (unsigned k = 0; k < PARK_LOCKS; k++) {
		snprintf(name, sizeof name, "park/%u", k);
		if (send_acquire(&r, holder, k + 1, 1, name, false) != 0)
			goto fail;
	}
	for (unsigned k = 0; k < PARK_LOCKS; k++) {
		Raftlock__Envelope *got = raw_recv(&r, 30000);
		if (got == NULL)
			goto fail;
		raftlock__envelope__free_unpacked(got, NULL);
	}
	unsigned long n = o->count, sessions = (n + PARK_PER_SESSION - 1) / PARK_PER_SESSION;
	uint64_t *sess = calloc(sessions ? sessions : 1, sizeof *sess);
	if (sess == NULL)
		goto fail;
	for (unsigned long s = 0; s < sessions; s++)
		if (open_session(&r, &sess[s]) != 0) {
			free(sess);
			goto fail;
		}
	/* Distinct owners; each session's waiters on distinct locks. */
	for (unsigned long at = 0; at < n; at += PIPELINE) {
		unsigned long end = at + PIPELINE < n ? at + PIPELINE : n;
		for (unsigned long i = at; i < end; i++) {
			unsigned long s = i / PARK_PER_SESSION;
			snprintf(name, sizeof name, "park/%lu", (i * 7 + s) % PARK_LOCKS);
			if (send_acquire(&r, sess[s], i % PARK_PER_SESSION + 1, i + 1, name,
					 true) != 0) {
				free(sess);
				goto fail;
			}
		}
		for (unsigned long i = at; i < end; i++) {
			Raftlock__Envelope *got = raw_recv(&r, 30000);
			if (got == NULL) {
				free(sess);
				goto fail;
			}
			bool q = false;
			int rv = raw_status(got, &q);
			if (rv == 0 && q)
				queued++;
			else if (rv == 0)
				granted++;
			else
				failed++;
			raftlock__envelope__free_unpacked(got, NULL);
		}
	}
	free(sess);
	raw_close(&r);
	printf("{\"system\":\"raftlock\",\"workload\":\"park\",\"count\":%lu,\"queued\":%lu,"
	       "\"granted\":%lu,\"failed\":%lu,\"park_s\":%.1f,\"status\":\"ok\"}\n",
	       n, queued, granted, failed, stats_now() - t0);
	return 0;
fail:
	raw_close(&r);
	fprintf(stderr, "rlbench: park: the leader stopped answering\n");
	printf("{\"system\":\"raftlock\",\"workload\":\"park\",\"status\":\"failed\"}\n");
	return 1;
}

static uint64_t term_now(struct rlbench *b)
{
	struct raftlock_status *st = NULL;
	if (raftlock_status_get(b->client, NULL, &st) != 0)
		return 0;
	uint64_t term = st->term;
	raftlock_status_free(st);
	return term;
}

int scale_hostile(struct rlbench *b)
{
	struct options *o = b->o;
	struct raw r;
	uint64_t term0 = term_now(b);
	if (raw_open(b, &r) != 0) {
		fprintf(stderr, "rlbench: hostile: cannot reach the leader\n");
		return 1;
	}
	uint64_t *ids = malloc(HOSTILE_IDS * sizeof *ids);
	if (ids == NULL)
		return 1;
	uint64_t x = (uint64_t)time(NULL) * 2654435761u | 1;
	unsigned long requests = 0, answered = 0, refused_whole = 0, ids_refused = 0,
		      ids_unknown = 0, ids_renewed = 0;
	double t0 = stats_now(), longest = 0;
	while (stats_now() < t0 + o->window_s) {
		for (size_t i = 0; i < HOSTILE_IDS; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			ids[i] = x;
		}
		Raftlock__KeepAliveRequest ka = RAFTLOCK__KEEP_ALIVE_REQUEST__INIT;
		ka.sessions = ids;
		ka.n_sessions = HOSTILE_IDS;
		Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
		env.body_case = RAFTLOCK__ENVELOPE__BODY_KEEPALIVE;
		env.keepalive = &ka;
		double s0 = stats_now();
		if (raw_send(&r, &env) != 0)
			break;
		requests++;
		Raftlock__Envelope *got = raw_recv(&r, 30000);
		if (got == NULL)
			break;
		if (stats_now() - s0 > longest)
			longest = stats_now() - s0;
		answered++;
		const Raftlock__Response *resp = got->response;
		if (resp->status == RAFTLOCK_ELIMIT) {
			refused_whole++;
		} else if (resp->status == 0 &&
			   resp->payload_case == RAFTLOCK__RESPONSE__PAYLOAD_KEEPALIVE) {
			for (size_t i = 0; i < resp->keepalive->n_statuses; i++) {
				int st = resp->keepalive->statuses[i];
				ids_refused += st == RAFTLOCK_ELIMIT;
				ids_unknown +=
					st == RAFTLOCK_ESESSION || st == RAFTLOCK_EUNAVAILABLE;
				ids_renewed += st == 0;
			}
		}
		raftlock__envelope__free_unpacked(got, NULL);
	}
	double elapsed = stats_now() - t0;
	raw_close(&r);
	free(ids);
	uint64_t term1 = term_now(b);
	printf("{\"system\":\"raftlock\",\"workload\":\"hostile\",\"window_s\":%.1f,"
	       "\"requests\":%lu,\"answered\":%lu,\"refused_whole\":%lu,\"ids_unknown\":%lu,"
	       "\"ids_refused\":%lu,\"ids_renewed\":%lu,\"longest_answer_s\":%.2f,"
	       "\"term_before\":%llu,\"term_after\":%llu,\"status\":\"%s\"}\n",
	       elapsed, requests, answered, refused_whole, ids_unknown, ids_refused, ids_renewed,
	       longest, (unsigned long long)term0, (unsigned long long)term1,
	       answered > 0 ? "ok" : "failed");
	return answered > 0 ? 0 : 1;
}
