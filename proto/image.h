/*
 * image.h: the checksum that closes a state image (the raft snapshots of
 * store.h and the backup files of `raftlock snapshot save`): an FNV-1a
 * 64-bit sum of every byte before it, written big-endian in the image's
 * last IMAGE_SUM_SIZE bytes. Server and client check images alike.
 * No I/O, no allocation.
 */
#ifndef RAFTLOCK_IMAGE_H
#define RAFTLOCK_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IMAGE_SUM_SIZE 8
#define IMAGE_SUM_INIT 0xcbf29ce484222325ull
#define IMAGE_MAGIC_SIZE 8
/* The smallest image: magic, applied index, end byte, checksum. */
#define IMAGE_MIN_SIZE (IMAGE_MAGIC_SIZE + 8 + 1 + IMAGE_SUM_SIZE)

/* The sum h (IMAGE_SUM_INIT to start) continued over n bytes at p. */
uint64_t image_sum(uint64_t h, const void *p, size_t n);

/* The sum written in the last IMAGE_SUM_SIZE bytes of an image of n bytes
 * (n >= IMAGE_SUM_SIZE). */
uint64_t image_sum_stored(const void *image, size_t n);

/* Whether the n bytes at image end with the checksum of what precedes
 * them (and are at least IMAGE_MIN_SIZE long): a truncated or damaged
 * image fails. Magic and content are the reader's to check. */
bool image_sum_ok(const void *image, size_t n);

#endif
