/* test_tls_stream.c: the TLS engine (server/tls_stream.c, the real file)
 * with real OpenSSL over real loopback TCP: a server and a client engine
 * (or a raw TCP client playing a broken one) on one loop, with the
 * certificates of tls_certs.h. Every test ends with uv_loop_close() == 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "tls_certs.h"
#include "tls_ctx.h"
#include "tls_stream.h"

/* ---------------------------------------------------------------- peers */

struct peer {
	uv_tcp_t tcp;
	struct tls_stream ts;
	bool raw;  /* plain TCP, no engine */
	bool echo; /* write back what is read */
	bool pause_once;
	bool handshook;
	bool closed;
	char *got;
	size_t got_len, got_cap, expect;
	int end;         /* the status on_read ended with, 0 if none */
	char error[256]; /* tls_stream_error() then */
	char cn[256];    /* tls_stream_peer_cn() at the handshake */
	int writes_done, writes_failed;
	int writes_at_once;                /* TLS_STREAM_WRITTEN: done, never called back */
	uint64_t started_ns, handshake_ns; /* uv_hrtime() at start, at handshake */
};

static uv_loop_t loop;
static uv_tcp_t listener;
static struct peer srv, cli;
static SSL_CTX *srv_ctx, *cli_ctx;
static unsigned srv_timeout_ms;
static uv_timer_t resume_timer;

static void peer_closed(struct tls_stream *ts)
{
	struct peer *p = ts->data;
	p->closed = true;
}

static void raw_closed(uv_handle_t *h)
{
	struct peer *p = h->data;
	p->closed = true;
}

static void peer_close(struct peer *p)
{
	if (p->raw)
		uv_close((uv_handle_t *)&p->tcp, raw_closed);
	else
		tls_stream_close(&p->ts, peer_closed);
}

struct echo_write {
	struct tls_stream_write req;
	char data[];
};

static void echo_done(struct tls_stream_write *req, int status)
{
	struct peer *p = req->data;
	if (status == 0)
		p->writes_done++;
	else
		p->writes_failed++;
	free(req);
}

static void resume_cb(uv_timer_t *t)
{
	tls_stream_read_start(&((struct peer *)t->data)->ts);
	uv_close((uv_handle_t *)t, NULL);
}

static void on_read(struct tls_stream *ts, ssize_t nread, const char *buf)
{
	struct peer *p = ts->data;
	if (nread < 0) {
		p->end = (int)nread;
		snprintf(p->error, sizeof p->error, "%s", tls_stream_error(ts));
		peer_close(p);
		return;
	}
	if (p->echo) {
		struct echo_write *w = malloc(sizeof *w + (size_t)nread);
		assert_non_null(w);
		memcpy(w->data, buf, (size_t)nread);
		w->req.data = p;
		uv_buf_t b = uv_buf_init(w->data, (unsigned)nread);
		int rv = tls_stream_write(&w->req, ts, &b, 1, echo_done);
		if (rv == TLS_STREAM_WRITTEN) {
			p->writes_at_once++;
			free(w); /* a callback for it now would be a use after free */
		} else {
			assert_int_equal(rv, 0);
		}
	} else {
		if (p->got_len + (size_t)nread > p->got_cap) {
			p->got_cap = (p->got_len + (size_t)nread) * 2;
			p->got = realloc(p->got, p->got_cap);
			assert_non_null(p->got);
		}
		memcpy(p->got + p->got_len, buf, (size_t)nread);
		p->got_len += (size_t)nread;
		if (p->expect != 0 && p->got_len >= p->expect)
			peer_close(p); /* close_notify to the server */
	}
	if (p->pause_once) {
		/* Back-pressure: nothing more until the timer resumes us. */
		p->pause_once = false;
		tls_stream_read_stop(ts);
		uv_timer_init(&loop, &resume_timer);
		resume_timer.data = p;
		uv_timer_start(&resume_timer, resume_cb, 50, 0);
	}
}

static void on_handshake(struct tls_stream *ts)
{
	struct peer *p = ts->data;
	p->handshook = true;
	p->handshake_ns = uv_hrtime();
	snprintf(p->cn, sizeof p->cn, "%s", tls_stream_peer_cn(ts));
}

