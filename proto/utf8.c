/* utf8.c: see utf8.h. */
#include "utf8.h"

size_t utf8_span(const unsigned char *s, bool *valid)
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
