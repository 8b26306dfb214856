/*
 * test_client_oom.c: the client library out of memory, against the fake
 * node: chosen allocations fail (alloc_fail.h) and each call says
 * RAFTLOCK_ENOMEM, or ends what it can no longer do, as raftlock.h says.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc_fail.h"
#include "client.h"
#include "client_fakeserver.h"
#include "lock.h"
#include "raftlock.h"
#include "session.h"

#define WATCH_CANCEL RAFTLOCK__ENVELOPE__BODY_WATCH_CANCEL

/* A fake leader, a client on it (timeout: its request timeout) and a
 * session. */
struct node {
	struct fake *f;
	raftlock_client *c;
	raftlock_session *s;
	pthread_t caller; /* the test's thread */
};

static void node_up(struct node *n, unsigned timeout_ms)
{
	n->f = fake_start(FAKE_LEADER);
	n->caller = pthread_self();
	const char *addrs[] = {n->f->addr};
	struct raftlock_client_options o = {
		.addresses = addrs, .n_addresses = 1, .request_timeout_ms = timeout_ms};
	assert_int_equal(raftlock_client_open(&o, &n->c, NULL), 0);
	assert_int_equal(raftlock_session_open(n->c, NULL, &n->s), 0);
}

static void node_down(struct node *n)
{
	alloc_fail_stop();
	raftlock_client_close(n->c);
	fake_stop(n->f);
}

/* The message of a call that failed for want of memory alone. */
static void assert_errmsg_enomem(raftlock_client *c, const char *context)
{
	char want[256];
	snprintf(want, sizeof want, "%s: %s", context, raftlock_strerror(RAFTLOCK_ENOMEM));
	assert_string_equal(raftlock_errmsg(c), want);
}

/* The orphan's records reserved (what would keep sending a request in
 * the background, reserved as it is submitted) fail, count of them after
 * the first skip: on the caller's thread, else on the client's I/O
 * thread. */
static void fail_orphans(struct node *n, bool on_caller, int skip, int count)
{
	alloc_fail_start(
		&(struct alloc_fail_rule){.calls = ALLOC_FAIL_CALLOC,
					  .size = sizeof(struct session_orphan),
					  .one_thread = true,
					  .thread = on_caller ? n->caller : n->c->t.io_thread,
					  .skip = skip,
					  .count = count});
}

/* The bytes of the packed copy of l's release that undoes a late grant
 * (session_abandon), made where the call gives up: on the caller's
 * thread, else on the I/O thread. The next one fails. */
static void fail_undo_copy(struct node *n, raftlock_lock *l, bool on_caller)
{
	Raftlock__Envelope env = RAFTLOCK__ENVELOPE__INIT;
	Raftlock__ReleaseRequest req = RAFTLOCK__RELEASE_REQUEST__INIT;
	Raftlock__Release rel = RAFTLOCK__RELEASE__INIT;
	env.body_case = RAFTLOCK__ENVELOPE__BODY_RELEASE;
	env.release = &req;
	req.release = &rel;
	rel.name = l->name;
	rel.owner = l->owner;
	alloc_fail_start(
		&(struct alloc_fail_rule){.calls = ALLOC_FAIL_MALLOC,
					  .size = 4 + raftlock__envelope__get_packed_size(&env),
					  .one_thread = true,
					  .thread = on_caller ? n->caller : n->c->t.io_thread,
					  .count = 1});
}

/* Waits up to 5 s for the fake to get n requests of that kind. */
static void await_count(struct fake *f, Raftlock__Envelope__BodyCase body, int n)
{
	for (int i = 0; i < 500 && fake_count(f, body) < n; i++)
		sleep_ms(10);
	assert_int_equal(fake_count(f, body), n);
}

/* A proclaim copies its value before sending: without memory for the
 * copy it sends nothing and says so (its later grants would publish ""). */
