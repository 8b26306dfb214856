/* test_acl.c: identities and access rules on a real 3-node cluster with
 * auth = on, bearer tokens and a bootstrap admin (issue 11, item 3;
 * docs/GUARANTEES.md, authorization). Every refusal is RAFTLOCK_EPERM with
 * a message naming what is missing, and changes nothing on the server: a
 * connection without an identity (no token, an unknown token), an acquire
 * that no rule allows (the lock stays free), a non-admin changing a rule
 * (the rules stay as they were, through the library and the CLI). An
 * admin's rule grants, rules only add up, identity "*" stands for every
 * identity; introspection hides the owners of others' sessions and the
 * locks an identity may not read; a session serves only the identity that
 * opened it; the rules survive the leader's death (they are in the
 * replicated state). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pthread.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"

static char dir[] = "/tmp/raftlock-acl-XXXXXX";
static char tokens_path[300];
static struct tcluster cl;

#define TOKEN_ROOT "root-token-5b1f0c77e2a94d3f"
#define TOKEN_ALICE "alice-token-0a9e61d2c7b84f55"
#define TOKEN_BOB "bob-token-93c5e0f1a2d64b78"

static int setup(void **state)
{
	(void)state;
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(tokens_path, sizeof tokens_path, "%s/tokens", dir);
	const char *tokens[] = {"root", TOKEN_ROOT, "alice", TOKEN_ALICE, "bob", TOKEN_BOB, NULL};
	if (tl_write_tokens(tokens_path, tokens) != 0)
		return -1;
	static const char *args[8];
	args[0] = "--auth";
	args[1] = "on";
	args[2] = "--auth-tokens";
	args[3] = tokens_path;
	args[4] = "--auth-admin";
	args[5] = "root";
	for (int i = 0; i < 6; i++)
		cl.extra_args[i] = args[i];
	tcluster_start(&cl, 3, 500);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return tcluster_destroy_and_remove(&cl, dir) == 0 ? 0 : -1;
}

static raftlock_client *client_as(const char *token, const char *name)
{
	return tl_client_token(&cl, token, name);
}

/* The rules as the bootstrap admin sees them, one "id|prefix|perms;" each. */
static void rules_text(char *out, size_t len)
{
	raftlock_client *root = client_as(TOKEN_ROOT, "root-reader");
	struct raftlock_acl_list *list = NULL;
	if (raftlock_acl_list(root, NULL, NULL, 0, false, &list) != 0)
		fail_msg("acl list: %s", raftlock_errmsg(root));
	out[0] = '\0';
	for (size_t i = 0; i < list->n_rules; i++) {
		size_t at = strlen(out);
		snprintf(out + at, len - at, "%s|%s|%u;", list->rules[i].identity,
			 list->rules[i].prefix, list->rules[i].perms);
	}
	raftlock_acl_list_free(list);
	raftlock_client_close(root);
}

/* Whether `name` exists (someone holds or awaits it), as root reads it. */
static bool lock_exists(const char *name)
{
	raftlock_client *root = client_as(TOKEN_ROOT, "root-reader");
	struct raftlock_lock_info *info = NULL;
	int rv = raftlock_lock_get(root, name, false, &info);
	raftlock_lock_info_free(info);
	raftlock_client_close(root);
	if (rv != 0 && rv != RAFTLOCK_ENOTFOUND)
		fail_msg("lock get: %s", raftlock_strerror(rv));
	return rv == 0;
}

/* Runs the raftlock CLI with args; returns its exit status and output. */
static int cli(char *out, size_t len, const char *token, const char *args)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd,
		 "RAFTLOCK_AUTH_TOKEN='%s' %s/bin/raftlock --endpoints %s,%s,%s %s 2>&1", token,
		 RAFTLOCK_BINARY_DIR, cl.addrs[0], cl.addrs[1], cl.addrs[2], args);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* raftlock_auth_denied_total summed over the live nodes. */
static unsigned long long denied_total(void)
{
	unsigned long long sum = 0;
	for (int i = 0; i < cl.n; i++) {
		char out[16384];
		if (cl.pid[i] <= 0 || tcluster_http_get(&cl, i, "/metrics", out, sizeof out) != 0)
			continue;
		const char *p = strstr(out, "\nraftlock_auth_denied_total ");
		assert_non_null(p);
		sum += strtoull(p + strlen("\nraftlock_auth_denied_total "), NULL, 10);
	}
	return sum;
}

