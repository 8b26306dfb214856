/*
 * test_fsm_acks.c: the outcome table of a session while one of its
 * acquires waits for a long time (GUARANTEES rule 6). The client's mark
 * (ack_below) leaves queued acquires out; their records stay until the
 * client lists them in `acked`.
 *
 * RAFTLOCK_TEST_ACK_COMMANDS sets how many commands the long test sends
 * through the other handles (default 20,000; the old table refused
 * everything after about 4,095).
 */
#include "test_fsm_harness.h"

#include <time.h>

#define ACK_COMMANDS_DEFAULT 20000u
#define ACK_BATCH 32u /* commands per log entry, as the leader batches them */

/* Results of the last entry applied by apply_quiet(), by command. */
struct quiet {
	struct fx *f;
	Raftlock__Result results[ACK_BATCH + 1];
	unsigned pushes;
};

static void quiet_emit(void *arg, const struct fsm_event *ev)
{
	struct quiet *q = arg;
	if (ev->type == FSM_EV_RESULT && ev->command <= ACK_BATCH)
		q->results[ev->command] = *ev->result;
	if (ev->type == FSM_EV_PUSH)
		q->pushes++;
}

/* Applies ops as one entry without the harness's log and trace (a million
 * commands would keep hundreds of MB there). */
static void apply_quiet(struct quiet *q, struct op *ops, size_t n)
{
	struct cmd_buf bufs[ACK_BATCH + 1];
	Raftlock__Command *cmds[ACK_BATCH + 1];
	assert_true(n <= ACK_BATCH + 1);
	for (size_t i = 0; i < n; i++) {
		fx_number(q->f, &ops[i]);
		cmd_build(&bufs[i], &ops[i]);
		cmds[i] = &bufs[i].cmd;
	}
	Raftlock__LogEntry entry = RAFTLOCK__LOG_ENTRY__INIT;
	entry.cluster_time = q->f->now;
	entry.commands = cmds;
	entry.n_commands = n;
	struct fsm_sink sink = {.emit = quiet_emit, .arg = q};
	fsm_apply(&q->f->fsm, ++q->f->index, &entry, &sink);
}

static unsigned ack_commands(void)
{
	const char *v = getenv("RAFTLOCK_TEST_ACK_COMMANDS");
	unsigned n = v != NULL ? (unsigned)strtoul(v, NULL, 10) : 0;
	return n >= 2 ? n : ACK_COMMANDS_DEFAULT;
}

static size_t n_outcomes(struct fx *f, uint64_t s)
{
	return fx_outcomes(f, s, NULL, 0);
}

/* A session of a client that acknowledges queued acquires. */
static uint64_t acking_session(struct fx *f)
{
	Raftlock__Result r = DO(f, OPEN_SESSION, .ttl_ms = 60000, .acks_queued = true);
	assert_int_equal(r.status, 0);
	return r.session;
}

/*
 * Handle 2 of session s waits behind handle 1 of the same session (an
 * infinite wait: it never ends by itself) while handles 3.. send pairs
 * of acquire/release for an hour of cluster time. The client's mark is
 * each request's own seq: nothing else is unknown to it.
 */
