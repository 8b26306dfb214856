/*
 * The scale workloads of rlbench.
 *
 * sessions: opens --count idle sessions (TTL --ttl-ms) spread over --clients
 *   client objects (as many processes would hold them) and keeps them alive
 *   through the library's keepalives (a round per client every TTL/3, in
 *   requests of up to 8192 sessions) for --window seconds. Reports leader
 *   and cluster CPU, keepalive latency, lost sessions, server and client
 *   memory. Keepalive latency is read from the outside: the library moves a
 *   session's valid_until when a keepalive is acknowledged, to the
 *   keepalive's send time plus TTL minus the margin, so polling one session
 *   per client gives (time the change is seen) - (send time) for each
 *   keepalive request.
 * state: takes --count locks (held, about 1000 per session, from --clients
 *   threads), then reports
 *   the servers' RSS and LMDB size, and times, through the runner's shell
 *   commands, a new member catching up, a cold restart of the whole cluster
 *   on the trusted-LMDB path, and a restart that rebuilds LMDB.
 */
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rlbench.h"
#include "stats.h"

#define SCALE_THREADS_MAX 64
#define SCALE_FILL_DEADLINE_S 900
#define SCALE_READY_DEADLINE_S 120
#define SCALE_CATCHUP_DEADLINE_S 60
#define STATE_LOCKS_PER_SESSION 1000
#define STATE_SESSIONS_MAX 4096
#define SCALE_CLIENTS_MAX 64

static void scale_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------ sessions -- */

struct sessions_job {
	struct rlbench *b;
	raftlock_client **clients; /* session i lives on clients[i % n_clients] */
	unsigned n_clients;
	raftlock_session **sessions;
	unsigned long count;
	atomic_ulong next;
	atomic_ulong opened, failed;
	double deadline;
	int closing;
};

static void *sessions_worker(void *p)
{
	struct sessions_job *j = p;
	struct raftlock_session_options so = {.ttl_ms = j->b->o->ttl_ms};
	for (;;) {
		unsigned long i = atomic_fetch_add(&j->next, 1);
		if (i >= j->count)
			break;
		if (j->closing) {
			raftlock_session_close(j->sessions[i]);
			j->sessions[i] = NULL;
			continue;
		}
		if (stats_now() > j->deadline)
			break;
		raftlock_client *c = j->clients[i % j->n_clients];
		if (raftlock_session_open(c, &so, &j->sessions[i]) == 0) {
			atomic_fetch_add(&j->opened, 1);
		} else {
			atomic_fetch_add(&j->failed, 1);
			j->sessions[i] = NULL;
		}
	}
	return NULL;
}

/* Runs sessions_worker on up to SCALE_THREADS_MAX threads over the job. */
static void sessions_parallel(struct sessions_job *j)
{
	pthread_t th[SCALE_THREADS_MAX];
	unsigned n = j->count < SCALE_THREADS_MAX ? (unsigned)j->count : SCALE_THREADS_MAX, k;
	atomic_store(&j->next, 0);
	for (k = 0; k < n; k++)
		if (pthread_create(&th[k], NULL, sessions_worker, j) != 0)
			break;
	if (k == 0)
		sessions_worker(j);
	for (unsigned i = 0; i < k; i++)
		pthread_join(th[i], NULL);
}

