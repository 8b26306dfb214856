/*
 * rlbench: drives a raftlock cluster through libraftlock and prints one JSON
 * line in the format shared with etcdbench and redisbench.
 *
 * Lock workloads: one session and one lock handle per client, one thread per
 * client (the client API is blocking; all threads share one raftlock_client,
 * or --conns of them, and so one connection each, whose requests the library
 * pipelines).
 *   uncontended  client i try-locks its own name, then releases
 *   contended    every client acquires one name, waiting in the server queue
 *   rwlock       one read-write lock, 90% shared acquires, 10% exclusive
 *   semaphore    one semaphore of 4 permits, one permit per acquire
 * A feature the server refuses is reported with status "unsupported".
 *
 * `--workload ready` prints nothing: it waits up to --window seconds for a
 * ready leader (exit 0) and is how scripts wait for a cluster.
 */
#include "rlbench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"
#include "stats.h"

#define RLBENCH_WAIT_MS 5000

enum rl_workload { RL_UNCONTENDED, RL_CONTENDED, RL_RWLOCK, RL_SEMAPHORE };

struct rl_client {
	raftlock_client *client; /* one of the run's client objects */
	raftlock_session *session;
	raftlock_lock *lock;
	unsigned seed;
	/* asynchronous mode: the pair in flight */
	struct rl_locks *locks;
	unsigned index;
	bool in_window;
	double t0, acquire_ms;
};

struct rl_locks {
	struct rlbench *b;
	enum rl_workload w;
	struct rl_client *clients;
	uint64_t index0, index1; /* the cluster's commit index around the window */
};

struct raftlock_client_options rlbench_client_options(const struct rlbench *b, const char *name)
{
	return (struct raftlock_client_options){
		.addresses = b->addresses,
		.n_addresses = b->n_addresses,
		.client_name = name,
		.tls_ca_file = b->o->cacert,
		.tls_cert_file = b->o->cert,
		.tls_key_file = b->o->key,
		.tls_server_name = b->o->server_name,
	};
}

uint64_t rlbench_commit_index(struct rlbench *b)
{
	uint64_t best = 0;
	for (size_t i = 0; i < b->n_addresses; i++) {
		struct raftlock_status *st = NULL;
		if (raftlock_status_get(b->client, b->addresses[i], &st) != 0)
			continue;
		if (st->commit_index > best)
			best = st->commit_index;
		raftlock_status_free(st);
	}
	return best;
}

static void rl_window_hook(void *arg, bool end)
{
	struct rl_locks *l = arg;
	if (end)
		l->index1 = rlbench_commit_index(l->b);
	else
		l->index0 = rlbench_commit_index(l->b);
}

int rlbench_leader_pid(struct rlbench *b)
{
	struct raftlock_status *st = NULL;
	int pid = 0;
	if (raftlock_status_get(b->client, NULL, &st) != 0)
		return 0;
	uint64_t id = st->leader_id;
	if (st->role != NULL && strcmp(st->role, "leader") == 0)
		id = st->node_id;
	if (id >= 1 && id <= b->o->n_pids)
		pid = b->o->pids[id - 1];
	raftlock_status_free(st);
	return pid;
}

/* Errors that say the server does not have the feature, rather than that
 * one request failed. */
static int rl_refused(int rv)
{
	return rv == RAFTLOCK_EPROTO || rv == RAFTLOCK_EINVAL || rv == RAFTLOCK_EINTERNAL ||
	       rv == RAFTLOCK_EKIND;
}

static int rl_pair(void *arg, unsigned client, double *acquire_ms, char *err, size_t errlen)
{
	struct rl_locks *l = arg;
	struct rl_client *c = &l->clients[client];
	enum raftlock_mode mode = RAFTLOCK_EXCLUSIVE;
	if (l->w == RL_RWLOCK && rand_r(&c->seed) % 10 != 0)
		mode = RAFTLOCK_SHARED;
	double t0 = stats_now();
	int rv;
	if (l->w == RL_UNCONTENDED)
		rv = raftlock_lock_try(c->lock, NULL);
	else
		rv = raftlock_lock_acquire(c->lock, mode, 1, RLBENCH_WAIT_MS, NULL);
	if (rv != 0) {
		snprintf(err, errlen, "acquire: %s", raftlock_errmsg(c->client));
		if (driver_stopping() && rv == RAFTLOCK_ETIMEDOUT)
			return DRIVER_ABANDONED;
		if (rl_refused(rv))
			return DRIVER_UNSUPPORTED;
		return rv;
	}
	*acquire_ms = (stats_now() - t0) * 1e3;
	rv = raftlock_lock_release(c->lock, NULL);
	if (rv != 0) {
		snprintf(err, errlen, "release: %s", raftlock_errmsg(c->client));
		return rv;
	}
	return 0;
}

