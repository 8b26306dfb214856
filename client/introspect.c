/* introspect.c: see introspect.h. */
#include "introspect.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "codec.h"
#include "errmsg.h"

char *introspect_dup(const char *s, bool *failed)
{
	char *d = strdup(s != NULL ? s : "");
	if (d == NULL)
		*failed = true;
	return d;
}

static int call(raftlock_client *c, Raftlock__Envelope *env, Raftlock__Response__PayloadCase want,
		Raftlock__Envelope **reply, bool once)
{
	Raftlock__Envelope *r = NULL;
	pthread_mutex_lock(&c->t.mu);
	int rv = once ? transport_call_once(&c->t, env, 0, &r) : transport_call(&c->t, env, 0, &r);
	pthread_mutex_unlock(&c->t.mu);
	if (rv != 0)
		return rv;
	rv = r->response->status;
	if (rv == 0 && r->response->payload_case != want)
		rv = RAFTLOCK_EPROTO;
	else if (rv != 0 && r->response->message[0] != '\0')
		errmsg_note(rv, r->response->message); /* the node's reason */
	if (rv != 0) {
		raftlock__envelope__free_unpacked(r, NULL);
		return rv;
	}
	*reply = r;
	return 0;
}

int introspect_call(raftlock_client *c, Raftlock__Envelope *env,
		    Raftlock__Response__PayloadCase want, Raftlock__Envelope **reply)
{
	return call(c, env, want, reply, false);
}

int introspect_call_once(raftlock_client *c, Raftlock__Envelope *env,
			 Raftlock__Response__PayloadCase want, Raftlock__Envelope **reply)
{
	return call(c, env, want, reply, true);
}

/* -------------------------------------------------------------- status -- */

RAFTLOCK_API void raftlock_status_free(struct raftlock_status *st)
{
	if (st == NULL)
		return;
	free(st->role);
	free(st->leader_address);
	free(st->cluster);
	for (size_t i = 0; i < st->n_members; i++) {
		free(st->members[i].raft_address);
		free(st->members[i].client_address);
	}
	free(st->members);
	free(st);
}

static struct raftlock_status *status_from_pb(const Raftlock__StatusInfo *si)
{
	bool failed = false;
	struct raftlock_status *st = calloc(1, sizeof *st);
	if (st == NULL)
		return NULL;
	st->node_id = si->node_id;
	st->role = introspect_dup(si->role, &failed);
	st->ready = si->ready;
	st->term = si->term;
	st->commit_index = si->commit_index;
	st->applied_index = si->applied_index;
	st->last_index = si->last_index;
	st->leader_id = si->leader_id;
	st->leader_address = introspect_dup(si->leader_address, &failed);
	st->cluster_time = si->cluster_time;
	st->next_token = si->next_token;
	st->cluster_id = si->cluster_id;
	st->feature_level = si->feature_level;
	st->cluster_feature_level = si->cluster_feature_level;
	st->sessions = si->sessions;
	st->locks = si->locks;
	st->cluster = introspect_dup(si->cluster, &failed);
	if (si->n_members > 0) {
		st->members = calloc(si->n_members, sizeof *st->members);
		failed |= st->members == NULL;
	}
	for (size_t i = 0; st->members != NULL && i < si->n_members; i++) {
		const Raftlock__Member *m = si->members[i];
		st->members[i].id = m->id;
		st->members[i].raft_address = introspect_dup(m->raft_address, &failed);
		st->members[i].client_address = introspect_dup(m->client_address, &failed);
		st->n_members++;
	}
	if (failed) {
		raftlock_status_free(st);
		return NULL;
	}
	return st;
}

/* Asks a on a connection of its own; why gets the reason of RAFTLOCK_ETLS
 * or of the node's refusal. */
/* Asks a for its status within timeout_ms (its connect within the
 * client's connect timeout). */
