/* Membership (docs/OPERATIONS.md, "Membership" and "Replacing a machine";
 * docs/GUARANTEES.md, membership):
 *   - a 3-node cluster grows to 5 and shrinks back to 3 while four client
 *     threads lock: no call fails (the library retries what is retryable),
 *     mutual exclusion holds, every token is new and larger than the last
 *     of its lock, and every grant acknowledged before the changes is
 *     still held, with its token, after them;
 *   - removing the leader hands leadership over first;
 *   - a killed node is replaced by a new member (new id) that votes: the
 *     cluster then survives losing another original node;
 *   - a voter's removal that would leave voters a majority of which does
 *     not answer is refused, also when two removals come at once;
 *   - a wiped node is refused under its old id (plain start, --join), and
 *     an id is never added twice; a remove of an id never used is refused
 *     ("no member N") and changes nothing, one of a member removed before
 *     answers 0 (a retry);
 *   - with auth = on, a join needs identity raftlock-node-<its id> (here
 *     the token of --join-token-file): without it the claim is refused and
 *     the id stays waiting for its node. */
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"

#define ELECTION_MS 500
#define WORKERS 4
#define NAMES 2
#define MAX_GRANTS 20000
#define VOTER_DEADLINE_MS 20000

/* ------------------------------------------------------------ helpers -- */

/* The role of member id in the leader's list ("" when absent). */
static const char *role_of(raftlock_client *cl, uint64_t id, char *buf, size_t len)
{
	struct raftlock_member_list *list;
	int rv = raftlock_member_list(cl, &list);
	if (rv != 0)
		fail_msg("member list: %s", raftlock_errmsg(cl));
	buf[0] = '\0';
	for (size_t i = 0; i < list->n_members; i++)
		if (list->members[i].id == id)
			snprintf(buf, len, "%s", list->members[i].role);
	raftlock_member_list_free(list);
	return buf;
}

static void wait_role(raftlock_client *cl, uint64_t id, const char *role)
{
	char buf[16];
	uint64_t end = tcluster_now_ms() + VOTER_DEADLINE_MS;
	while (strcmp(role_of(cl, id, buf, sizeof buf), role) != 0) {
		if (tcluster_now_ms() > end)
			fail_msg("member %llu is '%s', not '%s', after %d ms",
				 (unsigned long long)id, buf, role, VOTER_DEADLINE_MS);
		tl_sleep_ms(100);
	}
}

static size_t n_members(raftlock_client *cl)
{
	struct raftlock_member_list *list;
	assert_int_equal(raftlock_member_list(cl, &list), 0);
	size_t n = list->n_members;
	raftlock_member_list_free(list);
	return n;
}

/* Adds member id on a new (or reused) slot and starts its node with
 * --join; returns the slot. */
static int grow(struct tcluster *c, raftlock_client *cl, int reuse, uint64_t id)
{
	int slot = tcluster_add_slot(c, reuse, id);
	int rv = raftlock_member_add(cl, id, tcluster_raft_addr(c, slot), c->client_addr[slot]);
	if (rv != 0)
		fail_msg("member add %llu: %s", (unsigned long long)id, raftlock_errmsg(cl));
	wait_role(cl, id, "standby");
	tcluster_restart(c, slot);
	wait_role(cl, id, "voter"); /* promoted by the leader once caught up */
	return slot;
}

static void remove_member(struct tcluster *c, raftlock_client *cl, int slot)
{
	uint64_t id = tcluster_id(c, slot);
	if (raftlock_member_remove(cl, id) != 0)
		fail_msg("member remove %llu: %s", (unsigned long long)id, raftlock_errmsg(cl));
	char buf[16];
	assert_string_equal(role_of(cl, id, buf, sizeof buf), "");
	assert_int_equal(tcluster_stop(c, slot), 0);
}

/* The cluster grants a lock (through a fresh session). */
static void assert_serves(raftlock_client *cl, const char *name)
{
	raftlock_session *s = tl_session(cl, 5000);
	raftlock_lock *l = tl_lock(s, name);
	tl_take(l);
	raftlock_lock_free(l);
	assert_int_equal(raftlock_session_close(s), 0);
}

