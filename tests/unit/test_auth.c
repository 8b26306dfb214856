/*
 * test_auth.c: the access rules (server/auth.c) read from a state built by
 * the state machine: deny by default, prefixes, the union of an identity's
 * rules with those of "*", the bootstrap admin; ACL_SET and ACL_DELETE
 * applied (replace, delete, refusals that store nothing), the session's
 * identity kept, rules carried by a snapshot; who may claim a member's
 * place (MEMBER_JOIN); the auth-tokens file.
 */
#include <openssl/evp.h>

#include "auth.h"
#include "line_file.h"
#include "test_fsm_harness.h"

/* The permissions of identity on name, as a node decides them now. */
static uint32_t perms_of(struct fx *f, const char *root, const char *identity, const char *name)
{
	MDB_txn *txn = store_begin(&f->store, false);
	struct auth_view v = {.store = &f->store, .txn = txn, .root = root};
	uint32_t p = auth_perms(&v, identity, name);
	bool all = auth_allows(&v, identity, p, name);
	store_abort(txn);
	assert_true(p == 0 || all);
	return p;
}

#define PERMS(f, id, name) perms_of((f), NULL, (id), (name))

static void set_rule(struct fx *f, const char *identity, const char *prefix, uint32_t perms)
{
	Raftlock__Result r = DO(f, ACL_SET, .identity = identity, .prefix = prefix, .perms = perms);
	assert_int_equal(r.status, 0);
}

static void test_deny_by_default(void **state)
{
	struct fx *f = fx_ready(state);
	assert_int_equal(PERMS(f, "alice", "db/x"), 0);
	assert_int_equal(PERMS(f, "alice", ""), 0);
	set_rule(f, "bob", "", AUTH_ALL);
	assert_int_equal(PERMS(f, "alice", "db/x"), 0);
	/* Not authenticated: nothing, whatever the rules of "*". */
	set_rule(f, AUTH_ANYONE, "", AUTH_READ);
	assert_int_equal(PERMS(f, "", "db/x"), 0);
	assert_int_equal(PERMS(f, NULL, "db/x"), 0);
	MDB_txn *txn = store_begin(&f->store, false);
	struct auth_view v = {.store = &f->store, .txn = txn};
	assert_false(auth_allows(&v, "alice", AUTH_LOCK, "db/x"));
	assert_true(auth_allows(&v, "alice", AUTH_READ, "db/x"));
	assert_false(auth_allows(&v, "alice", 0, "db/x")); /* nothing asked: no */
	store_abort(txn);
}

static void test_prefixes(void **state)
{
	struct fx *f = fx_ready(state);
	set_rule(f, "alice", "db/", AUTH_LOCK);
	assert_int_equal(PERMS(f, "alice", "db/x"), AUTH_LOCK);
	assert_int_equal(PERMS(f, "alice", "db/"), AUTH_LOCK);
	assert_int_equal(PERMS(f, "alice", "db/a/b/c"), AUTH_LOCK);
	assert_int_equal(PERMS(f, "alice", "db"), 0);
	assert_int_equal(PERMS(f, "alice", "dbx"), 0);
	assert_int_equal(PERMS(f, "alice", "xdb/"), 0);
	/* An identity that is a prefix of another shares none of its rules. */
	assert_int_equal(PERMS(f, "alic", "db/x"), 0);
	assert_int_equal(PERMS(f, "alice2", "db/x"), 0);
	/* Prefix "" starts every name. */
	set_rule(f, "carol", "", AUTH_READ);
	assert_int_equal(PERMS(f, "carol", "anything"), AUTH_READ);
	assert_int_equal(PERMS(f, "carol", ""), AUTH_READ);
}

static void test_union_and_anyone(void **state)
{
	struct fx *f = fx_ready(state);
	set_rule(f, "alice", "", AUTH_READ);
	set_rule(f, "alice", "db/", AUTH_LOCK);
	set_rule(f, "alice", "db/admin/", AUTH_ADMIN);
	set_rule(f, AUTH_ANYONE, "pub/", AUTH_LOCK | AUTH_READ);
	/* Rules only grant: a longer prefix adds, never takes away. */
	assert_int_equal(PERMS(f, "alice", "x"), AUTH_READ);
	assert_int_equal(PERMS(f, "alice", "db/x"), AUTH_READ | AUTH_LOCK);
	assert_int_equal(PERMS(f, "alice", "db/admin/1"), AUTH_ALL);
	assert_int_equal(PERMS(f, "alice", "pub/1"), AUTH_READ | AUTH_LOCK);
	/* "*" is every authenticated identity. */
	assert_int_equal(PERMS(f, "zed", "pub/1"), AUTH_READ | AUTH_LOCK);
	assert_int_equal(PERMS(f, "zed", "db/x"), 0);
	assert_int_equal(PERMS(f, AUTH_ANYONE, "pub/1"), AUTH_READ | AUTH_LOCK);
}

