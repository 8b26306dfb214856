/* test_feature_level.c: the one table of feature levels
 * (server/feature_level.h): every command kind of the proto and every
 * request kind of the envelope has a level, so that a kind added without
 * one fails here; the leader's refusal before the log (service.c,
 * features_request_level) reads the level that apply checks
 * (features_level_of). Walks the protobuf-c descriptors: no list of kinds
 * is kept here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "feature_level.h"

/* Whether f is a kind of the message's oneof (Command and Envelope have
 * one each: op, body). */
static bool is_kind(const ProtobufCFieldDescriptor *f)
{
	return (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
}

static void test_every_command_has_a_level(void **state)
{
	(void)state;
	const ProtobufCMessageDescriptor *d = &raftlock__command__descriptor;
	unsigned kinds = 0;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if (!is_kind(f))
			continue;
		kinds++;
		uint32_t level = features_command_level((Raftlock__Command__OpCase)f->id);
		if (level < 1 || level > FEATURE_LEVEL)
			fail_msg("command %s has no feature level (%u): add it to "
				 "features_command_level",
				 f->name, level);
	}
	assert_true(kinds >= 22);
	assert_int_equal(features_command_level(RAFTLOCK__COMMAND__OP__NOT_SET), 1);
}

/* An envelope of that body kind, its message zeroed (freed by the caller
 * with free_envelope). */
static Raftlock__Envelope *envelope_of(const ProtobufCFieldDescriptor *f)
{
	Raftlock__Envelope *env = calloc(1, sizeof *env);
	raftlock__envelope__init(env);
	env->body_case = (Raftlock__Envelope__BodyCase)f->id;
	const ProtobufCMessageDescriptor *md = f->descriptor;
	ProtobufCMessage *m = calloc(1, md->sizeof_message);
	md->message_init(m);
	*(ProtobufCMessage **)((char *)env + f->offset) = m;
	return env;
}

static void free_envelope(Raftlock__Envelope *env, const ProtobufCFieldDescriptor *f)
{
	free(*(ProtobufCMessage **)((char *)env + f->offset));
	free(env);
}

static void test_every_request_has_a_level(void **state)
{
	(void)state;
	const ProtobufCMessageDescriptor *d = &raftlock__envelope__descriptor;
	unsigned kinds = 0;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if (!is_kind(f))
			continue;
		assert_int_equal(f->type, PROTOBUF_C_TYPE_MESSAGE);
		kinds++;
		Raftlock__Envelope *env = envelope_of(f);
		uint32_t level = features_request_level(env);
		free_envelope(env, f);
		if (level < 1 || level > FEATURE_LEVEL)
			fail_msg("request %s has no feature level (%u): add it to "
				 "feature_level.c's request_command",
				 f->name, level);
	}
	assert_true(kinds >= 27);
}

/* A request needs what its command needs, fields included: the levels
 * the leader refuses by are those apply checks. */
static void test_request_level_is_its_commands(void **state)
{
	(void)state;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__AclDeleteRequest del = RAFTLOCK__ACL_DELETE_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_ACL_DELETE;
	env.acl_delete = &del;
	assert_int_equal(features_request_level(&env),
			 features_command_level(RAFTLOCK__COMMAND__OP_ACL_DELETE));
	assert_int_equal(features_request_level(&env), 2);

	Raftlock__AcquireRequest req = RAFTLOCK__ACQUIRE_REQUEST__INIT;
	Raftlock__Acquire acq = RAFTLOCK__ACQUIRE__INIT;
	req.acquire = &acq;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_ACQUIRE;
	env.acquire = &req;
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_ACQUIRE;
	cmd.acquire = &acq;
	assert_int_equal(features_request_level(&env), 1);
	acq.max_hold_ms = 1000; /* a revocation limit */
	assert_int_equal(features_request_level(&env), 3);
	assert_int_equal(features_level_of(&cmd), 3);

	Raftlock__OpenSessionRequest open = RAFTLOCK__OPEN_SESSION_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
	env.open_session = &open;
	assert_int_equal(features_request_level(&env), 1);
	open.bind_grace_ms = 500; /* bound to its connection */
	assert_int_equal(features_request_level(&env), 3);

	Raftlock__DropBound drop = RAFTLOCK__DROP_BOUND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_DROP_BOUND;
	cmd.drop_bound = &drop;
	assert_int_equal(features_level_of(&cmd), 3);
	drop.deadline = 5000; /* an older build would drop it */
	assert_int_equal(features_level_of(&cmd), FEATURES_DROP_BOUND_DEADLINE);

	Raftlock__MultiAcquireRequest multi = RAFTLOCK__MULTI_ACQUIRE_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_MULTI_ACQUIRE;
	env.multi_acquire = &multi;
	assert_int_equal(features_request_level(&env), 3);

	Raftlock__GetLockRequest get = RAFTLOCK__GET_LOCK_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_GET_LOCK;
	env.get_lock = &get;
	assert_int_equal(features_request_level(&env), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_command_has_a_level),
		cmocka_unit_test(test_every_request_has_a_level),
		cmocka_unit_test(test_request_level_is_its_commands),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
