/* Full disk (docs/OPERATIONS.md, "Full disk"): a 3-node cluster whose data
 * directories share a small tmpfs of the test's own. Filled below the
 * nodes' --disk-reserve-mb, new sessions and locks are refused with
 * RAFTLOCK_ENOSPC and a message that says so, while releases and renewals
 * go on; with space back, writes resume. Filled to the last byte (real
 * ENOSPC for LMDB and the raft log), no node fails: they wait, and go on
 * when space returns. Nothing acknowledged is lost, also across a restart
 * of every node. A node with the guard off, whose data directory alone
 * fills, stops at the LMDB write that fails, with a line that says why
 * and exit status 4, and catches up once started again with room. Needs
 * root (mount); skipped with a message otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"

#define FS_MB 192
#define RESERVE_MB "48"
#define LOCKS 40
#define CLI RAFTLOCK_BINARY_DIR "/bin/raftlock"
#define TTL_MS 30000 /* outlives the stalls below */

static struct tcluster cl;
static char mnt[64], filler[128];
static bool mounted;
/* unguarded_write_fails_stops_with_advice: a tmpfs of one node's own */
static char small[320], small_filler[340], small_data[340], data_link[340];
static bool small_mounted;
static int unguarded = -1;
static raftlock_client *client;
static raftlock_session *session;
static raftlock_lock *held[LOCKS];
static uint64_t tokens[LOCKS];

static int setup(void **state)
{
	(void)state;
	snprintf(mnt, sizeof mnt, "/tmp/raftlock-disk-XXXXXX");
	if (mkdtemp(mnt) == NULL)
		return -1;
	if (mount("tmpfs", mnt, "tmpfs", 0,
		  "size="
		  "192m") != 0) {
		fprintf(stderr,
			"test_disk_full: SKIPPED: cannot mount a tmpfs on %s (%s); the "
			"full-disk test needs root (CAP_SYS_ADMIN)\n",
			mnt, strerror(errno));
		rmdir(mnt);
		return 0;
	}
	mounted = true;
	snprintf(filler, sizeof filler, "%s/filler", mnt);
	cl.base_dir = mnt;
	cl.extra_args[0] = "--disk-reserve-mb";
	cl.extra_args[1] = RESERVE_MB;
	cl.extra_args[2] = NULL;
	tcluster_start(&cl, 3, 1000);
	return 0;
}

/* Stops the node whose data directory is on `small` (the last test) and
 * unmounts that tmpfs; returns the problems seen. */
static int small_fs_remove(void)
{
	int problems = 0;
	if (!small_mounted)
		return 0;
	if (unguarded >= 0 && cl.pid[unguarded] > 0) {
		int st = tcluster_stop(&cl, unguarded);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "test_disk_full: node %d did not stop cleanly (%#x)\n",
				unguarded + 1, st);
			problems++;
		}
	}
	unlink(data_link); /* the cluster's removal then leaves the tmpfs alone */
	if (umount(small) != 0) {
		fprintf(stderr, "test_disk_full: could not unmount %s: %s\n", small,
			strerror(errno));
		problems++;
	}
	return problems;
}

static int teardown(void **state)
{
	(void)state;
	if (!mounted)
		return 0;
	unlink(filler);
	for (int i = 0; i < LOCKS; i++)
		raftlock_lock_free(held[i]);
	if (session != NULL)
		raftlock_session_close(session);
	if (client != NULL)
		raftlock_client_close(client);
	int problems = small_fs_remove();
	problems += tcluster_destroy(&cl);
	if (umount(mnt) != 0 || rmdir(mnt) != 0) {
		fprintf(stderr, "test_disk_full: could not unmount %s: %s\n", mnt, strerror(errno));
		problems++;
	}
	return problems;
}

