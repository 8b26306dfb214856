/* reentrant: acquiring twice through one handle nests and keeps the token;
 * another handle in the same process is another owner. */
#include "example_common.h"

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "examples/reentrant";
	raftlock_client *c = example_connect("example-reentrant");
	raftlock_session *s = example_session(c, 10000);
	raftlock_lock *a, *b;
	if (raftlock_lock_new(s, name, NULL, &a) != 0 || raftlock_lock_new(s, name, NULL, &b) != 0)
		example_die(c, "lock handle", 0);
	uint64_t t1, t2, t3;
	if (raftlock_lock_try(a, &t1) != 0 || raftlock_lock_try(a, &t2) != 0)
		example_die(c, "try-lock", 0);
	printf("handle a: nested twice, tokens %llu and %llu (the same)\n", (unsigned long long)t1,
	       (unsigned long long)t2);
	printf("handle b: try-lock says: %s\n", raftlock_strerror(raftlock_lock_try(b, &t3)));
	uint32_t left;
	raftlock_lock_release(a, &left);
	printf("after one release: depth %u\n", left);
	raftlock_lock_release(a, &left);
	printf("after two releases: depth %u, handle b: %s\n", left,
	       raftlock_strerror(raftlock_lock_try(b, &t3)));
	raftlock_lock_release(b, NULL);
	raftlock_lock_free(a);
	raftlock_lock_free(b);
	raftlock_session_close(s);
	raftlock_client_close(c);
	return 0;
}
