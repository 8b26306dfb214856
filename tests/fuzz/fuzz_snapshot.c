/*
 * fuzz_snapshot.c: libFuzzer target for what a member reads from a raft
 * snapshot sent to it or left on its disk: snapshot_split() (the tail,
 * plain images and packed ones) and the unpacking of packed images
 * (server/snapshot_tail.c, server/image_pack.c). Besides the sanitizers,
 * it checks:
 *   - each call returns only its documented codes;
 *   - a snapshot split accepts lies inside the input: the image first, the
 *     entries right after it, then the trailer; the state's index is at
 *     least the image's;
 *   - a packed image split accepts (its sum is right) either unpacks to an
 *     image whose own sum, index and length agree with what split
 *     reported, or is refused as it is unpacked;
 *   - what image_unpack() accepts, image_pack_head() accepts with the same
 *     length and index, and it is an image of that index;
 *   - read through an unpacker (image_pack.h) whose buffer starts at one
 *     byte, a few bytes taken at a time, it comes out as the same bytes,
 *     to the frame's end.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "image_pack.h"
#include "raftlock.h"
#include "snapshot_tail.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool known(int rv)
{
	return rv == 0 || rv == RAFTLOCK_EDATA || rv == RAFTLOCK_ENOMEM;
}

static void check_split(const uint8_t *buf, size_t n)
{
	struct snapshot_parts p;
	int rv = snapshot_split(buf, n, &p);
	CHECK(known(rv));
	if (rv != 0)
		return;
	CHECK(p.image == buf && p.image_len <= n);
	if (p.entries != NULL) {
		CHECK(p.entries == buf + p.image_len);
		CHECK(p.image_len + p.entries_len + SNAPSHOT_TAIL_TRAILER == n);
	} else {
		CHECK(p.n_entries == 0 && p.image_len == n);
	}
	CHECK(p.index >= p.image_index);
	CHECK(p.index > p.image_index || p.n_entries == 0);
	if (!p.packed) {
		CHECK(p.raw_len == p.image_len);
		return;
	}
	void *img = NULL;
	size_t len = 0;
	rv = image_unpack(p.image, p.image_len, &img, &len);
	CHECK(known(rv)); /* split checks the packed sum only: a forged one passes */
	if (rv != 0) {
		CHECK(img == NULL);
		return;
	}
	uint64_t index;
	CHECK(len == p.raw_len);
	CHECK(store_image_index(img, len, &index) == 0 && index == p.image_index);
	free(img);
}

/* What image_unpack() gave (img, len; NULL: refused), read again through
 * an unpacker from the n bytes at buf. */
static void check_stream(const uint8_t *buf, size_t n, const uint8_t *img, size_t len)
{
	struct image_unpacker u;
	int rv = image_unpacker_begin(&u, buf, n, 1);
	CHECK(known(rv));
	if (rv != 0) {
		CHECK(img == NULL);
		return;
	}
	size_t got = 0;
	for (size_t want = 1;; want = want % 7 + 1) {
		rv = u.r.fill(&u.r, want);
		CHECK(known(rv));
		size_t k = u.r.len - u.r.at;
		if (rv != 0 || k == 0)
			break;
		k = k < want ? k : want;
		CHECK(img == NULL ||
		      (got + k <= len && memcmp(u.r.buf + u.r.at, img + got, k) == 0));
		u.r.at += k;
		got += k;
	}
	CHECK(img == NULL || (rv == 0 && got == len));
	image_unpacker_end(&u);
}

static void check_pack(const uint8_t *buf, size_t n)
{
	uint64_t index = 0;
	size_t head_len = 0, len = 0;
	int head = image_pack_head(buf, n, &index, &head_len);
	CHECK(head == 0 || head == RAFTLOCK_EDATA);
	void *img = NULL;
	int rv = image_unpack(buf, n, &img, &len);
	CHECK(known(rv));
	check_stream(buf, n, img, len);
	if (rv != 0) {
		CHECK(img == NULL);
		return;
	}
	uint64_t image_index;
	CHECK(head == 0 && len == head_len);
	CHECK(store_image_index(img, len, &image_index) == 0 && image_index == index);
	free(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy in a block of exactly its size: the sanitizer sees a read
	 * past the end. */
	uint8_t *copy = malloc(size ? size : 1);
	CHECK(copy != NULL);
	if (size > 0)
		memcpy(copy, data, size);
	check_split(copy, size);
	check_pack(copy, size);
	free(copy);
	return 0;
}
