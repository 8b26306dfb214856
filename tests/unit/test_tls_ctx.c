/*
 * test_tls_ctx: the contexts of proto/tls_ctx.c decide who may talk to whom.
 * Certificates come from deploy/make-certs (two CAs, and one client
 * certificate made under faketime so that it has expired); the handshakes
 * run in memory between two SSL objects joined by a BIO pair.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/err.h>

#include "tls_ctx.h"

static char dir[64];
static char other[80]; /* a second CA and its certificates */

static const char *path(const char *d, const char *file)
{
	static char bufs[8][160];
	static int next;
	char *b = bufs[next++ % 8];
	snprintf(b, sizeof bufs[0], "%s/%s", d, file);
	return b;
}

static int make_certs(void **state)
{
	(void)state;
	char cmd[768];
	snprintf(dir, sizeof dir, "/tmp/raftlock-tls-XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(other, sizeof other, "%s/other", dir);
	snprintf(cmd, sizeof cmd,
		 "%s/deploy/make-certs %s --nodes 2 --client alice >/dev/null && "
		 "%s/deploy/make-certs %s --nodes 1 --client mallory >/dev/null && "
		 /* libfaketime itself: the faketime wrapper's named semaphores
		  * collide between tests that run at once */
		 "LD_PRELOAD=$(ls /usr/lib/*/faketime/libfaketime.so.1 | head -n 1) "
		 "FAKETIME='@2020-01-01 00:00:00' %s/deploy/make-certs %s --nodes 0 "
		 "--client old --days 1 >/dev/null",
		 RAFTLOCK_SOURCE_DIR, dir, RAFTLOCK_SOURCE_DIR, other, RAFTLOCK_SOURCE_DIR, dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int remove_certs(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static SSL_CTX *server_ctx(const char *d, int node, bool mutual)
{
	char cert[16], key[16];
	snprintf(cert, sizeof cert, "node-%d.pem", node);
	snprintf(key, sizeof key, "node-%d.key", node);
	struct tls_files f = {path(d, cert), path(d, key), path(d, "ca.pem")};
	SSL_CTX *ctx = NULL;
	char err[256];
	assert_int_equal(tls_ctx_new(&ctx, TLS_ROLE_SERVER, &f, mutual, err, sizeof err), 0);
	return ctx;
}

/* A client trusting ca_dir's CA, presenting cert_dir/client-NAME when name. */
static SSL_CTX *client_ctx(const char *ca_dir, const char *cert_dir, const char *name)
{
	char cert[32], key[32];
	snprintf(cert, sizeof cert, "client-%s.pem", name ? name : "");
	snprintf(key, sizeof key, "client-%s.key", name ? name : "");
	struct tls_files f = {name ? path(cert_dir, cert) : NULL, name ? path(cert_dir, key) : NULL,
			      path(ca_dir, "ca.pem")};
	SSL_CTX *ctx = NULL;
	char err[256];
	assert_int_equal(tls_ctx_new(&ctx, TLS_ROLE_CLIENT, &f, false, err, sizeof err), 0);
	return ctx;
}

/*
 * Runs a handshake in memory; returns 0 when both sides finished, else -1
 * with the client's verify result in *verify (X509_V_OK when the server was
 * fine and the server refused the client).
 */
static int handshake(SSL_CTX *sctx, SSL_CTX *cctx, const char *host, long *verify)
{
	SSL *s = SSL_new(sctx), *c = SSL_new(cctx);
	BIO *sb, *cb;
	assert_int_equal(BIO_new_bio_pair(&sb, 0, &cb, 0), 1);
	SSL_set_bio(s, sb, sb);
	SSL_set_bio(c, cb, cb);
	SSL_set_accept_state(s);
	SSL_set_connect_state(c);
	assert_int_equal(tls_ctx_expect_host(c, host), 0);
	int rs = 0, rc = 0, failed = 0;
	for (int i = 0; i < 20 && !failed && (rs != 1 || rc != 1); i++) {
		if (rc != 1) {
			rc = SSL_do_handshake(c);
			int e = SSL_get_error(c, rc);
			failed |= rc != 1 && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE;
		}
		if (rs != 1) {
			rs = SSL_do_handshake(s);
			int e = SSL_get_error(s, rs);
			failed |= rs != 1 && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE;
		}
	}
	/* TLS 1.3: the server judges the client's certificate after the
	 * client thinks it is done; a refusal shows on the client's next read. */
	if (!failed && rs == 1 && rc == 1) {
		char byte;
		assert_int_equal(SSL_write(s, "x", 1), 1);
		failed = SSL_read(c, &byte, 1) != 1;
	}
	*verify = SSL_get_verify_result(c);
	SSL_free(s);
	SSL_free(c);
	ERR_clear_error();
	return failed ? -1 : 0;
}

static void test_server_and_client_agree(void **state)
{
	(void)state;
	SSL_CTX *s = server_ctx(dir, 1, true), *c = client_ctx(dir, dir, "alice");
	long v;
	assert_int_equal(handshake(s, c, "127.0.0.1", &v), 0);
	assert_int_equal(handshake(s, c, "localhost", &v), 0);
	assert_int_equal(handshake(s, c, "node-1", &v), 0);
	SSL_CTX_free(s);
	SSL_CTX_free(c);
}

static void test_client_refuses_wrong_name_and_foreign_server(void **state)
{
	(void)state;
	SSL_CTX *s = server_ctx(dir, 1, false), *c = client_ctx(dir, dir, NULL);
	long v;
	assert_int_equal(handshake(s, c, "node-2", &v), -1);
	assert_int_equal(v, X509_V_ERR_HOSTNAME_MISMATCH);
	assert_int_equal(handshake(s, c, "127.0.0.2", &v), -1);
	assert_int_equal(v, X509_V_ERR_IP_ADDRESS_MISMATCH);
	SSL_CTX *foreign = server_ctx(other, 1, false);
	assert_int_equal(handshake(foreign, c, "127.0.0.1", &v), -1);
	/* The server sends its CA along (OpenSSL builds the chain). */
	assert_true(v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
		    v == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN);
	/* Server-only TLS: a client without a certificate is welcome. */
	assert_int_equal(handshake(s, c, "127.0.0.1", &v), 0);
	SSL_CTX_free(foreign);
	SSL_CTX_free(s);
	SSL_CTX_free(c);
}

static void test_mutual_server_refuses_clients(void **state)
{
	(void)state;
	SSL_CTX *s = server_ctx(dir, 1, true);
	SSL_CTX *none = client_ctx(dir, dir, NULL);
	SSL_CTX *stranger = client_ctx(dir, other, "mallory");
	SSL_CTX *expired = client_ctx(dir, dir, "old");
	long v;
	assert_int_equal(handshake(s, none, "127.0.0.1", &v), -1);
	assert_int_equal(v, X509_V_OK); /* the server refused, not the client */
	assert_int_equal(handshake(s, stranger, "127.0.0.1", &v), -1);
	assert_int_equal(handshake(s, expired, "127.0.0.1", &v), -1);
	SSL_CTX_free(s);
	SSL_CTX_free(none);
	SSL_CTX_free(stranger);
	SSL_CTX_free(expired);
}

static void test_bad_settings_are_named(void **state)
{
	(void)state;
	SSL_CTX *ctx = (SSL_CTX *)0x1;
	char err[512];
	struct tls_files none = {NULL, NULL, NULL};
	assert_int_equal(tls_ctx_new(&ctx, TLS_ROLE_SERVER, &none, false, err, sizeof err), -1);
	assert_non_null(strstr(err, "needs a certificate"));

	struct tls_files no_ca = {path(dir, "node-1.pem"), path(dir, "node-1.key"), NULL};
	assert_int_equal(tls_ctx_new(&ctx, TLS_ROLE_SERVER, &no_ca, true, err, sizeof err), -1);
	assert_non_null(strstr(err, "CA file"));

	struct tls_files missing = {path(dir, "nope.pem"), path(dir, "node-1.key"), NULL};
	assert_int_equal(tls_ctx_new(&ctx, TLS_ROLE_SERVER, &missing, false, err, sizeof err), -1);
	assert_non_null(strstr(err, "nope.pem"));

	struct tls_files mismatch = {path(dir, "node-1.pem"), path(dir, "node-2.key"), NULL};
	assert_int_equal(tls_ctx_new(&ctx, TLS_ROLE_SERVER, &mismatch, false, err, sizeof err), -1);
	assert_non_null(strstr(err, "node-2.key"));
	assert_non_null(strstr(err, "mismatch"));

	struct tls_files keyless = {path(dir, "client-alice.pem"), NULL, path(dir, "ca.pem")};
	assert_int_equal(tls_ctx_new(&ctx, TLS_ROLE_CLIENT, &keyless, false, err, sizeof err), -1);
	assert_non_null(strstr(err, "without its key"));

	struct tls_files bad_ca = {NULL, NULL, path(dir, "node-1.key")};
	assert_int_equal(tls_ctx_new(&ctx, TLS_ROLE_CLIENT, &bad_ca, false, err, sizeof err), -1);
	assert_non_null(strstr(err, "node-1.key"));
	assert_ptr_equal(ctx, (SSL_CTX *)0x1); /* untouched on failure */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_server_and_client_agree),
		cmocka_unit_test(test_client_refuses_wrong_name_and_foreign_server),
		cmocka_unit_test(test_mutual_server_refuses_clients),
		cmocka_unit_test(test_bad_settings_are_named),
	};
	return cmocka_run_group_tests(tests, make_certs, remove_certs);
}
