/*
 * test_peer_tls_cluster.c: a real 3-node cluster with mutual TLS on its raft port
 * (peer-tls-cert/key/ca, certificates from deploy/make-certs).
 *
 * serves_over_tls: the cluster elects a leader and serves a lock.
 *
 * both_ports: with client-tls = mutual too, a leader is elected and found.
 *
 * impostors_refused: with the cluster serving, processes that pose as a
 * member try the raft ports: a raftlockd configured as member 1 with a
 * certificate of another CA, one with an expired certificate of the
 * cluster's CA, a TLS client with a valid certificate of another identity
 * (node 4's) whose hello claims id 1, member 2's certificate claiming id 3,
 * a raftlockd with a valid certificate of the cluster's CA for id 9, which
 * is no member, a TLS client without a certificate,
 * random bytes, and a ClientHello cut short. Every node logs refusals and keeps
 * serving; no node's term moves and the leader stays; a lock is still
 * granted afterwards.
 *
 * join_over_tls: with a lock held, member 4 is added and its node started
 * with --join and its own certificate of the cluster's CA: within
 * JOIN_BOUND_MS the leader has made it a voter and the node itself answers
 * a read of the lock with the holder's token. The joiner knows no member
 * of its own: it admits the leader's link because the answer to its join
 * named the members. Afterwards it still refuses a certificate of the
 * cluster's CA for id 9, which is no member.
 *
 * join_restarted_before_contact: the node of member 4 first started with
 * another CA's files refuses the leader's links and never hears from it;
 * killed, and started again with its own certificate of the cluster's CA,
 * it claims its id again and joins within JOIN_BOUND_MS.
 *
 * bad_settings: a partial set of peer-tls-* settings, and a certificate
 * that is another member's, are refused by --check-config and at start.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"
#include "peer_certs.h"

#define ELECTION_MS 1000
#define JOIN_BOUND_MS 20000

static struct tcluster cl;
static bool have_expired;

/* The cluster's CA: members 1-3, 4 (joins) and 9 (no member). The other
 * CA's and the expired ones: member 1 (impostors) and 4 (a join). */
static int make_certs(void **state)
{
	(void)state;
	return peer_certs_make(9, 4, &have_expired);
}

static int remove_certs(void **state)
{
	(void)state;
	return peer_certs_remove();
}

/* Three nodes with peer TLS, and client_tls on their client port (NULL:
 * plaintext) with the same certificates. */
static void start_cluster(const char *client_tls)
{
	memset(&cl, 0, sizeof cl);
	if (client_tls != NULL) {
		cl.client_tls = client_tls;
		cl.tls_dir = peer_certs_path("a");
	}
	cl.extra_args[0] = "--peer-tls-cert";
	cl.extra_args[1] = peer_certs_path("a/node-{id}.pem");
	cl.extra_args[2] = "--peer-tls-key";
	cl.extra_args[3] = peer_certs_path("a/node-{id}.key");
	cl.extra_args[4] = "--peer-tls-ca";
	cl.extra_args[5] = peer_certs_path("a/ca.pem");
	tcluster_start(&cl, 3, ELECTION_MS);
}

static void take_a_lock(const char *name)
{
	raftlock_client *c = tl_client(&cl);
	raftlock_session *s = tl_session(c, 5000);
	raftlock_lock *l = tl_lock(s, name);
	assert_true(tl_take(l) != 0);
	raftlock_lock_free(l);
	raftlock_session_close(s);
	raftlock_client_close(c);
}

static void test_serves_over_tls(void **state)
{
	(void)state;
	start_cluster(NULL);
	take_a_lock("over-tls");
	assert_int_equal(tcluster_destroy(&cl), 0);
}

/* Both ports on mutual TLS, with the same certificates: a leader is
 * elected and found through the client port. */
static void test_both_ports(void **state)
{
	(void)state;
	start_cluster("mutual");
	assert_true(tcluster_leader(&cl, 10000) >= 0);
	assert_int_equal(tcluster_destroy(&cl), 0);
}

