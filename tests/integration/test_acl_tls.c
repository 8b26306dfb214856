/* test_acl_tls.c: identities from client certificates (issue 11, item 3).
 * A 3-node cluster with client-tls = mutual and auth = on, certificates from
 * deploy/make-certs, the bootstrap admin named by the CN of one of them and
 * no tokens: each client is the CN of its certificate. Spoken over TLS at
 * the raw protocol (the client library has no TLS yet). alice's acquire is
 * refused naming her CN until the admin grants it; a third identity can
 * neither use nor close her session, the admin can close it. A node
 * started with --join claims its id with its client certificate: member
 * 4's node presenting member 5's certificate is refused and stops, and
 * with its own (make-certs' node-4.pem, CN raftlock-node-4) it joins. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"
#include "raftlock.h"

static char dir[] = "/tmp/raftlock-acltls-XXXXXX";
static char certs[300];
static struct tcluster cl;

static int setup(void **state)
{
	(void)state;
	if (mkdtemp(dir) == NULL)
		return -1;
	char cmd[1024];
	snprintf(cmd, sizeof cmd,
		 "%s/deploy/make-certs %s/certs --nodes 5 --client harness --client ops "
		 "--client alice >/dev/null",
		 RAFTLOCK_SOURCE_DIR, dir);
	if (system(cmd) != 0)
		return -1;
	snprintf(certs, sizeof certs, "%s/certs", dir);
	cl.client_tls = "mutual";
	cl.tls_dir = certs;
	cl.extra_args[0] = "--auth";
	cl.extra_args[1] = "on";
	cl.extra_args[2] = "--auth-admin";
	cl.extra_args[3] = "ops";
	tcluster_start(&cl, 3, 500);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return tcluster_destroy_and_remove(&cl, dir) == 0 ? 0 : -1;
}

/* Sends env to the leader as client `who` (its certificate); returns the
 * response envelope (the caller frees it). */
static Raftlock__Envelope *ask(const char *who, Raftlock__Envelope *env)
{
	char ca[400], cert[400], key[400], err[512] = "";
	snprintf(ca, sizeof ca, "%s/ca.pem", certs);
	snprintf(cert, sizeof cert, "%s/client-%s.pem", certs, who);
	snprintf(key, sizeof key, "%s/client-%s.key", certs, who);
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	struct raw_tls t;
	if (raw_tls_connect(&t, cl.client_port[leader], ca, cert, key, err, sizeof err) != 0)
		fail_msg("connect as %s: %s", who, err);
	env->id = 7;
	assert_int_equal(raw_tls_send_envelope(&t, env), 0);
	Raftlock__Envelope *r = raw_tls_recv_envelope(&t, 5000, err, sizeof err);
	if (r == NULL)
		fail_msg("no answer to %s: %s", who, err);
	raw_tls_close(&t);
	assert_int_equal(r->body_case, RAFTLOCK__ENVELOPE__BODY_RESPONSE);
	return r;
}

static uint64_t open_session(const char *who)
{
	Raftlock__OpenSessionRequest open = RAFTLOCK__OPEN_SESSION_REQUEST__INIT;
	open.ttl_ms = 10000;
	open.nonce = 42;
	open.secret = raw_secret;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION;
	env.open_session = &open;
	Raftlock__Envelope *r = ask(who, &env);
	assert_int_equal(r->response->status, 0);
	assert_int_equal(r->response->result->status, 0);
	uint64_t id = r->response->result->session;
	raftlock__envelope__free_unpacked(r, NULL);
	return id;
}

/* An acquire of `name` in session with seq; the response (freed by the
 * caller). */
static Raftlock__Envelope *acquire(const char *who, uint64_t session, uint64_t seq,
				   const char *name)
{
	Raftlock__Acquire acq = RAFTLOCK__ACQUIRE__INIT;
	acq.name = (char *)name;
	acq.owner = 1;
	Raftlock__AcquireRequest req = RAFTLOCK__ACQUIRE_REQUEST__INIT;
	req.acquire = &acq;
	Raftlock__Sequence h = RAFTLOCK__SEQUENCE__INIT;
	h.session = session;
	h.seq = seq;
	h.secret = raw_secret;
	h.ack_below = seq;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.sequence = &h;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_ACQUIRE;
	env.acquire = &req;
	return ask(who, &env);
}

static Raftlock__Envelope *close_session(const char *who, uint64_t session, uint64_t seq)
{
	Raftlock__CloseSessionRequest req = RAFTLOCK__CLOSE_SESSION_REQUEST__INIT;
	Raftlock__Sequence h = RAFTLOCK__SEQUENCE__INIT;
	h.session = session;
	h.seq = seq;
	h.secret = raw_secret;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.sequence = &h;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION;
	env.close_session = &req;
	return ask(who, &env);
}

static void assert_refused(Raftlock__Envelope *r, const char *want)
{
	assert_int_equal(r->response->status, RAFTLOCK_EPERM);
	if (strstr(r->response->message, want) == NULL)
		fail_msg("refusal says '%s', not '%s'", r->response->message, want);
	raftlock__envelope__free_unpacked(r, NULL);
}

