/* config.c: see config.h. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "address.h"
#include "fsm.h"
#include "line_file.h"
#include "log.h"
#include "raftlock.h"

static const char usage[] =
	"usage: raftlockd [options]\n"
	"  --config FILE              read settings from FILE (key = value lines)\n"
	"  --id N                     this node's id (1..2^63), one of the members\n"
	"                             (with --join: the id it was added under)\n"
	"  --data-dir DIR             raft log, snapshots and LMDB state\n"
	"  --restore FILE             start a NEW cluster from a backup image (raftlock\n"
	"                             snapshot save) on an empty data-dir; give every\n"
	"                             member the same FILE; with --join: a member\n"
	"                             added to such a cluster (docs/OPERATIONS.md)\n"
	"  --disk-reserve-mb MB       below this much free space under data-dir the\n"
	"                             disk counts as full: new sessions, locks and\n"
	"                             rules are refused (ENOSPC); default 64, 0 = off\n"
	"  --raft-address HOST:PORT   where the other nodes reach this one\n"
	"  --client-address HOST:PORT where clients reach this node\n"
	"  --metrics-address HOST:PORT  serve Prometheus metrics (GET /metrics), and\n"
	"                             GET /healthz and /readyz there; a loopback\n"
	"                             address unless --metrics-public yes\n"
	"  --metrics-public yes|no    allow a metrics-address other than loopback (the\n"
	"                             endpoint has no authentication); default no\n"
	"  --peer-tls-cert FILE       mutual TLS between members on the raft port: this\n"
	"  --peer-tls-key FILE        member's certificate (common name raftlock-node-ID)\n"
	"  --peer-tls-ca FILE         and key, and the cluster's CA (all three, or none)\n"
	"  --member ID,RAFTADDR,CLIENTADDR   a voter of the initial cluster (repeat:\n"
	"                             3 or 5 of them, this node included)\n"
	"  --bootstrap                with an empty data directory: create a new\n"
	"                             cluster of the members listed (command line\n"
	"                             only; ignored once the data directory has a log)\n"
	"  --join HOST:PORT[,...]     with an empty data directory: join the running\n"
	"                             cluster at these client addresses, as the member\n"
	"                             'raftlock member add' created with this id (an\n"
	"                             empty data directory without --bootstrap or\n"
	"                             --join is refused)\n"
	"  --join-token-file FILE     a file holding the bearer token --join presents\n"
	"                             to a cluster with auth on: the token of identity\n"
	"                             raftlock-node-ID (or of an admin); never logged\n"
	"  --cluster NAME             cluster name, recorded at bootstrap and checked\n"
	"  --election-timeout MS      default 1000\n"
	"  --heartbeat-timeout MS     default 100\n"
	"  --snapshot-threshold N     entries between snapshots, default 16384\n"
	"  --snapshot-trailing N      entries kept in the log after a snapshot, so\n"
	"                             that a follower a little behind gets entries,\n"
	"                             not the whole snapshot; default 4096\n"
	"  --snapshot-log-bytes N     also take a snapshot once the raft log held in\n"
	"                             memory reaches max(N, state * ratio) bytes;\n"
	"                             trailing entries are capped to a quarter of it;\n"
	"                             default 33554432 (32 MiB)\n"
	"  --snapshot-log-ratio PCT   the ratio above, in % of the last snapshot's\n"
	"                             size; default 25\n"
	"  --snapshot-replay-ms MS    also take a snapshot once applying the entries\n"
	"                             since the last one took MS in all (what a\n"
	"                             restart or a member catching up replays), or\n"
	"                             20 times the last snapshot's time if longer;\n"
	"                             default 5000\n"
	"  --renew-window MS          keepalive batching window, default 10\n"
	"  --map-size MB              LMDB map size, default 4096; new sessions, locks\n"
	"                             and waits are refused (ELIMIT) once the records\n"
	"                             reach a quarter of the leader's map\n"
	"  --keepalive-max-ids N      session ids one client connection may name in\n"
	"                             keepalives per second, default 262144\n"
	"  --log-level LEVEL          debug, info, warn, error (default info)\n"
	"  --log-format FORMAT        text (default) or json: one object a line with\n"
	"                             ts, level, node and msg\n"
	"  --client-tls MODE          TLS on the client port: off (default), server\n"
	"                             (the node presents its certificate) or mutual\n"
	"                             (clients must present one signed by the CA)\n"
	"  --client-tls-cert FILE     the node's PEM certificate (chain); with the key,\n"
	"                             also what the leader presents to its followers'\n"
	"                             client ports (mutual: serverAuth and clientAuth)\n"
	"  --client-tls-key FILE      its PEM private key\n"
	"  --client-tls-ca FILE       PEM CA bundle: verifies client certificates and\n"
	"                             the followers' certificates; required by mutual\n"
	"  --tls-handshake-timeout-ms MS  a TLS handshake not done by then closes the\n"
	"                             connection; 100..600000, default 10000\n"
	"  --max-connections-per-address N  client connections one address may hold\n"
	"                             open at once; 0 = no limit, default 1024\n"
	"  --frame-timeout-ms MS      a request frame begun must arrive whole within\n"
	"                             MS (slow senders are cut off); 0 = no limit,\n"
	"                             else 100..600000, default 30000\n"
	"  --auth on|off              authenticate clients and check the access rules\n"
	"                             (raftlock acl ...); default off\n"
	"  --auth-tokens FILE         bearer tokens: lines NAME SHA256HEX (the hex of\n"
	"                             the token's SHA-256; raftlock acl token NAME)\n"
	"  --auth-admin NAME          an identity with every permission, to create\n"
	"                             the first rules; the same on every node\n"
	"  --max-sessions-per-identity N  with auth on, sessions one identity may hold\n"
	"                             at once (the leader's setting counts); 0 = no\n"
	"                             limit, default 10000\n"
	"  --max-waiters-per-lock N   waiters one lock may queue (the leader's setting\n"
	"                             counts); 1..100000, default 100000\n"
	"  --watch-history N          lock changes kept in memory for watches to\n"
	"                             resume from; 16..10000000, default 100000\n"
	"  --check-config             validate the settings, print them and exit\n"
	"  --version                  print the version and exit\n";

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return RAFTLOCK_ECONFIG;
}

static int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || s[0] == '\0' || s[0] == '-' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int set_address(char *dst, const char *value, const char *key, char *err, size_t errlen)
{
	char host[CONFIG_ADDR_MAX], port[ADDRESS_PORT_MAX];
	if (strlen(value) >= CONFIG_ADDR_MAX || address_split(value, host, sizeof host, port) != 0)
		return fail(err, errlen, "%s: '%s' is not HOST:PORT (an IPv6 host in brackets)",
			    key, value);
	strcpy(dst, value);
	return 0;
}

/* A raft address goes to libraft's own transport, which in 0.22.1 parses
 * IPv4 literals and host names only (docs/RAFT-NOTES.md): say so here
 * rather than fail at start with an I/O error. */
