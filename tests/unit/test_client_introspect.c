/*
 * test_client_introspect.c: the read API (status, lock get and list,
 * session list, token check) converts a node's answers into the public
 * structs field by field, pages through listings, and frees them (the
 * sanitizer build checks the frees).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "client_fakeserver.h"
#include "raftlock.h"

static raftlock_client *client_on(struct fake *f)
{
	const char *addrs[] = {f->addr};
	struct raftlock_client_options o = {
		.addresses = addrs, .n_addresses = 1, .request_timeout_ms = 3000};
	raftlock_client *c = NULL;
	assert_int_equal(raftlock_client_open(&o, &c, NULL), 0);
	return c;
}

static void test_status(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	raftlock_client *c = client_on(f);
	struct raftlock_status *st = NULL;
	assert_int_equal(raftlock_status_get(c, f->addr, &st), 0);
	assert_int_equal(st->node_id, 7);
	assert_string_equal(st->role, "leader");
	assert_true(st->ready);
	assert_int_equal(st->term, 3);
	assert_int_equal(st->commit_index, 100);
	assert_int_equal(st->applied_index, 99);
	assert_int_equal(st->last_index, 101);
	assert_int_equal(st->leader_id, 7);
	assert_string_equal(st->leader_address, "10.0.0.2:7101");
	assert_string_equal(st->cluster, "test");
	assert_int_equal(st->next_token, 5000);
	assert_int_equal(st->n_members, 3);
	assert_int_equal(st->members[2].id, 8);
	assert_string_equal(st->members[2].raft_address, "10.0.0.3:7201");
	assert_string_equal(st->members[0].client_address, "10.0.0.1:7101");
	raftlock_status_free(st);
	/* NULL asks the first reachable address */
	st = NULL;
	assert_int_equal(raftlock_status_get(c, NULL, &st), 0);
	assert_int_equal(st->node_id, 7);
	raftlock_status_free(st);
	assert_int_equal(raftlock_status_get(c, "nocolon", &st), RAFTLOCK_EINVAL);
	raftlock_client_close(c);
	fake_stop(f);
}

static void test_lock_get(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	raftlock_client *c = client_on(f);
	struct raftlock_lock_info *li = NULL;
	assert_int_equal(raftlock_lock_get(c, "a/1", false, &li), 0);
	assert_string_equal(li->name, "a/1");
	assert_int_equal(li->kind, RAFTLOCK_RWLOCK);
	assert_int_equal(li->cluster_time, 10000);
	assert_int_equal(li->n_holders, 2);
	assert_int_equal(li->holders[0].mode, RAFTLOCK_SHARED);
	assert_int_equal(li->holders[1].token, 901);
	assert_int_equal(li->holders[1].owner, 101);
	assert_int_equal(li->holders[0].granted_time, 9000);
	assert_string_equal(li->holders[0].who.client_name, "svc");
	assert_string_equal(li->holders[0].who.host, "host-\"1\"");
	assert_int_equal(li->holders[0].who.pid, 4242);
	/* a holder whose owner is unknown gets empty strings, not NULL */
	assert_string_equal(li->holders[1].who.host, "");
	assert_int_equal(li->n_waiters, 1);
	assert_int_equal(li->waiters[0].session, 12);
	assert_int_equal(li->waiters[0].queued_time, 9500);
	/* the lists were cut: 2 of 5 holders; a total not sent is the list's */
	assert_int_equal(li->holders_total, 5);
	assert_int_equal(li->waiters_total, 1);
	assert_true(li->holders_more);
	assert_int_equal(li->holders_after, 0);
	raftlock_lock_info_free(li);
	/* the next pages, after the last token listed */
	assert_int_equal(raftlock_lock_get_holders(c, "a/1", 901, false, &li), 0);
	assert_int_equal(li->n_holders, 2);
	assert_int_equal(li->holders[0].token, 902);
	assert_int_equal(li->holders_after, 901);
	assert_true(li->holders_more);
	raftlock_lock_info_free(li);
	assert_int_equal(raftlock_lock_get_holders(c, "a/1", 903, false, &li), 0);
	assert_int_equal(li->n_holders, 1);
	assert_int_equal(li->holders[0].token, 904);
	assert_false(li->holders_more);
	assert_int_equal(li->holders_total, 5);
	raftlock_lock_info_free(li);
	/* a node older than paging lists from the first whatever is asked */
	FAKE_SET(f, reads_before_paging, true);
	li = NULL;
	assert_int_equal(raftlock_lock_get_holders(c, "a/1", 901, false, &li), RAFTLOCK_ESTATE);
	assert_null(li);
	assert_non_null(strstr(raftlock_errmsg(c), "upgrade every node"));
	assert_int_equal(raftlock_lock_get(c, "a/1", false, &li), 0);
	assert_true(li->holders_more); /* from the first: 2 listed of 5 */
	raftlock_lock_info_free(li);
	li = NULL;
	assert_int_equal(raftlock_lock_get(c, "b", true, &li), RAFTLOCK_ENOTFOUND);
	assert_null(li);
	assert_int_equal(raftlock_lock_get(c, "", false, &li), RAFTLOCK_EINVAL);
	raftlock_client_close(c);
	fake_stop(f);
}

