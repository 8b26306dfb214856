/* followers.c: see followers.h.
 *
 * Why a wiped member never catches up by itself (libraft 0.22.1, measured
 * with LIBRAFT_TRACE=1): the leader keeps the match index M it had for the
 * member's previous incarnation. The empty member rejects the leader's
 * AppendEntries; the leader probes back to next index 2 (or, with the log
 * compacted, sends its last snapshot S). When it sends entries it computes
 * the entries in flight as next_index - match_index - 1 in unsigned
 * arithmetic: with next_index <= M this wraps, exceeds the in-flight cap,
 * and every message is an empty heartbeat. The member's successes report
 * its last index (1, or S <= M), and the leader only ever raises a match
 * index, so nothing changes: the member stays at its bootstrap entry or at
 * the snapshot, for as long as this leader leads. A new leader starts with
 * fresh progress (match 0) for everyone and replicates normally. So the
 * workaround is a leadership transfer, done only on proof that the member
 * lost its data: its raft log ends below M. (Removing and re-adding the
 * member would also reset its progress, but leaves the cluster a voter
 * short while the member catches up.)
 *
 * A healthy follower never reports a last index below a match index taken
 * earlier in the same term: the leader counts an entry as matched only
 * after the follower stored it, and a follower drops only entries that
 * conflict with the current leader's, which were never matched. */
#include "followers.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "address.h"
#include "codec.h"
#include "feature_level.h"
#include "log.h"
#include "raftlock.h"
#include "status.h"

#define FOLLOWERS_ANSWER_MS 5000 /* a connect or STATUS unanswered this long */

static uint64_t now_ms(const struct followers *fw)
{
	return timebase_now(fw->tb);
}

static void set_state(struct follower *f, int state)
{
	f->state = state;
	f->since_ms = now_ms(f->fw);
}

static bool leading(const struct followers *fw)
{
	struct node *n = fw->node;
	return !fw->closing && n->ready && !n->stopping;
}

/* Whether f's member is asked: every member while this node is the ready
 * leader; while it follows a leader that sends no readiness report, that
 * leader (status_wants_leader_answer). */
static bool wanted(const struct follower *f)
{
	struct followers *fw = f->fw;
	uint64_t leader = 0;
	if (leading(fw))
		return true;
	return !fw->closing && !fw->node->stopping &&
	       status_wants_leader_answer(fw->node, &leader) && leader == f->member.id;
}

/* ------------------------------------------------------------ connection */

static void closed(struct follower *f)
{
	frame_reader_close(&f->reader);
	f->asking = false;
	f->tls_on = false;
	set_state(f, FOLLOWER_IDLE);
}

static void tcp_closed(uv_handle_t *h)
{
	closed(h->data);
}

static void tls_closed(struct tls_stream *ts)
{
	closed(ts->data);
}

/* Closes the connection (if any); the next check opens a new one. A
 * resolution in progress ends in its own callback. */
static void drop(struct follower *f)
{
	if (f->state == FOLLOWER_CONNECTING || f->state == FOLLOWER_OPEN) {
		set_state(f, FOLLOWER_CLOSING);
		if (f->tls_on)
			tls_stream_close(&f->tls, tls_closed);
		else
			uv_close((uv_handle_t *)&f->tcp, tcp_closed);
	} else if (f->state == FOLLOWER_RESOLVING) {
		uv_cancel((uv_req_t *)&f->resolve);
	}
}

static void written(struct follower *f, int status)
{
	free(f->out);
	f->out = NULL;
	if (status != 0 && f->state == FOLLOWER_OPEN)
		drop(f);
}

static void write_done(uv_write_t *req, int status)
{
	written(req->data, status);
}

static void tls_write_done(struct tls_stream_write *req, int status)
{
	written(req->data, status);
}

