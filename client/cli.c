/* cli.c: the raftlock command: option parsing and the read-only
 * subcommands. Holding a lock around a child is in cli_child.c, output
 * formats in cli_print.c. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_acl.h"
#include "cli_revoke.h"
#include "cli_member.h"
#include "cli_child.h"
#include "cli_print.h"
#include "cli_top.h"
#include "cli_events.h"
#include "cli_json.h"
#include "raftlock.h"

#define CLI_DEFAULT_ENDPOINTS "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103"
#define CLI_MAX_ENDPOINTS 64
#define CLI_MAX_PAGES 100000

static const char usage_text[] =
	"usage: raftlock [--endpoints HOST:PORT,...] [--timeout MS] [TLS options] COMMAND ...\n"
	"\n"
	"commands:\n"
	"  status [--json]                  each endpoint's own view: role, term,\n"
	"                                   commit and applied index, leader, members\n"
	"  lock [HOLD OPTIONS] [-s|--shared] NAME [--] CMD [ARGS...]\n"
	"                                   run CMD while holding NAME (a read-write\n"
	"                                   lock: exclusive, or shared with --shared)\n"
	"  lock [HOLD OPTIONS] NAME -c 'SHELL COMMAND'   the same, through $SHELL -c\n"
	"  lock [HOLD OPTIONS] NAME         no command: print the fencing token and\n"
	"                                   hold NAME until SIGINT, SIGTERM, SIGHUP,\n"
	"                                   SIGQUIT or a request to release (exit 0)\n"
	"  lock --all [HOLD OPTIONS] NAME,NAME,... [--] CMD [ARGS...] (or -c, or nothing)\n"
	"                                   the same with up to 64 locks taken at\n"
	"                                   once, all or none (RAFTLOCK_TOKEN lists\n"
	"                                   their tokens in the order given)\n"
	"  run --permits N [HOLD OPTIONS] NAME [--] CMD [ARGS...] (or -c, or nothing)\n"
	"                                   hold one of N permits of the semaphore\n"
	"                                   NAME (N active, the rest wait)\n"
	"  holders [PREFIX] [--json] [--stale]   who holds which lock\n"
	"  show NAME [--json] [--stale]     one lock with its holders and waiters\n"
	"  sessions [--json] [--stale]      open sessions and their locks\n"
	"  check NAME TOKEN [--json]        is TOKEN a current grant of NAME?\n"
	"  elect NAME --value V [lock options] [--] CMD   run CMD while leading\n"
	"                                   NAME, with V published as its value\n"
	"  observe NAME [--count N] [--json]  print who leads NAME, its value and\n"
	"                                   token, at each change\n"
	"  watch PREFIX [--from POS] [--count N] [--json]   print every change of\n"
	"                                   the locks under PREFIX as it happens\n"
	"  top [PREFIX] [--once] [--interval MS] [--limit N] [--stale] [--json]\n"
	"                                   the busiest locks and longest waiters,\n"
	"                                   redrawn every interval (1000 ms)\n"
	"  acl set IDENTITY PREFIX PERMS    grant PERMS (lock,read,admin or all) on\n"
	"                                   names starting with PREFIX (\"\" = all)\n"
	"  acl delete IDENTITY PREFIX       remove that rule\n"
	"  acl list [--stale] [--json]      the rules (on prefixes you administer)\n"
	"  acl token NAME [--json]          a new bearer token for NAME and the\n"
	"                                   auth-tokens line that names it\n"
	"  revoke NAME [--token T] [--grace MS] [--json]\n"
	"                                   take NAME (or the grant of token T) from\n"
	"                                   its holders; with --grace, ask them to\n"
	"                                   release first (admin on NAME)\n"
	"  snapshot save FILE               a backup image of the whole state (admin;\n"
	"                                   restore: raftlockd --restore FILE)\n"
	"  member list [--json]             members, roles and match indexes (leader)\n"
	"  member add ID RAFTADDR CLIENTADDR  add a standby (then: raftlockd --join)\n"
	"  member remove ID                 remove a member (the leader hands over first)\n"
	"  member promote ID                make a standby a voter now\n"
	"  member replace OLDID NEWID RAFTADDR CLIENTADDR  remove OLDID, add NEWID\n"
	"\n"
	"hold options (lock and run):\n"
	"  --ttl MS          session TTL (10000)\n"
	"  --wait MS         give up after MS;  -n, --no-wait  do not wait at all\n"
	"  -E, --conflict-exit-code N   exit N (0..255) when the lock is busy (3)\n"
	"  --child-exit-code     exit with the command's status (the default; also\n"
	"                    spelt -child-exit-code)\n"
	"  --no-child-exit-code  exit 0 once the command ran under the lock,\n"
	"                    whatever its status (also when a request to release\n"
	"                    stopped it); 1 if the lock was lost meanwhile\n"
	"  --grace MS, --lock-delay MS  see below\n"
	"  --max-hold MS     (when the lock is created) revoke each grant MS after\n"
	"                    it was made (at most 86400000, a day);  --revoke-grace\n"
	"                    MS  with --max-hold: ask the holder to release\n"
	"                    (SIGTERM to the command) that long before (at most\n"
	"                    600000)\n"
	"  --bind            crash-fast: the session ends 200 ms after this\n"
	"                    process's connection closes;  --bind-grace MS  other\n"
	"  --json            without a command: the token as a JSON object\n"
	"\n"
	"global options:\n"
	"  --endpoints LIST  cluster client addresses (default: $RAFTLOCK_ENDPOINTS,\n"
	"                    else " CLI_DEFAULT_ENDPOINTS ")\n"
	"  --timeout MS      timeout of each request, retries included (10000)\n"
	"  --token TOKEN     bearer token (default: $RAFTLOCK_AUTH_TOKEN, which, unlike\n"
	"                    the flag, other users cannot see in the process list)\n"
	"  --json            JSON output, for every command that prints; a name that\n"
	"                    is not UTF-8 shows \\ufffd, its bytes in <field>_base64\n"
	"  -h, --help        this text;  --version  the version\n"
	"\n"
	"TLS options (each flag wins over its variable; TLS is on with a CA file\n"
	"or --tls, and then the node's certificate must be signed by the CA, be\n"
	"valid, and name the endpoint's host or IP address, or NAME):\n"
	"  --cacert FILE     CA certificates that sign the nodes' ($RAFTLOCK_CACERT)\n"
	"  --cert FILE       client certificate, for nodes with client-tls = mutual\n"
	"                    ($RAFTLOCK_CERT)\n"
	"  --key FILE        its private key ($RAFTLOCK_KEY)\n"
	"  --server-name NAME  the name every node's certificate must carry\n"
	"                    ($RAFTLOCK_SERVER_NAME)\n"
	"  --tls             TLS without --cacert: the system's CA store\n"
	"\n"
	"lock and run: waits for the lock forever unless --wait MS or --no-wait;\n"
	"the session TTL is --ttl MS (10000). The command gets RAFTLOCK_TOKEN (the\n"
	"fencing token), RAFTLOCK_LOCK and RAFTLOCK_SESSION in its environment; it\n"
	"runs in a process group of its own (on a terminal, the foreground one),\n"
	"and every signal below goes to that whole group. SIGINT, SIGTERM, SIGHUP\n"
	"and SIGQUIT are forwarded; while the lock is still awaited they end the\n"
	"wait (128+N). If the session cannot be renewed, the command gets\n"
	"SIGTERM --grace MS (2000, at most TTL/2) before the session's validity\n"
	"ends and SIGKILL when it ends, before the lock can go to anyone else. A\n"
	"watcher process kills the group if raftlock dies, or at the last\n"
	"validity it was told if raftlock is stopped. What the command leaves\n"
	"running is killed when it exits, before the release; Ctrl-Z does not\n"
	"suspend a lock holder.\n"
	"--lock-delay MS (when the lock is created): if a holder's session\n"
	"expires, the lock stays unavailable that long, for in-flight writes of\n"
	"the dead holder to land; a clean release frees it at once.\n"
	"A revoked grant (raftlock revoke, --max-hold) is taken as a lost lease:\n"
	"the command gets SIGKILL; a request to release gets it SIGTERM.\n"
	"\n"
	"exit status:\n"
	"  0   success (lock, run: the command's own status, 128+N if signal N\n"
	"      ended it; without a command, 0 after SIGINT, SIGTERM, SIGHUP,\n"
	"      SIGQUIT or a request to release)\n"
	"  1   error; a message on stderr names the problem (also a wait refused\n"
	"      because it would close a cycle of waiting sessions: EDEADLK;\n"
	"      lock, run without a command or with --no-child-exit-code: a\n"
	"      release or session close that failed or was not confirmed)\n"
	"  2   usage error\n"
	"  3   the lock is busy (--no-wait), or --wait ran out (-E N: N instead);\n"
	"      check: the token is not current\n"
	"lock, run: a lock lost while held (revoked, or the session's validity\n"
	"ended), also when that shows only as the command exits or at the\n"
	"release, exits 1 without a command or with --no-child-exit-code, else\n"
	"137 (128+SIGKILL, the signal a lost lock sends the command).\n";

static int usage(const char *problem)
{
	if (problem != NULL) {
		fprintf(stderr, "raftlock: %s\nTry 'raftlock --help'.\n", problem);
		return CLI_EXIT_USAGE;
	}
	fputs(usage_text, stdout);
	return CLI_EXIT_OK;
}

/* Parses a millisecond count in [min, max]; false when it does not. */
static bool parse_ms(const char *s, long min, long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		return false;
	*out = v;
	return true;
}

