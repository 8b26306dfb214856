/* acl.c: the access-rule calls of raftlock.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "codec.h"
#include "errmsg.h"
#include "introspect.h"

#define ACL_ALL (RAFTLOCK_ACL_LOCK | RAFTLOCK_ACL_READ | RAFTLOCK_ACL_ADMIN)

static const struct {
	const char *name;
	uint32_t bit;
} acl_perm_names[] = {
	{"lock", RAFTLOCK_ACL_LOCK},
	{"read", RAFTLOCK_ACL_READ},
	{"admin", RAFTLOCK_ACL_ADMIN},
};

RAFTLOCK_API int raftlock_acl_perms_parse(const char *text, uint32_t *perms)
{
	if (text == NULL || perms == NULL)
		return RAFTLOCK_EINVAL;
	uint32_t p = 0;
	const char *s = text;
	while (*s != '\0') {
		size_t n = strcspn(s, ",");
		bool known = false;
		if (n == 3 && strncmp(s, "all", 3) == 0) {
			p |= ACL_ALL;
			known = true;
		}
		for (size_t i = 0; i < 3 && !known; i++)
			if (strlen(acl_perm_names[i].name) == n &&
			    strncmp(s, acl_perm_names[i].name, n) == 0) {
				p |= acl_perm_names[i].bit;
				known = true;
			}
		if (!known)
			return RAFTLOCK_EINVAL;
		s += n;
		if (*s == ',' && *++s == '\0')
			return RAFTLOCK_EINVAL; /* a trailing comma */
	}
	if (p == 0)
		return RAFTLOCK_EINVAL;
	*perms = p;
	return 0;
}

RAFTLOCK_API const char *raftlock_acl_perms_format(uint32_t perms, char *buf, size_t len)
{
	size_t at = 0;
	if (len == 0)
		return buf;
	buf[0] = '\0';
	for (size_t i = 0; i < 3; i++) {
		if (!(perms & acl_perm_names[i].bit))
			continue;
		int n = snprintf(buf + at, len - at, "%s%s", at ? "," : "", acl_perm_names[i].name);
		if (n < 0 || (size_t)n >= len - at)
			break;
		at += (size_t)n;
	}
	if (at == 0)
		snprintf(buf, len, "none");
	return buf;
}

/* Sends a rule change through the leader: 0 once applied, or the error. */
static int acl_change(raftlock_client *c, Raftlock__Envelope *env)
{
	Raftlock__Envelope *reply;
	int rv = introspect_call(c, env, RAFTLOCK__RESPONSE__PAYLOAD_RESULT, &reply);
	if (rv != 0)
		return rv;
	rv = reply->response->result->status;
	raftlock__envelope__free_unpacked(reply, NULL);
	return rv;
}

static int acl_check(raftlock_client *c, const char *identity, const char *prefix)
{
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	int rv = codec_check_rule(identity, prefix);
	if (rv != 0)
		return errmsg_set(&c->t, rv, NULL,
				  "access rule: identity 1..%d bytes, prefix 0..%d, both together "
				  "at most %d",
				  RAFTLOCK_NAME_MAX, RAFTLOCK_NAME_MAX, CODEC_RULE_KEY_MAX - 1);
	return 0;
}

RAFTLOCK_API int raftlock_acl_set(raftlock_client *c, const char *identity, const char *prefix,
				  uint32_t perms)
{
	int rv = acl_check(c, identity, prefix);
	if (rv != 0)
		return rv;
	if (perms == 0 || (perms & ~(uint32_t)ACL_ALL) != 0)
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, NULL,
				  "set rule for '%s' on '%s': permissions %#x", identity, prefix,
				  perms);
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__AclSetRequest req = RAFTLOCK__ACL_SET_REQUEST__INIT;
	Raftlock__AclSet rule = RAFTLOCK__ACL_SET__INIT;
	rule.identity = (char *)identity;
	rule.prefix = (char *)prefix;
	rule.perms = perms;
	req.rule = &rule;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_ACL_SET;
	env.acl_set = &req;
	rv = acl_change(c, &env);
	if (rv != 0)
		return errmsg_set(&c->t, rv, NULL, "set rule for '%s' on '%s'", identity, prefix);
	return 0;
}

RAFTLOCK_API int raftlock_acl_delete(raftlock_client *c, const char *identity, const char *prefix)
{
	int rv = acl_check(c, identity, prefix);
	if (rv != 0)
		return rv;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__AclDeleteRequest req = RAFTLOCK__ACL_DELETE_REQUEST__INIT;
	Raftlock__AclDelete rule = RAFTLOCK__ACL_DELETE__INIT;
	rule.identity = (char *)identity;
	rule.prefix = (char *)prefix;
	req.rule = &rule;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_ACL_DELETE;
	env.acl_delete = &req;
	rv = acl_change(c, &env);
	if (rv != 0)
		return errmsg_set(&c->t, rv, NULL, "delete rule of '%s' on '%s'", identity, prefix);
	return 0;
}

RAFTLOCK_API void raftlock_acl_list_free(struct raftlock_acl_list *list)
{
	if (list == NULL)
		return;
	for (size_t i = 0; i < list->n_rules; i++) {
		free(list->rules[i].identity);
		free(list->rules[i].prefix);
	}
	free(list->rules);
	free(list);
}

static struct raftlock_acl_list *acl_list_from_pb(const Raftlock__AclList *al)
{
	struct raftlock_acl_list *list = calloc(1, sizeof *list);
	if (list == NULL)
		return NULL;
	list->more = al->more;
	if (al->n_rules > 0 && (list->rules = calloc(al->n_rules, sizeof *list->rules)) == NULL)
		goto err;
	for (size_t i = 0; i < al->n_rules; i++) {
		struct raftlock_acl_rule *r = &list->rules[i];
		list->n_rules++; /* freed by the list even when half filled */
		r->identity = strdup(al->rules[i]->identity);
		r->prefix = strdup(al->rules[i]->prefix);
		r->perms = al->rules[i]->perms;
		if (r->identity == NULL || r->prefix == NULL)
			goto err;
	}
	return list;
err:
	raftlock_acl_list_free(list);
	return NULL;
}

RAFTLOCK_API int raftlock_acl_list(raftlock_client *c, const char *after_identity,
				   const char *after_prefix, uint32_t limit, bool stale,
				   struct raftlock_acl_list **out)
{
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	if (out == NULL)
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, "out is NULL", "list access rules");
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__AclListRequest req = RAFTLOCK__ACL_LIST_REQUEST__INIT;
	Raftlock__Envelope *reply = NULL;
	req.after_identity = (char *)(after_identity ? after_identity : "");
	req.after_prefix = (char *)(after_prefix ? after_prefix : "");
	req.limit = limit;
	req.stale = stale;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_ACL_LIST;
	env.acl_list = &req;
	int rv = introspect_call(c, &env, RAFTLOCK__RESPONSE__PAYLOAD_ACLS, &reply);
	if (rv != 0)
		return errmsg_set(&c->t, rv, NULL, "list access rules");
	struct raftlock_acl_list *list = acl_list_from_pb(reply->response->acls);
	raftlock__envelope__free_unpacked(reply, NULL);
	if (list == NULL)
		return errmsg_set(&c->t, RAFTLOCK_ENOMEM, NULL, "list access rules");
	*out = list;
	return 0;
}
