/* test_followers.c: the leader's lost-data check, its transfer back-off and
 * its snapshot for a member far behind
 * (server/followers.c, the real file) on a manual timebase, over fakes of
 * libraft's leader state: the test decides what raft reports (term, match
 * indexes, a transfer pending or not, still leader or not). Members have
 * no usable client address, so no connection is opened, but in
 * test_long_answer_dropped, whose member 2 is a listener of the test's on
 * 127.0.0.1; the loop is closed cleanly at the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "codec.h"
#include "followers.h"
#include "raftlock.h"
#include "status.h"
#include "timebase.h"

/* -------------------------------------------------------- fake libraft */

static raft_index match[4]; /* by member id */
static raft_id transferee;
static enum raft_state fake_role = RAFT_LEADER;
static int transfers;
static raft_id transfer_target;

raft_term raft_current_term(const struct raft *r)
{
	(void)r;
	return 5;
}

int raft_match_index(const struct raft *r, raft_id id, raft_index *index)
{
	(void)r;
	*index = match[id];
	return 0;
}

raft_id raft_transferee(const struct raft *r)
{
	(void)r;
	return transferee;
}

enum raft_state raft_state(struct raft *r)
{
	(void)r;
	return fake_role;
}

int raft_transfer(struct raft *r, struct raft_transfer *req, raft_id id, raft_transfer_cb cb)
{
	(void)req;
	(void)cb;
	transfers++;
	transfer_target = id;
	transferee = id;
	r->leader_state.transferee = id;
	r->leader_state.transfer_start = 100000; /* libraft's own clock */
	return 0;
}

static raft_index fake_applied = 100;

raft_index raft_last_applied(struct raft *r)
{
	(void)r;
	return fake_applied;
}

const char *raft_strerror(int errnum)
{
	(void)errnum;
	return "fake";
}

static int snapshots_asked;

void node_snapshot_soon(struct node *n)
{
	n->snapshot_soon = true;
	snapshots_asked++;
}

void node_note_feature_level(struct node *n, uint64_t id, uint32_t level)
{
	(void)n;
	(void)id;
	(void)level;
}

static raft_id fake_leader; /* the leader this node knows, 0: none */

raft_index raft_commit_index(const struct raft *r)
{
	(void)r;
	return 100;
}

static raft_index fake_last = 100;

raft_index raft_last_index(struct raft *r)
{
	(void)r;
	return fake_last;
}

const char *node_role(struct node *n)
{
	(void)n;
	return fake_role == RAFT_LEADER ? "leader" : "follower";
}

uint64_t node_cluster_now(struct node *n)
{
	(void)n;
	return 0;
}

const char *node_leader_client_address(struct node *n, uint64_t *leader_id)
{
	(void)n;
	*leader_id = fake_leader;
	return NULL;
}

/* The fake raft has no configuration: the --member list is followed. */
const char *node_member_client_address(struct node *n, uint64_t id)
{
	(void)n;
	(void)id;
	return NULL;
}

/* ------------------------------------------------------------- fixture */

#define ET 1000 /* election timeout, ms */

struct fx {
	uv_loop_t loop;
	struct timebase tb;
	struct config cfg;
	struct node node;
	struct followers fw;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	assert_int_equal(uv_loop_init(&f->loop), 0);
	timebase_init_manual(&f->tb, 50000);
	f->cfg.id = 1;
	f->cfg.election_timeout_ms = ET;
	f->cfg.snapshot_threshold = 1000;
	f->cfg.n_members = 3;
	for (unsigned i = 0; i < 3; i++) {
		f->cfg.members[i].id = i + 1;
		strcpy(f->cfg.members[i].client_address, "no-port"); /* never connected */
	}
	f->node.cfg = &f->cfg;
	f->node.ready = true;
	f->node.leader = true;
	memset(match, 0, sizeof match);
	match[2] = 100;
	match[3] = 90;
	transferee = 0;
	fake_role = RAFT_LEADER;
	fake_leader = 1;
	transfers = 0;
	fake_applied = 100;
	fake_last = 100;
	snapshots_asked = 0;
	followers_start(&f->fw, &f->loop, &f->tb, &f->cfg, &f->node, NULL);
	*state = f;
	return 0;
}