/* No identity, no service: nothing but STATUS. */
static void test_unauthenticated(void **state)
{
	(void)state;
	unsigned long long denied = denied_total();
	raftlock_client *anon = client_as(NULL, "anon");
	struct raftlock_session_options so = {.ttl_ms = 5000};
	raftlock_session *s = NULL;
	assert_int_equal(raftlock_session_open(anon, &so, &s), RAFTLOCK_EPERM);
	tl_assert_errmsg_has(anon, "not authenticated");
	struct raftlock_lock_list *ll = NULL;
	assert_int_equal(raftlock_lock_list(anon, "", NULL, 0, false, &ll), RAFTLOCK_EPERM);
	struct raftlock_status *st = NULL;
	assert_int_equal(raftlock_status_get(anon, NULL, &st), 0);
	raftlock_status_free(st);
	raftlock_client_close(anon);

	raftlock_client *wrong = client_as("not-a-known-token", "wrong");
	assert_int_equal(raftlock_session_open(wrong, &so, &s), RAFTLOCK_EPERM);
	tl_assert_errmsg_has(wrong, "no such token");
	raftlock_client_close(wrong);
	Raftlock__StatusInfo *si = tcluster_status(&cl, tcluster_leader(&cl, 10000));
	assert_non_null(si);
	assert_int_equal(si->sessions, 0);
	raftlock__status_info__free_unpacked(si, NULL);
	assert_true(denied_total() >= denied + 3); /* an open, a listing, a token */
}

/* Deny by default: alice may open a session but not take a lock; the
 * refusal names identity, permission and name, and the lock stays free. */
static void test_denied_acquire(void **state)
{
	(void)state;
	raftlock_client *alice = client_as(TOKEN_ALICE, "alice-app");
	raftlock_session *s = tl_session(alice, 5000);
	raftlock_lock *l = tl_lock(s, "denied/x");
	uint64_t token = 0;
	assert_int_equal(raftlock_lock_try(l, &token), RAFTLOCK_EPERM);
	tl_assert_errmsg_has(alice, "identity 'alice' has no 'lock' on 'denied/x'");
	assert_int_equal(token, 0);
	assert_false(lock_exists("denied/x"));
	/* A blocking acquire is refused as well, not queued. */
	assert_int_equal(raftlock_lock_acquire(l, RAFTLOCK_EXCLUSIVE, 1, 2000, &token),
			 RAFTLOCK_EPERM);
	assert_false(lock_exists("denied/x"));
	/* Reading it takes read. */
	struct raftlock_lock_info *info = NULL;
	assert_int_equal(raftlock_lock_get(alice, "denied/x", false, &info), RAFTLOCK_EPERM);
	tl_assert_errmsg_has(alice, "has no 'read' on 'denied/x'");
	raftlock_lock_free(l);
	assert_int_equal(raftlock_session_close(s), 0);
	raftlock_client_close(alice);
}

/* What a watch or an observation was told last. */
struct told {
	pthread_mutex_t mu;
	int kind, status, n;
};

static void on_watch(const struct raftlock_watch_event *ev, void *arg)
{
	struct told *t = arg;
	pthread_mutex_lock(&t->mu);
	t->kind = ev->kind;
	t->status = ev->status;
	t->n++;
	pthread_mutex_unlock(&t->mu);
}

static void on_observe(const struct raftlock_leader_event *ev, void *arg)
{
	struct told *t = arg;
	pthread_mutex_lock(&t->mu);
	t->status = ev->status;
	t->n++;
	pthread_mutex_unlock(&t->mu);
}

static void await_told(struct told *t)
{
	for (int i = 0; i < 500; i++) {
		pthread_mutex_lock(&t->mu);
		int n = t->n;
		pthread_mutex_unlock(&t->mu);
		if (n > 0)
			return;
		tl_sleep_ms(20);
	}
	fail_msg("nothing told");
}

/* A watch takes read on its prefix: without it, the watch ends with
 * EPERM (an observation too); with it, the state comes. */
