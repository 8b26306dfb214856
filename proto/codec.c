/* codec.c: see codec.h. */
#include "grow.h"
#include "codec.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "raftlock.h"

int codec_frame_envelope(const Raftlock__Envelope *env, uint8_t **out, size_t *n)
{
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	int rv = codec_frame_envelope_append(env, &buf, &len, &cap);
	if (rv != 0)
		return rv;
	*out = buf;
	*n = len;
	return 0;
}

int codec_frame_envelope_append(const Raftlock__Envelope *env, uint8_t **buf, size_t *len,
				size_t *cap)
{
	Raftlock__Envelope stamped = *env; /* shallow: only the protocol differs */
	stamped.protocol = WIRE_PROTOCOL;
	env = &stamped;
	size_t size = raftlock__envelope__get_packed_size(env);
	if (size > RAFTLOCK_FRAME_MAX)
		return RAFTLOCK_ETOOBIG;
	size_t need = *len + FRAME_HEADER_SIZE + size;
	if (grow(buf, cap, need, 256, 1) != 0)
		return RAFTLOCK_ENOMEM;
	frame_put_header(*buf + *len, (uint32_t)size);
	raftlock__envelope__pack(env, *buf + *len + FRAME_HEADER_SIZE);
	*len = need;
	return 0;
}

int codec_check_name(const char *name)
{
	if (name == NULL || name[0] == '\0')
		return RAFTLOCK_EINVAL;
	if (strnlen(name, RAFTLOCK_NAME_MAX + 1) > RAFTLOCK_NAME_MAX)
		return RAFTLOCK_ETOOBIG;
	return 0;
}

static bool secret_too_long(const ProtobufCBinaryData *secret)
{
	return secret->len > RAFTLOCK_SECRET_MAX;
}

/* Why a request breaks the protocol's bounds, for the answer to it. */
#define TOO_LONG "a field is longer than the protocol allows"
#define MISSING "a required message is missing"
#define MULTI_SIZE "a lock set holds 1 to RAFTLOCK_MULTI_MAX (64) locks"
#define KEEPALIVE_SIZE \
	"a keepalive names at most RAFTLOCK_KEEPALIVE_MAX (16384) sessions and as many secrets"

static const char *name_refusal(const char *name)
{
	switch (codec_check_name(name)) {
	case 0: return NULL;
	case RAFTLOCK_ETOOBIG: return "a lock name is longer than RAFTLOCK_NAME_MAX (256) bytes";
	default: return "a lock name is empty";
	}
}

/* What the walk of a keepalive (wire_walk()) leaves to check: no more
 * secrets than sessions, and each secret's length. */
static bool keepalive_too_big(const Raftlock__KeepAliveRequest *ka)
{
	if (ka->n_secrets > ka->n_sessions)
		return true;
	for (size_t i = 0; i < ka->n_secrets; i++)
		if (secret_too_long(&ka->secrets[i]))
			return true;
	return false;
}

int codec_check_rule(const char *identity, const char *prefix)
{
	if (identity == NULL || identity[0] == '\0' || prefix == NULL)
		return RAFTLOCK_EINVAL;
	size_t ni = strnlen(identity, RAFTLOCK_NAME_MAX + 1);
	size_t np = strnlen(prefix, RAFTLOCK_NAME_MAX + 1);
	if (ni > RAFTLOCK_NAME_MAX || np > RAFTLOCK_NAME_MAX || ni + 1 + np > CODEC_RULE_KEY_MAX)
		return RAFTLOCK_ETOOBIG;
	return 0;
}

static const char *rule_refusal(const char *identity, const char *prefix)
{
	return codec_check_rule(identity, prefix) != 0
		       ? "an access rule needs an identity, and identity and prefix within "
			 "RAFTLOCK_NAME_MAX bytes"
		       : NULL;
}

/* A set of 1..RAFTLOCK_MULTI_MAX valid names (their order is the state
 * machine's to check: EINVAL). */
