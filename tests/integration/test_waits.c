/* The full lock vocabulary on a real 3-node cluster through libraftlock:
 * blocking waits with pushed grants (FIFO, across a leader kill, timeouts),
 * read-write locks, semaphores under contention, lock-delay, the
 * hand-over latency of a blocked waiter, and timeouts racing grants. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"
#include "lockutil.h"

#define ELECTION_MS 1000

static struct tcluster cl;

/* A thread that blocks in raftlock_lock_acquire and records the outcome. */
struct waiter {
	pthread_t thread;
	raftlock_lock *lock;
	enum raftlock_mode mode;
	int timeout_ms;
	int rv;
	uint64_t token;
	uint64_t done_at;
	int order;
};

static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static int order_next;

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	w->rv = raftlock_lock_acquire(w->lock, w->mode, 1, w->timeout_ms, &w->token);
	w->done_at = tcluster_now_ms();
	pthread_mutex_lock(&order_mu);
	w->order = order_next++;
	pthread_mutex_unlock(&order_mu);
	return NULL;
}

static void waiter_start(struct waiter *w, raftlock_lock *lock, enum raftlock_mode mode,
			 int timeout_ms)
{
	memset(w, 0, sizeof *w);
	w->lock = lock;
	w->mode = mode;
	w->timeout_ms = timeout_ms;
	w->rv = 1;
	assert_int_equal(pthread_create(&w->thread, NULL, waiter_main, w), 0);
}

static void fifo_grants_are_pushed(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	raftlock_session *s[3];
	raftlock_lock *l[3];
	for (int i = 0; i < 3; i++) {
		s[i] = tl_session(c, 10000);
		l[i] = tl_lock(s[i], "fifo");
	}
	uint64_t t0 = tl_take(l[0]);
	struct waiter w1, w2;
	waiter_start(&w1, l[1], RAFTLOCK_EXCLUSIVE, 20000);
	tl_await_waiters(c, "fifo", 1);
	waiter_start(&w2, l[2], RAFTLOCK_EXCLUSIVE, 20000);
	tl_await_waiters(c, "fifo", 2);
	assert_int_equal(raftlock_lock_release(l[0], NULL), 0);
	pthread_join(w1.thread, NULL);
	assert_int_equal(w1.rv, 0);
	assert_true(w1.token > t0);
	tl_sleep_ms(200);
	assert_int_equal(w2.rv, 1); /* still waiting: FIFO */
	assert_int_equal(raftlock_lock_release(l[1], NULL), 0);
	pthread_join(w2.thread, NULL);
	assert_int_equal(w2.rv, 0);
	assert_true(w2.token > w1.token);
	assert_int_equal(raftlock_lock_release(l[2], NULL), 0);
	for (int i = 0; i < 3; i++) {
		raftlock_lock_free(l[i]);
		raftlock_session_close(s[i]);
	}
	raftlock_client_close(c);
}

static void timeout_leaves_no_waiter(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "timeout", 10000);
	raftlock_client *c = p.c;
	raftlock_lock *la = p.la, *lb = p.lb;
	tl_take(la);
	uint64_t start = tcluster_now_ms(), tok = 0;
	assert_int_equal(raftlock_lock_acquire(lb, RAFTLOCK_EXCLUSIVE, 1, 500, &tok),
			 RAFTLOCK_ETIMEDOUT);
	uint64_t took = tcluster_now_ms() - start;
	assert_true(took >= 450 && took < 5000);
	struct raftlock_lock_info *info = NULL;
	assert_int_equal(raftlock_lock_get(c, "timeout", false, &info), 0);
	assert_int_equal(info->n_waiters, 0);
	assert_int_equal(info->n_holders, 1);
	raftlock_lock_info_free(info);
	/* Not queued: a release by the holder frees the lock for a try. */
	assert_int_equal(raftlock_lock_release(la, NULL), 0);
	tl_take(lb);
	assert_int_equal(raftlock_lock_release(lb, NULL), 0);
	tl_pair_close(&p);
}