static void test_root(void **state)
{
	struct fx *f = fx_ready(state);
	assert_int_equal(perms_of(f, "root", "root", "db/x"), AUTH_ALL);
	assert_int_equal(perms_of(f, "root", "root", ""), AUTH_ALL);
	assert_int_equal(perms_of(f, "root", "alice", ""), 0);
	assert_int_equal(perms_of(f, "", "", ""), 0); /* no auth-admin names no one */
	char msg[128];
	auth_denied(msg, sizeof msg, "alice", AUTH_LOCK, "db/x");
	assert_string_equal(msg, "identity 'alice' has no 'lock' on 'db/x'");
	auth_denied(msg, sizeof msg, "alice", AUTH_ADMIN, "");
	assert_string_equal(msg, "identity 'alice' has no 'admin' on every name");
}

static void test_set_replace_delete(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t bytes = store_record_bytes(&f->store);
	set_rule(f, "alice", "db/", AUTH_LOCK | AUTH_READ);
	assert_true(store_record_bytes(&f->store) > bytes);
	set_rule(f, "alice", "db/", AUTH_READ); /* replaces, not adds */
	assert_int_equal(PERMS(f, "alice", "db/x"), AUTH_READ);
	assert_int_equal(DO(f, ACL_DELETE, .identity = "alice", .prefix = "db/").status, 0);
	assert_int_equal(PERMS(f, "alice", "db/x"), 0);
	assert_int_equal(store_record_bytes(&f->store), bytes);
	assert_int_equal(DO(f, ACL_DELETE, .identity = "alice", .prefix = "db/").status,
			 RAFTLOCK_ENOTFOUND);

	/* Malformed rules are refused and store nothing. */
	struct fx_image before = fx_dump(f);
	Raftlock__Meta *m = fx_meta(f);
	uint64_t applied = m->applied_index;
	raftlock__meta__free_unpacked(m, NULL);
	assert_int_equal(DO(f, ACL_SET, .identity = "alice", .prefix = "a", .perms = 0).status,
			 RAFTLOCK_EINVAL);
	assert_int_equal(DO(f, ACL_SET, .identity = "alice", .prefix = "a", .perms = 8).status,
			 RAFTLOCK_EINVAL);
	assert_int_equal(DO(f, ACL_SET, .identity = "", .prefix = "a", .perms = 1).status,
			 RAFTLOCK_EINVAL);
	char longname[RAFTLOCK_NAME_MAX + 2];
	memset(longname, 'n', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	assert_int_equal(DO(f, ACL_SET, .identity = longname, .prefix = "a", .perms = 1).status,
			 RAFTLOCK_EINVAL);
	assert_int_equal(DO(f, ACL_SET, .identity = "alice", .prefix = longname, .perms = 1).status,
			 RAFTLOCK_EINVAL);
	assert_int_equal(DO(f, ACL_DELETE, .identity = "", .prefix = "").status, RAFTLOCK_EINVAL);
	/* Two names of the longest length make a key LMDB refuses: the
	 * apply refuses the rule on every member instead of stopping them. */
	longname[RAFTLOCK_NAME_MAX] = '\0';
	assert_int_equal(
		DO(f, ACL_SET, .identity = longname, .prefix = longname, .perms = 1).status,
		RAFTLOCK_EINVAL);
	assert_int_equal(DO(f, ACL_DELETE, .identity = longname, .prefix = longname).status,
			 RAFTLOCK_EINVAL);
	assert_int_equal(PERMS(f, "alice", "a"), 0);
	/* Only the applied index moved. */
	m = fx_meta(f);
	assert_int_equal(m->applied_index, applied + 8);
	raftlock__meta__free_unpacked(m, NULL);
	assert_int_equal(store_record_bytes(&f->store), bytes);
	fx_image_free(&before);

	/* The longest key LMDB takes: 255 + 1 + 255 bytes. */
	char half[256], rest[256];
	memset(half, 'h', 255);
	memset(rest, 'r', 255);
	half[255] = rest[255] = '\0';
	assert_int_equal(DO(f, ACL_SET, .identity = half, .prefix = rest, .perms = 1).status, 0);
	MDB_txn *txn = store_begin(&f->store, false);
	assert_int_equal(store_acl_perms(&f->store, txn, half, rest), 1);
	store_abort(txn);
	assert_int_equal(DO(f, ACL_DELETE, .identity = half, .prefix = rest).status, 0);
}

static int collect(void *arg, const char *identity, const char *prefix, uint32_t perms)
{
	char *out = arg;
	char line[600];
	snprintf(line, sizeof line, "%s|%s|%u;", identity, prefix, perms);
	strcat(out, line);
	return 0;
}

static void test_scan_order(void **state)
{
	struct fx *f = fx_ready(state);
	set_rule(f, "bob", "x", AUTH_LOCK);
	set_rule(f, "alice", "b", AUTH_READ);
	set_rule(f, "alice", "", AUTH_ADMIN);
	set_rule(f, "alice2", "", AUTH_ADMIN);
	char out[512] = "";
	MDB_txn *txn = store_begin(&f->store, false);
	store_scan_acls(&f->store, txn, NULL, NULL, collect, out);
	assert_string_equal(out, "alice||4;alice|b|2;alice2||4;bob|x|1;");
	out[0] = '\0';
	store_scan_acls(&f->store, txn, "alice", "b", collect, out);
	assert_string_equal(out, "alice2||4;bob|x|1;");
	store_abort(txn);
}

/* The ranges of auth_ranges(), joined by '|'. */
static void ranges_of(struct fx *f, const char *root, const char *identity, uint32_t perm,
		      const char *within, char *out, size_t len)
{
	MDB_txn *txn = store_begin(&f->store, false);
	struct auth_view v = {.store = &f->store, .txn = txn, .root = root};
	struct auth_ranges r;
	auth_ranges(&v, identity, perm, within, &r);
	out[0] = '\0';
	for (size_t i = 0; i < r.n; i++)
		snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? "|" : "", r.v[i]);
	auth_ranges_free(&r);
	store_abort(txn);
}

