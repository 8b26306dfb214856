/* test_diskguard.c: how often diskguard_wait_room() reads the free space
 * (statvfs on a real directory, counted by the guard), on a manual clock:
 * once per DISKGUARD_CHECK_MS while the last reading leaves room, again
 * as soon as the applies since could have used it, and every time when
 * the disk is near full or the reading failed. The waiting itself, on a
 * full file system, is test_disk_full's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "diskguard.h"

struct fixture {
	char dir[64];
	struct timebase tb;
	struct diskguard g;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof f->dir, "/tmp/raftlock-diskguard-XXXXXX");
	if (mkdtemp(f->dir) == NULL) {
		free(f);
		return -1;
	}
	timebase_init_manual(&f->tb, 1000);
	diskguard_init(&f->g, &f->tb, f->dir, 1);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	rmdir(f->dir);
	free(f);
	return 0;
}

/* The first reading's free bytes, or a skip when the test's file system
 * is too small for the case. */
static uint64_t free_at_init(struct fixture *f, uint64_t at_least)
{
	assert_int_equal(f->g.reads, 1); /* diskguard_init */
	if (f->g.room_free == UINT64_MAX || f->g.room_free < at_least) {
		fprintf(stderr, "test_diskguard: %s has too little free space; skipped\n", f->dir);
		skip();
	}
	return f->g.room_free;
}

static void test_reads_once_per_check_interval(void **state)
{
	struct fixture *f = *state;
	free_at_init(f, DISKGUARD_APPLY_MARGIN + 200 * 4096);
	for (int i = 0; i < 100; i++)
		diskguard_wait_room(&f->g, 4096, (uint64_t)i + 1);
	assert_int_equal(f->g.reads, 1);
	timebase_advance(&f->tb, DISKGUARD_CHECK_MS - 1);
	diskguard_wait_room(&f->g, 4096, 101);
	assert_int_equal(f->g.reads, 1);
	timebase_advance(&f->tb, 1);
	diskguard_wait_room(&f->g, 4096, 102);
	assert_int_equal(f->g.reads, 2);
	for (int i = 0; i < 100; i++)
		diskguard_wait_room(&f->g, 4096, (uint64_t)i + 103);
	assert_int_equal(f->g.reads, 2);
	assert_int_equal(f->g.apply_waits, 0);
}

/* Four applies of a quarter of what the reading left above the margin fit
 * in it; the fifth could not have, so it reads again, within the interval. */
static void test_reads_again_once_applies_could_use_the_room(void **state)
{
	struct fixture *f = *state;
	uint64_t have = free_at_init(f, DISKGUARD_APPLY_MARGIN + 4 * 4096);
	uint64_t quarter = (have - DISKGUARD_APPLY_MARGIN) / 4;
	for (int i = 0; i < 4; i++)
		diskguard_wait_room(&f->g, quarter, (uint64_t)i + 1);
	assert_int_equal(f->g.reads, 1);
	diskguard_wait_room(&f->g, quarter, 5);
	assert_int_equal(f->g.reads, 2);
	assert_int_equal(f->g.room_spent, quarter); /* counted from the new reading */
}

/* Within the margin of the reading, every apply reads. */
static void test_reads_every_apply_near_full(void **state)
{
	struct fixture *f = *state;
	uint64_t have = free_at_init(f, DISKGUARD_APPLY_MARGIN + 4096);
	uint64_t need = have - DISKGUARD_APPLY_MARGIN + 1;
	for (int i = 0; i < 3; i++)
		diskguard_wait_room(&f->g, need, (uint64_t)i + 1);
	assert_int_equal(f->g.reads, 4);
}

/* A directory statvfs cannot read counts as having room, and is read
 * again at every apply rather than trusted. */
static void test_failed_reading_is_not_trusted(void **state)
{
	struct fixture *f = *state;
	struct diskguard g;
	char missing[96];
	snprintf(missing, sizeof missing, "%s/missing", f->dir);
	diskguard_init(&g, &f->tb, missing, 1);
	assert_true(g.room_free == UINT64_MAX);
	for (int i = 0; i < 3; i++)
		diskguard_wait_room(&g, 4096, (uint64_t)i + 1);
	assert_int_equal(g.reads, 4);
	assert_int_equal(g.apply_waits, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_reads_once_per_check_interval, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reads_again_once_applies_could_use_the_room,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_reads_every_apply_near_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_reading_is_not_trusted, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
