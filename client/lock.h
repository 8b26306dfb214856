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
	struct list link; /* in the session's locks */
	raftlock_session *session;
	char *name;
	struct raftlock_lock_options opts;
	uint64_t owner;
	uint64_t token; /* 0 when holding nothing */
	uint32_t count; /* nesting depth */
};

/* A ReleaseRequest envelope, ready but for its sequence header.
 * name is borrowed for the life of the message. */
struct lock_release_msg {
	Raftlock__Envelope env;
	Raftlock__ReleaseRequest req;
	Raftlock__Release rel;
};

void lock_release_msg_init(struct lock_release_msg *m, char *name, uint64_t owner);

/* Frees every handle of s (c->mu held). */
void lock_free_all(raftlock_session *s);

#endif
