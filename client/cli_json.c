/* cli_json.c: see cli_json.h. */
#include "cli_json.h"
#include "json.h"

#include <stdint.h>
#include <string.h>

/*
 * The length of what s starts with: a valid UTF-8 character (*valid set),
 * or else the maximal subpart of one, at least a byte, that is to become
 * one U+FFFD. The byte after a lead is bounded by the lead (no overlong
 * forms, surrogates or code points above U+10FFFF: RFC 3629, section 4);
 * a NUL is never a continuation, so s is not read past its end.
 */
static size_t utf8_span(const unsigned char *s, bool *valid)
{
	unsigned char lo = 0x80, hi = 0xBF;
	size_t more;
	*valid = false;
	if (s[0] < 0x80) {
		*valid = true;
		return 1;
	}
	if (s[0] >= 0xC2 && s[0] <= 0xDF)
		more = 1;
	else if (s[0] >= 0xE0 && s[0] <= 0xEF)
		more = 2;
	else if (s[0] >= 0xF0 && s[0] <= 0xF4)
		more = 3;
	else
		return 1; /* a continuation byte, C0, C1 or F5..FF: never a lead */
	if (s[0] == 0xE0)
		lo = 0xA0;
	else if (s[0] == 0xED)
		hi = 0x9F;
	else if (s[0] == 0xF0)
		lo = 0x90;
	else if (s[0] == 0xF4)
		hi = 0x8F;
	if (s[1] < lo || s[1] > hi)
		return 1;
	for (size_t i = 2; i <= more; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return i;
	*valid = true;
	return more + 1;
}

bool cli_json_is_utf8(const char *s)
{
	bool valid = true;
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p && valid;)
		p += utf8_span(p, &valid);
	return valid;
}

void cli_json_string(FILE *f, const char *s)
{
	char esc[8];
	bool valid;
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
		size_t n = utf8_span(p, &valid);
		if (!valid)
			fputs("\\ufffd", f);
		else if (n == 1)
			fputs(json_char(*p, esc), f);
		else
			fwrite(p, 1, n, f);
		p += n;
	}
	fputc('"', f);
}

/* s's bytes in base64 (RFC 4648, padded), quoted. */
static void base64_string(FILE *f, const char *s)
{
	static const char digit[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t n = strlen((const char *)p);
	fputc('"', f);
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		fputc(digit[v >> 18 & 63], f);
		fputc(digit[v >> 12 & 63], f);
		fputc(i + 1 < n ? digit[v >> 6 & 63] : '=', f);
		fputc(i + 2 < n ? digit[v & 63] : '=', f);
	}
	fputc('"', f);
}

/* The key of a member, with what comes between it and its value. */
static void member_key(FILE *f, enum cli_json_style style, const char *key, const char *suffix)
{
	fprintf(f, "\"%s%s\":%s", key, suffix, style == CLI_JSON_SPACED ? " " : "");
}

static const char *member_separator(enum cli_json_style style)
{
	return style == CLI_JSON_SPACED ? ", " : ",";
}

void cli_json_name(FILE *f, enum cli_json_style style, const char *key, const char *s)
{
	member_key(f, style, key, "");
	cli_json_string(f, s);
	if (cli_json_is_utf8(s))
		return;
	fputs(member_separator(style), f);
	member_key(f, style, key, "_base64");
	base64_string(f, s);
}

void cli_json_names(FILE *f, enum cli_json_style style, const char *key, char *const *names,
		    size_t n)
{
	bool all_utf8 = true;
	member_key(f, style, key, "");
	fputc('[', f);
	for (size_t i = 0; i < n; i++) {
		fputs(i ? member_separator(style) : "", f);
		cli_json_string(f, names[i]);
		all_utf8 = all_utf8 && cli_json_is_utf8(names[i]);
	}
	fputc(']', f);
	if (all_utf8)
		return;
	fputs(member_separator(style), f);
	member_key(f, style, key, "_base64");
	fputc('[', f);
	for (size_t i = 0; i < n; i++) {
		fputs(i ? member_separator(style) : "", f);
		base64_string(f, names[i]);
	}
	fputc(']', f);
}
