/* auth.c: see auth.h. */
#include "auth.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "line_file.h"
#include "log.h"
#include "member_cn.h"
#include "raftlock.h"

static bool is_root(const struct auth_view *v, const char *identity)
{
	return v->root != NULL && v->root[0] != '\0' && strcmp(identity, v->root) == 0;
}

uint32_t auth_perms(const struct auth_view *v, const char *identity, const char *name)
{
	if (identity == NULL || identity[0] == '\0')
		return 0;
	if (is_root(v, identity))
		return AUTH_ALL;
	uint32_t perms = store_acl_perms(v->store, v->txn, identity, name);
	if (strcmp(identity, AUTH_ANYONE) != 0)
		perms |= store_acl_perms(v->store, v->txn, AUTH_ANYONE, name);
	return perms & AUTH_ALL;
}

bool auth_allows(const struct auth_view *v, const char *identity, uint32_t perm, const char *name)
{
	return perm != 0 && (auth_perms(v, identity, name) & perm) == perm;
}

/* Gathering the ranges of auth_ranges(). */
struct ranges_walk {
	struct auth_ranges *out;
	size_t cap;
	uint32_t perm;
	const char *within;
	size_t within_len;
};

static void ranges_add(struct ranges_walk *w, const char *prefix, size_t len)
{
	char *copy = strndup(prefix, len);
	if (copy == NULL || grow(&w->out->v, &w->cap, w->out->n + 1, 8, sizeof *w->out->v) != 0)
		log_fatal("out of memory");
	w->out->v[w->out->n++] = copy;
}

/* A rule of the identity (or of "*"): the names both it and `within`
 * cover start with the longer of the two prefixes, if one starts the
 * other; else there are none. */
static int ranges_visit(void *arg, const char *prefix, size_t len, uint32_t perms)
{
	struct ranges_walk *w = arg;
	if ((perms & w->perm) != w->perm)
		return 0;
	if (len >= w->within_len && memcmp(prefix, w->within, w->within_len) == 0)
		ranges_add(w, prefix, len);
	else if (len < w->within_len && memcmp(prefix, w->within, len) == 0)
		ranges_add(w, w->within, w->within_len);
	return 0;
}

static int ranges_order(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void auth_ranges(const struct auth_view *v, const char *identity, uint32_t perm, const char *within,
		 struct auth_ranges *out)
{
	struct ranges_walk w = {out, 0, perm, within, strlen(within)};
	out->v = NULL;
	out->n = 0;
	if (identity == NULL || identity[0] == '\0' || perm == 0)
		return;
	if (is_root(v, identity)) {
		ranges_add(&w, within, w.within_len);
		return;
	}
	store_scan_acls_of(v->store, v->txn, identity, ranges_visit, &w);
	if (strcmp(identity, AUTH_ANYONE) != 0)
		store_scan_acls_of(v->store, v->txn, AUTH_ANYONE, ranges_visit, &w);
	if (out->n > 1)
		qsort(out->v, out->n, sizeof *out->v, ranges_order);
	/* In name order, the prefixes a kept one starts follow it at once. */
	size_t kept = 0;
	for (size_t i = 0; i < out->n; i++) {
		const char *p = out->v[i];
		if (kept > 0 && strncmp(p, out->v[kept - 1], strlen(out->v[kept - 1])) == 0)
			free(out->v[i]);
		else
			out->v[kept++] = out->v[i];
	}
	out->n = kept;
}

void auth_ranges_free(struct auth_ranges *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i]);
	free(r->v);
	r->v = NULL;
	r->n = 0;
}

const char *auth_perm_name(uint32_t perm)
{
	switch (perm) {
	case AUTH_LOCK: return "lock";
	case AUTH_READ: return "read";
	case AUTH_ADMIN: return "admin";
	case 0: return "none";
	default: return "several";
	}
}

void auth_denied(char *buf, size_t len, const char *identity, uint32_t perm, const char *name)
{
	if (identity == NULL || identity[0] == '\0') {
		snprintf(buf, len,
			 "not authenticated: authenticate first (a token or a client "
			 "certificate)");
		return;
	}
	if (name[0] == '\0')
		snprintf(buf, len, "identity '%s' has no '%s' on every name", identity,
			 auth_perm_name(perm));
	else
		snprintf(buf, len, "identity '%s' has no '%s' on '%s'", identity,
			 auth_perm_name(perm), name);
}

/* Whether session id (if it exists) belongs to identity; *exists says
 * whether it does. */
static bool session_of(const struct auth_view *v, uint64_t id, const char *identity, bool *exists)
{
	Raftlock__SessionRecord *rec = store_get_session(v->store, v->txn, id);
	*exists = rec != NULL;
	bool mine = rec != NULL && strcmp(rec->identity, identity) == 0;
	if (rec != NULL)
		raftlock__session_record__free_unpacked(rec, NULL);
	return mine;
}

