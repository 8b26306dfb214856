#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

static void options_usage(FILE *f, const char *prog, const char *workloads)
{
	fprintf(f,
		"usage: %s [options]\n"
		"  --workload W        %s\n"
		"  --clients N         concurrent clients, 1..1024 (default 1)\n"
		"  --warmup S          warm-up seconds (default 2)\n"
		"  --window S          measurement seconds (default 10)\n"
		"  --server-pids LIST  PIDs of the server processes (CPU, RSS)\n"
		"  --cdf-out FILE      write acquire-latency quantiles to FILE\n"
		"  --addresses LIST    host:port of the servers, comma-separated\n"
		"  --conns N           client objects (connections) shared by the\n"
		"                      clients of a lock workload (default 1)\n"
		"  --mode M            raftlock uncontended: async (default: many\n"
		"                      clients per thread, asynchronous calls) or\n"
		"                      threads (one thread per client, blocking calls)\n"
		"  --retry-ms N        poll interval of a busy try-lock (default 1)\n"
		"  --ttl-ms N          session or lock TTL (default 10000)\n"
		"  --count N           sessions or locks of a scale workload\n"
		"  --data-dirs LIST    the nodes' data directories (state workload)\n"
		"  --stop-cmd CMD      state: stops every node cleanly\n"
		"  --wipe-cmd CMD      state: stops every node, removes LMDB files\n"
		"  --start-cmd CMD     state: starts every node again\n"
		"  --catchup-cmd CMD   state: adds a new member, prints its address\n"
		"  --cacert FILE, --cert FILE, --key FILE, --server-name NAME\n"
		"                      raftlock over TLS, as for the raftlock command\n"
		"                      (default: $RAFTLOCK_CACERT, _CERT, _KEY, _SERVER_NAME)\n",
		prog, workloads);
}

/* The variable's value; NULL when unset or empty. */
static const char *options_env(const char *name)
{
	const char *v = getenv(name);
	return v != NULL && v[0] != '\0' ? v : NULL;
}

int options_parse(struct options *o, int argc, char **argv, const char *prog, const char *workloads)
{
	memset(o, 0, sizeof *o);
	o->workload = "uncontended";
	o->clients = 1;
	o->warmup_s = 2;
	o->window_s = 10;
	o->addresses = "127.0.0.1:7000";
	o->retry_ms = 1;
	o->conns = 1;
	o->mode = "async";
	o->ttl_ms = 10000;
	o->cacert = options_env("RAFTLOCK_CACERT");
	o->cert = options_env("RAFTLOCK_CERT");
	o->key = options_env("RAFTLOCK_KEY");
	o->server_name = options_env("RAFTLOCK_SERVER_NAME");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--help") == 0) {
			options_usage(stdout, prog, workloads);
			return 1;
		}
		if (v == NULL)
			goto bad;
		i++;
		if (strcmp(a, "--workload") == 0)
			o->workload = v;
		else if (strcmp(a, "--clients") == 0)
			o->clients = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(a, "--warmup") == 0)
			o->warmup_s = atof(v);
		else if (strcmp(a, "--window") == 0)
			o->window_s = atof(v);
		else if (strcmp(a, "--server-pids") == 0)
			o->n_pids = stats_parse_pids(v, o->pids, OPTIONS_PIDS_MAX);
		else if (strcmp(a, "--cdf-out") == 0)
			o->cdf_out = v;
		else if (strcmp(a, "--addresses") == 0)
			o->addresses = v;
		else if (strcmp(a, "--conns") == 0)
			o->conns = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(a, "--mode") == 0)
			o->mode = v;
		else if (strcmp(a, "--retry-ms") == 0)
			o->retry_ms = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(a, "--ttl-ms") == 0)
			o->ttl_ms = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(a, "--count") == 0)
			o->count = strtoul(v, NULL, 10);
		else if (strcmp(a, "--data-dirs") == 0)
			o->data_dirs = v;
		else if (strcmp(a, "--stop-cmd") == 0)
			o->stop_cmd = v;
		else if (strcmp(a, "--wipe-cmd") == 0)
			o->wipe_cmd = v;
		else if (strcmp(a, "--start-cmd") == 0)
			o->start_cmd = v;
		else if (strcmp(a, "--catchup-cmd") == 0)
			o->catchup_cmd = v;
		else if (strcmp(a, "--cacert") == 0)
			o->cacert = v;
		else if (strcmp(a, "--cert") == 0)
			o->cert = v;
		else if (strcmp(a, "--key") == 0)
			o->key = v;
		else if (strcmp(a, "--server-name") == 0)
			o->server_name = v;
		else
			goto bad;
	}
	if (o->clients < 1 || o->clients > 1024 || !(o->warmup_s >= 0 && o->warmup_s <= 120) ||
	    !(o->window_s >= 0.1 && o->window_s <= 7200) || o->ttl_ms == 0 || o->count > 10000000 ||
	    o->conns < 1 || o->conns > 64 ||
	    (strcmp(o->mode, "async") != 0 && strcmp(o->mode, "threads") != 0))
		goto bad;
	return 0;
bad:
	options_usage(stderr, prog, workloads);
	return -1;
}
