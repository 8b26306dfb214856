/*
 * bench_limits: what this machine allows, printed beside every benchmark run.
 *
 *   - fsyncs per second of 4 KiB appends that grow a file in --dir (the
 *     filesystem of the data directories): every append changes the file
 *     size, so each fsync writes metadata too (Redis's AOF with
 *     appendfsync always);
 *   - durable 4 KiB writes into preallocated files, as libraft writes its
 *     segments (posix_fallocate, then O_DIRECT where the filesystem has it,
 *     and O_DSYNC; small entries write the same block again until it is
 *     full): the disk's part of a raft commit;
 *   - the same writes made by three writers at once, each into its own
 *     file on that filesystem, as the three members of a benchmark cluster
 *     write one disk: what each write of a commit costs when they queue;
 *   - loopback TCP round-trip time of a small message (ping-pong between
 *     two threads, TCP_NODELAY), p50 and p99.
 *
 * Output: one JSON line. Each measurement is bounded in time and count.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define APPEND_SIZE 4096
#define FSYNC_MAX_COUNT 20000
#define RTT_MAX_COUNT 200000
#define RTT_MSG 64

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double quantile(double *v, size_t n, double q)
{
	if (n == 0)
		return 0;
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

struct disk_result {
	double per_s;
	double p50_ms, p99_ms;
	size_t count;
};

/* Sorts n latencies (seconds) made in elapsed seconds and sums them up. */
static void summarize(double *lat, size_t n, double elapsed, struct disk_result *r)
{
	qsort(lat, n, sizeof *lat, cmp_double);
	r->count = n;
	r->per_s = elapsed > 0 ? (double)n / elapsed : 0;
	r->p50_ms = quantile(lat, n, 0.50) * 1e3;
	r->p99_ms = quantile(lat, n, 0.99) * 1e3;
}

/* Runs op (one durable write of APPEND_SIZE bytes) until seconds pass or
 * FSYNC_MAX_COUNT ran, keeping each latency in lat (FSYNC_MAX_COUNT
 * slots). Returns how many ran, or -1 if one failed. */
static long record_writes(int (*op)(void *), void *ctx, double seconds, double *lat)
{
	size_t n = 0;
	double end = now_s() + seconds;
	while (n < FSYNC_MAX_COUNT) {
		double t0 = now_s();
		if (t0 >= end)
			break;
		if (op(ctx) != 0)
			return -1;
		lat[n++] = now_s() - t0;
	}
	return (long)n;
}

static int timed_writes(int (*op)(void *), void *ctx, double seconds, struct disk_result *r)
{
	double *lat = malloc(sizeof(double) * FSYNC_MAX_COUNT);
	if (lat == NULL)
		return -1;
	double start = now_s();
	long n = record_writes(op, ctx, seconds, lat);
	if (n >= 0)
		summarize(lat, (size_t)n, now_s() - start, r);
	free(lat);
	return n >= 0 ? 0 : -1;
}

/* Creates a file in dir that lives until it is closed: nothing is left behind. */
static int open_scratch(const char *dir, int flags)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/bench-limits-%ld.tmp", dir, (long)getpid());
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | flags, 0600);
	if (fd < 0)
		return -1;
	unlink(path);
	return fd;
}

struct append {
	int fd;
	char block[APPEND_SIZE];
};