static void test_proclaim_without_memory_sends_nothing(void **state)
{
	(void)state;
	struct node n;
	raftlock_leader *ld;
	node_up(&n, 3000);
	assert_int_equal(raftlock_campaign(n.s, "e", "first", 0, &ld), 0);
	alloc_fail_start(&(struct alloc_fail_rule){.text = "second", .count = 1});
	assert_int_equal(raftlock_proclaim(ld, "second"), RAFTLOCK_ENOMEM);
	assert_int_equal(alloc_fail_count(), 1);
	assert_errmsg_enomem(n.c, "proclaim 'e'");
	assert_int_equal(fake_count(n.f, PROCLAIM), 0);
	node_down(&n);
}

/* A try-lock or acquire sent, then cut off by every address refusing
 * the client, without memory to copy the release of a late grant:
 * ENOMEM, its message out of memory alone, not the refusal; the request
 * is still sent until it settles (its seq must), and its late grant is
 * not released. acquire: a blocking acquire, else a try-lock. */
static void refused_without_memory(bool acquire)
{
	struct node n;
	raftlock_lock *l;
	node_up(&n, 3000);
	assert_int_equal(raftlock_lock_new(n.s, "q", NULL, &l), 0);
	FAKE_SET(n.f, refuse_conns, true);
	FAKE_SET(n.f, drop_first_acquire, true); /* sent, then the connection goes */
	fail_undo_copy(&n, l, acquire);
	int rv = acquire ? raftlock_lock_acquire(l, RAFTLOCK_EXCLUSIVE, 1, 10000, NULL)
			 : raftlock_lock_try(l, NULL);
	assert_int_equal(rv, RAFTLOCK_ENOMEM);
	assert_int_equal(alloc_fail_count(), 1);
	assert_errmsg_enomem(n.c, "acquire 'q'");
	assert_int_equal(raftlock_lock_token(l), 0);
	FAKE_SET(n.f, refuse_conns, false);
	await_count(n.f, ACQUIRE, 2); /* sent again, and granted */
	sleep_ms(100);
	assert_int_equal(fake_count(n.f, RELEASE), 0);
	node_down(&n);
}

/* A try-lock sent, then cut off by every address refusing the client,
 * whose grant comes later, without memory to send that grant's release
 * when the keepalive thread settles it: the release stays due and goes at
 * a later tick, and the handle's next call waits for it (GUARANTEES rule
 * 6); it was dropped, the lock held by the session while the handle
 * thought it free. */
static void test_late_grant_released_once_memory_returns(void **state)
{
	(void)state;
	struct node n;
	raftlock_lock *l;
	node_up(&n, 3000);
	assert_int_equal(raftlock_lock_new(n.s, "u", NULL, &l), 0);
	FAKE_SET(n.f, refuse_conns, true);
	FAKE_SET(n.f, drop_first_acquire, true); /* sent, then the connection goes */
	assert_int_equal(raftlock_lock_try(l, NULL), RAFTLOCK_EUNKNOWN);
	alloc_fail_start(&(struct alloc_fail_rule){.calls = ALLOC_FAIL_CALLOC,
						   .size = sizeof(struct session_orphan),
						   .one_thread = true,
						   .thread = n.c->ka.thread,
						   .count = 1});
	FAKE_SET(n.f, refuse_conns, false);
	await_count(n.f, ACQUIRE, 2); /* sent again, and granted */
	for (int i = 0; i < 500 && alloc_fail_count() == 0; i++)
		sleep_ms(10);
	assert_int_equal(alloc_fail_count(), 1); /* its release, the first time */
	assert_int_equal(raftlock_lock_try(l, NULL), 0);
	assert_int_equal(fake_count(n.f, RELEASE), 1);
	assert_int_equal(fake_count(n.f, ACQUIRE), 3);
	assert_true(fake_nth(n.f, RELEASE, 0).seq < fake_nth(n.f, ACQUIRE, 2).seq);
	node_down(&n);
}

static void test_refused_try_without_memory_to_release(void **state)
{
	(void)state;
	refused_without_memory(false);
}

static void test_refused_acquire_without_memory_to_release(void **state)
{
	(void)state;
	refused_without_memory(true);
}