static int status_ask(raftlock_client *c, const struct conn_addr *a, unsigned timeout_ms,
		      struct raftlock_status **out, char *why, size_t why_len)
{
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__StatusRequest req = RAFTLOCK__STATUS_REQUEST__INIT;
	Raftlock__Envelope *reply = NULL;
	uint8_t *frame;
	size_t n;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_STATUS;
	env.status = &req;
	env.id = 1; /* its own connection: no other request to tell apart */
	int rv = codec_frame_envelope(&env, &frame, &n);
	if (rv != 0)
		return rv;
	pthread_mutex_lock(&c->t.mu);
	resolve_fn resolver = c->t.resolver;
	pthread_mutex_unlock(&c->t.mu);
	/* c->t.tls is set at open and never changes */
	rv = conn_exchange(a, c->t.tls.ctx != NULL ? &c->t.tls : NULL, resolver, frame, n, env.id,
			   c->t.connect_timeout_ms, timeout_ms, &reply, why, why_len);
	free(frame);
	if (rv != 0)
		return rv;
	const Raftlock__Response *resp = reply->response;
	rv = resp->status;
	if (rv != 0 && resp->message[0] != '\0')
		snprintf(why, why_len, "%s: %s", a->text, resp->message);
	if (rv == 0 && resp->payload_case != RAFTLOCK__RESPONSE__PAYLOAD_STATUS_INFO)
		rv = RAFTLOCK_EPROTO;
	if (rv == 0) {
		*out = status_from_pb(resp->status_info);
		if (*out == NULL)
			rv = RAFTLOCK_ENOMEM;
	}
	raftlock__envelope__free_unpacked(reply, NULL);
	return rv;
}

RAFTLOCK_API int raftlock_status_get(raftlock_client *c, const char *address,
				     struct raftlock_status **out)
{
	struct raftlock_status *st = NULL;
	char why[CONN_WHY_MAX] = "";
	int rv;
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	if (out == NULL)
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, "out is NULL", "status");
	if (address != NULL) {
		struct conn_addr a;
		rv = conn_addr_parse(address, &a);
		if (rv != 0)
			return errmsg_set(&c->t, rv, "expected host:port", "status of '%s'",
					  address);
		rv = status_ask(c, &a, c->t.request_timeout_ms, &st, why, sizeof why);
		conn_addr_free(&a);
		if (rv != 0)
			return errmsg_set(&c->t, rv, why, "status of %s", address);
	} else {
		/* One request timeout for them all: each unreachable address
		 * costs at most the connect timeout. */
		rv = RAFTLOCK_ECONNECTION;
		uint64_t deadline = clock_mono_ms() + c->t.request_timeout_ms;
		size_t i = 0;
		while (i < c->t.n_addrs && rv != 0) {
			uint64_t now = clock_mono_ms();
			if (i > 0 && now >= deadline)
				break;
			rv = status_ask(c, &c->t.addrs[i++], (unsigned)(deadline - now), &st, why,
					sizeof why);
		}
		if (rv != 0)
			return errmsg_set(&c->t, rv, why, "status of %s", c->t.addrs[i - 1].text);
	}
	*out = st;
	return 0;
}

/* --------------------------------------------------------------- locks -- */

static void owner_from_pb(struct raftlock_owner *dst, const Raftlock__Owner *o, bool *failed)
{
	dst->client_name = introspect_dup(o ? o->client_name : NULL, failed);
	dst->host = introspect_dup(o ? o->host : NULL, failed);
	dst->pid = o ? o->pid : 0;
}

static void owner_clear(struct raftlock_owner *o)
{
	free(o->client_name);
	free(o->host);
}

static void lock_info_clear(struct raftlock_lock_info *info)
{
	free(info->name);
	for (size_t i = 0; i < info->n_holders; i++)
		owner_clear(&info->holders[i].who);
	free(info->holders);
	for (size_t i = 0; i < info->n_waiters; i++)
		owner_clear(&info->waiters[i].who);
	free(info->waiters);
}