static void ask(struct follower *f)
{
	struct node *n = f->fw->node;
	Raftlock__StatusRequest req = RAFTLOCK__STATUS_REQUEST__INIT;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	size_t len;
	if (f->out != NULL)
		return; /* the previous request is still being written */
	/* Read before asking: the answer must then be at least this. A
	 * follower asking its leader sends a plain STATUS. */
	f->term = raft_current_term(&n->raft);
	if (leading(f->fw) && raft_match_index(&n->raft, f->member.id, &f->matched) != 0)
		return;
	/* The member takes the report only over TLS from this node's
	 * certificate (status.h); it goes in every mode, for members of older
	 * builds, which take it from anyone. */
	if (leading(f->fw) && FEATURES_READINESS_REPORTS) {
		req.leader_term = f->term;
		req.leader_applied = raft_last_applied(&n->raft);
	}
	env.id = ++f->request_id;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_STATUS;
	env.status = &req;
	if (codec_frame_envelope(&env, &f->out, &len) != 0)
		return;
	uv_buf_t b = uv_buf_init((char *)f->out, (unsigned)len);
	f->write.data = f;
	f->tls_write.data = f;
	int rv = f->tls_on ? tls_stream_write(&f->tls_write, &f->tls, &b, 1, tls_write_done)
			   : uv_write(&f->write, (uv_stream_t *)&f->tcp, &b, 1, write_done);
	if (rv == TLS_STREAM_WRITTEN) {
		written(f, 0);
	} else if (rv != 0) {
		free(f->out);
		f->out = NULL;
		drop(f);
		return;
	}
	f->asking = true;
	f->asked_ms = now_ms(f->fw);
}

/* ------------------------------------------------------------- hand-over */

/* While a transfer is pending libraft refuses every write (raft_apply
 * returns RAFT_NOTLEADER), and it gives up only after an election timeout,
 * checked at its heartbeat ticks: up to election + heartbeat timeout. A
 * target that cannot take over (paused, its disk or network too slow)
 * would then make the cluster refuse writes for that long at every check.
 * So: (1) the transfer's own timer is started half an election timeout
 * early, which makes libraft give up within [ET/2, ET/2 + heartbeat], at
 * most one election timeout since the heartbeat is at most half of it
 * (config.c); (2) after a transfer that did not hand over, the next one
 * waits FOLLOWERS_BACKOFF_ELECTIONS election timeouts, doubling after each
 * failure up to FOLLOWERS_BACKOFF_CAP_MS. */
uint64_t followers_backoff_ms(unsigned election_timeout_ms, unsigned failures)
{
	uint64_t base = (uint64_t)election_timeout_ms * FOLLOWERS_BACKOFF_ELECTIONS;
	uint64_t cap = FOLLOWERS_BACKOFF_CAP_MS > base ? FOLLOWERS_BACKOFF_CAP_MS : base;
	uint64_t d = base;
	for (unsigned i = 1; i < failures && d < cap; i++)
		d *= 2;
	return d < cap ? d : cap;
}

static void transfer_done(struct raft_transfer *req)
{
	(void)req; /* not always called (RAFT-NOTES.md): check() polls */
}

/* Called by check(): notices the end of this leader's transfer. A leader
 * that is still leading after it did not hand over. */
static void transfer_watch(struct followers *fw)
{
	struct node *n = fw->node;
	if (!fw->transferring || raft_transferee(&n->raft) != 0)
		return;
	fw->transferring = false;
	if (raft_state(&n->raft) != RAFT_LEADER) {
		fw->failures = 0; /* handed over */
		fw->next_transfer_ms = 0;
		return;
	}
	fw->failures++;
	uint64_t wait = followers_backoff_ms(fw->cfg->election_timeout_ms, fw->failures);
	fw->next_transfer_ms = now_ms(fw) + wait;
	log_warn("leadership transfer to %llu did not complete after %llu ms; next attempt in "
		 "%llu ms at the earliest",
		 (unsigned long long)fw->target, (unsigned long long)(now_ms(fw) - fw->transfer_ms),
		 (unsigned long long)wait);
}

/* The member lost its data: give leadership to the most up-to-date other
 * voter, so that a new leader replicates to the member from scratch. */
