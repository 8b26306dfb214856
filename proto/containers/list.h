/*
 * list.h: an intrusive doubly linked list with a head node, shared by
 * server and client for every object kept on a list (connections,
 * requests, sessions, locks, proposals). A struct embeds a `struct list`
 * and is found from it with list_entry(). No allocation, no I/O, not
 * thread-safe. Header-only: each operation is a few pointer moves.
 */
#ifndef RAFTLOCK_LIST_H
#define RAFTLOCK_LIST_H

#include <stdbool.h>
#include <stddef.h>

/* The head of a list, and the link embedded in each member. A head that
 * was list_init()'d and a member that is on no list point at themselves. */
struct list {
	struct list *prev, *next;
};

/* The struct of type `type` whose member `field` is at `link`. */
#define list_entry(link, type, field) ((type *)((char *)(link)-offsetof(type, field)))

/* Every link of the list at `head`, from the front (oldest first for a
 * list fed by list_add_tail); `link` must not be removed inside the loop
 * (use list_each_safe). */
#define list_each(link, head) for ((link) = (head)->next; (link) != (head); (link) = (link)->next)

/* As list_each, but `link` may be removed (or freed) inside the loop;
 * `tmp` is a struct list * the loop uses. */
#define list_each_safe(link, tmp, head)                                     \
	for ((link) = (head)->next, (tmp) = (link)->next; (link) != (head); \
	     (link) = (tmp), (tmp) = (link)->next)

/* Every struct of type `type` on the list at `head`, through its member
 * `field`, from the front; `pos` (a type *) must not be removed inside. */
#define list_each_entry(pos, head, type, field)                                      \
	for ((pos) = list_entry((head)->next, type, field); &(pos)->field != (head); \
	     (pos) = list_entry((pos)->field.next, type, field))

static inline void list_init(struct list *l)
{
	l->prev = l->next = l;
}

static inline bool list_empty(const struct list *head)
{
	return head->next == head;
}

/* True when the link is on a list (it was added and not removed since);
 * a link must be list_init()'d once before this means anything. */
static inline bool list_linked(const struct list *l)
{
	return l->next != l;
}

/* Adds `l` at the end of the list at `head` (l must be on no list). */
static inline void list_add_tail(struct list *head, struct list *l)
{
	l->prev = head->prev;
	l->next = head;
	head->prev->next = l;
	head->prev = l;
}

/* Adds `l` at the front of the list at `head` (l must be on no list). */
static inline void list_add_head(struct list *head, struct list *l)
{
	l->next = head->next;
	l->prev = head;
	head->next->prev = l;
	head->next = l;
}

/* Takes `l` off its list and leaves it pointing at itself, so removing it
 * again does nothing. */
static inline void list_remove(struct list *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
	list_init(l);
}

/* The first link of the list, or NULL when it is empty. */
static inline struct list *list_first(const struct list *head)
{
	return list_empty(head) ? NULL : head->next;
}

#endif
