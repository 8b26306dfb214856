/* conn.c: see conn.h. */
#include "grow.h"
#include "conn.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "address.h"
#include "clock.h"
#include "codec.h"
#include "raftlock.h"

int conn_addr_parse(const char *text, struct conn_addr *out)
{
	char host[256], port[ADDRESS_PORT_MAX];
	if (address_split(text, host, sizeof host, port) != 0)
		return RAFTLOCK_EINVAL;
	struct conn_addr a = {
		.host = strdup(host),
		.port = strdup(port),
		.text = strdup(text),
	};
	if (a.host == NULL || a.port == NULL || a.text == NULL) {
		conn_addr_free(&a);
		return RAFTLOCK_ENOMEM;
	}
	*out = a;
	return 0;
}

void conn_addr_free(struct conn_addr *a)
{
	free(a->host);
	free(a->port);
	free(a->text);
	a->host = a->port = a->text = NULL;
}

void conn_init(struct conn *c)
{
	memset(c, 0, sizeof *c);
	c->fd = -1;
	c->state = CONN_CLOSED;
	frame_reader_init(&c->reader, RAFTLOCK_FRAME_MAX);
}

int conn_start(struct conn *c, const struct conn_addr *a)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICSERV,
	};
	struct addrinfo *res = NULL;
	int rv = getaddrinfo(a->host, a->port, &hints, &res);
	if (rv == EAI_MEMORY)
		return RAFTLOCK_ENOMEM;
	if (rv != 0 || res == NULL)
		return RAFTLOCK_ECONNECTION;
	int fd = socket(res->ai_family, res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			res->ai_protocol);
	if (fd < 0) {
		rv = errno == ENOMEM || errno == ENOBUFS ? RAFTLOCK_ENOMEM : RAFTLOCK_ECONNECTION;
		goto err_res;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
		c->state = CONN_OPEN;
	} else if (errno == EINPROGRESS) {
		c->state = CONN_CONNECTING;
	} else {
		rv = RAFTLOCK_ECONNECTION;
		goto err_fd;
	}
	freeaddrinfo(res);
	c->fd = fd;
	return 0;

err_fd:
	close(fd);
err_res:
	freeaddrinfo(res);
	return rv;
}

int conn_finish_connect(struct conn *c)
{
	int err = 0;
	socklen_t len = sizeof err;
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)
		return RAFTLOCK_ECONNECTION;
	c->state = CONN_OPEN;
	return 0;
}

int conn_queue(struct conn *c, const uint8_t *frame, size_t n)
{
	if (c->out_off > 0 && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (grow(&c->out, &c->out_cap, c->out_len + n, 4096, 1) != 0)
		return RAFTLOCK_ENOMEM;
	memcpy(c->out + c->out_len, frame, n);
	c->out_len += n;
	return 0;
}

int conn_flush(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return RAFTLOCK_ECONNECTION;
		}
		c->out_off += (size_t)w;
	}
	c->out_off = c->out_len = 0;
	return 0;
}

bool conn_wants_write(const struct conn *c)
{
	return c->state == CONN_CONNECTING || c->out_off < c->out_len;
}

int conn_read(struct conn *c)
{
	uint8_t buf[16384];
	for (int i = 0; i < 64; i++) {
		ssize_t r = recv(c->fd, buf, sizeof buf, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return RAFTLOCK_ECONNECTION;
		}
		if (r == 0)
			return RAFTLOCK_ECONNECTION;
		int rv = frame_reader_feed(&c->reader, buf, (size_t)r);
		if (rv != 0)
			return rv;
		if ((size_t)r < sizeof buf)
			return 0;
	}
	return 0;
}

int conn_next(struct conn *c, Raftlock__Envelope **env)
{
	const uint8_t *payload;
	size_t n;
	int rv = frame_reader_next(&c->reader, &payload, &n);
	if (rv <= 0)
		return rv;
	rv = codec_decode_envelope(payload, n, env);
	return rv == 0 ? 1 : rv;
}

void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->state = CONN_CLOSED;
	free(c->out);
	c->out = NULL;
	c->out_off = c->out_len = c->out_cap = 0;
	frame_reader_close(&c->reader);
	frame_reader_init(&c->reader, RAFTLOCK_FRAME_MAX);
}

/* One poll step of conn_exchange(): returns 1 when a reply is in *reply. */
static int conn_exchange_step(struct conn *c, short revents, uint64_t id,
			      Raftlock__Envelope **reply)
{
	int rv;
	if (c->state == CONN_CONNECTING) {
		if ((rv = conn_finish_connect(c)) != 0)
			return rv;
	}
	if (revents & POLLOUT) {
		if ((rv = conn_flush(c)) != 0)
			return rv;
	}
	if (!(revents & (POLLIN | POLLHUP | POLLERR)))
		return 0;
	if ((rv = conn_read(c)) != 0)
		return rv;
	Raftlock__Envelope *env;
	while ((rv = conn_next(c, &env)) == 1) {
		if (env->id == id && env->body_case == RAFTLOCK__ENVELOPE__BODY_RESPONSE) {
			*reply = env;
			return 1;
		}
		raftlock__envelope__free_unpacked(env, NULL);
	}
	return rv;
}

int conn_exchange(const struct conn_addr *a, const uint8_t *frame, size_t n, uint64_t id,
		  unsigned timeout_ms, Raftlock__Envelope **reply)
{
	struct conn c;
	uint64_t deadline = clock_mono_ms() + timeout_ms;
	conn_init(&c);
	int rv = conn_start(&c, a);
	if (rv != 0)
		goto out;
	if ((rv = conn_queue(&c, frame, n)) != 0)
		goto out;
	for (;;) {
		uint64_t now = clock_mono_ms();
		if (now >= deadline) {
			rv = c.state == CONN_CONNECTING ? RAFTLOCK_ECONNECTION : RAFTLOCK_ETIMEDOUT;
			goto out;
		}
		struct pollfd p = {
			.fd = c.fd,
			.events = (short)(POLLIN | (conn_wants_write(&c) ? POLLOUT : 0)),
		};
		int pr = poll(&p, 1, (int)(deadline - now));
		if (pr < 0 && errno != EINTR) {
			rv = RAFTLOCK_ECONNECTION;
			goto out;
		}
		if (pr <= 0)
			continue;
		rv = conn_exchange_step(&c, p.revents, id, reply);
		if (rv == 1) {
			rv = 0;
			goto out;
		}
		if (rv < 0)
			goto out;
	}
out:
	conn_close(&c);
	frame_reader_close(&c.reader);
	return rv;
}
