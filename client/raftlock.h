/*
 * raftlock.h: the client library of raftlock, a replicated lock service.
 *
 * A program opens one raftlock_client, opens sessions on it (leases kept
 * alive by a background keepalive thread), and takes locks by name through
 * lock handles. Every grant carries a fencing token: a 64-bit number that is
 * unique and strictly increasing over the life of the cluster.
 *
 * Conventions, for every function below unless it says otherwise:
 *   - Return value: 0 on success or a negative RAFTLOCK_E* code. On failure
 *     outputs are left unchanged and raftlock_errmsg() describes the error.
 *   - A NULL pointer argument the call needs is RAFTLOCK_EINVAL (with no
 *     message when it is the client, session, handle, set or leadership
 *     itself). NULL given to a *_free, *_close or *_cancel function, or
 *     to raftlock_resign(), is a no-op.
 *   - The transport errors: a call that sends a request may also end with
 *     RAFTLOCK_ECONNECTION (no node reached: never sent), RAFTLOCK_ETIMEDOUT,
 *     RAFTLOCK_EUNAVAILABLE, RAFTLOCK_EOVERLOAD or RAFTLOCK_ENOSPC (the last
 *     refusal at the timeout), RAFTLOCK_ETLS or RAFTLOCK_ELIMIT (every node
 *     refused the connection), RAFTLOCK_EPERM (authentication),
 *     RAFTLOCK_EPROTO (an answer it cannot use) or RAFTLOCK_ENOMEM.
 *   - Threading: all functions are thread-safe. Blocking calls wait at most
 *     their timeout (or the client's request timeout).
 *   - Callbacks run on one of two threads of the client: the keepalive
 *     thread (a session's on_event and on_lost) or the I/O thread (lock,
 *     lock event, set, watch and observer callbacks). The callbacks of one
 *     thread run one at a time; one of each thread may run at once.
 *   - Strings passed in are copied; the caller keeps ownership.
 *   - Objects returned through an out pointer are owned by the caller and
 *     freed with the matching *_free / *_close function.
 *   - The library never aborts and never calls exit(); out of memory is
 *     RAFTLOCK_ENOMEM.
 *
 * Clock rule: lease validity is measured on CLOCK_BOOTTIME from the moment
 * the last acknowledged keepalive was SENT, minus a margin of rho * TTL plus
 * a constant, so the client's view of a lease ends before the server's.
 * docs/GUARANTEES.md states the assumption (rho = RAFTLOCK_CLOCK_RATE_PPM).
 */
#ifndef RAFTLOCK_H
#define RAFTLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RAFTLOCK_VERSION_MAJOR 0
#define RAFTLOCK_VERSION_MINOR 1
#define RAFTLOCK_VERSION_PATCH 0
/* Until version 1 (SONAME libraftlock.so.0) the structs this library
 * returns may gain fields at their end from one release to the next: build
 * a program against the header of the library it runs with. */

#if defined(RAFTLOCK_BUILDING) && defined(__GNUC__)
#define RAFTLOCK_API __attribute__((visibility("default")))
#else
#define RAFTLOCK_API
#endif

/* The clock-rate difference between any two machines the lease rules
 * tolerate, in parts per million (10000 = 1%). */
#define RAFTLOCK_CLOCK_RATE_PPM 10000
/* Constant part of the client's lease safety margin, in milliseconds. */
#define RAFTLOCK_LEASE_MARGIN_MS 50

/* Bounds enforced by server and client alike. */
#define RAFTLOCK_NAME_MAX 256         /* bytes in a lock name */
#define RAFTLOCK_VALUE_MAX 4096       /* bytes in an election value */
#define RAFTLOCK_FRAME_MAX (4u << 20) /* bytes in one protocol frame */
#define RAFTLOCK_KEEPALIVE_MAX 16384  /* sessions one keepalive request names */
#define RAFTLOCK_SECRET_MIN 16        /* bytes in a session secret, at least */
#define RAFTLOCK_SECRET_MAX 64        /* and at most */
#define RAFTLOCK_TOKEN_MAX 256        /* bytes in a bearer token */
#define RAFTLOCK_MULTI_MAX 64         /* locks in one atomic multi-acquire */
#define RAFTLOCK_WATCH_MAX 1024       /* watches and observers of one client */
/* A member id is 1..this (raftlockd --id). */
#define RAFTLOCK_MEMBER_ID_MAX INT64_MAX
#define RAFTLOCK_TTL_MIN_MS 1000
#define RAFTLOCK_TTL_MAX_MS 600000
/* A lock's lock_delay_ms and revoke_grace_ms are at most the longest TTL,
 * and its max_hold_ms at most a day: a cluster refuses more with
 * RAFTLOCK_EINVAL (a lock-delay of 49 days would freeze a name, a grace of
 * 49 days would make its maximum hold time meaningless). */
#define RAFTLOCK_LOCK_DELAY_MAX_MS RAFTLOCK_TTL_MAX_MS
#define RAFTLOCK_MAX_HOLD_MAX_MS 86400000
#define RAFTLOCK_REVOKE_GRACE_MAX_MS RAFTLOCK_TTL_MAX_MS
/* A cluster refuses a session whose TTL is below this many times its
 * election timeout (RAFTLOCK_EINVAL, naming the minimum): the validity an
 * acknowledged keepalive gives must outlast the shortest failover. */
#define RAFTLOCK_TTL_ELECTION_FACTOR 2
/* The default grace period of a session in jeopardy, in TTLs. */
#define RAFTLOCK_GRACE_TTLS 3
/* Crash-fast release (raftlock_session_options.bind_grace_ms): how long
 * after the connection that keeps a bound session closes the cluster ends
 * it, unless another connection takes it over: default and bounds. */
#define RAFTLOCK_BIND_GRACE_DEFAULT_MS 200
#define RAFTLOCK_BIND_GRACE_MIN_MS 50
#define RAFTLOCK_BIND_GRACE_MAX_MS 10000

/*
 * Error codes. The numbers are part of the wire protocol: never renumber.
 * X(name, value, message)
 */
#define RAFTLOCK_ERRORS(X)                                                        \
	X(EINVAL, -1, "invalid argument")                                         \
	X(ENOMEM, -2, "out of memory")                                            \
	X(ETIMEDOUT, -3, "timed out")                                             \
	X(ECONNECTION, -4, "no cluster node could be reached")                    \
	X(ENOTLEADER, -5, "this node is not the leader")                          \
	X(EUNAVAILABLE, -6, "the cluster has no ready leader")                    \
	X(ESESSION, -7, "the session has expired or was closed")                  \
	X(EBUSY, -8, "the lock is held by another owner")                         \
	X(ENOTHOLDER, -9, "the caller does not hold this lock")                   \
	X(ESTALESEQ, -10, "request sequence is below the acknowledged mark")      \
	X(EPROTO, -11, "malformed or unexpected protocol message")                \
	X(ETOOBIG, -12, "name or message exceeds its size limit")                 \
	X(ELIMIT, -13, "a server quota was reached")                              \
	X(EUNKNOWN, -14, "the outcome of the request is unknown")                 \
	X(ECANCELED, -15, "the request was canceled")                             \
	X(ENOTFOUND, -16, "no such lock or session")                              \
	X(EKIND, -17, "the lock exists with another kind or limit")               \
	X(ESHUTDOWN, -18, "the node is shutting down")                            \
	X(EINTERNAL, -19, "internal error")                                       \
	X(ESTATE, -20, "the call is not valid in the object's current state")     \
	X(EIO, -21, "input/output error")                                         \
	X(ECONFIG, -22, "invalid configuration")                                  \
	X(EDATA, -23, "damaged or foreign data directory")                        \
	X(EOVERLOAD, -24, "the node is overloaded; the request was not executed") \
	X(EPERM, -25, "permission denied")                                        \
	X(ETLS, -26, "a TLS handshake failed")                                    \
	X(ENOSPC, -27, "a node's disk is full; the request was not executed")     \
	X(EDEADLK, -28, "the wait would close a cycle of waiting sessions")
/* RAFTLOCK_EPERM is a node's answer to a request naming a session without
 * that session's secret (the library attaches it to each request of a
 * session it opened): refused before the log, nothing executed; the
 * library does not retry it. A session opened by a library older than
 * client protocol 3 has no secret, and every request of it gets
 * RAFTLOCK_EPERM from an upgraded cluster (docs/GUARANTEES.md, rule 14).
 * RAFTLOCK_EPERM is also the answer, with authentication on, to a request
 * the connection's identity has no permission for, or to a connection
 * that has not authenticated (the message names the identity, the
 * permission and the name): refused before the log, nothing executed; the
 * library does not retry it.
 *
 * RAFTLOCK_EOVERLOAD is a node's answer to a request it did not execute
 * for want of room (too many requests in flight on the connection, a
 * proposal that failed for want of memory): the library retries it with
 * back-off; a caller sees it only as the last error of a read or session
 * open that timed out while the node kept refusing.
 *
 * RAFTLOCK_ELIMIT from a session open or a lock call is a limit of the
 * cluster's state that refused it (docs/GUARANTEES.md, section 6): the
 * sessions one identity may hold (max-sessions-per-identity), the waiters
 * one lock may queue (max-waiters-per-lock), the store's size, ...; the
 * message names the limit and its value, and nothing changed.
 *
 * RAFTLOCK_ELIMIT is also what every waiting call gets, at once, when every
 * node has refused this client's connection because it holds as many from
 * the client's address as it takes (--max-connections-per-address): the
 * message names the node and the limit; nothing was sent. The library
 * tries the nodes again after a second.
 *
 * RAFTLOCK_ETLS: no node would complete a TLS handshake with this client:
 * a certificate was refused (by the client: the node's certificate is not
 * signed by the CA, has expired or names another host; by the node: the
 * client presented no certificate or one it does not trust), or the node
 * does not speak TLS. Nothing was executed. raftlock_errmsg() names the
 * address and the reason (see raftlock_client_options.tls_ca_file).
 *
 * RAFTLOCK_ENOSPC is a node's answer, before the log, to a request that
 * would make the state grow (a session open, an acquire, an access rule)
 * while the free space under its data directory is below its
 * --disk-reserve-mb: nothing executed. The library retries it with
 * back-off, as RAFTLOCK_EOVERLOAD, until the call's deadline; a caller sees
 * it as the last error of a call that timed out while the disk stayed full
 * (docs/OPERATIONS.md, "Full disk").
 *
 * RAFTLOCK_ESTATE is also a node's answer, before the log, to a request
 * whose command needs a feature level the cluster has not recorded yet
 * (not every voter runs a build that supports it; docs/OPERATIONS.md,
 * "Upgrades"): nothing executed, the message says which level. */

enum raftlock_error {
	RAFTLOCK_OK = 0,
#define RAFTLOCK__ERROR_ENUM(name, value, message) RAFTLOCK_##name = value,
	RAFTLOCK_ERRORS(RAFTLOCK__ERROR_ENUM)
#undef RAFTLOCK__ERROR_ENUM
};

