/*
 * test_client_cli_json.c: the strings of the CLI's --json output
 * (client/cli_json.h): valid UTF-8 passes, escaped as JSON requires; each
 * ill-formed subsequence becomes one \ufffd, as Python's
 * decode(errors="replace") makes it; a name that is not UTF-8 gets its
 * bytes in base64 beside it, and only then.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_json.h"

/* What one call printed, in a buffer the caller frees. */
#define PRINTED(text, call)                               \
	do {                                              \
		size_t len_ = 0;                          \
		FILE *f = open_memstream(&(text), &len_); \
		assert_non_null(f);                       \
		call;                                     \
		assert_int_equal(fclose(f), 0);           \
	} while (0)

struct name_case {
	const char *bytes;
	const char *json;   /* the string, quotes included */
	const char *base64; /* NULL: valid UTF-8, no sibling */
};

/* The JSON text and base64 are Python's:
 * bytes.decode("utf-8", "replace") and base64.b64encode(bytes). */
static const struct name_case cases[] = {
	{"\xff", "\"\\ufffd\"", "/w=="},
	{"a\xc3", "\"a\\ufffd\"", "YcM="},          /* truncated at the end */
	{"\xc3(", "\"\\ufffd(\"", "wyg="},          /* a lead, no continuation */
	{"\xe1\x80\x41", "\"\\ufffdA\"", "4YBB"},   /* one for a cut sequence, then 'A' */
	{"\xc0\xaf", "\"\\ufffd\\ufffd\"", "wK8="}, /* overlong '/' */
	{"\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"", "7aCA"},                /* surrogate D800 */
	{"\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"", "9JCAgA=="}, /* U+110000 */
	{"\x80\xbf", "\"\\ufffd\\ufffd\"", "gL8="}, /* stray continuations */
	{"\xf5\x80", "\"\\ufffd\\ufffd\"", "9YA="},
	{"\xf0\x9f\x94", "\"\\ufffd\"", "8J+U"}, /* a 4-byte form cut short */
	{"x\x01y", "\"x\\u0001y\"", NULL},       /* control bytes escaped */
	{"q\"b\\s", "\"q\\\"b\\\\s\"", NULL},
	{"lock \xf0\x9f\x94\x92", "\"lock \xf0\x9f\x94\x92\"", NULL}, /* U+1F512 as it is */
	{"\xef\xbf\xbd\xe2\x82\xac\xc3\xa9\x7f", "\"\xef\xbf\xbd\xe2\x82\xac\xc3\xa9\x7f\"", NULL},
	{"\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf", "\"\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf\"",
	 NULL}, /* the edges: U+D7FF, U+E000, U+10FFFF */
	{"", "\"\"", NULL},
};

static void strings_are_valid_json(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *text = NULL;
		PRINTED(text, cli_json_string(f, cases[i].bytes));
		assert_string_equal(text, cases[i].json);
		free(text);
		assert_int_equal(cli_json_is_utf8(cases[i].bytes), cases[i].base64 == NULL);
	}
	char *text = NULL;
	PRINTED(text, cli_json_string(f, NULL));
	assert_string_equal(text, "\"\"");
	free(text);
	/* every byte below 0x20 escaped, DEL as it is */
	char all[33];
	for (int c = 1; c < 0x20; c++)
		all[c - 1] = (char)c;
	all[31] = 0x7f;
	all[32] = '\0';
	PRINTED(text, cli_json_string(f, all));
	for (const char *p = text; *p; p++)
		assert_true((unsigned char)*p >= 0x20);
	assert_non_null(strstr(text, "\\u001f\x7f\""));
	free(text);
}

static void names_give_their_bytes(void **state)
{
	(void)state;
	/* a style's two members, each "key" sep value */
	static const struct {
		enum cli_json_style style;
		const char *sep, *next;
	} styles[] = {{CLI_JSON_SPACED, ": ", ", "}, {CLI_JSON_COMPACT, ":", ","}};
	for (size_t k = 0; k < 2; k++) {
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
			char want[256], *text = NULL;
			int n = snprintf(want, sizeof want, "\"name\"%s%s", styles[k].sep,
					 cases[i].json);
			if (cases[i].base64 != NULL)
				snprintf(want + n, sizeof want - (size_t)n,
					 "%s\"name_base64\"%s\"%s\"", styles[k].next, styles[k].sep,
					 cases[i].base64);
			PRINTED(text, cli_json_name(f, styles[k].style, "name", cases[i].bytes));
			assert_string_equal(text, want);
			free(text);
		}
	}
}

static void name_lists_give_every_name(void **state)
{
	(void)state;
	char *valid[] = {"a/1", "a \xf0\x9f\x94\x92"}, *mixed[] = {"a/1", "a/\xff", "ab"};
	char *text = NULL;
	PRINTED(text, cli_json_names(f, CLI_JSON_SPACED, "locks", valid, 2));
	assert_string_equal(text, "\"locks\": [\"a/1\", \"a \xf0\x9f\x94\x92\"]");
	free(text);
	PRINTED(text, cli_json_names(f, CLI_JSON_SPACED, "locks", mixed, 3));
	assert_string_equal(text, "\"locks\": [\"a/1\", \"a/\\ufffd\", \"ab\"], "
				  "\"locks_base64\": [\"YS8x\", \"YS//\", \"YWI=\"]");
	free(text);
	PRINTED(text, cli_json_names(f, CLI_JSON_COMPACT, "locks", mixed, 0));
	assert_string_equal(text, "\"locks\":[]");
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(strings_are_valid_json),
		cmocka_unit_test(names_give_their_bytes),
		cmocka_unit_test(name_lists_give_every_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
