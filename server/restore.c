/* restore.c: see restore.h. */
#include "restore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datadir.h"
#include "feature_level.h"
#include "image.h"
#include "log.h"
#include "raftlock.h"

#define RESTORE_BASE "RESTORE-BASE"

static int read_file(const char *path, void **buf, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return RAFTLOCK_EIO;
	}
	long size = -1;
	if (fseek(f, 0, SEEK_END) == 0)
		size = ftell(f);
	if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
		snprintf(err, errlen, "%s: cannot tell its size", path);
		fclose(f);
		return RAFTLOCK_EIO;
	}
	void *b = malloc(size > 0 ? (size_t)size : 1);
	if (b == NULL) {
		fclose(f);
		snprintf(err, errlen, "%s: out of memory for %ld bytes", path, size);
		return RAFTLOCK_ENOMEM;
	}
	size_t got = fread(b, 1, (size_t)size, f);
	int failed = ferror(f);
	fclose(f);
	if (failed || got != (size_t)size) {
		free(b);
		snprintf(err, errlen, "%s: read error", path);
		return RAFTLOCK_EIO;
	}
	*buf = b;
	*len = got;
	return 0;
}

int restore_read(const char *path, struct restore_image *img, char *err, size_t errlen)
{
	memset(img, 0, sizeof *img);
	int rv = read_file(path, &img->buf, &img->len, err, errlen);
	if (rv != 0)
		return rv;
	uint32_t level = 0;
	if (img->len >= IMAGE_MAGIC_SIZE && store_image_magic_newer(img->buf)) {
		snprintf(err, errlen,
			 "%s is a snapshot image of format %.8s, newer than this raftlockd reads: "
			 "restore it with the build that saved it, or a later one: nothing "
			 "restored",
			 path, (const char *)img->buf);
		restore_image_free(img);
		return RAFTLOCK_EDATA;
	}
	if (!image_sum_ok(img->buf, img->len) ||
	    store_image_index(img->buf, img->len, &img->index) != 0 ||
	    store_image_feature_level(img->buf, img->len, &level) != 0) {
		snprintf(err, errlen,
			 "%s is not a whole raftlock snapshot image (%zu bytes; truncated, "
			 "damaged or another kind of file: its checksum does not match): "
			 "nothing restored",
			 path, img->len);
		restore_image_free(img);
		return RAFTLOCK_EDATA;
	}
	img->sum = image_sum_stored(img->buf, img->len);
	/* A newer build's state: this build would run it, then refuse to
	 * start on it (node.c checks the level at every start). */
	if (features_recorded(level) > FEATURE_LEVEL) {
		snprintf(err, errlen,
			 "%s comes from a cluster at feature level %u; this raftlockd supports "
			 "level %u: restore it with a build of level %u or more: nothing restored",
			 path, features_recorded(level), FEATURE_LEVEL, features_recorded(level));
		restore_image_free(img);
		return RAFTLOCK_EDATA;
	}
	return 0;
}

void restore_image_free(struct restore_image *img)
{
	free(img->buf);
	img->buf = NULL;
	img->len = 0;
}

int restore_check_target(const char *data_dir, char *err, size_t errlen)
{
	char raft_dir[DATADIR_PATH_MAX];
	datadir_path(raft_dir, sizeof raft_dir, data_dir, "raft");
	if (!datadir_has_files(raft_dir))
		return 0;
	snprintf(err, errlen,
		 "--restore creates a new cluster, but %s already holds a raft log: give it an "
		 "empty data directory (or start without --restore)",
		 raft_dir);
	return RAFTLOCK_EDATA;
}

int restore_install(const char *data_dir, struct store *st, struct fsm *f,
		    const struct restore_image *img, char *err, size_t errlen)
{
	if (store_load(st, img->buf, img->len) != 0) {
		const char *why = store_load_error(st);
		snprintf(err, errlen, "the image does not load (damaged records%s%s)",
			 *why ? ": " : "", why);
		return RAFTLOCK_EDATA;
	}
	fsm_restore_base(f, img->sum);
	void *base;
	size_t len;
	if (store_dump(st, malloc, &base, &len) != 0) {
		snprintf(err, errlen, "out of memory writing the restored base");
		return RAFTLOCK_ENOMEM;
	}
	char path[DATADIR_PATH_MAX];
	datadir_path(path, sizeof path, data_dir, RESTORE_BASE);
	int rv = datadir_write_file(path, base, len);
	free(base);
	if (rv != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return RAFTLOCK_EIO;
	}
	log_info("restored image %016llx (saved at index %llu, %zu bytes): a new cluster starts "
		 "from it; every session of the image has ended",
		 (unsigned long long)img->sum, (unsigned long long)img->index, img->len);
	return 0;
}

int restore_reload_base(const char *data_dir, struct store *st, char *err, size_t errlen)
{
	char path[DATADIR_PATH_MAX];
	datadir_path(path, sizeof path, data_dir, RESTORE_BASE);
	MDB_txn *txn = store_begin(st, false);
	Raftlock__Meta *m = store_get_meta(st, txn);
	bool empty = m->applied_index == 0 && m->next_token == 0 && m->restored_from == 0;
	raftlock__meta__free_unpacked(m, NULL);
	store_abort(txn);
	FILE *probe = empty ? fopen(path, "rb") : NULL;
	if (probe == NULL)
		return 0;
	fclose(probe);
	void *buf;
	size_t len;
	int rv = read_file(path, &buf, &len, err, errlen);
	if (rv != 0)
		return rv;
	/* checked whole first: the load puts records before it reaches the
	 * checksum, and a damaged file must say so, not fill the map */
	bool whole = image_sum_ok(buf, len);
	if (!whole || store_load(st, buf, len) != 0) {
		free(buf);
		const char *why = whole ? store_load_error(st) : "";
		snprintf(err, errlen,
			 "%s is damaged%s%s: the state this restored cluster started from", path,
			 *why ? ", " : "", why);
		return RAFTLOCK_EDATA;
	}
	free(buf);
	log_info("state rebuilt from %s, then the raft log", path);
	return 0;
}