/* Whether name starts with one of the ranges ranges_of() wrote. */
static bool in_ranges(const char *ranges, const char *within, const char *name)
{
	if (strncmp(name, within, strlen(within)) != 0)
		return false;
	char copy[256];
	snprintf(copy, sizeof copy, "%s", ranges);
	for (char *save, *r = strtok_r(copy, "|", &save); r; r = strtok_r(NULL, "|", &save))
		if (strncmp(name, r, strlen(r)) == 0)
			return true;
	return false;
}

/* The ranges an identity may read under a prefix: its rules' and "*"'s
 * that grant the permission, cut to the prefix, those a shorter one covers
 * dropped, in name order; and exactly the names auth_allows() allows. */
static void test_ranges(void **state)
{
	struct fx *f = fx_ready(state);
	set_rule(f, "alice", "db/", AUTH_READ | AUTH_LOCK);
	set_rule(f, "alice", "db/a/", AUTH_READ);
	set_rule(f, "alice", "app", AUTH_READ);
	set_rule(f, "alice", "lock/", AUTH_LOCK);
	set_rule(f, "alice", "m/", AUTH_ADMIN);
	set_rule(f, AUTH_ANYONE, "pub/", AUTH_READ);
	set_rule(f, AUTH_ANYONE, "db/z", AUTH_READ);
	set_rule(f, "bob", "", AUTH_READ);
	char out[256];
	struct {
		const char *root, *identity;
		uint32_t perm;
		const char *within, *want;
	} cases[] = {
		{NULL, "alice", AUTH_READ, "", "app|db/|pub/"},
		{NULL, "alice", AUTH_READ, "db/a/b", "db/a/b"},
		{NULL, "alice", AUTH_READ, "d", "db/"},
		{NULL, "alice", AUTH_READ, "ap", "app"},
		{NULL, "alice", AUTH_READ, "lock/", ""},
		{NULL, "alice", AUTH_LOCK, "", "db/|lock/"},
		{NULL, "alice", AUTH_ADMIN, "", "m/"},
		{NULL, AUTH_ANYONE, AUTH_READ, "", "db/z|pub/"},
		{NULL, "carol", AUTH_READ, "", "db/z|pub/"},
		{NULL, "bob", AUTH_READ, "x/", "x/"},
		{NULL, "", AUTH_READ, "", ""},
		{NULL, NULL, AUTH_READ, "", ""},
		{"alice", "alice", AUTH_ADMIN, "q/", "q/"}, /* the bootstrap admin */
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		ranges_of(f, cases[i].root, cases[i].identity, cases[i].perm, cases[i].within, out,
			  sizeof out);
		assert_string_equal(out, cases[i].want);
	}
	/* Covered exactly when allowed. */
	const char *names[] = {"",     "a",   "app",    "apple", "db",  "db/",   "db/a/x",
			       "db/z", "dbx", "lock/1", "m/x",   "pub", "pub/x", "zzz"};
	const char *within[] = {"", "d", "db/a", "p"};
	MDB_txn *txn = store_begin(&f->store, false);
	struct auth_view v = {.store = &f->store, .txn = txn};
	for (size_t w = 0; w < sizeof within / sizeof *within; w++) {
		ranges_of(f, NULL, "alice", AUTH_READ, within[w], out, sizeof out);
		for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
			bool allowed = strncmp(names[i], within[w], strlen(within[w])) == 0 &&
				       auth_allows(&v, "alice", AUTH_READ, names[i]);
			assert_int_equal(in_ranges(out, within[w], names[i]), allowed);
		}
	}
	store_abort(txn);
}