static void hand_over(struct followers *fw, uint64_t lost)
{
	struct node *n = fw->node;
	raft_id target = 0;
	raft_index best = 0;
	if (raft_transferee(&n->raft) != 0 || fw->transferring)
		return; /* one is already under way */
	if (now_ms(fw) < fw->next_transfer_ms)
		return; /* backing off after a transfer that did not complete */
	for (unsigned i = 0; i < fw->n; i++) {
		raft_index m;
		uint64_t id = fw->members[i].member.id;
		if (!fw->members[i].used)
			continue;
		if (id != lost && raft_match_index(&n->raft, id, &m) == 0 && m >= best) {
			best = m;
			target = id;
		}
	}
	if (target == 0) {
		log_warn("member %llu lost its data and no other voter can lead: it catches up "
			 "after the next election",
			 (unsigned long long)lost);
		return;
	}
	fw->transfer.data = fw;
	int rv = raft_transfer(&n->raft, &fw->transfer, target, transfer_done);
	if (rv != 0) {
		log_warn("leadership transfer to %llu: %s", (unsigned long long)target,
			 raft_strerror(rv));
		return;
	}
	/* libraft 0.22.1 aborts the transfer at the first tick at least an
	 * election timeout after transfer_start (tick.c); start it half an
	 * election timeout back (see above). */
	if (n->raft.leader_state.transferee == target) {
		raft_time back = fw->cfg->election_timeout_ms / 2;
		if (n->raft.leader_state.transfer_start > back)
			n->raft.leader_state.transfer_start -= back;
	}
	fw->transferring = true;
	fw->target = target;
	fw->transfer_ms = now_ms(fw);
	log_info("handing leadership to %llu so that member %llu is replicated to "
		 "from scratch",
		 (unsigned long long)target, (unsigned long long)lost);
}

/* A member far behind is sent this leader's last snapshot and then every
 * entry after it. When that snapshot is old too, replaying its tail takes
 * far longer than restoring a new one (at a million locks: a minute against
 * a second): take a new one first. Bounded: at most one per
 * snapshot-threshold entries, and only while a member lags. */
static void catch_up(struct followers *fw, struct follower *f, const Raftlock__StatusInfo *st)
{
	struct node *n = fw->node;
	uint64_t id = f->member.id, last_index = st->last_index;
	uint64_t applied = raft_last_applied(&n->raft);
	/* A member that applies entries takes snapshots of its own, and
	 * libraft 0.22.1 crashes a member that is sent one while it writes
	 * its own (RAFT-NOTES.md): force none toward a member whose applied
	 * index moved since the previous answer (FOLLOWERS_CHECK_MS ago). */
	bool moving = !f->applied_seen || st->applied_index != f->applied;
	f->applied = st->applied_index;
	f->applied_seen = true;
	if (moving)
		return;
	/* A new snapshot helps only a member behind the log it leaves. */
	uint64_t spacing = fw->cfg->snapshot_threshold > fw->cfg->snapshot_trailing
				   ? fw->cfg->snapshot_threshold
				   : fw->cfg->snapshot_trailing;
	if (n->snapshot_soon || applied <= last_index + spacing ||
	    applied <= n->snapshot_index + spacing)
		return;
	log_info("member %llu is %llu entries behind and the last snapshot %llu entries old: "
		 "taking a new one for it",
		 (unsigned long long)id, (unsigned long long)(applied - last_index),
		 (unsigned long long)(applied - n->snapshot_index));
	node_snapshot_soon(n);
}

/* libraft 0.22.1 keeps a member it sent a snapshot in snapshot mode, with
 * heartbeats only, until a success raises its match index to the
 * snapshot's. When the snapshot ends exactly at the match index this
 * leader kept for the member's previous incarnation (a member replaced
 * right after the leader snapshotted the last entry it had replicated to
 * it), the success raises nothing, and the member never gets another
 * entry from this leader (test_snapshot_tail, with LIBRAFT_TRACE=1:
 * "missing previous entry ... -> needs snapshot" at every heartbeat). The
 * proof: a voter's log rests at that very match index, behind this
 * leader's last index, while the leader still holds the entry after it
 * (a member legitimately being sent a snapshot is behind the log), in
 * answers FOLLOWERS_CHECK_MS apart for FOLLOWERS_STALL_MS. A member taking
 * entries moves within a heartbeat. The cure is the one for a wiped
 * member, at most once per FOLLOWERS_STALL_AGAIN_MS for a member. */