/* Static description of an error code; never NULL. "unknown error" for a
 * code that is not in the table. Thread-safe; the string is static. */
RAFTLOCK_API const char *raftlock_strerror(int code);

/* sizeof(struct <name>) as this library was built, for every struct this
 * header defines; name is given without "struct " ("raftlock_lock_info")
 * and borrowed for the call. For a binding that declares the structs
 * itself (ctypes, cffi, another language) to refuse, before any call, a
 * library whose structs are not the size of its own: until version 1 they
 * may gain fields (see above), and a binding that allocates or reads one
 * of another size corrupts memory. 0 for NULL or a name the library does
 * not know (a struct newer than it). Never fails; thread-safe. */
RAFTLOCK_API size_t raftlock_struct_size(const char *name);

/* ------------------------------------------------------------ client -- */

typedef struct raftlock_client raftlock_client;

struct raftlock_client_options {
	/* "host:port" client addresses of any cluster nodes (at least one).
	 * The array and strings are copied. A numeric host ("10.0.0.1",
	 * "[::1]") is used as is, without a resolver. A host name is looked
	 * up (getaddrinfo) at each connection attempt, on a thread of its own,
	 * so that a resolver that does not answer holds neither the client's
	 * other addresses, calls and keepalives nor raftlock_client_close();
	 * its addresses are tried in the resolver's order. A lookup that
	 * fails, or is not answered within connect_timeout_ms, fails that
	 * attempt like an unreachable node (the next address is tried; a call
	 * that finds no node ends with RAFTLOCK_ECONNECTION and
	 * raftlock_errmsg() names the address and the lookup's failure); the
	 * next attempt at that address waits for the same lookup again rather
	 * than starting another, so a resolver slower than connect_timeout_ms
	 * is still waited for; the connections of all clients of the process
	 * to one host:port share one lookup while it is under way. */
	const char *const *addresses;
	size_t n_addresses;
	/* Shown by introspection as the owner's client name; NULL = the
	 * program's name. Copied. */
	const char *client_name;
	/* Default timeout of a request, retries included; 0 = 10000 ms. */
	unsigned request_timeout_ms;
	/* Timeout of one connect attempt: the host name's lookup (if a
	 * name), the TCP connect and the TLS handshake, in all; 0 = 1000 ms. */
	unsigned connect_timeout_ms;

	/*
	 * TLS. It is on when tls_ca_file is set or tls is true, and then
	 * every connection (to every address, and for raftlock_status_get)
	 * is TLS 1.2 or later and verifies the node: its certificate must be
	 * signed by a CA of tls_ca_file (the system's default CA store when
	 * tls_ca_file is NULL and tls is true), be valid now, and name the
	 * node's host: tls_server_name when set, else the host part of the
	 * address ("db-1" of "db-1:7101"), matched against the certificate's
	 * DNS names, or, for a numeric address ("127.0.0.1:7101", "[::1]:7101"),
	 * against its IP address entries. With TLS off (the default) the
	 * connections are plain TCP, and the other tls_* fields must be NULL.
	 *
	 * The files are PEM, read once by raftlock_client_open() (a renewed
	 * certificate takes a new client); the strings are copied. A client
	 * certificate (tls_cert_file, with its private key tls_key_file) is
	 * presented to nodes that ask for one (client-tls=mutual).
	 *
	 * A node whose handshake fails is tried no more than any unreachable
	 * one; when every address has refused the handshake, the calls
	 * waiting for a connection fail at once with RAFTLOCK_ETLS and
	 * raftlock_errmsg() says which address and why ("certificate verify
	 * failed: certificate has expired", "... hostname mismatch", "the
	 * node requires a client certificate", ...); calls made in the
	 * second after that fail so too without trying. Later calls try
	 * again, so a node whose certificate is fixed is used without a new
	 * client.
	 */
	bool tls;
	const char *tls_ca_file;     /* CAs that sign the nodes' certificates */
	const char *tls_cert_file;   /* client certificate (chain); NULL = none */
	const char *tls_key_file;    /* its private key; required with it */
	const char *tls_server_name; /* expected name of every node; NULL =
					each address's host */

	/* A bearer token (at most RAFTLOCK_TOKEN_MAX bytes, NUL-terminated),
	 * sent first on every connection the client makes: a cluster with
	 * auth = on then knows the client as the identity its auth-tokens
	 * file gives this token (docs/GUARANTEES.md, authorization). NULL = no
	 * token (a client certificate may identify the client instead).
	 * Copied; the copy is wiped when the client closes. A token a node
	 * does not know makes every request but status fail with
	 * RAFTLOCK_EPERM, "this node knows no such token". */
	const char *auth_token;
};

/*
 * Opens a client. Does not connect yet: the first request finds the leader.
 * A node that has sent nothing for 5 s while it owed an answer (also to
 * calls that timed out meanwhile) is left for the next address.
 * Starts the client's I/O thread and keepalive thread.
 * *out is owned by the caller: close it with raftlock_client_close().
 * Errors: RAFTLOCK_EINVAL (NULL opts or out, no address, an address that
 * does not parse, a tls_* field set with TLS off, a certificate without
 * its key or a key without its certificate, an empty tls_server_name),
 * RAFTLOCK_ECONFIG (a TLS file that cannot be read or used, or a key that
 * does not match the certificate: the message names the file and
 * OpenSSL's reason), RAFTLOCK_ENOMEM, RAFTLOCK_EINTERNAL (a thread could
 * not start).
 * A bearer token that is empty or longer than RAFTLOCK_TOKEN_MAX is
 * RAFTLOCK_EINVAL too.
 * On failure no errmsg object exists: the message goes to errmsg_out, if
 * not NULL (a static or thread-local string valid until the next call);
 * on success *errmsg_out is set as well and means nothing.
 */
RAFTLOCK_API int raftlock_client_open(const struct raftlock_client_options *opts,
				      raftlock_client **out, const char **errmsg_out);

/*
 * Closes every session still open on the client (releasing their locks on a
 * best-effort basis, bounded by the request timeout), stops its threads and
 * frees it. Its sessions, lock handles, lock sets and leaderships must have
 * been freed before, or are freed here (as raftlock_session_close() frees
 * them): none may be used or freed after. It does not wait for a host
 * name's lookup under way: that one ends by itself when its resolver
 * answers, and frees what it holds then. Must not be called from a
 * callback of this client. NULL is a no-op.
 */
RAFTLOCK_API void raftlock_client_close(raftlock_client *client);

/*
 * The message of the last error on this client in the calling thread, with
 * context ("acquire 'db/primary': the lock is held by another owner"); a
 * successful call leaves it as it was. "no error" when the thread's last
 * failure was on another client. Never NULL. One text per thread, shared
 * by all clients: valid until the thread's next failing call of the
 * library, on any client.
 */
RAFTLOCK_API const char *raftlock_errmsg(const raftlock_client *client);

/* ----------------------------------------------------------- session -- */

typedef struct raftlock_session raftlock_session;

/*
 * A session's life, as the library sees it:
 *
 *   valid     now < valid_until: locks held through the session are the
 *             caller's (docs/GUARANTEES.md, rules 8-9).
 *   jeopardy  validity ran out without an acknowledged keepalive (a leader
 *             failover, a partition, a paused client). The caller must
 *             stop acting on its locks, as for a lost session; but the
 *             cluster may still hold the session (its clock stands still
 *             while it has no leader), so the library keeps renewing it and
 *             lock handles keep their state. When a keepalive is
 *             acknowledged, validity resumes from that keepalive's send
 *             time: a new valid_until, and the session is valid again.
 *   lost      for good: the cluster said the session is gone (or that it
 *             does not accept the session's secret), or the grace
 *             period (raftlock_session_options.grace_ms) passed in jeopardy
 *             without any acknowledgement. valid_until is 0, calls on the
 *             session fail with RAFTLOCK_ESESSION, nothing is renewed. A
 *             lost session stays lost.
 */
enum raftlock_session_event {
	RAFTLOCK_SESSION_JEOPARDY = 1, /* validity ran out; still renewing */
	RAFTLOCK_SESSION_SAFE = 2,     /* a keepalive was acknowledged: valid again */
	RAFTLOCK_SESSION_LOST = 3,     /* for good */
};

/*
 * Called once, from the client's keepalive thread, when the session is lost
 * (see above): the server said it expired (`reason` RAFTLOCK_ESESSION), or
 * that it does not accept the session's secret (RAFTLOCK_EPERM: a session
 * opened before the cluster required secrets), or the grace period passed
 * without an acknowledged keepalive (RAFTLOCK_ETIMEDOUT). The callback must not block for long and
 * must not close the client; it may call raftlock_session_close() on other sessions only.
 */
typedef void (*raftlock_session_lost_cb)(raftlock_session *session, int reason, void *arg);

/*
 * Called from the client's keepalive thread at each change of the
 * session's state, in order: RAFTLOCK_SESSION_JEOPARDY (reason
 * RAFTLOCK_ETIMEDOUT) when validity runs out, RAFTLOCK_SESSION_SAFE
 * (reason 0) when it resumes, then RAFTLOCK_SESSION_LOST at most once, with
 * the reason on_lost gets (on_event runs first, then on_lost). A session
 * lost while valid gets only RAFTLOCK_SESSION_LOST. The state may have
 * moved on by the time the callback runs: raftlock_session_valid() tells
 * the present. The session callbacks of one client run one at a time (a
 * lock or watch callback may run meanwhile on the I/O thread); none runs
 * for a session once raftlock_session_close() has begun on it. Same rules
 * as on_lost: keep it short, do not close the client, close other
 * sessions only.
 */
typedef void (*raftlock_session_event_cb)(raftlock_session *session,
					  enum raftlock_session_event event, int reason, void *arg);

/* What the cluster tells a holder about one of its grants
 * (docs/GUARANTEES.md, revocation). */
enum raftlock_lock_event {
	/* The grant was revoked (raftlock_revoke, or the lock's maximum hold
	 * time): the handle holds nothing any more, its token is no longer
	 * current, and the lock has passed on. Stop acting on it now. */
	RAFTLOCK_LOCK_REVOKED = 1,
	/* The holder is asked to release the lock (a cooperative revocation,
	 * or a maximum hold time with a revoke grace): the grant is revoked
	 * at the cluster's deadline unless released first. */
	RAFTLOCK_LOCK_RELEASE_REQUESTED = 2,
};

/*
 * Called on the client's I/O thread, without the client lock, when the
 * leader pushes a lock event for one of the session's grants: name (valid
 * for the call) and token say which; raftlock_lock_token() of the handle
 * that held it is already 0 for RAFTLOCK_LOCK_REVOKED. Events go to the
 * connection that keeps the session: one pushed while the client is
 * between connections is not repeated (the token is superseded all the
 * same; raftlock_check_token() says so). Rules of the asynchronous lock
 * callbacks: keep it short, call no blocking function of the client, do
 * not close the session or the client (raftlock_lock_release_async may be
 * called). None runs once raftlock_session_close() has begun.
 */
