/* cli_child.c: see cli_child.h. */
#include "cli_child.h"

#include "cli_fault.h"
#include "cli_watch.h"
#include "cli_json.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CLI_SUPERVISE_TICK_MS 50

/* Lock events of the held lock, from the library's I/O thread: a bit
 * (1 << enum raftlock_lock_event) each. Revoked is taken as a lost lease;
 * a request to release as the stop of a cooperative holder. */
static atomic_uint lock_events;

static void on_lock_event(raftlock_session *s, enum raftlock_lock_event ev, const char *name,
			  uint64_t token, void *arg)
{
	(void)s;
	(void)name;
	(void)token;
	(void)arg;
	if (!cli_fault_hold_back(ev))
		atomic_fetch_or(&lock_events, 1u << ev);
}

static bool lock_event_seen(enum raftlock_lock_event ev)
{
	return (atomic_load(&lock_events) & (1u << ev)) != 0;
}

extern char **environ;

/* environ plus the three RAFTLOCK_* variables (replacing older ones).
 * Built before fork: the child of a threaded process must not allocate. */
static char **child_env(const char *name, const char *token, uint64_t session)
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
	if (asprintf(&vars[0], "RAFTLOCK_TOKEN=%s", token) < 0 ||
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

/* In the child, between fork and exec: async-signal-safe calls only. The
 * command leads a process group of its own, so that every process it
 * starts can be signalled together; it waits at the gate until the
 * watcher of that group runs (EOF: the CLI died first). */
static void child_exec(char **argv, char **env, const sigset_t *blocked, pid_t parent, int gate,
		       bool foreground)
{
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(128 + SIGKILL); /* the parent died before prctl */
	char go;
	if (read(gate, &go, 1) != 1)
		_exit(128 + SIGKILL);
	close(gate);
	if (foreground) {
		/* The command gets the terminal, as a shell's job would. */
		struct sigaction ign = {.sa_handler = SIG_IGN}, old;
		sigaction(SIGTTOU, &ign, &old);
		tcsetpgrp(0, getpid());
		sigaction(SIGTTOU, &old, NULL);
	}
	signal(SIGPIPE, SIG_DFL);
	sigprocmask(SIG_UNBLOCK, blocked, NULL);
	execvpe(argv[0], argv, env);
	static const char msg[] = "raftlock: cannot run the command: ";
	const char *what = argv[0];
	ssize_t rv = write(2, msg, sizeof msg - 1);
	rv = write(2, what, strlen(what));
	rv = write(2, "\n", 1);
	(void)rv;
	_exit(errno == ENOENT ? 127 : 126);
}

/* Gives the terminal back to the CLI's process group. */
static void terminal_take_back(void)
{
	struct sigaction ign = {.sa_handler = SIG_IGN}, old;
	sigaction(SIGTTOU, &ign, &old);
	tcsetpgrp(0, getpgrp());
	sigaction(SIGTTOU, &old, NULL);
}

static int exit_code_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return CLI_EXIT_ERROR;
}

/* What the command holds: the lock, or the set of --all. */
struct held {
	raftlock_lock *lock;
	raftlock_multi *set;
	char *names; /* --all: h->name, its commas made NULs */
	size_t n;
	uint64_t tokens[RAFTLOCK_MULTI_MAX]; /* in the order of the names */
	char text[RAFTLOCK_MULTI_MAX * 21];  /* RAFTLOCK_TOKEN: "T" or "T1,T2,..." */
	bool loss_reported;                  /* a loss of it was said on stderr */
};

/* Says on stderr that what x holds is lost, or may be (its session's
 * validity ran out), and notes it: the release then says no more of a
 * loss it finds. */