static void holder_from_pb(struct raftlock_holder *h, const Raftlock__HolderInfo *hi, bool *failed)
{
	const Raftlock__Holder *src = hi->holder;
	if (src != NULL) {
		h->session = src->session;
		h->owner = src->owner;
		h->mode =
			src->mode == RAFTLOCK__MODE__SHARED ? RAFTLOCK_SHARED : RAFTLOCK_EXCLUSIVE;
		h->permits = src->permits;
		h->count = src->count;
		h->token = src->token;
		h->granted_index = src->granted_index;
		h->granted_time = src->granted_time;
	}
	owner_from_pb(&h->who, hi->owner, failed);
}

static void waiter_from_pb(struct raftlock_waiter *w, const Raftlock__WaiterInfo *wi, bool *failed)
{
	const Raftlock__Waiter *src = wi->waiter;
	if (src != NULL) {
		w->session = src->session;
		w->owner = src->owner;
		w->mode =
			src->mode == RAFTLOCK__MODE__SHARED ? RAFTLOCK_SHARED : RAFTLOCK_EXCLUSIVE;
		w->permits = src->permits;
		w->queued_time = src->queued_time;
	}
	owner_from_pb(&w->who, wi->owner, failed);
}

/* Fills info from li; on failure info is cleared and false returned. */
static bool lock_info_from_pb(struct raftlock_lock_info *info, const Raftlock__LockInfo *li)
{
	bool failed = false;
	memset(info, 0, sizeof *info);
	info->name = introspect_dup(li->name, &failed);
	info->kind = li->kind ? (enum raftlock_kind)li->kind : RAFTLOCK_MUTEX;
	info->limit = li->limit;
	info->delay_until = li->delay_until;
	info->lock_delay_ms = li->lock_delay_ms;
	info->max_hold_ms = li->max_hold_ms;
	info->revoke_grace_ms = li->revoke_grace_ms;
	info->cluster_time = li->cluster_time;
	if (li->n_holders > 0 &&
	    (info->holders = calloc(li->n_holders, sizeof *info->holders)) == NULL)
		failed = true;
	for (size_t i = 0; info->holders != NULL && i < li->n_holders; i++) {
		holder_from_pb(&info->holders[i], li->holders[i], &failed);
		info->n_holders++;
	}
	if (li->n_waiters > 0 &&
	    (info->waiters = calloc(li->n_waiters, sizeof *info->waiters)) == NULL)
		failed = true;
	for (size_t i = 0; info->waiters != NULL && i < li->n_waiters; i++) {
		waiter_from_pb(&info->waiters[i], li->waiters[i], &failed);
		info->n_waiters++;
	}
	/* a server older than the totals sends 0: its lists are whole */
	info->holders_total =
		li->holders_total > info->n_holders ? li->holders_total : info->n_holders;
	info->waiters_total =
		li->waiters_total > info->n_waiters ? li->waiters_total : info->n_waiters;
	info->holders_after = li->holders_after;
	/* a server older than paging does not say: from the first holder,
	 * fewer listed than there are means more */
	info->holders_more = li->holders_more ||
			     (li->holders_after == 0 && info->holders_total > info->n_holders);
	if (failed)
		lock_info_clear(info);
	return !failed;
}

RAFTLOCK_API void raftlock_lock_info_free(struct raftlock_lock_info *info)
{
	if (info == NULL)
		return;
	lock_info_clear(info);
	free(info);
}