static const char *check_multi_acquire(const Raftlock__MultiAcquireRequest *req)
{
	const Raftlock__MultiAcquire *m = req->acquire;
	if (m == NULL || m->n_items == 0 || m->n_items > RAFTLOCK_MULTI_MAX)
		return MULTI_SIZE;
	for (size_t i = 0; i < m->n_items; i++) {
		if (m->items[i] == NULL)
			return MISSING;
		const char *why = name_refusal(m->items[i]->name);
		if (why != NULL)
			return why;
	}
	return NULL;
}

/* Bounds that the decoder enforces on requests, so that the service never
 * proposes a command that apply() would have to refuse for its size: NULL,
 * or why the request breaks them. */
static const char *check_request(const Raftlock__Envelope *env)
{
	if (env->sequence != NULL && secret_too_long(&env->sequence->secret))
		return TOO_LONG;
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_ACQUIRE:
		if (env->acquire->acquire == NULL)
			return MISSING;
		if (strlen(env->acquire->acquire->value) > RAFTLOCK_VALUE_MAX)
			return TOO_LONG;
		return name_refusal(env->acquire->acquire->name);
	case RAFTLOCK__ENVELOPE__BODY_MULTI_ACQUIRE: return check_multi_acquire(env->multi_acquire);
	case RAFTLOCK__ENVELOPE__BODY_RELEASE:
		if (env->release->release == NULL)
			return MISSING;
		return name_refusal(env->release->release->name);
	case RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT:
		if (env->cancel_wait->cancel == NULL)
			return MISSING;
		return name_refusal(env->cancel_wait->cancel->name);
	case RAFTLOCK__ENVELOPE__BODY_GET_LOCK: return name_refusal(env->get_lock->name);
	case RAFTLOCK__ENVELOPE__BODY_CHECK_TOKEN: return name_refusal(env->check_token->name);
	case RAFTLOCK__ENVELOPE__BODY_REVOKE: return name_refusal(env->revoke->name);
	case RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS:
		if (strlen(env->list_locks->prefix) > RAFTLOCK_NAME_MAX ||
		    strlen(env->list_locks->after) > RAFTLOCK_NAME_MAX)
			return TOO_LONG;
		return NULL;
	case RAFTLOCK__ENVELOPE__BODY_PROCLAIM:
		if (env->proclaim->proclaim == NULL)
			return MISSING;
		if (strlen(env->proclaim->proclaim->value) > RAFTLOCK_VALUE_MAX)
			return TOO_LONG;
		return name_refusal(env->proclaim->proclaim->name);
	case RAFTLOCK__ENVELOPE__BODY_WATCH:
		return strlen(env->watch->prefix) > RAFTLOCK_NAME_MAX ? TOO_LONG : NULL;
	case RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION: {
		const Raftlock__Owner *o = env->open_session->owner;
		if ((o != NULL && (strlen(o->client_name) > RAFTLOCK_NAME_MAX ||
				   strlen(o->host) > RAFTLOCK_NAME_MAX)) ||
		    secret_too_long(&env->open_session->secret))
			return TOO_LONG;
		return NULL;
	}
	case RAFTLOCK__ENVELOPE__BODY_KEEPALIVE:
		return NULL; /* codec_decode_request() refuses it whole */
	case RAFTLOCK__ENVELOPE__BODY_AUTHENTICATE:
		return env->authenticate->token.len > RAFTLOCK_TOKEN_MAX ? TOO_LONG : NULL;
	case RAFTLOCK__ENVELOPE__BODY_ACL_SET:
		if (env->acl_set->rule == NULL)
			return MISSING;
		return rule_refusal(env->acl_set->rule->identity, env->acl_set->rule->prefix);
	case RAFTLOCK__ENVELOPE__BODY_ACL_DELETE:
		if (env->acl_delete->rule == NULL)
			return MISSING;
		return rule_refusal(env->acl_delete->rule->identity, env->acl_delete->rule->prefix);
	case RAFTLOCK__ENVELOPE__BODY_ACL_LIST:
		if (strlen(env->acl_list->after_identity) > RAFTLOCK_NAME_MAX ||
		    strlen(env->acl_list->after_prefix) > RAFTLOCK_NAME_MAX)
			return TOO_LONG;
		return NULL;
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_ADD: {
		const Raftlock__MemberAdd *m = env->member_add->member;
		if (m == NULL)
			return MISSING;
		if (strlen(m->raft_address) > RAFTLOCK_NAME_MAX ||
		    strlen(m->client_address) > RAFTLOCK_NAME_MAX)
			return TOO_LONG;
		return NULL;
	}
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_JOIN:
		return strlen(env->member_join->cluster) > RAFTLOCK_NAME_MAX ? TOO_LONG : NULL;
	default: return NULL;
	}
}