/* A waiter keeps its place and gets its grant across a leader kill. */
static void waiter_survives_leader_kill(void **state)
{
	(void)state;
	struct tl_pair p;
	tl_pair_open(&p, &cl, "kill-wait", 10000);
	raftlock_client *c = p.c;
	raftlock_lock *la = p.la, *lb = p.lb;
	uint64_t t0 = tl_take(la);
	struct waiter w;
	waiter_start(&w, lb, RAFTLOCK_EXCLUSIVE, 30000);
	tl_await_waiters(c, "kill-wait", 1);
	int leader = tcluster_leader(&cl, 5000);
	tcluster_signal(&cl, leader, SIGKILL);
	assert_true(tcluster_leader(&cl, 15000) >= 0);
	tl_await_waiters(c, "kill-wait", 1);
	assert_int_equal(raftlock_lock_release(la, NULL), 0);
	pthread_join(w.thread, NULL);
	assert_int_equal(w.rv, 0);
	assert_true(w.token > t0);
	assert_int_equal(raftlock_lock_release(lb, NULL), 0);
	tl_pair_close(&p);
	tcluster_restart(&cl, leader);
	assert_true(tcluster_leader(&cl, 15000) >= 0);
}

static void rwlock_readers_share_writer_waits(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	struct raftlock_lock_options rw = {.kind = RAFTLOCK_RWLOCK};
	raftlock_session *s[4];
	raftlock_lock *l[4];
	for (int i = 0; i < 4; i++) {
		s[i] = tl_session(c, 10000);
		assert_int_equal(raftlock_lock_new(s[i], "rw", &rw, &l[i]), 0);
	}
	uint64_t r0 = 0, r1 = 0, tok = 0;
	assert_int_equal(raftlock_lock_acquire(l[0], RAFTLOCK_SHARED, 1, 0, &r0), 0);
	assert_int_equal(raftlock_lock_acquire(l[1], RAFTLOCK_SHARED, 1, 0, &r1), 0);
	assert_true(r1 > r0);
	/* A writer queues; a later reader queues behind it (no starvation). */
	struct waiter writer, reader;
	waiter_start(&writer, l[2], RAFTLOCK_EXCLUSIVE, 20000);
	tl_await_waiters(c, "rw", 1);
	assert_int_equal(raftlock_lock_acquire(l[3], RAFTLOCK_SHARED, 1, 0, &tok), RAFTLOCK_EBUSY);
	waiter_start(&reader, l[3], RAFTLOCK_SHARED, 20000);
	tl_await_waiters(c, "rw", 2);
	assert_int_equal(raftlock_lock_release(l[0], NULL), 0);
	assert_int_equal(raftlock_lock_release(l[1], NULL), 0);
	pthread_join(writer.thread, NULL);
	assert_int_equal(writer.rv, 0);
	assert_int_equal(reader.rv, 1);
	assert_int_equal(raftlock_lock_release(l[2], NULL), 0);
	pthread_join(reader.thread, NULL);
	assert_int_equal(reader.rv, 0);
	assert_true(reader.token > writer.token);
	assert_int_equal(raftlock_lock_release(l[3], NULL), 0);
	for (int i = 0; i < 4; i++) {
		raftlock_lock_free(l[i]);
		raftlock_session_close(s[i]);
	}
	raftlock_client_close(c);
}

/* Semaphore of 2 with 10 competing clients: never 3 holders, judged from
 * the holders' own records of their tokens and times. */
#define SEM_CLIENTS 10
#define SEM_SECONDS 30

struct interval {
	uint64_t start, end, token;
};

struct sem_worker {
	pthread_t thread;
	raftlock_client *client;
	uint64_t stop_at;
	struct interval *iv;
	size_t n, cap;
	int errors;
};

static void *sem_main(void *arg)
{
	struct sem_worker *w = arg;
	struct raftlock_lock_options sem = {.kind = RAFTLOCK_SEMAPHORE, .limit = 2};
	raftlock_session *s = tl_session(w->client, 10000);
	raftlock_lock *l = NULL;
	assert_int_equal(raftlock_lock_new(s, "sem", &sem, &l), 0);
	unsigned seed = (unsigned)(uintptr_t)w;
	while (tcluster_now_ms() < w->stop_at && w->n < w->cap) {
		uint64_t tok = 0;
		int rv = raftlock_lock_acquire(l, RAFTLOCK_EXCLUSIVE, 1, 2000, &tok);
		if (rv == RAFTLOCK_ETIMEDOUT)
			continue;
		if (rv != 0) {
			w->errors++;
			continue;
		}
		struct interval *iv = &w->iv[w->n++];
		iv->start = tcluster_now_ms();
		iv->token = tok;
		tl_sleep_ms(rand_r(&seed) % 20);
		iv->end = tcluster_now_ms();
		if (raftlock_lock_release(l, NULL) != 0)
			w->errors++;
	}
	raftlock_lock_free(l);
	raftlock_session_close(s);
	return NULL;
}