static uint64_t free_bytes(const char *fs)
{
	struct statvfs sv;
	assert_int_equal(statvfs(fs, &sv), 0);
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

/* Grows the filler file `file` of file system fs until `leave` bytes are
 * free (about: the nodes write meanwhile). */
static void fill_leaving(const char *fs, const char *file, uint64_t leave)
{
	int fd = open(file, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	for (int tries = 0; tries < 100; tries++) {
		uint64_t free_now = free_bytes(fs);
		if (free_now <= leave)
			break;
		off_t size = lseek(fd, 0, SEEK_END);
		int rv = posix_fallocate(fd, size, (off_t)(free_now - leave));
		if (rv == 0)
			break;
		assert_int_equal(rv, ENOSPC); /* the nodes wrote meanwhile: look again */
	}
	if (leave == 0) {
		/* the last pages, one at a time, until the file system says no */
		static char page[4096];
		while (write(fd, page, sizeof page) > 0)
			;
	}
	close(fd);
}

/* OPEN_SESSION over the raw protocol: its status and message. */
static int raw_open(int port, char *msg, size_t len)
{
	int fd = raw_connect(port);
	assert_true(fd >= 0);
	Raftlock__OpenSessionRequest op = RAFTLOCK__OPEN_SESSION_REQUEST__INIT;
	op.ttl_ms = TTL_MS;
	op.secret = raw_secret;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.id = 1;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
	env.open_session = &op;
	assert_int_equal(raw_send_envelope(fd, &env), 0);
	Raftlock__Envelope *r = raw_recv_envelope(fd, 10000);
	assert_non_null(r);
	const Raftlock__Response *resp = r->response;
	int status = resp->status == 0 && resp->payload_case == RAFTLOCK__RESPONSE__PAYLOAD_RESULT
			     ? resp->result->status
			     : resp->status;
	snprintf(msg, len, "%s", resp->message);
	raftlock__envelope__free_unpacked(r, NULL);
	close(fd);
	return status;
}

/* Every lock taken before is still held, with its token. */
static void check_nothing_lost(raftlock_client *c)
{
	char name[64];
	for (int i = 1; i < LOCKS; i++) {
		snprintf(name, sizeof name, "disk/held-%02d", i);
		struct raftlock_lock_info *info = NULL;
		int rv = raftlock_lock_get(c, name, false, &info);
		if (rv != 0)
			fail_msg("%s: %s", name, raftlock_errmsg(c));
		assert_int_equal(info->n_holders, 1);
		assert_int_equal(info->holders[0].token, tokens[i]);
		raftlock_lock_info_free(info);
	}
}

static void below_reserve_refused_then_resumes(void **state)
{
	(void)state;
	if (!mounted)
		skip();
	client = tl_client(&cl);
	session = tl_session(client, TTL_MS);
	char name[64], msg[512];
	for (int i = 0; i < LOCKS; i++) {
		snprintf(name, sizeof name, "disk/held-%02d", i);
		held[i] = tl_lock(session, name);
		tokens[i] = tl_take(held[i]);
	}

	fill_leaving(mnt, filler, (uint64_t)24 << 20); /* below the 48 MB reserve */
	int l = tcluster_leader(&cl, 10000);
	assert_true(l >= 0);
	int status = 0;
	for (int i = 0; i < 50 && status != RAFTLOCK_ENOSPC; i++) {
		tl_sleep_ms(50);
		status = raw_open(cl.client_port[l], msg, sizeof msg);
	}
	assert_int_equal(status, RAFTLOCK_ENOSPC);
	if (strstr(msg, "disk full on node") == NULL || strstr(msg, "disk-reserve-mb") == NULL)
		fail_msg("unclear refusal: %s", msg);
	/* The CLI of docs/OPERATIONS.md, "Full disk", says why. */
	char cmd[512], out[1024] = "";
	snprintf(cmd, sizeof cmd,
		 "%s --endpoints %s,%s,%s --timeout 1500 lock --no-wait disk/cli -- true 2>&1", CLI,
		 cl.addrs[0], cl.addrs[1], cl.addrs[2]);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t got = fread(out, 1, sizeof out - 1, p);
	out[got] = '\0';
	int st = pclose(p);
	if (st == 0 || strstr(out, "disk is full") == NULL)
		fail_msg("raftlock lock on a full disk: status %d, output: %s", st, out);
	assert_int_equal(tcluster_metric(&cl, l, "raftlock_disk_full"), 1);
	assert_true(tcluster_metric(&cl, l, "raftlock_disk_refusals_total") >= 1);
	/* A new lock is refused (retried by the library until its
	 * deadline); letting go still works. */
	raftlock_lock *extra = tl_lock(session, "disk/extra");
	int rv = raftlock_lock_acquire(extra, RAFTLOCK_EXCLUSIVE, 1, 1000, NULL);
	if (rv == 0)
		fail_msg("a new lock granted on a full disk");
	assert_int_equal(raftlock_lock_release(held[0], NULL), 0);

	assert_int_equal(unlink(filler), 0);
	/* another handle: the refused acquire may still be in flight */
	raftlock_lock *again = tl_lock(session, "disk/again");
	uint64_t token = 0;
	rv = raftlock_lock_acquire(again, RAFTLOCK_EXCLUSIVE, 1, 10000, &token);
	if (rv != 0)
		fail_msg("no write resumed with space back: %s", raftlock_errmsg(client));
	assert_true(token > tokens[LOCKS - 1]);
	assert_int_equal(raftlock_lock_release(again, NULL), 0);
	raftlock_lock_free(again);
	assert_int_equal(raw_open(cl.client_port[tcluster_leader(&cl, 10000)], msg, sizeof msg), 0);
	raftlock_lock_free(extra);
	check_nothing_lost(client);
}

static atomic_bool released;

static void *release_spare(void *arg)
{
	static int rv;
	rv = raftlock_lock_release(arg, NULL);
	atomic_store(&released, true);
	return &rv;
}

/* Not a byte left: LMDB and the raft log cannot write. No node fails: a
 * release proposed then is applied, and acknowledged, once space is back;
 * the cluster goes on with everything acknowledged. */
static void no_byte_left_waits_then_resumes(void **state)
{
	(void)state;
	if (!mounted)
		skip();
	raftlock_lock *spare = tl_lock(session, "disk/spare");
	tl_take(spare);
	/* 1 MB left: the raft log still takes the release (its segments are
	 * allocated ahead), but no node applies it: there is not room enough
	 * for LMDB (diskguard_wait_room), so it is not acknowledged. */
	fill_leaving(mnt, filler, (uint64_t)1 << 20);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, release_spare, spare), 0);
	bool waited = false;
	for (int i = 0; i < 100 && !waited; i++) {
		tl_sleep_ms(100);
		for (int n = 0; n < cl.n; n++)
			waited |= tcluster_log_has(&cl, n, "waiting for space");
	}
	if (!waited)
		fail_msg("no node waited for room to apply the release");
	assert_false(atomic_load(&released));
	/* Then not a byte: a new raft log segment cannot be allocated either
	 * (raft_uv retries it). */
	fill_leaving(mnt, filler, 0);
	assert_true(free_bytes(mnt) < 4096);
	tl_sleep_ms(2000);
	assert_false(atomic_load(&released));
	for (int i = 0; i < cl.n; i++) {
		char path[64];
		snprintf(path, sizeof path, "/proc/%d", (int)cl.pid[i]);
		if (access(path, F_OK) != 0)
			fail_msg("node %d died on the full disk", i + 1);
	}
	assert_int_equal(unlink(filler), 0);
	void *ret;
	assert_int_equal(pthread_join(th, &ret), 0);
	if (*(int *)ret != 0)
		fail_msg("the release proposed on the full disk: %s",
			 raftlock_strerror(*(int *)ret));
	raftlock_lock_free(spare);
	raftlock_lock *after = tl_lock(session, "disk/after");
	int rv = raftlock_lock_acquire(after, RAFTLOCK_EXCLUSIVE, 1, 20000, NULL);
	if (rv != 0)
		fail_msg("no write resumed with space back: %s", raftlock_errmsg(client));
	assert_int_equal(raftlock_lock_release(after, NULL), 0);
	raftlock_lock_free(after);
	assert_true(raftlock_session_valid(session));
	check_nothing_lost(client);

	/* and across a restart of every node */
	for (int i = 0; i < cl.n; i++)
		assert_int_equal(tcluster_stop(&cl, i), 0);
	for (int i = 0; i < cl.n; i++)
		tcluster_restart(&cl, i);
	assert_true(tcluster_leader(&cl, 20000) >= 0);
	check_nothing_lost(client);
}

