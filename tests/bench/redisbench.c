/*
 * redisbench: the no-consensus baseline. One Redis node (appendfsync
 * always), a lock taken with SET key token NX PX ttl and released with a
 * compare-and-delete script, as the usual single-instance recipe does.
 * Redis has no waiting: a client that finds the lock taken polls every
 * --retry-ms. One connection and thread per client. Prints the JSON line
 * shared with rlbench and etcdbench.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"
#include "options.h"
#include "stats.h"

static const char release_script[] = "if redis.call('get', KEYS[1]) == ARGV[1] then "
				     "return redis.call('del', KEYS[1]) else return 0 end";

struct redis_client {
	redisContext *c;
	char key[96];
	unsigned long long seq;
};

struct redis_bench {
	struct redis_client *clients;
	char sha[64];
	unsigned retry_ms, ttl_ms;
	bool contended;
};

static int redis_pair(void *arg, unsigned client, double *acquire_ms, char *err, size_t errlen)
{
	struct redis_bench *b = arg;
	struct redis_client *rc = &b->clients[client];
	char token[64];
	snprintf(token, sizeof token, "%d-%u-%llu", (int)getpid(), client, ++rc->seq);
	double t0 = stats_now(), give_up = t0 + 30;
	for (;;) {
		redisReply *r =
			redisCommand(rc->c, "SET %s %s NX PX %u", rc->key, token, b->ttl_ms);
		if (r == NULL) {
			snprintf(err, errlen, "SET: %s", rc->c->errstr);
			return -1;
		}
		int got = r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
		int busy = r->type == REDIS_REPLY_NIL;
		if (!got && !busy)
			snprintf(err, errlen, "SET: unexpected reply type %d", r->type);
		freeReplyObject(r);
		if (got)
			break;
		if (!busy)
			return -1;
		if (driver_stopping())
			return DRIVER_ABANDONED;
		if (stats_now() > give_up) {
			snprintf(err, errlen, "SET NX: still busy after polling");
			return -1;
		}
		if (b->retry_ms > 0) {
			struct timespec ts = {0, (long)b->retry_ms * 1000000L};
			nanosleep(&ts, NULL);
		}
	}
	*acquire_ms = (stats_now() - t0) * 1e3;
	redisReply *r = redisCommand(rc->c, "EVALSHA %s 1 %s %s", b->sha, rc->key, token);
	if (r == NULL) {
		snprintf(err, errlen, "EVALSHA: %s", rc->c->errstr);
		return -1;
	}
	int ok = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
	if (!ok)
		snprintf(err, errlen, "release: the lock was not ours any more");
	freeReplyObject(r);
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct options o;
	int prv = options_parse(&o, argc, argv, "redisbench", "uncontended | contended");
	if (prv != 0)
		return prv > 0 ? 0 : 2;
	struct redis_bench b = {.retry_ms = o.retry_ms, .ttl_ms = o.ttl_ms};
	struct stats_result res = {.system = "redis", .workload = o.workload, .clients = o.clients};
	if (strcmp(o.workload, "uncontended") != 0 && strcmp(o.workload, "contended") != 0) {
		res.status = "unsupported";
		res.detail = "Redis has no such lock";
		stats_print(stdout, &res);
		return 0;
	}
	b.contended = strcmp(o.workload, "contended") == 0;
	char host[128];
	int port = 6379;
	if (sscanf(o.addresses, "%127[^:]:%d", host, &port) < 1) {
		fprintf(stderr, "redisbench: bad address %s\n", o.addresses);
		return 2;
	}
	b.clients = calloc(o.clients, sizeof *b.clients);
	if (b.clients == NULL)
		return 1;
	long run = (long)time(NULL);
	int rv = 1;
	for (unsigned i = 0; i < o.clients; i++) {
		struct timeval tv = {5, 0};
		b.clients[i].c = redisConnectWithTimeout(host, port, tv);
		if (b.clients[i].c == NULL || b.clients[i].c->err) {
			fprintf(stderr, "redisbench: connect %s:%d: %s\n", host, port,
				b.clients[i].c ? b.clients[i].c->errstr : "out of memory");
			goto out;
		}
		redisSetTimeout(b.clients[i].c, tv);
		if (b.contended)
			snprintf(b.clients[i].key, sizeof b.clients[i].key, "bench:%ld:contended",
				 run);
		else
			snprintf(b.clients[i].key, sizeof b.clients[i].key, "bench:%ld:u:%u", run,
				 i);
	}
	redisReply *r = redisCommand(b.clients[0].c, "SCRIPT LOAD %s", release_script);
	if (r == NULL || r->type != REDIS_REPLY_STRING) {
		fprintf(stderr, "redisbench: SCRIPT LOAD failed\n");
		if (r)
			freeReplyObject(r);
		goto out;
	}
	snprintf(b.sha, sizeof b.sha, "%s", r->str);
	freeReplyObject(r);

	struct driver_config cfg = {.clients = o.clients,
				    .warmup_s = o.warmup_s,
				    .window_s = o.window_s,
				    .pids = o.pids,
				    .n_pids = o.n_pids,
				    .cdf_out = o.cdf_out};
	if (driver_run(&cfg, redis_pair, &b, &res) == 0)
		rv = 0;
	stats_print(stdout, &res);
out:
	for (unsigned i = 0; i < o.clients; i++)
		if (b.clients[i].c)
			redisFree(b.clients[i].c);
	free(b.clients);
	return rv;
}
