/*
 * test_codec.c: envelopes through codec_frame_envelope, the frame reader and
 * codec_decode_envelope, whole, truncated and corrupted; log entries and
 * command batches.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "codec.h"
#include "frame.h"
#include "raftlock.h"

/* ------------------------------------------------------------ helpers -- */

/* xorshift64*: the same sequence on every run. */
static uint64_t rng_state;

static void rng_seed(uint64_t seed)
{
	rng_state = seed ? seed : 1;
}

static uint32_t rng_next(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545F4914F6CDD1DULL) >> 32);
}

/* A NUL-terminated string of n copies of c, freed by the caller. */
static char *make_name(size_t n, char c)
{
	char *s = malloc(n + 1);
	assert_non_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* One of each request, and a response, with distinctive field values. */
enum {
	S_STATUS,
	S_OPEN_SESSION,
	S_KEEPALIVE,
	S_CLOSE_SESSION,
	S_ACQUIRE,
	S_RELEASE,
	S_CANCEL_WAIT,
	S_GET_LOCK,
	S_LIST_LOCKS,
	S_LIST_SESSIONS,
	S_CHECK_TOKEN,
	S_REVOKE,
	S_RESPONSE,
	N_SAMPLES
};

struct samples {
	Raftlock__StatusRequest status;
	Raftlock__Owner owner;
	Raftlock__OpenSessionRequest open_session;
	uint64_t sessions[3];
	Raftlock__KeepAliveRequest keepalive;
	Raftlock__CloseSessionRequest close_session;
	Raftlock__Acquire acquire;
	Raftlock__AcquireRequest acquire_req;
	Raftlock__Release release;
	Raftlock__ReleaseRequest release_req;
	Raftlock__CancelWait cancel;
	Raftlock__CancelWaitRequest cancel_req;
	Raftlock__GetLockRequest get_lock;
	Raftlock__ListLocksRequest list_locks;
	Raftlock__ListSessionsRequest list_sessions;
	Raftlock__CheckTokenRequest check_token;
	Raftlock__RevokeRequest revoke;
	Raftlock__Result result;
	Raftlock__Response response;
	Raftlock__Envelope env[N_SAMPLES];
};

/* The header of a message of type raftlock.<kind>, for designated
 * initializers; the fields not named are zero, strings NULL (empty). */
#define MSG(kind) .base = PROTOBUF_C_MESSAGE_INIT(&raftlock__##kind##__descriptor)

static void samples_init(struct samples *s)
{
	s->status = (Raftlock__StatusRequest){MSG(status_request)};
	s->owner = (Raftlock__Owner){MSG(owner), .client_name = "worker", .host = "host-7",
				     .pid = 4242};
	s->open_session = (Raftlock__OpenSessionRequest){MSG(open_session_request),
							 .nonce = 0x1122334455667788ULL,
							 .ttl_ms = 15000, .owner = &s->owner};
	s->sessions[0] = 1;
	s->sessions[1] = 300;
	s->sessions[2] = UINT64_MAX;
	s->keepalive = (Raftlock__KeepAliveRequest){MSG(keep_alive_request), .n_sessions = 3,
						    .sessions = s->sessions};
	s->close_session = (Raftlock__CloseSessionRequest){MSG(close_session_request), .session = 9,
							   .seq = 10, .ack_below = 8};
	s->acquire = (Raftlock__Acquire){MSG(acquire),
					 .name = "db/primary",
					 .kind = RAFTLOCK__LOCK_KIND__SEMAPHORE,
					 .mode = RAFTLOCK__MODE__SHARED,
					 .permits = 2,
					 .limit = 5,
					 .owner = 77,
					 .wait = 1,
					 .wait_ms = 2500,
					 .lock_delay_ms = 100};
	s->acquire_req = (Raftlock__AcquireRequest){MSG(acquire_request), .session = 9, .seq = 11,
						    .ack_below = 10, .acquire = &s->acquire};
	s->release = (Raftlock__Release){MSG(release), .name = "db/primary", .owner = 77};
	s->release_req = (Raftlock__ReleaseRequest){MSG(release_request), .session = 9, .seq = 12,
						    .release = &s->release};
	s->cancel = (Raftlock__CancelWait){MSG(cancel_wait), .name = "queue", .owner = 78,
					   .acquire_seq = 11};
	s->cancel_req = (Raftlock__CancelWaitRequest){MSG(cancel_wait_request), .session = 9,
						      .seq = 13, .cancel = &s->cancel};
	s->get_lock =
		(Raftlock__GetLockRequest){MSG(get_lock_request), .name = "db/primary", .stale = 1};
	s->list_locks = (Raftlock__ListLocksRequest){MSG(list_locks_request), .prefix = "db/",
						     .after = "db/a", .limit = 50};
	s->list_sessions = (Raftlock__ListSessionsRequest){MSG(list_sessions_request), .after = 4,
							   .limit = 20, .stale = 1};
	s->check_token = (Raftlock__CheckTokenRequest){MSG(check_token_request),
						       .name = "db/primary", .token = 1ULL << 50};
	s->revoke = (Raftlock__RevokeRequest){MSG(revoke_request), .name = "db/primary", .token = 5,
					      .grace_ms = 1000};
	s->result = (Raftlock__Result){MSG(result), .status = RAFTLOCK_EBUSY, .token = 5};
	s->response = (Raftlock__Response){MSG(response),
					   .status = RAFTLOCK_ENOTLEADER,
					   .message = "not the leader",
					   .leader = "10.0.0.2:7000",
					   .payload_case = RAFTLOCK__RESPONSE__PAYLOAD_RESULT,
					   .result = &s->result};

	for (int i = 0; i < N_SAMPLES; i++)
		s->env[i] = (Raftlock__Envelope){MSG(envelope), .id = 1000 + (uint64_t)i,
						 .protocol = WIRE_PROTOCOL};
#define SAMPLE(idx, kind, field, value)                          \
	s->env[idx].body_case = RAFTLOCK__ENVELOPE__BODY_##kind; \
	s->env[idx].field = value
	SAMPLE(S_STATUS, STATUS, status, &s->status);
	SAMPLE(S_OPEN_SESSION, OPEN_SESSION, open_session, &s->open_session);
	SAMPLE(S_KEEPALIVE, KEEPALIVE, keepalive, &s->keepalive);
	SAMPLE(S_CLOSE_SESSION, CLOSE_SESSION, close_session, &s->close_session);
	SAMPLE(S_ACQUIRE, ACQUIRE, acquire, &s->acquire_req);
	SAMPLE(S_RELEASE, RELEASE, release, &s->release_req);
	SAMPLE(S_CANCEL_WAIT, CANCEL_WAIT, cancel_wait, &s->cancel_req);
	SAMPLE(S_GET_LOCK, GET_LOCK, get_lock, &s->get_lock);
	SAMPLE(S_LIST_LOCKS, LIST_LOCKS, list_locks, &s->list_locks);
	SAMPLE(S_LIST_SESSIONS, LIST_SESSIONS, list_sessions, &s->list_sessions);
	SAMPLE(S_CHECK_TOKEN, CHECK_TOKEN, check_token, &s->check_token);
	SAMPLE(S_REVOKE, REVOKE, revoke, &s->revoke);
	SAMPLE(S_RESPONSE, RESPONSE, response, &s->response);
#undef SAMPLE
}

/* The protobuf encoding of env (no frame header), malloc'd. */
static uint8_t *pack_envelope(const Raftlock__Envelope *env, size_t *n)
{
	*n = raftlock__envelope__get_packed_size(env);
	uint8_t *buf = malloc(*n ? *n : 1);
	assert_non_null(buf);
	assert_int_equal(raftlock__envelope__pack(env, buf), *n);
	return buf;
}

/* Envelope{id 7, response: resp} packed, as pack_envelope(). */
static uint8_t *pack_answer(Raftlock__Response *resp, size_t *n)
{
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.id = 7;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_RESPONSE;
	env.response = resp;
	return pack_envelope(&env, n);
}

/* Decodes the payload, which must be the encoding of `want`. */
static void expect_decodes_to(const uint8_t *payload, size_t n, const Raftlock__Envelope *want)
{
	Raftlock__Envelope *got = NULL;
	assert_int_equal(codec_decode_envelope(payload, n, &got), 0);
	assert_non_null(got);
	assert_int_equal(got->id, want->id);
	assert_int_equal(got->body_case, want->body_case);
	size_t want_n, got_n;
	uint8_t *want_bytes = pack_envelope(want, &want_n);
	uint8_t *got_bytes = pack_envelope(got, &got_n);
	assert_int_equal(got_n, want_n);
	assert_memory_equal(got_bytes, want_bytes, want_n);
	free(want_bytes);
	free(got_bytes);
	raftlock__envelope__free_unpacked(got, NULL);
}

static void assert_name_ok(const char *name)
{
	assert_non_null(name);
	size_t len = strlen(name);
	assert_true(len >= 1 && len <= RAFTLOCK_NAME_MAX);
}

/* What codec_decode_envelope promises about any envelope it accepts. */
static void assert_valid_envelope(const Raftlock__Envelope *env)
{
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY__NOT_SET:
		fail_msg("accepted an envelope without a body");
		break;
	case RAFTLOCK__ENVELOPE__BODY_ACQUIRE:
		assert_non_null(env->acquire->acquire);
		assert_name_ok(env->acquire->acquire->name);
		break;
	case RAFTLOCK__ENVELOPE__BODY_RELEASE:
		assert_non_null(env->release->release);
		assert_name_ok(env->release->release->name);
		break;
	case RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT:
		assert_non_null(env->cancel_wait->cancel);
		assert_name_ok(env->cancel_wait->cancel->name);
		break;
	case RAFTLOCK__ENVELOPE__BODY_GET_LOCK: assert_name_ok(env->get_lock->name); break;
	case RAFTLOCK__ENVELOPE__BODY_CHECK_TOKEN: assert_name_ok(env->check_token->name); break;
	case RAFTLOCK__ENVELOPE__BODY_REVOKE: assert_name_ok(env->revoke->name); break;
	case RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS:
		assert_true(strlen(env->list_locks->prefix) <= RAFTLOCK_NAME_MAX);
		assert_true(strlen(env->list_locks->after) <= RAFTLOCK_NAME_MAX);
		break;
	default: break;
	}
}

/* Decodes bytes that may be anything: the outcome must be RAFTLOCK_EPROTO
 * or an envelope that passes validation. Returns the code. */
static int decode_any(const uint8_t *buf, size_t n)
{
	Raftlock__Envelope *env = NULL;
	int rv = codec_decode_envelope(buf, n, &env);
	if (rv == 0) {
		assert_non_null(env);
		assert_valid_envelope(env);
		raftlock__envelope__free_unpacked(env, NULL);
	} else {
		assert_int_equal(rv, RAFTLOCK_EPROTO);
	}
	return rv;
}