static void held_report_loss(struct held *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void held_report_loss(struct held *x, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("raftlock: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	x->loss_reported = true;
}

/* How the lock fared while the command ran. */
enum hold_outcome {
	HOLD_KEPT,    /* held throughout (a request to release is no loss) */
	HOLD_STOPPED, /* the command got SIGTERM as the lease ran out */
	HOLD_LOST,    /* revoked, or the session's validity ended */
};

/* Runs the child under the session's lease; returns its wait status and
 * in *outcome how the lock fared. A request to release also gets the
 * command SIGTERM, but the lock is held until it exits. */
static int supervise(pid_t child, raftlock_session *s, const struct cli_hold *h, struct held *x,
		     const sigset_t *set, struct cli_watch *w, enum hold_outcome *outcome)
{
	bool termed = false, stopped = false, killed = false;
	uint64_t last_valid = raftlock_session_valid_until(s);
	for (;;) {
		uint64_t now = raftlock_now_ms();
		uint64_t v = raftlock_session_valid_until(s);
		if (v != 0)
			last_valid = v;
		if (!killed && lock_event_seen(RAFTLOCK_LOCK_REVOKED)) {
			held_report_loss(x, "lock '%s' revoked: killing the command (SIGKILL)",
					 h->name);
			kill(-child, SIGKILL);
			killed = true;
		} else if (!termed && !killed && lock_event_seen(RAFTLOCK_LOCK_RELEASE_REQUESTED)) {
			fprintf(stderr,
				"raftlock: release of '%s' requested: stopping the command "
				"(SIGTERM)\n",
				h->name);
			kill(-child, SIGTERM);
			termed = true;
		}
		if (!killed && (v == 0 || now >= last_valid)) {
			/* Jeopardy or loss alike: the lock may go to another
			 * from now on, so the command stops here. */
			held_report_loss(x, "session %" PRIu64 " %s: killing the command (SIGKILL)",
					 raftlock_session_id(s),
					 v == 0 ? "lost" : "validity ran out");
			kill(-child, SIGKILL);
			killed = true;
		} else if (!stopped && !killed && now + h->grace_ms >= last_valid) {
			fprintf(stderr,
				"raftlock: session %" PRIu64
				" cannot be renewed: stopping the command (SIGTERM), "
				"SIGKILL in %" PRIu64 " ms\n",
				raftlock_session_id(s), last_valid - now);
			if (!termed)
				kill(-child, SIGTERM);
			termed = stopped = true;
		}
		cli_watch_deadline(w, last_valid);
		uint64_t tick = CLI_SUPERVISE_TICK_MS;
		uint64_t next = stopped ? last_valid : last_valid - h->grace_ms;
		if (!killed && next > now && next - now < tick)
			tick = next - now;
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)tick * 1000000};
		siginfo_t info;
		int sig = sigtimedwait(set, &info, &ts);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT)
			kill(-child, sig);
		int status;
		pid_t done = waitpid(child, &status, WNOHANG | WUNTRACED);
		if (done == child && WIFSTOPPED(status)) {
			/* A suspended holder would keep the lock from everyone
			 * for as long as it stays stopped (Ctrl-Z). */
			fprintf(stderr, "raftlock: the command holds a lock and is not "
					"suspended: resuming it\n");
			kill(-child, SIGCONT);
		} else if (done == child) {
			*outcome = killed ? HOLD_LOST : stopped ? HOLD_STOPPED : HOLD_KEPT;
			return status;
		}
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
	sigaddset(set, SIGUSR1);
}

/* What the acquire's result means for the command: CLI_EXIT_OK or the
 * exit code, with a message. */
static int hold_exit_code(raftlock_client *c, const struct cli_hold *h, int rv)
{
	if (rv == 0)
		return CLI_EXIT_OK;
	if (rv == RAFTLOCK_EBUSY || (rv == RAFTLOCK_ETIMEDOUT && h->wait_ms > 0)) {
		fprintf(stderr, "raftlock: lock '%s' is busy%s\n", h->name,
			h->wait_ms > 0 ? " (waited in vain)" : "");
		return h->conflict_exit_code;
	}
	fprintf(stderr, "raftlock: %s\n", raftlock_errmsg(c));
	return CLI_EXIT_ERROR;
}

/* The handle of the lock or the set (--all: NAME is a comma-separated
 * list). 0, or an error with the client's message set. */
static int held_new(raftlock_session *s, const struct cli_hold *h, struct held *x)
{
	memset(x, 0, sizeof *x);
	if (!h->all) {
		int rv = raftlock_lock_new(s, h->name, &h->lock_opts, &x->lock);
		return rv != 0 ? rv : raftlock_lock_set_value(x->lock, h->value);
	}
	struct raftlock_multi_item items[RAFTLOCK_MULTI_MAX + 1];
	if ((x->names = strdup(h->name)) == NULL)
		return RAFTLOCK_ENOMEM;
	for (char *p = x->names, *next; p != NULL && x->n <= RAFTLOCK_MULTI_MAX; p = next) {
		next = strchr(p, ',');
		if (next != NULL)
			*next++ = '\0';
		items[x->n++] = (struct raftlock_multi_item){
			.name = p, .mode = h->mode, .permits = h->permits, .opts = &h->lock_opts};
	}
	return raftlock_multi_new(s, items, x->n, &x->set);
}

