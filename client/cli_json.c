/* cli_json.c: see cli_json.h. */
#include "cli_json.h"
#include "json.h"
#include "utf8.h"

#include <stdint.h>
#include <string.h>

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