static int log_count(int i, const char *what)
{
	return tcluster_log_count(&cl, i, what);
}

/* A loopback port that is free now (the kernel's pick). */
static int loopback_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

/* Runs a raftlockd that says it is member id (at a raft address of its
 * own, the real members 2 and 3 beside it) with the given files, for ms;
 * its log is returned in out. */
static void run_impostor(int id, const char *cert, const char *key, unsigned ms, char *out,
			 size_t len)
{
	char dir[300], self[100], m2[100], m3[100], id_arg[16];
	snprintf(dir, sizeof dir, "%s/impostor-%d", cl.dir, rand());
	snprintf(id_arg, sizeof id_arg, "%d", id);
	snprintf(self, sizeof self, "%d,127.0.0.1:%d,127.0.0.1:%d", id, loopback_port(),
		 loopback_port());
	snprintf(m2, sizeof m2, "2,127.0.0.1:%d,127.0.0.1:%d", cl.raft_port[1], cl.client_port[1]);
	snprintf(m3, sizeof m3, "3,127.0.0.1:%d,127.0.0.1:%d", cl.raft_port[2], cl.client_port[2]);
	char *argv[] = {"raftlockd",
			"--id",
			id_arg,
			"--data-dir",
			dir,
			"--cluster",
			cl.name,
			"--election-timeout",
			"1000",
			"--peer-tls-cert",
			(char *)cert,
			"--peer-tls-key",
			(char *)key,
			"--peer-tls-ca",
			peer_certs_path("a/ca.pem"),
			"--bootstrap",
			"--member",
			self,
			"--member",
			m2,
			"--member",
			m3,
			NULL};
	int st = tcluster_run_raftlockd(argv, out, len, (int)ms);
	if (st != -2) /* it runs until stopped */
		fail_msg("the impostor exited (%d): %s", st, out);
}

/* raftlock_peer_tls_refused_total of node i. */
static long long refused_metric(int i)
{
	return tcluster_metric(&cl, i, "raftlock_peer_tls_refused_total");
}

struct view {
	uint64_t term;
	uint64_t leader;
};

static void views(struct view v[3])
{
	for (int i = 0; i < 3; i++) {
		Raftlock__StatusInfo *st = tcluster_status(&cl, i);
		assert_non_null(st);
		v[i].term = st->term;
		v[i].leader = st->leader_id;
		raftlock__status_info__free_unpacked(st, NULL);
	}
}

/* A file holding the hello a member sends inside TLS (server/peer_tls.c:
 * protocol, id and raft address, big-endian) with the given id. */
static const char *hello_claiming(uint64_t id)
{
	static const char address[] = "127.0.0.1:1";
	unsigned char b[24 + sizeof address];
	uint64_t words[3] = {UINT64_C(0x524c504545520001), id, sizeof address};
	for (int w = 0; w < 3; w++)
		for (int k = 0; k < 8; k++)
			b[w * 8 + k] = (unsigned char)(words[w] >> (56 - 8 * k));
	memcpy(b + 24, address, sizeof address);
	char *path = peer_certs_path("hello-%llu.bin", (unsigned long long)id);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, sizeof b, f), sizeof b);
	fclose(f);
	return path;
}

