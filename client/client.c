/* client.c: see client.h and raftlock.h. */
#include "client.h"

#include <errno.h>
#include <stdlib.h>

#include "errmsg.h"
#include "lock.h"

RAFTLOCK_API int raftlock_client_open(const struct raftlock_client_options *opts,
				      raftlock_client **out, const char **errmsg_out)
{
	int rv = transport_check_options(opts);
	if (rv == 0 && out == NULL)
		rv = errmsg_set(NULL, RAFTLOCK_EINVAL, NULL, "open client: out is NULL");
	if (rv != 0)
		goto out;
	raftlock_client *c = calloc(1, sizeof *c);
	if (c == NULL) {
		rv = errmsg_set(NULL, RAFTLOCK_ENOMEM, NULL, "open client");
		goto out;
	}
	rv = transport_open(&c->t, opts);
	if (rv != 0) {
		free(c);
		goto out;
	}
	const char *name =
		opts->client_name != NULL ? opts->client_name : program_invocation_short_name;
	rv = sessions_init(&c->ss, &c->t, name);
	if (rv != 0) {
		errmsg_set(NULL, rv, NULL, "open client");
		goto err_transport;
	}
	c->ss.ending = lock_end_waits;
	c->ss.freeing = lock_free_all;
	c->ss.revoked = lock_revoked;
	rv = keepalive_start(&c->ka, &c->ss);
	if (rv != 0) {
		errmsg_set(NULL, rv, NULL, "open client: start the keepalive thread");
		goto err_sessions;
	}
	*out = c;
	goto out;

err_sessions:
	sessions_close(&c->ss);
err_transport:
	transport_close(&c->t);
	free(c);
out:
	if (errmsg_out != NULL)
		*errmsg_out = errmsg_get(NULL);
	return rv;
}

RAFTLOCK_API void raftlock_client_close(raftlock_client *client)
{
	if (client == NULL)
		return;
	sessions_close_all(&client->ss);
	keepalive_stop(&client->ka);
	sessions_close(&client->ss);
	transport_close(&client->t);
	free(client);
}

RAFTLOCK_API const char *raftlock_errmsg(const raftlock_client *client)
{
	return errmsg_get(client != NULL ? &client->t : NULL);
}

RAFTLOCK_API int raftlock_session_open(raftlock_client *c,
				       const struct raftlock_session_options *opts,
				       raftlock_session **out)
{
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	if (out == NULL)
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, "out is NULL", "open session");
	return session_open(&c->ss, opts, out);
}

RAFTLOCK_API int raftlock_session_close(raftlock_session *s)
{
	if (s == NULL)
		return 0;
	struct transport *t = s->t;
	pthread_mutex_lock(&t->mu);
	int rv = session_close(s, 0);
	pthread_mutex_unlock(&t->mu);
	return rv;
}

RAFTLOCK_API uint64_t raftlock_session_id(const raftlock_session *s)
{
	return s != NULL ? s->id : 0;
}

RAFTLOCK_API uint64_t raftlock_session_valid_until(const raftlock_session *s)
{
	if (s == NULL)
		return 0;
	pthread_mutex_lock(&s->t->mu);
	uint64_t v = s->valid_until;
	pthread_mutex_unlock(&s->t->mu);
	return v;
}

RAFTLOCK_API bool raftlock_session_valid(const raftlock_session *s)
{
	return s != NULL && transport_boot_ms(s->t) < raftlock_session_valid_until(s);
}
