/* supervision.c: see supervision.h. */
#include "supervision.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "status.h"

/* Whether the message went out. The socket does not block: a receiver
 * that has not read its queue (systemd busy, a loaded test) makes it fail
 * with EAGAIN, and the tick says it again. */
static bool say(struct supervision *s, const char *state)
{
	int rv = sdnotify_send(&s->notify, state);
	if (rv != 0)
		log_debug("NOTIFY_SOCKET: %s", strerror(-rv));
	return rv == 0;
}

static void tick_cb(uv_timer_t *t)
{
	struct supervision *s = t->data;
	char why[sizeof s->said], msg[sizeof s->said + 32];
	bool serving = status_serving(s->node, why, sizeof why);
	if (serving && !s->ready_sent) {
		snprintf(msg, sizeof msg, "READY=1\nSTATUS=%s", why);
		if (!say(s, msg))
			return; /* READY=1 is said once, so it must arrive */
		s->ready_sent = true;
		strcpy(s->said, why);
		log_info("ready: %s", why);
	} else if (strcmp(why, s->said) != 0) {
		snprintf(msg, sizeof msg, "STATUS=%s", why);
		if (say(s, msg))
			strcpy(s->said, why);
	}
}

static void watchdog_cb(uv_timer_t *t)
{
	say(t->data, "WATCHDOG=1");
}

void supervision_stalled(struct supervision *s, const char *why)
{
	char msg[sizeof s->said + 32];
	if (!s->running)
		return;
	snprintf(msg, sizeof msg, "WATCHDOG=1\nSTATUS=%s", why);
	if (say(s, msg))
		snprintf(s->said, sizeof s->said, "%s", why);
}

int supervision_start(struct supervision *s, uv_loop_t *loop, struct node *node, char *err,
		      size_t errlen)
{
	memset(s, 0, sizeof *s);
	s->node = node;
	int rv = sdnotify_open(&s->notify, err, errlen);
	if (rv != 0 || !sdnotify_enabled(&s->notify))
		return rv;
	uv_timer_init(loop, &s->tick);
	uv_timer_init(loop, &s->watchdog);
	s->tick.data = s->watchdog.data = s;
	uv_timer_start(&s->tick, tick_cb, 0, SUPERVISION_TICK_MS);
	uint64_t every_ms = s->notify.watchdog_usec / 2000;
	if (s->notify.watchdog_usec > 0) {
		uv_timer_start(&s->watchdog, watchdog_cb, 0, every_ms > 0 ? every_ms : 1);
		log_info("systemd watchdog: a ping every %llu ms", (unsigned long long)every_ms);
	}
	s->running = true;
	return 0;
}

void supervision_stop(struct supervision *s)
{
	if (!s->running)
		return;
	s->running = false;
	for (int i = 0; i < 50 && !say(s, "STOPPING=1\nSTATUS=shutting down"); i++)
		usleep(10000); /* the last word: wait a little for room */
	uv_close((uv_handle_t *)&s->tick, NULL);
	uv_close((uv_handle_t *)&s->watchdog, NULL);
	sdnotify_close(&s->notify);
}
