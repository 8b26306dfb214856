/* test_join.c: the join-token-file of a node started with --join
 * (join_token_read, server/join.c, over the real line reader): the one
 * line that is neither blank nor a comment, trimmed, is the token; no
 * token, a second one, one longer than RAFTLOCK_TOKEN_MAX, a line longer
 * than a line may be and a file that does not open are refused with the
 * file named, and no message quotes the file's content. No loop, no
 * sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "join.h"
#include "line_file.h"
#include "raftlock.h"

/* The file under test: made by the group's setup, removed by its
 * teardown. */
static char path[64] = "/tmp/test_join.XXXXXX";

static int setup(void **state)
{
	(void)state;
	int fd = mkstemp(path);
	return fd >= 0 && close(fd) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return unlink(path);
}

static void write_text(const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

/* join_token_read of a file holding text; on a refusal, checks that the
 * message names the file and quotes nothing of it, and that token is
 * wiped. */
static int read_text(const char *text, char token[RAFTLOCK_TOKEN_MAX + 1], char *err, size_t errlen)
{
	write_text(text);
	memset(token, 'x', RAFTLOCK_TOKEN_MAX + 1);
	err[0] = '\0';
	int rv = join_token_read(path, token, err, errlen);
	if (rv != 0) {
		assert_int_equal(rv, RAFTLOCK_ECONFIG);
		assert_non_null(strstr(err, path));
		assert_null(strstr(err, "s3cret"));
		for (size_t i = 0; i <= RAFTLOCK_TOKEN_MAX; i++)
			assert_int_equal(token[i], 0);
	}
	return rv;
}

static void test_token_line(void **state)
{
	(void)state;
	char token[RAFTLOCK_TOKEN_MAX + 1], err[512];
	assert_int_equal(read_text("s3cret-token-1\n", token, err, sizeof err), 0);
	assert_string_equal(token, "s3cret-token-1");
	/* Comments and blank lines around it; blanks around it trimmed; no
	 * newline at the end. */
	assert_int_equal(read_text("# member 4's token\n\n  \t s3cret-token-2 \r\n\n# end\n", token,
				   err, sizeof err),
			 0);
	assert_string_equal(token, "s3cret-token-2");
	assert_int_equal(read_text("s3cret-token-3", token, err, sizeof err), 0);
	assert_string_equal(token, "s3cret-token-3");
	/* The longest token. */
	char text[RAFTLOCK_TOKEN_MAX + 2];
	memset(text, 'a', RAFTLOCK_TOKEN_MAX);
	text[RAFTLOCK_TOKEN_MAX] = '\0';
	assert_int_equal(read_text(text, token, err, sizeof err), 0);
	assert_int_equal(strlen(token), RAFTLOCK_TOKEN_MAX);
}

static void test_refusals(void **state)
{
	(void)state;
	char token[RAFTLOCK_TOKEN_MAX + 1], err[512];
	assert_int_equal(read_text("", token, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_non_null(strstr(err, "no token"));
	assert_int_equal(read_text("# only a comment\n\n", token, err, sizeof err),
			 RAFTLOCK_ECONFIG);
	assert_non_null(strstr(err, "no token"));
	assert_int_equal(read_text("s3cret-a\ns3cret-b\n", token, err, sizeof err),
			 RAFTLOCK_ECONFIG);
	assert_non_null(strstr(err, ":2: a second token"));
	/* The whole line `raftlock acl token` prints, pasted: refused here,
	 * not sent as a token the leader knows nothing of. */
	assert_int_equal(read_text("token: s3cret-c\n", token, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_non_null(strstr(err, ":1: a blank inside the token"));
	/* One byte above the longest token. */
	char text[LINE_FILE_MAX + 8];
	memcpy(text, "s3cret", 6);
	memset(text + 6, 'a', RAFTLOCK_TOKEN_MAX + 1 - 6);
	text[RAFTLOCK_TOKEN_MAX + 1] = '\0';
	assert_int_equal(read_text(text, token, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_non_null(strstr(err, ":1: the token is 257 bytes long"));
	/* A line above what the line reader takes. */
	memset(text + 6, 'a', LINE_FILE_MAX + 1 - 6);
	text[LINE_FILE_MAX + 1] = '\0';
	assert_int_equal(read_text(text, token, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_non_null(strstr(err, "1024 bytes a line may hold"));
	/* A file that does not open. */
	char missing[80];
	snprintf(missing, sizeof missing, "%s.none", path);
	assert_int_equal(join_token_read(missing, token, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_non_null(strstr(err, "No such file"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_token_line),
		cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
