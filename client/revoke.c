/* revoke.c: raftlock_revoke of raftlock.h, an admin's request through the
 * leader (GUARANTEES, revocation). */
#include "client.h"
#include "codec.h"
#include "errmsg.h"
#include "introspect.h"

RAFTLOCK_API int raftlock_revoke(raftlock_client *c, const char *name, uint64_t token,
				 unsigned grace_ms, uint32_t *count)
{
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	int rv = codec_check_name(name);
	if (rv != 0)
		return errmsg_set(&c->t, rv, NULL, "revoke: a lock name of 1..%d bytes",
				  RAFTLOCK_NAME_MAX);
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__RevokeRequest req = RAFTLOCK__REVOKE_REQUEST__INIT;
	req.name = (char *)name;
	req.token = token;
	req.grace_ms = grace_ms;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_REVOKE;
	env.revoke = &req;
	Raftlock__Envelope *reply;
	/* Never sent twice: with token 0 a second run would revoke the next
	 * holder too, and with a token it would answer ENOTFOUND for a grant
	 * the first run revoked. */
	rv = introspect_call_once(c, &env, RAFTLOCK__RESPONSE__PAYLOAD_RESULT, &reply);
	if (rv == RAFTLOCK_EUNKNOWN)
		return errmsg_set(&c->t, rv, NULL,
				  "revoke '%s': sent, but no answer came (a lost connection, a "
				  "leader change or the timeout): it may have run; see the "
				  "lock's holders",
				  name);
	if (rv != 0)
		return errmsg_set(&c->t, rv, NULL, "revoke '%s'", name);
	const Raftlock__Result *res = reply->response->result;
	rv = res->status;
	if (rv == 0 && count != NULL)
		*count = res->count;
	raftlock__envelope__free_unpacked(reply, NULL);
	if (rv == RAFTLOCK_ENOTFOUND)
		return errmsg_set(&c->t, rv, NULL,
				  token ? "revoke '%s': no current grant with token %llu"
					: "revoke '%s': nobody holds it",
				  name, (unsigned long long)token);
	if (rv != 0)
		return errmsg_set(&c->t, rv, NULL, "revoke '%s'", name);
	return 0;
}
