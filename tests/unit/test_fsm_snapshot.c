/*
 * test_fsm_snapshot.c: store_dump / store_load of a state built by the state
 * machine: round trips, and damaged images refused without harm.
 */
#include "feature_level.h"
#include "image.h"
#include "records.h"
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

/* At the current feature level images are RLSNAP07 (summed by words, with
 * the session_locks and outcomes tables):
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
	assert_memory_equal(im.buf, "RLSNAP07", 8);
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
 * FEATURES_SESSION_LOCK_INDEX, RLSNAP05; below FEATURES_SEQ_TABLES,
 * RLSNAP06. */
static void test_older_level_writes_the_older_format(void **state)
{
	static const struct {
		uint32_t level; /* 0: none recorded */
		const char *magic;
	} steps[] = {
		{0, "RLSNAP04"},
		{FEATURES_IMAGE_WORDS - 1, "RLSNAP04"},
		{FEATURES_IMAGE_WORDS, "RLSNAP05"},
		{FEATURES_SESSION_LOCK_INDEX, "RLSNAP06"},
		{FEATURES_SEQ_TABLES - 1, "RLSNAP06"},
		{FEATURES_SEQ_TABLES, "RLSNAP07"},
	};
	struct fx *f = *state;
	build_state(f);
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		if (steps[i].level != 0)
			DO(f, SET_FEATURE_LEVEL, .level = steps[i].level);
		struct fx_image im = fx_dump(f);
		assert_memory_equal(im.buf, steps[i].magic, 8);
		fx_image_free(&im);
	}
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

/* A copy of the image with another magic, summed again (a format the
 * content does not fit, with right sums). */
static const uint8_t *remagic(struct fx *f, const struct fx_image *im, const char *magic)
{
	uint8_t *copy = fx_alloc(f, im->len);
	memcpy(copy, im->buf, im->len);
	memcpy(copy, magic, 8);
	uint64_t sum = image_sum_of(copy, im->len - FX_IMAGE_SUM);
	for (int i = 7; i >= 0; i--, sum >>= 8)
		copy[im->len - FX_IMAGE_SUM + (size_t)i] = (uint8_t)sum;
	return copy;
}

/* After an entry that moved records to a table of their own: a node that
 * replays the whole log, and early (an image taken before the entry at
 * f's log position before) replaying the rest, end with f's bytes; an
 * image of f loads into a new node (returned) with the same record bytes
 * (the store-full rule's figure). */
static struct fx *assert_peers_agree(struct fx *f, struct fx *early, size_t before)
{
	struct fx *replayed = fx_peer(f);
	fx_replay(replayed, f, 0, f->n_log);
	fx_assert_same_state(f, replayed);
	fx_replay(early, f, before, f->n_log);
	fx_assert_same_state(f, early);
	struct fx *loaded = fx_peer(f);
	fx_restore_from(loaded, f);
	assert_int_equal(store_record_bytes(&loaded->store), store_record_bytes(&f->store));
	return loaded;
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

	struct fx *loaded = assert_peers_agree(f, early, before);

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
	assert_int_equal(store_load(&early->store, remagic(f, &im, "RLSNAP05"), im.len),
			 RAFTLOCK_EDATA);
	fx_image_free(&im);
}

/* The outcomes a session keeps, as "seq" words in seq order, "p" after a
 * pending one's seq, "q" after a queued one's. */
static const char *outcomes_of(struct fx *f, uint64_t id)
{
	static char out[512];
	struct fx_outcome got[32];
	size_t n = fx_outcomes(f, id, got, 32);
	assert_true(n <= 32);
	out[0] = '\0';
	for (size_t i = 0; i < n; i++)
		snprintf(out + strlen(out), sizeof out - strlen(out), "%s%llu%s%s", i ? " " : "",
			 (unsigned long long)got[i].seq, got[i].pending ? "p" : "",
			 got[i].queued ? "q" : "");
	return out;
}

/* How many outcome rows the store holds for session id (0 once it ended). */
static size_t outcome_rows(struct fx *f, uint64_t id)
{
	struct fx_outcomes_copy c = {0};
	MDB_txn *txn = store_begin(&f->store, false);
	store_sweep_outcomes(&f->store, txn, id, 0, UINT64_MAX, fx_outcome_copy, &c);
	store_abort(txn);
	return c.n;
}

static size_t session_bytes(struct fx *f, uint64_t id)
{
	Raftlock__SessionRecord *rec = fx_sess(f, id);
	size_t n = protobuf_c_message_get_packed_size(&rec->base);
	raftlock__session_record__free_unpacked(rec, NULL);
	return n;
}

/* The entry that records level FEATURES_SEQ_TABLES moves every
 * session's outcomes into the outcomes table (GUARANTEES rule 6 keeps its
 * records): the records stay, pending and queued ones marked so, the
 * session records keep their number, a node replaying the log and a node
 * loading an image taken before it end with the same bytes, and the
 * record bytes the store-full rule reads agree with a fresh count. From
 * then on the table follows grants, acknowledgements, the mark and the
 * session's end. */
