/*
 * test_fsm_snapshot.c: store_dump / store_load of a state built by the state
 * machine: round trips, and damaged images refused without harm.
 */
#include "feature_level.h"
#include "image.h"
#include "test_fsm_harness.h"

/* A state with something in every database: sessions with nonces, locks
 * with holders, waiters, a lock-delay and a semaphore. */
static void build_state(struct fx *f)
{
	f->now = 1000;
	fx_init(f, FX_FLOOR);
	uint64_t a = DO(f, OPEN_SESSION, .nonce = 1, .ttl_ms = 5000).session;
	uint64_t b = DO(f, OPEN_SESSION, .nonce = 2, .ttl_ms = 20000).session;
	DO(f, ACQUIRE, .session = a, .owner = 1, .name = "delayed", .lock_delay_ms = 30000);
	fx_take(f, b, 1, "held");
	fx_enqueue(f, OP(ACQUIRE, .session = a, .owner = 2, .name = "held", .wait_ms = 50000));
	DO(f, ACQUIRE, .session = b, .owner = 3, .name = "sem",
	   .kind = RAFTLOCK__LOCK_KIND__SEMAPHORE, .limit = 4, .permits = 3);
	f->now = 6000;
	DO(f, EXPIRE_SESSION, .target = a);
	/* Long enough to be live when the lock-delay ends (rule 6). */
	uint64_t c = fx_session_ttl(f, 60000);
	fx_enqueue(f, OP(ACQUIRE, .session = c, .owner = 1, .name = "delayed"));
}

/* Positions of the record tags of an image. */
static size_t image_tags(const struct fx_image *im, size_t *at, size_t max)
{
	const uint8_t *p = im->buf;
	size_t n = 0, pos = 16;
	while (pos < im->len - FX_IMAGE_SUM && p[pos] != 0xff) {
		assert_true(n < max);
		at[n++] = pos;
		size_t klen = (size_t)p[pos + 1] << 24 | (size_t)p[pos + 2] << 16 |
			      (size_t)p[pos + 3] << 8 | p[pos + 4];
		pos += 5 + klen;
		size_t vlen = (size_t)p[pos] << 24 | (size_t)p[pos + 1] << 16 |
			      (size_t)p[pos + 2] << 8 | p[pos + 3];
		pos += 4 + vlen;
	}
	/* the end byte comes last, before the checksum */
	assert_int_equal(pos, im->len - 1 - FX_IMAGE_SUM);
	return n;
}

static void test_dump_load_round_trip(void **state)
{
	struct fx *f = *state;
	build_state(f);
	struct fx_image im = fx_dump(f);
	uint64_t index = 0;
	assert_int_equal(store_image_index(im.buf, im.len, &index), 0);
	assert_int_equal(index, f->index);
	size_t tags[32];
	assert_true(image_tags(&im, tags, 32) >= 7);

	struct fx *g = fx_peer(f);
	assert_int_equal(store_load(&g->store, im.buf, im.len), 0);
	fx_assert_image(g, &im);
	assert_int_equal(fsm_applied_index(&g->fsm), f->index);

	/* Loading replaces whatever was there. */
	struct fx *h = fx_peer(f);
	build_state(h);
	fx_take(h, fx_session(h), 9, "other");
	assert_int_equal(store_load(&h->store, im.buf, im.len), 0);
	fx_assert_image(h, &im);

	/* The restored store goes on exactly like the original. */
	g->index = h->index = f->index;
	g->seq = h->seq = f->seq;
	g->now = h->now = f->now = 40000;
	DO(f, LOCK_DELAY_END, .name = "delayed");
	DO(g, LOCK_DELAY_END, .name = "delayed");
	DO(h, LOCK_DELAY_END, .name = "delayed");
	assert_int_equal(fx_count(g, FSM_EV_PUSH), 1);
	fx_assert_same_state(f, g);
	fx_assert_same_state(f, h);

	fx_image_free(&im);
}

