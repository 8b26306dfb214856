/* metrics.c: see metrics.h. */
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "listener.h"
#include "log.h"
#include "peer_tls.h"
#include "raftlock.h"
#include "status.h"

#define REQUEST_MAX 8192
#define BODY_MAX 8192

struct scrape {
	uv_tcp_t tcp;
	struct metrics *m;
	char req[REQUEST_MAX];
	size_t len;
	bool answered;
	uv_write_t write;
	char *out;
};

struct text {
	char *buf;
	size_t len, cap;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
	if (t->len >= t->cap)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->len += (size_t)n < t->cap - t->len ? (size_t)n : t->cap - t->len - 1;
}

static void gauge(struct text *t, const char *name, const char *help, unsigned long long v)
{
	put(t, "# HELP raftlock_%s %s\n# TYPE raftlock_%s gauge\nraftlock_%s %llu\n", name, help,
	    name, name, v);
}

static void counter(struct text *t, const char *name, const char *help, unsigned long long v)
{
	put(t, "# HELP raftlock_%s %s\n# TYPE raftlock_%s counter\nraftlock_%s %llu\n", name, help,
	    name, name, v);
}

size_t metrics_render(struct metrics *m, char *buf, size_t len)
{
	struct text t = {buf, 0, len};
	struct node *n = m->node;
	struct status st;
	status_read(n, &st);
	put(&t,
	    "# HELP raftlock_node_info This node.\n# TYPE raftlock_node_info gauge\n"
	    "raftlock_node_info{id=\"%llu\",cluster=\"%s\",role=\"%s\"} 1\n",
	    (unsigned long long)m->cfg->id, m->cfg->cluster, st.role);
	gauge(&t, "leader", "1 if this node is the leader and ready to serve.", st.ready);
	gauge(&t, "leader_id", "Id of the leader this node knows, 0 if none.", st.leader_id);
	gauge(&t, "raft_term", "Current Raft term.", st.term);
	gauge(&t, "raft_commit_index", "Raft commit index.", st.commit_index);
	gauge(&t, "raft_applied_index", "Raft last applied index.", st.applied_index);
	gauge(&t, "raft_last_index", "Index of the last entry in the log.", st.last_index);
	gauge(&t, "state_applied_index", "Last index applied to the LMDB state.",
	      st.state_applied_index);
	gauge(&t, "cluster_time_ms", "Cluster time of the last applied entry.", st.applied_time);
	gauge(&t, "next_token", "Next fencing token.", st.next_token);
	gauge(&t, "sessions", "Live sessions.", st.sessions);
	gauge(&t, "locks", "Locks held, awaited or in lock-delay.", st.locks);
	counter(&t, "entries_proposed_total", "Log entries proposed by this node as leader.",
		n->entries_proposed);
	counter(&t, "commands_proposed_total", "Commands proposed (several share an entry).",
		n->commands_proposed);
	counter(&t, "snapshots_restored_total",
		"Snapshots loaded into the state: sent by a leader, or read at a rebuild.",
		n->snapshots_restored);
	gauge(&t, "disk_full", "1 while free space under the data directory is below the reserve.",
	      diskguard_full(&n->disk) ? 1 : 0);
	gauge(&t, "disk_free_bytes", "Free space under the data directory at the last check.",
	      n->disk.free_bytes);
	counter(&t, "disk_refusals_total", "Requests refused with ENOSPC for a full disk.",
		n->disk.refusals);
	counter(&t, "disk_apply_waits_total", "Entries whose apply waited for space on the disk.",
		n->disk.apply_waits);
	gauge(&t, "client_connections", "Open client connections.",
	      service_connections(m->service));
	counter(&t, "client_tls_handshake_failures_total",
		"Client connections whose TLS handshake failed or timed out (client-tls).",
		m->service->tls_failures);
	counter(&t, "client_connections_refused_total",
		"Client connections refused: their address held max-connections-per-address.",
		m->service->admission.refused);
	counter(&t, "client_frame_timeouts_total",
		"Client connections cut off: a frame not completed within frame-timeout-ms.",
		m->service->frame_timeouts);
	counter(&t, "auth_denied_total",
		"Client requests refused with EPERM for their identity (auth = on): not "
		"authenticated, no permission, an unknown token.",
		m->service->auth_denied);
	counter(&t, "peer_tls_refused_total",
		"Raft port connections refused before raft saw them (peer-tls: no or a bad "
		"certificate, an id that is not the certificate's, not TLS, too slow).",
		n->peer_tls ? peer_tls_stats(&n->transport).refused : 0);
	const struct leases_stats *ls = &m->service->leases->stats;
	counter(&t, "renew_commands_total", "RENEW commands proposed by this node as leader.",
		ls->renew_commands);
	counter(&t, "renew_sessions_total", "Sessions named in those RENEW commands.",
		ls->renew_ids);
	gauge(&t, "renew_sessions_max", "The most sessions one RENEW command named.",
	      ls->renew_ids_max);
	counter(&t, "keepalive_unknown_total",
		"Keepalive ids of sessions this leader does not know: ESESSION, not replicated.",
		ls->ids_unknown);
	counter(&t, "keepalive_refused_total",
		"Keepalive ids refused (ELIMIT) past a connection's per-second budget.",
		ls->ids_refused);
	counter(&t, "secret_denied_total",
		"Keepalive ids and mutating requests refused (EPERM) without their session's "
		"secret: not replicated.",
		ls->ids_denied);
	MDB_envinfo info;
	MDB_stat env_stat;
	mdb_env_info(n->store.env, &info);
	mdb_env_stat(n->store.env, &env_stat);
	gauge(&t, "store_used_bytes",
	      "Bytes of records held (keys and values), as the store-full rule counts them.",
	      store_record_bytes(&n->store));
	gauge(&t, "store_limit_bytes",
	      "Replicated store limit: new sessions, locks and waits are refused past it (0: "
	      "none).",
	      st.store_limit);
	counter(&t, "store_refusals_total", "Commands this node applied as refused for the limit.",
		n->fsm.store_refusals);
	gauge(&t, "lmdb_map_bytes", "This node's LMDB map size (--map-size).", info.me_mapsize);
	gauge(&t, "lmdb_used_bytes", "LMDB pages in use up to the highest one, in bytes.",
	      (unsigned long long)(info.me_last_pgno + 1) * env_stat.ms_psize);
	return t.len;
}

