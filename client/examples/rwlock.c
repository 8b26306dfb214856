/* rwlock: many readers share a read-write lock; a writer waits for them and
 * blocks readers that come after it. Usage: rwlock read|write [NAME] */
#include "example_common.h"

int main(int argc, char **argv)
{
	int write_mode = argc > 1 && strcmp(argv[1], "write") == 0;
	const char *name = argc > 2 ? argv[2] : "examples/rwlock";
	raftlock_client *c = example_connect("example-rwlock");
	raftlock_session *s = example_session(c, 10000);
	struct raftlock_lock_options o = {.kind = RAFTLOCK_RWLOCK};
	raftlock_lock *l;
	if (raftlock_lock_new(s, name, &o, &l) != 0)
		example_die(c, "lock handle", 0);
	uint64_t token;
	int rv = raftlock_lock_acquire(l, write_mode ? RAFTLOCK_EXCLUSIVE : RAFTLOCK_SHARED, 1,
				       10000, &token);
	if (rv != 0)
		example_die(c, "acquire", rv);
	printf("%s %s, token %llu\n", write_mode ? "writing" : "reading", name,
	       (unsigned long long)token);
	raftlock_lock_release(l, NULL);
	raftlock_lock_free(l);
	raftlock_session_close(s);
	raftlock_client_close(c);
	return 0;
}
