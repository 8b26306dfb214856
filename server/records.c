/* records.c: see records.h. */
#include "records.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (p == NULL)
		log_fatal("out of memory (%zu bytes)", n);
	return p;
}

static void grow(void ***array, size_t n)
{
	void **p = realloc(*array, (n + 1) * sizeof **array);
	if (p == NULL)
		log_fatal("out of memory");
	*array = p;
}

static void shift_out(void **array, size_t *n, size_t i)
{
	memmove(&array[i], &array[i + 1], (*n - i - 1) * sizeof *array);
	(*n)--;
}

char *records_strdup(const char *s)
{
	size_t n = strlen(s ? s : "") + 1;
	char *p = xmalloc(n);
	memcpy(p, s ? s : "", n);
	return p;
}

void records_set_string(char **field, const char *value)
{
	if (*field != NULL && *field != protobuf_c_empty_string)
		free(*field);
	*field = records_strdup(value);
}

void records_set_bytes(ProtobufCBinaryData *field, const ProtobufCBinaryData *value)
{
	free(field->data);
	field->data = NULL;
	field->len = 0;
	if (value->len == 0)
		return;
	field->data = xmalloc(value->len);
	memcpy(field->data, value->data, value->len);
	field->len = value->len;
}

Raftlock__LockRecord *records_new_lock(const char *name, Raftlock__LockKind kind, uint32_t limit)
{
	Raftlock__LockRecord *lock = xmalloc(sizeof *lock);
	raftlock__lock_record__init(lock);
	lock->name = records_strdup(name);
	lock->kind = kind;
	lock->limit = limit;
	return lock;
}

Raftlock__SessionRecord *records_new_session(const Raftlock__Owner *owner)
{
	Raftlock__SessionRecord *s = xmalloc(sizeof *s);
	raftlock__session_record__init(s);
	s->owner = xmalloc(sizeof *s->owner);
	raftlock__owner__init(s->owner);
	if (owner != NULL) {
		s->owner->client_name = records_strdup(owner->client_name);
		s->owner->host = records_strdup(owner->host);
		s->owner->pid = owner->pid;
	} else {
		s->owner->client_name = records_strdup("");
		s->owner->host = records_strdup("");
	}
	return s;
}

Raftlock__Holder *records_add_holder(Raftlock__LockRecord *lock)
{
	Raftlock__Holder *h = xmalloc(sizeof *h);
	raftlock__holder__init(h);
	grow((void ***)&lock->holders, lock->n_holders);
	lock->holders[lock->n_holders++] = h;
	return h;
}

void records_remove_holder(Raftlock__LockRecord *lock, size_t i)
{
	raftlock__holder__free_unpacked(lock->holders[i], NULL);
	shift_out((void **)lock->holders, &lock->n_holders, i);
}

ssize_t records_holder_index(const Raftlock__LockRecord *lock, uint64_t session, uint64_t owner)
{
	for (size_t i = 0; i < lock->n_holders; i++)
		if (lock->holders[i]->session == session && lock->holders[i]->owner == owner)
			return (ssize_t)i;
	return -1;
}

Raftlock__Holder *records_find_holder(Raftlock__LockRecord *lock, uint64_t session, uint64_t owner)
{
	ssize_t i = records_holder_index(lock, session, owner);
	return i < 0 ? NULL : lock->holders[i];
}

uint64_t records_permits_held(const Raftlock__LockRecord *lock)
{
	uint64_t n = 0;
	for (size_t i = 0; i < lock->n_holders; i++)
		n += lock->holders[i]->permits;
	return n;
}

Raftlock__Waiter *records_add_waiter(Raftlock__LockRecord *lock)
{
	Raftlock__Waiter *w = xmalloc(sizeof *w);
	raftlock__waiter__init(w);
	grow((void ***)&lock->waiters, lock->n_waiters);
	lock->waiters[lock->n_waiters++] = w;
	return w;
}

void records_remove_waiter(Raftlock__LockRecord *lock, size_t i)
{
	raftlock__waiter__free_unpacked(lock->waiters[i], NULL);
	shift_out((void **)lock->waiters, &lock->n_waiters, i);
}

