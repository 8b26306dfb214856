/* The raftlock CLI against a real cluster: `raftlock lock` passes the token
 * and releases when its command exits; `raftlock run` (HA standby) hands
 * over within TTL + election timeout after the active instance is killed;
 * and when the session cannot be renewed, the command is stopped before
 * the session's validity ends. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"

#define ELECTION_MS 1000
#define CLI RAFTLOCK_BINARY_DIR "/bin/raftlock"

static struct tcluster cl;
static char work[200];

static int setup(void **state)
{
	(void)state;
	tcluster_start(&cl, 3, ELECTION_MS);
	tcluster_export_endpoints(&cl);
	snprintf(work, sizeof work, "%.150s/cli", cl.dir);
	mkdir(work, 0755);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return tcluster_destroy(&cl);
}

/* Starts `raftlock ARGS...` with its output in work/NAME.out. */
static pid_t cli_start(const char *tag, char *const args[])
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		char out[400];
		snprintf(out, sizeof out, "%s/%s.out", work, tag);
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		execv(CLI, args);
		_exit(127);
	}
	return pid;
}

static bool file_exists(const char *tag, const char *what)
{
	char path[400];
	snprintf(path, sizeof path, "%s/%s.%s", work, tag, what);
	return access(path, F_OK) == 0;
}

