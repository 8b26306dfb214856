/* address.c: see address.h. */
#include "address.h"

#include <stdlib.h>
#include <string.h>

int address_split(const char *text, char *host, size_t hostlen, char port[ADDRESS_PORT_MAX])
{
	if (text == NULL)
		return -1;
	const char *colon = strrchr(text, ':');
	if (colon == NULL)
		return -1;
	const char *h = text;
	size_t hlen = (size_t)(colon - text);
	if (text[0] == '[') {
		if (hlen < 3 || text[hlen - 1] != ']')
			return -1;
		h++;
		hlen -= 2;
	} else if (memchr(text, ':', hlen) != NULL || memchr(text, ']', hlen) != NULL) {
		return -1; /* a bare IPv6 literal, or a stray bracket */
	}
	if (hlen == 0 || hlen >= hostlen || memchr(h, '[', hlen) || memchr(h, ']', hlen))
		return -1;
	const char *p = colon + 1;
	size_t plen = strlen(p);
	if (plen == 0 || plen >= ADDRESS_PORT_MAX || strspn(p, "0123456789") != plen)
		return -1;
	long v = strtol(p, NULL, 10);
	if (v < 1 || v > 65535)
		return -1;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	memcpy(port, p, plen + 1);
	return 0;
}
