/* election.c: see election.h. */
#include "election.h"

#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "codec.h"
#include "errmsg.h"
#include "lock.h"
#include "watch.h"

struct raftlock_leader {
	raftlock_lock *lock;
	uint64_t token;
};

RAFTLOCK_API int raftlock_campaign(raftlock_session *s, const char *name, const char *value,
				   int timeout_ms, raftlock_leader **out)
{
	if (s == NULL)
		return RAFTLOCK_EINVAL;
	if (name == NULL || value == NULL || out == NULL || strlen(value) > RAFTLOCK_VALUE_MAX)
		return errmsg_set(s->t, RAFTLOCK_EINVAL, NULL,
				  "campaign: a name, a value of at most %d bytes and out",
				  RAFTLOCK_VALUE_MAX);
	struct raftlock_leader *ld = calloc(1, sizeof *ld);
	if (ld == NULL)
		return errmsg_set(s->t, RAFTLOCK_ENOMEM, NULL, "campaign '%s'", name);
	/* The whole campaign is a call of the session: a close in another
	 * thread waits for it (its acquire gives up, RAFTLOCK_ECANCELED)
	 * before it frees the handle, so the handle is either freed here or
	 * handed to the close with its leadership. */
	pthread_mutex_lock(&s->t->mu);
	int rv = session_call_begin(s);
	pthread_mutex_unlock(&s->t->mu);
	if (rv != 0) {
		free(ld);
		return errmsg_set(s->t, rv, NULL, "campaign '%s'", name);
	}
	rv = raftlock_lock_new(s, name, NULL, &ld->lock);
	if (rv == 0 && (rv = raftlock_lock_set_value(ld->lock, value)) == 0)
		rv = raftlock_lock_acquire(ld->lock, RAFTLOCK_EXCLUSIVE, 1, timeout_ms, &ld->token);
	if (rv != 0)
		raftlock_lock_free(ld->lock);
	pthread_mutex_lock(&s->t->mu);
	if (rv == 0) {
		ld->lock->wrapper = ld; /* a session's close frees it */
		ld->lock->free_wrapper = free;
	}
	session_call_end(s);
	pthread_mutex_unlock(&s->t->mu);
	if (rv != 0) {
		free(ld);
		return rv;
	}
	*out = ld;
	return 0;
}

RAFTLOCK_API uint64_t raftlock_leader_token(const raftlock_leader *ld)
{
	return ld != NULL ? ld->token : 0;
}

RAFTLOCK_API int raftlock_proclaim(raftlock_leader *ld, const char *value)
{
	if (ld == NULL)
		return RAFTLOCK_EINVAL;
	if (value == NULL)
		return errmsg_set(ld->lock->session->t, RAFTLOCK_EINVAL, "value is NULL",
				  "proclaim '%s'", ld->lock->name);
	return lock_proclaim(ld->lock, value);
}

RAFTLOCK_API int raftlock_resign(raftlock_leader *ld)
{
	if (ld == NULL)
		return 0;
	int rv = raftlock_lock_release(ld->lock, NULL);
	raftlock_lock_free(ld->lock);
	free(ld);
	return rv;
}

/* ------------------------------------------------------------ observe -- */

struct raftlock_observer {
	raftlock_watch_handle *watch;
	raftlock_observe_cb cb;
	void *userdata;
	char *name;
	/* What was last reported, and the state being read (HOLDING events
	 * up to CURRENT) after a start or a HISTORY_LOST. */
	bool reported, has_leader, lost;
	bool ended; /* its last event was delivered: the rest goes unheard */
	uint64_t session, token;
	char *value;
	bool reading;
	bool next_has;
	uint64_t next_session, next_token;
	char *next_value;
};

/* false when out of memory: *field is left as it was. */
static bool set_text(char **field, const char *value)
{
	char *copy = strdup(value != NULL ? value : "");
	if (copy == NULL)
		return false;
	free(*field);
	*field = copy;
	return true;
}

/* The observation's last event, of status: the node ended its watch, or
 * out of memory the observer could no longer tell what changed (its watch
 * is stopped then: nobody hears it; raftlock_observe_cancel frees it). */
