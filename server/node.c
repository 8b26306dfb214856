/* node.c: see node.h. The libraft 0.22.1 facts handled here (one padded
 * buffer per raft_apply, buffer ownership on failure, pre-vote, in-flight
 * cap, auto-recovery off, rand() seeding, apply() learning its index from
 * raft_last_applied() + 1) are in docs/RAFT-NOTES.md, section "Wiring". */
#include "node.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "codec.h"
#include "datadir.h"
#include "grow.h"
#include "heap.h"
#include "join.h"
#include "log.h"
#include "peer_tcp.h"
#include "peer_tls.h"
#include "raftlock.h"
#include "restore.h"
#include "return_hold.h"
#include "snapshot_tail.h"

#define BATCH_MAX_COMMANDS 1024
#define NODE_DRAIN_MS 1000 /* at shutdown, wait this long for answers */
#define BATCH_MAX_BYTES (1u << 20)
#define STALL_TICK_MS 100    /* stall_cb's period */
#define PIPELINE_DEPTH 1     /* entries of ours in flight; see flusher_cb() */
#define PIPELINE_STALL_MS 20 /* ...unless the last one has taken this long */

struct node_waiter {
	node_done_cb cb;
	void *arg;
	uint64_t caller; /* a client's call (node_propose_call): its session; else 0 */
};

struct proposal {
	struct raft_apply req;
	struct node *node;
	unsigned n;
	struct node_waiter *waiters;
	Raftlock__Result *results;
	uint64_t proposed_ms;
	struct list link; /* in node->inflight */
};

static uint64_t mono_ms(struct node *n)
{
	return timebase_now(n->tb);
}

/* ------------------------------------------------------ apply and events */

struct apply_ctx {
	struct node *node;
	uint64_t index;
};

static struct proposal *find_inflight(struct node *n, uint64_t index)
{
	struct list *l;
	list_each (l, &n->inflight) {
		struct proposal *p = list_entry(l, struct proposal, link);
		if (p->req.index == index)
			return p;
	}
	return NULL;
}

/* Keeps a command's result until raft confirms the entry, with its own
 * copy of a set's tokens (they point into the apply's memory). */
static void keep_result(Raftlock__Result *dst, const Raftlock__Result *src)
{
	free(dst->tokens);
	*dst = *src;
	dst->tokens = NULL;
	if (src->n_tokens == 0)
		return;
	dst->tokens = malloc(src->n_tokens * sizeof *dst->tokens);
	if (dst->tokens == NULL)
		log_fatal("out of memory");
	memcpy(dst->tokens, src->tokens, src->n_tokens * sizeof *dst->tokens);
}

static void sink_emit(void *arg, const struct fsm_event *ev)
{
	struct apply_ctx *ctx = arg;
	struct node *n = ctx->node;
	if (ev->type == FSM_EV_RESULT) {
		/* Kept per proposal, keyed by log index; only used if raft
		 * then confirms that this index was our entry (status 0). */
		struct proposal *p = find_inflight(n, ctx->index);
		if (p != NULL && ev->command < p->n)
			keep_result(&p->results[ev->command], ev->result);
		return;
	}
	if (n->hooks.on_event != NULL)
		n->hooks.on_event(n->hooks.arg, ev);
}

/* Every member applies the same entries, so with one log limit they would
 * all take their snapshot at the same entry: each a stall of the loop and a
 * write of the whole state. Two followers stalled at once leave a leader of
 * three without a majority's answers, and at 1,000,000 sessions (160 MiB
 * images, three nodes on one disk) that outlasted the election timeout.
 * So the member at position i of the n in the configuration takes its
 * first snapshot by log bytes (or replay time) after a start or a restore
 * limit * i / n later than the limit says, and every limit after that: the
 * members' snapshots stay spread over the interval. A snapshot by entry
 * count (the threshold, the same on every member until the first by bytes)
 * leaves the offset in place. */
static uint64_t snapshot_phase(const struct node *n, uint64_t limit)
{
	const struct raft_configuration *conf = &n->raft.configuration;
	for (unsigned i = 0; i < conf->n; i++)
		if (conf->servers[i].id == n->cfg->id)
			return limit * i / conf->n;
	return 0;
}

/* Replaying at most this long after a snapshot: --snapshot-replay-ms, or,
 * for a state so large that a snapshot costs the loop more than a
 * twentieth of that, twenty snapshots' time: snapshots then take at most
 * about 5% of the loop's time spent applying. */
#define REPLAY_PER_DUMP 20

static uint64_t replay_limit_ns(const struct node *n)
{
	uint64_t by_config = (uint64_t)n->cfg->snapshot_replay_ms * 1000000;
	uint64_t by_cost = n->dump_ns * REPLAY_PER_DUMP;
	return by_cost > by_config ? by_cost : by_config;
}

/* Entry index through the state machine. */
static void apply_entry(void *arg, uint64_t index, const void *buf, size_t len)
{
	struct node *n = arg;
	struct apply_ctx ctx = {n, index};
	struct fsm_sink sink = {sink_emit, &ctx};
	if (n->cfg->disk_reserve != 0) /* never a write that fails half-way */
		diskguard_wait_room(&n->disk_space, DISKGUARD_APPLY_ROOM(len), ctx.index);
	uint64_t start = uv_hrtime();
	fsm_apply_raw(&n->fsm, ctx.index, buf, len, &sink);
	image_build_note(&n->build, ctx.index, buf, len);
	uint64_t took = uv_hrtime() - start;
	histogram_observe(&n->apply, took);
	n->log_bytes_new += len;
	n->log_entries_new++;
	n->apply_ns_new += took;
	if (n->phase_due) {
		n->phase_due = false;
		n->log_phase_bytes = snapshot_phase(n, node_log_limit(n));
		n->replay_phase_ns = snapshot_phase(n, replay_limit_ns(n));
	}
	/* By bytes: the log's memory. By apply time: a restart, or a member
	 * sent the last snapshot, replays what follows it in one loop turn
	 * (libraft applies every committed entry at once); at a million
	 * locks, 10,000 entries were 28 MB but 25-31 s. */
	if (!n->snapshot_soon &&
	    (n->log_bytes_kept + n->log_bytes_new >= node_log_limit(n) + n->log_phase_bytes ||
	     n->apply_ns_new >= replay_limit_ns(n) + n->replay_phase_ns)) {
		/* libraft checks its threshold right after this apply. */
		n->snapshot_soon = true;
		raft_set_snapshot_threshold(&n->raft, 1); /* fsm_cb_snapshot sets it back */
	}
}

static void held_idle_cb(uv_idle_t *h)
{
	(void)h; /* running, it keeps the loop's poll from blocking */
}

/* Applies the entries held (apply_defer.h): before anything reads the
 * state as of raft's applied index. */
static void apply_held(struct node *n)
{
	if (!apply_defer_holding(&n->held))
		return;
	apply_defer_drain(&n->held, apply_entry, n);
	uv_idle_stop(&n->held_idle);
}

static int fsm_cb_apply(struct raft_fsm *f, const struct raft_buffer *buf, void **result)
{
	struct node *n = f->data;
	uint64_t index = raft_last_applied(&n->raft) + 1;
	*result = NULL; /* never allocated: raft does not free it on followers */
	/* A follower's apply waits for the loop's next poll, where the disk
	 * write raft just issued goes on (apply_defer.h). A leader's answers
	 * wait for its apply: never held. */
	if (n->raft_started && !n->stopping && raft_state(&n->raft) == RAFT_FOLLOWER &&
	    apply_defer_hold(&n->held, index, buf->base, buf->len)) {
		uv_idle_start(&n->held_idle, held_idle_cb);
		return 0;
	}
	apply_held(n);
	apply_entry(n, index, buf->base, buf->len);
	return 0;
}

uint64_t node_log_limit(const struct node *n)
{
	uint64_t by_state = (uint64_t)n->state_bytes * n->cfg->snapshot_log_ratio / 100;
	return by_state > n->cfg->snapshot_log_bytes ? by_state : n->cfg->snapshot_log_bytes;
}