/*
 * protobuf-c (1.4) refuses field number 0 only in a one-byte tag: written
 * as 0x80 0x00 it is kept as an unknown field, and packed again as the
 * one-byte tag 0x00, which it then refuses. The server packs decoded
 * requests into log entries, so such a field would make a committed entry
 * that no node can decode. Looks at m and every message below it (for log
 * entries: envelopes are refused such fields on the wire, wire_walk()).
 */
static bool has_field_zero(const ProtobufCMessage *m)
{
	for (unsigned i = 0; i < m->n_unknown_fields; i++)
		if (m->unknown_fields[i].tag == 0)
			return true;
	const ProtobufCMessageDescriptor *desc = m->descriptor;
	const char *base = (const char *)m;
	for (unsigned i = 0; i < desc->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &desc->fields[i];
		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)(base + f->quantifier_offset);
			ProtobufCMessage *const *subs =
				*(ProtobufCMessage *const *const *)(base + f->offset);
			for (size_t j = 0; j < n; j++)
				if (has_field_zero(subs[j]))
					return true;
			continue;
		}
		/* Members of a oneof share their storage: only the one set. */
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(const uint32_t *)(base + f->quantifier_offset) != f->id)
			continue;
		const ProtobufCMessage *sub = *(ProtobufCMessage *const *)(base + f->offset);
		if (sub != NULL && has_field_zero(sub))
			return true;
	}
	return false;
}

/* Reads a varint at *at of (p, n); false when the bytes end first. */
static bool read_varint(const uint8_t *p, size_t n, size_t *at, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; shift < 64 && *at < n; shift += 7) {
		uint8_t b = p[(*at)++];
		*v |= (uint64_t)(b & 0x7f) << shift;
		if ((b & 0x80) == 0)
			return true;
	}
	return false;
}

/* One field of a message on the wire, as wire_next() reads it. */
struct wire_field {
	uint64_t number;
	unsigned type;       /* PROTOBUF_C_WIRE_TYPE_* */
	uint64_t value;      /* a varint's */
	const uint8_t *data; /* a length-prefixed field's bytes */
	size_t len;
};

/* Reads the field at *at of the message (p, n) into *f and moves *at past
 * it. False at the end, and where the bytes end early or hold a wire type
 * protobuf-c does not decode (groups): a walk stops there. */
static bool wire_next(const uint8_t *p, size_t n, size_t *at, struct wire_field *f)
{
	uint64_t key;
	if (*at >= n || !read_varint(p, n, at, &key))
		return false;
	f->number = key >> 3;
	f->type = (unsigned)(key & 7);
	switch (f->type) {
	case PROTOBUF_C_WIRE_TYPE_VARINT: return read_varint(p, n, at, &f->value);
	case PROTOBUF_C_WIRE_TYPE_64BIT:
	case PROTOBUF_C_WIRE_TYPE_32BIT: {
		size_t size = f->type == PROTOBUF_C_WIRE_TYPE_64BIT ? 8 : 4;
		if (n - *at < size)
			return false;
		*at += size;
		return true;
	}
	case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED: {
		uint64_t len;
		if (!read_varint(p, n, at, &len) || len > n - *at)
			return false;
		f->data = p + *at;
		f->len = (size_t)len;
		*at += f->len;
		return true;
	}
	default: return false;
	}
}

/*
 * The repeated fields whose count the protocol bounds, by message type and
 * field number (raftlock.proto), counted in the whole frame. A request
 * over one is refused by its id with `why`, or, when why is NULL (a
 * flood), as bytes that do not decode. Their values count against their
 * bound, not against CODEC_FIELDS_MAX. A request's bounds hold in an
 * answer too; an answer's (answer true) only there.
 */