/* Frames env and decodes the frame's payload, returning the code. */
static int frame_and_decode(const Raftlock__Envelope *env)
{
	uint8_t *frame = NULL;
	size_t n = 0;
	assert_int_equal(codec_frame_envelope(env, &frame, &n), 0);
	assert_true(n >= FRAME_HEADER_SIZE);
	int rv = decode_any(frame + FRAME_HEADER_SIZE, n - FRAME_HEADER_SIZE);
	free(frame);
	return rv;
}

static int decode_entry_code(const uint8_t *buf, size_t n);

/* ---------------------------------------------------------- envelopes -- */

static void test_every_request_round_trips(void **state)
{
	struct samples s;
	samples_init(&s);
	/* All frames as one stream, fed 3 bytes at a time. */
	uint8_t *stream = NULL;
	size_t len = 0;
	for (int i = 0; i < N_SAMPLES; i++) {
		uint8_t *frame = NULL;
		size_t n = 0;
		assert_int_equal(codec_frame_envelope(&s.env[i], &frame, &n), 0);
		assert_int_equal(n, FRAME_HEADER_SIZE +
					    raftlock__envelope__get_packed_size(&s.env[i]));
		stream = realloc(stream, len + n);
		assert_non_null(stream);
		memcpy(stream + len, frame, n);
		len += n;
		free(frame);
	}
	struct frame_reader r;
	frame_reader_init(&r, RAFTLOCK_FRAME_MAX);
	int next = 0;
	for (size_t off = 0; off < len; off += 3) {
		size_t chunk = len - off < 3 ? len - off : 3;
		assert_int_equal(frame_reader_feed(&r, stream + off, chunk), 0);
		const uint8_t *payload;
		size_t n;
		int rv;
		while ((rv = frame_reader_next(&r, &payload, &n)) == 1) {
			assert_true(next < N_SAMPLES);
			expect_decodes_to(payload, n, &s.env[next]);
			next++;
		}
		assert_int_equal(rv, 0);
	}
	assert_int_equal(next, N_SAMPLES);
	frame_reader_close(&r);
	free(stream);
}

static void test_decoded_fields(void **state)
{
	struct samples s;
	samples_init(&s);
	size_t n;
	uint8_t *buf = pack_envelope(&s.env[S_ACQUIRE], &n);
	Raftlock__Envelope *env = NULL;
	assert_int_equal(codec_decode_envelope(buf, n, &env), 0);
	assert_int_equal(env->id, 1000 + S_ACQUIRE);
	const Raftlock__AcquireRequest *req = env->acquire;
	assert_int_equal(req->session, 9);
	assert_int_equal(req->seq, 11);
	assert_int_equal(req->ack_below, 10);
	assert_string_equal(req->acquire->name, "db/primary");
	assert_int_equal(req->acquire->kind, RAFTLOCK__LOCK_KIND__SEMAPHORE);
	assert_int_equal(req->acquire->mode, RAFTLOCK__MODE__SHARED);
	assert_int_equal(req->acquire->permits, 2);
	assert_int_equal(req->acquire->limit, 5);
	assert_int_equal(req->acquire->owner, 77);
	assert_true(req->acquire->wait);
	assert_int_equal(req->acquire->wait_ms, 2500);
	assert_int_equal(req->acquire->lock_delay_ms, 100);
	raftlock__envelope__free_unpacked(env, NULL);
	free(buf);
}

static void test_garbage_bytes(void **state)
{
	uint8_t buf[96];
	int rejected = 0;
	rng_seed(0x5eed0001);
	for (int iter = 0; iter < 20000; iter++) {
		size_t n = rng_next() % (sizeof buf + 1);
		for (size_t i = 0; i < n; i++)
			buf[i] = (uint8_t)rng_next();
		rejected += decode_any(buf, n) != 0;
	}
	assert_true(rejected > 0);
	assert_int_equal(decode_any(NULL, 0), RAFTLOCK_EPROTO);
}

static void test_truncated_payloads(void **state)
{
	struct samples s;
	samples_init(&s);
	for (int i = 0; i < N_SAMPLES; i++) {
		size_t n;
		uint8_t *buf = pack_envelope(&s.env[i], &n);
		/* Each prefix is decoded from its own allocation, so that a
		 * read past its end is a read past a heap block. */
		for (size_t cut = 0; cut < n; cut++) {
			uint8_t *prefix = malloc(cut ? cut : 1);
			assert_non_null(prefix);
			memcpy(prefix, buf, cut);
			int rv = decode_any(prefix, cut);
			/* The body is the last field: losing its last byte
			 * leaves a length-delimited field short. */
			if (cut == n - 1)
				assert_int_equal(rv, RAFTLOCK_EPROTO);
			free(prefix);
		}
		free(buf);
	}
}

static void test_random_corruption(void **state)
{
	struct samples s;
	samples_init(&s);
	size_t n[N_SAMPLES];
	uint8_t *orig[N_SAMPLES];
	for (int i = 0; i < N_SAMPLES; i++)
		orig[i] = pack_envelope(&s.env[i], &n[i]);
	int rejected = 0;
	rng_seed(0xc0ffee);
	for (int iter = 0; iter < 50000; iter++) {
		int which = (int)(rng_next() % N_SAMPLES);
		uint8_t *buf = malloc(n[which]);
		assert_non_null(buf);
		memcpy(buf, orig[which], n[which]);
		int flips = 1 + (int)(rng_next() % 4);
		for (int f = 0; f < flips; f++)
			buf[rng_next() % n[which]] = (uint8_t)rng_next();
		rejected += decode_any(buf, n[which]) != 0;
		free(buf);
	}
	assert_true(rejected > 0);
	for (int i = 0; i < N_SAMPLES; i++)
		free(orig[i]);
}

static void test_envelope_without_body(void **state)
{
	Raftlock__Envelope env = {MSG(envelope), .id = 7};
	assert_int_equal(frame_and_decode(&env), RAFTLOCK_EPROTO);
}

static void test_unknown_body_field(void **state)
{
	/* id = 7, then field 39 (length-delimited, empty): a body this
	 * version does not know. */
	static const uint8_t unknown_msg[] = {0x08, 0x07, 0xba, 0x02, 0x00};
	/* id = 7, then field 41 (varint 1). */
	static const uint8_t unknown_varint[] = {0x08, 0x07, 0xc8, 0x02, 0x01};
	/* A known body (status, field 10) next to an unknown field is fine. */
	static const uint8_t known_and_unknown[] = {0x52, 0x00, 0xba, 0x02, 0x00};
	Raftlock__Envelope *env = NULL;
	assert_int_equal(codec_decode_envelope(unknown_msg, sizeof unknown_msg, &env),
			 RAFTLOCK_EPROTO);
	assert_int_equal(codec_decode_envelope(unknown_varint, sizeof unknown_varint, &env),
			 RAFTLOCK_EPROTO);
	assert_null(env);
	assert_int_equal(codec_decode_envelope(known_and_unknown, sizeof known_and_unknown, &env),
			 0);
	assert_int_equal(env->body_case, RAFTLOCK__ENVELOPE__BODY_STATUS);
	raftlock__envelope__free_unpacked(env, NULL);
}

/* Points every name-carrying sample at name. */
static void samples_set_name(struct samples *s, char *name)
{
	s->acquire.name = name;
	s->release.name = name;
	s->cancel.name = name;
	s->get_lock.name = name;
	s->check_token.name = name;
	s->revoke.name = name;
}

static const int named_samples[] = {S_ACQUIRE,  S_RELEASE,     S_CANCEL_WAIT,
				    S_GET_LOCK, S_CHECK_TOKEN, S_REVOKE};
#define N_NAMED (sizeof named_samples / sizeof named_samples[0])

static void test_lock_name_bounds(void **state)
{
	struct samples s;
	samples_init(&s);
	char *longest = make_name(RAFTLOCK_NAME_MAX, 'n');
	char *too_long = make_name(RAFTLOCK_NAME_MAX + 1, 'n');
	for (size_t i = 0; i < N_NAMED; i++) {
		const Raftlock__Envelope *env = &s.env[named_samples[i]];
		samples_set_name(&s, "");
		assert_int_equal(frame_and_decode(env), RAFTLOCK_EPROTO);
		samples_set_name(&s, too_long);
		assert_int_equal(frame_and_decode(env), RAFTLOCK_EPROTO);
		samples_set_name(&s, longest);
		assert_int_equal(frame_and_decode(env), 0);
		samples_set_name(&s, "a");
		assert_int_equal(frame_and_decode(env), 0);
	}
	free(longest);
	free(too_long);
}

/* protobuf-c gives strings as C strings: a name sent as "a\0x" would be
 * read as "a". Every named request with a NUL byte in its name is refused
 * (codec_decode_request() says why, codec_decode_envelope() EPROTO); the
 * same bytes with another character decode. */
static void test_name_with_nul_refused(void **state)
{
	struct samples s;
	samples_init(&s);
	samples_set_name(&s, "aXx");
	for (size_t i = 0; i < N_NAMED; i++) {
		uint8_t *frame = NULL;
		size_t n = 0;
		assert_int_equal(codec_frame_envelope(&s.env[named_samples[i]], &frame, &n), 0);
		uint8_t *payload = frame + FRAME_HEADER_SIZE;
		size_t len = n - FRAME_HEADER_SIZE;
		assert_int_equal(decode_any(payload, len), 0);
		uint8_t *x = memchr(payload, 'X', len);
		assert_non_null(x);
		*x = '\0';
		assert_int_equal(decode_any(payload, len), RAFTLOCK_EPROTO);
		Raftlock__Envelope *env = NULL;
		const char *refusal = NULL;
		assert_int_equal(codec_decode_request(payload, len, &env, &refusal), 0);
		assert_non_null(refusal);
		assert_non_null(strstr(refusal, "NUL byte"));
		assert_int_equal(env->body_case, s.env[named_samples[i]].body_case);
		raftlock__envelope__free_unpacked(env, NULL);
		free(frame);
	}
}

static void test_missing_lock_submessage(void **state)
{
	struct samples s;
	samples_init(&s);
	s.acquire_req.acquire = NULL;
	s.release_req.release = NULL;
	s.cancel_req.cancel = NULL;
	assert_int_equal(frame_and_decode(&s.env[S_ACQUIRE]), RAFTLOCK_EPROTO);
	assert_int_equal(frame_and_decode(&s.env[S_RELEASE]), RAFTLOCK_EPROTO);
	assert_int_equal(frame_and_decode(&s.env[S_CANCEL_WAIT]), RAFTLOCK_EPROTO);
}