static void test_watch_needs_read(void **state)
{
	(void)state;
	raftlock_client *alice = client_as(TOKEN_ALICE, "alice-watch");
	struct told w1 = {.mu = PTHREAD_MUTEX_INITIALIZER};
	raftlock_watch_handle *w;
	assert_int_equal(raftlock_watch(alice, "nowatch/", NULL, on_watch, &w1, &w), 0);
	await_told(&w1);
	assert_int_equal(w1.kind, RAFTLOCK_WATCH_ERROR);
	assert_int_equal(w1.status, RAFTLOCK_EPERM);
	raftlock_watch_cancel(w);

	struct told o1 = {.mu = PTHREAD_MUTEX_INITIALIZER};
	raftlock_observer *obs;
	assert_int_equal(raftlock_observe(alice, "nowatch/e", on_observe, &o1, &obs), 0);
	await_told(&o1);
	assert_int_equal(o1.status, RAFTLOCK_EPERM);
	raftlock_observe_cancel(obs);

	raftlock_client *root = client_as(TOKEN_ROOT, "root-watch");
	assert_int_equal(raftlock_acl_set(root, "alice", "seen/", RAFTLOCK_ACL_READ), 0);
	/* The node that serves the watch decides on its own applied rules:
	 * a follower may take a moment to apply the new one. */
	struct told w2 = {.mu = PTHREAD_MUTEX_INITIALIZER};
	for (int i = 0; i < 50; i++) {
		w2.n = 0;
		assert_int_equal(raftlock_watch(alice, "seen/", NULL, on_watch, &w2, &w), 0);
		await_told(&w2);
		raftlock_watch_cancel(w);
		if (w2.kind != RAFTLOCK_WATCH_ERROR)
			break;
		tl_sleep_ms(100);
	}
	assert_int_equal(w2.kind, RAFTLOCK_WATCH_CURRENT);
	assert_int_equal(raftlock_acl_delete(root, "alice", "seen/"), 0);
	raftlock_client_close(root);
	raftlock_client_close(alice);
}

/* A non-admin's rule change is refused and the rules stay as they were;
 * the bootstrap admin's grants, and only adds. */
static void test_admin_only_rules(void **state)
{
	(void)state;
	char before[1024], after[1024], out[2048];
	rules_text(before, sizeof before);
	raftlock_client *alice = client_as(TOKEN_ALICE, "alice-app");
	assert_int_equal(raftlock_acl_set(alice, "alice", "", RAFTLOCK_ACL_ADMIN), RAFTLOCK_EPERM);
	tl_assert_errmsg_has(alice, "identity 'alice' has no 'admin' on every name");
	assert_int_equal(raftlock_acl_delete(alice, "alice", "app/"), RAFTLOCK_EPERM);
	struct raftlock_acl_list *list = NULL;
	assert_int_equal(raftlock_acl_list(alice, NULL, NULL, 0, false, &list), 0);
	assert_int_equal(list->n_rules, 0); /* she administers no prefix */
	raftlock_acl_list_free(list);
	/* The CLI says the same, exit status 1. */
	assert_int_equal(cli(out, sizeof out, TOKEN_BOB, "acl set bob '' all"), 1);
	if (strstr(out, "identity 'bob' has no 'admin'") == NULL)
		fail_msg("raftlock acl set said: %s", out);
	rules_text(after, sizeof after);
	assert_string_equal(before, after);
	/* A backup image is the admin's alone too. */
	char image[300];
	snprintf(image, sizeof image, "%s/alice.snap", dir);
	assert_int_equal(raftlock_snapshot_save(alice, image, NULL), RAFTLOCK_EPERM);
	tl_assert_errmsg_has(alice, "identity 'alice' has no 'admin' on every name");
	assert_int_not_equal(access(image, F_OK), 0);

	/* The admin grants lock on app/ to alice, read on app/ to everyone. */
	raftlock_client *root = client_as(TOKEN_ROOT, "root-app");
	assert_int_equal(raftlock_snapshot_save(root, image, NULL), 0);
	assert_int_equal(access(image, F_OK), 0);
	assert_int_equal(raftlock_acl_set(root, "alice", "app/", RAFTLOCK_ACL_LOCK), 0);
	assert_int_equal(cli(out, sizeof out, TOKEN_ROOT, "acl set '*' app/ read"), 0);
	rules_text(after, sizeof after);
	assert_string_equal(after, "*|app/|2;alice|app/|1;");
	assert_int_equal(cli(out, sizeof out, TOKEN_ROOT, "acl list"), 0);
	assert_non_null(strstr(out, "alice\tapp/\tlock"));
	assert_int_equal(cli(out, sizeof out, TOKEN_ROOT, "acl list --json"), 0);
	assert_non_null(strstr(out, "{\"identity\": \"alice\", \"prefix\": \"app/\", "
				    "\"perms\": \"lock\"}"));
	assert_true(out[0] == '[');

	raftlock_session *s = tl_session(alice, 5000);
	raftlock_lock *l = tl_lock(s, "app/one");
	tl_take(l);
	assert_true(lock_exists("app/one"));
	struct raftlock_lock_info *info = NULL;
	assert_int_equal(raftlock_lock_get(alice, "app/one", false, &info), 0); /* via "*" */
	assert_int_equal(info->n_holders, 1);
	raftlock_lock_info_free(info);
	/* Outside the prefix: still nothing. */
	raftlock_lock *other = tl_lock(s, "apps");
	uint64_t token = 0;
	assert_int_equal(raftlock_lock_try(other, &token), RAFTLOCK_EPERM);
	assert_false(lock_exists("apps"));
	raftlock_lock_free(other);
	/* Her rule deleted while she holds: she still lets go (before, the
	 * release was refused and the lock held until her session ended). */
	assert_int_equal(raftlock_acl_delete(root, "alice", "app/"), 0);
	assert_int_equal(raftlock_lock_release(l, NULL), 0);
	assert_false(lock_exists("app/one"));
	assert_int_equal(raftlock_acl_set(root, "alice", "app/", RAFTLOCK_ACL_LOCK), 0);
	raftlock_lock_free(l);
	assert_int_equal(raftlock_session_close(s), 0);
	raftlock_client_close(alice);
	raftlock_client_close(root);
}