struct wire_bound {
	const ProtobufCMessageDescriptor *desc;
	unsigned number;
	size_t max;
	const char *why;
	bool answer;
};

/* A page of a listing, and what an answer lists as few of (a cluster's
 * members, at most 9): codec.h, CODEC_PAGE_MAX. */
#define ANSWER_PAGE (CODEC_ANSWER_HEADROOM * CODEC_PAGE_MAX)

static const struct wire_bound wire_bounds[] = {
	/* items */
	{&raftlock__multi_acquire__descriptor, 1, RAFTLOCK_MULTI_MAX, MULTI_SIZE, false},
	/* sessions, secrets: no more secrets than sessions, checked once
	 * unpacked */
	{&raftlock__keep_alive_request__descriptor, 1, RAFTLOCK_KEEPALIVE_MAX, KEEPALIVE_SIZE,
	 false},
	{&raftlock__keep_alive_request__descriptor, 2, RAFTLOCK_KEEPALIVE_MAX, KEEPALIVE_SIZE,
	 false},
	/* Answers: every repeated field of a message an answer holds
	 * (test_codec_bounds finds them from the descriptors). */
	{&raftlock__lock_list__descriptor, 1, ANSWER_PAGE, NULL, true},               /* locks */
	{&raftlock__session_list__descriptor, 1, ANSWER_PAGE, NULL, true},            /* sessions */
	{&raftlock__acl_list__descriptor, 1, ANSWER_PAGE, NULL, true},                /* rules */
	{&raftlock__status_info__descriptor, 9, ANSWER_PAGE, NULL, true},             /* members */
	{&raftlock__member_list__descriptor, 1, ANSWER_PAGE, NULL, true},             /* members */
	{&raftlock__lock_info__descriptor, 4, CODEC_ANSWER_ENTRIES_MAX, NULL, true},  /* holders */
	{&raftlock__lock_info__descriptor, 5, CODEC_ANSWER_ENTRIES_MAX, NULL, true},  /* waiters */
	{&raftlock__session_info__descriptor, 6, CODEC_ANSWER_NAMES_MAX, NULL, true}, /* locks */
	/* statuses, ttl_ms: one for each session the library asked about */
	{&raftlock__keep_alive_result__descriptor, 1, RAFTLOCK_KEEPALIVE_MAX, NULL, true},
	{&raftlock__keep_alive_result__descriptor, 2, RAFTLOCK_KEEPALIVE_MAX, NULL, true},
	/* tokens: one for each lock of the library's set */
	{&raftlock__result__descriptor, 40, RAFTLOCK_MULTI_MAX, NULL, true},
};
#define N_WIRE_BOUNDS (sizeof wire_bounds / sizeof *wire_bounds)

/* One walk of a frame (wire_walk()): what it counted and what it found. */
struct wire_walk {
	bool request;                  /* a request's frame, else an answer's */
	size_t fields;                 /* counted against CODEC_FIELDS_MAX */
	size_t unknown;                /* an answer's, against CODEC_ANSWER_UNKNOWN_MAX */
	size_t bounded[N_WIRE_BOUNDS]; /* counted against wire_bounds[i].max */
	const struct wire_bound *over; /* the bound the frame breaks */
	bool nul;                      /* a string field holds a NUL byte */
};

/* How many values protobuf-c makes of the field w, of type f: each
 * element of a packed repeated scalar, else one; and never less than one,
 * for what it allocates to scan any field. */
static size_t wire_values(const ProtobufCFieldDescriptor *f, const struct wire_field *w)
{
	if (f->label != PROTOBUF_C_LABEL_REPEATED ||
	    w->type != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED)
		return 1;
	size_t n = 0;
	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_BYTES:
	case PROTOBUF_C_TYPE_MESSAGE: return 1;
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_FLOAT: n = w->len / 4; break;
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_DOUBLE: n = w->len / 8; break;
	default:
		for (size_t i = 0; i < w->len; i++)
			n += (w->data[i] & 0x80) == 0; /* the last byte of a varint */
	}
	return n > 0 ? n : 1;
}

