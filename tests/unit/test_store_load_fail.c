/*
 * test_store_load_fail.c: a snapshot load whose write to LMDB fails is
 * the store's failure (store_fail.h: its line, naming LMDB's error and
 * what to do, and exit status 4), never a damaged image (RAFTLOCK_EDATA),
 * which would send the operator to the image: a map too small for the
 * image's records (its line names the records loaded), a full disk and a
 * failing one (LMDB writes pages out as a large load goes; injected here
 * by wrapping mdb_cursor_put). Keys out of order are still damage. Each
 * failing load runs in a child, which the failure ends.
 */
#include <errno.h>
#include <lmdb.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "store_fail.h"
#include "test_fsm_harness.h"

#define LOCKS 4000
#define SMALL_MAP ((size_t)256 << 10) /* far below the image's records */

/* The linker's --wrap: the store's puts reach LMDB through this. The
 * fail_at-th put (1: the next one) returns fail_rc instead; 0: none. */
int __real_mdb_cursor_put(MDB_cursor *cur, MDB_val *key, MDB_val *val, unsigned flags);
int __wrap_mdb_cursor_put(MDB_cursor *cur, MDB_val *key, MDB_val *val, unsigned flags);
static unsigned fail_at;
static int fail_rc;

int __wrap_mdb_cursor_put(MDB_cursor *cur, MDB_val *key, MDB_val *val, unsigned flags)
{
	if (fail_at > 0 && --fail_at == 0)
		return fail_rc;
	return __real_mdb_cursor_put(cur, key, val, flags);
}

/* An image of LOCKS free locks with long names (about 2 MB of records). */
static void make_image(struct fx *f, void **image, size_t *len)
{
	MDB_txn *txn = store_begin(&f->store, true);
	char name[RAFTLOCK_NAME_MAX + 1];
	for (int i = 0; i < LOCKS; i++) {
		snprintf(name, sizeof name, "load/%05d/%0*d", i, 240, 0);
		Raftlock__LockRecord rec = RAFTLOCK__LOCK_RECORD__INIT;
		rec.name = name;
		rec.limit = 1;
		store_put_lock(&f->store, txn, &rec);
	}
	store_commit(txn);
	assert_true(store_record_bytes(&f->store) > 4 * SMALL_MAP);
	assert_int_equal(store_dump(&f->store, malloc, image, len), 0);
	fx_keep(f, *image);
}

/* Loads the image into a new store with a map of map_size bytes in a
 * child, whose put number put_at fails with rc (0: none). Returns the
 * child's exit status (10: the load returned, its error in out) and its
 * stderr in out. */
static int load_in_child(struct fx *f, const void *image, size_t len, size_t map_size,
			 unsigned put_at, int rc, char *out, size_t outlen)
{
	char dir[sizeof f->dir + 8];
	snprintf(dir, sizeof dir, "%s/loaded", f->dir);
	int pipefd[2];
	assert_int_equal(pipe(pipefd), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(pipefd[1], 2);
		close(pipefd[0]);
		struct store s;
		char err[256];
		if (store_open(&s, dir, map_size, err, sizeof err) != 0) {
			fprintf(stderr, "store_open: %s\n", err);
			_exit(11);
		}
		fail_at = put_at;
		fail_rc = rc;
		int rv = store_load(&s, image, len);
		fprintf(stderr, "store_load returned %d (%s)\n", rv, raftlock_strerror(rv));
		_exit(10);
	}
	close(pipefd[1]);
	size_t got = 0;
	for (ssize_t r; got < outlen - 1 && (r = read(pipefd[0], out + got, outlen - 1 - got)) > 0;)
		got += (size_t)r;
	out[got] = '\0';
	close(pipefd[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void assert_has(const char *out, const char *part)
{
	if (strstr(out, part) == NULL)
		fail_msg("'%s' not in: %s", part, out);
}

/* A map too small for the image: the store's failure, with the records
 * loaded when the map filled (not those of the empty store before). */
static void test_map_too_small(void **state)
{
	struct fx *f = fx_ready(state);
	void *image;
	size_t len;
	make_image(f, &image, &len);
	char out[2048];
	int st = load_in_child(f, image, len, SMALL_MAP, 0, 0, out, sizeof out);
	if (st != STORE_FAIL_EXIT)
		fail_msg("load into a map too small: status %d, not %d: %s", st, STORE_FAIL_EXIT,
			 out);
	assert_has(out, "lmdb put: MDB_MAP_FULL");
	assert_has(out, "raise --map-size");
	unsigned long long mb, bytes;
	const char *at = strstr(out, "lmdb map full (map-size ");
	assert_non_null(at);
	assert_int_equal(sscanf(at, "lmdb map full (map-size %llu MB, %llu bytes", &mb, &bytes), 2);
	assert_true(bytes > SMALL_MAP / 2);
	assert_true(bytes < store_record_bytes(&f->store));
	/* the same image into a map that holds it */
	assert_int_equal(load_in_child(f, image, len, FX_MAP_SIZE, 0, 0, out, sizeof out), 10);
	assert_has(out, "store_load returned 0");
}

/* A full disk (ENOSPC, EDQUOT) and a failing one (EIO) as the load writes
 * pages out: the store's failure, each with its advice. */
static void test_disk_errors_not_damage(void **state)
{
	struct fx *f = fx_ready(state);
	void *image;
	size_t len;
	make_image(f, &image, &len);
	const struct {
		int rc;
		const char *advice;
	} cases[] = {
		{ENOSPC, "the disk is full; free space under"},
		{EDQUOT, "the disk is full; free space under"},
		{EIO, "check the disk"},
		{MDB_TXN_FULL, "lmdb put: MDB_TXN_FULL"},
	};
	char out[2048];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int st = load_in_child(f, image, len, FX_MAP_SIZE, LOCKS / 2, cases[i].rc, out,
				       sizeof out);
		if (st != STORE_FAIL_EXIT)
			fail_msg("load meeting %s: status %d, not %d: %s",
				 mdb_strerror(cases[i].rc), st, STORE_FAIL_EXIT, out);
		assert_has(out, "cannot write the store in");
		assert_has(out, mdb_strerror(cases[i].rc));
		assert_has(out, cases[i].advice);
		assert_null(strstr(out, "store_load returned"));
	}
}

/* Keys out of order (LMDB refuses an append below the last key) and a key
 * LMDB cannot hold: an image this build never wrote, refused whole. */
static void test_misordered_keys_still_damage(void **state)
{
	struct fx *f = fx_ready(state);
	void *image;
	size_t len;
	make_image(f, &image, &len);
	const int codes[] = {MDB_KEYEXIST, MDB_BAD_VALSIZE};
	for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
		struct fx *g = fx_peer(f);
		fail_at = LOCKS / 2;
		fail_rc = codes[i];
		assert_int_equal(store_load(&g->store, image, len), RAFTLOCK_EDATA);
		assert_int_equal(fail_at, 0);
		assert_int_equal(store_record_bytes(&g->store), 0); /* nothing kept */
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_map_too_small, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_disk_errors_not_damage, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_misordered_keys_still_damage, fx_setup,
						fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
