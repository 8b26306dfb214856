/* cluster.c: see cluster.h. */
#include "cluster.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>

#include <cmocka.h>
#include <openssl/err.h>

#include "codec.h"
#include "frame.h"
#include "raftlock.h"
#include "tls_ctx.h"

#ifndef RAFTLOCKD_BIN
#error RAFTLOCKD_BIN must name the raftlockd binary
#endif

/* Every node this process started and has not reaped, kept apart from the
 * clusters: a cluster is often on a test's stack, and a failed assertion
 * leaves that frame before tcluster_destroy() runs, so at exit the harness
 * stops the nodes by their PIDs, never through a dead struct. */
#define CHILDREN_MAX 256
static pid_t children[CHILDREN_MAX];

static void die(const char *what)
{
	fprintf(stderr, "cluster harness: %s: %s\n", what, strerror(errno));
	exit(2);
}

uint64_t tcluster_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* Test processes run side by side (ctest -j) and each picks its ports
 * in one range. A node that a test stops keeps its ports for its restart,
 * but nothing holds them meanwhile: another process could take one, and
 * the restart would fail ("address already in use"). So every port handed
 * out is also claimed, for the life of this process, by a lock on a file
 * named after it (PORT_CLAIMS/<port>); the others skip a claimed port.
 * The kernel drops the locks when the process ends, however it ends. */
#define PORT_CLAIMS "/tmp/raftlock-test-ports"

/* The claim's descriptor, or -1 when another test process holds it. */
static int claim_port(int port)
{
	char path[64];
	snprintf(path, sizeof path, PORT_CLAIMS "/%d", port);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0 && errno == ENOENT && (mkdir(PORT_CLAIMS, 01777) == 0 || errno == EEXIST))
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0)
		die("claiming a test port");
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		close(fd);
		return -1;
	}
	return fd; /* kept open by the caller: the claim lasts as long as it is */
}

/* A port that is free now and outside the kernel's ephemeral range
 * (32768 and up here): a node restarted later must find its port still
 * free, and an ephemeral port can meanwhile be taken by any outgoing
 * connection. Each test process starts at its own offset. */
static int free_port(void)
{
	static unsigned next;
	if (next == 0)
		next = (unsigned)getpid() * 37u;
	for (int tries = 0; tries < 4000; tries++) {
		int port = 20000 + (int)(next++ % 12000u);
		int claim = claim_port(port);
		if (claim < 0)
			continue;
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			die("socket");
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_port = htons((uint16_t)port),
					.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
		close(fd);
		if (ok)
			return port;
		close(claim); /* in use outside the tests: not ours to hold */
	}
	die("no free port in 20000..31999");
	return -1;
}

static void child_started(pid_t pid)
{
	for (int i = 0; i < CHILDREN_MAX; i++)
		if (children[i] == 0) {
			children[i] = pid;
			return;
		}
}

static void child_reaped(pid_t pid)
{
	for (int i = 0; i < CHILDREN_MAX; i++)
		if (children[i] == pid)
			children[i] = 0;
}

/* At exit: kills and reaps each node still running. A PID a test reaped
 * itself is no longer this process's child (waitpid fails), and is left
 * alone whoever has it now. */
static void stop_children(void)
{
	for (int i = 0; i < CHILDREN_MAX; i++) {
		pid_t pid = children[i];
		int status;
		if (pid <= 0 || waitpid(pid, &status, WNOHANG) != 0)
			continue;
		fprintf(stderr, "cluster harness: node pid %d still running at exit, killed\n",
			(int)pid);
		kill(pid, SIGCONT);
		kill(pid, SIGKILL);
		(void)waitpid(pid, &status, 0);
		children[i] = 0;
	}
}

