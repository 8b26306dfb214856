/*
 * test_codec_bounds.c: every repeated field an answer can hold has a bound
 * of its own in the decoder's walk (codec_answer_bound()), found from
 * protobuf-c's descriptors from Response down, so that a list added to an
 * answer without one fails here: it would count against CODEC_FIELDS_MAX,
 * refusing a real answer longer than that and letting a flood as long
 * through. And each bound holds what a server sends, where a constant
 * names that.
 *
 * A request's repeated fields need no bound of their own: all of a
 * request's fields count against CODEC_FIELDS_MAX (codec.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "codec.h"
#include "config.h"
#include "fsm.h"
#include "raftlock.h"

/* A walk of message types: those met (each is looked at once, as types
 * may hold each other) and the fields found breaking the rule. */
#define TYPES_MAX 64
struct walk {
	const ProtobufCMessageDescriptor *seen[TYPES_MAX];
	size_t n_seen;
	char found[4096]; /* "type.field (number): why\n" each */
};

static bool walk_seen(const struct walk *w, const ProtobufCMessageDescriptor *desc)
{
	for (size_t i = 0; i < w->n_seen; i++)
		if (w->seen[i] == desc)
			return true;
	return false;
}

static void walk_note(struct walk *w, const ProtobufCMessageDescriptor *desc,
		      const ProtobufCFieldDescriptor *f, const char *why)
{
	size_t used = strlen(w->found);
	snprintf(w->found + used, sizeof w->found - used, "%s.%s (%u): %s\n", desc->name, f->name,
		 f->id, why);
}

/* Looks at desc and every message type below it: a repeated field
 * without a bound, or a bound on a field that is not repeated (which the
 * decoder never applies), is noted in w->found. */
static void walk_type(struct walk *w, const ProtobufCMessageDescriptor *desc)
{
	if (walk_seen(w, desc))
		return;
	assert_true(w->n_seen < TYPES_MAX);
	w->seen[w->n_seen++] = desc;
	for (unsigned i = 0; i < desc->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &desc->fields[i];
		bool repeated = f->label == PROTOBUF_C_LABEL_REPEATED;
		bool bounded = codec_answer_bound(desc, f->id) > 0;
		if (repeated && !bounded)
			walk_note(w, desc, f, "repeated, without a bound in codec.c's wire_bounds");
		if (!repeated && bounded)
			walk_note(w, desc, f, "bounded in codec.c's wire_bounds, not repeated");
		if (f->type == PROTOBUF_C_TYPE_MESSAGE)
			walk_type(w, f->descriptor);
	}
}

/* Every repeated field of every message an answer holds, at any depth
 * (down to a listing's holders' Holder), has a bound. */
static void test_every_answer_list_bounded(void **state)
{
	(void)state;
	static struct walk w;
	walk_type(&w, &raftlock__response__descriptor);
	if (w.found[0] != '\0')
		fail_msg("answer fields counted against CODEC_FIELDS_MAX:\n%s", w.found);
	assert_true(walk_seen(&w, &raftlock__holder__descriptor));
	assert_true(walk_seen(&w, &raftlock__session_info__descriptor));
}

/* The walk finds a list without a bound: a request's sequence header's
 * acknowledgements, a request's (counted against CODEC_FIELDS_MAX). */
static void test_unbounded_list_found(void **state)
{
	(void)state;
	static struct walk w;
	walk_type(&w, &raftlock__sequence__descriptor);
	assert_string_equal(w.found, "raftlock.Sequence.acked (4): repeated, without a bound in "
				     "codec.c's wire_bounds\n");
}

/* The bound of the field `name` of desc. */
static size_t bound_of(const ProtobufCMessageDescriptor *desc, const char *name)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(desc, name);
	assert_non_null(f);
	return codec_answer_bound(desc, f->id);
}

/* Each bound holds the most a server sends where a constant names it. */
static void test_bounds_hold_what_a_server_sends(void **state)
{
	(void)state;
	/* A listing's page (server/reads.c, page_limit()). */
	assert_true(bound_of(&raftlock__lock_list__descriptor, "locks") >= CODEC_PAGE_MAX);
	assert_true(bound_of(&raftlock__session_list__descriptor, "sessions") >= CODEC_PAGE_MAX);
	assert_true(bound_of(&raftlock__acl_list__descriptor, "rules") >= CODEC_PAGE_MAX);
	/* A cluster's members. */
	assert_true(bound_of(&raftlock__status_info__descriptor, "members") >= CONFIG_MAX_MEMBERS);
	assert_true(bound_of(&raftlock__member_list__descriptor, "members") >= CONFIG_MAX_MEMBERS);
	/* One lock's holders and waiters, one session's locks: the state
	 * machine's quotas. */
	assert_true(bound_of(&raftlock__lock_info__descriptor, "holders") >= FSM_MAX_HOLDERS);
	assert_true(bound_of(&raftlock__lock_info__descriptor, "waiters") >= FSM_MAX_WAITERS);
	assert_true(bound_of(&raftlock__session_info__descriptor, "locks") >=
		    FSM_MAX_SESSION_LOCKS);
	/* One status and TTL for each session a keepalive names, one token
	 * for each lock of a set. */
	assert_true(bound_of(&raftlock__keep_alive_result__descriptor, "statuses") >=
		    RAFTLOCK_KEEPALIVE_MAX);
	assert_true(bound_of(&raftlock__keep_alive_result__descriptor, "ttl_ms") >=
		    RAFTLOCK_KEEPALIVE_MAX);
	assert_true(bound_of(&raftlock__result__descriptor, "tokens") >= RAFTLOCK_MULTI_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_answer_list_bounded),
		cmocka_unit_test(test_unbounded_list_found),
		cmocka_unit_test(test_bounds_hold_what_a_server_sends),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
