/* cli_print.c: see cli_print.h. */
#include "cli_print.h"
#include "cli_json.h"

#include <inttypes.h>

static const char *kind_name(enum raftlock_kind k)
{
	switch (k) {
	case RAFTLOCK_RWLOCK: return "rwlock";
	case RAFTLOCK_SEMAPHORE: return "semaphore";
	default: return "mutex";
	}
}

static const char *mode_name(enum raftlock_mode m)
{
	return m == RAFTLOCK_SHARED ? "shared" : "exclusive";
}

void cli_out_begin(struct cli_out *o, FILE *f, bool json, bool listing)
{
	o->f = f;
	o->json = json;
	o->listing = listing;
	o->items = 0;
	if (json && listing)
		fputs("[", f);
}

void cli_out_end(struct cli_out *o)
{
	if (o->json && o->listing)
		fputs(o->items ? "\n]\n" : "]\n", o->f);
	else if (o->json)
		fputs("\n", o->f);
}

/* Starts the next JSON item of the listing. */
static void json_item(struct cli_out *o)
{
	if (o->listing)
		fputs(o->items ? ",\n  " : "\n  ", o->f);
	o->items++;
}

/* Milliseconds as seconds with one decimal. */
static void print_span(FILE *f, uint64_t later, uint64_t earlier)
{
	uint64_t ms = later > earlier ? later - earlier : 0;
	fprintf(f, "%" PRIu64 ".%" PRIu64 "s", ms / 1000, ms % 1000 / 100);
}

static void json_owner(FILE *f, const struct raftlock_owner *w)
{
	fputs("\"client\": ", f);
	cli_json_string(f, w->client_name);
	fputs(", \"host\": ", f);
	cli_json_string(f, w->host);
	fprintf(f, ", \"pid\": %" PRIu32, w->pid);
}

static void text_owner(FILE *f, const struct raftlock_owner *w)
{
	fprintf(f, "%s@%s pid %" PRIu32, w->client_name, w->host, w->pid);
}

/* ---------------------------------------------------------------- status */

static void json_status(FILE *f, const char *endpoint, const struct raftlock_status *st)
{
	fputs("{\"endpoint\": ", f);
	cli_json_string(f, endpoint);
	fprintf(f, ", \"node_id\": %" PRIu64 ", \"role\": ", st->node_id);
	cli_json_string(f, st->role);
	fprintf(f,
		", \"ready\": %s, \"term\": %" PRIu64 ", \"commit_index\": %" PRIu64
		", \"applied_index\": %" PRIu64 ", \"last_index\": %" PRIu64
		", \"leader_id\": %" PRIu64 ", \"leader_address\": ",
		st->ready ? "true" : "false", st->term, st->commit_index, st->applied_index,
		st->last_index, st->leader_id);
	cli_json_string(f, st->leader_address);
	fprintf(f,
		", \"cluster_time\": %" PRIu64 ", \"next_token\": %" PRIu64
		", \"sessions\": %" PRIu64 ", \"locks\": %" PRIu64 ", \"cluster\": ",
		st->cluster_time, st->next_token, st->sessions, st->locks);
	cli_json_string(f, st->cluster);
	fprintf(f,
		", \"cluster_id\": \"%016" PRIx64
		"\", \"feature_level\": %u, \"cluster_feature_level\": %u",
		st->cluster_id, st->feature_level, st->cluster_feature_level);
	fputs(", \"members\": [", f);
	for (size_t i = 0; i < st->n_members; i++) {
		fprintf(f, "%s{\"id\": %" PRIu64 ", \"raft_address\": ", i ? ", " : "",
			st->members[i].id);
		cli_json_string(f, st->members[i].raft_address);
		fputs(", \"client_address\": ", f);
		cli_json_string(f, st->members[i].client_address);
		fputs("}", f);
	}
	fputs("]}", f);
}

