/* multilock: move money between two accounts, each behind its own lock,
 * taking both locks at once (all or none: no deadlock with a transfer the
 * other way round), then releasing them. Usage: multilock [FROM TO] */
#include "example_common.h"

int main(int argc, char **argv)
{
	const char *from = argc > 2 ? argv[1] : "examples/accounts/alice";
	const char *to = argc > 2 ? argv[2] : "examples/accounts/bob";
	raftlock_client *c = example_connect("example-multilock");
	raftlock_session *s = example_session(c, 10000);
	/* Any order: the set is sorted by name, the order its tokens are
	 * taken in. */
	struct raftlock_multi_item items[] = {
		{.name = from, .mode = RAFTLOCK_EXCLUSIVE},
		{.name = to, .mode = RAFTLOCK_EXCLUSIVE},
	};
	raftlock_multi *set;
	int rv = raftlock_multi_new(s, items, 2, &set);
	if (rv != 0)
		example_die(c, "lock set", rv);
	/* Wait up to 5 s in both queues. RAFTLOCK_EDEADLK would say the wait
	 * closes a cycle of sessions waiting on each other: a program
	 * holding other locks would release them and try again. */
	rv = raftlock_multi_acquire(set, 5000);
	if (rv == RAFTLOCK_ETIMEDOUT) {
		printf("%s and %s were not both free within 5 s\n", from, to);
	} else if (rv != 0) {
		example_die(c, "acquire", rv);
	} else {
		/* Each lock has its own fencing token, for the writes to its
		 * own resource. */
		printf("holding %s (token %llu) and %s (token %llu)\n", from,
		       (unsigned long long)raftlock_multi_token(set, 0), to,
		       (unsigned long long)raftlock_multi_token(set, 1));
		rv = raftlock_multi_release(set);
		if (rv != 0)
			example_die(c, "release", rv);
	}
	raftlock_multi_free(set);
	raftlock_session_close(s);
	raftlock_client_close(c);
	return 0;
}