static void test_long_wait_does_not_fill_the_table(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s = acking_session(f);
	fx_take(f, s, 1, "q");
	uint64_t qa = fx_enqueue(f, OP(ACQUIRE, .session = s, .owner = 2, .name = "q"));

	unsigned total = ack_commands(), done = 0;
	uint64_t hour = 3600u * 1000u, start = f->now;
	struct quiet q = {.f = f};
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (done < total) {
		struct op ops[ACK_BATCH + 1];
		size_t n = 0;
		for (; n + 1 < ACK_BATCH && done < total; n += 2, done += 2) {
			uint64_t owner = 3 + (done / 2) % 7;
			uint64_t seq = f->seq + 1;
			ops[n] = OP(ACQUIRE, .session = s, .seq = seq, .ack_below = seq,
				    .owner = owner, .name = "x");
			ops[n + 1] = OP(RELEASE, .session = s, .seq = seq + 1, .ack_below = seq + 1,
					.owner = owner, .name = "x");
			f->seq += 2;
		}
		uint64_t renew[1] = {s};
		ops[n] = OP(RENEW, .renew = renew, .n_renew = 1); /* keeps s alive */
		apply_quiet(&q, ops, n + 1);
		for (size_t i = 0; i < n; i++) {
			if (q.results[i].status != 0)
				fail_msg("command %u of %u refused with %d",
					 done - (unsigned)n + (unsigned)i, total,
					 q.results[i].status);
		}
		f->now = start + hour * done / total;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	print_message("%u commands through the other handles in %.3f s\n", total,
		      (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	assert_true(f->now - start >= hour - hour / 100);
	assert_int_equal(q.pushes, 0);
	/* The table holds the queued acquire and the last few answers. */
	assert_true(n_outcomes(f, s) <= 3);
	WAITERS(f, "q", s, qa);

	/* A cancel at the end is applied. */
	uint64_t mark = f->seq + 1;
	Raftlock__Result r = DO(f, CANCEL_WAIT, .session = s, .ack_below = mark, .owner = 2,
				.name = "q", .acquire_seq = qa);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.token, 0);
	fx_pushed_error(f, s, qa, RAFTLOCK_ECANCELED);
	WAITERS(f, "q", 0);

	/* The queued acquire's final outcome answers a retry, far below the
	 * mark, until the client acknowledges it. */
	r = DO(f, ACQUIRE, .session = s, .seq = qa, .ack_below = f->seq + 1, .owner = 2,
	       .wait = true, .name = "q");
	assert_int_equal(r.status, RAFTLOCK_ECANCELED);
	assert_false(r.queued);
	uint64_t acked[1] = {qa};
	r = DO(f, RELEASE, .session = s, .ack_below = f->seq + 1, .acked = acked, .n_acked = 1,
	       .owner = 1, .name = "q");
	assert_int_equal(r.status, 0);
	r = DO(f, ACQUIRE, .session = s, .seq = qa, .ack_below = f->seq + 1, .owner = 2,
	       .wait = true, .name = "q");
	assert_int_equal(r.status, RAFTLOCK_ESTALESEQ);
	assert_false(fx_lock_exists(f, "q"));
	assert_true(n_outcomes(f, s) <= 2);
}

/* A queued acquire that is granted: its record keeps the grant for a
 * retry below the mark; an ack of a pending record changes nothing. */
static void test_granted_wait_is_kept_until_acked(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s = acking_session(f), h = fx_session(f);
	fx_take(f, h, 1, "q");
	uint64_t qa = fx_enqueue(f, OP(ACQUIRE, .session = s, .owner = 1, .name = "q"));
	uint64_t acked[1] = {qa};
	/* acked while still pending: ignored (the client cannot know yet) */
	Raftlock__Result r = DO(f, ACQUIRE, .session = s, .ack_below = f->seq + 1, .acked = acked,
				.n_acked = 1, .owner = 2, .name = "z");
	assert_int_equal(r.status, 0);
	fx_release_ok(f, h, 1, "q", 0);
	uint64_t t = fx_pushed_grant(f, s, qa);
	for (int i = 0; i < 10; i++)
		DO(f, RELEASE, .session = s, .ack_below = f->seq + 1, .owner = 9, .name = "n");
	r = DO(f, ACQUIRE, .session = s, .seq = qa, .ack_below = f->seq + 1, .owner = 1,
	       .wait = true, .name = "q");
	assert_int_equal(r.status, 0);
	assert_int_equal(r.token, t);
	assert_int_equal(r.count, 1);
	HOLDERS(f, "q", s, 1); /* answered, not executed again */
	r = DO(f, RELEASE, .session = s, .ack_below = f->seq + 1, .acked = acked, .n_acked = 1,
	       .owner = 1, .name = "q");
	assert_int_equal(r.status, 0);
	assert_int_equal(n_outcomes(f, s), 1);
}

/* An older client (no acks_queued) counts its queued acquires in the
 * mark: once the mark passes one, its record goes as before. */
static void test_old_client_mark_prunes_as_before(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s = fx_session(f), h = fx_session(f);
	fx_take(f, h, 1, "q");
	uint64_t qa = fx_enqueue(f, OP(ACQUIRE, .session = s, .owner = 1, .name = "q"));
	fx_release_ok(f, h, 1, "q", 0);
	fx_pushed_grant(f, s, qa);
	Raftlock__Result r =
		DO(f, RELEASE, .session = s, .ack_below = f->seq + 1, .owner = 1, .name = "q");
	assert_int_equal(r.status, 0);
	assert_int_equal(n_outcomes(f, s), 1);
	r = DO(f, ACQUIRE, .session = s, .seq = qa, .ack_below = f->seq + 1, .owner = 1,
	       .wait = true, .name = "q");
	assert_int_equal(r.status, RAFTLOCK_ESTALESEQ);
}

/* Applies copies of `o` (fresh sequences) until the session's table holds
 * `records`; each must get status 0 or `also`. */
static void fill_table(struct fx *f, uint64_t s, struct op o, size_t records, int also)
{
	struct quiet q = {.f = f};
	while (n_outcomes(f, s) < records) {
		struct op ops[ACK_BATCH];
		size_t n = records - n_outcomes(f, s);
		if (n > ACK_BATCH)
			n = ACK_BATCH;
		for (size_t i = 0; i < n; i++)
			ops[i] = o;
		apply_quiet(&q, ops, n);
		for (size_t i = 0; i < n; i++)
			assert_true(q.results[i].status == 0 || q.results[i].status == also);
	}
	assert_int_equal(n_outcomes(f, s), records);
}

/* Acquires whose answers the client does not know (orphans) still pin
 * the mark and fill the table: acquires are then refused, but releases
 * and cancels have headroom, up to a hard cap; a close needs no record. */
static void test_release_and_cancel_have_headroom(void **state)
{
	struct fx *f = fx_ready(state);
	uint64_t s = acking_session(f), h = fx_session(f);
	fx_take(f, s, 1, "held");
	fx_take(f, h, 1, "q");
	uint64_t qa =
		fx_enqueue(f, OP(ACQUIRE, .session = s, .ack_below = 1, .owner = 2, .name = "q"));
	fill_table(f, s, OP(ACQUIRE, .session = s, .ack_below = 1, .owner = 3, .name = "z"),
		   FSM_MAX_OUTCOMES, 0);
	Raftlock__Result r = DO(f, ACQUIRE, .session = s, .ack_below = 1, .owner = 4, .name = "a");
	assert_int_equal(r.status, RAFTLOCK_ELIMIT);
	r = DO(f, RELEASE, .session = s, .ack_below = 1, .owner = 1, .name = "held");
	assert_int_equal(r.status, 0);
	r = DO(f, CANCEL_WAIT, .session = s, .ack_below = 1, .owner = 2, .name = "q",
	       .acquire_seq = qa);
	assert_int_equal(r.status, 0);
	WAITERS(f, "q", 0);
	fill_table(f, s, OP(RELEASE, .session = s, .ack_below = 1, .owner = 3, .name = "z"),
		   FSM_MAX_OUTCOMES + FSM_OUTCOME_HEADROOM, RAFTLOCK_ENOTHOLDER);
	r = DO(f, RELEASE, .session = s, .ack_below = 1, .owner = 3, .name = "z");
	assert_int_equal(r.status, RAFTLOCK_ELIMIT); /* the hard cap */
	r = DO(f, CLOSE_SESSION, .session = s, .ack_below = 1);
	assert_int_equal(r.status, 0);
	assert_null(fx_sess(f, s));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_long_wait_does_not_fill_the_table, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_granted_wait_is_kept_until_acked, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_old_client_mark_prunes_as_before, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_release_and_cancel_have_headroom, fx_setup,
						fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