static void spawn(struct tcluster *c, int i)
{
	char id[16], dir[300], raft[32], client[32], metrics[32], et[16], ht[16], st[16], tr[16];
	char map[16];
	char members[TCLUSTER_MAX][100];
	char cert[300], key[300], ca[300];
	char *argv[64];
	int k = 0;
	snprintf(id, sizeof id, "%llu", (unsigned long long)tcluster_id(c, i));
	snprintf(dir, sizeof dir, "%s/n%d", c->dir, i + 1);
	snprintf(raft, sizeof raft, "127.0.0.1:%d", c->raft_port[i]);
	snprintf(client, sizeof client, "127.0.0.1:%d", c->client_port[i]);
	snprintf(metrics, sizeof metrics, "127.0.0.1:%d", c->metrics_port[i]);
	snprintf(et, sizeof et, "%u", c->election_ms);
	snprintf(ht, sizeof ht, "%u", c->election_ms / 10);
	snprintf(st, sizeof st, "%u", c->snapshot_threshold ? c->snapshot_threshold : 16384);
	argv[k++] = "raftlockd";
	argv[k++] = "--id";
	argv[k++] = id;
	argv[k++] = "--data-dir";
	argv[k++] = dir;
	argv[k++] = "--cluster";
	argv[k++] = c->name;
	argv[k++] = "--metrics-address";
	argv[k++] = metrics;
	argv[k++] = "--election-timeout";
	argv[k++] = et;
	argv[k++] = "--heartbeat-timeout";
	argv[k++] = ht;
	argv[k++] = "--snapshot-threshold";
	argv[k++] = st;
	if (c->snapshot_trailing != 0) {
		snprintf(tr, sizeof tr, "%u", c->snapshot_trailing);
		argv[k++] = "--snapshot-trailing";
		argv[k++] = tr;
	}
	if (c->map_size_mb[i] != 0) {
		snprintf(map, sizeof map, "%u", c->map_size_mb[i]);
		argv[k++] = "--map-size";
		argv[k++] = map;
	}
	argv[k++] = "--log-level";
	argv[k++] = getenv("RAFTLOCK_TEST_DEBUG") ? "debug" : "warn";
	if (c->client_tls != NULL) {
		snprintf(cert, sizeof cert, "%s/node-%d.pem", c->tls_dir, i + 1);
		snprintf(key, sizeof key, "%s/node-%d.key", c->tls_dir, i + 1);
		snprintf(ca, sizeof ca, "%s/ca.pem", c->tls_dir);
		argv[k++] = "--client-tls";
		argv[k++] = (char *)c->client_tls;
		argv[k++] = "--client-tls-cert";
		argv[k++] = cert;
		argv[k++] = "--client-tls-key";
		argv[k++] = key;
		argv[k++] = "--client-tls-ca";
		argv[k++] = ca;
	}
	char extra[8][300];
	for (int e = 0; e < 8 && c->extra_args[e] != NULL; e++) {
		/* after: they win; "{id}" stands for this node's id */
		const char *arg = c->extra_args[e], *at = strstr(arg, "{id}");
		if (at != NULL)
			snprintf(extra[e], sizeof extra[e], "%.*s%d%s", (int)(at - arg), arg, i + 1,
				 at + 4);
		else
			snprintf(extra[e], sizeof extra[e], "%s", arg);
		argv[k++] = extra[e];
	}
	char join[TCLUSTER_MAX * 24] = "";
	if (c->joining[i]) {
		/* A node added at run time: its own addresses, and where the
		 * cluster answers (every other slot; the client follows
		 * redirects to the leader). */
		for (int m = 0; m < c->n; m++)
			if (m != i)
				snprintf(join + strlen(join), sizeof join - strlen(join), "%s%s",
					 join[0] ? "," : "", c->client_addr[m]);
		argv[k++] = "--join";
		argv[k++] = join;
		argv[k++] = "--raft-address";
		argv[k++] = raft;
		argv[k++] = "--client-address";
		argv[k++] = client;
	} else {
		argv[k++] = "--bootstrap"; /* ignored once the data directory has a log */
		for (int m = 0; m < c->n_boot; m++) {
			snprintf(members[m], sizeof members[m], "%llu,127.0.0.1:%d,127.0.0.1:%d",
				 (unsigned long long)tcluster_id(c, m), c->raft_port[m],
				 c->client_port[m]);
			argv[k++] = "--member";
			argv[k++] = members[m];
		}
	}
	argv[k] = NULL;
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		char log[320];
		snprintf(log, sizeof log, "%s/n%d.log", c->dir, i + 1);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 2);
			dup2(fd, 1);
			close(fd);
		}
		execv(c->bin[i] != NULL ? c->bin[i] : RAFTLOCKD_BIN, argv);
		_exit(127);
	}
	c->pid[i] = pid;
	child_started(pid);
	c->spawned_ms[i] = tcluster_now_ms();
}

