/*
 * fuzz_tls_seeds.c: writes the seed corpus of fuzz_tls_stream into DIR: a
 * real ClientHello (for the engine as a server) and a real server's first
 * flight in answer to one (for the engine as a client), each at a few write
 * sizes (see the control byte in fuzz_tls_stream.c).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "fuzz_tls_cert.h"
#include "tls_ctx.h"

static const char *out_dir;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_tls_seeds: %s\n", what);
	exit(1);
}

static void write_seed(const char *name, uint8_t ctl, const char *bytes, size_t len)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s-%02x", out_dir, name, ctl);
	FILE *f = fopen(path, "wb");
	if (f == NULL || fwrite(&ctl, 1, 1, f) != 1 || fwrite(bytes, 1, len, f) != len ||
	    fclose(f) != 0)
		die(path);
}

/* What ssl has written to its memory BIO, in a malloc'd buffer. */
static char *drain(SSL *ssl, size_t *len)
{
	BIO *out = SSL_get_wbio(ssl);
	*len = BIO_ctrl_pending(out);
	char *buf = malloc(*len + 1);
	if (buf == NULL || BIO_read(out, buf, (int)*len) != (int)*len)
		die("reading a flight");
	return buf;
}

static SSL *new_ssl(SSL_CTX *ctx)
{
	SSL *ssl = SSL_new(ctx);
	if (ssl == NULL)
		die("SSL_new");
	SSL_set_bio(ssl, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));
	return ssl;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_tls_seeds DIR\n");
		return 2;
	}
	out_dir = argv[1];
	if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
		perror(out_dir);
		return 1;
	}
	char dir[64], cert[128], key[128], err[512];
	if (fuzz_tls_write_files(dir) != 0)
		die("writing the certificate");
	snprintf(cert, sizeof cert, "%s/cert.pem", dir);
	snprintf(key, sizeof key, "%s/key.pem", dir);
	struct tls_files server = {cert, key, cert}, client = {cert, key, cert};
	SSL_CTX *sctx = NULL, *cctx = NULL;
	if (tls_ctx_new(&sctx, TLS_ROLE_SERVER, &server, true, err, sizeof err) != 0 ||
	    tls_ctx_new(&cctx, TLS_ROLE_CLIENT, &client, false, err, sizeof err) != 0)
		die(err);
	unlink(cert);
	unlink(key);
	rmdir(dir);

	SSL *c = new_ssl(cctx), *s = new_ssl(sctx);
	SSL_set_connect_state(c);
	SSL_set_accept_state(s);
	SSL_do_handshake(c);
	size_t hello_len, flight_len;
	char *hello = drain(c, &hello_len);
	BIO_write(SSL_get_rbio(s), hello, (int)hello_len);
	SSL_do_handshake(s);
	char *flight = drain(s, &flight_len);
	/* Control byte: bit 0 the engine's role, bits 1-4 the write size. */
	static const uint8_t sizes[] = {0x00, 0x02, 0x1e};
	for (size_t i = 0; i < sizeof sizes; i++) {
		write_seed("clienthello", sizes[i], hello, hello_len);
		write_seed("serverflight", (uint8_t)(sizes[i] | 0x01), flight, flight_len);
	}
	write_seed("clienthello-cut", 0x00, hello, hello_len / 2);
	free(hello);
	free(flight);
	SSL_free(c);
	SSL_free(s);
	SSL_CTX_free(cctx);
	SSL_CTX_free(sctx);
	return 0;
}
