/*
 * cli_json.h: the strings of the raftlock command's --json output, the
 * one writer every command uses. JSON text is UTF-8 (RFC 8259), but names
 * are bytes (raftlock.h: the server takes any bytes but NUL), and so are
 * the owners, addresses and values it sends back:
 *
 *   - a string that is valid UTF-8 is written as it is, with `"`, `\` and
 *     every byte below 0x20 escaped (json_char());
 *   - each ill-formed subsequence of one that is not (a stray
 *     continuation byte, a truncated sequence, an overlong form, a
 *     surrogate, a code point above U+10FFFF, the bytes C0, C1 and
 *     F5..FF) is written as \ufffd, one for each maximal subpart as
 *     Unicode's "substitution of maximal subparts" says (Python's
 *     decode(errors="replace") agrees): the output always parses;
 *   - a name that a script may give back to a command (lock, watch and
 *     election names, ACL identities and prefixes, file names) gets its
 *     exact bytes too, in a sibling member "<key>_base64" (RFC 4648,
 *     padded), only when it is not valid UTF-8: the output for valid
 *     names is unchanged.
 *
 * Every string is borrowed for the call; NULL reads as "". Errors of the
 * stream are left in it (ferror), as with stdio.
 */
#ifndef RAFTLOCK_CLI_JSON_H
#define RAFTLOCK_CLI_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The spacing of the object a member goes into, kept as each command
 * always printed it. */
enum cli_json_style {
	CLI_JSON_SPACED,  /* "key": "v", "key_base64": "..." */
	CLI_JSON_COMPACT, /* "key":"v","key_base64":"..." */
};

/* Whether s is valid UTF-8 (RFC 3629). */
bool cli_json_is_utf8(const char *s);

/* s as a quoted JSON string, valid UTF-8 whatever its bytes. */
void cli_json_string(FILE *f, const char *s);

/* The member "key": s and, when s is not valid UTF-8, after it the member
 * "key_base64" with s's bytes. Writes no separator before the first. */
void cli_json_name(FILE *f, enum cli_json_style style, const char *key, const char *s);

/* The member "key": [names] and, when one of them is not valid UTF-8,
 * after it "key_base64": [every name's bytes, in the same order]. */
void cli_json_names(FILE *f, enum cli_json_style style, const char *key, char *const *names,
		    size_t n);

#endif