static void test_level_moves_outcomes_to_their_table(void **state)
{
	struct fx *f = *state;
	build_state(f);
	DO(f, SET_FEATURE_LEVEL, .level = FEATURES_SEQ_TABLES - 1);
	uint64_t h = fx_session(f);
	uint64_t s = DO(f, OPEN_SESSION, .nonce = 31, .ttl_ms = 60000, .acks_queued = true).session;
	fx_take(f, h, 1, "q");
	uint64_t qs = fx_enqueue(f, OP(ACQUIRE, .session = s, .owner = 1, .name = "q"));
	/* a queued lock set, of another session, behind s on "q" */
	uint64_t m = fx_session(f);
	struct op set = OP(MULTI_ACQUIRE, .session = m, .owner = 1, .names = NAMES("m1", "q"),
			   .wait = true);
	fx_number(f, &set);
	assert_true(fx_do(f, set).queued);
	Raftlock__Result x = DO(f, ACQUIRE, .session = s, .owner = 2, .name = "x");
	assert_int_equal(x.status, 0);
	uint64_t xs = f->seq;
	char want[64];
	snprintf(want, sizeof want, "%llupq %llu", (unsigned long long)qs, (unsigned long long)xs);
	assert_string_equal(outcomes_of(f, s), want);
	Raftlock__SessionRecord *rec = fx_sess(f, s);
	assert_int_equal(rec->n_outcomes, 2); /* a list below the level */
	raftlock__session_record__free_unpacked(rec, NULL);
	struct fx *early = fx_peer(f);
	fx_restore_from(early, f);
	size_t before = f->n_log;

	DO(f, SET_FEATURE_LEVEL, .level = FEATURES_SEQ_TABLES);
	rec = fx_sess(f, s);
	assert_int_equal(rec->n_outcomes, 0);
	assert_int_equal(rec->outcome_count, 2);
	assert_int_equal(rec->pending_outcomes, 1);
	raftlock__session_record__free_unpacked(rec, NULL);
	assert_string_equal(outcomes_of(f, s), want);
	rec = fx_sess(f, m);
	assert_int_equal(rec->n_multi_waits, 0);
	raftlock__session_record__free_unpacked(rec, NULL);
	MDB_txn *txn = store_begin(&f->store, false);
	Raftlock__MultiWait *mw = store_get_multi_wait(&f->store, txn, m, set.seq);
	store_abort(txn);
	assert_non_null(mw);
	assert_int_equal(mw->n_names, 2);
	raftlock__multi_wait__free_unpacked(mw, NULL);
	/* a retry is answered from its row, as from the list */
	Raftlock__Result again = DO(f, ACQUIRE, .session = s, .seq = xs, .owner = 2, .name = "x");
	assert_int_equal(again.status, 0);
	assert_int_equal(again.token, x.token);

	struct fx *loaded = assert_peers_agree(f, early, before);

	/* the table follows what happens next: the grant makes the pending
	 * row final, still queued until acknowledged... */
	fx_release_ok(f, h, 1, "q", 0);
	uint64_t t = fx_pushed_grant(f, s, qs);
	snprintf(want, sizeof want, "%lluq %llu", (unsigned long long)qs, (unsigned long long)xs);
	assert_string_equal(outcomes_of(f, s), want);
	/* ...and the mark passing both takes only the other one */
	DO(f, ACQUIRE, .session = s, .ack_below = f->seq + 1, .owner = 3, .name = "y");
	snprintf(want, sizeof want, "%lluq %llu", (unsigned long long)qs,
		 (unsigned long long)f->seq);
	assert_string_equal(outcomes_of(f, s), want);
	Raftlock__Result cancel =
		DO(f, CANCEL_WAIT, .session = s, .owner = 1, .name = "q", .acquire_seq = qs);
	assert_int_equal(cancel.token, t); /* the kept record knows the grant */
	/* the acknowledgement takes it, below the mark; the release grants
	 * the set its row kept */
	DO(f, RELEASE, .session = s, .owner = 1, .name = "q", .acked = &qs, .n_acked = 1);
	assert_false(strstr(outcomes_of(f, s), "q") != NULL);
	const struct fx_event *granted = fx_push(f, m, set.seq);
	assert_non_null(granted);
	assert_int_equal(granted->result.status, 0);
	assert_int_equal(granted->result.n_tokens, 2);
	txn = store_begin(&f->store, false);
	assert_null(store_get_multi_wait(&f->store, txn, m, set.seq));
	store_abort(txn);
	assert_true(outcome_rows(f, s) > 0);
	DO(f, CLOSE_SESSION, .session = s);
	assert_int_equal(outcome_rows(f, s), 0);
	fx_restore_from(loaded, f);
	assert_int_equal(store_record_bytes(&loaded->store), store_record_bytes(&f->store));
	fx_assert_same_state(f, loaded);
}

/* What the table is for: a client that holds its mark back (an orphan, or
 * a client that never moves it) keeps up to 8,192 outcomes. In the list
 * every command of that session re-encodes all of them; in the table the
 * session's record stays the size it was, and the oldest is still
 * answered from its row. */
