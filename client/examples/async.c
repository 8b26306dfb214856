/* async: one thread takes and releases N locks at once, with the
 * asynchronous calls: each callback starts the next step, and the main
 * thread only waits for all of them. With "queue", the N handles wait for
 * ONE lock (PREFIX itself) with raftlock_lock_acquire_async(): the waits
 * sit in the server's FIFO queue, each grant is pushed, and each holder's
 * callback releases it for the next; no thread waits per handle.
 * Usage: async PREFIX [N] [queue] */
#include <pthread.h>
#include <stdbool.h>

#include "example_common.h"

struct job {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	unsigned left; /* locks not yet taken and released */
	unsigned failed;
	uint64_t max_token;
	bool queue; /* one lock: each grant's token must exceed the last */
};

static void finish(struct job *j, int rv)
{
	pthread_mutex_lock(&j->mu);
	j->failed += rv != 0;
	if (--j->left == 0)
		pthread_cond_signal(&j->cond);
	pthread_mutex_unlock(&j->mu);
}

/* Runs on the client's I/O thread: keep it short, never block in it. */
static void released(raftlock_lock *lock, int status, uint64_t remaining, void *arg)
{
	(void)lock;
	(void)remaining;
	finish(arg, status);
}

static void acquired(raftlock_lock *lock, int status, uint64_t token, void *arg)
{
	struct job *j = arg;
	if (status != 0) {
		finish(j, status);
		return;
	}
	pthread_mutex_lock(&j->mu);
	if (j->queue && token <= j->max_token)
		j->failed++; /* a fencing token that did not grow */
	if (token > j->max_token)
		j->max_token = token;
	pthread_mutex_unlock(&j->mu);
	/* the next step is sent from the callback itself */
	int rv = raftlock_lock_release_async(lock, released, j);
	if (rv != 0)
		finish(j, rv);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: async PREFIX [N] [queue]\n");
		return 2;
	}
	unsigned n = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 100;
	if (n == 0 || n > 10000) {
		fprintf(stderr, "async: N must be 1..10000\n");
		return 2;
	}
	raftlock_client *c = example_connect("example-async");
	raftlock_session *s = example_session(c, 10000);
	raftlock_lock **locks = calloc(n, sizeof *locks);
	struct job j = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, n, 0, 0, false};
	j.queue = argc > 3 && strcmp(argv[3], "queue") == 0;
	if (locks == NULL)
		return 1;
	for (unsigned i = 0; i < n; i++) {
		char name[256];
		if (j.queue)
			snprintf(name, sizeof name, "%s", argv[1]);
		else
			snprintf(name, sizeof name, "%s%u", argv[1], i);
		int rv = raftlock_lock_new(s, name, NULL, &locks[i]);
		if (rv != 0)
			example_die(c, "lock handle", rv);
	}
	for (unsigned i = 0; i < n; i++) {
		int rv = j.queue ? raftlock_lock_acquire_async(locks[i], RAFTLOCK_EXCLUSIVE, 1,
							       10000, acquired, &j)
				 : raftlock_lock_try_async(locks[i], acquired, &j);
		if (rv != 0)
			finish(&j, rv); /* no callback comes for this one */
	}
	pthread_mutex_lock(&j.mu);
	while (j.left > 0)
		pthread_cond_wait(&j.cond, &j.mu);
	pthread_mutex_unlock(&j.mu);
	printf("%u locks taken and released from one thread%s, %u failed; highest token %llu\n",
	       n - j.failed, j.queue ? " in turn" : "", j.failed, (unsigned long long)j.max_token);
	for (unsigned i = 0; i < n; i++)
		raftlock_lock_free(locks[i]);
	free(locks);
	raftlock_session_close(s);
	raftlock_client_close(c);
	return j.failed ? 1 : 0;
}