int scale_sessions(struct rlbench *b)
{
	struct options *o = b->o;
	struct sessions_job j = {.b = b, .count = o->count ? o->count : 10000};
	struct stats_result res = {.system = "raftlock",
				   .workload = "sessions",
				   .clients = (unsigned)j.count,
				   .status = "ok"};
	char extra[640], detail[256];
	int rv = 1;
	j.n_clients = o->clients < SCALE_CLIENTS_MAX ? o->clients : SCALE_CLIENTS_MAX;
	if (j.n_clients > j.count)
		j.n_clients = (unsigned)j.count;
	j.sessions = calloc(j.count, sizeof *j.sessions);
	j.clients = calloc(j.n_clients, sizeof *j.clients);
	if (j.sessions == NULL || j.clients == NULL)
		goto out;
	struct raftlock_client_options co = rlbench_client_options(b, "rlbench-sessions");
	for (unsigned k = 0; k < j.n_clients; k++) {
		const char *msg = NULL;
		if (raftlock_client_open(&co, &j.clients[k], &msg) != 0) {
			fprintf(stderr, "rlbench: %s\n", msg ? msg : "cannot open a client");
			goto out;
		}
	}
	j.deadline = stats_now() + 600;
	double t_open = stats_now();
	sessions_parallel(&j);
	t_open = stats_now() - t_open;
	if (atomic_load(&j.failed) > 0) {
		snprintf(detail, sizeof detail, "%lu session opens failed, last: %s",
			 (unsigned long)atomic_load(&j.failed), raftlock_errmsg(j.clients[0]));
		res.detail = detail;
	}

	scale_sleep_ms((long)(o->warmup_s * 1000));
	int leader = rlbench_leader_pid(b);
	double l0 = leader ? stats_proc_cpu(&leader, 1) : 0;
	double c0 = stats_proc_cpu(o->pids, o->n_pids);

	/* Sample: one open session per client, since a client renews all its
	 * sessions at once (in one request up to 8192 of them). */
	raftlock_session *sample[SCALE_CLIENTS_MAX];
	uint64_t last[SCALE_CLIENTS_MAX];
	unsigned long acks[SCALE_CLIENTS_MAX] = {0}, per_client[SCALE_CLIENTS_MAX] = {0};
	size_t ns = 0;
	for (size_t i = 0; i < j.count; i++)
		if (j.sessions[i] != NULL)
			per_client[i % j.n_clients]++;
	for (unsigned k = 0; k < j.n_clients; k++)
		for (size_t i = k; i < j.count; i += j.n_clients)
			if (j.sessions[i] != NULL) {
				sample[ns] = j.sessions[i];
				per_client[ns] = per_client[k];
				last[ns++] = raftlock_session_valid_until(j.sessions[i]);
				break;
			}
	double margin =
		(double)o->ttl_ms * RAFTLOCK_CLOCK_RATE_PPM / 1e6 + RAFTLOCK_LEASE_MARGIN_MS;
	struct stats_samples lat = {0};
	double t0 = stats_now(), end = t0 + o->window_s;
	while (stats_now() < end) {
		uint64_t now = raftlock_now_ms();
		for (size_t i = 0; i < ns; i++) {
			uint64_t vu = raftlock_session_valid_until(sample[i]);
			if (vu != last[i] && vu != 0) {
				double sent = (double)vu - o->ttl_ms + margin;
				stats_samples_add(&lat, (double)now - sent);
				acks[i]++;
			}
			last[i] = vu;
		}
		scale_sleep_ms(1);
	}
	double elapsed = stats_now() - t0;
	double l1 = leader ? stats_proc_cpu(&leader, 1) : 0;
	double c1 = stats_proc_cpu(o->pids, o->n_pids);
	unsigned long lost = 0;
	for (size_t i = 0; i < j.count; i++)
		if (j.sessions[i] != NULL && !raftlock_session_valid(j.sessions[i]))
			lost++;

	struct stats_samples *parts[1] = {&lat};
	size_t n = 0;
	float *all = stats_merge_sorted(parts, 1, &n);
	double acks_per_s = 0;
	for (size_t i = 0; i < ns; i++)
		acks_per_s += (double)acks[i] * (double)per_client[i] / elapsed;
	res.pairs_per_s = acks_per_s;
	res.p50_ms = stats_quantile(all, n, 0.5);
	res.p99_ms = stats_quantile(all, n, 0.99);
	res.max_ms = n ? all[n - 1] : 0;
	res.errors = lost + atomic_load(&j.failed);
	res.server_cpu_s_per_1k = acks_per_s > 0 ? (c1 - c0) / (acks_per_s * elapsed) * 1000 : 0;
	res.window_s = elapsed;
	if (o->cdf_out != NULL && n > 0)
		stats_write_cdf(o->cdf_out, all, n);
	snprintf(extra, sizeof extra,
		 ",\"sessions_open\":%lu,\"open_s\":%.2f,\"ttl_ms\":%u,"
		 "\"leader_cpu_cores\":%.3f,\"cluster_cpu_cores\":%.3f,"
		 "\"leader_rss_mib\":%.1f,\"client_rss_mib\":%.1f,\"lost\":%lu,"
		 "\"keepalive_samples\":%zu,\"client_objects\":%u",
		 (unsigned long)atomic_load(&j.opened), t_open, o->ttl_ms,
		 leader ? (l1 - l0) / elapsed : -1.0, (c1 - c0) / elapsed,
		 leader ? (double)stats_proc_rss_kib(leader) / 1024 : -1.0,
		 (double)stats_proc_rss_kib(getpid()) / 1024, lost, n, j.n_clients);
	res.extra = extra;
	if (atomic_load(&j.opened) == 0)
		res.status = "failed";
	stats_print(stdout, &res);
	free(all);
	stats_samples_free(&lat);
	rv = atomic_load(&j.opened) ? 0 : 1;

	j.closing = 1;
	sessions_parallel(&j);
out:
	for (unsigned k = 0; j.clients != NULL && k < j.n_clients; k++)
		raftlock_client_close(j.clients[k]);
	free(j.clients);
	free(j.sessions);
	return rv;
}

