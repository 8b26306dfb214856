/*
 * address.h: the one parser of "HOST:PORT" addresses, used by raftlockd's
 * configuration and by the client library alike, so that both accept the
 * same texts. An IPv6 literal is written in brackets ("[::1]:7100"); a bare
 * one ("::1:7100") is refused, since its port could not be told apart.
 */
#ifndef RAFTLOCK_ADDRESS_H
#define RAFTLOCK_ADDRESS_H

#include <stddef.h>

/* Room for the decimal port and its NUL. */
#define ADDRESS_PORT_MAX 6

/*
 * Splits text into host (brackets removed, NUL-terminated, at most
 * hostlen - 1 bytes) and port (decimal digits, 1..65535). Returns 0, or
 * -1 when text is NULL, has no ':', an empty host, an unbalanced bracket,
 * a bare IPv6 literal, a port that is not 1..65535 in digits only, or a
 * host that does not fit; host and port are then unspecified.
 */
int address_split(const char *text, char *host, size_t hostlen, char port[ADDRESS_PORT_MAX]);

#endif