/* ------------------------------------------------------------ workers -- */

struct shared {
	pthread_mutex_t mu;
	bool inside[NAMES]; /* a worker holds name i (mutual exclusion check) */
	uint64_t last_token[NAMES];
	uint64_t tokens[MAX_GRANTS];
	size_t n_tokens;
	unsigned violations;
	unsigned failures;
	char first_failure[256];
	volatile bool stop;
};

struct worker {
	struct shared *sh;
	struct tcluster *c;
	int index;
	uint64_t kept_token; /* the grant held through every change */
	uint64_t kept_session;
	raftlock_client *cl;
	raftlock_session *s;
	raftlock_lock *kept;
};

static void note_failure(struct shared *sh, const char *what, int rv, raftlock_client *cl)
{
	pthread_mutex_lock(&sh->mu);
	if (sh->failures++ == 0)
		snprintf(sh->first_failure, sizeof sh->first_failure, "%s: %d %s", what, rv,
			 raftlock_errmsg(cl));
	pthread_mutex_unlock(&sh->mu);
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	char name[32];
	snprintf(name, sizeof name, "grow/%d", w->index % NAMES);
	raftlock_lock *l = NULL;
	if (raftlock_lock_new(w->s, name, NULL, &l) != 0) {
		note_failure(sh, "lock_new", -1, w->cl);
		return NULL;
	}
	int k = w->index % NAMES;
	while (!sh->stop) {
		uint64_t token = 0;
		int rv = raftlock_lock_acquire(l, RAFTLOCK_EXCLUSIVE, 0, 20000, &token);
		if (rv != 0) {
			note_failure(sh, "acquire", rv, w->cl);
			break;
		}
		pthread_mutex_lock(&sh->mu);
		if (sh->inside[k] || token <= sh->last_token[k])
			sh->violations++;
		sh->inside[k] = true;
		sh->last_token[k] = token;
		if (sh->n_tokens < MAX_GRANTS)
			sh->tokens[sh->n_tokens++] = token;
		pthread_mutex_unlock(&sh->mu);
		tl_sleep_ms(2);
		pthread_mutex_lock(&sh->mu);
		sh->inside[k] = false;
		pthread_mutex_unlock(&sh->mu);
		rv = raftlock_lock_release(l, NULL);
		if (rv != 0) {
			note_failure(sh, "release", rv, w->cl);
			break;
		}
	}
	raftlock_lock_free(l);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The grant worker w took before the changes is still its, with its token. */
static void check_kept(struct worker *w)
{
	char name[32];
	snprintf(name, sizeof name, "kept/%d", w->index);
	struct raftlock_lock_info *info = NULL;
	assert_int_equal(raftlock_lock_get(w->cl, name, false, &info), 0);
	assert_int_equal(info->n_holders, 1);
	assert_int_equal(info->holders[0].session, w->kept_session);
	assert_int_equal(info->holders[0].token, w->kept_token);
	raftlock_lock_info_free(info);
	assert_int_equal(raftlock_lock_token(w->kept), w->kept_token);
}

/* -------------------------------------------------------------- tests -- */

static void test_grow_and_shrink_under_load(void **state)
{
	(void)state;
	static struct tcluster c;
	static struct shared sh;
	struct worker w[WORKERS];
	pthread_t th[WORKERS];
	memset(&sh, 0, sizeof sh);
	pthread_mutex_init(&sh.mu, NULL);
	tcluster_start(&c, 3, ELECTION_MS);
	raftlock_client *admin = tl_client(&c);
	for (int i = 0; i < WORKERS; i++) {
		w[i] = (struct worker){.sh = &sh, .c = &c, .index = i};
		w[i].cl = tl_client(&c);
		w[i].s = tl_session(w[i].cl, 10000);
		w[i].kept_session = raftlock_session_id(w[i].s);
		char name[32];
		snprintf(name, sizeof name, "kept/%d", i);
		w[i].kept = tl_lock(w[i].s, name);
		w[i].kept_token = tl_take(w[i].kept);
		assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
	}
	tl_sleep_ms(500);
	int s4 = grow(&c, admin, -1, 4);
	int s5 = grow(&c, admin, -1, 5);
	assert_int_equal(n_members(admin), 5);
	tl_sleep_ms(500);
	remove_member(&c, admin, s5);
	remove_member(&c, admin, s4);
	assert_int_equal(n_members(admin), 3);
	tl_sleep_ms(500);
	sh.stop = true;
	for (int i = 0; i < WORKERS; i++)
		pthread_join(th[i], NULL);
	if (sh.failures > 0)
		fail_msg("%u client calls failed; first: %s", sh.failures, sh.first_failure);
	assert_int_equal(sh.violations, 0);
	assert_true(sh.n_tokens > 50);
	qsort(sh.tokens, sh.n_tokens, sizeof sh.tokens[0], cmp_u64);
	for (size_t i = 1; i < sh.n_tokens; i++)
		assert_true(sh.tokens[i] > sh.tokens[i - 1]); /* no token twice */
	for (int i = 0; i < WORKERS; i++) {
		check_kept(&w[i]);
		raftlock_lock_free(w[i].kept);
		assert_int_equal(raftlock_session_close(w[i].s), 0);
		raftlock_client_close(w[i].cl);
	}
	printf("grow 3->5->3: %zu grants under load, none failed\n", sh.n_tokens);
	raftlock_client_close(admin);
	assert_int_equal(tcluster_destroy(&c), 0);
}

/* A member that joined (it has no --member list) knows every member's
 * client address, the founding ones included (the leader records them in
 * the member book): its STATUS names the leader's, and it can redirect. */
static void assert_knows_addresses(struct tcluster *c, int slot)
{
	uint64_t end = tcluster_now_ms() + 5000;
	for (;;) {
		Raftlock__StatusInfo *st = tcluster_status(c, slot);
		bool all = st != NULL && st->n_members > 0 && st->leader_address[0] != '\0';
		for (size_t i = 0; all && i < st->n_members; i++)
			all = st->members[i]->client_address[0] != '\0';
		if (st != NULL)
			raftlock__status_info__free_unpacked(st, NULL);
		if (all)
			return;
		if (tcluster_now_ms() > end)
			fail_msg("slot %d does not know every member's client address", slot);
		tl_sleep_ms(100);
	}
}

static void test_remove_leader(void **state)
{
	(void)state;
	static struct tcluster c;
	tcluster_start(&c, 3, ELECTION_MS);
	raftlock_client *cl = tl_client(&c);
	int s4 = grow(&c, cl, -1, 4);
	assert_knows_addresses(&c, s4);
	int leader = tcluster_leader(&c, 10000);
	assert_true(leader >= 0);
	uint64_t old = tcluster_id(&c, leader);
	remove_member(&c, cl, leader);
	int now = tcluster_leader(&c, 10000);
	assert_true(now >= 0 && now != leader);
	assert_true(tcluster_log_has(&c, leader, "handing leadership over first"));
	char buf[16];
	assert_string_equal(role_of(cl, old, buf, sizeof buf), "");
	assert_int_equal(n_members(cl), 3);
	assert_serves(cl, "after-remove");
	raftlock_client_close(cl);
	assert_int_equal(tcluster_destroy(&c), 0);
}

static void test_replace_killed_node(void **state)
{
	(void)state;
	static struct tcluster c;
	tcluster_start(&c, 3, ELECTION_MS);
	raftlock_client *cl = tl_client(&c);
	raftlock_session *s = tl_session(cl, 10000);
	raftlock_lock *l = tl_lock(s, "held-through-replace");
	uint64_t token = tl_take(l);
	int leader = tcluster_leader(&c, 10000);
	assert_true(leader >= 0);
	int lost = (leader + 1) % 3, other = (leader + 2) % 3;
	uint64_t lost_id = tcluster_id(&c, lost);
	tcluster_wipe(&c, lost); /* its machine is gone, data and all */
	int slot = tcluster_add_slot(&c, lost, 6);
	int rv = raftlock_member_replace(cl, lost_id, 6, tcluster_raft_addr(&c, slot),
					 c.client_addr[slot]);
	if (rv != 0)
		fail_msg("member replace: %s", raftlock_errmsg(cl));
	tcluster_restart(&c, slot);
	wait_role(cl, 6, "voter");
	assert_int_equal(n_members(cl), 3);
	/* Node 6 votes: without another original, the leader still commits. */
	tcluster_signal(&c, other, SIGKILL);
	assert_true(tcluster_leader(&c, 15000) >= 0);
	struct raftlock_lock_info *info = NULL;
	assert_int_equal(raftlock_lock_get(cl, "held-through-replace", false, &info), 0);
	assert_int_equal(info->n_holders, 1);
	assert_int_equal(info->holders[0].token, token);
	raftlock_lock_info_free(info);
	raftlock_lock_free(l);
	raftlock_session_close(s);
	raftlock_client_close(cl);
	assert_int_equal(tcluster_destroy(&c), 0);
}

struct removal {
	raftlock_client *cl;
	uint64_t id;
	int rv;
	char msg[300];
};

static void *remove_thread(void *arg)
{
	struct removal *r = arg;
	r->rv = raftlock_member_remove(r->cl, r->id);
	snprintf(r->msg, sizeof r->msg, "%s", r->rv ? raftlock_errmsg(r->cl) : "");
	return NULL;
}

/* A voter's removal is refused (RAFTLOCK_ESTATE, the silent voters named,
 * nothing changed) when a majority of the voters that would remain does
 * not answer: raft counts a new configuration from its append, so the
 * cluster would commit nothing, the removal included, until they did.
 * 5 voters, 2 down: a live one's removal is refused, a down one's goes
 * through. Two removals at once are judged one after the other: of the
 * 4 voters left, one down, removing two live ones at once removes one and
 * refuses the other (both passing the check would leave 2 voters, one of
 * them down). Then the last down one goes, and the cluster serves. */
static void test_removal_keeps_a_live_majority(void **state)
{
	(void)state;
	static struct tcluster c;
	tcluster_start(&c, 5, ELECTION_MS);
	raftlock_client *cl = tl_client(&c);
	assert_serves(cl, "before");
	int leader = tcluster_leader(&c, 10000);
	assert_true(leader >= 0);
	int d1 = (leader + 1) % 5, d2 = (leader + 2) % 5, a = (leader + 3) % 5,
	    b = (leader + 4) % 5;
	uint64_t d1_id = tcluster_id(&c, d1), d2_id = tcluster_id(&c, d2);
	tcluster_signal(&c, d1, SIGKILL);
	tcluster_signal(&c, d2, SIGKILL);
	char silent[48], buf[16];
	snprintf(silent, sizeof silent, "silent: %llu, %llu)",
		 (unsigned long long)(d1_id < d2_id ? d1_id : d2_id),
		 (unsigned long long)(d1_id < d2_id ? d2_id : d1_id));
	if (raftlock_member_remove(cl, tcluster_id(&c, a)) != RAFTLOCK_ESTATE ||
	    strstr(raftlock_errmsg(cl), silent) == NULL)
		fail_msg("removing a live voter, 2 of 5 down: %s", raftlock_errmsg(cl));
	assert_string_equal(role_of(cl, tcluster_id(&c, a), buf, sizeof buf), "voter");
	assert_int_equal(n_members(cl), 5);
	assert_int_equal(raftlock_member_remove(cl, d1_id), 0);
	assert_int_equal(n_members(cl), 4);

	snprintf(silent, sizeof silent, "silent: %llu)", (unsigned long long)d2_id);
	struct removal ra = {cl, tcluster_id(&c, a), -99, ""},
		       rb = {cl, tcluster_id(&c, b), -99, ""};
	pthread_t ta, tb;
	assert_int_equal(pthread_create(&ta, NULL, remove_thread, &ra), 0);
	assert_int_equal(pthread_create(&tb, NULL, remove_thread, &rb), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	struct removal *done = ra.rv == 0 ? &ra : &rb, *refused = ra.rv == 0 ? &rb : &ra;
	if (done->rv != 0 || refused->rv != RAFTLOCK_ESTATE || strstr(refused->msg, silent) == NULL)
		fail_msg("removals of %llu and %llu at once, %llu down: %s (%s) and %s (%s)",
			 (unsigned long long)ra.id, (unsigned long long)rb.id,
			 (unsigned long long)d2_id, raftlock_strerror(ra.rv), ra.msg,
			 raftlock_strerror(rb.rv), rb.msg);
	assert_string_equal(role_of(cl, done->id, buf, sizeof buf), "");
	assert_string_equal(role_of(cl, refused->id, buf, sizeof buf), "voter");
	assert_string_equal(role_of(cl, d2_id, buf, sizeof buf), "voter");
	assert_int_equal(n_members(cl), 3);
	assert_int_equal(tcluster_stop(&c, done == &ra ? a : b), 0);
	assert_serves(cl, "after-refusal");

	/* The down one goes: {leader, the other}, both answering. */
	assert_int_equal(raftlock_member_remove(cl, d2_id), 0);
	assert_int_equal(n_members(cl), 2);
	assert_serves(cl, "after-removal");
	raftlock_client_close(cl);
	assert_int_equal(tcluster_destroy(&c), 0);
}

/* Starts raftlockd as slot i with id, one more flag (NULL: none; value
 * NULL: the others' client addresses) and one more "--key=value" argument
 * (more, NULL: none); returns its exit code (it must stop by itself: -2 if
 * it did not) with its output in out. */
static int run_node_with(struct tcluster *c, int i, uint64_t id, const char *flag,
			 const char *value, const char *more, char *out, size_t len)
{
	char sid[24], dir[300], raft[32], client[32], join[128] = "";
	snprintf(sid, sizeof sid, "%llu", (unsigned long long)id);
	snprintf(dir, sizeof dir, "%s/n%d", c->dir, i + 1);
	snprintf(raft, sizeof raft, "127.0.0.1:%d", c->raft_port[i]);
	snprintf(client, sizeof client, "127.0.0.1:%d", c->client_port[i]);
	snprintf(join, sizeof join, "%s,%s", c->client_addr[0], c->client_addr[1]);
	char *argv[] = {"raftlockd",
			"--id",
			sid,
			"--data-dir",
			dir,
			"--cluster",
			c->name,
			"--raft-address",
			raft,
			"--client-address",
			client,
			(char *)flag,
			(char *)(value ? value : join),
			(char *)more,
			NULL};
	if (flag == NULL) {
		argv[11] = (char *)more;
		argv[12] = NULL;
	}
	int rv = tcluster_run_raftlockd(argv, out, len, 15000);
	assert_null(strstr(out, "Sanitizer")); /* a refusal leaks nothing either */
	return rv;
}

static int run_node(struct tcluster *c, int i, uint64_t id, const char *flag, const char *value,
		    char *out, size_t len)
{
	return run_node_with(c, i, id, flag, value, NULL, out, len);
}

/* A remove of an id below the highest used that was never a member is
 * refused, "no member N", and changes nothing: no entry applied, the
 * raft configuration as it was. A removal done, of a founding member
 * (founding) and of one added at run time (added), answers 0 again (a
 * retry, as member replace sends after its own retry). */
static void no_member_removed(struct tcluster *c, raftlock_client *cl, uint64_t founding,
			      uint64_t added)
{
	struct raftlock_member_list *before, *after;
	assert_int_equal(raftlock_member_list(cl, &before), 0);
	assert_true(before->max_member_id > 5);
	int leader = tcluster_leader(c, 10000);
	assert_true(leader >= 0);
	Raftlock__StatusInfo *st = tcluster_status(c, leader);
	assert_non_null(st);
	uint64_t applied = st->applied_index;
	raftlock__status_info__free_unpacked(st, NULL);

	int rv = raftlock_member_remove(cl, 5);
	if (rv != RAFTLOCK_ENOTFOUND || strstr(raftlock_errmsg(cl), "no member 5") == NULL)
		fail_msg("member remove 5 (never used): %s, %s", raftlock_strerror(rv),
			 raftlock_errmsg(cl));
	assert_int_equal(raftlock_member_remove(cl, founding), 0);
	assert_int_equal(raftlock_member_remove(cl, added), 0);

	assert_int_equal(raftlock_member_list(cl, &after), 0);
	assert_int_equal(after->n_members, before->n_members);
	assert_int_equal(after->max_member_id, before->max_member_id);
	for (size_t i = 0; i < after->n_members; i++) {
		assert_int_equal(after->members[i].id, before->members[i].id);
		assert_string_equal(after->members[i].role, before->members[i].role);
	}
	raftlock_member_list_free(before);
	raftlock_member_list_free(after);
	st = tcluster_status(c, leader);
	assert_non_null(st);
	if (st->applied_index != applied)
		fail_msg("refused and retried removals applied entries %llu..%llu",
			 (unsigned long long)applied + 1, (unsigned long long)st->applied_index);
	raftlock__status_info__free_unpacked(st, NULL);
}

static void test_wiped_node_refused(void **state)
{
	(void)state;
	static struct tcluster c;
	static char out[8192];
	tcluster_start(&c, 3, ELECTION_MS);
	raftlock_client *cl = tl_client(&c);
	int leader = tcluster_leader(&c, 10000);
	assert_true(leader >= 0);
	int lost = (leader + 1) % 3;
	uint64_t lost_id = tcluster_id(&c, lost);
	tcluster_wipe(&c, lost);
	/* Started as before, empty: it does not bootstrap, it stops. */
	char self[100];
	snprintf(self, sizeof self, "%llu,127.0.0.1:%d,127.0.0.1:%d", (unsigned long long)lost_id,
		 c.raft_port[lost], c.client_port[lost]);
	int st = run_node(&c, lost, lost_id, "--member", self, out, sizeof out);
	assert_true(st > 0); /* it stopped by itself, with an error */
	assert_non_null(strstr(out, "has never been a member"));
	/* With --join under its old id: refused by the cluster (a founding
	 * member started with the cluster; until the leader recorded the
	 * founding members' addresses, its id is not one waiting to join). */
	st = run_node(&c, lost, lost_id, "--join", NULL, out, sizeof out);
	assert_true(st > 0); /* it stopped by itself, with an error */
	assert_true(strstr(out, "already started once with another data directory") != NULL ||
		    strstr(out, "is not waiting to join") != NULL);
	/* ... as under an id that was never added. */
	tcluster_wipe(&c, lost); /* its IDENTITY names the old id */
	st = run_node(&c, lost, 77, "--join", NULL, out, sizeof out);
	assert_true(st > 0);
	assert_non_null(strstr(out, "is not waiting to join"));
	/* A member added at run time, wiped after its first start, is
	 * refused too: another data directory already started under its id.
	 * (The lost member goes first, so that losing 7 keeps a quorum.) */
	assert_int_equal(raftlock_member_remove(cl, lost_id), 0);
	int slot = grow(&c, cl, -1, 7);
	tcluster_wipe(&c, slot);
	st = run_node(&c, slot, 7, "--join", NULL, out, sizeof out);
	assert_true(st > 0); /* it stopped by itself, with an error */
	assert_non_null(strstr(out, "already started once with another data directory"));
	/* Ids are never added twice: the removed ones neither. */
	assert_int_equal(raftlock_member_remove(cl, 7), 0);
	assert_int_equal(raftlock_member_add(cl, 7, "127.0.0.1:9", "127.0.0.1:10"),
			 RAFTLOCK_EINVAL);
	assert_non_null(strstr(raftlock_errmsg(cl), "never reused"));
	no_member_removed(&c, cl, lost_id, 7);
	assert_int_equal(
		raftlock_member_add(cl, tcluster_id(&c, leader), "127.0.0.1:9", "127.0.0.1:10"),
		RAFTLOCK_EINVAL);
	/* The cluster still serves with its two remaining originals. */
	assert_serves(cl, "still-serving");
	raftlock_client_close(cl);
	assert_int_equal(tcluster_destroy(&c), 0);
}

/* Whether member id is in the leader's list, added and not yet started
 * (its place still to be claimed). */
static bool waiting_to_join(raftlock_client *cl, uint64_t id)
{
	struct raftlock_member_list *list;
	if (raftlock_member_list(cl, &list) != 0)
		fail_msg("member list: %s", raftlock_errmsg(cl));
	bool waiting = false;
	for (size_t i = 0; i < list->n_members; i++)
		if (list->members[i].id == id)
			waiting = !list->members[i].joined;
	raftlock_member_list_free(list);
	return waiting;
}

#define TOKEN_ROOT "root-token-7d0c51e9a3b24f86"
#define TOKEN_ALICE "alice-token-2f84c6a1d09e4b37"
#define TOKEN_NODE4 "node4-token-c5e19b0a7f3d4e62"

/* Issue 11: with auth = on, member 4's place is claimed only by identity
 * raftlock-node-4 (or an admin of every name). A node started with --join
 * and no identity, or with the token of another identity in its
 * join-token-file, is refused with a message naming the identity it takes
 * and stops; the claim is not made (member 4 is still waiting to join, and
 * a node with another data directory claims it later). A node whose
 * join-token-file holds raftlock-node-4's token joins and becomes a voter. */
static void test_join_needs_identity(void **state)
{
	(void)state;
	static struct tcluster c;
	static char dir[] = "/tmp/raftlock-join-XXXXXX", out[8192];
	static char tokens[300], alice[300], node4[300], a_tokens[320], a_node4[320];
	assert_non_null(mkdtemp(dir));
	snprintf(tokens, sizeof tokens, "%s/tokens", dir);
	snprintf(alice, sizeof alice, "%s/join-alice", dir);
	snprintf(node4, sizeof node4, "%s/join-4", dir);
	const char *pairs[] = {"root",      TOKEN_ROOT, "alice", TOKEN_ALICE, "raftlock-node-4",
			       TOKEN_NODE4, NULL};
	assert_int_equal(tl_write_tokens(tokens, pairs), 0);
	assert_int_equal(tcluster_shell("printf '# member 4\\n%s\\n' > '%s' && echo '%s' > '%s'",
					TOKEN_NODE4, node4, TOKEN_ALICE, alice),
			 0);
	snprintf(a_tokens, sizeof a_tokens, "--auth-tokens=%s", tokens);
	c.extra_args[0] = "--auth=on";
	c.extra_args[1] = a_tokens;
	c.extra_args[2] = "--auth-admin=root";
	c.extra_args[3] = NULL;
	tcluster_start(&c, 3, ELECTION_MS);
	raftlock_client *root = tl_client_token(&c, TOKEN_ROOT, "root");
	int slot = tcluster_add_slot(&c, -1, 4);
	assert_int_equal(
		raftlock_member_add(root, 4, tcluster_raft_addr(&c, slot), c.client_addr[slot]), 0);
	wait_role(root, 4, "standby");

	/* No identity: refused, told which identity it takes. */
	int st = run_node(&c, slot, 4, "--join", NULL, out, sizeof out);
	assert_true(st > 0); /* it stopped by itself, with an error */
	assert_non_null(strstr(out, "joining as member 4 takes identity 'raftlock-node-4'"));
	assert_non_null(strstr(out, "no identity"));
	/* Another identity's token: refused too. */
	char more[320];
	snprintf(more, sizeof more, "--join-token-file=%s", alice);
	st = run_node_with(&c, slot, 4, "--join", NULL, more, out, sizeof out);
	assert_true(st > 0);
	assert_non_null(strstr(out, "takes identity 'raftlock-node-4'"));
	assert_non_null(strstr(out, "'alice' is neither"));
	assert_null(strstr(out, TOKEN_ALICE)); /* never logged */
	assert_true(waiting_to_join(root, 4));

	/* The node with raftlock-node-4's token, from a new data directory
	 * (another incarnation than the refused starts had): it joins. */
	assert_int_equal(tcluster_shell("rm -rf '%s/n%d'", c.dir, slot + 1), 0);
	snprintf(a_node4, sizeof a_node4, "--join-token-file=%s", node4);
	c.extra_args[3] = a_node4;
	tcluster_restart(&c, slot);
	wait_role(root, 4, "voter");
	assert_false(waiting_to_join(root, 4));
	assert_false(tcluster_log_has(&c, slot, TOKEN_NODE4));
	raftlock_client_close(root);
	assert_int_equal(tcluster_destroy_and_remove(&c, dir), 0);
}

static uint64_t applied_of(struct tcluster *c, int i)
{
	Raftlock__StatusInfo *st = tcluster_status(c, i);
	uint64_t v = st != NULL ? st->applied_index : 0;
	if (st != NULL)
		raftlock__status_info__free_unpacked(st, NULL);
	return v;
}

/* followers.c follows the configuration: a member added at run time whose
 * data directory goes back to an older copy (its log then ends below what
 * the leader matched on it, and libraft 0.22.1 would never send it an
 * entry) makes the leader hand over, and the member catches up. */
static void test_stale_copy_of_added_member(void **state)
{
	(void)state;
	static struct tcluster c;
	char cmd[1024];
	tcluster_start(&c, 3, ELECTION_MS);
	raftlock_client *cl = tl_client(&c);
	int slot = grow(&c, cl, -1, 4);
	assert_int_equal(tcluster_stop(&c, slot), 0);
	snprintf(cmd, sizeof cmd, "cp -a '%s/n%d' '%s/old'", c.dir, slot + 1, c.dir);
	assert_int_equal(system(cmd), 0);
	tcluster_restart(&c, slot);
	raftlock_session *s = tl_session(cl, 10000);
	for (int i = 0; i < 200; i++) {
		char name[32];
		snprintf(name, sizeof name, "stale/%d", i);
		raftlock_lock *l = tl_lock(s, name);
		tl_take(l);
		raftlock_lock_free(l);
	}
	int leader = tcluster_leader(&c, 10000);
	uint64_t target = applied_of(&c, leader);
	uint64_t end = tcluster_now_ms() + 10000;
	while (applied_of(&c, slot) < target && tcluster_now_ms() < end)
		tl_sleep_ms(50); /* the leader has matched it there */
	assert_true(applied_of(&c, slot) >= target);
	assert_int_equal(tcluster_stop(&c, slot), 0);
	snprintf(cmd, sizeof cmd, "rm -rf '%s/n%d' && mv '%s/old' '%s/n%d'", c.dir, slot + 1, c.dir,
		 c.dir, slot + 1);
	assert_int_equal(system(cmd), 0);
	tcluster_restart(&c, slot);
	end = tcluster_now_ms() + 15000;
	while (applied_of(&c, slot) < target && tcluster_now_ms() < end)
		tl_sleep_ms(100);
	if (applied_of(&c, slot) < target)
		fail_msg("member 4 stuck at %llu below %llu",
			 (unsigned long long)applied_of(&c, slot), (unsigned long long)target);
	assert_serves(cl, "after-stale-copy");
	assert_int_equal(raftlock_session_close(s), 0);
	raftlock_client_close(cl);
	assert_int_equal(tcluster_destroy(&c), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grow_and_shrink_under_load),
		cmocka_unit_test(test_remove_leader),
		cmocka_unit_test(test_replace_killed_node),
		cmocka_unit_test(test_removal_keeps_a_live_majority),
		cmocka_unit_test(test_wiped_node_refused),
		cmocka_unit_test(test_stale_copy_of_added_member),
		cmocka_unit_test(test_join_needs_identity),
	};
	if (getenv("RAFTLOCK_TEST_FILTER") != NULL)
		cmocka_set_test_filter(getenv("RAFTLOCK_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
