/* metrics.c: see metrics.h. */
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "listener.h"
#include "log.h"
#include "metrics_label.h"
#include "peer_tls.h"
#include "raftlock.h"
#include "status.h"

#define REQUEST_MAX 8192
#define BODY_FIRST (64u << 10) /* grown (doubled) while the page does not fit */
#define BODY_MAX (4u << 20)
#define TOP_PREFIXES 10 /* labels of raftlock_lock_prefix_waits */

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
	bool full; /* something did not fit */
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
	if (t->full)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= t->cap - t->len) {
		t->full = true;
		t->buf[t->len] = '\0';
		return;
	}
	t->len += (size_t)n;
}

static void head(struct text *t, const char *name, const char *type, const char *help)
{
	put(t, "# HELP raftlock_%s %s\n# TYPE raftlock_%s %s\n", name, help, name, type);
}

static void gauge(struct text *t, const char *name, const char *help, unsigned long long v)
{
	head(t, name, "gauge", help);
	put(t, "raftlock_%s %llu\n", name, v);
}

static void counter(struct text *t, const char *name, const char *help, unsigned long long v)
{
	head(t, name, "counter", help);
	put(t, "raftlock_%s %llu\n", name, v);
}

/* A label value, valid whatever bytes v holds (metrics_label.h). */
static void put_label(struct text *t, const char *v)
{
	if (t->full)
		return;
	size_t n = metrics_label_write(t->buf + t->len, t->cap - t->len, v);
	if (n >= t->cap - t->len) {
		t->full = true;
		t->buf[t->len] = '\0';
		return;
	}
	t->len += n;
}

/* One histogram's series; `label` is "" or `key="value",`. */
static void series(struct text *t, const char *name, const char *label, const struct histogram *h)
{
	const struct histogram_layout *l = h->layout;
	for (unsigned i = 0; i < l->n; i++)
		put(t, "raftlock_%s_bucket{%sle=\"%g\"} %llu\n", name, label,
		    (double)l->bound_ns[i] / 1e9, (unsigned long long)histogram_cumulative(h, i));
	put(t, "raftlock_%s_bucket{%sle=\"+Inf\"} %llu\n", name, label,
	    (unsigned long long)h->count);
	size_t n = strlen(label);
	/* Without the trailing comma inside the braces, or no braces at all. */
	if (n > 0) {
		put(t, "raftlock_%s_sum{%.*s} %.9f\n", name, (int)n - 1, label,
		    (double)h->sum_ns / 1e9);
		put(t, "raftlock_%s_count{%.*s} %llu\n", name, (int)n - 1, label,
		    (unsigned long long)h->count);
	} else {
		put(t, "raftlock_%s_sum %.9f\n", name, (double)h->sum_ns / 1e9);
		put(t, "raftlock_%s_count %llu\n", name, (unsigned long long)h->count);
	}
}

static void histogram(struct text *t, const char *name, const char *help, const struct histogram *h)
{
	head(t, name, "histogram", help);
	series(t, name, "", h);
}

static void render_locks(struct text *t, const struct fsm_stats *fs, uint64_t now_ms)
{
	counter(t, "lock_grants_total", "Lock grants applied (re-entries not counted).",
		fs->grants);
	counter(t, "lock_waits_total", "Acquires queued behind other holders.", fs->waits);
	counter(t, "session_expiries_total",
		"Sessions expired (their lease ran out), not closed by their client.",
		fs->expiries);
	counter(t, "lock_delays_total",
		"Lock-delays started by the expiry of a holder's session or a revocation.",
		fs->lock_delays);
	counter(t, "lock_revocations_total",
		"Grants revoked (raftlock revoke, or a lock's maximum hold time).",
		fs->revocations);
	counter(t, "bound_sessions_dropped_total",
		"Bound sessions ended because their connection closed (crash-fast release).",
		fs->dropped);
	histogram(t, "lock_wait_duration_seconds",
		  "Time from an acquire queued to its grant, in cluster time.", &fs->wait);
	histogram(t, "lock_hold_duration_seconds",
		  "Time from a grant to its release or its session's end, in cluster time.",
		  &fs->hold);
	struct contention_entry top[TOP_PREFIXES];
	size_t n = contention_top(&fs->contention, now_ms, top, TOP_PREFIXES);
	head(t, "lock_prefix_waits", "gauge",
	     "Waits over the last one to two minutes of cluster time on the most contended "
	     "lock name prefixes (up to the first '/'); at most 10 prefixes.");
	for (size_t i = 0; i < n; i++) {
		put(t, "raftlock_lock_prefix_waits{prefix=\"");
		put_label(t, top[i].prefix);
		put(t, "\"} %llu\n", (unsigned long long)top[i].count);
	}
}

