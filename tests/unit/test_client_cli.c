/*
 * test_client_cli.c: the raftlock command against a fake node: the child
 * gets the token in its environment, exit codes, forwarded signals, and
 * the child is stopped (SIGTERM, then SIGKILL) when the session cannot be
 * renewed, and dies with the CLI.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
	char *no_cmd[] = {"raftlock", "--endpoints", "127.0.0.1:1", "lock", "--no-wait", NULL};
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
	/* -c and a command, -E out of range */
	char *both[] = {"raftlock", "lock", "x", "-c", "true", "true", NULL};
	char *bad_e[] = {"raftlock", "lock", "-E", "256", "x", "true", NULL};
	assert_int_equal(cli_run(both, 5000), 2);
	assert_int_equal(cli_run(bad_e, 5000), 2);
	/* the lock's time limits, bounded as the server bounds them; a
	 * revoke grace counts back from a maximum hold */
	char *long_hold[] = {"raftlock", "lock", "--max-hold", "90000000", "x", "true", NULL};
	char *grace_alone[] = {"raftlock", "lock", "--revoke-grace", "100", "x", "true", NULL};
	char *long_grace[] = {"raftlock", "lock", "--max-hold", "1000", "--revoke-grace",
			      "600001",   "x",    "true",       NULL};
	assert_int_equal(cli_run(long_hold, 5000), 2);
	assert_int_equal(cli_run(grace_alone, 5000), 2);
	assert_int_equal(cli_run(long_grace, 5000), 2);
	char *at_most[] = {"raftlock", "--endpoints", "127.0.0.1:1", "--timeout",      "300",
			   "lock",     "--max-hold",  "86400000",    "--revoke-grace", "600000",
			   "x",        "true",        NULL};
	assert_int_equal(cli_run(at_most, 5000), 1); /* parsed; no cluster there */
	/* an election is one name: a set would drop the value */
	char *elect_all[] = {"raftlock", "elect", "--all", "--value", "v", "a,b", "true", NULL};
	assert_int_equal(cli_run(elect_all, 5000), 2);
	/* member ids: 1..2^63-1, digits only */
	char *id_wrap[] = {"raftlock", "member", "remove", " -1", NULL};
	char *id_big[] = {"raftlock", "member", "add", "9223372036854775808", "h:1", "h:2", NULL};
	assert_int_equal(cli_run(id_wrap, 5000), 2);
	assert_int_equal(cli_run(id_big, 5000), 2);
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

/* What a command says on a FIFO whose write end only its processes
 * hold: each time round its loop a line with its CLOCK_BOOTTIME as
 * /proc/uptime gives it (cut to 10 ms), and "term" when SIGTERM comes. */
struct life {
	int fd;        /* the FIFO's read end, O_NONBLOCK */
	char line[32]; /* the line being read */
	size_t len;
	uint64_t alive; /* ms: the time in its last line, a time it ran */
	bool termed;    /* it said "term" */
	uint64_t end;   /* our CLOCK_BOOTTIME ms when its last process was gone */
};

static void life_said(struct life *l, const char *line)
{
	unsigned long s, cs;
	if (strcmp(line, "term") == 0)
		l->termed = true;
	else if (sscanf(line, "%lu.%2lu", &s, &cs) == 2)
		l->alive = (uint64_t)s * 1000 + cs * 10;
}

/* Takes in what the command said, waiting up to max_ms for its end. */
static void life_read(struct life *l, unsigned max_ms)
{
	uint64_t end = clock_mono_ms() + max_ms;
	while (l->end == 0) {
		uint64_t now = clock_mono_ms();
		struct pollfd p = {.fd = l->fd, .events = POLLIN};
		if (poll(&p, 1, now < end ? (int)(end - now) : 0) == 0)
			return;
		char buf[256];
		ssize_t r = read(l->fd, buf, sizeof buf);
		if (r == 0)
			l->end = clock_boot_ms();
		for (ssize_t i = 0; i < r; i++) {
			if (buf[i] == '\n') {
				l->line[l->len] = '\0';
				life_said(l, l->line);
				l->len = 0;
			} else if (l->len + 1 < sizeof l->line) {
				l->line[l->len++] = buf[i];
			}
		}
	}
}