typedef void (*raftlock_lock_event_cb)(raftlock_session *session, enum raftlock_lock_event event,
				       const char *name, uint64_t token, void *arg);

struct raftlock_session_options {
	unsigned ttl_ms;                  /* lease length; 0 = 10000 ms. Range TTL_MIN..MAX,
					     and at least RAFTLOCK_TTL_ELECTION_FACTOR times
					     the cluster's election timeout */
	raftlock_session_lost_cb on_lost; /* may be NULL */
	void *on_lost_arg;
	/* How long the library keeps renewing a session in jeopardy before
	 * it declares it lost on its own: 0 = RAFTLOCK_GRACE_TTLS times the
	 * TTL (docs/GUARANTEES.md rule 8 says why). Longer is safe: the
	 * cluster decides expiry, and says so at the next keepalive. */
	unsigned grace_ms;
	raftlock_session_event_cb on_event; /* may be NULL */
	void *on_event_arg;
	raftlock_lock_event_cb on_lock_event; /* may be NULL */
	void *on_lock_event_arg;
	/*
	 * Crash-fast release (docs/GUARANTEES.md rule 10b): when true, the
	 * session is bound to the connection that keeps it (the leader's):
	 * when that connection closes -- the process died, the kernel closed
	 * its socket -- the cluster ends the session bind_grace_ms later
	 * (0 = RAFTLOCK_BIND_GRACE_DEFAULT_MS; RAFTLOCK_BIND_GRACE_MIN_MS ..
	 * RAFTLOCK_BIND_GRACE_MAX_MS, else raftlock_session_open returns
	 * RAFTLOCK_EINVAL) unless another connection of this client takes it
	 * over first, and its locks pass on as on expiry (lock-delays run).
	 * So the library treats a lost connection as a lost lease at once:
	 * validity ends (RAFTLOCK_SESSION_JEOPARDY) and comes back only when
	 * a keepalive on a new connection is acknowledged, which proves the
	 * cluster still holds the session. A paused process whose
	 * connection stays open keeps the TTL rule.
	 */
	bool bind_to_connection;
	unsigned bind_grace_ms;
};

/*
 * Opens a session (replicated through Raft before it returns) and starts
 * keeping it alive: a keepalive every TTL/3 from the client's keepalive
 * thread. opts may be NULL (every field 0: the defaults). *out is owned by
 * the caller: free it with raftlock_session_close().
 * The session gets a secret of RAFTLOCK_SECRET_MIN bytes from getrandom(),
 * which the library keeps and sends with the session's every keepalive and
 * lock request; only this process can act on the session (GUARANTEES rule
 * 14). The secret is not shown through this API.
 * Errors: RAFTLOCK_EINVAL (ttl out of range, or below
 * RAFTLOCK_TTL_ELECTION_FACTOR times the cluster's election timeout: the
 * message names the minimum), RAFTLOCK_ETIMEDOUT,
 * RAFTLOCK_ECONNECTION, RAFTLOCK_EUNAVAILABLE, RAFTLOCK_ELIMIT, RAFTLOCK_ENOMEM,
 * RAFTLOCK_ETLS (every node refused TLS; see raftlock_client_options),
 * RAFTLOCK_EPERM (authentication on: the client's token is unknown, or
 * it presented none), RAFTLOCK_EOVERLOAD, RAFTLOCK_ENOSPC (the last
 * refusal of a node at the timeout), RAFTLOCK_EINTERNAL (the kernel gave
 * no random bytes), RAFTLOCK_EPROTO (an answer without a session id this
 * client can use: the cluster may hold a session, as below),
 * RAFTLOCK_ESTATE (bind_to_connection on a cluster whose every voter does
 * not run a build that supports it yet: the message says to upgrade).
 * The open is sent again until a node answers it, so an open that failed
 * after it was sent may still have been applied: RAFTLOCK_ETIMEDOUT (its
 * answer was lost, the leader changed), and RAFTLOCK_EUNAVAILABLE,
 * RAFTLOCK_EOVERLOAD, RAFTLOCK_ENOSPC, RAFTLOCK_ETLS, RAFTLOCK_ELIMIT or
 * RAFTLOCK_ENOMEM when they came after an attempt that was sent. The
 * cluster then holds a session this client never learns of: it holds no
 * lock and gets no keepalive, so it expires after its TTL, and until then
 * counts toward the sessions of the client's identity
 * (max-sessions-per-identity: an open past it gets RAFTLOCK_ELIMIT).
 * RAFTLOCK_ECONNECTION: never sent, no session was opened.
 */
RAFTLOCK_API int raftlock_session_open(raftlock_client *client,
				       const struct raftlock_session_options *opts,
				       raftlock_session **out);

/*
 * Closes the session on the server (all its locks are released and its
 * waits canceled) and frees it, with any lock handles, lock sets
 * (raftlock_multi) and leaderships (raftlock_leader) still open on it:
 * those must not be used or freed after.
 * Lock calls on it in other threads end first: a blocked
 * raftlock_lock_acquire() returns RAFTLOCK_ECANCELED; new ones fail with
 * RAFTLOCK_ECANCELED, and so do those that still wait for an earlier
 * request of their handle (nothing was sent); a try-lock, release or
 * proclaim already sent is waited for (up to its request timeout: the
 * close may take longer than one). Those threads must not use the
 * session or its handles after that.
 * Returns the error of the close request, but frees the session in any
 * case; the server expires a session it never heard closing:
 * RAFTLOCK_EUNKNOWN (sent, not confirmed within the request timeout: it
 * may have closed it), RAFTLOCK_ECONNECTION, RAFTLOCK_ETLS,
 * RAFTLOCK_ELIMIT or RAFTLOCK_ENOMEM (never sent), and the other
 * transport errors. A close
 * whose answer was lost and whose retry finds the session gone (closed
 * by the first attempt) returns 0. A session in jeopardy is closed like a
 * valid one. A session lost because its grace period passed (the server
 * may not have expired it yet) is still closed on the server, on a
 * best-effort basis bounded by one second, and the call returns 0 for it;
 * so does a session the server had already declared expired (nothing is
 * left to close), and one lost because the cluster refused its secret
 * (nothing is sent: the cluster expires it after its TTL).
 * Asynchronous calls on the session finish first: their callbacks have run
 * when this returns (an asynchronous acquire that waits ends at once, with
 * RAFTLOCK_ECANCELED), so it must not be called from such a callback.
 * NULL is a no-op returning 0.
 */
RAFTLOCK_API int raftlock_session_close(raftlock_session *session);

/* The server-assigned session id (never reused). */
RAFTLOCK_API uint64_t raftlock_session_id(const raftlock_session *session);

/*
 * Until when the session is certainly valid, in milliseconds of
 * CLOCK_BOOTTIME: the send time of the last acknowledged keepalive plus the
 * TTL minus the safety margin. In jeopardy it is in the past, and moves on
 * when a keepalive is acknowledged. 0 once the session is lost: a lost
 * session stays lost. Compare with raftlock_now_ms().
 */
RAFTLOCK_API uint64_t raftlock_session_valid_until(const raftlock_session *session);

/* CLOCK_BOOTTIME in milliseconds: the clock of valid_until. */
RAFTLOCK_API uint64_t raftlock_now_ms(void);

/* True while now < valid_until. */
RAFTLOCK_API bool raftlock_session_valid(const raftlock_session *session);

/* -------------------------------------------------------------- locks -- */

typedef struct raftlock_lock raftlock_lock;

enum raftlock_kind {
	RAFTLOCK_MUTEX = 1,
	RAFTLOCK_RWLOCK = 2,
	RAFTLOCK_SEMAPHORE = 3,
};

enum raftlock_mode {
	RAFTLOCK_EXCLUSIVE = 0,
	RAFTLOCK_SHARED = 1,
};

/*
 * What a lock is. The first acquire of a name creates the lock with these
 * options. Mutexes and read-write locks are one family: an exclusive
 * acquire of either kind works on both, and the first read-write acquire
 * of a mutex makes it a read-write lock (a mutex acquire is never shared).
 * A semaphore is another family: the other kind, or another limit, is
 * refused with RAFTLOCK_EKIND. The lock-delay is the creator's.
 */
struct raftlock_lock_options {
	enum raftlock_kind kind; /* 0 = RAFTLOCK_MUTEX */
	uint32_t limit;          /* semaphores: number of permits */
	unsigned lock_delay_ms;  /* unavailable this long after its holder's
				    session expires (or its grant is revoked);
				    0 = none, at most RAFTLOCK_LOCK_DELAY_MAX_MS */
	/* The creator's, like lock_delay_ms: every grant of the lock is
	 * revoked max_hold_ms after it was made (0 = no limit, at most
	 * RAFTLOCK_MAX_HOLD_MAX_MS); with
	 * revoke_grace_ms (at most RAFTLOCK_REVOKE_GRACE_MAX_MS), the holder
	 * is first asked to release (RAFTLOCK_LOCK_RELEASE_REQUESTED) and
	 * revoked that much later. raftlock_lock_new() refuses a value above
	 * its bound. */
	unsigned max_hold_ms;
	unsigned revoke_grace_ms;
};

/*
 * Makes a lock handle on `name` for this session. A handle is an owner:
 * acquiring twice through one handle nests (same token, two releases);
 * another handle, even in the same thread, is another owner. No request is
 * sent. opts may be NULL (a mutex). *out is owned by the caller: free it with
 * raftlock_lock_free(), or leave it to its session's close, which frees it.
 * Errors: RAFTLOCK_EINVAL (empty name; an unknown kind, a semaphore without
 * a limit; lock_delay_ms above RAFTLOCK_LOCK_DELAY_MAX_MS, max_hold_ms
 * above RAFTLOCK_MAX_HOLD_MAX_MS or revoke_grace_ms above
 * RAFTLOCK_REVOKE_GRACE_MAX_MS, which a cluster would refuse: refused here,
 * nothing sent, *out unchanged), RAFTLOCK_ETOOBIG (name longer than
 * RAFTLOCK_NAME_MAX), RAFTLOCK_ENOMEM.
 */
RAFTLOCK_API int raftlock_lock_new(raftlock_session *session, const char *name,
				   const struct raftlock_lock_options *opts, raftlock_lock **out);