/* On a leader, the entries the member furthest behind still lacks (0 on a
 * follower). */
static uint64_t leader_lag(struct node *n)
{
	if (raft_state(&n->raft) != RAFT_LEADER)
		return 0;
	uint64_t applied = raft_last_applied(&n->raft), lag = 0;
	for (unsigned i = 0; i < n->raft.configuration.n; i++) {
		raft_index m;
		uint64_t id = n->raft.configuration.servers[i].id;
		if (id != n->cfg->id && raft_match_index(&n->raft, id, &m) == 0 && m < applied &&
		    applied - m > lag)
			lag = applied - m;
	}
	return lag;
}

/* libraft counts trailing entries, not bytes: from the average size of the
 * entries since the last snapshot, keep as many as fit in a quarter of the
 * log limit (at most the configured count, at least a few for a follower
 * that is only a heartbeat behind). Set before the snapshot is written:
 * libraft reads the count when it compacts. */
static void set_trailing_by_bytes(struct node *n)
{
	uint64_t avg = n->log_entries_new ? n->log_bytes_new / n->log_entries_new : 0;
	uint64_t fit = avg ? node_log_limit(n) / 4 / avg : n->cfg->snapshot_trailing;
	unsigned trailing = n->cfg->snapshot_trailing;
	if (fit < trailing)
		trailing = fit < 8 ? 8 : (unsigned)fit;
	/* A leader keeps the entries a lagging member still needs, up to the
	 * whole log limit: compacted past it, that member is sent a snapshot,
	 * and libraft 0.22.1 crashes a member that gets one while it writes a
	 * snapshot of its own, as a member catching up by entries does
	 * (docs/RAFT-NOTES.md). */
	uint64_t lag = leader_lag(n);
	uint64_t cap = avg ? node_log_limit(n) / avg : lag;
	if (lag > trailing)
		trailing =
			(unsigned)(lag < cap ? (lag < UINT32_MAX / 2 ? lag : UINT32_MAX / 2) : cap);
	if (trailing != n->trailing) {
		raft_set_snapshot_trailing(&n->raft, trailing);
		n->trailing = trailing;
	}
	uint64_t in_log = n->log_entries_new + n->log_entries_kept;
	n->log_entries_kept = in_log < trailing ? in_log : trailing;
	n->log_bytes_kept = n->log_entries_kept * avg;
	n->log_bytes_new = 0;
	n->log_entries_new = 0;
	n->apply_ns_new = 0;
}

/* Gives the heap's free pages back to the system (heap.h), and says so
 * when it took long. */
static void trim_heap(const char *when)
{
	uint64_t t0 = uv_hrtime();
	int rv = heap_trim();
	double ms = (double)(uv_hrtime() - t0) / 1e6;
	if (rv != 0) {
		log_warn("the heap was not trimmed %s the snapshot: %s", when, strerror(rv));
		return;
	}
	log_msg(ms >= 50 ? LOG_INFO : LOG_DEBUG, "heap trimmed %s the snapshot in %.1f ms", when,
		ms);
}

/* From FEATURES_SNAPSHOT_TAIL: the image is dumped off the loop and the
 * snapshot is it and the entries applied since (image_build.h). Until the
 * image is whole, libraft is told RAFT_BUSY and asks again after the next
 * entries it applies (its threshold stays where it was). Returns 0 with
 * the snapshot (*raw_len: its image's length unpacked), RAFT_BUSY, or
 * RAFT_NOMEM to take it on the loop now. */
static int snapshot_off_loop(struct node *n, struct raft_buffer *bufs[], unsigned *n_bufs,
			     size_t *raw_len)
{
	struct image_build *b = &n->build;
	if (b->state == IMAGE_BUILD_RUNNING)
		return RAFT_BUSY;
	if (b->state == IMAGE_BUILD_IDLE) {
		trim_heap("before"); /* see fsm_cb_snapshot() */
		if (image_build_start(b) != 0)
			return RAFT_NOMEM;
		return RAFT_BUSY;
	}
	uint64_t image_index = b->image_index;
	uint32_t entries = b->tail.n;
	*raw_len = b->raw_len;
	if (image_build_take(b, bufs, n_bufs) != 0)
		return RAFT_NOMEM;
	n->builds_taken++;
	log_debug("snapshot at %llu: the image at %llu and %u entries after it",
		  (unsigned long long)raft_last_applied(&n->raft), (unsigned long long)image_index,
		  entries);
	return 0;
}

static int fsm_cb_snapshot(struct raft_fsm *f, struct raft_buffer *bufs[], unsigned *n_bufs)
{
	struct node *n = f->data;
	apply_held(n); /* the snapshot is of raft's applied index */
	uint64_t t0 = uv_hrtime();
	struct raft_buffer *b = NULL;
	size_t raw_len = 0; /* of a packed image */
	int rv = RAFT_NOMEM;
	/* A build under way means the level (which never goes down) is read;
	 * after a build was lost, one snapshot is taken on the loop. */
	if (n->build.state != IMAGE_BUILD_IDLE ||
	    (!image_build_failed(&n->build) &&
	     node_cluster_feature_level(n) >= FEATURES_SNAPSHOT_TAIL)) {
		rv = snapshot_off_loop(n, &b, n_bufs, &raw_len);
		if (rv == RAFT_BUSY)
			return rv;
		if (rv == 0)
			n->dump_ns = n->build.dump_ns;
	}
	if (rv != 0) {
		image_build_fallback_done(&n->build);
		/* The image and the whole log are in memory together until
		 * libraft has written the one and compacted the other:
		 * whatever the heap holds free besides (buffers of requests and
		 * answers since the last trim) need not add to that peak. */
		trim_heap("before");
		b = raft_malloc(sizeof *b);
		if (b == NULL || store_dump(&n->store, raft_malloc, &b->base, &b->len) != 0) {
			raft_free(b);
			/* not at every entry from now on, should a snapshot have
			 * been asked for soon (threshold 1) */
			n->snapshot_soon = false;
			raft_set_snapshot_threshold(&n->raft, n->cfg->snapshot_threshold);
			/* nor at every entry for the log's bytes: after another limit */
			n->log_bytes_new = 0;
			n->apply_ns_new = 0;
			return RAFT_NOMEM;
		}
		*n_bufs = 1;
		raw_len = b->len;
		n->dump_ns = uv_hrtime() - t0;
	}
	*bufs = b;
	size_t bytes = 0;
	for (unsigned i = 0; i < *n_bufs; i++)
		bytes += b[i].len;
	n->snapshot_index = raft_last_applied(&n->raft);
	if (n->snapshot_soon) /* spent: this one came by bytes or time (or on request) */
		n->log_phase_bytes = n->replay_phase_ns = 0;
	n->snapshot_soon = false;
	n->snapshots_taken++;
	n->trim_due = true;
	/* The state's size spaces snapshots (node_log_limit()), not the
	 * bytes it packs into. */
	n->state_bytes = bytes - b[0].len + raw_len;
	uint64_t log_bytes = n->log_bytes_kept + n->log_bytes_new;
	double replay_ms = (double)n->apply_ns_new / 1e6;
	set_trailing_by_bytes(n);
	/* Snapshots cost a dump of the state (on the loop below
	 * FEATURES_SNAPSHOT_TAIL): space them so that the log between two of
	 * them is about as large as the state itself (entries average well
	 * over 64 bytes). The log's bytes (fsm_cb_apply) bound the spacing
	 * from above. */
	size_t want = n->state_bytes / 64;
	unsigned threshold = want > n->cfg->snapshot_threshold
				     ? (want > UINT32_MAX / 2 ? UINT32_MAX / 2 : (unsigned)want)
				     : n->cfg->snapshot_threshold;
	raft_set_snapshot_threshold(&n->raft, threshold);
	char packed[64] = "";
	if (raw_len != b[0].len)
		snprintf(packed, sizeof packed, ", its image packed from %zu bytes", raw_len);
	log_info("snapshot at index %llu: %zu bytes, dumped in %.1f ms%s%s (log %llu bytes, "
		 "applied in %.0f ms); next after %u entries, %llu log bytes or %u ms of applying, "
		 "keeping %u",
		 (unsigned long long)raft_last_applied(&n->raft), bytes, (double)n->dump_ns / 1e6,
		 *n_bufs > 1 ? " off the loop" : "", packed, (unsigned long long)log_bytes,
		 replay_ms, threshold, (unsigned long long)node_log_limit(n),
		 (unsigned)(replay_limit_ns(n) / 1000000), n->trailing);
	return 0;
}

