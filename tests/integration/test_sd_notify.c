/* systemd's notification protocol, spoken by real nodes (issue 13, item
 * 3), without systemd: the test binds its own AF_UNIX datagram socket,
 * names it in NOTIFY_SOCKET with WATCHDOG_USEC set, and reads what each
 * node sends, telling nodes apart by the sender's pid (SCM_CREDENTIALS).
 * A node says STATUS= while it cannot serve, READY=1 only once it can
 * (its /readyz is then 200; a lone node of three never says it),
 * WATCHDOG=1 every half WATCHDOG_USEC, and STOPPING=1 on SIGTERM. In a
 * rolling upgrade, a node of the new build restarted behind a leader of
 * an older build (which sends no readiness report) says READY=1 too. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"

#define WATCHDOG_USEC 300000 /* a ping every 150 ms */
#define OLD_BUILD RAFTLOCK_BINARY_DIR "/bin/raftlockd-level1"
#define NEW_BUILD RAFTLOCK_BINARY_DIR "/bin/raftlockd"

static struct tcluster cl;
static char dir[] = "/tmp/raftlock-notify-XXXXXX";
static int sock = -1;

/* What one node said so far. */
struct heard {
	int status_before_ready; /* STATUS= datagrams before READY=1 */
	bool ready, ready_while_serving, stopping;
	int watchdogs;
	char last_status[256];
};
static struct heard heard[TCLUSTER_MAX];

/* The last pid of each node: a stopped node's datagrams still count. */
static pid_t known[TCLUSTER_MAX];

static int node_of(pid_t pid)
{
	for (int i = 0; i < cl.n; i++)
		if (known[i] == pid)
			return i;
	return -1;
}

static int code_of(int i, const char *path)
{
	char out[4096];
	int code = 0;
	if (tcluster_http_get(&cl, i, path, out, sizeof out) != 0 ||
	    sscanf(out, "HTTP/1.1 %d", &code) != 1)
		return -1;
	return code;
}

/* Reads datagrams for up to ms, recording them by node. */
static void listen_for(int ms)
{
	for (int i = 0; i < cl.n; i++)
		if (cl.pid[i] > 0)
			known[i] = cl.pid[i];
	uint64_t end = tcluster_now_ms() + (uint64_t)ms;
	for (uint64_t now; (now = tcluster_now_ms()) < end;) {
		struct pollfd p = {sock, POLLIN, 0};
		if (poll(&p, 1, (int)(end - now)) <= 0)
			continue;
		char buf[1024];
		union {
			struct cmsghdr h;
			char space[CMSG_SPACE(sizeof(struct ucred))];
		} ctl;
		struct iovec iov = {buf, sizeof buf - 1};
		struct msghdr msg = {.msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = &ctl,
				     .msg_controllen = sizeof ctl};
		ssize_t n = recvmsg(sock, &msg, MSG_DONTWAIT);
		if (n < 0)
			continue;
		buf[n] = '\0';
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		assert_non_null(c);
		assert_int_equal(c->cmsg_type, SCM_CREDENTIALS);
		struct ucred cred;
		memcpy(&cred, CMSG_DATA(c), sizeof cred);
		int i = node_of(cred.pid);
		if (i < 0)
			continue;
		struct heard *h = &heard[i];
		if (strstr(buf, "WATCHDOG=1") != NULL)
			h->watchdogs++;
		if (strstr(buf, "STOPPING=1") != NULL)
			h->stopping = true;
		const char *st = strstr(buf, "STATUS=");
		if (st != NULL) {
			snprintf(h->last_status, sizeof h->last_status, "%s", st + 7);
			if (!h->ready)
				h->status_before_ready++;
		}
		if (strstr(buf, "READY=1") != NULL) {
			assert_false(h->ready); /* said once */
			h->ready = true;
			/* It says so only when it can serve: ask it at once. */
			h->ready_while_serving = code_of(i, "/readyz") == 200;
		}
	}
}

