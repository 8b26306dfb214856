/* cli_member.c: see cli_member.h. */
#include "cli_member.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_child.h"
#include "cli_json.h"

static int member_usage(const char *problem)
{
	fprintf(stderr,
		"raftlock: %s\n"
		"usage: raftlock member list [--json]\n"
		"       raftlock member add ID RAFTADDR CLIENTADDR\n"
		"       raftlock member remove ID\n"
		"       raftlock member promote ID\n"
		"       raftlock member replace OLDID NEWID RAFTADDR CLIENTADDR\n",
		problem);
	return CLI_EXIT_USAGE;
}

static int member_fail(raftlock_client *client)
{
	fprintf(stderr, "raftlock: %s\n", raftlock_errmsg(client));
	return CLI_EXIT_ERROR;
}

static bool parse_id(const char *text, uint64_t *id)
{
	char *end;
	errno = 0;
	if (!isdigit((unsigned char)text[0])) /* strtoull takes " -1" as 2^64 - 1 */
		return false;
	unsigned long long v = strtoull(text, &end, 10);
	if (errno != 0 || *end != '\0' || v == 0 || v > RAFTLOCK_MEMBER_ID_MAX)
		return false;
	*id = v;
	return true;
}

static void member_list_json(const struct raftlock_member_list *list)
{
	printf("{\"leader_id\": %" PRIu64 ", \"last_index\": %" PRIu64 ", \"members\": [",
	       list->leader_id, list->last_index);
	for (size_t i = 0; i < list->n_members; i++) {
		const struct raftlock_member_info *m = &list->members[i];
		printf("%s{\"id\": %" PRIu64 ", \"role\": ", i ? ", " : "", m->id);
		cli_json_string(stdout, m->role);
		fputs(", \"raft_address\": ", stdout);
		cli_json_string(stdout, m->raft_address);
		fputs(", \"client_address\": ", stdout);
		cli_json_string(stdout, m->client_address);
		printf(", \"match_index\": %" PRIu64 ", \"joined\": %s}", m->match_index,
		       m->joined ? "true" : "false");
	}
	fputs("]}\n", stdout);
}

static int member_list(raftlock_client *client, bool json)
{
	struct raftlock_member_list *list;
	if (raftlock_member_list(client, &list) != 0)
		return member_fail(client);
	if (json) {
		member_list_json(list);
		raftlock_member_list_free(list);
		return CLI_EXIT_OK;
	}
	printf("ID\tROLE\tRAFT\tCLIENT\tMATCH\n");
	for (size_t i = 0; i < list->n_members; i++) {
		const struct raftlock_member_info *m = &list->members[i];
		printf("%" PRIu64 "\t%s\t%s\t%s\t%" PRIu64 "%s\n", m->id, m->role, m->raft_address,
		       m->client_address[0] ? m->client_address : "-", m->match_index,
		       m->id == list->leader_id ? "\t(leader)" : "");
	}
	raftlock_member_list_free(list);
	return CLI_EXIT_OK;
}

int cli_member(raftlock_client *client, bool json, int argc, char **argv)
{
	if (argc < 2)
		return member_usage("member: missing subcommand");
	const char *sub = argv[1];
	uint64_t id = 0, id2 = 0;
	int rv;
	if (strcmp(sub, "list") == 0) {
		if (argc == 3 && strcmp(argv[2], "--json") == 0)
			json = true;
		else if (argc != 2)
			return member_usage("member list takes no argument but --json");
		return member_list(client, json);
	} else if (strcmp(sub, "add") == 0) {
		if (argc != 5 || !parse_id(argv[2], &id))
			return member_usage(
				"member add: ID (a positive number) RAFTADDR CLIENTADDR");
		rv = raftlock_member_add(client, id, argv[3], argv[4]);
	} else if (strcmp(sub, "remove") == 0 || strcmp(sub, "promote") == 0) {
		if (argc != 3 || !parse_id(argv[2], &id))
			return member_usage("member remove/promote: ID (a positive number)");
		rv = sub[0] == 'r' ? raftlock_member_remove(client, id)
				   : raftlock_member_promote(client, id);
	} else if (strcmp(sub, "replace") == 0) {
		if (argc != 6 || !parse_id(argv[2], &id) || !parse_id(argv[3], &id2))
			return member_usage("member replace: OLDID NEWID RAFTADDR CLIENTADDR");
		rv = raftlock_member_replace(client, id, id2, argv[4], argv[5]);
	} else {
		return member_usage("member: unknown subcommand");
	}
	if (rv != 0)
		return member_fail(client);
	if (json)
		printf("{\"member\": %" PRIu64 ", \"done\": \"%s\"}\n",
		       strcmp(sub, "replace") == 0 ? id2 : id, sub);
	else if (strcmp(sub, "add") == 0 || strcmp(sub, "replace") == 0)
		printf("member %" PRIu64 " added as a standby: start it with raftlockd --join; the "
		       "leader makes it a voter once it has caught up\n",
		       strcmp(sub, "add") == 0 ? id : id2);
	return CLI_EXIT_OK;
}