static void test_impostors_refused(void **state)
{
	(void)state;
	char out[65536];
	start_cluster(NULL);
	int leader = tcluster_leader(&cl, 10000);
	assert_true(leader >= 0);
	struct view before[3], after[3];
	views(before);
	int refused0[3];
	for (int i = 0; i < 3; i++)
		refused0[i] = log_count(i, "refused");

	/* Another CA's certificate, though it trusts the cluster's CA. */
	run_impostor(1, peer_certs_path("b/node-1.pem"), peer_certs_path("b/node-1.key"), 2500, out,
		     sizeof out);
	assert_non_null(strstr(out, "refused"));
	assert_true(log_count(1, "unknown ca") + log_count(1, "certificate verify failed") > 0);

	/* The cluster's CA, expired. */
	if (have_expired) {
		run_impostor(1, peer_certs_path("expired/node-1.pem"),
			     peer_certs_path("expired/node-1.key"), 2500, out, sizeof out);
		assert_non_null(strstr(out, "refused"));
		/* it tries both members; either may have logged it (each
		 * logs refusals at a bounded rate, and the impostor before
		 * this one spent some) */
		assert_true(log_count(1, "certificate has expired") +
				    log_count(2, "certificate has expired") >
			    0);
	}

	/* A valid certificate of another identity (node 4's) whose hello claims
	 * member 1: raftlockd itself refuses to start so, so a TLS client sends
	 * the hello. */
	for (int i = 1; i < 3; i++) {
		/* (the TLS client's own verdict does not matter here) */
		tcluster_shell(
			"timeout 5 openssl s_client -quiet -connect 127.0.0.1:%d -cert %s -key %s "
			"-CAfile %s <%s >/dev/null 2>&1",
			cl.raft_port[i], peer_certs_path("a/node-4.pem"),
			peer_certs_path("a/node-4.key"), peer_certs_path("a/ca.pem"),
			hello_claiming(1));
		assert_true(log_count(i, "claims to be member 1") > 0);
	}
	/* Member 2's own certificate, claiming member 3. */
	tcluster_shell("timeout 5 openssl s_client -quiet -connect 127.0.0.1:%d -cert %s -key %s "
		       "-CAfile %s <%s >/dev/null 2>&1",
		       cl.raft_port[0], peer_certs_path("a/node-2.pem"),
		       peer_certs_path("a/node-2.key"), peer_certs_path("a/ca.pem"),
		       hello_claiming(3));
	assert_true(log_count(0, "claims to be member 3 (127.0.0.1:1) but its certificate is for "
				 "'raftlock-node-2'") > 0);

	/* A node with a valid certificate of the cluster's CA, for an id that
	 * is no member (9): it campaigns at members 2 and 3, which refuse it
	 * before raft sees a byte. */
	run_impostor(9, peer_certs_path("a/node-9.pem"), peer_certs_path("a/node-9.key"), 3000, out,
		     sizeof out);
	assert_non_null(strstr(out, "refused"));
	assert_true(log_count(1, "member 9 (") > 0 || log_count(2, "member 9 (") > 0);
	for (int i = 1; i < 3; i++)
		if (log_count(i, "member 9 (") > 0)
			assert_true(log_count(i, "is not a member of this node's cluster") > 0);

	/* No certificate at all; random bytes; a ClientHello cut short. */
	char junk[2000];
	for (size_t i = 0; i < sizeof junk; i++)
		junk[i] = (char)rand();
	static const char hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\x00";
	for (int i = 0; i < 3; i++) {
		tcluster_shell(
			"echo hello | timeout 5 openssl s_client -quiet -connect 127.0.0.1:%d "
			"-CAfile %s >/dev/null 2>&1",
			cl.raft_port[i], peer_certs_path("a/ca.pem"));
		int fd = raw_connect(cl.raft_port[i]);
		assert_true(fd >= 0);
		assert_int_equal(raw_send(fd, junk, sizeof junk), 0);
		assert_true(raw_closed(fd, 5000));
		close(fd);
		fd = raw_connect(cl.raft_port[i]);
		assert_true(fd >= 0);
		assert_int_equal(raw_send(fd, hello, sizeof hello - 1), 0);
		tl_sleep_ms(100);
		close(fd);
	}

	/* Every node refused something, is alive and saw no term change. */
	tl_sleep_ms(500);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(waitpid(cl.pid[i], NULL, WNOHANG), 0);
		assert_true(log_count(i, "refused") > refused0[i]); /* lines at a bounded rate */
		assert_true(refused_metric(i) >= 3);
	}
	views(after);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(after[i].term, before[i].term);
		assert_int_equal(after[i].leader, before[i].leader);
	}
	take_a_lock("after-impostors");
	assert_int_equal(tcluster_destroy(&cl), 0);
}

