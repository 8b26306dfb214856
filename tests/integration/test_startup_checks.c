/* A bad configuration or a data directory from another cluster stops the
 * node at start with a message naming the problem. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"

static void expect_refused(char *const argv[], int want_status, const char *want_text)
{
	char out[4096];
	int st = tcluster_run_raftlockd(argv, out, sizeof out, 10000);
	if (st != want_status || strstr(out, want_text) == NULL)
		fail_msg("exit %d (want %d), output: %s (want '%s')", st, want_status, out,
			 want_text);
}

/* A one-member node's flags plus one more flag and value. */
static void expect_flag_refused(const char *flag, const char *value, const char *want_text)
{
	char *argv[] = {"raftlockd",  "--id",        "1",
			"--data-dir", "/tmp/x",      "--cluster",
			"c",          "--member",    "1,127.0.0.1:1,127.0.0.1:2",
			(char *)flag, (char *)value, NULL};
	expect_refused(argv, 2, want_text);
}

static void bad_flags(void **state)
{
	(void)state;
	char *no_id[] = {"raftlockd",
			 "--data-dir",
			 "/tmp/x",
			 "--cluster",
			 "c",
			 "--member",
			 "1,127.0.0.1:1,127.0.0.1:2",
			 NULL};
	expect_refused(no_id, 2, "id is required");
	char *bad_member[] = {"raftlockd", "--id", "1",        "--data-dir", "/tmp/x",
			      "--cluster", "c",    "--member", "1,nohost",   NULL};
	expect_refused(bad_member, 2, "member");
	expect_flag_refused("--member", "2,127.0.0.1:3,127.0.0.1:4", "odd number");
	char *not_member[] = {"raftlockd",  "--id",     "4",
			      "--data-dir", "/tmp/x",   "--cluster",
			      "c",          "--member", "1,127.0.0.1:1,127.0.0.1:2",
			      NULL};
	expect_refused(not_member, 2, "not among the members");
	expect_flag_refused("--snapshot-trailing", "-1", "snapshot-trailing");
	expect_flag_refused("--frame-timeout-ms", "50", "frame-timeout-ms");
	expect_flag_refused("--max-connections-per-address", "x", "max-connections-per-address");
	expect_flag_refused("--log-format", "yaml", "log-format: 'yaml' is not text or json");
	char *unknown[] = {"raftlockd", "--bogus", NULL};
	expect_refused(unknown, 2, "unknown");
	char *bad_port[] = {"raftlockd",  "--id",     "1",
			    "--data-dir", "/tmp/x",   "--cluster",
			    "c",          "--member", "1,127.0.0.1:99999,127.0.0.1:2",
			    NULL};
	expect_refused(bad_port, 2, "HOST:PORT");
	/* One address parser for server and client (proto/address.c): an IPv6
	 * client address in brackets is taken, a bare one is not; a raft
	 * address cannot be IPv6, which libraft 0.22.1 does not parse. */
	expect_flag_refused("--client-address", "::1:7100", "HOST:PORT");
	char *v6_raft[] = {"raftlockd",  "--id",     "1",
			   "--data-dir", "/tmp/x",   "--cluster",
			   "c",          "--member", "1,[::1]:1,127.0.0.1:2",
			   NULL};
	expect_refused(v6_raft, 2, "IPv6");
	char out[1024];
	char *v6_client[] = {"raftlockd",
			     "--id",
			     "1",
			     "--data-dir",
			     "/tmp/x",
			     "--cluster",
			     "c",
			     "--member",
			     "1,127.0.0.1:1,[::1]:2",
			     "--check-config",
			     NULL};
	int st = tcluster_run_raftlockd(v6_client, out, sizeof out, 5000);
	if (st != 0 || strstr(out, "configuration OK") == NULL)
		fail_msg("an IPv6 client address in brackets: exit %d: %s", st, out);
}

/* --version prints the CMake project's version and starts nothing. */
static void version_flag(void **state)
{
	(void)state;
	char *version[] = {"raftlockd", "--version", NULL};
	expect_refused(version, 0, "raftlockd " RAFTLOCK_VERSION_STRING "\n");
}

static void bad_config_file(void **state)
{
	(void)state;
	char path[] = "/tmp/raftlock-conf-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	const char *text = "id = 1\ncluster = c\nthis line is wrong\n";
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	char *argv[] = {"raftlockd", "--config", path, NULL};
	expect_refused(argv, 2, ":3: expected 'key = value'");
	unlink(path);
	char *missing[] = {"raftlockd", "--config", "/nonexistent/raftlockd.conf", NULL};
	expect_refused(missing, 2, "/nonexistent/raftlockd.conf");
}