static int set_raft_address(char *dst, const char *value, const char *key, char *err, size_t errlen)
{
	if (value[0] == '[')
		return fail(err, errlen,
			    "%s: '%s': raft addresses take an IPv4 address or a host name (libraft "
			    "0.22.1 does not parse IPv6 literals; client addresses may use them)",
			    key, value);
	return set_address(dst, value, key, err, errlen);
}

static int set_path(char *dst, const char *value, const char *key, char *err, size_t errlen)
{
	if (value[0] == '\0' || strlen(value) >= CONFIG_PATH_MAX)
		return fail(err, errlen, "%s: empty or too long", key);
	strcpy(dst, value);
	return 0;
}

static int set_yes_no(bool *dst, const char *value, const char *key, char *err, size_t errlen)
{
	if (strcmp(value, "yes") == 0)
		*dst = true;
	else if (strcmp(value, "no") == 0)
		*dst = false;
	else
		return fail(err, errlen, "%s: '%s' is not yes or no", key, value);
	return 0;
}

static int add_member(struct config *cfg, const char *value, char *err, size_t errlen)
{
	char buf[3 * CONFIG_ADDR_MAX];
	if (cfg->n_members >= CONFIG_MAX_MEMBERS)
		return fail(err, errlen, "member: at most %d members", CONFIG_MAX_MEMBERS);
	if (strlen(value) >= sizeof buf)
		return fail(err, errlen, "member: '%s' is too long", value);
	strcpy(buf, value);
	char *id = strtok(buf, ","), *raft = strtok(NULL, ","), *client = strtok(NULL, ",");
	if (id == NULL || raft == NULL || client == NULL || strtok(NULL, ",") != NULL)
		return fail(err, errlen, "member: '%s' is not ID,RAFTADDR,CLIENTADDR", value);
	struct config_member *m = &cfg->members[cfg->n_members];
	if (parse_u64(id, 1, INT64_MAX, &m->id) != 0)
		return fail(err, errlen, "member: bad id '%s' in '%s'", id, value);
	int rv = set_raft_address(m->raft_address, raft, "member", err, errlen);
	if (rv == 0)
		rv = set_address(m->client_address, client, "member", err, errlen);
	if (rv != 0)
		return rv;
	for (unsigned i = 0; i < cfg->n_members; i++)
		if (cfg->members[i].id == m->id)
			return fail(err, errlen, "member: id %llu listed twice",
				    (unsigned long long)m->id);
	cfg->n_members++;
	return 0;
}