static void test_other_request_bounds(void **state)
{
	struct samples s;
	samples_init(&s);
	char *too_long = make_name(RAFTLOCK_NAME_MAX + 1, 'p');

	s.list_locks.prefix = too_long;
	assert_int_equal(frame_and_decode(&s.env[S_LIST_LOCKS]), RAFTLOCK_EPROTO);
	s.list_locks.prefix = "";
	s.list_locks.after = too_long;
	assert_int_equal(frame_and_decode(&s.env[S_LIST_LOCKS]), RAFTLOCK_EPROTO);
	s.list_locks.after = "";
	assert_int_equal(frame_and_decode(&s.env[S_LIST_LOCKS]), 0);

	s.owner.host = too_long;
	assert_int_equal(frame_and_decode(&s.env[S_OPEN_SESSION]), RAFTLOCK_EPROTO);
	s.owner.host = "h";
	s.owner.client_name = too_long;
	assert_int_equal(frame_and_decode(&s.env[S_OPEN_SESSION]), RAFTLOCK_EPROTO);
	s.open_session.owner = NULL;
	assert_int_equal(frame_and_decode(&s.env[S_OPEN_SESSION]), 0);

	uint64_t *many = calloc(RAFTLOCK_KEEPALIVE_MAX + 1, sizeof *many);
	assert_non_null(many);
	s.keepalive.sessions = many;
	s.keepalive.n_sessions = RAFTLOCK_KEEPALIVE_MAX + 1;
	assert_int_equal(frame_and_decode(&s.env[S_KEEPALIVE]), RAFTLOCK_EPROTO);
	s.keepalive.n_sessions = RAFTLOCK_KEEPALIVE_MAX;
	assert_int_equal(frame_and_decode(&s.env[S_KEEPALIVE]), 0);

	/* Session secrets (rule 14): at most RAFTLOCK_SECRET_MAX bytes, in an
	 * open, a sequence header or a keepalive; no more keepalive secrets
	 * than sessions. Their checks against the session are the server's. */
	uint8_t secret[RAFTLOCK_SECRET_MAX + 1] = {0};
	ProtobufCBinaryData longest = {RAFTLOCK_SECRET_MAX, secret};
	ProtobufCBinaryData too_long_secret = {RAFTLOCK_SECRET_MAX + 1, secret};
	s.open_session.secret = too_long_secret;
	assert_int_equal(frame_and_decode(&s.env[S_OPEN_SESSION]), RAFTLOCK_EPROTO);
	s.open_session.secret = longest;
	assert_int_equal(frame_and_decode(&s.env[S_OPEN_SESSION]), 0);
	Raftlock__Sequence h = RAFTLOCK__SEQUENCE__INIT;
	h.session = 1;
	h.seq = 1;
	h.secret = too_long_secret;
	s.env[S_RELEASE].sequence = &h;
	assert_int_equal(frame_and_decode(&s.env[S_RELEASE]), RAFTLOCK_EPROTO);
	h.secret = longest;
	assert_int_equal(frame_and_decode(&s.env[S_RELEASE]), 0);
	s.env[S_RELEASE].sequence = NULL;
	ProtobufCBinaryData secrets[3] = {longest, longest, too_long_secret};
	s.keepalive.n_sessions = 2;
	s.keepalive.secrets = secrets;
	s.keepalive.n_secrets = 2;
	assert_int_equal(frame_and_decode(&s.env[S_KEEPALIVE]), 0);
	s.keepalive.n_secrets = 3; /* more secrets than sessions */
	assert_int_equal(frame_and_decode(&s.env[S_KEEPALIVE]), RAFTLOCK_EPROTO);
	s.keepalive.n_sessions = 3; /* a secret too long */
	assert_int_equal(frame_and_decode(&s.env[S_KEEPALIVE]), RAFTLOCK_EPROTO);
	s.keepalive.n_secrets = 0;
	free(many);
	free(too_long);
}

/* A lock set: 1..RAFTLOCK_MULTI_MAX items, each with a valid name (their
 * order is the state machine's to check). */
static void test_multi_acquire_bounds(void **state)
{
	(void)state;
	Raftlock__MultiItem items[RAFTLOCK_MULTI_MAX + 1];
	Raftlock__MultiItem *ptrs[RAFTLOCK_MULTI_MAX + 1];
	char names[RAFTLOCK_MULTI_MAX + 1][8];
	for (size_t i = 0; i <= RAFTLOCK_MULTI_MAX; i++) {
		raftlock__multi_item__init(&items[i]);
		snprintf(names[i], sizeof names[i], "m%03zu", i);
		items[i].name = names[i];
		ptrs[i] = &items[i];
	}
	Raftlock__MultiAcquire acq = RAFTLOCK__MULTI_ACQUIRE__INIT;
	Raftlock__MultiAcquireRequest req = RAFTLOCK__MULTI_ACQUIRE_REQUEST__INIT;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.id = 1;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_MULTI_ACQUIRE;
	env.multi_acquire = &req;
	assert_int_equal(frame_and_decode(&env), RAFTLOCK_EPROTO); /* no set */
	req.acquire = &acq;
	acq.items = ptrs;
	assert_int_equal(frame_and_decode(&env), RAFTLOCK_EPROTO); /* empty */
	acq.n_items = RAFTLOCK_MULTI_MAX + 1;
	assert_int_equal(frame_and_decode(&env), RAFTLOCK_EPROTO);
	acq.n_items = RAFTLOCK_MULTI_MAX;
	assert_int_equal(frame_and_decode(&env), 0);
	items[3].name = "";
	assert_int_equal(frame_and_decode(&env), RAFTLOCK_EPROTO);
	char *too_long = make_name(RAFTLOCK_NAME_MAX + 1, 'p');
	items[3].name = too_long;
	assert_int_equal(frame_and_decode(&env), RAFTLOCK_EPROTO);
	free(too_long);
}

/* Bytes written field by field, for frames no encoder writes: fields
 * repeated, unpacked, in any order. */
struct wire {
	uint8_t *p;
	size_t len, cap;
};

static void wire_bytes(struct wire *w, const void *bytes, size_t n)
{
	if (n == 0)
		return; /* bytes may be NULL: an empty wire's */
	if (w->len + n > w->cap) {
		w->cap = (w->len + n) * 2;
		w->p = realloc(w->p, w->cap);
		assert_non_null(w->p);
	}
	memcpy(w->p + w->len, bytes, n);
	w->len += n;
}

static void wire_varint(struct wire *w, uint64_t v)
{
	do {
		uint8_t b = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v != 0)
			b |= 0x80;
		wire_bytes(w, &b, 1);
	} while (v != 0);
}

/* Field `number` as a varint. */
static void wire_uint(struct wire *w, unsigned number, uint64_t v)
{
	wire_varint(w, (uint64_t)number << 3 | PROTOBUF_C_WIRE_TYPE_VARINT);
	wire_varint(w, v);
}

/* Field `number` length-prefixed, holding (bytes, n). */
static void wire_len(struct wire *w, unsigned number, const void *bytes, size_t n)
{
	wire_varint(w, (uint64_t)number << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED);
	wire_varint(w, n);
	wire_bytes(w, bytes, n);
}

/* Appends to env a MULTI_ACQUIRE body (Envelope field 41) of k items,
 * named from m000000 on, after `first` earlier ones, in `parts` sets
 * (MultiAcquireRequest.acquire fields, which protobuf-c merges). */
static void wire_lock_set(struct wire *env, size_t first, size_t k, size_t parts)
{
	struct wire req = {0};
	for (size_t p = 0; p < parts; p++) {
		struct wire set = {0};
		for (size_t i = first + p * k / parts; i < first + (p + 1) * k / parts; i++) {
			char name[24]; /* "m" and a size_t */
			struct wire item = {0};
			snprintf(name, sizeof name, "m%06zu", i);
			wire_len(&item, 1, name, strlen(name));
			wire_len(&set, 1, item.p, item.len); /* MultiAcquire.items */
			free(item.p);
		}
		wire_len(&req, 1, set.p, set.len);
		free(set.p);
	}
	wire_len(env, 41, req.p, req.len);
	free(req.p);
}

/* codec_decode_request() of w: the code; *items the set's size, or -1
 * when it was refused before its body was unpacked (naming the bound). */
static int decode_set(const struct wire *w, uint64_t id, long *items)
{
	Raftlock__Envelope *env = NULL;
	const char *refusal = NULL;
	int rv = codec_decode_request(w->p, w->len, &env, &refusal);
	if (rv != 0)
		return rv;
	assert_int_equal(env->id, id);
	if (refusal == NULL) {
		assert_int_equal(env->body_case, RAFTLOCK__ENVELOPE__BODY_MULTI_ACQUIRE);
		*items = (long)env->multi_acquire->acquire->n_items;
	} else {
		assert_string_equal(refusal, "a lock set holds 1 to RAFTLOCK_MULTI_MAX (64) locks");
		assert_int_equal(env->body_case, RAFTLOCK__ENVELOPE__BODY__NOT_SET);
		*items = -1;
	}
	raftlock__envelope__free_unpacked(env, NULL);
	return 0;
}

/* A request of id with n MULTI_ACQUIRE bodies of bodies[i] items, each
 * in `parts` sets, decodes to a set of `want` items (-1: refused unread). */
static void assert_sets(uint64_t id, const size_t *bodies, size_t n, size_t parts, long want)
{
	struct wire w = {0};
	size_t first = 0;
	wire_uint(&w, 1, id);
	for (size_t i = 0; i < n; i++) {
		wire_lock_set(&w, first, bodies[i], parts);
		first += bodies[i];
	}
	long items;
	assert_int_equal(decode_set(&w, id, &items), 0);
	assert_int_equal(items, want);
	free(w.p);
}

/* Milliseconds from t0 to now. */
static double ms_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* codec_decode_request() of Envelope{id, keepalive: the bytes of ka}, a
 * keepalive over RAFTLOCK_KEEPALIVE_MAX sessions or secrets, refuses it
 * by its id (the connection going on), naming the bound, its body
 * unread. */
static void assert_keepalive_refused(const struct wire *ka, uint64_t id)
{
	struct wire w = {0};
	wire_uint(&w, 1, id);
	wire_len(&w, 12, ka->p, ka->len);
	char want[128];
	snprintf(want, sizeof want,
		 "a keepalive names at most RAFTLOCK_KEEPALIVE_MAX (%u) sessions and as many "
		 "secrets",
		 (unsigned)RAFTLOCK_KEEPALIVE_MAX);
	Raftlock__Envelope *env = NULL;
	const char *refusal = NULL;
	assert_int_equal(codec_decode_request(w.p, w.len, &env, &refusal), 0);
	assert_non_null(refusal);
	assert_string_equal(refusal, want);
	assert_int_equal(env->id, id);
	assert_int_equal(env->body_case, RAFTLOCK__ENVELOPE__BODY__NOT_SET);
	raftlock__envelope__free_unpacked(env, NULL);
	free(w.p);
}

