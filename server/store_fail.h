/*
 * store_fail.h: what a node does when a write to its store fails (a put,
 * a delete or the commit of a write transaction; docs/OPERATIONS.md,
 * "Full disk"). LMDB then keeps nothing of the transaction, and applying
 * on would leave this member's state behind the entries it acknowledged:
 * the node stops. It says so in one line at level fatal, naming LMDB's
 * error, the store's directory and, for a full or failing disk or a map
 * too small, what to do, and exits with STORE_FAIL_EXIT (not abort: no
 * core dump, and a status a supervisor or the operator can tell from the
 * others, which are 1 for a start refused, 2 for a configuration refused,
 * 3 for a snapshot restore failed at run time). Started again, the node
 * applies from its raft log what it had not.
 *
 * Not while a `--restore` can still be undone (restore.h): that writer
 * takes the failure over (store_fail_divert), removes what it made and
 * exits as a failed restore does, status 1, with the cause: a start on
 * the same data directory would find a half-made restore, and there is
 * no raft log to apply from. Every failed write in that window comes
 * here (the image's records and the base's puts, which have no error to
 * hand back, as no write of a running node has; a commit's full map),
 * but for a commit's full or failing disk, which store_commit_room hands
 * back to the restore.
 */
#ifndef RAFTLOCK_STORE_FAIL_H
#define RAFTLOCK_STORE_FAIL_H

#include <stddef.h>
#include <stdint.h>

#define STORE_FAIL_EXIT 4

/* What failed and where: rc is LMDB's (an errno or an MDB_* code); what
 * names the call ("txn commit", "put"); dir (borrowed for the call) is the
 * store's directory; map_size (bytes) and record_bytes are the store's, for
 * MDB_MAP_FULL's advice. */
struct store_fail {
	int rc;
	const char *what;
	const char *dir;
	size_t map_size;
	uint64_t record_bytes;
};

/* Writes the line into out, at most len bytes with a NUL. No I/O. */
void store_fail_line(const struct store_fail *f, char *out, size_t len);

/* Logs store_fail_line()'s line and exits STORE_FAIL_EXIT, or calls the
 * function store_fail_divert() set. */
void store_fail(const struct store_fail *f) __attribute__((noreturn));

/* From now on store_fail(f) calls fn(f, arg) instead, which must not
 * return (if it does, store_fail goes on as without it); arg is borrowed
 * until the next call. fn NULL: store_fail's own line and exit again.
 * One for the process; not thread-safe (set before the node's threads
 * write: a restore, before raft starts). */
void store_fail_divert(void (*fn)(const struct store_fail *f, void *arg), void *arg);

#endif