static void test_pinned_mark_leaves_the_record_small(void **state)
{
	struct fx *f = *state;
	build_state(f);
	DO(f, SET_FEATURE_LEVEL, .level = FEATURES_SEQ_TABLES - 1);
	uint64_t s = fx_session(f);
	Raftlock__Result first = DO(f, ACQUIRE, .session = s, .owner = 1, .name = "pin/0");
	assert_int_equal(first.status, 0);
	uint64_t first_seq = f->seq;
	size_t small = session_bytes(f, s);
	for (int i = 1; i < 200; i++)
		assert_int_equal(DO(f, RELEASE, .session = s, .owner = 1, .name = "none").status,
				 RAFTLOCK_ENOTHOLDER);
	assert_true(session_bytes(f, s) > small + 199 * 4); /* the list grew */

	DO(f, SET_FEATURE_LEVEL, .level = FEATURES_SEQ_TABLES);
	size_t moved = session_bytes(f, s);
	assert_true(moved <= small + 8);
	for (int i = 0; i < 300; i++)
		assert_int_equal(DO(f, RELEASE, .session = s, .owner = 1, .name = "none").status,
				 RAFTLOCK_ENOTHOLDER);
	assert_true(session_bytes(f, s) <= moved + 1); /* a count's varint may grow */
	assert_int_equal(fx_outcomes(f, s, NULL, 0), 500);
	Raftlock__Result again =
		DO(f, ACQUIRE, .session = s, .seq = first_seq, .owner = 1, .name = "pin/0");
	assert_int_equal(again.status, 0);
	assert_int_equal(again.token, first.token);
	/* the mark moving on takes them all but the last */
	DO(f, RELEASE, .session = s, .ack_below = f->seq + 1, .owner = 1, .name = "pin/0");
	assert_int_equal(fx_outcomes(f, s, NULL, 0), 1);
}

/* The store f holds, as an image, loaded into node g (whose content it
 * replaces): 0 or the load's error. */
static int reload(struct fx *f, struct fx *g)
{
	struct fx_image im = fx_dump(f);
	int rv = store_load(&g->store, im.buf, im.len);
	fx_image_free(&im);
	return rv;
}

/* Edits f's store directly: put (or, with o NULL, delete) the outcome row
 * (id, seq). */
static void edit_outcome(struct fx *f, uint64_t id, uint64_t seq, const Raftlock__Outcome *o)
{
	MDB_txn *txn = store_begin(&f->store, true);
	if (o != NULL)
		store_put_outcome(&f->store, txn, id, o);
	else
		store_del_outcome(&f->store, txn, id, seq);
	store_commit(txn);
}

/* An image whose rows by (session, seq) disagree with its sessions, or
 * with its format, is damaged even with right sums: a row of no session,
 * a row its session does not count, a counted row missing, a set of no
 * session, the tables' format for a state of a lower level. Each is
 * refused whole; the image as it was loads. (Apply trusts the counts: a
 * session whose rows disagree stops every node when it ends.) */
static void test_image_rows_must_agree_with_their_sessions(void **state)
{
	struct fx *f = *state;
	build_state(f);
	DO(f, SET_FEATURE_LEVEL, .level = FEATURES_SEQ_TABLES);
	uint64_t s = fx_session(f);
	assert_int_equal(DO(f, ACQUIRE, .session = s, .owner = 1, .name = "rows").status, 0);
	uint64_t kept = f->seq;
	struct fx *g = fx_peer(f);
	assert_int_equal(reload(f, g), 0);

	Raftlock__Result res = RAFTLOCK__RESULT__INIT;
	Raftlock__Outcome row = RAFTLOCK__OUTCOME__INIT;
	row.result = &res;
	row.seq = 999;
	edit_outcome(f, 999999, 999, &row); /* of no session */
	assert_int_equal(reload(f, g), RAFTLOCK_EDATA);
	edit_outcome(f, 999999, 999, NULL);
	edit_outcome(f, s, 999, &row); /* not counted */
	assert_int_equal(reload(f, g), RAFTLOCK_EDATA);
	edit_outcome(f, s, 999, NULL);
	MDB_txn *txn = store_begin(&f->store, false);
	Raftlock__Outcome *own = store_get_outcome(&f->store, txn, s, kept);
	store_abort(txn);
	assert_non_null(own);
	edit_outcome(f, s, kept, NULL); /* counted, missing */
	assert_int_equal(reload(f, g), RAFTLOCK_EDATA);
	edit_outcome(f, s, kept, own);
	raftlock__outcome__free_unpacked(own, NULL);
	assert_int_equal(reload(f, g), 0);

	char *names[] = {"rows"};
	Raftlock__MultiWait set = RAFTLOCK__MULTI_WAIT__INIT;
	set.seq = 5;
	set.names = names;
	set.n_names = 1;
	txn = store_begin(&f->store, true);
	store_put_multi_wait(&f->store, txn, 999999, &set); /* of no session */
	store_commit(txn);
	assert_int_equal(reload(f, g), RAFTLOCK_EDATA);
	txn = store_begin(&f->store, true);
	store_del_multi_wait(&f->store, txn, 999999, 5);
	store_commit(txn);

	struct fx_image im = fx_dump(f);
	assert_memory_equal(im.buf, "RLSNAP07", 8);
	assert_int_equal(store_load(&g->store, remagic(f, &im, "RLSNAP06"), im.len),
			 RAFTLOCK_EDATA);
	fx_image_free(&im);
	assert_int_equal(reload(f, g), 0);
}

/* Edits f's store directly: put lock record rec as it is. */
static void put_lock(struct fx *f, const Raftlock__LockRecord *rec)
{
	MDB_txn *txn = store_begin(&f->store, true);
	store_put_lock(&f->store, txn, rec);
	store_commit(txn);
}

/* Edits f's store directly: put session record rec as it is. */
static void put_session(struct fx *f, const Raftlock__SessionRecord *rec)
{
	MDB_txn *txn = store_begin(&f->store, true);
	store_put_session(&f->store, txn, rec);
	store_commit(txn);
}

/* At feature level `level`, a new session *session queues the lock set
 * m1, m2, m3 behind the holder of m2 (session *holder): its seq. */
