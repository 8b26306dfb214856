/*
 * log.h: the server's log lines, on stderr (journald takes them under
 * systemd), one line each, written with a single write.
 *
 *   text: 2026-11-25T15:04:05.123Z raftlockd[1] info leader ready (term 3)
 *   json: {"ts":"2026-11-25T15:04:05.123Z","level":"info","node":1,
 *          "msg":"leader ready (term 3)"}
 *
 * ts is RFC 3339 in UTC with milliseconds; level one of debug, info, warn,
 * error, fatal; node the node id (0 before it is known). These names are
 * stable: fields may be added, none renamed or removed.
 */
#ifndef RAFTLOCK_LOG_H
#define RAFTLOCK_LOG_H

#include <stddef.h>
#include <time.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };
enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_JSON };

/* Sets the minimum level printed, the node id shown in every line and the
 * format. Before it is called: info, node 0, text. */
void log_setup(enum log_level min, unsigned long long node_id, enum log_format format);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

/* Logs and aborts: for states the server cannot continue from (out of
 * memory, a damaged store; a failed write to the store stops it with
 * log_fatal_exit(), store_fail.h). */
void log_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Logs at level fatal and exits with status at once (_exit: no atexit
 * handlers, no leak check, no core): a stop whose cause the line gives,
 * with a status that tells it from others (store_fail.h). */
void log_fatal_exit(int status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

/*
 * Formats one line (with its newline) into out, at most len bytes with a
 * NUL: the wall-clock time ts, the level's name, the node id and the
 * message. A message too long is cut (at a character, never inside a UTF-8
 * sequence or a JSON escape), and a JSON line stays valid JSON. A JSON
 * line is valid UTF-8 whatever bytes msg holds (a lock name, a peer's
 * text): each ill-formed sequence (each maximal subpart, as Python's
 * errors="replace" and the CLI's --json) is written \ufffd, the
 * replacement character as a JSON escape, which every JSON reader takes;
 * a text line keeps msg's bytes as they are. Returns the line's length.
 * Exposed for the tests; no I/O.
 */
size_t log_format_line(char *out, size_t len, enum log_format format, const struct timespec *ts,
		       const char *level, unsigned long long node, const char *msg);

#endif