/* The count of a repeated field the protocol bounds is read on the wire:
 * a request over it is refused before protobuf-c unpacks (and allocates)
 * each element -- a 4 MiB frame holds 2 million empty set items. The
 * refusal is the one given after unpacking (by the request's id, the
 * connection going on), its body left unread; a request at the bound
 * decodes. Every occurrence of the set on the wire counts. */
static void test_repeated_counted_before_unpacking(void **state)
{
	(void)state;
	assert_sets(7, (size_t[]){RAFTLOCK_MULTI_MAX}, 1, 1, RAFTLOCK_MULTI_MAX);
	assert_sets(7, (size_t[]){RAFTLOCK_MULTI_MAX + 1}, 1, 1, -1);
	long items;
	struct wire w = {0};
	wire_lock_set(&w, 0, 100000, 1);
	wire_uint(&w, 1, 8); /* after the body: the id is still answered */
	assert_int_equal(decode_set(&w, 8, &items), 0);
	assert_int_equal(items, -1);
	/* Sets that protobuf-c merges count together. */
	assert_sets(9, (size_t[]){RAFTLOCK_MULTI_MAX}, 1, 2, RAFTLOCK_MULTI_MAX);
	assert_sets(9, (size_t[]){RAFTLOCK_MULTI_MAX + 1}, 1, 2, -1);
	/* Of repeated bodies it keeps the last, but unpacks each: they count
	 * together too. */
	size_t halves[] = {RAFTLOCK_MULTI_MAX / 2, RAFTLOCK_MULTI_MAX / 2, 1};
	assert_sets(10, halves, 2, 1, RAFTLOCK_MULTI_MAX / 2);
	assert_sets(10, halves, 3, 1, -1);

	/* A keepalive's sessions, unpacked (one field each) or packed, count
	 * alike: over the bound, refused as a set is. */
	struct wire ka = {0}, packed = {0};
	for (size_t i = 0; i < RAFTLOCK_KEEPALIVE_MAX; i++)
		wire_uint(&ka, 1, 1);
	w.len = 0;
	wire_len(&w, 12, ka.p, ka.len);
	Raftlock__Envelope *env = NULL;
	const char *refusal = NULL;
	assert_int_equal(codec_decode_request(w.p, w.len, &env, &refusal), 0);
	assert_null(refusal);
	assert_int_equal(env->keepalive->n_sessions, RAFTLOCK_KEEPALIVE_MAX);
	raftlock__envelope__free_unpacked(env, NULL);
	wire_varint(&packed, 1); /* one more, packed */
	wire_len(&ka, 1, packed.p, packed.len);
	assert_keepalive_refused(&ka, 11);
	free(packed.p);
	free(ka.p);
	free(w.p);
}

/* The costliest keepalive a node unpacks: RAFTLOCK_KEEPALIVE_MAX sessions
 * of 10-byte ids, one field each, and as many secrets of
 * RAFTLOCK_SECRET_MAX bytes (a frame of 1.3 MB); at 262,144 sessions and
 * 16-byte secrets to a 4 MiB frame's end it took 0.1-0.4 s of the node's
 * loop and 27 MB. The time it takes is printed (GUARANTEES, Connections
 * and frames, quotes it). One session or one secret more is refused by
 * the request's id, unread. */
static void test_keepalive_at_its_bound(void **state)
{
	(void)state;
	uint8_t secret[RAFTLOCK_SECRET_MAX];
	memset(secret, 's', sizeof secret);
	struct wire ka = {0}, w = {0};
	for (size_t i = 0; i < RAFTLOCK_KEEPALIVE_MAX; i++)
		wire_uint(&ka, 1, UINT64_MAX - i);
	for (size_t i = 0; i < RAFTLOCK_KEEPALIVE_MAX; i++)
		wire_len(&ka, 2, secret, sizeof secret);
	wire_uint(&w, 1, 12);
	wire_len(&w, 12, ka.p, ka.len);
	Raftlock__Envelope *env = NULL;
	const char *refusal = NULL;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(codec_decode_request(w.p, w.len, &env, &refusal), 0);
	double ms = ms_since(&t0);
	assert_null(refusal);
	assert_int_equal(env->keepalive->n_sessions, RAFTLOCK_KEEPALIVE_MAX);
	assert_int_equal(env->keepalive->n_secrets, RAFTLOCK_KEEPALIVE_MAX);
	raftlock__envelope__free_unpacked(env, NULL);
	print_message("keepalive of %u sessions and secrets (%zu bytes) decoded in %.2f ms\n",
		      (unsigned)RAFTLOCK_KEEPALIVE_MAX, w.len, ms);

	struct wire more = {0};
	wire_bytes(&more, ka.p, ka.len);
	wire_len(&more, 2, secret, sizeof secret);
	assert_keepalive_refused(&more, 13);
	more.len = 0;
	wire_bytes(&more, ka.p, ka.len);
	wire_uint(&more, 1, 1);
	assert_keepalive_refused(&more, 14);
	free(more.p);
	free(ka.p);
	free(w.p);
}

/* codec_decode_request() of w: its code (a refusal by id counts as
 * accepted, the envelope freed); *ms the time it took. */
static int decode_timed(const struct wire *w, double *ms)
{
	Raftlock__Envelope *env = NULL;
	const char *refusal = NULL;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rv = codec_decode_request(w->p, w->len, &env, &refusal);
	*ms = ms_since(&t0);
	if (rv == 0)
		raftlock__envelope__free_unpacked(env, NULL);
	else
		assert_null(env);
	return rv;
}

/* codec_decode_request() of w accepts it, without a refusal. */
static void assert_request_decodes(const struct wire *w)
{
	Raftlock__Envelope *env = NULL;
	const char *refusal = NULL;
	assert_int_equal(codec_decode_request(w->p, w->len, &env, &refusal), 0);
	assert_null(refusal);
	raftlock__envelope__free_unpacked(env, NULL);
}

/* Fields up to a 4 MiB frame: each the bytes (f, n) again. */
static void wire_fill(struct wire *w, const void *f, size_t n)
{
	while (w->len + n <= RAFTLOCK_FRAME_MAX - 64)
		wire_bytes(w, f, n);
}

/* A field unknown to every message below (number 99, varint 0). */
#define UNKNOWN_FIELD "\x98\x06\x00"

/* Envelope{id 7, sequence{acked: seq}, acquire{acquire{name "a", extra}}}. */
static void wire_acquire(struct wire *w, const struct wire *seq, const struct wire *extra)
{
	struct wire acquire = {0}, req = {0};
	wire_len(&acquire, 1, "a", 1);
	wire_bytes(&acquire, extra->p, extra->len);
	wire_len(&req, 4, acquire.p, acquire.len);
	wire_uint(w, 1, 7);
	wire_len(w, 2, seq->p, seq->len);
	wire_len(w, 14, req.p, req.len);
	free(acquire.p);
	free(req.p);
}

/* Every field of a frame counts, at any depth, before protobuf-c unpacks
 * it (allocating for each, known or not): 4 MiB of 2-byte fields the
 * protocol does not know (protobuf-c keeps each) took about 1 s of the
 * loop and 176 MB, an acknowledgement list of 2 million sequences 0.4 s
 * and 80 MB. A request with more than CODEC_UNKNOWN_MAX unknown fields in a
 * message, or CODEC_FIELDS_MAX fields and elements in all, is refused as
 * a flood, from a walk of its bytes (well within 250 ms: they are
 * walked only to the bound). A newer client's few new fields, in each
 * message of the largest request, are still ignored. */
static void test_fields_counted_before_unpacking(void **state)
{
	(void)state;
	struct wire w = {0}, seq = {0}, extra = {0};
	double ms;

	/* STATUS, then unknown fields: a flood of them at the top... */
	wire_len(&w, 10, NULL, 0);
	wire_fill(&w, "\x20\x00", 2); /* Envelope field 4 */
	assert_int_equal(decode_timed(&w, &ms), RAFTLOCK_EPROTO);
	assert_true(ms < 250);
	/* ...or in a message below it. */
	w.len = 0;
	wire_fill(&extra, "\x58\x00", 2); /* Acquire field 11 */
	wire_acquire(&w, &seq, &extra);
	assert_int_equal(decode_timed(&w, &ms), RAFTLOCK_EPROTO);
	assert_true(ms < 250);

	/* An acknowledgement list of 2 million sequences, one field each, or
	 * 4 million packed in one. */
	extra.len = 0;
	w.len = 0;
	wire_fill(&seq, "\x20\x01", 2); /* Sequence.acked */
	wire_acquire(&w, &seq, &extra);
	assert_int_equal(decode_timed(&w, &ms), RAFTLOCK_EPROTO);
	assert_true(ms < 250);
	struct wire list = {0};
	wire_fill(&list, "\x01", 1);
	seq.len = 0;
	wire_len(&seq, 4, list.p, list.len);
	w.len = 0;
	wire_acquire(&w, &seq, &extra);
	assert_int_equal(decode_timed(&w, &ms), RAFTLOCK_EPROTO);
	assert_true(ms < 250);

	/* The bounds exactly: id, sequence, its packed list and STATUS make
	 * CODEC_FIELDS_MAX; CODEC_UNKNOWN_MAX unknown fields in a message. */
	for (size_t over = 0; over <= 1; over++) {
		seq.len = 0;
		list.len = 0;
		for (size_t i = 0; i < CODEC_FIELDS_MAX - 3 + over; i++)
			wire_varint(&list, 1);
		wire_len(&seq, 4, list.p, list.len);
		w.len = 0;
		wire_uint(&w, 1, 7);
		wire_len(&w, 2, seq.p, seq.len);
		wire_len(&w, 10, NULL, 0);
		if (over)
			assert_int_equal(decode_timed(&w, &ms), RAFTLOCK_EPROTO);
		else
			assert_request_decodes(&w);
		w.len = 0;
		wire_len(&w, 10, NULL, 0);
		for (size_t i = 0; i < CODEC_UNKNOWN_MAX + over; i++)
			wire_bytes(&w, UNKNOWN_FIELD, 3);
		if (over)
			assert_int_equal(decode_timed(&w, &ms), RAFTLOCK_EPROTO);
		else
			assert_request_decodes(&w);
	}

	/* The largest request, with CODEC_UNKNOWN_MAX new fields in each of
	 * its messages: a lock set of RAFTLOCK_MULTI_MAX locks of every field,
	 * a sequence header acknowledging 256 sequences. */
	struct wire news = {0}, item = {0}, set = {0}, req = {0};
	for (size_t i = 0; i < CODEC_UNKNOWN_MAX; i++)
		wire_bytes(&news, UNKNOWN_FIELD, 3);
	for (size_t i = 0; i < RAFTLOCK_MULTI_MAX; i++) {
		char name[8];
		snprintf(name, sizeof name, "m%03zu", i);
		item.len = 0;
		wire_len(&item, 1, name, strlen(name));
		for (unsigned f = 2; f <= 6; f++)
			wire_uint(&item, f, 1);
		wire_bytes(&item, news.p, news.len);
		wire_len(&set, 1, item.p, item.len);
	}
	for (unsigned f = 2; f <= 4; f++)
		wire_uint(&set, f, 1);
	wire_bytes(&set, news.p, news.len);
	wire_len(&req, 1, set.p, set.len);
	wire_bytes(&req, news.p, news.len);
	seq.len = 0;
	list.len = 0;
	for (unsigned f = 1; f <= 3; f++)
		wire_uint(&seq, f, 1000);
	for (uint64_t i = 0; i < 256; i++)
		wire_varint(&list, 1000 + i);
	wire_len(&seq, 4, list.p, list.len);
	wire_len(&seq, 5, "0123456789abcdef0123456789abcdef", 32);
	wire_bytes(&seq, news.p, news.len);
	w.len = 0;
	wire_uint(&w, 1, 7);
	wire_len(&w, 2, seq.p, seq.len);
	wire_uint(&w, 3, WIRE_PROTOCOL);
	wire_len(&w, 41, req.p, req.len);
	wire_bytes(&w, news.p, news.len);
	assert_request_decodes(&w);

	free(news.p);
	free(item.p);
	free(set.p);
	free(req.p);
	free(list.p);
	free(extra.p);
	free(seq.p);
	free(w.p);
}