static void render_latency(struct text *t, struct metrics *m)
{
	head(t, "request_duration_seconds", "histogram",
	     "Client requests that wait on the log, a keepalive batch or a barrier, from "
	     "arrival to answer, by operation.");
	for (unsigned i = 0; i < SERVICE_OPS; i++) {
		char label[64];
		snprintf(label, sizeof label, "op=\"%s\",", service_op_names[i]);
		series(t, "request_duration_seconds", label, &m->service->latency[i]);
	}
	histogram(t, "apply_duration_seconds", "One log entry applied to the state (LMDB).",
		  &m->node->apply);
	histogram(t, "disk_write_duration_seconds",
		  "One raft log append, from issue to written and synced.", &m->node->disk.writes);
}

size_t metrics_render(struct metrics *m, char *buf, size_t len)
{
	struct text t = {buf, 0, len, false};
	struct node *n = m->node;
	struct status st;
	status_read(n, &st);
	head(&t, "build_info", "gauge",
	     "The version of raftlockd and of the libraries it runs on.");
	put(&t, "raftlock_build_info{version=\"%d.%d.%d\",raft=\"%d.%d.%d\",libuv=\"%s\"} 1\n",
	    RAFTLOCK_VERSION_MAJOR, RAFTLOCK_VERSION_MINOR, RAFTLOCK_VERSION_PATCH,
	    RAFT_VERSION_MAJOR, RAFT_VERSION_MINOR, RAFT_VERSION_RELEASE, uv_version_string());
	head(&t, "node_info", "gauge", "This node.");
	put(&t, "raftlock_node_info{id=\"%llu\",cluster=\"", (unsigned long long)m->cfg->id);
	put_label(&t, m->cfg->cluster);
	put(&t, "\",role=\"%s\"} 1\n", st.role);
	gauge(&t, "is_leader", "1 if this node is the leader and ready to serve.", st.ready);
	gauge(&t, "has_leader", "1 if this node knows a leader.", st.leader_id != 0);
	gauge(&t, "serving",
	      "1 if this node can serve (GET /readyz): the ready leader, or a follower that has "
	      "applied as far as its leader had.",
	      st.serving);
	gauge(&t, "leader_id", "Id of the leader this node knows, 0 if none.", st.leader_id);
	counter(&t, "leader_changes_seen_total",
		"Times the leader this node knows became another member.", n->leader_changes);
	gauge(&t, "raft_term", "Current Raft term.", st.term);
	gauge(&t, "raft_commit_index", "Raft commit index.", st.commit_index);
	gauge(&t, "raft_applied_index", "Raft last applied index.", st.applied_index);
	gauge(&t, "raft_last_index", "Index of the last entry in the log.", st.last_index);
	gauge(&t, "state_applied_index", "Last index applied to the LMDB state.",
	      st.state_applied_index);
	head(&t, "cluster_time_seconds", "gauge", "Cluster time of the last applied entry.");
	put(&t, "raftlock_cluster_time_seconds %.3f\n", (double)st.applied_time / 1e3);
	gauge(&t, "next_token", "Next fencing token.", st.next_token);
	gauge(&t, "sessions", "Live sessions.", st.sessions);
	gauge(&t, "locks", "Locks held, awaited or in lock-delay.", st.locks);
	counter(&t, "entries_proposed_total", "Log entries proposed by this node as leader.",
		n->entries_proposed);
	counter(&t, "commands_proposed_total", "Commands proposed (several share an entry).",
		n->commands_proposed);
	counter(&t, "commands_parked_total",
		"Of those, acquires held back for the next entry: they queue behind waiters.",
		n->commands_parked);
	counter(&t, "return_holds_filled_total",
		"Entries that waited for the callers the last entry answered, until they came.",
		n->hold.filled);
	counter(&t, "return_holds_expired_total",
		"Entries that waited for those callers until the hold's 2 ms ended.",
		n->hold.expired);
	counter(&t, "snapshots_restored_total",
		"Snapshots loaded into the state: sent by a leader, or read at a rebuild.",
		n->snapshots_restored);
	counter(&t, "snapshots_taken_total", "Snapshots this node took.", n->snapshots_taken);
	counter(&t, "snapshot_images_off_loop_total",
		"Snapshots whose image was dumped off the loop (feature level 6), with the "
		"entries applied meanwhile.",
		n->builds_taken);
	counter(&t, "loop_stalls_total",
		"Times the node's loop did not turn for half an election timeout or more.",
		n->loop_stalls);
	gauge(&t, "disk_full", "1 while free space under the data directory is below the reserve.",
	      diskguard_full(&n->disk_space) ? 1 : 0);
	gauge(&t, "disk_free_bytes", "Free space under the data directory at the last check.",
	      n->disk_space.free_bytes);
	counter(&t, "disk_refusals_total", "Requests refused with ENOSPC for a full disk.",
		n->disk_space.refusals);
	counter(&t, "disk_apply_waits_total", "Entries whose apply waited for space on the disk.",
		n->disk_space.apply_waits);
	gauge(&t, "client_connections", "Open client connections.",
	      service_connections(m->service));
	gauge(&t, "watch_subscribers", "Watches this node serves (raftlock watch, observe).",
	      watches_subscribers(&m->service->watches));
	gauge(&t, "watch_changes_kept",
	      "Lock changes kept for watches to resume from (at most watch-history).",
	      watches_kept(&m->service->watches));
	counter(&t, "watch_state_wait_ends_total",
		"Watches ended with EOVERLOAD: their state waited as long as it may for a snapshot "
		"reader, or for room on its connection (5.5 min).",
		watches_state_wait_ends(&m->service->watches));
	counter(&t, "watch_index_wait_ends_total",
		"Watches ended with EUNAVAILABLE: this node had not applied in time (30 s) the "
		"index their state must be no older than, which the client saw on another node.",
		watches_index_wait_ends(&m->service->watches));
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
	counter(&t, "readiness_reports_taken_total",
		"STATUS requests whose leader's term and applied index this node took for its "
		"readiness: from the leader it knows, in its term, over TLS with that leader's "
		"certificate.",
		m->service->reports_taken);
	counter(&t, "readiness_reports_ignored_total",
		"STATUS requests with a leader's term and applied index not taken: another term, "
		"no leader known, or no certificate of the leader's (every one on a plaintext "
		"client port, where a follower asks its leader instead).",
		m->service->reports_ignored);
	counter(&t, "sessions_per_identity_refused_total",
		"Session opens this node, as leader, answered ELIMIT: the identity held "
		"max-sessions-per-identity sessions.",
		m->service->identity_sessions_refused);
	counter(&t, "waiters_per_lock_refused_total",
		"Acquires this node, as leader, answered ELIMIT: the lock had "
		"max-waiters-per-lock waiters.",
		m->service->lock_waiters_refused);
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
	counter(&t, "renew_windows_split_total",
		"Renew windows proposed over several windows (too many sessions for one).",
		ls->renew_windows_split);
	counter(&t, "keepalive_unknown_total",
		"Keepalive ids of sessions this leader does not know: ESESSION (ended) or "
		"EUNAVAILABLE (not open here yet), not replicated.",
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
	render_locks(&t, &n->fsm.stats, st.applied_time);
	render_latency(&t, m);
	return t.full ? 0 : t.len;
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

/* The page for the request line, as a malloc'd body in *body. */
static const char *route(struct scrape *s, char **body, size_t *blen)
{
	char why[160];
	const char *status = "200 OK";
	*body = NULL;
	if (strncmp(s->req, "GET /metrics ", 13) == 0 || strncmp(s->req, "GET / ", 6) == 0) {
		for (size_t cap = BODY_FIRST; cap <= BODY_MAX; cap *= 2) {
			free(*body);
			if ((*body = malloc(cap)) == NULL)
				return NULL;
			if ((*blen = metrics_render(s->m, *body, cap)) > 0)
				return status;
		}
		status = "500 Internal Server Error";
		snprintf(*body, BODY_MAX, "the metrics page is larger than %u bytes\n", BODY_MAX);
	} else if (strncmp(s->req, "GET /healthz ", 13) == 0) {
		/* Answered by the loop: the process runs and serves requests. */
		snprintf(why, sizeof why, "ok");
	} else if (strncmp(s->req, "GET /readyz ", 12) == 0) {
		if (!status_serving(s->m->node, why, sizeof why))
			status = "503 Service Unavailable";
	} else {
		status = "404 Not Found";
		snprintf(why, sizeof why, "try GET /metrics, /healthz or /readyz");
	}
	if (*body == NULL) {
		if ((*body = malloc(sizeof why + 1)) == NULL)
			return NULL;
		snprintf(*body, sizeof why + 1, "%s\n", why);
	}
	*blen = strlen(*body);
	return status;
}

static void scrape_answer(struct scrape *s)
{
	char *body;
	size_t blen = 0;
	const char *status = route(s, &body, &blen);
	s->out = status ? malloc(blen + 256) : NULL;
	if (s->out == NULL) {
		free(body);
		uv_close((uv_handle_t *)&s->tcp, scrape_closed);
		return;
	}
	int hlen = snprintf(s->out, 256,
			    "HTTP/1.1 %s\r\nContent-Type: text/plain; version=0.0.4\r\n"
			    "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			    status, blen);
	memcpy(s->out + hlen, body, blen);
	free(body);
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
	if (s == NULL) {
		listener_reject(&m->reject);
		return;
	}
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
	listener_reject_init(&m->reject, loop, &m->listener, scrape_accept);
	m->started = true;
	return 0;
}

void metrics_close(struct metrics *m)
{
	if (m->started)
		uv_close((uv_handle_t *)&m->listener, NULL);
	m->started = false;
}