static void semaphore_never_over_limit(void **state)
{
	(void)state;
	struct sem_worker w[SEM_CLIENTS];
	uint64_t stop = tcluster_now_ms() + SEM_SECONDS * 1000;
	for (int i = 0; i < SEM_CLIENTS; i++) {
		memset(&w[i], 0, sizeof w[i]);
		w[i].client = tl_client(&cl);
		w[i].stop_at = stop;
		w[i].cap = 100000;
		w[i].iv = calloc(w[i].cap, sizeof *w[i].iv);
		assert_int_equal(pthread_create(&w[i].thread, NULL, sem_main, &w[i]), 0);
	}
	size_t total = 0;
	for (int i = 0; i < SEM_CLIENTS; i++) {
		pthread_join(w[i].thread, NULL);
		assert_int_equal(w[i].errors, 0);
		total += w[i].n;
	}
	/* Sweep: +1 at each start, -1 at each end; ends sort first at ties
	 * (a holder's record ends before its release is even sent). */
	struct event {
		uint64_t t;
		int d;
	} *ev = calloc(2 * total, sizeof *ev);
	size_t k = 0;
	uint64_t *tokens = calloc(total, sizeof *tokens);
	for (int i = 0; i < SEM_CLIENTS; i++)
		for (size_t j = 0; j < w[i].n; j++) {
			ev[k++] = (struct event){w[i].iv[j].start, +1};
			ev[k++] = (struct event){w[i].iv[j].end, -1};
		}
	for (size_t a = 1; a < k; a++) { /* insertion sort is fine at this size */
		struct event e = ev[a];
		size_t b = a;
		while (b > 0 && (ev[b - 1].t > e.t || (ev[b - 1].t == e.t && ev[b - 1].d > e.d))) {
			ev[b] = ev[b - 1];
			b--;
		}
		ev[b] = e;
	}
	int cur = 0, peak = 0;
	for (size_t a = 0; a < k; a++) {
		cur += ev[a].d;
		if (cur > peak)
			peak = cur;
	}
	/* Tokens are unique. */
	size_t nt = 0;
	for (int i = 0; i < SEM_CLIENTS; i++)
		for (size_t j = 0; j < w[i].n; j++)
			tokens[nt++] = w[i].iv[j].token;
	for (size_t a = 0; a < nt; a++)
		for (size_t b = a + 1; b < nt; b++)
			assert_true(tokens[a] != tokens[b]);
	printf("measure: semaphore(2), %d clients, %d s: %zu grants, peak holders %d\n",
	       SEM_CLIENTS, SEM_SECONDS, total, peak);
	assert_true(total > 100);
	assert_true(peak <= 2);
	assert_true(peak == 2); /* the test would not catch a third otherwise */
	for (int i = 0; i < SEM_CLIENTS; i++) {
		free(w[i].iv);
		raftlock_client_close(w[i].client);
	}
	free(ev);
	free(tokens);
}

/* Lock-delay: a holder whose session expires keeps the lock unavailable for
 * the delay; a clean release frees it at once. */