static uint64_t queue_set(struct fx *f, uint32_t level, uint64_t *holder, uint64_t *session)
{
	build_state(f);
	DO(f, SET_FEATURE_LEVEL, .level = level);
	*holder = fx_session(f);
	fx_take(f, *holder, 1, "m2");
	*session = fx_session(f);
	struct op o = OP(MULTI_ACQUIRE, .session = *session, .owner = 4,
			 .names = NAMES("m1", "m2", "m3"), .wait = true);
	fx_number(f, &o);
	assert_true(fx_do(f, o).queued);
	return o.seq;
}

/* An image of f is refused by g, which says why naming the lock and the
 * set (session, seq). */
static void assert_set_refused(struct fx *f, struct fx *g, const char *lock, uint64_t session,
			       uint64_t seq)
{
	assert_int_equal(reload(f, g), RAFTLOCK_EDATA);
	const char *why = store_load_error(&g->store);
	char want[128];
	snprintf(want, sizeof want, "lock '%s'", lock);
	assert_non_null(strstr(why, want));
	snprintf(want, sizeof want, "session %llu's lock set of seq %llu",
		 (unsigned long long)session, (unsigned long long)seq);
	assert_non_null(strstr(why, want));
}

/* Lock name of f's store as it is; in the store, its last waiter taken
 * out (put_lock() of the record returned puts it back). */
static Raftlock__LockRecord *take_last_waiter(struct fx *f, const char *name)
{
	Raftlock__LockRecord *was = fx_lock(f, name), *l = fx_lock(f, name);
	assert_true(l->n_waiters > 0);
	records_remove_waiter(l, l->n_waiters - 1);
	put_lock(f, l);
	raftlock__lock_record__free_unpacked(l, NULL);
	return was;
}

/* The waiter of the set on m3 missing, then there but not marked as a
 * set's: refused, naming m3 and the set. */
static void assert_m3_waiter_needed(struct fx *f, struct fx *g, uint64_t session, uint64_t seq)
{
	Raftlock__LockRecord *m3 = take_last_waiter(f, "m3");
	assert_set_refused(f, g, "m3", session, seq);
	Raftlock__Waiter *w = m3->waiters[m3->n_waiters - 1];
	w->multi = false;
	put_lock(f, m3);
	assert_set_refused(f, g, "m3", session, seq);
	w->multi = true;
	put_lock(f, m3);
	raftlock__lock_record__free_unpacked(m3, NULL);
}

/* g holds f's state: the release of m2 by its holder grants session s
 * its set (seq) of three locks in both alike. */
static void assert_set_granted_alike(struct fx *f, struct fx *g, uint64_t holder, uint64_t s,
				     uint64_t seq)
{
	struct fx *both[] = {f, g};
	for (int i = 0; i < 2; i++) {
		DO(both[i], RELEASE, .session = holder, .owner = 1, .name = "m2");
		const struct fx_event *granted = fx_push(both[i], s, seq);
		assert_non_null(granted);
		assert_int_equal(granted->result.n_tokens, 3);
	}
	fx_assert_same_state(f, g);
}

/* A queued lock set and the waiters on its locks must agree (apply trusts
 * it: a waiter whose set is gone stops every node once it is granted, a
 * set without one of its waiters is never granted): an image where the
 * set's row is missing, or its waiter on one of its locks, or that waiter
 * is not marked as a set's, is refused, saying which lock and which set;
 * the image as it was loads, and the set is granted there as it is in
 * the original. */
static void test_image_sets_must_agree_with_their_waiters(void **state)
{
	struct fx *f = *state;
	uint64_t holder, s;
	uint64_t seq = queue_set(f, FEATURES_SEQ_TABLES, &holder, &s);
	struct fx *g = fx_peer(f);
	assert_int_equal(reload(f, g), 0);
	assert_string_equal(store_load_error(&g->store), "");

	MDB_txn *txn = store_begin(&f->store, true);
	Raftlock__MultiWait *row = store_get_multi_wait(&f->store, txn, s, seq);
	assert_non_null(row);
	store_del_multi_wait(&f->store, txn, s, seq); /* its waiters stay, m1's first */
	store_commit(txn);
	assert_set_refused(f, g, "m1", s, seq);
	txn = store_begin(&f->store, true);
	store_put_multi_wait(&f->store, txn, s, row);
	store_commit(txn);
	raftlock__multi_wait__free_unpacked(row, NULL);
	assert_m3_waiter_needed(f, g, s, seq);

	fx_restore_from(g, f);
	assert_string_equal(store_load_error(&g->store), "");
	assert_set_granted_alike(f, g, holder, s, seq);
}

/* The load into g of an image of f whose record of key `key` in table
 * `tag` (store.c's DB_*) does not decode, with right sums: refused,
 * saying why. */
static const char *load_undecodable(struct fx *f, struct fx *g, uint8_t tag, const char *key)
{
	struct fx_image im = fx_dump(f);
	size_t tags[32], n = image_tags(&im, tags, 32), damaged = 0;
	for (size_t i = 0; i < n && damaged == 0; i++) {
		const uint8_t *p = (const uint8_t *)im.buf + tags[i];
		size_t klen = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
		if (p[0] == tag && klen == strlen(key) && memcmp(p + 5, key, klen) == 0)
			damaged = tags[i] + 5 + klen + 4; /* its value's first byte */
	}
	assert_true(damaged > 0);
	((uint8_t *)im.buf)[damaged] = 0x0f; /* field 1, wire type 7 */
	assert_int_equal(store_load(&g->store, remagic(f, &im, "RLSNAP07"), im.len),
			 RAFTLOCK_EDATA);
	fx_image_free(&im);
	return store_load_error(&g->store);
}