/* Rule 14: a session's secret digest goes through a snapshot: the
 * restored store keeps it, and checks a retried open against it. */
static void test_secret_digest_round_trip(void **state)
{
	struct fx *f = *state;
	build_state(f);
	const char *digest = "digest-of-a-secret-32-bytes-long";
	uint64_t s = DO(f, OPEN_SESSION, .nonce = 9, .ttl_ms = 60000, .digest = digest).session;
	struct fx_image im = fx_dump(f);
	struct fx *g = fx_peer(f);
	assert_int_equal(store_load(&g->store, im.buf, im.len), 0);
	Raftlock__SessionRecord *rec = fx_sess(g, s);
	assert_non_null(rec);
	assert_int_equal(rec->secret_digest.len, 32);
	assert_memory_equal(rec->secret_digest.data, digest, 32);
	raftlock__session_record__free_unpacked(rec, NULL);
	g->index = f->index;
	g->now = f->now;
	assert_int_equal(DO(g, OPEN_SESSION, .nonce = 9, .ttl_ms = 60000, .digest = digest).session,
			 s);
	assert_int_equal(DO(g, OPEN_SESSION, .nonce = 9, .ttl_ms = 60000).status, RAFTLOCK_EPERM);
	fx_image_free(&im);
}

#define NAMES(...)                          \
	(const char *const[]){__VA_ARGS__}, \
		.n_names = sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)

/* At the current feature level images are RLSNAP06 (summed by words, with
 * the session_locks table):
 * one of a state with every kind of record (sessions with secrets and
 * identities, held locks, waiters, a semaphore, a lock-delay, access
 * rules, an election's value, a held and a waiting lock set) loads into
 * an empty store as the very same bytes, and the two go on alike. */
