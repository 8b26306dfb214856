/* member.c: the membership calls of raftlock.h. */
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "errmsg.h"
#include "introspect.h"

/* *out = a copy of ml (free with raftlock_member_list_free()): 0, or
 * RAFTLOCK_ENOMEM with *out unchanged. */
static int member_list_from_pb(const Raftlock__MemberList *ml, struct raftlock_member_list **out)
{
	struct raftlock_member_list *list = calloc(1, sizeof *list);
	bool failed = list == NULL;
	if (!failed && ml->n_members > 0) {
		list->members = calloc(ml->n_members, sizeof *list->members);
		failed = list->members == NULL;
	}
	for (size_t i = 0; !failed && i < ml->n_members; i++) {
		const Raftlock__MemberInfo *mi = ml->members[i];
		struct raftlock_member_info *m = &list->members[i];
		m->id = mi->id;
		m->match_index = mi->match_index;
		m->joined = mi->joined;
		m->raft_address = introspect_dup(mi->raft_address, &failed);
		m->client_address = introspect_dup(mi->client_address, &failed);
		m->role = introspect_dup(mi->role, &failed);
		list->n_members++;
	}
	if (list != NULL) {
		list->leader_id = ml->leader_id;
		list->last_index = ml->last_index;
		list->max_member_id = ml->max_member_id;
	}
	if (failed) {
		raftlock_member_list_free(list);
		return RAFTLOCK_ENOMEM;
	}
	*out = list;
	return 0;
}

/* Sends a membership request through the leader: 0 once it answered 0, or
 * its status, with its message kept for raftlock_errmsg(). With members
 * not NULL, on 0 *members is a copy of the answer's member list, or NULL
 * when it carries none. */
static int member_call(raftlock_client *c, Raftlock__Envelope *env, const char *what,
		       unsigned long long id, struct raftlock_member_list **members)
{
	Raftlock__Envelope *reply = NULL;
	pthread_mutex_lock(&c->t.mu);
	int rv = transport_call(&c->t, env, 0, &reply);
	pthread_mutex_unlock(&c->t.mu);
	if (rv != 0)
		return errmsg_set(&c->t, rv, NULL, "member %s %llu", what, id);
	const Raftlock__Response *resp = reply->response;
	rv = resp->status;
	char detail[256] = "";
	if (rv != 0 && resp->message != NULL)
		snprintf(detail, sizeof detail, "%s", resp->message);
	struct raftlock_member_list *list = NULL;
	if (rv == 0 && members != NULL &&
	    resp->payload_case == RAFTLOCK__RESPONSE__PAYLOAD_MEMBER_LIST)
		rv = member_list_from_pb(resp->member_list, &list);
	raftlock__envelope__free_unpacked(reply, NULL);
	if (rv != 0)
		return errmsg_set(&c->t, rv, detail, "member %s %llu", what, id);
	if (members != NULL)
		*members = list;
	return 0;
}

static bool address_ok(const char *a)
{
	return a != NULL && a[0] != '\0' && strlen(a) < 64 && strchr(a, ':') != NULL;
}

/* The arguments of an add (c not NULL): 0 or RAFTLOCK_EINVAL. */
static int member_add_check(raftlock_client *c, uint64_t id, const char *raft_address,
			    const char *client_address)
{
	if (id == 0 || id > RAFTLOCK_MEMBER_ID_MAX || !address_ok(raft_address) ||
	    !address_ok(client_address))
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, NULL,
				  "member add: an id of 1..%lld and two HOST:PORT addresses",
				  (long long)RAFTLOCK_MEMBER_ID_MAX);
	return 0;
}

RAFTLOCK_API int raftlock_member_add(raftlock_client *c, uint64_t id, const char *raft_address,
				     const char *client_address)
{
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	int rv = member_add_check(c, id, raft_address, client_address);
	if (rv != 0)
		return rv;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__MemberAddRequest req = RAFTLOCK__MEMBER_ADD_REQUEST__INIT;
	Raftlock__MemberAdd m = RAFTLOCK__MEMBER_ADD__INIT;
	m.id = id;
	m.raft_address = (char *)raft_address;
	m.client_address = (char *)client_address;
	req.member = &m;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_MEMBER_ADD;
	env.member_add = &req;
	return member_call(c, &env, "add", (unsigned long long)id, NULL);
}

/* REMOVE and PROMOTE: a request naming one member. */
static int member_id_call(raftlock_client *c, uint64_t id, bool remove)
{
	const char *what = remove ? "remove" : "promote";
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	if (id == 0)
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, NULL, "member %s: id 0", what);
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__MemberRemoveRequest rm = RAFTLOCK__MEMBER_REMOVE_REQUEST__INIT;
	Raftlock__MemberPromoteRequest pr = RAFTLOCK__MEMBER_PROMOTE_REQUEST__INIT;
	rm.id = pr.id = id;
	if (remove) {
		env.body_case = RAFTLOCK__ENVELOPE__BODY_MEMBER_REMOVE;
		env.member_remove = &rm;
	} else {
		env.body_case = RAFTLOCK__ENVELOPE__BODY_MEMBER_PROMOTE;
		env.member_promote = &pr;
	}
	return member_call(c, &env, what, (unsigned long long)id, NULL);
}