static int need(const struct auth_view *v, const char *identity, uint32_t perm, const char *name,
		char *msg, size_t len)
{
	if (auth_allows(v, identity, perm, name))
		return 0;
	auth_denied(msg, len, identity, perm, name);
	return RAFTLOCK_EPERM;
}

/* A lock request of session: the session's own identity, and lock. */
/* A request of session: only its opener's identity may send it (a session
 * that does not exist passes: apply answers ESESSION). */
static int need_own_session(const struct auth_view *v, const char *identity, uint64_t session,
			    char *msg, size_t len)
{
	bool exists;
	if (!session_of(v, session, identity, &exists) && exists) {
		snprintf(msg, len, "session %llu belongs to another identity than '%s'",
			 (unsigned long long)session, identity);
		return RAFTLOCK_EPERM;
	}
	return 0;
}

static int need_lock(const struct auth_view *v, const char *identity, uint64_t session,
		     const char *name, char *msg, size_t len)
{
	int rv = need_own_session(v, identity, session, msg, len);
	return rv != 0 ? rv : need(v, identity, AUTH_LOCK, name, msg, len);
}

/* A join claims member id's place in the cluster: whoever may send it
 * decides which node takes that place (and keeps the real one out). */
static int need_member(const struct auth_view *v, const char *identity, uint64_t id, char *msg,
		       size_t len)
{
	char own[MEMBER_CN_SIZE];
	member_cn(id, own);
	bool known = identity != NULL && identity[0] != '\0';
	if (known && (strcmp(identity, own) == 0 || auth_allows(v, identity, AUTH_ADMIN, "")))
		return 0;
	char who[RAFTLOCK_NAME_MAX + 32] = "this connection has no identity";
	if (known)
		snprintf(who, sizeof who, "'%s' is neither", identity);
	snprintf(msg, len,
		 "joining as member %llu takes identity '%s' (the node's client certificate "
		 "or join-token-file) or 'admin' on every name: %s",
		 (unsigned long long)id, own, who);
	return RAFTLOCK_EPERM;
}

int auth_check_request(const struct auth_view *v, const char *identity,
		       const Raftlock__Envelope *env, uint64_t session, char *msg, size_t len)
{
	if (env->body_case == RAFTLOCK__ENVELOPE__BODY_MEMBER_JOIN)
		return need_member(v, identity, env->member_join->id, msg, len);
	if (identity == NULL || identity[0] == '\0') {
		auth_denied(msg, len, identity, 0, "");
		return RAFTLOCK_EPERM;
	}
	switch (env->body_case) {
	case RAFTLOCK__ENVELOPE__BODY_ACQUIRE:
		return need_lock(v, identity, session, env->acquire->acquire->name, msg, len);
	/* Letting go needs no rule: a rule deleted while its identity holds
	 * or waits must not keep the lock held (nor the library's release of
	 * a late grant refused) until the session ends. It only ever drops
	 * what the identity's own session has. */
	case RAFTLOCK__ENVELOPE__BODY_RELEASE:
	case RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT:
		return need_own_session(v, identity, session, msg, len);
	case RAFTLOCK__ENVELOPE__BODY_MULTI_ACQUIRE: {
		/* lock on every name of the set */
		const Raftlock__MultiAcquire *m = env->multi_acquire->acquire;
		for (size_t i = 0; i < m->n_items; i++) {
			int rv = need_lock(v, identity, session, m->items[i]->name, msg, len);
			if (rv != 0)
				return rv;
		}
		return 0;
	}
	case RAFTLOCK__ENVELOPE__BODY_PROCLAIM:
		return need_lock(v, identity, session, env->proclaim->proclaim->name, msg, len);
	case RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION: {
		bool exists;
		if (session_of(v, session, identity, &exists) || !exists ||
		    auth_allows(v, identity, AUTH_ADMIN, ""))
			return 0;
		snprintf(msg, len,
			 "session %llu belongs to another identity: closing it takes 'admin' "
			 "on every name, which '%s' has not",
			 (unsigned long long)session, identity);
		return RAFTLOCK_EPERM;
	}
	case RAFTLOCK__ENVELOPE__BODY_GET_LOCK:
		return need(v, identity, AUTH_READ, env->get_lock->name, msg, len);
	case RAFTLOCK__ENVELOPE__BODY_CHECK_TOKEN:
		return need(v, identity, AUTH_READ, env->check_token->name, msg, len);
	case RAFTLOCK__ENVELOPE__BODY_WATCH:
		return need(v, identity, AUTH_READ, env->watch->prefix, msg, len);
	case RAFTLOCK__ENVELOPE__BODY_WATCH_CANCEL: return 0; /* its own watches only */
	case RAFTLOCK__ENVELOPE__BODY_ACL_SET:
		return need(v, identity, AUTH_ADMIN, env->acl_set->rule->prefix, msg, len);
	case RAFTLOCK__ENVELOPE__BODY_ACL_DELETE:
		return need(v, identity, AUTH_ADMIN, env->acl_delete->rule->prefix, msg, len);
	case RAFTLOCK__ENVELOPE__BODY_REVOKE:
		return need(v, identity, AUTH_ADMIN, env->revoke->name, msg, len);
	case RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION:
	case RAFTLOCK__ENVELOPE__BODY_KEEPALIVE:
	case RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS:
	case RAFTLOCK__ENVELOPE__BODY_LIST_SESSIONS:
	case RAFTLOCK__ENVELOPE__BODY_ACL_LIST:
	/* The member list says no more than STATUS. */
	case RAFTLOCK__ENVELOPE__BODY_MEMBER_LIST: return 0;
	default:
		/* Requests this list does not name (membership and snapshot
		 * commands, as they come) are for admins of every name. */
		return need(v, identity, AUTH_ADMIN, "", msg, len);
	}
}

