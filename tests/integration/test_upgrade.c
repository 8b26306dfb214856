/* Upgrades one node at a time (docs/OPERATIONS.md, "Upgrades"), with two
 * builds that differ by one command: raftlockd-level1 (feature level 1,
 * without ACL_DELETE) and raftlockd (level 2). A 3-node cluster of the
 * level-1 build is upgraded node by node (SIGTERM, start the new build)
 * while 16 clients lock and unlock: no client call fails. ACL_DELETE is
 * refused with a clear error until every voter runs level 2, and works
 * once the leader has recorded level 2. A level-1 build then refuses to
 * run on a member's data directory, from its LMDB or, with LMDB gone,
 * at the entry that raised the level. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "cluster.h"
#include "lockutil.h"

#define LEVEL1 RAFTLOCK_BINARY_DIR "/bin/raftlockd-level1"
#define LEVEL2 RAFTLOCK_BINARY_DIR "/bin/raftlockd"
/* The level of that build (server/feature_level.h): 2 brought ACL_DELETE,
 * 3 lock sets, the deadlock check and elections, 4 snapshot images summed
 * by words, 5 a session's names in a table of their own (moved there, with
 * the clients holding and awaiting locks, by the entry that records it),
 * 6 and 7 snapshots dumped off the loop and packed, 8 a DROP_BOUND that
 * carries its deadline, 9 a session's outcomes in a table of their own
 * (moved there, with the clients' retries answered from them, by the entry
 * that records it), 10 a restored cluster's first entry forgetting the
 * saved cluster's member book, 11 the ids removed noted in the member
 * book; the upgraded cluster records the lowest its voters report. */
#define FULL "11"
#define FULL_LEVEL 11
/* The level that lock sets, elections and revocation need. */
#define NEEDED "3"
#define CLIENTS 16
#define TTL_MS 10000
#define CALL_MS 10000

#define TOKEN "upgrade-test-token-of-root"

static struct tcluster cl;
static char dir[] = "/tmp/raftlock-upgrade-XXXXXX", tokens_path[64];
static atomic_bool stop;
static atomic_ullong calls, failures;

struct worker {
	pthread_t th;
	int i;
	char first_error[256];
};

static struct worker workers[CLIENTS];

static void note_failure(struct worker *w, raftlock_client *c, const char *what, int rv)
{
	atomic_fetch_add(&failures, 1);
	if (w->first_error[0] == '\0')
		snprintf(w->first_error, sizeof w->first_error, "%s: %s (%s)", what,
			 raftlock_strerror(rv), c ? raftlock_errmsg(c) : "");
}

/* One client: lock and unlock a name it shares with one other client,
 * as long as the test runs; every call counted, every failure too. */
static void *work(void *arg)
{
	struct worker *w = arg;
	struct raftlock_client_options o = {0};
	o.addresses = cl.addrs;
	o.n_addresses = (size_t)cl.n;
	o.client_name = "upgrade-test";
	o.request_timeout_ms = CALL_MS;
	o.auth_token = TOKEN;
	raftlock_client *c = NULL;
	int rv = raftlock_client_open(&o, &c, NULL);
	if (rv != 0) {
		note_failure(w, NULL, "client open", rv);
		return NULL;
	}
	struct raftlock_session_options so = {.ttl_ms = TTL_MS};
	raftlock_session *s = NULL;
	atomic_fetch_add(&calls, 1);
	if ((rv = raftlock_session_open(c, &so, &s)) != 0) {
		note_failure(w, c, "session open", rv);
		raftlock_client_close(c);
		return NULL;
	}
	char name[32];
	snprintf(name, sizeof name, "upgrade/%d", w->i / 2);
	raftlock_lock *l = NULL;
	raftlock_lock_new(s, name, NULL, &l);
	while (!atomic_load(&stop) && raftlock_session_valid(s)) {
		atomic_fetch_add(&calls, 1);
		rv = raftlock_lock_acquire(l, RAFTLOCK_EXCLUSIVE, 1, CALL_MS, NULL);
		if (rv != 0) {
			note_failure(w, c, "acquire", rv);
			continue;
		}
		tl_sleep_ms(5);
		atomic_fetch_add(&calls, 1);
		if ((rv = raftlock_lock_release(l, NULL)) != 0)
			note_failure(w, c, "release", rv);
	}
	if (!raftlock_session_valid(s))
		note_failure(w, c, "session lost", RAFTLOCK_ESESSION);
	raftlock_lock_free(l);
	atomic_fetch_add(&calls, 1);
	if ((rv = raftlock_session_close(s)) != 0)
		note_failure(w, c, "session close", rv);
	raftlock_client_close(c);
	return NULL;
}

/* Authentication on (ACL_DELETE, the level-2 command, needs it): one
 * token, of the admin identity, for every client. */