RAFTLOCK_API int raftlock_lock_get_holders(raftlock_client *c, const char *name,
					   uint64_t holders_after, bool stale,
					   struct raftlock_lock_info **out)
{
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	if (out == NULL)
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, "out is NULL", "get lock");
	int rv = codec_check_name(name);
	if (rv != 0)
		return errmsg_set(&c->t, rv, NULL, "get lock: bad name");
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__GetLockRequest req = RAFTLOCK__GET_LOCK_REQUEST__INIT;
	Raftlock__Envelope *reply;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_GET_LOCK;
	env.get_lock = &req;
	req.name = (char *)name;
	req.stale = stale;
	req.holders_after = holders_after;
	rv = introspect_call(c, &env, RAFTLOCK__RESPONSE__PAYLOAD_LOCK, &reply);
	if (rv != 0)
		return errmsg_set(&c->t, rv, NULL, "get lock '%s'", name);
	if (reply->response->lock->holders_after != holders_after) {
		raftlock__envelope__free_unpacked(reply, NULL);
		return errmsg_set(&c->t, RAFTLOCK_ESTATE,
				  "the node that answered lists a lock's holders from the first "
				  "only (a build older than paging them): upgrade every node",
				  "get lock '%s' holders after token %" PRIu64, name,
				  holders_after);
	}
	struct raftlock_lock_info *info = malloc(sizeof *info);
	if (info == NULL || !lock_info_from_pb(info, reply->response->lock)) {
		free(info);
		raftlock__envelope__free_unpacked(reply, NULL);
		return errmsg_set(&c->t, RAFTLOCK_ENOMEM, NULL, "get lock '%s'", name);
	}
	raftlock__envelope__free_unpacked(reply, NULL);
	*out = info;
	return 0;
}

RAFTLOCK_API int raftlock_lock_get(raftlock_client *c, const char *name, bool stale,
				   struct raftlock_lock_info **out)
{
	return raftlock_lock_get_holders(c, name, 0, stale, out);
}

RAFTLOCK_API void raftlock_lock_list_free(struct raftlock_lock_list *list)
{
	if (list == NULL)
		return;
	for (size_t i = 0; i < list->n_locks; i++)
		lock_info_clear(&list->locks[i]);
	free(list->locks);
	free(list);
}

static struct raftlock_lock_list *lock_list_from_pb(const Raftlock__LockList *ll)
{
	struct raftlock_lock_list *list = calloc(1, sizeof *list);
	if (list == NULL)
		return NULL;
	list->more = ll->more;
	if (ll->n_locks > 0 && (list->locks = calloc(ll->n_locks, sizeof *list->locks)) == NULL)
		goto err;
	for (size_t i = 0; i < ll->n_locks; i++) {
		if (!lock_info_from_pb(&list->locks[i], ll->locks[i]))
			goto err;
		list->n_locks++;
	}
	return list;
err:
	raftlock_lock_list_free(list);
	return NULL;
}

RAFTLOCK_API int raftlock_lock_list(raftlock_client *c, const char *prefix, const char *after,
				    uint32_t limit, bool stale, struct raftlock_lock_list **out)
{
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	if (out == NULL)
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, "out is NULL", "list locks");
	prefix = prefix != NULL ? prefix : "";
	after = after != NULL ? after : "";
	if (strlen(prefix) > RAFTLOCK_NAME_MAX || strlen(after) > RAFTLOCK_NAME_MAX)
		return errmsg_set(&c->t, RAFTLOCK_ETOOBIG, NULL, "list locks");
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__ListLocksRequest req = RAFTLOCK__LIST_LOCKS_REQUEST__INIT;
	Raftlock__Envelope *reply;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS;
	env.list_locks = &req;
	req.prefix = (char *)prefix;
	req.after = (char *)after;
	req.limit = limit;
	req.stale = stale;
	int rv = introspect_call(c, &env, RAFTLOCK__RESPONSE__PAYLOAD_LOCKS, &reply);
	if (rv != 0)
		return errmsg_set(&c->t, rv, NULL, "list locks '%s*'", prefix);
	struct raftlock_lock_list *list = lock_list_from_pb(reply->response->locks);
	raftlock__envelope__free_unpacked(reply, NULL);
	if (list == NULL)
		return errmsg_set(&c->t, RAFTLOCK_ENOMEM, NULL, "list locks");
	*out = list;
	return 0;
}

/* ------------------------------------------------------------ sessions -- */

RAFTLOCK_API void raftlock_session_list_free(struct raftlock_session_list *list)
{
	if (list == NULL)
		return;
	for (size_t i = 0; i < list->n_sessions; i++) {
		struct raftlock_session_info *si = &list->sessions[i];
		owner_clear(&si->who);
		for (size_t j = 0; j < si->n_locks; j++)
			free(si->locks[j]);
		free(si->locks);
	}
	free(list->sessions);
	free(list);
}

