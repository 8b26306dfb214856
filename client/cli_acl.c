/* cli_acl.c: see cli_acl.h. */
#include "cli_acl.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "cli_child.h"
#include "cli_json.h"

#define TOKEN_BYTES 32 /* 256 bits from the kernel's random source */

static int acl_usage(const char *problem)
{
	fprintf(stderr,
		"raftlock: %s\n"
		"usage: raftlock acl set IDENTITY PREFIX PERMS   (PERMS: lock,read,admin or all)\n"
		"       raftlock acl delete IDENTITY PREFIX\n"
		"       raftlock acl list [--stale] [--json]\n"
		"       raftlock acl token NAME [--json]\n",
		problem);
	return CLI_EXIT_USAGE;
}

static int acl_fail(raftlock_client *client)
{
	fprintf(stderr, "raftlock: %s\n", raftlock_errmsg(client));
	return CLI_EXIT_ERROR;
}

/* Takes every --json after the subcommand out of argv, setting *json. */
static void acl_take_json(int *argc, char **argv, bool *json)
{
	int k = 2;
	for (int i = 2; i < *argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			*json = true;
		else
			argv[k++] = argv[i];
	}
	*argc = k;
}

static void acl_print_rule(const struct raftlock_acl_rule *r, bool json, bool first)
{
	char perms[32];
	raftlock_acl_perms_format(r->perms, perms, sizeof perms);
	if (!json) {
		printf("%s\t%s\t%s\n", r->identity, r->prefix[0] ? r->prefix : "\"\"", perms);
		return;
	}
	fputs(first ? "\n  {" : ",\n  {", stdout);
	cli_json_name(stdout, CLI_JSON_SPACED, "identity", r->identity);
	fputs(", ", stdout);
	cli_json_name(stdout, CLI_JSON_SPACED, "prefix", r->prefix);
	fputs(", \"perms\": ", stdout);
	cli_json_string(stdout, perms);
	fputs("}", stdout);
}

static int acl_list(raftlock_client *client, bool stale, bool json)
{
	char after_id[RAFTLOCK_NAME_MAX + 1] = "", after_prefix[RAFTLOCK_NAME_MAX + 1] = "";
	size_t printed = 0;
	if (json)
		fputs("[", stdout);
	for (;;) {
		struct raftlock_acl_list *list;
		if (raftlock_acl_list(client, after_id, after_prefix, 0, stale, &list) != 0) {
			if (json)
				fputs("]\n", stdout); /* what was printed stays valid JSON */
			return acl_fail(client);
		}
		for (size_t i = 0; i < list->n_rules; i++)
			acl_print_rule(&list->rules[i], json, printed++ == 0);
		bool more = list->more && list->n_rules > 0;
		if (more) {
			const struct raftlock_acl_rule *last = &list->rules[list->n_rules - 1];
			snprintf(after_id, sizeof after_id, "%s", last->identity);
			snprintf(after_prefix, sizeof after_prefix, "%s", last->prefix);
		}
		raftlock_acl_list_free(list);
		if (!more) {
			if (json)
				fputs(printed ? "\n]\n" : "]\n", stdout);
			return CLI_EXIT_OK;
		}
	}
}

int cli_acl(raftlock_client *client, int argc, char **argv, bool json)
{
	if (argc < 2)
		return acl_usage("acl: missing subcommand");
	const char *sub = argv[1];
	if (strcmp(sub, "set") == 0) {
		uint32_t perms;
		if (argc != 5)
			return acl_usage("acl set: IDENTITY PREFIX PERMS");
		if (raftlock_acl_perms_parse(argv[4], &perms) != 0)
			return acl_usage("acl set: PERMS is a list of lock, read, admin, or all");
		if (raftlock_acl_set(client, argv[2], argv[3], perms) != 0)
			return acl_fail(client);
		return CLI_EXIT_OK;
	}
	if (strcmp(sub, "delete") == 0) {
		if (argc != 4)
			return acl_usage("acl delete: IDENTITY PREFIX");
		if (raftlock_acl_delete(client, argv[2], argv[3]) != 0)
			return acl_fail(client);
		return CLI_EXIT_OK;
	}
	if (strcmp(sub, "list") == 0) {
		acl_take_json(&argc, argv, &json);
		bool stale = argc == 3 && strcmp(argv[2], "--stale") == 0;
		if (argc > 3 || (argc == 3 && !stale))
			return acl_usage("acl list: [--stale] [--json]");
		return acl_list(client, stale, json);
	}
	return acl_usage("acl: unknown subcommand");
}

bool cli_acl_offline(int argc, char **argv)
{
	return argc >= 2 && strcmp(argv[0], "acl") == 0 && strcmp(argv[1], "token") == 0;
}

int cli_acl_token(int argc, char **argv, bool json)
{
	acl_take_json(&argc, argv, &json);
	if (argc != 3 || argv[2][0] == '\0' || strlen(argv[2]) > RAFTLOCK_NAME_MAX ||
	    strcmp(argv[2], "*") == 0 || strpbrk(argv[2], " \t\r\n") != NULL)
		return acl_usage("acl token: NAME (no blanks, not '*')");
	uint8_t raw[TOKEN_BYTES], digest[EVP_MAX_MD_SIZE];
	size_t got = 0;
	while (got < sizeof raw) {
		ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "raftlock: acl token: no random bytes from the kernel\n");
			return CLI_EXIT_ERROR;
		}
		got += (size_t)n;
	}
	char token[2 * TOKEN_BYTES + 1], hex[2 * EVP_MAX_MD_SIZE + 1];
	for (size_t i = 0; i < sizeof raw; i++)
		snprintf(token + 2 * i, 3, "%02x", raw[i]);
	unsigned dlen = 0;
	if (EVP_Digest(token, strlen(token), digest, &dlen, EVP_sha256(), NULL) != 1) {
		fprintf(stderr, "raftlock: acl token: SHA-256 failed\n");
		return CLI_EXIT_ERROR;
	}
	for (unsigned i = 0; i < dlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", digest[i]);
	if (json) {
		fputs("{", stdout);
		cli_json_name(stdout, CLI_JSON_SPACED, "name", argv[2]);
		printf(", \"token\": \"%s\", \"sha256\": \"%s\", ", token, hex);
		char line[RAFTLOCK_NAME_MAX + sizeof hex + 2];
		snprintf(line, sizeof line, "%s %s", argv[2], hex);
		cli_json_name(stdout, CLI_JSON_SPACED, "auth_tokens_line", line);
		fputs("}\n", stdout);
	} else {
		printf("token: %s\n", token);
		printf("auth-tokens line: %s %s\n", argv[2], hex);
	}
	fprintf(stderr,
		"raftlock: give the token to '%s' only (RAFTLOCK_AUTH_TOKEN or --token); put "
		"the line in the auth-tokens file of every node\n",
		argv[2]);
	explicit_bzero(token, sizeof token);
	explicit_bzero(raw, sizeof raw);
	return CLI_EXIT_OK;
}
