/* test_diskguard.c: how often the guard reads the free space (statvfs on a
 * real directory, counted by the guard), on a manual clock: the refusal
 * check at most once per DISKGUARD_CHECK_MS, diskguard_wait_room() at
 * every apply; a wait tells on_wait at each reading. The waiting itself, on
 * a full file system, is test_disk_full's. */
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

static void test_refusal_check_reads_once_per_interval(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(f->g.reads, 1); /* diskguard_init */
	for (int i = 0; i < 100; i++)
		assert_false(diskguard_full(&f->g)); /* a reserve of 1 byte */
	assert_int_equal(f->g.reads, 1);
	timebase_advance(&f->tb, DISKGUARD_CHECK_MS - 1);
	diskguard_full(&f->g);
	assert_int_equal(f->g.reads, 1);
	timebase_advance(&f->tb, 1);
	diskguard_full(&f->g);
	assert_int_equal(f->g.reads, 2);
}

/* The full-disk rule (GUARANTEES): an apply goes ahead only on a reading
 * taken for it, never on one kept from an earlier apply or check. */
static void test_every_apply_reads(void **state)
{
	struct fixture *f = *state;
	for (int i = 0; i < 100; i++) {
		diskguard_wait_room(&f->g, 4096, (uint64_t)i + 1);
		diskguard_full(&f->g);
	}
	assert_int_equal(f->g.reads, 101);
	assert_int_equal(f->g.apply_waits, 0);
}

/* A directory statvfs cannot read counts as having room: the node goes on
 * (a failing statvfs must not stop it), reading again at every apply. */
static void test_failed_reading_counts_as_room(void **state)
{
	struct fixture *f = *state;
	struct diskguard g;
	char missing[96];
	snprintf(missing, sizeof missing, "%s/missing", f->dir);
	diskguard_init(&g, &f->tb, missing, 1);
	assert_true(g.free_bytes == UINT64_MAX);
	for (int i = 0; i < 3; i++)
		diskguard_wait_room(&g, 4096, (uint64_t)i + 1);
	assert_int_equal(g.reads, 4);
	assert_int_equal(g.apply_waits, 0);
}

struct waited {
	struct diskguard *g;
	const char *room; /* where a reading finds room */
	int calls;
	char why[256];
};

/* After the second call, points the guard where a reading finds room. */
static void on_wait(void *arg, const char *why)
{
	struct waited *w = arg;
	snprintf(w->why, sizeof w->why, "%s", why);
	if (++w->calls == 2)
		w->g->path = w->room;
}

/* While an apply waits for room, on_wait hears why at every reading (the
 * node pings its supervisor from there: a loop held on purpose is not
 * hung); the wait ends at the first reading with room. */
static void test_wait_tells_on_wait(void **state)
{
	struct fixture *f = *state;
	char missing[96]; /* statvfs fails: counts as room */
	snprintf(missing, sizeof missing, "%s/missing", f->dir);
	struct waited w = {.g = &f->g, .room = missing};
	f->g.on_wait = on_wait;
	f->g.on_wait_arg = &w;
	diskguard_wait_room(&f->g, UINT64_MAX - 1, 7);
	assert_int_equal(w.calls, 2);
	assert_int_equal(f->g.apply_waits, 1);
	assert_non_null(strstr(w.why, "disk full: applying entry 7 needs about"));
	assert_non_null(strstr(w.why, "waiting for space"));
	f->g.path = f->dir;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_refusal_check_reads_once_per_interval, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_every_apply_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wait_tells_on_wait, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_reading_counts_as_room, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