static uint64_t read_u64(const char *tag, const char *what)
{
	char path[400];
	snprintf(path, sizeof path, "%s/%s.%s", work, tag, what);
	FILE *f = fopen(path, "r");
	unsigned long long v = 0;
	if (f != NULL) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

static void lock_runs_command_with_token(void **state)
{
	(void)state;
	char script[2048];
	snprintf(script, sizeof script,
		 "echo $RAFTLOCK_TOKEN > %s/one.token; " CLI " holders cli/ > %s/one.holders", work,
		 work);
	char *args[] = {"raftlock", "lock", "cli/one", "--", "sh", "-c", script, NULL};
	pid_t pid = cli_start("one", args);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	uint64_t token = read_u64("one", "token");
	assert_true(token > 0);
	char path[400], text[1024] = "";
	snprintf(path, sizeof path, "%s/one.holders", work);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t n = fread(text, 1, sizeof text - 1, f);
	text[n] = '\0';
	fclose(f);
	char want[64];
	snprintf(want, sizeof want, "%llu", (unsigned long long)token);
	assert_non_null(strstr(text, "cli/one"));
	assert_non_null(strstr(text, want));
	/* Released when the command exited: a no-wait lock gets it now. */
	char *again[] = {"raftlock", "lock", "--no-wait", "cli/one", "--", "true", NULL};
	pid = cli_start("one-again", again);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(WEXITSTATUS(st), 0);
	/* The command's exit status is the CLI's. */
	char *fails[] = {"raftlock", "lock", "cli/one", "--", "sh", "-c", "exit 7", NULL};
	pid = cli_start("one-fails", fails);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(WEXITSTATUS(st), 7);
}

/* `raftlock lock --all`: a set taken at once, the tokens in the order
 * given; with one of its locks held, --no-wait takes none of them. */
static void lock_all_takes_a_set(void **state)
{
	(void)state;
	char script[1024];
	snprintf(script, sizeof script, "echo $RAFTLOCK_TOKEN > %s/all.token", work);
	char *args[] = {"raftlock", "lock", "--all", "cli/set-b,cli/set-a", "--", "sh",
			"-c",       script, NULL};
	pid_t pid = cli_start("all", args);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(WEXITSTATUS(st), 0);
	char path[400];
	snprintf(path, sizeof path, "%s/all.token", work);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	unsigned long long tb = 0, ta = 0;
	assert_int_equal(fscanf(f, "%llu,%llu", &tb, &ta), 2);
	fclose(f);
	assert_true(ta > 0);
	assert_int_equal(tb, ta + 1); /* tokens are taken in name order */
	char *hold[] = {"raftlock", "lock", "cli/set-b", "--", "sleep", "3", NULL};
	pid_t holder = cli_start("all-holder", hold);
	char *busy[] = {"raftlock", "lock", "--all", "--no-wait", "cli/set-a,cli/set-b",
			"--",       "true", NULL};
	int code = 0;
	for (int i = 0; i < 50; i++) { /* until the holder has it */
		pid = cli_start("all-busy", busy);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		code = WEXITSTATUS(st);
		if (code == 3)
			break;
		usleep(50 * 1000);
	}
	assert_int_equal(code, 3);
	char *free_a[] = {"raftlock", "lock", "--no-wait", "cli/set-a", "--", "true", NULL};
	pid = cli_start("all-free-a", free_a);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(WEXITSTATUS(st), 0); /* the refused set took nothing */
	kill(holder, SIGTERM);
	waitpid(holder, &st, 0);
}

/* An instance of `raftlock run` whose command records when it starts. */
static pid_t run_instance(const char *tag, const char *ttl)
{
	static char scripts[4][2048];
	static int next;
	char *script = scripts[next++ % 4];
	/* Files appear whole (written, then renamed): the test polls them. The
	 * trap is set before "started" appears, so a SIGTERM sent then is seen. */
	snprintf(script, 2048,
		 "trap 'date +%%s%%N > %s/%s.term.tmp && mv %s/%s.term.tmp %s/%s.term; exit 0' "
		 "TERM; date +%%s%%N > %s/%s.started.tmp && mv %s/%s.started.tmp %s/%s.started; "
		 "while :; do sleep 0.05; done",
		 work, tag, work, tag, work, tag, work, tag, work, tag, work, tag);
	char *args[] = {"raftlock", "run",  "--permits",    "1",    "--ttl",  (char *)ttl,
			"--grace",  "1000", "--lock-delay", "1000", "cli/ha", "--",
			"sh",       "-c",   script,         NULL};
	return cli_start(tag, args);
}

static const char *await_active(const char *a, const char *b, int timeout_ms)
{
	uint64_t end = tcluster_now_ms() + (uint64_t)timeout_ms;
	while (tcluster_now_ms() < end) {
		if (file_exists(a, "started"))
			return a;
		if (b != NULL && file_exists(b, "started"))
			return b;
		usleep(10000);
	}
	return NULL;
}

static uint64_t now_realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void run_hands_over_after_kill(void **state)
{
	(void)state;
	const unsigned ttl = 3000;
	pid_t a = run_instance("ha-a", "3000");
	const char *first = await_active("ha-a", NULL, 10000);
	assert_non_null(first);
	pid_t b = run_instance("ha-b", "3000");
	usleep(500000);
	assert_false(file_exists("ha-b", "started")); /* one permit: b waits */
	uint64_t killed = now_realtime_ns();
	kill(a, SIGKILL); /* its command dies with it (PR_SET_PDEATHSIG) */
	waitpid(a, NULL, 0);
	assert_non_null(await_active("ha-b", NULL, (int)(ttl + ELECTION_MS + 5000)));
	uint64_t started = read_u64("ha-b", "started");
	uint64_t took_ms = (started - killed) / 1000000;
	printf("measure: raftlock run hand-over after SIGKILL of the active instance "
	       "(TTL %u ms, lock-delay 1000 ms): %llu ms\n",
	       ttl, (unsigned long long)took_ms);
	assert_true(took_ms >= 1000); /* the lock-delay was kept */
	assert_true(took_ms <= ttl + ELECTION_MS + 1000 + 500);
	kill(b, SIGTERM);
	int st;
	waitpid(b, &st, 0);
	assert_true(file_exists("ha-b", "term")); /* SIGTERM forwarded */
}

/* With every node paused, the active instance cannot renew its session:
 * its command gets SIGTERM before the session's validity ends (TTL after
 * the last acknowledged keepalive at the latest). */
static void lost_session_stops_command(void **state)
{
	(void)state;
	const unsigned ttl = 3000;
	pid_t a = run_instance("lost", "3000");
	assert_non_null(await_active("lost", NULL, 10000));
	usleep(300000);
	uint64_t paused = now_realtime_ns();
	for (int i = 0; i < cl.n; i++)
		tcluster_signal(&cl, i, SIGSTOP);
	uint64_t end = tcluster_now_ms() + ttl + 2000;
	while (!file_exists("lost", "term") && tcluster_now_ms() < end)
		usleep(10000);
	for (int i = 0; i < cl.n; i++)
		tcluster_signal(&cl, i, SIGCONT);
	assert_true(file_exists("lost", "term"));
	uint64_t term_ms = (read_u64("lost", "term") - paused) / 1000000;
	printf("measure: session not renewable: command got SIGTERM %llu ms after the "
	       "cluster paused (TTL %u ms, grace 1000 ms)\n",
	       (unsigned long long)term_ms, ttl);
	assert_true(term_ms < ttl);
	int st;
	assert_int_equal(waitpid(a, &st, 0), a);
	assert_true(tcluster_leader(&cl, 15000) >= 0);
}

/* ------------------------------------------- the command's whole group -- */

/* `raftlock lock` over a command that starts four grandchildren (two in the
 * background, two in a pipeline), each writing its pid to TAG.pids. */
static pid_t lock_family(const char *tag)
{
	static char script[4096];
	const char *one = "sh -c 'echo $$ >> %s/%s.pids; exec sleep 1000'";
	char each[512];
	snprintf(each, sizeof each, one, work, tag);
	snprintf(script, sizeof script, "%s & %s & %s | %s & wait", each, each, each, each);
	char *args[] = {"raftlock",   "lock", "--ttl", "3000", "--grace", "1000",
			"cli/family", "--",   "sh",    "-c",   script,    NULL};
	return cli_start(tag, args);
}

/* The pids TAG.pids holds (up to max), once it holds `want` of them. */
static int family_pids(const char *tag, pid_t *pids, int want)
{
	char path[400];
	snprintf(path, sizeof path, "%s/%s.pids", work, tag);
	uint64_t end = tcluster_now_ms() + 10000;
	int n = 0;
	while (tcluster_now_ms() < end) {
		n = 0;
		FILE *f = fopen(path, "r");
		long v;
		while (f != NULL && n < want && fscanf(f, "%ld", &v) == 1)
			pids[n++] = (pid_t)v;
		if (f != NULL)
			fclose(f);
		if (n == want)
			break;
		usleep(10000);
	}
	return n;
}

/* A process is gone once it no longer exists or is a zombie. */
static bool pid_gone(pid_t pid)
{
	char path[64], stat[256] = "";
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return true;
	size_t n = fread(stat, 1, sizeof stat - 1, f);
	fclose(f);
	stat[n] = '\0';
	const char *paren = strrchr(stat, ')');
	return paren == NULL || paren[2] == 'Z' || paren[2] == 'X';
}

/* Waits until every pid is gone; returns how long that took, or -1 (and
 * kills what is left, so that a failing test leaves nothing behind). */
static long family_gone_within(const pid_t *pids, int n, uint64_t since, int timeout_ms)
{
	uint64_t end = since + (uint64_t)timeout_ms;
	for (;;) {
		int alive = 0;
		for (int i = 0; i < n; i++)
			alive += !pid_gone(pids[i]);
		if (alive == 0)
			return (long)(tcluster_now_ms() - since);
		if (tcluster_now_ms() >= end)
			break;
		usleep(10000);
	}
	for (int i = 0; i < n; i++)
		kill(pids[i], SIGKILL);
	return -1;
}

/* The session cannot be renewed (every node paused): by valid_until every
 * process of the command is gone, not only its direct child. */
static void lost_validity_kills_the_whole_command(void **state)
{
	(void)state;
	pid_t cli = lock_family("fam-lost");
	pid_t pids[4];
	assert_int_equal(family_pids("fam-lost", pids, 4), 4);
	uint64_t paused = tcluster_now_ms();
	for (int i = 0; i < cl.n; i++)
		tcluster_signal(&cl, i, SIGSTOP);
	long took = family_gone_within(pids, 4, paused, 3000 + 1000);
	for (int i = 0; i < cl.n; i++)
		tcluster_signal(&cl, i, SIGCONT);
	printf("measure: session not renewable: every process of the command gone %ld ms after "
	       "the cluster paused (TTL 3000 ms)\n",
	       took);
	assert_true(took >= 0);
	assert_true(took < 3000); /* by valid_until, which is before TTL */
	int st;
	assert_int_equal(waitpid(cli, &st, 0), cli);
	assert_true(tcluster_leader(&cl, 15000) >= 0);
}

/* kill -9 of the CLI: the watcher kills the command's whole group. */
static void killed_cli_takes_the_whole_command(void **state)
{
	(void)state;
	pid_t cli = lock_family("fam-kill");
	pid_t pids[4];
	assert_int_equal(family_pids("fam-kill", pids, 4), 4);
	uint64_t killed = tcluster_now_ms();
	kill(cli, SIGKILL);
	waitpid(cli, NULL, 0);
	long took = family_gone_within(pids, 4, killed, 1000);
	printf("measure: CLI killed: every process of the command gone after %ld ms\n", took);
	assert_true(took >= 0);
}

/* SIGSTOP of the CLI (GUARANTEES 10a): it renews nothing and signals
 * nothing, but the watcher kills the command's group at the last
 * valid_until the CLI told it, so no process of the command runs past it. */
static void stopped_cli_cannot_outlive_validity(void **state)
{
	(void)state;
	pid_t cli = lock_family("fam-stop");
	pid_t pids[4];
	assert_int_equal(family_pids("fam-stop", pids, 4), 4);
	uint64_t stopped = tcluster_now_ms();
	kill(cli, SIGSTOP);
	long took = family_gone_within(pids, 4, stopped, 3000 + 1000);
	kill(cli, SIGCONT);
	printf("measure: CLI stopped: every process of the command gone after %ld ms (TTL "
	       "3000 ms)\n",
	       took);
	assert_true(took >= 0);
	assert_true(took < 3000);
	int st;
	assert_int_equal(waitpid(cli, &st, 0), cli);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(lock_runs_command_with_token),
		cmocka_unit_test(lock_all_takes_a_set),
		cmocka_unit_test(run_hands_over_after_kill),
		cmocka_unit_test(lost_session_stops_command),
		cmocka_unit_test(lost_validity_kills_the_whole_command),
		cmocka_unit_test(killed_cli_takes_the_whole_command),
		cmocka_unit_test(stopped_cli_cannot_outlive_validity),
	};
	if (getenv("RAFTLOCK_TEST_FILTER") != NULL)
		cmocka_set_test_filter(getenv("RAFTLOCK_TEST_FILTER"));
	return cmocka_run_group_tests(tests, setup, teardown);
}
