/*
 * datadir.h: the data directory of one raftlockd (--data-dir): who may use
 * it and whether its LMDB state can be trusted. Layout:
 *   LOCK       flock()ed by the running raftlockd, holds its pid
 *   IDENTITY   "cluster=NAME\nnode=ID\n": the cluster and node it belongs to
 *   RESTORE-BASE  the state a cluster restored from a backup started from
 *              (restore.h), when it was
 *   INCARNATION  a random number, written by the first --join start
 *   raft/      libraft's log and snapshots (raft_uv)
 *   state/     LMDB (data.mdb), CLEAN (written at a clean stop, removed at
 *              start) and BOOT_ID (the kernel boot of the last start)
 * Files are written whole (temporary file, fsync, rename, fsync of the
 * directory). No libuv loop needed; not thread-safe.
 *
 * Functions return 0 or RAFTLOCK_EIO / RAFTLOCK_EDATA with a message naming
 * the file in err (errlen bytes, NUL-terminated).
 */
#ifndef RAFTLOCK_DATADIR_H
#define RAFTLOCK_DATADIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DATADIR_PATH_MAX 1024

/* Writes dir/name into out (len bytes); aborts when it does not fit. */
void datadir_path(char *out, size_t len, const char *dir, const char *name);

/* Writes len bytes to path whole: a temporary file, fsync, rename, fsync
 * of the directory. Returns 0, or -1 with errno set (path unchanged). */
int datadir_write_file(const char *path, const void *buf, size_t len);

/* Whether the directory at path exists and holds any entry. */
bool datadir_has_files(const char *path);

/* Whether the raft log directory raft_dir exists and holds nothing but the
 * segments libraft 0.22.1 prepares ahead (open-N, empty): no term, vote,
 * entry or snapshot. libraft writes metadata1/2 when it learns its first
 * term, before it stores any entry, so a node in that state has never
 * heard from a leader (docs/RAFT-NOTES.md). */
bool datadir_raft_blank(const char *raft_dir);

/* Takes the directory for this process: one raftlockd per data directory
 * (a second one would write into the first one's raft log). The lock lasts
 * until datadir_unlock(*fd), or the end of the process. RAFTLOCK_EDATA when
 * another holder has it (its pid in the message). */
int datadir_lock(const char *data_dir, int *fd, char *err, size_t errlen);

/* Gives the directory up (after the node's last write to it). */
void datadir_unlock(int fd);

/* Ties the directory to (cluster, id): writes IDENTITY when absent and the
 * raft log directory raft_dir is empty; RAFTLOCK_EDATA when IDENTITY names
 * another cluster or node, or is missing beside a raft log. */
int datadir_check_identity(const char *data_dir, const char *cluster, uint64_t id,
			   const char *raft_dir, char *err, size_t errlen);

/* Creates state_dir if needed and decides whether its LMDB may be trusted:
 * only after a clean stop (CLEAN) or in the same kernel boot (BOOT_ID);
 * otherwise data.mdb is removed, to be rebuilt from the raft log. Removes
 * CLEAN (durably) and records this boot. */
int datadir_prepare_state(const char *state_dir, char *err, size_t errlen);

/* All of the above, in order, after creating data_dir and its raft/ (path
 * written into raft_dir) and state/ (into state_dir): both buffers hold
 * DATADIR_PATH_MAX bytes. */
int datadir_open(const char *data_dir, const char *cluster, uint64_t id, char *raft_dir,
		 char *state_dir, int *lock_fd, char *err, size_t errlen);

/* The random number that names this data directory's life as a member
 * (INCARNATION, created on first use, written whole): a node that joins
 * claims its id with it, and a wiped directory gets another one, which
 * the cluster refuses under the same id. Returns 0 or RAFTLOCK_EIO. */
int datadir_incarnation(const char *data_dir, uint64_t *out, char *err, size_t errlen);

/* Records a clean stop (state/CLEAN), after LMDB was synced.
 * Returns 0 or RAFTLOCK_EIO. */
int datadir_mark_clean(const char *data_dir);

#endif