static void accept_cb(uv_stream_t *server, int status)
{
	assert_int_equal(status, 0);
	uv_tcp_init(&loop, &srv.tcp);
	assert_int_equal(uv_accept(server, (uv_stream_t *)&srv.tcp), 0);
	struct tls_stream_options o = {.role = TLS_ROLE_SERVER,
				       .handshake_timeout_ms = srv_timeout_ms,
				       .on_handshake = on_handshake,
				       .on_read = on_read};
	assert_int_equal(tls_stream_start(&srv.ts, (uv_stream_t *)&srv.tcp, srv_ctx, &o), 0);
	srv.ts.data = &srv;
	uv_close((uv_handle_t *)&listener, NULL); /* one connection per test */
}

/* What the client does once connected. */
static void (*client_connected)(void);

static void connect_cb(uv_connect_t *req, int status)
{
	(void)req;
	assert_int_equal(status, 0);
	client_connected();
}

static int setup(void **state)
{
	(void)state;
	memset(&srv, 0, sizeof srv);
	memset(&cli, 0, sizeof cli);
	srv.tcp.data = &srv;
	cli.tcp.data = &cli;
	srv_timeout_ms = 0;
	srv_ctx = cli_ctx = NULL;
	assert_int_equal(uv_loop_init(&loop), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(srv.got);
	free(cli.got);
	SSL_CTX_free(srv_ctx);
	SSL_CTX_free(cli_ctx);
	return 0;
}

static uv_connect_t connect_req;

/* Runs a connection between srv and cli until both are closed. */
static void run(void)
{
	struct sockaddr_in addr;
	uv_ip4_addr("127.0.0.1", 0, &addr);
	uv_tcp_init(&loop, &listener);
	assert_int_equal(uv_tcp_bind(&listener, (struct sockaddr *)&addr, 0), 0);
	assert_int_equal(uv_listen((uv_stream_t *)&listener, 4, accept_cb), 0);
	int len = sizeof addr;
	uv_tcp_getsockname(&listener, (struct sockaddr *)&addr, &len);
	uv_tcp_init(&loop, &cli.tcp);
	assert_int_equal(
		uv_tcp_connect(&connect_req, &cli.tcp, (struct sockaddr *)&addr, connect_cb), 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_true(srv.closed);
	assert_true(cli.closed);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void start_client(void)
{
	struct tls_stream_options o = {.role = TLS_ROLE_CLIENT,
				       .host = "127.0.0.1",
				       .on_handshake = on_handshake,
				       .on_read = on_read};
	cli.started_ns = uv_hrtime();
	assert_int_equal(tls_stream_start(&cli.ts, (uv_stream_t *)&cli.tcp, cli_ctx, &o), 0);
	cli.ts.data = &cli;
}

/* ------------------------------------------------------------ the data */

static char *payload;
static size_t payload_len;

static void make_payload(size_t n)
{
	payload = malloc(n);
	assert_non_null(payload);
	for (size_t i = 0; i < n; i++)
		payload[i] = (char)(i * 7 + i / 251);
	payload_len = n;
}

static void client_writes_odd_sizes(void)
{
	start_client();
	/* Written at once, before the handshake: queued, then in order. */
	size_t off = 0, step = 1;
	while (off < payload_len) {
		size_t n = step < payload_len - off ? step : payload_len - off;
		struct echo_write *w = malloc(sizeof *w);
		assert_non_null(w);
		w->req.data = &cli;
		uv_buf_t b[2] = {uv_buf_init(payload + off, (unsigned)(n / 2)),
				 uv_buf_init(payload + off + n / 2, (unsigned)(n - n / 2))};
		assert_int_equal(tls_stream_write(&w->req, &cli.ts, b, 2, echo_done), 0);
		off += n;
		step = step * 3 + 1; /* 1, 4, 13, 40, ... odd splits */
		if (step > 70000)
			step = 17;
	}
	cli.expect = payload_len;
}

static void check_echo(void)
{
	assert_true(srv.handshook);
	assert_true(cli.handshook);
	assert_int_equal(cli.got_len, payload_len);
	assert_memory_equal(cli.got, payload, payload_len);
	assert_int_equal(cli.writes_failed, 0);
	/* The client closed with close_notify. */
	assert_int_equal(srv.end, UV_EOF);
	assert_non_null(strstr(srv.error, "close_notify"));
	free(payload);
}

/* Mutual TLS: both sides verify; bytes written before the handshake at odd
 * sizes and in two buffers each come back whole and in order; the server
 * learns the client's common name. */
static void echo_odd_sizes(void **state)
{
	(void)state;
	srv_ctx = tls_certs_server_ctx(true);
	cli_ctx = tls_certs_client_ctx("client", "ca.pem");
	srv.echo = true;
	make_payload(300000);
	client_connected = client_writes_odd_sizes;
	run();
	check_echo();
	assert_string_equal(srv.cn, "client-a");
	assert_string_equal(cli.cn, "server");
	printf("measure: mutual TLS 1.3 handshake (P-256) on loopback, both ends on one loop: "
	       "%.2f ms\n",
	       (double)(cli.handshake_ns - cli.started_ns) / 1e6);
	assert_true(cli.writes_done > 10);
	/* Small echoes go to the kernel at once: no callback, no loop turn. */
	assert_true(srv.writes_at_once > 0);
}

static void client_writes_big(void)
{
	start_client();
	struct echo_write *w = malloc(sizeof *w);
	assert_non_null(w);
	w->req.data = &cli;
	uv_buf_t b = uv_buf_init(payload, (unsigned)payload_len);
	assert_int_equal(tls_stream_write(&w->req, &cli.ts, &b, 1, echo_done), 0);
	cli.expect = payload_len;
}

/* 3 MiB in one write, echoed back; the server stops reading once for 50 ms
 * and loses nothing. A server-only context: the client shows no cert. */
static void large_payload(void **state)
{
	(void)state;
	srv_ctx = tls_certs_server_ctx(false);
	cli_ctx = tls_certs_client_ctx(NULL, "ca.pem");
	srv.echo = true;
	srv.pause_once = true;
	make_payload(3u << 20);
	client_connected = client_writes_big;
	run();
	check_echo();
	assert_string_equal(srv.cn, "");
	assert_int_equal(cli.writes_done, 1);
}

/* A client certificate from another CA: the server refuses it and says why. */
static void client_from_other_ca(void **state)
{
	(void)state;
	srv_ctx = tls_certs_server_ctx(true);
	cli_ctx = tls_certs_client_ctx("stranger", "ca.pem");
	client_connected = start_client;
	run();
	assert_false(srv.handshook);
	assert_int_equal(srv.end, UV_EPROTO);
	assert_non_null(strstr(srv.error, "certificate verify failed"));
	assert_non_null(strstr(cli.error, "alert"));
}

/* No client certificate against a mutual server. */
static void client_without_cert(void **state)
{
	(void)state;
	srv_ctx = tls_certs_server_ctx(true);
	cli_ctx = tls_certs_client_ctx(NULL, "ca.pem");
	client_connected = start_client;
	run();
	assert_false(srv.handshook);
	assert_int_equal(srv.end, UV_EPROTO);
	assert_non_null(strstr(srv.error, "did not return a certificate"));
	assert_int_not_equal(cli.end, 0);
}

/* nul-cn.pem and .key: a certificate of ca.pem whose common name holds a
 * NUL byte, "raftlock-node-2\0x" (the openssl command cannot make one). */
static void make_nul_cn_cert(void)
{
	FILE *f = fopen(tls_certs_path("ca.key"), "r");
	assert_non_null(f);
	EVP_PKEY *ca_key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(f = fopen(tls_certs_path("ca.pem"), "r"));
	X509 *ca = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	assert_true(ca_key != NULL && ca != NULL && key != NULL && x != NULL);
	static const char cn[] = "raftlock-node-2\0x";
	assert_int_equal(X509_set_version(x, 2), 1);
	assert_int_equal(ASN1_INTEGER_set(X509_get_serialNumber(x), 4242), 1);
	assert_non_null(X509_gmtime_adj(X509_getm_notBefore(x), -60));
	assert_non_null(X509_gmtime_adj(X509_getm_notAfter(x), 86400));
	assert_int_equal(X509_set_pubkey(x, key), 1);
	assert_int_equal(X509_NAME_add_entry_by_NID(X509_get_subject_name(x), NID_commonName,
						    MBSTRING_UTF8, (const unsigned char *)cn,
						    (int)sizeof cn - 1, -1, 0),
			 1);
	assert_int_equal(X509_set_issuer_name(x, X509_get_subject_name(ca)), 1);
	assert_true(X509_sign(x, ca_key, EVP_sha256()) > 0);
	assert_non_null(f = fopen(tls_certs_path("nul-cn.pem"), "w"));
	assert_int_equal(PEM_write_X509(f, x), 1);
	fclose(f);
	assert_non_null(f = fopen(tls_certs_path("nul-cn.key"), "w"));
	assert_int_equal(PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL), 1);
	fclose(f);
	X509_free(x);
	X509_free(ca);
	EVP_PKEY_free(key);
	EVP_PKEY_free(ca_key);
}

/* A client certificate of the right CA whose common name has a NUL byte
 * in it is no name at all: read up to the NUL it would pass for member
 * 2's (raftlock-node-2), and every check by name (the raft port's
 * members, joins, readiness) would take it so. */
static void client_cn_with_nul(void **state)
{
	(void)state;
	make_nul_cn_cert();
	srv_ctx = tls_certs_server_ctx(true);
	cli_ctx = tls_certs_client_ctx("nul-cn", "ca.pem");
	srv.echo = true;
	make_payload(1000);
	client_connected = client_writes_odd_sizes;
	run();
	check_echo();
	assert_true(srv.handshook);
	assert_string_equal(srv.cn, "");
}

/* The client trusts another CA: it refuses the server. */
static void server_from_other_ca(void **state)
{
	(void)state;
	srv_ctx = tls_certs_server_ctx(false);
	cli_ctx = tls_certs_client_ctx(NULL, "other-ca.pem");
	client_connected = start_client;
	run();
	assert_false(cli.handshook);
	assert_int_equal(cli.end, UV_EPROTO);
	assert_non_null(strstr(cli.error, "certificate verify failed"));
	/* The verdict of the chain check ("self-signed certificate in
	 * certificate chain": the server sends its CA along). */
	assert_non_null(strstr(cli.error, "certificate chain"));
	assert_false(srv.handshook);
	assert_non_null(strstr(srv.error, "unknown ca"));
}

static void start_client_wrong_host(void)
{
	struct tls_stream_options o = {.role = TLS_ROLE_CLIENT,
				       .host = "db.example.com",
				       .on_handshake = on_handshake,
				       .on_read = on_read};
	assert_int_equal(tls_stream_start(&cli.ts, (uv_stream_t *)&cli.tcp, cli_ctx, &o), 0);
	cli.ts.data = &cli;
}

/* A certificate for other names than the one the client expects. */
static void wrong_host(void **state)
{
	(void)state;
	srv_ctx = tls_certs_server_ctx(false);
	cli_ctx = tls_certs_client_ctx(NULL, "ca.pem");
	client_connected = start_client_wrong_host;
	run();
	assert_int_equal(cli.end, UV_EPROTO);
	assert_non_null(strstr(cli.error, "hostname mismatch"));
}

/* ----------------------------------------------------- raw TCP clients */

static const char *raw_bytes;
static size_t raw_len;
static bool raw_close_after_write;
static uv_write_t raw_write;

static void raw_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	(void)suggested;
	static char b[4096];
	*buf = uv_buf_init(b, sizeof b);
}

static void raw_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	(void)buf;
	struct peer *p = s->data;
	if (nread < 0) {
		p->end = (int)nread;
		peer_close(p);
	}
}