/* A lock record or the meta record that does not decode, in an image
 * with right sums, is refused too, saying which (apply would stop at a
 * lock's; the load reads every lock's waiters from its bytes, and the
 * meta record's level). */
static void test_image_records_must_decode(void **state)
{
	struct fx *f = *state;
	build_state(f);
	DO(f, SET_FEATURE_LEVEL, .level = FEATURES_SEQ_TABLES);
	struct fx *g = fx_peer(f);
	assert_string_equal(load_undecodable(f, g, 3, "delayed"),
			    "the record of lock 'delayed' does not decode");
	assert_string_equal(load_undecodable(f, g, 1, "meta"), "the meta record does not decode");
	assert_int_equal(reload(f, g), 0);
}

/* Below level FEATURES_SEQ_TABLES a session's queued sets are a list in
 * its record: the same agreement, and no seq twice in the list. */
static void test_image_set_lists_must_agree_with_their_waiters(void **state)
{
	struct fx *f = *state;
	uint64_t holder, s;
	uint64_t seq = queue_set(f, FEATURES_SEQ_TABLES - 1, &holder, &s);
	struct fx_image im = fx_dump(f);
	assert_memory_equal(im.buf, "RLSNAP06", 8);
	fx_image_free(&im);
	struct fx *g = fx_peer(f);
	assert_int_equal(reload(f, g), 0);

	Raftlock__SessionRecord *rec = fx_sess(f, s);
	assert_int_equal(rec->n_multi_waits, 1);
	rec->n_multi_waits = 0; /* the list without its set */
	put_session(f, rec);
	assert_set_refused(f, g, "m1", s, seq);
	Raftlock__MultiWait **own = rec->multi_waits, *twice[] = {own[0], own[0]};
	rec->multi_waits = twice;
	rec->n_multi_waits = 2;
	put_session(f, rec);
	assert_int_equal(reload(f, g), RAFTLOCK_EDATA);
	assert_non_null(strstr(store_load_error(&g->store), "two lock sets of seq"));
	rec->multi_waits = own;
	rec->n_multi_waits = 1;
	put_session(f, rec);
	raftlock__session_record__free_unpacked(rec, NULL);
	assert_m3_waiter_needed(f, g, s, seq);

	fx_restore_from(g, f);
	assert_set_granted_alike(f, g, holder, s, seq);
}

/* An image of f is refused by g, which says why (want is part of it), and
 * keeps g's state as it was. */
static void assert_refused_saying(struct fx *f, struct fx *g, const char *want)
{
	struct fx_image was = fx_dump(g);
	assert_int_equal(reload(f, g), RAFTLOCK_EDATA);
	const char *why = store_load_error(&g->store);
	if (strstr(why, want) == NULL)
		fail_msg("refused saying \"%s\", not \"%s\"", why, want);
	fx_assert_image(g, &was);
	fx_image_free(&was);
}

/* Edits f's store directly: the record (key, val) of table dbi put as it
 * is (val NULL: deleted); with was, its value before is copied there
 * (was->mv_size 0: there was none). */
static void edit_raw(struct fx *f, MDB_dbi dbi, MDB_val key, const MDB_val *val, MDB_val *was)
{
	static uint8_t before[512];
	MDB_txn *txn = store_begin(&f->store, true);
	MDB_val old = {0, before};
	if (mdb_get(txn, dbi, &key, &old) != 0)
		old = (MDB_val){0, before};
	if (was != NULL) {
		assert_true(old.mv_size <= sizeof before);
		memcpy(before, old.mv_data, old.mv_size);
		*was = (MDB_val){old.mv_size, before};
	}
	if (val != NULL)
		assert_int_equal(mdb_put(txn, dbi, &key, (MDB_val *)val, 0), 0);
	else
		assert_int_equal(mdb_del(txn, dbi, &key, NULL), 0);
	store_commit(txn);
}

/* A key of 8 bytes, big-endian, as the store keys its ids. */
static MDB_val id_key(uint8_t k[8], uint64_t id)
{
	for (int i = 7; i >= 0; i--, id >>= 8)
		k[i] = (uint8_t)id;
	return (MDB_val){8, k};
}

/* Record r of table dbi damaged into bad: refused by g saying want, then
 * put back. */
static void assert_bad_value_refused(struct fx *f, struct fx *g, MDB_dbi dbi, MDB_val key,
				     MDB_val bad, const char *want)
{
	MDB_val was;
	edit_raw(f, dbi, key, &bad, &was);
	assert_refused_saying(f, g, want);
	uint8_t copy[512];
	memcpy(copy, was.mv_data, was.mv_size);
	MDB_val back = {was.mv_size, copy};
	edit_raw(f, dbi, key, was.mv_size > 0 ? &back : NULL, NULL);
	assert_int_equal(reload(f, g), 0);
}

/* Values the store reads with a size (a nonce's session id, a lease, an
 * access rule's permissions, a session's secret digest, its id as its
 * key, a set's tokens in an outcome) must have it: each wrong one is
 * refused, naming the record, and the image as it was loads. (Apply, or
 * the leader's checks, would stop the node there, or read the wrong
 * bytes.) */
