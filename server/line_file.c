/* line_file.c: see line_file.h. */
#include "line_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "raftlock.h"

int line_file_read(const char *path, line_file_cb cb, void *arg, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return RAFTLOCK_ECONFIG;
	}
	/* getline, not fgets into a fixed buffer: it reads a line whole
	 * whatever its length, and says how long it is (a NUL byte shows). */
	char *line = NULL, msg[512];
	size_t cap = 0;
	unsigned lineno = 0;
	int rv = 0;
	for (;;) {
		errno = 0;
		ssize_t n = getline(&line, &cap, f);
		if (n < 0) {
			/* The end of the file, or an error (ENOMEM sets no flag). */
			int e = errno;
			if (ferror(f) || !feof(f)) {
				snprintf(err, errlen, "%s: read error after line %u: %s", path,
					 lineno, strerror(e != 0 ? e : EIO));
				rv = RAFTLOCK_ECONFIG;
			}
			break;
		}
		lineno++;
		size_t len = (size_t)n;
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		if (len > LINE_FILE_MAX) {
			snprintf(err, errlen,
				 "%s:%u: the line is %zu bytes long, above the %d a line "
				 "may hold",
				 path, lineno, len, LINE_FILE_MAX);
			rv = RAFTLOCK_ECONFIG;
			break;
		}
		if (memchr(line, '\0', len) != NULL) {
			snprintf(err, errlen, "%s:%u: a NUL byte (not a text file?)", path, lineno);
			rv = RAFTLOCK_ECONFIG;
			break;
		}
		msg[0] = '\0';
		if (cb(arg, line, lineno, msg, sizeof msg) != 0) {
			snprintf(err, errlen, "%s:%u: %s", path, lineno, msg);
			rv = RAFTLOCK_ECONFIG;
			break;
		}
	}
	free(line);
	fclose(f);
	return rv;
}
