/* test_log.c: the server's log line formats (server/log.c): RFC 3339 UTC
 * timestamps with milliseconds, the text line, the JSON object with its
 * stable field names and escapes, bytes that are not UTF-8 in a JSON line,
 * and long messages cut so that a JSON line stays valid and no UTF-8
 * character is split. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "log.h"
#include "utf8.h"

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

/* Every byte of s is part of a valid UTF-8 character. */
static void assert_utf8(const char *s)
{
	bool valid = true;
	for (const unsigned char *p = (const unsigned char *)s; *p != '\0' && valid;)
		p += utf8_span(p, &valid);
	assert_true(valid);
}

/* The "msg" of a JSON line of msg. */
static const char *json_msg(char *out, size_t len, const char *msg)
{
	size_t n = log_format_line(out, len, LOG_FORMAT_JSON, &when, "info", 1, msg);
	assert_int_equal(n, strlen(out));
	assert_utf8(out);
	assert_string_equal(out + n - 3, "\"}\n");
	out[n - 3] = '\0';
	return strstr(out, "\"msg\":\"") + 7;
}

/* A JSON line is UTF-8 whatever the message holds: each ill-formed
 * sequence (maximal subpart) is written \ufffd; a valid name passes as it
 * is. A text line keeps the bytes. */
static void json_line_is_utf8(void **state)
{
	(void)state;
	char out[256];
	assert_string_equal(json_msg(out, sizeof out, "lock '\xff' \xfe\x80x"),
			    "lock '\\ufffd' \\ufffd\\ufffdx");
	/* overlong '/' in two and three bytes; a surrogate */
	assert_string_equal(json_msg(out, sizeof out, "a\xc0\xaf b\xe0\x80\xaf c\xed\xa0\x80"),
			    "a\\ufffd\\ufffd b\\ufffd\\ufffd\\ufffd c\\ufffd\\ufffd\\ufffd");
	/* a sequence cut at the end: one maximal subpart */
	assert_string_equal(json_msg(out, sizeof out, "end \xf0\x9f\x98"), "end \\ufffd");
	assert_string_equal(json_msg(out, sizeof out, "end \xe2\x82"), "end \\ufffd");
	const char *name = "lock 'd\xc3\xa9p\xc3\xb4t/\xe2\x82\xac/\xe6\x97\xa5\xe6\x9c\xac/"
			   "\xf0\x9f\x94\x92' granted";
	assert_string_equal(json_msg(out, sizeof out, name), name);
	log_format_line(out, sizeof out, LOG_FORMAT_TEXT, &when, "info", 1, "x\xff\xc0y");
	assert_non_null(strstr(out, " info x\xff\xc0y\n"));
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
	m = json_msg(out, sizeof out, wide);
	assert_true(strlen(m) > 0);
	assert_int_equal(strlen(m) % 3, 0);
	/* Bytes that are not UTF-8: whole replacements only. */
	memset(msg, 0xff, sizeof msg - 1);
	m = json_msg(out, sizeof out, msg);
	assert_true(strlen(m) > 0);
	for (size_t i = 0; i < strlen(m); i += 6)
		assert_memory_equal(m + i, "\\ufffd", 6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(text_line),
		cmocka_unit_test(json_line),
		cmocka_unit_test(json_line_is_utf8),
		cmocka_unit_test(epoch_and_leap_day),
		cmocka_unit_test(long_messages_are_cut_cleanly),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
