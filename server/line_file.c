/* line_file.c: see line_file.h. */
#include "line_file.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raftlock.h"

/* One line of a file, its newline dropped. Reading stops one byte past
 * LINE_FILE_MAX: a longer line is refused, not read whole (no line, however
 * long, takes more memory than this, and /dev/zero ends at once) nor as two
 * lines (whose second half would otherwise be taken as a line of its own:
 * the tail of a long comment as a setting or a token). */
#define LINE_FILE_IO 4096 /* stdio's buffer */

struct line {
	char text[LINE_FILE_MAX + 1];
	size_t len; /* LINE_FILE_MAX + 1: longer than a line may be */
	bool nul;   /* a NUL byte in it: not a text file */
};

/* Reads the next line into l; false at the end of the file, or on a read
 * error (ferror then says so). */
static bool line_next(FILE *f, struct line *l)
{
	int c;
	l->len = 0;
	l->nul = false;
	while (l->len <= LINE_FILE_MAX && (c = getc_unlocked(f)) != EOF && c != '\n') {
		if (l->len < LINE_FILE_MAX)
			l->text[l->len] = (char)c;
		l->nul |= c == '\0';
		l->len++;
	}
	if (l->len > LINE_FILE_MAX)
		return true;
	l->text[l->len] = '\0';
	return !ferror(f) && (c == '\n' || l->len > 0);
}

int line_file_read(const char *path, line_file_cb cb, void *arg, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return RAFTLOCK_ECONFIG;
	}
	/* stdio's buffer of our own, wiped with the line: a join-token-file
	 * holds a secret */
	char *io = malloc(LINE_FILE_IO);
	if (io != NULL)
		setvbuf(f, io, _IOFBF, LINE_FILE_IO);
	struct line *l = malloc(sizeof *l);
	if (l == NULL) {
		fclose(f);
		free(io);
		snprintf(err, errlen, "%s: %s", path, strerror(ENOMEM));
		return RAFTLOCK_ECONFIG;
	}
	char msg[512];
	unsigned lineno = 0;
	int rv = 0;
	for (;;) {
		errno = 0;
		if (!line_next(f, l)) {
			int e = errno;
			if (ferror(f)) { /* a directory given as the file: EISDIR */
				snprintf(err, errlen, "%s: read error after line %u: %s", path,
					 lineno, strerror(e != 0 ? e : EIO));
				rv = RAFTLOCK_ECONFIG;
			}
			break;
		}
		lineno++;
		if (l->len > LINE_FILE_MAX) {
			snprintf(err, errlen,
				 "%s:%u: the line is longer than the %d bytes a line may hold",
				 path, lineno, LINE_FILE_MAX);
			rv = RAFTLOCK_ECONFIG;
			break;
		}
		if (l->nul) {
			snprintf(err, errlen, "%s:%u: a NUL byte (not a text file?)", path, lineno);
			rv = RAFTLOCK_ECONFIG;
			break;
		}
		msg[0] = '\0';
		if (cb(arg, l->text, lineno, msg, sizeof msg) != 0) {
			snprintf(err, errlen, "%s:%u: %s", path, lineno, msg);
			rv = RAFTLOCK_ECONFIG;
			break;
		}
	}
	explicit_bzero(l, sizeof *l);
	free(l);
	fclose(f);
	if (io != NULL)
		explicit_bzero(io, LINE_FILE_IO);
	free(io);
	return rv;
}
