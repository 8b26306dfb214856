/*
 * restore.h: starting a new cluster from a backup image
 * (`raftlockd --restore FILE`, an image written by `raftlock snapshot save`).
 *
 * Every member of the new cluster starts once with --restore and the same
 * image on an empty data directory. The image is checked before anything
 * is written; then it is loaded into LMDB and turned into the new
 * cluster's base (fsm_restore_base: no session survives, every lock that
 * was held is under lock-delay, the token counter will start above the
 * image's), and that base is kept as DATA/RESTORE-BASE: the raft log of
 * the new cluster starts at index 1 on top of it, so an LMDB rebuilt from
 * the raft log (after an OS crash) starts from it again. The new
 * cluster's INIT names the image, and a member whose state was not built
 * from it stops rather than diverge (fsm.c, do_init); from feature level
 * 10 that INIT also forgets the saved cluster's member book
 * (FEATURES_RESTORED_BOOK). A member added to
 * the restored cluster before its first raft snapshot starts with
 * --restore and --join: it claims its id as any joining node, takes the
 * image as its base and receives the log from index 1 (node.c,
 * first_start).
 *
 * A restore that fails before raft has started on its bootstrapped log
 * (restore_done: the last step, the one that makes a restored member)
 * removes what it made (restore_undo): a later start finds the data
 * directory as it was, never a base without its log nor a log without its
 * base, and --restore may be run again. That holds for a write to LMDB
 * that fails too (the image's records, the base, their commit: a map too
 * small for the image, a full or failing disk), which stops a running
 * node (store_fail.h): while armed, the restore takes that failure over,
 * removes what it made and exits 1 with LMDB's error and what to do
 * (raise --map-size, free space, check the disk). A disk too full for it
 * is said so in one line (RAFTLOCK_ENOSPC), before anything is written
 * when the room it needs (RESTORE_ROOM) is not there.
 *
 * Functions return 0 or RAFTLOCK_EDATA / RAFTLOCK_EIO / RAFTLOCK_ENOMEM /
 * RAFTLOCK_ENOSPC with a message naming the file or directory in err. Not
 * thread-safe; before raft starts.
 */
#ifndef RAFTLOCK_RESTORE_H
#define RAFTLOCK_RESTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsm.h"
#include "store.h"

struct restore_image {
	void *buf; /* malloc'd, owned */
	size_t len;
	uint64_t sum;   /* its checksum: the image's name in INIT */
	uint64_t index; /* the applied index of the cluster it was saved from */
};

/* Reads path and checks it is a whole, undamaged image (magic, checksum).
 * Touches nothing else. RAFTLOCK_EDATA names what is wrong. */
int restore_read(const char *path, struct restore_image *img, char *err, size_t errlen);
void restore_image_free(struct restore_image *img);

/* Before anything is written: RAFTLOCK_EDATA when data_dir already holds a
 * raft log or a state (a restore creates a new cluster: its members start
 * empty, and an undone restore could not put a state back). */
int restore_check_target(const char *data_dir, char *err, size_t errlen);

/* Room a restore of an image of n bytes needs, about: LMDB's file (the
 * records on their pages), RESTORE-BASE (at most the image) and the raft
 * log's first segment. */
#define RESTORE_ROOM(n) (2 * (uint64_t)(n) + ((uint64_t)1 << 20))
/* A restore write that failed with EIO with less than this free met a
 * full disk (restore_undo). */
#define RESTORE_FULL_BELOW ((uint64_t)1 << 20)

/* What the data directory held before a restore wrote to it. */
struct restore_undo {
	const char *data_dir; /* borrowed until restore_undo or restore_done */
	unsigned existed;     /* a bit a path a restore makes (restore.c) */
	bool had_clean;       /* state/CLEAN, which every start removes */
	bool armed;           /* a failure from here is undone */
	uint64_t image_bytes; /* the image's size */
	uint64_t need;        /* RESTORE_ROOM of the image */
	uint64_t free_bytes;  /* under data_dir, before the restore */
};

/* Before anything is written: notes what data_dir holds into u, for
 * restore_undo, with the room img needs and the free space there, and
 * arms u: until restore_done or restore_undo, a store write that fails
 * (store_fail) undoes the restore and exits 1 (store_fail_divert; u is
 * borrowed until then). */
void restore_note(const char *data_dir, const struct restore_image *img, struct restore_undo *u);

/* Whether the file system has the room u needs: 0, or RAFTLOCK_ENOSPC
 * ("the disk is full", with both sizes), which disarms u (nothing was
 * written). */
int restore_check_room(struct restore_undo *u, char *err, size_t errlen);

/* After a step of the restore failed with rv (its message in err), before
 * restore_done: removes what the restore made (and writes state/CLEAN
 * again if it was there), then returns rv with err saying that nothing
 * was restored, or RAFTLOCK_ENOSPC with err saying the disk is full when
 * rv is RAFTLOCK_ENOSPC, or RAFTLOCK_EIO with less than RESTORE_FULL_BELOW
 * free. Returns rv untouched when u is not armed (no restore, or done). */
int restore_undo(struct restore_undo *u, int rv, char *err, size_t errlen);

/* The restore counts from here (raft has started on its log): a failure
 * after it is a member's, not undone. Also after a failure that found the
 * data directory another's (nothing in it is the restore's to remove). */
void restore_done(struct restore_undo *u);

/* Makes img the base of this node (whose raft log is empty): loads it
 * into st, turns it into the base in the same transaction (nothing of it
 * is kept when the commit fails: RAFTLOCK_ENOSPC or RAFTLOCK_EIO; a put
 * that fails goes to store_fail, as restore_note says) and writes
 * DATA/RESTORE-BASE. */
int restore_install(const char *data_dir, struct store *st, struct fsm *f,
		    const struct restore_image *img, char *err, size_t errlen);

/* At every start without --restore: when the store is empty (new, or
 * removed for a rebuild) and DATA/RESTORE-BASE exists, loads it. */
int restore_reload_base(const char *data_dir, struct store *st, char *err, size_t errlen);

#endif
