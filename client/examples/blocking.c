/* blocking: wait in the server's FIFO queue for a lock, up to a timeout.
 * The grant is pushed by the server; nothing polls. Run two at once to see
 * one wait for the other. Usage: blocking [NAME] [TIMEOUT_MS] [HOLD_MS] */
#include <time.h>

#include "example_common.h"

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "examples/blocking";
	int timeout_ms = argc > 2 ? atoi(argv[2]) : 10000;
	int hold_ms = argc > 3 ? atoi(argv[3]) : 2000;
	raftlock_client *c = example_connect("example-blocking");
	raftlock_session *s = example_session(c, 10000);
	raftlock_lock *l;
	if (raftlock_lock_new(s, name, NULL, &l) != 0)
		example_die(c, "lock handle", 0);
	uint64_t token;
	int rv = raftlock_lock_acquire(l, RAFTLOCK_EXCLUSIVE, 1, timeout_ms, &token);
	if (rv == RAFTLOCK_ETIMEDOUT) {
		printf("gave up on %s after %d ms (and left the queue)\n", name, timeout_ms);
	} else if (rv != 0) {
		example_die(c, "acquire", rv);
	} else {
		printf("got %s, token %llu; holding %d ms\n", name, (unsigned long long)token,
		       hold_ms);
		struct timespec ts = {hold_ms / 1000, (long)(hold_ms % 1000) * 1000000};
		nanosleep(&ts, NULL);
		raftlock_lock_release(l, NULL);
	}
	raftlock_lock_free(l);
	raftlock_session_close(s);
	raftlock_client_close(c);
	return 0;
}
