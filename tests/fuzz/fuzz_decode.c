/*
 * fuzz_decode.c: libFuzzer target for the decoding side of proto/.
 *
 * Input: one control byte, then bytes that are read twice: as a stream of
 * client frames (fed to a frame reader in chunks, each payload decoded as
 * an Envelope) and as one log entry. Besides the sanitizers, it checks:
 *   - the frame reader hands out exactly the frames a plain walk over the
 *     stream finds, and reports RAFTLOCK_ETOOBIG exactly where a header
 *     announces more than the bound;
 *   - decoders return only their documented codes, and what the server's
 *     takes as a request the library's takes too;
 *   - whatever decodes, encodes again to bytes that decode to the same
 *     message (envelopes and entries), entries are padded to 8 bytes, and a
 *     batch of the decoded commands gives the same bytes as the entry.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "frame.h"
#include "fuzz_check.h"
#include "raftlock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Control byte: bits 0-3 the feed chunk size minus one; bit 4 a small frame
 * bound, so that RAFTLOCK_ETOOBIG is reached often. */
#define CTL_CHUNK_MASK 0x0f
#define CTL_SMALL_BOUND 0x10
#define SMALL_BOUND 64

/* A copy of n bytes in a block of exactly n bytes, so that the sanitizer
 * sees a read past the end. */
static uint8_t *dup_exact(const uint8_t *p, size_t n)
{
	uint8_t *copy = malloc(n ? n : 1);
	CHECK(copy != NULL);
	if (n > 0)
		memcpy(copy, p, n);
	return copy;
}

/* a and b pack to the same bytes. */
static void check_same(const ProtobufCMessage *a, const ProtobufCMessage *b)
{
	size_t n = protobuf_c_message_get_packed_size(a);
	CHECK(protobuf_c_message_get_packed_size(b) == n);
	uint8_t *pa = malloc(n ? n : 1);
	uint8_t *pb = malloc(n ? n : 1);
	CHECK(pa != NULL && pb != NULL);
	CHECK(protobuf_c_message_pack(a, pa) == n);
	CHECK(protobuf_c_message_pack(b, pb) == n);
	CHECK(memcmp(pa, pb, n) == 0);
	free(pa);
	free(pb);
}

/* The server's decoder bounds what the library's does not (the count of
 * fields): a request it takes whole, the other takes too. */
static bool request_taken(const uint8_t *copy, size_t n)
{
	Raftlock__Envelope *env = NULL;
	const char *refusal = NULL;
	int rv = codec_decode_request(copy, n, &env, &refusal);
	CHECK(rv == 0 || rv == RAFTLOCK_EPROTO);
	if (rv != 0) {
		CHECK(env == NULL);
		return false;
	}
	raftlock__envelope__free_unpacked(env, NULL);
	return refusal == NULL;
}

