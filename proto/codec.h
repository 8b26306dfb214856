/*
 * codec.h: encoding and validation of protocol envelopes and log entries.
 * No I/O: buffers in, buffers or messages out.
 */
#ifndef RAFTLOCK_CODEC_H
#define RAFTLOCK_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "raftlock.h"
#include "raftlock.pb-c.h"

/* Log entry header: "RL", a 16-bit format version, a 32-bit payload length,
 * all big-endian; then the LogEntry protobuf, zero-padded to a multiple of 8
 * bytes (libraft refuses other sizes). */
#define ENTRY_HEADER_SIZE 8
/* 2: Command.acked and OpenSession.acks_queued, which apply acts on (a node
 * of format 1 would ignore them and diverge, so it stops instead). */
/* 3: OpenSession.secret_digest, which apply stores and checks a retried
 * open against, and AclSet, AclDelete and OpenSession.identity, which apply
 * acts on (a node of format 2 would drop them and diverge). */
/* 4: OpenSession.max_sessions_per_identity and Acquire.max_waiters, limits
 * carried by the proposing leader that apply enforces (a node of format 3
 * would not, and diverge). */
#define ENTRY_FORMAT 4

/* The client protocol this code speaks, stamped on every envelope it
 * frames (Envelope.protocol). 2: the sequence header of a mutating request
 * travels once, in Envelope.sequence. A server reads the per-request
 * fields of protocol 1 when the envelope has no sequence, so old clients
 * keep working; a client refuses a server whose answers say less than
 * WIRE_PROTOCOL_MIN_SERVER (0: older than protocol 2), which would not see
 * its sequence header. Upgrade servers first, then clients. */
#define WIRE_PROTOCOL 3
/* 3: session secrets (OpenSessionRequest.secret, Sequence.secret,
 * KeepAliveRequest.secrets). A server refuses a session open or a
 * mutating request from a sender of an older protocol with RAFTLOCK_EPROTO
 * and a message that says to upgrade the client. */
#define WIRE_PROTOCOL_SECRETS 3
#define WIRE_PROTOCOL_MIN_SERVER 2

/*
 * Encodes env as one frame (header + payload), its protocol field set to
 * WIRE_PROTOCOL, into a malloc'd buffer owned
 * by the caller. Returns 0, RAFTLOCK_ETOOBIG (payload above
 * RAFTLOCK_FRAME_MAX) or RAFTLOCK_ENOMEM; *out is unchanged on failure.
 */
int codec_frame_envelope(const Raftlock__Envelope *env, uint8_t **out, size_t *n);

/*
 * Appends env as one frame (protocol field set to WIRE_PROTOCOL) to the
 * growable buffer *buf (*len bytes used of
 * *cap; realloc'd as needed, owned by the caller; NULL/0/0 to start).
 * Returns 0, RAFTLOCK_ETOOBIG or RAFTLOCK_ENOMEM; on failure the buffer and
 * its contents are unchanged.
 */
int codec_frame_envelope_append(const Raftlock__Envelope *env, uint8_t **buf, size_t *len,
				size_t *cap);

/*
 * What a request's frame may hold, read on the wire before protobuf-c
 * unpacks it (it allocates for every field it scans, known or not).
 * CODEC_UNKNOWN_MAX: fields this version does not know, in any one message
 * (a newer client's few new fields are ignored, a flood is refused).
 * CODEC_FIELDS_MAX: fields and elements in all (a packed repeated scalar
 * counts its elements), those of a repeated field with a bound of its own
 * (a set's locks, a keepalive's sessions and secrets) apart. The largest
 * request is a lock set: RAFTLOCK_MULTI_MAX items of 7 fields, a sequence
 * header acknowledging at most 256 queued acquires (the library's bound,
 * and all apply reads), under 1,000 fields, or 2,000 with 16 new fields in
 * each of its messages; protobuf-c unpacks 8,192 fields in about 2 ms.
 */
#define CODEC_UNKNOWN_MAX 16
#define CODEC_FIELDS_MAX 8192

