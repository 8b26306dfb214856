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

	uint64_t *tokens = &token;
	size_t n = 1;
	struct raftlock_lock_info *info = NULL;
	if (token == 0) {
		int rv = raftlock_lock_get(client, name, false, &info);
		if (rv != 0 && rv != RAFTLOCK_ENOTFOUND) {
			fprintf(stderr, "raftlock: %s\n", raftlock_errmsg(client));
			return CLI_EXIT_ERROR;
		}
		n = info != NULL ? info->n_holders : 0;
		tokens = n ? calloc(n, sizeof *tokens) : NULL;
		if (n > 0 && tokens == NULL) {
			raftlock_lock_info_free(info);
			fprintf(stderr, "raftlock: out of memory\n");
			return CLI_EXIT_ERROR;
		}
		for (size_t i = 0; i < n; i++)
			tokens[i] = info->holders[i].token;
		raftlock_lock_info_free(info);
	}
	int code = CLI_EXIT_OK;
	size_t done = 0, gone = 0;
	if (json) {
		fputs("{", stdout);
		cli_json_name(stdout, CLI_JSON_SPACED, "lock", name);
		printf(", \"grace_ms\": %" PRIu64 ", \"tokens\": [", grace);
	}
	for (size_t i = 0; i < n; i++) {
		int rv = revoke_token(client, name, tokens[i], (unsigned)grace);
		if (rv == RAFTLOCK_ENOTFOUND)
			continue; /* released meanwhile */
		if (rv < 0) {
			code = CLI_EXIT_ERROR;
			break;
		}
		if (rv == REVOKE_GONE)
			tokens[gone++] = tokens[i]; /* into a slot done with, for the JSON */
		if (json)
			printf("%s%" PRIu64, done ? ", " : "", tokens[i]);
		else if (rv == REVOKE_GONE)
			printf("token %" PRIu64 " of '%s' is no longer current (revoked by an "
			       "attempt whose answer was lost, or released)\n",
			       tokens[i], name);
		else if (grace == 0)
			printf("revoked token %" PRIu64 " of '%s'\n", tokens[i], name);
		else
			printf("asked the holder of token %" PRIu64
			       " of '%s' to release; revoked in "
			       "%" PRIu64 " ms unless it does\n",
			       tokens[i], name, grace);
		done++;
	}
	if (json) {
		/* "tokens" keeps every grant settled, as before; these are the
		 * ones no longer current after a lost answer, which this call
		 * may not have revoked (released meanwhile) */
		fputs("], \"no_longer_current\": [", stdout);
		for (size_t i = 0; i < gone; i++)
			printf("%s%" PRIu64, i ? ", " : "", tokens[i]);
		printf("]}\n");
	}
	if (tokens != &token)
		free(tokens);
	if (code == CLI_EXIT_OK && done == 0) {
		if (!json)
			printf("'%s' has no %s grant\n", name, token ? "such" : "current");
		code = CLI_EXIT_BUSY;
	}
	return code;
}
