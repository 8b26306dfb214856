/*
 * test_fsm_image_build.c: server/image_build.c, the real file, on a real
 * store and libuv's thread pool: a build made while entries keep applying
 * is a snapshot of the state at the last of them; a build discarded (a
 * restore) or closed (shutdown) while its worker runs frees everything
 * (the ASan build checks) and leaves the store closable; a lost build asks
 * for one snapshot on the loop.
 */
#include <uv.h>

#include "image_build.h"
#include "test_fsm_harness.h"

/* A builder on f's store and a loop of its own. */
struct rig {
	uv_loop_t loop;
	struct image_build b;
};

static void rig_open(struct rig *r, struct fx *f, unsigned delay_ms)
{
	assert_int_equal(uv_loop_init(&r->loop), 0);
	image_build_init(&r->b, &r->loop, &f->store);
	r->b.delay_ms = delay_ms;
}

/* Closes the builder, then runs the loop out: nothing may be left. */
static void rig_close(struct rig *r)
{
	image_build_close(&r->b);
	assert_int_equal(uv_run(&r->loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&r->loop), 0);
}

static void run_until_not_running(struct rig *r)
{
	while (r->b.state == IMAGE_BUILD_RUNNING)
		uv_run(&r->loop, UV_RUN_ONCE);
}

/* Applies n acquires in f's log and notes each with b, as node.c does. */
static void apply_noted(struct fx *f, struct image_build *b, uint64_t s, const char *prefix, int n)
{
	char name[32];
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof name, "%s/%d", prefix, i);
		fx_take(f, s, 1, name);
		const struct fx_entry *e = &f->log[f->n_log - 1];
		image_build_note(b, e->index, e->buf, e->len);
	}
}

static void test_build_is_the_state_at_the_last_entry(void **state)
{
	struct fx *f = *state;
	fx_init(f, FX_FLOOR);
	uint64_t s = fx_session(f);
	struct rig r;
	rig_open(&r, f, 100); /* the entries below apply during the dump */
	apply_noted(f, &r.b, s, "before", 10);
	assert_int_equal(image_build_start(&r.b), 0);
	assert_int_equal(image_build_start(&r.b), RAFTLOCK_EINTERNAL); /* one at a time */
	uint64_t image_index = f->index;
	apply_noted(f, &r.b, s, "during", 20);
	run_until_not_running(&r);
	assert_int_equal(r.b.state, IMAGE_BUILD_READY);
	apply_noted(f, &r.b, s, "after", 5); /* still noted until taken */
	struct raft_buffer *bufs;
	unsigned n;
	assert_int_equal(image_build_take(&r.b, &bufs, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(r.b.state, IMAGE_BUILD_IDLE);
	uint8_t *one = malloc(bufs[0].len + bufs[1].len);
	memcpy(one, bufs[0].base, bufs[0].len);
	memcpy(one + bufs[0].len, bufs[1].base, bufs[1].len);
	struct snapshot_parts p;
	assert_int_equal(snapshot_split(one, bufs[0].len + bufs[1].len, &p), 0);
	assert_int_equal(p.image_index, image_index);
	assert_int_equal(p.n_entries, 25);
	assert_int_equal(p.index, f->index);
	struct fx *g = fx_peer(f);
	assert_int_equal(snapshot_load(&g->store, &g->fsm, &p, NULL), 0);
	fx_assert_same_state(f, g);
	free(one);
	raft_free(bufs[0].base);
	raft_free(bufs[1].base);
	raft_free(bufs);
	rig_close(&r);
}

/* A restore replaces the state under a running build: its result is
 * dropped, and it is not a lost build. */
static void test_discard_while_running(void **state)
{
	struct fx *f = *state;
	fx_init(f, FX_FLOOR);
	uint64_t s = fx_session(f);
	struct rig r;
	rig_open(&r, f, 50);
	assert_int_equal(image_build_start(&r.b), 0);
	image_build_discard(&r.b);
	apply_noted(f, &r.b, s, "x", 3);
	assert_int_equal(r.b.tail.n, 0); /* nothing noted for a dropped build */
	run_until_not_running(&r);
	assert_int_equal(r.b.state, IMAGE_BUILD_IDLE);
	assert_null(r.b.image);
	assert_false(image_build_failed(&r.b));
	/* A ready build dropped the same way. */
	r.b.delay_ms = 0;
	assert_int_equal(image_build_start(&r.b), 0);
	run_until_not_running(&r);
	assert_int_equal(r.b.state, IMAGE_BUILD_READY);
	image_build_discard(&r.b);
	assert_int_equal(r.b.state, IMAGE_BUILD_IDLE);
	rig_close(&r);
}

/* Shutdown while the worker dumps: close waits for it and frees its image;
 * the store then closes, and the completion the loop runs after does
 * nothing. */
static void test_close_while_running(void **state)
{
	struct fx *f = *state;
	fx_init(f, FX_FLOOR);
	struct rig r;
	rig_open(&r, f, 50);
	assert_int_equal(image_build_start(&r.b), 0);
	image_build_close(&r.b);
	assert_true(r.b.worker_done);
	assert_null(r.b.image);
	fx_restart(f); /* closes and opens the store: no reader left */
	rig_close(&r); /* closing again is harmless; the completion does nothing */
}

/* A build whose tail could not be kept is lost: the next snapshot is to
 * be taken on the loop, once. */
static void test_lost_build_asks_for_the_loop(void **state)
{
	struct fx *f = *state;
	fx_init(f, FX_FLOOR);
	uint64_t s = fx_session(f);
	struct rig r;
	rig_open(&r, f, 20);
	assert_int_equal(image_build_start(&r.b), 0);
	r.b.spoilt = true; /* as when an entry could not be copied */
	apply_noted(f, &r.b, s, "x", 2);
	run_until_not_running(&r);
	assert_int_equal(r.b.state, IMAGE_BUILD_IDLE);
	assert_true(image_build_failed(&r.b));
	image_build_fallback_done(&r.b);
	assert_false(image_build_failed(&r.b));
	rig_close(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
		T(test_build_is_the_state_at_the_last_entry),
		T(test_discard_while_running),
		T(test_close_while_running),
		T(test_lost_build_asks_for_the_loop),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
