#include "driver.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum { PHASE_WARMUP, PHASE_WINDOW, PHASE_STOP };

#define DRIVER_ASYNC_DRAIN_S 30

static atomic_int driver_phase;
static char driver_detail[256];
static pthread_mutex_t driver_detail_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int driver_unsupported;

struct driver_thread {
	pthread_t th;
	unsigned client;
	driver_pair_fn pair;
	void *arg;
	struct stats_samples samples;
	unsigned long long pairs, errors;
};

bool driver_stopping(void)
{
	return atomic_load(&driver_phase) == PHASE_STOP || atomic_load(&driver_unsupported) != 0;
}

static void driver_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void driver_note(const char *msg)
{
	pthread_mutex_lock(&driver_detail_mu);
	if (driver_detail[0] == '\0')
		snprintf(driver_detail, sizeof driver_detail, "%s", msg);
	pthread_mutex_unlock(&driver_detail_mu);
}

struct driver_span {
	double cpu0, cpu1, self0, self1, t0, elapsed;
	double switches0, switches1; /* the generator's context switches */
};

/* The context switches of this process so far, of all its threads,
 * voluntary (a thread waits) and not (preempted). */
static double driver_switches(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (double)ru.ru_nvcsw + (double)ru.ru_nivcsw;
}

static void driver_count(struct driver_thread *t, bool in_window, int rv, double acquire_ms,
			 const char *err);

static void *driver_thread_main(void *p)
{
	struct driver_thread *t = p;
	char err[200];
	while (!driver_stopping()) {
		int phase = atomic_load(&driver_phase);
		double acq = 0;
		err[0] = '\0';
		int rv = t->pair(t->arg, t->client, &acq, err, sizeof err);
		if (rv == DRIVER_UNSUPPORTED) {
			driver_note(err[0] ? err : "unsupported");
			atomic_store(&driver_unsupported, 1);
			break;
		}
		if (rv == DRIVER_ABANDONED)
			break;
		driver_count(t, phase == PHASE_WINDOW, rv, acq, err);
		if (rv != 0)
			driver_sleep_ms(10);
	}
	return NULL;
}

/* Sleeps up to s seconds, waking early if the run was declared
 * unsupported. */
static void driver_wait(double s)
{
	double end = stats_now() + s;
	while (atomic_load(&driver_unsupported) == 0) {
		double left = end - stats_now();
		if (left <= 0)
			break;
		driver_sleep_ms(left > 0.05 ? 50 : (long)(left * 1000) + 1);
	}
}

/* Counts one pair that started in the window (or not). */
static void driver_count(struct driver_thread *t, bool in_window, int rv, double acquire_ms,
			 const char *err)
{
	if (!in_window)
		return;
	if (rv == 0) {
		t->pairs++;
		stats_samples_add(&t->samples, acquire_ms);
	} else {
		t->errors++;
		driver_note(err != NULL && err[0] ? err : "error");
	}
}

/* Warm-up, window, and the CPU and hook readings around the window, while
 * the clients run. */
static void driver_window(const struct driver_config *cfg, struct driver_span *span)
{
	int self = (int)getpid();
	driver_wait(cfg->warmup_s);
	span->cpu0 = stats_proc_cpu(cfg->pids, cfg->n_pids);
	span->self0 = stats_proc_cpu(&self, 1);
	span->switches0 = driver_switches();
	if (cfg->window_hook != NULL)
		cfg->window_hook(cfg->hook_arg, false);
	span->t0 = stats_now();
	atomic_store(&driver_phase, PHASE_WINDOW);
	driver_wait(cfg->window_s);
	atomic_store(&driver_phase, PHASE_STOP);
	span->elapsed = stats_now() - span->t0;
	span->cpu1 = stats_proc_cpu(cfg->pids, cfg->n_pids);
	span->self1 = stats_proc_cpu(&self, 1);
	span->switches1 = driver_switches();
	if (cfg->window_hook != NULL)
		cfg->window_hook(cfg->hook_arg, true);
}