static void test_image_values_must_have_their_sizes(void **state)
{
	struct fx *f = *state;
	build_state(f);
	DO(f, SET_FEATURE_LEVEL, .level = FEATURES_SEQ_TABLES);
	assert_int_equal(DO(f, ACL_SET, .identity = "alice", .prefix = "app/", .perms = 1).status,
			 0);
	uint64_t s = fx_session(f);
	assert_int_equal(DO(f, ACQUIRE, .session = s, .owner = 1, .name = "sized").status, 0);
	uint64_t seq = f->seq;
	struct fx *g = fx_peer(f);
	assert_int_equal(reload(f, g), 0);
	struct store *st = &f->store;
	uint8_t k[8], v[16] = {0}, k2[8];
	char want[128];

	assert_bad_value_refused(f, g, st->nonces, id_key(k, 2), (MDB_val){7, v},
				 "nonce 2's record has 7 bytes, not 8");
	assert_bad_value_refused(f, g, st->nonces, (MDB_val){7, k}, (MDB_val){8, v},
				 "a key of 7 bytes in the nonces table");
	snprintf(want, sizeof want, "session %llu's lease has 11 bytes, not 12",
		 (unsigned long long)s);
	assert_bad_value_refused(f, g, st->leases, id_key(k, s), (MDB_val){11, v}, want);
	char rule[] = "alice\0app/";
	assert_bad_value_refused(f, g, st->acls, (MDB_val){sizeof rule - 1, rule}, (MDB_val){3, v},
				 "the access rule of 'alice' on 'app/' has 3 bytes, not 4");
	assert_bad_value_refused(f, g, st->acls, (MDB_val){5, "alice"}, (MDB_val){4, v},
				 "an access rule's key of 5 bytes is not an identity and a prefix");

	/* a session's record: its secret's digest, its key */
	Raftlock__SessionRecord *rec = fx_sess(f, s);
	ProtobufCBinaryData digest = rec->secret_digest;
	rec->secret_digest = (ProtobufCBinaryData){16, v};
	put_session(f, rec);
	snprintf(want, sizeof want, "session %llu's secret digest has 16 bytes, not 32",
		 (unsigned long long)s);
	assert_refused_saying(f, g, want);
	rec->secret_digest = digest;
	put_session(f, rec);
	uint8_t packed[512];
	size_t n = raftlock__session_record__pack(rec, packed);
	raftlock__session_record__free_unpacked(rec, NULL);
	snprintf(want, sizeof want,
		 "session %llu's record is under a key of 8 bytes that is not its id",
		 (unsigned long long)s);
	assert_bad_value_refused(f, g, st->sessions, id_key(k2, s + 100), (MDB_val){n, packed},
				 want);

	/* an outcome with more tokens than a set has locks */
	MDB_txn *txn = store_begin(st, false);
	Raftlock__Outcome *own = store_get_outcome(st, txn, s, seq);
	store_abort(txn);
	assert_non_null(own);
	uint64_t tokens[RAFTLOCK_MULTI_MAX + 1] = {0};
	uint64_t *own_tokens = own->result->tokens;
	size_t own_n = own->result->n_tokens;
	own->result->tokens = tokens;
	own->result->n_tokens = RAFTLOCK_MULTI_MAX + 1;
	edit_outcome(f, s, seq, own);
	snprintf(want, sizeof want, "session %llu's outcome of seq %llu has 65 tokens",
		 (unsigned long long)s, (unsigned long long)seq);
	assert_refused_saying(f, g, want);
	own->result->tokens = own_tokens;
	own->result->n_tokens = own_n;
	edit_outcome(f, s, seq, own);
	raftlock__outcome__free_unpacked(own, NULL);
	assert_int_equal(reload(f, g), 0);
	fx_assert_same_state(f, g);
}

/* Every holder and waiter of a lock, and every lease, is of a session of
 * the image (a holder of no session would hold its lock for good, a
 * lease of none stops the node when it expires): a lock's holder or
 * waiter, or a lease, of a session the image does not have, before its
 * sessions or after them, is refused, naming the lock and the session. */
static void test_image_parties_must_have_their_sessions(void **state)
{
	struct fx *f = *state;
	build_state(f);
	struct fx *g = fx_peer(f);
	assert_int_equal(reload(f, g), 0);
	Raftlock__LockRecord *held = fx_lock(f, "held");
	assert_true(held->n_holders > 0);
	uint64_t holder = held->holders[0]->session;
	held->holders[0]->session = 1; /* ended by build_state() */
	assert_null(fx_sess(f, 1));
	put_lock(f, held);
	assert_refused_saying(f, g,
			      "lock 'held' has a holder of session 1, which the image does "
			      "not have");
	held->holders[0]->session = holder;
	put_lock(f, held);
	raftlock__lock_record__free_unpacked(held, NULL);

	Raftlock__LockRecord *delayed = fx_lock(f, "delayed");
	assert_true(delayed->n_waiters > 0);
	uint64_t waiter = delayed->waiters[0]->session;
	delayed->waiters[0]->session = 999999;
	put_lock(f, delayed);
	assert_refused_saying(f, g,
			      "lock 'delayed' has a waiter of session 999999, which the "
			      "image does not have");
	delayed->waiters[0]->session = waiter;
	put_lock(f, delayed);
	raftlock__lock_record__free_unpacked(delayed, NULL);

	uint8_t k[8], v[12] = {0};
	assert_bad_value_refused(f, g, f->store.leases, id_key(k, 1), (MDB_val){12, v},
				 "the leases table has a row of session 1, which the image does "
				 "not have");
	assert_bad_value_refused(f, g, f->store.leases, id_key(k, 999999), (MDB_val){12, v},
				 "rows of the leases table after the last session");
	fx_assert_same_state(f, g);
}