/* The role of member id in the leader's member list ("" when absent). */
static const char *role_of(raftlock_client *c, uint64_t id, char *buf, size_t len)
{
	struct raftlock_member_list *list;
	buf[0] = '\0';
	if (raftlock_member_list(c, &list) != 0)
		return buf; /* asked again */
	for (size_t i = 0; i < list->n_members; i++)
		if (list->members[i].id == id)
			snprintf(buf, len, "%s", list->members[i].role);
	raftlock_member_list_free(list);
	return buf;
}

/* The token of the holder of `name` that node `slot` itself knows (a stale
 * read at that node alone); 0 when it knows none yet. */
static uint64_t token_at(int slot, const char *name)
{
	struct raftlock_client_options o = {0};
	o.addresses = &cl.addrs[slot];
	o.n_addresses = 1;
	o.request_timeout_ms = 1000;
	raftlock_client *c = NULL;
	if (raftlock_client_open(&o, &c, NULL) != 0)
		return 0;
	struct raftlock_lock_info *info = NULL;
	uint64_t token = 0;
	if (raftlock_lock_get(c, name, true, &info) == 0) {
		if (info->n_holders == 1)
			token = info->holders[0].token;
		raftlock_lock_info_free(info);
	}
	raftlock_client_close(c);
	return token;
}

/* Sets the peer TLS files of the nodes started from now on: those of CA
 * directory dir ("a" or "b"). */
static void peer_files(const char *dir)
{
	static const char *const names[3] = {"node-{id}.pem", "node-{id}.key", "ca.pem"};
	static char paths[3][300]; /* kept: peer_certs_path's buffers rotate */
	for (int k = 0; k < 3; k++) {
		snprintf(paths[k], sizeof paths[k], "%s", peer_certs_path("%s/%s", dir, names[k]));
		cl.extra_args[2 * k + 1] = paths[k];
	}
}

/* A cluster with peer TLS, a lock "before-join" held through a session of
 * client c (token: its grant's), and member 4 added on slot, its node not
 * started yet. */
struct join_case {
	raftlock_client *c;
	raftlock_session *s;
	raftlock_lock *l;
	uint64_t token;
	int slot;
};

static void join_case_open(struct join_case *j)
{
	start_cluster(NULL);
	j->c = tl_client(&cl);
	j->s = tl_session(j->c, 30000);
	j->l = tl_lock(j->s, "before-join");
	j->token = tl_take(j->l);
	j->slot = tcluster_add_slot(&cl, -1, 4);
	if (raftlock_member_add(j->c, 4, tcluster_raft_addr(&cl, j->slot),
				cl.client_addr[j->slot]) != 0)
		fail_msg("member add 4: %s", raftlock_errmsg(j->c));
}

static void join_case_close(struct join_case *j)
{
	raftlock_lock_free(j->l);
	raftlock_session_close(j->s);
	raftlock_client_close(j->c);
	assert_int_equal(tcluster_destroy(&cl), 0);
}

/* Starts the node of member 4 (--join) and waits until it is a voter whose
 * node itself knows the lock's holder, for at most JOIN_BOUND_MS. */
static void join_within_bound(struct join_case *j)
{
	uint64_t start = tcluster_now_ms(), end = start + JOIN_BOUND_MS;
	tcluster_restart(&cl, j->slot);
	char role[16];
	while (strcmp(role_of(j->c, 4, role, sizeof role), "voter") != 0 ||
	       token_at(j->slot, "before-join") != j->token) {
		if (tcluster_now_ms() > end)
			fail_msg("after %d ms member 4 is '%s' and does not know the lock's "
				 "holder; its log refused %d links",
				 JOIN_BOUND_MS, role, log_count(j->slot, "refused"));
		tl_sleep_ms(100);
	}
	print_message("member 4 joined, a voter that knows the lock's holder, in %llu ms\n",
		      (unsigned long long)(tcluster_now_ms() - start));
}