/* Closes a handle a failed test left open (test_long_answer_dropped's
 * port); the followers' own are closing. */
static void close_left(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	followers_close(&f->fw);
	uv_walk(&f->loop, close_left, NULL);
	assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&f->loop), 0);
	free(f);
	return 0;
}

/* Member 2 answers a STATUS whose raft log ends at last_index, to a
 * request made in this term after reading its match index. */
static void answer(struct fx *f, uint64_t last_index)
{
	struct follower *m = &f->fw.members[0];
	assert_int_equal(m->member.id, 2);
	m->term = 5;
	m->matched = match[2];
	Raftlock__StatusInfo st = RAFTLOCK__STATUS_INFO__INIT;
	st.node_id = 2;
	st.last_index = last_index;
	st.applied_index = last_index;
	followers_judge(m, &st);
}

/* This node as a follower of leader 2, not serving yet. */
static void follow_2(struct fx *f)
{
	f->node.ready = false;
	f->node.leader = false;
	fake_role = RAFT_FOLLOWER;
	fake_leader = 2;
}

/* ---------------------------------------------------------------- tests */

/* A follower whose leader sent no readiness report in this term (a build
 * older than the reports) asks the leader's STATUS and takes its commit
 * index as the report, but only from that leader, in this term, once it
 * is ready: an answer that a current leader's report would not match
 * moves nothing. The leader's own report ends the asking. */
static void test_follower_takes_old_leader_answer(void **state)
{
	struct fx *f = *state;
	char why[160];
	uint64_t leader = 0;
	follow_2(f);
	assert_true(status_wants_leader_answer(&f->node, &leader));
	assert_int_equal(leader, 2);
	assert_false(status_serving(&f->node, why, sizeof why));

	Raftlock__StatusInfo st = RAFTLOCK__STATUS_INFO__INIT;
	st.node_id = 2;
	st.term = 5;
	st.commit_index = 100; /* this node applied 100 */
	status_note_leader_answer(&f->node, &st);
	assert_false(status_serving(&f->node, why, sizeof why)); /* not ready: barrier */
	st.ready = true;
	st.term = 4;
	status_note_leader_answer(&f->node, &st);
	assert_false(status_serving(&f->node, why, sizeof why)); /* another term */
	st.term = 5;
	st.node_id = 3;
	status_note_leader_answer(&f->node, &st);
	assert_false(status_serving(&f->node, why, sizeof why)); /* not the leader */
	st.node_id = 2;
	st.commit_index = 101;
	status_note_leader_answer(&f->node, &st);
	assert_false(status_serving(&f->node, why, sizeof why)); /* not caught up */
	assert_non_null(strstr(why, "applied 100 of 101"));
	st.commit_index = 100;
	status_note_leader_answer(&f->node, &st);
	assert_true(status_serving(&f->node, why, sizeof why));
	assert_non_null(strstr(why, "serving as follower of leader 2"));

	assert_true(status_note_leader(&f->node, 5, 100, "raftlock-node-2"));
	assert_false(status_wants_leader_answer(&f->node, &leader));
	fake_leader = 0;
	assert_false(status_wants_leader_answer(&f->node, &leader));
}

/* A readiness report is taken only from the certificate of the leader
 * this node knows, in its current term, while it follows: a report
 * without a certificate (a plaintext port) never, so the follower keeps
 * asking its leader; another member's or another name's, another term, no
 * leader known, this node the leader, none. The leader's own report, even
 * one far ahead, holds until its next. */
