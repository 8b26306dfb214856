/* cli_watch.c: see cli_watch.h. */
#include "cli_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#define WATCH_FD 3

static uint64_t boottime_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The watcher's life, after fork: async-signal-safe calls only. */
static void watch_main(int fd, pid_t pgid, uint64_t deadline)
{
	/* Keep nothing of the CLI but the pipe (the client's sockets would
	 * otherwise stay open in here) and the standard streams. */
	if (fd != WATCH_FD) {
		dup2(fd, WATCH_FD);
		fd = WATCH_FD;
	}
	close_range(WATCH_FD + 1, ~0U, 0);
	static const int ignored[] = {SIGINT, SIGQUIT, SIGHUP, SIGTERM, SIGTSTP, SIGTTIN, SIGTTOU};
	for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
		signal(ignored[i], SIG_IGN);
	bool killed = false;
	for (;;) {
		uint64_t now = boottime_ms();
		if (!killed && now >= deadline) {
			kill(-pgid, SIGKILL);
			killed = true;
		}
		int wait_ms = -1;
		if (!killed)
			wait_ms = deadline - now > 60000 ? 60000 : (int)(deadline - now);
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, wait_ms) <= 0)
			continue;
		uint64_t next;
		ssize_t n = read(fd, &next, sizeof next);
		if (n == (ssize_t)sizeof next) {
			if (!killed)
				deadline = next;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		kill(-pgid, SIGKILL); /* EOF: the CLI is gone or done */
		_exit(0);
	}
}

int cli_watch_start(struct cli_watch *w, pid_t pgid, uint64_t deadline_ms)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		errno = e;
		return -1;
	}
	if (pid == 0) {
		close(p[1]);
		watch_main(p[0], pgid, deadline_ms);
	}
	close(p[0]);
	w->pid = pid;
	w->fd = p[1];
	w->told = deadline_ms;
	return 0;
}

void cli_watch_deadline(struct cli_watch *w, uint64_t deadline_ms)
{
	if (w->fd < 0 || deadline_ms == w->told)
		return;
	/* 8 bytes into a pipe are written whole; a full pipe cannot happen
	 * (the watcher reads each at once), and a dead watcher only fails. */
	if (write(w->fd, &deadline_ms, sizeof deadline_ms) == (ssize_t)sizeof deadline_ms)
		w->told = deadline_ms;
}

void cli_watch_stop(struct cli_watch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	if (w->pid > 0) {
		while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	w->pid = 0;
}
