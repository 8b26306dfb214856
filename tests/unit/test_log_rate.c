/* test_log_rate.c: refusal log lines at a bounded rate (log_rate.h), on an
 * injected clock: a burst, then one a second under a flood, every line held
 * back counted and reported with the next one printed; a quiet spell fills
 * the bucket again; and log_rate_warn prints exactly what allow lets
 * through, with the count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "log_rate.h"

/* Asks for n lines at now_ms; returns how many were allowed and adds the
 * suppressed counts they reported to *reported. */
static unsigned ask(struct log_rate *r, uint64_t now_ms, unsigned n, uint64_t *reported)
{
	unsigned allowed = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t s = UINT64_MAX;
		if (log_rate_allow(r, now_ms, &s)) {
			allowed++;
			assert_true(s != UINT64_MAX);
			*reported += s;
		}
	}
	return allowed;
}

static void test_burst_then_one_a_second(void **state)
{
	(void)state;
	struct log_rate r = {0};
	uint64_t reported = 0, t = 5000;
	/* A burst at once: LOG_RATE_BURST lines, none held back before them. */
	assert_int_equal(ask(&r, t, 100, &reported), LOG_RATE_BURST);
	assert_int_equal(reported, 0);
	assert_int_equal(r.suppressed, 100 - LOG_RATE_BURST);
	/* Nothing more within the interval. */
	assert_int_equal(ask(&r, t + LOG_RATE_INTERVAL_MS - 1, 10, &reported), 0);
	/* One line a second under a flood of 1000 a second for 10 s; the
	 * first says how many were held back before it. */
	unsigned printed = 0;
	uint64_t asked = 100 + 10;
	for (uint64_t ms = 1; ms <= 10000; ms++) {
		printed += ask(&r, t + ms, 1, &reported);
		asked++;
	}
	assert_int_equal(printed, 10);
	/* Every line is either printed or reported held back (but those since
	 * the last printed one, still pending). */
	assert_int_equal(LOG_RATE_BURST + printed + reported + r.suppressed, asked);
	assert_true(reported >= 100 - LOG_RATE_BURST + 10);
}

static void test_quiet_refills(void **state)
{
	(void)state;
	struct log_rate r = {0};
	uint64_t reported = 0;
	assert_int_equal(ask(&r, 0, LOG_RATE_BURST + 3, &reported), LOG_RATE_BURST);
	/* Half an interval gives no line; the rest of it gives one, which
	 * reports the 3 held back. */
	assert_int_equal(ask(&r, LOG_RATE_INTERVAL_MS / 2, 1, &reported), 0);
	assert_int_equal(ask(&r, LOG_RATE_INTERVAL_MS, 1, &reported), 1);
	assert_int_equal(reported, 4);
	/* A long quiet spell fills the bucket, never past the burst. */
	assert_int_equal(ask(&r, 1000 * LOG_RATE_INTERVAL_MS, 50, &reported), LOG_RATE_BURST);
}

/* log_rate_warn's lines, captured from stderr. */
static void test_warn_lines(void **state)
{
	(void)state;
	char path[] = "/tmp/test_log_rate.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	int saved = dup(2);
	assert_true(saved >= 0);
	fflush(stderr);
	dup2(fd, 2);
	log_setup(LOG_INFO, 7, LOG_FORMAT_TEXT);
	struct log_rate r = {0};
	for (int i = 0; i < 20; i++)
		log_rate_warn(&r, 100, "client 10.0.0.%d: refused", i);
	log_rate_warn(&r, 100 + LOG_RATE_INTERVAL_MS, "client 10.0.0.99: refused");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	char buf[8192];
	ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
	close(fd);
	unlink(path);
	assert_true(n > 0);
	buf[n] = '\0';
	unsigned lines = 0;
	for (char *p = buf; (p = strchr(p, '\n')) != NULL; p++)
		lines++;
	assert_int_equal(lines, LOG_RATE_BURST + 1);
	char want[128];
	snprintf(want, sizeof want, "client 10.0.0.%d: refused\n", LOG_RATE_BURST - 1);
	assert_non_null(strstr(buf, want));
	snprintf(want, sizeof want, "client 10.0.0.%d:", LOG_RATE_BURST);
	assert_null(strstr(buf, want));
	snprintf(want, sizeof want, "client 10.0.0.99: refused (%d more like it suppressed)\n",
		 20 - LOG_RATE_BURST);
	assert_non_null(strstr(buf, want));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst_then_one_a_second),
		cmocka_unit_test(test_quiet_refills),
		cmocka_unit_test(test_warn_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
