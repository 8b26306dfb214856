/* Backup and restore (docs/OPERATIONS.md, "Backup and restore"): the
 * command sequences of that section, on real nodes. `raftlock snapshot
 * save FILE` from a running cluster; a damaged or truncated image is
 * refused by `raftlockd --restore` with a clear error and creates nothing;
 * the cluster restored from the image (on the same addresses, while a
 * client of the old cluster still runs) has a new identity, tokens above
 * every token of the old cluster, no session of the image (the old
 * client's session is lost: never a grant under it), and every lock that
 * was held under lock-delay, and its watch of the old cluster's history
 * is told HISTORY_LOST (never a silent gap); a member whose LMDB is
 * rebuilt starts again from the restored base; a member added later
 * starts from the image and joins; a restore onto a full disk is refused
 * in one line and leaves the data directory as it was. */
#include <glob.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"

#define TTL_MS 3000
#define BULK_SESSIONS 50
#define BULK_LOCKS 100 /* per session */
#define CLI RAFTLOCK_BINARY_DIR "/bin/raftlock"

static struct tcluster cl;
static char scratch[128], image[256], full_mnt[160];
static raftlock_client *old_client;
static raftlock_session *old_session;
static raftlock_lock *old_held;
static raftlock_session *bulk[BULK_SESSIONS];
static uint64_t old_token_max, old_next_token, old_cluster_id;

/* The old client's watch of backup/: the last grant it heard of, and
 * whether it was told HISTORY_LOST. */
static raftlock_watch_handle *old_watch;
static struct {
	pthread_mutex_t mu;
	uint64_t granted;
	bool lost;
} heard = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void on_backup_change(const struct raftlock_watch_event *ev, void *arg)
{
	(void)arg;
	pthread_mutex_lock(&heard.mu);
	if (ev->kind == RAFTLOCK_WATCH_GRANTED)
		heard.granted = ev->token;
	heard.lost |= ev->kind == RAFTLOCK_WATCH_HISTORY_LOST;
	pthread_mutex_unlock(&heard.mu);
}

/* Waits up to timeout_ms for the watch to have heard of token's grant
 * (token 0: of HISTORY_LOST). */
static bool heard_of(uint64_t token, unsigned timeout_ms)
{
	for (unsigned waited = 0;; waited += 50) {
		pthread_mutex_lock(&heard.mu);
		bool done = token != 0 ? heard.granted == token : heard.lost;
		pthread_mutex_unlock(&heard.mu);
		if (done || waited >= timeout_ms)
			return done;
		tl_sleep_ms(50);
	}
}

static int setup(void **state)
{
	(void)state;
	snprintf(scratch, sizeof scratch, "/tmp/raftlock-backup-XXXXXX");
	if (mkdtemp(scratch) == NULL)
		return -1;
	snprintf(image, sizeof image, "%s/cluster.snap", scratch);
	tcluster_start(&cl, 3, 1000);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	raftlock_watch_cancel(old_watch);
	if (old_held != NULL)
		raftlock_lock_free(old_held);
	if (old_session != NULL)
		raftlock_session_close(old_session);
	for (int i = 0; i < BULK_SESSIONS; i++)
		if (bulk[i] != NULL)
			raftlock_session_close(bulk[i]);
	if (old_client != NULL)
		raftlock_client_close(old_client);
	if (full_mnt[0] != '\0' && umount(full_mnt) != 0)
		fprintf(stderr, "test_backup: could not unmount %s: %s\n", full_mnt,
			strerror(errno));
	return tcluster_destroy_and_remove(&cl, scratch);
}

static void endpoints(char *out, size_t len)
{
	out[0] = '\0';
	for (int i = 0; i < cl.n; i++)
		snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? "," : "", cl.addrs[i]);
}