static void foreign_data_dir(void **state)
{
	(void)state;
	struct tcluster cl;
	memset(&cl, 0, sizeof cl);
	tcluster_start(&cl, 3, 1000);
	tcluster_stop(&cl, 0);
	/* Node 1's directory, started as a member of another cluster. */
	char dir[300], member[200];
	snprintf(dir, sizeof dir, "%s/n1", cl.dir);
	snprintf(member, sizeof member, "1,127.0.0.1:%d,127.0.0.1:%d", cl.raft_port[0],
		 cl.client_port[0]);
	char *other_cluster[] = {
		"raftlockd",       "--id",     "1",    "--data-dir", dir, "--cluster",
		"another-cluster", "--member", member, NULL};
	expect_refused(other_cluster, 1, "IDENTITY");
	/* And as another node id of the same cluster. */
	char member3[200];
	snprintf(member3, sizeof member3, "3,127.0.0.1:%d,127.0.0.1:%d", cl.raft_port[0],
		 cl.client_port[0]);
	char *other_node[] = {"raftlockd", "--id",  "3",        "--data-dir", dir,
			      "--cluster", cl.name, "--member", member3,      NULL};
	expect_refused(other_node, 1, "belongs to another cluster or node");

	/* Its data.mdb replaced by another cluster's, cleanly stopped (so
	 * trusted as it is): refused, naming both clusters; once it is moved
	 * away, the node rebuilds its state from its raft log. */
	struct tcluster other;
	memset(&other, 0, sizeof other);
	snprintf(other.name, sizeof other.name, "other-%d", (int)getpid());
	tcluster_start(&other, 1, 1000);
	assert_true(tcluster_leader(&other, 10000) >= 0);
	tcluster_stop(&other, 0);
	assert_int_equal(
		tcluster_shell("cp %s/n1/state/data.mdb %s/state/data.mdb", other.dir, dir), 0);
	char *mine[] = {"raftlockd", "--id",  "1",        "--data-dir", dir,
			"--cluster", cl.name, "--member", member,       NULL};
	char want[200];
	snprintf(want, sizeof want, "belongs to another cluster (its state says cluster=%s",
		 other.name);
	expect_refused(mine, 1, want);
	assert_int_equal(tcluster_shell("rm %s/state/data.mdb", dir), 0);
	tcluster_restart(&cl, 0);
	uint64_t until = tcluster_now_ms() + 30000; /* slow under the sanitizers */
	Raftlock__StatusInfo *st;
	while ((st = tcluster_status(&cl, 0)) == NULL) {
		assert_true(tcluster_now_ms() < until);
		usleep(50 * 1000);
	}
	raftlock__status_info__free_unpacked(st, NULL);
	assert_true(tcluster_leader(&cl, 10000) >= 0);
	assert_int_equal(tcluster_destroy(&other), 0);
	assert_int_equal(tcluster_destroy(&cl), 0);
}

/* A second raftlockd on a data directory in use is refused before it
 * touches anything: the running node survives a kill -9 and restarts. */
static void data_dir_in_use(void **state)
{
	(void)state;
	struct tcluster cl;
	memset(&cl, 0, sizeof cl);
	tcluster_start(&cl, 3, 1000);
	char dir[300], member[200], other[200];
	snprintf(dir, sizeof dir, "%s/n1", cl.dir);
	snprintf(member, sizeof member, "1,127.0.0.1:%d,127.0.0.1:%d", cl.raft_port[0],
		 cl.client_port[0]);
	snprintf(other, sizeof other, "2,127.0.0.1:%d,127.0.0.1:%d", cl.raft_port[1],
		 cl.client_port[1]);
	char third[200];
	snprintf(third, sizeof third, "3,127.0.0.1:%d,127.0.0.1:%d", cl.raft_port[2],
		 cl.client_port[2]);
	char *argv[] = {"raftlockd", "--id",     "1",        "--data-dir", dir,
			"--cluster", cl.name,    "--member", member,       "--member",
			other,       "--member", third,      NULL};
	expect_refused(argv, 1, "in use by another raftlockd");
	tcluster_signal(&cl, 0, SIGKILL);
	tcluster_restart(&cl, 0);
	uint64_t end = tcluster_now_ms() + 15000;
	Raftlock__StatusInfo *st = NULL;
	while (st == NULL && tcluster_now_ms() < end) {
		st = tcluster_status(&cl, 0);
		if (st == NULL)
			usleep(50000);
	}
	assert_non_null(st);
	raftlock__status_info__free_unpacked(st, NULL);
	assert_true(tcluster_leader(&cl, 15000) >= 0);
	assert_int_equal(tcluster_destroy(&cl), 0);
}

/* The shipped example configurations are valid. */
static void example_configs(void **state)
{
	(void)state;
	const char *files[] = {"3-nodes/node1.conf", "3-nodes/node3.conf", "5-nodes/node1.conf",
			       "5-nodes/node5.conf"};
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		char path[512], out[1024];
		snprintf(path, sizeof path, "%s/deploy/examples/%s", RAFTLOCK_SOURCE_DIR, files[i]);
		char *argv[] = {"raftlockd", "--config", path, "--check-config", NULL};
		int st = tcluster_run_raftlockd(argv, out, sizeof out, 5000);
		if (st != 0 || strstr(out, "configuration OK") == NULL)
			fail_msg("%s: exit %d: %s", path, st, out);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bad_flags),        cmocka_unit_test(bad_config_file),
		cmocka_unit_test(foreign_data_dir), cmocka_unit_test(example_configs),
		cmocka_unit_test(data_dir_in_use),  cmocka_unit_test(version_flag),
	};
	if (getenv("RAFTLOCK_TEST_FILTER") != NULL) /* e.g. "leader_*" */
		cmocka_set_test_filter(getenv("RAFTLOCK_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