static void test_lock_list_pages(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	raftlock_client *c = client_on(f);
	struct raftlock_lock_list *list = NULL;
	assert_int_equal(raftlock_lock_list(c, "a/", NULL, 1, false, &list), 0);
	assert_int_equal(list->n_locks, 1);
	assert_true(list->more);
	assert_string_equal(list->locks[0].name, "a/1");
	assert_int_equal(list->locks[0].n_holders, 2);
	raftlock_lock_list_free(list);
	assert_int_equal(raftlock_lock_list(c, "a/", "a/1", 1, false, &list), 0);
	assert_int_equal(list->n_locks, 1);
	assert_false(list->more);
	assert_string_equal(list->locks[0].name, "a/2");
	assert_int_equal(list->locks[0].kind, RAFTLOCK_MUTEX);
	raftlock_lock_list_free(list);
	raftlock_client_close(c);
	fake_stop(f);
}

static void test_session_list(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	raftlock_client *c = client_on(f);
	struct raftlock_session_list *list = NULL;
	assert_int_equal(raftlock_session_list(c, 0, 0, true, &list), 0);
	assert_int_equal(list->n_sessions, 1);
	assert_int_equal(list->cluster_time, 10000);
	struct raftlock_session_info *si = &list->sessions[0];
	assert_int_equal(si->id, 11);
	assert_int_equal(si->ttl_ms, 10000);
	assert_int_equal(si->deadline, 19000);
	assert_int_equal(si->who.pid, 4242);
	assert_int_equal(si->n_locks, 2);
	assert_string_equal(si->locks[1], "a/2");
	assert_int_equal(si->locks_total, 7); /* the list was cut */
	raftlock_session_list_free(list);
	assert_int_equal(raftlock_session_list(c, 11, 0, false, &list), 0);
	assert_int_equal(list->n_sessions, 0);
	raftlock_session_list_free(list);
	raftlock_client_close(c);
	fake_stop(f);
}

static void test_check_token(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	raftlock_client *c = client_on(f);
	bool current = false;
	assert_int_equal(raftlock_check_token(c, "a/1", 900, &current), 0);
	assert_true(current);
	assert_int_equal(raftlock_check_token(c, "a/1", 899, &current), 0);
	assert_false(current);
	assert_int_equal(raftlock_check_token(c, NULL, 1, &current), RAFTLOCK_EINVAL);
	raftlock_client_close(c);
	fake_stop(f);
}

/* A replace refused for its own arguments removes nothing: the removal
 * would commit before the add failed, and a voter would be gone for good. */