/* Keepalives go unanswered: the command gets SIGTERM a grace before
 * valid_until, then SIGKILL, and runs nothing once the lease can have run
 * out on the server, one TTL after the send of the last keepalive
 * answered. The command's own clock says when it last ran: the CLI's exit,
 * and the moment we see the command's end, come later by however long a
 * loaded machine takes to schedule them. */
static void test_lost_session_stops_the_command(void **state)
{
	(void)state;
	enum { TTL = 1000, GRACE = 300 };
	/* valid_until is this much short of a TTL (session_validity_ms) */
	const uint64_t margin =
		TTL * (uint64_t)RAFTLOCK_CLOCK_RATE_PPM / 1000000 + RAFTLOCK_LEASE_MARGIN_MS;
	struct fake *f = fake_start(FAKE_LEADER);
	const char *fifo = path_in_tmp("life");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	struct life l = {.fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
	assert_true(l.fd >= 0);
	char script[512];
	/* notes SIGTERM, then ignores it: only SIGKILL ends it */
	snprintf(script, sizeof script,
		 "exec 3>%s; trap 'echo term >&3' TERM; touch %s; "
		 "while :; do read up idle </proc/uptime; echo $up >&3; sleep 0.01; done",
		 fifo, path_in_tmp("started"));
	char *argv[] = {"raftlock", "--endpoints", f->addr, "lock",      "--ttl",
			"1000",     "--grace",     "300",   "--no-wait", "x",
			"--",       "sh",          "-c",    script,      NULL};
	pid_t pid = cli_spawn(argv);
	assert_true(file_wait(path_in_tmp("started"), 5000));
	sleep_ms(800); /* renewals work: still running past one TTL */
	life_read(&l, 0);
	assert_int_equal(waitpid(pid, NULL, WNOHANG), 0);
	assert_false(l.termed);
	pthread_mutex_lock(&f->mu);
	f->keepalive_silent = true;
	uint64_t answered = f->keepalive_answered_at;
	pthread_mutex_unlock(&f->mu);
	life_read(&l, 5000);
	assert_int_equal(cli_wait(pid, 5000), 128 + SIGKILL);
	close(l.fd);
	assert_true(l.end != 0);
	assert_true(l.termed);           /* SIGTERM came, and before SIGKILL */
	assert_true(l.alive > answered); /* its times are read */
	assert_true(l.alive < answered + TTL);
	/* not stopped at once: it ended no sooner than its SIGTERM was due */
	assert_true(l.end > answered + TTL - margin - GRACE);
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
	assert_non_null(strstr(buf, "\"holders_total\": 5, \"waiters_total\": 1}"));
	char *text[] = {"raftlock", "--endpoints", f->addr, "show", "a/1", NULL};
	assert_int_equal(cli_wait(cli_spawn_to(text, path_in_tmp("s.txt")), 5000), 0);
	slurp(path_in_tmp("s.txt"), buf, sizeof buf);
	assert_non_null(strstr(buf, "  ... 3 more holders (the answer holds the first 2)\n"));
	char *sessions[] = {"raftlock", "--endpoints", f->addr, "sessions", NULL, NULL};
	assert_int_equal(cli_wait(cli_spawn_to(sessions, path_in_tmp("ss.txt")), 5000), 0);
	slurp(path_in_tmp("ss.txt"), buf, sizeof buf);
	assert_non_null(strstr(buf, "  locks: a/1, a/2, ... 5 more\n"));
	sessions[4] = "--json";
	assert_int_equal(cli_wait(cli_spawn_to(sessions, path_in_tmp("ss.json")), 5000), 0);
	slurp(path_in_tmp("ss.json"), buf, sizeof buf);
	assert_non_null(strstr(buf, "\"locks_total\": 7}"));

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

/* Checks a --json output with python3 (RAFTLOCK_PYTHON): it is UTF-8 (decoded strictly) and
 * JSON (one document, or one a line), and each name ("name", "lock",
 * "locks") is what Python's decode(errors="replace") makes of its bytes,
 * with the bytes in base64 beside it when they are not UTF-8 and only
 * then; every name of `names` is among them. The exit status of python3. */
static int json_names_check(const char *path, bool lines, const char *const *names)
{
	static const char script[] =
		"import base64, json, sys\n"
		"def raw(s, b64, alone):\n"
		"    r = s.encode() if b64 is None else base64.b64decode(b64, validate=True)\n"
		"    assert s == r.decode(\"utf-8\", \"replace\"), (s, r)\n"
		"    if alone and b64 is not None:\n"
		"        try: r.decode(\"utf-8\")\n"
		"        except UnicodeDecodeError: pass\n"
		"        else: raise AssertionError((\"base64 of valid UTF-8\", r))\n"
		"    return r\n"
		"def walk(v, got):\n"
		"    if isinstance(v, list):\n"
		"        for x in v: walk(x, got)\n"
		"    if not isinstance(v, dict): return\n"
		"    for k in (\"name\", \"lock\"):\n"
		"        if isinstance(v.get(k), str):\n"
		"            got.add(raw(v[k], v.get(k + \"_base64\"), True))\n"
		"    if isinstance(v.get(\"locks\"), list):\n"
		"        b = v.get(\"locks_base64\") or [None] * len(v[\"locks\"])\n"
		"        assert len(b) == len(v[\"locks\"])\n"
		"        got.update(raw(s, x, False) for s, x in zip(v[\"locks\"], b))\n"
		"    for x in v.values(): walk(x, got)\n"
		"text = open(sys.argv[2], \"rb\").read().decode(\"utf-8\")\n"
		"lines = text.split(\"\\n\")[:-1] if sys.argv[1] == \"lines\" else [text]\n"
		"docs = [json.loads(l) for l in lines]\n"
		"got = set()\n"
		"walk(docs, got)\n"
		"missing = {bytes.fromhex(h) for h in sys.argv[3:]} - got\n"
		"assert not missing, missing\n";
	char cmd[8192];
	int n = snprintf(cmd, sizeof cmd, "%s -c '%s' %s '%s'", RAFTLOCK_PYTHON, script,
			 lines ? "lines" : "doc", path);
	assert_true(n > 0 && (size_t)n < sizeof cmd);
	for (size_t i = 0; names[i] != NULL; i++) {
		assert_true((size_t)n + 2 * strlen(names[i]) + 2 < sizeof cmd);
		n += snprintf(cmd + n, sizeof cmd - (size_t)n, " ");
		for (const unsigned char *p = (const unsigned char *)names[i]; *p; p++)
			n += snprintf(cmd + n, sizeof cmd - (size_t)n, "%02x", *p);
	}
	return system(cmd);
}

/* Names the server holds may be any bytes: --json output stays UTF-8 and
 * JSON whatever they are, and gives each name's exact bytes. */
static void test_json_names_not_utf8(void **state)
{
	(void)state;
	static const char *const names[] = {"n/\xff",
					    "n/\xc3",
					    "n/\xc0\xaf",
					    "n/\xed\xa0\x80",
					    "n/\xf4\x90\x80\x80",
					    "n/\x01",
					    "n/\"q\\",
					    "n/\xf0\x9f\x94\x92",
					    NULL};
	struct fake *f = fake_start(FAKE_LEADER);
	FAKE_SET(f, lock_names, names);
	FAKE_SET(f, owner_host, "host-\xfe\x01");
	FAKE_SET(f, watch_value, "v\xc3(");

	char *holders[] = {"raftlock", "--endpoints", f->addr, "holders", "n/", "--json", NULL};
	assert_int_equal(cli_wait(cli_spawn_to(holders, path_in_tmp("h.json")), 5000), 0);
	assert_int_equal(json_names_check(path_in_tmp("h.json"), false, names), 0);
	char *sessions[] = {"raftlock", "--endpoints", f->addr, "sessions", "--json", NULL};
	assert_int_equal(cli_wait(cli_spawn_to(sessions, path_in_tmp("s.json")), 5000), 0);
	assert_int_equal(json_names_check(path_in_tmp("s.json"), false, names), 0);
	char *top[] = {"raftlock", "--endpoints", f->addr, "top", "--once", "--json", NULL};
	assert_int_equal(cli_wait(cli_spawn_to(top, path_in_tmp("t.json")), 5000), 0);
	assert_int_equal(json_names_check(path_in_tmp("t.json"), false, names), 0);
	for (size_t i = 0; names[i] != NULL; i++) {
		char *check[] = {"raftlock",       "--endpoints", f->addr,  "check",
				 (char *)names[i], "900",         "--json", NULL};
		assert_int_equal(cli_wait(cli_spawn_to(check, path_in_tmp("c.json")), 5000), 0);
		const char *one[] = {names[i], NULL};
		assert_int_equal(json_names_check(path_in_tmp("c.json"), false, one), 0);
	}

	/* a watch's lines, the value too: stopped once its state is printed */
	char buf[8192];
	char *watch[] = {"raftlock", "--endpoints", f->addr, "watch", "n/", "--json", NULL};
	pid_t pid = cli_spawn_to(watch, path_in_tmp("w.json"));
	for (int i = 0; i < 1000 && !strstr(slurp(path_in_tmp("w.json"), buf, sizeof buf),
					    "\"kind\":\"current\"");
	     i++)
		sleep_ms(5);
	kill(pid, SIGINT);
	assert_int_equal(cli_wait(pid, 5000), 0);
	assert_int_equal(json_names_check(path_in_tmp("w.json"), true, names), 0);
	assert_non_null(strstr(buf, "\"value\":\"v\\ufffd(\",\"value_base64\":\"dsMo\""));
	fake_stop(f);
}

/* Runs the CLI until its session has been renewed, then silences the
 * fake's keepalives; returns the CLI's exit code. */
static int cli_exit_once_silent(struct fake *f, char *const argv[])
{
	pid_t pid = cli_spawn(argv);
	sleep_ms(300);
	FAKE_SET(f, keepalive_silent, true);
	return cli_wait(pid, 5000);
}

/* What a running CLI printed, once it printed something (5 s at most). */
static const char *first_output(const char *path, char *buf, size_t n)
{
	for (int i = 0; i < 1000 && slurp(path, buf, n)[0] == '\0'; i++)
		sleep_ms(5);
	return buf;
}

/* flock -E: the exit code of a conflict (--no-wait, or --wait ran out). */
static void test_conflict_exit_code(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	FAKE_SET(f, busy, true);
	char *short_e[] = {"raftlock", "--endpoints", f->addr, "lock", "-n",
			   "-E",       "42",          "x",     "true", NULL};
	assert_int_equal(cli_run(short_e, 10000), 42);
	/* -E 0: a busy lock exits 0, and the command does not run */
	char ran_busy[256];
	snprintf(ran_busy, sizeof ran_busy, "touch %s", path_in_tmp("ran-busy"));
	char *long_e[] = {"raftlock",  "--endpoints", f->addr,     "run",
			  "--permits", "2",           "--no-wait", "--conflict-exit-code=0",
			  "x",         "sh",          "-c",        ran_busy,
			  NULL};
	assert_int_equal(cli_run(long_e, 10000), 0);
	assert_int_not_equal(access(path_in_tmp("ran-busy"), F_OK), 0);
	/* without -E: 3; a command's own status is not a conflict */
	char *plain[] = {"raftlock", "--endpoints", f->addr, "lock", "-n", "x", "true", NULL};
	assert_int_equal(cli_run(plain, 10000), 3);
	FAKE_SET(f, busy, false);
	char *ran[] = {"raftlock", "--endpoints", f->addr, "lock", "-n",     "-E",
		       "42",       "x",           "sh",    "-c",   "exit 3", NULL};
	assert_int_equal(cli_run(ran, 10000), 3);
	fake_stop(f);
}

/* flock -c: the string goes to $SHELL -c (sh when unset), after NAME as
 * flock writes it, or before it. */
static void test_shell_command(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	FAKE_SET(f, next_token, 500);
	char script[256], buf[256];
	snprintf(script, sizeof script, "echo \"$RAFTLOCK_TOKEN $RAFTLOCK_LOCK\" > %s; exit 6",
		 path_in_tmp("shell"));
	setenv("SHELL", "/bin/sh", 1);
	char *after[] = {"raftlock", "--endpoints", f->addr, "lock", "--no-wait",
			 "jobs/c",   "-c",          script,  NULL};
	assert_int_equal(cli_run(after, 10000), 6);
	assert_string_equal(slurp(path_in_tmp("shell"), buf, sizeof buf), "501 jobs/c\n");
	char *before[] = {"raftlock", "--endpoints", f->addr,  "lock", "-c",
			  "exit 9",   "-n",          "jobs/d", NULL};
	assert_int_equal(cli_run(before, 10000), 9);
	/* $SHELL is what runs it */
	setenv("SHELL", "/nonexistent/shell", 1);
	assert_int_equal(cli_run(before, 10000), 127);
	unsetenv("SHELL");
	assert_int_equal(cli_run(before, 10000), 9);
	fake_stop(f);
}

/* consul lock -child-exit-code: the command's status is the CLI's (our
 * default); --no-child-exit-code: 0 once it ran under the lock, 1 when the
 * lock was lost while it ran. */
static void test_child_exit_code(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char *deflt[] = {"raftlock", "--endpoints", f->addr,  "lock", "-n",
			 "x",        "-c",          "exit 5", NULL};
	assert_int_equal(cli_run(deflt, 10000), 5);
	char *consul[] = {"raftlock", "--endpoints",      f->addr, "lock",   "-n",
			  "x",        "-child-exit-code", "-c",    "exit 5", NULL};
	assert_int_equal(cli_run(consul, 10000), 5);
	char *first[] = {"raftlock", "--endpoints", f->addr, "lock",   "-child-exit-code",
			 "-n",       "x",           "-c",    "exit 6", NULL};
	assert_int_equal(cli_run(first, 10000), 6);
	/* the command's own argument of that spelling is left alone */
	char *child[] = {"raftlock",
			 "--endpoints",
			 f->addr,
			 "lock",
			 "-n",
			 "x",
			 "sh",
			 "-c",
			 "test \"$1\" = -child-exit-code && exit 7",
			 "sh",
			 "-child-exit-code",
			 NULL};
	assert_int_equal(cli_run(child, 10000), 7);
	char *off[] = {"raftlock", "--endpoints",          f->addr, "lock",   "-n",
		       "x",        "--no-child-exit-code", "-c",    "exit 5", NULL};
	assert_int_equal(cli_run(off, 10000), 0);
	/* the lock lost while the command ran: an error, whatever the flag */
	char *lost[] = {"raftlock", "--endpoints",          f->addr, "lock", "--ttl",    "1000",
			"-n",       "--no-child-exit-code", "x",     "-c",   "sleep 30", NULL};
	assert_int_equal(cli_exit_once_silent(f, lost), 1);
	fake_stop(f);
}

/* etcdctl lock: no command holds the lock until a signal, with the token
 * on stdout; SIGTERM releases it and exits 0. */
static void test_lock_without_command_holds(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	FAKE_SET(f, next_token, 70);
	FAKE_SET(f, next_session, 3);
	char buf[256];
	char *argv[] = {"raftlock", "--endpoints", f->addr, "lock", "--no-wait", "held", NULL};
	pid_t pid = cli_spawn_to(argv, path_in_tmp("held.out"));
	assert_string_equal(first_output(path_in_tmp("held.out"), buf, sizeof buf), "71\n");
	sleep_ms(1200); /* held past a keepalive round, not released */
	assert_int_equal(waitpid(pid, NULL, WNOHANG), 0);
	assert_int_equal(fake_count(f, RELEASE), 0);
	kill(pid, SIGTERM);
	assert_int_equal(cli_wait(pid, 5000), 0);
	assert_int_equal(fake_count(f, RELEASE), 1);
	assert_int_equal(fake_count(f, CLOSE), 1);

	/* --json (global or the command's), and SIGINT as well */
	char *json[] = {"raftlock", "--json", "--endpoints", f->addr, "lock", "-n", "held", NULL};
	pid = cli_spawn_to(json, path_in_tmp("held.json"));
	assert_string_equal(first_output(path_in_tmp("held.json"), buf, sizeof buf),
			    "{\"lock\": \"held\", \"token\": 72, \"session\": 5}\n");
	kill(pid, SIGINT);
	assert_int_equal(cli_wait(pid, 5000), 0);
	assert_int_equal(fake_count(f, RELEASE), 2);

	/* the session lost: the hold ends with an error */
	char *lost[] = {"raftlock", "--endpoints", f->addr, "lock", "--ttl",
			"1000",     "-n",          "held",  NULL};
	assert_int_equal(cli_exit_once_silent(f, lost), 1);
	fake_stop(f);
}

/* --json on the commands that print outside the listings, and --version. */
static void test_json_everywhere(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char buf[4096];
	char *check[] = {"raftlock", "--endpoints", f->addr, "check", "a/1", "900", "--json", NULL};
	assert_int_equal(cli_wait(cli_spawn_to(check, path_in_tmp("c.json")), 5000), 0);
	assert_string_equal(slurp(path_in_tmp("c.json"), buf, sizeof buf),
			    "{\"lock\": \"a/1\", \"token\": 900, \"current\": true}\n");
	char *global[] = {"raftlock", "--json", "--endpoints", f->addr,
			  "check",    "a/1",    "899",         NULL};
	assert_int_equal(cli_wait(cli_spawn_to(global, path_in_tmp("c2.json")), 5000), 3);
	assert_string_equal(slurp(path_in_tmp("c2.json"), buf, sizeof buf),
			    "{\"lock\": \"a/1\", \"token\": 899, \"current\": false}\n");
	char *status[] = {"raftlock", "--json", "--endpoints", f->addr, "status", NULL};
	assert_int_equal(cli_wait(cli_spawn_to(status, path_in_tmp("st.json")), 5000), 0);
	assert_non_null(
		strstr(slurp(path_in_tmp("st.json"), buf, sizeof buf), "\"role\": \"leader\""));
	char *token[] = {"raftlock", "acl", "token", "ci-job", "--json", NULL};
	assert_int_equal(cli_wait(cli_spawn_to(token, path_in_tmp("t.json")), 5000), 0);
	slurp(path_in_tmp("t.json"), buf, sizeof buf);
	assert_true(strncmp(buf, "{\"name\": \"ci-job\", \"token\": \"", 29) == 0);
	assert_non_null(strstr(buf, "\"auth_tokens_line\": \"ci-job "));
	char *version[] = {"raftlock", "--version", NULL};
	assert_int_equal(cli_wait(cli_spawn_to(version, path_in_tmp("v")), 5000), 0);
	assert_string_equal(slurp(path_in_tmp("v"), buf, sizeof buf),
			    "raftlock " RAFTLOCK_VERSION_STRING "\n");
	char *jversion[] = {"raftlock", "--json", "--version", NULL};
	assert_int_equal(cli_wait(cli_spawn_to(jversion, path_in_tmp("v.json")), 5000), 0);
	assert_string_equal(slurp(path_in_tmp("v.json"), buf, sizeof buf),
			    "{\"program\": \"raftlock\", \"version\": \"" RAFTLOCK_VERSION_STRING
			    "\"}\n");
	fake_stop(f);
}

/* `raftlock revoke --token` whose answer is lost: while the token is
 * current (900 for the fake) it is sent again; once it is not, the grant
 * is gone, revoked by the lost attempt or released, and --json says it
 * apart from the grants revoked. */
static void test_revoke_settles_a_lost_answer(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char buf[256];
	FAKE_SET(f, revoke_drops, 1);
	char *current[] = {"raftlock", "--endpoints", f->addr, "revoke",
			   "rv/a",     "--token",     "900",   NULL};
	assert_int_equal(cli_wait(cli_spawn_to(current, path_in_tmp("out")), 10000), 0);
	assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_REVOKE), 2);
	assert_string_equal(slurp(path_in_tmp("out"), buf, sizeof buf),
			    "revoked token 900 of 'rv/a'\n");
	FAKE_SET(f, revoke_drops, 1);
	char *gone[] = {"raftlock", "--endpoints", f->addr, "revoke",
			"rv/a",     "--token",     "901",   NULL};
	assert_int_equal(cli_wait(cli_spawn_to(gone, path_in_tmp("out")), 10000), 0);
	assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_REVOKE), 3);
	assert_non_null(strstr(slurp(path_in_tmp("out"), buf, sizeof buf),
			       "token 901 of 'rv/a' is no longer current"));

	/* --json: each in "tokens" as before, and the one no longer
	 * current in a field of its own */
	FAKE_SET(f, revoke_drops, 1);
	char *current_json[] = {"raftlock", "--endpoints", f->addr,  "revoke", "rv/a",
				"--token",  "900",         "--json", NULL};
	assert_int_equal(cli_wait(cli_spawn_to(current_json, path_in_tmp("out")), 10000), 0);
	assert_string_equal(slurp(path_in_tmp("out"), buf, sizeof buf),
			    "{\"lock\": \"rv/a\", \"grace_ms\": 0, \"tokens\": [900], "
			    "\"no_longer_current\": []}\n");
	FAKE_SET(f, revoke_drops, 1);
	char *gone_json[] = {"raftlock", "--endpoints", f->addr,  "revoke", "rv/a",
			     "--token",  "901",         "--json", NULL};
	assert_int_equal(cli_wait(cli_spawn_to(gone_json, path_in_tmp("out")), 10000), 0);
	assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_REVOKE), 6);
	assert_string_equal(slurp(path_in_tmp("out"), buf, sizeof buf),
			    "{\"lock\": \"rv/a\", \"grace_ms\": 0, \"tokens\": [901], "
			    "\"no_longer_current\": [901]}\n");
	fake_stop(f);
}

