/* tls_ctx.c: see tls_ctx.h. */
#include "tls_ctx.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

void tls_ctx_error(char *err, size_t errlen, const char *prefix)
{
	unsigned long e = ERR_get_error();
	char reason[256] = "unknown error";
	if (e != 0)
		ERR_error_string_n(e, reason, sizeof reason);
	ERR_clear_error();
	snprintf(err, errlen, "%s: %s", prefix, reason);
}

static int load_identity(SSL_CTX *ctx, const struct tls_files *files, char *err, size_t errlen)
{
	char what[600];
	if (files->key == NULL) {
		snprintf(err, errlen, "TLS certificate %s given without its key", files->cert);
		return -1;
	}
	if (SSL_CTX_use_certificate_chain_file(ctx, files->cert) != 1) {
		snprintf(what, sizeof what, "TLS certificate %s", files->cert);
		tls_ctx_error(err, errlen, what);
		return -1;
	}
	/* This also refuses a key that does not match the certificate. */
	if (SSL_CTX_use_PrivateKey_file(ctx, files->key, SSL_FILETYPE_PEM) != 1) {
		snprintf(what, sizeof what, "TLS key %s (for %s)", files->key, files->cert);
		tls_ctx_error(err, errlen, what);
		return -1;
	}
	return 0;
}

static int load_trust(SSL_CTX *ctx, enum tls_role role, const struct tls_files *files, char *err,
		      size_t errlen)
{
	char what[600];
	if (files->ca == NULL) {
		if (role == TLS_ROLE_CLIENT && SSL_CTX_set_default_verify_paths(ctx) != 1) {
			tls_ctx_error(err, errlen, "TLS: the system's CA store");
			return -1;
		}
		return 0;
	}
	if (SSL_CTX_load_verify_locations(ctx, files->ca, NULL) != 1) {
		snprintf(what, sizeof what, "TLS CA %s", files->ca);
		tls_ctx_error(err, errlen, what);
		return -1;
	}
	if (role == TLS_ROLE_SERVER) {
		/* Tell clients which CAs we accept, so they pick the right cert. */
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(files->ca);
		if (names == NULL) {
			snprintf(what, sizeof what, "TLS CA %s", files->ca);
			tls_ctx_error(err, errlen, what);
			return -1;
		}
		SSL_CTX_set_client_CA_list(ctx, names);
	}
	return 0;
}

int tls_ctx_new(SSL_CTX **out, enum tls_role role, const struct tls_files *files, bool require_peer,
		char *err, size_t errlen)
{
	if (role == TLS_ROLE_SERVER && (files->cert == NULL || files->key == NULL)) {
		snprintf(err, errlen, "TLS: a server needs a certificate and its key");
		return -1;
	}
	if (role == TLS_ROLE_SERVER && require_peer && files->ca == NULL) {
		snprintf(err, errlen, "TLS: verifying clients needs a CA file");
		return -1;
	}
	ERR_clear_error();
	SSL_CTX *ctx =
		SSL_CTX_new(role == TLS_ROLE_SERVER ? TLS_server_method() : TLS_client_method());
	if (ctx == NULL) {
		tls_ctx_error(err, errlen, "TLS: SSL_CTX_new");
		return -1;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	/* Partial writes and moving buffers: the callers retry from libuv's and
	 * poll's loops with buffers that may move between attempts. */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);

	if (files->cert != NULL && load_identity(ctx, files, err, errlen) != 0)
		goto fail;
	if (load_trust(ctx, role, files, err, errlen) != 0)
		goto fail;

	int mode = SSL_VERIFY_NONE;
	if (role == TLS_ROLE_CLIENT)
		mode = SSL_VERIFY_PEER;
	else if (files->ca != NULL)
		mode = SSL_VERIFY_PEER | (require_peer ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0);
	SSL_CTX_set_verify(ctx, mode, NULL);
	*out = ctx;
	return 0;
fail:
	SSL_CTX_free(ctx);
	return -1;
}

int tls_ctx_expect_host(SSL *ssl, const char *host)
{
	unsigned char addr[16];
	X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
	bool numeric = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
	if (numeric)
		return X509_VERIFY_PARAM_set1_ip_asc(param, host) == 1 ? 0 : -1;
	/* SNI lets a server behind one address pick the right certificate. */
	if (SSL_set_tlsext_host_name(ssl, host) != 1)
		return -1;
	return SSL_set1_host(ssl, host) == 1 ? 0 : -1;
}
