#include "stats.h"

#include "json.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Per thread: 4 Mi samples (16 MiB) is far beyond any window we run. */
#define STATS_SAMPLES_MAX (4u << 20)

void stats_samples_add(struct stats_samples *s, double ms)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 4096;
		if (cap > STATS_SAMPLES_MAX)
			cap = STATS_SAMPLES_MAX;
		float *v = cap > s->cap ? realloc(s->v, cap * sizeof *v) : NULL;
		if (v == NULL) {
			s->dropped++;
			return;
		}
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = (float)ms;
}

void stats_samples_free(struct stats_samples *s)
{
	free(s->v);
	memset(s, 0, sizeof *s);
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

float *stats_merge_sorted(struct stats_samples *const *parts, size_t n, size_t *count)
{
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += parts[i]->n;
	*count = 0;
	if (total == 0)
		return NULL;
	float *all = malloc(total * sizeof *all);
	if (all == NULL)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		memcpy(all + k, parts[i]->v, parts[i]->n * sizeof *all);
		k += parts[i]->n;
	}
	qsort(all, total, sizeof *all, cmp_float);
	*count = total;
	return all;
}

double stats_quantile(const float *sorted, size_t n, double q)
{
	if (n == 0)
		return 0;
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);
	return sorted[i < n ? i : n - 1];
}

int stats_write_cdf(const char *path, const float *sorted, size_t n)
{
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return -1;
	for (int k = 0; k <= 1000 && n > 0; k++) {
		double q = k / 1000.0;
		fprintf(f, "%.4f %.4f\n", q, stats_quantile(sorted, n, q));
	}
	return fclose(f) == 0 ? 0 : -1;
}

double stats_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

size_t stats_parse_pids(const char *list, int *pids, size_t max)
{
	size_t n = 0;
	const char *p = list;
	while (p != NULL && *p != '\0' && n < max) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		if (v > 0)
			pids[n++] = (int)v;
		p = *end == ',' ? end + 1 : NULL;
	}
	return n;
}

double stats_proc_cpu(const int *pids, size_t n)
{
	double hz = (double)sysconf(_SC_CLK_TCK), total = 0;
	for (size_t i = 0; i < n; i++) {
		char path[64], buf[1024];
		snprintf(path, sizeof path, "/proc/%d/stat", pids[i]);
		FILE *f = fopen(path, "r");
		if (f == NULL)
			continue;
		size_t len = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[len] = '\0';
		/* The command name may hold spaces and parentheses: fields are
		 * counted after its last ')'. utime and stime are fields 14, 15. */
		char *p = strrchr(buf, ')');
		if (p == NULL)
			continue;
		unsigned long long ut = 0, st = 0;
		if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
			   &st) == 2)
			total += (double)(ut + st) / hz;
	}
	return total;
}

uint64_t stats_proc_status_kib(int pid, const char *field)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 0;
	unsigned long long kib = 0;
	size_t len = strlen(field);
	while (fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, field, len) == 0 && line[len] == ':' &&
		    sscanf(line + len + 1, " %llu kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

uint64_t stats_proc_rss_kib(int pid)
{
	return stats_proc_status_kib(pid, "VmRSS");
}

void stats_print(FILE *f, const struct stats_result *r)
{
	fprintf(f, "{\"system\":");
	json_write_string(f, r->system);
	fprintf(f, ",\"workload\":");
	json_write_string(f, r->workload);
	fprintf(f,
		",\"clients\":%u,\"pairs_per_s\":%.1f,\"p50_ms\":%.3f,"
		"\"p99_ms\":%.3f,\"max_ms\":%.3f,\"errors\":%llu,"
		"\"server_cpu_s_per_1k\":%.4f,\"window_s\":%.1f,\"status\":",
		r->clients, r->pairs_per_s, r->p50_ms, r->p99_ms, r->max_ms,
		(unsigned long long)r->errors, r->server_cpu_s_per_1k, r->window_s);
	json_write_string(f, r->status ? r->status : "ok");
	fprintf(f, ",\"client_cpu_s_per_1k\":%.4f,\"client_switches_per_pair\":%.2f",
		r->client_cpu_s_per_1k, r->client_switches_per_pair);
	if (r->detail != NULL) {
		fprintf(f, ",\"detail\":");
		json_write_string(f, r->detail);
	}
	if (r->extra != NULL)
		fputs(r->extra, f);
	fprintf(f, "}\n");
	fflush(f);
}