bool auth_sees_session(const struct auth_view *v, const char *identity,
		       const Raftlock__SessionRecord *rec)
{
	return (identity != NULL && identity[0] != '\0' && strcmp(rec->identity, identity) == 0) ||
	       auth_allows(v, identity, AUTH_READ, "");
}

/* ----------------------------------------------------------- tokens -- */

static void sha256(const void *data, size_t len, uint8_t out[AUTH_DIGEST_SIZE])
{
	unsigned n = AUTH_DIGEST_SIZE;
	if (EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) != 1)
		memset(out, 0, AUTH_DIGEST_SIZE); /* matches no digest of a file */
}

void auth_digest_hex(const void *token, size_t len, char hex[2 * AUTH_DIGEST_SIZE + 1])
{
	uint8_t d[AUTH_DIGEST_SIZE];
	sha256(token, len, d);
	for (int i = 0; i < AUTH_DIGEST_SIZE; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* One line of an auth-tokens file (a line_file_cb). */
static int parse_line(void *arg, char *line, unsigned lineno, char *err, size_t errlen)
{
	struct auth_tokens *t = arg;
	char *p = line;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '\0' || *p == '#' || *p == '\n' || *p == '\r')
		return 0;
	char *name = p;
	while (*p != '\0' && !isspace((unsigned char)*p))
		p++;
	size_t nlen = (size_t)(p - name);
	while (*p == ' ' || *p == '\t')
		p++;
	char *hex = p;
	while (*p != '\0' && !isspace((unsigned char)*p))
		p++;
	size_t hlen = (size_t)(p - hex);
	while (*p != '\0' && isspace((unsigned char)*p))
		p++;
	if (hlen != 2 * AUTH_DIGEST_SIZE || *p != '\0') {
		snprintf(err, errlen, "expected NAME and the 64 hex digits of the token's SHA-256");
		return RAFTLOCK_ECONFIG;
	}
	if (nlen > RAFTLOCK_NAME_MAX || (nlen == 1 && name[0] == '*')) {
		snprintf(err, errlen, "a name is 1 to %d bytes and not '*'", RAFTLOCK_NAME_MAX);
		return RAFTLOCK_ECONFIG;
	}
	name[nlen] = '\0';
	struct auth_token tok = {.line = lineno};
	for (int i = 0; i < AUTH_DIGEST_SIZE; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			snprintf(err, errlen, "the digest is not hexadecimal");
			return RAFTLOCK_ECONFIG;
		}
		tok.digest[i] = (uint8_t)(hi << 4 | lo);
	}
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->v[i].name, name) == 0) {
			snprintf(err, errlen, "'%s' appears twice, on lines %u and %u", name,
				 t->v[i].line, lineno);
			return RAFTLOCK_ECONFIG;
		}
	tok.name = strdup(name);
	struct auth_token *v = realloc(t->v, (t->n + 1) * sizeof *v);
	if (tok.name == NULL || v == NULL) {
		free(tok.name);
		if (v != NULL)
			t->v = v;
		snprintf(err, errlen, "out of memory");
		return RAFTLOCK_ECONFIG;
	}
	t->v = v;
	t->v[t->n++] = tok;
	return 0;
}

int auth_tokens_load(struct auth_tokens *t, const char *path, char *err, size_t errlen)
{
	t->v = NULL;
	t->n = 0;
	int rv = line_file_read(path, parse_line, t, err, errlen);
	if (rv != 0)
		auth_tokens_free(t);
	return rv;
}

void auth_tokens_free(struct auth_tokens *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].name);
	free(t->v);
	t->v = NULL;
	t->n = 0;
}

const char *auth_tokens_check(const struct auth_tokens *t, const void *token, size_t len)
{
	uint8_t d[AUTH_DIGEST_SIZE];
	const char *found = NULL;
	if (len == 0)
		return NULL;
	sha256(token, len, d);
	for (size_t i = 0; i < t->n; i++)
		if (CRYPTO_memcmp(d, t->v[i].digest, AUTH_DIGEST_SIZE) == 0)
			found = t->v[i].name;
	return found;
}