void tcluster_start(struct tcluster *c, int n, unsigned election_ms)
{
	unsigned snap = c->snapshot_threshold, trailing = c->snapshot_trailing;
	unsigned map[TCLUSTER_MAX];
	memcpy(map, c->map_size_mb, sizeof map);
	const char *extra[8];
	memcpy(extra, c->extra_args, sizeof extra);
	const char *client_tls = c->client_tls, *tls_dir = c->tls_dir, *base = c->base_dir;
	const char *bin[TCLUSTER_MAX];
	memcpy(bin, c->bin, sizeof bin);
	char name[sizeof c->name];
	memcpy(name, c->name, sizeof name);
	memset(c, 0, sizeof *c);
	memcpy(c->bin, bin, sizeof bin);
	c->client_tls = client_tls;
	c->tls_dir = tls_dir;
	c->base_dir = base;
	c->snapshot_threshold = snap;
	c->snapshot_trailing = trailing;
	memcpy(c->map_size_mb, map, sizeof map);
	memcpy(c->extra_args, extra, sizeof extra);
	c->n = n;
	c->n_boot = n;
	c->election_ms = election_ms;
	snprintf(c->dir, sizeof c->dir, "%s/raftlock-test-XXXXXX", base ? base : "/tmp");
	if (mkdtemp(c->dir) == NULL)
		die("mkdtemp");
	if (name[0] != '\0')
		memcpy(c->name, name, sizeof name);
	else
		snprintf(c->name, sizeof c->name, "test-%d", (int)getpid());
	for (int i = 0; i < n; i++) {
		c->raft_port[i] = free_port();
		c->client_port[i] = free_port();
		c->metrics_port[i] = free_port();
		snprintf(c->client_addr[i], sizeof c->client_addr[i], "127.0.0.1:%d",
			 c->client_port[i]);
		c->addrs[i] = c->client_addr[i];
	}
	static bool hooked;
	if (!hooked) {
		atexit(stop_children);
		hooked = true;
	}
	for (int i = 0; i < n; i++)
		spawn(c, i);
	if (tcluster_leader(c, 20000) < 0) {
		fprintf(stderr, "cluster harness: no ready leader within 20 s (logs in %s)\n",
			c->dir);
		exit(2);
	}
}

/* Its wait status once it exited (looked at least once), -2 if it still
 * runs after timeout_ms. */
static int reap(pid_t pid, int timeout_ms)
{
	uint64_t end = tcluster_now_ms() + (uint64_t)timeout_ms;
	int status;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid) {
			child_reaped(pid);
			return status;
		}
		if (r < 0)
			return -1;
		if (tcluster_now_ms() >= end)
			return -2;
		sleep_ms(10);
	}
}

/* A node started a moment ago may not handle SIGTERM yet, which then
 * kills it and reads as an unclean stop. Its handlers come before its
 * client port (server/main.c): waits until that accepts, until the node
 * exited (true, *status), or until it has had STARTUP_GRACE_MS. */
#define STARTUP_GRACE_MS 1500

static bool await_started(struct tcluster *c, int i, int *status)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)c->client_port[i])};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	while (tcluster_now_ms() < c->spawned_ms[i] + STARTUP_GRACE_MS) {
		if (waitpid(c->pid[i], status, WNOHANG) == c->pid[i]) {
			child_reaped(c->pid[i]);
			return true;
		}
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		bool up = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
		if (fd >= 0)
			close(fd);
		if (up)
			return false;
		sleep_ms(10);
	}
	return false;
}

