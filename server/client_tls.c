/* client_tls.c: see client_tls.h. */
#include "client_tls.h"

#include <string.h>

#include "raftlock.h"
#include "tls_ctx.h"

int client_tls_open(struct client_tls *t, const struct config *cfg, char *err, size_t errlen)
{
	memset(t, 0, sizeof *t);
	if (cfg->client_tls == CONFIG_TLS_OFF)
		return 0;
	struct tls_files files = {
		.cert = cfg->client_tls_cert,
		.key = cfg->client_tls_key,
		.ca = cfg->client_tls_ca[0] != '\0' ? cfg->client_tls_ca : NULL,
	};
	bool mutual = cfg->client_tls == CONFIG_TLS_MUTUAL;
	if (tls_ctx_new(&t->server, TLS_ROLE_SERVER, &files, mutual, err, errlen) != 0)
		return RAFTLOCK_ECONFIG;
	if (tls_ctx_new(&t->client, TLS_ROLE_CLIENT, &files, false, err, errlen) != 0) {
		SSL_CTX_free(t->server);
		t->server = NULL;
		return RAFTLOCK_ECONFIG;
	}
	return 0;
}

void client_tls_close(struct client_tls *t)
{
	SSL_CTX_free(t->server);
	SSL_CTX_free(t->client);
	t->server = t->client = NULL;
}