static void check_envelope(const uint8_t *payload, size_t n)
{
	uint8_t *copy = dup_exact(payload, n);
	Raftlock__Envelope *env = NULL;
	bool taken = request_taken(copy, n);
	int rv = codec_decode_envelope(copy, n, &env);
	free(copy);
	CHECK(rv == 0 || rv == RAFTLOCK_EPROTO);
	CHECK(rv == 0 || !taken);
	if (rv != 0) {
		CHECK(env == NULL);
		return;
	}
	CHECK(env != NULL && env->body_case != RAFTLOCK__ENVELOPE__BODY__NOT_SET);

	/* Encode what was accepted and decode it again. Re-encoding may grow
	 * (a 5-byte negative int32 becomes 10 bytes), hence ETOOBIG. */
	uint8_t *frame = NULL;
	size_t frame_n = 0;
	rv = codec_frame_envelope(env, &frame, &frame_n);
	CHECK(rv == 0 || rv == RAFTLOCK_ETOOBIG);
	if (rv == 0) {
		CHECK(frame_n >= FRAME_HEADER_SIZE);
		Raftlock__Envelope *again = NULL;
		CHECK(codec_decode_envelope(frame + FRAME_HEADER_SIZE, frame_n - FRAME_HEADER_SIZE,
					    &again) == 0);
		CHECK(again->id == env->id && again->body_case == env->body_case);
		CHECK(again->protocol == WIRE_PROTOCOL);
		env->protocol = WIRE_PROTOCOL; /* framing stamps its own protocol */
		check_same(&env->base, &again->base);
		raftlock__envelope__free_unpacked(again, NULL);
		free(frame);
	}
	raftlock__envelope__free_unpacked(env, NULL);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void check_frames(const uint8_t *stream, size_t len, size_t chunk, size_t bound)
{
	struct frame_reader r;
	size_t fed = 0;
	size_t walk = 0; /* where the next frame starts in stream */
	int rv = 0;
	frame_reader_init(&r, bound);
	while (fed < len && rv >= 0) {
		size_t step = len - fed < chunk ? len - fed : chunk;
		CHECK(frame_reader_feed(&r, stream + fed, step) == 0);
		fed += step;
		const uint8_t *payload;
		size_t n;
		while ((rv = frame_reader_next(&r, &payload, &n)) == 1) {
			CHECK(fed - walk >= FRAME_HEADER_SIZE);
			CHECK(n == be32(stream + walk) && n <= bound);
			CHECK(fed - walk - FRAME_HEADER_SIZE >= n);
			CHECK(n == 0 || memcmp(payload, stream + walk + FRAME_HEADER_SIZE, n) == 0);
			check_envelope(payload, n);
			walk += FRAME_HEADER_SIZE + n;
		}
		if (rv == RAFTLOCK_ETOOBIG)
			CHECK(fed - walk >= FRAME_HEADER_SIZE && be32(stream + walk) > bound);
		else
			CHECK(rv == 0);
	}
	/* Nothing whole was left behind. */
	if (rv == 0 && len - walk >= FRAME_HEADER_SIZE)
		CHECK(be32(stream + walk) <= bound &&
		      len - walk - FRAME_HEADER_SIZE < be32(stream + walk));
	frame_reader_close(&r);
}

/* The bytes of an encoded entry, fed through a batch of its commands. */
static void check_batch(const Raftlock__LogEntry *e, const void *encoded, size_t n)
{
	uint8_t *batch = NULL;
	size_t len = 0, cap = 0;
	for (size_t i = 0; i < e->n_commands; i++)
		CHECK(codec_batch_add(&batch, &len, &cap, e->commands[i]) == 0);
	void *out = NULL;
	size_t out_n = 0;
	CHECK(codec_batch_entry(e->cluster_time, batch, len, malloc, &out, &out_n) == 0);
	CHECK(out_n == n && memcmp(out, encoded, n) == 0);
	free(out);
	free(batch);
}

/* Decoded into the arena the state machine uses (kept across inputs, as
 * it is across entries), an entry is the one decoded with malloc. */
static void check_entry_in_arena(const uint8_t *buf, size_t n, int rv, const Raftlock__LogEntry *e)
{
	static struct arena arena;
	static bool ready;
	if (!ready) {
		arena_init(&arena);
		ready = true;
	}
	Raftlock__LogEntry *in_arena = NULL;
	CHECK(codec_decode_entry(buf, n, &arena, &in_arena) == rv);
	if (rv == 0)
		check_same(&e->base, &in_arena->base);
	arena_reset(&arena);
}

static void check_entry(const uint8_t *buf, size_t n)
{
	Raftlock__LogEntry *e = NULL;
	int rv = codec_decode_entry(buf, n, NULL, &e);
	CHECK(rv == 0 || rv == RAFTLOCK_EPROTO || rv == RAFTLOCK_EDATA);
	check_entry_in_arena(buf, n, rv, e);
	if (rv != 0) {
		CHECK(e == NULL);
		return;
	}
	void *out = NULL;
	size_t out_n = 0;
	CHECK(codec_encode_entry(e, malloc, &out, &out_n) == 0);
	CHECK(out_n % 8 == 0 && out_n >= ENTRY_HEADER_SIZE);
	Raftlock__LogEntry *again = NULL;
	CHECK(codec_decode_entry(out, out_n, NULL, &again) == 0);
	check_same(&e->base, &again->base);
	/* Fields of LogEntry unknown to this version are not in a batch. */
	if (e->base.n_unknown_fields == 0)
		check_batch(e, out, out_n);
	raftlock__log_entry__free_unpacked(again, NULL);
	raftlock__log_entry__free_unpacked(e, NULL);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t ctl = data[0];
	const uint8_t *rest = data + 1;
	size_t len = size - 1;
	size_t chunk = (size_t)(ctl & CTL_CHUNK_MASK) + 1;
	size_t bound = ctl & CTL_SMALL_BOUND ? SMALL_BOUND : RAFTLOCK_FRAME_MAX;
	check_frames(rest, len, chunk, bound);
	check_entry(rest, len);
	return 0;
}