static bool stalled(struct followers *fw, struct follower *f, const Raftlock__StatusInfo *st)
{
	struct node *n = fw->node;
	uint64_t now = now_ms(fw);
	/* libraft keeps `trailing` entries before its last snapshot */
	uint64_t first = n->snapshot_index > n->trailing ? n->snapshot_index - n->trailing + 1 : 1;
	bool voter = false;
	for (unsigned i = 0; i < n->raft.configuration.n; i++)
		if (n->raft.configuration.servers[i].id == f->member.id)
			voter = n->raft.configuration.servers[i].role == RAFT_VOTER;
	bool resting = voter && f->matched != 0 && st->last_index == f->matched &&
		       st->last_index < raft_last_index(&n->raft) && f->matched + 1 >= first;
	/* Seen resting in the answer before too, or start counting again. */
	bool continued = f->stall_since_ms != 0 && f->stall_at == st->last_index &&
			 now - f->stall_seen_ms <= 3 * FOLLOWERS_CHECK_MS;
	if (!resting) {
		f->stall_since_ms = 0;
		return false;
	}
	if (!continued) {
		f->stall_at = st->last_index;
		f->stall_since_ms = now;
	}
	f->stall_seen_ms = now;
	if (now - f->stall_since_ms < FOLLOWERS_STALL_MS ||
	    (f->stall_cured_ms != 0 && now - f->stall_cured_ms < FOLLOWERS_STALL_AGAIN_MS))
		return false;
	f->stall_since_ms = 0;
	f->stall_cured_ms = now;
	return true;
}

void followers_judge(struct follower *f, const Raftlock__StatusInfo *st)
{
	struct followers *fw = f->fw;
	struct node *n = fw->node;
	if (!leading(fw) || raft_current_term(&n->raft) != f->term)
		return; /* the match index read belongs to another term */
	if (st->node_id != f->member.id)
		return;
	node_note_feature_level(n, st->node_id, st->feature_level);
	if (st->last_index < f->matched) {
		log_warn("member %llu's raft log ends at %llu, below the %llu this leader "
			 "replicated to it: it lost its data (a replaced machine?)",
			 (unsigned long long)f->member.id, (unsigned long long)st->last_index,
			 (unsigned long long)f->matched);
		hand_over(fw, f->member.id);
		return;
	}
	if (stalled(fw, f, st)) {
		log_warn("member %llu's raft log has rested at %llu, this leader's match index for "
			 "it, for %u ms while this leader's goes to %llu: replication to it is "
			 "stuck (a member sent a snapshot that ends at that index)",
			 (unsigned long long)f->member.id, (unsigned long long)st->last_index,
			 FOLLOWERS_STALL_MS, (unsigned long long)raft_last_index(&n->raft));
		hand_over(fw, f->member.id);
		return;
	}
	catch_up(fw, f, st);
}

static void on_envelope(struct follower *f, const uint8_t *buf, size_t len)
{
	Raftlock__Envelope *env = NULL;
	if (codec_decode_envelope(buf, len, &env) != 0) {
		/* what is on the member's client address may be anyone */
		log_rate_warn(&f->fw->log_answer, now_ms(f->fw),
			      "member %llu's client port %s: an answer that does not decode "
			      "(malformed, or over the protocol's bounds) ignored; reconnecting",
			      (unsigned long long)f->member.id, f->member.client_address);
		drop(f);
		return;
	}
	if (env->body_case == RAFTLOCK__ENVELOPE__BODY_RESPONSE && env->id == f->request_id &&
	    f->asking) {
		f->asking = false;
		const Raftlock__Response *r = env->response;
		if (r->payload_case == RAFTLOCK__RESPONSE__PAYLOAD_STATUS_INFO) {
			if (leading(f->fw)) {
				if (r->status_info->node_id == f->member.id) {
					f->answered_ms = now_ms(f->fw);
					f->conn_answered = true;
				}
				followers_judge(f, r->status_info);
			} else {
				status_note_leader_answer(f->fw->node, r->status_info);
			}
		}
	}
	raftlock__envelope__free_unpacked(env, NULL);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)suggested;
	struct follower *f = h->data;
	*buf = uv_buf_init(f->in, sizeof f->in);
}

