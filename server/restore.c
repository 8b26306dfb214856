/* restore.c: see restore.h. */
#include "restore.h"

#include <dirent.h>
#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "datadir.h"
#include "feature_level.h"
#include "image.h"
#include "log.h"
#include "raftlock.h"
#include "store_fail.h"

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
	char raft_dir[DATADIR_PATH_MAX], state[DATADIR_PATH_MAX];
	datadir_path(raft_dir, sizeof raft_dir, data_dir, "raft");
	datadir_path(state, sizeof state, data_dir, "state/data.mdb");
	/* A state without a raft log (a log removed by hand, a restore cut
	 * short by a crash) would be overwritten, and not put back if the
	 * restore then failed (restore_undo keeps what was there). */
	struct stat sb;
	const char *held = datadir_has_files(raft_dir) ? "a raft log"
			   : lstat(state, &sb) == 0    ? "a state (state/data.mdb)"
						       : NULL;
	if (held == NULL)
		return 0;
	snprintf(err, errlen,
		 "--restore creates a new cluster, but %s already holds %s: give it an empty data "
		 "directory (or start without --restore)",
		 data_dir, held);
	return RAFTLOCK_EDATA;
}

/* What a restore makes in the data directory, in the order it makes
 * them (undone in reverse). raft/ holds nothing before a restore
 * (restore_check_target): whatever is in it then is the restore's.
 * INCARNATION is not among them: a --restore --join start may have
 * claimed its id with it (join.h), and a claim holds for it alone. */
static const char *const made_paths[] = {
	"",           "raft",          "LOCK",           "IDENTITY",
	"state",      "state/BOOT_ID", "state/data.mdb", "state/lock.mdb",
	RESTORE_BASE,
};
#define MADE_PATHS (sizeof made_paths / sizeof made_paths[0])
#define CLEAN_PATH "state/CLEAN" /* removed at every start (datadir.h) */

/* Free bytes of the file system that holds path, or would: the closest
 * directory above it that exists (the data directory may not yet).
 * UINT64_MAX when unknown. */
static uint64_t free_under(const char *path)
{
	char p[DATADIR_PATH_MAX];
	snprintf(p, sizeof p, "%s", path);
	struct statvfs sv;
	while (statvfs(p, &sv) != 0) {
		char *slash = strrchr(p, '/');
		if (errno != ENOENT || strcmp(p, ".") == 0)
			return UINT64_MAX;
		if (slash == NULL)
			snprintf(p, sizeof p, ".");
		else
			slash[slash == p] = '\0'; /* "/x" -> "/" */
	}
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

static bool exists(const char *data_dir, const char *name)
{
	char path[DATADIR_PATH_MAX];
	struct stat sb;
	datadir_path(path, sizeof path, data_dir, name);
	return lstat(*name ? path : data_dir, &sb) == 0;
}

/* The one-line answer to a restore for which the disk is full. */
static void say_full(const struct restore_undo *u, const char *cause, char *err, size_t errlen)
{
	char was[512];
	snprintf(was, sizeof was, "%s", cause);
	snprintf(err, errlen,
		 "no room to restore into %s: the disk is full (the restore needs about %llu "
		 "MB, %llu MB %s free%s%s): nothing restored, the data directory is as it "
		 "was; free space there and start again with --restore",
		 u->data_dir, (unsigned long long)((u->need + (1u << 20) - 1) >> 20),
		 (unsigned long long)(u->free_bytes >> 20), was[0] ? "were" : "are",
		 was[0] ? "; " : "", was);
}

/* store_fail_divert()'s function while u is armed: a write to the store
 * failed (store_fail.h), which has no error to hand back. Undoes the
 * restore and exits as a refused one, status 1, with LMDB's error and
 * what to do. */
static void store_failed(const struct store_fail *f, void *arg)
{
	struct restore_undo *u = arg;
	char err[1024];
	snprintf(err, sizeof err, "%s/data.mdb: lmdb %s: %s", f->dir, f->what, mdb_strerror(f->rc));
	/* restore_undo words a full disk (RAFTLOCK_ENOSPC, or RAFTLOCK_EIO
	 * with hardly any room left: a short write) itself */
	bool map_full = f->rc == MDB_MAP_FULL;
	int rv = f->rc == ENOSPC || f->rc == EDQUOT ? RAFTLOCK_ENOSPC
		 : f->rc == EIO || f->rc == EROFS   ? RAFTLOCK_EIO
		 : map_full                         ? RAFTLOCK_ELIMIT
						    : RAFTLOCK_EINTERNAL;
	rv = restore_undo(u, rv, err, sizeof err);
	char todo[400] = "";
	if (map_full)
		snprintf(todo, sizeof todo,
			 "; the image (%llu MB) does not fit in this node's LMDB map (map-size %zu "
			 "MB, full at %llu MB of records): raise --map-size (map-size in the "
			 "configuration file) to at least that of the cluster it was saved from, "
			 "then start again with --restore",
			 (unsigned long long)(u->image_bytes >> 20), f->map_size >> 20,
			 (unsigned long long)(f->record_bytes >> 20));
	else if (rv == RAFTLOCK_EIO)
		snprintf(todo, sizeof todo,
			 "; the disk failed the write: check it (dmesg), then start again with "
			 "--restore");
	log_fatal_exit(1, "%s%s", err, todo);
}

void restore_note(const char *data_dir, const struct restore_image *img, struct restore_undo *u)
{
	memset(u, 0, sizeof *u);
	u->data_dir = data_dir;
	for (size_t i = 0; i < MADE_PATHS; i++)
		u->existed |= (unsigned)exists(data_dir, made_paths[i]) << i;
	u->had_clean = exists(data_dir, CLEAN_PATH);
	u->image_bytes = img->len;
	u->need = RESTORE_ROOM(img->len);
	u->free_bytes = free_under(data_dir);
	u->armed = true;
	store_fail_divert(store_failed, u);
}

/* u no longer undoes a failure. */
static void disarm(struct restore_undo *u)
{
	u->armed = false;
	store_fail_divert(NULL, NULL);
}

int restore_check_room(struct restore_undo *u, char *err, size_t errlen)
{
	if (u->free_bytes >= u->need)
		return 0;
	say_full(u, "", err, errlen);
	disarm(u); /* nothing written, nothing to undo */
	return RAFTLOCK_ENOSPC;
}

/* Removes every entry of the directory path (raft/: files only). */
static void empty_dir(const char *path)
{
	DIR *d = opendir(path);
	if (d == NULL)
		return;
	char file[DATADIR_PATH_MAX];
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		datadir_path(file, sizeof file, path, e->d_name);
		if (unlink(file) != 0)
			log_warn("restore undone: cannot remove %s: %s", file, strerror(errno));
	}
	closedir(d);
}

