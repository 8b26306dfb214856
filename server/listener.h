/*
 * listener.h: a TCP listener on a configured HOST:PORT, for the client
 * service and the metrics endpoint. Loop thread only.
 */
#ifndef RAFTLOCK_LISTENER_H
#define RAFTLOCK_LISTENER_H

#include <stdbool.h>
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

/*
 * Takes the connections a listener's owner cannot serve (no memory for
 * them, the owner closing) off it: one left pending would stop libuv
 * watching the listener for good (uv_accept() is what starts it again),
 * and the port would take no more connections. Each is accepted into tcp
 * and closed; while the last one is closing the next waits, and that
 * close calls the listener's accept callback cb again for it.
 */
struct listener_reject {
	uv_loop_t *loop;
	uv_stream_t *listener;
	uv_connection_cb cb;
	uv_tcp_t tcp;
	bool closing, waiting; /* tcp is closing; another connection waits */
};

void listener_reject_init(struct listener_reject *r, uv_loop_t *loop, uv_tcp_t *listener,
			  uv_connection_cb cb);

/* Accepts the pending connection of r's listener and closes it (from the
 * accept callback, status 0). */
void listener_reject(struct listener_reject *r);

#endif