/*
 * What a call that changes a lock tells its caller (GUARANTEES rules 6, 12).
 * Every such request carries the session's sequence number; the library
 * sends it again with the same number (after a reconnect, a leader change,
 * or a RAFTLOCK_EOVERLOAD answer) until the cluster gives it a result, so
 * the server executes it at most once. Its return then means:
 *   - 0 or an error of the lock's state (RAFTLOCK_EBUSY, RAFTLOCK_ENOTHOLDER,
 *     RAFTLOCK_EKIND, RAFTLOCK_ELIMIT, RAFTLOCK_EINVAL, ...): the cluster
 *     executed the request with this result (or refused it whole, as for a
 *     malformed request: RAFTLOCK_EPROTO, RAFTLOCK_EINVAL, RAFTLOCK_ETOOBIG;
 *     or RAFTLOCK_EPERM: the cluster does not accept the session's secret,
 *     as for a session opened before the cluster required secrets).
 *     RAFTLOCK_EPROTO also comes from a server older than this library's
 *     protocol, which cannot read the request's sequence number and so did
 *     not execute it: upgrade the servers before the clients.
 *   - RAFTLOCK_EUNKNOWN: the request was sent but no result came within
 *     the call's time: it may or may not have executed, and it may still
 *     execute. The library keeps sending it in the background with the
 *     same sequence number until the cluster answers (as long as the
 *     session lives); the next call through the same handle waits for
 *     that first (see each call for what the handle then holds).
 *   - RAFTLOCK_ECONNECTION: it was never sent (no node could be reached):
 *     nothing happened.
 *   - RAFTLOCK_ENOMEM: out of memory in the library before the request
 *     was sent: nothing happened. What keeps a request going in the
 *     background is set aside before it is sent, so a request once sent
 *     is never dropped for want of memory; but an acquire given up (as
 *     for RAFTLOCK_EUNKNOWN) without memory for the release of a late
 *     grant ends RAFTLOCK_ENOMEM too: it is still sent until settled, and
 *     a late grant stays held until the session ends.
 *   - RAFTLOCK_ETLS: every node refused TLS while the call waited for a
 *     connection. Never sent, nothing happened, unless an earlier attempt
 *     went out on a connection that has since been refused: then it is
 *     RAFTLOCK_EUNKNOWN, as for a timeout.
 *   - RAFTLOCK_ESESSION: the session has ended: it holds nothing.
 *   - RAFTLOCK_ESTATE: an earlier request through this handle whose outcome
 *     was unknown is still being sent and did not settle within the
 *     client's request timeout: nothing was sent; call again later.
 */

/*
 * Takes the lock if it is free now (exclusive mode, one permit); never
 * waits. On success *token (if not NULL) is the fencing token of the grant.
 * 0: the handle holds the lock (nested if it held it already).
 * Errors: RAFTLOCK_EBUSY (held by another owner: this handle holds nothing
 * new), RAFTLOCK_ESESSION, RAFTLOCK_EKIND, RAFTLOCK_ELIMIT,
 * RAFTLOCK_ECONNECTION, RAFTLOCK_ESTATE, RAFTLOCK_EUNKNOWN (sent, not
 * answered within the request timeout: the handle does not hold the lock
 * for the caller; should the lock turn out granted, the library releases
 * it), RAFTLOCK_ENOMEM (also as RAFTLOCK_EUNKNOWN, but without memory to
 * release a late grant: should the lock turn out granted, it stays held
 * until the session ends), RAFTLOCK_ENOTHOLDER (the grant was revoked before the call could
 * return it: on_lock_event gets RAFTLOCK_LOCK_REVOKED for a token the
 * caller never saw, unless that event was lost with a connection, and the
 * handle holds nothing).
 */
RAFTLOCK_API int raftlock_lock_try(raftlock_lock *lock, uint64_t *token);

/*
 * Takes the lock in `mode` with `permits` permits (semaphores; 0 means 1),
 * waiting in the server's FIFO queue up to timeout_ms (0: do not wait, as
 * raftlock_lock_try(); a negative value: wait until granted or the session
 * ends). The grant is pushed by the server; nothing polls.
 * Returns, with timeout_ms > 0, within timeout_ms plus
 * min(request timeout, 1 s), and then:
 *   - 0: the handle holds the lock and *token is its token (also when the
 *     grant came after the timeout but before the cancel: the caller holds
 *     it and releases it as any other grant);
 *   - RAFTLOCK_ETIMEDOUT: the lock was not granted in time and the wait is
 *     no longer queued on the server (the library canceled it and the
 *     cluster confirmed): the handle neither holds nor waits; also when
 *     the time ran out before the call could send anything (an earlier
 *     request of the handle whose outcome was unknown had not settled):
 *     nothing was sent;
 *   - RAFTLOCK_EUNKNOWN: the cluster did not confirm either within the
 *     bound (unreachable, failing over): the library goes on canceling the
 *     wait in the background and releases the lock should it turn out
 *     granted; the handle does not hold it for the caller;
 *   - RAFTLOCK_EDEADLK: waiting would close a cycle of waiting sessions
 *     (a session this one would wait behind waits, directly or not, for
 *     a lock this session holds): nothing is queued, the handle neither
 *     holds nor waits;
 *   - RAFTLOCK_ENOTHOLDER: the lock was granted, but the grant was
 *     revoked (raftlock_revoke(), a maximum hold time) before the call
 *     could return it, also when it came after the timeout: the handle
 *     neither holds nor waits (a hold it had before is gone too), and
 *     on_lock_event gets RAFTLOCK_LOCK_REVOKED for a token the caller
 *     never saw, unless that event was lost with a connection (the
 *     server then answers the acquire, sent again, from its record);
 *   - RAFTLOCK_ESESSION: the session ended (the server drops its waits),
 *     also when a grant came (after the timeout, too) but the session's
 *     loss was known before the call took it in: it holds nothing;
 *     RAFTLOCK_ECANCELED: another thread closed the session meanwhile;
 *   - RAFTLOCK_EINVAL: a NULL lock or an unknown mode (nothing was sent);
 *   - the other errors of raftlock_lock_try() (RAFTLOCK_ESTATE: nothing
 *     was sent).
 */
RAFTLOCK_API int raftlock_lock_acquire(raftlock_lock *lock, enum raftlock_mode mode,
				       uint32_t permits, int timeout_ms, uint64_t *token);

/*
 * Releases one level of nesting (all permits of this handle for
 * semaphores). *remaining (if not NULL) is the nesting depth left; the lock
 * is free for others when it reaches 0.
 * Errors: RAFTLOCK_ENOTHOLDER (this handle holds nothing), RAFTLOCK_ESESSION
 * (the session ended: nothing is held), RAFTLOCK_ECONNECTION (not sent:
 * still held), RAFTLOCK_ESTATE (not sent: still held), and
 * RAFTLOCK_EUNKNOWN: the release was sent but not confirmed within the
 * request timeout; it is still being sent and will execute (unless the
 * session ends first, which releases everything anyway). The handle no
 * longer holds that level for the caller: after the last level its token
 * is 0 and must not be used; a new acquire through the handle is sent only
 * once the release has been applied. RAFTLOCK_ENOMEM: nothing was sent;
 * the handle still holds the level.
 */
RAFTLOCK_API int raftlock_lock_release(raftlock_lock *lock, uint32_t *remaining);

/* The token of this handle's current grant, 0 if it holds nothing: never
 * acquired, released (also a release whose outcome is RAFTLOCK_EUNKNOWN),
 * or its session lost (raftlock_session_valid_until() is 0). */
RAFTLOCK_API uint64_t raftlock_lock_token(const raftlock_lock *lock);

/*
 * Asynchronous try-lock and release, for programs that drive many locks
 * from one thread (an event loop): the call only sends the request and
 * returns; `cb` runs later, exactly once, on the client's I/O thread, with
 * no library lock held. For a try-lock, status is what raftlock_lock_try()
 * would return and value the fencing token (0 on failure): cb is the
 * caller taking the grant in, so a grant revoked before cb runs (its
 * revocation read with it) gives RAFTLOCK_ENOTHOLDER, the handle holding
 * nothing, also within cb, and a grant to a session lost before cb runs
 * (its loss read with it) RAFTLOCK_ESESSION; for a release, status is what
 * raftlock_lock_release() would return and value the levels still held
 * (0 on failure, whatever is held: raftlock_lock_token() tells).
 * A request sent but unanswered within the client's request timeout ends
 * with RAFTLOCK_EUNKNOWN (one never sent, with RAFTLOCK_ECONNECTION) and,
 * as for the blocking calls, it is still sent in the background: a grant
 * that comes later is released by the library, a release executes later.
 *
 * Returns 0 when the request was sent (cb will run), or an error and cb
 * will not run: RAFTLOCK_EINVAL (NULL lock or cb), RAFTLOCK_ESESSION,
 * RAFTLOCK_ECANCELED (the session is closing), RAFTLOCK_ESTATE (an earlier
 * request of this handle whose outcome was unknown is still being sent:
 * an event loop cannot wait for it; try again later), RAFTLOCK_ENOMEM.
 *
 * Within cb, raftlock_errmsg(client) of the calling (I/O) thread gives a
 * failing status's message, as after the blocking call (a node's reason
 * for RAFTLOCK_EPERM, the limit that refused, ...): "acquire 'name': ..."
 * or "release 'name': ..." (try-locks are acquires); read it before cb
 * returns, it is that thread's until its next failure.
 *
 * Threading: callable from any thread, also from a callback. Callbacks on
 * the I/O thread run one at a time and delay that client's other replies
 * while they run, so keep them short. A callback must not call the blocking
 * functions of its client, nor close the session or the client (that
 * would wait for the callback itself). Ownership: the handle must stay
 * alive until its callbacks have run; a session close waits for them.
 * cb may free its handle (raftlock_lock_free) when no other call of the
 * handle is in flight: the library does not touch it after cb.
 */
typedef void (*raftlock_lock_cb)(raftlock_lock *lock, int status, uint64_t value, void *arg);
RAFTLOCK_API int raftlock_lock_try_async(raftlock_lock *lock, raftlock_lock_cb cb, void *arg);
RAFTLOCK_API int raftlock_lock_release_async(raftlock_lock *lock, raftlock_lock_cb cb, void *arg);

/*
 * Asynchronous acquire that waits: raftlock_lock_acquire() (mode,
 * permits, timeout_ms) whose wait sits in the server's FIFO queue while
 * the caller's thread goes on; the grant is pushed, nothing polls. The
 * rules of raftlock_lock_try_async() apply (cb exactly once on the I/O
 * thread, value the token, threading, ownership, return value), and:
 *   - status 0: the handle holds the lock; RAFTLOCK_EBUSY (timeout_ms 0
 *     only), RAFTLOCK_EKIND, ...: as raftlock_lock_acquire();
 *   - RAFTLOCK_ETIMEDOUT: the server ended the wait at timeout_ms (its
 *     own deadline, counted from when it queued the acquire): the handle
 *     neither holds nor waits;
 *   - RAFTLOCK_EUNKNOWN: no final answer within timeout_ms plus the
 *     client's request timeout (unreachable, failing over): the handle
 *     does not hold the lock for the caller; a grant that comes later is
 *     released by the library, and the server ends the wait at its
 *     deadline;
 *   - RAFTLOCK_ENOTHOLDER, value 0: the lock was granted, but the grant
 *     was revoked before cb ran (its revocation read with it): the handle
 *     neither holds nor waits, also within cb, and on_lock_event gets
 *     RAFTLOCK_LOCK_REVOKED for a token the caller never saw, as for
 *     raftlock_lock_acquire();
 *   - RAFTLOCK_ECANCELED: the session began to close (raftlock_session_close
 *     ends the wait at once rather than waiting for it; the server drops
 *     the session's waits with it); RAFTLOCK_ESESSION: the session was
 *     lost while the acquire waited, or before cb took its grant in.
 * A negative timeout_ms waits until granted or the session ends. One
 * waiting acquire per handle at a time: another returns RAFTLOCK_ESTATE
 * (and so does one while an earlier request of the handle whose outcome
 * was unknown is still being sent). RAFTLOCK_EINVAL: NULL lock or cb, an
 * unknown mode.
 */