/* How long a node may take to stop, as server/node.c bounds it: a leader
 * waits up to NODE_DRAIN_MS for answers to what it proposed, then up to an
 * election timeout + 500 ms for a leadership transfer (the whole time when
 * the others are already down); then it exits, with sanitizers after a leak
 * check, which on a loaded machine takes seconds. Past that it is killed
 * and the stop counts as unclean. */
#define STOP_DRAIN_MS 1000
#define STOP_EXIT_MS 5000

static int stop_timeout_ms(const struct tcluster *c)
{
	return STOP_DRAIN_MS + (int)c->election_ms + 500 + STOP_EXIT_MS;
}

int tcluster_stop(struct tcluster *c, int i)
{
	if (c->pid[i] <= 0)
		return -1;
	kill(c->pid[i], SIGCONT);
	int st;
	if (await_started(c, i, &st)) {
		c->pid[i] = 0;
		return st;
	}
	kill(c->pid[i], SIGTERM);
	st = reap(c->pid[i], stop_timeout_ms(c));
	if (st == -2) {
		kill(c->pid[i], SIGKILL);
		st = reap(c->pid[i], 5000);
	}
	c->pid[i] = 0;
	return st;
}

void tcluster_export_endpoints(const struct tcluster *c)
{
	char env[TCLUSTER_MAX * 33] = "";
	for (int i = 0; i < c->n; i++) {
		strcat(env, i ? "," : "");
		strcat(env, c->client_addr[i]);
	}
	setenv("RAFTLOCK_ENDPOINTS", env, 1);
}

void tcluster_signal(struct tcluster *c, int i, int sig)
{
	if (c->pid[i] <= 0)
		return;
	kill(c->pid[i], sig);
	if (sig == SIGKILL) {
		reap(c->pid[i], 5000);
		c->pid[i] = 0;
	}
}

void tcluster_restart(struct tcluster *c, int i)
{
	if (c->pid[i] > 0)
		tcluster_stop(c, i);
	spawn(c, i);
}

void tcluster_replace(struct tcluster *c, int i)
{
	char cmd[320];
	if (c->pid[i] > 0)
		tcluster_stop(c, i);
	snprintf(cmd, sizeof cmd, "rm -rf '%s/n%d'", c->dir, i + 1);
	if (system(cmd) != 0)
		die("removing a data directory");
	spawn(c, i);
}

uint64_t tcluster_id(const struct tcluster *c, int i)
{
	return c->id[i] != 0 ? c->id[i] : (uint64_t)i + 1;
}

const char *tcluster_raft_addr(struct tcluster *c, int i)
{
	static char addr[TCLUSTER_MAX][32];
	snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d", c->raft_port[i]);
	return addr[i];
}

int tcluster_add_slot(struct tcluster *c, int reuse, uint64_t id)
{
	int i = reuse;
	if (i < 0) {
		if (c->n >= TCLUSTER_MAX)
			die("tcluster_add_slot: no slot left");
		i = c->n++;
	}
	if (c->pid[i] > 0)
		tcluster_signal(c, i, SIGKILL);
	char cmd[320];
	snprintf(cmd, sizeof cmd, "rm -rf '%s/n%d'", c->dir, i + 1);
	if (system(cmd) != 0)
		die("removing a data directory");
	c->raft_port[i] = free_port();
	c->client_port[i] = free_port();
	c->metrics_port[i] = free_port();
	snprintf(c->client_addr[i], sizeof c->client_addr[i], "127.0.0.1:%d", c->client_port[i]);
	c->addrs[i] = c->client_addr[i];
	c->id[i] = id;
	c->joining[i] = true;
	return i;
}

void tcluster_wipe(struct tcluster *c, int i)
{
	char cmd[320];
	if (c->pid[i] > 0)
		tcluster_signal(c, i, SIGKILL);
	snprintf(cmd, sizeof cmd, "rm -rf '%s/n%d'", c->dir, i + 1);
	if (system(cmd) != 0)
		die("removing a data directory");
}

