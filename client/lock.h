/*
 * lock.h: lock handles. A handle is an owner (DESIGN.md rule 9): its id is
 * the client's random base plus a counter, so two handles never share one.
 * Handles live on their session's list; closing the session frees them.
 */
#ifndef RAFTLOCK_LOCK_H
#define RAFTLOCK_LOCK_H

#include <stdint.h>

#include "session.h"

struct raftlock_lock {
	struct raftlock_lock *prev, *next; /* in the session's list */
	raftlock_session *session;
	char *name;
	struct raftlock_lock_options opts;
	uint64_t owner;
	uint64_t token; /* 0 when holding nothing */
	uint32_t count; /* nesting depth */
};

/* Frees every handle of s (c->mu held). */
void lock_free_all(raftlock_session *s);

#endif
