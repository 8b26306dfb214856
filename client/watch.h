/*
 * watch.h: the watch layer, on the transport (client.h): raftlock_watch()
 * and raftlock_watch_cancel(). A watch is one stream request
 * (transport_on_stream) whose frame is rewritten after each delivered
 * event to resume from its position, so that the transport's re-send on a
 * new connection picks up where the application is. Events are handed to
 * the application through deferred callbacks (transport_defer), in the
 * order the node sent them.
 */
#ifndef RAFTLOCK_CLIENT_WATCH_H
#define RAFTLOCK_CLIENT_WATCH_H

#include "raftlock.h"

/* Ends w's stream (the node is told, the client's slot freed) and runs no
 * more of its callbacks, without freeing it: raftlock_watch_cancel() still
 * does. For a layer that stops listening from inside the callback (an
 * observer out of memory). Any thread. */
void watch_halt(raftlock_watch_handle *w);

#endif
