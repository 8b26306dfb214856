/* lockutil.c: see lockutil.h. */
#include "lockutil.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

raftlock_client *tl_client(struct tcluster *c)
{
	return tl_client_token(c, NULL, "integration-test");
}

raftlock_client *tl_client_token(struct tcluster *c, const char *token, const char *name)
{
	struct raftlock_client_options o = {0};
	o.addresses = c->addrs;
	o.n_addresses = (size_t)c->n;
	o.client_name = name;
	o.request_timeout_ms = 15000;
	o.auth_token = token;
	raftlock_client *cl = NULL;
	const char *err = NULL;
	int rv = raftlock_client_open(&o, &cl, &err);
	if (rv != 0)
		fail_msg("client_open: %s", err ? err : raftlock_strerror(rv));
	return cl;
}

int tl_write_tokens(const char *path, const char *const *pairs)
{
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return -1;
	fprintf(f, "# NAME SHA256HEX\n");
	for (size_t i = 0; pairs[i] != NULL && pairs[i + 1] != NULL; i += 2) {
		unsigned char d[EVP_MAX_MD_SIZE];
		unsigned n = 0;
		assert_int_equal(
			EVP_Digest(pairs[i + 1], strlen(pairs[i + 1]), d, &n, EVP_sha256(), NULL),
			1);
		fprintf(f, "%s ", pairs[i]);
		for (unsigned k = 0; k < n; k++)
			fprintf(f, "%02x", d[k]);
		fprintf(f, "\n");
	}
	return fclose(f) == 0 ? 0 : -1;
}

void tl_assert_errmsg_has(raftlock_client *c, const char *text)
{
	const char *m = raftlock_errmsg(c);
	if (strstr(m, text) == NULL)
		fail_msg("error message '%s' does not say '%s'", m, text);
}

raftlock_session *tl_session(raftlock_client *cl, unsigned ttl_ms)
{
	struct raftlock_session_options o = {.ttl_ms = ttl_ms};
	raftlock_session *s = NULL;
	int rv = raftlock_session_open(cl, &o, &s);
	if (rv != 0)
		fail_msg("session_open: %s", raftlock_errmsg(cl));
	return s;
}

raftlock_lock *tl_lock(raftlock_session *s, const char *name)
{
	raftlock_lock *l = NULL;
	assert_int_equal(raftlock_lock_new(s, name, NULL, &l), 0);
	return l;
}

uint64_t tl_take(raftlock_lock *l)
{
	uint64_t token = 0;
	int rv = raftlock_lock_try(l, &token);
	if (rv != 0)
		fail_msg("try-lock: %s", raftlock_strerror(rv));
	assert_true(token > 0);
	return token;
}

/* The answers tl_take_all() still waits for. */
struct take_all {
	pthread_mutex_t mu;
	pthread_cond_t done;
	size_t left;
	int failed; /* the first failing status */
};

static void take_all_cb(raftlock_lock *l, int status, uint64_t token, void *arg)
{
	(void)l;
	struct take_all *t = arg;
	pthread_mutex_lock(&t->mu);
	if (t->failed == 0 && (status != 0 || token == 0))
		t->failed = status != 0 ? status : RAFTLOCK_EINVAL;
	if (--t->left == 0)
		pthread_cond_signal(&t->done);
	pthread_mutex_unlock(&t->mu);
}

void tl_take_all(raftlock_lock **l, size_t n)
{
	struct take_all t = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, n, 0};
	int sent = 0;
	for (size_t i = 0; i < n; i++) {
		if ((sent = raftlock_lock_try_async(l[i], take_all_cb, &t)) != 0) {
			pthread_mutex_lock(&t.mu);
			t.left -= n - i; /* never sent: no callback */
			pthread_mutex_unlock(&t.mu);
			break;
		}
	}
	/* Every callback that was sent runs (the client's request timeout
	 * bounds each): t must outlive them. */
	pthread_mutex_lock(&t.mu);
	while (t.left > 0)
		pthread_cond_wait(&t.done, &t.mu);
	pthread_mutex_unlock(&t.mu);
	if (sent != 0)
		fail_msg("try-lock (async): %s", raftlock_strerror(sent));
	if (t.failed != 0)
		fail_msg("try-lock: %s", raftlock_strerror(t.failed));
}

