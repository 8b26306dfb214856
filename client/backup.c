/* backup.c: raftlock_snapshot_save() (raftlock.h). The image travels in
 * chunks of one image the leader holds (server/backup.h); a change of
 * leader loses it, and the save starts over. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "client.h"
#include "dir_sync.h"
#include "errmsg.h"
#include "image.h"
#include "introspect.h"

#define SAVE_ATTEMPTS 3
/* Tries at a name of its own for the temporary file beside the image. */
#define SAVE_TMP_TRIES 8

/* Creates the temporary file beside path under a random name of its own
 * (two saves to one path at once must not write into each other's file),
 * readable by its owner only; its name goes to tmp ("" when getrandom()
 * failed). Returns the descriptor, -1 (errno) or -2 when the name does not
 * fit. */
static int open_beside(const char *path, char *tmp, size_t len)
{
	for (int i = 0; i < SAVE_TMP_TRIES; i++) {
		unsigned long long r;
		tmp[0] = '\0'; /* a failure here has no name to tell */
		if (getrandom(&r, sizeof r, 0) != sizeof r)
			return -1;
		if (snprintf(tmp, len, "%s.%016llx.tmp", path, r) >= (int)len)
			return -2;
		int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	return -1;
}

/* One request for a chunk of image at offset (image 0: a new image). */
static int read_chunk(raftlock_client *c, uint64_t image, uint64_t offset,
		      Raftlock__Envelope **reply)
{
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__SnapshotReadRequest req = RAFTLOCK__SNAPSHOT_READ_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_SNAPSHOT_READ;
	env.snapshot_read = &req;
	req.image = image;
	req.offset = offset;
	int rv = introspect_call(c, &env, RAFTLOCK__RESPONSE__PAYLOAD_SNAPSHOT_CHUNK, reply);
	if (rv == 0) {
		const Raftlock__SnapshotChunk *ch = (*reply)->response->snapshot_chunk;
		if (ch->offset != offset || ch->offset + ch->data.len > ch->size ||
		    (image != 0 && ch->image != image) ||
		    (ch->data.len == 0 && offset < ch->size)) {
			raftlock__envelope__free_unpacked(*reply, NULL);
			rv = RAFTLOCK_EPROTO;
		}
	}
	return rv;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Fetches one image into fd from its start, checking its checksum on the
 * way (over every byte but the last IMAGE_SUM_SIZE, which it must equal). */
static int fetch(raftlock_client *c, int fd, const char *tmp, uint64_t *index)
{
	uint64_t image = 0, offset = 0, size = 0;
	struct image_sum sum;
	image_sum_begin(&sum);
	uint8_t tail[IMAGE_SUM_SIZE];
	do {
		Raftlock__Envelope *reply;
		int rv = read_chunk(c, image, offset, &reply);
		if (rv != 0)
			return rv;
		const Raftlock__SnapshotChunk *ch = reply->response->snapshot_chunk;
		if (image == 0) {
			image = ch->image;
			size = ch->size;
			*index = ch->index;
		}
		if (ch->size != size || size < IMAGE_MIN_SIZE) {
			raftlock__envelope__free_unpacked(reply, NULL);
			return RAFTLOCK_EPROTO;
		}
		const uint8_t *p = ch->data.data;
		size_t n = ch->data.len;
		uint64_t body = size - IMAGE_SUM_SIZE; /* bytes the checksum covers */
		size_t covered = 0;                    /* bytes of this chunk before the checksum */
		if (offset < body)
			covered = body - offset < n ? (size_t)(body - offset) : n;
		image_sum_add(&sum, p, covered);
		for (size_t i = covered; i < n; i++)
			tail[offset + i - body] = p[i];
		if (write_all(fd, p, n) != 0) {
			raftlock__envelope__free_unpacked(reply, NULL);
			return errmsg_set(&c->t, RAFTLOCK_EIO, strerror(errno), "snapshot save: %s",
					  tmp);
		}
		offset += n;
		raftlock__envelope__free_unpacked(reply, NULL);
	} while (offset < size);
	if (image_sum_stored(tail, IMAGE_SUM_SIZE) != image_sum_end(&sum))
		return RAFTLOCK_EDATA;
	return 0;
}

RAFTLOCK_API int raftlock_snapshot_save(raftlock_client *c, const char *path, uint64_t *index)
{
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	if (path == NULL)
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, NULL, "snapshot save: no path");
	char tmp[4096] = ""; /* no name yet when getrandom() fails */
	int fd = open_beside(path, tmp, sizeof tmp);
	if (fd == -2)
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, NULL, "snapshot save: path too long");
	if (fd < 0)
		return errmsg_set(&c->t, RAFTLOCK_EIO, strerror(errno), "snapshot save: %s",
				  tmp[0] != '\0' ? tmp : path);
	uint64_t at = 0;
	int rv = RAFTLOCK_ENOTFOUND;
	for (int attempt = 0; attempt < SAVE_ATTEMPTS && rv == RAFTLOCK_ENOTFOUND; attempt++) {
		if (attempt > 0 && (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0)) {
			rv = errmsg_set(&c->t, RAFTLOCK_EIO, strerror(errno), "snapshot save: %s",
					tmp);
			break;
		}
		rv = fetch(c, fd, tmp, &at);
	}
	if (rv == 0 && fsync(fd) != 0)
		rv = errmsg_set(&c->t, RAFTLOCK_EIO, strerror(errno), "snapshot save: %s", tmp);
	if (close(fd) != 0 && rv == 0)
		rv = errmsg_set(&c->t, RAFTLOCK_EIO, strerror(errno), "snapshot save: %s", tmp);
	if (rv == 0 && rename(tmp, path) != 0)
		rv = errmsg_set(&c->t, RAFTLOCK_EIO, strerror(errno), "snapshot save: %s", path);
	if (rv != 0) {
		unlink(tmp);
		if (rv == RAFTLOCK_EDATA)
			return errmsg_set(&c->t, rv, NULL,
					  "snapshot save: the image arrived damaged (checksum)");
		if (rv != RAFTLOCK_EIO)
			return errmsg_set(&c->t, rv, NULL, "snapshot save");
		return rv;
	}
	if (dir_sync_of(path) != 0)
		return errmsg_set(
			&c->t, RAFTLOCK_EIO, strerror(errno),
			"snapshot save: %s is written, but its directory could not be synced",
			path);
	if (index != NULL)
		*index = at;
	return 0;
}
