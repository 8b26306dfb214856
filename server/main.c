/* main.c: raftlockd. Parses the configuration, starts the node, the leases
 * and the client service on one libuv loop, reads its certificates and
 * tokens again on SIGHUP, and stops on SIGTERM or SIGINT (a leader hands
 * over leadership first). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "auth.h"
#include "client_tls.h"
#include "config.h"
#include "followers.h"
#include "join.h"
#include "leases.h"
#include "log.h"
#include "metrics.h"
#include "quota.h"
#include "node.h"
#include "peer_tls.h"
#include "raftlock.h"
#include "service.h"
#include "supervision.h"

struct server {
	uv_loop_t loop;
	struct timebase tb; /* the real clock */
	struct config cfg;
	struct client_tls tls;
	struct auth_tokens tokens; /* auth-tokens */
	struct node node;
	struct leases leases;
	struct service service;
	struct metrics metrics;
	struct followers followers;
	struct supervision supervision; /* systemd: READY=1, STATUS=, WATCHDOG=1 */
	uv_signal_t sigterm, sigint, sighup;
	bool stopping;
};

static void on_event(void *arg, const struct fsm_event *ev)
{
	struct server *srv = arg;
	leases_on_event(&srv->leases, ev);
	service_on_event(&srv->service, ev);
}

static void on_ready(void *arg, bool ready)
{
	struct server *srv = arg;
	leases_on_ready(&srv->leases, ready);
	if (ready)
		quota_on_ready(&srv->node);
	service_on_ready(&srv->service, ready);
}

static void on_restore(void *arg)
{
	struct server *srv = arg;
	leases_rebuild(&srv->leases);
	service_on_restore(&srv->service);
}

static void on_store_closing(void *arg)
{
	struct server *srv = arg;
	service_on_store_closing(&srv->service);
}

static void on_stalled(void *arg, const char *why)
{
	struct server *srv = arg;
	supervision_stalled(&srv->supervision, why);
}

static void node_stopped(struct node *n)
{
	struct server *srv = n->hooks.arg;
	supervision_stop(&srv->supervision);
	followers_close(&srv->followers);
	metrics_close(&srv->metrics);
	service_close(&srv->service);
	leases_close(&srv->leases);
	uv_stop(&srv->loop);
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct server *srv = h->data;
	if (srv->stopping)
		return;
	srv->stopping = true;
	log_info("signal %d: shutting down", signum);
	/* New requests get ESHUTDOWN from now on; connections stay open so
	 * that the requests in flight are answered while the node drains. */
	uv_close((uv_handle_t *)&srv->sigterm, NULL);
	uv_close((uv_handle_t *)&srv->sigint, NULL);
	supervision_stop(&srv->supervision);
	uv_close((uv_handle_t *)&srv->sighup, NULL);
	node_stop_to(&srv->node, followers_hand_over_target(&srv->followers), node_stopped);
}

/* SIGHUP: the client TLS certificate, key and CA, the peer TLS ones and
 * the auth-tokens file are read again, from the paths of the
 * configuration. Connections accepted or set up from then on use what was
 * read; those already open go on as they were (an authenticated one keeps
 * its identity). Each of the three is replaced only if all its files load:
 * otherwise an error says why and the node keeps what it had. */
static void on_reload(uv_signal_t *h, int signum)
{
	struct server *srv = h->data;
	(void)signum;
	char err[1024];
	if (srv->cfg.client_tls != CONFIG_TLS_OFF) {
		struct client_tls fresh;
		if (client_tls_open(&fresh, &srv->cfg, err, sizeof err) != 0) {
			log_error("reload: client-tls: %s; keeping the certificates in use", err);
		} else {
			service_set_tls(&srv->service, fresh.server);
			followers_set_tls(&srv->followers, fresh.client);
			client_tls_close(&srv->tls); /* connections hold their own references */
			srv->tls = fresh;
			log_info("reload: client-tls certificate, key and CA read again");
		}
	}
	if (node_reload_peer_tls(&srv->node, err, sizeof err) != 0)
		log_error("reload: peer-tls: %s; keeping the certificates in use", err);
	else if (srv->cfg.peer_tls_cert[0] != '\0')
		log_info("reload: peer-tls certificate, key and CA read again");
	if (srv->cfg.auth_tokens[0] != '\0') {
		struct auth_tokens fresh;
		if (auth_tokens_load(&fresh, srv->cfg.auth_tokens, err, sizeof err) != 0) {
			log_error("reload: auth-tokens: %s; keeping the tokens in use", err);
		} else {
			auth_tokens_free(&srv->tokens); /* the service points at srv->tokens */
			srv->tokens = fresh;
			log_info("reload: auth-tokens read again: %zu tokens", srv->tokens.n);
		}
	}
}

/* --check-config: the peer TLS files load and the key matches. */
static int check_peer_tls(const struct config *cfg, char *err, size_t errlen)
{
	struct tls_files files = {cfg->peer_tls_cert, cfg->peer_tls_key, cfg->peer_tls_ca};
	struct raft_uv_transport t;
	if (cfg->peer_tls_cert[0] == '\0')
		return 0;
	if (peer_tls_init(&t, NULL, cfg->id, &files, err, errlen) != 0)
		return -1;
	peer_tls_close(&t);
	return 0;
}

/* --check-config: the join-token-file reads (the token itself is read
 * again, and only, when the node joins). */
static int check_join_token(const struct config *cfg, char *err, size_t errlen)
{
	char token[RAFTLOCK_TOKEN_MAX + 1], msg[512];
	if (cfg->join_token_file[0] == '\0')
		return 0;
	int rv = join_token_read(cfg->join_token_file, token, msg, sizeof msg);
	explicit_bzero(token, sizeof token);
	if (rv != 0)
		snprintf(err, errlen, "join-token-file: %s", msg);
	return rv;
}

