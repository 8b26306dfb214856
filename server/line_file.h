/*
 * line_file.h: a settings file read line by line, for the config file
 * (config.c), the auth-tokens file (auth.c, read again on SIGHUP) and the
 * join-token-file (join.c), so that all refuse the same things with the
 * file and the line named: a
 * line longer than LINE_FILE_MAX bytes (never read as two lines, whose
 * second half would otherwise be taken as a line of its own: the tail of a
 * long comment as a setting or a token; and never read whole: reading
 * stops past the limit, so no file, /dev/zero included, takes more memory
 * or time than that), a NUL byte in a line, and a read error. What it
 * read (its line and stdio's buffer) is wiped before it returns: the
 * join-token-file holds a secret. No state of its own; any thread.
 */
#ifndef RAFTLOCK_LINE_FILE_H
#define RAFTLOCK_LINE_FILE_H

#include <stddef.h>

/* Bytes a line may hold, its newline not counted. The longest value of
 * either file is a path of CONFIG_PATH_MAX - 1 bytes: a longer line is a
 * mistake, not a setting. */
#define LINE_FILE_MAX 1024

/*
 * One line: its text without the newline, NUL-terminated and writable,
 * borrowed until the callback returns; lineno counts from 1. Returns 0 to
 * go on, or nonzero to stop, with what is wrong in err (the file and the
 * line are put in front of it by line_file_read).
 */
typedef int (*line_file_cb)(void *arg, char *line, unsigned lineno, char *err, size_t errlen);

/*
 * Calls cb for each line of the file at path, in order, until one fails.
 * Returns 0 after the last line, or RAFTLOCK_ECONFIG with a message in err:
 * "PATH: <strerror>" when the file does not open, "PATH: read error after
 * line N: <strerror>" when reading fails (a directory: EISDIR), "PATH:N:
 * ..." for a line too long, a NUL byte, or the message of a cb that failed
 * on line N. cb has then been called for the lines before N only: the
 * caller discards what it made of them.
 */
int line_file_read(const char *path, line_file_cb cb, void *arg, char *err, size_t errlen);

#endif
