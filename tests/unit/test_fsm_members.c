/*
 * test_fsm_members.c: the member book the state machine keeps in Meta
 * (member_book.h): ids are never reused, a retried add is the same add,
 * an id is claimed by one data directory (incarnation) only, and from
 * FEATURES_REMOVED_MEMBERS a removed id is told from one never used.
 */
#include "test_fsm_harness.h"
#include "member_book.h"

static int add(Raftlock__Meta *m, uint64_t id, const char *raft, const char *client)
{
	Raftlock__MemberAdd op = RAFTLOCK__MEMBER_ADD__INIT;
	op.id = id;
	op.raft_address = (char *)raft;
	op.client_address = (char *)client;
	return member_book_add(m, &op);
}

static int founding(Raftlock__Meta *m, uint64_t id, const char *raft, const char *client)
{
	Raftlock__MemberAdd op = RAFTLOCK__MEMBER_ADD__INIT;
	op.id = id;
	op.raft_address = (char *)raft;
	op.client_address = (char *)client;
	op.founding = true;
	return member_book_add(m, &op);
}

static int removed(Raftlock__Meta *m, uint64_t id)
{
	Raftlock__MemberRemove op = RAFTLOCK__MEMBER_REMOVE__INIT;
	op.id = id;
	return member_book_remove(m, &op);
}

static int join(Raftlock__Meta *m, uint64_t id, uint64_t incarnation)
{
	Raftlock__MemberJoin op = RAFTLOCK__MEMBER_JOIN__INIT;
	op.id = id;
	op.incarnation = incarnation;
	return member_book_join(m, &op);
}

/* Frees what the book allocated in m (m itself is on the stack). */
static void free_book(Raftlock__Meta *m)
{
	for (size_t i = 0; i < m->n_members; i++)
		raftlock__member_record__free_unpacked(m->members[i], NULL);
	free(m->members);
	free(m->removed_members);
}

static void test_ids_never_reused(void **state)
{
	(void)state;
	Raftlock__Meta m = RAFTLOCK__META__INIT;
	assert_int_equal(add(&m, 4, "h4:7200", "h4:7100"), 0);
	assert_int_equal(m.max_member_id, 4);
	/* the same add again (a retry): the same answer, nothing new */
	assert_int_equal(add(&m, 4, "h4:7200", "h4:7100"), 0);
	assert_int_equal(m.n_members, 1);
	/* the same id with other addresses, or a lower unused id: refused */
	assert_int_equal(add(&m, 4, "h9:7200", "h9:7100"), RAFTLOCK_EINVAL);
	assert_int_equal(add(&m, 2, "h2:7200", "h2:7100"), RAFTLOCK_EINVAL);
	/* removed ids stay used, also ids that were never added (a
	 * bootstrap member) */
	assert_int_equal(removed(&m, 4), 0);
	assert_int_equal(m.n_members, 0);
	assert_int_equal(add(&m, 4, "h4:7200", "h4:7100"), RAFTLOCK_EINVAL);
	assert_int_equal(removed(&m, 9), 0);
	assert_int_equal(m.max_member_id, 9);
	assert_int_equal(add(&m, 8, "h8:7200", "h8:7100"), RAFTLOCK_EINVAL);
	assert_int_equal(add(&m, 10, "h10:7200", "h10:7100"), 0);
	assert_non_null(member_book_find(&m, 10));
	assert_string_equal(member_book_find(&m, 10)->client_address, "h10:7100");
	/* bad input: refused, nothing recorded */
	assert_int_equal(add(&m, 0, "a:1", "b:2"), RAFTLOCK_EINVAL);
	assert_int_equal(add(&m, 11, "", "b:2"), RAFTLOCK_EINVAL);
	assert_int_equal(removed(&m, 0), RAFTLOCK_EINVAL);
	assert_int_equal(m.max_member_id, 10);
	assert_int_equal(m.n_members, 1);
	free_book(&m);
}

static void test_one_incarnation_per_id(void **state)
{
	(void)state;
	Raftlock__Meta m = RAFTLOCK__META__INIT;
	assert_int_equal(join(&m, 5, 77), RAFTLOCK_ENOTFOUND); /* never added */
	assert_int_equal(add(&m, 5, "h5:7200", "h5:7100"), 0);
	assert_int_equal(join(&m, 5, 0), RAFTLOCK_EINVAL);
	assert_int_equal(join(&m, 5, 77), 0);
	assert_int_equal(join(&m, 5, 77), 0);              /* the same node, starting again */
	assert_int_equal(join(&m, 5, 78), RAFTLOCK_EPERM); /* a wiped one */
	assert_int_equal(member_book_find(&m, 5)->incarnation, 77);
	assert_int_equal(removed(&m, 5), 0);
	assert_int_equal(join(&m, 5, 77), RAFTLOCK_ENOTFOUND);
	free_book(&m);
}

/* A founding member's record gives its addresses to members that joined
 * later; it is not held to max_member_id, never joins, and its id is not
 * added again. */