RAFTLOCK_API int raftlock_lock_acquire_async(raftlock_lock *lock, enum raftlock_mode mode,
					     uint32_t permits, int timeout_ms, raftlock_lock_cb cb,
					     void *arg);

/* Frees the handle. A held lock stays held until released or the session
 * ends: release first. NULL is a no-op. */
RAFTLOCK_API void raftlock_lock_free(raftlock_lock *lock);

/* ------------------------------------------------------- lock sets -- */

/*
 * A set of locks taken atomically (docs/GUARANTEES.md, multi-acquire):
 * the cluster grants every lock of the set in one step, or none. A set
 * that waits queues on every lock at once, FIFO with the other waiters of
 * each, and is granted when it heads every queue (no starvation). Each
 * lock gets its own fencing token.
 */
typedef struct raftlock_multi raftlock_multi;

struct raftlock_multi_item {
	const char *name;                         /* copied */
	enum raftlock_mode mode;                  /* as raftlock_lock_acquire() */
	uint32_t permits;                         /* semaphores; 0 means 1 */
	const struct raftlock_lock_options *opts; /* NULL: a mutex; copied */
};

/*
 * Makes a handle on a set of n items (1..RAFTLOCK_MULTI_MAX) of this
 * session. The items may come in any order (the set is kept sorted by
 * name, the order the cluster takes tokens in); a name given twice is
 * RAFTLOCK_EINVAL. The set is one owner: it is acquired and released as
 * a whole. No request is sent. *out is owned by the caller: free it with
 * raftlock_multi_free(), or leave it to its session's close, which frees
 * it (then neither use nor free it).
 * Errors: RAFTLOCK_EINVAL (NULL arguments, n out of range, a name twice,
 * an item raftlock_lock_new() refuses, an item whose opts set max_hold_ms
 * or revoke_grace_ms: a set does not create locks with those), RAFTLOCK_ETOOBIG,
 * RAFTLOCK_ENOMEM.
 */
RAFTLOCK_API int raftlock_multi_new(raftlock_session *session,
				    const struct raftlock_multi_item *items, size_t n,
				    raftlock_multi **out);

/*
 * Takes every lock of the set, waiting in the server's queues up to
 * timeout_ms (0: do not wait, RAFTLOCK_EBUSY unless all are free now;
 * negative: until granted or the session ends). Blocks the calling
 * thread; the grant is pushed. Returns what raftlock_lock_acquire()
 * returns, for the whole set: 0, the set holds every lock
 * (raftlock_multi_token() gives each token); RAFTLOCK_ETIMEDOUT, the set
 * holds nothing and waits nowhere; RAFTLOCK_EDEADLK, the wait would close
 * a cycle of sessions waiting on each other (deadlock.h): nothing was
 * queued, release what the session holds and try again; RAFTLOCK_EBUSY,
 * RAFTLOCK_EKIND, RAFTLOCK_ELIMIT, RAFTLOCK_EINVAL: refused whole (EBUSY
 * also when the set holds its locks already: sets do not nest);
 * RAFTLOCK_EUNKNOWN: the set does not hold anything for the caller, and
 * should the cluster grant it later the library releases every lock;
 * RAFTLOCK_ENOTHOLDER: the set was granted, but one of its locks was
 * revoked (raftlock_revoke()) before the call could return the grant: the
 * set holds none of its locks (each raftlock_multi_token() is 0), the
 * library releases the others in the background (the set's next call
 * waits for those releases), and on_lock_event gets
 * RAFTLOCK_LOCK_REVOKED for the token the caller never saw;
 * RAFTLOCK_ENOMEM: as RAFTLOCK_ENOTHOLDER, but the library had no memory
 * to release the others: they stay held until the session ends (or, as
 * for one lock, nothing was sent, or a late grant stays held so);
 * RAFTLOCK_ESTATE: an earlier request of the set is still being sent;
 * RAFTLOCK_ESESSION, RAFTLOCK_ECONNECTION: as for one lock.
 */
RAFTLOCK_API int raftlock_multi_acquire(raftlock_multi *set, int timeout_ms);

/*
 * raftlock_multi_acquire() without blocking: cb runs once on the client's
 * I/O thread with the status raftlock_multi_acquire() would return
 * (raftlock_multi_token() gives the tokens, also within cb). cb is the
 * caller taking the grant in: a lock of the set revoked before cb runs
 * (its revocation read with the grant) makes the status
 * RAFTLOCK_ENOTHOLDER, with the set holding none of its locks and the
 * others released (RAFTLOCK_ENOMEM: without memory for that, held until
 * the session ends), as for raftlock_multi_acquire(). Those releases are
 * still being sent when cb runs: an acquire of the set sent at once (also
 * from cb) returns RAFTLOCK_ESTATE until the cluster has applied them,
 * usually within a round trip, so retry it after a short delay, or call
 * raftlock_multi_acquire() (not from cb), which waits for them. The rules
 * of raftlock_lock_acquire_async() apply (threading, ownership, errors).
 */
typedef void (*raftlock_multi_cb)(raftlock_multi *set, int status, void *arg);
RAFTLOCK_API int raftlock_multi_acquire_async(raftlock_multi *set, int timeout_ms,
					      raftlock_multi_cb cb, void *arg);

/* The number of items of the set, and the token of item i (in the order
 * they were given to raftlock_multi_new()), 0 while the set holds
 * nothing or its session is lost; 0 too for a lock of the set revoked
 * after the set was granted (the set still holds the others: release
 * it). */
RAFTLOCK_API size_t raftlock_multi_size(const raftlock_multi *set);
RAFTLOCK_API uint64_t raftlock_multi_token(const raftlock_multi *set, size_t i);

/*
 * Releases every lock the set holds, one request per lock (a release need
 * not be atomic), all sent before any is waited for: the call takes at
 * most the request timeout in all, the wait for an earlier request of the
 * set still being sent included. Each release ends as
 * raftlock_lock_release() says; the call returns 0 when each released
 * its lock, else the error of one lock, the one the caller most needs:
 *   - first, that of a lock the set still holds (RAFTLOCK_ECONNECTION,
 *     RAFTLOCK_ESTATE, RAFTLOCK_ETLS, RAFTLOCK_ENOMEM, ...: not sent; its
 *     raftlock_multi_token() is still its token, and calling
 *     raftlock_multi_release() again releases what the set still holds);
 *   - else RAFTLOCK_EUNKNOWN: a release was sent but not confirmed; it
 *     will execute, and the set holds nothing for the caller;
 *   - else the first other error (RAFTLOCK_ESESSION, RAFTLOCK_ENOTHOLDER:
 *     nothing is held).
 * raftlock_errmsg() names the lock. RAFTLOCK_ENOTHOLDER when the set
 * holds nothing.
 */
RAFTLOCK_API int raftlock_multi_release(raftlock_multi *set);

/* Frees the handle. Held locks stay held until released or the session
 * ends: release first. NULL is a no-op. */
RAFTLOCK_API void raftlock_multi_free(raftlock_multi *set);

/*
 * Asks the service whether `token` belongs to a current holder of `name`
 * (Chubby's sequencer check). *current is set to true or false.
 * Errors: RAFTLOCK_EINVAL (NULL client or current, an empty name),
 * RAFTLOCK_ETOOBIG (a name over RAFTLOCK_NAME_MAX bytes), RAFTLOCK_EPERM
 * (authentication: the identity may not read the name), RAFTLOCK_ETIMEDOUT,
 * RAFTLOCK_ECONNECTION, RAFTLOCK_EUNAVAILABLE, RAFTLOCK_EOVERLOAD (the last
 * refusal of a node at the timeout), RAFTLOCK_ETLS or RAFTLOCK_ELIMIT (every
 * node refused the connection), RAFTLOCK_ENOMEM (here or on the node),
 * RAFTLOCK_EPROTO (an answer that is not a check's).
 */
RAFTLOCK_API int raftlock_check_token(raftlock_client *client, const char *name, uint64_t token,
				      bool *current);

/*
 * Revokes grants of `name` (docs/GUARANTEES.md, revocation): the grant
 * whose token is `token`, or every current grant when token is 0. With
 * grace_ms 0 each is revoked at once: it ends whatever its nesting, its
 * token is no longer current, its holder's library gets
 * RAFTLOCK_LOCK_REVOKED, and the lock passes on (after its lock-delay, if
 * it has one). With grace_ms > 0 (cooperative) each holder is first asked
 * to release (RAFTLOCK_LOCK_RELEASE_REQUESTED) and what it still holds
 * grace_ms later is revoked. With authentication on the caller needs
 * admin on the name. *count (if not NULL) is the number of grants revoked
 * or asked. Thread-safe; blocks for at most the request timeout.
 * One call runs at most once: the library sends the request again only
 * after an answer that proves it did not run (a redirect to the leader, a
 * node not ready, overloaded or short of disk). Once it was handed to a
 * connection, the loss of that connection, the leader losing its
 * leadership before the answer, or the timeout ends the call with
 * RAFTLOCK_EUNKNOWN: it may have run, or may still run (also when the
 * connection failed before the request left, which the library cannot
 * tell apart). Calling again then is a new revoke: with token 0 it would
 * revoke the next holder too, so read the holders (raftlock_lock_get) or
 * check the token (raftlock_check_token) first, and name the token to
 * revoke one grant.
 * Errors: RAFTLOCK_ENOTFOUND (no such lock, or no current grant with that
 * token: nothing changed), RAFTLOCK_EUNKNOWN (above), RAFTLOCK_EPERM,
 * RAFTLOCK_EINVAL (empty name, grace_ms above RAFTLOCK_REVOKE_GRACE_MAX_MS),
 * RAFTLOCK_ETOOBIG, RAFTLOCK_ECONNECTION
 * (never sent: nothing changed); at the timeout, after refusals that prove
 * nothing ran: RAFTLOCK_EUNAVAILABLE, RAFTLOCK_EOVERLOAD (a full disk
 * refuses no revoke: letting go needs no room);
 * RAFTLOCK_ETLS or RAFTLOCK_ELIMIT (every node refused the connection
 * before it was sent: nothing changed), RAFTLOCK_ENOMEM.
 */