struct cli {
	char *endpoints_buf;
	const char *endpoints[CLI_MAX_ENDPOINTS];
	size_t n_endpoints;
	unsigned timeout_ms;
	bool tls;
	const char *cacert, *cert, *key, *server_name;
	const char *token; /* --token or $RAFTLOCK_AUTH_TOKEN, or NULL */
	bool json;         /* global --json: the default of every command */
	raftlock_client *client;
};

static int cli_split_endpoints(struct cli *cli, const char *list)
{
	cli->endpoints_buf = strdup(list);
	if (cli->endpoints_buf == NULL)
		return CLI_EXIT_ERROR;
	char *save = NULL;
	for (char *t = strtok_r(cli->endpoints_buf, ", ", &save); t != NULL;
	     t = strtok_r(NULL, ", ", &save)) {
		if (cli->n_endpoints == CLI_MAX_ENDPOINTS)
			return usage("too many endpoints");
		cli->endpoints[cli->n_endpoints++] = t;
	}
	if (cli->n_endpoints == 0)
		return usage("no endpoints given");
	return CLI_EXIT_OK;
}

static int cli_connect(struct cli *cli)
{
	struct raftlock_client_options o = {
		.addresses = cli->endpoints,
		.n_addresses = cli->n_endpoints,
		.client_name = "raftlock",
		.request_timeout_ms = cli->timeout_ms,
		.tls = cli->tls,
		.tls_ca_file = cli->cacert,
		.tls_cert_file = cli->cert,
		.tls_key_file = cli->key,
		.tls_server_name = cli->server_name,
		.auth_token = cli->token,
	};
	const char *msg = NULL;
	int rv = raftlock_client_open(&o, &cli->client, &msg);
	if (rv != 0) {
		fprintf(stderr, "raftlock: %s\n", msg);
		/* a bad --endpoints entry is a usage error */
		return rv == RAFTLOCK_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_ERROR;
	}
	return CLI_EXIT_OK;
}