static void test_current_format_round_trip_keeps_everything(void **state)
{
	struct fx *f = *state;
	build_state(f);
	DO(f, SET_FEATURE_LEVEL, .level = FEATURE_LEVEL);
	DO(f, ACL_SET, .identity = "alice", .prefix = "db/", .perms = RAFTLOCK__ACL_PERM__ACL_LOCK);
	DO(f, ACL_SET, .identity = "*", .prefix = "", .perms = RAFTLOCK__ACL_PERM__ACL_READ);
	uint64_t a = DO(f, OPEN_SESSION, .nonce = 21, .ttl_ms = 60000, .identity = "alice",
			.digest = "digest-of-a-secret-32-bytes-long")
			     .session;
	uint64_t b = DO(f, OPEN_SESSION, .nonce = 22, .ttl_ms = 60000).session;
	uint64_t c = DO(f, OPEN_SESSION, .nonce = 23, .ttl_ms = 60000).session;
	fx_take(f, a, 1, "db/x");
	fx_enqueue(f, OP(ACQUIRE, .session = b, .owner = 1, .name = "db/x"));
	assert_int_equal(
		DO(f, ACQUIRE, .session = b, .owner = 2, .name = "elect", .value = "B1").status, 0);
	assert_int_equal(
		DO(f, MULTI_ACQUIRE, .session = c, .owner = 3, .names = NAMES("m1", "m2")).status,
		0);
	struct op o = OP(MULTI_ACQUIRE, .session = a, .owner = 4, .names = NAMES("m2", "m3"),
			 .wait = true);
	fx_number(f, &o);
	assert_true(fx_do(f, o).queued);

	struct fx_image im = fx_dump(f);
	assert_memory_equal(im.buf, "RLSNAP06", 8);
	uint64_t index = 0;
	assert_int_equal(store_image_index(im.buf, im.len, &index), 0);
	assert_int_equal(index, f->index);
	struct fx *g = fx_peer(f);
	assert_int_equal(store_load(&g->store, im.buf, im.len), 0);
	fx_assert_image(g, &im);
	assert_int_equal(store_record_bytes(&g->store), store_record_bytes(&f->store));
	/* what each table holds, read back from the loaded store */
	MDB_txn *txn = store_begin(&g->store, false);
	assert_int_equal(store_acl_perms(&g->store, txn, "alice", "db/x"),
			 RAFTLOCK__ACL_PERM__ACL_LOCK);
	assert_int_equal(store_acl_perms(&g->store, txn, "*", "any"), RAFTLOCK__ACL_PERM__ACL_READ);
	store_abort(txn);
	Raftlock__SessionRecord *sa = fx_sess(g, a);
	assert_string_equal(sa->identity, "alice");
	assert_int_equal(sa->secret_digest.len, 32);
	assert_int_equal(sa->n_locks, 0); /* in the table instead */
	assert_int_equal(sa->lock_count, 3);
	raftlock__session_record__free_unpacked(sa, NULL);
	size_t n;
	char **names = fx_session_names(g, a, &n);
	assert_int_equal(n, 3);
	assert_string_equal(names[0], "db/x");
	assert_string_equal(names[1], "m2");
	assert_string_equal(names[2], "m3");
	Raftlock__LockRecord *el = fx_lock(g, "elect");
	assert_int_equal(el->n_holders, 1);
	assert_string_equal(el->holders[0]->value, "B1");
	raftlock__lock_record__free_unpacked(el, NULL);
	Raftlock__LockRecord *m2 = fx_lock(g, "m2");
	assert_int_equal(m2->n_holders, 1);
	assert_int_equal(m2->n_waiters, 1);
	raftlock__lock_record__free_unpacked(m2, NULL);

	/* the same grants follow the same releases */
	g->index = f->index;
	g->seq = f->seq;
	g->now = f->now;
	struct fx *both[] = {f, g};
	for (int i = 0; i < 2; i++) {
		DO(both[i], RELEASE, .session = a, .owner = 1, .name = "db/x");
		assert_int_equal(fx_count(both[i], FSM_EV_PUSH), 1); /* to b */
		DO(both[i], RELEASE, .session = c, .owner = 3, .name = "m2");
		assert_int_equal(fx_count(both[i], FSM_EV_PUSH), 1); /* the set, to a */
	}
	fx_assert_same_state(f, g);
	fx_image_free(&im);
}

/* Below level FEATURES_IMAGE_WORDS (a cluster not fully upgraded) images
 * stay RLSNAP04, which every older build reads; below
 * FEATURES_SESSION_LOCK_INDEX, RLSNAP05. */
static void test_older_level_writes_the_older_format(void **state)
{
	struct fx *f = *state;
	build_state(f);
	struct fx_image im = fx_dump(f);
	assert_memory_equal(im.buf, "RLSNAP04", 8);
	fx_image_free(&im);
	DO(f, SET_FEATURE_LEVEL, .level = FEATURES_IMAGE_WORDS - 1);
	im = fx_dump(f);
	assert_memory_equal(im.buf, "RLSNAP04", 8);
	fx_image_free(&im);
	DO(f, SET_FEATURE_LEVEL, .level = FEATURES_IMAGE_WORDS);
	im = fx_dump(f);
	assert_memory_equal(im.buf, "RLSNAP05", 8);
	fx_image_free(&im);
	DO(f, SET_FEATURE_LEVEL, .level = FEATURES_SESSION_LOCK_INDEX);
	im = fx_dump(f);
	assert_memory_equal(im.buf, "RLSNAP06", 8);
	fx_image_free(&im);
}

/* The names a session holds or awaits, in the order session_locks_names()
 * gives them, joined by spaces. */
static const char *names_of(struct fx *f, uint64_t id)
{
	static char out[256];
	size_t n;
	char **names = fx_session_names(f, id, &n);
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		strcat(out, i ? " " : "");
		strcat(out, names[i]);
	}
	return out;
}