/* Bytes from the member, in clear or through TLS. */
static void feed(struct follower *f, const char *bytes, size_t n)
{
	if (frame_reader_feed(&f->reader, bytes, n) != 0) {
		drop(f);
		return;
	}
	const uint8_t *payload;
	size_t len;
	int rv = 0;
	while (f->state == FOLLOWER_OPEN &&
	       (rv = frame_reader_next(&f->reader, &payload, &len)) == 1)
		on_envelope(f, payload, len);
	if (f->state != FOLLOWER_OPEN || rv >= 0)
		return;
	if (rv == RAFTLOCK_ETOOBIG)
		log_rate_warn(&f->fw->log_answer, now_ms(f->fw),
			      "member %llu's client port %s: a frame over %u bytes, longer than a "
			      "STATUS answer, ignored; reconnecting",
			      (unsigned long long)f->member.id, f->member.client_address,
			      (unsigned)FOLLOWERS_ANSWER_MAX);
	drop(f);
}

/* The connection failed or ended. The member is gone (until it answers
 * again) when the connection could not be made (its node is down, or cut
 * off), or when one that had answered ended; one that ended before it
 * answered may be a member that refuses this node (TLS, a limit): not a
 * sign that it is down. */
static void ended(struct follower *f)
{
	if (f->state == FOLLOWER_CONNECTING || f->conn_answered)
		f->lost_ms = now_ms(f->fw);
	drop(f);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct follower *f = s->data;
	if (nread < 0) {
		ended(f);
		return;
	}
	feed(f, buf->base, (size_t)nread);
}

static void tls_read(struct tls_stream *ts, ssize_t nread, const char *buf)
{
	struct follower *f = ts->data;
	if (nread >= 0) {
		feed(f, buf, (size_t)nread);
		return;
	}
	if ((!tls_stream_established(ts) || nread == UV_EPROTO) && !f->tls_warned) {
		log_warn("member %llu's client port %s: %s (said once until a handshake succeeds)",
			 (unsigned long long)f->member.id, f->member.client_address,
			 tls_stream_error(ts));
		f->tls_warned = true;
	}
	if (tls_stream_established(ts) && nread != UV_EPROTO)
		ended(f);
	else
		drop(f); /* it took the connection: alive, and refuses this node */
}

static void tls_handshake(struct tls_stream *ts)
{
	struct follower *f = ts->data;
	if (f->tls_warned)
		log_info("member %llu's client port: TLS handshake succeeded again",
			 (unsigned long long)f->member.id);
	f->tls_warned = false;
}

/* Starts TLS on the connected tcp, expecting the host of the member's
 * client address in its certificate. */
static int start_tls(struct follower *f)
{
	char host[CONFIG_ADDR_MAX], port[ADDRESS_PORT_MAX];
	if (address_split(f->member.client_address, host, sizeof host, port) != 0)
		return -1;
	struct tls_stream_options o = {
		.role = TLS_ROLE_CLIENT,
		.host = host,
		.handshake_timeout_ms = f->fw->cfg->tls_handshake_timeout_ms,
		.on_handshake = tls_handshake,
		.on_read = tls_read,
	};
	if (tls_stream_start(&f->tls, (uv_stream_t *)&f->tcp, f->fw->tls, &o) != 0)
		return -1;
	f->tls.data = f;
	f->tls_on = true;
	return 0;
}