static int cli_fail(struct cli *cli)
{
	fprintf(stderr, "raftlock: %s\n", raftlock_errmsg(cli->client));
	return CLI_EXIT_ERROR;
}

/* ------------------------------------------------------------ commands -- */

/* Flags of the read commands; the allow_ fields say which it takes. */
struct read_flags {
	bool allow_json;
	bool allow_stale;
	bool json;
	bool stale;
};

enum {
	OPT_JSON = 1000,
	OPT_STALE,
	OPT_TTL,
	OPT_WAIT,
	OPT_GRACE,
	OPT_PERMITS,
	OPT_LOCK_DELAY,
	OPT_MAX_HOLD,
	OPT_REVOKE_GRACE,
	OPT_BIND,
	OPT_BIND_GRACE,
	OPT_VALUE,
	OPT_ENDPOINTS,
	OPT_TIMEOUT,
	OPT_VERSION,
	OPT_CACERT,
	OPT_CERT,
	OPT_KEY,
	OPT_SERVER_NAME,
	OPT_TLS,
	OPT_AUTH_TOKEN,
	OPT_CHILD_EXIT_CODE,
	OPT_NO_CHILD_EXIT_CODE,
	OPT_ALL,
};

/* Parses --json/--stale (as allowed) and collects min..max positional
 * arguments. */
static int parse_read(const struct cli *cli, int argc, char **argv, struct read_flags *rf,
		      char **pos, int min, int max, int *n)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, OPT_JSON},
		{"stale", no_argument, NULL, OPT_STALE},
		{NULL, 0, NULL, 0},
	};
	int ch;
	rf->json = rf->allow_json && cli->json;
	optind = 0;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch == OPT_JSON && rf->allow_json)
			rf->json = true;
		else if (ch == OPT_STALE && rf->allow_stale)
			rf->stale = true;
		else
			return usage("unknown option for this command");
	}
	*n = argc - optind;
	if (*n < min || *n > max)
		return usage(*n < min ? "missing argument" : "too many arguments");
	for (int i = 0; i < *n; i++)
		pos[i] = argv[optind + i];
	return CLI_EXIT_OK;
}

static int cmd_status(struct cli *cli, int argc, char **argv)
{
	struct read_flags rf = {.allow_json = true};
	char *pos[1];
	int n, code = parse_read(cli, argc, argv, &rf, pos, 0, 0, &n);
	if (code != CLI_EXIT_OK)
		return code;
	struct cli_out o;
	struct raftlock_status *first = NULL;
	size_t answered = 0;
	cli_out_begin(&o, stdout, rf.json, true);
	for (size_t i = 0; i < cli->n_endpoints; i++) {
		struct raftlock_status *st = NULL;
		if (raftlock_status_get(cli->client, cli->endpoints[i], &st) != 0) {
			cli_print_status(&o, cli->endpoints[i], NULL, raftlock_errmsg(cli->client));
			continue;
		}
		answered++;
		cli_print_status(&o, cli->endpoints[i], st, NULL);
		if (first == NULL)
			first = st;
		else
			raftlock_status_free(st);
	}
	cli_print_members(&o, first);
	cli_out_end(&o);
	raftlock_status_free(first);
	if (answered == 0) {
		fprintf(stderr, "raftlock: no endpoint answered\n");
		return CLI_EXIT_ERROR;
	}
	return CLI_EXIT_OK;
}

