/* json.c: see json.h. */
#include "json.h"

const char *json_char(unsigned char c, char out[8])
{
	if (c == '"' || c == '\\')
		snprintf(out, 8, "\\%c", c);
	else if (c < 0x20)
		snprintf(out, 8, "\\u%04x", c);
	else
		snprintf(out, 8, "%c", c);
	return out;
}

void json_write_string(FILE *f, const char *s)
{
	char esc[8];

	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++)
		fputs(json_char(*p, esc), f);
	fputc('"', f);
}