static void test_certificate_identity(void **state)
{
	(void)state;
	uint64_t s = open_session("alice");
	assert_refused(acquire("alice", s, 1, "jobs/nightly"),
		       "identity 'alice' has no 'lock' on 'jobs/nightly'");

	/* ops, named by its certificate, grants; alice then takes the lock. */
	Raftlock__AclSet rule = RAFTLOCK__ACL_SET__INIT;
	rule.identity = "alice";
	rule.prefix = "jobs/";
	rule.perms = RAFTLOCK_ACL_LOCK;
	Raftlock__AclSetRequest set = RAFTLOCK__ACL_SET_REQUEST__INIT;
	set.rule = &rule;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_ACL_SET;
	env.acl_set = &set;
	assert_refused(ask("alice", &env), "identity 'alice' has no 'admin' on 'jobs/'");
	assert_refused(ask("harness", &env), "identity 'harness' has no 'admin' on 'jobs/'");
	Raftlock__Envelope *r = ask("ops", &env);
	assert_int_equal(r->response->status, 0);
	assert_int_equal(r->response->result->status, 0);
	raftlock__envelope__free_unpacked(r, NULL);
	r = acquire("alice", s, 2, "jobs/nightly");
	assert_int_equal(r->response->status, 0);
	assert_int_equal(r->response->result->status, 0);
	assert_true(r->response->result->token > 0);
	raftlock__envelope__free_unpacked(r, NULL);

	/* Her session is hers: another identity can neither use nor close it,
	 * an admin of every name can close it. */
	assert_refused(acquire("harness", s, 3, "jobs/other"), "belongs to another identity");
	assert_refused(close_session("harness", s, 3), "closing it takes 'admin'");
	r = close_session("ops", s, 3);
	assert_int_equal(r->response->status, 0);
	assert_int_equal(r->response->result->status, 0);
	raftlock__envelope__free_unpacked(r, NULL);
	r = acquire("alice", s, 4, "jobs/nightly");
	assert_int_equal(r->response->result->status, RAFTLOCK_ESESSION);
	raftlock__envelope__free_unpacked(r, NULL);
}

/* Member id's state in the leader's list, as ops sees it: 0 absent, 1
 * added and waiting for its node, 2 joined. */
static int member_state(uint64_t id)
{
	Raftlock__MemberListRequest req = RAFTLOCK__MEMBER_LIST_REQUEST__INIT;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_MEMBER_LIST;
	env.member_list = &req;
	Raftlock__Envelope *r = ask("ops", &env);
	assert_int_equal(r->response->status, 0);
	int state = 0;
	const Raftlock__MemberList *list = r->response->member_list;
	for (size_t i = 0; list != NULL && i < list->n_members; i++)
		if (list->members[i]->id == id)
			state = list->members[i]->joined ? 2 : 1;
	raftlock__envelope__free_unpacked(r, NULL);
	return state;
}

static void test_join_with_node_certificate(void **state)
{
	(void)state;
	int slot = tcluster_add_slot(&cl, -1, 4);
	Raftlock__MemberAdd add = RAFTLOCK__MEMBER_ADD__INIT;
	add.id = 4;
	add.raft_address = (char *)tcluster_raft_addr(&cl, slot);
	add.client_address = cl.client_addr[slot];
	Raftlock__MemberAddRequest req = RAFTLOCK__MEMBER_ADD_REQUEST__INIT;
	req.member = &add;
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_MEMBER_ADD;
	env.member_add = &req;
	Raftlock__Envelope *r = ask("ops", &env);
	assert_int_equal(r->response->status, 0);
	raftlock__envelope__free_unpacked(r, NULL);
	assert_int_equal(member_state(4), 1);

	/* Member 5's certificate, of the cluster's CA: refused, the node
	 * stops, the id still waits for its node. */
	char dir4[300], raft[32], client[32], join[128], cert[400], key[400], ca[400];
	char out[8192];
	snprintf(dir4, sizeof dir4, "%s/n%d", cl.dir, slot + 1);
	snprintf(raft, sizeof raft, "127.0.0.1:%d", cl.raft_port[slot]);
	snprintf(client, sizeof client, "127.0.0.1:%d", cl.client_port[slot]);
	snprintf(join, sizeof join, "%s,%s,%s", cl.client_addr[0], cl.client_addr[1],
		 cl.client_addr[2]);
	snprintf(cert, sizeof cert, "%s/node-5.pem", certs);
	snprintf(key, sizeof key, "%s/node-5.key", certs);
	snprintf(ca, sizeof ca, "%s/ca.pem", certs);
	char *argv[] = {"raftlockd", "--id",
			"4",         "--data-dir",
			dir4,        "--cluster",
			cl.name,     "--raft-address",
			raft,        "--client-address",
			client,      "--join",
			join,        "--client-tls",
			"mutual",    "--client-tls-cert",
			cert,        "--client-tls-key",
			key,         "--client-tls-ca",
			ca,          NULL};
	int st = tcluster_run_raftlockd(argv, out, sizeof out, 15000);
	assert_true(st > 0);                   /* it stopped by itself, with an error */
	assert_null(strstr(out, "Sanitizer")); /* a refusal leaks nothing either */
	if (strstr(out, "takes identity 'raftlock-node-4'") == NULL ||
	    strstr(out, "'raftlock-node-5' is neither") == NULL)
		fail_msg("the refused join says: %s", out);
	assert_int_equal(member_state(4), 1);

	/* Its own certificate (what the harness gives slot 4): it joins. */
	tcluster_restart(&cl, slot);
	uint64_t end = tcluster_now_ms() + 15000;
	while (member_state(4) != 2) {
		if (tcluster_now_ms() > end)
			fail_msg("member 4's node did not join with its own certificate");
		usleep(100000);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_certificate_identity),
		cmocka_unit_test(test_join_with_node_certificate),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
