/* Full disk (docs/OPERATIONS.md, "Full disk"): a 3-node cluster whose data
 * directories share a small tmpfs of the test's own. Filled below the
 * nodes' --disk-reserve-mb, new sessions and locks are refused with
 * RAFTLOCK_ENOSPC and a message that says so, while releases and renewals
 * go on; with space back, writes resume. Filled to the last byte (real
 * ENOSPC for LMDB and the raft log), no node fails: they wait, and go on
 * when space returns. Nothing acknowledged is lost, also across a restart
 * of every node. Needs root (mount); skipped with a message otherwise. */
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
#include <sys/statvfs.h>
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
	int problems = tcluster_destroy(&cl);
	if (umount(mnt) != 0 || rmdir(mnt) != 0) {
		fprintf(stderr, "test_disk_full: could not unmount %s: %s\n", mnt, strerror(errno));
		problems++;
	}
	return problems;
}

static uint64_t free_bytes(void)
{
	struct statvfs sv;
	assert_int_equal(statvfs(mnt, &sv), 0);
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

/* Grows the filler file until `leave` bytes are free (about: the nodes
 * write meanwhile). */
static void fill_leaving(uint64_t leave)
{
	int fd = open(filler, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	off_t size = lseek(fd, 0, SEEK_END);
	uint64_t free_now = free_bytes();
	if (free_now > leave)
		assert_int_equal(posix_fallocate(fd, size, (off_t)(free_now - leave)), 0);
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

	fill_leaving((uint64_t)24 << 20); /* below the 48 MB reserve */
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
	fill_leaving((uint64_t)1 << 20);
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
	fill_leaving(0);
	assert_true(free_bytes() < 4096);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(below_reserve_refused_then_resumes),
		cmocka_unit_test(no_byte_left_waits_then_resumes),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