ssize_t records_find_waiter(const Raftlock__LockRecord *lock, uint64_t session, uint64_t owner)
{
	for (size_t i = 0; i < lock->n_waiters; i++)
		if (lock->waiters[i]->session == session && lock->waiters[i]->owner == owner)
			return (ssize_t)i;
	return -1;
}

bool records_session_on_lock(const Raftlock__LockRecord *lock, uint64_t session)
{
	for (size_t i = 0; i < lock->n_holders; i++)
		if (lock->holders[i]->session == session)
			return true;
	for (size_t i = 0; i < lock->n_waiters; i++)
		if (lock->waiters[i]->session == session)
			return true;
	return false;
}

bool records_has_name(const Raftlock__SessionRecord *sess, const char *name)
{
	for (size_t i = 0; i < sess->n_locks; i++)
		if (strcmp(sess->locks[i], name) == 0)
			return true;
	return false;
}

void records_add_name(Raftlock__SessionRecord *sess, const char *name)
{
	if (records_has_name(sess, name))
		return;
	grow((void ***)&sess->locks, sess->n_locks);
	sess->locks[sess->n_locks++] = records_strdup(name);
}

void records_remove_name(Raftlock__SessionRecord *sess, const char *name)
{
	for (size_t i = 0; i < sess->n_locks; i++) {
		if (strcmp(sess->locks[i], name) == 0) {
			free(sess->locks[i]);
			shift_out((void **)sess->locks, &sess->n_locks, i);
			return;
		}
	}
}

const Raftlock__Outcome *records_find_outcome(const Raftlock__SessionRecord *sess, uint64_t seq)
{
	for (size_t i = 0; i < sess->n_outcomes; i++)
		if (sess->outcomes[i]->seq == seq)
			return sess->outcomes[i];
	return NULL;
}

Raftlock__Outcome *records_new_outcome(uint64_t seq, bool queued)
{
	Raftlock__Outcome *o = xmalloc(sizeof *o);
	raftlock__outcome__init(o);
	o->seq = seq;
	o->queued = queued;
	return o;
}

void records_fill_outcome(Raftlock__Outcome *o, const Raftlock__Result *res, bool pending)
{
	if (o->result == NULL)
		o->result = xmalloc(sizeof *o->result);
	else
		free(o->result->tokens);
	*o->result = *res;
	o->result->tokens = NULL;
	if (res->n_tokens > 0) {
		/* a set's tokens (multilock.h): the record owns its copy */
		o->result->tokens = xmalloc(res->n_tokens * sizeof *res->tokens);
		memcpy(o->result->tokens, res->tokens, res->n_tokens * sizeof *res->tokens);
	}
	o->result->queued = pending;
	/* The table keeps what older nodes keep: a limit is named in the live
	 * answer only (the record bytes must not differ between versions). */
	o->result->limit = RAFTLOCK__LIMIT__LIMIT_UNSPECIFIED;
	o->result->limit_value = 0;
	o->pending = pending;
}

void records_set_outcome(Raftlock__SessionRecord *sess, uint64_t seq, const Raftlock__Result *res,
			 bool pending)
{
	Raftlock__Outcome *o = (Raftlock__Outcome *)records_find_outcome(sess, seq);
	if (o == NULL) {
		o = records_new_outcome(seq, pending && sess->acks_queued);
		grow((void ***)&sess->outcomes, sess->n_outcomes);
		sess->outcomes[sess->n_outcomes++] = o;
	}
	records_fill_outcome(o, res, pending);
}

void records_ack_outcome(Raftlock__SessionRecord *sess, uint64_t seq)
{
	Raftlock__Outcome *o = (Raftlock__Outcome *)records_find_outcome(sess, seq);
	if (o != NULL && !o->pending)
		o->queued = false;
}

void records_prune_outcomes(Raftlock__SessionRecord *sess, uint64_t mark)
{
	size_t kept = 0;
	for (size_t i = 0; i < sess->n_outcomes; i++) {
		Raftlock__Outcome *o = sess->outcomes[i];
		if (o->seq < mark && !o->pending && !o->queued)
			raftlock__outcome__free_unpacked(o, NULL);
		else
			sess->outcomes[kept++] = o;
	}
	sess->n_outcomes = kept;
}