static void test_member_replace_checks_first(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	raftlock_client *c = client_on(f);
	assert_int_equal(raftlock_member_replace(c, 3, 0, "10.0.0.6:7201", "10.0.0.6:7101"),
			 RAFTLOCK_EINVAL);
	assert_int_equal(raftlock_member_replace(c, 3, 6, "no-port", "10.0.0.6:7101"),
			 RAFTLOCK_EINVAL);
	assert_non_null(strstr(raftlock_errmsg(c), "HOST:PORT"));
	assert_int_equal(raftlock_member_replace(c, 3, 6, "10.0.0.6:7201", NULL), RAFTLOCK_EINVAL);
	assert_int_equal(raftlock_member_replace(c, 3, 3, "10.0.0.6:7201", "10.0.0.6:7101"),
			 RAFTLOCK_EINVAL);
	/* The leader would refuse these adds: a member, ids used before. */
	assert_int_equal(raftlock_member_replace(c, 3, 2, "10.0.0.6:7201", "10.0.0.6:7101"),
			 RAFTLOCK_EINVAL);
	assert_non_null(strstr(raftlock_errmsg(c), "2 is a member already"));
	assert_int_equal(raftlock_member_replace(c, 3, 5, "10.0.0.6:7201", "10.0.0.6:7101"),
			 RAFTLOCK_EINVAL);
	assert_non_null(strstr(raftlock_errmsg(c), "pick one above 5"));
	assert_int_equal(raftlock_member_replace(c, 3, (uint64_t)INT64_MAX + 1, "10.0.0.6:7201",
						 "10.0.0.6:7101"),
			 RAFTLOCK_EINVAL);
	assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_MEMBER_REMOVE), 0);
	assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_MEMBER_ADD), 0);
	/* A free id: removed, then added. */
	assert_int_equal(raftlock_member_replace(c, 3, 6, "10.0.0.6:7201", "10.0.0.6:7101"), 0);
	assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_MEMBER_REMOVE), 1);
	assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_MEMBER_ADD), 1);
	/* Old member 9 is gone already (a replace that ran before, its answer
	 * lost): sent again as it is, whatever the list says of new id 2. */
	assert_int_equal(raftlock_member_replace(c, 9, 2, "10.0.0.6:7201", "10.0.0.6:7101"), 0);
	assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_MEMBER_REMOVE), 2);
	assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_MEMBER_ADD), 2);
	struct raftlock_member_list *list = NULL;
	assert_int_equal(raftlock_member_list(c, &list), 0);
	assert_int_equal(list->max_member_id, 5);
	raftlock_member_list_free(list);
	raftlock_client_close(c);
	fake_stop(f);
}

/* The members a join's answer names reach the caller; a server older than
 * that answer names none (NULL), and the claim holds all the same. */
static void test_member_join_list(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	raftlock_client *c = client_on(f);
	struct raftlock_member_list *list = NULL;
	assert_int_equal(raftlock_member_join_list(c, 4, 77, "c", &list), 0);
	assert_null(list);
	FAKE_SET(f, join_names_members, true);
	assert_int_equal(raftlock_member_join_list(c, 4, 77, "c", &list), 0);
	assert_non_null(list);
	assert_int_equal(list->n_members, 3);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(list->members[i].id, i + 1);
	raftlock_member_list_free(list);
	assert_int_equal(raftlock_member_join(c, 4, 77, "c"), 0); /* the list dropped */
	assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_MEMBER_JOIN), 3);
	/* On an error, *members is left as it was. */
	struct raftlock_member_list untouched = {0};
	list = &untouched;
	assert_int_equal(raftlock_member_join_list(c, 4, 77, NULL, &list), RAFTLOCK_EINVAL);
	assert_ptr_equal(list, &untouched);
	raftlock_client_close(c);
	fake_stop(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status),
		cmocka_unit_test(test_lock_get),
		cmocka_unit_test(test_lock_list_pages),
		cmocka_unit_test(test_session_list),
		cmocka_unit_test(test_check_token),
		cmocka_unit_test(test_member_replace_checks_first),
		cmocka_unit_test(test_member_join_list),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
