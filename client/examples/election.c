/* election: campaigns for NAME with VALUE, leads for a moment (publishing
 * a second value), then resigns, while an observer prints every change of
 * (leader, value, token) it sees. Usage: election NAME VALUE */
#include <inttypes.h>
#include <pthread.h>

#include "example_common.h"

struct changes {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	unsigned n;
	bool led_then_none; /* the last change: nobody leads, after a leader */
	bool saw_leader;
};

/* Runs on the client's I/O thread: keep it short, never block in it. */
static void observed(const struct raftlock_leader_event *ev, void *arg)
{
	struct changes *c = arg;
	if (ev->has_leader)
		printf("leader: session %" PRIu64 ", token %" PRIu64 ", value '%s'\n", ev->session,
		       ev->token, ev->value);
	else
		printf("no leader\n");
	fflush(stdout);
	pthread_mutex_lock(&c->mu);
	c->n++;
	c->saw_leader |= ev->has_leader;
	c->led_then_none = c->saw_leader && !ev->has_leader;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->mu);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: election NAME VALUE\n");
		return 2;
	}
	raftlock_client *c = example_connect("example-election");
	struct changes seen = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false,
			       false};
	raftlock_observer *obs;
	int rv = raftlock_observe(c, argv[1], observed, &seen, &obs);
	if (rv != 0)
		example_die(c, "observe", rv);

	raftlock_session *s = example_session(c, 10000);
	raftlock_leader *leader;
	if ((rv = raftlock_campaign(s, argv[1], argv[2], 30000, &leader)) != 0)
		example_die(c, "campaign", rv);
	printf("elected with token %" PRIu64 "\n", raftlock_leader_token(leader));
	char v[256];
	snprintf(v, sizeof v, "%s (busy)", argv[2]);
	if ((rv = raftlock_proclaim(leader, v)) != 0)
		example_die(c, "proclaim", rv);
	if ((rv = raftlock_resign(leader)) != 0)
		example_die(c, "resign", rv);

	/* The observer sees the resignation too: wait for it. */
	pthread_mutex_lock(&seen.mu);
	while (!seen.led_then_none)
		pthread_cond_wait(&seen.cond, &seen.mu);
	pthread_mutex_unlock(&seen.mu);
	raftlock_observe_cancel(obs);
	printf("resigned; the observer saw %u changes\n", seen.n);
	raftlock_session_close(s);
	raftlock_client_close(c);
	return 0;
}
