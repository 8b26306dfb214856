/*
 * client.h: the client object, the top of the client's layers:
 *
 *   client.c      raftlock_client_* and raftlock_session_*: composes them
 *   lock.c        lock handles and raftlock_lock_*
 *   keepalive.c   the thread that renews the sessions
 *   session.c     sessions: sequences, validity, orphans, the registry
 *   transport.c   connection, request table, I/O thread, clocks
 *
 * Each layer calls only those below it; a lower layer reaches a higher
 * one only through a hook the higher one sets (transport_hooks.answered,
 * sessions.opened, sessions.freeing).
 */
#ifndef RAFTLOCK_CLIENT_H
#define RAFTLOCK_CLIENT_H

#include "keepalive.h"
#include "session.h"
#include "transport.h"

struct raftlock_client {
	struct transport t;
	struct sessions ss;
	struct keepalives ka;
};

#endif
