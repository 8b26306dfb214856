/* metrics_label.c: see metrics_label.h. */
#include "metrics_label.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The length of the valid UTF-8 character s starts with (RFC 3629: no
 * overlong forms, surrogates or code points above U+10FFFF), or 0. A NUL
 * ends a character early, so s is never read past its end. */
static size_t utf8_char(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
	size_t n;
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xC2 && s[0] <= 0xDF) {
		n = 2;
	} else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
		n = 3;
		lo = s[0] == 0xE0 ? 0xA0 : lo;
		hi = s[0] == 0xED ? 0x9F : hi;
	} else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
		n = 4;
		lo = s[0] == 0xF0 ? 0x90 : lo;
		hi = s[0] == 0xF4 ? 0x8F : hi;
	} else {
		return 0;
	}
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if ((s[i] & 0xC0) != 0x80)
			return 0;
	return n;
}

size_t metrics_label_write(char *out, size_t cap, const char *v)
{
	const unsigned char *s = (const unsigned char *)v;
	size_t need = 0, written = 0;
	bool fits = true;
	while (*s != '\0') {
		char hex[8];
		const char *piece = (const char *)s;
		size_t k = utf8_char(s), n = k;
		if (k == 0) {
			/* \xNN in the value: its backslash escaped */
			snprintf(hex, sizeof hex, "\\\\x%02x", *s);
			piece = hex;
			n = strlen(hex);
			k = 1;
		} else if (*s == '\\') {
			piece = "\\\\\\\\"; /* two backslashes in the value */
			n = 4;
		} else if (*s == '"') {
			piece = "\\\"";
			n = 2;
		} else if (*s == '\n') {
			piece = "\\n";
			n = 2;
		}
		fits = fits && need + n < cap;
		if (fits) {
			memcpy(out + need, piece, n);
			written = need + n;
		}
		need += n;
		s += k;
	}
	if (cap > 0)
		out[written] = '\0';
	return need;
}