/* The room raft_uv may take when the node starts (segments prepared
 * ahead, 8 MiB each), over what its data directory holds. */
#define SMALL_SPARE_MB 32

/* Stops node i and moves its data directory onto a tmpfs of its own
 * (`small`), left in its place as a symbolic link: a filler there fills
 * that node's disk alone. */
static void data_dir_on_small_fs(int i)
{
	assert_int_equal(tcluster_stop(&cl, i), 0);
	snprintf(data_link, sizeof data_link, "%s/n%d", cl.dir, i + 1);
	snprintf(small, sizeof small, "%s/small", cl.dir);
	snprintf(small_data, sizeof small_data, "%s/n%d", small, i + 1);
	snprintf(small_filler, sizeof small_filler, "%s/filler", small);
	char cmd[800], out[64] = "";
	snprintf(cmd, sizeof cmd, "du -sk '%s'", data_link);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(out, sizeof out, p));
	assert_int_equal(pclose(p), 0);
	char opts[64];
	snprintf(opts, sizeof opts, "size=%lldk", atoll(out) + SMALL_SPARE_MB * 1024);
	assert_int_equal(mkdir(small, 0700), 0);
	assert_int_equal(mount("tmpfs", small, "tmpfs", 0, opts), 0);
	small_mounted = true;
	assert_int_equal(tcluster_shell("cp -a '%s' '%s' && rm -rf '%s' && ln -s '%s' '%s'",
					data_link, small_data, data_link, small_data, data_link),
			 0);
	unguarded = i;
}

