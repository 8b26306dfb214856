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
 * Functions return 0 or RAFTLOCK_EDATA / RAFTLOCK_EIO / RAFTLOCK_ENOMEM
 * with a message naming the file in err. Not thread-safe; before raft
 * starts.
 */
#ifndef RAFTLOCK_RESTORE_H
#define RAFTLOCK_RESTORE_H

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
 * raft log (a restore creates a new cluster: its members start empty). */
int restore_check_target(const char *data_dir, char *err, size_t errlen);

/* Makes img the base of this node (whose raft log is empty): loads it
 * into st, turns it into the base and writes DATA/RESTORE-BASE. */
int restore_install(const char *data_dir, struct store *st, struct fsm *f,
		    const struct restore_image *img, char *err, size_t errlen);

/* At every start without --restore: when the store is empty (new, or
 * removed for a rebuild) and DATA/RESTORE-BASE exists, loads it. */
int restore_reload_base(const char *data_dir, struct store *st, char *err, size_t errlen);

#endif
