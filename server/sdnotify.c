/* sdnotify.c: see sdnotify.h. */
#include "sdnotify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "raftlock.h"

static uint64_t env_u64(const char *name, bool *ok)
{
	const char *v = getenv(name);
	*ok = false;
	if (v == NULL || *v == '\0')
		return 0;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0')
		return 0;
	*ok = true;
	return x;
}

int sdnotify_open(struct sdnotify *n, char *err, size_t errlen)
{
	memset(n, 0, sizeof *n);
	n->fd = -1;
	const char *path = getenv("NOTIFY_SOCKET");
	if (path == NULL || *path == '\0')
		return 0;
	size_t len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof n->addr.sun_path) {
		snprintf(err, errlen, "NOTIFY_SOCKET '%s': not an absolute path or @name", path);
		return RAFTLOCK_ECONFIG;
	}
	n->addr.sun_family = AF_UNIX;
	memcpy(n->addr.sun_path, path, len);
	if (path[0] == '@')
		n->addr.sun_path[0] = '\0'; /* the abstract namespace */
	n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	bool ok, pid_ok;
	uint64_t usec = env_u64("WATCHDOG_USEC", &ok);
	uint64_t pid = env_u64("WATCHDOG_PID", &pid_ok);
	if (ok && usec > 0 && (!pid_ok || pid == (uint64_t)getpid()))
		n->watchdog_usec = usec;
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (n->fd < 0) {
		snprintf(err, errlen, "NOTIFY_SOCKET: socket: %s", strerror(errno));
		return RAFTLOCK_EIO;
	}
	return 0;
}

int sdnotify_send(struct sdnotify *n, const char *state)
{
	if (n->fd < 0)
		return 0;
	ssize_t r = sendto(n->fd, state, strlen(state), MSG_NOSIGNAL,
			   (const struct sockaddr *)&n->addr, n->addr_len);
	return r < 0 ? -errno : 0;
}

bool sdnotify_enabled(const struct sdnotify *n)
{
	return n->fd >= 0;
}

void sdnotify_close(struct sdnotify *n)
{
	if (n->fd >= 0)
		close(n->fd);
	n->fd = -1;
}