/* codec_decode_envelope() of w: its code, the envelope freed; *ms the
 * time it took. */
static int decode_answer_timed(const struct wire *w, double *ms)
{
	Raftlock__Envelope *env = NULL;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rv = codec_decode_envelope(w->p, w->len, &env);
	*ms = ms_since(&t0);
	if (rv == 0)
		raftlock__envelope__free_unpacked(env, NULL);
	else
		assert_null(env);
	return rv;
}

/* Envelope{id 7, response{locks{locks: the bytes of list}}}, with the
 * bytes of extra after it. */
static void wire_listing(struct wire *w, const struct wire *list, const struct wire *extra)
{
	struct wire resp = {0};
	wire_len(&resp, 14, list->p, list->len); /* Response.locks */
	w->len = 0;
	wire_uint(w, 1, 7);
	wire_len(w, 40, resp.p, resp.len); /* Envelope.response */
	wire_bytes(w, extra->p, extra->len);
	free(resp.p);
}

/* An answer's unknown fields count in its whole frame, against
 * CODEC_ANSWER_UNKNOWN_MAX, before protobuf-c unpacks it: 4 MiB of 2-byte
 * unknown fields took about 1.3 s and 176 MB, now refused from a walk of
 * its bytes; so is a flood spread over a lock's holders, 16 in each,
 * which a bound by message would let through. */
static void test_answer_unknown_fields_counted(void **state)
{
	(void)state;
	struct wire w = {0}, list = {0}, holder = {0}, holders = {0}, news = {0}, extra = {0};
	double ms;

	wire_len(&w, 40, NULL, 0); /* a response, then unknown fields */
	wire_fill(&w, "\x20\x00", 2);
	assert_int_equal(decode_answer_timed(&w, &ms), RAFTLOCK_EPROTO);
	print_message("answer of %zu unknown fields refused in %.2f ms\n", w.len / 2, ms);

	for (size_t i = 0; i < CODEC_UNKNOWN_MAX; i++)
		wire_bytes(&news, UNKNOWN_FIELD, 3);
	wire_len(&holder, 4, news.p, news.len); /* LockInfo.holders */
	wire_fill(&holders, holder.p, holder.len);
	wire_len(&list, 1, holders.p, holders.len); /* LockList.locks */
	wire_listing(&w, &list, &extra);
	assert_int_equal(decode_answer_timed(&w, &ms), RAFTLOCK_EPROTO);
	print_message("listing of a lock of %zu holders of %d unknown fields refused in %.2f ms\n",
		      holders.len / holder.len, CODEC_UNKNOWN_MAX, ms);

	/* The bound exactly, wherever the fields are. */
	holders.len = 0;
	for (size_t i = 0; i < CODEC_ANSWER_UNKNOWN_MAX / CODEC_UNKNOWN_MAX; i++)
		wire_bytes(&holders, holder.p, holder.len);
	list.len = 0;
	wire_len(&list, 1, holders.p, holders.len);
	wire_listing(&w, &list, &extra);
	assert_int_equal(decode_answer_timed(&w, &ms), 0);
	wire_bytes(&extra, UNKNOWN_FIELD, 3);
	wire_listing(&w, &list, &extra);
	assert_int_equal(decode_answer_timed(&w, &ms), RAFTLOCK_EPROTO);

	free(news.p);
	free(holder.p);
	free(holders.p);
	free(list.p);
	free(extra.p);
	free(w.p);
}

/* A listing of `k` locks, each held by `h` sessions of one owner, as a
 * server packs it, with `news` unknown fields in each lock (a newer
 * server's), and `more` elements of a new repeated field in the first;
 * decoded. */
static Raftlock__Envelope *listing_decoded(size_t k, size_t h, size_t news, size_t more)
{
	Raftlock__LockInfo *infos = calloc(k, sizeof *infos);
	Raftlock__LockInfo **ptrs = calloc(k, sizeof *ptrs);
	Raftlock__HolderInfo *hinfos = calloc(k * h, sizeof *hinfos);
	Raftlock__HolderInfo **hptrs = calloc(k * h, sizeof *hptrs);
	Raftlock__Holder *holders = calloc(k * h, sizeof *holders);
	char(*names)[32] = calloc(k, sizeof *names);
	ProtobufCMessageUnknownField *unknown = calloc(news + more + 1, sizeof *unknown);
	assert_true(infos && ptrs && hinfos && hptrs && holders && names && unknown);
	for (size_t i = 0; i < news + more; i++) {
		unknown[i].tag = i < news ? 99 : 98;
		unknown[i].wire_type = i < news ? PROTOBUF_C_WIRE_TYPE_VARINT
						: PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
		/* as protobuf-c keeps them: a length-prefixed one's prefix too */
		unknown[i].len = i < news ? 1 : 4;
		unknown[i].data = (uint8_t *)(i < news ? "\x01" : "\x03new");
	}
	Raftlock__Owner owner = RAFTLOCK__OWNER__INIT;
	owner.client_name = "billing-worker";
	owner.host = "app-17.example.com";
	owner.pid = 4242;
	for (size_t i = 0; i < k * h; i++) {
		raftlock__holder__init(&holders[i]);
		holders[i].session = 1000 + i % h;
		holders[i].token = 50000 + i;
		holders[i].granted_index = 9000 + i;
		raftlock__holder_info__init(&hinfos[i]);
		hinfos[i].holder = &holders[i];
		hinfos[i].owner = &owner;
		hptrs[i] = &hinfos[i];
	}
	for (size_t i = 0; i < k; i++) {
		raftlock__lock_info__init(&infos[i]);
		snprintf(names[i], sizeof names[i], "jobs/%06zu", i);
		infos[i].name = names[i];
		infos[i].kind = RAFTLOCK__LOCK_KIND__SEMAPHORE;
		infos[i].limit = (uint32_t)h;
		infos[i].holders = &hptrs[i * h];
		infos[i].n_holders = h;
		infos[i].base.unknown_fields = unknown;
		infos[i].base.n_unknown_fields = (unsigned)(i == 0 ? news + more : news);
		ptrs[i] = &infos[i];
	}
	Raftlock__LockList ll = RAFTLOCK__LOCK_LIST__INIT;
	ll.locks = ptrs;
	ll.n_locks = k;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_LOCKS;
	resp.locks = &ll;
	size_t n;
	uint8_t *bytes = pack_answer(&resp, &n);
	assert_true(n <= RAFTLOCK_FRAME_MAX);
	Raftlock__Envelope *got = NULL;
	assert_int_equal(codec_decode_envelope(bytes, n, &got), 0);
	free(bytes);
	free(unknown);
	free(names);
	free(holders);
	free(hptrs);
	free(hinfos);
	free(ptrs);
	free(infos);
	return got;
}

/* Envelope{id 7, response{payload field `payload`: the bytes of body}}. */
static void wire_answer(struct wire *w, unsigned payload, const struct wire *body)
{
	struct wire resp = {0};
	wire_len(&resp, payload, body->p, body->len);
	w->len = 0;
	wire_uint(w, 1, 7);
	wire_len(w, 40, resp.p, resp.len); /* Envelope.response */
	free(resp.p);
}

/* codec_decode_envelope() of a frame of elements (elem, n) of a list of
 * the answer (payload, in `in`, a message of it, or none: in 0): decoded,
 * the number of elements that fit in a frame. */
static Raftlock__Envelope *fill_decoded(unsigned payload, unsigned in, const char *elem, size_t n,
					size_t *elems)
{
	struct wire list = {0}, body = {0}, w = {0};
	wire_fill(&list, elem, n);
	*elems = list.len / n;
	if (in != 0)
		wire_len(&body, in, list.p, list.len);
	wire_answer(&w, payload, in != 0 ? &body : &list);
	assert_true(w.len <= RAFTLOCK_FRAME_MAX);
	Raftlock__Envelope *env = NULL;
	assert_int_equal(codec_decode_envelope(w.p, w.len, &env), 0);
	free(list.p);
	free(body.p);
	free(w.p);
	return env;
}

/* codec_decode_envelope() of a keepalive's answer of n statuses and TTLs,
 * packed as a server packs them (each status the longest: a negative
 * code): its code; decoded, it holds them all. */
static int keepalive_answer_code(size_t n)
{
	int32_t *statuses = malloc(n * sizeof *statuses);
	uint32_t *ttls = malloc(n * sizeof *ttls);
	assert_true(statuses != NULL && ttls != NULL);
	for (size_t i = 0; i < n; i++) {
		statuses[i] = RAFTLOCK_ESESSION;
		ttls[i] = RAFTLOCK_TTL_MAX_MS;
	}
	Raftlock__KeepAliveResult kr = RAFTLOCK__KEEP_ALIVE_RESULT__INIT;
	kr.n_statuses = n;
	kr.statuses = statuses;
	kr.n_ttl_ms = n;
	kr.ttl_ms = ttls;
	Raftlock__Response resp = RAFTLOCK__RESPONSE__INIT;
	resp.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_KEEPALIVE;
	resp.keepalive = &kr;
	size_t len;
	uint8_t *bytes = pack_answer(&resp, &len);
	Raftlock__Envelope *env = NULL;
	int rv = codec_decode_envelope(bytes, len, &env);
	if (rv == 0) {
		assert_int_equal(env->response->keepalive->n_statuses, n);
		assert_int_equal(env->response->keepalive->n_ttl_ms, n);
		raftlock__envelope__free_unpacked(env, NULL);
	}
	free(bytes);
	free(ttls);
	free(statuses);
	return rv;
}