/* Prints one page of a listing into o; *more when another follows. */
typedef int (*page_fn)(struct cli *cli, struct cli_out *o, void *state, bool *more);

/* Runs page() until the listing ends, all in one output listing. */
static int print_pages(struct cli *cli, bool json, page_fn page, void *state)
{
	struct cli_out o;
	bool more = true;
	int rv = 0;
	cli_out_begin(&o, stdout, json, true);
	for (int i = 0; i < CLI_MAX_PAGES && more && rv == 0; i++)
		rv = page(cli, &o, state, &more);
	cli_out_end(&o);
	return rv != 0 ? cli_fail(cli) : CLI_EXIT_OK;
}

struct holders_state {
	const char *prefix;
	bool stale;
	char after[RAFTLOCK_NAME_MAX + 1];
};

static int holders_page(struct cli *cli, struct cli_out *o, void *state, bool *more)
{
	struct holders_state *hs = state;
	struct raftlock_lock_list *list;
	int rv = raftlock_lock_list(cli->client, hs->prefix, hs->after, 0, hs->stale, &list);
	if (rv != 0)
		return rv;
	for (size_t i = 0; i < list->n_locks; i++)
		cli_print_lock(o, &list->locks[i], false);
	*more = list->more && list->n_locks > 0;
	if (*more)
		snprintf(hs->after, sizeof hs->after, "%s", list->locks[list->n_locks - 1].name);
	raftlock_lock_list_free(list);
	return 0;
}

static int cmd_holders(struct cli *cli, int argc, char **argv)
{
	struct read_flags rf = {.allow_json = true, .allow_stale = true};
	char *pos[1] = {""};
	int n, code = parse_read(cli, argc, argv, &rf, pos, 0, 1, &n);
	if (code != CLI_EXIT_OK)
		return code;
	struct holders_state hs = {.prefix = pos[0], .stale = rf.stale};
	return print_pages(cli, rf.json, holders_page, &hs);
}

static int cmd_show(struct cli *cli, int argc, char **argv)
{
	struct read_flags rf = {.allow_json = true, .allow_stale = true};
	char *pos[1];
	int n, code = parse_read(cli, argc, argv, &rf, pos, 1, 1, &n);
	if (code != CLI_EXIT_OK)
		return code;
	struct raftlock_lock_info *li;
	if (raftlock_lock_get(cli->client, pos[0], rf.stale, &li) != 0)
		return cli_fail(cli);
	struct cli_out o;
	cli_out_begin(&o, stdout, rf.json, false);
	cli_print_lock(&o, li, true);
	cli_out_end(&o);
	raftlock_lock_info_free(li);
	return CLI_EXIT_OK;
}

struct sessions_state {
	bool stale;
	uint64_t after;
};

static int sessions_page(struct cli *cli, struct cli_out *o, void *state, bool *more)
{
	struct sessions_state *ss = state;
	struct raftlock_session_list *list;
	int rv = raftlock_session_list(cli->client, ss->after, 0, ss->stale, &list);
	if (rv != 0)
		return rv;
	for (size_t i = 0; i < list->n_sessions; i++)
		cli_print_session(o, &list->sessions[i], list->cluster_time);
	*more = list->more && list->n_sessions > 0;
	if (*more)
		ss->after = list->sessions[list->n_sessions - 1].id;
	raftlock_session_list_free(list);
	return 0;
}

static int cmd_sessions(struct cli *cli, int argc, char **argv)
{
	struct read_flags rf = {.allow_json = true, .allow_stale = true};
	char *pos[1];
	int n, code = parse_read(cli, argc, argv, &rf, pos, 0, 0, &n);
	if (code != CLI_EXIT_OK)
		return code;
	struct sessions_state ss = {.stale = rf.stale};
	return print_pages(cli, rf.json, sessions_page, &ss);
}

static int cmd_check(struct cli *cli, int argc, char **argv)
{
	struct read_flags rf = {.allow_json = true};
	char *pos[2];
	int n, code = parse_read(cli, argc, argv, &rf, pos, 2, 2, &n);
	if (code != CLI_EXIT_OK)
		return code;
	char *end;
	errno = 0;
	unsigned long long token = strtoull(pos[1], &end, 10);
	if (errno != 0 || end == pos[1] || *end != '\0' || pos[1][0] == '-')
		return usage("TOKEN must be a decimal number");
	bool current = false;
	if (raftlock_check_token(cli->client, pos[0], token, &current) != 0)
		return cli_fail(cli);
	if (rf.json) {
		fputs("{", stdout);
		cli_json_name(stdout, CLI_JSON_SPACED, "lock", pos[0]);
		printf(", \"token\": %llu, \"current\": %s}\n", token, current ? "true" : "false");
	} else {
		printf("token %llu of '%s' is %s\n", token, pos[0],
		       current ? "current" : "not current");
	}
	return current ? CLI_EXIT_OK : CLI_EXIT_BUSY;
}

