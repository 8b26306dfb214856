/*
 * test_client_cli.c: the raftlock command against a fake node: the child
 * gets the token in its environment, exit codes, forwarded signals, and
 * the child is stopped (SIGTERM, then SIGKILL) when the session cannot be
 * renewed, and dies with the CLI.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "client_fakeserver.h"
#include "clock.h"
#include "raftlock.h"

static char tmpdir[64];

static char *path_in_tmp(const char *name)
{
	static char buf[4][128];
	static int k;
	char *p = buf[k++ % 4];
	snprintf(p, sizeof buf[0], "%s/%s", tmpdir, name);
	return p;
}

/* Reads a small file into buf ("" if missing). */
static const char *slurp(const char *path, char *buf, size_t n)
{
	buf[0] = '\0';
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return buf;
	size_t r = fread(buf, 1, n - 1, f);
	buf[r] = '\0';
	fclose(f);
	return buf;
}

/* Runs the CLI with its stdout to `out` (NULL: /dev/null). */
static pid_t cli_spawn_to(char *const argv[], const char *out)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0)
			dup2(fd, 1);
		execv(RAFTLOCK_CLI_PATH, argv);
		_exit(99);
	}
	return pid;
}

static pid_t cli_spawn(char *const argv[])
{
	return cli_spawn_to(argv, NULL);
}

/* The CLI's exit code (128 + signal), waiting at most timeout_ms; kills
 * it and fails the test when it takes longer. */