static void test_report_taken_from_leader_only(void **state)
{
	struct fx *f = *state;
	char why[160];
	uint64_t leader = 0;
	follow_2(f);
	const char *refused[] = {
		NULL, "", "raftlock-node-3", "raftlock-node-1", "raftlock-node-20", "alice"};
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
		assert_false(status_note_leader(&f->node, 5, 100, refused[i]));
	assert_false(status_note_leader(&f->node, 4, 100, "raftlock-node-2"));
	assert_false(status_note_leader(&f->node, 6, 100, "raftlock-node-2"));
	fake_leader = 0;
	assert_false(status_note_leader(&f->node, 5, 100, "raftlock-node-2"));
	fake_leader = 1; /* this node, as raft sees it */
	assert_false(status_note_leader(&f->node, 5, 100, "raftlock-node-1"));
	fake_leader = 2;
	f->node.leader = true;
	assert_false(status_note_leader(&f->node, 5, 100, "raftlock-node-2"));
	f->node.leader = false;
	assert_false(status_serving(&f->node, why, sizeof why));
	assert_non_null(strstr(why, "waiting for it to report"));
	assert_true(status_wants_leader_answer(&f->node, &leader));

	assert_true(status_note_leader(&f->node, 5, 100, "raftlock-node-2"));
	assert_true(status_serving(&f->node, why, sizeof why));
	assert_false(status_wants_leader_answer(&f->node, &leader));
	assert_false(status_note_leader(&f->node, 5, UINT64_C(1) << 40, NULL));
	assert_true(status_serving(&f->node, why, sizeof why));
	assert_true(status_note_leader(&f->node, 5, UINT64_C(1) << 40, "raftlock-node-2"));
	assert_false(status_serving(&f->node, why, sizeof why));
	assert_true(status_note_leader(&f->node, 5, 100, "raftlock-node-2"));
	assert_true(status_serving(&f->node, why, sizeof why));
}

static void test_backoff_formula(void **state)
{
	(void)state;
	assert_int_equal(followers_backoff_ms(1000, 1), 2000);
	assert_int_equal(followers_backoff_ms(1000, 2), 4000);
	assert_int_equal(followers_backoff_ms(1000, 5), 32000);
	assert_int_equal(followers_backoff_ms(1000, 6), 60000); /* capped */
	assert_int_equal(followers_backoff_ms(1000, 60), 60000);
	assert_int_equal(followers_backoff_ms(40000, 1), 80000); /* never below the first */
	assert_int_equal(followers_backoff_ms(40000, 3), 80000);
}

/* A member whose log ends below what this leader matched on it lost its
 * data: leadership goes to the most up-to-date other voter, and libraft's
 * transfer clock is started half an election timeout back, so that writes
 * are refused (transfer pending) for at most one election timeout. A
 * healthy answer moves nothing. */
static void test_lost_member_hands_over(void **state)
{
	struct fx *f = *state;
	answer(f, 100);
	assert_int_equal(transfers, 0);
	answer(f, 1);
	assert_int_equal(transfers, 1);
	assert_int_equal(transfer_target, 3);
	assert_int_equal(f->node.raft.leader_state.transfer_start, 100000 - ET / 2);
	/* one at a time */
	answer(f, 1);
	assert_int_equal(transfers, 1);
}

/* A hand-over that did not complete (still leader when libraft gave up)
 * makes the next wait 2, then 4 election timeouts; one that completed
 * resets the back-off. */
static void test_backoff_after_failed_transfers(void **state)
{
	struct fx *f = *state;
	answer(f, 1);
	assert_int_equal(transfers, 1);
	transferee = 0; /* libraft gave up; still leader */
	timebase_advance(&f->tb, FOLLOWERS_CHECK_MS);
	assert_int_equal(f->fw.failures, 1);
	answer(f, 1);
	assert_int_equal(transfers, 1); /* backing off */
	timebase_advance(&f->tb, 2 * ET - 1);
	answer(f, 1);
	assert_int_equal(transfers, 1);
	timebase_advance(&f->tb, 1);
	answer(f, 1);
	assert_int_equal(transfers, 2);
	transferee = 0;
	timebase_advance(&f->tb, FOLLOWERS_CHECK_MS);
	assert_int_equal(f->fw.failures, 2);
	timebase_advance(&f->tb, 4 * ET - FOLLOWERS_CHECK_MS - 1);
	answer(f, 1);
	assert_int_equal(transfers, 2);
	timebase_advance(&f->tb, FOLLOWERS_CHECK_MS + 1); /* 4 ET after the check that saw it */
	answer(f, 1);
	assert_int_equal(transfers, 3);
	/* this one hands over: no back-off left */
	transferee = 0;
	fake_role = RAFT_FOLLOWER;
	timebase_advance(&f->tb, FOLLOWERS_CHECK_MS);
	assert_int_equal(f->fw.failures, 0);
	assert_int_equal(f->fw.next_transfer_ms, 0);
}