/* A scan of the rules under some prefixes visits those alone, in order,
 * after its starting rule, seeking past the others: also to a key longer
 * than any rule's (a 255-byte identity and a 256-byte prefix), from where
 * it goes on with the next rule. */
static void test_scan_under(void **state)
{
	struct fx *f = fx_ready(state);
	char ident[256], longp[257], rest[256];
	memset(ident, 'h', 255);
	ident[255] = '\0';
	memset(rest, 'r', 255);
	rest[255] = '\0';
	snprintf(longp, sizeof longp, "%ss", rest); /* 256 bytes, after rest */
	set_rule(f, "alice", "a/1", AUTH_LOCK);
	set_rule(f, "alice", "b/1", AUTH_READ);
	set_rule(f, "alice", "c/1", AUTH_LOCK);
	set_rule(f, "bob", "b/", AUTH_ADMIN);
	set_rule(f, "bob", "d/2", AUTH_LOCK);
	set_rule(f, "carol", "e", AUTH_LOCK);
	set_rule(f, ident, "a", AUTH_LOCK);
	set_rule(f, ident, rest, AUTH_LOCK);
	set_rule(f, "z", longp, AUTH_LOCK);
	MDB_txn *txn = store_begin(&f->store, false);
	char out[2048] = "";
	const char *bd[] = {"b/", "d/"};
	store_scan_acls_under(&f->store, txn, NULL, NULL, bd, 2, collect, out);
	assert_string_equal(out, "alice|b/1|2;bob|b/|4;bob|d/2|1;");
	out[0] = '\0';
	store_scan_acls_under(&f->store, txn, "alice", "b/1", bd, 2, collect, out);
	assert_string_equal(out, "bob|b/|4;bob|d/2|1;");
	out[0] = '\0';
	store_scan_acls_under(&f->store, txn, "alice", "c", bd, 2, collect, out);
	assert_string_equal(out, "bob|b/|4;bob|d/2|1;");
	out[0] = '\0';
	store_scan_acls_under(&f->store, txn, NULL, NULL, bd, 0, collect, out);
	assert_string_equal(out, "");
	const char *far[] = {"a", longp};
	store_scan_acls_under(&f->store, txn, NULL, NULL, far, 2, collect, out);
	char want[2048];
	snprintf(want, sizeof want, "alice|a/1|1;%s|a|1;z|%s|1;", ident, longp);
	assert_string_equal(out, want);
	store_abort(txn);
}

static void test_session_identity(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t a = DO(f, OPEN_SESSION, .nonce = 5, .ttl_ms = FX_TTL, .identity = "alice").session;
	uint64_t b = DO(f, OPEN_SESSION, .nonce = 6, .ttl_ms = FX_TTL).session;
	Raftlock__SessionRecord *s = fx_sess(f, a);
	assert_string_equal(s->identity, "alice");
	raftlock__session_record__free_unpacked(s, NULL);
	s = fx_sess(f, b);
	assert_string_equal(s->identity, "");
	raftlock__session_record__free_unpacked(s, NULL);
	/* A retried open is the same open only for the same identity. */
	Raftlock__Result r = DO(f, OPEN_SESSION, .nonce = 5, .ttl_ms = FX_TTL, .identity = "alice");
	assert_int_equal(r.status, 0);
	assert_int_equal(r.session, a);
	r = DO(f, OPEN_SESSION, .nonce = 5, .ttl_ms = FX_TTL, .identity = "mallory");
	assert_int_equal(r.status, RAFTLOCK_EPERM);
	assert_int_equal(r.session, 0);
	assert_int_equal(fx_count_sessions(f), 2);
}

