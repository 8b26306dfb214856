/* test_frame.c: the frame reader fed whole, split and truncated streams. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frame.h"
#include "raftlock.h"

#define MAX_FRAMES 8
#define BIG_PAYLOAD 5000 /* above the reader's first allocation */

/* A byte stream of several frames and where each one ends in it. */
struct stream {
	uint8_t *bytes;
	size_t len;
	size_t n_frames;
	size_t payload_off[MAX_FRAMES];
	size_t payload_len[MAX_FRAMES];
	size_t frame_end[MAX_FRAMES];
};

static void stream_add(struct stream *s, const uint8_t *payload, size_t n)
{
	assert_true(s->n_frames < MAX_FRAMES);
	s->bytes = realloc(s->bytes, s->len + FRAME_HEADER_SIZE + n);
	assert_non_null(s->bytes);
	frame_put_header(s->bytes + s->len, (uint32_t)n);
	if (n > 0)
		memcpy(s->bytes + s->len + FRAME_HEADER_SIZE, payload, n);
	s->payload_off[s->n_frames] = s->len + FRAME_HEADER_SIZE;
	s->payload_len[s->n_frames] = n;
	s->len += FRAME_HEADER_SIZE + n;
	s->frame_end[s->n_frames] = s->len;
	s->n_frames++;
}

/* Frames of 5, 0, 1, BIG_PAYLOAD and 3 bytes with distinct contents. */
static void stream_build(struct stream *s)
{
	static uint8_t big[BIG_PAYLOAD];
	memset(s, 0, sizeof *s);
	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (uint8_t)(i * 7 + 3);
	stream_add(s, (const uint8_t *)"hello", 5);
	stream_add(s, NULL, 0);
	stream_add(s, (const uint8_t *)"x", 1);
	stream_add(s, big, sizeof big);
	stream_add(s, (const uint8_t *)"\0\1\2", 3);
}

/* Asserts that the next frame of r is the n bytes at data. */
static void expect_frame(struct frame_reader *r, const void *data, size_t n)
{
	const uint8_t *payload = NULL;
	size_t got = n + 1;
	assert_int_equal(frame_reader_next(r, &payload, &got), 1);
	assert_non_null(payload);
	assert_int_equal(got, n);
	if (n > 0)
		assert_memory_equal(payload, data, n);
}

/* Writes header and payload of one frame to out. */
static void frame_make(uint8_t *out, const void *payload, uint32_t n)
{
	frame_put_header(out, n);
	memcpy(out + FRAME_HEADER_SIZE, payload, n);
}

static void expect_nothing(struct frame_reader *r)
{
	const uint8_t *payload = NULL;
	size_t n = 0;
	assert_int_equal(frame_reader_next(r, &payload, &n), 0);
	assert_null(payload);
}

/* Frames whose last byte lies within the first k bytes of the stream. */
static size_t frames_within(const struct stream *s, size_t k)
{
	size_t count = 0;
	while (count < s->n_frames && s->frame_end[count] <= k)
		count++;
	return count;
}

/* With the first `fed` bytes of s fed to r, takes the frames not taken yet
 * (*next is the first of them): exactly those that are whole must come out. */
static void drain(struct frame_reader *r, const struct stream *s, size_t *next, size_t fed)
{
	size_t ready = frames_within(s, fed);
	for (; *next < ready; (*next)++)
		expect_frame(r, s->bytes + s->payload_off[*next], s->payload_len[*next]);
	expect_nothing(r);
}

static void test_byte_at_a_time(void **state)
{
	struct stream s;
	struct frame_reader r;
	size_t next = 0;
	stream_build(&s);
	frame_reader_init(&r, BIG_PAYLOAD);
	for (size_t i = 0; i < s.len; i++) {
		assert_int_equal(frame_reader_feed(&r, s.bytes + i, 1), 0);
		/* A frame appears exactly when its last byte arrives. */
		drain(&r, &s, &next, i + 1);
	}
	assert_int_equal(next, s.n_frames);
	frame_reader_close(&r);
	free(s.bytes);
}

static void test_every_two_way_split(void **state)
{
	struct stream s;
	stream_build(&s);
	for (size_t cut = 0; cut <= s.len; cut++) {
		struct frame_reader r;
		size_t next = 0;
		frame_reader_init(&r, BIG_PAYLOAD);
		assert_int_equal(frame_reader_feed(&r, s.bytes, cut), 0);
		drain(&r, &s, &next, cut);
		assert_int_equal(frame_reader_feed(&r, s.bytes + cut, s.len - cut), 0);
		drain(&r, &s, &next, s.len);
		assert_int_equal(next, s.n_frames);
		frame_reader_close(&r);
	}
	free(s.bytes);
}