static int setup(void **state)
{
	(void)state;
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(tokens_path, sizeof tokens_path, "%s/tokens", dir);
	uint8_t d[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	FILE *f = fopen(tokens_path, "w");
	if (f == NULL || EVP_Digest(TOKEN, strlen(TOKEN), d, &n, EVP_sha256(), NULL) != 1)
		return -1;
	fprintf(f, "root ");
	for (unsigned i = 0; i < n; i++)
		fprintf(f, "%02x", d[i]);
	fprintf(f, "\n");
	fclose(f);
	static const char *args[] = {"--auth", "on", "--auth-tokens", tokens_path, "--auth-admin",
				     "root",   NULL};
	memcpy(cl.extra_args, args, sizeof args);
	for (int i = 0; i < 3; i++)
		cl.bin[i] = LEVEL1;
	tcluster_start(&cl, 3, 1000);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return tcluster_destroy_and_remove(&cl, dir);
}

static raftlock_client *admin_client(void)
{
	struct raftlock_client_options o = {0};
	o.addresses = cl.addrs;
	o.n_addresses = (size_t)cl.n;
	o.client_name = "upgrade-admin";
	o.request_timeout_ms = 15000;
	o.auth_token = TOKEN;
	raftlock_client *c = NULL;
	assert_int_equal(raftlock_client_open(&o, &c, NULL), 0);
	return c;
}

/* ACL_DELETE of a rule that does not exist: RAFTLOCK_ENOTFOUND once the
 * cluster may run it, RAFTLOCK_ESTATE saying why before. */
static int acl_delete(raftlock_client *c, char *msg, size_t len)
{
	int rv = raftlock_acl_delete(c, "nobody", "upgrade/");
	snprintf(msg, len, "%s", raftlock_errmsg(c));
	return rv;
}

/* Waits until node i has applied what the leader had committed. */
static void wait_caught_up(int i)
{
	Raftlock__StatusInfo *lead = tl_leader_status(&cl);
	uint64_t want = lead->commit_index;
	raftlock__status_info__free_unpacked(lead, NULL);
	for (int k = 0; k < 400; k++) {
		Raftlock__StatusInfo *me = tcluster_status(&cl, i);
		bool done = me != NULL && me->applied_index >= want;
		if (me != NULL)
			raftlock__status_info__free_unpacked(me, NULL);
		if (done)
			return;
		tl_sleep_ms(50);
	}
	fail_msg("node %d did not catch up", i + 1);
}

/* Revocation's requests (level 3, feature_level.h): a revoke, an
 * acquire with a maximum hold time and a session bound to its
 * connection, each refused with RAFTLOCK_ESTATE (want) or working (0). */
static void revocation_requests(raftlock_client *admin, raftlock_session *s, int want)
{
	uint32_t count = 0;
	raftlock_lock *held = tl_lock(s, "upgrade/revoked");
	if (want == 0)
		tl_take(held);
	assert_int_equal(raftlock_revoke(admin, "upgrade/revoked", 0, 0, &count), want);
	if (want != 0)
		tl_assert_errmsg_has(admin, "feature level " NEEDED);
	else
		assert_int_equal(count, 1);
	raftlock_lock_free(held);

	struct raftlock_lock_options lo = {.max_hold_ms = 60000};
	raftlock_lock *limited = NULL;
	assert_int_equal(raftlock_lock_new(s, "upgrade/limited", &lo, &limited), 0);
	uint64_t token = 0;
	assert_int_equal(raftlock_lock_acquire(limited, RAFTLOCK_EXCLUSIVE, 1, 0, &token), want);
	if (want == 0)
		assert_int_equal(raftlock_lock_release(limited, NULL), 0);
	raftlock_lock_free(limited);

	struct raftlock_session_options so = {.ttl_ms = TTL_MS, .bind_to_connection = true};
	raftlock_session *bound = NULL;
	assert_int_equal(raftlock_session_open(admin, &so, &bound), want);
	if (want != 0)
		tl_assert_errmsg_has(admin, "feature level " NEEDED);
	else
		assert_int_equal(raftlock_session_close(bound), 0);
}

static void rolling_upgrade(void **state)
{
	(void)state;
	raftlock_client *admin = admin_client();
	char msg[512];
	for (int i = 0; i < CLIENTS; i++) {
		workers[i].i = i;
		assert_int_equal(pthread_create(&workers[i].th, NULL, work, &workers[i]), 0);
	}
	tl_sleep_ms(1500);
	assert_int_equal(acl_delete(admin, msg, sizeof msg), RAFTLOCK_ESTATE);
	if (strstr(msg, "feature level 2") == NULL)
		fail_msg("unclear refusal: %s", msg);
	/* An election publishes a value: level 3, refused at once before. */
	raftlock_session *es = tl_session(admin, TTL_MS);
	raftlock_leader *ld = NULL;
	assert_int_equal(raftlock_campaign(es, "upgrade/leader", "v1", 5000, &ld), RAFTLOCK_ESTATE);
	tl_assert_errmsg_has(admin, "feature level " NEEDED);
	assert_null(ld);
	revocation_requests(admin, es, RAFTLOCK_ESTATE);

	for (int i = 0; i < cl.n; i++) {
		int st = tcluster_stop(&cl, i);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		cl.bin[i] = LEVEL2;
		tcluster_restart(&cl, i);
		wait_caught_up(i);
		tl_sleep_ms(1000);
		if (i < cl.n - 1) {
			/* a voter still lacks level 2 */
			assert_int_equal(acl_delete(admin, msg, sizeof msg), RAFTLOCK_ESTATE);
			Raftlock__StatusInfo *lead = tl_leader_status(&cl);
			assert_int_equal(lead->cluster_feature_level, 1);
			raftlock__status_info__free_unpacked(lead, NULL);
		}
	}
	uint32_t level = 0;
	for (int k = 0; k < 100 && level != FULL_LEVEL; k++) {
		Raftlock__StatusInfo *lead = tl_leader_status(&cl);
		level = lead->cluster_feature_level;
		assert_int_equal(lead->feature_level, FULL_LEVEL);
		raftlock__status_info__free_unpacked(lead, NULL);
		if (level != FULL_LEVEL)
			tl_sleep_ms(100);
	}
	assert_int_equal(level, FULL_LEVEL);
	/* what docs/OPERATIONS.md, "Upgrades", says to look at */
	char cmd[512], out[8192] = "";
	snprintf(cmd, sizeof cmd, "%s --endpoints %s,%s,%s status --json",
		 RAFTLOCK_BINARY_DIR "/bin/raftlock", cl.addrs[0], cl.addrs[1], cl.addrs[2]);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	out[fread(out, 1, sizeof out - 1, p)] = '\0';
	assert_int_equal(pclose(p), 0);
	const char *at = out;
	for (int i = 0; i < cl.n; i++) {
		at = strstr(at, "\"feature_level\": " FULL ", \"cluster_feature_level\": " FULL);
		if (at == NULL)
			fail_msg("raftlock status --json: %s", out);
		at++;
	}
	assert_int_equal(acl_delete(admin, msg, sizeof msg), RAFTLOCK_ENOTFOUND);
	/* and elections work at the new level */
	assert_int_equal(raftlock_campaign(es, "upgrade/leader", "v1", 5000, &ld), 0);
	assert_int_equal(raftlock_resign(ld), 0);
	revocation_requests(admin, es, 0);
	assert_int_equal(raftlock_session_close(es), 0);
	tl_sleep_ms(1000);

	atomic_store(&stop, true);
	for (int i = 0; i < CLIENTS; i++)
		pthread_join(workers[i].th, NULL);
	for (int i = 0; i < CLIENTS; i++)
		if (workers[i].first_error[0] != '\0')
			fprintf(stderr, "client %d: %s\n", i, workers[i].first_error);
	printf("rolling upgrade of %d nodes under %d clients: %llu client calls, %llu failed\n",
	       cl.n, CLIENTS, (unsigned long long)atomic_load(&calls),
	       (unsigned long long)atomic_load(&failures));
	assert_true(atomic_load(&calls) > 1000);
	assert_int_equal(atomic_load(&failures), 0);
	raftlock_client_close(admin);
}

/* The level-1 build on a member of the level-2 cluster: refused at start
 * from LMDB, and, with LMDB gone, stopped at the entry raising the level. */
static void lower_build_refused(void **state)
{
	(void)state;
	int st = tcluster_stop(&cl, 2);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	cl.bin[2] = LEVEL1;
	tcluster_restart(&cl, 2);
	bool said = false;
	for (int k = 0; k < 200 && !said; k++) {
		said = tcluster_log_has(&cl, 2,
					"the cluster runs at feature level " FULL "; this "
					"raftlockd supports level 1");
		if (!said)
			tl_sleep_ms(50);
	}
	assert_true(said);
	tl_sleep_ms(200);
	st = tcluster_stop(&cl, 2); /* it has exited */
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);

	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -f '%s/n3/state/data.mdb' '%s/n3/state/CLEAN'", cl.dir,
		 cl.dir);
	assert_int_equal(system(cmd), 0);
	tcluster_restart(&cl, 2);
	bool stopped = false;
	for (int k = 0; k < 200 && !stopped; k++) {
		stopped = tcluster_log_has(&cl, 2, "raises the cluster to feature level " FULL) ||
			  tcluster_log_has(&cl, 2, "the cluster runs at feature level " FULL);
		if (!stopped)
			tl_sleep_ms(50);
	}
	assert_true(stopped);
	tcluster_signal(&cl, 2, SIGKILL);

	/* the new build takes the member back */
	cl.bin[2] = LEVEL2;
	tcluster_restart(&cl, 2);
	wait_caught_up(2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rolling_upgrade),
		cmocka_unit_test(lower_build_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