/*
 * What an answer's frame may hold, read likewise, bounded by what a
 * server sends. CODEC_ANSWER_UNKNOWN_MAX unknown fields in all, at any
 * depth: counted in the whole frame, not by message as a request's, as an
 * answer comes from a server that may be newer (servers are upgraded
 * first, WIRE_PROTOCOL), whose new repeated string or message field in a
 * known message (a list in each LockInfo, say) is one unknown field per
 * element, more than CODEC_UNKNOWN_MAX in one message; and a bound by
 * message would not bound the frame, whose listing may hold 80,000
 * holders of 16 unknown fields each (85 MB and 0.5 s unpacked).
 * protobuf-c takes about 90 bytes for each unknown field it keeps: 65,536
 * cost about 6 MB (a frame's size) and 20 ms, and leave a newer server 65
 * new fields in each lock of a listing page of 1,000.
 *
 * Each repeated field, its elements counted in the whole frame (a page
 * sums its locks' lists), against what a server sends:
 * - a listing's page (locks, sessions, rules): CODEC_ANSWER_HEADROOM
 *   times CODEC_PAGE_MAX, the server's (server/reads.c), so that a newer
 *   server may raise its page that far, never further; a cluster's
 *   members (at most 9) as many;
 * - a lock's holders, and its waiters, CODEC_ANSWER_ENTRIES_MAX, and a
 *   session's lock names CODEC_ANSWER_NAMES_MAX: as many as a frame holds
 *   of the smallest a server sends (a holder or waiter takes 6 bytes at
 *   least: its element, its Holder or Waiter, that one's session, never
 *   0; a name 3: names are never empty);
 * - a keepalive's statuses and TTLs RAFTLOCK_KEEPALIVE_MAX, a set's
 *   tokens RAFTLOCK_MULTI_MAX: one for each session or lock asked about.
 * A field that is not repeated: as many values in one message as its
 * type has fields (a server writes each once; protobuf-c unpacked each of
 * 2 million, 0.4 s and 64 MB, to keep the last). 2 million empty LockInfo
 * took the library 1.6 s and 300 MB; the largest flood left (empty
 * holders, waiters and names filling a frame) costs what a frame of
 * one-byte lock names does, about 0.6 s and 130 MB.
 */
#define CODEC_ANSWER_UNKNOWN_MAX 65536
#define CODEC_PAGE_MAX 1000
#define CODEC_ANSWER_HEADROOM 4
#define CODEC_ANSWER_ENTRIES_MAX (RAFTLOCK_FRAME_MAX / 6)
#define CODEC_ANSWER_NAMES_MAX (RAFTLOCK_FRAME_MAX / 3)

/*
 * The bound that an answer's frame counts the elements of field `number`
 * of the message type desc against (one of the above, or a request's own:
 * a set's locks, a keepalive's sessions and secrets), or 0 when it has
 * none. A repeated field without one counts, with every other such field
 * of the frame, against CODEC_FIELDS_MAX, which is not what a server
 * sends: every repeated field an answer (a Response) can hold needs one
 * (tests/unit/test_codec_bounds.c checks it from the descriptors).
 */
size_t codec_answer_bound(const ProtobufCMessageDescriptor *desc, unsigned number);

/*
 * Decodes and validates one frame payload: an answer (the library's, a
 * leader's from its members). On success *out is owned by the caller and
 * freed with raftlock__envelope__free_unpacked(*out, NULL).
 * Returns RAFTLOCK_EPROTO for bytes that do not decode, a field numbered 0
 * at any depth, more fields or elements than an answer may hold (a
 * flood, refused from a walk of its bytes before anything is unpacked:
 * CODEC_ANSWER_UNKNOWN_MAX and the bounds above), an envelope without a
 * body, or a request whose fields break the protocol's bounds (as
 * codec_decode_request() refuses, its fields counted as an answer's);
 * RAFTLOCK_ENOMEM. Whatever it accepts packs again (also as part of a
 * Command) to bytes that decode.
 */
int codec_decode_envelope(const uint8_t *buf, size_t n, Raftlock__Envelope **out);

