/*
 * dir_sync.h: making a change to a directory's entries durable, for the
 * server's data directory and the client's saved images alike.
 */
#ifndef RAFTLOCK_DIR_SYNC_H
#define RAFTLOCK_DIR_SYNC_H

/* fsync()s the directory that holds path, so that a rename into it or an
 * unlink from it survives a crash. Returns 0, or -1 with errno set. */
int dir_sync_of(const char *path);

#endif
