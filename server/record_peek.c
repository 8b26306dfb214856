/* record_peek.c: see record_peek.h. */
#include "record_peek.h"

#include <stdint.h>

/* LockRecord's and Holder's field numbers (proto/raftlock.proto). */
#define LOCK_NAME 1
#define LOCK_HOLDERS 4
#define LOCK_WAITERS 5
#define LOCK_DELAY_UNTIL 6
#define HOLDER_REVOKE_AT 50
#define PARTY_SESSION 1 /* a Holder's and a Waiter's */
#define PARTY_OWNER 2
#define WAITER_SEQ 5
#define WAITER_MULTI 40
#define OUTCOME_PENDING 3 /* Outcome's */
#define OUTCOME_QUEUED 4

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
		if (number == PARTY_SESSION)
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

bool record_peek_lock_name(const void *bytes, size_t n, const char **name, size_t *len)
{
	static const uint8_t none[1];
	struct cursor c = {bytes, (const uint8_t *)bytes + n}, last = {none, none};
	uint64_t number, v;
	for (struct cursor sub = {0}; c.p < c.end; sub.p = NULL) {
		if (!field(&c, &number, &v, &sub))
			return false; /* *name and *len as they were */
		if (number == LOCK_NAME && sub.p != NULL)
			last = sub;
	}
	*name = (const char *)last.p;
	*len = (size_t)(last.end - last.p);
	return true;
}

/* Reads the Holder or Waiter in c into p (its kind set by the caller).
 * False when unreadable. */
static bool party_read(struct cursor c, struct record_party *p)
{
	p->session = p->owner = p->seq = 0;
	p->multi = false;
	while (c.p < c.end) {
		uint64_t number, v;
		struct cursor sub;
		if (!field(&c, &number, &v, &sub))
			return false;
		if (number == PARTY_SESSION)
			p->session = v;
		else if (number == PARTY_OWNER)
			p->owner = v;
		else if (p->waiter && number == WAITER_SEQ)
			p->seq = v;
		else if (p->waiter && number == WAITER_MULTI)
			p->multi = v != 0;
	}
	return true;
}

bool record_peek_lock_parties(const void *bytes, size_t n,
			      void (*visit)(void *arg, const struct record_party *p), void *arg)
{
	struct cursor c = {bytes, (const uint8_t *)bytes + n};
	while (c.p < c.end) {
		uint64_t number, v;
		struct cursor sub = {0};
		if (!field(&c, &number, &v, &sub))
			return false;
		if (number != LOCK_HOLDERS && number != LOCK_WAITERS)
			continue;
		struct record_party p = {.waiter = number == LOCK_WAITERS};
		if (sub.p == NULL || !party_read(sub, &p))
			return false; /* not a message where a party must be */
		visit(arg, &p);
	}
	return true;
}

bool record_peek_outcome_marks(const void *bytes, size_t n, bool *pending, bool *queued)
{
	struct cursor c = {bytes, (const uint8_t *)bytes + n};
	bool p = false, q = false;
	while (c.p < c.end) {
		uint64_t key, number, v;
		struct cursor at = c, sub;
		if (!varint(&at, &key) || !field(&c, &number, &v, &sub))
			return false;
		if ((number == OUTCOME_PENDING || number == OUTCOME_QUEUED) &&
		    (key & 7) != WIRE_VARINT)
			return false; /* not a bool's wire type: the decoder judges it */
		if (number == OUTCOME_PENDING)
			p = v != 0;
		else if (number == OUTCOME_QUEUED)
			q = v != 0;
	}
	*pending = p;
	*queued = q;
	return true;
}