RAFTLOCK_API int raftlock_revoke(raftlock_client *client, const char *name, uint64_t token,
				 unsigned grace_ms, uint32_t *count);

/* ----------------------------------------------------------- watches -- */

/* Where a change sits in the cluster's history: the raft index of the log
 * entry that made it and its rank among that entry's changes (from 1),
 * and the cluster whose history that is (raftlock_status's cluster_id).
 * Positions are the same on every node and grow along the history. The
 * state events (HOLDING, WAITING, CURRENT) carry offset
 * RAFTLOCK_WATCH_OFFSET_END: "after the whole entry". A cluster restored
 * from a backup has a new cluster_id and numbers its log from 1 again:
 * a position of the old one names nothing in it. cluster_id is 0 when
 * not known (from a node of an older build): a watch resumed from such a
 * position gets HISTORY_LOST and the current state from a node of this
 * build. */
struct raftlock_position {
	uint64_t index;
	uint32_t offset;
	uint64_t cluster_id;
};
#define RAFTLOCK_WATCH_OFFSET_END UINT32_MAX

enum raftlock_watch_kind {
	RAFTLOCK_WATCH_GRANTED = 1,      /* a holder was added; token is its token */
	RAFTLOCK_WATCH_RELEASED = 2,     /* a holder let go, or its session was closed */
	RAFTLOCK_WATCH_EXPIRED = 3,      /* a holder's session expired */
	RAFTLOCK_WATCH_QUEUED = 4,       /* a waiter joined the queue */
	RAFTLOCK_WATCH_DEQUEUED = 5,     /* a waiter left it ungranted: status says why
					    (ECANCELED, ETIMEDOUT, ESESSION) */
	RAFTLOCK_WATCH_REVOKED = 6,      /* a grant was taken away */
	RAFTLOCK_WATCH_HISTORY_LOST = 7, /* the changes after `position` are no longer
					    kept: the current state follows */
	RAFTLOCK_WATCH_HOLDING = 8,      /* current state: a holder */
	RAFTLOCK_WATCH_WAITING = 9,      /* current state: a waiter, in queue order */
	RAFTLOCK_WATCH_CURRENT = 10,     /* the state just sent is the one at `position` */
	RAFTLOCK_WATCH_PROCLAIMED = 11,  /* a holder published a new value (elections) */
	RAFTLOCK_WATCH_ERROR = 12        /* the watch ended: status (EPERM, EINVAL, ...) */
};

/* One event. name, and the event, are borrowed for the callback only.
 * A granted waiter shows as GRANTED alone (it left the queue). */
struct raftlock_watch_event {
	enum raftlock_watch_kind kind;
	struct raftlock_position position;
	const char *name; /* the lock; for HISTORY_LOST and CURRENT the prefix */
	uint64_t session;
	uint64_t owner; /* the holder's or waiter's lock-handle id */
	uint64_t token;
	enum raftlock_mode mode;
	uint32_t permits;
	int status;
	const char *value; /* elections: the holder's published value ("" none) */
};

typedef struct raftlock_watch_handle raftlock_watch_handle;
typedef void (*raftlock_watch_cb)(const struct raftlock_watch_event *ev, void *userdata);

/*
 * Watches the locks whose name starts with prefix ("" = every lock):
 * grants, releases, expiries, queue changes and revocations, delivered in
 * the order of the cluster's log, each with its position
 * (docs/GUARANTEES.md, watches).
 *
 * from NULL: the current state first (HOLDING and WAITING events, then
 * CURRENT with its position), then every change after it. from a position
 * (one delivered earlier, say by another process, its cluster_id with
 * it): every change after it; when the cluster no longer keeps them all,
 * or the position is not of its history (another cluster_id: a cluster
 * restored from a backup since; or none), HISTORY_LOST, then the current
 * state and CURRENT, then the changes after that. The library
 * remembers the last position delivered and, after a reconnect or a
 * leader change, resumes from it on whichever node it reaches: no change
 * is delivered twice or skipped, or HISTORY_LOST says so.
 *
 * cb runs on the client's I/O thread, one event at a time, in order; it
 * must not block nor call the blocking functions of this client. An
 * ERROR event (the node refused the watch: RAFTLOCK_EPERM without read
 * permission on the prefix, RAFTLOCK_ELIMIT when the client already has
 * RAFTLOCK_WATCH_MAX watches and observers; RAFTLOCK_ENOMEM when the
 * library had no memory for an event, which was not delivered, nor any
 * after it) is the last one. A node that
 * cannot start the watch's state in time (RAFTLOCK_EUNAVAILABLE: it has
 * not applied the state's index within 30 s; RAFTLOCK_EOVERLOAD: no
 * snapshot reader free, or no room, within 5.5 minutes) is no ERROR: the
 * library sends the watch again, to another node (moving its connection
 * there) or after a back-off; only a fourth RAFTLOCK_EUNAVAILABLE in a
 * row with no event between (every node behind what this client saw: a
 * cluster restored from an older backup, say) is an ERROR. prefix and
 * from are copied.
 *
 * Returns 0 and *out (owned by the caller: end it with
 * raftlock_watch_cancel(), also after an ERROR), or RAFTLOCK_EINVAL (NULL
 * client, prefix, cb or out, a prefix over RAFTLOCK_NAME_MAX bytes),
 * RAFTLOCK_ENOMEM; cb then never runs. Any thread.
 */
RAFTLOCK_API int raftlock_watch(raftlock_client *client, const char *prefix,
				const struct raftlock_position *from, raftlock_watch_cb cb,
				void *userdata, raftlock_watch_handle **out);

/*
 * Ends the watch and frees it. From another thread: when this returns, cb
 * is not running and will not run again. From cb itself (or another
 * callback of the client): the running callback is the last. Every watch
 * must be cancelled before raftlock_client_close(). NULL is a no-op.
 */
RAFTLOCK_API void raftlock_watch_cancel(raftlock_watch_handle *watch);

/* Parses "INDEX.OFFSET" or "INDEX" (offset RAFTLOCK_WATCH_OFFSET_END),
 * each optionally followed by "@CLUSTER" (cluster_id, 0 without), as the
 * CLI prints positions: INDEX and OFFSET in decimal digits, INDEX at most
 * UINT64_MAX and OFFSET at most RAFTLOCK_WATCH_OFFSET_END, CLUSTER in 1
 * to 16 hexadecimal digits. Returns 0 or RAFTLOCK_EINVAL (*pos
 * unchanged). */
RAFTLOCK_API int raftlock_position_parse(const char *text, struct raftlock_position *pos);

/* The name of a kind ("granted", "released", ...), "unknown" otherwise. */
RAFTLOCK_API const char *raftlock_watch_kind_name(enum raftlock_watch_kind kind);

/* --------------------------------------------------------- elections -- */

/* A leadership won by raftlock_campaign(). */
typedef struct raftlock_leader raftlock_leader;

/*
 * Campaigns for `name` (a mutex with a published value) and blocks until
 * this session leads it, or timeout_ms passes (negative: no limit; 0: only
 * if nobody leads, else RAFTLOCK_EBUSY at once). The
 * value (at most RAFTLOCK_VALUE_MAX bytes, "" allowed) is stored with the
 * grant in the replicated state, so observers see the new leader and its
 * value as one change. The token (raftlock_leader_token) is the grant's
 * fencing token: unique and increasing over the life of the cluster, it
 * fences what the leader writes. The leader leads while its session is
 * valid (raftlock_session_valid_until): past that, another may lead.
 * *out is owned by the caller until raftlock_resign(), or until its
 * session's close, which frees it (then neither use nor resign it).
 * Errors: those of raftlock_lock_new() and raftlock_lock_acquire()
 * (RAFTLOCK_ETIMEDOUT: not elected in time, and not campaigning any
 * more; RAFTLOCK_ECANCELED: raftlock_session_close() began in another
 * thread, which waits for the campaign to end: nothing is held),
 * RAFTLOCK_EINVAL (NULL argument, a value too long). Blocking; any
 * thread but the client's callbacks.
 */
RAFTLOCK_API int raftlock_campaign(raftlock_session *session, const char *name, const char *value,
				   int timeout_ms, raftlock_leader **out);

/*
 * Elections underneath: from now on every grant of this handle publishes
 * value (copied; NULL or "": none) in the replicated state, where watches
 * and observers see it (RAFTLOCK_WATCH_GRANTED's value).
 * raftlock_campaign() is a mutex handle with a value. Errors:
 * RAFTLOCK_EINVAL (NULL lock, a value over RAFTLOCK_VALUE_MAX bytes),
 * RAFTLOCK_ENOMEM. Any thread.
 */
RAFTLOCK_API int raftlock_lock_set_value(raftlock_lock *lock, const char *value);

/* The fencing token of the leadership. */
RAFTLOCK_API uint64_t raftlock_leader_token(const raftlock_leader *leader);

/*
 * Publishes a new value (copied; at most RAFTLOCK_VALUE_MAX bytes) for the
 * leadership, fenced by its token: RAFTLOCK_ENOTHOLDER when it was lost
 * to a revocation (or another release), RAFTLOCK_ESESSION when its session
 * ended (expired or closed: nothing is held); in both cases the value is
 * not published. Other errors: as raftlock_lock_release(); after
 * RAFTLOCK_EUNKNOWN the value may still be published, and the next
 * proclaim is sent only once that one is settled (RAFTLOCK_ESTATE, nothing
 * sent, when it is not within the request timeout), so the value
 * proclaimed last is the one published last. Blocking.
 */
RAFTLOCK_API int raftlock_proclaim(raftlock_leader *leader, const char *value);

/*
 * Gives the leadership up (the next campaigner is elected) and frees the
 * handle, whatever the outcome: 0, or the errors of
 * raftlock_lock_release() (RAFTLOCK_EUNKNOWN: the release is still being
 * sent; the session's end releases it in any case). After an error that
 * says nothing was sent (RAFTLOCK_ECONNECTION, RAFTLOCK_ESTATE, ...) the
 * session still leads until it ends: close it to step down. NULL is a
 * no-op.
 */
RAFTLOCK_API int raftlock_resign(raftlock_leader *leader);

/* Who leads `name`, as an observer learns it. value is borrowed for the
 * callback. */
struct raftlock_leader_event {
	bool has_leader;                   /* false: nobody leads now */
	uint64_t session;                  /* the leader's session */
	uint64_t token;                    /* its leadership's fencing token */
	const char *value;                 /* its published value ("" when none) */
	struct raftlock_position position; /* where in the log this became true */
	bool history_lost;                 /* changes in between were not kept: this is the
					      current state, read again */
	int status; /* non-zero: the node refused the observation (RAFTLOCK_EPERM,
		       ...) or the library ran out of memory for it
		       (RAFTLOCK_ENOMEM): this is the last event, and
		       has_leader is false */
};