static int setup(void **state)
{
	(void)state;
	if (mkdtemp(dir) == NULL)
		return -1;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof a.sun_path, "%s/notify", dir);
	sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int on = 1;
	if (sock < 0 || bind(sock, (struct sockaddr *)&a, sizeof a) != 0 ||
	    setsockopt(sock, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0)
		return -1;
	/* The nodes inherit the test's environment. */
	setenv("NOTIFY_SOCKET", a.sun_path, 1);
	char usec[32];
	snprintf(usec, sizeof usec, "%d", WATCHDOG_USEC);
	setenv("WATCHDOG_USEC", usec, 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	close(sock);
	return tcluster_destroy_and_remove(&cl, dir);
}

static bool all_ready(int n)
{
	for (int i = 0; i < n; i++)
		if (!heard[i].ready)
			return false;
	return true;
}

static void ready_status_watchdog_stopping(void **state)
{
	(void)state;
	tcluster_start(&cl, 3, 1000);
	/* 30 s: a loaded CI machine has been seen to need more than 10. */
	for (int k = 0; k < 300 && !all_ready(cl.n); k++)
		listen_for(100);
	for (int i = 0; i < cl.n; i++) {
		if (!heard[i].ready)
			fail_msg("node %d: no READY=1 in 30 s; its last STATUS: %s", i + 1,
				 heard[i].last_status);
		assert_true(heard[i].ready_while_serving);
		/* The first word: no leader yet. */
		assert_true(heard[i].status_before_ready >= 1);
		assert_non_null(strstr(heard[i].last_status, "serving as"));
	}
	memset(heard, 0, sizeof heard);
	listen_for(2000);
	for (int i = 0; i < cl.n; i++) /* about 13 in two seconds; a loaded run is slower */
		if (heard[i].watchdogs < 5 || heard[i].watchdogs > 16)
			fail_msg("node %d: %d watchdog pings in 2 s, not about 13", i + 1,
				 heard[i].watchdogs);

	/* A lone node of three: pings and reasons, never READY=1. */
	for (int i = 0; i < cl.n; i++)
		tcluster_signal(&cl, i, SIGKILL);
	memset(heard, 0, sizeof heard);
	tcluster_restart(&cl, 0);
	listen_for(3000);
	assert_false(heard[0].ready);
	assert_true(heard[0].watchdogs >= 10);
	assert_true(heard[0].status_before_ready >= 1);
	assert_non_null(strstr(heard[0].last_status, "no leader known"));
	assert_int_equal(code_of(0, "/readyz"), 503);

	/* A second one: a leader, and both say READY=1 when they serve. */
	tcluster_restart(&cl, 1);
	for (int k = 0; k < 150 && !all_ready(2); k++)
		listen_for(100);
	for (int i = 0; i < 2; i++) {
		assert_true(heard[i].ready);
		assert_true(heard[i].ready_while_serving);
	}

	/* SIGTERM: STOPPING=1, then a clean exit. */
	assert_false(heard[1].stopping);
	assert_int_equal(tcluster_stop(&cl, 1), 0);
	listen_for(300);
	assert_true(heard[1].stopping);
}

/* docs/OPERATIONS.md, "Upgrades", under systemd Type=notify: a follower
 * restarted with the new build behind a leader of the old one must say
 * READY=1, or systemd times its start out and the upgrade stops there.
 * The old leader tells it nothing (feature_level.h): it asks the leader. */
static void upgraded_follower_behind_old_leader(void **state)
{
	(void)state;
	assert_int_equal(tcluster_destroy(&cl), 0);
	for (int i = 0; i < 3; i++)
		cl.bin[i] = OLD_BUILD;
	tcluster_start(&cl, 3, 1000);
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	int up = (leader + 1) % cl.n;
	assert_int_equal(tcluster_stop(&cl, up), 0);
	memset(heard, 0, sizeof heard);
	cl.bin[up] = NEW_BUILD;
	tcluster_restart(&cl, up);
	for (int k = 0; k < 150 && !heard[up].ready; k++)
		listen_for(100);
	if (!heard[up].ready)
		fail_msg("upgraded node %d: no READY=1 in 15 s; its last STATUS: %s", up + 1,
			 heard[up].last_status);
	assert_true(heard[up].ready_while_serving);
	assert_non_null(strstr(heard[up].last_status, "serving as follower"));
	/* and it was an old build that led it there: it serves as a follower
	 * and every other node runs the old build (the leader may have changed
	 * since on a loaded machine, but only among those) */
	Raftlock__StatusInfo *st = tcluster_status(&cl, leader);
	assert_non_null(st);
	assert_int_equal(st->feature_level, 1);
	raftlock__status_info__free_unpacked(st, NULL);
	st = tcluster_status(&cl, up);
	assert_non_null(st);
	assert_true(st->feature_level > 1);
	raftlock__status_info__free_unpacked(st, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ready_status_watchdog_stopping),
		cmocka_unit_test(upgraded_follower_behind_old_leader),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