static void connect_cb(uv_connect_t *req, int status)
{
	struct follower *f = req->data;
	if (f->state != FOLLOWER_CONNECTING)
		return; /* closed meanwhile */
	if (status != 0) {
		ended(f);
		return;
	}
	if (!wanted(f)) {
		drop(f);
		return;
	}
	int rv = f->fw->tls != NULL ? start_tls(f)
				    : uv_read_start((uv_stream_t *)&f->tcp, alloc_cb, read_cb);
	if (rv != 0) {
		drop(f);
		return;
	}
	set_state(f, FOLLOWER_OPEN);
	ask(f); /* with TLS: sent once the handshake is done */
}

static void resolve_cb(uv_getaddrinfo_t *req, int status, struct addrinfo *ai)
{
	struct follower *f = req->data;
	set_state(f, FOLLOWER_IDLE);
	if (status != 0 || !wanted(f)) {
		uv_freeaddrinfo(ai);
		return;
	}
	uv_tcp_init(f->fw->loop, &f->tcp);
	f->tcp.data = f;
	f->conn_answered = false;
	frame_reader_init(&f->reader, FOLLOWERS_ANSWER_MAX);
	f->connect.data = f;
	set_state(f, FOLLOWER_CONNECTING);
	if (uv_tcp_connect(&f->connect, &f->tcp, ai->ai_addr, connect_cb) != 0)
		drop(f);
	uv_freeaddrinfo(ai);
}

static void resolve(struct follower *f)
{
	char host[CONFIG_ADDR_MAX], port[ADDRESS_PORT_MAX];
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	if (address_split(f->member.client_address, host, sizeof host, port) != 0)
		return;
	f->resolve.data = f;
	if (uv_getaddrinfo(f->fw->loop, &f->resolve, resolve_cb, host, port, &hints) == 0)
		set_state(f, FOLLOWER_RESOLVING);
}

/* ----------------------------------------------------------------- check */

static bool in_configuration(const struct raft_configuration *conf, uint64_t id)
{
	for (unsigned i = 0; i < conf->n; i++)
		if (conf->servers[i].id == id)
			return true;
	return false;
}

/* Members come and go (docs/OPERATIONS.md): follow the raft configuration
 * (until raft has one, the --member list). A slot whose member left is
 * freed once its connection is closed; a new member is checked once its
 * client address is known. */
static void sync_members(struct followers *fw)
{
	const struct raft_configuration *conf = &fw->node->raft.configuration;
	if (conf->n == 0)
		return;
	for (unsigned i = 0; i < fw->n; i++) {
		struct follower *f = &fw->members[i];
		if (!f->used || in_configuration(conf, f->member.id))
			continue;
		if (f->state == FOLLOWER_IDLE)
			f->used = false;
		else
			drop(f);
	}
	for (unsigned k = 0; k < conf->n; k++) {
		uint64_t id = conf->servers[k].id;
		bool known = id == fw->cfg->id;
		for (unsigned i = 0; i < fw->n && !known; i++)
			known = fw->members[i].used && fw->members[i].member.id == id;
		const char *client = known ? NULL : node_member_client_address(fw->node, id);
		if (client == NULL)
			continue;
		for (unsigned i = 0; i < CONFIG_MAX_MEMBERS; i++) {
			struct follower *f = &fw->members[i];
			if (f->used || (i < fw->n && f->state != FOLLOWER_IDLE))
				continue;
			memset(f, 0, sizeof *f);
			f->fw = fw;
			f->used = true;
			f->member.id = id;
			snprintf(f->member.raft_address, sizeof f->member.raft_address, "%s",
				 conf->servers[k].address);
			snprintf(f->member.client_address, sizeof f->member.client_address, "%s",
				 client);
			set_state(f, FOLLOWER_IDLE);
			if (i >= fw->n)
				fw->n = i + 1;
			break;
		}
	}
}