/* Member 2 answers twice with its log at last_index, applied as far (the
 * first answer only shows where it stands: a new snapshot is never forced
 * toward a member whose applied index moves). */
static void answer_still(struct fx *f, uint64_t last_index)
{
	answer(f, last_index);
	answer(f, last_index);
}

/* A member whose applied index moves between two answers may be writing a
 * snapshot of its own (libraft 0.22.1 crashes it if it is sent one then):
 * no new snapshot for it, however far behind; nor while one is already
 * wanted. */
static void test_catch_up_not_while_moving(void **state)
{
	struct fx *f = *state;
	match[2] = 0;
	fake_applied = 10000;
	f->node.snapshot_index = 100;
	answer(f, 10);
	answer(f, 20);
	answer(f, 30);
	assert_int_equal(snapshots_asked, 0);
	f->node.snapshot_soon = true;
	answer_still(f, 30);
	assert_int_equal(snapshots_asked, 0);
	f->node.snapshot_soon = false;
	answer(f, 30);
	assert_int_equal(snapshots_asked, 1);
}

/* A member more than the snapshot threshold (1000) entries behind while
 * this leader's last snapshot is as old makes it take a new one. */
static void test_catch_up_by_entries(void **state)
{
	struct fx *f = *state;
	match[2] = 0;
	fake_applied = 10000;
	f->node.snapshot_index = 9000; /* exactly the threshold: no */
	answer_still(f, 10);
	assert_int_equal(snapshots_asked, 0);
	f->node.snapshot_index = 8999;
	answer_still(f, 10);
	assert_int_equal(snapshots_asked, 1);
	f->node.snapshot_soon = false;
	answer_still(f, 9000); /* exactly the threshold behind: no */
	assert_int_equal(snapshots_asked, 1);
}

/* Member 2 in raft's configuration with role, the others voters. */
static struct raft_server servers[3];

static void configure(struct fx *f, int role2)
{
	for (unsigned i = 0; i < 3; i++)
		servers[i] = (struct raft_server){.id = i + 1, .role = RAFT_VOTER};
	servers[1].role = role2;
	f->node.raft.configuration.servers = servers;
	f->node.raft.configuration.n = 3;
}

/* Answers "last_index" every FOLLOWERS_CHECK_MS for ms; the transfers. */
static int answer_for(struct fx *f, uint64_t last_index, uint64_t ms)
{
	for (uint64_t t = 0; t <= ms; t += FOLLOWERS_CHECK_MS) {
		answer(f, last_index);
		timebase_advance(&f->tb, FOLLOWERS_CHECK_MS);
	}
	return transfers;
}

/* A voter whose log rests at this leader's match index for it (100),
 * behind the leader (110), with entry 101 still in the leader's log, for
 * FOLLOWERS_STALL_MS: libraft 0.22.1 stranded it after a snapshot that
 * ended there. One hand-over, not another for FOLLOWERS_STALL_AGAIN_MS. */
