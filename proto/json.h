/*
 * json.h: a string written as JSON text, the one escaper of the benchmark
 * reports and the fault-injection histories, and of the CLI's --json
 * output through client/cli_json.h (which also keeps it UTF-8, utf8.h). No
 * allocation.
 */
#ifndef RAFTLOCK_JSON_H
#define RAFTLOCK_JSON_H

#include <stdio.h>

/*
 * The JSON text of byte `c` inside a string: the byte itself, `\"`, `\\`,
 * or `\u00XX` for a control byte. Writes at most 7 bytes and a NUL into
 * `out`; returns `out`. Bytes of 0x80 and above pass as they are (UTF-8
 * passes through).
 */
const char *json_char(unsigned char c, char out[8]);

/* Writes `s` (NULL reads as "") to `f` as a quoted JSON string. */
void json_write_string(FILE *f, const char *s);

#endif