static int cli_wait(pid_t pid, unsigned timeout_ms)
{
	uint64_t end = clock_mono_ms() + timeout_ms;
	int status;
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (clock_mono_ms() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			fail_msg("raftlock did not exit within %u ms", timeout_ms);
		}
		sleep_ms(5);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int cli_run(char *const argv[], unsigned timeout_ms)
{
	return cli_wait(cli_spawn(argv), timeout_ms);
}

/* Waits up to max_ms for a file to appear. */
static bool file_wait(const char *path, unsigned max_ms)
{
	for (unsigned i = 0; i < max_ms / 5; i++) {
		if (access(path, F_OK) == 0)
			return true;
		sleep_ms(5);
	}
	return false;
}

static int setup(void **state)
{
	(void)state;
	strcpy(tmpdir, "/tmp/raftlock-cli-test-XXXXXX");
	return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

#define ACQUIRE RAFTLOCK__ENVELOPE__BODY_ACQUIRE
#define RELEASE RAFTLOCK__ENVELOPE__BODY_RELEASE
#define CLOSE RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION

/* -------------------------------------------------------------- tests -- */

static void test_lock_runs_command_with_token(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	FAKE_SET(f, next_token, 1000);
	FAKE_SET(f, next_session, 7);
	char script[256], buf[256];
	snprintf(script, sizeof script,
		 "echo \"$RAFTLOCK_TOKEN $RAFTLOCK_LOCK $RAFTLOCK_SESSION\" > %s; "
		 "exit 5",
		 path_in_tmp("env"));
	char *argv[] = {"raftlock", "--endpoints", f->addr, "lock", "--no-wait", "jobs/a",
			"--",       "sh",          "-c",    script, NULL};
	assert_int_equal(cli_run(argv, 10000), 5);
	assert_string_equal(slurp(path_in_tmp("env"), buf, sizeof buf), "1001 jobs/a 8\n");
	struct fake_entry a = fake_nth(f, ACQUIRE, 0);
	assert_int_equal(a.kind, RAFTLOCK__LOCK_KIND__RWLOCK);
	assert_false(a.wait);
	/* released and closed after the command */
	assert_int_equal(fake_count(f, RELEASE), 1);
	assert_int_equal(fake_nth(f, RELEASE, 0).other, a.other);
	assert_int_equal(fake_count(f, CLOSE), 1);
	fake_stop(f);
}

static void test_lock_busy_exits_3(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	FAKE_SET(f, busy, true);
	char script[256];
	snprintf(script, sizeof script, "touch %s", path_in_tmp("ran"));
	char *argv[] = {"raftlock", "--endpoints", f->addr, "lock", "--no-wait",
			"x",        "sh",          "-c",    script, NULL};
	assert_int_equal(cli_run(argv, 10000), 3);
	assert_int_not_equal(access(path_in_tmp("ran"), F_OK), 0);
	assert_int_equal(fake_count(f, CLOSE), 1);
	fake_stop(f);
}

static void test_run_takes_a_semaphore_permit(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char *argv[] = {"raftlock",  "--endpoints", f->addr, "run",  "--permits", "3",
			"--no-wait", "workers",     "--",    "true", NULL};
	assert_int_equal(cli_run(argv, 10000), 0);
	struct fake_entry a = fake_nth(f, ACQUIRE, 0);
	assert_int_equal(a.kind, RAFTLOCK__LOCK_KIND__SEMAPHORE);
	assert_int_equal(a.limit, 3);
	fake_stop(f);
}

static void test_usage_errors_exit_2(void **state)
{
	(void)state;
	char *no_cmd[] = {"raftlock", "--endpoints", "127.0.0.1:1", "lock", "x", NULL};
	char *bogus[] = {"raftlock", "frobnicate", NULL};
	char *bad_ttl[] = {"raftlock", "lock", "--ttl", "5", "x", "true", NULL};
	char *no_permits[] = {"raftlock", "run", "x", "true", NULL};
	char *bad_ep[] = {"raftlock", "--endpoints", "nocolon", "status", NULL};
	char *help[] = {"raftlock", "--help", NULL};
	assert_int_equal(cli_run(no_cmd, 5000), 2);
	assert_int_equal(cli_run(bogus, 5000), 2);
	assert_int_equal(cli_run(bad_ttl, 5000), 2);
	assert_int_equal(cli_run(no_permits, 5000), 2);
	assert_int_equal(cli_run(bad_ep, 5000), 2);
	assert_int_equal(cli_run(help, 5000), 0);
	/* TLS: a certificate, key or name without a CA (or --tls), here
	 * also from the environment, is a usage error */
	char *cert_only[] = {"raftlock", "--cert", "c.pem", "--key", "c.key", "status", NULL};
	char *name_only[] = {"raftlock", "--server-name", "db-1", "status", NULL};
	assert_int_equal(cli_run(cert_only, 5000), 2);
	assert_int_equal(cli_run(name_only, 5000), 2);
	setenv("RAFTLOCK_CERT", "c.pem", 1);
	char *env_cert[] = {"raftlock", "status", NULL};
	assert_int_equal(cli_run(env_cert, 5000), 2);
	unsetenv("RAFTLOCK_CERT");
}

/* A TLS file that cannot be read: status 1 and the file named on stderr;
 * the flag wins over its variable. */
static void test_tls_file_errors_exit_1(void **state)
{
	(void)state;
	char cmd[512], buf[512];
	setenv("RAFTLOCK_CACERT", "/nonexistent/env-ca.pem", 1);
	snprintf(cmd, sizeof cmd, "%s --endpoints 127.0.0.1:1 status 2>%s", RAFTLOCK_CLI_PATH,
		 path_in_tmp("err"));
	int st = system(cmd);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	assert_non_null(
		strstr(slurp(path_in_tmp("err"), buf, sizeof buf), "/nonexistent/env-ca.pem"));
	snprintf(cmd, sizeof cmd,
		 "%s --cacert /nonexistent/flag-ca.pem --endpoints 127.0.0.1:1 "
		 "status 2>%s",
		 RAFTLOCK_CLI_PATH, path_in_tmp("err"));
	st = system(cmd);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	assert_non_null(
		strstr(slurp(path_in_tmp("err"), buf, sizeof buf), "/nonexistent/flag-ca.pem"));
	unsetenv("RAFTLOCK_CACERT");
}

static void test_unreachable_cluster_exits_1(void **state)
{
	(void)state;
	char *argv[] = {"raftlock", "--endpoints", "127.0.0.1:1", "--timeout", "300",
			"lock",     "--no-wait",   "x",           "true",      NULL};
	assert_int_equal(cli_run(argv, 5000), 1);
}

static void test_lost_session_stops_the_command(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char script[512];
	/* notes SIGTERM, then ignores it: only SIGKILL ends it */
	snprintf(script, sizeof script,
		 "trap 'echo term > %s' TERM; touch %s; "
		 "while :; do sleep 0.02; done",
		 path_in_tmp("term"), path_in_tmp("started"));
	char *argv[] = {"raftlock", "--endpoints", f->addr, "lock",      "--ttl",
			"1000",     "--grace",     "300",   "--no-wait", "x",
			"--",       "sh",          "-c",    script,      NULL};
	pid_t pid = cli_spawn(argv);
	assert_true(file_wait(path_in_tmp("started"), 5000));
	sleep_ms(800); /* renewals work: still running past one TTL */
	assert_int_equal(waitpid(pid, NULL, WNOHANG), 0);
	assert_int_not_equal(access(path_in_tmp("term"), F_OK), 0);
	FAKE_SET(f, keepalive_silent, true);
	uint64_t silent = clock_mono_ms();
	int code = cli_wait(pid, 5000);
	uint64_t took = clock_mono_ms() - silent;
	assert_int_equal(code, 128 + SIGKILL);
	assert_int_equal(access(path_in_tmp("term"), F_OK), 0);
	/* the last acknowledged keepalive was sent before the silence: the
	 * command is dead within one TTL of it */
	assert_true(took < 1000);
	assert_true(took > 300);
	fake_stop(f);
}

static void test_signals_are_forwarded(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char script[512];
	snprintf(script, sizeof script,
		 "trap 'exit 4' TERM; touch %s; while :; do sleep 0.02; done",
		 path_in_tmp("started2"));
	char *argv[] = {"raftlock", "--endpoints", f->addr, "lock", "--no-wait",
			"y",        "sh",          "-c",    script, NULL};
	pid_t pid = cli_spawn(argv);
	assert_true(file_wait(path_in_tmp("started2"), 5000));
	kill(pid, SIGTERM);
	assert_int_equal(cli_wait(pid, 5000), 4);
	assert_int_equal(fake_count(f, RELEASE), 1);
	fake_stop(f);
}

static void test_signal_while_waiting_leaves_the_queue(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER); /* queues, never grants */
	char script[256];
	snprintf(script, sizeof script, "touch %s", path_in_tmp("never"));
	char *argv[] = {"raftlock", "--endpoints", f->addr, "run",  "--permits", "1",
			"standby",  "sh",          "-c",    script, NULL};
	pid_t pid = cli_spawn(argv);
	for (int i = 0; i < 500 && fake_count(f, ACQUIRE) == 0; i++)
		sleep_ms(10);
	assert_int_equal(fake_count(f, ACQUIRE), 1);
	assert_true(fake_nth(f, ACQUIRE, 0).wait);
	sleep_ms(100);
	uint64_t t0 = clock_mono_ms();
	kill(pid, SIGTERM);
	assert_int_equal(cli_wait(pid, 5000), 128 + SIGTERM);
	assert_true(clock_mono_ms() - t0 < 2000);
	/* the session was closed, so the server dropped the wait */
	assert_int_equal(fake_count(f, CLOSE), 1);
	assert_int_not_equal(access(path_in_tmp("never"), F_OK), 0);
	fake_stop(f);
}

/* Whether pid is gone (or a zombie nobody reaped yet). */
static bool process_gone(pid_t pid)
{
	char path[64], buf[256];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	slurp(path, buf, sizeof buf);
	const char *p = strrchr(buf, ')');
	return buf[0] == '\0' || (p != NULL && p[2] == 'Z');
}

static void test_command_dies_with_the_cli(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char script[512], buf[64];
	snprintf(script, sizeof script, "echo $$ > %s; while :; do sleep 0.02; done",
		 path_in_tmp("childpid"));
	char *argv[] = {"raftlock", "--endpoints", f->addr, "lock", "--no-wait",
			"z",        "sh",          "-c",    script, NULL};
	pid_t pid = cli_spawn(argv);
	assert_true(file_wait(path_in_tmp("childpid"), 5000));
	sleep_ms(50);
	pid_t child = (pid_t)atoi(slurp(path_in_tmp("childpid"), buf, sizeof buf));
	assert_true(child > 0);
	assert_false(process_gone(child));
	kill(pid, SIGKILL);
	assert_int_equal(cli_wait(pid, 5000), 128 + SIGKILL);
	bool gone = false;
	for (int i = 0; i < 200 && !gone; i++) {
		gone = process_gone(child);
		sleep_ms(5);
	}
	if (!gone)
		kill(child, SIGKILL);
	assert_true(gone);
	fake_stop(f);
}

static void test_json_listings(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char buf[4096];
	char *holders[] = {"raftlock", "--endpoints", f->addr, "holders", "a/", "--json", NULL};
	assert_int_equal(cli_wait(cli_spawn_to(holders, path_in_tmp("h.json")), 5000), 0);
	slurp(path_in_tmp("h.json"), buf, sizeof buf);
	/* both pages, in one array, strings escaped */
	assert_true(buf[0] == '[');
	assert_non_null(strstr(buf, "\"name\": \"a/1\""));
	assert_non_null(strstr(buf, "\"name\": \"a/2\""));
	assert_non_null(strstr(buf, "\"host\": \"host-\\\"1\\\"\""));
	assert_non_null(strstr(buf, "\"token\": 901"));
	assert_string_equal(buf + strlen(buf) - 2, "]\n");

	char *show[] = {"raftlock", "--endpoints", f->addr, "show", "a/1", "--json", NULL};
	assert_int_equal(cli_wait(cli_spawn_to(show, path_in_tmp("s.json")), 5000), 0);
	slurp(path_in_tmp("s.json"), buf, sizeof buf);
	assert_true(buf[0] == '{');
	assert_non_null(strstr(buf, "\"waiters\": [{\"session\": 12"));

	char *status[] = {"raftlock", "--endpoints", f->addr, "status", "--json", NULL};
	assert_int_equal(cli_wait(cli_spawn_to(status, path_in_tmp("st.json")), 5000), 0);
	slurp(path_in_tmp("st.json"), buf, sizeof buf);
	assert_non_null(strstr(buf, "\"node_id\": 7, \"role\": \"leader\""));
	assert_non_null(strstr(buf, "\"client_address\": \"10.0.0.3:7101\""));

	char *check[] = {"raftlock", "--endpoints", f->addr, "check", "a/1", "899", NULL};
	assert_int_equal(cli_run(check, 5000), 3);
	check[5] = "900";
	assert_int_equal(cli_run(check, 5000), 0);
	check[5] = "-1";
	assert_int_equal(cli_run(check, 5000), 2);
	char *missing[] = {"raftlock", "--endpoints", f->addr, "show", "zz", NULL};
	assert_int_equal(cli_run(missing, 5000), 1);
	fake_stop(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lock_runs_command_with_token),
		cmocka_unit_test(test_lock_busy_exits_3),
		cmocka_unit_test(test_run_takes_a_semaphore_permit),
		cmocka_unit_test(test_usage_errors_exit_2),
		cmocka_unit_test(test_unreachable_cluster_exits_1),
		cmocka_unit_test(test_tls_file_errors_exit_1),
		cmocka_unit_test(test_lost_session_stops_the_command),
		cmocka_unit_test(test_signals_are_forwarded),
		cmocka_unit_test(test_command_dies_with_the_cli),
		cmocka_unit_test(test_signal_while_waiting_leaves_the_queue),
		cmocka_unit_test(test_json_listings),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
