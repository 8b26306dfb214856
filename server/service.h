/*
 * service.h: the client side of raftlockd. Accepts TCP connections, decodes
 * frames, dispatches requests: mutations become proposed commands, keepalives
 * go to the leases, reads are served after a barrier (linearizable) or at
 * once (stale), STATUS from this node's own view. A node that is not the
 * leader answers NOT_LEADER with the leader's client address. Grants for
 * queued acquires are pushed on the connection that last sent the acquire.
 *
 * A malformed frame gets an EPROTO response and its connection is closed;
 * nothing else is affected. Loop thread only.
 */
#ifndef RAFTLOCK_SERVICE_H
#define RAFTLOCK_SERVICE_H

#include <stdbool.h>
#include <openssl/ssl.h>
#include <uv.h>

#include "admission.h"
#include "log_rate.h"
#include "auth.h"
#include "bindings.h"
#include "backup.h"
#include "config.h"
#include "fsm.h"
#include "histogram.h"
#include "leases.h"
#include "list.h"
#include "listener.h"
#include "members.h"
#include "node.h"
#include "pushes.h"
#include "reads.h"
#include "watch.h"

/* The requests whose latency is measured: from the frame read to the
 * answer queued, for those that wait on the log, a keepalive batch or a
 * barrier (STATUS, stale reads and refusals are answered at once). */
enum service_op {
	SERVICE_OP_OPEN_SESSION,
	SERVICE_OP_CLOSE_SESSION,
	SERVICE_OP_ACQUIRE, /* its answer: granted, refused or queued */
	SERVICE_OP_RELEASE,
	SERVICE_OP_CANCEL_WAIT,
	SERVICE_OP_ACL,
	SERVICE_OP_KEEPALIVE,
	SERVICE_OP_READ, /* linearizable reads */
	SERVICE_OP_MEMBER,
	SERVICE_OPS
};

/* "open_session", "acquire", ...: the metric label of each op. */
extern const char *const service_op_names[SERVICE_OPS];

struct service {
	uv_loop_t *loop;
	const struct config *cfg;
	struct node *node;
	struct leases *leases;
	uv_tcp_t listener;
	/* takes a connection that cannot be served (out of memory, or the
	 * service closing) off the listener */
	struct listener_reject reject;
	struct list conns;               /* struct service_conn */
	struct list dirty;               /* connections with responses to write */
	uv_prepare_t flusher;            /* writes them once per loop iteration */
	uv_timer_t resume_timer;         /* reads again from paused connections */
	struct list backlog;             /* connections with whole frames to serve */
	uv_idle_t backlog_idle;          /* serves them, a share each per loop turn */
	struct pushes pushes;            /* where queued acquires' outcomes go */
	struct bindings bindings;        /* which connection keeps each session */
	struct reads reads;              /* linearizable reads waiting for a barrier */
	struct backup backup;            /* images read by snapshot saves */
	struct members members;          /* membership requests, promotions */
	struct watches watches;          /* watch subscriptions and recent changes */
	SSL_CTX *tls;                    /* client-tls on: every connection's context */
	unsigned long long tls_failures; /* handshakes that failed or timed out */
	struct admission admission;      /* connections per client address */
	uv_timer_t frame_timer;          /* cuts off frames not completed in time */
	uv_timer_t state_timer;          /* sends watches' states a page at a time */
	unsigned long long frame_timeouts;
	/* Refusals a stranger can cause at will are logged at a bounded rate,
	 * each kind on its own (log_rate.h). */
	struct log_rate log_tls, log_admission, log_auth, log_protocol;
	const struct auth_tokens *tokens; /* auth-tokens, or NULL */
	unsigned long long auth_denied;   /* requests refused for their identity */
	struct histogram latency[SERVICE_OPS];
	/* Answers of this node as leader refused by max-sessions-per-identity
	 * and by max-waiters-per-lock (fsm.c). */
	unsigned long long identity_sessions_refused, lock_waiters_refused;
	/* Readiness reports (STATUS with a leader's term) taken, and not taken:
	 * not from the leader's certificate, or not in this node's term. */
	unsigned long long reports_taken, reports_ignored;
	bool closing;
};

/* One client connection (service.c). */
struct service_conn;

/* Binds the client address and starts accepting. With tls (borrowed until
 * service_close; NULL: plaintext) every connection speaks TLS, its
 * handshake bounded by cfg->tls_handshake_timeout_ms; a handshake that
 * fails closes that connection alone, with a warning naming the client and
 * the reason. Returns 0 or RAFTLOCK_EIO with a message in err. */
int service_start(struct service *s, uv_loop_t *loop, const struct config *cfg, struct node *node,
		  struct leases *leases, SSL_CTX *tls, char *err, size_t errlen);

/* The identity a client proved: its TLS certificate's subject common name,
 * or the name of the bearer token it sent (AuthenticateRequest), or NULL:
 * neither yet. Valid while the connection is. With auth = on, what the
 * connection may do is decided for this identity (auth.h). */
const char *service_conn_identity(const struct service_conn *c);

/* Connections accepted from now on use tls (borrowed likewise): a reload of
 * the node's certificate. Those already accepted keep the context they
 * started with. Only when TLS was on at start. */
void service_set_tls(struct service *s, SSL_CTX *tls);

/* The bearer tokens this node knows (auth-tokens; borrowed until
 * service_close, NULL for none). Set after service_start. */
void service_auth_tokens(struct service *s, const struct auth_tokens *tokens);

void service_on_event(struct service *s, const struct fsm_event *ev);
void service_on_ready(struct service *s, bool ready);
/* The store was replaced by a snapshot (watches lose their history). */
void service_on_restore(struct service *s);
/* The node's store closes next: the watches' states let go of it. */
void service_on_store_closing(struct service *s);

/* Number of open client connections. */
unsigned service_connections(const struct service *s);

/* Stops accepting and closes every connection. */
void service_close(struct service *s);

#endif