/* Runs a shell command line; its exit status. */
static int run(const char *cmd)
{
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* State in the old cluster, then `raftlock snapshot save FILE`. */
static void save_image(void **state)
{
	(void)state;
	old_client = tl_client(&cl);
	assert_int_equal(
		raftlock_watch(old_client, "backup/", NULL, on_backup_change, NULL, &old_watch), 0);
	old_session = tl_session(old_client, TTL_MS);
	old_held = tl_lock(old_session, "backup/held");
	uint64_t t = tl_take(old_held);
	raftlock_lock *free_lock = tl_lock(old_session, "backup/free");
	uint64_t t2 = tl_take(free_lock);
	assert_int_equal(raftlock_lock_release(free_lock, NULL), 0);
	raftlock_lock_free(free_lock);
	old_token_max = t > t2 ? t : t2;

	/* Enough held locks for an image of several chunks (1 MiB each). */
	char name[RAFTLOCK_NAME_MAX + 1];
	for (int i = 0; i < BULK_SESSIONS; i++) {
		bulk[i] = tl_session(old_client, TTL_MS);
		raftlock_lock *l[BULK_LOCKS];
		for (int j = 0; j < BULK_LOCKS; j++) {
			snprintf(name, sizeof name, "backup/bulk/%02d/%03d/%0*d", i, j, 220, 0);
			l[j] = tl_lock(bulk[i], name);
		}
		tl_take_all(l, BULK_LOCKS);
		for (int j = 0; j < BULK_LOCKS; j++)
			raftlock_lock_free(l[j]); /* the handle goes, the grant stays */
	}

	char eps[256], cmd[1024];
	endpoints(eps, sizeof eps);
	snprintf(cmd, sizeof cmd, "%s --endpoints %s snapshot save %s", CLI, eps, image);
	assert_int_equal(run(cmd), 0);
	struct stat sb;
	assert_int_equal(stat(image, &sb), 0);
	assert_true(sb.st_size > 2 * (1 << 20)); /* three chunks at least */
	/* no temporary file left beside it */
	char pattern[300];
	snprintf(pattern, sizeof pattern, "%s.*", image);
	glob_t g;
	assert_int_equal(glob(pattern, 0, NULL, &g), GLOB_NOMATCH);
	globfree(&g);

	/* The old cluster goes on after the save: its later tokens must be
	 * below the restored cluster's too (the bootstrap floor). */
	raftlock_lock *after = tl_lock(old_session, "backup/after");
	uint64_t t3 = tl_take(after);
	assert_true(heard_of(t3, 10000)); /* the watch's position is past the bulk */
	assert_int_equal(raftlock_lock_release(after, NULL), 0);
	raftlock_lock_free(after);
	if (t3 > old_token_max)
		old_token_max = t3;
	Raftlock__StatusInfo *st = tl_leader_status(&cl);
	old_next_token = st->next_token;
	old_cluster_id = st->cluster_id;
	assert_true(old_cluster_id != 0);
	raftlock__status_info__free_unpacked(st, NULL);
}

/* raftlockd --restore FILE on dir (the build bin); its exit status and
 * stderr, or -2 when it still ran after timeout_ms (killed then). */
static int restore_with(const char *bin, const char *file, const char *dir, int timeout_ms,
			char *out, size_t len)
{
	char member[3][100];
	for (int i = 0; i < 3; i++)
		snprintf(member[i], sizeof member[i], "%d,127.0.0.1:%d,127.0.0.1:%d", i + 1,
			 cl.raft_port[i], cl.client_port[i]);
	char *argv[] = {"raftlockd",  "--id",      "3",       "--data-dir",
			(char *)dir,  "--cluster", cl.name,   "--restore",
			(char *)file, "--member",  member[0], "--member",
			member[1],    "--member",  member[2], NULL};
	return tcluster_run_binary(bin, argv, out, len, timeout_ms);
}

static int restore_on(const char *file, const char *dir, char *out, size_t len)
{
	return restore_with(RAFTLOCK_BINARY_DIR "/bin/raftlockd", file, dir, 10000, out, len);
}

static void copy_damaged(const char *to, long flip_at, long cut)
{
	FILE *in = fopen(image, "rb"), *out = fopen(to, "wb");
	assert_non_null(in);
	assert_non_null(out);
	fseek(in, 0, SEEK_END);
	long size = ftell(in);
	fseek(in, 0, SEEK_SET);
	for (long i = 0; i < size - cut; i++) {
		int ch = fgetc(in);
		fputc(i == flip_at ? ch ^ 0x01 : ch, out);
	}
	fclose(in);
	fclose(out);
}

/* A damaged image (one flipped bit), a truncated one and a file that is
 * no image: refused, naming the file, and nothing is created. */
static void damaged_images_refused(void **state)
{
	(void)state;
	char bad[300], cut[300], other[300], dir[300], out[4096];
	snprintf(bad, sizeof bad, "%s/flipped.snap", scratch);
	snprintf(cut, sizeof cut, "%s/truncated.snap", scratch);
	snprintf(other, sizeof other, "%s/other.snap", scratch);
	snprintf(dir, sizeof dir, "%s/never", scratch);
	struct stat sb;
	assert_int_equal(stat(image, &sb), 0);
	copy_damaged(bad, (long)sb.st_size / 2, 0);
	copy_damaged(cut, -1, 100);
	FILE *f = fopen(other, "w");
	fputs("not an image at all\n", f);
	fclose(f);
	const char *files[] = {bad, cut, other};
	for (int i = 0; i < 3; i++) {
		int st = restore_on(files[i], dir, out, sizeof out);
		assert_int_equal(st, 1);
		if (strstr(out, "is not a whole raftlock snapshot image") == NULL ||
		    strstr(out, files[i]) == NULL || strstr(out, "nothing restored") == NULL)
			fail_msg("unclear refusal of %s: %s", files[i], out);
		assert_int_not_equal(access(dir, F_OK), 0);
	}
	/* An image of a newer feature level than the build's (raftlockd-level1
	 * runs level 1): the build would run it, then refuse every restart on
	 * it. Refused at once instead, and nothing is created. */
	int st = restore_with(RAFTLOCK_BINARY_DIR "/bin/raftlockd-level1", image, dir, 10000, out,
			      sizeof out);
	assert_int_equal(st, 1);
	if (strstr(out, "comes from a cluster at feature level") == NULL ||
	    strstr(out, "nothing restored") == NULL)
		fail_msg("unclear refusal of a newer image: %s", out);
	assert_int_not_equal(access(dir, F_OK), 0);
	/* An image of a newer format than any the build reads ("RLSNAP99"):
	 * said so, not called damaged. */
	char newer[300];
	snprintf(newer, sizeof newer, "%s/newer.snap", scratch);
	copy_damaged(newer, -1, 0);
	f = fopen(newer, "r+b");
	assert_non_null(f);
	assert_int_equal(fseek(f, 6, SEEK_SET), 0);
	assert_int_equal(fwrite("99", 1, 2, f), 2);
	assert_int_equal(fclose(f), 0);
	st = restore_on(newer, dir, out, sizeof out);
	assert_int_equal(st, 1);
	if (strstr(out, "is a snapshot image of format RLSNAP99, newer than this raftlockd "
			"reads") == NULL ||
	    strstr(out, "nothing restored") == NULL)
		fail_msg("unclear refusal of an image of a newer format: %s", out);
	assert_int_not_equal(access(dir, F_OK), 0);
}

/* Stops every node and starts a new cluster from the image on the same
 * addresses, with fresh data directories; the old client keeps running. */
static void restore_cluster(void **state)
{
	(void)state;
	for (int i = 0; i < cl.n; i++)
		assert_int_equal(tcluster_stop(&cl, i), 0);
	char cmd[1024];
	for (int i = 0; i < cl.n; i++) {
		snprintf(cmd, sizeof cmd, "mv '%s/n%d' '%s/old-n%d'", cl.dir, i + 1, cl.dir, i + 1);
		assert_int_equal(run(cmd), 0);
	}
	cl.extra_args[0] = "--restore";
	cl.extra_args[1] = image;
	cl.extra_args[2] = NULL;
	for (int i = 0; i < cl.n; i++)
		tcluster_restart(&cl, i);
	cl.extra_args[0] = NULL;

	Raftlock__StatusInfo *st = tl_leader_status(&cl);
	/* INIT applies just after the leader is ready */
	for (int i = 0; i < 100 && st->next_token == 0; i++) {
		raftlock__status_info__free_unpacked(st, NULL);
		tl_sleep_ms(50);
		st = tl_leader_status(&cl);
	}
	assert_true(st->cluster_id != 0 && st->cluster_id != old_cluster_id);
	assert_true(st->next_token > old_token_max && st->next_token >= old_next_token);
	assert_int_equal(st->sessions, 0);
	raftlock__status_info__free_unpacked(st, NULL);

	/* The old client's session is lost, and nothing is granted under it. */
	raftlock_lock *probe = tl_lock(old_session, "backup/probe");
	int rv = -1;
	for (int i = 0; i < 300 && rv != RAFTLOCK_ESESSION; i++) {
		rv = raftlock_lock_try(probe, NULL);
		if (rv == 0 || raftlock_lock_try(old_held, NULL) == 0)
			fail_msg("a grant under a session of the old cluster");
		if (rv != RAFTLOCK_ESESSION)
			tl_sleep_ms(50);
	}
	assert_int_equal(rv, RAFTLOCK_ESESSION);
	assert_false(raftlock_session_valid(old_session));
	raftlock_lock_free(probe);

	/* The held lock is under lock-delay, with no holder; then it is
	 * granted, above every token of the old cluster. */
	raftlock_client *c = tl_client(&cl);
	raftlock_session *s = tl_session(c, TTL_MS);
	struct raftlock_lock_info *info = NULL;
	assert_int_equal(raftlock_lock_get(c, "backup/held", false, &info), 0);
	assert_int_equal(info->n_holders, 0);
	assert_true(info->delay_until > info->cluster_time);
	raftlock_lock_info_free(info);
	raftlock_lock *held = tl_lock(s, "backup/held");
	uint64_t t0 = tcluster_now_ms(), token = 0;
	assert_int_equal(raftlock_lock_try(held, &token), RAFTLOCK_EBUSY);
	while ((rv = raftlock_lock_try(held, &token)) == RAFTLOCK_EBUSY &&
	       tcluster_now_ms() - t0 < 20000)
		tl_sleep_ms(100);
	assert_int_equal(rv, 0);
	assert_true(token > old_token_max);
	/* The old client's watch goes on in the new cluster, whose history is
	 * another (positions from 1 again; the image's holders gone with no
	 * change of their own): HISTORY_LOST must say so (rule 19). */
	if (!heard_of(0, 10000)) {
		pthread_mutex_lock(&heard.mu);
		uint64_t last = heard.granted;
		pthread_mutex_unlock(&heard.mu);
		fail_msg("the old client's watch of backup/ was not told HISTORY_LOST in the "
			 "restored cluster (it heard token %llu last, the new grant is %llu): "
			 "it resumed from the old cluster's position",
			 (unsigned long long)last, (unsigned long long)token);
	}
	raftlock_lock *fresh = tl_lock(s, "backup/free");
	assert_true(tl_take(fresh) > token);
	struct raftlock_session_list *list = NULL;
	assert_int_equal(raftlock_session_list(c, 0, 0, false, &list), 0);
	assert_int_equal(list->n_sessions, 1);
	raftlock_session_list_free(list);
	raftlock_lock_free(fresh);
	raftlock_lock_free(held);
	raftlock_session_close(s);
	raftlock_client_close(c);
}

/* --restore on a data directory that holds a raft log, or a state, is
 * refused; a member whose LMDB is rebuilt starts from the restored base
 * again. */
static void restored_member_restarts(void **state)
{
	(void)state;
	char dir[300], out[4096], cmd[1024];
	assert_int_equal(tcluster_stop(&cl, 2), 0);
	snprintf(dir, sizeof dir, "%s/n3", cl.dir);
	int st = restore_on(image, dir, out, sizeof out);
	assert_int_equal(st, 1);
	if (strstr(out, "already holds a raft log") == NULL)
		fail_msg("unclear refusal: %s", out);
	/* and it changed nothing: the clean-stop marker is still there */
	snprintf(cmd, sizeof cmd, "%s/state/CLEAN", dir);
	assert_int_equal(access(cmd, F_OK), 0);
	/* A state without a raft log is refused too, and left as it was: a
	 * failed restore could not put it back. */
	char alone[300];
	snprintf(alone, sizeof alone, "%s/state-alone", scratch);
	snprintf(cmd, sizeof cmd, "mkdir -p '%s/state' && cp '%s/state/data.mdb' '%s/state/'",
		 alone, dir, alone);
	assert_int_equal(run(cmd), 0);
	snprintf(cmd, sizeof cmd, "%s/state/data.mdb", alone);
	struct stat before, after;
	assert_int_equal(stat(cmd, &before), 0);
	st = restore_on(image, alone, out, sizeof out);
	assert_int_equal(st, 1);
	if (strstr(out, "already holds a state (state/data.mdb)") == NULL)
		fail_msg("unclear refusal of a state without a raft log: %s", out);
	assert_int_equal(stat(cmd, &after), 0);
	assert_true(after.st_size == before.st_size &&
		    after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
		    after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
	snprintf(cmd, sizeof cmd, "rm -f '%s/state/data.mdb' '%s/state/CLEAN'", dir, dir);
	assert_int_equal(run(cmd), 0);
	tcluster_restart(&cl, 2);
	/* Compared at one applied index: lock-delays still end meanwhile. */
	bool same = false;
	for (int i = 0; i < 400 && !same; i++) {
		Raftlock__StatusInfo *lead = tl_leader_status(&cl), *me = tcluster_status(&cl, 2);
		if (me != NULL && me->applied_index == lead->applied_index) {
			assert_int_equal(me->next_token, lead->next_token);
			assert_int_equal(me->locks, lead->locks);
			assert_int_equal(me->cluster_id, lead->cluster_id);
			same = true;
		}
		if (me != NULL)
			raftlock__status_info__free_unpacked(me, NULL);
		raftlock__status_info__free_unpacked(lead, NULL);
		if (!same)
			tl_sleep_ms(50);
	}
	assert_true(same);
}

/* The role and joined flag of member id in the leader's list ("" when
 * absent). */
static void member_state(raftlock_client *c, uint64_t id, char *role, size_t len, bool *joined)
{
	struct raftlock_member_list *list = NULL;
	role[0] = '\0';
	*joined = false;
	if (raftlock_member_list(c, &list) != 0)
		return;
	for (size_t i = 0; i < list->n_members; i++)
		if (list->members[i].id == id) {
			snprintf(role, len, "%s", list->members[i].role);
			*joined = list->members[i].joined;
		}
	raftlock_member_list_free(list);
}

/* A member added to the restored cluster before its first raft snapshot
 * starts from the image too (docs/OPERATIONS.md): --restore beside
 * --join. It claims its id as every joining node does (so that no other
 * data directory can take it) and takes the log from the leader's first
 * entry, rather than creating a cluster of its own; the leader then
 * promotes it. */
static void member_added_after_restore(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	int slot = tcluster_add_slot(&cl, -1, 4);
	if (raftlock_member_add(c, 4, tcluster_raft_addr(&cl, slot), cl.client_addr[slot]) != 0)
		fail_msg("member add 4: %s", raftlock_errmsg(c));
	cl.extra_args[0] = "--restore";
	cl.extra_args[1] = image;
	cl.extra_args[2] = NULL;
	tcluster_restart(&cl, slot);
	cl.extra_args[0] = NULL;
	char role[16] = "";
	bool joined = false;
	for (int i = 0; i < 400 && !(joined && strcmp(role, "voter") == 0); i++) {
		tl_sleep_ms(50);
		member_state(c, 4, role, sizeof role, &joined);
	}
	raftlock_client_close(c);
	if (!joined || strcmp(role, "voter") != 0)
		fail_msg("member 4, started with --restore and --join, is '%s' and %s after 20 s",
			 role, joined ? "claimed its id" : "never claimed its id");
	Raftlock__StatusInfo *lead = tl_leader_status(&cl);
	uint64_t cluster_id = lead->cluster_id;
	raftlock__status_info__free_unpacked(lead, NULL);
	Raftlock__StatusInfo *me = tcluster_status(&cl, slot);
	assert_non_null(me);
	assert_int_equal(me->cluster_id, cluster_id);
	raftlock__status_info__free_unpacked(me, NULL);
}

static uint64_t free_bytes(const char *path)
{
	struct statvfs sv;
	assert_int_equal(statvfs(path, &sv), 0);
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

/* Fills the file system of path's filler until about leave bytes are free. */
static void fill_leaving(const char *filler, uint64_t leave)
{
	int fd = open(filler, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	uint64_t have = free_bytes(filler);
	if (have > leave)
		assert_int_equal(posix_fallocate(fd, lseek(fd, 0, SEEK_END), (off_t)(have - leave)),
				 0);
	close(fd);
}

static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

/* A restore that ran (killed while it served) holds its raft log and base. */
static void restored_in(const char *dir)
{
	char path[400];
	snprintf(path, sizeof path, "%s/raft", dir);
	assert_true(entries(path) > 0);
	snprintf(path, sizeof path, "%s/RESTORE-BASE", dir);
	assert_int_equal(access(path, F_OK), 0);
}

/* --restore onto a data directory whose disk is full: refused in one line
 * that names the directory and says the disk is full, exit status 1, and
 * the directory left as it was (empty here), so that the same restore
 * runs again once there is room. Without the room it needs, it is refused
 * before anything is written; a disk that fills as it writes
 * (RAFTLOCK_TEST_FAULT=room-unchecked skips that check, as when another
 * writer takes the room after it) fails at its first file, at LMDB or at
 * RESTORE-BASE, as the room left grows, each time undone. Needs root
 * (mount): skipped with a message otherwise. */
static void restore_onto_full_disk(void **state)
{
	(void)state;
	for (int i = 0; i < cl.n; i++) /* their raft ports are the restore's */
		if (cl.pid[i] > 0)
			assert_int_equal(tcluster_stop(&cl, i), 0);
	struct stat sb;
	assert_int_equal(stat(image, &sb), 0);
	char mnt[160], opts[64];
	snprintf(mnt, sizeof mnt, "%s/full", scratch);
	assert_int_equal(mkdir(mnt, 0700), 0);
	snprintf(opts, sizeof opts, "size=%lldk", (long long)sb.st_size * 4 / 1024 + 8192);
	if (mount("tmpfs", mnt, "tmpfs", 0, opts) != 0) {
		fprintf(stderr,
			"test_backup: restore_onto_full_disk SKIPPED: cannot mount a tmpfs on %s "
			"(%s); it needs root (CAP_SYS_ADMIN)\n",
			mnt, strerror(errno));
		skip();
	}
	snprintf(full_mnt, sizeof full_mnt, "%s", mnt);
	char dir[200], filler[200], out[4096], cmd[512];
	snprintf(dir, sizeof dir, "%s/n3", mnt);
	snprintf(filler, sizeof filler, "%s/filler", mnt);

	/* The room a restore takes, from one that runs. */
	assert_int_equal(mkdir(dir, 0750), 0);
	uint64_t before = free_bytes(mnt);
	assert_int_equal(restore_with(RAFTLOCK_BINARY_DIR "/bin/raftlockd", image, dir, 2000, out,
				      sizeof out),
			 -2);
	restored_in(dir);
	/* less the segments raft prepares ahead once it runs (8 MiB each,
	 * retried while the disk is full): the node's, not the restore's */
	snprintf(cmd, sizeof cmd, "rm -f '%s'/raft/open-*", dir);
	assert_int_equal(run(cmd), 0);
	uint64_t used = before - free_bytes(mnt);
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir '%s'", dir, dir);
	assert_int_equal(run(cmd), 0);

	/* Not the room it needs: refused before anything is written. */
	fill_leaving(filler, used / 2);
	int st = restore_on(image, dir, out, sizeof out);
	char said[300];
	snprintf(said, sizeof said, "no room to restore into %s: the disk is full", dir);
	if (st != 1 || strstr(out, said) == NULL || strstr(out, "needs about") == NULL ||
	    strstr(out, "nothing restored") == NULL)
		fail_msg("restore onto a full disk: status %d, output: %s", st, out);
	assert_int_equal(entries(dir), 0);
	assert_int_equal(unlink(filler), 0);

	/* The disk fills as it writes: each step's failure is undone. */
	setenv("RAFTLOCK_TEST_FAULT", "room-unchecked", 1);
	const unsigned tenths[] = {0, 3, 6, 9};
	for (size_t i = 0; i < sizeof tenths / sizeof tenths[0]; i++) {
		fill_leaving(filler, used * tenths[i] / 10);
		st = restore_on(image, dir, out, sizeof out);
		if (st != 1 || strstr(out, said) == NULL || strstr(out, "nothing restored") == NULL)
			fail_msg("restore with %u%% of its room: status %d, output: %s",
				 tenths[i] * 10, st, out);
		if (entries(dir) != 0)
			fail_msg("restore with %u%% of its room left files in %s: %s",
				 tenths[i] * 10, dir, out);
		assert_int_equal(unlink(filler), 0);
	}
	unsetenv("RAFTLOCK_TEST_FAULT");

	/* Room again: the same restore on the same directory runs. */
	st = restore_with(RAFTLOCK_BINARY_DIR "/bin/raftlockd", image, dir, 2000, out, sizeof out);
	if (st != -2)
		fail_msg("restore once there is room: status %d, output: %s", st, out);
	restored_in(dir);
	assert_int_equal(umount(mnt), 0);
	full_mnt[0] = '\0';
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(save_image),
		cmocka_unit_test(damaged_images_refused),
		cmocka_unit_test(restore_cluster),
		cmocka_unit_test(restored_member_restarts),
		cmocka_unit_test(member_added_after_restore),
		cmocka_unit_test(restore_onto_full_disk),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