/* The entry that records level FEATURES_SESSION_LOCK_INDEX moves every
 * session's list into the session_locks table: the names stay the same,
 * the records keep their number, a node replaying the log and a node
 * loading an image taken before it end with the same bytes, and the
 * record bytes the store-full rule reads agree with a fresh count. From
 * then on the table follows grants, waits, releases and ends. */
static void test_level_moves_names_to_their_table(void **state)
{
	struct fx *f = *state;
	build_state(f);
	uint64_t b = 2, c = 3;
	DO(f, SET_FEATURE_LEVEL, .level = FEATURES_SESSION_LOCK_INDEX - 1);
	fx_take(f, b, 4, "b-extra");
	Raftlock__SessionRecord *sb = fx_sess(f, b);
	assert_int_equal(sb->n_locks, 3); /* a list below the level */
	raftlock__session_record__free_unpacked(sb, NULL);
	assert_string_equal(names_of(f, b), "held sem b-extra");
	struct fx *early = fx_peer(f);
	fx_restore_from(early, f);
	size_t before = f->n_log;

	DO(f, SET_FEATURE_LEVEL, .level = FEATURES_SESSION_LOCK_INDEX);
	sb = fx_sess(f, b);
	assert_int_equal(sb->n_locks, 0);
	assert_int_equal(sb->lock_count, 3);
	raftlock__session_record__free_unpacked(sb, NULL);
	assert_string_equal(names_of(f, b), "b-extra held sem");
	assert_string_equal(names_of(f, c), "delayed");

	struct fx *replayed = fx_peer(f);
	fx_replay(replayed, f, 0, f->n_log);
	fx_assert_same_state(f, replayed);
	fx_replay(early, f, before, f->n_log);
	fx_assert_same_state(f, early);
	struct fx *loaded = fx_peer(f);
	fx_restore_from(loaded, f);
	assert_int_equal(store_record_bytes(&loaded->store), store_record_bytes(&f->store));

	/* the table follows what happens next */
	fx_release_ok(f, b, 4, "b-extra", 0);
	assert_string_equal(names_of(f, b), "held sem");
	uint64_t d = fx_session(f);
	fx_enqueue(f, OP(ACQUIRE, .session = d, .owner = 1, .name = "held"));
	assert_string_equal(names_of(f, d), "held");
	DO(f, CLOSE_SESSION, .session = b);
	assert_string_equal(names_of(f, d), "held"); /* now held */
	Raftlock__SessionRecord *gone = fx_sess(f, b);
	assert_null(gone);
	MDB_txn *txn = store_begin(&f->store, false);
	assert_false(store_session_lock_has(&f->store, txn, b, "held"));
	assert_false(store_session_lock_has(&f->store, txn, b, "sem"));
	store_abort(txn);
	fx_restore_from(loaded, f);
	assert_int_equal(store_record_bytes(&loaded->store), store_record_bytes(&f->store));

	/* the table's records in an image of an older format: damaged */
	struct fx_image im = fx_dump(f);
	assert_memory_equal(im.buf, "RLSNAP06", 8);
	uint8_t *old = fx_alloc(f, im.len);
	memcpy(old, im.buf, im.len);
	memcpy(old, "RLSNAP05", 8);
	uint64_t sum = image_sum_of(old, im.len - FX_IMAGE_SUM);
	for (int i = 7; i >= 0; i--, sum >>= 8)
		old[im.len - FX_IMAGE_SUM + (size_t)i] = (uint8_t)sum;
	assert_int_equal(store_load(&early->store, old, im.len), RAFTLOCK_EDATA);
	fx_image_free(&im);
}

/* A target store with a state of its own, an image of another state, and
 * a scratch buffer one byte longer than the image. */
struct damage {
	struct fx *target;
	uint64_t session; /* the target's */
	struct fx_image image, was;
	size_t tags[32], n_tags;
	uint8_t *bad;
};