/* Asynchronous uncontended pairs: each client is a chain of callbacks on
 * its client object's I/O thread (try-lock, then release, then the next
 * pair), so 64 clients need no thread of their own. */
static void rl_async_acquired(raftlock_lock *lock, int status, uint64_t token, void *arg);

static int rl_async_start(void *arg, unsigned client)
{
	struct rl_locks *l = arg;
	struct rl_client *c = &l->clients[client];
	c->in_window = driver_in_window();
	c->t0 = stats_now();
	return raftlock_lock_try_async(c->lock, rl_async_acquired, c);
}

/* The pair ended with status: counts it and starts the next one. */
static void rl_async_next(struct rl_client *c, int status, const char *what)
{
	char err[200] = "";
	for (;;) {
		if (status != 0)
			snprintf(err, sizeof err, "%s: %s", what, raftlock_strerror(status));
		if (!driver_pair_done(c->index, c->in_window, status, c->acquire_ms, err))
			return;
		status = rl_async_start(c->locks, c->index);
		if (status == 0)
			return;
		what = "acquire";
		struct timespec ts = {0, 10 * 1000000L}; /* as the threads back off */
		nanosleep(&ts, NULL);
	}
}

static void rl_async_released(raftlock_lock *lock, int status, uint64_t left, void *arg)
{
	(void)lock;
	(void)left;
	rl_async_next(arg, status, "release");
}

static void rl_async_acquired(raftlock_lock *lock, int status, uint64_t token, void *arg)
{
	struct rl_client *c = arg;
	(void)token;
	if (status == 0) {
		c->acquire_ms = (stats_now() - c->t0) * 1e3;
		status = raftlock_lock_release_async(lock, rl_async_released, c);
		if (status == 0)
			return;
		rl_async_next(c, status, "release");
		return;
	}
	rl_async_next(c, status, "acquire");
}

static int rl_lock_workload(struct rlbench *b, enum rl_workload w)
{
	struct options *o = b->o;
	struct stats_result res = {
		.system = "raftlock", .workload = o->workload, .clients = o->clients};
	struct rl_locks l = {.b = b, .w = w};
	struct raftlock_lock_options lo = {.kind = RAFTLOCK_MUTEX};
	if (w == RL_RWLOCK)
		lo.kind = RAFTLOCK_RWLOCK;
	if (w == RL_SEMAPHORE) {
		lo.kind = RAFTLOCK_SEMAPHORE;
		lo.limit = 4;
	}
	int rv = 1;
	l.clients = calloc(o->clients, sizeof *l.clients);
	if (l.clients == NULL)
		return 1;
	for (unsigned i = 0; i < o->clients; i++) {
		struct rl_client *c = &l.clients[i];
		struct raftlock_session_options so = {.ttl_ms = o->ttl_ms};
		char name[128];
		c->client = b->conns[i % b->n_conns];
		int e = raftlock_session_open(c->client, &so, &c->session);
		if (e != 0) {
			fprintf(stderr, "rlbench: session open: %s\n", raftlock_errmsg(c->client));
			res.status = "failed";
			res.detail = raftlock_errmsg(c->client);
			goto out;
		}
		if (w == RL_UNCONTENDED)
			snprintf(name, sizeof name, "%s/u/%u", b->run, i);
		else
			snprintf(name, sizeof name, "%s/%s", b->run, o->workload);
		if (raftlock_lock_new(c->session, name, &lo, &c->lock) != 0) {
			fprintf(stderr, "rlbench: lock new: %s\n", raftlock_errmsg(c->client));
			goto out;
		}
		c->seed = i * 2654435761u + 1;
		c->locks = &l;
		c->index = i;
	}
	struct driver_config cfg = {.clients = o->clients,
				    .warmup_s = o->warmup_s,
				    .window_s = o->window_s,
				    .pids = o->pids,
				    .n_pids = o->n_pids,
				    .cdf_out = o->cdf_out,
				    .window_hook = rl_window_hook,
				    .hook_arg = &l};
	char extra[200];
	bool async = w == RL_UNCONTENDED && strcmp(o->mode, "async") == 0;
	if (w == RL_UNCONTENDED && !async)
		res.system = "raftlock-threads"; /* a row of its own in the report */
	if ((async ? driver_run_async(&cfg, rl_async_start, &l, &res)
		   : driver_run(&cfg, rl_pair, &l, &res)) == 0)
		rv = 0;
	/* Two client commands per pair (acquire, release) over the raft
	 * entries committed meanwhile: how much batching shares one entry.
	 * Keepalive RENEW entries count too, so this is a lower bound. */
	if (l.index1 > l.index0 && l.index0 != 0) {
		double pairs = res.pairs_per_s * res.window_s;
		snprintf(extra, sizeof extra,
			 ",\"mode\":\"%s\",\"raft_entries_per_s\":%.1f,\"commands_per_entry\":%.2f",
			 async ? "async" : "threads", (double)(l.index1 - l.index0) / res.window_s,
			 2 * pairs / (double)(l.index1 - l.index0));
		res.extra = extra;
	}
out:
	if (res.status == NULL)
		res.status = "failed";
	stats_print(stdout, &res);
	for (unsigned i = 0; i < o->clients; i++) {
		raftlock_lock_free(l.clients[i].lock);
		raftlock_session_close(l.clients[i].session);
	}
	free(l.clients);
	return rv;
}