long long tcluster_metric(struct tcluster *c, int i, const char *name)
{
	static char out[65536];
	char key[160];
	if (tcluster_http_get(c, i, "/metrics", out, sizeof out) != 0)
		return -1;
	snprintf(key, sizeof key, "\n%s ", name);
	const char *at = strstr(out, key);
	return at != NULL ? strtoll(at + strlen(key), NULL, 10) : -1;
}

int tcluster_shell(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	return system(cmd);
}

FILE *tcluster_log_open(const struct tcluster *c, int i)
{
	char path[320];
	snprintf(path, sizeof path, "%s/n%d.log", c->dir, i + 1);
	return fopen(path, "r");
}

int tcluster_log_count(struct tcluster *c, int i, const char *text)
{
	char line[2048];
	FILE *f = tcluster_log_open(c, i);
	int n = 0;
	while (f != NULL && fgets(line, sizeof line, f) != NULL)
		n += strstr(line, text) != NULL;
	if (f != NULL)
		fclose(f);
	return n;
}

bool tcluster_log_has(struct tcluster *c, int i, const char *text)
{
	return tcluster_log_count(c, i, text) > 0;
}

/* Counts sanitizer reports in node i's log (every start appends to it). */
static int sanitizer_reports(struct tcluster *c, int i)
{
	char line[512];
	FILE *f = tcluster_log_open(c, i);
	int n = 0;
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof line, f) != NULL) {
		if (strstr(line, "Sanitizer") != NULL || strstr(line, "runtime error:") != NULL) {
			fprintf(stderr, "cluster harness: node %d: %s", i + 1, line);
			n++;
		}
	}
	fclose(f);
	return n;
}

int tcluster_destroy(struct tcluster *c)
{
	int problems = 0;
	if (c->n == 0)
		return 0;
	for (int i = 0; i < c->n; i++) {
		if (c->pid[i] > 0) {
			int st = tcluster_stop(c, i);
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				fprintf(stderr,
					"cluster harness: node %d did not stop cleanly (%#x)\n",
					i + 1, st);
				problems++;
			}
		}
		problems += sanitizer_reports(c, i);
	}
	if (problems > 0)
		fprintf(stderr, "cluster harness: logs kept in %s\n", c->dir);
	else if (getenv("RAFTLOCK_TEST_KEEP") == NULL) {
		char cmd[300];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", c->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cluster harness: could not remove %s\n", c->dir);
	}
	c->n = 0;
	return problems;
}

int tcluster_destroy_and_remove(struct tcluster *c, const char *dir)
{
	int problems = tcluster_destroy(c);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		problems++;
	return problems;
}

int tcluster_leader(struct tcluster *c, int timeout_ms)
{
	uint64_t end = tcluster_now_ms() + (uint64_t)timeout_ms;
	do {
		/* A deposed leader may still believe it leads (paused, cut
		 * off): the ready leader of the highest term is the one. */
		int best = -1;
		uint64_t best_term = 0;
		for (int i = 0; i < c->n; i++) {
			if (c->pid[i] <= 0)
				continue;
			Raftlock__StatusInfo *st = tcluster_status(c, i);
			if (st != NULL && st->ready && st->next_token != 0 &&
			    st->term > best_term) {
				best = i;
				best_term = st->term;
			}
			if (st)
				raftlock__status_info__free_unpacked(st, NULL);
		}
		if (best >= 0)
			return best;
		sleep_ms(50);
	} while (tcluster_now_ms() < end);
	return -1;
}

/* A STATUS request. */
static void status_request(Raftlock__Envelope *env, Raftlock__StatusRequest *req)
{
	raftlock__status_request__init(req);
	raftlock__envelope__init(env);
	env->id = 1;
	env->body_case = RAFTLOCK__ENVELOPE__BODY_STATUS;
	env->status = req;
}

