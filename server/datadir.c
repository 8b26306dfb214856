/* datadir.c: see datadir.h. */
#include "datadir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "dir_sync.h"
#include "log.h"
#include "raftlock.h"

void datadir_path(char *out, size_t len, const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	if (a + 1 + b >= len)
		log_fatal("path %s/%s is too long", dir, name);
	memcpy(out, dir, a);
	out[a] = '/';
	memcpy(out + a + 1, name, b + 1);
}

static int read_small(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return -1;
	size_t got = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[got] = '\0';
	return 0;
}

int datadir_write_file(const char *path, const void *buf, size_t len)
{
	char tmp[DATADIR_PATH_MAX + 8];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0640);
	if (fd < 0)
		return -1;
	const char *p = buf;
	size_t done = 0;
	while (done < len) {
		ssize_t w = write(fd, p + done, len - done);
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	int ok = done == len && fsync(fd) == 0;
	int saved = errno;
	close(fd);
	if (!ok || rename(tmp, path) != 0) {
		unlink(tmp);
		errno = ok ? errno : saved;
		return -1;
	}
	return dir_sync_of(path);
}

static int write_small(const char *path, const char *text)
{
	return datadir_write_file(path, text, strlen(text));
}

/* Counts the entries of the directory at path, and those of them whose
 * name does not start with prefix; false when it cannot be read. */
static bool dir_count(const char *path, const char *prefix, unsigned *all, unsigned *others)
{
	uv_fs_t req;
	uv_dirent_t ent;
	*all = *others = 0;
	if (uv_fs_scandir(NULL, &req, path, 0, NULL) < 0) {
		uv_fs_req_cleanup(&req);
		return false;
	}
	while (uv_fs_scandir_next(&req, &ent) != UV_EOF) {
		(*all)++;
		*others += strncmp(ent.name, prefix, strlen(prefix)) != 0;
	}
	uv_fs_req_cleanup(&req);
	return true;
}

bool datadir_has_files(const char *path)
{
	unsigned all, others;
	return dir_count(path, "", &all, &others) && all > 0;
}

bool datadir_raft_blank(const char *raft_dir)
{
	unsigned all, others;
	return dir_count(raft_dir, "open-", &all, &others) && others == 0;
}

/* One raftlockd per data directory: a second one would write into the
 * first one's raft log. The lock lasts as long as the process (the file
 * descriptor is never closed; the kernel drops the lock at exit). */
int datadir_lock(const char *data_dir, int *fd_out, char *err, size_t errlen)
{
	char path[DATADIR_PATH_MAX], pid[32] = "";
	datadir_path(path, sizeof path, data_dir, "LOCK");
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return RAFTLOCK_EIO;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		ssize_t n = read(fd, pid, sizeof pid - 1);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		snprintf(err, errlen, "%s: the data directory is in use by another raftlockd%s%s",
			 path, pid[0] ? " with pid " : "", pid);
		close(fd);
		return RAFTLOCK_EDATA;
	}
	int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len)
		log_warn("%s: could not record the pid", path);
	*fd_out = fd;
	return 0;
}

void datadir_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* releases the flock */
}

/* The identity file ties a data directory to one cluster and node id, so a
 * directory copied from another cluster or node is refused at start. */
int datadir_check_identity(const char *data_dir, const char *cluster, uint64_t id,
			   const char *raft_dir, char *err, size_t errlen)
{
	char path[DATADIR_PATH_MAX], want[256], have[256];
	datadir_path(path, sizeof path, data_dir, "IDENTITY");
	snprintf(want, sizeof want, "cluster=%s\nnode=%llu\n", cluster, (unsigned long long)id);
	if (read_small(path, have, sizeof have) == 0) {
		if (strcmp(have, want) != 0) {
			snprintf(err, errlen,
				 "%s belongs to another cluster or node (it says \"%.*s\", "
				 "this node is cluster=%s node=%llu)",
				 path, (int)strcspn(have, "\n") + 0, have, cluster,
				 (unsigned long long)id);
			return RAFTLOCK_EDATA;
		}
		return 0;
	}
	if (datadir_has_files(raft_dir)) {
		snprintf(err, errlen,
			 "%s is missing but %s holds a raft log: "
			 "not a data directory of this raftlockd",
			 path, raft_dir);
		return RAFTLOCK_EDATA;
	}
	if (write_small(path, want) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return RAFTLOCK_EIO;
	}
	return 0;
}

