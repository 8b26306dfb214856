/* test_reload.c: certificates and tokens read again on SIGHUP, without a
 * restart (issue 11; README, "Reading certificates and tokens again").
 * A 3-node cluster with client-tls = server and auth = on (tokens) gets a
 * node certificate of a new CA and a tokens file in which alice's old token
 * is replaced by a new one, then SIGHUP:
 *   - a new client that trusts the new CA and sends the new token works;
 *   - one that trusts only the old CA is refused at the handshake
 *     (RAFTLOCK_ETLS), one that sends the revoked token gets RAFTLOCK_EPERM;
 *   - a client connected before goes on over its connection;
 *   - a reload with a bad key or a bad tokens file logs an error that says
 *     so and keeps the material in use: the node serves as before. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"

static char dir[] = "/tmp/raftlock-reload-XXXXXX";
static char live[300], tokens_path[300];
static struct tcluster cl;

#define TOKEN_ROOT "root-token-4d2a91c07be35f18"
#define TOKEN_OLD "alice-token-old-83e1f5a90c2d47b6"
#define TOKEN_NEW "alice-token-new-0f6c28d4e97a13b5"

/* A shell command that must succeed. */
#define shell(...) assert_int_equal(tcluster_shell(__VA_ARGS__), 0)

static int setup(void **state)
{
	(void)state;
	if (mkdtemp(dir) == NULL || tcluster_make_certs(dir) != 0)
		return -1;
	/* The nodes read their certificates from live/, which starts as a
	 * copy of certs/ (the old CA) and gets new/'s (a new CA) later. */
	snprintf(live, sizeof live, "%s/live", dir);
	char cmd[1024];
	snprintf(cmd, sizeof cmd,
		 "cp -r %s/certs %s && %s/deploy/make-certs %s/new --nodes 3 --client harness "
		 ">/dev/null",
		 dir, live, RAFTLOCK_SOURCE_DIR, dir);
	if (system(cmd) != 0)
		return -1;
	snprintf(tokens_path, sizeof tokens_path, "%s/tokens", dir);
	const char *tokens[] = {"root", TOKEN_ROOT, "alice", TOKEN_OLD, NULL};
	if (tl_write_tokens(tokens_path, tokens) != 0)
		return -1;
	/* info: the lines that say a reload is done */
	static const char *args[] = {"--auth",       "on",   "--auth-tokens",   tokens_path,
				     "--auth-admin", "root", "--log-level=info"};
	for (size_t i = 0; i < sizeof args / sizeof args[0]; i++)
		cl.extra_args[i] = args[i];
	cl.client_tls = "server";
	cl.tls_dir = live;
	tcluster_start(&cl, 3, 500);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return tcluster_destroy_and_remove(&cl, dir) == 0 ? 0 : -1;
}

/* A client trusting the CA in dir/<cas>/ca.pem, sending token, of the
 * nodes given (NULL: all). */
static raftlock_client *client(const char *cas, const char *token, const char *address)
{
	char ca[400];
	snprintf(ca, sizeof ca, "%s/%s/ca.pem", dir, cas);
	struct raftlock_client_options o = {0};
	o.addresses = address != NULL ? &address : cl.addrs;
	o.n_addresses = address != NULL ? 1 : (size_t)cl.n;
	o.client_name = "reload";
	o.request_timeout_ms = 5000;
	o.tls_ca_file = ca;
	o.auth_token = token;
	raftlock_client *c = NULL;
	const char *err = NULL;
	if (raftlock_client_open(&o, &c, &err) != 0)
		fail_msg("client_open: %s", err);
	return c;
}

/* Opens a session and takes `name` in it; returns the session open's
 * status (0: taken and released). */
static int lock_once(raftlock_client *c, const char *name)
{
	struct raftlock_session_options so = {.ttl_ms = 10000};
	raftlock_session *s = NULL;
	int rv = raftlock_session_open(c, &so, &s);
	if (rv != 0)
		return rv;
	raftlock_lock *l = tl_lock(s, name);
	tl_take(l);
	assert_int_equal(raftlock_lock_release(l, NULL), 0);
	raftlock_lock_free(l);
	raftlock_session_close(s);
	return 0;
}

