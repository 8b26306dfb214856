/* The example programs of client/examples run against a real cluster and
 * say what they should. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "cluster.h"

static struct tcluster cl;

static int setup(void **state)
{
	(void)state;
	tcluster_start(&cl, 3, 1000);
	char env[200] = "";
	for (int i = 0; i < cl.n; i++) {
		strcat(env, i ? "," : "");
		strcat(env, cl.client_addr[i]);
	}
	setenv("RAFTLOCK_ENDPOINTS", env, 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return tcluster_destroy(&cl);
}

/* Runs an example; returns its exit status, output in out. */
static int run(const char *cmdline, char *out, size_t len)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s/examples/%s 2>&1", RAFTLOCK_BINARY_DIR, cmdline);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void expect(const char *cmdline, int status, const char *text)
{
	char out[4096];
	int st = run(cmdline, out, sizeof out);
	if (st != status || strstr(out, text) == NULL)
		fail_msg("%s: exit %d (want %d), output: %s (want '%s')", cmdline, st, status, out,
			 text);
}

static void examples_run(void **state)
{
	(void)state;
	expect("mutex ex/m", 0, "with fencing token");
	expect("blocking ex/b 2000 10", 0, "got ex/b");
	expect("rwlock read ex/rw", 0, "reading ex/rw");
	expect("rwlock write ex/rw", 0, "writing ex/rw");
	expect("semaphore ex/s 3 2", 0, "holding 2 of 3 permits");
	expect("reentrant ex/r", 0, "after two releases: depth 0, handle b: success");
	expect("check_token ex/none 5", 3, "NOT current");
	expect("lock_delay ex/d 1000", 0, "lock-delay");
	expect("introspect ex/", 0, "ex/d: token");
	expect("mutex ex/d", 0, "held by someone else");
	expect("async ex/a/ 200", 0, "200 locks taken and released from one thread, 0 failed");
	expect("async ex/q 20 queue", 0,
	       "20 locks taken and released from one thread in turn, 0 failed");
	expect("multilock ex/acct/2 ex/acct/1", 0, "holding ex/acct/2 (token");
	expect("revoke ex/rv/", 0, "cooperative revoke: released in time");
	expect("revoke ex/rv2/", 0, "max hold: revoked");
	expect("revoke ex/rv3/", 0, "well within");
	expect("watch ex/w/ 3", 0, "saw 6 changes");
	expect("election ex/e primary", 0, "leader: session");
	expect("election ex/e primary", 0, "value 'primary (busy)'");
	expect("election ex/e primary", 0, "resigned; the observer saw 4 changes");
}

int main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(examples_run)};
	return cmocka_run_group_tests(tests, setup, teardown);
}