static void lock_delay(bool kill_leader)
{
	/* Across a leader change the delay outlasts the failover (1.2-3.1
	 * election timeouts), or a delay the new leader forgot would not show;
	 * without one, 1 s is five times the margin below. */
	const unsigned ttl = 2000, delay = kill_leader ? 3000 : 1000;
	struct raftlock_lock_options o = {.kind = RAFTLOCK_MUTEX, .lock_delay_ms = delay};
	uint64_t t1 = 0;
	pid_t child = tl_fork_holder(&cl, "delayed", ttl, &o, &t1);
	raftlock_client *c = tl_client(&cl);
	/* The delay runs from the end of the holder's lease: its deadline
	 * once it renews no more. */
	kill(child, SIGSTOP);
	tl_sleep_ms(50); /* a keepalive on its way has landed */
	uint64_t deadline = 0;
	tl_lease_left(c, "delayed", &deadline);
	kill(child, SIGKILL); /* the holder dies without releasing */
	waitpid(child, NULL, 0);
	uint64_t died = tcluster_now_ms();
	raftlock_session *b = tl_session(c, 10000);
	raftlock_lock *lb = tl_lock(b, "delayed");
	int killed = -1;
	if (kill_leader) {
		/* Once the delay runs (the holder's session expired), a leader
		 * change must neither shorten nor forget it. */
		struct raftlock_lock_info *info = NULL;
		uint64_t end = tcluster_now_ms() + 10000;
		while (tcluster_now_ms() < end) {
			if (raftlock_lock_get(c, "delayed", false, &info) == 0) {
				bool running = info->n_holders == 0 && info->delay_until != 0;
				raftlock_lock_info_free(info);
				if (running)
					break;
			}
			tl_sleep_ms(20);
		}
		killed = tcluster_leader(&cl, 5000);
		tcluster_signal(&cl, killed, SIGKILL);
	}
	uint64_t t2 = 0;
	assert_int_equal(raftlock_lock_acquire(lb, RAFTLOCK_EXCLUSIVE, 1, 20000, &t2), 0);
	uint64_t took = tcluster_now_ms() - died;
	uint64_t granted = tl_granted_time(c, "delayed");
	printf("measure: holder killed, TTL %u + lock-delay %u ms%s -> next grant after %llu ms, "
	       "%lld ms of cluster time after the lease's end and the delay\n",
	       ttl, delay, kill_leader ? ", leader killed during the delay" : "",
	       (unsigned long long)took, (long long)(granted - deadline - delay));
	/* In cluster time: the lease began before the kill, by as long as
	 * the holder took to take the lock and say so (on a loaded machine
	 * more than the slack a wall-clock bound from the kill allowed). */
	assert_true(granted >= deadline + delay);
	assert_true(t2 > t1);
	/* A clean release starts no delay. */
	assert_int_equal(raftlock_lock_release(lb, NULL), 0);
	raftlock_session *d = tl_session(c, 10000);
	raftlock_lock *ld = tl_lock(d, "delayed");
	tl_take(ld);
	assert_int_equal(raftlock_lock_release(ld, NULL), 0);
	raftlock_lock_free(lb);
	raftlock_lock_free(ld);
	raftlock_session_close(b);
	raftlock_session_close(d);
	raftlock_client_close(c);
	if (killed >= 0) {
		tcluster_restart(&cl, killed);
		assert_true(tcluster_leader(&cl, 15000) >= 0);
	}
}

static void lock_delay_after_expiry(void **state)
{
	(void)state;
	lock_delay(false);
}

static void lock_delay_survives_leader_change(void **state)
{
	(void)state;
	lock_delay(true);
}

/* Hand-over latency: two threads pass one lock back and forth; each waits
 * in a blocking acquire while the other holds it. */
#define HANDOVERS 1000

struct pingpong {
	pthread_t thread;
	raftlock_lock *lock;
	int count;
	uint64_t *released_at; /* shared: when the other side sent its release */
	uint64_t *lat;
	size_t n;
	pthread_mutex_t *mu;
	int errors;
};