static void test_stalled_member_hands_over_once(void **state)
{
	struct fx *f = *state;
	configure(f, RAFT_VOTER);
	fake_last = 110;
	f->node.snapshot_index = 100;
	f->node.trailing = 16;
	assert_int_equal(answer_for(f, 100, FOLLOWERS_STALL_MS - FOLLOWERS_CHECK_MS), 0);
	assert_int_equal(answer_for(f, 100, FOLLOWERS_CHECK_MS), 1);
	assert_int_equal(transfer_target, 3);
	transferee = 0; /* that one is over, and this node leads again */
	f->fw.transferring = false;
	f->node.raft.leader_state.transferee = 0;
	assert_int_equal(answer_for(f, 100, FOLLOWERS_STALL_AGAIN_MS - 2 * FOLLOWERS_STALL_MS), 1);
	assert_int_equal(answer_for(f, 100, 2 * FOLLOWERS_STALL_MS), 2);
}

/* What is not a stall: a member being sent a snapshot (entry 101 is no
 * longer in the leader's log), a standby, a member level with the leader,
 * one whose answers stopped for a while (counting starts again), and one
 * that moves. */
static void test_no_stall_without_proof(void **state)
{
	struct fx *f = *state;
	configure(f, RAFT_VOTER);
	fake_last = 2000;
	f->node.trailing = 16;
	f->node.snapshot_index = 1000; /* the log starts at 985 */
	assert_int_equal(answer_for(f, 100, 2 * FOLLOWERS_STALL_MS), 0);
	f->node.snapshot_index = 100;
	configure(f, RAFT_STANDBY);
	assert_int_equal(answer_for(f, 100, 2 * FOLLOWERS_STALL_MS), 0);
	configure(f, RAFT_VOTER);
	fake_last = 100;
	assert_int_equal(answer_for(f, 100, 2 * FOLLOWERS_STALL_MS), 0);
	fake_last = 2000;
	answer_for(f, 100, FOLLOWERS_STALL_MS - FOLLOWERS_CHECK_MS);
	timebase_advance(&f->tb, 10 * FOLLOWERS_CHECK_MS); /* no answer meanwhile */
	assert_int_equal(answer_for(f, 100, FOLLOWERS_STALL_MS - FOLLOWERS_CHECK_MS), 0);
	for (uint64_t i = 1; i <= 2 * FOLLOWERS_STALL_MS / FOLLOWERS_CHECK_MS; i++) {
		match[2] = 100 + i;
		answer(f, 100 + i);
		timebase_advance(&f->tb, FOLLOWERS_CHECK_MS);
	}
	assert_int_equal(transfers, 0);
}

/* ------------------------------------------------- a member's client port */

/* What listens on member 2's client address: answers each STATUS request
 * with the envelope `answer` (its id set to the request's). */
struct port {
	uv_tcp_t listener, conn;
	bool accepted;
	struct frame_reader reader;
	Raftlock__Envelope answer;
	Raftlock__Response response;
	Raftlock__StatusInfo status;
};

struct port_write {
	uv_write_t req;
	uint8_t *bytes;
};

static void port_written(uv_write_t *req, int status)
{
	(void)status; /* the member may have dropped the connection */
	struct port_write *w = req->data;
	free(w->bytes);
	free(w);
}

static void port_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	buf->base = malloc(suggested);
	buf->len = suggested;
}

static void port_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct port *p = s->data;
	if (nread < 0 && !uv_is_closing((uv_handle_t *)s))
		uv_close((uv_handle_t *)s, NULL);
	if (nread > 0)
		assert_int_equal(frame_reader_feed(&p->reader, buf->base, (size_t)nread), 0);
	free(buf->base);
	const uint8_t *payload;
	size_t len;
	while (nread > 0 && frame_reader_next(&p->reader, &payload, &len) == 1) {
		Raftlock__Envelope *req = NULL;
		const char *refusal = NULL;
		assert_int_equal(codec_decode_request(payload, len, &req, &refusal), 0);
		assert_int_equal(req->body_case, RAFTLOCK__ENVELOPE__BODY_STATUS);
		p->answer.id = req->id;
		raftlock__envelope__free_unpacked(req, NULL);
		struct port_write *w = calloc(1, sizeof *w);
		size_t n;
		assert_non_null(w);
		assert_int_equal(codec_frame_envelope(&p->answer, &w->bytes, &n), 0);
		uv_buf_t b = uv_buf_init((char *)w->bytes, (unsigned)n);
		w->req.data = w;
		assert_int_equal(uv_write(&w->req, s, &b, 1, port_written), 0);
	}
}

