/* log.c: see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "utf8.h"

#define LINE_MAX_BYTES 4096

static enum log_level min_level = LOG_INFO;
static unsigned long long log_node;
static enum log_format log_fmt = LOG_FORMAT_TEXT;

void log_setup(enum log_level min, unsigned long long node_id, enum log_format format)
{
	min_level = min;
	log_node = node_id;
	log_fmt = format;
}

/* 2026-11-25T15:04:05.123Z */
static void rfc3339(const struct timespec *ts, char out[64])
{
	struct tm tm;
	time_t sec = ts->tv_sec;
	gmtime_r(&sec, &tm);
	snprintf(out, 64, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts->tv_nsec / 1000000);
}

size_t log_format_line(char *out, size_t len, enum log_format format, const struct timespec *ts,
		       const char *level, unsigned long long node, const char *msg)
{
	char when[64];
	rfc3339(ts, when);
	int head;
	if (format == LOG_FORMAT_JSON)
		head = snprintf(out, len,
				"{\"ts\":\"%s\",\"level\":\"%s\",\"node\":%llu,\"msg\":\"", when,
				level, node);
	else
		head = snprintf(out, len, "%s raftlockd[%llu] %s ", when, node, level);
	if (head < 0 || (size_t)head >= len)
		return 0;
	size_t n = (size_t)head;
	const char *tail = format == LOG_FORMAT_JSON ? "\"}\n" : "\n";
	size_t room = len - 1 - strlen(tail); /* what the message may use */
	/* A character at a time, whole or not at all: a cut line never ends
	 * inside a UTF-8 sequence or a JSON escape. */
	size_t k;
	for (const unsigned char *p = (const unsigned char *)msg; *p != '\0'; p += k) {
		char esc[8];
		bool valid;
		k = utf8_span(p, &valid);
		const char *piece = (const char *)p;
		size_t plen = k;
		if (format == LOG_FORMAT_JSON && !valid) {
			piece = "\\ufffd";
			plen = strlen(piece);
		} else if (format == LOG_FORMAT_JSON && k == 1) {
			piece = json_char(*p, esc);
			plen = strlen(piece);
		} else if (*p == '\n') {
			piece = " "; /* one event, one line */
		}
		if (n + plen > room)
			break;
		memcpy(out + n, piece, plen);
		n += plen;
	}
	memcpy(out + n, tail, strlen(tail) + 1);
	return n + strlen(tail);
}

static void log_vline(const char *level, const char *fmt, va_list ap)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	char msg[LINE_MAX_BYTES], line[LINE_MAX_BYTES + 128];
	vsnprintf(msg, sizeof msg, fmt, ap);
	size_t n = log_format_line(line, sizeof line, log_fmt, &ts, level, log_node, msg);
	/* One write per line: lines of the loop and of libraft's threads, if
	 * any, never interleave. */
	if (n > 0 && write(STDERR_FILENO, line, n) < 0)
		return;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *levels[] = {"debug", "info", "warn", "error"};
	if (level < min_level)
		return;
	va_list ap;
	va_start(ap, fmt);
	log_vline(levels[level], fmt, ap);
	va_end(ap);
}

void log_fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vline("fatal", fmt, ap);
	va_end(ap);
	abort();
}

void log_fatal_exit(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vline("fatal", fmt, ap);
	va_end(ap);
	_exit(status);
}