RAFTLOCK_API int raftlock_member_remove(raftlock_client *c, uint64_t id)
{
	return member_id_call(c, id, true);
}

RAFTLOCK_API int raftlock_member_promote(raftlock_client *c, uint64_t id)
{
	return member_id_call(c, id, false);
}

/* Whether the leader would take new_id for an add once old_id is removed
 * (as far as its member list says): 0, RAFTLOCK_EINVAL, or the list's
 * error. With old_id gone already, a replace that ran before goes on: its
 * removal and its add are both safe to send again. */
static int member_replace_check(raftlock_client *c, uint64_t old_id, uint64_t new_id)
{
	struct raftlock_member_list *list = NULL;
	int rv = raftlock_member_list(c, &list);
	if (rv != 0)
		return rv;
	bool old_there = false, new_there = false;
	for (size_t i = 0; i < list->n_members; i++) {
		old_there |= list->members[i].id == old_id;
		new_there |= list->members[i].id == new_id;
	}
	/* the removal raises the highest id used to old_id */
	uint64_t used = list->max_member_id > old_id ? list->max_member_id : old_id;
	if (old_there && new_there)
		rv = errmsg_set(&c->t, RAFTLOCK_EINVAL, NULL,
				"member replace: %llu is a member already",
				(unsigned long long)new_id);
	else if (old_there && new_id <= used)
		rv = errmsg_set(&c->t, RAFTLOCK_EINVAL, NULL,
				"member replace: id %llu was used before (ids are never reused): "
				"pick one above %llu",
				(unsigned long long)new_id, (unsigned long long)used);
	raftlock_member_list_free(list);
	return rv;
}

RAFTLOCK_API int raftlock_member_replace(raftlock_client *c, uint64_t old_id, uint64_t new_id,
					 const char *raft_address, const char *client_address)
{
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	if (old_id == new_id)
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, NULL,
				  "member replace: the new member needs a new id (ids are never "
				  "reused)");
	/* Checked before the old member goes: a call refused for its own
	 * arguments changes nothing. */
	int rv = member_add_check(c, new_id, raft_address, client_address);
	if (rv == 0)
		rv = member_replace_check(c, old_id, new_id);
	if (rv == 0)
		rv = raftlock_member_remove(c, old_id);
	if (rv != 0)
		return rv;
	return raftlock_member_add(c, new_id, raft_address, client_address);
}

RAFTLOCK_API int raftlock_member_join(raftlock_client *c, uint64_t id, uint64_t incarnation,
				      const char *cluster)
{
	return raftlock_member_join_list(c, id, incarnation, cluster, NULL);
}

RAFTLOCK_API int raftlock_member_join_list(raftlock_client *c, uint64_t id, uint64_t incarnation,
					   const char *cluster,
					   struct raftlock_member_list **members)
{
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	if (cluster == NULL)
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, "cluster is NULL", "member join %llu",
				  (unsigned long long)id);
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__MemberJoinRequest req = RAFTLOCK__MEMBER_JOIN_REQUEST__INIT;
	req.id = id;
	req.incarnation = incarnation;
	req.cluster = (char *)cluster;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_MEMBER_JOIN;
	env.member_join = &req;
	return member_call(c, &env, "join", (unsigned long long)id, members);
}

RAFTLOCK_API void raftlock_member_list_free(struct raftlock_member_list *list)
{
	if (list == NULL)
		return;
	for (size_t i = 0; i < list->n_members; i++) {
		free(list->members[i].raft_address);
		free(list->members[i].client_address);
		free(list->members[i].role);
	}
	free(list->members);
	free(list);
}

RAFTLOCK_API int raftlock_member_list(raftlock_client *c, struct raftlock_member_list **out)
{
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	if (out == NULL)
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, "out is NULL", "member list");
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__MemberListRequest req = RAFTLOCK__MEMBER_LIST_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_MEMBER_LIST;
	env.member_list = &req;
	Raftlock__Envelope *reply;
	int rv = introspect_call(c, &env, RAFTLOCK__RESPONSE__PAYLOAD_MEMBER_LIST, &reply);
	if (rv != 0)
		return errmsg_set(&c->t, rv, NULL, "member list");
	rv = member_list_from_pb(reply->response->member_list, out);
	raftlock__envelope__free_unpacked(reply, NULL);
	if (rv != 0)
		return errmsg_set(&c->t, rv, NULL, "member list");
	return 0;
}
