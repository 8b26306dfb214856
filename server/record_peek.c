/* record_peek.c: see record_peek.h. */
#include "record_peek.h"

#include <stdint.h>

/* LockRecord's and Holder's field numbers (proto/raftlock.proto). */
#define LOCK_HOLDERS 4
#define LOCK_WAITERS 5
#define LOCK_DELAY_UNTIL 6
#define HOLDER_SESSION 1
#define HOLDER_REVOKE_AT 50
#define WAITER_SESSION 1
#define WAITER_SEQ 5
#define WAITER_MULTI 40

enum wire { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

struct cursor {
	const uint8_t *p, *end;
};

static bool varint(struct cursor *c, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64 && c->p < c->end; shift += 7) {
		uint8_t b = *c->p++;
		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

/* Reads the next field's key, and for a length-delimited one its bytes
 * (*sub); other values are read into *v or skipped. */
static bool field(struct cursor *c, uint64_t *number, uint64_t *v, struct cursor *sub)
{
	uint64_t key, len;
	if (!varint(c, &key))
		return false;
	*number = key >> 3;
	*v = 0;
	switch (key & 7) {
	case WIRE_VARINT: return varint(c, v);
	case WIRE_I64:
		if (c->end - c->p < 8)
			return false;
		c->p += 8;
		return true;
	case WIRE_LEN:
		if (!varint(c, &len) || len > (uint64_t)(c->end - c->p))
			return false;
		*sub = (struct cursor){c->p, c->p + len};
		c->p += len;
		return true;
	case WIRE_I32:
		if (c->end - c->p < 4)
			return false;
		c->p += 4;
		return true;
	default: return false;
	}
}

static bool holder_timed(struct cursor c)
{
	while (c.p < c.end) {
		uint64_t number, v;
		struct cursor sub;
		if (!field(&c, &number, &v, &sub))
			return true;
		if (number == HOLDER_REVOKE_AT && v != 0)
			return true;
	}
	return false;
}

bool record_peek_lock_timed(const void *bytes, size_t n)
{
	struct cursor c = {bytes, (const uint8_t *)bytes + n};
	while (c.p < c.end) {
		uint64_t number, v;
		struct cursor sub = {0};
		if (!field(&c, &number, &v, &sub))
			return true;
		if (number == LOCK_WAITERS || (number == LOCK_DELAY_UNTIL && v != 0) ||
		    (number == LOCK_HOLDERS && sub.p != NULL && holder_timed(sub)))
			return true;
	}
	return false;
}

/* Whether the Holder in c is of session `session`; false when unreadable. */
static bool holder_of(struct cursor c, uint64_t session)
{
	while (c.p < c.end) {
		uint64_t number, v;
		struct cursor sub;
		if (!field(&c, &number, &v, &sub))
			return false;
		if (number == HOLDER_SESSION)
			return v == session;
	}
	return false;
}

bool record_peek_lock_queued(const void *bytes, size_t n, uint64_t session)
{
	struct cursor c = {bytes, (const uint8_t *)bytes + n};
	bool queued = false;
	while (c.p < c.end) {
		uint64_t number, v;
		struct cursor sub = {0};
		if (!field(&c, &number, &v, &sub))
			return false;
		if (number == LOCK_WAITERS && sub.p != NULL)
			queued = true;
		else if (number == LOCK_HOLDERS && sub.p != NULL && holder_of(sub, session))
			return false;
	}
	return queued;
}

/* Reads the Waiter in c: its session, its seq and whether it is a set's.
 * False when unreadable. */
static bool waiter_read(struct cursor c, uint64_t *session, uint64_t *seq, bool *multi)
{
	*session = *seq = 0;
	*multi = false;
	while (c.p < c.end) {
		uint64_t number, v;
		struct cursor sub;
		if (!field(&c, &number, &v, &sub))
			return false;
		if (number == WAITER_SESSION)
			*session = v;
		else if (number == WAITER_SEQ)
			*seq = v;
		else if (number == WAITER_MULTI)
			*multi = v != 0;
	}
	return true;
}

bool record_peek_lock_set_waiters(const void *bytes, size_t n,
				  void (*visit)(void *arg, uint64_t session, uint64_t seq),
				  void *arg)
{
	struct cursor c = {bytes, (const uint8_t *)bytes + n};
	while (c.p < c.end) {
		uint64_t number, v, session, seq;
		struct cursor sub = {0};
		bool multi;
		if (!field(&c, &number, &v, &sub))
			return false;
		if (number != LOCK_WAITERS)
			continue;
		if (sub.p == NULL || !waiter_read(sub, &session, &seq, &multi))
			return false; /* not a message where a waiter must be */
		if (multi)
			visit(arg, session, seq);
	}
	return true;
}
