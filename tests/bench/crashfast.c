/*
 * crashfast: how long after `kill -9` of a lock holder the next waiter is
 * granted (issue 14 item 5), for holders in bound sessions (crash-fast
 * release, the grace bind_grace_ms) and in plain sessions (their TTL).
 *
 * Each trial forks a holder process (a client of its own, a session, the
 * lock taken), queues this process's waiter behind it (an asynchronous
 * acquire: the grant is pushed), kills the holder with SIGKILL and times
 * from the kill to the grant's callback. Trials run one after another, a
 * bounded number. Prints one JSON object: the mode, the grace or TTL, and
 * the latency percentiles in ms.
 *
 * usage: crashfast --addresses A,B,C [--trials N] [--bound | --ttl MS]
 *                  [--grace MS]
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "raftlock.h"

#define MAX_ADDRS 8

struct opts {
	const char *addrs[MAX_ADDRS];
	size_t n_addrs;
	unsigned trials, ttl_ms, grace_ms;
	bool bound;
};

static uint64_t mono_us(void) /* microseconds */
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static raftlock_client *client_open(const struct opts *o)
{
	struct raftlock_client_options co = {.addresses = o->addrs, .n_addresses = o->n_addrs};
	raftlock_client *c = NULL;
	const char *err = NULL;
	if (raftlock_client_open(&co, &c, &err) != 0) {
		fprintf(stderr, "crashfast: client: %s\n", err ? err : "?");
		exit(1);
	}
	return c;
}

/* The holder: takes name, reports through fd, then only waits to die. */
static void holder_main(const struct opts *o, const char *name, int fd)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	raftlock_client *c = client_open(o);
	struct raftlock_session_options so = {
		.ttl_ms = o->ttl_ms, .bind_to_connection = o->bound, .bind_grace_ms = o->grace_ms};
	raftlock_session *s = NULL;
	raftlock_lock *l = NULL;
	uint64_t token = 0;
	if (raftlock_session_open(c, &so, &s) != 0 || raftlock_lock_new(s, name, NULL, &l) != 0 ||
	    raftlock_lock_try(l, &token) != 0) {
		fprintf(stderr, "crashfast: holder: %s\n", raftlock_errmsg(c));
		_exit(1);
	}
	if (write(fd, &token, sizeof token) != sizeof token)
		_exit(1);
	for (;;)
		pause();
}

struct grant {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool done;
	int status;
	uint64_t at_us;
};

static void granted(raftlock_lock *l, int status, uint64_t token, void *arg)
{
	(void)l;
	(void)token;
	struct grant *g = arg;
	uint64_t now = mono_us();
	pthread_mutex_lock(&g->mu);
	g->done = true;
	g->status = status;
	g->at_us = now;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->mu);
}

/* Waits until name has a waiter (a linearizable read, every 2 ms). */
static int await_waiter(raftlock_client *c, const char *name)
{
	for (int i = 0; i < 5000; i++) {
		struct raftlock_lock_info *info = NULL;
		if (raftlock_lock_get(c, name, false, &info) == 0) {
			size_t n = info->n_waiters;
			raftlock_lock_info_free(info);
			if (n == 1)
				return 0;
		}
		usleep(2000);
	}
	return -1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double pct(const uint64_t *v, size_t n, double p)
{
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);
	return (double)v[i] / 1000.0;
}

static void usage(void)
{
	fprintf(stderr, "usage: crashfast --addresses A,B,C [--trials N] [--bound | --ttl MS] "
			"[--grace MS]\n");
	exit(2);
}

