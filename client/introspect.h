/*
 * introspect.h: the read side of the API (status, locks, sessions, token
 * checks): requests that change nothing, and the conversion of their
 * answers into the public structs of raftlock.h, which the caller frees
 * with the matching *_free function. Everything is in raftlock.h; this
 * header only names the file's concern.
 */
#ifndef RAFTLOCK_INTROSPECT_H
#define RAFTLOCK_INTROSPECT_H

#include "client.h"
#include "raftlock.h"
#include "raftlock.pb-c.h"

/*
 * Sends a request through the client's leader connection and checks that
 * the answer carries `want`. t.mu is taken here. On 0 *reply is owned by
 * the caller. Also the access-rule calls (acl.c) use it.
 */
int introspect_call(raftlock_client *c, Raftlock__Envelope *env,
		    Raftlock__Response__PayloadCase want, Raftlock__Envelope **reply);

/* introspect_call for a request that must not run twice (a revoke):
 * through transport_call_once, so RAFTLOCK_EUNKNOWN once it may have run
 * and was not answered. */
int introspect_call_once(raftlock_client *c, Raftlock__Envelope *env,
			 Raftlock__Response__PayloadCase want, Raftlock__Envelope **reply);

/* strdup(s) ("" for NULL); sets *failed when out of memory (then NULL).
 * Also the member list (member.c) uses it. */
char *introspect_dup(const char *s, bool *failed);

#endif
