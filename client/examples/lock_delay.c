/* lock_delay: a lock whose holder's session expires stays unavailable for
 * the lock-delay (in case the dead holder's last writes are still in
 * flight); a clean release frees it at once. This program takes the lock
 * with a delay and then exits WITHOUT releasing or closing its session:
 * run `raftlock show NAME` and a second try to watch the delay.
 * Usage: lock_delay [NAME] [DELAY_MS] */
#include <unistd.h>

#include "example_common.h"

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "examples/lock-delay";
	unsigned delay = argc > 2 ? (unsigned)atoi(argv[2]) : 5000;
	raftlock_client *c = example_connect("example-lock-delay");
	raftlock_session *s = example_session(c, 2000);
	struct raftlock_lock_options o = {.kind = RAFTLOCK_MUTEX, .lock_delay_ms = delay};
	raftlock_lock *l;
	if (raftlock_lock_new(s, name, &o, &l) != 0)
		example_die(c, "lock handle", 0);
	uint64_t token;
	int rv = raftlock_lock_try(l, &token);
	if (rv != 0)
		example_die(c, "try-lock", rv);
	printf("took %s (token %llu) with a %u ms lock-delay; exiting without release:\n"
	       "the lock frees about 2 s (TTL) + %u ms from now\n",
	       name, (unsigned long long)token, delay, delay);
	fflush(stdout);
	_exit(0); /* a crash, as far as the service can tell */
}