static void test_join_over_tls(void **state)
{
	(void)state;
	struct join_case j;
	join_case_open(&j);
	peer_files("a"); /* node-4's certificate of the cluster's CA */
	join_within_bound(&j);

	/* The joiner admits members only: not a certificate for id 9. */
	tcluster_shell("timeout 5 openssl s_client -quiet -connect 127.0.0.1:%d -cert %s -key %s "
		       "-CAfile %s <%s >/dev/null 2>&1",
		       cl.raft_port[j.slot], peer_certs_path("a/node-9.pem"),
		       peer_certs_path("a/node-9.key"), peer_certs_path("a/ca.pem"),
		       hello_claiming(9));
	assert_true(log_count(j.slot, "member 9 (127.0.0.1:1) is not a member of this node's "
				      "cluster") > 0);
	join_case_close(&j);
}

/* A joining node first started with another CA's files refuses the leader
 * and never hears from it; killed, and started again with its right
 * certificate, it claims its id again and so learns whom to admit. */
static void test_join_restarted_before_contact(void **state)
{
	(void)state;
	struct join_case j;
	join_case_open(&j);
	peer_files("b");
	tcluster_restart(&cl, j.slot);
	uint64_t end = tcluster_now_ms() + 10000;
	while (log_count(j.slot, "refused") == 0) {
		if (tcluster_now_ms() > end)
			fail_msg("the node of another CA refused no link of the leader");
		tl_sleep_ms(100);
	}
	/* Killed, it leaves the segments libraft prepared (a clean stop
	 * removes them), but no term, vote or entry: it never heard from a
	 * leader. */
	tcluster_signal(&cl, j.slot, SIGKILL);
	char raft[320];
	snprintf(raft, sizeof raft, "%s/n%d/raft", cl.dir, j.slot + 1);
	assert_int_equal(tcluster_shell("test -e %s/open-1 && test ! -e %s/metadata1 && test ! -e "
					"%s/metadata2",
					raft, raft, raft),
			 0);
	peer_files("a");
	join_within_bound(&j);
	assert_int_equal(log_count(j.slot, "claiming member 4 again"), 1);
	join_case_close(&j);
}

/* Partial settings and another member's certificate are refused by
 * --check-config and at start, with messages that say why. */
static void test_bad_settings(void **state)
{
	(void)state;
	char out[4096], dir[] = "/tmp/raftlock-peer-tls-bad-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char *argv[] = {"raftlockd",
			"--id",
			"1",
			"--data-dir",
			dir,
			"--cluster",
			"c",
			"--member",
			"1,127.0.0.1:1,127.0.0.1:2",
			"--peer-tls-cert",
			peer_certs_path("a/node-2.pem"),
			"--check-config",
			NULL,
			NULL,
			NULL,
			NULL,
			NULL};
	assert_int_equal(tcluster_run_raftlockd(argv, out, sizeof out, 10000), 2);
	assert_non_null(strstr(out, "missing: peer-tls-key, peer-tls-ca"));
	argv[11] = "--peer-tls-key";
	argv[12] = peer_certs_path("a/node-2.key");
	argv[13] = "--peer-tls-ca";
	argv[14] = peer_certs_path("a/ca.pem");
	argv[15] = "--check-config";
	assert_int_equal(tcluster_run_raftlockd(argv, out, sizeof out, 10000), 2);
	assert_non_null(strstr(out, "common name 'raftlock-node-2'"));
	argv[15] = "--bootstrap"; /* start for real: refused as well */
	assert_int_equal(tcluster_run_raftlockd(argv, out, sizeof out, 10000), 1);
	assert_non_null(strstr(out, "common name 'raftlock-node-2'"));
	tcluster_shell("rm -rf %s", dir);
}

int main(void)
{
	srand((unsigned)getpid());
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_serves_over_tls),
		cmocka_unit_test(test_both_ports),
		cmocka_unit_test(test_impostors_refused),
		cmocka_unit_test(test_join_over_tls),
		cmocka_unit_test(test_join_restarted_before_contact),
		cmocka_unit_test(test_bad_settings),
	};
	return cmocka_run_group_tests(tests, make_certs, remove_certs);
}