static int held_acquire(struct held *x, const struct cli_hold *h)
{
	int rv;
	if (x->set == NULL) {
		x->n = 1;
		rv = raftlock_lock_acquire(x->lock, h->mode, h->permits, h->wait_ms, &x->tokens[0]);
	} else {
		rv = raftlock_multi_acquire(x->set, h->wait_ms);
		for (size_t i = 0; rv == 0 && i < x->n; i++)
			x->tokens[i] = raftlock_multi_token(x->set, i);
	}
	size_t at = 0;
	for (size_t i = 0; rv == 0 && i < x->n; i++)
		at += (size_t)snprintf(x->text + at, sizeof x->text - at, "%s%" PRIu64,
				       i ? "," : "", x->tokens[i]);
	return rv;
}

static int held_release(struct held *x)
{
	return x->set != NULL ? raftlock_multi_release(x->set)
			      : raftlock_lock_release(x->lock, NULL);
}

/* Frees the handles (the session is closed after: what is held goes). */
static void held_free(struct held *x)
{
	raftlock_multi_free(x->set);
	raftlock_lock_free(x->lock);
	free(x->names);
}

/* Why what x holds is gone, NULL while it is held: the look of a hold
 * without a command at each tick, and the look before the release (the
 * revoked event or the session's end can come in the moment the command
 * exits or the signal comes, after the last look of the supervision). */
static const char *held_gone(raftlock_session *s, const struct held *x)
{
	if (lock_event_seen(RAFTLOCK_LOCK_REVOKED))
		return "revoked";
	uint64_t v = raftlock_session_valid_until(s);
	if (v == 0)
		return "session lost";
	if (raftlock_now_ms() >= v)
		return "session validity ran out";
	for (size_t i = 0; i < x->n; i++)
		if ((x->set != NULL ? raftlock_multi_token(x->set, i)
				    : raftlock_lock_token(x->lock)) == 0)
			return "revoked";
	return NULL;
}

/* The exit code is the command's status (else 0 or an error). */
static bool hold_passes_status(const struct cli_hold *h)
{
	return h->argv != NULL && h->child_exit_code;
}

/* The exit code of a lock lost while held: with the command's status
 * passed on, that of the SIGKILL a lost lock sends the command (also when
 * the command exited before it could be sent); else an error. */
static int hold_lost_exit_code(const struct cli_hold *h)
{
	return hold_passes_status(h) ? 128 + SIGKILL : CLI_EXIT_ERROR;
}

static int hold_run_child(raftlock_session *s, const struct cli_hold *h, struct held *x)
{
	sigset_t set;
	int gate[2];
	char **env = child_env(h->name, x->text, raftlock_session_id(s));
	if (env == NULL) {
		fprintf(stderr, "raftlock: out of memory\n");
		return CLI_EXIT_ERROR;
	}
	if (pipe2(gate, O_CLOEXEC) != 0) {
		fprintf(stderr, "raftlock: pipe: %s\n", strerror(errno));
		child_env_free(env);
		return CLI_EXIT_ERROR;
	}
	cli_signal_set(&set); /* blocked in every thread since main() */
	bool foreground = isatty(0) && tcgetpgrp(0) == getpgrp();
	fflush(NULL);
	pid_t parent = getpid();
	pid_t child = fork();
	if (child == 0) {
		close(gate[1]);
		child_exec(h->argv, env, &set, parent, gate[0], foreground);
	}
	close(gate[0]);
	int code = CLI_EXIT_ERROR;
	struct cli_watch w = {.fd = -1};
	if (child < 0) {
		fprintf(stderr, "raftlock: fork: %s\n", strerror(errno));
		goto out;
	}
	setpgid(child, child); /* also here: no race with our first kill */
	uint64_t valid = raftlock_session_valid_until(s);
	if (cli_watch_start(&w, child, valid ? valid : raftlock_now_ms()) != 0) {
		fprintf(stderr, "raftlock: cannot start the watcher: %s\n", strerror(errno));
		kill(child, SIGKILL); /* still at the gate */
		waitpid(child, NULL, 0);
		goto out;
	}
	if (write(gate[1], "g", 1) != 1)
		kill(child, SIGKILL);
	close(gate[1]);
	gate[1] = -1;
	enum hold_outcome outcome = HOLD_KEPT;
	int status = supervise(child, s, h, x, &set, &w, &outcome);
	if (cli_fault_revoke_late()) /* test-only: see cli_fault.h */
		atomic_fetch_or(&lock_events, 1u << RAFTLOCK_LOCK_REVOKED);
	if (outcome == HOLD_LOST)
		code = hold_lost_exit_code(h);
	else if (h->child_exit_code)
		code = exit_code_of(status);
	else if (outcome == HOLD_STOPPED)
		code = CLI_EXIT_ERROR; /* the command did not run to its end */
	else
		code = CLI_EXIT_OK;
	/* What the command left running must not outlive the lock. */
	kill(-child, SIGKILL);
	cli_watch_stop(&w);
	if (foreground)
		terminal_take_back();
out:
	if (gate[1] >= 0)
		close(gate[1]);
	child_env_free(env);
	return code;
}

