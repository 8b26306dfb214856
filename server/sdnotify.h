/*
 * sdnotify.h: systemd's notification protocol (sd_notify(3)), spoken
 * directly: one datagram of "KEY=VALUE" lines to the AF_UNIX socket named
 * by $NOTIFY_SOCKET (a path, or "@name" for the abstract namespace). Not
 * linking libsystemd keeps the daemon's dependencies to what it uses; the
 * protocol is a stable interface of systemd's (see its "Interface
 * Portability and Stability" page).
 *
 * Without $NOTIFY_SOCKET (not started by systemd with Type=notify)
 * everything here does nothing. Sends never block (a full socket drops
 * the message, as sd_notify does). Not thread-safe; the daemon calls it
 * from its loop.
 */
#ifndef RAFTLOCK_SDNOTIFY_H
#define RAFTLOCK_SDNOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

struct sdnotify {
	int fd; /* -1: notifications off */
	struct sockaddr_un addr;
	socklen_t addr_len;
	uint64_t watchdog_usec; /* $WATCHDOG_USEC for this process; 0: off */
};

/*
 * Reads $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID (the watchdog is
 * this process's only if the pid is unset or getpid()). Returns 0 (with
 * n->fd == -1 when there is nothing to notify), or RAFTLOCK_ECONFIG with a
 * message in err for a socket name that is not usable, RAFTLOCK_EIO when
 * no socket could be made.
 */
int sdnotify_open(struct sdnotify *n, char *err, size_t errlen);

/* Sends `state` ("READY=1\nSTATUS=..."). Returns 0, or a negative errno
 * (which the daemon only logs: systemd's absence harms nothing). */
int sdnotify_send(struct sdnotify *n, const char *state);

bool sdnotify_enabled(const struct sdnotify *n);

void sdnotify_close(struct sdnotify *n);

#endif
