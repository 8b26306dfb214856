/* consumer.c: uses the installed header and library: the version macros,
 * a message of the error table, and a call that must refuse bad options
 * (no addresses) with RAFTLOCK_EINVAL and a message. */
#include <raftlock.h>
#include <stdio.h>

int main(void)
{
	struct raftlock_client_options o = {0};
	raftlock_client *c = NULL;
	const char *msg = NULL;
	int rv = raftlock_client_open(&o, &c, &msg);
	printf("%d.%d.%d|%s|%d|%s\n", RAFTLOCK_VERSION_MAJOR, RAFTLOCK_VERSION_MINOR,
	       RAFTLOCK_VERSION_PATCH, raftlock_strerror(RAFTLOCK_EBUSY), rv == RAFTLOCK_EINVAL,
	       msg != NULL ? "message" : "none");
	return rv == RAFTLOCK_EINVAL ? 0 : 1;
}