void cli_print_status(struct cli_out *o, const char *endpoint, const struct raftlock_status *st,
		      const char *error)
{
	FILE *f = o->f;
	if (o->json) {
		json_item(o);
		if (st != NULL) {
			json_status(f, endpoint, st);
			return;
		}
		fputs("{\"endpoint\": ", f);
		cli_json_string(f, endpoint);
		fputs(", \"error\": ", f);
		cli_json_string(f, error);
		fputs("}", f);
		return;
	}
	o->items++;
	if (st == NULL) {
		fprintf(f, "%-21s %s\n", endpoint, error);
		return;
	}
	fprintf(f,
		"%-21s node %" PRIu64 "  %s%s  term %" PRIu64 "  commit %" PRIu64
		"  applied %" PRIu64 "  leader %s\n",
		endpoint, st->node_id, st->role, st->ready ? " (ready)" : "", st->term,
		st->commit_index, st->applied_index,
		st->leader_address[0] ? st->leader_address : "unknown");
}

void cli_print_members(struct cli_out *o, const struct raftlock_status *st)
{
	if (o->json || st == NULL)
		return;
	fprintf(o->f, "members (as node %" PRIu64 " sees them):\n", st->node_id);
	for (size_t i = 0; i < st->n_members; i++)
		fprintf(o->f, "  %" PRIu64 "  raft %s  client %s%s\n", st->members[i].id,
			st->members[i].raft_address, st->members[i].client_address,
			st->members[i].id == st->leader_id ? "  (leader)" : "");
}

/* ----------------------------------------------------------------- locks */

static void json_lock(FILE *f, const struct raftlock_lock_info *li, bool waiters)
{
	fputs("{", f);
	cli_json_name(f, CLI_JSON_SPACED, "name", li->name);
	fprintf(f,
		", \"kind\": \"%s\", \"limit\": %" PRIu32 ", \"lock_delay_ms\": %" PRIu32
		", \"delay_until\": %" PRIu64 ", \"cluster_time\": %" PRIu64 ", \"holders\": [",
		kind_name(li->kind), li->limit, li->lock_delay_ms, li->delay_until,
		li->cluster_time);
	for (size_t i = 0; i < li->n_holders; i++) {
		const struct raftlock_holder *h = &li->holders[i];
		fprintf(f,
			"%s{\"session\": %" PRIu64 ", \"owner\": %" PRIu64
			", \"mode\": \"%s\", \"permits\": %" PRIu32 ", \"count\": %" PRIu32
			", \"token\": %" PRIu64 ", \"granted_index\": %" PRIu64
			", \"granted_time\": %" PRIu64 ", ",
			i ? ", " : "", h->session, h->owner, mode_name(h->mode), h->permits,
			h->count, h->token, h->granted_index, h->granted_time);
		json_owner(f, &h->who);
		fputs("}", f);
	}
	fputs("]", f);
	if (waiters) {
		fputs(", \"waiters\": [", f);
		for (size_t i = 0; i < li->n_waiters; i++) {
			const struct raftlock_waiter *w = &li->waiters[i];
			fprintf(f,
				"%s{\"session\": %" PRIu64 ", \"owner\": %" PRIu64
				", \"mode\": \"%s\", \"permits\": %" PRIu32
				", \"queued_time\": %" PRIu64 ", ",
				i ? ", " : "", w->session, w->owner, mode_name(w->mode), w->permits,
				w->queued_time);
			json_owner(f, &w->who);
			fputs("}", f);
		}
		fputs("]", f);
	} else {
		fprintf(f, ", \"n_waiters\": %zu", li->waiters_total);
	}
	fprintf(f, ", \"holders_total\": %zu, \"waiters_total\": %zu}", li->holders_total,
		li->waiters_total);
}

