/*
 * image.h: the checksum that closes a state image (the raft snapshots of
 * store.h and the backup files of `raftlock snapshot save`), written
 * big-endian in the image's last IMAGE_SUM_SIZE bytes over every byte
 * before it. Which sum depends on the image's magic (its first
 * IMAGE_MAGIC_SIZE bytes): images from IMAGE_MAGIC_WORDS on are summed by
 * 64-bit words in four independent lanes, about ten times faster than
 * the FNV-1a 64 of every byte that closes older images (a snapshot stalls
 * the node's loop while it is summed). Server and client check images
 * alike. No I/O, no allocation.
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
/* The first magic whose images are summed by words. */
#define IMAGE_MAGIC_WORDS "RLSNAP05"

/* A sum fed in pieces. */
struct image_sum {
	uint64_t lane[4];
	uint64_t bytes;  /* fed so far */
	uint8_t part[8]; /* the word being filled (bytes % 8 of it) */
	uint8_t magic[IMAGE_MAGIC_SIZE];
	bool words; /* summed by words (known once the magic is in) */
};

/* Starts a sum. */
void image_sum_begin(struct image_sum *s);

/* Feeds n bytes at p, which follow those fed before. */
void image_sum_add(struct image_sum *s, const void *p, size_t n);

/* The sum of everything fed (the state stays as it was). */
uint64_t image_sum_end(const struct image_sum *s);

/* The sum of the n bytes at p, as an image beginning there is closed. */
uint64_t image_sum_of(const void *p, size_t n);

/* The sum by words of n bytes that are not an image themselves (a
 * snapshot's tail, a packed image): as of an image of magic
 * IMAGE_MAGIC_WORDS followed by them. */
uint64_t image_sum_words_of(const void *p, size_t n);

/* The sum written in the last IMAGE_SUM_SIZE bytes of an image of n bytes
 * (n >= IMAGE_SUM_SIZE). */
uint64_t image_sum_stored(const void *image, size_t n);

/* Whether the n bytes at image end with the checksum of what precedes
 * them (and are at least IMAGE_MIN_SIZE long): a truncated or damaged
 * image fails. Magic and content are the reader's to check. */
bool image_sum_ok(const void *image, size_t n);

#endif
