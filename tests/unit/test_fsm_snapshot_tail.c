/*
 * test_fsm_snapshot_tail.c: a snapshot made of an image dumped from a read
 * transaction while entries kept applying, and the tail of those entries
 * (snapshot_tail.h, feature level 6): loaded anywhere, it is the state at
 * the tail's last entry; a damaged tail or image is refused before the
 * store is touched.
 */
#include <stdatomic.h>

#include "snapshot_tail.h"
#include "test_fsm_harness.h"

/* A snapshot as node.c makes one off the loop: the image of the state at
 * f's index now, dumped only after `later` more entries applied, and
 * those entries as the tail. */
struct made {
	uint8_t *buf;
	size_t len, image_len;
	uint64_t image_index;
};

static void apply_later(struct fx *f, uint64_t a, uint64_t b)
{
	uint64_t c = fx_session(f);
	fx_take(f, c, 7, "later/1");
	fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 1, .name = "later/1", .wait_ms = 60000));
	DO(f, RELEASE, .session = c, .owner = 7, .name = "later/1"); /* grants b */
	DO(f, ACQUIRE, .session = b, .owner = 2, .name = "later/sem",
	   .kind = RAFTLOCK__LOCK_KIND__SEMAPHORE, .limit = 3, .permits = 2);
	f->now += 20000;
	DO(f, EXPIRE_SESSION, .target = a);
}

static struct made make_snapshot(struct fx *f, uint64_t a, uint64_t b)
{
	struct made m = {0};
	MDB_txn *txn = store_begin(&f->store, false);
	m.image_index = f->index;
	size_t first = f->n_log;
	apply_later(f, a, b);
	struct snapshot_tail tail = {0};
	for (size_t i = first; i < f->n_log; i++)
		assert_int_equal(
			snapshot_tail_add(&tail, f->log[i].index, f->log[i].buf, f->log[i].len), 0);
	void *image, *rest;
	size_t rest_len;
	assert_int_equal(store_dump_at(&f->store, txn, malloc, free, NULL, &image, &m.image_len),
			 0);
	store_abort(txn);
	assert_int_equal(snapshot_tail_finish(&tail, malloc, &rest, &rest_len), 0);
	assert_int_equal(tail.n, 0); /* emptied */
	snapshot_tail_free(&tail);
	m.len = m.image_len + rest_len;
	m.buf = malloc(m.len);
	assert_non_null(m.buf);
	memcpy(m.buf, image, m.image_len);
	memcpy(m.buf + m.image_len, rest, rest_len);
	free(image);
	free(rest);
	return m;
}

static void build(struct fx *f, uint64_t *a, uint64_t *b)
{
	f->now = 1000;
	fx_init(f, FX_FLOOR);
	*a = DO(f, OPEN_SESSION, .nonce = 1, .ttl_ms = 5000).session;
	*b = DO(f, OPEN_SESSION, .nonce = 2, .ttl_ms = 600000).session;
	fx_take(f, *b, 1, "held");
	fx_enqueue(f, OP(ACQUIRE, .session = *a, .owner = 2, .name = "held", .wait_ms = 50000));
}

static void test_image_and_tail_give_the_state_at_the_last_entry(void **state)
{
	struct fx *f = *state;
	uint64_t a, b;
	build(f, &a, &b);
	struct made m = make_snapshot(f, a, b);

	struct snapshot_parts p;
	assert_int_equal(snapshot_split(m.buf, m.len, &p), 0);
	assert_int_equal(p.image_len, m.image_len);
	assert_int_equal(p.image_index, m.image_index);
	assert_int_equal(p.n_entries, 6);
	assert_int_equal(p.index, f->index);

	/* A fresh node, and one that had moved on a different way. */
	struct fx *g = fx_peer(f);
	assert_int_equal(snapshot_load(&g->store, &g->fsm, &p, NULL), 0);
	assert_int_equal(fsm_applied_index(&g->fsm), f->index);
	fx_assert_same_state(f, g);
	struct fx *h = fx_peer(f);
	fx_init(h, FX_FLOOR);
	fx_take(h, fx_session(h), 9, "other");
	assert_int_equal(snapshot_load(&h->store, &h->fsm, &p, NULL), 0);
	fx_assert_same_state(f, h);

	/* The image alone, without the tail, is the state at its own index. */
	assert_int_equal(snapshot_split(m.buf, m.image_len, &p), 0);
	assert_int_equal(p.n_entries, 0);
	assert_null(p.entries);
	assert_int_equal(p.index, m.image_index);
	free(m.buf);
}

/* With no entry applied meanwhile the tail is its trailer alone. */
static void test_empty_tail(void **state)
{
	struct fx *f = *state;
	uint64_t a, b;
	build(f, &a, &b);
	MDB_txn *txn = store_begin(&f->store, false);
	void *image, *rest;
	size_t image_len, rest_len;
	assert_int_equal(store_dump_at(&f->store, txn, malloc, free, NULL, &image, &image_len), 0);
	store_abort(txn);
	struct snapshot_tail tail = {0};
	assert_int_equal(snapshot_tail_finish(&tail, malloc, &rest, &rest_len), 0);
	assert_int_equal(rest_len, SNAPSHOT_TAIL_TRAILER);
	uint8_t *buf = malloc(image_len + rest_len);
	memcpy(buf, image, image_len);
	memcpy(buf + image_len, rest, rest_len);
	struct snapshot_parts p;
	assert_int_equal(snapshot_split(buf, image_len + rest_len, &p), 0);
	assert_int_equal(p.n_entries, 0);
	assert_int_equal(p.index, f->index);
	struct fx *g = fx_peer(f);
	assert_int_equal(snapshot_load(&g->store, &g->fsm, &p, NULL), 0);
	fx_assert_same_state(f, g);
	free(buf);
	free(image);
	free(rest);
}