typedef struct raftlock_observer raftlock_observer;
typedef void (*raftlock_observe_cb)(const struct raftlock_leader_event *ev, void *userdata);

/*
 * Observes the leadership of `name`: cb gets the current (leader, value,
 * token) first, then every change of it in log order — a new leader, a
 * proclaimed value, no leader — with no change missed across reconnects
 * and leader changes (raftlock_watch underneath; when the cluster no
 * longer keeps the changes in between, history_lost and the current
 * state). Tokens of successive leaders increase. cb runs on the client's
 * I/O thread (the rules of raftlock_watch apply). *out is owned by the
 * caller: end it with raftlock_observe_cancel(). Errors: RAFTLOCK_EINVAL
 * (NULL argument, a name that is not a lock name), RAFTLOCK_ENOMEM.
 */
RAFTLOCK_API int raftlock_observe(raftlock_client *client, const char *name, raftlock_observe_cb cb,
				  void *userdata, raftlock_observer **out);

/* Ends the observation and frees it (as raftlock_watch_cancel). */
RAFTLOCK_API void raftlock_observe_cancel(raftlock_observer *observer);

/* ----------------------------------------------------- introspection -- */

struct raftlock_member {
	uint64_t id;
	char *raft_address;
	char *client_address;
};

struct raftlock_status {
	uint64_t node_id;
	char *role; /* "leader", "follower", "candidate", "unavailable" */
	bool ready; /* a leader that may serve (its barrier has applied) */
	uint64_t term;
	uint64_t commit_index;
	uint64_t applied_index;
	uint64_t last_index;
	uint64_t leader_id; /* 0 if unknown */
	char *leader_address;
	uint64_t cluster_time;
	uint64_t next_token;
	uint64_t sessions;
	uint64_t locks;
	char *cluster;
	size_t n_members;
	struct raftlock_member *members;
	/* Random, drawn when the cluster started: a cluster restored from a
	 * backup has a new one. 0 until the cluster's first entry applied. */
	uint64_t cluster_id;
	/* Upgrades (docs/OPERATIONS.md): the feature level of this node's
	 * build, and the level the cluster records (every voter supports it).
	 * 0 from a node older than feature levels. */
	uint32_t feature_level;
	uint32_t cluster_feature_level;
};

/*
 * Asks one node for its own view (no quorum needed: works during an
 * outage). `address` names the node ("host:port"); NULL asks the first
 * reachable address of the client, trying them in turn. Blocks for at most
 * the request timeout, each connect (a host name's lookup, the TCP connect
 * and TLS handshake) for at most the connect timeout; a lookup not
 * answered by then is left to end by itself. A lookup of the same
 * host:port already under way in the process (a connection's or another
 * status call's) is joined rather than started again, so a name whose
 * resolver hangs holds one lookup however often it is asked, and status
 * calls of other names still work. Lookups left by status calls of
 * different names are capped lower than those of connections (16 of 64
 * per process), so that they never keep clients from reconnecting; past
 * it a status call of a name not under way fails at once with
 * RAFTLOCK_ECONNECTION. *out is freed with
 * raftlock_status_free(). Over TLS it connects as the client does, with
 * the same checks.
 * Errors: RAFTLOCK_EINVAL (an address that is not host:port),
 * RAFTLOCK_ECONNECTION (a host name's lookup that failed or took too long:
 * the message names the name and why), RAFTLOCK_ETIMEDOUT,
 * RAFTLOCK_EPROTO (an answer that is not a status), RAFTLOCK_ENOMEM,
 * RAFTLOCK_ETLS (the handshake failed: the message names the address and
 * the reason), RAFTLOCK_ELIMIT (the node holds as many connections from
 * this client's address as it takes: --max-connections-per-address).
 */
RAFTLOCK_API int raftlock_status_get(raftlock_client *client, const char *address,
				     struct raftlock_status **out);
RAFTLOCK_API void raftlock_status_free(struct raftlock_status *status);

struct raftlock_owner {
	char *client_name;
	char *host;
	uint32_t pid;
};

struct raftlock_holder {
	uint64_t session;
	uint64_t owner; /* lock handle id */
	enum raftlock_mode mode;
	uint32_t permits;
	uint32_t count; /* nesting depth */
	uint64_t token;
	uint64_t granted_index;
	uint64_t granted_time; /* cluster time, ms */
	struct raftlock_owner who;
};

struct raftlock_waiter {
	uint64_t session;
	uint64_t owner;
	enum raftlock_mode mode;
	uint32_t permits;
	uint64_t queued_time; /* cluster time, ms */
	struct raftlock_owner who;
};

struct raftlock_lock_info {
	char *name;
	enum raftlock_kind kind;
	uint32_t limit;
	uint64_t delay_until; /* cluster time, ms; 0 = no lock-delay running */
	uint32_t lock_delay_ms;
	uint64_t cluster_time;
	size_t n_holders;
	struct raftlock_holder *holders;
	size_t n_waiters;
	struct raftlock_waiter *waiters;
	uint32_t max_hold_ms;     /* 0 = no limit */
	uint32_t revoke_grace_ms; /* asked to release this long before revoked */
	/* How many holders and waiters the lock has. Above n_holders and
	 * n_waiters when the lists were cut to keep the answer inside a frame
	 * (about a megabyte of them: thousands): the lists then hold the
	 * first ones, in grant and in queue order (the holders from
	 * holders_after on). */
	size_t holders_total;
	size_t waiters_total;
	/* The holders listed are those with a token above this, in grant
	 * order (raftlock_lock_get_holders; 0: from the first). */
	uint64_t holders_after;
	/* Holders granted after the last one listed exist: read them with
	 * raftlock_lock_get_holders(), after its token. */
	bool holders_more;
};

struct raftlock_lock_list {
	size_t n_locks;
	struct raftlock_lock_info *locks;
	bool more; /* another page follows: ask again after the last name */
};

/*
 * Reads one lock. Linearizable unless `stale` (then any node answers from
 * its own state). A lock nobody holds or waits for does not exist:
 * RAFTLOCK_ENOTFOUND. *out is freed with raftlock_lock_info_free(). A lock
 * with thousands of holders lists the first ones (holders_more): read the
 * rest with raftlock_lock_get_holders().
 * Other errors: RAFTLOCK_EINVAL (an empty name), RAFTLOCK_ETOOBIG (a name
 * over RAFTLOCK_NAME_MAX bytes), and the transport errors (RAFTLOCK_EPERM:
 * the identity may not read the name). Blocks for at most the request
 * timeout.
 */
RAFTLOCK_API int raftlock_lock_get(raftlock_client *client, const char *name, bool stale,
				   struct raftlock_lock_info **out);
RAFTLOCK_API void raftlock_lock_info_free(struct raftlock_lock_info *info);

/*
 * Reads one lock as raftlock_lock_get() does, listing only the holders
 * whose token is above holders_after (0: from the first), in grant order,
 * which is token order: a lock with more holders than one answer holds is
 * read page by page, each time after the last token listed, while
 * (*out)->holders_more. A grant made between two pages comes in a later
 * one (its token is higher); a holder gone meanwhile is simply not listed.
 * The waiters and totals are the whole lock's, as in raftlock_lock_get().
 * Same ownership (*out freed with raftlock_lock_info_free()), threading
 * and errors, and RAFTLOCK_ESTATE when holders_after > 0 and the node that
 * answered is a build older than paging (it would list from the first):
 * the message says to upgrade. Blocks for at most the request timeout.
 */
RAFTLOCK_API int raftlock_lock_get_holders(raftlock_client *client, const char *name,
					   uint64_t holders_after, bool stale,
					   struct raftlock_lock_info **out);

/*
 * Lists locks whose name starts with `prefix` ("" or NULL = all), in name
 * order, starting after `after` (NULL = from the start), at most `limit`
 * (0 = the server's default page). *out is freed with
 * raftlock_lock_list_free(). Errors: RAFTLOCK_ETOOBIG (prefix or after
 * over RAFTLOCK_NAME_MAX bytes), and the transport errors. Blocks for at
 * most the request timeout.
 */
RAFTLOCK_API int raftlock_lock_list(raftlock_client *client, const char *prefix, const char *after,
				    uint32_t limit, bool stale, struct raftlock_lock_list **out);
RAFTLOCK_API void raftlock_lock_list_free(struct raftlock_lock_list *list);

struct raftlock_session_info {
	uint64_t id;
	uint32_t ttl_ms;
	uint64_t deadline;    /* cluster time, ms */
	uint64_t opened_time; /* cluster time, ms */
	struct raftlock_owner who;
	size_t n_locks;
	char **locks;
	/* How many locks the session holds or waits for (of those the caller
	 * may read): above n_locks when the list was cut to keep the answer
	 * inside a frame (about a megabyte of names). */
	size_t locks_total;
};

struct raftlock_session_list {
	size_t n_sessions;
	struct raftlock_session_info *sessions;
	bool more;
	uint64_t cluster_time;
};

/* Lists sessions by id, after `after` (0 = from the start), at most
 * `limit` (0 = the server's default page); linearizable unless `stale`.
 * *out is freed with raftlock_session_list_free(). Errors: the transport
 * errors. */
RAFTLOCK_API int raftlock_session_list(raftlock_client *client, uint64_t after, uint32_t limit,
				       bool stale, struct raftlock_session_list **out);
RAFTLOCK_API void raftlock_session_list_free(struct raftlock_session_list *list);

/* ------------------------------------------------------ access rules -- */

/*
 * With auth = on, a cluster lets an identity do only what its access rules
 * grant (docs/GUARANTEES.md, authorization). A rule gives an identity
 * (a name, or "*" for every authenticated identity) permissions on every
 * lock name that starts with a prefix ("" = every name). Rules only grant:
 * what an identity may do on a name is the union of its rules and of
 * "*"'s rules whose prefix starts the name. Without one: RAFTLOCK_EPERM.
 */
enum raftlock_acl_perm {
	RAFTLOCK_ACL_LOCK = 1,  /* acquire (letting go, in the identity's own
				   session, needs no rule) */
	RAFTLOCK_ACL_READ = 2,  /* read the lock and its holders; their owners
				   (who) show for the reader's own sessions, or
				   with read on "" */
	RAFTLOCK_ACL_ADMIN = 4, /* change rules on the prefix; on "": close others'
				   sessions, membership and snapshot commands */
};

struct raftlock_acl_rule {
	char *identity;
	char *prefix;
	uint32_t perms; /* a mask of enum raftlock_acl_perm */
};

struct raftlock_acl_list {
	size_t n_rules;
	struct raftlock_acl_rule *rules;
	bool more; /* another page follows: ask again after the last rule */
};

