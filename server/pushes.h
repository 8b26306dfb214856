/*
 * pushes.h: where the final outcome of a queued acquire goes. Each target
 * names the connection and request id that last sent the acquire
 * (session, seq); a retry moves it. A target is registered when the
 * acquire is proposed, because a release applied right after the acquire
 * can grant it before the acquire's own completion runs: until the acquire
 * is answered, an outcome that arrives is kept in the target and becomes
 * the answer (service.c).
 *
 * The registry only stores: it never sends, and never looks inside a
 * connection (an opaque pointer here). Loop thread only; aborts on out of
 * memory (server rule).
 */
#ifndef RAFTLOCK_PUSHES_H
#define RAFTLOCK_PUSHES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "idmap.h"
#include "raftlock.pb-c.h"

struct service_conn;

struct push_target {
	uint64_t seq;
	struct service_conn *conn; /* NULL once the connection closed */
	uint64_t id;               /* the request id on that connection */
	bool answered;             /* the acquire's own answer went out */
	bool have_result;          /* an outcome arrived before that */
	Raftlock__Result result;   /* its tokens owned by the target */
	struct push_target *next;  /* the session's other targets */
};

struct pushes {
	struct idmap by_session; /* session id -> struct push_target * */
};

void pushes_init(struct pushes *p);
/* Frees every target. */
void pushes_close(struct pushes *p);

/* Registers (session, seq) -> (conn, id), or moves an existing target
 * there (a retry), marking it unanswered. */
void pushes_set(struct pushes *p, uint64_t session, uint64_t seq, struct service_conn *conn,
		uint64_t id);

/* The target of (session, seq), or NULL; borrowed until it is taken or
 * forgotten. */
struct push_target *pushes_find(struct pushes *p, uint64_t session, uint64_t seq);

/* Removes the target of (session, seq) and returns it (the caller frees
 * it with pushes_target_free()), or NULL. */
struct push_target *pushes_take(struct pushes *p, uint64_t session, uint64_t seq);

/* Keeps an outcome in the target (copying a set's tokens). */
void pushes_keep_result(struct push_target *t, const Raftlock__Result *res);

/* Frees a target that was taken. NULL is a no-op. */
void pushes_target_free(struct push_target *t);

/* Frees every target of the session (it ended). */
void pushes_forget_session(struct pushes *p, uint64_t session);

/* The connection closed: its targets stay, without a connection (the
 * client re-sends the acquire after reconnecting, and the retry moves
 * them). */
void pushes_forget_conn(struct pushes *p, const struct service_conn *conn);

/* Frees every target and returns the connections they named in *conns
 * (malloc'd, the caller frees it; NULL when none): one entry per target,
 * so a connection may be named several times. */
size_t pushes_drop_all(struct pushes *p, struct service_conn ***conns);

#endif
