/* cli_top.c: see cli_top.h. */
#include "cli_top.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_child.h"
#include "cli_json.h"

struct top_lock {
	const struct raftlock_lock_info *li;
	uint64_t longest_wait, longest_hold; /* ms of cluster time */
};

struct top_waiter {
	const struct raftlock_lock_info *li;
	const struct raftlock_waiter *w;
	uint64_t waited; /* ms */
};

/* One refresh: the pages read and what was ranked from them. */
struct top_view {
	struct raftlock_lock_list **pages;
	size_t n_pages;
	struct top_lock *locks;
	size_t n_locks;
	struct top_waiter *waiters; /* those the answers hold */
	size_t n_waiters;
	size_t waiters_total; /* every lock's, also those the answers left out */
	bool truncated;       /* more than CLI_TOP_MAX_LOCKS */
};

static uint64_t since(uint64_t now, uint64_t t)
{
	return now > t ? now - t : 0;
}

static void view_free(struct top_view *v)
{
	for (size_t i = 0; i < v->n_pages; i++)
		raftlock_lock_list_free(v->pages[i]);
	free(v->pages);
	free(v->locks);
	free(v->waiters);
	memset(v, 0, sizeof *v);
}

/* Reads every page of locks under the prefix. */
static int view_read(raftlock_client *client, const struct cli_top_options *o, struct top_view *v)
{
	const char *after = NULL;
	size_t total = 0;
	for (;;) {
		struct raftlock_lock_list *list;
		int rv = raftlock_lock_list(client, o->prefix, after, 0, o->stale, &list);
		if (rv != 0)
			return rv;
		void *grown = realloc(v->pages, (v->n_pages + 1) * sizeof *v->pages);
		if (grown == NULL) {
			raftlock_lock_list_free(list);
			return RAFTLOCK_ENOMEM;
		}
		v->pages = grown;
		v->pages[v->n_pages++] = list;
		total += list->n_locks;
		if (!list->more || list->n_locks == 0)
			return 0;
		if (total >= CLI_TOP_MAX_LOCKS) {
			v->truncated = true;
			return 0;
		}
		after = list->locks[list->n_locks - 1].name;
	}
}

static int by_contention(const void *a, const void *b)
{
	const struct top_lock *x = a, *y = b;
	if (x->li->waiters_total != y->li->waiters_total)
		return x->li->waiters_total > y->li->waiters_total ? -1 : 1;
	if (x->longest_wait != y->longest_wait)
		return x->longest_wait > y->longest_wait ? -1 : 1;
	if (x->li->holders_total != y->li->holders_total)
		return x->li->holders_total > y->li->holders_total ? -1 : 1;
	return strcmp(x->li->name, y->li->name);
}

static int by_wait(const void *a, const void *b)
{
	const struct top_waiter *x = a, *y = b;
	if (x->waited != y->waited)
		return x->waited > y->waited ? -1 : 1;
	return strcmp(x->li->name, y->li->name);
}

static int view_rank(struct top_view *v)
{
	size_t locks = 0, waiters = 0;
	for (size_t p = 0; p < v->n_pages; p++)
		for (size_t i = 0; i < v->pages[p]->n_locks; i++) {
			locks++;
			waiters += v->pages[p]->locks[i].n_waiters;
			v->waiters_total += v->pages[p]->locks[i].waiters_total;
		}
	v->locks = calloc(locks ? locks : 1, sizeof *v->locks);
	v->waiters = calloc(waiters ? waiters : 1, sizeof *v->waiters);
	if (v->locks == NULL || v->waiters == NULL)
		return RAFTLOCK_ENOMEM;
	for (size_t p = 0; p < v->n_pages; p++) {
		for (size_t i = 0; i < v->pages[p]->n_locks; i++) {
			const struct raftlock_lock_info *li = &v->pages[p]->locks[i];
			struct top_lock *l = &v->locks[v->n_locks++];
			l->li = li;
			for (size_t k = 0; k < li->n_holders; k++) {
				uint64_t held =
					since(li->cluster_time, li->holders[k].granted_time);
				if (held > l->longest_hold)
					l->longest_hold = held;
			}
			for (size_t k = 0; k < li->n_waiters; k++) {
				struct top_waiter *w = &v->waiters[v->n_waiters++];
				w->li = li;
				w->w = &li->waiters[k];
				w->waited = since(li->cluster_time, li->waiters[k].queued_time);
				if (w->waited > l->longest_wait)
					l->longest_wait = w->waited;
			}
		}
	}
	qsort(v->locks, v->n_locks, sizeof *v->locks, by_contention);
	qsort(v->waiters, v->n_waiters, sizeof *v->waiters, by_wait);
	return 0;
}

/* "1.2s", "3m04s", "2h05m": a width-bounded duration. */
static const char *duration(uint64_t ms, char out[48])
{
	if (ms < 60000)
		snprintf(out, 48, "%" PRIu64 ".%" PRIu64 "s", ms / 1000, ms % 1000 / 100);
	else if (ms < 3600000)
		snprintf(out, 48, "%" PRIu64 "m%02" PRIu64 "s", ms / 60000, ms % 60000 / 1000);
	else
		snprintf(out, 48, "%" PRIu64 "h%02" PRIu64 "m", ms / 3600000, ms % 3600000 / 60000);
	return out;
}