/* Waits until node i has applied what the leader l had committed. */
static void wait_caught_up(int i, int l)
{
	Raftlock__StatusInfo *st = tcluster_status(&cl, l);
	assert_non_null(st);
	uint64_t want = st->commit_index;
	raftlock__status_info__free_unpacked(st, NULL);
	uint64_t end = tcluster_now_ms() + 20000, got = 0;
	while (got < want) {
		if (tcluster_now_ms() > end)
			fail_msg("node %d applied %llu of %llu", i + 1, (unsigned long long)got,
				 (unsigned long long)want);
		tl_sleep_ms(50);
		st = tcluster_status(&cl, i);
		got = st != NULL ? st->applied_index : 0;
		if (st != NULL)
			raftlock__status_info__free_unpacked(st, NULL);
	}
}

/* A follower with the disk guard off (--disk-reserve-mb 0), whose data
 * directory alone fills to the last byte: an LMDB write of an entry fails
 * (ENOSPC, or EIO for a write cut short). It stops rather than apply on
 * without that entry, with one line naming LMDB's error, its store and
 * what to do, and exit status 4 (server/store_fail.h); the others go on.
 * With room again it starts and applies from its raft log what it had
 * not. */
static void unguarded_write_fails_stops_with_advice(void **state)
{
	(void)state;
	if (!mounted)
		skip();
	int l = tcluster_leader(&cl, 10000);
	assert_true(l >= 0);
	int f = (l + 1) % cl.n;
	data_dir_on_small_fs(f);
	cl.extra_args[1] = "0"; /* its guard off: the write meets the full disk */
	tcluster_restart(&cl, f);
	wait_caught_up(f, l);
	fill_leaving(small, small_filler, 0);

	raftlock_client *c = tl_client(&cl);
	raftlock_session *s = tl_session(c, TTL_MS);
	char name[RAFTLOCK_NAME_MAX + 1];
	int st = 0, taken = 0;
	uint64_t end = tcluster_now_ms() + 60000;
	while (waitpid(cl.pid[f], &st, WNOHANG) == 0) {
		if (tcluster_now_ms() > end)
			fail_msg("node %d applied %d new locks on a full disk and runs on", f + 1,
				 taken);
		/* long names: the store grows by pages */
		snprintf(name, sizeof name, "disk/unguarded-%06d-%0200d", taken++, 0);
		tl_take(tl_lock(s, name));
	}
	cl.pid[f] = 0;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 4)
		fail_msg("node %d on a full disk: %s %d, not exit status 4", f + 1,
			 WIFEXITED(st) ? "exit status" : "signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	char said[400];
	snprintf(said, sizeof said, "cannot write the store in %s/state (lmdb ", data_link);
	if (!tcluster_log_has(&cl, f, said) ||
	    (!tcluster_log_has(&cl, f, "the disk is full; free space under") &&
	     !tcluster_log_has(&cl, f, "check the disk")))
		fail_msg("node %d stopped without the line that says why (%s...)", f + 1, said);
	assert_int_equal(tcluster_log_count(&cl, f, "exit status 4"), 1);

	/* The others went on; with room again the node catches up. */
	assert_int_equal(unlink(small_filler), 0);
	snprintf(name, sizeof name, "disk/unguarded-after");
	tl_take(tl_lock(s, name));
	tcluster_restart(&cl, f);
	cl.extra_args[1] = RESERVE_MB;
	l = tcluster_leader(&cl, 10000);
	assert_true(l >= 0);
	wait_caught_up(f, l);
	Raftlock__StatusInfo *a = tcluster_status(&cl, l), *b = tcluster_status(&cl, f);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(b->locks, a->locks);
	raftlock__status_info__free_unpacked(a, NULL);
	raftlock__status_info__free_unpacked(b, NULL);
	raftlock_session_close(s);
	raftlock_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(below_reserve_refused_then_resumes),
		cmocka_unit_test(no_byte_left_waits_then_resumes),
		cmocka_unit_test(unguarded_write_fails_stops_with_advice),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
