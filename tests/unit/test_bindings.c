/* test_bindings.c: crash-fast release on the leader (server/bindings.c,
 * the real file) on a manual timebase, over a fake node that records what
 * is proposed and admits a command by the real features_level_of()
 * against the level the test says the cluster records. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "bindings.h"
#include "feature_level.h"
#include "timebase.h"

/* ------------------------------------------------------------ fake node */

static uint32_t cluster_level;  /* what the cluster records */
static unsigned drops;          /* DROP_BOUND proposed */
static uint64_t dropped;        /* the session of the last one */
static uint64_t drop_deadline;  /* the deadline the last one carried */
static uint64_t lease_deadline; /* what the fake leases say of session 7 */

int node_propose_quiet(struct node *n, const Raftlock__Command *cmd)
{
	(void)n;
	if (cmd->op_case == RAFTLOCK__COMMAND__OP_DROP_BOUND) {
		drops++;
		dropped = cmd->drop_bound->session;
		drop_deadline = cmd->drop_bound->deadline;
	}
	return 0;
}

bool node_level_admits(struct node *n, const Raftlock__Command *cmd)
{
	(void)n;
	return features_level_of(cmd) <= cluster_level;
}

uint64_t leases_deadline(const struct leases *l, uint64_t id)
{
	(void)l;
	return id == 7 ? lease_deadline : 0;
}

/* ------------------------------------------------------------- fixture */

#define GRACE_MS 200

struct fx {
	struct timebase tb;
	struct node node;
	struct bindings b;
	int conn; /* its address stands for a client connection */
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	timebase_init_manual(&f->tb, 100000);
	bindings_init(&f->b, &f->tb, &f->node, NULL);
	bindings_on_ready(&f->b, true);
	cluster_level = FEATURE_LEVEL;
	drops = 0;
	dropped = 0;
	drop_deadline = 0;
	lease_deadline = 123456;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	bindings_close(&f->b);
	free(f);
	return 0;
}

/* Session 7, bound to f->conn, whose connection closes now. */
static void close_bound(struct fx *f)
{
	uint64_t id = 7;
	assert_true(bindings_note(&f->b, id, &f->conn, GRACE_MS));
	bindings_closed(&f->b, &f->conn, &id, 1);
}

/* ---------------------------------------------------------------- tests */

/* At level 3 a bound session whose connection closed is dropped once its
 * grace has passed, not before. */
static void test_drop_after_grace(void **state)
{
	struct fx *f = *state;
	close_bound(f);
	timebase_advance(&f->tb, GRACE_MS - 1);
	assert_int_equal(drops, 0);
	timebase_advance(&f->tb, 2);
	assert_int_equal(drops, 1);
	assert_int_equal(dropped, 7);
	assert_int_equal(drop_deadline, 123456); /* the lease's, as applied */
	assert_int_equal(f->b.drops, 1);
}

/* Rule 11a: the drop carries the lease deadline only once the cluster
 * records level 8 (an older build would drop the field and end a session
 * the others keep); between levels 3 and 7 it goes without, as before. */
static void test_drop_deadline_from_level_8(void **state)
{
	struct fx *f = *state;
	cluster_level = FEATURES_DROP_BOUND_DEADLINE - 1;
	close_bound(f);
	timebase_advance(&f->tb, GRACE_MS + 1);
	assert_int_equal(drops, 1);
	assert_int_equal(drop_deadline, 0);
}

/* A keepalive accepted on another connection within the grace (the
 * service notes it before its RENEW is proposed) calls off the drop. */
static void test_drop_called_off_by_a_new_connection(void **state)
{
	struct fx *f = *state;
	int other;
	close_bound(f);
	timebase_advance(&f->tb, GRACE_MS - 1);
	assert_true(bindings_note(&f->b, 7, &other, GRACE_MS));
	timebase_advance(&f->tb, GRACE_MS * 10);
	assert_int_equal(drops, 0);
	assert_ptr_equal(bindings_conn(&f->b, 7), &other);
}

/* Rule 11a: a drop kept at apply because a RENEW proposed before it moved
 * the lease (FSM_EV_DROP_KEPT) is proposed again at once, with the
 * deadline as now applied, while no connection keeps the session; a
 * report of an older drop proposes nothing. Each close allows a bounded
 * number of such drops (no storm); past it the TTL ends the session. */
static void test_kept_drop_proposed_again(void **state)
{
	struct fx *f = *state;
	close_bound(f);
	timebase_advance(&f->tb, GRACE_MS + 1);
	assert_int_equal(drops, 1);
	lease_deadline = 130000; /* the RENEW applied, then the drop */
	bindings_drop_kept(&f->b, 7, 123456);
	timebase_advance(&f->tb, 1);
	assert_int_equal(drops, 2);
	assert_int_equal(drop_deadline, 130000);
	bindings_drop_kept(&f->b, 7, 123456); /* an older drop's */
	timebase_advance(&f->tb, GRACE_MS);
	assert_int_equal(drops, 2);

	for (unsigned i = 0; i < 100; i++) {
		bindings_drop_kept(&f->b, 7, lease_deadline);
		lease_deadline += 1000;
		timebase_advance(&f->tb, 1);
	}
	assert_int_equal(drops, 1 + BINDINGS_REDROPS_MAX);
	assert_int_equal(f->b.drops, drops);
}

/* A drop kept at apply while a live connection keeps the session again
 * (its keepalive, accepted after the drop was proposed, has a RENEW behind
 * it) is not proposed again; that connection's own close drops it after
 * its grace as usual. */
static void test_kept_drop_not_proposed_again_when_kept(void **state)
{
	struct fx *f = *state;
	int other;
	close_bound(f);
	timebase_advance(&f->tb, GRACE_MS + 1);
	assert_int_equal(drops, 1);
	assert_true(bindings_note(&f->b, 7, &other, GRACE_MS));
	lease_deadline = 130000;
	bindings_drop_kept(&f->b, 7, 123456);
	timebase_advance(&f->tb, GRACE_MS * 10);
	assert_int_equal(drops, 1);

	uint64_t id = 7;
	bindings_closed(&f->b, &other, &id, 1);
	timebase_advance(&f->tb, GRACE_MS - 1);
	assert_int_equal(drops, 1);
	timebase_advance(&f->tb, 2);
	assert_int_equal(drops, 2);
	assert_int_equal(drop_deadline, 130000);
}

/* While the cluster records level 2 (a voter still runs an older build,
 * which could not apply it), DROP_BOUND is never proposed: the session
 * lives by its TTL. */
static void test_drop_held_below_level_3(void **state)
{
	struct fx *f = *state;
	cluster_level = 2;
	close_bound(f);
	timebase_advance(&f->tb, GRACE_MS * 10);
	assert_int_equal(drops, 0);
	assert_int_equal(f->b.drops, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_drop_after_grace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drop_held_below_level_3, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drop_deadline_from_level_8, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drop_called_off_by_a_new_connection, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_kept_drop_proposed_again, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kept_drop_not_proposed_again_when_kept, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