static const char *who(const struct raftlock_owner *o, char *out, size_t len)
{
	snprintf(out, len, "%s:%" PRIu32 "%s%s%s", o->host && o->host[0] ? o->host : "?", o->pid,
		 o->client_name && o->client_name[0] ? " (" : "",
		 o->client_name && o->client_name[0] ? o->client_name : "",
		 o->client_name && o->client_name[0] ? ")" : "");
	return out;
}

static const char *kind_name(enum raftlock_kind k)
{
	return k == RAFTLOCK_SEMAPHORE ? "sem" : k == RAFTLOCK_RWLOCK ? "rwlock" : "mutex";
}

static void json_owner(const struct raftlock_owner *o)
{
	fputs("{\"host\":", stdout);
	cli_json_string(stdout, o->host);
	printf(",\"pid\":%" PRIu32 ",\"client_name\":", o->pid);
	cli_json_string(stdout, o->client_name);
	putchar('}');
}

static void view_print_json(const struct top_view *v, const struct cli_top_options *o,
			    size_t contended)
{
	printf("{\"locks\":%zu,\"contended\":%zu,\"waiters\":%zu,\"truncated\":%s,\"top\":[",
	       v->n_locks, contended, v->waiters_total, v->truncated ? "true" : "false");
	for (size_t i = 0; i < v->n_locks && i < (size_t)o->limit; i++) {
		const struct top_lock *l = &v->locks[i];
		fputs(i ? ",{" : "{", stdout);
		cli_json_name(stdout, CLI_JSON_COMPACT, "name", l->li->name);
		printf(",\"kind\":\"%s\",\"holders\":%zu,\"waiters\":%zu,\"longest_wait_ms\":"
		       "%" PRIu64 ",\"held_ms\":%" PRIu64 ",\"holder\":",
		       kind_name(l->li->kind), l->li->holders_total, l->li->waiters_total,
		       l->longest_wait, l->longest_hold);
		if (l->li->n_holders > 0)
			json_owner(&l->li->holders[0].who);
		else
			fputs("null", stdout);
		putchar('}');
	}
	fputs("],\"longest_waiters\":[", stdout);
	for (size_t i = 0; i < v->n_waiters && i < (size_t)o->limit; i++) {
		const struct top_waiter *w = &v->waiters[i];
		fputs(i ? ",{" : "{", stdout);
		cli_json_name(stdout, CLI_JSON_COMPACT, "lock", w->li->name);
		printf(",\"waited_ms\":%" PRIu64 ",\"owner\":", w->waited);
		json_owner(&w->w->who);
		putchar('}');
	}
	fputs("]}\n", stdout);
	fflush(stdout);
}

static void view_print(const struct top_view *v, const struct cli_top_options *o)
{
	char now[32], a[48], b[48], owner[160];
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
	size_t contended = 0;
	for (size_t i = 0; i < v->n_locks; i++)
		contended += v->locks[i].li->waiters_total > 0;
	if (o->json) {
		view_print_json(v, o, contended);
		return;
	}
	printf("raftlock top  %s  prefix '%s'%s: %zu locks%s, %zu contended, %zu waiters\n\n", now,
	       o->prefix, o->stale ? " (stale)" : "", v->n_locks, v->truncated ? "+" : "",
	       contended, v->waiters_total);
	printf("%-32s %-6s %7s %7s %12s %10s  %s\n", "LOCK", "KIND", "HOLDERS", "WAITERS",
	       "LONGEST WAIT", "HELD FOR", "FIRST HOLDER");
	for (size_t i = 0; i < v->n_locks && i < (size_t)o->limit; i++) {
		const struct top_lock *l = &v->locks[i];
		printf("%-32s %-6s %7zu %7zu %12s %10s  %s\n", l->li->name, kind_name(l->li->kind),
		       l->li->holders_total, l->li->waiters_total,
		       l->li->n_waiters ? duration(l->longest_wait, a) : "-",
		       l->li->n_holders ? duration(l->longest_hold, b) : "-",
		       l->li->n_holders ? who(&l->li->holders[0].who, owner, sizeof owner) : "-");
	}
	printf("\n%-32s %-32s %12s\n", "WAITER", "LOCK", "WAITING");
	for (size_t i = 0; i < v->n_waiters && i < (size_t)o->limit; i++) {
		const struct top_waiter *w = &v->waiters[i];
		printf("%-32s %-32s %12s\n", who(&w->w->who, owner, sizeof owner), w->li->name,
		       duration(w->waited, a));
	}
	fflush(stdout);
}

int cli_top(raftlock_client *client, const struct cli_top_options *opts)
{
	const struct cli_top_options o = *opts;
	bool tty = isatty(STDOUT_FILENO);
	for (;;) {
		struct top_view v = {0};
		int rv = view_read(client, &o, &v);
		if (rv == 0)
			rv = view_rank(&v);
		if (rv != 0) {
			fprintf(stderr, "raftlock top: %s\n", raftlock_errmsg(client));
			view_free(&v);
			return CLI_EXIT_ERROR;
		}
		if (!o.once && tty && !o.json)
			fputs("\033[H\033[2J", stdout); /* home, clear: redraw in place */
		view_print(&v, &o);
		view_free(&v);
		if (o.once)
			return CLI_EXIT_OK;
		if (!tty && !o.json)
			putchar('\n');
		struct timespec ts = {o.interval_ms / 1000, (o.interval_ms % 1000) * 1000000};
		nanosleep(&ts, NULL);
	}
}