static int cmd_acl(struct cli *cli, int argc, char **argv)
{
	return cli_acl(cli->client, argc, argv, cli->json);
}

static int cmd_revoke(struct cli *cli, int argc, char **argv)
{
	return cli_revoke(cli->client, argc, argv, cli->json);
}

static int cmd_member(struct cli *cli, int argc, char **argv)
{
	return cli_member(cli->client, cli->json, argc, argv);
}

/* snapshot save FILE: a backup image of the cluster (raftlockd --restore). */
static int cmd_snapshot(struct cli *cli, int argc, char **argv)
{
	if (argc != 3 || strcmp(argv[1], "save") != 0 || argv[2][0] == '\0')
		return usage("snapshot save FILE");
	uint64_t index = 0;
	if (raftlock_snapshot_save(cli->client, argv[2], &index) != 0)
		return cli_fail(cli);
	if (cli->json) {
		fputs("{", stdout);
		cli_json_name(stdout, CLI_JSON_SPACED, "file", argv[2]);
		printf(", \"index\": %llu}\n", (unsigned long long)index);
	} else {
		printf("saved the cluster's state at index %llu to %s\n", (unsigned long long)index,
		       argv[2]);
	}
	return CLI_EXIT_OK;
}

/* consul lock spells it -child-exit-code: taken as --child-exit-code (for
 * getopt it would be -c with the argument "hild-exit-code"), where an
 * option is read next, never among the command's own arguments. */
static void hold_accept_consul_spelling(char **argv, int argc)
{
	static char long_form[] = "--child-exit-code";
	int next = optind > 0 ? optind : 1; /* 0: getopt starts again, at 1 */
	if (next < argc && strcmp(argv[next], "-child-exit-code") == 0)
		argv[next] = long_form;
}

/* Parses the hold options from optind on, stopping at the first word that
 * is not one. */
static int hold_options(int argc, char **argv, bool semaphore, struct cli_hold *h, long *permits,
			const char **shell_command)
{
	static const struct option opts[] = {
		{"ttl", required_argument, NULL, OPT_TTL},
		{"wait", required_argument, NULL, OPT_WAIT},
		{"no-wait", no_argument, NULL, 'n'},
		{"shared", no_argument, NULL, 's'},
		{"grace", required_argument, NULL, OPT_GRACE},
		{"permits", required_argument, NULL, OPT_PERMITS},
		{"lock-delay", required_argument, NULL, OPT_LOCK_DELAY},
		{"max-hold", required_argument, NULL, OPT_MAX_HOLD},
		{"revoke-grace", required_argument, NULL, OPT_REVOKE_GRACE},
		{"bind", no_argument, NULL, OPT_BIND},
		{"bind-grace", required_argument, NULL, OPT_BIND_GRACE},
		{"conflict-exit-code", required_argument, NULL, 'E'},
		{"command", required_argument, NULL, 'c'},
		{"child-exit-code", no_argument, NULL, OPT_CHILD_EXIT_CODE},
		{"no-child-exit-code", no_argument, NULL, OPT_NO_CHILD_EXIT_CODE},
		{"json", no_argument, NULL, OPT_JSON},
		{"all", no_argument, NULL, OPT_ALL},
		{"value", required_argument, NULL, OPT_VALUE},
		{NULL, 0, NULL, 0},
	};
	long v;
	int ch;
	for (;;) {
		hold_accept_consul_spelling(argv, argc);
		if ((ch = getopt_long(argc, argv, "+nsE:c:", opts, NULL)) == -1)
			break;
		switch (ch) {
		case OPT_TTL:
			if (!parse_ms(optarg, RAFTLOCK_TTL_MIN_MS, RAFTLOCK_TTL_MAX_MS, &v))
				return usage("--ttl: milliseconds, 1000..600000");
			h->ttl_ms = (unsigned)v;
			break;
		case OPT_WAIT:
			if (!parse_ms(optarg, 1, INT_MAX, &v))
				return usage("--wait: milliseconds, at least 1");
			h->wait_ms = (int)v;
			break;
		case 'n': h->wait_ms = 0; break;
		case 's':
			if (semaphore)
				return usage("--shared is for lock, not run");
			h->mode = RAFTLOCK_SHARED;
			break;
		case OPT_GRACE:
			if (!parse_ms(optarg, 0, RAFTLOCK_TTL_MAX_MS, &v))
				return usage("--grace: milliseconds");
			h->grace_ms = (unsigned)v;
			break;
		case OPT_PERMITS:
			if (!semaphore || !parse_ms(optarg, 1, 1000000, permits))
				return usage("--permits N (run only), N >= 1");
			break;
		case OPT_LOCK_DELAY:
			if (!parse_ms(optarg, 0, RAFTLOCK_LOCK_DELAY_MAX_MS, &v))
				return usage("--lock-delay: milliseconds");
			h->lock_opts.lock_delay_ms = (unsigned)v;
			break;
		case OPT_MAX_HOLD:
			if (!parse_ms(optarg, 1, RAFTLOCK_MAX_HOLD_MAX_MS, &v))
				return usage("--max-hold: milliseconds, 1..86400000");
			h->lock_opts.max_hold_ms = (unsigned)v;
			break;
		case OPT_REVOKE_GRACE:
			if (!parse_ms(optarg, 0, RAFTLOCK_REVOKE_GRACE_MAX_MS, &v))
				return usage("--revoke-grace: milliseconds, 0..600000");
			h->lock_opts.revoke_grace_ms = (unsigned)v;
			break;
		case OPT_BIND: h->bind = true; break;
		case OPT_BIND_GRACE:
			if (!parse_ms(optarg, RAFTLOCK_BIND_GRACE_MIN_MS,
				      RAFTLOCK_BIND_GRACE_MAX_MS, &v))
				return usage("--bind-grace: milliseconds, 50..10000");
			h->bind = true;
			h->bind_grace_ms = (unsigned)v;
			break;
		case 'E':
			if (!parse_ms(optarg, 0, 255, &v))
				return usage("--conflict-exit-code: a number, 0..255");
			h->conflict_exit_code = (int)v;
			break;
		case 'c': *shell_command = optarg; break;
		case OPT_CHILD_EXIT_CODE: h->child_exit_code = true; break;
		case OPT_NO_CHILD_EXIT_CODE: h->child_exit_code = false; break;
		case OPT_JSON: h->json = true; break;
		case OPT_ALL:
			if (semaphore)
				return usage("--all is for lock, not run");
			h->all = true;
			break;
		case OPT_VALUE:
			if (h->lock_opts.kind != RAFTLOCK_MUTEX ||
			    strlen(optarg) > RAFTLOCK_VALUE_MAX)
				return usage("--value V: elect only, at most 4096 bytes");
			h->value = optarg;
			break;
		default: return usage("unknown option");
		}
	}
	return CLI_EXIT_OK;
}