/* A restore that fails once raft runs leaves libraft 0.22.1 on a follower
 * that no longer applies anything, silently (docs/RAFT-NOTES.md). Stop instead:
 * a supervisor restarts the node, which rebuilds itself from its disk (or
 * fails to start with the same cause, in the open). At start, the error
 * goes back to raft_start() and node_start() reports it. */
static int restore_failed(struct node *n, const char *cause, uint64_t index, size_t len)
{
	if (!n->raft_started) {
		log_error("snapshot at %llu (%zu bytes): %s", (unsigned long long)index, len,
			  cause);
		return RAFT_CORRUPT;
	}
	log_error("snapshot restore failed at index %llu (%zu bytes): %s; stopping, so that "
		  "the node restarts from its disk",
		  (unsigned long long)index, len, cause);
	/* _exit: nothing of this process is worth finishing (LMDB is rebuilt
	 * or kept by the next start), and exit() would run leak checks. */
	fflush(stderr);
	_exit(3);
}

static int fsm_cb_restore(struct raft_fsm *f, struct raft_buffer *buf)
{
	struct node *n = f->data;
	apply_held(n); /* in order: what was committed before the image */
	struct snapshot_parts parts;
	if (snapshot_split(buf->base, buf->len, &parts) != 0)
		return restore_failed(n, "the snapshot is damaged (image or tail)", 0, buf->len);
	uint64_t index = parts.index;
	if ((n->faults & NODE_FAULT_RESTORE) && n->raft_started)
		return restore_failed(n, "injected failure (RAFTLOCK_TEST_FAULT=restore)", index,
				      buf->len);
	uint64_t applied = fsm_applied_index(&n->fsm);
	n->snapshot_index = index;
	n->state_bytes = buf->len - parts.image_len + parts.raw_len;
	n->log_bytes_new = n->log_entries_new = n->log_bytes_kept = n->log_entries_kept = 0;
	n->apply_ns_new = 0;
	n->phase_due = true;
	if (applied >= index) {
		/* LMDB already has it: what makes a restart fast. */
		log_info("snapshot at %llu: store already at %llu, kept", (unsigned long long)index,
			 (unsigned long long)applied);
	} else {
		uint64_t t0 = uv_hrtime();
		image_build_discard(&n->build); /* of the state being replaced */
		/* Events of the tail's entries are dropped: on_restore rebuilds
		 * what the node derives from the store. */
		int rv = snapshot_load(&n->store, &n->fsm, &parts, NULL);
		if (rv != 0) {
			char cause[384];
			const char *why = store_load_error(&n->store);
			snprintf(cause, sizeof cause, "loading it into the store failed (%s%s%s)",
				 rv == RAFTLOCK_EDATA    ? "damaged image"
				 : rv == RAFTLOCK_ENOMEM ? "out of memory unpacking its image"
							 : "store error",
				 *why ? ": " : "", why);
			return restore_failed(n, cause, index, buf->len);
		}
		uint32_t level = node_cluster_feature_level(n);
		if (level > FEATURE_LEVEL) {
			char cause[160];
			snprintf(cause, sizeof cause,
				 "the cluster runs at feature level %u; this raftlockd supports "
				 "level %u: start a build of level %u or more",
				 level, FEATURE_LEVEL, level);
			store_clear(&n->store); /* nothing of a state it cannot run */
			return restore_failed(n, cause, index, buf->len);
		}
		n->snapshots_restored++;
		n->book_valid = false; /* another member book, perhaps */
		log_info("restored snapshot at %llu (%zu bytes; image at %llu%s and %u entries) "
			 "in %.1f ms",
			 (unsigned long long)index, buf->len, (unsigned long long)parts.image_index,
			 parts.packed ? ", packed" : "", parts.n_entries,
			 (double)(uv_hrtime() - t0) / 1e6);
		if (n->hooks.on_restore != NULL)
			n->hooks.on_restore(n->hooks.arg);
	}
	raft_free(buf->base);
	return 0;
}

static void snapshot_barrier_done(struct raft_barrier *req, int status)
{
	(void)status;
	free(req);
}

void node_snapshot_soon(struct node *n)
{
	if (n->snapshot_soon)
		return;
	n->snapshot_soon = true;
	raft_set_snapshot_threshold(&n->raft, 1); /* fsm_cb_snapshot sets it back */
	struct raft_barrier *req = calloc(1, sizeof *req);
	if (req == NULL)
		log_fatal("out of memory");
	if (raft_barrier(&n->raft, req, snapshot_barrier_done) != 0)
		free(req); /* then the next entry applied takes it */
}

/* --------------------------------------------------------------- clock -- */

uint64_t node_cluster_now(struct node *n)
{
	return cluster_clock_now(&n->clock);
}

/* ------------------------------------------------------------ proposals */

/* The status of an entry raft failed after its append: it may still
 * commit, so the outcome is unknown (RAFT_LEADERSHIPLOST, anything else),
 * unless raft is shutting down. Never ENOTLEADER, which clients take as
 * "not executed" (only a refusal before raft_apply() says that). */
static int map_raft_error(int rv)
{
	return rv == RAFT_SHUTDOWN ? RAFTLOCK_ESHUTDOWN : RAFTLOCK_EUNKNOWN;
}

static void fail_waiters(struct node_waiter *w, unsigned count, int status)
{
	for (unsigned i = 0; i < count; i++)
		if (w[i].cb != NULL)
			w[i].cb(w[i].arg, status, NULL);
}

static void unlink_proposal(struct node *n, struct proposal *p)
{
	list_remove(&p->link);
	n->inflight_n--;
}

/* An entry of ours applied, nothing else of ours in flight: the next
 * batch may wait for the callers it answered (return_hold.h). A caller
 * whose next call is in the batch already (calls in flight on several
 * handles of its session) has come back. */
static void return_hold_from(struct node *n, const struct proposal *p)
{
	return_hold_begin(&n->hold);
	for (unsigned i = 0; i < p->n; i++)
		if (p->results[i].status == 0 && !p->results[i].queued)
			return_hold_expect(&n->hold, p->waiters[i].caller); /* 0: none */
	return_hold_arm(&n->hold, mono_ms(n));
	for (unsigned i = 0; i < n->batch_n; i++)
		return_hold_note_call(&n->hold, n->batch_waiters[i].caller);
}

static void apply_done(struct raft_apply *req, int status, void *result)
{
	(void)result;
	struct proposal *p = req->data;
	struct node *n = p->node;
	unlink_proposal(n, p);
	if (status == 0 && n->inflight_n == 0)
		return_hold_from(n, p);
	if (status == 0) {
		for (unsigned i = 0; i < p->n; i++)
			if (p->waiters[i].cb != NULL)
				p->waiters[i].cb(p->waiters[i].arg, 0, &p->results[i]);
	} else {
		fail_waiters(p->waiters, p->n, map_raft_error(status));
	}
	free(p->waiters);
	for (unsigned i = 0; i < p->n; i++)
		free(p->results[i].tokens);
	free(p->results);
	free(p);
}

static void take_batch(struct node *n, struct node_waiter **waiters, unsigned *count)
{
	*waiters = n->batch_waiters;
	*count = n->batch_n;
	n->batch_waiters = NULL;
	n->batch_waiters_cap = 0;
	n->batch_n = 0;
	n->batch_len = 0;
	n->batch_parked = 0;
}

