/*
 * cli_watch.h: a watcher process that stops a command's whole process
 * group when the raftlock CLI cannot.
 *
 * `raftlock lock` runs its command in a process group of its own. The CLI
 * signals that group at valid_until, but a CLI that is killed (kill -9) or
 * stopped (SIGSTOP) signals nothing, and PR_SET_PDEATHSIG reaches only the
 * direct child. So a small process forked from the CLI holds the read end
 * of a pipe whose write end only the CLI holds; the CLI writes each new
 * valid_until into it. The watcher SIGKILLs the group when the pipe reaches
 * EOF (the CLI is gone) or when the last deadline it was told passes
 * without a newer one (the CLI could not renew or is stopped). It ignores
 * the terminal's signals, so a Ctrl-C or Ctrl-Z aimed at the CLI does not
 * take the guard away. A process that leaves the group (setsid, setpgid)
 * escapes it: GUARANTEES says so.
 */
#ifndef RAFTLOCK_CLI_WATCH_H
#define RAFTLOCK_CLI_WATCH_H

#include <stdint.h>
#include <sys/types.h>

struct cli_watch {
	pid_t pid;     /* the watcher, 0 if none */
	int fd;        /* the CLI's end of the pipe, -1 if none */
	uint64_t told; /* the last deadline written */
};

/*
 * Forks the watcher for process group pgid with its first deadline
 * (CLOCK_BOOTTIME ms, as raftlock_now_ms()). Safe in a threaded process:
 * the watcher makes async-signal-safe calls only. Returns 0, or -1 with
 * errno (pipe or fork failed; nothing is left behind).
 */
int cli_watch_start(struct cli_watch *w, pid_t pgid, uint64_t deadline_ms);

/* Tells the watcher a new deadline (a no-op when unchanged). */
void cli_watch_deadline(struct cli_watch *w, uint64_t deadline_ms);

/* Ends the watcher: closes the pipe (the watcher kills what is left of the
 * group, then exits) and reaps it. */
void cli_watch_stop(struct cli_watch *w);

#endif