/* lock and run: options, NAME, options again (flock puts -c after the
 * file), then [--] CMD ARGS..., -c 'SHELL COMMAND', or nothing (hold until
 * a signal). */
static int cmd_hold(struct cli *cli, int argc, char **argv, bool semaphore, bool elect)
{
	struct cli_hold h = {
		.lock_opts.kind = elect ? RAFTLOCK_MUTEX : 0,
		.mode = RAFTLOCK_EXCLUSIVE,
		.permits = 1,
		.wait_ms = -1,
		.ttl_ms = 10000,
		.grace_ms = 2000,
		.conflict_exit_code = CLI_EXIT_BUSY,
		.child_exit_code = true,
		.json = cli->json,
	};
	long permits = 0;
	const char *shell_command = NULL;
	optind = 0;
	int code = hold_options(argc, argv, semaphore, &h, &permits, &shell_command);
	if (code != CLI_EXIT_OK)
		return code;
	if (optind >= argc || strcmp(argv[optind], "--") == 0)
		return usage("missing lock NAME");
	h.name = argv[optind++];
	code = hold_options(argc, argv, semaphore, &h, &permits, &shell_command);
	if (code != CLI_EXIT_OK)
		return code;
	if (semaphore && permits == 0)
		return usage("run needs --permits N");
	/* the grace is counted back from the revocation --max-hold makes */
	if (h.lock_opts.revoke_grace_ms != 0 && h.lock_opts.max_hold_ms == 0)
		return usage("--revoke-grace needs --max-hold");
	char *shell_argv[4] = {NULL, "-c", (char *)shell_command, NULL};
	if (shell_command != NULL) {
		if (optind < argc)
			return usage("-c 'SHELL COMMAND' or CMD [ARGS...], not both");
		/* as flock(1): the user's shell, else sh */
		const char *shell = getenv("SHELL");
		shell_argv[0] = (char *)(shell != NULL && shell[0] != '\0' ? shell : "/bin/sh");
		h.argv = shell_argv;
	} else if (optind < argc) {
		h.argv = argv + optind;
	}
	if (h.grace_ms > h.ttl_ms / 2)
		h.grace_ms = h.ttl_ms / 2;
	if (elect) {
		if (h.mode == RAFTLOCK_SHARED)
			return usage("elect: a leader is exclusive (no --shared)");
		if (h.all) /* a set's grant carries no value to publish */
			return usage("elect: one NAME (no --all)");
		/* an election is a mutex whose grant publishes the value */
	} else if (semaphore) {
		h.lock_opts.kind = RAFTLOCK_SEMAPHORE;
		h.lock_opts.limit = (uint32_t)permits;
	} else {
		/* rwlock in both modes, so `lock` and `lock --shared` on one
		 * name work together */
		h.lock_opts.kind = RAFTLOCK_RWLOCK;
	}
	return cli_hold_run(cli->client, &h);
}

