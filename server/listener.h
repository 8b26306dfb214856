/*
 * listener.h: a TCP listener on a configured HOST:PORT, for the client
 * service and the metrics endpoint. Loop thread only.
 */
#ifndef RAFTLOCK_LISTENER_H
#define RAFTLOCK_LISTENER_H

#include <stddef.h>
#include <uv.h>

/*
 * Initializes tcp on loop (tcp->data = data), binds it to `address` and
 * listens with `backlog`, accepting through cb. Returns 0, or
 * RAFTLOCK_ECONFIG (not HOST:PORT, or a name that does not resolve) or
 * RAFTLOCK_EIO (bind or listen failed; the handle is then closed), with a
 * message naming `option` and the address in err.
 */
int listener_start(uv_loop_t *loop, uv_tcp_t *tcp, void *data, const char *option,
		   const char *address, int backlog, uv_connection_cb cb, char *err, size_t errlen);

#endif
