/* test_node.c: the raft node (server/node.c) alone, with real libraft
 * (raft_uv on a temporary directory, raft_uv_tcp on loopback) and a real
 * libuv loop, as a one-voter cluster: it becomes ready after its INIT
 * entry applies, commands proposed in one loop turn share one log entry
 * and each gets its own result, a parked command waits for company or for
 * its hold to end, a stop answers every accepted proposal
 * exactly once and refuses new ones, the loop then closes cleanly, and a
 * restart on the same directory comes back with what was applied. Waits
 * run the loop until a condition holds, bounded by 10 s of real time. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "codec.h"
#include "config.h"
#include "loopback.h"
#include "node.h"
#include "raftlock.h"
#include "timebase.h"

#define WAIT_MS 10000

struct answers {
	unsigned n;     /* callbacks run */
	int status[8];  /* of the first ones */
	uint64_t id[8]; /* OPEN_SESSION results: the new session ids */
};

struct fx {
	char dir[64];
	uv_loop_t loop;
	struct timebase tb;
	struct config cfg;
	struct node node;
	bool stopped;
};

static void done(void *arg, int status, const Raftlock__Result *result)
{
	struct answers *a = arg;
	if (a->n < 8) {
		a->status[a->n] = status;
		a->id[a->n] = result != NULL ? result->session : 0;
	}
	a->n++;
}

static void stopped(struct node *n)
{
	struct fx *f = n->hooks.arg;
	f->stopped = true;
}

/* Runs the loop until cond(f); fails after WAIT_MS of real time. */
static void run_until(struct fx *f, bool (*cond)(struct fx *f))
{
	uint64_t until = uv_hrtime() / 1000000u + WAIT_MS;
	while (!cond(f)) {
		assert_true(uv_hrtime() / 1000000u < until);
		uv_run(&f->loop, UV_RUN_ONCE);
	}
}

static bool is_stopped(struct fx *f)
{
	return f->stopped;
}

/* Ready (its post-election barrier applied) and INIT applied. */
static bool is_serving(struct fx *f)
{
	return f->node.ready && !f->node.init_needed;
}

static void run_until_answered(struct fx *f, const struct answers *a, unsigned n)
{
	uint64_t until = uv_hrtime() / 1000000u + WAIT_MS;
	while (a->n < n) {
		assert_true(uv_hrtime() / 1000000u < until);
		uv_run(&f->loop, UV_RUN_ONCE);
	}
}

static void start(struct fx *f)
{
	char err[512];
	assert_int_equal(uv_loop_init(&f->loop), 0);
	timebase_init_uv(&f->tb, &f->loop);
	struct node_hooks hooks = {.arg = f};
	f->stopped = false;
	memset(&f->node, 0, sizeof f->node);
	int rv = node_start(&f->node, &f->loop, &f->tb, &f->cfg, &hooks, err, sizeof err);
	if (rv != 0)
		fprintf(stderr, "node_start: %s\n", err);
	assert_int_equal(rv, 0);
	run_until(f, is_serving);
}