static void assert_refused(const uint8_t *buf, size_t len)
{
	struct snapshot_parts p;
	assert_int_equal(snapshot_split(buf, len, &p), RAFTLOCK_EDATA);
}

/* Every byte of the tail is covered: a flipped bit anywhere in it, a
 * truncation, or a tail glued to another image is refused. */
static void test_damaged_tail_refused(void **state)
{
	struct fx *f = *state;
	uint64_t a, b;
	build(f, &a, &b);
	struct made m = make_snapshot(f, a, b);
	uint8_t *copy = malloc(m.len);
	for (size_t i = m.image_len; i < m.len - 8; i++) { /* all but the magic */
		memcpy(copy, m.buf, m.len);
		copy[i] ^= 0x10;
		assert_refused(copy, m.len);
	}
	/* The magic damaged: read as an image alone, whose sum then fails. */
	memcpy(copy, m.buf, m.len);
	copy[m.len - 1] ^= 1;
	assert_refused(copy, m.len);
	/* A byte of the image. */
	memcpy(copy, m.buf, m.len);
	copy[20] ^= 1;
	assert_refused(copy, m.len);
	/* Cut anywhere in the tail. */
	for (size_t cut = m.image_len + 1; cut < m.len; cut += 7)
		assert_refused(m.buf, cut);
	free(copy);
	free(m.buf);
}

/* A tail whose entries do not follow the image, or do not grow, is not one
 * node.c writes: refused even with its sum right. */
static void test_entries_must_follow_the_image(void **state)
{
	struct fx *f = *state;
	uint64_t a, b;
	build(f, &a, &b);
	void *image, *rest;
	size_t image_len, rest_len;
	MDB_txn *txn = store_begin(&f->store, false);
	assert_int_equal(store_dump_at(&f->store, txn, malloc, free, NULL, &image, &image_len), 0);
	store_abort(txn);
	const uint64_t at[][2] = {{f->index, f->index + 1},     /* the image's own index */
				  {f->index + 2, f->index + 1}, /* going back */
				  {f->index + 1, f->index + 1}};
	for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
		struct snapshot_tail tail = {0};
		assert_int_equal(snapshot_tail_add(&tail, at[k][0], "12345678", 8), 0);
		assert_int_equal(snapshot_tail_add(&tail, at[k][1], "12345678", 8), 0);
		assert_int_equal(snapshot_tail_finish(&tail, malloc, &rest, &rest_len), 0);
		snapshot_tail_free(&tail);
		uint8_t *buf = malloc(image_len + rest_len);
		memcpy(buf, image, image_len);
		memcpy(buf + image_len, rest, rest_len);
		assert_refused(buf, image_len + rest_len);
		free(buf);
		free(rest);
	}
	free(image);
}

static int released;
static void count_release(void *p)
{
	released++;
	free(p);
}

/* A dump told to stop returns its buffer and nothing else. */
static void test_dump_stops_when_told(void **state)
{
	struct fx *f = *state;
	fx_init(f, FX_FLOOR);
	/* More lock records than a dump reads between looks at stop (4,096),
	 * 100 a session: at level 0 a session's record lists its names, and
	 * one session of them all took 10 s to fill. */
	enum { N = 5000, PER_SESSION = 100 };
	uint64_t s = 0;
	struct op *ops = calloc(N, sizeof *ops);
	char(*names)[16] = calloc(N, sizeof *names);
	for (int i = 0; i < N; i++) {
		if (i % PER_SESSION == 0)
			s = fx_session(f);
		snprintf(names[i], sizeof names[i], "n/%d", i);
		ops[i] = OP(ACQUIRE, .session = s, .owner = 1, .name = names[i]);
	}
	for (int i = 0; i < N; i += 20) /* events of an entry are bounded */
		fx_apply(f, ops + i, 20);
	atomic_bool stop;
	atomic_init(&stop, true);
	MDB_txn *txn = store_begin(&f->store, false);
	void *image = NULL;
	size_t len = 0;
	released = 0;
	assert_int_equal(store_dump_at(&f->store, txn, malloc, count_release, &stop, &image, &len),
			 RAFTLOCK_EUNAVAILABLE);
	assert_int_equal(released, 1);
	atomic_store(&stop, false);
	assert_int_equal(store_dump_at(&f->store, txn, malloc, count_release, &stop, &image, &len),
			 0);
	assert_int_equal(released, 1);
	store_abort(txn);
	struct snapshot_parts p;
	assert_int_equal(snapshot_split(image, len, &p), 0);
	free(image);
	free(ops);
	free(names);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
		T(test_image_and_tail_give_the_state_at_the_last_entry),
		T(test_empty_tail),
		T(test_damaged_tail_refused),
		T(test_entries_must_follow_the_image),
		T(test_dump_stops_when_told),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