static void issue_kept_append(void *arg, struct raft_io *io, struct raft_io_append *req,
			      const struct raft_entry entries[], unsigned n, raft_io_append_cb cb);

/* Turns the batch into one log entry (one buffer, padded: docs/RAFT-NOTES.md). */
static void flush(struct node *n)
{
	if (n->batch_n == 0)
		return;
	struct node_waiter *waiters;
	unsigned count;
	uint64_t t = cluster_clock_stamp(&n->clock);
	struct raft_buffer buf;
	int rv = codec_batch_entry(t, n->batch, n->batch_len, raft_malloc, &buf.base, &buf.len);
	take_batch(n, &waiters, &count);
	if (rv != 0) {
		fail_waiters(waiters, count, rv);
		free(waiters);
		return;
	}
	struct proposal *p = calloc(1, sizeof *p);
	Raftlock__Result *results = calloc(count, sizeof *results);
	if (p == NULL || results == NULL)
		log_fatal("out of memory");
	p->node = n;
	p->n = count;
	p->waiters = waiters;
	p->results = results;
	p->req.data = p;
	p->proposed_ms = mono_ms(n);
	/* The followers get the entry before this node's disk write of it is
	 * issued (append_order.h); with peer TLS, encrypted and sent now. */
	append_order_hold(&n->order);
	rv = raft_apply(&n->raft, &p->req, &buf, 1, apply_done);
	if (n->peer_tls)
		peer_tls_flush(&n->transport);
	append_order_release(&n->order, issue_kept_append, n);
	if (rv != 0) {
		if (rv == RAFT_NOTLEADER)
			raft_free(buf.base); /* raft freed it on any other error */
		fail_waiters(waiters, count,
			     rv == RAFT_NOTLEADER ? RAFTLOCK_ENOTLEADER : RAFTLOCK_EUNAVAILABLE);
		free(waiters);
		free(results);
		free(p);
		return;
	}
	list_add_tail(&n->inflight, &p->link);
	n->inflight_n++;
	n->entries_proposed++;
	n->commands_proposed += count;
}

static void flush_when_due(struct node *n);

/* The park and return holds' timers: the batch may go now. */
static void flush_due(struct timebase_timer *t)
{
	flush_when_due(t->data);
}

/* Whether the batch holds only commands that may wait, for less than
 * NODE_PARK_MS (node_propose_call, parked); the timer ends the hold. */
static bool batch_held(struct node *n)
{
	if (n->batch_n == 0 || n->batch_parked < n->batch_n)
		return false;
	uint64_t now = mono_ms(n), until = n->batch_parked_ms + NODE_PARK_MS;
	if (now >= until)
		return false;
	if (!timebase_timer_active(&n->park_timer))
		timebase_timer_start(&n->park_timer, flush_due, until - now, 0);
	return true;
}

/* Whether the batch waits for the callers the last entry answered; its
 * own timer ends the wait. */
static bool return_held(struct node *n)
{
	uint64_t wake_in;
	if (n->batch_n == 0 || !return_hold_waits(&n->hold, mono_ms(n), &wake_in))
		return false;
	/* a timer still running is due sooner: an earlier hold armed it */
	if (!timebase_timer_active(&n->hold_timer))
		timebase_timer_start(&n->hold_timer, flush_due, wake_in, 0);
	return true;
}

/* Group commit: while an entry is on its way to commit, the commands that
 * arrive wait in the batch and go out together when it is applied. Every
 * entry costs each node a disk write, a message and an LMDB transaction,
 * so fewer and larger entries leave the CPU to the commands; an idle
 * leader still proposes at once, unless every command in the batch may
 * wait, or the callers the last entry answered are still to come back
 * (return_hold.h). A commit that takes long (a slow disk) lets the next entry overlap
 * it rather than hold everything back. */
static void flush_when_due(struct node *n)
{
	if (batch_held(n))
		return;
	if (n->inflight_n == 0 && return_held(n))
		return;
	if (n->inflight_n < PIPELINE_DEPTH ||
	    mono_ms(n) - list_entry(n->inflight.prev, struct proposal, link)->proposed_ms >=
		    PIPELINE_STALL_MS)
		flush(n);
}

static void flusher_cb(uv_prepare_t *h)
{
	flush_when_due(h->data);
}

static int propose(struct node *n, const Raftlock__Command *cmd, node_done_cb cb, void *arg,
		   bool call, bool parked)
{
	if (n->stopping)
		return RAFTLOCK_ESHUTDOWN;
	if (!n->leader)
		return RAFTLOCK_ENOTLEADER;
	if (!n->ready)
		return RAFTLOCK_EUNAVAILABLE;
	if (grow(&n->batch_waiters, &n->batch_waiters_cap, n->batch_n + 1, 64,
		 sizeof *n->batch_waiters) != 0)
		return RAFTLOCK_ENOMEM;
	int rv = codec_batch_add(&n->batch, &n->batch_len, &n->batch_cap, cmd);
	if (rv != 0)
		return rv;
	n->batch_waiters[n->batch_n++] = (struct node_waiter){cb, arg, call ? cmd->session : 0};
	if (call)
		return_hold_note_call(&n->hold, cmd->session);
	if (parked) {
		if (n->batch_parked++ == 0)
			n->batch_parked_ms = mono_ms(n);
		n->commands_parked++;
	}
	if (n->batch_n >= BATCH_MAX_COMMANDS || n->batch_len >= BATCH_MAX_BYTES)
		flush(n);
	return 0;
}

int node_propose(struct node *n, const Raftlock__Command *cmd, node_done_cb cb, void *arg)
{
	return propose(n, cmd, cb, arg, false, false);
}

int node_propose_call(struct node *n, const Raftlock__Command *cmd, node_done_cb cb, void *arg,
		      bool parked)
{
	return propose(n, cmd, cb, arg, true, parked);
}

int node_propose_quiet(struct node *n, const Raftlock__Command *cmd)
{
	return propose(n, cmd, NULL, NULL, false, false);
}

bool node_lock_queued(struct node *n, const char *name, uint64_t session)
{
	if (!n->leader || !n->ready || n->stopping)
		return false; /* propose() refuses it anyway */
	MDB_txn *txn = store_begin(&n->store, false);
	bool queued = store_lock_queued(&n->store, txn, name, session);
	store_abort(txn);
	return queued;
}

/* ---------------------------------------------------------- leadership -- */

static void set_ready(struct node *n, bool ready)
{
	if (n->ready == ready)
		return;
	n->ready = ready;
	if (!ready) {
		cluster_clock_stop(&n->clock); /* no leader: cluster time stands still */
		return_hold_reset(&n->hold);
		/* Commands batched but not appended were never proposed. */
		struct node_waiter *waiters;
		unsigned count;
		take_batch(n, &waiters, &count);
		fail_waiters(waiters, count, RAFTLOCK_ENOTLEADER);
		free(waiters);
	}
	log_info("%s (term %llu)", ready ? "leader ready" : "not serving",
		 (unsigned long long)n->term);
	if (n->hooks.on_ready != NULL)
		n->hooks.on_ready(n->hooks.arg, ready);
}

#define INIT_RETRY_MS 100

static void init_done(void *arg, int status, const Raftlock__Result *result)
{
	(void)result;
	struct node *n = arg;
	n->init_inflight = false;
	if (status == 0) {
		n->init_needed = false; /* applied (a repeat is a no-op in apply) */
		return;
	}
	/* Lost with leadership, refused, or failed to append: propose it
	 * again shortly while this node still leads (watch_cb). */
	log_warn("INIT proposal failed (%d); retrying", status);
	n->init_retry_ms = mono_ms(n) + INIT_RETRY_MS;
}

/* Rule 7: a new cluster's tokens start above its bootstrap wall-clock
 * milliseconds << 20, so a rebuilt cluster never goes below an earlier
 * one's tokens. The value is recorded in the log. Until INIT applies the
 * cluster hands out no token, so it is proposed again until it does. */
