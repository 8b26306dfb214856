/* cli_child.c: see cli_child.h. */
#include "cli_child.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CLI_SUPERVISE_TICK_MS 50

extern char **environ;

/* environ plus the three RAFTLOCK_* variables (replacing older ones).
 * Built before fork: the child of a threaded process must not allocate. */
static char **child_env(const char *name, uint64_t token, uint64_t session)
{
	size_t n = 0;
	while (environ[n] != NULL)
		n++;
	char **env = calloc(n + 4, sizeof *env);
	if (env == NULL)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "RAFTLOCK_TOKEN=", 15) != 0 &&
		    strncmp(environ[i], "RAFTLOCK_LOCK=", 14) != 0 &&
		    strncmp(environ[i], "RAFTLOCK_SESSION=", 17) != 0)
			env[k++] = environ[i];
	char *vars[3] = {NULL, NULL, NULL};
	if (asprintf(&vars[0], "RAFTLOCK_TOKEN=%" PRIu64, token) < 0 ||
	    asprintf(&vars[1], "RAFTLOCK_LOCK=%s", name) < 0 ||
	    asprintf(&vars[2], "RAFTLOCK_SESSION=%" PRIu64, session) < 0) {
		for (int i = 0; i < 3; i++)
			free(vars[i]);
		free(env);
		return NULL;
	}
	for (int i = 0; i < 3; i++)
		env[k++] = vars[i];
	return env;
}

static void child_env_free(char **env)
{
	size_t n = 0;
	while (env[n] != NULL)
		n++;
	for (size_t i = n >= 3 ? n - 3 : 0; i < n; i++)
		free(env[i]);
	free(env);
}

/* In the child, between fork and exec: async-signal-safe calls only. */
static void child_exec(char **argv, char **env, const sigset_t *old,
		       pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(128 + SIGKILL); /* the parent died before prctl */
	signal(SIGPIPE, SIG_DFL);
	sigprocmask(SIG_SETMASK, old, NULL);
	execvpe(argv[0], argv, env);
	static const char msg[] = "raftlock: cannot run the command: ";
	const char *what = argv[0];
	ssize_t rv = write(2, msg, sizeof msg - 1);
	rv = write(2, what, strlen(what));
	rv = write(2, "\n", 1);
	(void)rv;
	_exit(errno == ENOENT ? 127 : 126);
}

static int exit_code_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return CLI_EXIT_ERROR;
}

/* Runs the child under the session's lease; returns its wait status. */
static int supervise(pid_t child, raftlock_session *s, const struct cli_hold *h,
		     const sigset_t *set)
{
	bool termed = false, killed = false;
	uint64_t last_valid = raftlock_session_valid_until(s);
	for (;;) {
		uint64_t now = raftlock_now_ms();
		uint64_t v = raftlock_session_valid_until(s);
		if (v != 0)
			last_valid = v;
		if (!killed && (v == 0 || now >= last_valid)) {
			fprintf(stderr,
				"raftlock: session %" PRIu64
				" lost: killing the command (SIGKILL)\n",
				raftlock_session_id(s));
			kill(child, SIGKILL);
			killed = true;
		} else if (!termed && !killed && now + h->grace_ms >= last_valid) {
			fprintf(stderr,
				"raftlock: session %" PRIu64
				" cannot be renewed: stopping the command (SIGTERM), "
				"SIGKILL in %" PRIu64 " ms\n",
				raftlock_session_id(s), last_valid - now);
			kill(child, SIGTERM);
			termed = true;
		}
		uint64_t tick = CLI_SUPERVISE_TICK_MS;
		uint64_t next = termed ? last_valid : last_valid - h->grace_ms;
		if (!killed && next > now && next - now < tick)
			tick = next - now;
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)tick * 1000000};
		siginfo_t info;
		int sig = sigtimedwait(set, &info, &ts);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP ||
		    sig == SIGQUIT)
			kill(child, sig);
		int status;
		pid_t w = waitpid(child, &status, WNOHANG);
		if (w == child)
			return status;
	}
}

void cli_signal_set(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGCHLD);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGQUIT);
}

/* Takes the lock; CLI_EXIT_OK or the exit code. */
static int hold_acquire(raftlock_client *c, raftlock_lock *l,
			const struct cli_hold *h, uint64_t *token)
{
	int rv = raftlock_lock_acquire(l, h->mode, h->permits, h->wait_ms, token);
	if (rv == 0)
		return CLI_EXIT_OK;
	if (rv == RAFTLOCK_EBUSY || (rv == RAFTLOCK_ETIMEDOUT && h->wait_ms > 0)) {
		fprintf(stderr, "raftlock: lock '%s' is busy%s\n", h->name,
			h->wait_ms > 0 ? " (waited in vain)" : "");
		return CLI_EXIT_BUSY;
	}
	fprintf(stderr, "raftlock: %s\n", raftlock_errmsg(c));
	return CLI_EXIT_ERROR;
}

static int hold_run_child(raftlock_session *s, const struct cli_hold *h,
			  uint64_t token)
{
	sigset_t set, old;
	char **env = child_env(h->name, token, raftlock_session_id(s));
	if (env == NULL) {
		fprintf(stderr, "raftlock: out of memory\n");
		return CLI_EXIT_ERROR;
	}
	cli_signal_set(&set);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	fflush(NULL);
	pid_t parent = getpid();
	pid_t child = fork();
	if (child == 0)
		child_exec(h->argv, env, &old, parent);
	int code;
	if (child < 0) {
		fprintf(stderr, "raftlock: fork: %s\n", strerror(errno));
		code = CLI_EXIT_ERROR;
	} else {
		code = exit_code_of(supervise(child, s, h, &set));
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	child_env_free(env);
	return code;
}

int cli_hold_run(raftlock_client *c, const struct cli_hold *h)
{
	raftlock_session *s = NULL;
	raftlock_lock *l = NULL;
	uint64_t token = 0;
	struct raftlock_session_options so = {.ttl_ms = h->ttl_ms};
	if (raftlock_session_open(c, &so, &s) != 0) {
		fprintf(stderr, "raftlock: %s\n", raftlock_errmsg(c));
		return CLI_EXIT_ERROR;
	}
	int code = CLI_EXIT_ERROR;
	if (raftlock_lock_new(s, h->name, &h->lock_opts, &l) != 0) {
		fprintf(stderr, "raftlock: %s\n", raftlock_errmsg(c));
		goto out;
	}
	code = hold_acquire(c, l, h, &token);
	if (code != CLI_EXIT_OK)
		goto out;
	code = hold_run_child(s, h, token);
	if (raftlock_session_valid(s) && raftlock_lock_release(l, NULL) != 0)
		fprintf(stderr, "raftlock: %s\n", raftlock_errmsg(c));
out:
	raftlock_session_close(s); /* frees the handle too */
	return code;
}