/* Record key of table dbi taken out: refused by g saying want, then put
 * back. */
static void assert_missing_refused(struct fx *f, struct fx *g, MDB_dbi dbi, MDB_val key,
				   const char *want)
{
	MDB_val was;
	edit_raw(f, dbi, key, NULL, &was);
	assert_true(was.mv_size > 0);
	assert_refused_saying(f, g, want);
	uint8_t copy[512];
	memcpy(copy, was.mv_data, was.mv_size);
	MDB_val back = {was.mv_size, copy};
	edit_raw(f, dbi, key, &back, NULL);
	assert_int_equal(reload(f, g), 0);
}

/* The state of build_state() at feature level `level` (0: none
 * recorded, the oldest image format), with a session holding lock
 * "kept": its id. */
static uint64_t state_at(struct fx *f, uint32_t level)
{
	build_state(f);
	if (level != 0)
		DO(f, SET_FEATURE_LEVEL, .level = level);
	uint64_t s = fx_session(f);
	fx_take(f, s, 1, "kept");
	return s;
}

/* Every session has its lease (apply opens a session with one and ends
 * the two together; a session without one never expires, and holds its
 * locks for good): an image where one has none is refused, naming the
 * session, at the oldest level and the newest. */
static void test_image_sessions_must_have_their_leases(void **state)
{
	uint32_t levels[] = {0, FEATURES_SEQ_TABLES};
	for (int i = 0; i < 2; i++) {
		struct fx *f = i == 0 ? *state : fx_peer(*state), *g = fx_peer(*state);
		uint64_t s = state_at(f, levels[i]);
		assert_int_equal(reload(f, g), 0);
		uint8_t k[8];
		char want[64];
		snprintf(want, sizeof want, "session %llu has no lease", (unsigned long long)s);
		assert_missing_refused(f, g, f->store.leases, id_key(k, s), want);
		fx_assert_same_state(f, g);
	}
}

/* Edits f's store directly: adds (or, with add false, removes) the row
 * of session id's name in the session_locks table. */
static void edit_name(struct fx *f, uint64_t id, const char *name, bool add)
{
	MDB_txn *txn = store_begin(&f->store, true);
	assert_true(add ? store_session_lock_add(&f->store, txn, id, name)
			: store_session_lock_del(&f->store, txn, id, name));
	store_commit(txn);
}

/* Every row of the names sessions hold or await (session_locks.h) is of a
 * session of the image (apply adds one for a session it has and drops a
 * session's rows when it ends; one of no session would stay for good): a
 * row of a session the image does not have, before its sessions or after
 * them, is refused, naming the session, at both levels with the table. */
static void test_image_names_must_have_their_sessions(void **state)
{
	uint32_t levels[] = {FEATURES_SESSION_LOCK_INDEX, FEATURES_SEQ_TABLES};
	for (int i = 0; i < 2; i++) {
		struct fx *f = i == 0 ? *state : fx_peer(*state), *g = fx_peer(*state);
		state_at(f, levels[i]);
		assert_null(fx_sess(f, 1)); /* ended by build_state() */
		assert_int_equal(reload(f, g), 0);
		edit_name(f, 1, "kept", true);
		assert_refused_saying(f, g,
				      "the session_locks table has a row of session 1, which the "
				      "image does not have");
		edit_name(f, 1, "kept", false);
		edit_name(f, 999999, "kept", true);
		assert_refused_saying(f, g,
				      "rows of the session_locks table after the last session");
		edit_name(f, 999999, "kept", false);
		assert_int_equal(reload(f, g), 0);
		fx_assert_same_state(f, g);
	}
}

/* From the level that indexes them, a session has as many rows of the
 * names it holds or awaits as its record counts (apply stops the node on
 * a session that ends otherwise): a row more or one less is refused,
 * naming the session and both counts, at both levels with the table. */
static void test_image_names_must_agree_with_their_count(void **state)
{
	uint32_t levels[] = {FEATURES_SESSION_LOCK_INDEX, FEATURES_SEQ_TABLES};
	for (int i = 0; i < 2; i++) {
		struct fx *f = i == 0 ? *state : fx_peer(*state), *g = fx_peer(*state);
		state_at(f, levels[i]);
		Raftlock__SessionRecord *rec = fx_sess(f, 2);
		assert_int_equal(rec->lock_count, 2); /* "held", "sem" */
		raftlock__session_record__free_unpacked(rec, NULL);
		edit_name(f, 2, "extra", true);
		assert_refused_saying(f, g,
				      "session 2: 3 rows of the session_locks table, its record "
				      "counts 2");
		edit_name(f, 2, "extra", false);
		edit_name(f, 2, "sem", false);
		assert_refused_saying(f, g,
				      "session 2: 1 rows of the session_locks table, its record "
				      "counts 2");
		edit_name(f, 2, "sem", true);
		assert_int_equal(reload(f, g), 0);
		fx_assert_same_state(f, g);
	}
}

/* A lock record is under its name (apply finds a lock by its name and
 * stores it under it: one under another key is never found, and its
 * lock's next write makes a second record): a copy of lock "kept" under
 * another key is refused, naming both, and so is a record whose name is
 * its key cut short. */