void tl_sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

Raftlock__StatusInfo *tl_leader_status(struct tcluster *c)
{
	int l = tcluster_leader(c, 20000);
	assert_true(l >= 0);
	Raftlock__StatusInfo *st = tcluster_status(c, l);
	assert_non_null(st);
	return st;
}

void tl_pair_open(struct tl_pair *p, struct tcluster *cl, const char *name, unsigned ttl_ms)
{
	p->c = tl_client(cl);
	p->a = tl_session(p->c, ttl_ms);
	p->b = tl_session(p->c, ttl_ms);
	p->la = tl_lock(p->a, name);
	p->lb = tl_lock(p->b, name);
}

void tl_pair_close(struct tl_pair *p)
{
	raftlock_lock_free(p->la);
	raftlock_lock_free(p->lb);
	raftlock_session_close(p->a);
	raftlock_session_close(p->b);
	raftlock_client_close(p->c);
}

pid_t tl_fork_holder(struct tcluster *c, const char *name, unsigned ttl_ms,
		     const struct raftlock_lock_options *opts, uint64_t *token)
{
	struct raftlock_session_options so = {.ttl_ms = ttl_ms};
	return tl_fork_holder_with(c, name, &so, opts, token);
}

pid_t tl_fork_holder_with(struct tcluster *c, const char *name,
			  const struct raftlock_session_options *so,
			  const struct raftlock_lock_options *opts, uint64_t *token)
{
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		raftlock_client *cl = tl_client(c);
		raftlock_session *s = NULL;
		if (raftlock_session_open(cl, so, &s) != 0)
			_exit(1);
		raftlock_lock *l = NULL;
		if (raftlock_lock_new(s, name, opts, &l) != 0)
			_exit(1);
		uint64_t t = tl_take(l);
		if (write(fds[1], &t, sizeof t) != sizeof t)
			_exit(1);
		for (;;)
			pause();
	}
	assert_int_equal(read(fds[0], token, sizeof *token), (ssize_t)sizeof *token);
	close(fds[0]);
	close(fds[1]);
	return child;
}

uint64_t tl_lease_left(raftlock_client *c, const char *name, uint64_t *deadline)
{
	struct raftlock_lock_info *li = NULL;
	struct raftlock_session_list *sl = NULL;
	assert_int_equal(raftlock_lock_get(c, name, false, &li), 0);
	assert_int_equal(li->n_holders, 1);
	uint64_t id = li->holders[0].session;
	raftlock_lock_info_free(li);
	assert_int_equal(raftlock_session_list(c, id - 1, 1, false, &sl), 0);
	assert_int_equal(sl->n_sessions, 1);
	assert_int_equal(sl->sessions[0].id, id);
	*deadline = sl->sessions[0].deadline;
	uint64_t left = sl->sessions[0].deadline > sl->cluster_time
				? sl->sessions[0].deadline - sl->cluster_time
				: 0;
	raftlock_session_list_free(sl);
	return left;
}

uint64_t tl_granted_time(raftlock_client *c, const char *name)
{
	struct raftlock_lock_info *li = NULL;
	assert_int_equal(raftlock_lock_get(c, name, false, &li), 0);
	assert_int_equal(li->n_holders, 1);
	uint64_t t = li->holders[0].granted_time;
	raftlock_lock_info_free(li);
	return t;
}

void tl_await_waiters(raftlock_client *c, const char *name, size_t n)
{
	uint64_t end = tcluster_now_ms() + 10000;
	while (tcluster_now_ms() < end) {
		struct raftlock_lock_info *info = NULL;
		if (raftlock_lock_get(c, name, false, &info) == 0) {
			size_t have = info->n_waiters;
			raftlock_lock_info_free(info);
			if (have == n)
				return;
		}
		tl_sleep_ms(10);
	}
	fail_msg("'%s' never had %zu waiters", name, n);
}