/* Stops the node, runs the loop out and closes it (0: no handle left). */
static void stop(struct fx *f)
{
	node_stop(&f->node, stopped);
	run_until(f, is_stopped);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&f->loop), 0);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	char raft[32], client[32], member[96], err[512];
	snprintf(f->dir, sizeof f->dir, "/tmp/raftlock-test-node.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(raft, sizeof raft, "127.0.0.1:%d", loopback_free_port());
	snprintf(client, sizeof client, "127.0.0.1:%d", loopback_free_port());
	snprintf(member, sizeof member, "1,%s,%s", raft, client);
	char *argv[] = {"raftlockd", "--id",
			"1",         "--data-dir",
			f->dir,      "--cluster",
			"unit",      "--member",
			member,      "--election-timeout",
			"200",       "--heartbeat-timeout",
			"50",        "--log-level",
			"error",     "--bootstrap",
			NULL};
	assert_int_equal(
		config_parse(&f->cfg, (int)(sizeof argv / sizeof *argv) - 1, argv, err, sizeof err),
		0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static Raftlock__Command open_session(Raftlock__OpenSession *o, uint64_t nonce)
{
	*o = (Raftlock__OpenSession)RAFTLOCK__OPEN_SESSION__INIT;
	o->nonce = nonce;
	o->ttl_ms = 10000;
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_OPEN_SESSION;
	cmd.open_session = o;
	return cmd;
}

/* A one-voter cluster leads, becomes ready and applies its INIT; three
 * proposals of one loop turn are one entry, each answered with its own
 * result. */
static void test_ready_and_batching(void **state)
{
	struct fx *f = *state;
	start(f);
	assert_true(f->node.leader);
	uint64_t entries = f->node.entries_proposed;
	uint64_t commands = f->node.commands_proposed;
	raft_index last = raft_last_index(&f->node.raft);

	struct answers a = {0};
	Raftlock__OpenSession o[3];
	for (unsigned i = 0; i < 3; i++) {
		Raftlock__Command cmd = open_session(&o[i], 100 + i);
		assert_int_equal(node_propose(&f->node, &cmd, done, &a), 0);
	}
	run_until_answered(f, &a, 3);
	assert_int_equal(a.n, 3);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(a.status[i], 0);
	assert_true(a.id[0] != 0 && a.id[1] != a.id[0] && a.id[2] != a.id[1]);
	assert_int_equal(f->node.entries_proposed, entries + 1);
	assert_int_equal(f->node.commands_proposed, commands + 3);
	assert_int_equal(raft_last_index(&f->node.raft), last + 1);
	stop(f);
}

/* A batch of only parked commands (node_propose_call, parked) is held back: a
 * command that cannot wait takes it along in its own entry, and without
 * one it goes out by itself once NODE_PARK_MS have passed, woken by its
 * timer. The hold is seen on loop turns quicker than NODE_PARK_MS, most of
 * them on any machine. */
static void test_parked_batch(void **state)
{
	struct fx *f = *state;
	start(f);
	unsigned held = 0;
	for (unsigned attempt = 0; attempt < 10; attempt++) {
		uint64_t entries = f->node.entries_proposed;
		struct answers a = {0};
		Raftlock__OpenSession o[2];
		Raftlock__Command parked = open_session(&o[0], 200 + 2 * attempt);
		assert_int_equal(node_propose_call(&f->node, &parked, done, &a, true), 0);
		uv_run(&f->loop, UV_RUN_NOWAIT);
		if (f->node.entries_proposed == entries) {
			held++;
			assert_true(timebase_timer_active(&f->node.park_timer));
			Raftlock__Command now = open_session(&o[1], 201 + 2 * attempt);
			assert_int_equal(node_propose(&f->node, &now, done, &a), 0);
			run_until_answered(f, &a, 2);
			assert_int_equal(f->node.entries_proposed, entries + 1); /* together */
		} else {
			run_until_answered(f, &a, 1); /* a slow turn: the hold had ended */
		}
		assert_int_equal(a.status[0], 0);
	}
	assert_true(held > 0);
	/* Alone, it goes out once the hold has ended. */
	uint64_t entries = f->node.entries_proposed;
	struct answers a = {0};
	Raftlock__OpenSession o;
	Raftlock__Command parked = open_session(&o, 300);
	uint64_t t0 = uv_hrtime();
	assert_int_equal(node_propose_call(&f->node, &parked, done, &a, true), 0);
	run_until_answered(f, &a, 1);
	uint64_t took_us = (uv_hrtime() - t0) / 1000u;
	assert_int_equal(a.status[0], 0);
	assert_true(took_us >= (NODE_PARK_MS - 1) * 1000u);
	assert_int_equal(f->node.entries_proposed, entries + 1);
	assert_int_equal(f->node.commands_parked, 11);
	stop(f);
}

/* A stop answers every accepted proposal once and refuses new ones. */
static void test_stop_answers_and_refuses(void **state)
{
	struct fx *f = *state;
	start(f);
	struct answers a = {0};
	Raftlock__OpenSession o[2];
	Raftlock__Command cmd = open_session(&o[0], 7);
	assert_int_equal(node_propose(&f->node, &cmd, done, &a), 0);
	node_stop(&f->node, stopped);
	cmd = open_session(&o[1], 8);
	assert_int_equal(node_propose(&f->node, &cmd, done, &a), RAFTLOCK_ESHUTDOWN);
	run_until(f, is_stopped);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	assert_int_equal(a.n, 1); /* exactly once, the refused one never */
	assert_true(a.status[0] == 0 || a.status[0] == RAFTLOCK_ESHUTDOWN);
	assert_int_equal(uv_loop_close(&f->loop), 0);
}

/* A restart on the same directory finds what was applied. */
static void test_restart_keeps_state(void **state)
{
	struct fx *f = *state;
	start(f);
	struct answers a = {0};
	Raftlock__OpenSession o;
	Raftlock__Command cmd = open_session(&o, 9);
	assert_int_equal(node_propose(&f->node, &cmd, done, &a), 0);
	run_until_answered(f, &a, 1);
	assert_int_equal(a.status[0], 0);
	raft_index applied = raft_last_applied(&f->node.raft);
	stop(f);

	start(f);
	assert_true(raft_last_applied(&f->node.raft) >= applied);
	/* the same nonce is answered from the record: the same session */
	struct answers b = {0};
	cmd = open_session(&o, 9);
	assert_int_equal(node_propose(&f->node, &cmd, done, &b), 0);
	run_until_answered(f, &b, 1);
	assert_int_equal(b.status[0], 0);
	assert_int_equal(b.id[0], a.id[0]);
	stop(f);
}

/* Proposes one command and waits for its answer (0 expected). */
static void apply_one(struct fx *f, Raftlock__Command *cmd)
{
	struct answers a = {0};
	assert_int_equal(node_propose(&f->node, cmd, done, &a), 0);
	run_until_answered(f, &a, 1);
	assert_int_equal(a.status[0], 0);
}

static Raftlock__Command try_lock(Raftlock__Acquire *acq, char *name, uint64_t session,
				  uint64_t seq)
{
	raftlock__acquire__init(acq);
	acq->name = name;
	acq->owner = 1;
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_ACQUIRE;
	cmd.session = session;
	cmd.seq = seq;
	cmd.acquire = acq;
	return cmd;
}

/* Opens a session through the node; its id. */
static uint64_t session_of(struct fx *f, uint64_t nonce)
{
	struct answers a = {0};
	Raftlock__OpenSession o;
	Raftlock__Command cmd = open_session(&o, nonce);
	assert_int_equal(node_propose(&f->node, &cmd, done, &a), 0);
	run_until_answered(f, &a, 1);
	assert_int_equal(a.status[0], 0);
	return a.id[0];
}

/* A try-lock of session on a name of its own, through node_propose_call;
 * a hold the last entry began has ended (RETURN_HOLD_MS later) without
 * making it wait. */
static int propose_call_later(struct fx *f, uint64_t session, struct answers *a)
{
	static unsigned names, seq;
	char name[32];
	snprintf(name, sizeof name, "hold-%u", names++);
	Raftlock__Acquire acq;
	Raftlock__Command cmd = try_lock(&acq, name, session, ++seq);
	return node_propose_call(&f->node, &cmd, done, a, false);
}

/* Entries that answer a call until no hold is left to skip. */
static void use_up_skips(struct fx *f, uint64_t session)
{
	while (f->node.hold.skip > 0) {
		usleep(RETURN_HOLD_MS * 1000 + 1000);
		struct answers a = {0};
		assert_int_equal(propose_call_later(f, session, &a), 0);
		run_until_answered(f, &a, 1);
	}
}

/* The return hold (return_hold.h, node.c): once an entry that answered a
 * session's call is applied, the batch waits for that session's next
 * call, its own timer due within RETURN_HOLD_MS, and the two go out in
 * one entry; a call of another session does not end the wait. Seen on
 * loop turns quicker than the hold, most of them on any machine. */
static void test_return_hold(void **state)
{
	struct fx *f = *state;
	start(f);
	uint64_t caller = session_of(f, 400), other = session_of(f, 401);
	unsigned held = 0;
	for (unsigned attempt = 0; attempt < 10; attempt++) {
		use_up_skips(f, caller);
		usleep(RETURN_HOLD_MS * 1000 + 1000);
		struct answers a = {0};
		assert_int_equal(propose_call_later(f, caller, &a), 0);
		run_until_answered(f, &a, 1);
		uint64_t entries = f->node.entries_proposed, filled = f->node.hold.filled;
		assert_int_equal(propose_call_later(f, other, &a), 0);
		uv_run(&f->loop, UV_RUN_NOWAIT);
		if (f->node.entries_proposed == entries) {
			held++;
			assert_true(timebase_timer_active(&f->node.hold_timer));
			assert_true(uv_timer_get_due_in(&f->node.hold_timer.uv) <= RETURN_HOLD_MS);
			assert_int_equal(propose_call_later(f, caller, &a), 0);
			run_until_answered(f, &a, 3);
			assert_int_equal(f->node.entries_proposed, entries + 1); /* together */
			assert_int_equal(f->node.hold.filled, filled + 1);
		} else {
			run_until_answered(f, &a, 2); /* a slow turn: the hold had ended */
		}
		for (unsigned i = 0; i < a.n; i++)
			assert_int_equal(a.status[i], 0);
	}
	assert_true(held > 0);
	/* Nobody comes back: the batch goes out when the hold ends, woken by
	 * its timer, and the holds after it are skipped. */
	unsigned seen = 0;
	for (unsigned attempt = 0; attempt < 10 && seen == 0; attempt++) {
		use_up_skips(f, caller);
		usleep(RETURN_HOLD_MS * 1000 + 1000);
		unsigned backoff = f->node.hold.backoff;
		struct answers a = {0};
		assert_int_equal(propose_call_later(f, caller, &a), 0);
		run_until_answered(f, &a, 1);
		uint64_t expired = f->node.hold.expired;
		assert_int_equal(propose_call_later(f, other, &a), 0);
		run_until_answered(f, &a, 2);
		assert_int_equal(a.status[1], 0);
		if (f->node.hold.expired == expired + 1) { /* else a slow turn hid it */
			seen++;
			assert_int_equal(f->node.hold.backoff, backoff == 0 ? 1 : 2 * backoff);
			/* the entry that went out answered a call: its hold
			 * was the first one skipped */
			assert_int_equal(f->node.hold.skip, f->node.hold.backoff - 1);
		}
	}
	assert_int_equal(seen, 1);
	stop(f);
}

/* A caller whose next call reached the batch while the entry answering
 * its last one was in flight (a session with calls on several handles)
 * has come back: once that entry is applied, the batch goes out without
 * a hold, on the next loop turn. */
static void test_return_hold_counts_batched_calls(void **state)
{
	struct fx *f = *state;
	start(f);
	uint64_t caller = session_of(f, 402);
	for (unsigned attempt = 0; attempt < 5; attempt++) {
		use_up_skips(f, caller);
		usleep(RETURN_HOLD_MS * 1000 + 1000);
		struct answers a = {0};
		uint64_t entries = f->node.entries_proposed;
		assert_int_equal(propose_call_later(f, caller, &a), 0);
		uv_run(&f->loop, UV_RUN_NOWAIT);
		assert_int_equal(f->node.entries_proposed, entries + 1); /* in flight */
		assert_int_equal(propose_call_later(f, caller, &a), 0);
		run_until_answered(f, &a, 1);
		uv_run(&f->loop, UV_RUN_NOWAIT);
		assert_int_equal(f->node.entries_proposed, entries + 2);
		assert_false(timebase_timer_active(&f->node.hold_timer));
		run_until_answered(f, &a, 2);
		assert_int_equal(a.status[0], 0);
		assert_int_equal(a.status[1], 0);
	}
	stop(f);
}

/* A member added at run time is known by its client address from the
 * member book, which is read from LMDB once and kept (the same copy
 * answers again) until a membership command changes it: then the next
 * question reads the new book. */
static void test_member_addresses_cached(void **state)
{
	struct fx *f = *state;
	start(f);
	assert_null(node_member_client_address(&f->node, 5));

	Raftlock__MemberAdd add = RAFTLOCK__MEMBER_ADD__INIT;
	add.id = 5;
	add.raft_address = "127.0.0.1:1";
	add.client_address = "127.0.0.1:2";
	Raftlock__Command cmd = RAFTLOCK__COMMAND__INIT;
	cmd.op_case = RAFTLOCK__COMMAND__OP_MEMBER_ADD;
	cmd.member_add = &add;
	apply_one(f, &cmd);
	const char *a = node_member_client_address(&f->node, 5);
	assert_non_null(a);
	assert_string_equal(a, "127.0.0.1:2");
	assert_ptr_equal(node_member_client_address(&f->node, 5), a); /* not read again */
	assert_null(node_member_client_address(&f->node, 6));
	assert_ptr_equal(node_member_client_address(&f->node, 5), a);

	Raftlock__MemberRemove rm = RAFTLOCK__MEMBER_REMOVE__INIT;
	rm.id = 5;
	cmd.op_case = RAFTLOCK__COMMAND__OP_MEMBER_REMOVE;
	cmd.member_remove = &rm;
	apply_one(f, &cmd);
	assert_null(node_member_client_address(&f->node, 5));
	stop(f);
}

/* A loop that does not turn for half an election timeout or more is
 * counted (and logged); ordinary turns are not. */
static void test_loop_stall_counted(void **state)
{
	struct fx *f = *state;
	start(f);
	/* some ordinary turns first: none counts */
	uint64_t until = uv_hrtime() / 1000000u + 300;
	while (uv_hrtime() / 1000000u < until)
		uv_run(&f->loop, UV_RUN_ONCE);
	assert_int_equal(f->node.loop_stalls, 0);
	/* the loop held for 3 election timeouts (200 ms each), as a long
	 * apply or snapshot would hold it */
	struct timespec ts = {0, 600 * 1000000L};
	nanosleep(&ts, NULL);
	until = uv_hrtime() / 1000000u + 300;
	while (uv_hrtime() / 1000000u < until)
		uv_run(&f->loop, UV_RUN_ONCE);
	assert_int_equal(f->node.loop_stalls, 1);
	stop(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ready_and_batching, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parked_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_return_hold, setup, teardown),
		cmocka_unit_test_setup_teardown(test_return_hold_counts_batched_calls, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_stop_answers_and_refuses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_keeps_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_member_addresses_cached, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loop_stall_counted, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
