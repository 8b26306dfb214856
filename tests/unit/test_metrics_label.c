/* test_metrics_label.c: label values of the metrics page are valid
 * Prometheus text whatever bytes a lock name holds (server/metrics_label.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "metrics_label.h"

/* v is written as want, which fits. */
static void assert_label(const char *v, const char *want)
{
	char out[128];
	size_t n = metrics_label_write(out, sizeof out, v);
	assert_string_equal(out, want);
	assert_int_equal(n, strlen(want));
}

/* Backslash, double quote and newline escaped; UTF-8 as it is. */
static void test_escapes_and_utf8(void **state)
{
	(void)state;
	assert_label("", "");
	assert_label("svc", "svc");
	assert_label("a\"b\nc", "a\\\"b\\nc");
	assert_label("caf\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e \xf4\x8f\xbf\xbf",
		     "caf\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e \xf4\x8f\xbf\xbf");
	assert_label("\t\r\x7f", "\t\r\x7f"); /* valid in a label value */
}

/* A byte outside valid UTF-8 is the text \xNN (its backslash escaped on
 * the page): stray bytes, cut sequences, overlong forms, surrogates and
 * code points above U+10FFFF. */
static void test_invalid_utf8_replaced(void **state)
{
	(void)state;
	assert_label("x\xff\xfe/y", "x\\\\xff\\\\xfe/y");
	assert_label("\x80", "\\\\x80");
	assert_label("a\xe2\x82", "a\\\\xe2\\\\x82");
	assert_label("\xe2\x82z", "\\\\xe2\\\\x82z");
	assert_label("\xc0\xaf", "\\\\xc0\\\\xaf");
	assert_label("\xe0\x80\xaf", "\\\\xe0\\\\x80\\\\xaf");
	assert_label("\xed\xa0\x80", "\\\\xed\\\\xa0\\\\x80");
	assert_label("\xf4\x90\x80\x80", "\\\\xf4\\\\x90\\\\x80\\\\x80");
	assert_label("\xf5\x80\x80\x80", "\\\\xf5\\\\x80\\\\x80\\\\x80");
}

/* A backslash is two in the value, so that no name spells another's
 * replaced bytes: two names never make one series. */
static void test_distinct_names_distinct_labels(void **state)
{
	(void)state;
	assert_label("a\\b", "a\\\\\\\\b");
	char byte[128], text[128];
	metrics_label_write(byte, sizeof byte, "\xff");
	metrics_label_write(text, sizeof text, "\\xff");
	assert_string_not_equal(byte, text);
}

/* Too small a buffer: the length needed, and whole characters only. */
static void test_does_not_fit(void **state)
{
	(void)state;
	char out[4] = "zzz";
	assert_int_equal(metrics_label_write(out, sizeof out, "ab\"c"), 5);
	assert_string_equal(out, "ab");
	assert_int_equal(metrics_label_write(out, sizeof out, "\xff"), 5);
	assert_string_equal(out, "");
	assert_int_equal(metrics_label_write(out, 0, "abc"), 3);
	assert_int_equal(metrics_label_write(out, sizeof out, "abc"), 3);
	assert_string_equal(out, "abc");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escapes_and_utf8),
		cmocka_unit_test(test_invalid_utf8_replaced),
		cmocka_unit_test(test_distinct_names_distinct_labels),
		cmocka_unit_test(test_does_not_fit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
