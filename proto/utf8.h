/*
 * utf8.h: where a byte string stops being UTF-8 (RFC 3629), the one check
 * of the CLI's --json strings (client/cli_json.h) and of the metrics
 * page's label values (server/metrics_label.h). No allocation.
 */
#ifndef RAFTLOCK_UTF8_H
#define RAFTLOCK_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/*
 * The length of what s (NUL-terminated, at a byte that is not NUL) starts
 * with: a valid UTF-8 character, *valid set; or else the maximal subpart
 * of one (Unicode's "substitution of maximal subparts"), at least a byte,
 * *valid cleared. The byte after a lead is bounded by the lead: no
 * overlong forms, surrogates or code points above U+10FFFF. A NUL is never
 * a continuation, so s is not read past its end.
 */
size_t utf8_span(const unsigned char *s, bool *valid);

#endif