/* Replaces an image's magic and its checksum (FNV-1a 64, as store.c). */
static void remagic(uint8_t *buf, size_t len, const char *magic)
{
	memcpy(buf, magic, 8);
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len - 8; i++)
		h = (h ^ buf[i]) * 0x100000001b3ull;
	for (int i = 7; i >= 0; i--, h >>= 8)
		buf[len - 8 + (size_t)i] = (uint8_t)h;
}

static void test_snapshot_carries_rules(void **state)
{
	struct fx *f = fx_ready(state);
	set_rule(f, "alice", "db/", AUTH_LOCK);
	set_rule(f, AUTH_ANYONE, "pub/", AUTH_READ);
	DO(f, OPEN_SESSION, .nonce = 9, .ttl_ms = FX_TTL, .identity = "alice");
	struct fx_image im = fx_dump(f);
	assert_memory_equal(im.buf, "RLSNAP04", 8);
	struct fx *g = fx_peer(f);
	assert_int_equal(store_load(&g->store, im.buf, im.len), 0);
	fx_assert_image(g, &im);
	assert_int_equal(PERMS(g, "alice", "db/x"), AUTH_LOCK);
	assert_int_equal(PERMS(g, "bob", "pub/x"), AUTH_READ);
	assert_int_equal(store_record_bytes(&g->store), store_record_bytes(&f->store));
	/* A restart counts the rules' bytes as the running count did. */
	fx_restart(g);
	assert_int_equal(store_record_bytes(&g->store), store_record_bytes(&f->store));
	/* Both go on alike. */
	g->index = f->index;
	g->now = f->now;
	DO(f, ACL_DELETE, .identity = "alice", .prefix = "db/");
	DO(g, ACL_DELETE, .identity = "alice", .prefix = "db/");
	fx_assert_same_state(f, g);

	/* An image of the previous format (no rules) still loads. */
	struct fx *h = fx_peer(f);
	h->now = 100;
	fx_init(h, 7);
	fx_session(h);
	struct fx_image old = fx_dump(h);
	uint8_t *buf = fx_alloc(f, old.len);
	memcpy(buf, old.buf, old.len);
	remagic(buf, old.len, "RLSNAP03");
	struct fx *k = fx_peer(f);
	assert_int_equal(store_load(&k->store, buf, old.len), 0);
	fx_assert_image(k, &old);
	fx_image_free(&old);
	fx_image_free(&im);
}

/* auth_check_request on envelopes as the service gets them. */
static int check(struct fx *f, const char *identity, const Raftlock__Envelope *env,
		 uint64_t session, char *msg)
{
	MDB_txn *txn = store_begin(&f->store, false);
	struct auth_view v = {.store = &f->store, .txn = txn, .root = "root"};
	msg[0] = '\0';
	int rv = auth_check_request(&v, identity, env, session, msg, 256);
	store_abort(txn);
	return rv;
}

/* alice lets go in her own session `mine` without a rule on the name; in
 * bob's (`theirs`), or unauthenticated, she is refused. */
static void lets_go(struct fx *f, const Raftlock__Envelope *env, uint64_t mine, uint64_t theirs)
{
	char msg[256];
	assert_int_equal(check(f, "alice", env, mine, msg), 0);
	assert_int_equal(check(f, "alice", env, theirs, msg), RAFTLOCK_EPERM);
	assert_non_null(strstr(msg, "belongs to another identity"));
	assert_int_equal(check(f, NULL, env, mine, msg), RAFTLOCK_EPERM);
}