/* The peer-tls-* keys: a file name each, checked when the node starts. */
static int set_peer_tls(struct config *cfg, const char *key, const char *value, char *err,
			size_t errlen)
{
	char *dst = strcmp(key, "peer-tls-cert") == 0  ? cfg->peer_tls_cert
		    : strcmp(key, "peer-tls-key") == 0 ? cfg->peer_tls_key
		    : strcmp(key, "peer-tls-ca") == 0  ? cfg->peer_tls_ca
						       : NULL;
	if (dst == NULL)
		return fail(err, errlen, "unknown setting '%s'", key);
	if (value[0] == '\0' || strlen(value) >= sizeof cfg->peer_tls_cert)
		return fail(err, errlen, "%s: empty or too long", key);
	strcpy(dst, value);
	return 0;
}

/* Applies one setting, from a flag or a line of the file; what is wrong
 * with it goes to err. */
static int set(struct config *cfg, const char *key, const char *value, char *err, size_t errlen)
{
	uint64_t v;
	if (strncmp(key, "peer-tls-", 9) == 0)
		return set_peer_tls(cfg, key, value, err, errlen);
	if (strcmp(key, "id") == 0) {
		if (parse_u64(value, 1, INT64_MAX, &cfg->id) != 0)
			return fail(err, errlen, "id: '%s' is not a positive integer", value);
	} else if (strcmp(key, "data-dir") == 0) {
		if (value[0] == '\0' || strlen(value) >= sizeof cfg->data_dir)
			return fail(err, errlen, "data-dir: empty or too long");
		strcpy(cfg->data_dir, value);
	} else if (strcmp(key, "disk-reserve-mb") == 0) {
		if (parse_u64(value, 0, 1u << 20, &v) != 0)
			return fail(err, errlen, "disk-reserve-mb: '%s' MB not in 0..2^20", value);
		cfg->disk_reserve = v << 20;
	} else if (strcmp(key, "restore") == 0) {
		if (value[0] == '\0' || strlen(value) >= sizeof cfg->restore_file)
			return fail(err, errlen, "restore: empty or too long");
		strcpy(cfg->restore_file, value);
	} else if (strcmp(key, "raft-address") == 0) {
		return set_raft_address(cfg->raft_address, value, key, err, errlen);
	} else if (strcmp(key, "client-address") == 0) {
		return set_address(cfg->client_address, value, key, err, errlen);
	} else if (strcmp(key, "metrics-address") == 0) {
		return set_address(cfg->metrics_address, value, key, err, errlen);
	} else if (strcmp(key, "metrics-public") == 0) {
		return set_yes_no(&cfg->metrics_public, value, key, err, errlen);
	} else if (strcmp(key, "member") == 0) {
		return add_member(cfg, value, err, errlen);
	} else if (strcmp(key, "join") == 0) {
		if (value[0] == '\0' || strlen(value) >= sizeof cfg->join)
			return fail(err, errlen, "join: empty or too long");
		strcpy(cfg->join, value);
	} else if (strcmp(key, "join-token-file") == 0) {
		return set_path(cfg->join_token_file, value, key, err, errlen);
	} else if (strcmp(key, "cluster") == 0) {
		if (value[0] == '\0' || strlen(value) >= sizeof cfg->cluster)
			return fail(err, errlen, "cluster: empty or too long");
		strcpy(cfg->cluster, value);
	} else if (strcmp(key, "election-timeout") == 0) {
		if (parse_u64(value, 100, 60000, &v) != 0)
			return fail(err, errlen, "election-timeout: '%s' not in 100..60000", value);
		cfg->election_timeout_ms = (unsigned)v;
	} else if (strcmp(key, "heartbeat-timeout") == 0) {
		if (parse_u64(value, 10, 10000, &v) != 0)
			return fail(err, errlen, "heartbeat-timeout: '%s' not in 10..10000", value);
		cfg->heartbeat_timeout_ms = (unsigned)v;
	} else if (strcmp(key, "snapshot-threshold") == 0) {
		if (parse_u64(value, 64, UINT32_MAX, &v) != 0)
			return fail(err, errlen, "snapshot-threshold: '%s' below 64", value);
		cfg->snapshot_threshold = (unsigned)v;
	} else if (strcmp(key, "snapshot-trailing") == 0) {
		if (parse_u64(value, 0, UINT32_MAX, &v) != 0)
			return fail(err, errlen, "snapshot-trailing: '%s' is not a count", value);
		cfg->snapshot_trailing = (unsigned)v;
	} else if (strcmp(key, "snapshot-log-bytes") == 0) {
		if (parse_u64(value, 65536, (uint64_t)1 << 40, &v) != 0)
			return fail(err, errlen, "snapshot-log-bytes: '%s' not in 65536..2^40",
				    value);
		cfg->snapshot_log_bytes = (size_t)v;
	} else if (strcmp(key, "snapshot-log-ratio") == 0) {
		if (parse_u64(value, 10, 1000, &v) != 0)
			return fail(err, errlen, "snapshot-log-ratio: '%s' %% not in 10..1000",
				    value);
		cfg->snapshot_log_ratio = (unsigned)v;
	} else if (strcmp(key, "snapshot-replay-ms") == 0) {
		if (parse_u64(value, 1, 3600000, &v) != 0)
			return fail(err, errlen, "snapshot-replay-ms: '%s' not in 1..3600000",
				    value);
		cfg->snapshot_replay_ms = (unsigned)v;
	} else if (strcmp(key, "renew-window") == 0) {
		if (parse_u64(value, 0, 1000, &v) != 0)
			return fail(err, errlen, "renew-window: '%s' not in 0..1000", value);
		cfg->renew_window_ms = (unsigned)v;
	} else if (strcmp(key, "map-size") == 0) {
		if (parse_u64(value, 16, 1u << 30, &v) != 0)
			return fail(err, errlen, "map-size: '%s' MB not in 16..2^30", value);
		cfg->map_size = (size_t)v << 20;
	} else if (strcmp(key, "keepalive-max-ids") == 0) {
		if (parse_u64(value, 1024, UINT32_MAX, &v) != 0)
			return fail(err, errlen, "keepalive-max-ids: '%s' not in 1024..2^32-1",
				    value);
		cfg->keepalive_max_ids = (size_t)v;
	} else if (strcmp(key, "log-level") == 0) {
		static const char *levels[] = {"debug", "info", "warn", "error"};
		for (int i = 0; i < 4; i++)
			if (strcmp(value, levels[i]) == 0) {
				cfg->log_level = i;
				return 0;
			}
		return fail(err, errlen, "log-level: '%s' is not debug, info, warn or error",
			    value);
	} else if (strcmp(key, "log-format") == 0) {
		if (strcmp(value, "text") == 0 || strcmp(value, "json") == 0) {
			cfg->log_format =
				strcmp(value, "json") == 0 ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT;
			return 0;
		}
		return fail(err, errlen, "log-format: '%s' is not text or json", value);
	} else if (strcmp(key, "client-tls") == 0) {
		static const char *modes[] = {"off", "server", "mutual"};
		for (int i = 0; i < 3; i++)
			if (strcmp(value, modes[i]) == 0) {
				cfg->client_tls = i;
				return 0;
			}
		return fail(err, errlen, "client-tls: '%s' is not off, server or mutual", value);
	} else if (strcmp(key, "client-tls-cert") == 0) {
		return set_path(cfg->client_tls_cert, value, key, err, errlen);
	} else if (strcmp(key, "client-tls-key") == 0) {
		return set_path(cfg->client_tls_key, value, key, err, errlen);
	} else if (strcmp(key, "client-tls-ca") == 0) {
		return set_path(cfg->client_tls_ca, value, key, err, errlen);
	} else if (strcmp(key, "tls-handshake-timeout-ms") == 0) {
		if (parse_u64(value, 100, 600000, &v) != 0)
			return fail(err, errlen,
				    "tls-handshake-timeout-ms: '%s' not in 100..600000", value);
		cfg->tls_handshake_timeout_ms = (unsigned)v;
	} else if (strcmp(key, "max-connections-per-address") == 0) {
		if (parse_u64(value, 0, 1000000, &v) != 0)
			return fail(err, errlen,
				    "max-connections-per-address: '%s' not in 0..1000000", value);
		cfg->max_connections_per_address = (unsigned)v;
	} else if (strcmp(key, "frame-timeout-ms") == 0) {
		if (parse_u64(value, 0, 600000, &v) != 0 || (v != 0 && v < 100))
			return fail(err, errlen, "frame-timeout-ms: '%s' not 0 or in 100..600000",
				    value);
		cfg->frame_timeout_ms = (unsigned)v;
	} else if (strcmp(key, "auth") == 0) {
		if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0)
			return fail(err, errlen, "auth: '%s' is not on or off", value);
		cfg->auth = strcmp(value, "on") == 0;
	} else if (strcmp(key, "max-sessions-per-identity") == 0) {
		if (parse_u64(value, 0, FSM_MAX_SESSIONS, &v) != 0)
			return fail(err, errlen, "max-sessions-per-identity: '%s' not in 0..%u",
				    value, FSM_MAX_SESSIONS);
		cfg->max_sessions_per_identity = (unsigned)v;
	} else if (strcmp(key, "max-waiters-per-lock") == 0) {
		if (parse_u64(value, 1, FSM_MAX_WAITERS, &v) != 0)
			return fail(err, errlen, "max-waiters-per-lock: '%s' not in 1..%u", value,
				    FSM_MAX_WAITERS);
		cfg->max_waiters_per_lock = (unsigned)v;
	} else if (strcmp(key, "watch-history") == 0) {
		if (parse_u64(value, 16, 10000000, &v) != 0)
			return fail(err, errlen, "watch-history: '%s' not in 16..10000000", value);
		cfg->watch_history = (unsigned)v;
	} else if (strcmp(key, "auth-tokens") == 0) {
		return set_path(cfg->auth_tokens, value, key, err, errlen);
	} else if (strcmp(key, "auth-admin") == 0) {
		if (value[0] == '\0' || strlen(value) > RAFTLOCK_NAME_MAX ||
		    strcmp(value, "*") == 0)
			return fail(err, errlen, "auth-admin: '%s' is not a name of 1 to %d bytes",
				    value, RAFTLOCK_NAME_MAX);
		strcpy(cfg->auth_admin, value);
	} else {
		return fail(err, errlen, "unknown setting '%s'", key);
	}
	return 0;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n > 0 &&
	       (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
		s[--n] = '\0';
	return s;
}