/* Introspection: bob, without read on secret/, sees neither the lock nor
 * the owner of alice's session; root (read everywhere) sees both; with
 * read on secret/, bob sees the lock but still not the owner. */
static void test_introspection_hides_owners(void **state)
{
	(void)state;
	raftlock_client *root = client_as(TOKEN_ROOT, "root-app");
	assert_int_equal(raftlock_acl_set(root, "alice", "secret/", RAFTLOCK_ACL_LOCK), 0);
	assert_int_equal(raftlock_acl_set(root, "bob", "", RAFTLOCK_ACL_LOCK), 0);
	raftlock_client *alice = client_as(TOKEN_ALICE, "alice-secret-app");
	raftlock_session *s = tl_session(alice, 5000);
	raftlock_lock *l = tl_lock(s, "secret/plan");
	tl_take(l);
	uint64_t sid = raftlock_session_id(s);

	raftlock_client *bob = client_as(TOKEN_BOB, "bob-app");
	struct raftlock_lock_list *ll = NULL;
	assert_int_equal(raftlock_lock_list(bob, "", NULL, 0, false, &ll), 0);
	for (size_t i = 0; i < ll->n_locks; i++)
		assert_string_not_equal(ll->locks[i].name, "secret/plan");
	raftlock_lock_list_free(ll);
	struct raftlock_session_list *sl = NULL;
	assert_int_equal(raftlock_session_list(bob, 0, 0, true, &sl), 0);
	bool seen = false;
	for (size_t i = 0; i < sl->n_sessions; i++) {
		const struct raftlock_session_info *si = &sl->sessions[i];
		if (si->id != sid)
			continue;
		seen = true;
		assert_string_equal(si->who.client_name, "");
		assert_string_equal(si->who.host, "");
		assert_int_equal(si->who.pid, 0);
		assert_int_equal(si->n_locks, 0);
	}
	assert_true(seen);
	raftlock_session_list_free(sl);

	assert_int_equal(raftlock_session_list(root, 0, 0, false, &sl), 0);
	seen = false;
	for (size_t i = 0; i < sl->n_sessions; i++) {
		const struct raftlock_session_info *si = &sl->sessions[i];
		if (si->id != sid)
			continue;
		seen = true;
		assert_string_equal(si->who.client_name, "alice-secret-app");
		assert_int_equal(si->who.pid, (uint32_t)getpid());
		assert_int_equal(si->n_locks, 1);
	}
	assert_true(seen);
	raftlock_session_list_free(sl);
	assert_int_equal(raftlock_lock_list(root, "secret/", NULL, 0, false, &ll), 0);
	assert_int_equal(ll->n_locks, 1);
	assert_string_equal(ll->locks[0].holders[0].who.client_name, "alice-secret-app");
	raftlock_lock_list_free(ll);
	/* Read on secret/ shows bob the lock and its holder's session, not
	 * the owner of alice's session (that takes read on every name). */
	assert_int_equal(raftlock_acl_set(root, "bob", "secret/", RAFTLOCK_ACL_READ), 0);
	assert_int_equal(raftlock_lock_list(bob, "secret/", NULL, 0, false, &ll), 0);
	assert_int_equal(ll->n_locks, 1);
	assert_int_equal(ll->locks[0].holders[0].session, sid);
	assert_string_equal(ll->locks[0].holders[0].who.client_name, "");
	assert_int_equal(ll->locks[0].holders[0].who.pid, 0);
	raftlock_lock_list_free(ll);
	struct raftlock_lock_info *info = NULL;
	assert_int_equal(raftlock_lock_get(bob, "secret/plan", false, &info), 0);
	assert_string_equal(info->holders[0].who.host, "");
	raftlock_lock_info_free(info);
	assert_int_equal(raftlock_acl_delete(root, "bob", "secret/"), 0);

	raftlock_client_close(bob);
	assert_int_equal(raftlock_lock_release(l, NULL), 0);
	raftlock_lock_free(l);
	assert_int_equal(raftlock_session_close(s), 0);
	raftlock_client_close(alice);
	raftlock_client_close(root);
}

