/* tls_certs.c: see tls_certs.h. */
#include "tls_certs.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tls_ctx.h"

static char dir[] = "/tmp/raftlock-test-tls.XXXXXX";

const char *tls_certs_path(const char *name)
{
	static char buf[8][256];
	static int next;
	char *p = buf[next++ % 8];
	snprintf(p, 256, "%s/%s", dir, name);
	return p;
}

/* The commands, written to a script: make.sh. */
static const char certs_script[] =
	"set -e\n"
	"key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $1; }\n"
	"ca() { key $1.key; openssl req -x509 -new -key $1.key -out $1.pem -subj /CN=$1 -days 2; "
	"}\n"
	"cert() {\n"
	"  key $2.key; openssl req -new -key $2.key -out $2.csr -subj /CN=$3\n"
	"  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n"
	"extendedKeyUsage=serverAuth,clientAuth\\n' > $2.ext\n"
	"  openssl x509 -req -in $2.csr -CA $1.pem -CAkey $1.key -CAcreateserial -out $2.pem \\\n"
	"    -days 2 -extfile $2.ext\n"
	"}\n"
	"ca ca; ca other-ca\n"
	"cert ca server server; cert ca client client-a; cert other-ca stranger stranger\n"
	"cert ca node-2 raftlock-node-2; cert ca node-3 raftlock-node-3\n";

int tls_certs_make(void)
{
	if (mkdtemp(dir) == NULL)
		return -1;
	FILE *f = fopen(tls_certs_path("make.sh"), "w");
	if (f == NULL)
		return -1;
	fputs(certs_script, f);
	fclose(f);
	char cmd[512];
	snprintf(cmd, sizeof cmd, "cd %s && sh make.sh >make.log 2>&1", dir);
	if (system(cmd) != 0) {
		fprintf(stderr, "making certificates failed: see %s/make.log\n", dir);
		return -1;
	}
	return 0;
}

int tls_certs_remove(void)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

SSL_CTX *tls_certs_server_ctx(bool mutual)
{
	struct tls_files files = {tls_certs_path("server.pem"), tls_certs_path("server.key"),
				  tls_certs_path("ca.pem")};
	SSL_CTX *ctx = NULL;
	char err[512];
	if (tls_ctx_new(&ctx, TLS_ROLE_SERVER, &files, mutual, err, sizeof err) != 0)
		fail_msg("%s", err);
	return ctx;
}

SSL_CTX *tls_certs_client_ctx(const char *who, const char *ca)
{
	char cert[64], key[64];
	snprintf(cert, sizeof cert, "%s.pem", who);
	snprintf(key, sizeof key, "%s.key", who);
	struct tls_files files = {who ? tls_certs_path(cert) : NULL,
				  who ? tls_certs_path(key) : NULL, tls_certs_path(ca)};
	SSL_CTX *ctx = NULL;
	char err[512];
	if (tls_ctx_new(&ctx, TLS_ROLE_CLIENT, &files, false, err, sizeof err) != 0)
		fail_msg("%s", err);
	return ctx;
}
