/* frame.c: see frame.h. */
#include "grow.h"
#include "frame.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "raftlock.h"

void frame_reader_init(struct frame_reader *r, size_t max_payload)
{
	memset(r, 0, sizeof *r);
	r->max_payload = max_payload;
}

void frame_reader_close(struct frame_reader *r)
{
	free(r->buf);
	r->buf = NULL;
	r->len = r->start = r->cap = 0;
}

int frame_reader_feed(struct frame_reader *r, const void *data, size_t n)
{
	if (n == 0)
		return 0;
	/* Drop the frames already handed out before growing. */
	if (r->start > 0) {
		memmove(r->buf, r->buf + r->start, r->len - r->start);
		r->len -= r->start;
		r->start = 0;
	}
	if (grow(&r->buf, &r->cap, r->len + n, 4096, 1) != 0)
		return RAFTLOCK_ENOMEM;
	memcpy(r->buf + r->len, data, n);
	r->len += n;
	return 0;
}

/* The payload size the next frame announces: false while its header is
 * not all there. */
static bool next_size(const struct frame_reader *r, uint32_t *size)
{
	if (r->len - r->start < FRAME_HEADER_SIZE)
		return false;
	const uint8_t *p = r->buf + r->start;
	*size = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
	return true;
}

int frame_reader_next(struct frame_reader *r, const uint8_t **payload, size_t *n)
{
	uint32_t size;
	if (!next_size(r, &size))
		return 0;
	if (size > r->max_payload)
		return RAFTLOCK_ETOOBIG;
	if (!frame_reader_ready(r))
		return 0;
	const uint8_t *p = r->buf + r->start;
	*payload = p + FRAME_HEADER_SIZE;
	*n = size;
	r->start += FRAME_HEADER_SIZE + size;
	if (r->start == r->len)
		r->start = r->len = 0;
	return 1;
}

void frame_put_header(uint8_t out[FRAME_HEADER_SIZE], uint32_t n)
{
	out[0] = (uint8_t)(n >> 24);
	out[1] = (uint8_t)(n >> 16);
	out[2] = (uint8_t)(n >> 8);
	out[3] = (uint8_t)n;
}

void frame_reader_trim(struct frame_reader *r)
{
	if (r->len == r->start && r->cap > FRAME_READER_KEEP)
		frame_reader_close(r);
}

bool frame_reader_ready(const struct frame_reader *r)
{
	uint32_t size;
	return next_size(r, &size) && size <= r->max_payload &&
	       r->len - r->start - FRAME_HEADER_SIZE >= size;
}

size_t frame_reader_pending(const struct frame_reader *r)
{
	return r->len - r->start;
}
