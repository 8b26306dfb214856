/* limit_message.c: see limit_message.h. */
#include "limit_message.h"

#include <stdbool.h>
#include <stdio.h>

bool limit_message(const Raftlock__Result *res, const char *identity, char *buf, size_t len)
{
	unsigned long long v = (unsigned long long)res->limit_value;
	switch (res->limit) {
	case RAFTLOCK__LIMIT__LIMIT_SESSIONS_PER_IDENTITY:
		snprintf(buf, len,
			 "identity '%s' already holds %llu sessions, the most one identity may "
			 "hold (max-sessions-per-identity)",
			 identity != NULL ? identity : "", v);
		return true;
	case RAFTLOCK__LIMIT__LIMIT_WAITERS_PER_LOCK:
		snprintf(buf, len,
			 "the lock already has %llu waiters, the most one lock may queue "
			 "(max-waiters-per-lock)",
			 v);
		return true;
	case RAFTLOCK__LIMIT__LIMIT_SESSIONS:
		snprintf(buf, len, "the cluster holds %llu sessions, its most", v);
		return true;
	case RAFTLOCK__LIMIT__LIMIT_HOLDERS_PER_LOCK:
		snprintf(buf, len, "the lock has %llu holders, the most one lock may have", v);
		return true;
	case RAFTLOCK__LIMIT__LIMIT_LOCKS:
		snprintf(buf, len, "the cluster holds %llu locks, its most", v);
		return true;
	case RAFTLOCK__LIMIT__LIMIT_LOCKS_PER_SESSION:
		snprintf(buf, len,
			 "the session holds or awaits %llu locks, the most one session may", v);
		return true;
	case RAFTLOCK__LIMIT__LIMIT_OUTCOMES:
		snprintf(buf, len,
			 "the session has %llu requests not acknowledged, the most it may have", v);
		return true;
	case RAFTLOCK__LIMIT__LIMIT_STORE:
		snprintf(buf, len,
			 "the store is full: its records reached the limit of %llu bytes (a "
			 "quarter of the leader's map-size)",
			 v);
		return true;
	default: return false;
	}
}
