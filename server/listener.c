/* listener.c: see listener.h. */
#include "listener.h"

#include <netdb.h>
#include <stdio.h>

#include "address.h"
#include "config.h"
#include "raftlock.h"

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