/*
 * The same, for a server that answers a request out of bounds by its id
 * and goes on reading: returns RAFTLOCK_EPROTO (bytes that do not decode,
 * a field numbered 0, an envelope without a body this version knows, a
 * keepalive with more secrets than sessions or a secret over
 * RAFTLOCK_SECRET_MAX: a flood, whose connection the server closes)
 * or RAFTLOCK_ENOMEM with *out and *refusal unchanged; else 0 with *out as
 * above and *refusal NULL, or a static text saying which bound the request
 * breaks: an empty lock name or one over RAFTLOCK_NAME_MAX bytes, a string field holding a
 * NUL byte (which a C string would cut), a field over its limit, a lock
 * set over RAFTLOCK_MULTI_MAX locks, a keepalive over
 * RAFTLOCK_KEEPALIVE_MAX sessions or secrets. The frame's fields are
 * counted on the wire, at every depth, before anything is unpacked: a
 * request over CODEC_UNKNOWN_MAX or CODEC_FIELDS_MAX is refused as a flood
 * (RAFTLOCK_EPROTO), and one over the count of a repeated field that the
 * protocol bounds (a set's locks, a keepalive's sessions and secrets) is
 * refused unread, *out of such a request holding only the envelope's id.
 */
int codec_decode_request(const uint8_t *buf, size_t n, Raftlock__Envelope **out,
			 const char **refusal);

/*
 * Encodes a log entry with its header and padding into a buffer from
 * alloc() (so the server can hand raft a raft_malloc'd buffer).
 * Returns 0, RAFTLOCK_ETOOBIG or RAFTLOCK_ENOMEM.
 */
int codec_encode_entry(const Raftlock__LogEntry *entry, void *(*alloc)(size_t), void **out,
		       size_t *n);

/*
 * Decodes a log entry written by codec_encode_entry(). Returns 0 with *out
 * owned by arena until its next arena_reset() (never free_unpacked it),
 * or, when arena is NULL, by the caller (raftlock__log_entry__free_unpacked);
 * RAFTLOCK_EPROTO for a bad header or payload (a field numbered 0
 * included), RAFTLOCK_EDATA for an unknown future format. On failure what
 * the decode took from the arena stays there until the next reset.
 */
int codec_decode_entry(const void *buf, size_t n, struct arena *arena, Raftlock__LogEntry **out);

/*
 * Batches: commands are packed one by one as they arrive (so their sources
 * need not outlive the call) and turned into a log entry at flush time.
 * codec_batch_add appends one packed Command to the growing byte buffer
 * (*buf, *len, *cap; malloc'd, owned by the caller). codec_batch_entry
 * writes header + cluster_time + the batch + padding into a buffer from
 * alloc(): the same bytes a LogEntry with those commands encodes to, for
 * any order of the fields. Both return 0, RAFTLOCK_ENOMEM or
 * RAFTLOCK_ETOOBIG.
 */
int codec_batch_add(uint8_t **buf, size_t *len, size_t *cap, const Raftlock__Command *cmd);
int codec_batch_entry(uint64_t cluster_time, const uint8_t *batch, size_t len,
		      void *(*alloc)(size_t), void **out, size_t *n);

/* Checks a lock name: non-empty, at most RAFTLOCK_NAME_MAX bytes (a C
 * string: one with a NUL byte on the wire is codec_decode_request()'s to
 * refuse). Returns 0, RAFTLOCK_EINVAL or RAFTLOCK_ETOOBIG. */
int codec_check_name(const char *name);

/* The longest key of an access rule in the store (identity, a 0 byte,
 * prefix): LMDB's largest key. Two names of RAFTLOCK_NAME_MAX bytes would
 * make a key of 513 bytes, which LMDB refuses, and an apply cannot fail
 * half-way on every member. */
#define CODEC_RULE_KEY_MAX 511

/* Whether (identity, prefix) can name an access rule: a non-empty identity
 * and a prefix ("" allowed), each of at most RAFTLOCK_NAME_MAX bytes, and
 * together at most CODEC_RULE_KEY_MAX - 1 bytes.
 * Returns 0, RAFTLOCK_EINVAL or RAFTLOCK_ETOOBIG. */
int codec_check_rule(const char *identity, const char *prefix);

#endif
