/*
 * keepalive.h: the keepalive thread of a client.
 *
 * One thread serves all sessions of the client: every min(TTL)/3 it sends
 * one KeepAliveRequest naming every live session, and moves each renewed
 * session's validity to the SEND time of that request plus its TTL minus
 * the margin (session_validity_ms). It marks a session lost when its
 * validity passes or the server says it is gone, runs on_lost callbacks
 * (once per session, without the client lock), and settles the orphaned
 * requests of every session (session.h). Up to two keepalives are in
 * flight, so that a slow answer still counts; one not answered within
 * half an interval (at least 300 ms) makes the client leave that node
 * (client_suspect) and go on asking elsewhere.
 */
#ifndef RAFTLOCK_KEEPALIVE_H
#define RAFTLOCK_KEEPALIVE_H

#include "client.h"

/* Starts the thread (c->mu not held). RAFTLOCK_EINTERNAL if it cannot. */
int keepalive_start(raftlock_client *c);

/* Stops and joins it (c->mu not held, not from a callback). */
void keepalive_stop(raftlock_client *c);

#endif