static void check(struct timebase_timer *t)
{
	struct followers *fw = t->data;
	uint64_t now = now_ms(fw);
	transfer_watch(fw);
	sync_members(fw);
	/* a new leadership: leading again, or leading in another term (lost
	 * and won again between two checks) */
	bool lead = leading(fw);
	raft_term term = raft_current_term(&fw->node->raft);
	if (lead && (!fw->was_leading || term != fw->leading_term)) {
		fw->leading_since_ms = now;
		fw->leading_term = term;
	}
	fw->was_leading = lead;
	if (!leading(fw) && !fw->transferring) {
		fw->failures = 0; /* a new leadership starts without back-off */
		fw->next_transfer_ms = 0;
	}
	for (unsigned i = 0; i < fw->n; i++) {
		struct follower *f = &fw->members[i];
		if (!f->used)
			continue;
		if (!wanted(f)) {
			drop(f);
			continue;
		}
		bool waited = now - (f->asking ? f->asked_ms : f->since_ms) > FOLLOWERS_ANSWER_MS;
		if (f->state == FOLLOWER_IDLE)
			resolve(f);
		else if (f->state == FOLLOWER_CONNECTING && waited)
			ended(f);
		else if (f->state == FOLLOWER_OPEN && f->asking && waited)
			ended(f);
		else if (f->state == FOLLOWER_OPEN && !f->asking)
			ask(f);
	}
}

void followers_start(struct followers *fw, uv_loop_t *loop, struct timebase *tb,
		     const struct config *cfg, struct node *node, SSL_CTX *tls)
{
	memset(fw, 0, sizeof *fw);
	fw->tls = tls;
	fw->loop = loop;
	fw->tb = tb;
	fw->cfg = cfg;
	fw->node = node;
	for (unsigned i = 0; i < cfg->n_members; i++) {
		if (cfg->members[i].id == cfg->id)
			continue;
		struct follower *f = &fw->members[fw->n++];
		f->fw = fw;
		f->used = true;
		f->member = cfg->members[i];
		set_state(f, FOLLOWER_IDLE);
	}
	timebase_timer_init(tb, &fw->timer, fw);
	timebase_timer_start(&fw->timer, check, FOLLOWERS_CHECK_MS, FOLLOWERS_CHECK_MS);
}

void followers_set_tls(struct followers *fw, SSL_CTX *tls)
{
	fw->tls = tls;
}

static const struct follower *follower_of(const struct followers *fw, uint64_t id)
{
	for (unsigned i = 0; i < fw->n; i++)
		if (fw->members[i].used && fw->members[i].member.id == id)
			return &fw->members[i];
	return NULL;
}

uint64_t followers_hand_over_target(struct followers *fw)
{
	struct node *n = fw->node;
	const struct raft_configuration *conf = &n->raft.configuration;
	if (!leading(fw))
		return NODE_HAND_OVER_ANY;
	uint64_t now = now_ms(fw), target = NODE_HAND_OVER_ANY;
	raft_index best = 0;
	bool all_gone = true;
	/* only what this leadership saw, once check() has noted it */
	bool known = fw->was_leading && raft_current_term(&n->raft) == fw->leading_term;
	for (unsigned i = 0; i < conf->n; i++) {
		uint64_t id = conf->servers[i].id;
		if (conf->servers[i].role != RAFT_VOTER || id == fw->cfg->id)
			continue;
		const struct follower *f = follower_of(fw, id);
		if (f == NULL) { /* its client address is not known: not judged */
			all_gone = false;
			continue;
		}
		/* what this leadership saw (check() notes its start) */
		bool alive = known && f->answered_ms >= fw->leading_since_ms &&
			     f->answered_ms > f->lost_ms &&
			     now - f->answered_ms <= FOLLOWERS_ALIVE_MS;
		all_gone = all_gone && known && f->lost_ms >= fw->leading_since_ms &&
			   f->lost_ms > f->answered_ms;
		raft_index m;
		if (alive && raft_match_index(&n->raft, id, &m) == 0 &&
		    (target == NODE_HAND_OVER_ANY || m > best)) {
			best = m;
			target = id;
		}
	}
	if (target != NODE_HAND_OVER_ANY)
		return target;
	return all_gone ? NODE_HAND_OVER_NONE : NODE_HAND_OVER_ANY;
}

void followers_close(struct followers *fw)
{
	fw->closing = true;
	timebase_timer_close(&fw->timer);
	for (unsigned i = 0; i < fw->n; i++)
		if (fw->members[i].used)
			drop(&fw->members[i]);
}