/* The index in wire_bounds[] of the bound of field `number` of the
 * message type desc, in a request's walk or an answer's: N_WIRE_BOUNDS
 * for none. */
static size_t wire_bound_index(const ProtobufCMessageDescriptor *desc, unsigned number,
			       bool request)
{
	for (size_t i = 0; i < N_WIRE_BOUNDS; i++) {
		const struct wire_bound *b = &wire_bounds[i];
		if (b->desc == desc && b->number == number && !(b->answer && request))
			return i;
	}
	return N_WIRE_BOUNDS;
}

size_t codec_answer_bound(const ProtobufCMessageDescriptor *desc, unsigned number)
{
	size_t i = wire_bound_index(desc, number, false);
	return i < N_WIRE_BOUNDS ? wire_bounds[i].max : 0;
}

/* Counts the values of field f (number, of the message type desc) against
 * its bound or CODEC_FIELDS_MAX: a request's every field, an answer's
 * repeated fields (of a request's body) without a bound of their own;
 * false once past it. */
static bool wire_spend(struct wire_walk *walk, const ProtobufCMessageDescriptor *desc,
		       const ProtobufCFieldDescriptor *f, size_t values)
{
	bool repeated = f != NULL && f->label == PROTOBUF_C_LABEL_REPEATED;
	size_t i = repeated ? wire_bound_index(desc, f->id, walk->request) : N_WIRE_BOUNDS;
	if (i < N_WIRE_BOUNDS) {
		walk->bounded[i] += values;
		if (walk->bounded[i] <= wire_bounds[i].max)
			return true;
		walk->over = &wire_bounds[i];
		return false;
	}
	if (!walk->request && !repeated)
		return true; /* wire_spend_in_message() counts it */
	walk->fields += values;
	return walk->fields <= CODEC_FIELDS_MAX;
}

/* What one message of a frame holds, as wire_spend_in_message() counts it. */
struct wire_message {
	size_t unknown; /* a request's unknown fields */
	size_t single;  /* an answer's values of fields that are not repeated */
};

/* Counts field f (NULL: unknown) of a message of type desc: a request's
 * unknown fields against CODEC_UNKNOWN_MAX in the message; an answer's
 * unknown fields against CODEC_ANSWER_UNKNOWN_MAX in the frame, and its
 * values of fields that are not repeated against the number of fields
 * of the type (codec.h says why); false once past it. */
static bool wire_spend_in_message(struct wire_walk *walk, const ProtobufCMessageDescriptor *desc,
				  const ProtobufCFieldDescriptor *f, struct wire_message *m)
{
	if (f == NULL && walk->request)
		return ++m->unknown <= CODEC_UNKNOWN_MAX;
	if (f == NULL)
		return ++walk->unknown <= CODEC_ANSWER_UNKNOWN_MAX;
	if (walk->request || f->label == PROTOBUF_C_LABEL_REPEATED)
		return true;
	return ++m->single <= desc->n_fields;
}

/*
 * Walks the message (p, n) of type desc, and each message field in it as
 * its own type (from protobuf-c's descriptors: the protocol's messages do
 * not hold their own type, so the depth is the types'), before protobuf-c
 * unpacks it: protobuf-c keeps every field it scans, known or not, and
 * every occurrence of a field, allocating for each, and would unpack a
 * 4 MiB frame of 2 million fields before any bound could be checked.
 * Returns false for a frame to refuse unread: bytes protobuf-c would not
 * decode either, a field numbered 0 (has_field_zero()), a bound of
 * wire_bounds[] broken (walk->over), for a request more than
 * CODEC_UNKNOWN_MAX unknown fields in one message or CODEC_FIELDS_MAX
 * values in all, for an answer more than CODEC_ANSWER_UNKNOWN_MAX unknown
 * fields in all, more values of fields that are not repeated in one
 * message than its type has fields, or more than CODEC_FIELDS_MAX values
 * of a request's repeated fields. Notes in walk->nul a string holding a
 * NUL byte.
 */