/* --------------------------------------------------------------- state -- */

struct state_job {
	struct rlbench *b;
	unsigned threads;
	unsigned long count;
	raftlock_session **sessions; /* lock i is held by sessions[i % n] */
	unsigned n_sessions;
	atomic_ulong next, held, failed;
	double deadline;
};

static void *state_worker(void *p)
{
	struct state_job *j = p;
	char name[160];
	for (;;) {
		unsigned long i = atomic_fetch_add(&j->next, 1);
		if (i >= j->count || stats_now() > j->deadline)
			break;
		raftlock_session *s = j->sessions[i % j->n_sessions];
		raftlock_lock *l;
		snprintf(name, sizeof name, "%s/state/%08lu", j->b->run, i);
		if (raftlock_lock_new(s, name, NULL, &l) != 0) {
			atomic_fetch_add(&j->failed, 1);
			continue;
		}
		/* The handle goes; the grant stays until the session ends. */
		if (raftlock_lock_try(l, NULL) == 0)
			atomic_fetch_add(&j->held, 1);
		else
			atomic_fetch_add(&j->failed, 1);
		raftlock_lock_free(l);
	}
	return NULL;
}

static double state_mdb_bytes;

static int state_mdb_visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	size_t len = strlen(path);
	if (flag == FTW_F && len > 4 && strcmp(path + len - 4, ".mdb") == 0)
		state_mdb_bytes += (double)st->st_blocks * 512;
	return 0;
}

/* On-disk bytes of the LMDB files under every directory of a list. */
static double state_lmdb_mib(const char *dirs)
{
	if (dirs == NULL)
		return -1;
	char *copy = strdup(dirs), *save = NULL;
	if (copy == NULL)
		return -1;
	state_mdb_bytes = 0;
	for (char *d = strtok_r(copy, ",", &save); d != NULL; d = strtok_r(NULL, ",", &save))
		nftw(d, state_mdb_visit, 16, FTW_PHYS);
	free(copy);
	return state_mdb_bytes / (1 << 20);
}

/* Waits until the node at `address` (NULL: any listed node is the leader,
 * ready) has applied `index`; returns seconds since t0, or -1. If first_s is
 * not NULL it gets the time the node first applied past index 1 (a node
 * started empty has only its bootstrap entry), -1 if it never did. */
static double state_wait_applied(struct rlbench *b, const char *address, uint64_t index, double t0,
				 double limit_s, double *first_s)
{
	double deadline = t0 + limit_s;
	if (first_s != NULL)
		*first_s = -1;
	while (stats_now() < deadline) {
		for (size_t i = 0; i < (address ? 1 : b->n_addresses); i++) {
			struct raftlock_status *st = NULL;
			const char *a = address ? address : b->addresses[i];
			if (raftlock_status_get(b->client, a, &st) != 0)
				continue;
			if (first_s != NULL && *first_s < 0 && st->applied_index > 1)
				*first_s = stats_now() - t0;
			int done = st->applied_index >= index &&
				   (address != NULL ||
				    (st->ready && st->role && strcmp(st->role, "leader") == 0));
			raftlock_status_free(st);
			if (done)
				return stats_now() - t0;
		}
		scale_sleep_ms(20);
	}
	return -1;
}

