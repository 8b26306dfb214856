/* join.c: see join.h. */
#include "join.h"

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "line_file.h"
#include "log.h"
#include "raftlock.h"

/* What join_token_read has found so far. */
struct token_read {
	char *token; /* RAFTLOCK_TOKEN_MAX + 1 bytes */
	bool found;
};

/* One line of a join-token-file (a line_file_cb). The messages never quote
 * the line: it may be the token. */
static int token_line(void *arg, char *line, unsigned lineno, char *err, size_t errlen)
{
	struct token_read *r = arg;
	(void)lineno;
	char *p = line;
	while (isspace((unsigned char)*p))
		p++;
	size_t n = strlen(p);
	while (n > 0 && isspace((unsigned char)p[n - 1]))
		n--;
	if (n == 0 || p[0] == '#')
		return 0;
	if (r->found) {
		snprintf(err, errlen, "a second token (the file holds one)");
		return RAFTLOCK_ECONFIG;
	}
	for (size_t i = 0; i < n; i++)
		if (isspace((unsigned char)p[i])) {
			snprintf(err, errlen,
				 "a blank inside the token (the file holds the token alone, not "
				 "\"token: ...\")");
			return RAFTLOCK_ECONFIG;
		}
	if (n > RAFTLOCK_TOKEN_MAX) {
		snprintf(err, errlen, "the token is %zu bytes long, above the %d a token may hold",
			 n, RAFTLOCK_TOKEN_MAX);
		return RAFTLOCK_ECONFIG;
	}
	memcpy(r->token, p, n);
	r->token[n] = '\0';
	r->found = true;
	return 0;
}

int join_token_read(const char *path, char token[RAFTLOCK_TOKEN_MAX + 1], char *err, size_t errlen)
{
	struct token_read r = {token, false};
	memset(token, 0, RAFTLOCK_TOKEN_MAX + 1);
	int rv = line_file_read(path, token_line, &r, err, errlen);
	if (rv == 0 && !r.found) {
		/* the path cut, not what is wrong with it */
		snprintf(err, errlen, "%.400s: no token in the file", path);
		rv = RAFTLOCK_ECONFIG;
	}
	if (rv != 0)
		explicit_bzero(token, RAFTLOCK_TOKEN_MAX + 1);
	return rv;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Splits cfg->join ("A,B,C") into buf and addrs; returns the count. */
static size_t split_addresses(const char *list, char *buf, size_t len, const char **addrs,
			      size_t max)
{
	snprintf(buf, len, "%s", list);
	size_t n = 0;
	for (char *save = NULL, *a = strtok_r(buf, ",", &save); a != NULL && n < max;
	     a = strtok_r(NULL, ",", &save))
		if (a[0] != '\0')
			addrs[n++] = a;
	return n;
}

/* Copies the ids of list (NULL: none) into out, and says which; frees
 * list. */
static void keep_ids(struct raftlock_member_list *list, struct join_members *out)
{
	char ids[CONFIG_MAX_MEMBERS * 21 + 1] = "";
	size_t at = 0;
	out->n = 0;
	for (size_t i = 0; list != NULL && i < list->n_members; i++) {
		if (out->n == sizeof out->ids / sizeof out->ids[0])
			break;
		out->ids[out->n++] = list->members[i].id;
		at += (size_t)snprintf(ids + at, sizeof ids - at, " %llu",
				       (unsigned long long)list->members[i].id);
	}
	raftlock_member_list_free(list);
	log_info("join: the cluster's members are%s", at > 0 ? ids : " unknown");
}

static bool final(int rv)
{
	return rv == RAFTLOCK_ENOTFOUND || rv == RAFTLOCK_EPERM || rv == RAFTLOCK_EINVAL;
}

int join_claim(const struct config *cfg, uint64_t incarnation, struct join_members *members,
	       char *err, size_t errlen)
{
	char buf[sizeof cfg->join];
	const char *addrs[CONFIG_MAX_MEMBERS * 2];
	struct raftlock_client_options o = {0};
	o.n_addresses =
		split_addresses(cfg->join, buf, sizeof buf, addrs, sizeof addrs / sizeof addrs[0]);
	o.addresses = addrs;
	o.client_name = "raftlockd-join";
	o.request_timeout_ms = 5000;
	if (cfg->client_tls != CONFIG_TLS_OFF) {
		o.tls = true;
		o.tls_ca_file = cfg->client_tls_ca[0] ? cfg->client_tls_ca : NULL;
		o.tls_cert_file = cfg->client_tls_cert;
		o.tls_key_file = cfg->client_tls_key;
	}
	char token[RAFTLOCK_TOKEN_MAX + 1];
	if (cfg->join_token_file[0] != '\0') {
		char msg[512];
		if (join_token_read(cfg->join_token_file, token, msg, sizeof msg) != 0) {
			snprintf(err, errlen, "join-token-file: %s", msg);
			return RAFTLOCK_ECONFIG;
		}
		o.auth_token = token;
	}
	raftlock_client *c = NULL;
	const char *why = NULL;
	int rv = raftlock_client_open(&o, &c, &why);
	explicit_bzero(token, sizeof token); /* the client keeps a copy */
	if (rv != 0) {
		snprintf(err, errlen, "join %s: %s", cfg->join, why ? why : raftlock_strerror(rv));
		return RAFTLOCK_ECONFIG;
	}
	/* Nothing is running yet that a clean stop would have to finish: while
	 * the node waits for the cluster, SIGTERM and SIGINT stop it at once
	 * (the loop that handles them otherwise does not run yet). */
	struct sigaction dfl = {.sa_handler = SIG_DFL}, old_term, old_int;
	sigaction(SIGTERM, &dfl, &old_term);
	sigaction(SIGINT, &dfl, &old_int);
	uint64_t until = mono_ms() + JOIN_TRY_MS;
	log_info("joining the cluster at %s as member %llu", cfg->join,
		 (unsigned long long)cfg->id);
	struct raftlock_member_list *list = NULL;
	for (;;) {
		rv = raftlock_member_join_list(c, cfg->id, incarnation, cfg->cluster, &list);
		if (rv == 0 || final(rv) || mono_ms() >= until)
			break;
		log_warn("join: %s; asking again", raftlock_errmsg(c));
		struct timespec pause = {0, 500 * 1000000L};
		nanosleep(&pause, NULL);
	}
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGINT, &old_int, NULL);
	if (rv == 0 && list == NULL && raftlock_member_list(c, &list) != 0)
		log_warn("join: the leader named no members, and the member list failed (%s): "
			 "with peer TLS, this node admits only its --member list until it has a "
			 "log",
			 raftlock_errmsg(c));
	if (rv == 0)
		keep_ids(list, members);
	else
		snprintf(err, errlen, "claiming member %llu: %s", (unsigned long long)cfg->id,
			 raftlock_errmsg(c));
	raftlock_client_close(c);
	if (rv == 0)
		return 0;
	return final(rv) ? RAFTLOCK_ECONFIG : RAFTLOCK_EUNAVAILABLE;
}