int main(int argc, char **argv)
{
	static struct server srv;
	char err[1024];
	int rv = config_parse(&srv.cfg, argc, argv, err, sizeof err);
	if (rv == 1)
		return 0;
	if (rv != 0) {
		fprintf(stderr, "raftlockd: %s\n", err);
		return 2;
	}
	/* Certificates are read now, --check-config included: a missing file
	 * or a key that does not match stops the node before it serves. */
	rv = client_tls_open(&srv.tls, &srv.cfg, err, sizeof err);
	if (rv != 0) {
		fprintf(stderr, "raftlockd: client-tls: %s\n", err);
		return 2;
	}
	if (srv.cfg.auth_tokens[0] != '\0' &&
	    auth_tokens_load(&srv.tokens, srv.cfg.auth_tokens, err, sizeof err) != 0) {
		fprintf(stderr, "raftlockd: auth-tokens: %s\n", err);
		client_tls_close(&srv.tls);
		return 2;
	}
	static const char *tls_modes[] = {"plaintext", "TLS", "mutual TLS"};
	if (srv.cfg.check_only) {
		if (check_peer_tls(&srv.cfg, err, sizeof err) != 0 ||
		    check_join_token(&srv.cfg, err, sizeof err) != 0) {
			client_tls_close(&srv.tls);
			fprintf(stderr, "raftlockd: %s\n", err);
			return 2;
		}
		client_tls_close(&srv.tls);
		printf("configuration OK: node %llu of cluster '%s', %u members, data in %s, "
		       "client port %s%s, authentication %s (%zu tokens)\n",
		       (unsigned long long)srv.cfg.id, srv.cfg.cluster, srv.cfg.n_members,
		       srv.cfg.data_dir, tls_modes[srv.cfg.client_tls],
		       srv.cfg.peer_tls_cert[0] ? ", raft port mutual TLS" : "",
		       srv.cfg.auth ? "on" : "off", srv.tokens.n);
		auth_tokens_free(&srv.tokens);
		return 0;
	}
	log_setup((enum log_level)srv.cfg.log_level, srv.cfg.id,
		  (enum log_format)srv.cfg.log_format);
	if (srv.cfg.client_tls == CONFIG_TLS_SERVER && srv.cfg.client_tls_ca[0] == '\0' &&
	    srv.cfg.n_members > 1)
		log_warn("client-tls server without client-tls-ca: as leader this node verifies "
			 "its followers' certificates against the system's CA store");
	signal(SIGPIPE, SIG_IGN);
	uv_loop_init(&srv.loop);
	/* Before anything starts: a SIGTERM that arrives during start-up is
	 * then a clean shutdown as soon as the loop runs, not a kill. */
	uv_signal_init(&srv.loop, &srv.sigterm);
	uv_signal_init(&srv.loop, &srv.sigint);
	srv.sigterm.data = srv.sigint.data = &srv;
	uv_signal_start(&srv.sigterm, on_signal, SIGTERM);
	uv_signal_start(&srv.sigint, on_signal, SIGINT);
	uv_signal_init(&srv.loop, &srv.sighup);
	srv.sighup.data = &srv;
	uv_signal_start(&srv.sighup, on_reload, SIGHUP);
	struct node_hooks hooks = {.arg = &srv,
				   .on_event = on_event,
				   .on_ready = on_ready,
				   .on_restore = on_restore,
				   .on_store_closing = on_store_closing,
				   .on_stalled = on_stalled};
	/* The leases index must exist before raft starts replaying entries. */
	timebase_init_uv(&srv.tb, &srv.loop);
	leases_init(&srv.leases, &srv.tb, &srv.node, srv.cfg.renew_window_ms);
	rv = node_start(&srv.node, &srv.loop, &srv.tb, &srv.cfg, &hooks, err, sizeof err);
	if (rv != 0) {
		fprintf(stderr, "raftlockd: %s\n", err);
		return 1;
	}
	leases_rebuild(&srv.leases);
	rv = service_start(&srv.service, &srv.loop, &srv.cfg, &srv.node, &srv.leases,
			   srv.tls.server, err, sizeof err);
	if (rv != 0) {
		fprintf(stderr, "raftlockd: %s\n", err);
		return 1;
	}
	service_auth_tokens(&srv.service, &srv.tokens);
	rv = metrics_start(&srv.metrics, &srv.loop, &srv.cfg, &srv.node, &srv.service, err,
			   sizeof err);
	if (rv != 0) {
		fprintf(stderr, "raftlockd: %s\n", err);
		return 1;
	}
	followers_start(&srv.followers, &srv.loop, &srv.tb, &srv.cfg, &srv.node, srv.tls.client);
	rv = supervision_start(&srv.supervision, &srv.loop, &srv.node, err, sizeof err);
	if (rv != 0) {
		fprintf(stderr, "raftlockd: %s\n", err);
		return 1;
	}
	log_info("serving clients on %s, %s, authentication %s (cluster '%s', %u members)",
		 srv.cfg.client_address, tls_modes[srv.cfg.client_tls], srv.cfg.auth ? "on" : "off",
		 srv.cfg.cluster, srv.cfg.n_members);
	uv_run(&srv.loop, UV_RUN_DEFAULT);
	/* Let close callbacks run, then check nothing is left open. */
	uv_run(&srv.loop, UV_RUN_NOWAIT);
	if (uv_loop_close(&srv.loop) != 0)
		log_warn("loop closed with handles still open");
	client_tls_close(&srv.tls);
	auth_tokens_free(&srv.tokens);
	log_info("stopped");
	return 0;
}
