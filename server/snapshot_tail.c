/* snapshot_tail.c: see snapshot_tail.h. */
#include "snapshot_tail.h"

#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "image.h"
#include "image_pack.h"
#include "raftlock.h"

int snapshot_tail_add(struct snapshot_tail *t, uint64_t index, const void *entry, size_t n)
{
	if (n > UINT32_MAX || t->n == UINT32_MAX)
		return RAFTLOCK_ENOMEM;
	size_t need = t->len + SNAPSHOT_TAIL_ENTRY_HEAD + n;
	if (need > t->cap) {
		size_t cap = t->cap ? t->cap : 4096;
		while (cap < need)
			cap *= 2;
		uint8_t *buf = realloc(t->buf, cap);
		if (buf == NULL)
			return RAFTLOCK_ENOMEM;
		t->buf = buf;
		t->cap = cap;
	}
	uint8_t *p = t->buf + t->len;
	be_put(p, index, 8);
	be_put(p + 8, n, 4);
	memcpy(p + SNAPSHOT_TAIL_ENTRY_HEAD, entry, n);
	t->len = need;
	t->n++;
	t->last = index;
	return 0;
}

int snapshot_tail_finish(struct snapshot_tail *t, void *(*alloc)(size_t), void **out, size_t *n)
{
	uint8_t *buf = alloc(t->len + SNAPSHOT_TAIL_TRAILER);
	if (buf == NULL)
		return RAFTLOCK_ENOMEM;
	if (t->len > 0)
		memcpy(buf, t->buf, t->len);
	uint8_t *p = buf + t->len;
	be_put(p, t->n, 4);
	be_put(p + 4, t->len, 8);
	/* by words: a byte-wise sum would cost the loop fifteen times as much */
	be_put(p + 12, image_sum_words_of(buf, t->len + 12), 8);
	memcpy(p + 20, SNAPSHOT_TAIL_MAGIC, 8);
	*out = buf;
	*n = t->len + SNAPSHOT_TAIL_TRAILER;
	snapshot_tail_reset(t);
	return 0;
}

void snapshot_tail_reset(struct snapshot_tail *t)
{
	t->len = 0;
	t->n = 0;
	t->last = 0;
}

void snapshot_tail_free(struct snapshot_tail *t)
{
	free(t->buf);
	*t = (struct snapshot_tail){0};
}

int snapshot_split(const void *buf, size_t n, struct snapshot_parts *out)
{
	const uint8_t *b = buf;
	*out = (struct snapshot_parts){.image = b, .image_len = n};
	if (n >= SNAPSHOT_TAIL_TRAILER && memcmp(b + n - 8, SNAPSHOT_TAIL_MAGIC, 8) == 0) {
		const uint8_t *trailer = b + n - SNAPSHOT_TAIL_TRAILER;
		uint32_t count = (uint32_t)be_get(trailer, 4);
		uint64_t len = be_get(trailer + 4, 8);
		if (len > n - SNAPSHOT_TAIL_TRAILER)
			return RAFTLOCK_EDATA;
		const uint8_t *entries = trailer - len;
		if (image_sum_words_of(entries, len + 12) != be_get(trailer + 12, 8))
			return RAFTLOCK_EDATA;
		out->entries = entries;
		out->entries_len = len;
		out->n_entries = count;
		out->image_len = (size_t)(entries - b);
	}
	out->raw_len = out->image_len;
	if (image_is_packed(out->image, out->image_len)) {
		out->packed = true;
		if (image_pack_head(out->image, out->image_len, &out->image_index, &out->raw_len) !=
		    0)
			return RAFTLOCK_EDATA;
	} else if (store_image_index(out->image, out->image_len, &out->image_index) != 0) {
		return RAFTLOCK_EDATA;
	}
	/* Every frame inside the entries' bytes, indexes growing past the image's. */
	uint64_t last = out->image_index;
	size_t at = 0;
	for (uint32_t i = 0; i < out->n_entries; i++) {
		if (out->entries_len - at < SNAPSHOT_TAIL_ENTRY_HEAD)
			return RAFTLOCK_EDATA;
		uint64_t index = be_get(out->entries + at, 8);
		uint64_t size = be_get(out->entries + at + 8, 4);
		at += SNAPSHOT_TAIL_ENTRY_HEAD;
		if (index <= last || out->entries_len - at < size)
			return RAFTLOCK_EDATA;
		at += size;
		last = index;
	}
	if (at != out->entries_len)
		return RAFTLOCK_EDATA;
	out->index = last;
	return 0;
}

int snapshot_load(struct store *s, struct fsm *f, const struct snapshot_parts *parts,
		  const struct fsm_sink *sink)
{
	int rv = parts->packed ? image_unpack_load(s, parts->image, parts->image_len)
			       : store_load(s, parts->image, parts->image_len);
	if (rv != 0)
		return rv;
	size_t at = 0;
	for (uint32_t i = 0; i < parts->n_entries; i++) {
		const uint8_t *p = parts->entries + at;
		uint64_t index = be_get(p, 8);
		size_t size = (size_t)be_get(p + 8, 4);
		fsm_apply_raw(f, index, p + SNAPSHOT_TAIL_ENTRY_HEAD, size, sink);
		at += SNAPSHOT_TAIL_ENTRY_HEAD + size;
	}
	return 0;
}