static void port_connection(uv_stream_t *listener, int status)
{
	struct port *p = listener->data;
	assert_int_equal(status, 0);
	assert_false(p->accepted);
	uv_tcp_init(listener->loop, &p->conn);
	p->conn.data = p;
	assert_int_equal(uv_accept(listener, (uv_stream_t *)&p->conn), 0);
	p->accepted = true;
	uv_read_start((uv_stream_t *)&p->conn, port_alloc, port_read);
}

/* Listens on a free port of 127.0.0.1, made member 2's client address. */
static void port_open(struct port *p, struct fx *f)
{
	struct sockaddr_in addr;
	int len = sizeof addr;
	uv_tcp_init(&f->loop, &p->listener);
	p->listener.data = p;
	uv_ip4_addr("127.0.0.1", 0, &addr);
	assert_int_equal(uv_tcp_bind(&p->listener, (struct sockaddr *)&addr, 0), 0);
	assert_int_equal(uv_listen((uv_stream_t *)&p->listener, 4, port_connection), 0);
	uv_tcp_getsockname(&p->listener, (struct sockaddr *)&addr, &len);
	struct follower *m = &f->fw.members[0];
	assert_int_equal(m->member.id, 2);
	snprintf(m->member.client_address, sizeof m->member.client_address, "127.0.0.1:%d",
		 ntohs(addr.sin_port));
	frame_reader_init(&p->reader, RAFTLOCK_FRAME_MAX);
	p->answer = (Raftlock__Envelope)RAFTLOCK__ENVELOPE__INIT;
	p->answer.body_case = RAFTLOCK__ENVELOPE__BODY_RESPONSE;
	p->answer.response = &p->response;
	p->response = (Raftlock__Response)RAFTLOCK__RESPONSE__INIT;
	p->response.payload_case = RAFTLOCK__RESPONSE__PAYLOAD_STATUS_INFO;
	p->response.status_info = &p->status;
}

static void port_close(struct port *p)
{
	uv_close((uv_handle_t *)&p->listener, NULL);
	if (p->accepted && !uv_is_closing((uv_handle_t *)&p->conn))
		uv_close((uv_handle_t *)&p->conn, NULL);
	frame_reader_close(&p->reader);
}

/* The check's next round (FOLLOWERS_CHECK_MS on), then the loop until
 * member 2 took an answer of applied index `applied` (or, when 0, its
 * connection is closed); at most 5 s. */
static void round_until(struct fx *f, uint64_t applied)
{
	struct follower *m = &f->fw.members[0];
	timebase_advance(&f->tb, FOLLOWERS_CHECK_MS);
	for (int i = 0; i < 5000; i++) {
		uv_run(&f->loop, UV_RUN_NOWAIT);
		if (applied != 0 ? m->applied_seen && m->applied == applied
				 : m->state == FOLLOWER_IDLE)
			return;
		usleep(1000);
	}
	fail_msg("member 2: no answer of applied index %llu taken", (unsigned long long)applied);
}

static char *longest(char *s, size_t size)
{
	memset(s, 'a', size - 1);
	s[size - 1] = '\0';
	return s;
}

/* A STATUS answer as service.c's handle_status() writes it, of the
 * largest cluster (CONFIG_MAX_MEMBERS), its addresses and name at their
 * longest, its numbers at their widest. */
