/*
 * cluster.h: real raftlockd processes on free loopback ports for the
 * integration tests. Every node started is stopped by tcluster_destroy()
 * (also registered with atexit) and dies with the test process
 * (PR_SET_PDEATHSIG), so a failing test leaves nothing running.
 */
#ifndef RAFTLOCK_TEST_CLUSTER_H
#define RAFTLOCK_TEST_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "raftlock.pb-c.h"

#define TCLUSTER_MAX 5

struct tcluster {
	int n;
	char dir[256];
	char name[64]; /* set before tcluster_start, or test-PID */
	int raft_port[TCLUSTER_MAX];
	int client_port[TCLUSTER_MAX];
	int metrics_port[TCLUSTER_MAX];
	char client_addr[TCLUSTER_MAX][32];
	const char *addrs[TCLUSTER_MAX]; /* for raftlock_client_options */
	pid_t pid[TCLUSTER_MAX];
	uint64_t spawned_ms[TCLUSTER_MAX]; /* when each was last started */
	unsigned election_ms;
	unsigned snapshot_threshold;
	unsigned snapshot_trailing;         /* 0: the node's default */
	unsigned map_size_mb[TCLUSTER_MAX]; /* --map-size of each node; 0: default */
	const char *extra_args[8];          /* more raftlockd flags, NULL-terminated;
					       "{id}" in one is the node's id */
	/* client-tls of every node: NULL (off), "server" or "mutual". Then
	 * tls_dir holds deploy/make-certs' output: ca.pem, node-I.pem/.key
	 * for each node, and client-harness.pem/.key, which the harness
	 * presents (tcluster_status) in mutual mode. */
	const char *client_tls;
	const char *tls_dir;
	/* Where the cluster's directory is made (NULL: /tmp), e.g. a small
	 * file system of the test's own. */
	const char *base_dir;
	/* The raftlockd executable of each node (NULL: the build's). */
	const char *bin[TCLUSTER_MAX];
	/* Membership (docs/OPERATIONS.md): the first n_boot slots bootstrap
	 * the cluster (--bootstrap, --member for each); a slot added later
	 * (tcluster_add_slot) starts with --join. id[i] is slot i's member id
	 * (0: i + 1); its data directory and log are named after the slot. */
	int n_boot;
	uint64_t id[TCLUSTER_MAX];
	bool joining[TCLUSTER_MAX];
};

/* Starts n nodes (3 or 5) and waits until one is a ready leader. */
void tcluster_start(struct tcluster *c, int n, unsigned election_ms);

struct CMUnitTest;

/*
 * The setup most test programs share: starts n nodes in c, runs the cmocka
 * group `tests` against them, and destroys the cluster. Returns the failed
 * tests plus the problems tcluster_destroy() saw (0: all well), for main().
 */