/* Stops the cluster with stop_cmd and starts it. Times, from the start,
 * until a ready leader has applied everything committed before (*leader_s)
 * and until a linearizable read of a held lock answers (returned). Both are
 * seen through a new client object, as a program starting then would. -1
 * when a step failed. */
static double state_restart(struct rlbench *b, const char *stop_cmd, const char *probe,
			    double *leader_s)
{
	uint64_t index = rlbench_commit_index(b);
	*leader_s = -1;
	if (system(stop_cmd) != 0)
		return -1;
	double t0 = stats_now();
	if (system(b->o->start_cmd) != 0)
		return -1;
	struct raftlock_client_options co = rlbench_client_options(b, "rlbench-restart");
	co.request_timeout_ms = 2000;
	co.connect_timeout_ms = 200;
	struct rlbench fresh = *b;
	const char *msg = NULL;
	if (raftlock_client_open(&co, &fresh.client, &msg) != 0)
		return -1;
	double rv = -1;
	*leader_s = state_wait_applied(&fresh, NULL, index, t0, SCALE_READY_DEADLINE_S, NULL);
	while (*leader_s >= 0 && stats_now() < t0 + SCALE_READY_DEADLINE_S) {
		struct raftlock_lock_info *info = NULL;
		if (raftlock_lock_get(fresh.client, probe, false, &info) == 0) {
			size_t holders = info->n_holders;
			raftlock_lock_info_free(info);
			rv = holders > 0 ? stats_now() - t0 : -1;
			break;
		}
		scale_sleep_ms(20);
	}
	raftlock_client_close(fresh.client);
	return rv;
}

/* Runs the runner's command that adds and starts a new member, then times
 * until that member has applied what the cluster had committed. */
static double state_catchup(struct rlbench *b, double *first_s)
{
	*first_s = -1;
	uint64_t index = rlbench_commit_index(b);
	double t0 = stats_now();
	FILE *p = popen(b->o->catchup_cmd, "r");
	if (p == NULL)
		return -1;
	char addr[128] = "";
	if (fgets(addr, sizeof addr, p) == NULL)
		addr[0] = '\0';
	int rc = pclose(p);
	addr[strcspn(addr, "\r\n")] = '\0';
	if (rc != 0 || addr[0] == '\0')
		return -1;
	return state_wait_applied(b, addr, index, t0, SCALE_CATCHUP_DEADLINE_S, first_s);
}