/* The StatusInfo of an answer (resp freed), or NULL. */
static Raftlock__StatusInfo *status_answer(Raftlock__Envelope *resp)
{
	Raftlock__StatusInfo *out = NULL;
	if (resp == NULL)
		return NULL;
	if (resp->body_case == RAFTLOCK__ENVELOPE__BODY_RESPONSE &&
	    resp->response->payload_case == RAFTLOCK__RESPONSE__PAYLOAD_STATUS_INFO) {
		out = resp->response->status_info;
		resp->response->status_info = NULL;
		resp->response->payload_case = RAFTLOCK__RESPONSE__PAYLOAD__NOT_SET;
	}
	raftlock__envelope__free_unpacked(resp, NULL);
	return out;
}

Raftlock__StatusInfo *tcluster_status(struct tcluster *c, int i)
{
	if (c->client_tls != NULL) {
		char ca[300], cert[300], key[300], err[512];
		bool mutual = strcmp(c->client_tls, "mutual") == 0;
		snprintf(ca, sizeof ca, "%s/ca.pem", c->tls_dir);
		snprintf(cert, sizeof cert, "%s/client-harness.pem", c->tls_dir);
		snprintf(key, sizeof key, "%s/client-harness.key", c->tls_dir);
		return raw_tls_status(c->client_port[i], ca, mutual ? cert : NULL,
				      mutual ? key : NULL, err, sizeof err);
	}
	int fd = raw_connect(c->client_port[i]);
	if (fd < 0)
		return NULL;
	Raftlock__StatusInfo *out = NULL;
	if (raw_send_status(fd) == 0)
		out = status_answer(raw_recv_envelope(fd, 1000));
	close(fd);
	return out;
}

int tcluster_run_raftlockd(char *const argv[], char *out, size_t outlen, int timeout_ms)
{
	return tcluster_run_binary(RAFTLOCKD_BIN, argv, out, outlen, timeout_ms);
}

int tcluster_run_binary(const char *bin, char *const argv[], char *out, size_t outlen,
			int timeout_ms)
{
	int pipefd[2];
	if (pipe(pipefd) != 0)
		die("pipe");
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(pipefd[1], 2);
		dup2(pipefd[1], 1);
		close(pipefd[0]);
		execv(bin, argv);
		_exit(127);
	}
	close(pipefd[1]);
	size_t got = 0;
	bool ended = false; /* its output closed (it exits), or out is full */
	struct pollfd p = {pipefd[0], POLLIN, 0};
	uint64_t end = tcluster_now_ms() + (uint64_t)timeout_ms;
	while (!ended && tcluster_now_ms() < end && poll(&p, 1, 50) >= 0) {
		if (p.revents & (POLLIN | POLLHUP)) {
			ssize_t r = read(pipefd[0], out + got, outlen - 1 - got);
			if (r > 0)
				got += (size_t)r;
			ended = r <= 0 || got >= outlen - 1;
		}
	}
	out[got] = '\0';
	close(pipefd[0]);
	/* Still running at timeout_ms, it runs until stopped: killed at once
	 * (an exit it made meanwhile is still read). */
	int st = reap(pid, ended ? 2000 : 0);
	if (st == -2) {
		kill(pid, SIGKILL);
		reap(pid, 2000);
		return -2;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ------------------------------------------------------------ raw protocol */

int raw_connect(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		close(fd);
		return -1;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

int raw_send(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static uint8_t raw_secret_bytes[RAFTLOCK_SECRET_MIN] = "raw-test-secret";
const ProtobufCBinaryData raw_secret = {sizeof raw_secret_bytes, raw_secret_bytes};

int raw_send_envelope(int fd, const Raftlock__Envelope *env)
{
	uint8_t *buf;
	size_t n;
	if (codec_frame_envelope(env, &buf, &n) != 0)
		return -1;
	int rv = raw_send(fd, buf, n);
	free(buf);
	return rv;
}

int raw_send_status(int fd)
{
	Raftlock__StatusRequest req;
	Raftlock__Envelope env;
	status_request(&env, &req);
	return raw_send_envelope(fd, &env);
}

Raftlock__Envelope *raw_recv_envelope(int fd, int timeout_ms)
{
	struct frame_reader r;
	frame_reader_init(&r, RAFTLOCK_FRAME_MAX);
	uint64_t end = tcluster_now_ms() + (uint64_t)timeout_ms;
	Raftlock__Envelope *env = NULL;
	for (;;) {
		const uint8_t *payload;
		size_t n;
		int rv = frame_reader_next(&r, &payload, &n);
		if (rv == 1) {
			env = raftlock__envelope__unpack(NULL, n, payload);
			break;
		}
		if (rv < 0)
			break;
		uint64_t now = tcluster_now_ms();
		if (now >= end)
			break;
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, (int)(end - now)) <= 0)
			break;
		/* One byte at a time: never read past this frame. */
		uint8_t b;
		if (read(fd, &b, 1) != 1)
			break;
		frame_reader_feed(&r, &b, 1);
	}
	frame_reader_close(&r);
	return env;
}

bool raw_closed(int fd, int timeout_ms)
{
	uint64_t end = tcluster_now_ms() + (uint64_t)timeout_ms;
	char buf[4096];
	while (tcluster_now_ms() < end) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 50) > 0) {
			ssize_t r = read(fd, buf, sizeof buf);
			if (r == 0 || (r < 0 && errno == ECONNRESET))
				return true;
		}
	}
	return false;
}