#define tcluster_run_group(tests, c, n, election_ms) \
	tcluster_run_group_(#tests, tests, sizeof(tests) / sizeof((tests)[0]), c, n, election_ms)
int tcluster_run_group_(const char *name, const struct CMUnitTest *tests, size_t n_tests,
			struct tcluster *c, int n, unsigned election_ms);

/* Stops every node (SIGTERM, then SIGKILL after 5 s) and removes the data.
 * Returns the number of problems seen: a node that did not exit 0 after
 * SIGTERM, and sanitizer reports in the node logs (then kept). */
int tcluster_destroy(struct tcluster *c);

/* tcluster_destroy(), then removes dir (a test's own scratch directory, the
 * certificates say); the problems of both, counted. */
int tcluster_destroy_and_remove(struct tcluster *c, const char *dir);

/* Starts node i again with its data directory. */
void tcluster_restart(struct tcluster *c, int i);

/* Stops node i, deletes its whole data directory and starts it again empty
 * with the same id, members and --bootstrap: the mistake that followers.c
 * still copes with (a lost machine comes back under a new id instead:
 * tcluster_add_slot, docs/OPERATIONS.md). */
void tcluster_replace(struct tcluster *c, int i);

/* A new slot (index returned) with fresh ports and member id `id`, for a
 * node that joins the running cluster: add it (raftlock_member_add with
 * tcluster_raft_addr/client_addr), then tcluster_restart() starts it with
 * --join. Also reuses a slot whose node was removed (its data directory is
 * deleted): pass that index as `reuse` (-1: a new slot). */
int tcluster_add_slot(struct tcluster *c, int reuse, uint64_t id);

/* Slot i's member id and raft address ("127.0.0.1:PORT", static storage
 * per slot). */
uint64_t tcluster_id(const struct tcluster *c, int i);
const char *tcluster_raft_addr(struct tcluster *c, int i);

/* Stops node i (SIGKILL) and deletes its data directory, as when its
 * machine is lost; it is not started again. */
void tcluster_wipe(struct tcluster *c, int i);

/* Sends sig to node i; SIGKILL also reaps it. */
void tcluster_signal(struct tcluster *c, int i, int sig);

/* Sets RAFTLOCK_ENDPOINTS to every node's client address, for the
 * raftlock CLI and what it runs. */
void tcluster_export_endpoints(const struct tcluster *c);

/* Stops node i with SIGTERM and waits for it to exit (status returned). */
int tcluster_stop(struct tcluster *c, int i);

/* Index of a ready leader, waiting up to timeout_ms; -1 if none. */
int tcluster_leader(struct tcluster *c, int timeout_ms);

/* STATUS of node i over the raw protocol; NULL if it does not answer.
 * Free with raftlock__status_info__free_unpacked(). */
Raftlock__StatusInfo *tcluster_status(struct tcluster *c, int i);

/* GET path from node i's metrics endpoint; the whole HTTP response in out
 * (NUL-terminated). Returns 0, or -1 if the node did not answer. */
int tcluster_http_get(struct tcluster *c, int i, const char *path, char *out, size_t len);

/* The value of metric `name` (a counter or gauge without labels) on node
 * i's metrics endpoint; -1 if the node did not answer or has no such
 * metric. */
long long tcluster_metric(struct tcluster *c, int i, const char *name);

/* Makes the certificates of the TLS tests under dir (which exists) with
 * deploy/make-certs: certs/ (the cluster's CA, node-1..3, clients harness
 * and alice: a tls_dir), other/ (another CA and its client mallory) and
 * old/ (client old of certs' CA, expired since 2020). Returns 0, or -1
 * with the reason on stderr. */
int tcluster_make_certs(const char *dir);

/* Whether node i's log (every start appends to it) has a line with text. */
bool tcluster_log_has(struct tcluster *c, int i, const char *text);
/* Runs a shell command made from a printf format; returns its exit status
 * as system() does. */
int tcluster_shell(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Node i's log (every start appends to it), open for reading; NULL when
 * the node never started. The caller closes it. */
FILE *tcluster_log_open(const struct tcluster *c, int i);

/* The number of lines of node i's log that contain text. */
int tcluster_log_count(struct tcluster *c, int i, const char *text);

/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t tcluster_now_ms(void);

/* Runs raftlockd with the given argv (NULL-terminated, argv[0] ignored),
 * waits up to timeout_ms, returns its exit status and its stderr in out. */
int tcluster_run_raftlockd(char *const argv[], char *out, size_t outlen, int timeout_ms);
/* The same with another build of raftlockd (say raftlockd-level1). */
int tcluster_run_binary(const char *bin, char *const argv[], char *out, size_t outlen,
			int timeout_ms);

/* ---- raw protocol, for tests that speak below the client library ---- */

/* Connects to 127.0.0.1:port; returns the fd or -1. */
int raw_connect(int port);
/* Writes all bytes; 0 or -1. */
int raw_send(int fd, const void *buf, size_t n);
/* The secret the raw-protocol tests open their sessions with and put in
 * their requests (RAFTLOCK_SECRET_MIN bytes). */
extern const ProtobufCBinaryData raw_secret;
/* Sends one envelope as a frame. */
int raw_send_envelope(int fd, const Raftlock__Envelope *env);
/* Sends a STATUS request (id 1), as tcluster_status() does. */
int raw_send_status(int fd);
/* Reads one envelope (NULL on timeout, EOF or a bad frame). */
Raftlock__Envelope *raw_recv_envelope(int fd, int timeout_ms);
/* Whether the peer closed the connection within timeout_ms. */
bool raw_closed(int fd, int timeout_ms);

/* ---- the same over TLS (blocking OpenSSL, certificates from files) ---- */

struct raw_tls {
	int fd;
	void *ctx, *ssl; /* SSL_CTX, SSL */
	void *reader;    /* struct frame_reader */
};

/* Connects to 127.0.0.1:port and completes a TLS handshake, verifying the
 * server against ca and the name 127.0.0.1, presenting cert/key unless
 * NULL. Returns 0, or -1 with OpenSSL's reason in err (t then holds
 * nothing). With TLS 1.3 a server that refuses the client's certificate
 * says so after the handshake: see raw_tls_recv_envelope. */
int raw_tls_connect(struct raw_tls *t, int port, const char *ca, const char *cert, const char *key,
		    char *err, size_t errlen);
int raw_tls_send_envelope(struct raw_tls *t, const Raftlock__Envelope *env);
/* NULL on timeout, EOF, a TLS error (its reason in err) or a bad frame. */
Raftlock__Envelope *raw_tls_recv_envelope(struct raw_tls *t, int timeout_ms, char *err,
					  size_t errlen);
void raw_tls_close(struct raw_tls *t);

/* STATUS of the node at port over TLS as above; NULL with the reason in
 * err when refused. */
Raftlock__StatusInfo *raw_tls_status(int port, const char *ca, const char *cert, const char *key,
				     char *err, size_t errlen);

#endif