/* The long options, which are also the keys of the config file. */
static const struct option options[] = {
	{"config", required_argument, NULL, 'c'},
	{"id", required_argument, NULL, 0},
	{"data-dir", required_argument, NULL, 0},
	{"restore", required_argument, NULL, 0},
	{"disk-reserve-mb", required_argument, NULL, 0},
	{"raft-address", required_argument, NULL, 0},
	{"client-address", required_argument, NULL, 0},
	{"metrics-address", required_argument, NULL, 0},
	{"peer-tls-cert", required_argument, NULL, 0},
	{"peer-tls-key", required_argument, NULL, 0},
	{"peer-tls-ca", required_argument, NULL, 0},
	{"member", required_argument, NULL, 0},
	{"cluster", required_argument, NULL, 0},
	{"join", required_argument, NULL, 0},
	{"join-token-file", required_argument, NULL, 0},
	{"bootstrap", no_argument, NULL, 'b'},
	{"election-timeout", required_argument, NULL, 0},
	{"heartbeat-timeout", required_argument, NULL, 0},
	{"snapshot-threshold", required_argument, NULL, 0},
	{"snapshot-trailing", required_argument, NULL, 0},
	{"snapshot-log-bytes", required_argument, NULL, 0},
	{"snapshot-log-ratio", required_argument, NULL, 0},
	{"snapshot-replay-ms", required_argument, NULL, 0},
	{"renew-window", required_argument, NULL, 0},
	{"map-size", required_argument, NULL, 0},
	{"keepalive-max-ids", required_argument, NULL, 0},
	{"log-level", required_argument, NULL, 0},
	{"log-format", required_argument, NULL, 0},
	{"metrics-public", required_argument, NULL, 0},
	{"client-tls", required_argument, NULL, 0},
	{"client-tls-cert", required_argument, NULL, 0},
	{"client-tls-key", required_argument, NULL, 0},
	{"client-tls-ca", required_argument, NULL, 0},
	{"tls-handshake-timeout-ms", required_argument, NULL, 0},
	{"max-connections-per-address", required_argument, NULL, 0},
	{"frame-timeout-ms", required_argument, NULL, 0},
	{"auth", required_argument, NULL, 0},
	{"auth-tokens", required_argument, NULL, 0},
	{"auth-admin", required_argument, NULL, 0},
	{"max-sessions-per-identity", required_argument, NULL, 0},
	{"max-waiters-per-lock", required_argument, NULL, 0},
	{"watch-history", required_argument, NULL, 0},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{"check-config", no_argument, NULL, 'k'},
	{NULL, 0, NULL, 0},
};