int scale_state(struct rlbench *b)
{
	struct options *o = b->o;
	struct state_job j = {.b = b, .count = o->count ? o->count : 1000000};
	j.threads = o->clients > 1 ? o->clients : 16;
	if (j.threads > SCALE_THREADS_MAX)
		j.threads = SCALE_THREADS_MAX;
	struct stats_result res = {.system = "raftlock",
				   .workload = "state",
				   .clients = (unsigned)j.count,
				   .status = "ok"};
	char extra[768], detail[128];
	pthread_t th[SCALE_THREADS_MAX];
	unsigned started = 0;
	int rv = 1;
	/* About STATE_LOCKS_PER_SESSION locks per session, as many holders
	 * would have, rather than a few sessions holding huge lists. */
	j.n_sessions =
		(unsigned)((j.count + STATE_LOCKS_PER_SESSION - 1) / STATE_LOCKS_PER_SESSION);
	if (j.n_sessions < j.threads)
		j.n_sessions = j.threads;
	if (j.n_sessions > STATE_SESSIONS_MAX)
		j.n_sessions = STATE_SESSIONS_MAX;
	j.sessions = calloc(j.n_sessions, sizeof *j.sessions);
	if (j.sessions == NULL)
		return 1;
	struct raftlock_session_options so = {.ttl_ms = o->ttl_ms};
	for (unsigned i = 0; i < j.n_sessions; i++)
		if (raftlock_session_open(b->client, &so, &j.sessions[i]) != 0) {
			res.status = "failed";
			res.detail = raftlock_errmsg(b->client);
			stats_print(stdout, &res);
			goto out;
		}
	j.deadline = stats_now() + SCALE_FILL_DEADLINE_S;
	double t0 = stats_now();
	for (; started < j.threads; started++) {
		if (pthread_create(&th[started], NULL, state_worker, &j) != 0)
			break;
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	double fill_s = stats_now() - t0;
	unsigned long held = atomic_load(&j.held);
	fprintf(stderr, "rlbench: state: %lu locks held after %.1f s\n", held, fill_s);

	/* Memory and disk at rest, after the fill. */
	scale_sleep_ms(1000);
	double rss_max = 0;
	for (size_t i = 0; i < o->n_pids; i++) {
		double r = (double)stats_proc_rss_kib(o->pids[i]) / 1024;
		rss_max = r > rss_max ? r : rss_max;
	}
	double lmdb = state_lmdb_mib(o->data_dirs);
	char probe[160];
	snprintf(probe, sizeof probe, "%s/state/%08lu", b->run, 0ul);

	double catchup = -2, catchup_first = -2, restart = -2, rebuild = -2, restart_leader = -2,
	       rebuild_leader = -2;
	if (o->catchup_cmd != NULL) {
		catchup = state_catchup(b, &catchup_first);
		fprintf(stderr, "rlbench: state: catch-up %.2f s\n", catchup);
	}
	if (o->stop_cmd != NULL && o->start_cmd != NULL) {
		restart = state_restart(b, o->stop_cmd, probe, &restart_leader);
		fprintf(stderr, "rlbench: state: cold restart %.2f s\n", restart);
	}
	if (o->wipe_cmd != NULL && o->start_cmd != NULL) {
		rebuild = state_restart(b, o->wipe_cmd, probe, &rebuild_leader);
		fprintf(stderr, "rlbench: state: rebuild restart %.2f s\n", rebuild);
	}
	res.pairs_per_s = fill_s > 0 ? (double)held / fill_s : 0;
	res.errors = atomic_load(&j.failed);
	res.window_s = fill_s;
	/* -2: not measured (no command given), -1: the step failed. */
	snprintf(extra, sizeof extra,
		 ",\"locks_held\":%lu,\"fill_s\":%.1f,\"server_rss_mib\":%.1f,"
		 "\"lmdb_mib\":%.1f,\"catchup_s\":%.2f,\"restart_s\":%.2f,"
		 "\"rebuild_s\":%.2f,\"restart_leader_s\":%.2f,\"rebuild_leader_s\":%.2f,"
		 "\"catchup_first_s\":%.2f,\"sessions\":%u",
		 held, fill_s, rss_max, lmdb, catchup, restart, rebuild, restart_leader,
		 rebuild_leader, catchup_first, j.n_sessions);
	res.extra = extra;
	if (held < j.count) {
		res.status = "failed";
		snprintf(detail, sizeof detail, "%lu of %lu locks taken before the fill deadline",
			 held, j.count);
		res.detail = detail;
	}
	stats_print(stdout, &res);
	rv = held == j.count ? 0 : 1;
out:
	/* The sessions are left to the client's close (rlbench's exit), which
	 * gives them all one request timeout: closed one by one, a state of
	 * 10,000,000 locks took as long to release as to fill. The state
	 * workload comes last; its cluster is stopped after it. */
	free(j.sessions);
	return rv;
}

/* -------------------------------------------------------------- logmem -- */

/*
 * logmem: --count sessions kept alive (TTL --ttl-ms, keepalives from the
 * library) and count / 10 locks held by them, for --window seconds. Every
 * LOGMEM_SAMPLE_S it prints to stderr each node's RSS and the bytes of its
 * raft directory (log segments and snapshots, on disk), and reports the
 * largest of each, the largest snapshot file (the state image) and the LMDB
 * size. RSS is also read every second between the lines (a snapshot's
 * image is in memory for about that long), and each node's own high-water
 * mark (VmHWM, which covers every instant since it started, the opening
 * included) and its CPU over the window are reported at the end. The
 * keepalives are large RENEW entries: the raft log must stay bounded by
 * bytes (snapshots), not grow between entry-count snapshots.
 */
#define LOGMEM_SAMPLE_S 10
#define LOGMEM_LOCKS_PER 10 /* one lock held per this many sessions */

static double logmem_dir_bytes, logmem_snapshot_bytes;

static int logmem_visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (flag != FTW_F)
		return 0;
	logmem_dir_bytes += (double)st->st_blocks * 512;
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	size_t len = strlen(base);
	if (strncmp(base, "snapshot-", 9) == 0 &&
	    !(len > 5 && strcmp(base + len - 5, ".meta") == 0) &&
	    (double)st->st_size > logmem_snapshot_bytes)
		logmem_snapshot_bytes = (double)st->st_size;
	return 0;
}

