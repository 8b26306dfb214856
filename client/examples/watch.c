/* watch: prints the changes of the locks under PREFIX as the cluster makes
 * them, with their log positions. With a count, it also takes and releases
 * PREFIX"demo" that many times itself and exits once it has seen every
 * change that made; without, it runs until killed. A restart can resume
 * from the last position printed: watch PREFIX 0 POSITION.
 * Usage: watch PREFIX [COUNT [POSITION]] */
#include <inttypes.h>
#include <pthread.h>
#include <unistd.h>

#include "example_common.h"

struct seen {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	unsigned changes;
};

/* Runs on the client's I/O thread: keep it short, never block in it. */
static void print(const struct raftlock_watch_event *ev, void *arg)
{
	struct seen *s = arg;
	printf("%" PRIu64 ".%" PRIu32 "@%016" PRIx64 " %s %s token %" PRIu64 "\n",
	       ev->position.index, ev->position.offset, ev->position.cluster_id,
	       raftlock_watch_kind_name(ev->kind), ev->name, ev->token);
	fflush(stdout);
	pthread_mutex_lock(&s->mu);
	if (ev->kind <= RAFTLOCK_WATCH_REVOKED)
		s->changes++;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->mu);
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: watch PREFIX [COUNT [POSITION]]\n");
		return 2;
	}
	unsigned count = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 0;
	struct raftlock_position from, *fromp = NULL;
	if (argc > 3) {
		if (raftlock_position_parse(argv[3], &from) != 0) {
			fprintf(stderr, "watch: '%s' is not a position (INDEX.OFFSET@CLUSTER)\n",
				argv[3]);
			return 2;
		}
		fromp = &from;
	}
	raftlock_client *c = example_connect("example-watch");
	struct seen s = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
	raftlock_watch_handle *w;
	int rv = raftlock_watch(c, argv[1], fromp, print, &s, &w);
	if (rv != 0)
		example_die(c, "watch", rv);
	if (count == 0) {
		for (;;)
			pause();
	}
	char name[256];
	snprintf(name, sizeof name, "%sdemo", argv[1]);
	raftlock_session *sess = example_session(c, 10000);
	raftlock_lock *l;
	if ((rv = raftlock_lock_new(sess, name, NULL, &l)) != 0)
		example_die(c, "lock_new", rv);
	for (unsigned i = 0; i < count; i++) {
		uint64_t token;
		if ((rv = raftlock_lock_acquire(l, RAFTLOCK_EXCLUSIVE, 1, 5000, &token)) != 0)
			example_die(c, "acquire", rv);
		if ((rv = raftlock_lock_release(l, NULL)) != 0)
			example_die(c, "release", rv);
	}
	/* Each take and release is a change: wait until all have come. */
	pthread_mutex_lock(&s.mu);
	while (s.changes < 2 * count)
		pthread_cond_wait(&s.cond, &s.mu);
	pthread_mutex_unlock(&s.mu);
	raftlock_watch_cancel(w);
	printf("saw %u changes\n", s.changes);
	raftlock_lock_free(l);
	raftlock_session_close(sess);
	raftlock_client_close(c);
	return 0;
}
