/* member_book.c: see member_book.h. */
#include "member_book.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "feature_level.h"
#include "log.h"
#include "raftlock.h"
#include "records.h"

const Raftlock__MemberRecord *member_book_find(const Raftlock__Meta *m, uint64_t id)
{
	for (size_t i = 0; i < m->n_members; i++)
		if (m->members[i]->id == id)
			return m->members[i];
	return NULL;
}

static int address_ok(const char *a)
{
	return a != NULL && a[0] != '\0' && strlen(a) < CONFIG_ADDR_MAX;
}

int member_book_add(Raftlock__Meta *m, const Raftlock__MemberAdd *op)
{
	if (op->id == 0 || !address_ok(op->raft_address) || !address_ok(op->client_address))
		return RAFTLOCK_EINVAL;
	const Raftlock__MemberRecord *r = member_book_find(m, op->id);
	if (r != NULL)
		return strcmp(r->raft_address, op->raft_address) == 0 &&
				       strcmp(r->client_address, op->client_address) == 0 &&
				       r->founding == op->founding
			       ? 0
			       : RAFTLOCK_EINVAL;
	if (op->id <= m->max_member_id && !op->founding)
		return RAFTLOCK_EINVAL;
	Raftlock__MemberRecord **grown =
		realloc(m->members, (m->n_members + 1) * sizeof *m->members);
	Raftlock__MemberRecord *rec = malloc(sizeof *rec);
	if (grown == NULL || rec == NULL)
		log_fatal("out of memory");
	m->members = grown;
	raftlock__member_record__init(rec);
	rec->id = op->id;
	rec->raft_address = records_strdup(op->raft_address);
	rec->client_address = records_strdup(op->client_address);
	rec->founding = op->founding;
	m->members[m->n_members++] = rec;
	if (op->id > m->max_member_id)
		m->max_member_id = op->id;
	return 0;
}

int member_book_remove(Raftlock__Meta *m, const Raftlock__MemberRemove *op)
{
	if (op->id == 0)
		return RAFTLOCK_EINVAL;
	for (size_t i = 0; i < m->n_members; i++) {
		if (m->members[i]->id != op->id)
			continue;
		raftlock__member_record__free_unpacked(m->members[i], NULL);
		m->members[i] = m->members[--m->n_members];
		break;
	}
	if (op->id > m->max_member_id)
		m->max_member_id = op->id;
	if (features_recorded(m->feature_level) >= FEATURES_REMOVED_MEMBERS &&
	    !member_book_removed(m, op->id)) {
		uint64_t *grown = realloc(m->removed_members,
					  (m->n_removed_members + 1) * sizeof *m->removed_members);
		if (grown == NULL)
			log_fatal("out of memory");
		m->removed_members = grown;
		m->removed_members[m->n_removed_members++] = op->id;
	}
	return 0;
}

void member_book_note_removals(Raftlock__Meta *m)
{
	m->removed_unnoted = m->max_member_id;
}

bool member_book_removed(const Raftlock__Meta *m, uint64_t id)
{
	if (id == 0 || id > m->max_member_id)
		return false;
	if (features_recorded(m->feature_level) < FEATURES_REMOVED_MEMBERS ||
	    id <= m->removed_unnoted)
		return true;
	for (size_t i = 0; i < m->n_removed_members; i++)
		if (m->removed_members[i] == id)
			return true;
	return false;
}

void member_book_forget(Raftlock__Meta *m)
{
	for (size_t i = 0; i < m->n_members; i++)
		raftlock__member_record__free_unpacked(m->members[i], NULL);
	free(m->members);
	m->members = NULL;
	m->n_members = 0;
}

int member_book_join(Raftlock__Meta *m, const Raftlock__MemberJoin *op)
{
	Raftlock__MemberRecord *r = (Raftlock__MemberRecord *)member_book_find(m, op->id);
	if (r == NULL || op->incarnation == 0)
		return r == NULL ? RAFTLOCK_ENOTFOUND : RAFTLOCK_EINVAL;
	if (r->founding)
		return RAFTLOCK_EPERM; /* it started with the cluster */
	if (r->incarnation == 0)
		r->incarnation = op->incarnation;
	return r->incarnation == op->incarnation ? 0 : RAFTLOCK_EPERM;
}