/* Bytes under DIR/raft for the k-th directory of a comma-separated list. */
static double logmem_raft_mib(const char *dirs, size_t k)
{
	char *copy = strdup(dirs), *save = NULL, path[1024];
	size_t i = 0;
	logmem_dir_bytes = 0;
	for (char *d = strtok_r(copy, ",", &save); d != NULL; d = strtok_r(NULL, ",", &save), i++)
		if (i == k) {
			snprintf(path, sizeof path, "%s/raft", d);
			nftw(path, logmem_visit, 16, FTW_PHYS);
		}
	free(copy);
	return logmem_dir_bytes / (1 << 20);
}

int scale_logmem(struct rlbench *b)
{
	struct options *o = b->o;
	struct sessions_job j = {.b = b, .count = o->count ? o->count : 100000};
	struct stats_result res = {.system = "raftlock",
				   .workload = "logmem",
				   .clients = (unsigned)j.count,
				   .status = "ok"};
	char extra[1024], detail[256];
	int rv = 1;
	if (o->data_dirs == NULL || o->n_pids == 0) {
		fprintf(stderr, "rlbench: logmem needs --data-dirs and --server-pids\n");
		return 1;
	}
	j.n_clients = o->clients < SCALE_CLIENTS_MAX ? o->clients : SCALE_CLIENTS_MAX;
	if (j.n_clients > j.count)
		j.n_clients = (unsigned)j.count;
	j.sessions = calloc(j.count, sizeof *j.sessions);
	j.clients = calloc(j.n_clients, sizeof *j.clients);
	if (j.sessions == NULL || j.clients == NULL)
		goto out;
	struct raftlock_client_options co = rlbench_client_options(b, "rlbench-logmem");
	for (unsigned k = 0; k < j.n_clients; k++) {
		const char *msg = NULL;
		if (raftlock_client_open(&co, &j.clients[k], &msg) != 0) {
			fprintf(stderr, "rlbench: %s\n", msg ? msg : "cannot open a client");
			goto out;
		}
	}
	j.deadline = stats_now() + SCALE_FILL_DEADLINE_S;
	double t_open = stats_now();
	sessions_parallel(&j);
	t_open = stats_now() - t_open;
	fprintf(stderr, "rlbench: logmem: %lu sessions open after %.1f s\n",
		(unsigned long)atomic_load(&j.opened), t_open);

	/* Lock i is held by session i * LOGMEM_LOCKS_PER. */
	struct state_job sj = {.b = b, .threads = 32, .count = j.count / LOGMEM_LOCKS_PER};
	sj.n_sessions = (unsigned)sj.count;
	sj.sessions = calloc(sj.count ? sj.count : 1, sizeof *sj.sessions);
	if (sj.sessions == NULL)
		goto out;
	for (unsigned long i = 0; i < sj.count; i++)
		sj.sessions[i] = j.sessions[i * LOGMEM_LOCKS_PER];
	sj.deadline = stats_now() + SCALE_FILL_DEADLINE_S;
	pthread_t th[SCALE_THREADS_MAX];
	unsigned started = 0;
	double t_fill = stats_now();
	for (; started < sj.threads; started++)
		if (pthread_create(&th[started], NULL, state_worker, &sj) != 0)
			break;
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	t_fill = stats_now() - t_fill;
	unsigned long held = atomic_load(&sj.held);
	free(sj.sessions);
	fprintf(stderr, "rlbench: logmem: %lu locks held after %.1f s\n", held, t_fill);

	/* RSS is read every second (rss_last), the rest every LOGMEM_SAMPLE_S */
	double rss_max[OPTIONS_PIDS_MAX] = {0}, rss_last[OPTIONS_PIDS_MAX] = {0};
	double raft_max[OPTIONS_PIDS_MAX] = {0};
	double cpu0[OPTIONS_PIDS_MAX];
	for (size_t i = 0; i < o->n_pids; i++)
		cpu0[i] = stats_proc_cpu(&o->pids[i], 1);
	double t0 = stats_now(), end = t0 + o->window_s, next = t0, next_rss = t0;
	unsigned samples = 0;
	while (stats_now() < end) {
		if (stats_now() >= next_rss) {
			for (size_t i = 0; i < o->n_pids; i++) {
				rss_last[i] = (double)stats_proc_rss_kib(o->pids[i]) / 1024;
				rss_max[i] = rss_last[i] > rss_max[i] ? rss_last[i] : rss_max[i];
			}
			next_rss += 1;
		}
		if (stats_now() >= next) {
			char line[512];
			int len = snprintf(line, sizeof line, "rlbench: logmem: t=%.0f s",
					   stats_now() - t0);
			logmem_snapshot_bytes = 0;
			for (size_t i = 0; i < o->n_pids; i++) {
				double raft = logmem_raft_mib(o->data_dirs, i);
				raft_max[i] = raft > raft_max[i] ? raft : raft_max[i];
				len += snprintf(line + len, sizeof line - (size_t)len,
						" | node %zu rss %.1f MiB raft dir %.1f MiB", i + 1,
						rss_last[i], raft);
			}
			fprintf(stderr, "%s | snapshot %.1f MiB\n", line,
				logmem_snapshot_bytes / (1 << 20));
			samples++;
			next += LOGMEM_SAMPLE_S;
		}
		scale_sleep_ms(200);
	}
	double elapsed = stats_now() - t0;
	double hwm_top = 0, cores_top = 0;
	for (size_t i = 0; i < o->n_pids; i++) {
		double hwm = (double)stats_proc_status_kib(o->pids[i], "VmHWM") / 1024;
		double cores = (stats_proc_cpu(&o->pids[i], 1) - cpu0[i]) / elapsed;
		fprintf(stderr,
			"rlbench: logmem: node %zu: rss max %.1f MiB (1 s samples), high-water "
			"mark %.1f MiB, %.2f cores over the window\n",
			i + 1, rss_max[i], hwm, cores);
		hwm_top = hwm > hwm_top ? hwm : hwm_top;
		cores_top = cores > cores_top ? cores : cores_top;
	}
	unsigned long lost = 0;
	for (size_t i = 0; i < j.count; i++)
		if (j.sessions[i] != NULL && !raftlock_session_valid(j.sessions[i]))
			lost++;
	logmem_snapshot_bytes = 0;
	double rss_top = 0, raft_top = 0;
	for (size_t i = 0; i < o->n_pids; i++) {
		(void)logmem_raft_mib(o->data_dirs, i);
		rss_top = rss_max[i] > rss_top ? rss_max[i] : rss_top;
		raft_top = raft_max[i] > raft_top ? raft_max[i] : raft_top;
	}
	double lmdb = state_lmdb_mib(o->data_dirs) / (double)o->n_pids;
	res.errors = lost + atomic_load(&j.failed) + (sj.count - held);
	res.window_s = elapsed;
	snprintf(extra, sizeof extra,
		 ",\"sessions_open\":%lu,\"locks_held\":%lu,\"open_s\":%.1f,\"fill_s\":%.1f,"
		 "\"ttl_ms\":%u,\"samples\":%u,\"server_rss_max_mib\":%.1f,"
		 "\"server_rss_hwm_mib\":%.1f,\"server_cores_max\":%.2f,"
		 "\"raft_dir_max_mib\":%.1f,\"snapshot_mib\":%.1f,\"lmdb_mib_per_node\":%.1f,"
		 "\"lost\":%lu",
		 (unsigned long)atomic_load(&j.opened), held, t_open, t_fill, o->ttl_ms, samples,
		 rss_top, hwm_top, cores_top, raft_top, logmem_snapshot_bytes / (1 << 20), lmdb,
		 lost);
	res.extra = extra;
	if (res.errors > 0) {
		res.status = "failed";
		snprintf(detail, sizeof detail,
			 "%lu lost sessions, %lu failed opens, %lu locks not taken", lost,
			 (unsigned long)atomic_load(&j.failed), sj.count - held);
		res.detail = detail;
	}
	stats_print(stdout, &res);
	rv = res.errors == 0 ? 0 : 1;
	j.closing = 1;
	sessions_parallel(&j);
out:
	for (unsigned k = 0; j.clients != NULL && k < j.n_clients; k++)
		raftlock_client_close(j.clients[k]);
	free(j.clients);
	free(j.sessions);
	return rv;
}
