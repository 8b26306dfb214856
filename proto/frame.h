/*
 * frame.h: length-prefixed framing of the client protocol. No I/O.
 *
 * A frame is a 4-byte big-endian payload length followed by the payload (one
 * encoded Envelope). A reader accumulates bytes as they arrive and hands out
 * whole frames; a length above the reader's bound is an error, reported
 * before any of the payload is buffered.
 */
#ifndef RAFTLOCK_FRAME_H
#define RAFTLOCK_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FRAME_HEADER_SIZE 4
/* What a reader keeps between frames (frame_reader_trim). */
#define FRAME_READER_KEEP (256u << 10)

struct frame_reader {
	uint8_t *buf;
	size_t len;   /* bytes buffered */
	size_t start; /* bytes of buf already handed out as frames */
	size_t cap;
	size_t max_payload;
};

/* Initializes an empty reader that accepts payloads of up to max_payload
 * bytes. Never fails: memory is taken on the first feed. */
void frame_reader_init(struct frame_reader *r, size_t max_payload);

/* Frees the reader's buffer. The reader may be initialized again. */
void frame_reader_close(struct frame_reader *r);

/* Appends n bytes (copied). Returns 0, or RAFTLOCK_ENOMEM leaving the reader
 * as it was. */
int frame_reader_feed(struct frame_reader *r, const void *data, size_t n);

/*
 * Takes the next whole frame. Returns 1 and sets *payload and *n (borrowed: valid
 * until the next feed or close), 0 when more bytes are needed, or
 * RAFTLOCK_ETOOBIG when the next frame announces a length above the bound
 * (the reader is then unusable: close the connection).
 */
int frame_reader_next(struct frame_reader *r, const uint8_t **payload, size_t *n);

/* Between frames (nothing buffered), frees a buffer that a large frame
 * grew above FRAME_READER_KEEP: a connection that idles after one does
 * not hold that frame's size for life. Payloads handed out before are
 * no longer valid. */
void frame_reader_trim(struct frame_reader *r);

/* Whether a whole frame is buffered: frame_reader_next() would hand it
 * out. */
bool frame_reader_ready(const struct frame_reader *r);

/* Bytes buffered and not handed out as frames yet (0: the reader stands
 * between frames). */
size_t frame_reader_pending(const struct frame_reader *r);

/* Writes the 4-byte header for a payload of n bytes. */
void frame_put_header(uint8_t out[FRAME_HEADER_SIZE], uint32_t n);

#endif