/* Releases what x still holds. Returns code, or the code of a lost lock
 * when the release finds it gone already (revoked, or the session ended,
 * also since the supervision's last look: said on stderr unless said
 * already), or an error when the release failed or was not confirmed
 * (unless the command's status is passed on): the lock may stay held
 * until the session ends. */
static int hold_release(raftlock_client *c, raftlock_session *s, const struct cli_hold *h,
			struct held *x, int code)
{
	const char *gone = held_gone(s, x);
	if (gone != NULL) { /* nothing is left to release */
		if (!x->loss_reported)
			held_report_loss(x, "lock '%s' lost (%s)%s", h->name, gone,
					 h->argv != NULL
						 ? " as the command exited: it may not have "
						   "run under the lock to its end"
						 : ": it is no longer held");
		return hold_lost_exit_code(h);
	}
	int rv = held_release(x);
	if (rv == RAFTLOCK_ENOTHOLDER || rv == RAFTLOCK_ESESSION) {
		if (!x->loss_reported) /* said once, as it was seen first */
			held_report_loss(
				x,
				"lock '%s' was no longer held at its release (%s): it may have "
				"gone to another before the end",
				h->name, raftlock_strerror(rv));
		return hold_lost_exit_code(h);
	}
	if (rv != 0) {
		fprintf(stderr, "raftlock: %s\n", raftlock_errmsg(c));
		if (!hold_passes_status(h))
			return CLI_EXIT_ERROR;
	}
	return code;
}

/* Prints the token of the lock just taken (of each lock of a set, in the
 * order of the names), flushed at once: a script reads it while the lock
 * is held. */
static void print_token(const raftlock_session *s, const struct cli_hold *h, const struct held *x)
{
	if (h->json) {
		fputs("{", stdout);
		cli_json_name(stdout, CLI_JSON_SPACED, "lock", h->name);
		printf(", \"token\": %" PRIu64, x->tokens[0]);
		if (x->set != NULL)
			printf(", \"tokens\": [%s]", x->text);
		printf(", \"session\": %" PRIu64 "}\n", raftlock_session_id(s));
	} else {
		printf("%s\n", x->text);
	}
	fflush(stdout);
	fprintf(stderr,
		"raftlock: holding '%s' with fencing token %s (session %" PRIu64
		") until SIGINT, SIGTERM, SIGHUP or SIGQUIT\n",
		h->name, x->text, raftlock_session_id(s));
}

/* No command: holds the lock until SIGINT, SIGTERM, SIGHUP, SIGQUIT or a
 * request to release (CLI_EXIT_OK), or until it is revoked or the
 * session's validity ends (CLI_EXIT_ERROR: the lock may be someone else's
 * from then on). */
static int hold_until_signal(raftlock_session *s, const struct cli_hold *h, struct held *x)
{
	sigset_t set;
	cli_signal_set(&set); /* blocked in every thread since main() */
	print_token(s, h, x);
	for (;;) {
		const char *gone = held_gone(s, x);
		if (gone != NULL) {
			held_report_loss(x, "lock '%s' lost (%s): it is no longer held", h->name,
					 gone);
			return CLI_EXIT_ERROR;
		}
		if (lock_event_seen(RAFTLOCK_LOCK_RELEASE_REQUESTED))
			return CLI_EXIT_OK; /* a cooperative holder lets go */
		struct timespec ts = {.tv_sec = 0, .tv_nsec = CLI_SUPERVISE_TICK_MS * 1000000L};
		int sig = sigtimedwait(&set, NULL, &ts);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT)
			return CLI_EXIT_OK; /* the release looks again */
	}
}