#define N_OPTIONS (sizeof options / sizeof options[0])

/* A config file being read: the line that gave each key of options[] so
 * far (0: none yet). */
struct file_read {
	struct config *cfg;
	unsigned line_of[N_OPTIONS];
};

/* Each key once: a second value would silently replace the first, and
 * whichever the operator meant, one of them is lost. Only member, a list,
 * repeats. Called for a key that set() took, so one of options[]. */
static int note_key(struct file_read *r, const char *key, unsigned lineno, char *err, size_t errlen)
{
	size_t i = 0;
	while (options[i].name != NULL && strcmp(options[i].name, key) != 0)
		i++;
	if (options[i].name == NULL || strcmp(key, "member") == 0)
		return 0;
	if (r->line_of[i] != 0)
		return fail(err, errlen,
			    "%s: given twice, on lines %u and %u (a key may appear once; "
			    "only member repeats)",
			    key, r->line_of[i], lineno);
	r->line_of[i] = lineno;
	return 0;
}

/* One line of the config file (a line_file_cb). */
static int read_line(void *arg, char *line, unsigned lineno, char *err, size_t errlen)
{
	struct file_read *r = arg;
	char *s = trim(line);
	if (s[0] == '\0' || s[0] == '#')
		return 0;
	char *eq = strchr(s, '=');
	if (eq == NULL)
		return fail(err, errlen, "expected 'key = value'");
	*eq = '\0';
	const char *key = trim(s);
	/* A restore creates a new cluster, as --bootstrap does: a line left
	 * in the file would do it again once the data directory is wiped. */
	if (strcmp(key, "restore") == 0)
		return fail(err, errlen,
			    "restore is given on the command line only (--restore FILE), as "
			    "--bootstrap is: it creates a new cluster");
	int rv = set(r->cfg, key, trim(eq + 1), err, errlen);
	return rv != 0 ? rv : note_key(r, key, lineno, err, errlen);
}