int tcluster_http_get(struct tcluster *c, int i, const char *path, char *out, size_t len)
{
	int fd = raw_connect(c->metrics_port[i]);
	if (fd < 0)
		return -1;
	char req[256];
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
	if (raw_send(fd, req, (size_t)n) != 0) {
		close(fd);
		return -1;
	}
	size_t got = 0;
	uint64_t end = tcluster_now_ms() + 3000;
	while (got < len - 1 && tcluster_now_ms() < end) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t r = read(fd, out + got, len - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	out[got] = '\0';
	close(fd);
	return got > 0 ? 0 : -1;
}

/* ------------------------------------------------------- raw protocol, TLS */

void raw_tls_close(struct raw_tls *t)
{
	if (t->ssl != NULL)
		SSL_free(t->ssl);
	if (t->ctx != NULL)
		SSL_CTX_free(t->ctx);
	if (t->fd >= 0)
		close(t->fd);
	if (t->reader != NULL) {
		frame_reader_close(t->reader);
		free(t->reader);
	}
	memset(t, 0, sizeof *t);
	t->fd = -1;
}

int raw_tls_connect(struct raw_tls *t, int port, const char *ca, const char *cert, const char *key,
		    char *err, size_t errlen)
{
	memset(t, 0, sizeof *t);
	t->fd = -1;
	struct tls_files files = {cert, key, ca};
	SSL_CTX *ctx;
	if (tls_ctx_new(&ctx, TLS_ROLE_CLIENT, &files, false, err, errlen) != 0)
		return -1;
	t->ctx = ctx;
	t->reader = malloc(sizeof(struct frame_reader));
	if (t->reader == NULL)
		die("malloc");
	frame_reader_init(t->reader, RAFTLOCK_FRAME_MAX);
	t->fd = raw_connect(port);
	if (t->fd < 0) {
		snprintf(err, errlen, "connect: %s", strerror(errno));
		raw_tls_close(t);
		return -1;
	}
	struct timeval tv = {5, 0};
	setsockopt(t->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(t->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	SSL *ssl = SSL_new(ctx);
	if (ssl == NULL)
		die("SSL_new");
	t->ssl = ssl;
	if (tls_ctx_expect_host(ssl, "127.0.0.1") != 0 || SSL_set_fd(ssl, t->fd) != 1)
		die("SSL set-up");
	if (SSL_connect(ssl) != 1) {
		tls_ctx_error(err, errlen, "TLS handshake");
		raw_tls_close(t);
		return -1;
	}
	return 0;
}

int raw_tls_send_envelope(struct raw_tls *t, const Raftlock__Envelope *env)
{
	uint8_t *buf;
	size_t n;
	if (codec_frame_envelope(env, &buf, &n) != 0)
		return -1;
	int rv = SSL_write(t->ssl, buf, (int)n) == (int)n ? 0 : -1;
	free(buf);
	return rv;
}

Raftlock__Envelope *raw_tls_recv_envelope(struct raw_tls *t, int timeout_ms, char *err,
					  size_t errlen)
{
	uint64_t end = tcluster_now_ms() + (uint64_t)timeout_ms;
	snprintf(err, errlen, "no answer within %d ms", timeout_ms);
	for (;;) {
		const uint8_t *payload;
		size_t n;
		int rv = frame_reader_next(t->reader, &payload, &n);
		if (rv == 1)
			return raftlock__envelope__unpack(NULL, n, payload);
		if (rv < 0) {
			snprintf(err, errlen, "bad frame");
			return NULL;
		}
		uint64_t now = tcluster_now_ms();
		if (now >= end)
			return NULL;
		if (SSL_pending(t->ssl) == 0) {
			struct pollfd p = {t->fd, POLLIN, 0};
			if (poll(&p, 1, (int)(end - now)) <= 0)
				continue;
		}
		char buf[4096];
		ERR_clear_error();
		int r = SSL_read(t->ssl, buf, sizeof buf);
		if (r <= 0) {
			int e = SSL_get_error(t->ssl, r);
			if (e == SSL_ERROR_WANT_READ)
				continue;
			if (e == SSL_ERROR_ZERO_RETURN)
				snprintf(err, errlen, "closed by the server (close_notify)");
			else
				tls_ctx_error(err, errlen, "TLS read");
			return NULL;
		}
		frame_reader_feed(t->reader, buf, (size_t)r);
	}
}

Raftlock__StatusInfo *raw_tls_status(int port, const char *ca, const char *cert, const char *key,
				     char *err, size_t errlen)
{
	struct raw_tls t;
	if (raw_tls_connect(&t, port, ca, cert, key, err, errlen) != 0)
		return NULL;
	Raftlock__StatusRequest req;
	Raftlock__Envelope env;
	status_request(&env, &req);
	Raftlock__StatusInfo *out = NULL;
	if (raw_tls_send_envelope(&t, &env) != 0)
		tls_ctx_error(err, errlen, "TLS write");
	else
		out = status_answer(raw_tls_recv_envelope(&t, 2000, err, errlen));
	raw_tls_close(&t);
	return out;
}

int tcluster_make_certs(const char *dir)
{
	char cmd[2048];
	/* libfaketime itself: the faketime wrapper's named semaphores collide
	 * in a /dev/shm shared with other test runs */
	snprintf(cmd, sizeof cmd,
		 "set -e; d=%s; s=%s/deploy/make-certs; "
		 "$s $d/certs --nodes 3 --client harness --client alice; "
		 "$s $d/other --nodes 0 --client mallory; "
		 "lib=$(ls /usr/lib/*/faketime/libfaketime.so.1 | head -n 1); "
		 "LD_PRELOAD=$lib FAKETIME=\"@2020-01-01 00:00:00\" $s $d/old --ca-from $d/certs "
		 "--nodes 0 --client old --days 30",
		 dir, RAFTLOCK_SOURCE_DIR);
	char full[2200];
	snprintf(full, sizeof full, "sh -c '%s' >/dev/null", cmd);
	if (system(full) != 0) {
		fprintf(stderr, "deploy/make-certs failed\n");
		return -1;
	}
	return 0;
}

int tcluster_run_group_(const char *name, const struct CMUnitTest *tests, size_t n_tests,
			struct tcluster *c, int n, unsigned election_ms)
{
	tcluster_start(c, n, election_ms);
	int failed = _cmocka_run_group_tests(name, tests, n_tests, NULL, NULL);
	return failed + tcluster_destroy(c);
}