static int append_fsync(void *arg)
{
	struct append *a = arg;
	if (write(a->fd, a->block, sizeof a->block) != (ssize_t)sizeof a->block ||
	    fsync(a->fd) != 0) {
		fprintf(stderr, "bench_limits: append+fsync: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static int measure_fsync(const char *dir, double seconds, struct disk_result *r)
{
	struct append a;
	a.fd = open_scratch(dir, O_APPEND);
	if (a.fd < 0) {
		fprintf(stderr, "bench_limits: open in %s: %s\n", dir, strerror(errno));
		return -1;
	}
	memset(a.block, 'r', sizeof a.block);
	int rv = timed_writes(append_fsync, &a, seconds, r);
	close(a.fd);
	return rv;
}

struct segment {
	int fd;
	off_t off;
	char *block; /* APPEND_SIZE bytes, aligned for O_DIRECT */
};

/* Entries of a few hundred bytes, as one client makes them, fill a block
 * in about this many writes: libraft writes the block again with each. */
#define WRITES_PER_BLOCK 16

static int segment_write(void *arg)
{
	struct segment *s = arg;
	off_t at = s->off / WRITES_PER_BLOCK * APPEND_SIZE;
	if (pwrite(s->fd, s->block, APPEND_SIZE, at) != APPEND_SIZE) {
		fprintf(stderr, "bench_limits: segment write: %s\n", strerror(errno));
		return -1;
	}
	s->off++;
	return 0;
}

/* Opens a preallocated file in dir for segment writes, as libraft opens
 * its open segment: O_DIRECT where the filesystem has it, and O_DSYNC;
 * one file allocated up front for every write a window can make, so that
 * no write extends it. */
static int segment_open(const char *dir, struct segment *s, bool *direct)
{
	*s = (struct segment){.fd = -1};
	if (posix_memalign((void **)&s->block, APPEND_SIZE, APPEND_SIZE) != 0) {
		s->block = NULL;
		return -1;
	}
	memset(s->block, 'r', APPEND_SIZE);
	*direct = true;
	s->fd = open_scratch(dir, O_DSYNC | O_DIRECT);
	if (s->fd < 0 && errno == EINVAL) { /* no direct I/O here: libraft goes without */
		*direct = false;
		s->fd = open_scratch(dir, O_DSYNC);
	}
	if (s->fd < 0 || posix_fallocate(s->fd, 0, (off_t)FSYNC_MAX_COUNT * APPEND_SIZE) != 0) {
		fprintf(stderr, "bench_limits: preallocated file in %s: %s\n", dir,
			strerror(errno));
		return -1;
	}
	return 0;
}

static void segment_close(struct segment *s)
{
	if (s->fd >= 0)
		close(s->fd);
	free(s->block);
}

/* Durable writes into a preallocated file, as libraft writes its open
 * segment: each block written WRITES_PER_BLOCK times (the first into a
 * fresh, unwritten block). */
static int measure_log_write(const char *dir, double seconds, struct disk_result *r, bool *direct)
{
	struct segment s;
	int rv = -1;
	if (segment_open(dir, &s, direct) == 0)
		rv = timed_writes(segment_write, &s, seconds, r);
	segment_close(&s);
	return rv;
}

/* The members of a benchmark cluster: one disk under all of them. */
#define SHARED_WRITERS 3

struct writer {
	struct segment seg;
	double seconds;
	double *lat; /* FSYNC_MAX_COUNT slots */
	long count;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	w->count = record_writes(segment_write, &w->seg, w->seconds, w->lat);
	return NULL;
}

/* The segment writes of SHARED_WRITERS writers at once, each into a file
 * of its own: the latencies of all of them, and their writes per second
 * together. */
static int measure_shared_log_write(const char *dir, double seconds, struct disk_result *r)
{
	struct writer w[SHARED_WRITERS];
	pthread_t th[SHARED_WRITERS];
	double *lat = malloc(sizeof(double) * FSYNC_MAX_COUNT * SHARED_WRITERS);
	int started = 0, rv = -1;
	bool direct;
	for (int i = 0; i < SHARED_WRITERS; i++)
		w[i] = (struct writer){.seg = {.fd = -1}, .seconds = seconds, .count = -1};
	if (lat == NULL)
		return -1;
	for (int i = 0; i < SHARED_WRITERS; i++) {
		w[i].lat = lat + (size_t)i * FSYNC_MAX_COUNT;
		if (segment_open(dir, &w[i].seg, &direct) != 0)
			goto out;
	}
	double start = now_s();
	for (; started < SHARED_WRITERS; started++)
		if (pthread_create(&th[started], NULL, writer_main, &w[started]) != 0)
			break;
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	double elapsed = now_s() - start;
	if (started < SHARED_WRITERS)
		goto out;
	/* Gather every writer's latencies at the front of the buffer. */
	size_t n = 0;
	for (int i = 0; i < SHARED_WRITERS; i++) {
		if (w[i].count < 0)
			goto out;
		memmove(lat + n, w[i].lat, sizeof(double) * (size_t)w[i].count);
		n += (size_t)w[i].count;
	}
	summarize(lat, n, elapsed, r);
	rv = 0;
out:
	for (int i = 0; i < SHARED_WRITERS; i++)
		segment_close(&w[i].seg);
	free(lat);
	return rv;
}

static int full_io(int fd, char *buf, size_t len, int do_write)
{
	size_t off = 0;
	while (off < len) {
		ssize_t k =
			do_write ? write(fd, buf + off, len - off) : read(fd, buf + off, len - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		off += (size_t)k;
	}
	return 0;
}

static void *echo_main(void *arg)
{
	int fd = *(int *)arg;
	char buf[RTT_MSG];
	while (full_io(fd, buf, sizeof buf, 0) == 0)
		if (full_io(fd, buf, sizeof buf, 1) != 0)
			break;
	close(fd);
	return NULL;
}

struct rtt_result {
	double p50_us, p99_us, mean_us;
	size_t count;
};

static int measure_rtt(double seconds, struct rtt_result *r)
{
	int one = 1, lfd = -1, cfd = -1, sfd = -1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof a;
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 1) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen) != 0)
		goto fail;
	cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (cfd < 0 || connect(cfd, (struct sockaddr *)&a, sizeof a) != 0)
		goto fail;
	sfd = accept(lfd, NULL, NULL);
	if (sfd < 0)
		goto fail;
	close(lfd);
	lfd = -1;
	setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	pthread_t th;
	if (pthread_create(&th, NULL, echo_main, &sfd) != 0)
		goto fail;
	double *lat = malloc(sizeof(double) * RTT_MAX_COUNT);
	char buf[RTT_MSG];
	memset(buf, 'p', sizeof buf);
	size_t n = 0;
	double end = now_s() + seconds, sum = 0;
	while (lat != NULL && n < RTT_MAX_COUNT) {
		double t0 = now_s();
		if (t0 >= end)
			break;
		if (full_io(cfd, buf, sizeof buf, 1) != 0 || full_io(cfd, buf, sizeof buf, 0) != 0)
			break;
		lat[n] = now_s() - t0;
		sum += lat[n++];
	}
	shutdown(cfd, SHUT_RDWR);
	close(cfd);
	pthread_join(th, NULL);
	if (lat == NULL || n == 0) {
		free(lat);
		return -1;
	}
	qsort(lat, n, sizeof *lat, cmp_double);
	r->count = n;
	r->p50_us = quantile(lat, n, 0.50) * 1e6;
	r->p99_us = quantile(lat, n, 0.99) * 1e6;
	r->mean_us = sum / (double)n * 1e6;
	free(lat);
	return 0;
fail:
	fprintf(stderr, "bench_limits: loopback socket: %s\n", strerror(errno));
	if (lfd >= 0)
		close(lfd);
	if (cfd >= 0)
		close(cfd);
	if (sfd >= 0)
		close(sfd);
	return -1;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: bench_limits [--dir DIR] [--seconds S]\n"
		   "  --dir DIR     directory on the data filesystem (default: .)\n"
		   "  --seconds S   time per measurement, 0.1..30 (default: 2)\n");
}

