/* log.c: see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static enum log_level min_level = LOG_INFO;
static unsigned long long log_node;

void log_setup(enum log_level min, unsigned long long node_id)
{
	min_level = min;
	log_node = node_id;
}

static void log_vline(const char *tag, const char *fmt, va_list ap)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	char line[1024];
	int n = snprintf(line, sizeof line, "%02d:%02d:%02d.%03ld raftlockd[%llu] %s ", tm.tm_hour,
			 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, log_node, tag);
	if (n < 0)
		return;
	vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	fprintf(stderr, "%s\n", line);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *tags[] = {"debug", "info", "warn", "error"};
	if (level < min_level)
		return;
	va_list ap;
	va_start(ap, fmt);
	log_vline(tags[level], fmt, ap);
	va_end(ap);
}

void log_fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vline("FATAL", fmt, ap);
	va_end(ap);
	abort();
}