/* LMDB is written with MDB_NOSYNC: trust it only after a clean shutdown or
 * when only the process died (same kernel boot); otherwise rebuild it from
 * the raft snapshot and log. */
int datadir_prepare_state(const char *state_dir, char *err, size_t errlen)
{
	char clean[DATADIR_PATH_MAX], bootf[DATADIR_PATH_MAX], mdb[DATADIR_PATH_MAX],
		lockf[DATADIR_PATH_MAX], boot[128] = "", last[128] = "";
	datadir_path(clean, sizeof clean, state_dir, "CLEAN");
	datadir_path(bootf, sizeof bootf, state_dir, "BOOT_ID");
	datadir_path(mdb, sizeof mdb, state_dir, "data.mdb");
	datadir_path(lockf, sizeof lockf, state_dir, "lock.mdb");
	if (mkdir(state_dir, 0750) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", state_dir, strerror(errno));
		return RAFTLOCK_EIO;
	}
	read_small("/proc/sys/kernel/random/boot_id", boot, sizeof boot);
	read_small(bootf, last, sizeof last);
	bool trusted = access(clean, F_OK) == 0 || (boot[0] != '\0' && strcmp(boot, last) == 0);
	if (access(mdb, F_OK) == 0 && !trusted) {
		log_warn("%s may be stale after an OS crash: rebuilding it from the raft log", mdb);
		unlink(mdb);
		unlink(lockf);
	}
	/* Valid for one start only, and the removal must be on disk before
	 * LMDB's unsynced writes can be: a marker that came back after an OS
	 * crash would make a torn LMDB trusted. */
	if (unlink(clean) == 0 && dir_sync_of(clean) != 0) {
		snprintf(err, errlen, "%s: %s", state_dir, strerror(errno));
		return RAFTLOCK_EIO;
	}
	if (boot[0] != '\0' && write_small(bootf, boot) != 0) {
		snprintf(err, errlen, "%s: %s", bootf, strerror(errno));
		return RAFTLOCK_EIO;
	}
	return 0;
}

int datadir_open(const char *data_dir, const char *cluster, uint64_t id, char *raft_dir,
		 char *state_dir, int *lock_fd, char *err, size_t errlen)
{
	int rv;
	datadir_path(raft_dir, DATADIR_PATH_MAX, data_dir, "raft");
	datadir_path(state_dir, DATADIR_PATH_MAX, data_dir, "state");
	if ((mkdir(data_dir, 0750) != 0 && errno != EEXIST) ||
	    (mkdir(raft_dir, 0750) != 0 && errno != EEXIST)) {
		snprintf(err, errlen, "%s: %s", data_dir, strerror(errno));
		return RAFTLOCK_EIO;
	}
	int fd;
	if ((rv = datadir_lock(data_dir, &fd, err, errlen)) != 0)
		return rv;
	if ((rv = datadir_check_identity(data_dir, cluster, id, raft_dir, err, errlen)) != 0 ||
	    (rv = datadir_prepare_state(state_dir, err, errlen)) != 0) {
		datadir_unlock(fd);
		return rv;
	}
	*lock_fd = fd;
	return 0;
}

int datadir_mark_clean(const char *data_dir)
{
	char state_dir[DATADIR_PATH_MAX], clean[DATADIR_PATH_MAX];
	datadir_path(state_dir, sizeof state_dir, data_dir, "state");
	datadir_path(clean, sizeof clean, state_dir, "CLEAN");
	return write_small(clean, "clean\n") == 0 ? 0 : RAFTLOCK_EIO;
}

int datadir_incarnation(const char *data_dir, uint64_t *out, char *err, size_t errlen)
{
	char path[DATADIR_PATH_MAX], text[64] = "";
	datadir_path(path, sizeof path, data_dir, "INCARNATION");
	unsigned long long v = 0;
	if (read_small(path, text, sizeof text) == 0 && sscanf(text, "%llx", &v) == 1 && v != 0) {
		*out = v;
		return 0;
	}
	uint64_t r = 0;
	while (r == 0)
		if (getrandom(&r, sizeof r, 0) != sizeof r) {
			snprintf(err, errlen, "getrandom: %s", strerror(errno));
			return RAFTLOCK_EIO;
		}
	snprintf(text, sizeof text, "%016llx\n", (unsigned long long)r);
	if (write_small(path, text) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return RAFTLOCK_EIO;
	}
	*out = r;
	return 0;
}