static void test_image_locks_must_be_under_their_names(void **state)
{
	struct fx *f = *state, *g = fx_peer(f);
	state_at(f, 0);
	assert_int_equal(reload(f, g), 0);
	MDB_txn *txn = store_begin(&f->store, false);
	MDB_val key = {4, "kept"}, val;
	assert_int_equal(mdb_get(txn, f->store.locks, &key, &val), 0);
	uint8_t copy[512];
	assert_true(val.mv_size <= sizeof copy);
	memcpy(copy, val.mv_data, val.mv_size);
	store_abort(txn);
	assert_bad_value_refused(
		f, g, f->store.locks, (MDB_val){5, "other"}, (MDB_val){val.mv_size, copy},
		"the record of lock 'kept' is under the key 'other', not its name");
	assert_bad_value_refused(
		f, g, f->store.locks, (MDB_val){5, "kept2"}, (MDB_val){val.mv_size, copy},
		"the record of lock 'kept' is under the key 'kept2', not its name");
	fx_assert_same_state(f, g);
}

/* The nonces and the sessions agree (apply writes a nonce's row with the
 * session that opens with it and deletes it by the record's nonce when
 * the session ends: a row of another session would stay for good and
 * answer a retried open with a session that is not there, a session
 * without its row would be opened twice): a row of a session the image
 * does not have, before its sessions or after them, of a session with no
 * nonce or with another, and a session's nonce without its row, are
 * refused, naming the nonce and the session, at the oldest level and the
 * newest. */
static void test_image_nonces_must_agree_with_their_sessions(void **state)
{
	uint32_t levels[] = {0, FEATURES_SEQ_TABLES};
	for (int i = 0; i < 2; i++) {
		struct fx *f = i == 0 ? *state : fx_peer(*state), *g = fx_peer(*state);
		uint64_t s = state_at(f, levels[i]);
		assert_null(fx_sess(f, 1)); /* ended by build_state() */
		MDB_txn *txn = store_begin(&f->store, false);
		uint64_t b = store_get_nonce(&f->store, txn, 2); /* build_state()'s */
		store_abort(txn);
		assert_true(b != 0 && b != s);
		assert_int_equal(reload(f, g), 0);
		uint8_t k[8], v[8];
		char want[128];
		assert_bad_value_refused(f, g, f->store.nonces, id_key(k, 77), id_key(v, 1),
					 "nonce 77 names session 1, which the image does not have");
		assert_bad_value_refused(f, g, f->store.nonces, id_key(k, 77), id_key(v, 999999),
					 "nonce 77 names session 999999, which the image does not "
					 "have");
		snprintf(want, sizeof want, "nonce 77 names session %llu, which has none",
			 (unsigned long long)s);
		assert_bad_value_refused(f, g, f->store.nonces, id_key(k, 77), id_key(v, s), want);
		snprintf(want, sizeof want, "nonce 3 names session %llu, whose nonce is 2",
			 (unsigned long long)b);
		assert_bad_value_refused(f, g, f->store.nonces, id_key(k, 3), id_key(v, b), want);
		snprintf(want, sizeof want, "session %llu's nonce 2 has no row in the nonces table",
			 (unsigned long long)b);
		assert_missing_refused(f, g, f->store.nonces, id_key(k, 2), want);
		fx_assert_same_state(f, g);
	}
}

/* A queued set's waiters are of the set's owner (a grant gives each lock
 * to its waiter's owner, a cancel finds a waiter by its owner): one of
 * another owner is refused, naming the set, the lock and both owners, in
 * the table from level FEATURES_SEQ_TABLES and in the list below. */
static void test_image_set_waiters_must_be_of_its_owner(void **state)
{
	struct fx *levels[] = {*state, fx_peer(*state)};
	for (int i = 0; i < 2; i++) {
		struct fx *f = levels[i];
		uint64_t holder, s;
		uint64_t seq = queue_set(f, FEATURES_SEQ_TABLES - (uint32_t)i, &holder, &s);
		struct fx *g = fx_peer(*state);
		assert_int_equal(reload(f, g), 0);
		Raftlock__LockRecord *m2 = fx_lock(f, "m2");
		Raftlock__Waiter *w = m2->waiters[m2->n_waiters - 1];
		assert_true(w->multi && w->session == s && w->owner == 4);
		w->owner = 5;
		put_lock(f, m2);
		char want[160];
		snprintf(want, sizeof want,
			 "session %llu's lock set of seq %llu, of owner 4, names lock 'm2', where "
			 "its waiter is of owner 5",
			 (unsigned long long)s, (unsigned long long)seq);
		assert_refused_saying(f, g, want);
		w->owner = 4;
		put_lock(f, m2);
		raftlock__lock_record__free_unpacked(m2, NULL);
		fx_restore_from(g, f);
		assert_set_granted_alike(f, g, holder, s, seq);
	}
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
		T(test_level_moves_outcomes_to_their_table),
		T(test_pinned_mark_leaves_the_record_small),
		T(test_image_rows_must_agree_with_their_sessions),
		T(test_image_sets_must_agree_with_their_waiters),
		T(test_image_set_lists_must_agree_with_their_waiters),
		T(test_image_records_must_decode),
		T(test_image_values_must_have_their_sizes),
		T(test_image_parties_must_have_their_sessions),
		T(test_image_set_waiters_must_be_of_its_owner),
		T(test_image_sessions_must_have_their_leases),
		T(test_image_names_must_have_their_sessions),
		T(test_image_names_must_agree_with_their_count),
		T(test_image_locks_must_be_under_their_names),
		T(test_image_nonces_must_agree_with_their_sessions),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