static void largest_status(struct port *p)
{
	static char addr[CONFIG_ADDR_MAX], cluster[sizeof((struct config *)0)->cluster];
	static Raftlock__Member members[CONFIG_MAX_MEMBERS];
	static Raftlock__Member *ptrs[CONFIG_MAX_MEMBERS];
	Raftlock__StatusInfo *st = &p->status;
	raftlock__status_info__init(st);
	for (unsigned i = 0; i < CONFIG_MAX_MEMBERS; i++) {
		raftlock__member__init(&members[i]);
		members[i].id = INT64_MAX;
		members[i].raft_address = longest(addr, sizeof addr);
		members[i].client_address = addr;
		ptrs[i] = &members[i];
	}
	st->node_id = st->leader_id = INT64_MAX;
	st->role = "unavailable";
	st->term = st->commit_index = st->applied_index = st->last_index = UINT64_MAX;
	st->leader_address = addr;
	st->members = ptrs;
	st->n_members = CONFIG_MAX_MEMBERS;
	st->cluster_time = st->next_token = st->sessions = st->locks = UINT64_MAX;
	st->ready = true;
	st->cluster = longest(cluster, sizeof cluster);
	st->cluster_id = UINT64_MAX;
	st->feature_level = st->cluster_feature_level = UINT32_MAX;
	p->response.status = RAFTLOCK_ESHUTDOWN;
	p->response.message = "";
	p->response.leader = addr;
	p->answer.id = UINT64_MAX;
}

/* Pads the answer's cluster name until its payload is `size` bytes (a
 * name of 128 to 16,383 bytes, whose length takes 2). */
static void pad_answer(struct port *p, size_t size)
{
	static char name[16384];
	size_t n = 128, now;
	for (;;) {
		assert_true(n >= 128 && n < sizeof name);
		memset(name, 'c', n);
		name[n] = '\0';
		p->status.cluster = name;
		now = raftlock__envelope__get_packed_size(&p->answer);
		if (now == size)
			return;
		n = n + size - now;
	}
}

/* The leader reads a member's client port with frames of at most
 * FOLLOWERS_ANSWER_MAX bytes, four times the largest STATUS answer: one
 * that long is judged, one longer (anything may listen there: a 4 MiB
 * frame of 2 million empty elements took 2 s and 300 MB) is not read,
 * and the connection is dropped, with a line at a bounded rate. */
static void test_long_answer_dropped(void **state)
{
	struct fx *f = *state;
	struct follower *m = &f->fw.members[0];
	static struct port p; /* its handles close after the test, in teardown */
	memset(&p, 0, sizeof p);
	port_open(&p, f);
	largest_status(&p);
	p.answer.protocol = WIRE_PROTOCOL; /* as codec_frame_envelope() frames it */
	size_t largest = raftlock__envelope__get_packed_size(&p.answer);
	print_message("largest STATUS answer: %zu bytes\n", largest);
	assert_true(4 * largest <= FOLLOWERS_ANSWER_MAX);

	p.status.node_id = 2;      /* judged: that member, in this term, */
	p.status.last_index = 100; /* not behind what this leader matched */
	p.status.applied_index = 1001;
	round_until(f, 1001);
	assert_int_equal(m->state, FOLLOWER_OPEN);
	p.status.applied_index = 1002;
	pad_answer(&p, FOLLOWERS_ANSWER_MAX);
	round_until(f, 1002);
	assert_int_equal(m->state, FOLLOWER_OPEN);
	assert_false(f->fw.log_answer.started);

	p.status.applied_index = 1003;
	pad_answer(&p, FOLLOWERS_ANSWER_MAX + 1);
	round_until(f, 0);
	assert_int_equal(m->applied, 1002);
	assert_true(f->fw.log_answer.started);
	assert_int_equal(f->fw.log_answer.tokens, LOG_RATE_BURST - 1);
	port_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backoff_formula),
		cmocka_unit_test_setup_teardown(test_follower_takes_old_leader_answer, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_report_taken_from_leader_only, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lost_member_hands_over, setup, teardown),
		cmocka_unit_test_setup_teardown(test_backoff_after_failed_transfers, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_catch_up_not_while_moving, setup, teardown),
		cmocka_unit_test_setup_teardown(test_catch_up_by_entries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stalled_member_hands_over_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_no_stall_without_proof, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_answer_dropped, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
