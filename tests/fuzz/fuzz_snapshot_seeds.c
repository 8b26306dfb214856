/*
 * fuzz_snapshot_seeds.c: writes the seed corpus of fuzz_snapshot into DIR:
 * the image of a small store, plain and packed, each alone and followed by
 * a tail of two entries.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "image_pack.h"
#include "snapshot_tail.h"
#include "store.h"

static const char *out_dir;

static void write_seed(const char *name, const void *a, size_t na, const void *b, size_t nb)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", out_dir, name);
	FILE *f = fopen(path, "wb");
	if (f == NULL || fwrite(a, 1, na, f) != na || (nb > 0 && fwrite(b, 1, nb, f) != nb) ||
	    fclose(f) != 0) {
		fprintf(stderr, "fuzz_snapshot_seeds: cannot write %s\n", path);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_snapshot_seeds DIR\n");
		return 2;
	}
	out_dir = argv[1];
	if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
		perror(out_dir);
		return 1;
	}
	char dir[] = "/tmp/fuzz_snapshot_seeds.XXXXXX";
	char err[256];
	struct store st;
	if (mkdtemp(dir) == NULL || store_open(&st, dir, 1u << 20, err, sizeof err) != 0) {
		fprintf(stderr, "fuzz_snapshot_seeds: no store: %s\n", err);
		return 1;
	}
	MDB_txn *txn = store_begin(&st, false);
	void *image, *packed, *tail;
	size_t image_len, packed_len, raw_len, tail_len;
	if (store_dump_at(&st, txn, malloc, free, NULL, &image, &image_len) != 0 ||
	    image_pack_at(&st, txn, malloc, free, NULL, &packed, &packed_len, &raw_len) != 0)
		return 1;
	store_abort(txn);
	store_close(&st);
	struct snapshot_tail t = {0};
	static const uint8_t entry[16] = {1, 2, 3};
	if (snapshot_tail_add(&t, 1, entry, sizeof entry) != 0 ||
	    snapshot_tail_add(&t, 2, entry, 3) != 0 ||
	    snapshot_tail_finish(&t, malloc, &tail, &tail_len) != 0)
		return 1;
	write_seed("image", image, image_len, NULL, 0);
	write_seed("image_tail", image, image_len, tail, tail_len);
	write_seed("packed", packed, packed_len, NULL, 0);
	write_seed("packed_tail", packed, packed_len, tail, tail_len);
	free(image);
	free(packed);
	free(tail);
	snapshot_tail_free(&t);
	char path[sizeof dir + 16];
	snprintf(path, sizeof path, "%s/data.mdb", dir);
	remove(path);
	snprintf(path, sizeof path, "%s/lock.mdb", dir);
	remove(path);
	remove(dir);
	return 0;
}