/* a/1 has 5 holders and an answer lists 2: revoke reads the rest page by
 * page, after the last token it read, and reaches every one, with a grace
 * too (the holders asked stay holders). */
static void test_revoke_reads_past_a_cut_list(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	char buf[1024];
	char *revoke[] = {"raftlock", "--endpoints", f->addr, "revoke",
			  "a/1",      "--grace",     "5000",  NULL};
	pid_t pid = cli_spawn_to(revoke, path_in_tmp("out"));
	assert_int_equal(cli_wait(pid, 10000), 0);
	assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_GET_LOCK), 3);
	assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_REVOKE), 5);
	slurp(path_in_tmp("out"), buf, sizeof buf);
	for (int t = 900; t <= 904; t++) {
		char line[96];
		snprintf(line, sizeof line, "asked the holder of token %d of 'a/1' to release", t);
		assert_non_null(strstr(buf, line));
	}
	fake_stop(f);
}

/* A node older than paging lists the first holders whatever is asked:
 * revoke reaches those, then fails saying to upgrade. */
static void test_revoke_past_a_cut_list_needs_paging(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	FAKE_SET(f, reads_before_paging, true);
	char buf[512], cmd[512];
	snprintf(cmd, sizeof cmd, "%s --endpoints %s revoke a/1 >%s 2>%s", RAFTLOCK_CLI_PATH,
		 f->addr, path_in_tmp("out"), path_in_tmp("err"));
	int st = system(cmd);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_GET_LOCK), 2);
	assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_REVOKE), 2);
	assert_string_equal(slurp(path_in_tmp("out"), buf, sizeof buf),
			    "revoked token 900 of 'a/1'\nrevoked token 901 of 'a/1'\n");
	assert_non_null(strstr(slurp(path_in_tmp("err"), buf, sizeof buf), "upgrade every node"));
	fake_stop(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lock_runs_command_with_token),
		cmocka_unit_test(test_revoke_reads_past_a_cut_list),
		cmocka_unit_test(test_revoke_past_a_cut_list_needs_paging),
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
		cmocka_unit_test(test_json_names_not_utf8),
		cmocka_unit_test(test_conflict_exit_code),
		cmocka_unit_test(test_shell_command),
		cmocka_unit_test(test_child_exit_code),
		cmocka_unit_test(test_lock_without_command_holds),
		cmocka_unit_test(test_json_everywhere),
		cmocka_unit_test(test_revoke_settles_a_lost_answer),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