void cli_print_lock(struct cli_out *o, const struct raftlock_lock_info *li, bool waiters)
{
	FILE *f = o->f;
	if (o->json) {
		json_item(o);
		json_lock(f, li, waiters);
		return;
	}
	o->items++;
	if (waiters) {
		fprintf(f, "%s  (%s", li->name, kind_name(li->kind));
		if (li->kind == RAFTLOCK_SEMAPHORE)
			fprintf(f, ", %" PRIu32 " permits", li->limit);
		if (li->lock_delay_ms)
			fprintf(f, ", lock-delay %" PRIu32 " ms", li->lock_delay_ms);
		fputs(")\n", f);
		if (li->delay_until > li->cluster_time) {
			fputs("  lock-delay runs for another ", f);
			print_span(f, li->delay_until, li->cluster_time);
			fputs("\n", f);
		}
	}
	for (size_t i = 0; i < li->n_holders; i++) {
		const struct raftlock_holder *h = &li->holders[i];
		fprintf(f, waiters ? "  holder  " : "%s  ", waiters ? "" : li->name);
		if (li->kind == RAFTLOCK_SEMAPHORE)
			fprintf(f, "%" PRIu32 " permit%s", h->permits, h->permits == 1 ? "" : "s");
		else
			fputs(mode_name(h->mode), f);
		fprintf(f, "  token %" PRIu64 "  session %" PRIu64 "  ", h->token, h->session);
		text_owner(f, &h->who);
		if (h->count > 1)
			fprintf(f, "  depth %" PRIu32, h->count);
		fputs("  held ", f);
		print_span(f, li->cluster_time, h->granted_time);
		fputs("\n", f);
	}
	if (li->holders_total > li->n_holders)
		fprintf(f, "%s  ... %zu more holders (the answer holds the first %zu)\n",
			waiters ? "" : li->name, li->holders_total - li->n_holders, li->n_holders);
	if (!waiters) {
		if (li->holders_total == 0)
			fprintf(f, "%s  (no holder)", li->name);
		if (li->waiters_total > 0)
			fprintf(f, "%s  %zu waiting\n", li->holders_total ? li->name : "",
				li->waiters_total);
		else if (li->holders_total == 0)
			fputs("\n", f);
		return;
	}
	for (size_t i = 0; i < li->n_waiters; i++) {
		const struct raftlock_waiter *w = &li->waiters[i];
		fprintf(f, "  waiter  %s  session %" PRIu64 "  ", mode_name(w->mode), w->session);
		text_owner(f, &w->who);
		fputs("  waiting ", f);
		print_span(f, li->cluster_time, w->queued_time);
		fputs("\n", f);
	}
	if (li->waiters_total > li->n_waiters)
		fprintf(f, "  ... %zu more waiters (the answer holds the first %zu)\n",
			li->waiters_total - li->n_waiters, li->n_waiters);
}

/* -------------------------------------------------------------- sessions */

void cli_print_session(struct cli_out *o, const struct raftlock_session_info *si,
		       uint64_t cluster_time)
{
	FILE *f = o->f;
	if (o->json) {
		json_item(o);
		fprintf(f,
			"{\"id\": %" PRIu64 ", \"ttl_ms\": %" PRIu32 ", \"deadline\": %" PRIu64
			", \"opened_time\": %" PRIu64 ", ",
			si->id, si->ttl_ms, si->deadline, si->opened_time);
		json_owner(f, &si->who);
		fputs(", ", f);
		cli_json_names(f, CLI_JSON_SPACED, "locks", si->locks, si->n_locks);
		fprintf(f, ", \"locks_total\": %zu}", si->locks_total);
		return;
	}
	o->items++;
	fprintf(f, "session %" PRIu64 "  ", si->id);
	text_owner(f, &si->who);
	fprintf(f, "  ttl %" PRIu32 " ms  expires in ", si->ttl_ms);
	print_span(f, si->deadline, cluster_time);
	fputs("  age ", f);
	print_span(f, cluster_time, si->opened_time);
	for (size_t i = 0; i < si->n_locks; i++)
		fprintf(f, "%s%s", i ? ", " : "  locks: ", si->locks[i]);
	if (si->locks_total > si->n_locks)
		fprintf(f, ", ... %zu more", si->locks_total - si->n_locks);
	fputs("\n", f);
}
