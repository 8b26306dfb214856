/* revoke: taking a lock away. A holder whose session listens for lock
 * events is asked to release (a cooperative revoke, as an admin would
 * with `raftlock revoke NAME --grace MS`) and lets go from its callback;
 * a lock with a maximum hold time is revoked by the cluster itself; and a
 * holder in a session bound to its connection (crash-fast release) that
 * dies is replaced within the bind grace, not after a TTL.
 * Usage: revoke [PREFIX] */
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "example_common.h"

struct holder {
	raftlock_lock *lock; /* set before anything can happen to it */
	atomic_int revoked;
};

static void on_released(raftlock_lock *l, int status, uint64_t left, void *arg)
{
	(void)l;
	(void)left;
	(void)arg;
	printf("released: %s\n", raftlock_strerror(status));
	fflush(stdout);
}

/* The I/O thread: no blocking call here; an asynchronous release is fine. */
static void on_lock_event(raftlock_session *s, enum raftlock_lock_event ev, const char *name,
			  uint64_t token, void *arg)
{
	(void)s;
	struct holder *h = arg;
	if (ev == RAFTLOCK_LOCK_RELEASE_REQUESTED) {
		printf("asked to release %s (token %llu)\n", name, (unsigned long long)token);
		if (raftlock_lock_release_async(h->lock, on_released, NULL) != 0)
			printf("release not sent\n");
	} else {
		printf("%s (token %llu) was revoked\n", name, (unsigned long long)token);
		atomic_store(&h->revoked, 1);
	}
	fflush(stdout);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Takes name through a fresh session with events (and options o). */
static raftlock_session *hold(raftlock_client *c, struct holder *h, const char *name,
			      const struct raftlock_lock_options *o)
{
	struct raftlock_session_options so = {
		.ttl_ms = 3000, .on_lock_event = on_lock_event, .on_lock_event_arg = h};
	raftlock_session *s = NULL;
	uint64_t token;
	if (raftlock_session_open(c, &so, &s) != 0 || raftlock_lock_new(s, name, o, &h->lock) != 0)
		example_die(c, "session", 0);
	if (raftlock_lock_try(h->lock, &token) != 0)
		example_die(c, "try-lock", 0);
	printf("holding %s, token %llu\n", name, (unsigned long long)token);
	fflush(stdout);
	return s;
}

int main(int argc, char **argv)
{
	const char *prefix = argc > 1 ? argv[1] : "examples/revoke/";
	char coop[300], held[300], crash[300];
	snprintf(coop, sizeof coop, "%scoop", prefix);
	snprintf(held, sizeof held, "%smax-hold", prefix);
	snprintf(crash, sizeof crash, "%scrash", prefix);
	raftlock_client *c = example_connect("example-revoke");

	/* 1. Cooperative: asked first (the holder lets go), revoked only
	 * after the grace otherwise. */
	struct holder h1 = {0};
	raftlock_session *s1 = hold(c, &h1, coop, NULL);
	uint32_t n = 0;
	if (raftlock_revoke(c, coop, 0, 2000, &n) != 0)
		example_die(c, "revoke", 0);
	for (int i = 0; i < 300 && raftlock_lock_token(h1.lock) != 0; i++)
		usleep(10000);
	printf("cooperative revoke: %s\n",
	       raftlock_lock_token(h1.lock) == 0 && !atomic_load(&h1.revoked) ? "released in time"
									      : "NOT released");

	/* 2. A maximum hold time of 500 ms: the cluster revokes the grant. */
	struct holder h2 = {0};
	struct raftlock_lock_options o = {.max_hold_ms = 500};
	raftlock_session *s2 = hold(c, &h2, held, &o);
	for (int i = 0; i < 500 && !atomic_load(&h2.revoked); i++)
		usleep(10000);
	printf("max hold: %s\n", atomic_load(&h2.revoked) ? "revoked" : "NOT revoked");

	/* 3. Crash-fast release: a bound holder dies; we wait for the lock. */
	int fds[2];
	if (pipe(fds) != 0)
		return 1;
	fflush(NULL);
	pid_t child = fork();
	if (child == 0) {
		raftlock_client *cc = example_connect("example-revoke-holder");
		struct raftlock_session_options bo = {.ttl_ms = 10000, .bind_to_connection = true};
		raftlock_session *bs = NULL;
		raftlock_lock *bl = NULL;
		if (raftlock_session_open(cc, &bo, &bs) != 0 ||
		    raftlock_lock_new(bs, crash, NULL, &bl) != 0 ||
		    raftlock_lock_try(bl, NULL) != 0)
			_exit(1);
		if (write(fds[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char x;
	if (read(fds[0], &x, 1) != 1)
		example_die(NULL, "the holder did not take the lock", RAFTLOCK_EINTERNAL);
	raftlock_lock *l3 = NULL;
	if (raftlock_lock_new(s2, crash, NULL, &l3) != 0)
		example_die(c, "lock handle", 0);
	uint64_t died = now_ms();
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	int rv = raftlock_lock_acquire(l3, RAFTLOCK_EXCLUSIVE, 1, 20000, NULL);
	if (rv != 0)
		example_die(c, "acquire", rv);
	uint64_t took = now_ms() - died;
	printf("crash-fast: granted %llu ms after the bound holder died (%s the 10 s TTL)\n",
	       (unsigned long long)took, took < 5000 ? "well within" : "NOT within");
	raftlock_lock_release(l3, NULL);
	raftlock_session_close(s1);
	raftlock_session_close(s2);
	raftlock_client_close(c);
	return 0;
}
