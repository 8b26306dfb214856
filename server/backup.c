/* backup.c: see backup.h. */
#include "backup.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "raftlock.h"

void backup_init(struct backup *b)
{
	memset(b, 0, sizeof *b);
}

static void drop(struct backup_image *img)
{
	free(img->buf);
	memset(img, 0, sizeof *img);
}

/* Frees the images read to their end and those nobody reads any more. */
static void expire(struct backup *b, uint64_t now_ms)
{
	for (int i = 0; i < BACKUP_MAX_IMAGES; i++) {
		struct backup_image *img = &b->images[i];
		if (img->id != 0 && (img->done || now_ms >= img->used_ms + BACKUP_IDLE_MS))
			drop(img);
	}
}

int backup_take(struct backup *b, struct store *st, uint64_t now_ms, uint64_t *id)
{
	expire(b, now_ms);
	struct backup_image *img = NULL;
	for (int i = 0; i < BACKUP_MAX_IMAGES && img == NULL; i++)
		if (b->images[i].id == 0)
			img = &b->images[i];
	if (img == NULL)
		return RAFTLOCK_EOVERLOAD;
	void *buf;
	size_t len;
	if (store_dump(st, malloc, &buf, &len) != 0)
		return RAFTLOCK_ENOMEM;
	uint64_t index = 0;
	store_image_index(buf, len, &index);
	/* Random, so that an id from another leader names nothing here. */
	uint64_t r = 0;
	while (r == 0)
		if (getrandom(&r, sizeof r, 0) != sizeof r)
			r = (uint64_t)(uintptr_t)buf ^ now_ms ^ len;
	*img = (struct backup_image){
		.id = r, .buf = buf, .len = len, .index = index, .used_ms = now_ms};
	*id = r;
	return 0;
}

int backup_chunk(struct backup *b, uint64_t id, uint64_t offset, uint64_t now_ms,
		 Raftlock__SnapshotChunk *out)
{
	expire(b, now_ms);
	struct backup_image *img = NULL;
	for (int i = 0; i < BACKUP_MAX_IMAGES && img == NULL; i++)
		if (id != 0 && b->images[i].id == id)
			img = &b->images[i];
	if (img == NULL)
		return RAFTLOCK_ENOTFOUND;
	if (offset > img->len)
		return RAFTLOCK_EINVAL;
	size_t n = img->len - offset < BACKUP_CHUNK_MAX ? img->len - offset : BACKUP_CHUNK_MAX;
	out->image = img->id;
	out->size = img->len;
	out->offset = offset;
	out->index = img->index;
	out->data.data = img->buf + offset;
	out->data.len = n;
	img->used_ms = now_ms;
	img->done = offset + n == img->len;
	return 0;
}

void backup_close(struct backup *b)
{
	for (int i = 0; i < BACKUP_MAX_IMAGES; i++)
		drop(&b->images[i]);
}
