/* log.h: the server's log lines, on stderr, with level and node id. */
#ifndef RAFTLOCK_LOG_H
#define RAFTLOCK_LOG_H

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Sets the minimum level printed and the node id shown in every line. */
void log_setup(enum log_level min, unsigned long long node_id);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

/* Logs and aborts: for states the server cannot continue from (out of
 * memory, LMDB map full, a write transaction that cannot commit). */
void log_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