static void propose_init(struct node *n)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	Raftlock__Init init = RAFTLOCK__INIT__INIT;
	init.token_floor = ms << 20;
	init.cluster = (char *)n->cfg->cluster;
	if (getrandom(&init.cluster_id, sizeof init.cluster_id, 0) != sizeof init.cluster_id)
		init.cluster_id = uv_hrtime() ^ ms << 16 ^ n->cfg->id;
	MDB_txn *txn = store_begin(&n->store, false);
	Raftlock__Meta *m = store_get_meta(&n->store, txn);
	init.restored_from = m->restored_from; /* restore.h */
	init.feature_level = FEATURE_LEVEL;
	raftlock__meta__free_unpacked(m, NULL);
	store_abort(txn);
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_INIT;
	cmd.init = &init;
	n->init_inflight = true;
	if (n->faults & NODE_FAULT_DROP_INIT) {
		n->faults &= ~NODE_FAULT_DROP_INIT;
		log_warn("dropping the first INIT (RAFTLOCK_TEST_FAULT=drop-init)");
		init_done(n, RAFTLOCK_EUNKNOWN, NULL);
		return;
	}
	int rv = node_propose(n, &cmd, init_done, n);
	if (rv != 0)
		init_done(n, rv, NULL);
}

static void barrier_done(struct raft_barrier *req, int status)
{
	struct node *n = req->data;
	bool current = n->barrier == req;
	free(req);
	if (!current)
		return;
	n->barrier = NULL;
	if (status != 0 || !n->leader || raft_state(&n->raft) != RAFT_LEADER)
		return;
	/* Everything before the barrier is applied: the store's cluster time
	 * is the highest in the log, and the clock continues from it. */
	MDB_txn *txn = store_begin(&n->store, false);
	Raftlock__Meta *m = store_get_meta(&n->store, txn);
	cluster_clock_start(&n->clock, m->cluster_time);
	n->init_needed = m->next_token == 0;
	raftlock__meta__free_unpacked(m, NULL);
	store_abort(txn);
	set_ready(n, true);
	if (n->init_needed && !n->init_inflight)
		propose_init(n);
}

static void propose_barrier(struct node *n)
{
	struct raft_barrier *req = calloc(1, sizeof *req);
	if (req == NULL)
		log_fatal("out of memory");
	req->data = n;
	int rv = raft_barrier(&n->raft, req, barrier_done);
	if (rv != 0) {
		free(req);
		return; /* retried at the next check */
	}
	n->barrier = req;
}

/* Once libraft has written a snapshot and compacted the log (it frees the
 * entries then), gives the heap's free pages back to the system. The log
 * is many buffers of one batch of commands each, freed together; glibc
 * keeps the freed pages otherwise, so that RSS would stay at the log's
 * high-water mark plus whatever the next log needs (issue: RSS bounded by
 * the state, tests/bench/logmem). A trim of a few hundred MiB of heap
 * takes a few ms, once per snapshot. */
static void trim_after_snapshot(struct node *n)
{
	if (!n->trim_due || n->raft.legacy.snapshot_taking)
		return;
	n->trim_due = false;
	trim_heap("after");
}

/* A loop that does not turn for an election timeout sends no heartbeats
 * and answers no peer: its followers elect another leader, or its leader
 * counts it as gone. Each stall of half that or more is worth a line, with
 * its length, to set beside the other lines of that moment (a snapshot's
 * duration, say). */
static void stall_cb(uv_timer_t *h)
{
	struct node *n = h->data;
	uint64_t now = uv_now(n->loop);
	uint64_t gap = n->stall_seen != 0 ? now - n->stall_seen : STALL_TICK_MS;
	n->stall_seen = now;
	if (gap < STALL_TICK_MS + n->cfg->election_timeout_ms / 2)
		return;
	uint64_t late = gap - STALL_TICK_MS;
	n->loop_stalls++;
	log_warn("the loop did not turn for %llu ms (election timeout %u ms): heartbeats and "
		 "answers to peers waited that long",
		 (unsigned long long)late, n->cfg->election_timeout_ms);
}

/* libraft has no state-change callback: look after every loop iteration. */
static void watch_cb(uv_check_t *h)
{
	struct node *n = h->data;
	/* Held applies go once the loop has polled since, or at once off
	 * the follower's role (a leader serves from its state). */
	if (apply_defer_turn(&n->held) || raft_state(&n->raft) != RAFT_FOLLOWER)
		apply_held(n);
	if (n->stopping)
		return;
	trim_after_snapshot(n);
	raft_id leader_id = 0;
	const char *leader_addr;
	raft_leader(&n->raft, &leader_id, &leader_addr);
	if (leader_id != 0 && leader_id != n->leader_seen) {
		if (n->leader_seen != 0)
			n->leader_changes++;
		n->leader_seen = leader_id;
	}
	bool leader = raft_state(&n->raft) == RAFT_LEADER;
	raft_term term = raft_current_term(&n->raft);
	if (leader && (!n->leader || term != n->term)) {
		n->leader = true;
		n->term = term;
		n->barrier = NULL;            /* an older term's barrier no longer counts */
		features_clear(&n->features); /* asked again in this term */
		set_ready(n, false);
		log_info("elected leader in term %llu", (unsigned long long)term);
	} else if (!leader && n->leader) {
		n->leader = false;
		n->barrier = NULL;
		set_ready(n, false);
	}
	if (n->leader && !n->ready && n->barrier == NULL)
		propose_barrier(n);
	if (n->ready && n->init_needed && !n->init_inflight && mono_ms(n) >= n->init_retry_ms)
		propose_init(n);
}

const char *node_role(struct node *n)
{
	switch (raft_state(&n->raft)) {
	case RAFT_LEADER: return "leader";
	case RAFT_FOLLOWER: return "follower";
	case RAFT_CANDIDATE: return "candidate";
	default: return "unavailable";
	}
}

const char *node_leader_client_address(struct node *n, uint64_t *leader_id)
{
	raft_id id = 0;
	const char *addr = NULL;
	raft_leader(&n->raft, &id, &addr);
	if (leader_id != NULL)
		*leader_id = id;
	return id ? node_member_client_address(n, id) : NULL;
}

struct node_member_addr {
	uint64_t id;
	char client_address[CONFIG_ADDR_MAX];
};

/* Reads the member book's client addresses into n->book. */
static void book_read(struct node *n)
{
	MDB_txn *txn = store_begin(&n->store, false);
	Raftlock__Meta *meta = store_get_meta(&n->store, txn);
	struct node_member_addr *book = NULL;
	if (meta->n_members > 0 && (book = calloc(meta->n_members, sizeof *book)) == NULL)
		log_fatal("out of memory");
	for (size_t i = 0; i < meta->n_members; i++) {
		book[i].id = meta->members[i]->id;
		snprintf(book[i].client_address, sizeof book[i].client_address, "%s",
			 meta->members[i]->client_address);
	}
	free(n->book);
	n->book = book;
	n->book_n = meta->n_members;
	n->book_changes = n->fsm.member_changes;
	n->book_valid = true;
	raftlock__meta__free_unpacked(meta, NULL);
	store_abort(txn);
}

const char *node_member_client_address(struct node *n, uint64_t id)
{
	const struct config_member *m = config_member_by_id(n->cfg, id);
	if (m != NULL)
		return m->client_address;
	if (id == n->cfg->id)
		return n->cfg->client_address;
	/* Added at run time: the replicated member book has it. */
	if (!n->book_valid || n->book_changes != n->fsm.member_changes)
		book_read(n);
	for (size_t i = 0; i < n->book_n; i++)
		if (n->book[i].id == id)
			return n->book[i].client_address;
	return NULL;
}

/* --------------------------------------------------------- feature level */

uint32_t node_cluster_feature_level(struct node *n)
{
	MDB_txn *txn = store_begin(&n->store, false);
	Raftlock__Meta *m = store_get_meta(&n->store, txn);
	uint32_t level = features_recorded(m->feature_level);
	raftlock__meta__free_unpacked(m, NULL);
	store_abort(txn);
	return level;
}