/* A set granted with a lock revoked in the same read is given up; without
 * memory to release its other lock, that lock stays held until the
 * session ends, and the caller hears it: ENOMEM, not ENOTHOLDER.
 * timeout_ms 0: a try, taken in by the I/O thread; else the caller's.
 * request: what fails is the release's request (submitted, it fails
 * with ENOMEM), else its orphan's record. */
static void set_revoked_without_memory(int timeout_ms, bool request)
{
	struct node n;
	raftlock_multi *m;
	node_up(&n, 3000);
	struct raftlock_multi_item items[] = {{.name = "a"}, {.name = "b"}};
	assert_int_equal(raftlock_multi_new(n.s, items, 2, &m), 0);
	FAKE_SET(n.f, revoke_set_item, 1);
	FAKE_SET(n.f, revoke_with_grant, true);
	bool on_caller = timeout_ms != 0;
	if (request)
		alloc_fail_start(&(struct alloc_fail_rule){
			.calls = ALLOC_FAIL_CALLOC,
			.size = sizeof(struct request),
			.one_thread = true,
			.thread = on_caller ? n.caller : n.c->t.io_thread,
			.skip = on_caller, /* after the set's own request */
			.count = 1});
	else
		fail_orphans(&n, on_caller, on_caller, 1);
	int rv = raftlock_multi_acquire(m, timeout_ms);
	if (rv != RAFTLOCK_ENOMEM)
		fail_msg("timeout %d: status %d: %s", timeout_ms, rv, raftlock_errmsg(n.c));
	assert_int_equal(alloc_fail_count(), 1);
	assert_string_equal(raftlock_errmsg(n.c),
			    "acquire 'a': out of memory (a lock of the set was revoked; the "
			    "others stay held until the session ends)");
	assert_int_equal(raftlock_multi_token(m, 0), 0);
	assert_int_equal(raftlock_multi_token(m, 1), 0);
	sleep_ms(100);
	assert_int_equal(fake_count(n.f, RELEASE), 0);
	node_down(&n);
}

static void test_set_revoked_without_memory_to_release_the_rest(void **state)
{
	(void)state;
	set_revoked_without_memory(0, false);
	set_revoked_without_memory(5000, false);
	set_revoked_without_memory(0, true);
}

/* Revokes the lock `name` of n's session once the fake got a release
 * (the lock layer's revoked hook, as the I/O thread calls it for a
 * SessionEvent). */
struct revoker {
	struct node *n;
	const char *name;
};