int restore_undo(struct restore_undo *u, int rv, char *err, size_t errlen)
{
	if (!u->armed)
		return rv;
	disarm(u);
	/* LMDB reports a short write as EIO, and a write of at most a commit's
	 * chunk (MDB_COMMIT_PAGES pages) came short: less than that is left. */
	bool full = rv == RAFTLOCK_ENOSPC ||
		    (rv == RAFTLOCK_EIO && free_under(u->data_dir) < RESTORE_FULL_BELOW);
	char path[DATADIR_PATH_MAX];
	datadir_path(path, sizeof path, u->data_dir, "raft");
	empty_dir(path);
	for (size_t i = MADE_PATHS; i-- > 0;) {
		if (u->existed & 1u << i)
			continue;
		datadir_path(path, sizeof path, u->data_dir, made_paths[i]);
		const char *p = *made_paths[i] ? path : u->data_dir;
		if (remove(p) != 0 && errno != ENOENT)
			log_warn("restore undone: cannot remove %s: %s", p, strerror(errno));
	}
	if (u->had_clean && datadir_mark_clean(u->data_dir) != 0)
		log_warn("restore undone: cannot write %s/%s again", u->data_dir, CLEAN_PATH);
	char cause[512];
	snprintf(cause, sizeof cause, "%s", err);
	if (full) {
		say_full(u, cause, err, errlen);
		return RAFTLOCK_ENOSPC;
	}
	snprintf(err, errlen, "%s: nothing restored, the data directory is as it was", cause);
	return rv;
}

void restore_done(struct restore_undo *u)
{
	if (u->armed)
		disarm(u);
}

int restore_install(const char *data_dir, struct store *st, struct fsm *f,
		    const struct restore_image *img, char *err, size_t errlen)
{
	MDB_txn *txn;
	if (store_load_begin(st, img->buf, img->len, &txn) != 0) {
		const char *why = store_load_error(st);
		snprintf(err, errlen, "the image does not load (damaged records%s%s)",
			 *why ? ": " : "", why);
		return RAFTLOCK_EDATA;
	}
	fsm_restore_base(f, txn, img->sum);
	int rv = store_commit_room(txn);
	if (rv != 0) {
		snprintf(err, errlen, "%s/state/data.mdb: %s", data_dir,
			 strerror(rv == RAFTLOCK_ENOSPC ? ENOSPC : EIO));
		return rv;
	}
	void *base;
	size_t len;
	if (store_dump(st, malloc, &base, &len) != 0) {
		snprintf(err, errlen, "out of memory writing the restored base");
		return RAFTLOCK_ENOMEM;
	}
	char path[DATADIR_PATH_MAX];
	datadir_path(path, sizeof path, data_dir, RESTORE_BASE);
	rv = datadir_write_file(path, base, len);
	int saved = errno;
	free(base);
	if (rv != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(saved));
		return saved == ENOSPC || saved == EDQUOT ? RAFTLOCK_ENOSPC : RAFTLOCK_EIO;
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