static int read_file(struct config *cfg, const char *path, char *err, size_t errlen)
{
	struct file_read r = {.cfg = cfg};
	char msg[768];
	if (line_file_read(path, read_line, &r, msg, sizeof msg) != 0)
		return fail(err, errlen, "config %s", msg);
	return 0;
}

static void defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->election_timeout_ms = 1000;
	cfg->heartbeat_timeout_ms = 100;
	cfg->snapshot_threshold = 16384;
	cfg->snapshot_trailing = 4096;
	/* The log and the image are both in memory while a snapshot is
	 * written: a quarter keeps what a snapshot adds to a node's memory
	 * at about 1.25 times the image. */
	cfg->snapshot_log_bytes = (size_t)32 << 20;
	cfg->snapshot_log_ratio = 25;
	cfg->snapshot_replay_ms = 5000;
	cfg->renew_window_ms = 10;
	cfg->map_size = CONFIG_DEFAULT_MAP_SIZE;
	cfg->disk_reserve = (uint64_t)64 << 20;
	cfg->keepalive_max_ids = CONFIG_DEFAULT_KEEPALIVE_IDS;
	cfg->log_level = LOG_INFO;
	cfg->log_format = LOG_FORMAT_TEXT;
	cfg->client_tls = CONFIG_TLS_OFF;
	cfg->tls_handshake_timeout_ms = 10000;
	cfg->max_connections_per_address = 1024;
	cfg->frame_timeout_ms = 30000;
	cfg->max_sessions_per_identity = 10000;
	cfg->max_waiters_per_lock = FSM_MAX_WAITERS;
	cfg->watch_history = 100000;
}

