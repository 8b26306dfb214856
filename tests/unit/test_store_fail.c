/*
 * test_store_fail.c: the line a node stops with when a write to its store
 * fails (store_fail.h): LMDB's error, the store's directory, the exit
 * status, and for a full disk, a failing one and a full map what to do,
 * naming the real option (--map-size).
 */
#include <errno.h>
#include <lmdb.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "store_fail.h"

#define DIR "/srv/raftlock/state"

static const char *line_of(int rc, const char *what, char *out, size_t len)
{
	struct store_fail f = {.rc = rc,
			       .what = what,
			       .dir = DIR,
			       .map_size = (size_t)64 << 20,
			       .record_bytes = 12345};
	store_fail_line(&f, out, len);
	return out;
}

static void assert_has(const char *line, const char *part)
{
	if (strstr(line, part) == NULL)
		fail_msg("'%s' not in: %s", part, line);
}

static void test_every_line_names_error_directory_status(void **state)
{
	(void)state;
	const int codes[] = {ENOSPC, EDQUOT, EIO, EROFS, MDB_MAP_FULL, MDB_TXN_FULL, EINVAL};
	char line[1024];
	for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
		line_of(codes[i], "txn commit", line, sizeof line);
		assert_has(line, "cannot write the store in " DIR);
		assert_has(line, "lmdb txn commit: ");
		assert_has(line, mdb_strerror(codes[i]));
		assert_has(line, "exit status 4");
		assert_int_equal(STORE_FAIL_EXIT, 4);
		assert_has(line, "raft log");
	}
}

static void test_advice_by_error(void **state)
{
	(void)state;
	char line[1024];
	line_of(ENOSPC, "txn commit", line, sizeof line);
	assert_has(line, "the disk is full; free space under " DIR);
	line_of(EDQUOT, "put", line, sizeof line);
	assert_has(line, "the disk is full");
	/* LMDB reports a short write, which a full disk may cause, as EIO */
	line_of(EIO, "txn commit", line, sizeof line);
	assert_has(line, "check the disk");
	assert_has(line, "wrote it short");
	assert_has(line, "free space under " DIR);
	line_of(MDB_MAP_FULL, "put", line, sizeof line);
	assert_has(line, "lmdb map full (map-size 64 MB, 12345 bytes of records)");
	assert_has(line, "raise --map-size");
	/* an error that says nothing of the disk: no advice made up */
	line_of(MDB_TXN_FULL, "put", line, sizeof line);
	assert_null(strstr(line, "disk"));
	assert_null(strstr(line, "map-size"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_line_names_error_directory_status),
		cmocka_unit_test(test_advice_by_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
