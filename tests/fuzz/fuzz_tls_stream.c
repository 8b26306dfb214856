/*
 * fuzz_tls_stream.c: libFuzzer target for the TLS engine (server/tls_stream.c)
 * as a stranger reaches it: before any key is agreed, every byte a peer
 * sends goes through OpenSSL's record and handshake parsers.
 *
 * Input: one control byte, then the bytes the peer sends. Control bit 0:
 * the engine is a client (the bytes answer its ClientHello) instead of a
 * server (the bytes are a ClientHello and what follows); bits 1-4: the
 * peer's write size minus one, in units of 16 bytes (the engine runs one
 * loop turn after each write, so records arrive cut at many places). The
 * peer then closes its side. Besides the sanitizers, it checks that the
 * engine reports the end of the connection exactly once (and nothing after
 * it), that its close callback runs, and that the loop then closes with no
 * handle left.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include "fuzz_tls_cert.h"
#include "fuzz_check.h"
#include "tls_ctx.h"
#include "tls_stream.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CTL_CLIENT 0x01
#define CTL_CHUNK_SHIFT 1
#define CTL_CHUNK_MASK 0x0f

static SSL_CTX *server_ctx, *client_ctx;

struct run {
	int ends;      /* on_read calls with nread < 0 */
	int after_end; /* on_read calls after that */
	bool closed;   /* close callback ran */
};

static void on_closed(struct tls_stream *ts)
{
	((struct run *)ts->data)->closed = true;
}

static void on_read(struct tls_stream *ts, ssize_t nread, const char *buf)
{
	(void)buf;
	struct run *r = ts->data;
	if (r->ends > 0)
		r->after_end++;
	if (nread < 0) {
		r->ends++;
		CHECK(tls_stream_error(ts)[0] != '\0');
		tls_stream_close(ts, on_closed);
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	char dir[64], cert[128], key[128], err[512];
	CHECK(fuzz_tls_write_files(dir) == 0);
	snprintf(cert, sizeof cert, "%s/cert.pem", dir);
	snprintf(key, sizeof key, "%s/key.pem", dir);
	struct tls_files server = {cert, key, cert}, client = {NULL, NULL, cert};
	if (tls_ctx_new(&server_ctx, TLS_ROLE_SERVER, &server, true, err, sizeof err) != 0 ||
	    tls_ctx_new(&client_ctx, TLS_ROLE_CLIENT, &client, false, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		abort();
	}
	unlink(cert);
	unlink(key);
	rmdir(dir);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t ctl = data[0];
	data++;
	size--;
	size_t chunk = 16 * (((ctl >> CTL_CHUNK_SHIFT) & CTL_CHUNK_MASK) + 1);
	bool client = ctl & CTL_CLIENT;

	uv_loop_t loop;
	CHECK(uv_loop_init(&loop) == 0);
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	uv_pipe_t pipe;
	CHECK(uv_pipe_init(&loop, &pipe, 0) == 0);
	CHECK(uv_pipe_open(&pipe, sv[0]) == 0);
	struct tls_stream ts;
	struct run r = {0};
	struct tls_stream_options o = {
		.role = client ? TLS_ROLE_CLIENT : TLS_ROLE_SERVER,
		.host = client ? "127.0.0.1" : NULL,
		.on_read = on_read,
	};
	CHECK(tls_stream_start(&ts, (uv_stream_t *)&pipe, client ? client_ctx : server_ctx, &o) ==
	      0);
	ts.data = &r;
	for (size_t off = 0; off < size && r.ends == 0; off += chunk) {
		size_t n = size - off < chunk ? size - off : chunk;
		CHECK(write(sv[1], data + off, n) == (ssize_t)n);
		uv_run(&loop, UV_RUN_NOWAIT);
	}
	shutdown(sv[1], SHUT_WR);
	uv_run(&loop, UV_RUN_DEFAULT);
	CHECK(r.ends == 1);
	CHECK(r.after_end == 0);
	CHECK(r.closed);
	CHECK(uv_loop_close(&loop) == 0);
	close(sv[1]);
	return 0;
}