static void *revoke_after_release(void *arg)
{
	struct revoker *r = arg;
	struct transport *t = &r->n->c->t;
	for (int i = 0; i < 500 && fake_count(r->n->f, RELEASE) == 0; i++)
		sleep_ms(10);
	pthread_mutex_lock(&t->mu);
	raftlock_lock *l;
	list_each_entry (l, &r->n->s->attached, struct raftlock_lock, link)
		if (strcmp(l->name, r->name) == 0 && l->token != 0)
			lock_revoked(r->n->s, l->owner, l->name, l->token);
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

/* raftlock_multi_release() ranks a release that sent nothing for want of
 * memory by what the set still holds: revoked meanwhile, its lock is not
 * held, and the caller hears of the release sent but unanswered (EUNKNOWN:
 * it executes), not a "may stay held" ENOMEM. */
static void test_multi_release_ranks_unsent_enomem_by_what_is_held(void **state)
{
	(void)state;
	struct node n;
	raftlock_multi *m;
	pthread_t th;
	node_up(&n, 1000);
	struct raftlock_multi_item items[] = {{.name = "a"}, {.name = "b"}};
	assert_int_equal(raftlock_multi_new(n.s, items, 2, &m), 0);
	assert_int_equal(raftlock_multi_acquire(m, 0), 0);
	FAKE_SET(n.f, ignore_releases, true);
	/* released in reverse name order: b's is sent, a's request fails */
	alloc_fail_start(&(struct alloc_fail_rule){.calls = ALLOC_FAIL_CALLOC,
						   .size = sizeof(struct request),
						   .one_thread = true,
						   .thread = n.caller,
						   .skip = 1,
						   .count = 1});
	struct revoker r = {.n = &n, .name = "a"};
	assert_int_equal(pthread_create(&th, NULL, revoke_after_release, &r), 0);
	int rv = raftlock_multi_release(m);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(alloc_fail_count(), 1);
	if (rv != RAFTLOCK_EUNKNOWN)
		fail_msg("status %d: %s", rv, raftlock_errmsg(n.c));
	assert_int_equal(strncmp(raftlock_errmsg(n.c), "release 'b': ", 13), 0);
	assert_int_equal(raftlock_multi_token(m, 0), 0);
	assert_int_equal(raftlock_multi_token(m, 1), 0);
	assert_int_equal(fake_count(n.f, RELEASE), 1);
	FAKE_SET(n.f, ignore_releases, false);
	node_down(&n);
}

/* A release sent but not answered in time is given up without needing
 * memory (its orphan's record came with it): EUNKNOWN, and the handle's
 * next call is sent only after that release settles (GUARANTEES rule
 * 6), not at once, where the old release could land on the new grant. */
static void test_release_given_up_needs_no_memory(void **state)
{
	(void)state;
	struct node n;
	raftlock_lock *l;
	node_up(&n, 300);
	assert_int_equal(raftlock_lock_new(n.s, "r", NULL, &l), 0);
	assert_int_equal(raftlock_lock_try(l, NULL), 0);
	FAKE_SET(n.f, ignore_releases, true);
	fail_orphans(&n, false, 0, 1000); /* its deadline passes on the I/O thread */
	assert_int_equal(raftlock_lock_release(l, NULL), RAFTLOCK_EUNKNOWN);
	assert_int_equal(alloc_fail_count(), 0);
	assert_int_equal(raftlock_lock_token(l), 0);
	assert_int_equal(raftlock_lock_try(l, NULL), RAFTLOCK_ESTATE);
	assert_int_equal(fake_count(n.f, ACQUIRE), 1);
	FAKE_SET(n.f, ignore_releases, false);
	assert_int_equal(raftlock_lock_try(l, NULL), 0);
	assert_int_equal(fake_count(n.f, ACQUIRE), 2);
	node_down(&n);
}

/* A release without memory for its orphan's record sends nothing:
 * ENOMEM, the handle still holds the lock. */
static void test_release_without_memory_sends_nothing(void **state)
{
	(void)state;
	struct node n;
	raftlock_lock *l;
	uint64_t token;
	node_up(&n, 3000);
	assert_int_equal(raftlock_lock_new(n.s, "r", NULL, &l), 0);
	assert_int_equal(raftlock_lock_try(l, &token), 0);
	fail_orphans(&n, true, 0, 1);
	assert_int_equal(raftlock_lock_release(l, NULL), RAFTLOCK_ENOMEM);
	assert_int_equal(alloc_fail_count(), 1);
	assert_errmsg_enomem(n.c, "release 'r'");
	assert_int_equal(raftlock_lock_token(l), token);
	sleep_ms(100);
	assert_int_equal(fake_count(n.f, RELEASE), 0);
	alloc_fail_stop();
	assert_int_equal(raftlock_lock_release(l, NULL), 0);
	node_down(&n);
}

/* A session's close: without memory for its orphan's record it is not
 * sent (ENOMEM); sent and unanswered, it is given up without memory
 * (EUNKNOWN, as raftlock.h says). The session is freed either way. */
static void close_without_memory(bool sent)
{
	struct node n;
	node_up(&n, 300);
	FAKE_SET(n.f, silent, sent);
	fail_orphans(&n, true, sent, sent ? 1000 : 1);
	assert_int_equal(raftlock_session_close(n.s), sent ? RAFTLOCK_EUNKNOWN : RAFTLOCK_ENOMEM);
	assert_int_equal(alloc_fail_count(), !sent);
	assert_int_equal(fake_count(n.f, CLOSE), sent);
	node_down(&n);
}

static void test_close_without_memory(void **state)
{
	(void)state;
	close_without_memory(false);
	close_without_memory(true);
}

/* The events of a watch, or the outcomes of asynchronous calls, as
 * their callbacks got them. */
struct seen {
	pthread_mutex_t mu;
	int n;
	enum raftlock_watch_kind kind[8];
	int status[8];
};

static void on_watch(const struct raftlock_watch_event *ev, void *arg)
{
	struct seen *w = arg;
	pthread_mutex_lock(&w->mu);
	if (w->n < 8) {
		w->kind[w->n] = ev->kind;
		w->status[w->n] = ev->status;
		w->n++;
	}
	pthread_mutex_unlock(&w->mu);
}

static void on_leader(const struct raftlock_leader_event *ev, void *arg)
{
	struct seen *w = arg;
	pthread_mutex_lock(&w->mu);
	if (w->n < 8) {
		w->kind[w->n] = ev->has_leader ? RAFTLOCK_WATCH_HOLDING : RAFTLOCK_WATCH_ERROR;
		w->status[w->n] = ev->status;
		w->n++;
	}
	pthread_mutex_unlock(&w->mu);
}

/* Waits up to 5 s for one event, then 300 ms more: it is the only one. */
static void await_only_event(struct seen *w)
{
	for (int i = 0; i < 500; i++) {
		pthread_mutex_lock(&w->mu);
		int n = w->n;
		pthread_mutex_unlock(&w->mu);
		if (n > 0)
			break;
		sleep_ms(10);
	}
	sleep_ms(300);
	pthread_mutex_lock(&w->mu);
	assert_int_equal(w->n, 1);
	pthread_mutex_unlock(&w->mu);
}

static void on_release(raftlock_lock *l, int status, uint64_t value, void *arg)
{
	(void)l;
	(void)value;
	struct seen *w = arg;
	pthread_mutex_lock(&w->mu);
	if (w->n < 8)
		w->status[w->n++] = status;
	pthread_mutex_unlock(&w->mu);
}

/* An asynchronous release: without memory for its orphan's record it is
 * not sent (ENOMEM, no callback); sent and unanswered, it is given up
 * without memory (EUNKNOWN, still sent). */
static void test_release_async_without_memory(void **state)
{
	(void)state;
	struct node n;
	raftlock_lock *l;
	struct seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	node_up(&n, 300);
	assert_int_equal(raftlock_lock_new(n.s, "r", NULL, &l), 0);
	assert_int_equal(raftlock_lock_try(l, NULL), 0);
	fail_orphans(&n, true, 0, 1);
	assert_int_equal(raftlock_lock_release_async(l, on_release, &seen), RAFTLOCK_ENOMEM);
	assert_errmsg_enomem(n.c, "release 'r'");
	FAKE_SET(n.f, ignore_releases, true);
	fail_orphans(&n, false, 0, 1000);
	assert_int_equal(raftlock_lock_release_async(l, on_release, &seen), 0);
	await_only_event(&seen);
	assert_int_equal(seen.status[0], RAFTLOCK_EUNKNOWN);
	assert_int_equal(alloc_fail_count(), 0);
	assert_int_equal(fake_count(n.f, RELEASE), 1);
	assert_int_equal(raftlock_lock_try(l, NULL), RAFTLOCK_ESTATE);
	FAKE_SET(n.f, ignore_releases, false);
	assert_int_equal(raftlock_lock_try(l, NULL), 0);
	node_down(&n);
}

/* An event the library has no memory to queue ends the watch there, with
 * ERROR RAFTLOCK_ENOMEM, and the node is told: the events after it would
 * move the resume position past it. */
static void test_watch_event_without_memory_ends_the_watch(void **state)
{
	(void)state;
	struct node n;
	node_up(&n, 3000);
	FAKE_SET(n.f, watch_value, "oom"); /* the first of two HOLDING */
	alloc_fail_start(&(struct alloc_fail_rule){.text = "oom", .count = 1});
	struct seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	raftlock_watch_handle *w;
	assert_int_equal(raftlock_watch(n.c, "w/", NULL, on_watch, &seen, &w), 0);
	await_only_event(&seen);
	assert_int_equal(alloc_fail_count(), 1);
	assert_int_equal(seen.kind[0], RAFTLOCK_WATCH_ERROR);
	assert_int_equal(seen.status[0], RAFTLOCK_ENOMEM);
	await_count(n.f, WATCH_CANCEL, 1);
	raftlock_watch_cancel(w);
	node_down(&n);
}

/* An observer without memory to copy the leader's value ends with status
 * RAFTLOCK_ENOMEM (not the old value as the new leader's) and stops its
 * watch at once, before raftlock_observe_cancel(). */
static void test_observer_without_memory_ends_and_stops_its_watch(void **state)
{
	(void)state;
	struct node n;
	node_up(&n, 3000);
	FAKE_SET(n.f, watch_value, "oom"); /* w/a's value */
	/* the watch's copy goes through, the observer's fails */
	alloc_fail_start(&(struct alloc_fail_rule){.text = "oom", .skip = 1, .count = 1});
	struct seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	raftlock_observer *o;
	assert_int_equal(raftlock_observe(n.c, "w/a", on_leader, &seen, &o), 0);
	await_only_event(&seen);
	assert_int_equal(alloc_fail_count(), 1);
	assert_int_equal(seen.kind[0], RAFTLOCK_WATCH_ERROR); /* no leader */
	assert_int_equal(seen.status[0], RAFTLOCK_ENOMEM);
	await_count(n.f, WATCH_CANCEL, 1);
	raftlock_observe_cancel(o);
	node_down(&n);
}

/* A watch's request is framed again at each event, with the position a
 * reconnect resumes from: without memory for that frame, the watch ends
 * there (ERROR RAFTLOCK_ENOMEM), as without memory for the event. It
 * must not go on with its old frame: a reconnect would then ask for what
 * it already delivered, here its state again, with no HISTORY_LOST. */
static void test_watch_position_without_memory_ends_the_watch(void **state)
{
	(void)state;
	struct node n;
	node_up(&n, 3000);
	FAKE_SET(n.f, drop_first_acquire, true);
	/* the frames after the state's first HOLDING and after its CURRENT
	 * (realloc'd by 256 bytes on the I/O thread): the second fails */
	alloc_fail_start(&(struct alloc_fail_rule){.calls = ALLOC_FAIL_REALLOC,
						   .size = 256,
						   .one_thread = true,
						   .thread = n.c->t.io_thread,
						   .skip = 1,
						   .count = 1});
	struct seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	raftlock_watch_handle *w;
	assert_int_equal(raftlock_watch(n.c, "w/", NULL, on_watch, &seen, &w), 0);
	for (int i = 0; i < 500 && alloc_fail_count() == 0; i++)
		sleep_ms(10);
	assert_int_equal(alloc_fail_count(), 1);
	alloc_fail_stop();
	/* a reconnect: the fake drops the connection at this acquire */
	raftlock_lock *l;
	assert_int_equal(raftlock_lock_new(n.s, "r", NULL, &l), 0);
	assert_int_equal(raftlock_lock_try(l, NULL), 0);
	sleep_ms(300);
	raftlock_watch_cancel(w); /* seen is the test's alone from here */
	raftlock_lock_free(l);
	node_down(&n);
	bool current = false, lost = false;
	for (int i = 0; i < seen.n; i++) {
		enum raftlock_watch_kind k = seen.kind[i];
		if ((k == RAFTLOCK_WATCH_HOLDING || k == RAFTLOCK_WATCH_WAITING) && current &&
		    !lost)
			fail_msg(
				"event %d: the state again after its CURRENT, without HISTORY_LOST",
				i);
		current |= k == RAFTLOCK_WATCH_CURRENT;
		lost = k == RAFTLOCK_WATCH_HISTORY_LOST || (lost && k != RAFTLOCK_WATCH_CURRENT);
	}
	assert_true(seen.n > 0);
	assert_int_equal(seen.kind[seen.n - 1], RAFTLOCK_WATCH_ERROR);
	assert_int_equal(seen.status[seen.n - 1], RAFTLOCK_ENOMEM);
}

/* A watch whose request cannot be made (out of memory) says so in
 * raftlock_errmsg(), not the thread's earlier failure. */
static void test_watch_unsubmitted_sets_errmsg(void **state)
{
	(void)state;
	struct node n;
	node_up(&n, 3000);
	raftlock_watch_handle *w = NULL;
	assert_int_equal(raftlock_watch(n.c, NULL, NULL, on_watch, NULL, &w), RAFTLOCK_EINVAL);
	alloc_fail_start(&(struct alloc_fail_rule){.calls = ALLOC_FAIL_CALLOC,
						   .size = sizeof(struct request),
						   .one_thread = true,
						   .thread = n.caller,
						   .count = 1});
	assert_int_equal(raftlock_watch(n.c, "w/", NULL, on_watch, NULL, &w), RAFTLOCK_ENOMEM);
	assert_int_equal(alloc_fail_count(), 1);
	assert_errmsg_enomem(n.c, "watch 'w/'");
	assert_null(w);
	assert_int_equal(fake_count(n.f, RAFTLOCK__ENVELOPE__BODY_WATCH), 0);
	node_down(&n);
}

/* The rules themselves: calloc's n * size that overflows matches no
 * size; strndup matches the text it copies (n bytes at most); the rule
 * keeps its thread's id, not a pointer into the caller's frame. */
static void test_alloc_fail_rules(void **state)
{
	(void)state;
	volatile size_t huge = SIZE_MAX / 2 + 9; /* times 2: 16 once wrapped */
	alloc_fail_start(
		&(struct alloc_fail_rule){.calls = ALLOC_FAIL_CALLOC, .size = 16, .count = 1});
	assert_null(calloc(huge, 2)); /* refused, not by the rule */
	assert_int_equal(alloc_fail_count(), 0);

	alloc_fail_start(&(struct alloc_fail_rule){.text = "abc", .count = 2});
	char *copy = strndup("abcdef", 3);
	assert_null(copy);
	assert_non_null(copy = strndup("abcdef", 4));
	free(copy);
	assert_int_equal(alloc_fail_count(), 1);

	struct alloc_fail_rule rule = {.one_thread = true, .thread = pthread_self(), .count = 1};
	alloc_fail_start(&rule);
	memset(&rule, 0, sizeof rule); /* the caller's copy is gone */
	assert_null(malloc(8));
	assert_int_equal(alloc_fail_count(), 1);
	alloc_fail_stop();
}

/* A test that failed may have left its rule on. */
static int no_failures(void **state)
{
	(void)state;
	alloc_fail_stop();
	return 0;
}

#define OOM_TEST(t) cmocka_unit_test_setup(t, no_failures)

int main(void)
{
	const struct CMUnitTest tests[] = {
		OOM_TEST(test_proclaim_without_memory_sends_nothing),
		OOM_TEST(test_late_grant_released_once_memory_returns),
		OOM_TEST(test_refused_try_without_memory_to_release),
		OOM_TEST(test_refused_acquire_without_memory_to_release),
		OOM_TEST(test_set_revoked_without_memory_to_release_the_rest),
		OOM_TEST(test_multi_release_ranks_unsent_enomem_by_what_is_held),
		OOM_TEST(test_release_given_up_needs_no_memory),
		OOM_TEST(test_release_without_memory_sends_nothing),
		OOM_TEST(test_release_async_without_memory),
		OOM_TEST(test_close_without_memory),
		OOM_TEST(test_watch_event_without_memory_ends_the_watch),
		OOM_TEST(test_observer_without_memory_ends_and_stops_its_watch),
		OOM_TEST(test_watch_position_without_memory_ends_the_watch),
		OOM_TEST(test_watch_unsubmitted_sets_errmsg),
		OOM_TEST(test_alloc_fail_rules),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
