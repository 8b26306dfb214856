/* cli_revoke.c: see cli_revoke.h. */
#include "cli_revoke.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli_child.h"
#include "cli_json.h"

static int revoke_usage(const char *problem)
{
	fprintf(stderr, "raftlock: %s\n", problem);
	fputs("usage: raftlock revoke NAME [--token TOKEN] [--grace MS] [--json]\n", stderr);
	return CLI_EXIT_USAGE;
}

static bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v > max)
		return false;
	*out = v;
	return true;
}

#define REVOKE_GONE 1 /* revoke_token: no longer current after a lost answer */

/* Revokes the grant with token. A revoke by token may run twice without
 * harm, so one whose answer was lost (RAFTLOCK_EUNKNOWN) is settled here:
 * while the token is still current it is sent again, and once it is not,
 * the grant is gone (revoked by the attempt whose answer was lost, or
 * released meanwhile): REVOKE_GONE. Else raftlock_revoke()'s result, with
 * the message printed for an error other than RAFTLOCK_ENOTFOUND. */
static int revoke_token(raftlock_client *client, const char *name, uint64_t token, unsigned grace)
{
	bool lost = false;
	for (int attempt = 0; attempt < 3; attempt++) {
		int rv = raftlock_revoke(client, name, token, grace, NULL);
		if (rv == RAFTLOCK_ENOTFOUND && lost)
			return REVOKE_GONE;
		if (rv != RAFTLOCK_EUNKNOWN) {
			if (rv != 0 && rv != RAFTLOCK_ENOTFOUND)
				fprintf(stderr, "raftlock: %s\n", raftlock_errmsg(client));
			return rv;
		}
		lost = true;
		bool current;
		if (raftlock_check_token(client, name, token, &current) != 0) {
			fprintf(stderr,
				"raftlock: revoke '%s' token %" PRIu64 ": no answer came, and "
				"checking the token failed: %s\n",
				name, token, raftlock_errmsg(client));
			return RAFTLOCK_EUNKNOWN;
		}
		if (!current)
			return REVOKE_GONE;
	}
	fprintf(stderr, "raftlock: revoke '%s' token %" PRIu64 ": no answer came in 3 attempts\n",
		name, token);
	return RAFTLOCK_EUNKNOWN;
}

/* What one call has settled, across the lock's pages. */
struct revoke_run {
	raftlock_client *client;
	const char *name;
	uint64_t grace;
	bool json;
	size_t n_settled; /* tokens revoked or asked to release */
	uint64_t *gone;   /* of those, the ones no longer current after a lost answer */
	size_t n_gone, cap;
	int code;
	bool opened; /* --json: the object's start is out */
};

/* --json: the object's start, once: before the token of --token, after
 * the first read of the lock otherwise (a call that cannot read it prints
 * none, as before). */
static void json_open(struct revoke_run *run)
{
	if (!run->json || run->opened)
		return;
	run->opened = true;
	fputs("{", stdout);
	cli_json_name(stdout, CLI_JSON_SPACED, "lock", run->name);
	printf(", \"grace_ms\": %" PRIu64 ", \"tokens\": [", run->grace);
}

/* Revokes token and says so; false on an error that ends the call. */
static bool revoke_one(struct revoke_run *run, uint64_t token)
{
	int rv = revoke_token(run->client, run->name, token, (unsigned)run->grace);
	if (rv == RAFTLOCK_ENOTFOUND)
		return true; /* released meanwhile */
	if (rv < 0) {
		run->code = CLI_EXIT_ERROR;
		return false;
	}
	if (rv == REVOKE_GONE) {
		if (run->n_gone == run->cap) {
			size_t cap = run->cap ? 2 * run->cap : 16;
			uint64_t *g = realloc(run->gone, cap * sizeof *g);
			if (g == NULL) {
				fprintf(stderr, "raftlock: out of memory\n");
				run->code = CLI_EXIT_ERROR;
				return false;
			}
			run->gone = g;
			run->cap = cap;
		}
		run->gone[run->n_gone++] = token;
	}
	json_open(run);
	if (run->json)
		printf("%s%" PRIu64, run->n_settled ? ", " : "", token);
	else if (rv == REVOKE_GONE)
		printf("token %" PRIu64 " of '%s' is no longer current (revoked by an "
		       "attempt whose answer was lost, or released)\n",
		       token, run->name);
	else if (run->grace == 0)
		printf("revoked token %" PRIu64 " of '%s'\n", token, run->name);
	else
		printf("asked the holder of token %" PRIu64 " of '%s' to release; revoked in "
		       "%" PRIu64 " ms unless it does\n",
		       token, run->name, run->grace);
	run->n_settled++;
	return true;
}

