/* metrics_label.c: see metrics_label.h. */
#include "metrics_label.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "utf8.h"

size_t metrics_label_write(char *out, size_t cap, const char *v)
{
	const unsigned char *s = (const unsigned char *)v;
	size_t need = 0, written = 0;
	bool fits = true;
	while (*s != '\0') {
		char hex[8];
		const char *piece = (const char *)s;
		bool valid;
		size_t k = utf8_span(s, &valid), n = k;
		if (!valid) {
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