static void test_check_request(void **state)
{
	struct fx *f = fx_ready(state);
	char msg[256];
	uint64_t mine =
		DO(f, OPEN_SESSION, .nonce = 1, .ttl_ms = FX_TTL, .identity = "alice").session;
	uint64_t theirs =
		DO(f, OPEN_SESSION, .nonce = 2, .ttl_ms = FX_TTL, .identity = "bob").session;
	set_rule(f, "alice", "db/", AUTH_LOCK);
	set_rule(f, "bob", "db/", AUTH_LOCK);

	Raftlock__Acquire acq = RAFTLOCK__ACQUIRE__INIT;
	acq.name = "db/x";
	Raftlock__AcquireRequest areq = RAFTLOCK__ACQUIRE_REQUEST__INIT;
	areq.acquire = &acq;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_ACQUIRE;
	env.acquire = &areq;
	assert_int_equal(check(f, "alice", &env, mine, msg), 0);
	/* Another identity's session: refused even with lock on the name. */
	assert_int_equal(check(f, "alice", &env, theirs, msg), RAFTLOCK_EPERM);
	assert_non_null(strstr(msg, "belongs to another identity"));
	/* A session that does not exist passes: apply answers ESESSION. */
	assert_int_equal(check(f, "alice", &env, 999, msg), 0);
	acq.name = "other";
	assert_int_equal(check(f, "alice", &env, mine, msg), RAFTLOCK_EPERM);
	assert_string_equal(msg, "identity 'alice' has no 'lock' on 'other'");
	assert_int_equal(check(f, NULL, &env, mine, msg), RAFTLOCK_EPERM);
	assert_non_null(strstr(msg, "not authenticated"));

	/* Letting go in its own session needs no rule (one deleted while it
	 * held must not keep the lock held); in another's it is refused. */
	Raftlock__Release rel = RAFTLOCK__RELEASE__INIT;
	rel.name = "other";
	Raftlock__ReleaseRequest rreq = RAFTLOCK__RELEASE_REQUEST__INIT;
	rreq.release = &rel;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_RELEASE;
	env.release = &rreq;
	lets_go(f, &env, mine, theirs);
	Raftlock__CancelWait cw = RAFTLOCK__CANCEL_WAIT__INIT;
	cw.name = "other";
	Raftlock__CancelWaitRequest cwreq = RAFTLOCK__CANCEL_WAIT_REQUEST__INIT;
	cwreq.cancel = &cw;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT;
	env.cancel_wait = &cwreq;
	lets_go(f, &env, mine, theirs);

	/* Closing another identity's session takes admin on "". */
	Raftlock__CloseSessionRequest creq = RAFTLOCK__CLOSE_SESSION_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION;
	env.close_session = &creq;
	assert_int_equal(check(f, "alice", &env, mine, msg), 0);
	assert_int_equal(check(f, "alice", &env, theirs, msg), RAFTLOCK_EPERM);
	assert_non_null(strstr(msg, "'admin' on every name"));
	assert_int_equal(check(f, "root", &env, theirs, msg), 0);
	set_rule(f, "alice", "", AUTH_ADMIN);
	assert_int_equal(check(f, "alice", &env, theirs, msg), 0);

	/* Rules: admin on the rule's prefix. */
	Raftlock__AclSet rule = RAFTLOCK__ACL_SET__INIT;
	rule.identity = "carol";
	rule.prefix = "team/";
	rule.perms = AUTH_LOCK;
	Raftlock__AclSetRequest sreq = RAFTLOCK__ACL_SET_REQUEST__INIT;
	sreq.rule = &rule;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_ACL_SET;
	env.acl_set = &sreq;
	assert_int_equal(check(f, "bob", &env, 0, msg), RAFTLOCK_EPERM);
	assert_string_equal(msg, "identity 'bob' has no 'admin' on 'team/'");
	set_rule(f, "bob", "team/", AUTH_ADMIN);
	assert_int_equal(check(f, "bob", &env, 0, msg), 0);
	rule.prefix = "team";
	assert_int_equal(check(f, "bob", &env, 0, msg), RAFTLOCK_EPERM);

	/* Reads of one name take read; listings any identity. */
	Raftlock__GetLockRequest g = RAFTLOCK__GET_LOCK_REQUEST__INIT;
	g.name = "db/x";
	env.body_case = RAFTLOCK__ENVELOPE__BODY_GET_LOCK;
	env.get_lock = &g;
	assert_int_equal(check(f, "bob", &env, 0, msg), RAFTLOCK_EPERM);
	assert_string_equal(msg, "identity 'bob' has no 'read' on 'db/x'");
	Raftlock__ListLocksRequest ll = RAFTLOCK__LIST_LOCKS_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_LIST_LOCKS;
	env.list_locks = &ll;
	assert_int_equal(check(f, "bob", &env, 0, msg), 0);
	assert_int_equal(check(f, "", &env, 0, msg), RAFTLOCK_EPERM);

	/* Revocation: admin on the name; lock on it is not enough. */
	Raftlock__RevokeRequest rv = RAFTLOCK__REVOKE_REQUEST__INIT;
	rv.name = "team/job";
	env.body_case = RAFTLOCK__ENVELOPE__BODY_REVOKE;
	env.revoke = &rv;
	assert_int_equal(check(f, "bob", &env, 0, msg), 0); /* admin on team/ above */
	rv.name = "db/x";
	assert_int_equal(check(f, "bob", &env, 0, msg), RAFTLOCK_EPERM);
	assert_string_equal(msg, "identity 'bob' has no 'admin' on 'db/x'");

	/* A request the rules do not name is for admins of every name. */
	Raftlock__StatusRequest st = RAFTLOCK__STATUS_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_STATUS;
	env.status = &st;
	assert_int_equal(check(f, "bob", &env, 0, msg), RAFTLOCK_EPERM);
	assert_string_equal(msg, "identity 'bob' has no 'admin' on every name");
	assert_int_equal(check(f, "alice", &env, 0, msg), 0); /* admin on "" above */
	assert_int_equal(check(f, "root", &env, 0, msg), 0);
}