static bool wire_walk(struct wire_walk *walk, const ProtobufCMessageDescriptor *desc,
		      const uint8_t *p, size_t n)
{
	size_t at = 0;
	struct wire_message m = {0};
	struct wire_field w = {0};
	while (at < n) {
		if (!wire_next(p, n, &at, &w) || w.number == 0 || w.number > UINT32_MAX)
			return false;
		const ProtobufCFieldDescriptor *f =
			protobuf_c_message_descriptor_get_field(desc, (unsigned)w.number);
		if (!wire_spend_in_message(walk, desc, f, &m))
			return false;
		if (!wire_spend(walk, desc, f, f != NULL ? wire_values(f, &w) : 1))
			return false;
		if (f == NULL || w.type != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED)
			continue;
		/* protobuf-c hands strings over as C strings, cut at the
		 * first NUL: "a\0x" would name lock "a". */
		if (f->type == PROTOBUF_C_TYPE_STRING && memchr(w.data, 0, w.len) != NULL)
			walk->nul = true;
		if (f->type == PROTOBUF_C_TYPE_MESSAGE &&
		    !wire_walk(walk, f->descriptor, w.data, w.len))
			return false;
	}
	return true;
}

/* The envelope (p, n) with only its id (the last one on the wire, as
 * protobuf-c reads it): the answer to a request refused unread. */
static int envelope_of_id(const uint8_t *p, size_t n, Raftlock__Envelope **out)
{
	Raftlock__Envelope head = RAFTLOCK__ENVELOPE__INIT;
	size_t at = 0;
	struct wire_field w = {0};
	while (wire_next(p, n, &at, &w))
		if (w.number == 1 && w.type == PROTOBUF_C_WIRE_TYPE_VARINT)
			head.id = w.value;
	uint8_t bytes[16]; /* a tag and a varint */
	size_t len = raftlock__envelope__pack(&head, bytes);
	Raftlock__Envelope *env = raftlock__envelope__unpack(NULL, len, bytes);
	if (env == NULL)
		return RAFTLOCK_ENOMEM;
	*out = env;
	return 0;
}

/* codec_decode_request(), or, when request is false, the same with an
 * answer's bounds (codec_decode_envelope()). */
static int decode(const uint8_t *buf, size_t n, bool request, Raftlock__Envelope **out,
		  const char **refusal)
{
	struct wire_walk walk = {.request = request};
	if (!wire_walk(&walk, &raftlock__envelope__descriptor, buf, n)) {
		if (walk.over == NULL || walk.over->why == NULL)
			return RAFTLOCK_EPROTO;
		int rv = envelope_of_id(buf, n, out);
		if (rv == 0)
			*refusal = walk.over->why;
		return rv;
	}
	Raftlock__Envelope *env = raftlock__envelope__unpack(NULL, n, buf);
	if (env == NULL)
		return RAFTLOCK_EPROTO;
	/* No request this version knows, or a keepalive whose secrets break
	 * their bounds (no library sends one): as for bytes that do not
	 * decode, the connection is closed. */
	if (env->body_case == RAFTLOCK__ENVELOPE__BODY__NOT_SET ||
	    (env->body_case == RAFTLOCK__ENVELOPE__BODY_KEEPALIVE &&
	     keepalive_too_big(env->keepalive))) {
		raftlock__envelope__free_unpacked(env, NULL);
		return RAFTLOCK_EPROTO;
	}
	const char *why = check_request(env);
	if (why == NULL && walk.nul)
		why = "a string (a lock name, say) holds a NUL byte";
	*out = env;
	*refusal = why;
	return 0;
}

int codec_decode_request(const uint8_t *buf, size_t n, Raftlock__Envelope **out,
			 const char **refusal)
{
	return decode(buf, n, true, out, refusal);
}

int codec_decode_envelope(const uint8_t *buf, size_t n, Raftlock__Envelope **out)
{
	Raftlock__Envelope *env;
	const char *refusal;
	int rv = decode(buf, n, false, &env, &refusal);
	if (rv != 0)
		return rv;
	if (refusal != NULL) {
		raftlock__envelope__free_unpacked(env, NULL);
		return RAFTLOCK_EPROTO;
	}
	*out = env;
	return 0;
}