static void scrape_closed(uv_handle_t *h)
{
	struct scrape *s = h->data;
	free(s->out);
	free(s);
}

static void scrape_written(uv_write_t *w, int status)
{
	(void)status;
	struct scrape *s = w->data;
	uv_close((uv_handle_t *)&s->tcp, scrape_closed);
}

static void scrape_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)suggested;
	struct scrape *s = h->data;
	*buf = uv_buf_init(s->req + s->len, (unsigned)(sizeof s->req - s->len));
}

static void scrape_answer(struct scrape *s)
{
	char body[BODY_MAX];
	const char *status = "200 OK";
	size_t blen;
	if (strncmp(s->req, "GET /metrics ", 13) == 0 || strncmp(s->req, "GET / ", 6) == 0) {
		blen = metrics_render(s->m, body, sizeof body);
	} else {
		status = "404 Not Found";
		blen = (size_t)snprintf(body, sizeof body, "try GET /metrics\n");
	}
	s->out = malloc(blen + 256);
	if (s->out == NULL) {
		uv_close((uv_handle_t *)&s->tcp, scrape_closed);
		return;
	}
	int hlen = snprintf(s->out, 256,
			    "HTTP/1.1 %s\r\nContent-Type: text/plain; version=0.0.4\r\n"
			    "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			    status, blen);
	memcpy(s->out + hlen, body, blen);
	uv_buf_t b = uv_buf_init(s->out, (unsigned)(hlen + (int)blen));
	s->write.data = s;
	s->answered = true;
	if (uv_write(&s->write, (uv_stream_t *)&s->tcp, &b, 1, scrape_written) != 0)
		uv_close((uv_handle_t *)&s->tcp, scrape_closed);
}

static void scrape_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
	(void)buf;
	struct scrape *s = stream->data;
	if (s->answered)
		return;
	if (nread < 0 || (nread > 0 && s->len + (size_t)nread >= sizeof s->req - 1)) {
		uv_close((uv_handle_t *)&s->tcp, scrape_closed);
		return;
	}
	s->len += (size_t)nread;
	s->req[s->len] = '\0';
	if (strstr(s->req, "\r\n\r\n") != NULL || strstr(s->req, "\n\n") != NULL) {
		uv_read_stop(stream);
		scrape_answer(s);
	}
}

static void scrape_accept(uv_stream_t *server, int status)
{
	struct metrics *m = server->data;
	if (status != 0)
		return;
	struct scrape *s = calloc(1, sizeof *s);
	if (s == NULL)
		return;
	s->m = m;
	uv_tcp_init(m->loop, &s->tcp);
	s->tcp.data = s;
	if (uv_accept(server, (uv_stream_t *)&s->tcp) != 0 ||
	    uv_read_start((uv_stream_t *)&s->tcp, scrape_alloc, scrape_read) != 0)
		uv_close((uv_handle_t *)&s->tcp, scrape_closed);
}

int metrics_start(struct metrics *m, uv_loop_t *loop, const struct config *cfg, struct node *node,
		  struct service *service, char *err, size_t errlen)
{
	memset(m, 0, sizeof *m);
	m->loop = loop;
	m->cfg = cfg;
	m->node = node;
	m->service = service;
	if (cfg->metrics_address[0] == '\0')
		return 0;
	int rv = listener_start(loop, &m->listener, m, "metrics-address", cfg->metrics_address, 64,
				scrape_accept, err, errlen);
	if (rv != 0)
		return rv;
	m->started = true;
	return 0;
}

void metrics_close(struct metrics *m)
{
	if (m->started)
		uv_close((uv_handle_t *)&m->listener, NULL);
	m->started = false;
}
