/* listener.c: see listener.h. */
#include "listener.h"

#include <netdb.h>
#include <stdio.h>

#include "address.h"
#include "config.h"
#include "raftlock.h"

void listener_reject_init(struct listener_reject *r, uv_loop_t *loop, uv_tcp_t *listener,
			  uv_connection_cb cb)
{
	*r = (struct listener_reject){.loop = loop, .listener = (uv_stream_t *)listener, .cb = cb};
}

static void reject_closed(uv_handle_t *h)
{
	struct listener_reject *r = h->data;
	r->closing = false;
	if (r->waiting && !uv_is_closing((uv_handle_t *)r->listener)) {
		r->waiting = false;
		r->cb(r->listener, 0);
	}
}

void listener_reject(struct listener_reject *r)
{
	if (r->closing) {
		r->waiting = true;
		return;
	}
	r->closing = true;
	uv_tcp_init(r->loop, &r->tcp);
	r->tcp.data = r;
	uv_accept(r->listener, (uv_stream_t *)&r->tcp);
	uv_close((uv_handle_t *)&r->tcp, reject_closed);
}

int listener_start(uv_loop_t *loop, uv_tcp_t *tcp, void *data, const char *option,
		   const char *address, int backlog, uv_connection_cb cb, char *err, size_t errlen)
{
	char host[CONFIG_ADDR_MAX], port[ADDRESS_PORT_MAX];
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	if (address_split(address, host, sizeof host, port) != 0) {
		snprintf(err, errlen, "%s %s: not HOST:PORT", option, address);
		return RAFTLOCK_ECONFIG;
	}
	int gai = getaddrinfo(host, port, &hints, &ai);
	if (gai != 0) {
		snprintf(err, errlen, "%s %s: %s", option, address, gai_strerror(gai));
		return RAFTLOCK_ECONFIG;
	}
	uv_tcp_init(loop, tcp);
	tcp->data = data;
	int rv = uv_tcp_bind(tcp, ai->ai_addr, 0);
	freeaddrinfo(ai);
	if (rv == 0)
		rv = uv_listen((uv_stream_t *)tcp, backlog, cb);
	if (rv != 0) {
		snprintf(err, errlen, "%s %s: %s", option, address, uv_strerror(rv));
		uv_close((uv_handle_t *)tcp, NULL);
		return RAFTLOCK_EIO;
	}
	return 0;
}