static void damage_setup(struct fx *f, struct damage *d)
{
	build_state(f);
	d->image = fx_dump(f);
	d->n_tags = image_tags(&d->image, d->tags, 32);
	d->bad = fx_alloc(f, d->image.len + 1);
	d->target = fx_peer(f);
	d->target->now = 500;
	fx_init(d->target, 7);
	d->session = fx_session(d->target);
	fx_take(d->target, d->session, 1, "mine");
	d->was = fx_dump(d->target);
}

/* A fresh copy of the image to damage. */
static uint8_t *damage_copy(struct damage *d)
{
	memcpy(d->bad, d->image.buf, d->image.len);
	return d->bad;
}

/* Asserts that loading n bytes of the damaged copy is refused and leaves
 * the target as it was. */
static void assert_refused(struct damage *d, size_t n)
{
	assert_int_equal(store_load(&d->target->store, d->bad, n), RAFTLOCK_EDATA);
	fx_assert_image(d->target, &d->was);
}

static void test_damaged_image_refused(void **state)
{
	struct damage d;
	damage_setup(*state, &d);
	size_t len = d.image.len;

	const size_t cuts[] = {0, 1, 8, 16, 17, 18, 30, len / 2, len - 2, len - 1};
	damage_copy(&d);
	for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
		assert_refused(&d, cuts[i]);

	for (size_t i = 0; i < 8; i++) {
		damage_copy(&d)[i] ^= 0x20;
		assert_refused(&d, len);
		uint64_t index;
		assert_int_equal(store_image_index(d.bad, len, &index), RAFTLOCK_EDATA);
	}

	for (size_t i = 0; i < d.n_tags; i++) {
		uint8_t *bad = damage_copy(&d);
		bad[d.tags[i]] = (uint8_t)~bad[d.tags[i]];
		assert_refused(&d, len);
		bad[d.tags[i]] = 0;
		assert_refused(&d, len);
	}

	/* The target still works. */
	d.target->now = 600;
	Raftlock__Result r =
		DO(d.target, ACQUIRE, .session = d.session, .owner = 1, .name = "mine");
	assert_int_equal(r.status, 0);
	assert_int_equal(r.count, 2);
}

/*
 * Regression: store_load stops at the first 0xff where a tag is
 * expected and commits what it has read, ignoring the bytes after it. A
 * first tag damaged into 0xff loads an empty store (applied index 0) and
 * returns 0; trailing bytes after the end marker are accepted too.
 */
static void test_end_marker_must_end_the_image(void **state)
{
	struct damage d;
	damage_setup(*state, &d);
	for (size_t i = 0; i < d.n_tags; i++) {
		damage_copy(&d)[d.tags[i]] = 0xff;
		assert_refused(&d, d.image.len);
	}
	damage_copy(&d)[d.image.len] = 0x42;
	assert_refused(&d, d.image.len + 1);
}

/*
 * Regression: a single bit flipped in a tag that turns it into
 * another database's tag (sessions 2 -> locks 3, locks 3 -> sessions 2)
 * is loaded when the keys still sort: the image has no checksum, so the
 * record lands in the wrong database and store_load returns 0.
 */
static void test_tag_bit_flip_refused(void **state)
{
	struct damage d;
	damage_setup(*state, &d);
	for (size_t i = 0; i < d.n_tags; i++) {
		for (unsigned bit = 0; bit < 8; bit++) {
			damage_copy(&d)[d.tags[i]] ^= (uint8_t)(1u << bit);
			assert_refused(&d, d.image.len);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
		T(test_dump_load_round_trip),
		T(test_secret_digest_round_trip),
		T(test_damaged_image_refused),
		T(test_end_marker_must_end_the_image),
		T(test_tag_bit_flip_refused),
		T(test_current_format_round_trip_keeps_everything),
		T(test_older_level_writes_the_older_format),
		T(test_level_moves_names_to_their_table),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