/*
 * Creates or replaces the rule of (identity, prefix) with perms (a
 * non-empty mask of enum raftlock_acl_perm), through the log: once this
 * returns 0 every node decides with it. The caller's identity needs admin
 * on the prefix. Thread-safe; blocks for at most the request timeout.
 * Errors: RAFTLOCK_EPERM (no admin on the prefix, or authentication is off
 * at the cluster; nothing changed), RAFTLOCK_EINVAL (empty identity,
 * perms empty or unknown), RAFTLOCK_ETOOBIG (identity or prefix longer
 * than RAFTLOCK_NAME_MAX, or both together longer than 510 bytes),
 * RAFTLOCK_ELIMIT (the cluster's store is full),
 * RAFTLOCK_ETIMEDOUT, RAFTLOCK_ECONNECTION, RAFTLOCK_EUNAVAILABLE,
 * RAFTLOCK_ENOMEM. A retry after a lost answer sets the same rule again.
 */
RAFTLOCK_API int raftlock_acl_set(raftlock_client *client, const char *identity, const char *prefix,
				  uint32_t perms);

/*
 * Deletes the rule of (identity, prefix); same rules and errors as
 * raftlock_acl_set, and RAFTLOCK_ENOTFOUND when there is no such rule (also
 * when a retry after a lost answer finds it deleted by the first attempt).
 */
RAFTLOCK_API int raftlock_acl_delete(raftlock_client *client, const char *identity,
				     const char *prefix);

/*
 * Lists the rules on prefixes the caller's identity has admin on (every
 * rule with authentication off), in (identity, prefix) order, after the
 * rule (after_identity, after_prefix) (NULL or "" = from the first), at
 * most `limit` (0 = the server's default page). Linearizable unless
 * `stale`. *out is owned by the caller: free it with
 * raftlock_acl_list_free(). Thread-safe. Errors as raftlock_lock_list.
 */
RAFTLOCK_API int raftlock_acl_list(raftlock_client *client, const char *after_identity,
				   const char *after_prefix, uint32_t limit, bool stale,
				   struct raftlock_acl_list **out);
RAFTLOCK_API void raftlock_acl_list_free(struct raftlock_acl_list *list);

/*
 * Parses permissions written as a comma-separated list of lock, read and
 * admin (or "all") into *perms. Returns 0 or RAFTLOCK_EINVAL. Thread-safe.
 * raftlock_acl_perms_format writes the same form ("lock,read") into buf
 * (at least 16 bytes) and returns buf.
 */
RAFTLOCK_API int raftlock_acl_perms_parse(const char *text, uint32_t *perms);
RAFTLOCK_API const char *raftlock_acl_perms_format(uint32_t perms, char *buf, size_t len);

/* ------------------------------------------------------------- backups -- */

/*
 * Saves a backup image of the whole replicated state into the file at path
 * (docs/OPERATIONS.md, "Backup and restore"; restored with raftlockd
 * --restore). The leader takes the image after a read barrier, so it holds
 * every write acknowledged before the call, and sends it in chunks (an
 * image may be far larger than a frame). The bytes go to "<path>.tmp"
 * (here "<path>.<16 random hex digits>.tmp", a name of the save's own),
 * which is synced, checked against the image's checksum and then renamed
 * to path: path is replaced only by a whole, undamaged image. If the
 * leader changes during the save, the save starts over (three times at
 * most). With authentication on, the identity needs admin on every name.
 *
 * client: borrowed for the call; path: borrowed for the call. *index (if
 * not NULL) gets the applied index the image holds. Thread-safe; blocks
 * for the transfer (each chunk within the client's request timeout).
 * Errors: RAFTLOCK_EINVAL (NULL argument, a path too long), RAFTLOCK_EIO
 * (the file: the message names it), RAFTLOCK_EDATA (the image arrived
 * damaged), RAFTLOCK_ENOTFOUND (the leader kept changing), RAFTLOCK_EPERM,
 * RAFTLOCK_ENOMEM, and the errors of any request (RAFTLOCK_ETIMEDOUT,
 * RAFTLOCK_ECONNECTION, ...). On failure no file is left at "<path>.tmp"
 * and path is unchanged, but for RAFTLOCK_EIO after the rename, when
 * path's directory could not be synced (the message says so): path holds
 * the new image, which a crash may still undo.
 */
RAFTLOCK_API int raftlock_snapshot_save(raftlock_client *client, const char *path, uint64_t *index);

/* -------------------------------------------------------- membership -- */

/*
 * Membership (docs/OPERATIONS.md, "Membership"). A member is a raftlockd
 * node: an id (never reused in a cluster), the address other members
 * reach it on (raft) and the one clients do. A member added at run time
 * starts as a standby (it receives the log, it does not vote); the leader
 * promotes it to voter by itself once its log is within a few entries of
 * the leader's, or at once with raftlock_member_promote().
 */
struct raftlock_member_info {
	uint64_t id;
	char *raft_address;
	char *client_address; /* "" when the answering node does not know it */
	char *role;           /* "voter", "standby" or "spare" */
	uint64_t match_index; /* answered by the leader: the member's last
				 entry it knows; 0 otherwise */
	bool joined;          /* added at run time, and its node has started */
};

struct raftlock_member_list {
	size_t n_members;
	struct raftlock_member_info *members;
	uint64_t leader_id;  /* 0 when the answering node knows no leader */
	uint64_t last_index; /* the answering node's last log index */
	/* The highest member id ever added or removed: raftlock_member_add
	 * needs a higher one (ids are never reused). 0 from an older node. */
	uint64_t max_member_id;
};

/*
 * The members in the raft configuration, as the leader knows it (with
 * each member's match index). *out is owned by the caller: free it with
 * raftlock_member_list_free(). Thread-safe. Errors: RAFTLOCK_EPERM,
 * RAFTLOCK_ETIMEDOUT, RAFTLOCK_ECONNECTION, RAFTLOCK_EUNAVAILABLE (no
 * leader; `raftlock status` answers without one), RAFTLOCK_ENOMEM.
 */
RAFTLOCK_API int raftlock_member_list(raftlock_client *client, struct raftlock_member_list **out);
RAFTLOCK_API void raftlock_member_list_free(struct raftlock_member_list *list);

/*
 * Adds member id as a standby, through the leader: returns 0 once the raft
 * configuration has it; then start that node with `raftlockd --join`. The
 * caller's identity needs admin on "" (with auth on). Addresses are
 * HOST:PORT, copied. Thread-safe; blocks for at most the request timeout.
 * A retry with the same id and addresses after a lost answer succeeds.
 * Errors: RAFTLOCK_EINVAL (id 0, a bad address, or an id used before in
 * this cluster: ids are never reused, the message names the highest),
 * RAFTLOCK_ELIMIT (the cluster has 9 members already),
 * RAFTLOCK_EPERM, RAFTLOCK_EUNAVAILABLE (no leader, or another membership
 * change, such as a promotion waiting for its member to catch up, kept it
 * from starting until the request timeout), RAFTLOCK_ETIMEDOUT,
 * RAFTLOCK_ECONNECTION, RAFTLOCK_ENOMEM. raftlock_errmsg() has the
 * cluster's reason when it gave one.
 */
RAFTLOCK_API int raftlock_member_add(raftlock_client *client, uint64_t id, const char *raft_address,
				     const char *client_address);

/*
 * Removes member id; its id is never used again. When id is the leader, it
 * first hands leadership to another voter, which then removes it. Returns
 * 0 once the configuration without it is committed (also when a retry
 * finds it removed). Same rules as raftlock_member_add; errors as there,
 * and RAFTLOCK_ENOTFOUND (no such member, ever: from cluster feature level
 * 11 also for an id below the highest used; before, such an id answers
 * 0), RAFTLOCK_EINVAL (the last voter), RAFTLOCK_ESTATE (a voter whose
 * removal would leave voters a majority of which did not answer the
 * leader within two election timeouts, at most 3 s: a configuration that
 * could commit nothing; raftlock_errmsg() names the silent voters;
 * nothing changed).
 * Another membership change in progress is retried as
 * RAFTLOCK_EUNAVAILABLE is.
 */
RAFTLOCK_API int raftlock_member_remove(raftlock_client *client, uint64_t id);

/*
 * Makes standby id a voter now rather than waiting for the leader to do
 * it; the leader still lets it catch up first (a few rounds of
 * replication, the last under an election timeout). 0 once it votes (also
 * when it already did). Errors as raftlock_member_add, RAFTLOCK_ENOTFOUND,
 * and RAFTLOCK_ETIMEDOUT when the member did not catch up within a few
 * seconds (its node is not running, or too slow): it stays a standby.
 */
RAFTLOCK_API int raftlock_member_promote(raftlock_client *client, uint64_t id);

/*
 * Replaces member old_id (typically a dead machine) by a new member
 * new_id: removes old_id, then adds new_id (as raftlock_member_remove and
 * raftlock_member_add). The arguments are checked first, against the
 * leader's member list too while old_id is in it: RAFTLOCK_EINVAL (new_id
 * 0, equal to old_id, a current member or an id used before, an address
 * not HOST:PORT) removes nothing, and so does an error of that list.
 * Retrying after a failure is safe: a removal already done counts as done.
 * Errors as those two.
 */
RAFTLOCK_API int raftlock_member_replace(raftlock_client *client, uint64_t old_id, uint64_t new_id,
					 const char *raft_address, const char *client_address);

/*
 * Used by `raftlockd --join`: claims member id (added, never started) for
 * the data directory whose random incarnation is given, in the cluster
 * named cluster. 0 when the claim holds (also on a retry with the same
 * incarnation). Errors: RAFTLOCK_ENOTFOUND (the id was not added, or was
 * removed), RAFTLOCK_EPERM (a node already started under this id with
 * another data directory, or it is a member the cluster started with: a
 * machine that lost its data comes back under a new id; or, with auth on,
 * the client's identity is neither "raftlock-node-<id>", the name of that
 * member's certificate, nor one with admin on every name: the message says
 * so), RAFTLOCK_EINVAL (another cluster), and the transport errors.
 * cluster is copied. Thread-safe; blocks for at most the request timeout.
 */
RAFTLOCK_API int raftlock_member_join(raftlock_client *client, uint64_t id, uint64_t incarnation,
				      const char *cluster);

/*
 * raftlock_member_join, and the members the leader answered with the claim:
 * on 0, when members is not NULL, *members is its raft configuration as
 * raftlock_member_list() would give it (owned by the caller: free it with
 * raftlock_member_list_free()), or NULL from a server older than this
 * answer. `raftlockd --join` admits those members' links on its raft port
 * (peer TLS) until it has a log. On an error *members is unchanged. Errors
 * as raftlock_member_join's, and RAFTLOCK_ENOMEM (the claim may then hold:
 * ask again, as after a lost answer).
 */
RAFTLOCK_API int raftlock_member_join_list(raftlock_client *client, uint64_t id,
					   uint64_t incarnation, const char *cluster,
					   struct raftlock_member_list **members);

#ifdef __cplusplus
}
#endif

#endif /* RAFTLOCK_H */
