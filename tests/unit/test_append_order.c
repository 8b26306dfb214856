/* test_append_order.c: server/append_order.c, the leader's own append
 * issued after its sends. Appends are recorded by the test's issue
 * function: while held they are kept (the caller's 0 to raft) and reach
 * it only at the release, in the order raft issued them, each with its
 * own arguments; nothing is kept once not holding or once full (the
 * caller then issues at once). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "append_order.h"

struct backend {
	struct raft_io_append *issued[16];
	unsigned entries_n[16];
	raft_io_append_cb cb[16];
	unsigned n;
};

static void issue(void *arg, struct raft_io *io, struct raft_io_append *req,
		  const struct raft_entry entries[], unsigned n, raft_io_append_cb cb)
{
	(void)io;
	(void)entries;
	struct backend *b = arg;
	b->issued[b->n] = req;
	b->entries_n[b->n] = n;
	b->cb[b->n] = cb;
	b->n++;
}

static void append_cb(struct raft_io_append *req, int status)
{
	(void)req;
	(void)status;
}

static void test_not_holding_keeps_nothing(void **state)
{
	(void)state;
	struct append_order o = {0};
	struct raft_io_append req;
	assert_false(append_order_keep(&o, NULL, &req, NULL, 1, append_cb));
}

static void test_kept_then_released_in_order(void **state)
{
	(void)state;
	struct append_order o = {0};
	struct backend b = {0};
	struct raft_io_append r1, r2;
	struct raft_entry e = {0};
	append_order_hold(&o);
	assert_true(append_order_keep(&o, NULL, &r1, &e, 1, append_cb));
	assert_true(append_order_keep(&o, NULL, &r2, &e, 3, append_cb));
	assert_int_equal(b.n, 0); /* nothing issued while held */
	append_order_release(&o, issue, &b);
	assert_int_equal(b.n, 2);
	assert_ptr_equal(b.issued[0], &r1);
	assert_ptr_equal(b.issued[1], &r2);
	assert_int_equal(b.entries_n[0], 1);
	assert_int_equal(b.entries_n[1], 3);
	assert_ptr_equal(b.cb[1], append_cb);
	/* Released: the next append is the caller's to issue. */
	assert_false(append_order_keep(&o, NULL, &r1, &e, 1, append_cb));
	append_order_release(&o, issue, &b); /* nothing kept: a no-op */
	assert_int_equal(b.n, 2);
}

static void test_full_keeps_no_more(void **state)
{
	(void)state;
	struct append_order o = {0};
	struct raft_io_append r[APPEND_ORDER_MAX + 1];
	struct raft_entry e = {0};
	append_order_hold(&o);
	for (unsigned i = 0; i < APPEND_ORDER_MAX; i++)
		assert_true(append_order_keep(&o, NULL, &r[i], &e, 1, append_cb));
	assert_false(append_order_keep(&o, NULL, &r[APPEND_ORDER_MAX], &e, 1, append_cb));
	struct backend b = {0};
	append_order_release(&o, issue, &b);
	assert_int_equal(b.n, APPEND_ORDER_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_not_holding_keeps_nothing),
		cmocka_unit_test(test_kept_then_released_in_order),
		cmocka_unit_test(test_full_keeps_no_more),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
