/* cli_events.c: see cli_events.h. */
#include "cli_events.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli_json.h"

struct events_state {
	const struct cli_events_options *o;
	pthread_mutex_t mu;
	uint64_t printed;
	int status; /* the ERROR event's */
	bool write_failed;
	bool done;
};

static bool is_state(enum raftlock_watch_kind k)
{
	return k == RAFTLOCK_WATCH_HOLDING || k == RAFTLOCK_WATCH_WAITING ||
	       k == RAFTLOCK_WATCH_CURRENT || k == RAFTLOCK_WATCH_HISTORY_LOST;
}

/* As raftlock_position_parse() reads it back (--from): with its cluster,
 * so that a resume in a cluster restored since is told HISTORY_LOST. */
static void print_position(const struct raftlock_position *p)
{
	if (p->offset == RAFTLOCK_WATCH_OFFSET_END)
		printf("%" PRIu64, p->index);
	else
		printf("%" PRIu64 ".%" PRIu32, p->index, p->offset);
	if (p->cluster_id != 0)
		printf("@%016" PRIx64, p->cluster_id);
}

/* After a line: a reader that went away (or a full disk) ends the
 * command, which would otherwise print to nowhere forever. */
static void check_output(struct events_state *st)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return;
	fprintf(stderr, "raftlock: cannot write the standard output: %s\n", strerror(errno));
	st->write_failed = true;
	st->done = true;
}

static void print_event(const struct raftlock_watch_event *ev, bool json)
{
	const char *mode = ev->mode == RAFTLOCK_SHARED ? "shared" : "exclusive";
	if (json) {
		fputs("{\"position\":\"", stdout);
		print_position(&ev->position);
		printf("\",\"index\":%" PRIu64 ",\"offset\":%" PRIu32 ",\"kind\":\"%s\",",
		       ev->position.index, ev->position.offset, raftlock_watch_kind_name(ev->kind));
		cli_json_name(stdout, CLI_JSON_COMPACT, "name", ev->name);
		printf(",\"session\":%" PRIu64 ",\"owner\":%" PRIu64 ",\"token\":%" PRIu64
		       ",\"mode\":\"%s\",\"permits\":%" PRIu32 ",\"status\":%d,",
		       ev->session, ev->owner, ev->token, mode, ev->permits, ev->status);
		cli_json_name(stdout, CLI_JSON_COMPACT, "value", ev->value);
		fputs("}\n", stdout);
	} else {
		print_position(&ev->position);
		printf(" %s %s", raftlock_watch_kind_name(ev->kind), ev->name);
		if (ev->session != 0)
			printf(" session=%" PRIu64 " owner=%" PRIu64 " token=%" PRIu64
			       " mode=%s permits=%" PRIu32,
			       ev->session, ev->owner, ev->token, mode, ev->permits);
		if (ev->status != 0)
			printf(" status=%s", raftlock_strerror(ev->status));
		if (ev->value[0] != '\0')
			printf(" value=%s", ev->value);
		putchar('\n');
	}
}

static void on_event(const struct raftlock_watch_event *ev, void *arg)
{
	struct events_state *st = arg;
	pthread_mutex_lock(&st->mu);
	if (!st->done) {
		if (ev->kind == RAFTLOCK_WATCH_ERROR) {
			fprintf(stderr, "raftlock: watch '%s': %s\n", ev->name,
				raftlock_strerror(ev->status));
			st->status = ev->status;
			st->done = true;
		} else {
			print_event(ev, st->o->json);
			check_output(st);
			if (!st->done && !is_state(ev->kind) && st->o->count != 0 &&
			    ++st->printed >= st->o->count)
				st->done = true;
		}
	}
	pthread_mutex_unlock(&st->mu);
}

static void block_stop_signals(sigset_t *stop)
{
	sigemptyset(stop);
	sigaddset(stop, SIGINT);
	sigaddset(stop, SIGTERM);
	sigaddset(stop, SIGHUP);
	sigaddset(stop, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, stop, NULL);
}

