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

#include <stddef.h>

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

/* Notes why a call of the calling thread failed with code, as a lower
 * layer knew it: the message a node sent with a RAFTLOCK_EPERM answer
 * ("identity 'alice' has no 'lock' on 'db/x'") or with a result a limit
 * refused (RAFTLOCK_ELIMIT, naming the limit), the address and reason of
 * a TLS refusal with RAFTLOCK_ETLS. The next errmsg_set of that code in
 * this thread without a detail of its own gives it as the detail. */
void errmsg_note(int code, const char *detail);

/* Drops the calling thread's pending note: a note lives only for the call
 * that made it. transport_submit() drops it as a call sends a request; a
 * call that consumes a failure without reporting it (0 for a close the
 * server no longer knows) drops it itself. */
void errmsg_drop_note(void);

/* Moves the calling thread's pending note (errmsg_note) to *code and
 * detail (len bytes), *code 0 when there is none: for a thread that ends
 * the call of another (the I/O thread, a blocking call's request). */
void errmsg_take_note(int *code, char *detail, size_t len);

/* The calling thread's message for client; "no error" when its last
 * message is for another client or there was none. Never NULL. */
const char *errmsg_get(const struct transport *client);

#endif
