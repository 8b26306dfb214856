/* nonce_sessions.c: see nonce_sessions.h. */
#include "nonce_sessions.h"

#include <stdlib.h>

#include "byteorder.h"
#include "grow.h"
#include "id_sort.h"
#include "raftlock.h"

void nonce_sessions_init(struct nonce_sessions *ns)
{
	*ns = (struct nonce_sessions){0};
}

void nonce_sessions_free(struct nonce_sessions *ns)
{
	free(ns->rows);
	nonce_sessions_init(ns);
}

void nonce_sessions_add(struct nonce_sessions *ns, const MDB_val *key, const MDB_val *val)
{
	if (key->mv_size != 8 || val->mv_size != 8 || ns->failed)
		return;
	if (grow(&ns->rows, &ns->cap, 2 * (ns->n + 1), 2048, sizeof *ns->rows) != 0) {
		ns->failed = true; /* nonce_sessions_sort() says so */
		return;
	}
	ns->rows[2 * ns->n] = be_get(val->mv_data, 8);
	ns->rows[2 * ns->n + 1] = be_get(key->mv_data, 8);
	ns->n++;
}

int nonce_sessions_sort(struct nonce_sessions *ns)
{
	if (ns->failed)
		return RAFTLOCK_ENOMEM;
	return id_sort(ns->rows, ns->n, 2);
}

/* Refuses the image for the row met next, of a session below the one
 * met now: the image does not have it. */
static int refuse_row(const struct nonce_sessions *ns, struct store *s)
{
	const uint64_t *row = ns->rows + 2 * ns->met;
	return store_load_refuse(s, "nonce %llu names session %llu, which the image does not have",
				 (unsigned long long)row[1], (unsigned long long)row[0]);
}

int nonce_sessions_meet(struct nonce_sessions *ns, struct store *s,
			const Raftlock__SessionRecord *rec)
{
	if (ns->met < ns->n && ns->rows[2 * ns->met] < rec->id)
		return refuse_row(ns, s);
	unsigned long long id = rec->id, nonce = rec->nonce;
	/* the session's rows: none without a nonce, its own with one (the
	 * keys differ: a second row is of another nonce) */
	bool found = false;
	for (; ns->met < ns->n && ns->rows[2 * ns->met] == rec->id; ns->met++) {
		unsigned long long row = ns->rows[2 * ns->met + 1];
		if (nonce == 0)
			return store_load_refuse(s, "nonce %llu names session %llu, which has none",
						 row, id);
		if (row != nonce)
			return store_load_refuse(
				s, "nonce %llu names session %llu, whose nonce is %llu", row, id,
				nonce);
		found = true;
	}
	if (nonce != 0 && !found)
		return store_load_refuse(
			s, "session %llu's nonce %llu has no row in the nonces table", id, nonce);
	return 0;
}

int nonce_sessions_end(struct nonce_sessions *ns, struct store *s)
{
	return ns->met < ns->n ? refuse_row(ns, s) : 0;
}