bool node_level_admits(struct node *n, const Raftlock__Command *cmd)
{
	uint32_t need = features_level_of(cmd);
	return need <= 1u || need <= node_cluster_feature_level(n);
}

static void level_done(void *arg, int status, const Raftlock__Result *result)
{
	(void)status;
	(void)result;
	struct node *n = arg;
	n->level_inflight = false; /* a lost one is proposed again at the next report */
}

void node_note_feature_level(struct node *n, uint64_t id, uint32_t level)
{
	features_note(&n->features, id, level);
	if (!n->ready || n->level_inflight)
		return;
	uint64_t voters[FEATURES_MAX_NODES];
	unsigned nv = 0;
	const struct raft_configuration *conf = &n->raft.configuration;
	for (unsigned i = 0; i < conf->n && nv < FEATURES_MAX_NODES; i++)
		if (conf->servers[i].role == RAFT_VOTER)
			voters[nv++] = conf->servers[i].id;
	uint32_t all = features_voters_level(&n->features, n->cfg->id, voters, nv);
	if (all <= node_cluster_feature_level(n))
		return;
	Raftlock__SetFeatureLevel set = RAFTLOCK__SET_FEATURE_LEVEL__INIT;
	set.level = all;
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_SET_FEATURE_LEVEL;
	cmd.set_feature_level = &set;
	if (node_propose(n, &cmd, level_done, n) == 0) {
		n->level_inflight = true;
		log_info("every voter supports feature level %u: recording it", all);
	}
}

/* --------------------------------------------------------------- start -- */

/* An append kept by append_order: raft was told it was accepted and the
 * entry is on its way to the followers, so a refusal now cannot be handed
 * back (append_order.h); the node stops, as on running out of memory, and
 * a restart recovers from what its disk holds. */
static void issue_kept_append(void *arg, struct raft_io *io, struct raft_io_append *req,
			      const struct raft_entry entries[], unsigned n, raft_io_append_cb cb)
{
	struct node *nd = arg;
	int rv = io_timing_append(&nd->disk, io, req, entries, n, cb);
	if (rv != 0)
		log_fatal("the raft log refused an append already sent to the followers: %s (%s)",
			  raft_strerror(rv), io->errmsg);
}

/* raft sets io->data to its instance, which lives in the node. */
static int timed_append(struct raft_io *io, struct raft_io_append *req,
			const struct raft_entry entries[], unsigned n, raft_io_append_cb cb)
{
	struct node *nd = (struct node *)((char *)io->data - offsetof(struct node, raft));
	if (append_order_keep(&nd->order, io, req, entries, n, cb))
		return 0;
	append_order_release(&nd->order, issue_kept_append, nd); /* what is kept goes first */
	return io_timing_append(&nd->disk, io, req, entries, n, cb);
}

/* How a node whose raft directory is empty (it has never been a member)
 * starts: it creates a new cluster only when told to (--bootstrap), joins
 * one when told to (--join: it claims its id first, join.h), and is
 * refused otherwise. This is what keeps a machine whose data directory was
 * lost from coming back as a member with an empty log, and voting, under
 * its old id (docs/GUARANTEES.md, membership). */
static int first_start(struct node *n, const char *raft_dir, bool *do_bootstrap, char *err,
		       size_t errlen)
{
	const struct config *cfg = n->cfg;
	*do_bootstrap = false;
	if (datadir_has_files(raft_dir)) {
		/* A member, unless it is a node that joined and stopped before
		 * it heard from a leader (datadir_raft_blank): it claims again
		 * (the claim holds again for its incarnation) to learn the
		 * members its raft port admits; knowing none, with peer TLS it
		 * would refuse the leader for good. Without peer TLS it admits
		 * any peer, and waits for the leader as before. */
		if (cfg->join[0] == '\0' || cfg->peer_tls_cert[0] == '\0' ||
		    !datadir_raft_blank(raft_dir))
			return 0;
		log_warn("%s holds nothing from a leader yet (a --join start that stopped "
			 "early): claiming member %llu again",
			 raft_dir, (unsigned long long)cfg->id);
	} else if (cfg->bootstrap || (cfg->restore_file[0] != '\0' && cfg->join[0] == '\0')) {
		/* A restore makes a new cluster. With --join it is a member
		 * added to a restored cluster: it takes the image as its base
		 * (restore.h) and joins below as any other node, claiming its
		 * id; the leader sends it the log from its first entry. */
		*do_bootstrap = true;
		return 0;
	}
	if (cfg->join[0] == '\0') {
		snprintf(err, errlen,
			 "%s is empty: this node has never been a member. Start it with "
			 "--bootstrap to create a new cluster, or add it to the running one "
			 "(raftlock member add ID RAFTADDR CLIENTADDR) and start it with --join; a "
			 "member whose data was lost comes back under a new id "
			 "(docs/OPERATIONS.md)",
			 raft_dir);
		return RAFTLOCK_ECONFIG;
	}
	uint64_t incarnation;
	int rv = datadir_incarnation(cfg->data_dir, &incarnation, err, errlen);
	if (rv != 0)
		return rv;
	char why[512];
	rv = join_claim(cfg, incarnation, &n->join_members, why, sizeof why);
	if (rv != 0) {
		snprintf(err, errlen, "join: %s", why);
		return rv;
	}
	log_info("member %llu claimed (incarnation %016llx): starting without a log; the "
		 "leader sends it",
		 (unsigned long long)cfg->id, (unsigned long long)incarnation);
	return 0;
}

static int bootstrap(struct node *n, char *err, size_t errlen)
{
	struct raft_configuration conf;
	raft_configuration_init(&conf);
	for (unsigned i = 0; i < n->cfg->n_members; i++) {
		const struct config_member *m = &n->cfg->members[i];
		if (raft_configuration_add(&conf, m->id, m->raft_address, RAFT_VOTER) != 0) {
			raft_configuration_close(&conf);
			snprintf(err, errlen, "member %llu: cannot add to configuration",
				 (unsigned long long)m->id);
			return RAFTLOCK_ECONFIG;
		}
	}
	int rv = raft_bootstrap(&n->raft, &conf);
	raft_configuration_close(&conf);
	if (rv == 0)
		log_info("bootstrapped a %u-voter cluster '%s'", n->cfg->n_members,
			 n->cfg->cluster);
	else if (rv != RAFT_CANTBOOTSTRAP) {
		snprintf(err, errlen, "bootstrap: %s", raft_strerror(rv));
		return RAFTLOCK_EIO;
	}
	return 0;
}

static unsigned test_faults(void)
{
	const char *v = getenv("RAFTLOCK_TEST_FAULT");
	unsigned f = 0;
	if (v == NULL)
		return 0;
	if (strstr(v, "restore") != NULL)
		f |= NODE_FAULT_RESTORE;
	if (strstr(v, "drop-init") != NULL)
		f |= NODE_FAULT_DROP_INIT;
	if (strstr(v, "slow-image") != NULL)
		f |= NODE_FAULT_SLOW_IMAGE;
	if (strstr(v, "room-unchecked") != NULL)
		f |= NODE_FAULT_ROOM_UNCHECKED;
	if (f != 0)
		log_warn("test faults injected: %s", v);
	return f;
}

/* Whether a peer that proved id by its certificate is a member: one of
 * the configured members, of raft's current configuration, or of those the
 * leader named when this node's --join claim held. A joining node has no
 * configuration until the leader's link delivers one, and usually no
 * --member list: the answer to its claim is how it knows that link is a
 * member's. A member added after that answer is in the configuration the
 * log brings; until then a link of its is refused, and raft connects
 * again. (Should such a member lead before any entry reached this node,
 * a restart claims again and learns it: first_start.) No id outside these
 * is admitted, so a certificate of the cluster's CA for a non-member
 * still admits nothing. */
