/* pushes.c: see pushes.h. */
#include "pushes.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "log.h"

void pushes_init(struct pushes *p)
{
	idmap_init(&p->by_session, sizeof(struct push_target *));
}

void pushes_close(struct pushes *p)
{
	struct service_conn **conns = NULL;
	pushes_drop_all(p, &conns);
	free(conns);
	idmap_close(&p->by_session);
}

void pushes_set(struct pushes *p, uint64_t session, uint64_t seq, struct service_conn *conn,
		uint64_t id)
{
	struct push_target **first = idmap_put(&p->by_session, session);
	if (first == NULL)
		log_fatal("out of memory");
	for (struct push_target *t = *first; t != NULL; t = t->next) {
		if (t->seq == seq) { /* a retry moves the push (DESIGN.md) */
			t->conn = conn;
			t->id = id;
			t->answered = false;
			return;
		}
	}
	struct push_target *t = calloc(1, sizeof *t);
	if (t == NULL)
		log_fatal("out of memory");
	*t = (struct push_target){.seq = seq, .conn = conn, .id = id, .next = *first};
	*first = t;
}

struct push_target *pushes_find(struct pushes *p, uint64_t session, uint64_t seq)
{
	struct push_target **first = idmap_get(&p->by_session, session);
	for (struct push_target *t = first ? *first : NULL; t != NULL; t = t->next)
		if (t->seq == seq)
			return t;
	return NULL;
}

struct push_target *pushes_take(struct pushes *p, uint64_t session, uint64_t seq)
{
	struct push_target **first = idmap_get(&p->by_session, session);
	if (first == NULL)
		return NULL;
	for (struct push_target **pp = first; *pp; pp = &(*pp)->next) {
		struct push_target *t = *pp;
		if (t->seq == seq) {
			*pp = t->next;
			if (*first == NULL)
				idmap_del(&p->by_session, session);
			return t;
		}
	}
	return NULL;
}

void pushes_keep_result(struct push_target *t, const Raftlock__Result *res)
{
	free(t->result.tokens);
	t->result = *res;
	t->result.tokens = NULL;
	t->have_result = true;
	if (res->n_tokens == 0)
		return;
	t->result.tokens = malloc(res->n_tokens * sizeof *res->tokens);
	if (t->result.tokens == NULL)
		log_fatal("out of memory");
	memcpy(t->result.tokens, res->tokens, res->n_tokens * sizeof *res->tokens);
}

void pushes_target_free(struct push_target *t)
{
	if (t != NULL)
		free(t->result.tokens);
	free(t);
}

void pushes_forget_session(struct pushes *p, uint64_t session)
{
	struct push_target **first = idmap_get(&p->by_session, session);
	if (first == NULL)
		return;
	for (struct push_target *t = *first, *next; t != NULL; t = next) {
		next = t->next;
		pushes_target_free(t);
	}
	idmap_del(&p->by_session, session);
}

void pushes_forget_conn(struct pushes *p, const struct service_conn *conn)
{
	struct push_target **first;
	for (size_t pos = 0; (first = idmap_next(&p->by_session, &pos, NULL)) != NULL;)
		for (struct push_target *t = *first; t != NULL; t = t->next)
			if (t->conn == conn)
				t->conn = NULL;
}

size_t pushes_drop_all(struct pushes *p, struct service_conn ***conns)
{
	size_t n = 0, cap = 0;
	struct service_conn **out = NULL;
	struct push_target **first;
	for (size_t pos = 0; (first = idmap_next(&p->by_session, &pos, NULL)) != NULL;) {
		for (struct push_target *t = *first, *next; t; t = next) {
			next = t->next;
			if (t->conn != NULL) {
				if (grow(&out, &cap, n + 1, 16, sizeof *out) != 0)
					log_fatal("out of memory");
				out[n++] = t->conn;
			}
			pushes_target_free(t);
		}
	}
	idmap_clear(&p->by_session);
	*conns = out;
	return n;
}