/* The largest answers a server sends decode, also from a newer server:
 * a listing page of CODEC_PAGE_MAX locks of 20 holders each (1.6 MB),
 * with a new field in each lock and a new list of 4 * CODEC_UNKNOWN_MAX
 * elements in one (more than a request's message may hold); a newer
 * server's page CODEC_ANSWER_HEADROOM times as long; frames full of
 * the smallest holders, waiters and lock names a server sends (the most
 * a frame holds, a listing's sum over its page); and a keepalive's
 * answer for RAFTLOCK_KEEPALIVE_MAX sessions, one more refused. */
static void test_large_answer_accepted(void **state)
{
	(void)state;
	size_t k = CODEC_PAGE_MAX, h = 20;
	for (size_t newer = 0; newer <= 1; newer++) {
		Raftlock__Envelope *env =
			listing_decoded(k, h, newer, newer * 4 * CODEC_UNKNOWN_MAX);
		assert_int_equal(env->body_case, RAFTLOCK__ENVELOPE__BODY_RESPONSE);
		const Raftlock__LockList *ll = env->response->locks;
		assert_non_null(ll);
		assert_int_equal(ll->n_locks, k);
		assert_string_equal(ll->locks[k - 1]->name, "jobs/000999");
		assert_int_equal(ll->locks[k - 1]->n_holders, h);
		assert_int_equal(ll->locks[k - 1]->holders[h - 1]->holder->token,
				 50000 + k * h - 1);
		assert_int_equal(ll->locks[0]->base.n_unknown_fields,
				 newer * (1 + 4 * CODEC_UNKNOWN_MAX));
		raftlock__envelope__free_unpacked(env, NULL);
	}
	Raftlock__Envelope *env = listing_decoded(CODEC_ANSWER_HEADROOM * CODEC_PAGE_MAX, 1, 1, 0);
	assert_int_equal(env->response->locks->n_locks, CODEC_ANSWER_HEADROOM * CODEC_PAGE_MAX);
	raftlock__envelope__free_unpacked(env, NULL);

	/* GET_LOCK's holders, and waiters, of session 1 and nothing else
	 * shown; a session listing's names of one byte. */
	size_t n;
	env = fill_decoded(13, 0, "\x22\x04\x0a\x02\x08\x01", 6, &n); /* Response.lock */
	assert_int_equal(env->response->lock->n_holders, n);
	assert_int_equal(env->response->lock->holders[n - 1]->holder->session, 1);
	raftlock__envelope__free_unpacked(env, NULL);
	env = fill_decoded(13, 0, "\x2a\x04\x0a\x02\x08\x01", 6, &n);
	assert_int_equal(env->response->lock->n_waiters, n);
	raftlock__envelope__free_unpacked(env, NULL);
	env = fill_decoded(15, 1, "\x32\x01\x61", 3, &n); /* Response.sessions */
	assert_int_equal(env->response->sessions->sessions[0]->n_locks, n);
	assert_string_equal(env->response->sessions->sessions[0]->locks[n - 1], "a");
	raftlock__envelope__free_unpacked(env, NULL);

	assert_int_equal(keepalive_answer_code(RAFTLOCK_KEEPALIVE_MAX), 0);
	assert_int_equal(keepalive_answer_code(RAFTLOCK_KEEPALIVE_MAX + 1), RAFTLOCK_EPROTO);
}

/* codec_decode_envelope() of w refuses it, unread; the time it took
 * printed, with what it holds. */
static void assert_answer_flood(const struct wire *w, const char *what)
{
	double ms;
	assert_int_equal(decode_answer_timed(w, &ms), RAFTLOCK_EPROTO);
	print_message("answer of %s refused in %.2f ms\n", what, ms);
}

/* An answer's known fields are bounded by what a server sends (codec.h),
 * counted before protobuf-c unpacks them: 2 million empty locks in a
 * listing took the library (or a leader reading a member's STATUS) 1.6 s
 * and 300 MB, 2 million values of Response.status 0.4 s and 64 MB (to
 * keep the last); refused from a walk of their bytes. So are 2 million
 * empty holders, or keepalive statuses, and, exactly, a page or a
 * message one over its bound. */
static void test_answer_floods_refused(void **state)
{
	(void)state;
	struct wire w = {0}, body = {0};

	wire_fill(&body, "\x0a\x00", 2); /* LockList.locks */
	wire_answer(&w, 14, &body);
	assert_answer_flood(&w, "2 million empty locks");
	body.len = 0;
	wire_fill(&body, "\x08\x01", 2); /* Response.status */
	w.len = 0;
	wire_uint(&w, 1, 7);
	wire_len(&w, 40, body.p, body.len);
	assert_answer_flood(&w, "2 million statuses");
	body.len = 0;
	wire_fill(&body, "\x22\x00", 2); /* LockInfo.holders */
	wire_answer(&w, 13, &body);
	assert_answer_flood(&w, "2 million empty holders");
	body.len = 0;
	wire_fill(&body, "\x08\x00", 2); /* KeepAliveResult.statuses */
	wire_answer(&w, 12, &body);
	assert_answer_flood(&w, "2 million keepalive statuses");

	for (size_t over = 0; over <= 1; over++) {
		Raftlock__Envelope *env = NULL;
		body.len = 0;
		for (size_t i = 0; i < CODEC_ANSWER_HEADROOM * CODEC_PAGE_MAX + over; i++)
			wire_bytes(&body, "\x0a\x00", 2);
		wire_answer(&w, 14, &body);
		assert_int_equal(codec_decode_envelope(w.p, w.len, &env),
				 over ? RAFTLOCK_EPROTO : 0);
		raftlock__envelope__free_unpacked(env, NULL);
		env = NULL;
		body.len = 0;
		for (size_t i = 0; i < raftlock__response__descriptor.n_fields + over; i++)
			wire_uint(&body, 1, 0);
		w.len = 0;
		wire_uint(&w, 1, 7);
		wire_len(&w, 40, body.p, body.len);
		assert_int_equal(codec_decode_envelope(w.p, w.len, &env),
				 over ? RAFTLOCK_EPROTO : 0);
		raftlock__envelope__free_unpacked(env, NULL);
	}
	free(body.p);
	free(w.p);
}

/* The authentication and access-rule requests: a token of at most
 * RAFTLOCK_TOKEN_MAX bytes, a rule with an identity and bounded names. */
static void test_auth_request_bounds(void **state)
{
	(void)state;
	char *too_long = make_name(RAFTLOCK_NAME_MAX + 1, 'p');
	uint8_t token[RAFTLOCK_TOKEN_MAX + 1] = {0};
	Raftlock__AuthenticateRequest auth = RAFTLOCK__AUTHENTICATE_REQUEST__INIT;
	auth.token.data = token;
	auth.token.len = RAFTLOCK_TOKEN_MAX + 1;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_AUTHENTICATE;
	env.authenticate = &auth;
	assert_int_equal(frame_and_decode(&env), RAFTLOCK_EPROTO);
	auth.token.len = RAFTLOCK_TOKEN_MAX;
	assert_int_equal(frame_and_decode(&env), 0);

	Raftlock__AclSet rule = RAFTLOCK__ACL_SET__INIT;
	rule.identity = "alice";
	rule.prefix = "";
	rule.perms = 1;
	Raftlock__AclSetRequest set = RAFTLOCK__ACL_SET_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_ACL_SET;
	env.acl_set = &set;
	assert_int_equal(frame_and_decode(&env), RAFTLOCK_EPROTO); /* no rule */
	set.rule = &rule;
	assert_int_equal(frame_and_decode(&env), 0);
	rule.identity = "";
	assert_int_equal(frame_and_decode(&env), RAFTLOCK_EPROTO);
	rule.identity = too_long;
	assert_int_equal(frame_and_decode(&env), RAFTLOCK_EPROTO);
	rule.identity = "alice";
	rule.prefix = too_long;
	assert_int_equal(frame_and_decode(&env), RAFTLOCK_EPROTO);

	Raftlock__AclDelete del = RAFTLOCK__ACL_DELETE__INIT;
	del.identity = "alice";
	del.prefix = "db/";
	Raftlock__AclDeleteRequest dreq = RAFTLOCK__ACL_DELETE_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_ACL_DELETE;
	env.acl_delete = &dreq;
	assert_int_equal(frame_and_decode(&env), RAFTLOCK_EPROTO);
	dreq.rule = &del;
	assert_int_equal(frame_and_decode(&env), 0);

	Raftlock__AclListRequest list = RAFTLOCK__ACL_LIST_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_ACL_LIST;
	env.acl_list = &list;
	assert_int_equal(frame_and_decode(&env), 0);
	list.after_prefix = too_long;
	assert_int_equal(frame_and_decode(&env), RAFTLOCK_EPROTO);
	free(too_long);
}

static void test_frame_too_big(void **state)
{
	struct samples s;
	samples_init(&s);
	/* Ten bytes a session: past RAFTLOCK_FRAME_MAX. */
	size_t count = RAFTLOCK_FRAME_MAX / 10 + 1;
	uint64_t *many = malloc(count * sizeof *many);
	assert_non_null(many);
	for (size_t i = 0; i < count; i++)
		many[i] = UINT64_MAX;
	s.keepalive.sessions = many;
	s.keepalive.n_sessions = count;
	uint8_t sentinel = 0;
	uint8_t *out = &sentinel;
	size_t n = 12345;
	assert_int_equal(codec_frame_envelope(&s.env[S_KEEPALIVE], &out, &n), RAFTLOCK_ETOOBIG);
	assert_ptr_equal(out, &sentinel);
	assert_int_equal(n, 12345);
	free(many);
}

static void test_check_name(void **state)
{
	char *longest = make_name(RAFTLOCK_NAME_MAX, 'x');
	char *too_long = make_name(RAFTLOCK_NAME_MAX + 1, 'x');
	assert_int_equal(codec_check_name(NULL), RAFTLOCK_EINVAL);
	assert_int_equal(codec_check_name(""), RAFTLOCK_EINVAL);
	assert_int_equal(codec_check_name("a"), 0);
	assert_int_equal(codec_check_name(longest), 0);
	assert_int_equal(codec_check_name(too_long), RAFTLOCK_ETOOBIG);
	free(longest);
	free(too_long);
}

