/*
 * byteorder.h: big-endian integers of 1 to 8 bytes in byte buffers, as the
 * store's keys and the snapshot formats write them (the same on every
 * machine). Header only.
 */
#ifndef RAFTLOCK_BYTEORDER_H
#define RAFTLOCK_BYTEORDER_H

#include <stdint.h>

/* Writes the low `bytes` bytes of v at p, most significant first. */
static inline void be_put(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/* Reads `bytes` bytes at p, most significant first. */
static inline uint64_t be_get(const uint8_t *p, int bytes)
{
	uint64_t v = 0;
	for (int i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

#endif