static int rl_wait_ready(struct rlbench *b)
{
	double end = stats_now() + b->o->window_s;
	while (stats_now() < end) {
		for (size_t i = 0; i < b->n_addresses; i++) {
			struct raftlock_status *st = NULL;
			if (raftlock_status_get(b->client, b->addresses[i], &st) != 0)
				continue;
			int ok = st->ready && st->role && strcmp(st->role, "leader") == 0;
			raftlock_status_free(st);
			if (ok)
				return 0;
		}
		struct timespec ts = {0, 50 * 1000000L};
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "rlbench: no ready leader after %.0f s\n", b->o->window_s);
	return 1;
}

/* Splits "a,b,c" into a NULL-free array of strings (one allocation). */
static const char **rl_split(const char *list, size_t *n)
{
	size_t count = 1, len = strlen(list);
	for (const char *p = list; *p; p++)
		count += *p == ',';
	const char **v = malloc(count * sizeof *v + len + 1);
	if (v == NULL)
		return NULL;
	char *s = (char *)(v + count);
	memcpy(s, list, len + 1);
	*n = 0;
	for (char *tok = strtok(s, ","); tok != NULL; tok = strtok(NULL, ","))
		v[(*n)++] = tok;
	return v;
}

int main(int argc, char **argv)
{
	struct options o;
	int prv = options_parse(&o, argc, argv, "rlbench",
				"uncontended | contended | rwlock | semaphore | sessions | state | "
				"park | hostile | "
				"logmem | ready");
	if (prv != 0)
		return prv > 0 ? 0 : 2;
	struct rlbench b = {.o = &o};
	snprintf(b.run, sizeof b.run, "bench/%ld-%d", (long)time(NULL), (int)getpid());
	b.addresses = rl_split(o.addresses, &b.n_addresses);
	if (b.addresses == NULL || b.n_addresses == 0)
		return 2;
	struct raftlock_client_options co = rlbench_client_options(&b, "rlbench");
	const char *msg = NULL;
	int rv = 1;
	for (; b.n_conns < o.conns; b.n_conns++)
		if (raftlock_client_open(&co, &b.conns[b.n_conns], &msg) != 0) {
			fprintf(stderr, "rlbench: %s\n", msg ? msg : "cannot open the client");
			goto out;
		}
	b.client = b.conns[0];
	if (strcmp(o.workload, "uncontended") == 0)
		rv = rl_lock_workload(&b, RL_UNCONTENDED);
	else if (strcmp(o.workload, "contended") == 0)
		rv = rl_lock_workload(&b, RL_CONTENDED);
	else if (strcmp(o.workload, "rwlock") == 0)
		rv = rl_lock_workload(&b, RL_RWLOCK);
	else if (strcmp(o.workload, "semaphore") == 0)
		rv = rl_lock_workload(&b, RL_SEMAPHORE);
	else if (strcmp(o.workload, "sessions") == 0)
		rv = scale_sessions(&b);
	else if (strcmp(o.workload, "state") == 0)
		rv = scale_state(&b);
	else if (strcmp(o.workload, "park") == 0)
		rv = scale_park(&b);
	else if (strcmp(o.workload, "hostile") == 0)
		rv = scale_hostile(&b);
	else if (strcmp(o.workload, "logmem") == 0)
		rv = scale_logmem(&b);
	else if (strcmp(o.workload, "ready") == 0)
		rv = rl_wait_ready(&b);
	else {
		fprintf(stderr, "rlbench: unknown workload %s\n", o.workload);
		rv = 2;
	}
out:
	for (unsigned i = 0; i < b.n_conns; i++)
		raftlock_client_close(b.conns[i]);
	free(b.addresses);
	return rv;
}