/* An access rule's key (identity, 0, prefix) must fit LMDB's 511 bytes. */
static void test_check_rule(void **state)
{
	(void)state;
	char *longest = make_name(RAFTLOCK_NAME_MAX, 'x');
	char *too_long = make_name(RAFTLOCK_NAME_MAX + 1, 'x');
	char *half = make_name((CODEC_RULE_KEY_MAX - 1) / 2, 'h'); /* 255 */
	char *rest = make_name(CODEC_RULE_KEY_MAX - 1 - (CODEC_RULE_KEY_MAX - 1) / 2, 'r');
	assert_int_equal(codec_check_rule(NULL, "p"), RAFTLOCK_EINVAL);
	assert_int_equal(codec_check_rule("", "p"), RAFTLOCK_EINVAL);
	assert_int_equal(codec_check_rule("a", NULL), RAFTLOCK_EINVAL);
	assert_int_equal(codec_check_rule("a", ""), 0);
	assert_int_equal(codec_check_rule(longest, ""), 0);
	assert_int_equal(codec_check_rule("a", longest), 0);
	assert_int_equal(codec_check_rule(too_long, ""), RAFTLOCK_ETOOBIG);
	assert_int_equal(codec_check_rule("a", too_long), RAFTLOCK_ETOOBIG);
	/* 255 + 1 + 255 = 511: the longest key; one byte more is refused. */
	assert_int_equal(codec_check_rule(half, rest), 0);
	assert_int_equal(codec_check_rule(half, longest), RAFTLOCK_ETOOBIG);
	assert_int_equal(codec_check_rule(longest, longest), RAFTLOCK_ETOOBIG);
	free(longest);
	free(too_long);
	free(half);
	free(rest);
}

/* The server proposes a decoded request's submessage as it is, unknown
 * fields included. Whatever codec_decode_envelope accepts must therefore
 * pack into a log entry that codec_decode_entry accepts. */
static int propose_acquire(const uint8_t *payload, size_t n)
{
	Raftlock__Envelope *env = NULL;
	int rv = codec_decode_envelope(payload, n, &env);
	if (rv != 0)
		return rv;
	assert_int_equal(env->body_case, RAFTLOCK__ENVELOPE__BODY_ACQUIRE);
	Raftlock__Command cmd = {MSG(command), .session = env->acquire->session,
				 .op_case = RAFTLOCK__COMMAND__OP_ACQUIRE,
				 .acquire = env->acquire->acquire};
	uint8_t *batch = NULL;
	size_t len = 0, cap = 0;
	assert_int_equal(codec_batch_add(&batch, &len, &cap, &cmd), 0);
	void *out = NULL;
	size_t out_n = 0;
	assert_int_equal(codec_batch_entry(1, batch, len, malloc, &out, &out_n), 0);
	Raftlock__LogEntry *entry = NULL;
	assert_int_equal(codec_decode_entry(out, out_n, NULL, &entry), 0);
	assert_string_equal(entry->commands[0]->acquire->name, "a");
	raftlock__log_entry__free_unpacked(entry, NULL);
	free(out);
	free(batch);
	raftlock__envelope__free_unpacked(env, NULL);
	return 0;
}

/* Envelope{id 1, acquire{acquire{name "a", <extra>}}}, extra 3 bytes. */
#define ACQUIRE_WITH_EXTRA(b0, b1, b2)                                          \
	{                                                                       \
		0x08, 0x01, 0x72, 0x08, 0x22, 0x06, 0x0a, 0x01, 'a', b0, b1, b2 \
	}

static void test_unknown_fields_reach_the_log_intact(void **state)
{
	/* Field 15 (varint 133), unknown to this version: kept. */
	static const uint8_t field15[] = ACQUIRE_WITH_EXTRA(0x78, 0x85, 0x01);
	assert_int_equal(propose_acquire(field15, sizeof field15), 0);
	/* Field 2047 (two-byte tag, varint 0): kept. */
	static const uint8_t field2047[] = ACQUIRE_WITH_EXTRA(0xf8, 0x7f, 0x00);
	assert_int_equal(propose_acquire(field2047, sizeof field2047), 0);
}

/* Field number 0 written as a two-byte tag (0x80 0x00). protobuf-c parses
 * it as an unknown field but writes it back as the one-byte tag 0x00, which
 * it refuses to parse: accepted, it would become a log entry no node can
 * apply. Both decoders refuse it at any depth. */
static void test_field_number_zero(void **state)
{
	static const uint8_t nested[] = ACQUIRE_WITH_EXTRA(0x80, 0x00, 0x00);
	assert_int_equal(propose_acquire(nested, sizeof nested), RAFTLOCK_EPROTO);
	assert_int_equal(decode_any(nested, sizeof nested), RAFTLOCK_EPROTO);
	static const uint8_t top[] = {0x52, 0x00, 0x80, 0x00, 0x00};
	assert_int_equal(decode_any(top, sizeof top), RAFTLOCK_EPROTO);
	static const uint8_t one_byte[] = {0x52, 0x00, 0x00, 0x00};
	assert_int_equal(decode_any(one_byte, sizeof one_byte), RAFTLOCK_EPROTO);

	/* LogEntry{commands{acquire{name "a"}}}, then with field 0 added. */
	static const uint8_t entry_ok[16] = {'R',  'L',  0,    ENTRY_FORMAT, 0,    0,    0,  7,
					     0x12, 0x05, 0x7a, 0x03,         0x0a, 0x01, 'a'};
	assert_int_equal(decode_entry_code(entry_ok, sizeof entry_ok), 0);
	static const uint8_t entry_zero[24] = {'R',  'L',  0,    ENTRY_FORMAT, 0,    0,
					       0,    10,   0x12, 0x08,         0x7a, 0x06,
					       0x0a, 0x01, 'a',  0x80,         0x00, 0x00};
	assert_int_equal(decode_entry_code(entry_zero, sizeof entry_zero), RAFTLOCK_EPROTO);
}

/* -------------------------------------------------------- log entries -- */

#define N_COMMANDS 4

struct entry_sample {
	Raftlock__Acquire acquire;
	Raftlock__Release release;
	Raftlock__Owner owner;
	Raftlock__OpenSession open;
	uint64_t sessions[2];
	Raftlock__Renew renew;
	Raftlock__Command cmd[N_COMMANDS];
	Raftlock__Command *cmds[N_COMMANDS];
	Raftlock__LogEntry entry;
};

static void entry_sample_init(struct entry_sample *e, uint64_t cluster_time)
{
	e->acquire =
		(Raftlock__Acquire){MSG(acquire), .name = "jobs/nightly", .owner = 3, .wait = 1};
	e->release = (Raftlock__Release){MSG(release), .name = "jobs/nightly", .owner = 3};
	e->owner = (Raftlock__Owner){MSG(owner), .client_name = "cli"};
	e->open = (Raftlock__OpenSession){MSG(open_session), .nonce = 99, .ttl_ms = 10000,
					  .owner = &e->owner};
	e->sessions[0] = 5;
	e->sessions[1] = 6;
	e->renew = (Raftlock__Renew){MSG(renew), .n_sessions = 2, .sessions = e->sessions};
	for (int i = 0; i < N_COMMANDS; i++) {
		e->cmd[i] = (Raftlock__Command){MSG(command), .session = 5, .seq = 20 + (uint64_t)i,
						.ack_below = 20};
		e->cmds[i] = &e->cmd[i];
	}
	e->cmd[0].op_case = RAFTLOCK__COMMAND__OP_ACQUIRE;
	e->cmd[0].acquire = &e->acquire;
	e->cmd[1].op_case = RAFTLOCK__COMMAND__OP_OPEN_SESSION;
	e->cmd[1].open_session = &e->open;
	e->cmd[2].op_case = RAFTLOCK__COMMAND__OP_RENEW;
	e->cmd[2].renew = &e->renew;
	e->cmd[3].op_case = RAFTLOCK__COMMAND__OP_RELEASE;
	e->cmd[3].release = &e->release;
	e->entry = (Raftlock__LogEntry){MSG(log_entry), .cluster_time = cluster_time,
					.n_commands = N_COMMANDS, .commands = e->cmds};
}

static uint8_t *pack_entry(const Raftlock__LogEntry *entry, size_t *n)
{
	*n = raftlock__log_entry__get_packed_size(entry);
	uint8_t *buf = malloc(*n ? *n : 1);
	assert_non_null(buf);
	assert_int_equal(raftlock__log_entry__pack(entry, buf), *n);
	return buf;
}

/* Checks the header and padding of an encoded entry and that it decodes to
 * `want`, comparing the protobuf encodings. */
static void expect_entry(const uint8_t *buf, size_t n, const Raftlock__LogEntry *want)
{
	size_t want_n;
	uint8_t *want_bytes = pack_entry(want, &want_n);
	assert_int_equal(n % 8, 0);
	assert_int_equal(n, (ENTRY_HEADER_SIZE + want_n + 7) / 8 * 8);
	assert_int_equal(buf[0], 'R');
	assert_int_equal(buf[1], 'L');
	assert_int_equal((unsigned)buf[2] << 8 | buf[3], ENTRY_FORMAT);
	size_t size = (size_t)buf[4] << 24 | (size_t)buf[5] << 16 | (size_t)buf[6] << 8 | buf[7];
	assert_int_equal(size, want_n);
	for (size_t i = ENTRY_HEADER_SIZE + size; i < n; i++)
		assert_int_equal(buf[i], 0);

	Raftlock__LogEntry *got = NULL;
	assert_int_equal(codec_decode_entry(buf, n, NULL, &got), 0);
	assert_non_null(got);
	assert_int_equal(got->cluster_time, want->cluster_time);
	assert_int_equal(got->n_commands, want->n_commands);
	size_t got_n;
	uint8_t *got_bytes = pack_entry(got, &got_n);
	assert_int_equal(got_n, want_n);
	if (want_n > 0)
		assert_memory_equal(got_bytes, want_bytes, want_n);
	free(got_bytes);
	free(want_bytes);
	raftlock__log_entry__free_unpacked(got, NULL);
}

static void test_entry_round_trip(void **state)
{
	struct entry_sample e;
	entry_sample_init(&e, 1234567890123ULL);
	void *out = NULL;
	size_t n = 0;
	assert_int_equal(codec_encode_entry(&e.entry, malloc, &out, &n), 0);
	expect_entry(out, n, &e.entry);
	free(out);

	/* An empty entry is a bare header. */
	Raftlock__LogEntry empty = RAFTLOCK__LOG_ENTRY__INIT;
	assert_int_equal(codec_encode_entry(&empty, malloc, &out, &n), 0);
	assert_int_equal(n, ENTRY_HEADER_SIZE);
	expect_entry(out, n, &empty);
	free(out);
}

/* Names of 1..16 bytes give protobuf sizes of every remainder modulo 8. */
static void test_entry_padding(void **state)
{
	struct entry_sample e;
	entry_sample_init(&e, 42);
	e.entry.n_commands = 1;
	unsigned remainders = 0;
	for (size_t len = 1; len <= 16; len++) {
		char *name = make_name(len, 'q');
		e.acquire.name = name;
		remainders |= 1u << (raftlock__log_entry__get_packed_size(&e.entry) % 8);
		void *out = NULL;
		size_t n = 0;
		assert_int_equal(codec_encode_entry(&e.entry, malloc, &out, &n), 0);
		expect_entry(out, n, &e.entry);
		free(out);
		free(name);
	}
	assert_int_equal(remainders, 0xff);
}

