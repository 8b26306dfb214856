/* semaphore: at most LIMIT holders of PERMITS permits each at a time.
 * Usage: semaphore [NAME] [LIMIT] [PERMITS] */
#include "example_common.h"

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "examples/semaphore";
	uint32_t limit = argc > 2 ? (uint32_t)atoi(argv[2]) : 4;
	uint32_t permits = argc > 3 ? (uint32_t)atoi(argv[3]) : 1;
	raftlock_client *c = example_connect("example-semaphore");
	raftlock_session *s = example_session(c, 10000);
	/* Every user of the semaphore must give the same limit: a different
	 * one is refused with RAFTLOCK_EKIND. */
	struct raftlock_lock_options o = {.kind = RAFTLOCK_SEMAPHORE, .limit = limit};
	raftlock_lock *l;
	if (raftlock_lock_new(s, name, &o, &l) != 0)
		example_die(c, "lock handle", 0);
	uint64_t token;
	int rv = raftlock_lock_acquire(l, RAFTLOCK_EXCLUSIVE, permits, 10000, &token);
	if (rv != 0)
		example_die(c, "acquire", rv);
	printf("holding %u of %u permits of %s, token %llu\n", permits, limit, name,
	       (unsigned long long)token);
	raftlock_lock_release(l, NULL);
	raftlock_lock_free(l);
	raftlock_session_close(s);
	raftlock_client_close(c);
	return 0;
}
