/*
 * keepalive.h: the keepalive thread of a client.
 *
 * One thread serves all sessions of the client: every min(TTL)/3 it sends
 * one KeepAliveRequest naming every live session, and moves each renewed
 * session's validity to the SEND time of that request plus its TTL minus
 * the margin (session_validity_ms). It marks a session lost when its
 * validity passes or the server says it is gone, runs on_lost callbacks
 * (once per session, without the client lock), and settles the orphaned
 * requests of every session (session.h). A keepalive not answered within
 * half an interval makes the client leave that node (client_suspect); one
 * not answered within an interval is dropped and a new one sent.
 */
#ifndef RAFTLOCK_KEEPALIVE_H
#define RAFTLOCK_KEEPALIVE_H

#include "client.h"

/* Starts the thread (c->mu not held). RAFTLOCK_EINTERNAL if it cannot. */
int keepalive_start(raftlock_client *c);

/* Stops and joins it (c->mu not held, not from a callback). */
void keepalive_stop(raftlock_client *c);

#endif