static bool session_info_from_pb(struct raftlock_session_info *dst,
				 const Raftlock__SessionInfo *src)
{
	bool failed = false;
	dst->id = src->id;
	dst->ttl_ms = src->ttl_ms;
	dst->deadline = src->deadline;
	dst->opened_time = src->opened_time;
	owner_from_pb(&dst->who, src->owner, &failed);
	if (src->n_locks > 0 && (dst->locks = calloc(src->n_locks, sizeof *dst->locks)) == NULL)
		failed = true;
	for (size_t j = 0; dst->locks != NULL && j < src->n_locks; j++) {
		dst->locks[j] = introspect_dup(src->locks[j], &failed);
		dst->n_locks++;
	}
	/* a server older than the total sends 0: its list is whole */
	dst->locks_total = src->locks_total > dst->n_locks ? src->locks_total : dst->n_locks;
	return !failed;
}

static struct raftlock_session_list *session_list_from_pb(const Raftlock__SessionList *sl)
{
	struct raftlock_session_list *list = calloc(1, sizeof *list);
	if (list == NULL)
		return NULL;
	list->more = sl->more;
	list->cluster_time = sl->cluster_time;
	if (sl->n_sessions > 0 &&
	    (list->sessions = calloc(sl->n_sessions, sizeof *list->sessions)) == NULL)
		goto err;
	for (size_t i = 0; i < sl->n_sessions; i++) {
		list->n_sessions++; /* freed by the list even when half filled */
		if (!session_info_from_pb(&list->sessions[i], sl->sessions[i]))
			goto err;
	}
	return list;
err:
	raftlock_session_list_free(list);
	return NULL;
}

RAFTLOCK_API int raftlock_session_list(raftlock_client *c, uint64_t after, uint32_t limit,
				       bool stale, struct raftlock_session_list **out)
{
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	if (out == NULL)
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, "out is NULL", "list sessions");
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__ListSessionsRequest req = RAFTLOCK__LIST_SESSIONS_REQUEST__INIT;
	Raftlock__Envelope *reply;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_LIST_SESSIONS;
	env.list_sessions = &req;
	req.after = after;
	req.limit = limit;
	req.stale = stale;
	int rv = introspect_call(c, &env, RAFTLOCK__RESPONSE__PAYLOAD_SESSIONS, &reply);
	if (rv != 0)
		return errmsg_set(&c->t, rv, NULL, "list sessions");
	struct raftlock_session_list *list = session_list_from_pb(reply->response->sessions);
	raftlock__envelope__free_unpacked(reply, NULL);
	if (list == NULL)
		return errmsg_set(&c->t, RAFTLOCK_ENOMEM, NULL, "list sessions");
	*out = list;
	return 0;
}

/* ------------------------------------------------------------- tokens -- */

RAFTLOCK_API int raftlock_check_token(raftlock_client *c, const char *name, uint64_t token,
				      bool *current)
{
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	if (current == NULL)
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, "current is NULL", "check token");
	int rv = codec_check_name(name);
	if (rv != 0)
		return errmsg_set(&c->t, rv, NULL, "check token: bad lock name");
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__CheckTokenRequest req = RAFTLOCK__CHECK_TOKEN_REQUEST__INIT;
	Raftlock__Envelope *reply;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_CHECK_TOKEN;
	env.check_token = &req;
	req.name = (char *)name;
	req.token = token;
	rv = introspect_call(c, &env, RAFTLOCK__RESPONSE__PAYLOAD_CHECK, &reply);
	if (rv != 0)
		return errmsg_set(&c->t, rv, NULL, "check token %llu of '%s'",
				  (unsigned long long)token, name);
	*current = reply->response->check->current;
	raftlock__envelope__free_unpacked(reply, NULL);
	return 0;
}