static void parse(int argc, char **argv, struct opts *o)
{
	static char addrs[1024];
	*o = (struct opts){.trials = 1000, .ttl_ms = 3000};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--bound") == 0) {
			o->bound = true;
		} else if (v == NULL) {
			usage();
		} else if (strcmp(a, "--addresses") == 0) {
			snprintf(addrs, sizeof addrs, "%s", v);
			for (char *p = strtok(addrs, ","); p && o->n_addrs < MAX_ADDRS;
			     p = strtok(NULL, ","))
				o->addrs[o->n_addrs++] = p;
			i++;
		} else if (strcmp(a, "--trials") == 0) {
			o->trials = (unsigned)strtoul(v, NULL, 10);
			i++;
		} else if (strcmp(a, "--ttl") == 0) {
			o->ttl_ms = (unsigned)strtoul(v, NULL, 10);
			i++;
		} else if (strcmp(a, "--grace") == 0) {
			o->grace_ms = (unsigned)strtoul(v, NULL, 10);
			i++;
		} else {
			usage();
		}
	}
	if (o->n_addrs == 0 || o->trials == 0 || o->trials > 100000)
		usage();
}

int main(int argc, char **argv)
{
	struct opts o;
	parse(argc, argv, &o);
	raftlock_client *c = client_open(&o);
	struct raftlock_session_options so = {.ttl_ms = 10000};
	raftlock_session *s = NULL;
	if (raftlock_session_open(c, &so, &s) != 0) {
		fprintf(stderr, "crashfast: %s\n", raftlock_errmsg(c));
		return 1;
	}
	uint64_t *lat = calloc(o.trials, sizeof *lat);
	if (lat == NULL)
		return 1;
	size_t n = 0;
	unsigned failed = 0;
	for (unsigned t = 0; t < o.trials; t++) {
		char name[64];
		snprintf(name, sizeof name, "crashfast/%u", t);
		int fds[2];
		if (pipe(fds) != 0)
			return 1;
		fflush(NULL);
		pid_t holder = fork();
		if (holder == 0)
			holder_main(&o, name, fds[1]);
		close(fds[1]);
		uint64_t token = 0;
		bool ok = read(fds[0], &token, sizeof token) == sizeof token;
		close(fds[0]);
		raftlock_lock *l = NULL;
		struct grant g = {.mu = PTHREAD_MUTEX_INITIALIZER,
				  .cond = PTHREAD_COND_INITIALIZER};
		ok = ok && raftlock_lock_new(s, name, NULL, &l) == 0 &&
		     raftlock_lock_acquire_async(l, RAFTLOCK_EXCLUSIVE, 1, 60000, granted, &g) ==
			     0 &&
		     await_waiter(c, name) == 0;
		uint64_t killed = mono_us();
		kill(holder, SIGKILL);
		waitpid(holder, NULL, 0);
		if (ok) {
			pthread_mutex_lock(&g.mu);
			while (!g.done)
				pthread_cond_wait(&g.cond, &g.mu);
			pthread_mutex_unlock(&g.mu);
			if (g.status == 0)
				lat[n++] = g.at_us - killed;
			else
				failed++;
			raftlock_lock_release(l, NULL);
		} else {
			failed++;
		}
		raftlock_lock_free(l);
	}
	qsort(lat, n, sizeof *lat, cmp_u64);
	printf("{\"mode\": \"%s\", \"grace_ms\": %u, \"ttl_ms\": %u, \"trials\": %u, "
	       "\"granted\": %zu, \"failed\": %u",
	       o.bound ? "bound" : "ttl",
	       o.bound ? (o.grace_ms ? o.grace_ms : RAFTLOCK_BIND_GRACE_DEFAULT_MS) : 0, o.ttl_ms,
	       o.trials, n, failed);
	if (n > 0)
		printf(", \"p50_ms\": %.1f, \"p99_ms\": %.1f, \"max_ms\": %.1f, \"min_ms\": %.1f",
		       pct(lat, n, 0.50), pct(lat, n, 0.99), (double)lat[n - 1] / 1000.0,
		       (double)lat[0] / 1000.0);
	printf("}\n");
	free(lat);
	raftlock_session_close(s);
	raftlock_client_close(c);
	return failed == 0 ? 0 : 1;
}