static void test_zero_length_frame(void **state)
{
	struct frame_reader r;
	uint8_t head[FRAME_HEADER_SIZE];
	frame_put_header(head, 0);
	frame_reader_init(&r, 16);
	assert_int_equal(frame_reader_feed(&r, head, sizeof head), 0);
	expect_frame(&r, NULL, 0);
	expect_nothing(&r);
	frame_reader_close(&r);
}

static void test_header_is_big_endian(void **state)
{
	uint8_t head[FRAME_HEADER_SIZE];
	frame_put_header(head, 0x01020304u);
	assert_memory_equal(head, "\x01\x02\x03\x04", FRAME_HEADER_SIZE);
}

static void test_too_big_before_payload(void **state)
{
	struct frame_reader r;
	uint8_t head[FRAME_HEADER_SIZE];
	const uint8_t *payload = NULL;
	size_t n = 0;
	frame_put_header(head, 101);
	frame_reader_init(&r, 100);
	/* Three header bytes say nothing yet. */
	assert_int_equal(frame_reader_feed(&r, head, 3), 0);
	expect_nothing(&r);
	/* The fourth one is enough: no payload byte is needed. */
	assert_int_equal(frame_reader_feed(&r, head + 3, 1), 0);
	assert_int_equal(frame_reader_next(&r, &payload, &n), RAFTLOCK_ETOOBIG);
	assert_null(payload);
	frame_reader_close(&r);

	const uint8_t huge[FRAME_HEADER_SIZE] = {0xff, 0xff, 0xff, 0xff};
	frame_reader_init(&r, RAFTLOCK_FRAME_MAX);
	assert_int_equal(frame_reader_feed(&r, huge, sizeof huge), 0);
	assert_int_equal(frame_reader_next(&r, &payload, &n), RAFTLOCK_ETOOBIG);
	frame_reader_close(&r);
}

static void test_largest_length_is_accepted(void **state)
{
	struct frame_reader r;
	uint8_t buf[FRAME_HEADER_SIZE + 100];
	frame_put_header(buf, 100);
	memset(buf + FRAME_HEADER_SIZE, 0xab, 100);
	frame_reader_init(&r, 100);
	assert_int_equal(frame_reader_feed(&r, buf, sizeof buf), 0);
	expect_frame(&r, buf + FRAME_HEADER_SIZE, 100);
	frame_reader_close(&r);
}

static void test_truncated_frame_waits(void **state)
{
	struct frame_reader r;
	uint8_t buf[FRAME_HEADER_SIZE + 10];
	frame_make(buf, "abcdefghij", 10);
	frame_reader_init(&r, 64);
	expect_nothing(&r);
	assert_int_equal(frame_reader_feed(&r, buf, sizeof buf - 1), 0);
	expect_nothing(&r);
	expect_nothing(&r);
	assert_int_equal(frame_reader_feed(&r, buf + sizeof buf - 1, 1), 0);
	expect_frame(&r, "abcdefghij", 10);
	expect_nothing(&r);
	frame_reader_close(&r);
}

/* frame_reader_ready says whether next would hand out a frame, without
 * taking it: not for a header alone, a frame one byte short or a length
 * above the bound; yes once whole, and again for the frame behind it. */
static void test_ready_without_taking(void **state)
{
	(void)state;
	struct frame_reader r;
	uint8_t buf[2 * (FRAME_HEADER_SIZE + 3)];
	frame_make(buf, "abc", 3);
	frame_make(buf + FRAME_HEADER_SIZE + 3, "def", 3);
	frame_reader_init(&r, 64);
	assert_false(frame_reader_ready(&r));
	assert_int_equal(frame_reader_feed(&r, buf, FRAME_HEADER_SIZE + 2), 0);
	assert_false(frame_reader_ready(&r));
	assert_int_equal(frame_reader_feed(&r, buf + FRAME_HEADER_SIZE + 2, sizeof buf - 7), 0);
	assert_true(frame_reader_ready(&r));
	assert_true(frame_reader_ready(&r)); /* took nothing */
	expect_frame(&r, "abc", 3);
	assert_false(frame_reader_ready(&r)); /* "def" lacks a byte */
	assert_int_equal(frame_reader_feed(&r, buf + sizeof buf - 1, 1), 0);
	assert_true(frame_reader_ready(&r));
	expect_frame(&r, "def", 3);
	assert_false(frame_reader_ready(&r));
	uint8_t big[FRAME_HEADER_SIZE + 65];
	memset(big, 0, sizeof big);
	frame_put_header(big, 65);
	assert_int_equal(frame_reader_feed(&r, big, sizeof big), 0);
	assert_false(frame_reader_ready(&r));
	const uint8_t *p;
	size_t n;
	assert_int_equal(frame_reader_next(&r, &p, &n), RAFTLOCK_ETOOBIG);
	frame_reader_close(&r);
}