/* Whether HOST:PORT names this machine's loopback: 127.0.0.0/8, ::1 or
 * localhost (resolved by the node to loopback). */
static bool loopback(const char *address)
{
	char host[CONFIG_ADDR_MAX], port[ADDRESS_PORT_MAX];
	if (address_split(address, host, sizeof host, port) != 0)
		return false;
	return strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0 ||
	       strcmp(host, "localhost") == 0;
}

static int validate_tls(const struct config *cfg, char *err, size_t errlen)
{
	bool any = cfg->client_tls_cert[0] || cfg->client_tls_key[0] || cfg->client_tls_ca[0];
	switch (cfg->client_tls) {
	case CONFIG_TLS_OFF:
		if (any)
			return fail(err, errlen,
				    "client-tls-cert, -key or -ca given but client-tls is off: "
				    "set client-tls = server or mutual (or remove them)");
		return 0;
	case CONFIG_TLS_MUTUAL:
		if (cfg->client_tls_ca[0] == '\0')
			return fail(err, errlen,
				    "client-tls mutual needs client-tls-ca (the CA that signs "
				    "client certificates)");
		/* fall through */
	default:
		if (cfg->client_tls_cert[0] == '\0' || cfg->client_tls_key[0] == '\0')
			return fail(err, errlen,
				    "client-tls %s needs client-tls-cert and "
				    "client-tls-key",
				    cfg->client_tls == CONFIG_TLS_MUTUAL ? "mutual" : "server");
		return 0;
	}
}

/* Peer TLS is on with all three files and off with none. */
static int validate_peer_tls(const struct config *cfg, char *err, size_t errlen)
{
	const char *names[] = {"peer-tls-cert", "peer-tls-key", "peer-tls-ca"};
	const char *values[] = {cfg->peer_tls_cert, cfg->peer_tls_key, cfg->peer_tls_ca};
	char missing[64] = "";
	int n_missing = 0;
	for (int i = 0; i < 3; i++)
		if (values[i][0] == '\0')
			snprintf(missing + strlen(missing), sizeof missing - strlen(missing),
				 "%s%s", n_missing++ > 0 ? ", " : "", names[i]);
	if (n_missing == 0 || n_missing == 3)
		return 0;
	return fail(err, errlen,
		    "peer TLS needs peer-tls-cert, peer-tls-key and peer-tls-ca together "
		    "(missing: %s)",
		    missing);
}

static int validate_common(struct config *cfg, char *err, size_t errlen);

/* A joining node needs its own addresses (from --member, or given) and
 * none of the bootstrap rules: its members come from the cluster. */
static int validate_join(struct config *cfg, char *err, size_t errlen)
{
	if (cfg->bootstrap)
		return fail(err, errlen, "--bootstrap and join exclude each other");
	const struct config_member *self = config_member_by_id(cfg, cfg->id);
	if (cfg->raft_address[0] == '\0' && self != NULL)
		strcpy(cfg->raft_address, self->raft_address);
	if (cfg->client_address[0] == '\0' && self != NULL)
		strcpy(cfg->client_address, self->client_address);
	if (cfg->raft_address[0] == '\0' || cfg->client_address[0] == '\0')
		return fail(err, errlen, "join: raft-address and client-address are required");
	return validate_common(cfg, err, errlen);
}

