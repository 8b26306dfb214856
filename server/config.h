/*
 * config.h: raftlockd's settings, from command-line flags and an optional
 * config file of "key = value" lines whose keys are the flag names without
 * the dashes. In the file a key appears once ("member", a list, repeats): a
 * second value is an error naming both lines, not a silent replacement. A
 * line holds at most LINE_FILE_MAX bytes (line_file.h). Flags given on the
 * command line win over the file (and, given twice, the last one wins).
 */
#ifndef RAFTLOCK_CONFIG_H
#define RAFTLOCK_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftlock.h"

#define CONFIG_MAX_MEMBERS 9
#define CONFIG_ADDR_MAX 64

struct config_member {
	uint64_t id;
	char raft_address[CONFIG_ADDR_MAX];
	char client_address[CONFIG_ADDR_MAX];
};

/* TLS on the client port (client-tls). */
enum config_tls {
	CONFIG_TLS_OFF,    /* plaintext */
	CONFIG_TLS_SERVER, /* the node presents its certificate */
	CONFIG_TLS_MUTUAL, /* ... and clients must present one signed by the CA */
};

#define CONFIG_PATH_MAX 512
/* --map-size's default: LMDB's map, the most the state may grow to. */
#define CONFIG_DEFAULT_MAP_SIZE ((size_t)4096 << 20)
/* --keepalive-max-ids's default: session ids one client connection may
 * name in keepalives per second (a client of 50,000 sessions at the
 * shortest TTL names 150,000), whatever one request may name
 * (RAFTLOCK_KEEPALIVE_MAX, a bound of the protocol). */
#define CONFIG_DEFAULT_KEEPALIVE_IDS 262144

struct config {
	uint64_t id;
	char data_dir[512];
	char restore_file[CONFIG_PATH_MAX]; /* --restore: "" = none (restore.h) */
	uint64_t disk_reserve;              /* bytes; 0 = no full-disk guard (diskguard.h) */
	char raft_address[CONFIG_ADDR_MAX];
	char client_address[CONFIG_ADDR_MAX];
	char metrics_address[CONFIG_ADDR_MAX]; /* "" = no metrics endpoint */
	bool metrics_public;                   /* metrics-address may be other than loopback */
	/* Mutual TLS on the raft port (server/peer_tls.h): this member's
	 * certificate and key and the cluster's CA, all three or none. */
	char peer_tls_cert[512], peer_tls_key[512], peer_tls_ca[512];
	char cluster[128];
	struct config_member members[CONFIG_MAX_MEMBERS];
	unsigned n_members;
	unsigned election_timeout_ms;
	unsigned heartbeat_timeout_ms;
	unsigned snapshot_threshold;
	unsigned snapshot_trailing;
	/* Raft log kept in memory (libraft holds every entry until a snapshot):
	 * a snapshot is taken once the entries since the last one and the ones
	 * it kept reach max(snapshot_log_bytes, state image * ratio / 100). */
	size_t snapshot_log_bytes;
	unsigned snapshot_log_ratio;
	/* ...or once applying those entries took this long: what a restart
	 * or a member catching up replays after the snapshot, on its loop. */
	unsigned snapshot_replay_ms;
	unsigned renew_window_ms;
	size_t map_size;
	size_t keepalive_max_ids; /* per client connection and second */
	int log_level;            /* enum log_level */
	int log_format;           /* enum log_format */
	/* Client port TLS. The node's certificate and key also identify it
	 * when, as leader, it asks its followers' client ports for their status
	 * (followers.c), and client_tls_ca verifies them: in mutual mode a
	 * node certificate needs both the serverAuth and clientAuth usages. */
	int client_tls; /* enum config_tls */
	char client_tls_cert[CONFIG_PATH_MAX];
	char client_tls_key[CONFIG_PATH_MAX];
	char client_tls_ca[CONFIG_PATH_MAX];
	unsigned tls_handshake_timeout_ms;    /* a handshake not done by then fails */
	unsigned max_connections_per_address; /* client port; 0 = no limit */
	unsigned frame_timeout_ms;            /* a frame begun must end by then; 0 = none */
	/* Authentication and authorization (auth.h). With auth on, a client
	 * connection is an identity (its certificate's CN with client-tls
	 * mutual, or the name of the token it sent, from auth_tokens) and may
	 * do only what the access rules grant it; auth_admin names the
	 * identity that has every permission (the bootstrap admin). */
	bool auth;
	char auth_tokens[CONFIG_PATH_MAX]; /* "NAME SHA256HEX" lines; "" = none */
	char auth_admin[RAFTLOCK_NAME_MAX + 1];
	/* Limits the leader writes into the entries it proposes, so that every
	 * node applies the leader's (fsm.c): sessions one identity may hold
	 * with auth on (0 = no limit), waiters one lock may queue. */
	unsigned max_sessions_per_identity;
	unsigned max_waiters_per_lock;
	/* Changes kept for watches to resume from (watch.h). */
	unsigned watch_history;
	bool check_only; /* --check-config: validate, print, exit */
	/* How a node with an empty data directory starts (docs/OPERATIONS.md):
	 * bootstrap (--bootstrap, command line only) creates a new cluster of
	 * the members listed; join (--join) names client addresses of a
	 * running cluster whose leader has added this id; with neither, an
	 * empty data directory is refused. A data directory that holds a raft
	 * log ignores both. */
	bool bootstrap;
	char join[512]; /* "HOST:PORT[,HOST:PORT...]"; "" = not joining */
	/* The file of the bearer token the join presents (join.h), for a
	 * cluster with auth on and tokens; "" = none (a client certificate,
	 * with client-tls mutual, may identify the node instead). Read only
	 * when the node joins, and by --check-config. */
	char join_token_file[CONFIG_PATH_MAX];
};

/*
 * Fills cfg from argv (and the file named by --config). Returns 0, 1 when
 * --help or --version was asked (usage or version printed), or
 * RAFTLOCK_ECONFIG with a message that names the problem in err.
 */
int config_parse(struct config *cfg, int argc, char **argv, char *err, size_t errlen);

const struct config_member *config_member_by_id(const struct config *cfg, uint64_t id);

#endif
