/*
 * log_rate.h: a bounded rate of log lines for one kind of refusal that a
 * stranger can cause at will (a refused TLS handshake, a connection over
 * its address's limit, an unknown token, a refused member connection), so
 * that nobody can flood a node's log: a burst of LOG_RATE_BURST lines, then
 * at most one every LOG_RATE_INTERVAL_MS (a token bucket). The lines held
 * back are counted, and the next line printed says how many there were.
 * No clock of its own: the caller passes the time (tests pass any).
 * Loop thread only.
 */
#ifndef RAFTLOCK_LOG_RATE_H
#define RAFTLOCK_LOG_RATE_H

#include <stdbool.h>
#include <stdint.h>

#define LOG_RATE_BURST 10
#define LOG_RATE_INTERVAL_MS 1000

/* One kind of line; zeroed = a full bucket at the first call. */
struct log_rate {
	bool started;
	unsigned tokens;     /* lines that may be printed now */
	uint64_t refill_ms;  /* the time the tokens were counted up to */
	uint64_t suppressed; /* lines held back since the last one printed */
};

/*
 * Whether a line may be printed at now_ms (milliseconds of any monotonic
 * clock). When it may, *suppressed is the number held back since the last
 * one printed (and that count starts again); when not, the line is counted
 * as held back.
 */
bool log_rate_allow(struct log_rate *r, uint64_t now_ms, uint64_t *suppressed);

/* Prints a warning of this kind through log.h if log_rate_allow() lets it,
 * followed by "(N more like it suppressed)" when lines were held back. */
void log_rate_warn(struct log_rate *r, uint64_t now_ms, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