/* Fills *out from the clients' counts and frees them. */
static void driver_report(const struct driver_config *cfg, struct driver_thread *ts, int rv,
			  const struct driver_span *span, struct stats_result *out)
{
	struct stats_samples **parts = calloc(cfg->clients, sizeof *parts);
	unsigned long long pairs = 0, errors = 0;
	for (unsigned i = 0; i < cfg->clients; i++) {
		pairs += ts[i].pairs;
		errors += ts[i].errors;
		if (parts != NULL)
			parts[i] = &ts[i].samples;
	}
	size_t n = 0;
	float *all = parts ? stats_merge_sorted(parts, cfg->clients, &n) : NULL;
	double elapsed = span->elapsed;
	out->pairs_per_s = elapsed > 0 ? (double)pairs / elapsed : 0;
	out->p50_ms = stats_quantile(all, n, 0.50);
	out->p99_ms = stats_quantile(all, n, 0.99);
	out->max_ms = n ? all[n - 1] : 0;
	out->errors = errors;
	out->server_cpu_s_per_1k = pairs ? (span->cpu1 - span->cpu0) / (double)pairs * 1000 : 0;
	out->client_cpu_s_per_1k = pairs ? (span->self1 - span->self0) / (double)pairs * 1000 : 0;
	out->client_switches_per_pair =
		pairs ? (span->switches1 - span->switches0) / (double)pairs : 0;
	out->window_s = elapsed;
	out->status = atomic_load(&driver_unsupported) ? "unsupported" : rv != 0 ? "failed" : "ok";
	/* A window without one pair means every client was stuck. */
	if (rv == 0 && pairs == 0 && !atomic_load(&driver_unsupported)) {
		out->status = "failed";
		if (driver_detail[0] == '\0')
			snprintf(driver_detail, sizeof driver_detail,
				 "no pair completed in the window: every client was blocked");
	}
	out->detail = driver_detail[0] ? driver_detail : NULL;
	if (cfg->cdf_out != NULL && n > 0 && stats_write_cdf(cfg->cdf_out, all, n) != 0)
		fprintf(stderr, "cannot write %s\n", cfg->cdf_out);
	free(all);
	free(parts);
	for (unsigned i = 0; i < cfg->clients; i++)
		stats_samples_free(&ts[i].samples);
	free(ts);
}

static void driver_reset(void)
{
	atomic_store(&driver_phase, PHASE_WARMUP);
	atomic_store(&driver_unsupported, 0);
	driver_detail[0] = '\0';
}

int driver_run(const struct driver_config *cfg, driver_pair_fn pair, void *arg,
	       struct stats_result *out)
{
	if (cfg->clients == 0 || cfg->clients > DRIVER_CLIENTS_MAX)
		return -1;
	driver_reset();
	struct driver_thread *ts = calloc(cfg->clients, sizeof *ts);
	if (ts == NULL)
		return -1;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	unsigned started = 0;
	for (; started < cfg->clients; started++) {
		struct driver_thread *t = &ts[started];
		t->client = started;
		t->pair = pair;
		t->arg = arg;
		if (pthread_create(&t->th, &attr, driver_thread_main, t) != 0)
			break;
	}
	pthread_attr_destroy(&attr);
	int rv = 0;
	struct driver_span span = {0};
	if (started < cfg->clients) {
		rv = -1;
		atomic_store(&driver_phase, PHASE_STOP);
	} else {
		driver_window(cfg, &span);
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(ts[i].th, NULL);
	driver_report(cfg, ts, rv, &span, out);
	return rv;
}

/* ------------------------------------------------------- asynchronous -- */

static struct driver_thread *driver_async;
static atomic_uint driver_async_active;

bool driver_in_window(void)
{
	return atomic_load(&driver_phase) == PHASE_WINDOW;
}

bool driver_pair_done(unsigned client, bool in_window, int rv, double acquire_ms, const char *err)
{
	if (rv == DRIVER_UNSUPPORTED) {
		driver_note(err != NULL && err[0] ? err : "unsupported");
		atomic_store(&driver_unsupported, 1);
	} else {
		driver_count(&driver_async[client], in_window, rv, acquire_ms, err);
	}
	if (!driver_stopping())
		return true;
	atomic_fetch_sub(&driver_async_active, 1);
	return false;
}

int driver_run_async(const struct driver_config *cfg, driver_start_fn start, void *arg,
		     struct stats_result *out)
{
	if (cfg->clients == 0 || cfg->clients > DRIVER_CLIENTS_MAX)
		return -1;
	driver_reset();
	driver_async = calloc(cfg->clients, sizeof *driver_async);
	if (driver_async == NULL)
		return -1;
	int rv = 0;
	struct driver_span span = {0};
	atomic_store(&driver_async_active, cfg->clients);
	for (unsigned i = 0; i < cfg->clients; i++) {
		if (start(arg, i) != 0) {
			atomic_fetch_sub(&driver_async_active, cfg->clients - i);
			atomic_store(&driver_phase, PHASE_STOP);
			rv = -1;
			break;
		}
	}
	if (rv == 0)
		driver_window(cfg, &span);
	/* Pairs in flight end within the client's request timeout. */
	double give_up = stats_now() + DRIVER_ASYNC_DRAIN_S;
	while (atomic_load(&driver_async_active) > 0 && stats_now() < give_up)
		driver_sleep_ms(10);
	if (atomic_load(&driver_async_active) > 0) {
		/* still referenced by callbacks: leak it rather than free it */
		fprintf(stderr, "driver: %u clients did not stop\n",
			atomic_load(&driver_async_active));
		exit(1);
	}
	driver_report(cfg, driver_async, rv, &span, out);
	driver_async = NULL;
	return rv;
}
