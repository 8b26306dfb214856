/* test_sdnotify.c: systemd's notification protocol as server/sdnotify.c
 * speaks it, against real AF_UNIX datagram sockets: nothing without
 * NOTIFY_SOCKET, a path and an abstract name delivered, a name that is
 * neither refused, and the watchdog taken only for this process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "raftlock.h"
#include "sdnotify.h"

static char err[256];

static void clear_env(void)
{
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}

/* A receiving socket at `name` (a path, or "@abstract"). */
static int receiver(const char *name)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	size_t len = strlen(name);
	memcpy(a.sun_path, name, len);
	if (name[0] == '@')
		a.sun_path[0] = '\0';
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)),
			 0);
	return fd;
}

static void expect(int fd, const char *text)
{
	char buf[256];
	ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_string_equal(buf, text);
}

static void nothing_without_socket(void **state)
{
	(void)state;
	clear_env();
	struct sdnotify n;
	assert_int_equal(sdnotify_open(&n, err, sizeof err), 0);
	assert_false(sdnotify_enabled(&n));
	assert_int_equal(sdnotify_send(&n, "READY=1"), 0);
	assert_int_equal(n.watchdog_usec, 0);
	sdnotify_close(&n);
}

static void path_and_abstract(void **state)
{
	(void)state;
	clear_env();
	char path[] = "/tmp/raftlock-sdnotify-XXXXXX";
	assert_non_null(mkdtemp(path));
	char sock[128], abstract[64];
	snprintf(sock, sizeof sock, "%s/notify", path);
	snprintf(abstract, sizeof abstract, "@raftlock-sdnotify-%d", (int)getpid());
	const char *names[] = {sock, abstract};
	for (int k = 0; k < 2; k++) {
		int fd = receiver(names[k]);
		setenv("NOTIFY_SOCKET", names[k], 1);
		struct sdnotify n;
		assert_int_equal(sdnotify_open(&n, err, sizeof err), 0);
		assert_true(sdnotify_enabled(&n));
		assert_int_equal(sdnotify_send(&n, "READY=1\nSTATUS=serving"), 0);
		expect(fd, "READY=1\nSTATUS=serving");
		sdnotify_close(&n);
		close(fd);
	}
	unlink(sock);
	rmdir(path);
	/* Nobody listening: an error to log, nothing more. */
	setenv("NOTIFY_SOCKET", sock, 1);
	struct sdnotify n;
	assert_int_equal(sdnotify_open(&n, err, sizeof err), 0);
	assert_true(sdnotify_send(&n, "WATCHDOG=1") < 0);
	sdnotify_close(&n);
}

static void bad_names(void **state)
{
	(void)state;
	clear_env();
	struct sdnotify n;
	setenv("NOTIFY_SOCKET", "relative/notify", 1);
	assert_int_equal(sdnotify_open(&n, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_non_null(strstr(err, "relative/notify"));
	char longname[200];
	memset(longname, 'a', sizeof longname - 1);
	longname[0] = '/';
	longname[sizeof longname - 1] = '\0';
	setenv("NOTIFY_SOCKET", longname, 1);
	assert_int_equal(sdnotify_open(&n, err, sizeof err), RAFTLOCK_ECONFIG);
}

static void watchdog_for_this_process_only(void **state)
{
	(void)state;
	clear_env();
	setenv("NOTIFY_SOCKET", "@raftlock-sdnotify-unused", 1);
	setenv("WATCHDOG_USEC", "30000000", 1);
	struct sdnotify n;
	assert_int_equal(sdnotify_open(&n, err, sizeof err), 0);
	assert_int_equal(n.watchdog_usec, 30000000);
	sdnotify_close(&n);
	char pid[32];
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	setenv("WATCHDOG_PID", pid, 1);
	assert_int_equal(sdnotify_open(&n, err, sizeof err), 0);
	assert_int_equal(n.watchdog_usec, 30000000);
	sdnotify_close(&n);
	snprintf(pid, sizeof pid, "%d", (int)getpid() + 1); /* a parent's, say */
	setenv("WATCHDOG_PID", pid, 1);
	assert_int_equal(sdnotify_open(&n, err, sizeof err), 0);
	assert_int_equal(n.watchdog_usec, 0);
	sdnotify_close(&n);
	setenv("WATCHDOG_PID", "", 1);
	setenv("WATCHDOG_USEC", "soon", 1);
	assert_int_equal(sdnotify_open(&n, err, sizeof err), 0);
	assert_int_equal(n.watchdog_usec, 0);
	sdnotify_close(&n);
	clear_env();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(nothing_without_socket),
		cmocka_unit_test(path_and_abstract),
		cmocka_unit_test(bad_names),
		cmocka_unit_test(watchdog_for_this_process_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