/* Until st is done or a stop signal comes. */
static void wait_done(struct events_state *st, const sigset_t *stop)
{
	for (;;) {
		pthread_mutex_lock(&st->mu);
		bool done = st->done;
		pthread_mutex_unlock(&st->mu);
		if (done)
			return;
		struct timespec tick = {0, 100 * 1000 * 1000};
		if (sigtimedwait(stop, NULL, &tick) > 0)
			return;
	}
}

/* A stream of events: how to start it on st (its handle in *handle) and
 * to cancel it. */
struct events_stream {
	const char *what; /* the command, for messages */
	int (*start)(raftlock_client *client, struct events_state *st, void **handle);
	void (*cancel)(void *handle);
};

/* The loop both commands share: starts the stream, prints until it is
 * done or a stop signal comes, cancels it. The exit status. */
static int events_run(raftlock_client *client, const struct cli_events_options *o,
		      const struct events_stream *s)
{
	sigset_t stop;
	block_stop_signals(&stop);
	struct events_state st = {.o = o};
	pthread_mutex_init(&st.mu, NULL);
	void *handle = NULL;
	int rv = s->start(client, &st, &handle);
	if (rv == 0) {
		wait_done(&st, &stop);
		s->cancel(handle);
	} else {
		fprintf(stderr, "raftlock: %s '%s': %s\n", s->what, o->prefix,
			raftlock_strerror(rv));
	}
	pthread_mutex_destroy(&st.mu);
	return rv != 0 || st.status != 0 || st.write_failed ? 1 : 0;
}

static int watch_start(raftlock_client *client, struct events_state *st, void **handle)
{
	raftlock_watch_handle *w = NULL;
	int rv = raftlock_watch(client, st->o->prefix, st->o->from, on_event, st, &w);
	*handle = w;
	return rv;
}

static void watch_cancel(void *handle)
{
	raftlock_watch_cancel(handle);
}

int cli_events(raftlock_client *client, const struct cli_events_options *o)
{
	static const struct events_stream watch = {"watch", watch_start, watch_cancel};
	return events_run(client, o, &watch);
}

/* ------------------------------------------------------------ observe -- */

static void on_leader(const struct raftlock_leader_event *ev, void *arg)
{
	struct events_state *st = arg;
	pthread_mutex_lock(&st->mu);
	if (!st->done && ev->status != 0) {
		fprintf(stderr, "raftlock: observe '%s': %s\n", st->o->prefix,
			raftlock_strerror(ev->status));
		st->status = ev->status;
		st->done = true;
	} else if (!st->done) {
		if (st->o->json) {
			fputs("{\"position\":\"", stdout);
			print_position(&ev->position);
			printf("\",\"leader\":%s,\"session\":%" PRIu64 ",\"token\":%" PRIu64
			       ",\"history_lost\":%s,",
			       ev->has_leader ? "true" : "false", ev->session, ev->token,
			       ev->history_lost ? "true" : "false");
			cli_json_name(stdout, CLI_JSON_COMPACT, "value", ev->value);
			fputs("}\n", stdout);
		} else {
			print_position(&ev->position);
			if (ev->has_leader)
				printf(" leader session=%" PRIu64 " token=%" PRIu64 " value=%s",
				       ev->session, ev->token, ev->value);
			else
				fputs(" no leader", stdout);
			puts(ev->history_lost ? " (history lost: read again)" : "");
		}
		check_output(st);
		if (!st->done && st->o->count != 0 && ++st->printed >= st->o->count)
			st->done = true;
	}
	pthread_mutex_unlock(&st->mu);
}

static int observe_start(raftlock_client *client, struct events_state *st, void **handle)
{
	raftlock_observer *obs = NULL;
	int rv = raftlock_observe(client, st->o->prefix, on_leader, st, &obs);
	*handle = obs;
	return rv;
}

static void observe_cancel(void *handle)
{
	raftlock_observe_cancel(handle);
}

int cli_observe(raftlock_client *client, const struct cli_events_options *o)
{
	static const struct events_stream observe = {"observe", observe_start, observe_cancel};
	return events_run(client, o, &observe);
}
