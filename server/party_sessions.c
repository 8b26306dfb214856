/* party_sessions.c: see party_sessions.h. */
#include "party_sessions.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "id_sort.h"
#include "log.h"
#include "raftlock.h"
#include "record_peek.h"

void party_sessions_init(struct party_sessions *ps)
{
	*ps = (struct party_sessions){0};
}

void party_sessions_free(struct party_sessions *ps)
{
	free(ps->ids);
	party_sessions_init(ps);
}

void party_sessions_add(struct party_sessions *ps, uint64_t id)
{
	if (ps->n > 0 && ps->ids[ps->n - 1] == id)
		return; /* most locks have one party, or the same session twice */
	if (ps->n > 0 && ps->ids[ps->n - 1] > id)
		ps->unsorted = true;
	if (ps->failed)
		return;
	if (grow(&ps->ids, &ps->cap, ps->n + 1, 1024, sizeof *ps->ids) != 0) {
		ps->failed = true; /* party_sessions_sort() says so */
		return;
	}
	ps->ids[ps->n++] = id;
}

int party_sessions_sort(struct party_sessions *ps)
{
	if (ps->failed)
		return RAFTLOCK_ENOMEM;
	if (!ps->unsorted)
		return 0;
	int rv = id_sort(ps->ids, ps->n, 1);
	if (rv != 0)
		return rv;
	size_t n = 0;
	for (size_t i = 0; i < ps->n; i++)
		if (n == 0 || ps->ids[i] != ps->ids[n - 1])
			ps->ids[n++] = ps->ids[i];
	ps->n = n;
	ps->unsorted = false;
	return 0;
}

/* ------------------------------------------- a party of no session, found -- */

struct party_of {
	uint64_t session;
	bool found, waiter;
};

static void find_party(void *arg, const struct record_party *p)
{
	struct party_of *f = arg;
	if (!f->found && p->session == f->session) {
		f->found = true;
		f->waiter = p->waiter;
	}
}

/* Refuses the image for session id, which a party names and the image
 * does not have: names the first lock where one does. */
static int refuse(struct store *s, MDB_txn *txn, uint64_t id)
{
	MDB_cursor *cur;
	MDB_val key, val;
	struct party_of f = {.session = id};
	int rc = mdb_cursor_open(txn, s->locks, &cur);
	if (rc != 0)
		log_fatal("lmdb cursor: %s", mdb_strerror(rc));
	for (rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT)) {
		record_peek_lock_parties(val.mv_data, val.mv_size, find_party, &f);
		if (f.found)
			break;
	}
	mdb_cursor_close(cur);
	if (!f.found) /* cannot be: each id noted is a party's */
		return store_load_refuse(s,
					 "a lock names session %llu, which the image does not have",
					 (unsigned long long)id);
	return store_load_refuse(
		s, "lock '%.*s' has a %s of session %llu, which the image does not have",
		(int)key.mv_size, (const char *)key.mv_data, f.waiter ? "waiter" : "holder",
		(unsigned long long)id);
}

int party_sessions_meet(struct party_sessions *ps, struct store *s, MDB_txn *txn, uint64_t id)
{
	if (ps->met < ps->n && ps->ids[ps->met] < id)
		return refuse(s, txn, ps->ids[ps->met]);
	if (ps->met < ps->n && ps->ids[ps->met] == id)
		ps->met++;
	return 0;
}

int party_sessions_end(struct party_sessions *ps, struct store *s, MDB_txn *txn)
{
	return ps->met < ps->n ? refuse(s, txn, ps->ids[ps->met]) : 0;
}