static void observe_end(struct raftlock_observer *o, struct raftlock_position pos, int status)
{
	struct raftlock_leader_event none = {.value = "", .position = pos, .status = status};
	o->ended = true;
	if (status == RAFTLOCK_ENOMEM)
		watch_halt(o->watch);
	o->cb(&none, o->userdata); /* nothing more comes */
}

/* Reports (has, session, token, value) at pos if it differs from the last
 * report (the callback is the last thing done: it may cancel). */
static void observe_report(struct raftlock_observer *o, bool has, uint64_t session, uint64_t token,
			   const char *value, struct raftlock_position pos)
{
	if (o->reported && !o->lost && has == o->has_leader && session == o->session &&
	    token == o->token && strcmp(value, o->value != NULL ? o->value : "") == 0)
		return;
	if (!set_text(&o->value, has ? value : "")) {
		observe_end(o, pos, RAFTLOCK_ENOMEM);
		return;
	}
	struct raftlock_leader_event ev = {
		.has_leader = has,
		.session = has ? session : 0,
		.token = has ? token : 0,
		.position = pos,
		.history_lost = o->lost,
	};
	o->reported = true;
	o->lost = false;
	o->has_leader = has;
	o->session = ev.session;
	o->token = ev.token;
	ev.value = o->value != NULL ? o->value : "";
	o->cb(&ev, o->userdata);
}

static void observe_event(const struct raftlock_watch_event *ev, void *arg)
{
	struct raftlock_observer *o = arg;
	if (o->ended)
		return;
	if (ev->kind == RAFTLOCK_WATCH_ERROR) {
		observe_end(o, ev->position, ev->status); /* the watch ended */
		return;
	}
	if (ev->kind == RAFTLOCK_WATCH_HISTORY_LOST) {
		o->lost = true;
		o->reading = true;
		o->next_has = false;
		return;
	}
	if (ev->kind == RAFTLOCK_WATCH_CURRENT) {
		bool has = o->next_has;
		o->reading = false;
		o->next_has = false;
		observe_report(o, has, o->next_session, o->next_token,
			       o->next_value != NULL ? o->next_value : "", ev->position);
		return;
	}
	if (strcmp(ev->name, o->name) != 0) /* another lock under the prefix */
		return;
	switch (ev->kind) {
	case RAFTLOCK_WATCH_HOLDING:
		o->next_has = true;
		o->next_session = ev->session;
		o->next_token = ev->token;
		if (!set_text(&o->next_value, ev->value))
			observe_end(o, ev->position, RAFTLOCK_ENOMEM);
		return;
	case RAFTLOCK_WATCH_GRANTED:
	case RAFTLOCK_WATCH_PROCLAIMED:
		observe_report(o, true, ev->session, ev->token, ev->value, ev->position);
		return;
	case RAFTLOCK_WATCH_RELEASED:
	case RAFTLOCK_WATCH_EXPIRED:
	case RAFTLOCK_WATCH_REVOKED:
		if (o->has_leader && ev->token == o->token)
			observe_report(o, false, 0, 0, "", ev->position);
		return;
	default: return; /* queue changes do not change the leader */
	}
}

RAFTLOCK_API int raftlock_observe(raftlock_client *c, const char *name, raftlock_observe_cb cb,
				  void *userdata, raftlock_observer **out)
{
	if (c == NULL)
		return RAFTLOCK_EINVAL;
	if (cb == NULL || out == NULL || codec_check_name(name) != 0)
		return errmsg_set(&c->t, RAFTLOCK_EINVAL, NULL,
				  "observe: a name of 1..%d bytes, a callback and out",
				  RAFTLOCK_NAME_MAX);
	struct raftlock_observer *o = calloc(1, sizeof *o);
	if (o == NULL || (o->name = strdup(name)) == NULL) {
		free(o);
		return errmsg_set(&c->t, RAFTLOCK_ENOMEM, NULL, "observe '%s'", name);
	}
	o->cb = cb;
	o->userdata = userdata;
	o->reading = true;
	int rv = raftlock_watch(c, name, NULL, observe_event, o, &o->watch);
	if (rv != 0) {
		free(o->name);
		free(o);
		return rv;
	}
	*out = o;
	return 0;
}

RAFTLOCK_API void raftlock_observe_cancel(raftlock_observer *o)
{
	if (o == NULL)
		return;
	raftlock_watch_cancel(o->watch);
	free(o->name);
	free(o->value);
	free(o->next_value);
	free(o);
}
