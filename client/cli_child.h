/*
 * cli_child.h: holding a lock while a child command runs (`raftlock lock`
 * and `raftlock run`).
 *
 * The command runs in a process group of its own (the terminal's foreground
 * group when the CLI had the terminal) and gets RAFTLOCK_TOKEN,
 * RAFTLOCK_LOCK and RAFTLOCK_SESSION in its environment. While it runs,
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to the whole group;
 * when the session cannot be renewed the group gets SIGTERM at
 * valid_until - grace and SIGKILL at valid_until, before the server can
 * give the lock to anyone else. A watcher process (cli_watch.h) SIGKILLs
 * the group if the CLI dies, or at the last valid_until it was told if
 * the CLI is stopped. When the command's leader exits, whatever is left of
 * its group is killed before the lock is released; a suspended command
 * (Ctrl-Z) is resumed, since a stopped holder would keep the lock.
 *
 * Without a command, the lock is held until SIGINT, SIGTERM or SIGHUP (as
 * `etcdctl lock` does): its fencing token is printed on stdout first.
 *
 * With `all`, NAME lists several locks taken as one set (raftlock_multi_*):
 * all at once or none; RAFTLOCK_TOKEN then lists their tokens,
 * comma-separated, in the order of the names.
 */
#ifndef RAFTLOCK_CLI_CHILD_H
#define RAFTLOCK_CLI_CHILD_H

#include <signal.h>

#include "raftlock.h"

/* Exit codes of the raftlock command. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_ERROR 1
#define CLI_EXIT_USAGE 2
#define CLI_EXIT_BUSY 3

struct cli_hold {
	const char *name; /* with all: a comma-separated list of names */
	bool all;         /* take every lock of name as one set, atomically */
	struct raftlock_lock_options lock_opts;
	enum raftlock_mode mode;
	uint32_t permits;
	int wait_ms; /* 0: do not wait; < 0: forever */
	unsigned ttl_ms;
	unsigned grace_ms;
	bool bind;              /* crash-fast: the session is bound to its connection */
	unsigned bind_grace_ms; /* 0: the default */
	char **argv;            /* the command, NULL-terminated; NULL: hold until a signal */
	int conflict_exit_code; /* the exit code when the lock is busy (CLI_EXIT_BUSY) */
	bool child_exit_code;   /* exit with the command's status; else 0 once it ran */
	bool json;              /* without a command: print the token as JSON */
	const char *value;      /* elect: the value published with the grant */
};

/* The signals the supervisor waits for (SIGCHLD) or forwards (SIGINT,
 * SIGTERM, SIGHUP, SIGQUIT; SIGUSR1 is internal). They must be blocked in
 * every thread, from before the client starts its threads: only
 * sigwait/sigtimedwait take them. */
void cli_signal_set(sigset_t *set);

/*
 * Opens a session on c, takes the lock, runs the command and supervises
 * it (or, without a command, waits for a signal), then releases the lock
 * and closes the session. A signal while the lock is awaited closes the
 * session (leaving the server's queue) and ends with 128 + the signal.
 * Returns the exit code of the raftlock command: the child's (128 + signal
 * when a signal ended it) with child_exit_code, else 0 once the command
 * ran with the lock held throughout; without a command, 0 after a signal
 * released the lock; h->conflict_exit_code when the lock was not obtained
 * in time; CLI_EXIT_ERROR with a message on stderr (also when the session
 * was lost while the lock was held without a command, or, without
 * child_exit_code, while the command ran). A lock lost while the command
 * ran (revoked, the session's validity ended; also seen only as it exited
 * or at the release) with child_exit_code: 128 + SIGKILL, whatever its
 * status. Without a command or child_exit_code, a release or session
 * close that failed or was not confirmed is CLI_EXIT_ERROR too.
 */
int cli_hold_run(raftlock_client *c, const struct cli_hold *h);

#endif