/* SIGHUP to every node; waits until each logged `done` once more. */
static void reload_all(const char *done)
{
	int before[3];
	for (int i = 0; i < 3; i++) {
		before[i] = tcluster_log_count(&cl, i, done);
		tcluster_signal(&cl, i, SIGHUP);
	}
	for (int i = 0; i < 3; i++)
		for (int tries = 0; tcluster_log_count(&cl, i, done) <= before[i]; tries++) {
			assert_true(tries < 100);
			tl_sleep_ms(50);
		}
}

static void rotate_then_refuse_bad_files(void **state)
{
	(void)state;
	raftlock_client *root = client("certs", TOKEN_ROOT, NULL);
	if (raftlock_acl_set(root, "alice", "rl/", RAFTLOCK_ACL_LOCK) != 0)
		fail_msg("acl set: %s", raftlock_errmsg(root));
	raftlock_client_close(root);
	raftlock_client *before = client("certs", TOKEN_OLD, NULL);
	raftlock_session *kept = tl_session(before, 10000);
	raftlock_lock *kept_lock = tl_lock(kept, "rl/kept");

	/* Rotate the node certificates (a new CA) and alice's token. */
	shell("cp %s/new/ca.pem %s/new/node-* %s/new/client-harness.* %s/", dir, dir, dir, live);
	const char *tokens[] = {"root", TOKEN_ROOT, "alice", TOKEN_NEW, NULL};
	assert_int_equal(tl_write_tokens(tokens_path, tokens), 0);
	reload_all("auth-tokens read again: 2 tokens");
	for (int i = 0; i < 3; i++)
		assert_true(
			tcluster_log_has(&cl, i, "client-tls certificate, key and CA read again"));

	raftlock_client *fresh = client("new", TOKEN_NEW, NULL);
	assert_int_equal(lock_once(fresh, "rl/a"), 0);
	raftlock_client *old_ca = client("certs", TOKEN_NEW, NULL);
	assert_int_equal(lock_once(old_ca, "rl/a"), RAFTLOCK_ETLS);
	tl_assert_errmsg_has(old_ca, "certificate verify failed");
	raftlock_client_close(old_ca);
	raftlock_client *revoked = client("new", TOKEN_OLD, NULL);
	assert_int_equal(lock_once(revoked, "rl/a"), RAFTLOCK_EPERM);
	tl_assert_errmsg_has(revoked, "no such token");
	raftlock_client_close(revoked);

	/* The connection made before goes on: its identity, its session. */
	assert_true(raftlock_session_valid(kept));
	tl_take(kept_lock);
	assert_int_equal(raftlock_lock_release(kept_lock, NULL), 0);

	/* Bad files: an error, and the material in use stays. */
	shell("cp %s/node-1.key %s/node-1.key.good && echo broken > %s/node-1.key", live, live,
	      live);
	shell("cp %s %s.good && echo 'alice not-a-digest' > %s", tokens_path, tokens_path,
	      tokens_path);
	int errors = tcluster_log_count(&cl, 0, "reload: auth-tokens:");
	tcluster_signal(&cl, 0, SIGHUP);
	for (int tries = 0; tcluster_log_count(&cl, 0, "reload: auth-tokens:") <= errors; tries++) {
		assert_true(tries < 100);
		tl_sleep_ms(50);
	}
	assert_true(tcluster_log_has(&cl, 0, "reload: client-tls:"));
	assert_true(tcluster_log_has(&cl, 0, "keeping the certificates in use"));
	assert_true(tcluster_log_has(&cl, 0, "keeping the tokens in use"));
	raftlock_client *node1 = client("new", TOKEN_NEW, cl.addrs[0]);
	struct raftlock_status *st = NULL;
	if (raftlock_status_get(node1, cl.addrs[0], &st) != 0)
		fail_msg("status of node 1: %s", raftlock_errmsg(node1));
	raftlock_status_free(st);
	raftlock_client_close(node1);
	assert_int_equal(lock_once(fresh, "rl/b"), 0);
	shell("mv %s/node-1.key.good %s/node-1.key && mv %s.good %s", live, live, tokens_path,
	      tokens_path);

	raftlock_lock_free(kept_lock);
	raftlock_session_close(kept);
	raftlock_client_close(before);
	raftlock_client_close(fresh);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rotate_then_refuse_bad_files),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