/* A join for member N (issue 11): only identity raftlock-node-N, the name
 * of N's certificate, or an admin of every name may claim N's place. */
static void test_check_join(void **state)
{
	struct fx *f = fx_ready(state);
	char msg[256];
	Raftlock__MemberJoinRequest join = RAFTLOCK__MEMBER_JOIN_REQUEST__INIT;
	join.id = 4;
	join.incarnation = 77;
	join.cluster = "c";
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_MEMBER_JOIN;
	env.member_join = &join;

	/* A stranger: an identity the rules give nothing on every name. */
	assert_int_equal(check(f, "alice", &env, 0, msg), RAFTLOCK_EPERM);
	assert_string_equal(msg, "joining as member 4 takes identity 'raftlock-node-4' (the "
				 "node's client certificate or join-token-file) or 'admin' on "
				 "every name: 'alice' is neither");
	/* lock and read on every name, admin on a prefix: not enough. */
	set_rule(f, "alice", "", AUTH_LOCK | AUTH_READ);
	set_rule(f, "alice", "db/", AUTH_ADMIN);
	set_rule(f, AUTH_ANYONE, "", AUTH_READ);
	assert_int_equal(check(f, "alice", &env, 0, msg), RAFTLOCK_EPERM);
	/* No identity: refused, and told which one it takes. */
	assert_int_equal(check(f, NULL, &env, 0, msg), RAFTLOCK_EPERM);
	assert_non_null(strstr(msg, "takes identity 'raftlock-node-4'"));
	assert_non_null(strstr(msg, "no identity"));
	assert_int_equal(check(f, "", &env, 0, msg), RAFTLOCK_EPERM);

	/* The member's own name, for its id only. */
	assert_int_equal(check(f, "raftlock-node-4", &env, 0, msg), 0);
	const char *others[] = {"raftlock-node-3", "raftlock-node-40", "raftlock-node-04",
				"raftlock-node-",  "raftlock-node-4 ", "Raftlock-node-4",
				"node-4"};
	for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
		assert_int_equal(check(f, others[i], &env, 0, msg), RAFTLOCK_EPERM);
		assert_non_null(strstr(msg, "'raftlock-node-4'"));
	}
	join.id = 3;
	assert_int_equal(check(f, "raftlock-node-4", &env, 0, msg), RAFTLOCK_EPERM);
	assert_non_null(strstr(msg, "joining as member 3 takes identity 'raftlock-node-3'"));
	assert_int_equal(check(f, "raftlock-node-3", &env, 0, msg), 0);
	join.id = UINT64_MAX; /* the longest name a request can ask for fits */
	assert_int_equal(check(f, "raftlock-node-18446744073709551615", &env, 0, msg), 0);
	assert_int_equal(check(f, "raftlock-node-1844674407370955161", &env, 0, msg),
			 RAFTLOCK_EPERM);

	/* An admin of every name: the bootstrap admin, or by a rule. */
	join.id = 4;
	assert_int_equal(check(f, "root", &env, 0, msg), 0);
	assert_int_equal(check(f, "ops", &env, 0, msg), RAFTLOCK_EPERM);
	set_rule(f, "ops", "", AUTH_ADMIN);
	assert_int_equal(check(f, "ops", &env, 0, msg), 0);

	/* The member list stays open to any identity. */
	Raftlock__MemberListRequest list = RAFTLOCK__MEMBER_LIST_REQUEST__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_MEMBER_LIST;
	env.member_list = &list;
	assert_int_equal(check(f, "alice", &env, 0, msg), 0);
}

/* ------------------------------------------------------------ tokens -- */

static void write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
}