static void test_batch_matches_entry(void **state)
{
	const uint64_t times[] = {0, 1, 1234567890123ULL, UINT64_MAX};
	for (size_t t = 0; t < sizeof times / sizeof times[0]; t++) {
		struct entry_sample e;
		entry_sample_init(&e, times[t]);
		uint8_t *batch = NULL;
		size_t len = 0, cap = 0;
		for (int i = 0; i < N_COMMANDS; i++)
			assert_int_equal(codec_batch_add(&batch, &len, &cap, &e.cmd[i]), 0);
		assert_true(len <= cap);

		void *from_batch = NULL, *from_entry = NULL;
		size_t batch_n = 0, entry_n = 0;
		assert_int_equal(
			codec_batch_entry(times[t], batch, len, malloc, &from_batch, &batch_n), 0);
		assert_int_equal(codec_encode_entry(&e.entry, malloc, &from_entry, &entry_n), 0);
		assert_int_equal(batch_n, entry_n);
		assert_memory_equal(from_batch, from_entry, entry_n);
		expect_entry(from_batch, batch_n, &e.entry);
		free(from_batch);
		free(from_entry);
		free(batch);
	}
}

static void test_empty_batch(void **state)
{
	Raftlock__LogEntry want = RAFTLOCK__LOG_ENTRY__INIT;
	void *out = NULL;
	size_t n = 0;
	assert_int_equal(codec_batch_entry(0, NULL, 0, malloc, &out, &n), 0);
	expect_entry(out, n, &want);
	free(out);
	want.cluster_time = 77;
	assert_int_equal(codec_batch_entry(77, NULL, 0, malloc, &out, &n), 0);
	expect_entry(out, n, &want);
	free(out);
}

/* The batch holds the packed bytes, so a command's source may change or go
 * away once it is added. */
static void test_batch_copies_commands(void **state)
{
	struct entry_sample e;
	entry_sample_init(&e, 500);
	char name[] = "before";
	e.acquire.name = name;
	uint8_t *batch = NULL;
	size_t len = 0, cap = 0;
	assert_int_equal(codec_batch_add(&batch, &len, &cap, &e.cmd[0]), 0);
	memcpy(name, "after!", sizeof name);
	e.cmd[0].seq = 1;

	void *out = NULL;
	size_t n = 0;
	assert_int_equal(codec_batch_entry(500, batch, len, malloc, &out, &n), 0);
	Raftlock__LogEntry *got = NULL;
	assert_int_equal(codec_decode_entry(out, n, NULL, &got), 0);
	assert_int_equal(got->n_commands, 1);
	assert_int_equal(got->commands[0]->seq, 20);
	assert_int_equal(got->commands[0]->op_case, RAFTLOCK__COMMAND__OP_ACQUIRE);
	assert_string_equal(got->commands[0]->acquire->name, "before");
	raftlock__log_entry__free_unpacked(got, NULL);
	free(out);
	free(batch);
}

/* Many commands: the batch buffer grows past its first allocation. */
static void test_batch_grows(void **state)
{
	enum { MANY = 3000 };
	struct entry_sample e;
	entry_sample_init(&e, 9);
	Raftlock__Command **cmds = malloc(MANY * sizeof *cmds);
	assert_non_null(cmds);
	uint8_t *batch = NULL;
	size_t len = 0, cap = 0;
	for (int i = 0; i < MANY; i++) {
		cmds[i] = &e.cmd[i % N_COMMANDS];
		assert_int_equal(codec_batch_add(&batch, &len, &cap, cmds[i]), 0);
	}
	e.entry.n_commands = MANY;
	e.entry.commands = cmds;
	void *out = NULL;
	size_t n = 0;
	assert_int_equal(codec_batch_entry(9, batch, len, malloc, &out, &n), 0);
	expect_entry(out, n, &e.entry);
	free(out);
	free(batch);
	free(cmds);
}

static int alloc_calls;

static void *counting_alloc(size_t n)
{
	alloc_calls++;
	return malloc(n);
}

static void *failing_alloc(size_t n)
{
	return NULL;
}

static void test_entry_allocator(void **state)
{
	struct entry_sample e;
	entry_sample_init(&e, 3);
	int sentinel;
	void *out = &sentinel;
	size_t n = 4321;
	assert_int_equal(codec_encode_entry(&e.entry, failing_alloc, &out, &n), RAFTLOCK_ENOMEM);
	assert_int_equal(codec_batch_entry(3, (const uint8_t *)"", 0, failing_alloc, &out, &n),
			 RAFTLOCK_ENOMEM);
	assert_ptr_equal(out, &sentinel);
	assert_int_equal(n, 4321);

	alloc_calls = 0;
	assert_int_equal(codec_encode_entry(&e.entry, counting_alloc, &out, &n), 0);
	assert_int_equal(alloc_calls, 1);
	free(out);
}

/* A valid encoded entry for the decoder tests, malloc'd. */
static uint8_t *encoded_entry(size_t *n)
{
	struct entry_sample e;
	entry_sample_init(&e, 777);
	void *out = NULL;
	assert_int_equal(codec_encode_entry(&e.entry, malloc, &out, n), 0);
	return out;
}

static int decode_entry_code(const uint8_t *buf, size_t n)
{
	Raftlock__LogEntry *e = NULL;
	int rv = codec_decode_entry(buf, n, NULL, &e);
	if (rv == 0) {
		assert_non_null(e);
		raftlock__log_entry__free_unpacked(e, NULL);
	}
	return rv;
}

static void test_entry_bad_header(void **state)
{
	size_t n;
	uint8_t *buf = encoded_entry(&n);
	assert_int_equal(decode_entry_code(buf, n), 0);

	for (size_t short_n = 0; short_n < ENTRY_HEADER_SIZE; short_n++)
		assert_int_equal(decode_entry_code(buf, short_n), RAFTLOCK_EPROTO);

	buf[0] = 'X';
	assert_int_equal(decode_entry_code(buf, n), RAFTLOCK_EPROTO);
	buf[0] = 'R';
	buf[1] = 'l';
	assert_int_equal(decode_entry_code(buf, n), RAFTLOCK_EPROTO);
	buf[1] = 'L';

	/* A payload length past the end of the buffer. */
	uint32_t size =
		(uint32_t)buf[4] << 24 | (uint32_t)buf[5] << 16 | (uint32_t)buf[6] << 8 | buf[7];
	frame_put_header(buf + 4, (uint32_t)(n - ENTRY_HEADER_SIZE + 1));
	assert_int_equal(decode_entry_code(buf, n), RAFTLOCK_EPROTO);
	frame_put_header(buf + 4, UINT32_MAX);
	assert_int_equal(decode_entry_code(buf, n), RAFTLOCK_EPROTO);
	frame_put_header(buf + 4, size);
	/* Cut inside the payload. */
	assert_int_equal(decode_entry_code(buf, ENTRY_HEADER_SIZE + size - 1), RAFTLOCK_EPROTO);
	/* Cut in the padding: the payload is whole. */
	assert_int_equal(decode_entry_code(buf, ENTRY_HEADER_SIZE + size), 0);

	/* A payload that is not a LogEntry. */
	memset(buf + ENTRY_HEADER_SIZE, 0xff, size);
	assert_int_equal(decode_entry_code(buf, n), RAFTLOCK_EPROTO);
	free(buf);
}

static void test_entry_newer_format(void **state)
{
	size_t n;
	uint8_t *buf = encoded_entry(&n);
	const unsigned formats[] = {ENTRY_FORMAT + 1, 0x0100, 0xffff};
	for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
		buf[2] = (uint8_t)(formats[i] >> 8);
		buf[3] = (uint8_t)formats[i];
		assert_int_equal(decode_entry_code(buf, n), RAFTLOCK_EDATA);
	}
	free(buf);
}

static void test_entry_corruption(void **state)
{
	size_t n;
	uint8_t *orig = encoded_entry(&n);
	int rejected = 0;
	rng_seed(0xe17e);
	for (int iter = 0; iter < 20000; iter++) {
		uint8_t *buf = malloc(n);
		assert_non_null(buf);
		memcpy(buf, orig, n);
		int flips = 1 + (int)(rng_next() % 3);
		for (int f = 0; f < flips; f++)
			buf[rng_next() % n] = (uint8_t)rng_next();
		size_t len = rng_next() % 4 == 0 ? rng_next() % (n + 1) : n;
		int rv = decode_entry_code(buf, len);
		assert_true(rv == 0 || rv == RAFTLOCK_EPROTO || rv == RAFTLOCK_EDATA);
		rejected += rv != 0;
		free(buf);
	}
	assert_true(rejected > 0);
	free(orig);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_request_round_trips),
		cmocka_unit_test(test_decoded_fields),
		cmocka_unit_test(test_garbage_bytes),
		cmocka_unit_test(test_truncated_payloads),
		cmocka_unit_test(test_random_corruption),
		cmocka_unit_test(test_envelope_without_body),
		cmocka_unit_test(test_unknown_body_field),
		cmocka_unit_test(test_lock_name_bounds),
		cmocka_unit_test(test_name_with_nul_refused),
		cmocka_unit_test(test_missing_lock_submessage),
		cmocka_unit_test(test_other_request_bounds),
		cmocka_unit_test(test_auth_request_bounds),
		cmocka_unit_test(test_multi_acquire_bounds),
		cmocka_unit_test(test_repeated_counted_before_unpacking),
		cmocka_unit_test(test_keepalive_at_its_bound),
		cmocka_unit_test(test_fields_counted_before_unpacking),
		cmocka_unit_test(test_answer_unknown_fields_counted),
		cmocka_unit_test(test_large_answer_accepted),
		cmocka_unit_test(test_answer_floods_refused),
		cmocka_unit_test(test_frame_too_big),
		cmocka_unit_test(test_check_name),
		cmocka_unit_test(test_check_rule),
		cmocka_unit_test(test_unknown_fields_reach_the_log_intact),
		cmocka_unit_test(test_field_number_zero),
		cmocka_unit_test(test_entry_round_trip),
		cmocka_unit_test(test_entry_padding),
		cmocka_unit_test(test_batch_matches_entry),
		cmocka_unit_test(test_empty_batch),
		cmocka_unit_test(test_batch_copies_commands),
		cmocka_unit_test(test_batch_grows),
		cmocka_unit_test(test_entry_allocator),
		cmocka_unit_test(test_entry_bad_header),
		cmocka_unit_test(test_entry_newer_format),
		cmocka_unit_test(test_entry_corruption),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
