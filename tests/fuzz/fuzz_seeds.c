/*
 * fuzz_seeds.c: writes a seed corpus for fuzz_decode into a directory.
 *
 * Messages are filled from their descriptors (every field set, bytes
 * fields with a session secret's length, one member of a oneof at a time), so a body or command
 * added to raftlock.proto gets its seed without a change here; and a lock
 * set over its bound, which the decoder refuses from a walk of the wire,
 * and a request with more unknown fields than it takes.
 * Each seed starts with fuzz_decode's control byte.
 *
 * Usage: fuzz_seeds DIR
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "codec.h"
#include "frame.h"
#include "raftlock.h"

#define MAX_DEPTH 4
#define CTL_STREAM 0x02      /* fed 3 bytes at a time */
#define CTL_SMALL_BOUND 0x13 /* fed 4 bytes at a time, 64-byte frame bound */

static const char *out_dir;

static void *xcalloc(size_t n)
{
	void *p = calloc(1, n);
	if (p == NULL) {
		fprintf(stderr, "fuzz_seeds: out of memory\n");
		exit(1);
	}
	return p;
}

static ProtobufCMessage *new_message(const ProtobufCMessageDescriptor *desc, int depth,
				     unsigned pick);

/* Sets the value at slot for field f: numbers 1, strings a valid name,
 * messages filled in turn. */
static void fill_value(const ProtobufCFieldDescriptor *f, void *slot, int depth)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32: *(uint32_t *)slot = 1; break;
	case PROTOBUF_C_TYPE_ENUM: *(int *)slot = 1; break;
	case PROTOBUF_C_TYPE_BOOL: *(protobuf_c_boolean *)slot = 1; break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64: *(uint64_t *)slot = 1; break;
	case PROTOBUF_C_TYPE_STRING: {
		char *s = strdup("seed/lock");
		if (s == NULL)
			exit(1);
		*(char **)slot = s;
		break;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		/* a session secret (or its digest) of the shortest length */
		uint8_t *b = xcalloc(RAFTLOCK_SECRET_MIN);
		memset(b, 0x5a, RAFTLOCK_SECRET_MIN);
		*(ProtobufCBinaryData *)slot = (ProtobufCBinaryData){RAFTLOCK_SECRET_MIN, b};
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		*(ProtobufCMessage **)slot = new_message(f->descriptor, depth + 1, 0);
		break;
	default: break;
	}
}

/* Position of field i among the members of its oneof. */
static unsigned oneof_rank(const ProtobufCMessageDescriptor *desc, unsigned i)
{
	unsigned rank = 0;
	for (unsigned j = 0; j < i; j++)
		if ((desc->fields[j].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    desc->fields[j].quantifier_offset == desc->fields[i].quantifier_offset)
			rank++;
	return rank;
}

/* A message with every field set; of a oneof, only the member of rank
 * pick. Repeated fields get one element. Freed with
 * protobuf_c_message_free_unpacked(). */
static ProtobufCMessage *new_message(const ProtobufCMessageDescriptor *desc, int depth,
				     unsigned pick)
{
	ProtobufCMessage *m = xcalloc(desc->sizeof_message);
	protobuf_c_message_init(desc, m);
	if (depth > MAX_DEPTH)
		return m;
	for (unsigned i = 0; i < desc->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &desc->fields[i];
		char *base = (char *)m;
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			if (oneof_rank(desc, i) != pick)
				continue;
			*(uint32_t *)(base + f->quantifier_offset) = f->id;
			fill_value(f, base + f->offset, depth);
		} else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			void *elems = xcalloc(sizeof(uint64_t) + sizeof(void *));
			fill_value(f, elems, depth);
			*(size_t *)(base + f->quantifier_offset) = 1;
			*(void **)(base + f->offset) = elems;
		} else {
			fill_value(f, base + f->offset, depth);
		}
	}
	return m;
}