/* Revokes every holder of the lock. A lock's answer holds its first
 * holders only when they are many (raftlock_lock_info.holders_more): the
 * rest are read page by page, each after the last token listed (tokens
 * rise in grant order). Grants made after the first read (a waiter
 * granted meanwhile) are left alone, and end the walk: every later grant
 * is newer still. */
static void revoke_holders(struct revoke_run *run)
{
	uint64_t first_read = UINT64_MAX; /* its cluster time */
	uint64_t after = 0;               /* the last token read */
	for (;;) {
		struct raftlock_lock_info *info = NULL;
		int rv = raftlock_lock_get_holders(run->client, run->name, after, false, &info);
		if (rv != 0 && rv != RAFTLOCK_ENOTFOUND) {
			fprintf(stderr, "raftlock: %s\n", raftlock_errmsg(run->client));
			run->code = CLI_EXIT_ERROR;
			return;
		}
		json_open(run);
		if (rv == RAFTLOCK_ENOTFOUND)
			return;
		if (first_read == UINT64_MAX)
			first_read = info->cluster_time;
		bool more = info->holders_more && info->n_holders > 0;
		for (size_t i = 0; i < info->n_holders && run->code == CLI_EXIT_OK; i++) {
			const struct raftlock_holder *h = &info->holders[i];
			if (h->token <= after) { /* the page must move on */
				fprintf(stderr,
					"raftlock: revoke '%s': the node listed token %" PRIu64
					" in the holders after %" PRIu64 "\n",
					run->name, h->token, after);
				run->code = CLI_EXIT_ERROR;
				break;
			}
			if (h->granted_time > first_read) {
				more = false;
				break;
			}
			after = h->token;
			if (!revoke_one(run, h->token))
				break;
		}
		raftlock_lock_info_free(info);
		if (run->code != CLI_EXIT_OK || !more)
			return;
	}
}

int cli_revoke(raftlock_client *client, int argc, char **argv, bool json)
{
	enum { OPT_TOKEN = 1, OPT_GRACE, OPT_JSON };
	static const struct option opts[] = {
		{"token", required_argument, NULL, OPT_TOKEN},
		{"grace", required_argument, NULL, OPT_GRACE},
		{"json", no_argument, NULL, OPT_JSON},
		{NULL, 0, NULL, 0},
	};
	uint64_t token = 0, grace = 0;
	optind = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case OPT_TOKEN:
			if (!parse_u64(optarg, UINT64_MAX, &token) || token == 0)
				return revoke_usage("revoke --token: a token, a positive number");
			break;
		case OPT_GRACE:
			if (!parse_u64(optarg, RAFTLOCK_TTL_MAX_MS, &grace))
				return revoke_usage("revoke --grace: milliseconds, 0..600000");
			break;
		case OPT_JSON: json = true; break;
		default: return revoke_usage("revoke: unknown option");
		}
	}
	if (optind + 1 != argc)
		return revoke_usage("revoke: one lock NAME");
	const char *name = argv[optind];

	struct revoke_run run = {
		.client = client, .name = name, .grace = grace, .json = json, .code = CLI_EXIT_OK};
	if (token != 0) {
		json_open(&run);
		revoke_one(&run, token);
	} else {
		revoke_holders(&run); /* no object when it cannot read the lock */
	}
	if (run.opened) {
		/* "tokens" keeps every grant settled, as before; these are the
		 * ones no longer current after a lost answer, which this call
		 * may not have revoked (released meanwhile) */
		fputs("], \"no_longer_current\": [", stdout);
		for (size_t i = 0; i < run.n_gone; i++)
			printf("%s%" PRIu64, i ? ", " : "", run.gone[i]);
		printf("]}\n");
	}
	free(run.gone);
	int code = run.code;
	size_t done = run.n_settled;
	if (code == CLI_EXIT_OK && done == 0) {
		if (!json)
			printf("'%s' has no %s grant\n", name, token ? "such" : "current");
		code = CLI_EXIT_BUSY;
	}
	return code;
}