static void *pingpong_main(void *arg)
{
	struct pingpong *p = arg;
	for (int i = 0; i < p->count; i++) {
		uint64_t tok = 0;
		if (raftlock_lock_acquire(p->lock, RAFTLOCK_EXCLUSIVE, 1, 10000, &tok) != 0) {
			p->errors++;
			continue;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t now_us = (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
		pthread_mutex_lock(p->mu);
		if (*p->released_at != 0)
			p->lat[p->n++] = now_us - *p->released_at;
		pthread_mutex_unlock(p->mu);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		pthread_mutex_lock(p->mu);
		*p->released_at = (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
		pthread_mutex_unlock(p->mu);
		if (raftlock_lock_release(p->lock, NULL) != 0)
			p->errors++;
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void handover_latency(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	uint64_t released_at = 0;
	struct pingpong p[2];
	raftlock_session *s[2];
	for (int i = 0; i < 2; i++) {
		s[i] = tl_session(c, 10000);
		memset(&p[i], 0, sizeof p[i]);
		p[i].lock = tl_lock(s[i], "pingpong");
		p[i].count = HANDOVERS / 2 + 1;
		p[i].released_at = &released_at;
		p[i].lat = calloc(HANDOVERS + 2, sizeof(uint64_t));
		p[i].mu = &mu;
	}
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&p[i].thread, NULL, pingpong_main, &p[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(p[i].thread, NULL);
	uint64_t *all = calloc(2 * (HANDOVERS + 2), sizeof *all);
	size_t n = 0;
	for (int i = 0; i < 2; i++) {
		assert_int_equal(p[i].errors, 0);
		memcpy(all + n, p[i].lat, p[i].n * sizeof *all);
		n += p[i].n;
	}
	qsort(all, n, sizeof *all, cmp_u64);
	assert_true(n >= HANDOVERS);
	printf("measure: blocked waiter grant latency after release over %zu hand-overs: "
	       "p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
	       n, (double)all[n / 2] / 1000, (double)all[n * 99 / 100] / 1000,
	       (double)all[n - 1] / 1000);
	free(all);
	for (int i = 0; i < 2; i++) {
		free(p[i].lat);
		raftlock_lock_free(p[i].lock);
		raftlock_session_close(s[i]);
	}
	raftlock_client_close(c);
}

/* Blocking acquires whose timeouts (1-4 ms) race their grants, from
 * threads that share one client (one connection, one I/O thread): each
 * ends granted, timed out or unknown, never two holders at once, and the
 * client frees each request once, whichever of the grant's wake-up and the
 * caller's timeout comes first (the sanitizer build checks the memory). */
#define RACE_THREADS 6
#define RACE_MS 3000

struct racer {
	pthread_t thread;
	raftlock_lock *lock;
	int *holders; /* shared, under mu */
	pthread_mutex_t *mu;
	uint64_t stop_at;
	unsigned granted, timed_out, unknown, errors, overlaps;
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	unsigned seed = (unsigned)(uintptr_t)r;
	while (tcluster_now_ms() < r->stop_at) {
		uint64_t tok = 0;
		int rv = raftlock_lock_acquire(r->lock, RAFTLOCK_EXCLUSIVE, 1,
					       1 + (int)(rand_r(&seed) % 4), &tok);
		if (rv == RAFTLOCK_ETIMEDOUT) {
			r->timed_out++;
			continue;
		}
		if (rv == RAFTLOCK_EUNKNOWN) {
			r->unknown++; /* its session releases a late grant */
			continue;
		}
		if (rv != 0 || tok == 0) {
			r->errors++;
			continue;
		}
		r->granted++;
		pthread_mutex_lock(r->mu);
		if (++*r->holders > 1)
			r->overlaps++;
		pthread_mutex_unlock(r->mu);
		tl_sleep_ms(rand_r(&seed) % 2);
		pthread_mutex_lock(r->mu);
		--*r->holders; /* before the release is sent */
		pthread_mutex_unlock(r->mu);
		if (raftlock_lock_release(r->lock, NULL) != 0)
			r->errors++;
	}
	return NULL;
}

static void timeouts_racing_grants(void **state)
{
	(void)state;
	raftlock_client *c = tl_client(&cl);
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	int holders = 0;
	struct racer r[RACE_THREADS];
	raftlock_session *s[RACE_THREADS];
	uint64_t stop = tcluster_now_ms() + RACE_MS;
	for (int i = 0; i < RACE_THREADS; i++) {
		memset(&r[i], 0, sizeof r[i]);
		s[i] = tl_session(c, 10000);
		r[i].lock = tl_lock(s[i], "race");
		r[i].holders = &holders;
		r[i].mu = &mu;
		r[i].stop_at = stop;
	}
	for (int i = 0; i < RACE_THREADS; i++)
		assert_int_equal(pthread_create(&r[i].thread, NULL, racer_main, &r[i]), 0);
	unsigned granted = 0, timed_out = 0, unknown = 0;
	for (int i = 0; i < RACE_THREADS; i++)
		pthread_join(r[i].thread, NULL);
	for (int i = 0; i < RACE_THREADS; i++) { /* every thread is done with mu */
		assert_int_equal(r[i].errors, 0);
		assert_int_equal(r[i].overlaps, 0);
		granted += r[i].granted;
		timed_out += r[i].timed_out;
		unknown += r[i].unknown;
	}
	printf("measure: %d threads, timeouts of 1-4 ms, %d ms: %u granted, %u timed out, "
	       "%u unknown\n",
	       RACE_THREADS, RACE_MS, granted, timed_out, unknown);
	assert_true(granted > 0);
	assert_true(timed_out > 0); /* the timeouts did race */
	for (int i = 0; i < RACE_THREADS; i++) {
		raftlock_lock_free(r[i].lock);
		raftlock_session_close(s[i]);
	}
	raftlock_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fifo_grants_are_pushed),
		cmocka_unit_test(timeout_leaves_no_waiter),
		cmocka_unit_test(waiter_survives_leader_kill),
		cmocka_unit_test(rwlock_readers_share_writer_waits),
		cmocka_unit_test(semaphore_never_over_limit),
		cmocka_unit_test(lock_delay_after_expiry),
		cmocka_unit_test(lock_delay_survives_leader_change),
		cmocka_unit_test(handover_latency),
		cmocka_unit_test(timeouts_racing_grants),
	};
	if (getenv("RAFTLOCK_TEST_FILTER") != NULL) /* e.g. "leader_*" */
		cmocka_set_test_filter(getenv("RAFTLOCK_TEST_FILTER"));
	return tcluster_run_group(tests, &cl, 3, ELECTION_MS);
}