static unsigned oneof_members(const ProtobufCMessageDescriptor *desc)
{
	unsigned n = 0;
	for (unsigned i = 0; i < desc->n_fields; i++)
		n += (desc->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
	return n;
}

/* The name of the oneof member of rank pick. */
static const char *member_name(const ProtobufCMessageDescriptor *desc, unsigned pick)
{
	for (unsigned i = 0; i < desc->n_fields; i++)
		if ((desc->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    oneof_rank(desc, i) == pick)
			return desc->fields[i].name;
	return "none";
}

static void write_seed(const char *prefix, const char *name, uint8_t ctl, const void *bytes,
		       size_t n)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s_%s", out_dir, prefix, name);
	FILE *f = fopen(path, "wb");
	if (f == NULL || fputc(ctl, f) == EOF || fwrite(bytes, 1, n, f) != n || fclose(f) != 0) {
		fprintf(stderr, "fuzz_seeds: cannot write %s\n", path);
		exit(1);
	}
}

/* Appends the frame of an envelope with body member `pick` to *stream. */
static void add_envelope(unsigned pick, uint8_t **stream, size_t *len)
{
	ProtobufCMessage *m = new_message(&raftlock__envelope__descriptor, 0, pick);
	uint8_t *frame;
	size_t n;
	if (codec_frame_envelope((Raftlock__Envelope *)m, &frame, &n) != 0)
		exit(1);
	write_seed("env", member_name(m->descriptor, pick), 0, frame, n);
	*stream = realloc(*stream, *len + n);
	if (*stream == NULL)
		exit(1);
	memcpy(*stream + *len, frame, n);
	*len += n;
	free(frame);
	protobuf_c_message_free_unpacked(m, NULL);
}

/* A lock set of one lock over RAFTLOCK_MULTI_MAX (the seed's one item
 * again and again), which the decoder counts on the wire and refuses
 * before unpacking its items. */
static void write_set_over_bound(void)
{
	const ProtobufCMessageDescriptor *desc = &raftlock__envelope__descriptor;
	unsigned pick = 0;
	while (strcmp(member_name(desc, pick), "multi_acquire") != 0)
		pick++;
	Raftlock__Envelope *env = (Raftlock__Envelope *)new_message(desc, 0, pick);
	Raftlock__MultiAcquire *set = env->multi_acquire->acquire;
	Raftlock__MultiItem **own = set->items;
	Raftlock__MultiItem *same[RAFTLOCK_MULTI_MAX + 1];
	for (size_t i = 0; i <= RAFTLOCK_MULTI_MAX; i++)
		same[i] = own[0];
	set->items = same;
	set->n_items = RAFTLOCK_MULTI_MAX + 1;
	uint8_t *frame;
	size_t n;
	if (codec_frame_envelope(env, &frame, &n) != 0)
		exit(1);
	write_seed("env", "multi_acquire_over_bound", 0, frame, n);
	free(frame);
	set->items = own;
	set->n_items = 1;
	protobuf_c_message_free_unpacked(&env->base, NULL);
}

/* A STATUS request with one unknown field over CODEC_UNKNOWN_MAX, which
 * the server's decoder refuses from a walk of the wire and the library's
 * takes. */
static void write_unknown_over_bound(void)
{
	static const uint8_t unknown[] = {0x98, 0x06, 0x00}; /* field 99, varint 0 */
	uint8_t frame[FRAME_HEADER_SIZE + 2 + (CODEC_UNKNOWN_MAX + 1) * sizeof unknown];
	uint8_t *p = frame + FRAME_HEADER_SIZE;
	*p++ = 0x52; /* status, empty */
	*p++ = 0x00;
	for (size_t i = 0; i <= CODEC_UNKNOWN_MAX; i++, p += sizeof unknown)
		memcpy(p, unknown, sizeof unknown);
	frame_put_header(frame, (uint32_t)(sizeof frame - FRAME_HEADER_SIZE));
	write_seed("env", "unknown_over_bound", 0, frame, sizeof frame);
}

static void write_entry(const char *name, Raftlock__Command **cmds, size_t n_cmds)
{
	Raftlock__LogEntry entry = RAFTLOCK__LOG_ENTRY__INIT;
	entry.cluster_time = 1;
	entry.n_commands = n_cmds;
	entry.commands = cmds;
	void *buf;
	size_t n;
	if (codec_encode_entry(&entry, malloc, &buf, &n) != 0)
		exit(1);
	write_seed("entry", name, 0, buf, n);
	free(buf);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_seeds DIR\n");
		return 2;
	}
	out_dir = argv[1];
	if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
		perror(out_dir);
		return 1;
	}

	uint8_t *stream = NULL;
	size_t len = 0;
	unsigned bodies = oneof_members(&raftlock__envelope__descriptor);
	for (unsigned pick = 0; pick < bodies; pick++)
		add_envelope(pick, &stream, &len);
	write_seed("stream", "all", CTL_STREAM, stream, len);
	write_seed("stream", "small_bound", CTL_SMALL_BOUND, stream, len);
	free(stream);
	write_set_over_bound();
	write_unknown_over_bound();

	unsigned ops = oneof_members(&raftlock__command__descriptor);
	Raftlock__Command **cmds = xcalloc(ops * sizeof *cmds);
	for (unsigned pick = 0; pick < ops; pick++) {
		cmds[pick] =
			(Raftlock__Command *)new_message(&raftlock__command__descriptor, 0, pick);
		write_entry(member_name(&raftlock__command__descriptor, pick), &cmds[pick], 1);
	}
	write_entry("all", cmds, ops);
	write_entry("empty", NULL, 0);
	for (unsigned pick = 0; pick < ops; pick++)
		protobuf_c_message_free_unpacked(&cmds[pick]->base, NULL);
	free(cmds);
	return 0;
}