int codec_encode_entry(const Raftlock__LogEntry *entry, void *(*alloc)(size_t), void **out,
		       size_t *n)
{
	size_t size = raftlock__log_entry__get_packed_size(entry);
	uint8_t *body = malloc(size ? size : 1);
	if (body == NULL)
		return RAFTLOCK_ENOMEM;
	raftlock__log_entry__pack(entry, body);
	/* The packed entry already carries its cluster time. */
	int rv = codec_batch_entry(0, body, size, alloc, out, n);
	free(body);
	return rv;
}

int codec_decode_entry(const void *data, size_t n, struct arena *arena, Raftlock__LogEntry **out)
{
	const uint8_t *buf = data;
	if (n < ENTRY_HEADER_SIZE || buf[0] != 'R' || buf[1] != 'L')
		return RAFTLOCK_EPROTO;
	unsigned format = (unsigned)buf[2] << 8 | buf[3];
	if (format > ENTRY_FORMAT)
		return RAFTLOCK_EDATA;
	size_t size = (size_t)buf[4] << 24 | (size_t)buf[5] << 16 | (size_t)buf[6] << 8 | buf[7];
	if (size > n - ENTRY_HEADER_SIZE)
		return RAFTLOCK_EPROTO;
	ProtobufCAllocator *alloc = arena != NULL ? &arena->pb : NULL;
	Raftlock__LogEntry *e = raftlock__log_entry__unpack(alloc, size, buf + ENTRY_HEADER_SIZE);
	if (e == NULL)
		return RAFTLOCK_EPROTO;
	if (has_field_zero(&e->base)) {
		raftlock__log_entry__free_unpacked(e, alloc);
		return RAFTLOCK_EPROTO;
	}
	*out = e;
	return 0;
}

static size_t put_varint(uint8_t *out, uint64_t v)
{
	size_t n = 0;
	do {
		out[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v != 0)
			out[n] |= 0x80;
		n++;
	} while (v != 0);
	return n;
}

/* Field tags of LogEntry: cluster_time = 1 (varint), commands = 2 (bytes). */
#define TAG_CLUSTER_TIME 0x08
#define TAG_COMMAND 0x12

int codec_batch_add(uint8_t **buf, size_t *len, size_t *cap, const Raftlock__Command *cmd)
{
	size_t size = raftlock__command__get_packed_size(cmd);
	size_t need = *len + 1 + 10 + size;
	if (need > UINT32_MAX - 64)
		return RAFTLOCK_ETOOBIG;
	if (grow(buf, cap, need, 1024, 1) != 0)
		return RAFTLOCK_ENOMEM;
	uint8_t *p = *buf + *len;
	*p++ = TAG_COMMAND;
	p += put_varint(p, size);
	raftlock__command__pack(cmd, p);
	*len = (size_t)(p - *buf) + size;
	return 0;
}

int codec_batch_entry(uint64_t cluster_time, const uint8_t *batch, size_t len,
		      void *(*alloc)(size_t), void **out, size_t *n)
{
	uint8_t head[11];
	size_t hlen = 0;
	if (cluster_time != 0) {
		head[0] = TAG_CLUSTER_TIME;
		hlen = 1 + put_varint(head + 1, cluster_time);
	}
	size_t size = hlen + len;
	if (size > UINT32_MAX - 16)
		return RAFTLOCK_ETOOBIG;
	size_t total = (ENTRY_HEADER_SIZE + size + 7) & ~(size_t)7;
	uint8_t *buf = alloc(total);
	if (buf == NULL)
		return RAFTLOCK_ENOMEM;
	buf[0] = 'R';
	buf[1] = 'L';
	buf[2] = (uint8_t)(ENTRY_FORMAT >> 8);
	buf[3] = (uint8_t)ENTRY_FORMAT;
	frame_put_header(buf + 4, (uint32_t)size);
	memcpy(buf + ENTRY_HEADER_SIZE, head, hlen);
	if (len > 0)
		memcpy(buf + ENTRY_HEADER_SIZE + hlen, batch, len);
	memset(buf + ENTRY_HEADER_SIZE + size, 0, total - ENTRY_HEADER_SIZE - size);
	*out = buf;
	*n = total;
	return 0;
}