static void test_tokens(void **state)
{
	struct fx *f = *state;
	char path[128], hex[2 * AUTH_DIGEST_SIZE + 1], hex2[sizeof hex], text[512], err[256];
	snprintf(path, sizeof path, "%s/tokens", f->dir);
	auth_digest_hex("s3cret-alice", 12, hex);
	auth_digest_hex("s3cret-bob", 10, hex2);
	/* The digest of "abc", from FIPS 180-2. */
	char abc[sizeof hex];
	auth_digest_hex("abc", 3, abc);
	assert_string_equal(abc,
			    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	snprintf(text, sizeof text, "# tokens\n\nalice %s\n  bob\t%s  \n", hex, hex2);
	write_file(path, text);
	struct auth_tokens t;
	assert_int_equal(auth_tokens_load(&t, path, err, sizeof err), 0);
	assert_int_equal(t.n, 2);
	assert_string_equal(auth_tokens_check(&t, "s3cret-alice", 12), "alice");
	assert_string_equal(auth_tokens_check(&t, "s3cret-bob", 10), "bob");
	assert_null(auth_tokens_check(&t, "s3cret-bob", 9));
	assert_null(auth_tokens_check(&t, "", 0));
	assert_null(auth_tokens_check(&t, hex, strlen(hex))); /* the digest is no token */
	auth_tokens_free(&t);

	const char *bad[] = {
		"alice 1234\n",         /* short digest */
		"alice\n",              /* no digest */
		"* %s\n",               /* "*" is not a name */
		"alice %s extra\n",     /* trailing field */
		"alice %s\nalice %s\n", /* twice */
		"alice zz%s\n",         /* not hex (66 chars: also length) */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(text, sizeof text, bad[i], hex, hex);
		write_file(path, text);
		err[0] = '\0';
		assert_int_equal(auth_tokens_load(&t, path, err, sizeof err), RAFTLOCK_ECONFIG);
		assert_non_null(strstr(err, path));
		if (strstr(bad[i], "\nalice") != NULL) /* both lines named */
			assert_non_null(strstr(err, ":2: 'alice' appears twice, on lines 1 and 2"));
		assert_null(t.v);
	}
	char nothex[sizeof hex];
	memcpy(nothex, hex, sizeof hex);
	nothex[10] = 'g';
	snprintf(text, sizeof text, "alice %s\n", nothex);
	write_file(path, text);
	assert_int_equal(auth_tokens_load(&t, path, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_non_null(strstr(err, "hexadecimal"));
	unlink(path);
	assert_int_equal(auth_tokens_load(&t, path, err, sizeof err), RAFTLOCK_ECONFIG);
}

/* The file is read by the config file's line reader (line_file.h): a line
 * of LINE_FILE_MAX bytes loads; a longer one fails the load, naming the
 * line, and is never read as two lines, whose second would be a token: a
 * commented-out token behind a long comment stays out. A file that cannot
 * be read (a directory) fails the load with the system's reason. On
 * SIGHUP main.c keeps the tokens in use when the load fails. */
static void test_tokens_lines(void **state)
{
	struct fx *f = *state;
	char path[128], hex[2 * AUTH_DIGEST_SIZE + 1], err[512];
	static char text[4 * LINE_FILE_MAX];
	snprintf(path, sizeof path, "%s/tokens", f->dir);
	auth_digest_hex("s3cret-mallory", 14, hex);
	struct auth_tokens t;

	/* alice's line padded with blanks to the limit */
	int n = snprintf(text, sizeof text, "alice %s", hex);
	memset(text + n, ' ', LINE_FILE_MAX - (size_t)n);
	text[LINE_FILE_MAX] = '\n';
	text[LINE_FILE_MAX + 1] = '\0';
	write_file(path, text);
	assert_int_equal(auth_tokens_load(&t, path, err, sizeof err), 0);
	assert_int_equal(t.n, 1);
	auth_tokens_free(&t);

	/* a comment of 1023 bytes (one fgets' worth before) + "mallory HEX" */
	memset(text, '#', 1023);
	snprintf(text + 1023, sizeof text - 1023, "mallory %s\n", hex);
	write_file(path, text);
	err[0] = '\0';
	assert_int_equal(auth_tokens_load(&t, path, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_null(t.v);
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, ":1: the line is longer than the 1024 bytes"));

	assert_int_equal(auth_tokens_load(&t, f->dir, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_non_null(strstr(err, "Is a directory"));
	assert_null(t.v);
	unlink(path);
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_deny_by_default),
		T(test_prefixes),
		T(test_union_and_anyone),
		T(test_root),
		T(test_set_replace_delete),
		T(test_scan_order),
		T(test_ranges),
		T(test_scan_under),
		T(test_session_identity),
		T(test_snapshot_carries_rules),
		T(test_check_request),
		T(test_check_join),
		T(test_tokens),
		T(test_tokens_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