static int validate(struct config *cfg, char *err, size_t errlen)
{
	if (validate_peer_tls(cfg, err, errlen) != 0)
		return RAFTLOCK_ECONFIG;
	if (cfg->id == 0)
		return fail(err, errlen, "id is required");
	if (cfg->data_dir[0] == '\0')
		return fail(err, errlen, "data-dir is required");
	if (cfg->cluster[0] == '\0')
		return fail(err, errlen, "cluster is required");
	if (cfg->join[0] != '\0')
		return validate_join(cfg, err, errlen);
	if (cfg->n_members == 0)
		return fail(err, errlen, "no member given (--member ID,RAFTADDR,CLIENTADDR)");
	if (cfg->n_members % 2 == 0)
		return fail(err, errlen, "%u members: use an odd number (3 or 5)", cfg->n_members);
	const struct config_member *self = config_member_by_id(cfg, cfg->id);
	if (self == NULL)
		return fail(err, errlen, "id %llu is not among the members",
			    (unsigned long long)cfg->id);
	if (cfg->raft_address[0] == '\0')
		strcpy(cfg->raft_address, self->raft_address);
	if (cfg->client_address[0] == '\0')
		strcpy(cfg->client_address, self->client_address);
	if (strcmp(cfg->raft_address, self->raft_address) != 0)
		return fail(err, errlen, "raft-address %s differs from member %llu's %s",
			    cfg->raft_address, (unsigned long long)cfg->id, self->raft_address);
	return validate_common(cfg, err, errlen);
}

static int validate_common(struct config *cfg, char *err, size_t errlen)
{
	if (cfg->heartbeat_timeout_ms * 2 > cfg->election_timeout_ms)
		return fail(err, errlen,
			    "heartbeat-timeout must be at most half the election-timeout");
	if (cfg->metrics_address[0] != '\0' && !cfg->metrics_public &&
	    !loopback(cfg->metrics_address))
		return fail(err, errlen,
			    "metrics-address %s is not a loopback address: the metrics endpoint "
			    "has no authentication; set metrics-public = yes to serve it there",
			    cfg->metrics_address);
	if (cfg->auth && cfg->auth_tokens[0] == '\0' && cfg->client_tls != CONFIG_TLS_MUTUAL)
		return fail(err, errlen,
			    "auth = on but clients have no way to prove who they are: give "
			    "auth-tokens, or client-tls = mutual");
	return validate_tls(cfg, err, errlen);
}

int config_parse(struct config *cfg, int argc, char **argv, char *err, size_t errlen)
{
	char msg[512];
	defaults(cfg);
	/* First pass: only --config, so that flags override the file. */
	const char *file = NULL;
	opterr = 0;
	optind = 1;
	int c, idx;
	while ((c = getopt_long(argc, argv, "c:h", options, &idx)) != -1) {
		if (c == 'c')
			file = optarg;
		else if (c == 'k')
			cfg->check_only = true;
		else if (c == 'b')
			cfg->bootstrap = true; /* never from the file: see config.h */
		else if (c == 'h') {
			fputs(usage, stdout);
			return 1;
		} else if (c == 'V') {
			printf("raftlockd %s\n", RAFTLOCK_VERSION_STRING);
			return 1;
		} else if (c == '?')
			return fail(err, errlen, "unknown or incomplete option '%s'\n%s",
				    argv[optind - 1], usage);
	}
	if (optind < argc)
		return fail(err, errlen, "unexpected argument '%s'", argv[optind]);
	if (file != NULL && read_file(cfg, file, err, errlen) != 0)
		return RAFTLOCK_ECONFIG;
	bool members_from_flags = false;
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:h", options, &idx)) != -1) {
		if (c != 0)
			continue;
		const char *key = options[idx].name;
		if (strcmp(key, "member") == 0 && !members_from_flags) {
			cfg->n_members = 0; /* flags replace the file's member list */
			members_from_flags = true;
		}
		if (set(cfg, key, optarg, msg, sizeof msg) != 0)
			return fail(err, errlen, "--%s", msg);
	}
	return validate(cfg, err, errlen);
}

const struct config_member *config_member_by_id(const struct config *cfg, uint64_t id)
{
	for (unsigned i = 0; i < cfg->n_members; i++)
		if (cfg->members[i].id == id)
			return &cfg->members[i];
	return NULL;
}