/* Payloads stay valid until the next feed, across further frame_reader_next
 * calls, also after the last buffered frame was handed out. */
static void test_payloads_valid_until_next_feed(void **state)
{
	struct stream s;
	struct frame_reader r;
	const uint8_t *payload[MAX_FRAMES];
	size_t n[MAX_FRAMES];
	stream_build(&s);
	frame_reader_init(&r, BIG_PAYLOAD);
	assert_int_equal(frame_reader_feed(&r, s.bytes, s.len), 0);
	for (size_t i = 0; i < s.n_frames; i++)
		assert_int_equal(frame_reader_next(&r, &payload[i], &n[i]), 1);
	expect_nothing(&r);
	for (size_t i = 0; i < s.n_frames; i++) {
		assert_int_equal(n[i], s.payload_len[i]);
		if (n[i] > 0)
			assert_memory_equal(payload[i], s.bytes + s.payload_off[i], n[i]);
	}
	frame_reader_close(&r);
	free(s.bytes);
}

static void test_empty_feed_and_reuse(void **state)
{
	struct frame_reader r;
	uint8_t buf[FRAME_HEADER_SIZE + 2];
	frame_make(buf, "ok", 2);
	frame_reader_init(&r, 8);
	assert_int_equal(frame_reader_feed(&r, NULL, 0), 0);
	expect_nothing(&r);
	/* A closed reader may be initialized and used again. */
	for (int round = 0; round < 2; round++) {
		assert_int_equal(frame_reader_feed(&r, buf, sizeof buf), 0);
		expect_frame(&r, "ok", 2);
		frame_reader_close(&r);
		frame_reader_init(&r, 8);
	}
	frame_reader_close(&r);
}

/* Between frames, a buffer a large frame grew goes back; a small one and
 * a frame still arriving stay. */
static void test_trim_between_frames(void **state)
{
	struct frame_reader r;
	size_t big = 2 * FRAME_READER_KEEP;
	uint8_t *buf = calloc(1, FRAME_HEADER_SIZE + big);
	assert_non_null(buf);
	frame_put_header(buf, (uint32_t)big);
	frame_reader_init(&r, RAFTLOCK_FRAME_MAX);
	assert_int_equal(frame_reader_feed(&r, buf, FRAME_HEADER_SIZE + big - 1), 0);
	frame_reader_trim(&r); /* a frame is arriving: kept */
	assert_true(r.cap > FRAME_READER_KEEP);
	assert_int_equal(frame_reader_feed(&r, buf + FRAME_HEADER_SIZE + big - 1, 1), 0);
	expect_frame(&r, buf + FRAME_HEADER_SIZE, big);
	expect_nothing(&r);
	frame_reader_trim(&r);
	assert_null(r.buf);
	assert_int_equal(r.cap, 0);
	/* and it reads on */
	frame_make(buf, "ok", 2);
	assert_int_equal(frame_reader_feed(&r, buf, FRAME_HEADER_SIZE + 2), 0);
	expect_frame(&r, "ok", 2);
	frame_reader_trim(&r); /* a small buffer stays */
	assert_non_null(r.buf);
	frame_reader_close(&r);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_byte_at_a_time),
		cmocka_unit_test(test_every_two_way_split),
		cmocka_unit_test(test_zero_length_frame),
		cmocka_unit_test(test_header_is_big_endian),
		cmocka_unit_test(test_too_big_before_payload),
		cmocka_unit_test(test_largest_length_is_accepted),
		cmocka_unit_test(test_truncated_frame_waits),
		cmocka_unit_test(test_payloads_valid_until_next_feed),
		cmocka_unit_test(test_empty_feed_and_reuse),
		cmocka_unit_test(test_trim_between_frames),
		cmocka_unit_test(test_ready_without_taking),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
