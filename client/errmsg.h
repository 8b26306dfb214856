/*
 * errmsg.h: the per-thread error message of a client.
 *
 * Each thread keeps the message of its last failed call together with the
 * client it belongs to, named by the client's transport (every layer has
 * it), so raftlock_errmsg(client) returns the calling thread's last message
 * on that client. Messages are truncated to fit.
 */
#ifndef RAFTLOCK_ERRMSG_H
#define RAFTLOCK_ERRMSG_H

#include "raftlock.h"

struct transport;

#define ERRMSG_SIZE 512

/*
 * Records "<context>: <strerror(code)>" (and ": <detail>" when detail is not
 * NULL or empty) as the calling thread's message for client (which may be
 * NULL: the message of a failed open). Returns code, so a failing path can
 * end with `return errmsg_set(...)`.
 */
int errmsg_set(const struct transport *client, int code, const char *detail, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/*
 * Notes detail (copied) as what the calling thread's next errmsg_set() for
 * client with this code says when it is given no detail: a lower layer
 * knows why a wait failed (the TLS refusal of an address), the caller
 * knows what the call was.
 */
void errmsg_note(const struct transport *client, int code, const char *detail);

/* The calling thread's message for client; "no error" when its last
 * message is for another client or there was none. Never NULL. */
const char *errmsg_get(const struct transport *client);

#endif
