/* test_log.c: the server's log line formats (server/log.c): RFC 3339 UTC
 * timestamps with milliseconds, the text line, the JSON object with its
 * stable field names and escapes, and long messages cut so that a JSON
 * line stays valid and no UTF-8 character is split. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "log.h"

/* 2026-11-25T15:04:05.123Z */
static const struct timespec when = {1795619045, 123456789};

static void text_line(void **state)
{
	(void)state;
	char out[256];
	size_t n = log_format_line(out, sizeof out, LOG_FORMAT_TEXT, &when, "info", 3,
				   "leader ready (term 7)");
	assert_string_equal(out,
			    "2026-11-25T15:04:05.123Z raftlockd[3] info leader ready (term 7)\n");
	assert_int_equal(n, strlen(out));
	/* One event, one line. */
	log_format_line(out, sizeof out, LOG_FORMAT_TEXT, &when, "warn", 3, "a\nb");
	assert_string_equal(out, "2026-11-25T15:04:05.123Z raftlockd[3] warn a b\n");
}

static void json_line(void **state)
{
	(void)state;
	char out[256];
	size_t n = log_format_line(out, sizeof out, LOG_FORMAT_JSON, &when, "error", 12,
				   "name \"db\\x\"\n\tend");
	assert_string_equal(out,
			    "{\"ts\":\"2026-11-25T15:04:05.123Z\",\"level\":\"error\","
			    "\"node\":12,\"msg\":\"name \\\"db\\\\x\\\"\\u000a\\u0009end\"}\n");
	assert_int_equal(n, strlen(out));
}

static void epoch_and_leap_day(void **state)
{
	(void)state;
	char out[256];
	struct timespec t0 = {0, 999999};
	log_format_line(out, sizeof out, LOG_FORMAT_TEXT, &t0, "info", 0, "x");
	assert_string_equal(out, "1970-01-01T00:00:00.000Z raftlockd[0] info x\n");
	struct timespec leap = {1709251199, 999000000}; /* 2024-02-29T23:59:59.999Z */
	log_format_line(out, sizeof out, LOG_FORMAT_JSON, &leap, "debug", 1, "");
	assert_non_null(strstr(out, "\"ts\":\"2024-02-29T23:59:59.999Z\""));
}

static void long_messages_are_cut_cleanly(void **state)
{
	(void)state;
	char msg[400], out[128];
	memset(msg, '"', sizeof msg - 1);
	msg[sizeof msg - 1] = '\0';
	size_t n = log_format_line(out, sizeof out, LOG_FORMAT_JSON, &when, "info", 1, msg);
	assert_int_equal(n, strlen(out));
	assert_true(n < sizeof out);
	/* Whole escapes only, and the object closed. */
	assert_string_equal(out + n - 3, "\"}\n");
	const char *m = strstr(out, "\"msg\":\"") + 7;
	size_t body = (size_t)(out + n - 3 - m);
	assert_int_equal(body % 2, 0);
	for (size_t i = 0; i < body; i += 2)
		assert_memory_equal(m + i, "\\\"", 2);
	/* A 3-byte character that does not fit is left out whole. */
	char wide[200];
	size_t k = 0;
	while (k + 3 < sizeof wide) {
		memcpy(wide + k, "\xe2\x82\xac", 3); /* the euro sign */
		k += 3;
	}
	wide[k] = '\0';
	n = log_format_line(out, sizeof out, LOG_FORMAT_TEXT, &when, "info", 1, wide);
	m = strstr(out, "info ") + 5;
	assert_int_equal((size_t)(out + n - 1 - m) % 3, 0);
	assert_int_equal(out[n - 1], '\n');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(text_line),
		cmocka_unit_test(json_line),
		cmocka_unit_test(epoch_and_leap_day),
		cmocka_unit_test(long_messages_are_cut_cleanly),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