static bool node_knows_member(void *arg, raft_id id)
{
	struct node *n = arg;
	if (config_member_by_id(n->cfg, id) != NULL)
		return true;
	/* The join answer only until raft has a configuration of its own,
	 * which then says who is a member (a member removed since stays out). */
	for (size_t i = 0; n->raft.configuration.n == 0 && i < n->join_members.n; i++)
		if (n->join_members.ids[i] == id)
			return true;
	for (unsigned i = 0; i < n->raft.configuration.n; i++)
		if (n->raft.configuration.servers[i].id == id)
			return true;
	return false;
}

/* Frees the raft transport once raft no longer uses it. */
static void transport_close(struct node *n)
{
	if (n->peer_tls)
		peer_tls_close(&n->transport);
	else
		peer_tcp_close(&n->transport);
}

int node_reload_peer_tls(struct node *n, char *err, size_t errlen)
{
	if (!n->peer_tls)
		return 0;
	const struct config *cfg = n->cfg;
	struct tls_files files = {cfg->peer_tls_cert, cfg->peer_tls_key, cfg->peer_tls_ca};
	return peer_tls_reload(&n->transport, cfg->id, &files, err, errlen);
}

int node_start(struct node *n, uv_loop_t *loop, struct timebase *tb, const struct config *cfg,
	       const struct node_hooks *hooks, char *err, size_t errlen)
{
	int rv;
	char raft_dir[DATADIR_PATH_MAX], state_dir[DATADIR_PATH_MAX];
	memset(n, 0, sizeof *n);
	n->phase_due = true; /* snapshot_phase(), at the first apply */
	n->loop = loop;
	image_build_init(&n->build, loop, &n->store);
	n->cfg = cfg;
	n->hooks = *hooks;
	n->tb = tb;
	cluster_clock_init(&n->clock, tb);
	list_init(&n->inflight);
	n->datadir_fd = -1;
	n->faults = test_faults();
	/* A backup image, and the room for it, are checked before the data
	 * directory is touched; until raft has started on the restored base,
	 * a failure takes away what the restore made (restore.h), also a
	 * store write's, which exits from inside the store. */
	struct restore_image image = {0};
	struct restore_undo undo = {0};
	if (cfg->restore_file[0] != '\0') {
		if ((rv = restore_check_target(cfg->data_dir, err, errlen)) != 0 ||
		    (rv = restore_read(cfg->restore_file, &image, err, errlen)) != 0)
			return rv;
		restore_note(cfg->data_dir, &image, &undo);
		if (!(n->faults & NODE_FAULT_ROOM_UNCHECKED) &&
		    (rv = restore_check_room(&undo, err, errlen)) != 0) {
			restore_image_free(&image);
			return rv;
		}
	}
	if ((rv = datadir_open(cfg->data_dir, cfg->cluster, cfg->id, raft_dir, state_dir,
			       &n->datadir_fd, err, errlen)) != 0) {
		restore_image_free(&image);
		/* RAFTLOCK_EDATA: the directory is another's (in use by another
		 * raftlockd, or another node's): nothing there is ours to remove */
		if (rv != RAFTLOCK_EDATA)
			return restore_undo(&undo, rv, err, errlen);
		restore_done(&undo);
		return rv;
	}
	bool do_bootstrap;
	if ((rv = first_start(n, raft_dir, &do_bootstrap, err, errlen)) != 0) {
		datadir_unlock(n->datadir_fd);
		restore_image_free(&image);
		return restore_undo(&undo, rv, err, errlen);
	}
	diskguard_init(&n->disk_space, tb, cfg->data_dir, cfg->disk_reserve);
	n->disk_space.on_wait = hooks->on_stalled;
	n->disk_space.on_wait_arg = hooks->arg;
	if ((rv = store_open(&n->store, state_dir, cfg->map_size, err, errlen)) != 0) {
		restore_image_free(&image);
		return restore_undo(&undo, rv, err, errlen);
	}
	fsm_init(&n->fsm, &n->store);
	histogram_init(&n->apply, &histogram_latency);
	MDB_txn *txn = store_begin(&n->store, false);
	Raftlock__Meta *meta = store_get_meta(&n->store, txn);
	uint32_t format = meta->format;
	/* Format 0 is an empty store; one with applied entries and no format
	 * was written by no build (every one wrote its format), but would
	 * hold what this build cannot vouch for: rebuilt as any other
	 * format. */
	bool stale = format != STORE_FORMAT && (format != 0 || meta->applied_index > 0);
	uint32_t level = features_recorded(meta->feature_level);
	/* The state names its cluster once INIT applied (a restored image
	 * names none until then): a data.mdb copied in from another cluster
	 * would otherwise be served as this one's. */
	char other[sizeof cfg->cluster] = "";
	if (meta->cluster[0] != '\0' && strcmp(meta->cluster, cfg->cluster) != 0)
		snprintf(other, sizeof other, "%s", meta->cluster);
	raftlock__meta__free_unpacked(meta, NULL);
	store_abort(txn);
	if (other[0] != '\0') {
		snprintf(
			err, errlen,
			"%s/data.mdb belongs to another cluster (its state says cluster=%s, this "
			"node is cluster=%s): move it away; the node rebuilds it from its raft log",
			state_dir, other, cfg->cluster);
		rv = RAFTLOCK_EDATA;
		restore_image_free(&image);
		goto fail_store;
	}
	if (level > FEATURE_LEVEL) {
		snprintf(err, errlen,
			 "%s/data.mdb: the cluster runs at feature level %u; this raftlockd "
			 "supports "
			 "level %u: start a build of level %u or more (docs/OPERATIONS.md, "
			 "Upgrades)",
			 state_dir, level, FEATURE_LEVEL, level);
		rv = RAFTLOCK_EDATA;
		restore_image_free(&image);
		goto fail_store;
	}
	if (stale) {
		log_warn("%s/data.mdb has store format %u, this raftlockd writes %u: "
			 "rebuilding it from the raft log",
			 state_dir, format, STORE_FORMAT);
		store_clear(&n->store);
	}
	if (image.buf != NULL)
		rv = restore_install(cfg->data_dir, &n->store, &n->fsm, &image, err, errlen);
	else
		rv = restore_reload_base(cfg->data_dir, &n->store, err, errlen);
	restore_image_free(&image);
	if (rv != 0)
		goto fail_store;

	n->transport.version = 1; /* 0.22.1 refuses version 0 */
	n->transport.data = NULL;
	n->peer_tls = cfg->peer_tls_cert[0] != '\0';
	if (n->peer_tls) {
		struct tls_files files = {cfg->peer_tls_cert, cfg->peer_tls_key, cfg->peer_tls_ca};
		if (peer_tls_init(&n->transport, loop, cfg->id, &files, err, errlen) != 0) {
			rv = RAFTLOCK_ECONFIG;
			goto fail_store;
		}
		peer_tls_set_members(&n->transport, node_knows_member, n);
	} else if (peer_tcp_init(&n->transport, loop, err, errlen) != 0) {
		rv = RAFTLOCK_ENOMEM;
		goto fail_store;
	}
	if ((rv = raft_uv_init(&n->io, loop, raft_dir, &n->transport)) != 0) {
		snprintf(err, errlen, "raft io in %s: %s", raft_dir, raft_strerror(rv));
		goto fail_transport;
	}
	raft_uv_set_auto_recovery(&n->io, false);
	io_timing_wrap(&n->disk, &n->io, timed_append);
	n->raft_fsm.version = 1;
	n->raft_fsm.data = n;
	n->raft_fsm.apply = fsm_cb_apply;
	n->raft_fsm.snapshot = fsm_cb_snapshot;
	n->raft_fsm.restore = fsm_cb_restore;
	if ((rv = raft_init(&n->raft, &n->io, &n->raft_fsm, cfg->id, cfg->raft_address)) != 0) {
		snprintf(err, errlen, "raft init: %s", raft_strerror(rv));
		goto fail_io;
	}
	/* Election timeouts are randomized from libc's rand() in the raft_uv
	 * backend: unseeded, every node draws the same sequence and their
	 * elections keep splitting the vote. Seed it, and raft's own state. */
	unsigned seed = 0;
	if (getrandom(&seed, sizeof seed, 0) != sizeof seed)
		seed = (unsigned)(uv_hrtime() ^ (uint64_t)getpid() << 16);
	seed ^= (unsigned)cfg->id * 2654435761u;
	srand(seed);
	raft_seed(&n->raft, seed);
	raft_set_election_timeout(&n->raft, cfg->election_timeout_ms);
	raft_set_heartbeat_timeout(&n->raft, cfg->heartbeat_timeout_ms);
	raft_set_pre_vote(&n->raft, true);
	raft_set_max_inflight_entries(&n->raft, 4096);
	raft_set_snapshot_threshold(&n->raft, cfg->snapshot_threshold);
	raft_set_snapshot_trailing(&n->raft, cfg->snapshot_trailing);
	n->trailing = cfg->snapshot_trailing;
	if (n->faults & NODE_FAULT_SLOW_IMAGE)
		n->build.delay_ms = 300;
	if (do_bootstrap && (rv = bootstrap(n, err, errlen)) != 0)
		goto fail_raft;
	if ((rv = raft_start(&n->raft)) != 0) {
		snprintf(err, errlen,
			 "raft start in %s: %s %s(is raft-address %s free to listen on?)", raft_dir,
			 raft_strerror(rv), raft_errmsg(&n->raft), cfg->raft_address);
		rv = RAFTLOCK_EDATA;
		goto fail_raft;
	}
	n->raft_started = true;
	/* The restore's last step: its base, and the log bootstrapped on it
	 * (or, joining, the id claimed for the leader's log), are the node's
	 * from here; a failure before this removed what it made. */
	restore_done(&undo);
	uint64_t applied = fsm_applied_index(&n->fsm);
	n->start_applied = applied;
	if (applied > raft_last_index(&n->raft)) {
		/* libraft applies an entry once the cluster has committed it,
		 * even if this node's own append of it has not completed; a
		 * stop can then leave LMDB ahead of the local log. Those
		 * entries are committed on a majority that does not include
		 * this node, so it cannot lead before it has them again; the
		 * leader resends them and apply skips what it already has. */
		log_warn("%s/data.mdb is at index %llu, ahead of the local raft log (%llu): "
			 "the tail will come again from the leader",
			 state_dir, (unsigned long long)applied,
			 (unsigned long long)raft_last_index(&n->raft));
	}
	uv_check_init(loop, &n->watch);
	n->watch.data = n;
	uv_check_start(&n->watch, watch_cb);
	uv_idle_init(loop, &n->held_idle);
	n->held_idle.data = n;
	timebase_timer_init(tb, &n->transfer_timer, n);
	timebase_timer_init(tb, &n->park_timer, n);
	timebase_timer_init(tb, &n->hold_timer, n);
	return_hold_init(&n->hold);
	uv_prepare_init(loop, &n->flusher);
	n->flusher.data = n;
	uv_prepare_start(&n->flusher, flusher_cb);
	uv_timer_init(loop, &n->stall_timer);
	n->stall_timer.data = n;
	uv_timer_start(&n->stall_timer, stall_cb, STALL_TICK_MS, STALL_TICK_MS);
	log_info("started: raft %s, store at index %llu, raft log up to %llu", cfg->raft_address,
		 (unsigned long long)applied, (unsigned long long)raft_last_index(&n->raft));
	return 0;

fail_raft:
	/* raft_init succeeded: close through raft, which closes io. The loop
	 * is not running, so the caller only exits. */
	return restore_undo(&undo, rv < 0 ? rv : RAFTLOCK_EIO, err, errlen);
fail_io:
	raft_uv_close(&n->io);
fail_transport:
	transport_close(n);
fail_store:
	fsm_fini(&n->fsm);
	store_close(&n->store);
	return restore_undo(&undo, rv < 0 ? rv : RAFTLOCK_EIO, err, errlen);
}