/* The rules are replicated state: after the leader dies, the new leader
 * decides alike, and an admin's delete takes the grant away. */
static void test_rules_survive_leader_kill(void **state)
{
	(void)state;
	raftlock_client *root = client_as(TOKEN_ROOT, "root-app");
	assert_int_equal(raftlock_acl_set(root, "alice", "ha/", RAFTLOCK_ACL_LOCK), 0);
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	tcluster_signal(&cl, leader, SIGKILL);
	int next = tcluster_leader(&cl, 15000);
	assert_true(next >= 0 && next != leader);

	raftlock_client *alice = client_as(TOKEN_ALICE, "alice-ha");
	raftlock_session *s = tl_session(alice, 5000);
	raftlock_lock *l = tl_lock(s, "ha/x");
	tl_take(l);
	assert_int_equal(raftlock_lock_release(l, NULL), 0);
	assert_int_equal(raftlock_acl_delete(root, "alice", "ha/"), 0);
	uint64_t token = 0;
	assert_int_equal(raftlock_lock_try(l, &token), RAFTLOCK_EPERM);
	assert_int_equal(raftlock_acl_delete(root, "alice", "ha/"), RAFTLOCK_ENOTFOUND);
	raftlock_lock_free(l);
	assert_int_equal(raftlock_session_close(s), 0);

	/* The dead node comes back and catches up, rules included. */
	tcluster_restart(&cl, leader);
	Raftlock__StatusInfo *si = NULL;
	for (int i = 0; i < 200 && si == NULL; i++) {
		si = tcluster_status(&cl, leader);
		if (si == NULL)
			tl_sleep_ms(50);
	}
	assert_non_null(si);
	raftlock__status_info__free_unpacked(si, NULL);
	char rules[1024];
	rules_text(rules, sizeof rules);
	assert_null(strstr(rules, "alice|ha/"));
	assert_non_null(strstr(rules, "alice|app/|1;"));
	raftlock_client_close(alice);
	raftlock_client_close(root);
}

/* raftlockd --check-config: authentication settings that cannot work
 * stop the node and name the problem. */
static void run_check(const char *const *extra, int want_status, const char *want_text)
{
	char *argv[24] = {"raftlockd",
			  "--id",
			  "1",
			  "--data-dir",
			  "/tmp/x",
			  "--cluster",
			  "c",
			  "--member",
			  "1,127.0.0.1:1,127.0.0.1:2",
			  "--check-config"};
	int k = 10;
	for (int i = 0; extra[i] != NULL; i++)
		argv[k++] = (char *)extra[i];
	argv[k] = NULL;
	char out[2048];
	int st = tcluster_run_raftlockd(argv, out, sizeof out, 10000);
	if (st != want_status || strstr(out, want_text) == NULL)
		fail_msg("exit %d (want %d), output: %s (want '%s')", st, want_status, out,
			 want_text);
}

static void test_bad_auth_settings(void **state)
{
	(void)state;
	char bad[320];
	snprintf(bad, sizeof bad, "%s/bad-tokens", dir);
	FILE *f = fopen(bad, "w");
	assert_non_null(f);
	fprintf(f, "alice 1234\n");
	fclose(f);
	run_check((const char *[]){"--auth", "on", NULL}, 2, "no way to prove who they are");
	run_check((const char *[]){"--auth", "maybe", NULL}, 2, "is not on or off");
	run_check((const char *[]){"--auth", "on", "--auth-tokens", bad, NULL}, 2, ":1: expected");
	run_check((const char *[]){"--auth-admin", "*", NULL}, 2, "auth-admin");
	run_check((const char *[]){"--auth", "on", "--auth-tokens", tokens_path, NULL}, 0,
		  "authentication on (3 tokens)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unauthenticated),
		cmocka_unit_test(test_denied_acquire),
		cmocka_unit_test(test_watch_needs_read),
		cmocka_unit_test(test_admin_only_rules),
		cmocka_unit_test(test_introspection_hides_owners),
		cmocka_unit_test(test_rules_survive_leader_kill),
		cmocka_unit_test(test_bad_auth_settings),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