int main(int argc, char **argv)
{
	const char *dir = ".";
	double seconds = 2;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
			dir = argv[++i];
		} else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
			seconds = atof(argv[++i]);
		} else if (strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (!(seconds >= 0.1 && seconds <= 30)) {
		usage(stderr);
		return 2;
	}
	struct disk_result fs, lw, sw;
	struct rtt_result rt;
	bool direct;
	if (measure_fsync(dir, seconds, &fs) != 0 ||
	    measure_log_write(dir, seconds, &lw, &direct) != 0 ||
	    measure_shared_log_write(dir, seconds, &sw) != 0 || measure_rtt(seconds, &rt) != 0)
		return 1;
	printf("{\"system\":\"machine\",\"fsync_dir\":\"%s\",\"fsyncs_per_s\":%.1f,"
	       "\"fsync_p50_ms\":%.3f,\"fsync_p99_ms\":%.3f,\"fsync_count\":%zu,"
	       "\"log_writes_per_s\":%.1f,\"log_write_p50_ms\":%.3f,\"log_write_p99_ms\":%.3f,"
	       "\"log_write_count\":%zu,\"log_write_direct\":%s,"
	       "\"shared_writers\":%d,\"shared_log_writes_per_s\":%.1f,"
	       "\"shared_log_write_p50_ms\":%.3f,\"shared_log_write_p99_ms\":%.3f,"
	       "\"shared_log_write_count\":%zu,"
	       "\"rtt_p50_us\":%.1f,\"rtt_p99_us\":%.1f,\"rtt_mean_us\":%.1f,"
	       "\"rtt_count\":%zu,\"window_s\":%.1f}\n",
	       dir, fs.per_s, fs.p50_ms, fs.p99_ms, fs.count, lw.per_s, lw.p50_ms, lw.p99_ms,
	       lw.count, direct ? "true" : "false", SHARED_WRITERS, sw.per_s, sw.p50_ms, sw.p99_ms,
	       sw.count, rt.p50_us, rt.p99_us, rt.mean_us, rt.count, seconds);
	return 0;
}