/* ---------------------------------------------------------------- stop -- */

static void close_handle_cb(uv_handle_t *h)
{
	(void)h;
}

static void raft_closed(struct raft *r)
{
	struct node *n = r->data;
	raft_uv_close(&n->io);
	transport_close(n);
	image_build_close(&n->build); /* no worker reads the store past here */
	if (store_sync(&n->store) == 0 && datadir_mark_clean(n->cfg->data_dir) == 0)
		log_info("store synced; clean shutdown recorded");
	fsm_fini(&n->fsm);
	if (n->hooks.on_store_closing != NULL)
		n->hooks.on_store_closing(n->hooks.arg);
	store_close(&n->store);
	datadir_unlock(n->datadir_fd); /* nothing more is written there */
	n->datadir_fd = -1;
	free(n->batch);
	return_hold_free(&n->hold);
	free(n->book);
	n->book = NULL;
	n->book_valid = false;
	if (n->stop_cb)
		n->stop_cb(n);
}

static void close_raft(struct node *n)
{
	if (n->closing_raft)
		return;
	n->closing_raft = true;
	timebase_timer_close(&n->transfer_timer);
	timebase_timer_close(&n->park_timer);
	timebase_timer_close(&n->hold_timer);
	apply_held(n); /* before the store closes */
	uv_check_stop(&n->watch);
	uv_prepare_stop(&n->flusher);
	uv_close((uv_handle_t *)&n->watch, close_handle_cb);
	uv_close((uv_handle_t *)&n->held_idle, close_handle_cb);
	uv_close((uv_handle_t *)&n->flusher, close_handle_cb);
	uv_close((uv_handle_t *)&n->stall_timer, close_handle_cb);
	n->raft.data = n;
	raft_close(&n->raft, raft_closed);
}

static void transfer_timeout(struct timebase_timer *h)
{
	struct node *n = h->data;
	log_warn("leadership transfer did not report back; closing anyway");
	close_raft(n);
}

static void transfer_done(struct raft_transfer *req)
{
	struct node *n = req->data;
	if (n->closing_raft)
		return;
	uint64_t leader = 0;
	node_leader_client_address(n, &leader);
	log_info("leadership transfer %s (leader now %llu)",
		 leader != n->cfg->id ? "done" : "did not complete", (unsigned long long)leader);
	close_raft(n);
}

static void hand_over(struct node *n)
{
	if (n->ready)
		set_ready(n, false);
	if (raft_state(&n->raft) == RAFT_LEADER && n->hand_over_to == NODE_HAND_OVER_NONE) {
		log_info("no other voter is alive: stopping without handing leadership over");
	} else if (raft_state(&n->raft) == RAFT_LEADER) {
		n->transfer.data = n;
		int rv = raft_transfer(&n->raft, &n->transfer, n->hand_over_to, transfer_done);
		if (rv != 0 && n->hand_over_to != NODE_HAND_OVER_ANY)
			rv = raft_transfer(&n->raft, &n->transfer, NODE_HAND_OVER_ANY,
					   transfer_done);
		if (rv == 0) {
			timebase_timer_start(&n->transfer_timer, transfer_timeout,
					     n->cfg->election_timeout_ms + 500, 0);
			return;
		}
	}
	close_raft(n);
}

/* Draining: the commands already proposed get their answers before the
 * leader hands over (bounded: a leader without a quorum cannot commit). */
static void drain_check(struct timebase_timer *h)
{
	struct node *n = h->data;
	if (!list_empty(&n->inflight) && mono_ms(n) < n->drain_until)
		return;
	timebase_timer_stop(h);
	hand_over(n);
}

void node_stop(struct node *n, void (*cb)(struct node *n))
{
	node_stop_to(n, NODE_HAND_OVER_ANY, cb);
}

void node_stop_to(struct node *n, uint64_t target, void (*cb)(struct node *n))
{
	n->hand_over_to = target;
	n->stopping = true;
	n->stop_cb = cb;
	flush(n);
	if (list_empty(&n->inflight)) {
		hand_over(n);
		return;
	}
	n->drain_until = mono_ms(n) + NODE_DRAIN_MS;
	timebase_timer_start(&n->transfer_timer, drain_check, 5, 5);
}
