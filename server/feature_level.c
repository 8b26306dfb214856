/* feature_level.c: see feature_level.h. */
#include "feature_level.h"

#include <stdbool.h>

/* The command kind a request becomes; NOT_SET for none; false for a kind
 * not listed here. */
static bool request_command(Raftlock__Envelope__BodyCase body, Raftlock__Command__OpCase *op)
{
	switch (body) {
	case RAFTLOCK__ENVELOPE__BODY_STATUS:
	case RAFTLOCK__ENVELOPE__BODY_KEEPALIVE: /* RENEW, level 1 */
	case RAFTLOCK__ENVELOPE__BODY_GET_LOCK:
	case RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS:
	case RAFTLOCK__ENVELOPE__BODY_LIST_SESSIONS:
	case RAFTLOCK__ENVELOPE__BODY_CHECK_TOKEN:
	case RAFTLOCK__ENVELOPE__BODY_AUTHENTICATE:
	case RAFTLOCK__ENVELOPE__BODY_ACL_LIST:
	case RAFTLOCK__ENVELOPE__BODY_SNAPSHOT_READ:
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_LIST:
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_PROMOTE: /* a raft configuration change */
	case RAFTLOCK__ENVELOPE__BODY_WATCH:
	case RAFTLOCK__ENVELOPE__BODY_WATCH_CANCEL:
	case RAFTLOCK__ENVELOPE__BODY_RESPONSE: *op = RAFTLOCK__COMMAND__OP__NOT_SET; return true;
	case RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION:
		*op = RAFTLOCK__COMMAND__OP_OPEN_SESSION;
		return true;
	case RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION:
		*op = RAFTLOCK__COMMAND__OP_CLOSE_SESSION;
		return true;
	case RAFTLOCK__ENVELOPE__BODY_ACQUIRE: *op = RAFTLOCK__COMMAND__OP_ACQUIRE; return true;
	case RAFTLOCK__ENVELOPE__BODY_RELEASE: *op = RAFTLOCK__COMMAND__OP_RELEASE; return true;
	case RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT:
		*op = RAFTLOCK__COMMAND__OP_CANCEL_WAIT;
		return true;
	case RAFTLOCK__ENVELOPE__BODY_ACL_SET: *op = RAFTLOCK__COMMAND__OP_ACL_SET; return true;
	case RAFTLOCK__ENVELOPE__BODY_ACL_DELETE:
		*op = RAFTLOCK__COMMAND__OP_ACL_DELETE;
		return true;
	case RAFTLOCK__ENVELOPE__BODY_REVOKE: *op = RAFTLOCK__COMMAND__OP_REVOKE; return true;
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_ADD:
		*op = RAFTLOCK__COMMAND__OP_MEMBER_ADD;
		return true;
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_REMOVE:
		*op = RAFTLOCK__COMMAND__OP_MEMBER_REMOVE;
		return true;
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_JOIN:
		*op = RAFTLOCK__COMMAND__OP_MEMBER_JOIN;
		return true;
	case RAFTLOCK__ENVELOPE__BODY_MULTI_ACQUIRE:
		*op = RAFTLOCK__COMMAND__OP_MULTI_ACQUIRE;
		return true;
	case RAFTLOCK__ENVELOPE__BODY_PROCLAIM: *op = RAFTLOCK__COMMAND__OP_PROCLAIM; return true;
	default: return false;
	}
}

uint32_t features_request_level(const Raftlock__Envelope *env)
{
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	Raftlock__OpenSession open = RAFTLOCK__OPEN_SESSION__INIT;
	if (!request_command(env->body_case, &cmd.op_case))
		return 0;
	/* The fields that can raise a command's level, as the command will
	 * carry them (service.c copies them). */
	if (env->body_case == RAFTLOCK__ENVELOPE__BODY_ACQUIRE && env->acquire != NULL)
		cmd.acquire = env->acquire->acquire;
	if (env->body_case == RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION && env->open_session != NULL) {
		open.bind_grace_ms = env->open_session->bind_grace_ms;
		cmd.open_session = &open;
	}
	return features_level_of(&cmd);
}

void features_note(struct features *f, uint64_t id, uint32_t level)
{
	for (unsigned i = 0; i < f->n; i++)
		if (f->heard[i].id == id) {
			f->heard[i].level = level;
			return;
		}
	if (f->n < FEATURES_MAX_NODES) {
		f->heard[f->n].id = id;
		f->heard[f->n].level = level;
		f->n++;
	}
}

void features_clear(struct features *f)
{
	f->n = 0;
}

uint32_t features_voters_level(const struct features *f, uint64_t self, const uint64_t *ids,
			       unsigned n_voters)
{
	uint32_t lowest = FEATURE_LEVEL;
	for (unsigned v = 0; v < n_voters; v++) {
		if (ids[v] == self)
			continue;
		uint32_t level = 0;
		for (unsigned i = 0; i < f->n; i++)
			if (f->heard[i].id == ids[v])
				level = f->heard[i].level;
		if (level == 0)
			return 0;
		if (level < lowest)
			lowest = level;
	}
	return lowest;
}