/* --------------------------------------------------------------- main -- */

static int cmd_lock(struct cli *cli, int argc, char **argv)
{
	return cmd_hold(cli, argc, argv, false, false);
}

static int cmd_run(struct cli *cli, int argc, char **argv)
{
	return cmd_hold(cli, argc, argv, true, false);
}

/* elect NAME --value V [--] CMD: lock's options, on a mutex whose grant
 * publishes V (raftlock_campaign). */
static int cmd_elect(struct cli *cli, int argc, char **argv)
{
	return cmd_hold(cli, argc, argv, false, true);
}

static int cmd_top(struct cli *cli, int argc, char **argv)
{
	enum { OPT_ONCE = 1, OPT_INTERVAL, OPT_LIMIT };
	static const struct option opts[] = {
		{"once", no_argument, NULL, OPT_ONCE},
		{"interval", required_argument, NULL, OPT_INTERVAL},
		{"limit", required_argument, NULL, OPT_LIMIT},
		{"stale", no_argument, NULL, OPT_STALE},
		{"json", no_argument, NULL, OPT_JSON},
		{NULL, 0, NULL, 0},
	};
	struct cli_top_options o = {.prefix = "", .interval_ms = 1000, .limit = 20};
	optind = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case OPT_ONCE: o.once = true; break;
		case OPT_STALE: o.stale = true; break;
		case OPT_JSON: o.json = true; break;
		case OPT_INTERVAL:
			if (!parse_ms(optarg, 100, 3600000, &o.interval_ms))
				return usage("top --interval: milliseconds, 100 to 3600000");
			break;
		case OPT_LIMIT:
			if (!parse_ms(optarg, 1, 100000, &o.limit))
				return usage("top --limit: 1 to 100000");
			break;
		default: return usage("top: unknown option");
		}
	}
	if (optind < argc)
		o.prefix = argv[optind++];
	if (optind < argc)
		return usage("top: one PREFIX at most");
	return cli_top(cli->client, &o);
}

static int cmd_watch(struct cli *cli, int argc, char **argv)
{
	enum { OPT_FROM = 1, OPT_COUNT };
	static const struct option opts[] = {
		{"from", required_argument, NULL, OPT_FROM},
		{"count", required_argument, NULL, OPT_COUNT},
		{"json", no_argument, NULL, OPT_JSON},
		{NULL, 0, NULL, 0},
	};
	struct raftlock_position from;
	struct cli_events_options o = {.json = cli->json};
	long count;
	optind = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case OPT_JSON: o.json = true; break;
		case OPT_FROM:
			if (raftlock_position_parse(optarg, &from) != 0)
				return usage("watch --from: a position as printed, "
					     "INDEX[.OFFSET][@CLUSTER]");
			o.from = &from;
			break;
		case OPT_COUNT:
			if (!parse_ms(optarg, 1, 1000000000, &count))
				return usage("watch --count: 1 to 1000000000");
			o.count = (uint64_t)count;
			break;
		default: return usage("watch: unknown option");
		}
	}
	if (optind + 1 != argc)
		return usage("watch: one PREFIX (\"\" for every lock)");
	o.prefix = argv[optind];
	return cli_events(cli->client, &o);
}

static int cmd_observe(struct cli *cli, int argc, char **argv)
{
	enum { OPT_COUNT = 1 };
	static const struct option opts[] = {
		{"count", required_argument, NULL, OPT_COUNT},
		{"json", no_argument, NULL, OPT_JSON},
		{NULL, 0, NULL, 0},
	};
	struct cli_events_options o = {.json = cli->json};
	long count;
	optind = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case OPT_JSON: o.json = true; break;
		case OPT_COUNT:
			if (!parse_ms(optarg, 1, 1000000000, &count))
				return usage("observe --count: 1 to 1000000000");
			o.count = (uint64_t)count;
			break;
		default: return usage("observe: unknown option");
		}
	}
	if (optind + 1 != argc)
		return usage("observe: one election NAME");
	o.prefix = argv[optind];
	return cli_observe(cli->client, &o);
}

static const struct {
	const char *name;
	int (*run)(struct cli *, int, char **);
} commands[] = {
	{"status", cmd_status},     {"lock", cmd_lock},       {"run", cmd_run},
	{"holders", cmd_holders},   {"show", cmd_show},       {"sessions", cmd_sessions},
	{"check", cmd_check},       {"acl", cmd_acl},         {"top", cmd_top},
	{"snapshot", cmd_snapshot}, {"member", cmd_member},   {"watch", cmd_watch},
	{"elect", cmd_elect},       {"observe", cmd_observe}, {"revoke", cmd_revoke},
};

