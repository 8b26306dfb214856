/* log_rate.c: see log_rate.h. */
#include "log_rate.h"

#include <stdarg.h>
#include <stdio.h>

#include "log.h"

bool log_rate_allow(struct log_rate *r, uint64_t now_ms, uint64_t *suppressed)
{
	if (!r->started) {
		r->started = true;
		r->tokens = LOG_RATE_BURST;
		r->refill_ms = now_ms;
	}
	if (now_ms > r->refill_ms) {
		uint64_t add = (now_ms - r->refill_ms) / LOG_RATE_INTERVAL_MS;
		if (r->tokens + add >= LOG_RATE_BURST) {
			r->tokens = LOG_RATE_BURST;
			r->refill_ms = now_ms;
		} else {
			r->tokens += (unsigned)add;
			r->refill_ms += add * LOG_RATE_INTERVAL_MS; /* keeps the part of a token */
		}
	}
	if (r->tokens == 0) {
		r->suppressed++;
		return false;
	}
	r->tokens--;
	*suppressed = r->suppressed;
	r->suppressed = 0;
	return true;
}

void log_rate_warn(struct log_rate *r, uint64_t now_ms, const char *fmt, ...)
{
	uint64_t suppressed;
	if (!log_rate_allow(r, now_ms, &suppressed))
		return;
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (suppressed > 0)
		log_warn("%s (%llu more like it suppressed)", line, (unsigned long long)suppressed);
	else
		log_warn("%s", line);
}