static void raw_written(uv_write_t *w, int status)
{
	(void)w;
	(void)status;
	if (raw_close_after_write)
		peer_close(&cli);
}

static void raw_client(void)
{
	cli.raw = true;
	uv_read_start((uv_stream_t *)&cli.tcp, raw_alloc, raw_read);
	if (raw_len == 0) {
		if (raw_close_after_write)
			peer_close(&cli);
		return;
	}
	uv_buf_t b = uv_buf_init((char *)raw_bytes, (unsigned)raw_len);
	assert_int_equal(uv_write(&raw_write, (uv_stream_t *)&cli.tcp, &b, 1, raw_written), 0);
}

/* The first bytes of a TLS 1.2+ ClientHello record, cut short. */
static const char hello_start[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";

/* The peer closes in the middle of its ClientHello. */
static void closed_mid_handshake(void **state)
{
	(void)state;
	srv_ctx = tls_certs_server_ctx(true);
	raw_bytes = hello_start;
	raw_len = sizeof hello_start - 1;
	raw_close_after_write = true;
	client_connected = raw_client;
	run();
	assert_int_equal(srv.end, UV_ECONNABORTED);
	assert_non_null(strstr(srv.error, "during the TLS handshake"));
}

/* A truncated ClientHello and then silence: the deadline closes it. */
static void slow_loris(void **state)
{
	(void)state;
	srv_ctx = tls_certs_server_ctx(true);
	srv_timeout_ms = 200;
	raw_bytes = hello_start;
	raw_len = sizeof hello_start - 1;
	raw_close_after_write = false;
	client_connected = raw_client;
	uint64_t t0 = uv_hrtime();
	run();
	uint64_t ms = (uv_hrtime() - t0) / 1000000;
	assert_int_equal(srv.end, UV_ETIMEDOUT);
	assert_non_null(strstr(srv.error, "not done within 200 ms"));
	assert_true(ms >= 190 && ms < 2000);
	assert_int_equal(cli.end, UV_EOF); /* the server closed it */
}

/* Bytes that are no TLS at all. */
static void garbage(void **state)
{
	(void)state;
	srv_ctx = tls_certs_server_ctx(false);
	raw_bytes = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	raw_len = strlen(raw_bytes);
	raw_close_after_write = false;
	client_connected = raw_client;
	run();
	assert_int_equal(srv.end, UV_EPROTO);
	assert_non_null(strstr(srv.error, "TLS handshake failed"));
}

/* Writes accepted during the handshake and closed before it completes are
 * called back once each, with UV_ECANCELED; later writes are refused. */
static void client_closes_at_once(void)
{
	start_client();
	static char data[100];
	for (int i = 0; i < 3; i++) {
		struct echo_write *w = malloc(sizeof *w);
		assert_non_null(w);
		w->req.data = &cli;
		uv_buf_t b = uv_buf_init(data, sizeof data);
		assert_int_equal(tls_stream_write(&w->req, &cli.ts, &b, 1, echo_done), 0);
	}
	assert_int_equal(tls_stream_write_queue_size(&cli.ts), 300);
	peer_close(&cli);
	struct tls_stream_write w;
	uv_buf_t b = uv_buf_init(data, sizeof data);
	assert_int_equal(tls_stream_write(&w, &cli.ts, &b, 1, echo_done), UV_EPIPE);
}

static void cancel_on_close(void **state)
{
	(void)state;
	srv_ctx = tls_certs_server_ctx(false);
	cli_ctx = tls_certs_client_ctx(NULL, "ca.pem");
	client_connected = client_closes_at_once;
	run();
	assert_int_equal(cli.writes_failed, 3);
	assert_int_equal(cli.writes_done, 0);
	assert_int_not_equal(srv.end, 0);
}

static int tls_group_setup(void **state)
{
	(void)state;
	return tls_certs_make();
}

static int tls_group_teardown(void **state)
{
	(void)state;
	return tls_certs_remove();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(echo_odd_sizes, setup, teardown),
		cmocka_unit_test_setup_teardown(large_payload, setup, teardown),
		cmocka_unit_test_setup_teardown(client_from_other_ca, setup, teardown),
		cmocka_unit_test_setup_teardown(client_without_cert, setup, teardown),
		cmocka_unit_test_setup_teardown(client_cn_with_nul, setup, teardown),
		cmocka_unit_test_setup_teardown(server_from_other_ca, setup, teardown),
		cmocka_unit_test_setup_teardown(wrong_host, setup, teardown),
		cmocka_unit_test_setup_teardown(closed_mid_handshake, setup, teardown),
		cmocka_unit_test_setup_teardown(slow_loris, setup, teardown),
		cmocka_unit_test_setup_teardown(garbage, setup, teardown),
		cmocka_unit_test_setup_teardown(cancel_on_close, setup, teardown),
	};
	return cmocka_run_group_tests(tests, tls_group_setup, tls_group_teardown);
}