static void test_founding_members(void **state)
{
	(void)state;
	Raftlock__Meta m = RAFTLOCK__META__INIT;
	assert_int_equal(add(&m, 4, "h4:7200", "h4:7100"), 0);
	assert_int_equal(founding(&m, 2, "h2:7200", "h2:7100"), 0);
	assert_int_equal(founding(&m, 2, "h2:7200", "h2:7100"), 0); /* again: the same */
	assert_int_equal(m.max_member_id, 4);
	assert_string_equal(member_book_find(&m, 2)->client_address, "h2:7100");
	assert_int_equal(join(&m, 2, 99), RAFTLOCK_EPERM);
	assert_int_equal(add(&m, 2, "h2:7200", "h2:7100"), RAFTLOCK_EINVAL);
	assert_int_equal(founding(&m, 7, "h7:7200", "h7:7100"), 0);
	assert_int_equal(m.max_member_id, 7);
	assert_int_equal(add(&m, 6, "h6:7200", "h6:7100"), RAFTLOCK_EINVAL);
	free_book(&m);
}

/* A remove of an id in neither the raft configuration nor the book is a
 * retry of one done (answered 0) or names no member ("no member N"). From
 * FEATURES_REMOVED_MEMBERS the book tells them apart by the ids it noted
 * removed; the ids used before that level was recorded, and every id used
 * below it, may have been removed, as the book cannot tell (the answer of
 * earlier builds). */
static void test_removed_told_from_never_used(void **state)
{
	(void)state;
	Raftlock__Meta m = RAFTLOCK__META__INIT;
	m.feature_level = FEATURES_REMOVED_MEMBERS - 1;
	assert_int_equal(add(&m, 4, "h4:7200", "h4:7100"), 0);
	assert_int_equal(removed(&m, 4), 0);
	assert_int_equal(m.n_removed_members, 0); /* below the level: not noted */
	assert_true(member_book_removed(&m, 4));
	assert_true(member_book_removed(&m, 2));  /* never used: cannot tell */
	assert_false(member_book_removed(&m, 5)); /* above every id used */
	assert_false(member_book_removed(&m, 0));

	/* The level recorded: what was used until then may have been
	 * removed; from then on only the ids noted. */
	m.feature_level = FEATURES_REMOVED_MEMBERS;
	member_book_note_removals(&m);
	assert_true(member_book_removed(&m, 2));
	assert_true(member_book_removed(&m, 4));
	assert_int_equal(add(&m, 6, "h6:7200", "h6:7100"), 0);
	assert_int_equal(add(&m, 9, "h9:7200", "h9:7100"), 0);
	assert_false(member_book_removed(&m, 5)); /* never used */
	assert_false(member_book_removed(&m, 6)); /* a member */
	assert_int_equal(removed(&m, 6), 0);
	assert_int_equal(removed(&m, 6), 0); /* a retry: noted once */
	assert_int_equal(m.n_removed_members, 1);
	assert_true(member_book_removed(&m, 6));
	assert_false(member_book_removed(&m, 7));
	assert_false(member_book_removed(&m, 8));
	/* a founding member that had no record */
	assert_int_equal(removed(&m, 12), 0);
	assert_true(member_book_removed(&m, 12));
	assert_false(member_book_removed(&m, 11));
	assert_int_equal(m.max_member_id, 12);
	free_book(&m);
}

/* Through apply: every member decides by the level its log records, so a
 * MEMBER_REMOVE below FEATURES_REMOVED_MEMBERS notes nothing (as an
 * earlier build), the entry that records the level notes the ids used
 * until then, and a MEMBER_REMOVE after it notes its id. */
static void test_apply_notes_removals_from_their_level(void **state)
{
	struct fx *f = fx_ready_at(state, FEATURES_REMOVED_MEMBERS - 1);
	assert_int_equal(DO(f, MEMBER_REMOVE, .target = 3).status, 0);
	Raftlock__Meta *m = fx_meta(f);
	assert_int_equal(m->max_member_id, 3);
	assert_int_equal(m->n_removed_members, 0);
	assert_int_equal(m->removed_unnoted, 0);
	raftlock__meta__free_unpacked(m, NULL);

	DO(f, SET_FEATURE_LEVEL, .level = FEATURES_REMOVED_MEMBERS);
	assert_int_equal(DO(f, MEMBER_REMOVE, .target = 5).status, 0);
	m = fx_meta(f);
	assert_int_equal(m->removed_unnoted, 3);
	assert_int_equal(m->n_removed_members, 1);
	assert_int_equal(m->removed_members[0], 5);
	assert_true(member_book_removed(m, 3));
	assert_false(member_book_removed(m, 4));
	assert_true(member_book_removed(m, 5));
	raftlock__meta__free_unpacked(m, NULL);

	/* A new cluster at that level: nothing used before it. */
	struct fx *g = fx_peer(f);
	g->now = 1000;
	assert_int_equal(DO(g, INIT, .floor = FX_FLOOR, .level = FEATURES_REMOVED_MEMBERS).status,
			 0);
	assert_int_equal(DO(g, MEMBER_REMOVE, .target = 2).status, 0);
	m = fx_meta(g);
	assert_int_equal(m->removed_unnoted, 0);
	assert_false(member_book_removed(m, 1));
	assert_true(member_book_removed(m, 2));
	raftlock__meta__free_unpacked(m, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ids_never_reused),
		cmocka_unit_test(test_one_incarnation_per_id),
		cmocka_unit_test(test_founding_members),
		cmocka_unit_test(test_removed_told_from_never_used),
		cmocka_unit_test_setup_teardown(test_apply_notes_removals_from_their_level,
						fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
