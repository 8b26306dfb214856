/* mutex: take an exclusive lock once (try-lock), use its fencing token,
 * release it. Usage: mutex [NAME] */
#include "example_common.h"

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "examples/mutex";
	raftlock_client *c = example_connect("example-mutex");
	raftlock_session *s = example_session(c, 10000);
	raftlock_lock *l;
	int rv = raftlock_lock_new(s, name, NULL, &l);
	if (rv != 0)
		example_die(c, "lock handle", rv);
	uint64_t token;
	rv = raftlock_lock_try(l, &token);
	if (rv == RAFTLOCK_EBUSY) {
		printf("%s is held by someone else\n", name);
	} else if (rv != 0) {
		example_die(c, "try-lock", rv);
	} else {
		/* Pass the token with every write to the protected resource; it
		 * refuses tokens lower than the highest it has seen. */
		printf("holding %s with fencing token %llu\n", name, (unsigned long long)token);
		rv = raftlock_lock_release(l, NULL);
		if (rv != 0)
			example_die(c, "release", rv);
	}
	raftlock_lock_free(l);
	raftlock_session_close(s);
	raftlock_client_close(c);
	return 0;
}