/*
 * While the lock is awaited, a signal must take us out of the server's
 * queue at once (a stopped standby must not be granted the lock and hold
 * it until its session expires). The waiting thread is blocked inside the
 * library, so a thread of our own takes the signals and closes the
 * session: the blocked acquire then returns RAFTLOCK_ECANCELED.
 */
struct wait_guard {
	pthread_t thread;
	pthread_mutex_t mu;
	raftlock_session *s; /* set while the acquire blocks */
	bool settled;        /* the acquire returned: main cleans up */
	bool aborted;        /* the guard closed the session */
	int signal;          /* the signal that came, 0 if none */
};

static void *guard_main(void *arg)
{
	struct wait_guard *g = arg;
	sigset_t set;
	int sig = 0;
	cli_signal_set(&set);
	sigdelset(&set, SIGCHLD);
	if (sigwait(&set, &sig) != 0 || sig == SIGUSR1)
		return NULL; /* SIGUSR1: main stops the guard */
	pthread_mutex_lock(&g->mu);
	g->signal = sig;
	if (!g->settled && g->s == NULL)
		_exit(128 + sig); /* no wait to leave yet */
	raftlock_session *s = g->settled ? NULL : g->s;
	g->aborted = s != NULL;
	pthread_mutex_unlock(&g->mu);
	if (s != NULL)
		raftlock_session_close(s);
	return NULL;
}

static int guard_start(struct wait_guard *g)
{
	memset(g, 0, sizeof *g);
	pthread_mutex_init(&g->mu, NULL);
	if (pthread_create(&g->thread, NULL, guard_main, g) != 0) {
		fprintf(stderr, "raftlock: cannot start a thread\n");
		return CLI_EXIT_ERROR;
	}
	return CLI_EXIT_OK;
}

/* The acquire returned: stops the guard. True when the guard closed the
 * session (it and its handles are gone). */
static bool guard_stop(struct wait_guard *g)
{
	pthread_mutex_lock(&g->mu);
	g->settled = true;
	pthread_mutex_unlock(&g->mu);
	pthread_kill(g->thread, SIGUSR1);
	pthread_join(g->thread, NULL);
	pthread_mutex_destroy(&g->mu);
	return g->aborted;
}

int cli_hold_run(raftlock_client *c, const struct cli_hold *h)
{
	raftlock_session *s = NULL;
	struct held x;
	struct wait_guard g;
	struct raftlock_session_options so = {.ttl_ms = h->ttl_ms,
					      .on_lock_event = on_lock_event,
					      .bind_to_connection = h->bind,
					      .bind_grace_ms = h->bind_grace_ms};
	cli_fault_init();
	if (guard_start(&g) != CLI_EXIT_OK)
		return CLI_EXIT_ERROR;
	if (raftlock_session_open(c, &so, &s) != 0) {
		guard_stop(&g);
		fprintf(stderr, "raftlock: %s\n", raftlock_errmsg(c));
		return CLI_EXIT_ERROR;
	}
	int code = CLI_EXIT_ERROR;
	bool held = false; /* granted and held: the close may leave it held */
	if (held_new(s, h, &x) != 0) {
		guard_stop(&g);
		fprintf(stderr, "raftlock: %s\n", raftlock_errmsg(c));
		goto close_session;
	}
	pthread_mutex_lock(&g.mu);
	g.s = s;
	pthread_mutex_unlock(&g.mu);
	int rv = held_acquire(&x, h);
	if (guard_stop(&g)) {
		free(x.names);         /* the handles went with s */
		return 128 + g.signal; /* left the queue; s is gone */
	}
	if (g.signal != 0) {
		code = 128 + g.signal; /* came as the lock was granted */
		if (rv == 0)
			held_release(&x);
		goto close_session;
	}
	code = hold_exit_code(c, h, rv);
	held = rv == 0; /* not code: -E 0 makes a busy lock exit 0 too */
	if (held) {
		code = h->argv != NULL ? hold_run_child(s, h, &x) : hold_until_signal(s, h, &x);
		code = hold_release(c, s, h, &x, code);
	}
close_session:
	held_free(&x);
	uint64_t id = raftlock_session_id(s);
	int closed = raftlock_session_close(s);
	if (held && closed != 0 && closed != RAFTLOCK_ESESSION) {
		/* The session, and what it may still hold, lasts until its TTL. */
		fprintf(stderr, "raftlock: closing session %" PRIu64 ": %s\n", id,
			raftlock_strerror(closed));
		if (code == CLI_EXIT_OK && !hold_passes_status(h))
			code = CLI_EXIT_ERROR;
	}
	return code;
}