/* An environment variable; NULL when unset or empty. */
static const char *cli_env(const char *name)
{
	const char *v = getenv(name);
	return v != NULL && v[0] != '\0' ? v : NULL;
}

/* Global options; *cmd is the index of the command word. */
static int parse_globals(struct cli *cli, int argc, char **argv, int *cmd)
{
	static const struct option opts[] = {
		{"endpoints", required_argument, NULL, OPT_ENDPOINTS},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		{"cacert", required_argument, NULL, OPT_CACERT},
		{"cert", required_argument, NULL, OPT_CERT},
		{"key", required_argument, NULL, OPT_KEY},
		{"server-name", required_argument, NULL, OPT_SERVER_NAME},
		{"tls", no_argument, NULL, OPT_TLS},
		{"token", required_argument, NULL, OPT_AUTH_TOKEN},
		{"json", no_argument, NULL, OPT_JSON},
		{NULL, 0, NULL, 0},
	};
	bool version = false;
	cli->cacert = cli_env("RAFTLOCK_CACERT");
	cli->cert = cli_env("RAFTLOCK_CERT");
	cli->key = cli_env("RAFTLOCK_KEY");
	cli->server_name = cli_env("RAFTLOCK_SERVER_NAME");
	const char *endpoints = getenv("RAFTLOCK_ENDPOINTS");
	/* Not RAFTLOCK_TOKEN: lock and run give their command the fencing
	 * token under that name. */
	cli->token = cli_env("RAFTLOCK_AUTH_TOKEN");
	long v;
	int ch;
	if (endpoints == NULL || endpoints[0] == '\0')
		endpoints = CLI_DEFAULT_ENDPOINTS;
	while ((ch = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (ch) {
		case OPT_ENDPOINTS: endpoints = optarg; break;
		case OPT_AUTH_TOKEN: cli->token = optarg; break;
		case OPT_TIMEOUT:
			if (!parse_ms(optarg, 1, INT_MAX, &v))
				return usage("--timeout: milliseconds, at least 1");
			cli->timeout_ms = (unsigned)v;
			break;
		case OPT_CACERT: cli->cacert = optarg; break;
		case OPT_CERT: cli->cert = optarg; break;
		case OPT_KEY: cli->key = optarg; break;
		case OPT_SERVER_NAME: cli->server_name = optarg; break;
		case OPT_TLS: cli->tls = true; break;
		case 'h': usage(NULL); return -1;
		case OPT_JSON: cli->json = true; break;
		case OPT_VERSION: version = true; break;
		default: return usage("unknown option");
		}
	}
	if (version) {
		if (cli->json)
			printf("{\"program\": \"raftlock\", \"version\": \"%s\"}\n",
			       RAFTLOCK_VERSION_STRING);
		else
			printf("raftlock %s\n", RAFTLOCK_VERSION_STRING);
		return -1;
	}
	if (optind >= argc)
		return usage("missing command");
	if ((cli->cert != NULL || cli->key != NULL || cli->server_name != NULL) &&
	    cli->cacert == NULL && !cli->tls)
		return usage("--cert, --key and --server-name need --cacert FILE (or --tls)");
	*cmd = optind;
	return cli_split_endpoints(cli, endpoints);
}

int main(int argc, char **argv)
{
	struct cli cli = {0};
	int cmd = 0;
	int code = parse_globals(&cli, argc, argv, &cmd);
	if (code != CLI_EXIT_OK)
		goto out;
	int (*run)(struct cli *, int, char **) = NULL;
	const char *word = argv[cmd];
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (strcmp(word, commands[i].name) == 0)
			run = commands[i].run;
	if (run == NULL) {
		code = usage("unknown command");
		goto out;
	}
	if (cli_acl_offline(argc - cmd, argv + cmd)) {
		code = cli_acl_token(argc - cmd, argv + cmd, cli.json);
		goto out;
	}
	/* lock, run and elect take their signals with sigwait (watch and
	 * observe theirs with sigtimedwait): blocked in every thread, so the
	 * client's threads start with them blocked. The other commands keep
	 * the usual signal behaviour. */
	sigset_t set;
	cli_signal_set(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	code = cli_connect(&cli);
	if (run != cmd_lock && run != cmd_run && run != cmd_elect && run != cmd_watch &&
	    run != cmd_observe)
		pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	if (code != CLI_EXIT_OK)
		goto out;
	code = run(&cli, argc - cmd, argv + cmd);
	raftlock_client_close(cli.client);
out:
	free(cli.endpoints_buf);
	return code < 0 ? CLI_EXIT_OK : code;
}
