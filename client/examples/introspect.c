/* introspect: who holds what, since when, from which host and pid; and the
 * live sessions. Usage: introspect [PREFIX] */
#include "example_common.h"

int main(int argc, char **argv)
{
	const char *prefix = argc > 1 ? argv[1] : "";
	raftlock_client *c = example_connect("example-introspect");
	struct raftlock_lock_list *list = NULL;
	const char *after = NULL;
	char last[RAFTLOCK_NAME_MAX + 1] = "";
	do {
		int rv = raftlock_lock_list(c, prefix, after, 100, false, &list);
		if (rv != 0)
			example_die(c, "list locks", rv);
		for (size_t i = 0; i < list->n_locks; i++) {
			const struct raftlock_lock_info *l = &list->locks[i];
			for (size_t h = 0; h < l->n_holders; h++)
				printf("%s: token %llu held by %s@%s pid %u (session %llu)\n",
				       l->name, (unsigned long long)l->holders[h].token,
				       l->holders[h].who.client_name, l->holders[h].who.host,
				       l->holders[h].who.pid,
				       (unsigned long long)l->holders[h].session);
			if (l->holders_total > l->n_holders) /* a huge lock's answer is cut */
				printf("%s: %zu more holders\n", l->name,
				       l->holders_total - l->n_holders);
			printf("%s: %zu waiting\n", l->name, l->waiters_total);
			snprintf(last, sizeof last, "%s", l->name);
		}
		after = last;
		bool more = list->more;
		raftlock_lock_list_free(list);
		if (!more)
			break;
	} while (1);
	struct raftlock_session_list *sl = NULL;
	if (raftlock_session_list(c, 0, 100, false, &sl) == 0) {
		for (size_t i = 0; i < sl->n_sessions; i++)
			printf("session %llu: %s@%s pid %u, ttl %u ms, %zu locks\n",
			       (unsigned long long)sl->sessions[i].id,
			       sl->sessions[i].who.client_name, sl->sessions[i].who.host,
			       sl->sessions[i].who.pid, sl->sessions[i].ttl_ms,
			       sl->sessions[i].n_locks);
		raftlock_session_list_free(sl);
	}
	raftlock_client_close(c);
	return 0;
}
