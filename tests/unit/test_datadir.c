/* test_datadir.c: the data-directory checks that node_start() runs first
 * (server/datadir.c, the real file), in a temporary directory: one process
 * per directory, a directory of another cluster or node refused, LMDB kept
 * only after a clean stop or in the same boot, a raft directory that holds
 * nothing from a leader told apart. No loop, no sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "datadir.h"
#include "raftlock.h"

static char root[DATADIR_PATH_MAX];

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof root, "/tmp/test_datadir.XXXXXX");
	assert_non_null(mkdtemp(root));
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[DATADIR_PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static void touch(const char *dir, const char *name, const char *text)
{
	char path[DATADIR_PATH_MAX];
	datadir_path(path, sizeof path, dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static bool exists(const char *dir, const char *name)
{
	char path[DATADIR_PATH_MAX];
	datadir_path(path, sizeof path, dir, name);
	return access(path, F_OK) == 0;
}

/* Opening writes the identity; the same directory under another cluster
 * name or node id is refused with a message naming IDENTITY. A second
 * lock on a directory in use is refused, naming the holder's pid. */
static void test_identity_and_lock(void **state)
{
	(void)state;
	char raft[DATADIR_PATH_MAX], st[DATADIR_PATH_MAX], err[512];
	int fd = -1, fd2 = -1;
	assert_int_equal(datadir_open(root, "c1", 1, raft, st, &fd, err, sizeof err), 0);
	assert_true(exists(root, "IDENTITY"));
	assert_int_equal(datadir_lock(root, &fd2, err, sizeof err), RAFTLOCK_EDATA);
	assert_non_null(strstr(err, "in use by another raftlockd"));
	/* given up, it can be taken again */
	datadir_unlock(fd);
	assert_int_equal(datadir_lock(root, &fd2, err, sizeof err), 0);
	datadir_unlock(fd2);
	assert_int_equal(datadir_check_identity(root, "c1", 1, raft, err, sizeof err), 0);
	assert_int_equal(datadir_check_identity(root, "c2", 1, raft, err, sizeof err),
			 RAFTLOCK_EDATA);
	assert_non_null(strstr(err, "IDENTITY"));
	assert_int_equal(datadir_check_identity(root, "c1", 2, raft, err, sizeof err),
			 RAFTLOCK_EDATA);
}

/* A raft log without an identity is not this program's directory. */
static void test_log_without_identity(void **state)
{
	(void)state;
	char raft[DATADIR_PATH_MAX], err[512];
	datadir_path(raft, sizeof raft, root, "raft");
	assert_int_equal(mkdir(raft, 0750), 0);
	touch(raft, "0000000000000001-0000000000000001", "x");
	assert_int_equal(datadir_check_identity(root, "c1", 1, raft, err, sizeof err),
			 RAFTLOCK_EDATA);
	assert_non_null(strstr(err, "holds a raft log"));
	assert_false(exists(root, "IDENTITY"));
}

/* LMDB is kept after a clean stop, which counts for one start only, and
 * dropped after an unclean one from another boot. */
static void test_state_trust(void **state)
{
	(void)state;
	char st[DATADIR_PATH_MAX], err[512];
	datadir_path(st, sizeof st, root, "state");
	assert_int_equal(datadir_prepare_state(st, err, sizeof err), 0);
	touch(st, "data.mdb", "db");
	assert_int_equal(datadir_mark_clean(root), 0);
	assert_true(exists(st, "CLEAN"));
	assert_int_equal(datadir_prepare_state(st, err, sizeof err), 0);
	assert_true(exists(st, "data.mdb"));
	assert_false(exists(st, "CLEAN")); /* one start only */
	touch(st, "BOOT_ID", "another boot\n");
	assert_int_equal(datadir_prepare_state(st, err, sizeof err), 0);
	assert_false(exists(st, "data.mdb"));
}

/* A raft directory is blank while it holds only the segments libraft
 * prepares ahead: a joining node killed before it heard from a leader. Any
 * term (metadata), entry or snapshot ends that. */
static void test_raft_blank(void **state)
{
	(void)state;
	char raft[DATADIR_PATH_MAX];
	datadir_path(raft, sizeof raft, root, "raft");
	assert_false(datadir_raft_blank(raft)); /* no directory */
	assert_int_equal(mkdir(raft, 0750), 0);
	assert_true(datadir_raft_blank(raft));
	assert_false(datadir_has_files(raft));
	touch(raft, "open-1", "");
	touch(raft, "open-2", "");
	assert_true(datadir_raft_blank(raft));
	assert_true(datadir_has_files(raft));
	touch(raft, "metadata1", "term");
	assert_false(datadir_raft_blank(raft));
	char meta[DATADIR_PATH_MAX];
	datadir_path(meta, sizeof meta, raft, "metadata1");
	assert_int_equal(unlink(meta), 0);
	assert_true(datadir_raft_blank(raft));
	touch(raft, "snapshot-1-2-3", "image");
	assert_false(datadir_raft_blank(raft));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_identity_and_lock, setup, teardown),
		cmocka_unit_test_setup_teardown(test_log_without_identity, setup, teardown),
		cmocka_unit_test_setup_teardown(test_state_trust, setup, teardown),
		cmocka_unit_test_setup_teardown(test_raft_blank, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
