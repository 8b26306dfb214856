/* store_fail.c: see store_fail.h. */
#include "store_fail.h"

#include <errno.h>
#include <lmdb.h>
#include <stdio.h>

#include "log.h"

/* What to do about f, or "" when its error says nothing of the disk. */
static void advice(const struct store_fail *f, char *out, size_t len)
{
	switch (f->rc) {
	case ENOSPC:
	case EDQUOT:
		snprintf(out, len,
			 ": the disk is full; free space under %s (or grow its file system), "
			 "then start the node again",
			 f->dir);
		break;
	case EIO:
	case EROFS:
		snprintf(out, len,
			 ": the disk failed the write, or wrote it short as some file systems do "
			 "when full; check the disk (dmesg) and the free space under %s (df), "
			 "then start the node again",
			 f->dir);
		break;
	case MDB_MAP_FULL:
		snprintf(out, len,
			 ": lmdb map full (map-size %zu MB, %llu bytes of records), this node's "
			 "map-size is too small for the cluster's state; raise --map-size "
			 "(map-size in the configuration file) to at least that of the other "
			 "nodes, then start the node again",
			 f->map_size >> 20, (unsigned long long)f->record_bytes);
		break;
	default: out[0] = '\0'; break;
	}
}

void store_fail_line(const struct store_fail *f, char *out, size_t len)
{
	char what_to_do[512];
	advice(f, what_to_do, sizeof what_to_do);
	snprintf(out, len,
		 "cannot write the store in %s (lmdb %s: %s)%s; stopping with exit status %d "
		 "(started again, the node applies from its raft log what it had not)",
		 f->dir, f->what, mdb_strerror(f->rc), what_to_do, STORE_FAIL_EXIT);
}

static void (*divert_fn)(const struct store_fail *f, void *arg);
static void *divert_arg;

void store_fail_divert(void (*fn)(const struct store_fail *f, void *arg), void *arg)
{
	divert_fn = fn;
	divert_arg = arg;
}

void store_fail(const struct store_fail *f)
{
	if (divert_fn != NULL)
		divert_fn(f, divert_arg);
	char line[1024];
	store_fail_line(f, line, sizeof line);
	log_fatal_exit(STORE_FAIL_EXIT, "%s", line);
}
