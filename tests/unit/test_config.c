/* test_config.c: raftlockd's config file (server/config.c and the line
 * reader it shares with the auth-tokens file, server/line_file.c, the real
 * files) in a temporary directory: a key given twice, a line too long, a
 * line exactly as long as a line may be, a NUL byte and a read error are
 * each refused with a message that names the file and the line (or the
 * system's reason), and none of them is read as something else; and a
 * default that is no protocol bound. No loop, no sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "line_file.h"
#include "raftlock.h"

static char dir[64], path[128];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/test_config.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/raftlockd.conf", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

/* The settings of a valid one-member node, before whatever a test adds. */
#define BASE "id = 1\ncluster = c\ndata-dir = /tmp/x\nmember = 1,127.0.0.1:1,127.0.0.1:2\n"

static void write_text(const char *text, size_t len)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* config_parse of `raftlockd --config FILE` (plus extra, NULL or a flag
 * and its value) on a file holding text. */
static int parse_file(const char *file, const char *extra, const char *value, struct config *cfg,
		      char *err, size_t errlen)
{
	char *argv[] = {"raftlockd", "--config", (char *)file, (char *)extra, (char *)value, NULL};
	int argc = extra != NULL ? 5 : 3;
	err[0] = '\0';
	return config_parse(cfg, argc, argv, err, errlen);
}

static int parse_text(const char *text, struct config *cfg, char *err, size_t errlen)
{
	write_text(text, strlen(text));
	return parse_file(path, NULL, NULL, cfg, err, errlen);
}

static void assert_has(const char *err, const char *want)
{
	if (strstr(err, want) == NULL)
		fail_msg("error '%s' does not say '%s'", err, want);
}

/* A line of n bytes (newline not counted): prefix, then fill up to n. */
static char *line_of(const char *prefix, char fill, size_t n)
{
	char *s = malloc(n + 1);
	assert_non_null(s);
	memset(s, fill, n);
	memcpy(s, prefix, strlen(prefix));
	s[n] = '\0';
	return s;
}

/* ---------------------------------------------------------------- tests */

/* A key given twice is refused, naming the key and both lines, whichever
 * value comes second (the same one too); member lines repeat. */
static void test_duplicate_key(void **state)
{
	(void)state;
	struct config cfg;
	char err[1024];
	assert_int_equal(parse_text(BASE "log-level = warn\n# a comment\n\nlog-level = debug\n",
				    &cfg, err, sizeof err),
			 RAFTLOCK_ECONFIG);
	assert_has(err, path);
	assert_has(err, ":8: log-level: given twice, on lines 5 and 8");
	assert_int_equal(parse_text(BASE "id = 1\n", &cfg, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_has(err, ":5: id: given twice, on lines 1 and 5");
	/* a key spelt with other blanks is the same key */
	assert_int_equal(parse_text(BASE "\tcluster=d\n", &cfg, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_has(err, "cluster: given twice, on lines 2 and 5");
	assert_int_equal(
		parse_text(BASE "peer-tls-ca = /a\npeer-tls-ca = /b\n", &cfg, err, sizeof err),
		RAFTLOCK_ECONFIG);
	assert_has(err, ":6: peer-tls-ca: given twice, on lines 5 and 6");

	/* member is a list */
	assert_int_equal(parse_text("id = 1\ncluster = c\ndata-dir = /tmp/x\n"
				    "member = 1,127.0.0.1:1,127.0.0.1:2\n"
				    "member = 2,127.0.0.1:3,127.0.0.1:4\n"
				    "member = 3,127.0.0.1:5,127.0.0.1:6\n",
				    &cfg, err, sizeof err),
			 0);
	assert_int_equal(cfg.n_members, 3);
	assert_int_equal(cfg.members[2].id, 3);
	/* a flag still wins over the file's value (given once there) */
	write_text(BASE "log-level = warn\n", strlen(BASE "log-level = warn\n"));
	assert_int_equal(parse_file(path, "--log-level", "debug", &cfg, err, sizeof err), 0);
	assert_int_equal(cfg.log_level, 0); /* debug */
}

/* restore, like bootstrap, is a flag only: a line left in the file would
 * create a new cluster again once the data directory is wiped. */
static void test_restore_only_on_the_command_line(void **state)
{
	(void)state;
	struct config cfg;
	char err[1024];
	assert_int_equal(parse_text(BASE "restore = /tmp/backup.img\n", &cfg, err, sizeof err),
			 RAFTLOCK_ECONFIG);
	assert_has(err, ":5: restore is given on the command line only (--restore FILE)");
	write_text(BASE, strlen(BASE));
	assert_int_equal(parse_file(path, "--restore", "/tmp/backup.img", &cfg, err, sizeof err),
			 0);
	assert_string_equal(cfg.restore_file, "/tmp/backup.img");
}

/* A line of LINE_FILE_MAX bytes is read whole, as the last line too
 * (without its newline); one byte more is refused, naming the line and
 * the limit, and never read as two lines: here the tail of a long comment
 * would have been a setting of its own. */
static void test_line_length(void **state)
{
	(void)state;
	struct config cfg;
	char err[1024], text[4096];
	char *comment = line_of("# ", 'x', LINE_FILE_MAX);
	char *value = line_of("data-dir = /tmp/y", ' ', LINE_FILE_MAX); /* trailing blanks */
	snprintf(text, sizeof text,
		 "id = 1\ncluster = c\n%s\n"
		 "member = 1,127.0.0.1:1,127.0.0.1:2\n%s",
		 comment, value);
	assert_int_equal(parse_text(text, &cfg, err, sizeof err), 0);
	assert_string_equal(cfg.data_dir, "/tmp/y");
	snprintf(text, sizeof text, "%s\n%s\n", BASE, comment);
	assert_int_equal(parse_text(text, &cfg, err, sizeof err), 0);
	free(comment);
	free(value);

	/* one more byte */
	comment = line_of("# ", 'x', LINE_FILE_MAX + 1);
	snprintf(text, sizeof text, "cluster = c\n%s\ndata-dir = /tmp/x\n", comment);
	assert_int_equal(parse_text(text, &cfg, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_has(err, path);
	assert_has(err, ":2: the line is longer than the 1024 bytes a line may hold");
	/* and as the last line, without a newline */
	snprintf(text, sizeof text, "%s%s", BASE, comment);
	assert_int_equal(parse_text(text, &cfg, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_has(err, ":5: the line is longer than the 1024 bytes");
	free(comment);
	/* A comment whose tail past 1023 bytes (what one read took before)
	 * is a setting: never applied. */
	comment = line_of("# ", 'x', 1023 + 6);
	memcpy(comment + 1023, "id = 7", 6);
	snprintf(text, sizeof text,
		 "cluster = c\ndata-dir = /tmp/x\nmember = 7,127.0.0.1:1,127.0.0.1:2\n%s\n",
		 comment);
	assert_int_equal(parse_text(text, &cfg, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_has(err, ":4: the line is longer than the 1024 bytes");
	free(comment);
	/* far longer, still one line */
	char *big = line_of("log-level = ", 'w', 3000);
	snprintf(text, sizeof text, "%s%s\n", BASE, big);
	assert_int_equal(parse_text(text, &cfg, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_has(err, ":5: the line is longer than the 1024 bytes");
	free(big);
}

/* A line with no end (a device given as the file) is refused as soon as
 * it passes the limit: the reader holds no more than a line may hold, and
 * neither runs out of memory nor reads forever. */
static void test_endless_line(void **state)
{
	(void)state;
	char err[1024];
	struct config cfg;
	char *argv[] = {"raftlockd", "--config", "/dev/zero", NULL};
	assert_int_equal(config_parse(&cfg, 3, argv, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_has(err, "/dev/zero:1: the line is longer than the 1024 bytes");
}

/* A NUL byte is refused: what follows it on the line would be lost. */
static void test_nul_byte(void **state)
{
	(void)state;
	struct config cfg;
	char err[1024];
	const char text[] = BASE "log-level = warn\0 # the rest\n";
	write_text(text, sizeof text - 1);
	assert_int_equal(parse_file(path, NULL, NULL, &cfg, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_has(err, ":5: a NUL byte");
}

/* A file that opens but cannot be read (a directory: EISDIR) fails the
 * load with the system's reason, even when the flags alone would make a
 * valid configuration; so does one that does not open. */
static void test_read_error(void **state)
{
	(void)state;
	struct config cfg;
	char err[1024];
	char *argv[] = {"raftlockd",
			"--config",
			dir,
			"--id",
			"1",
			"--cluster",
			"c",
			"--data-dir",
			"/tmp/x",
			"--member",
			"1,127.0.0.1:1,127.0.0.1:2",
			NULL};
	assert_int_equal(config_parse(&cfg, 11, argv, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_has(err, dir);
	assert_has(err, "read error after line 0: Is a directory");
	argv[2] = path; /* not written: does not exist */
	assert_int_equal(config_parse(&cfg, 11, argv, err, sizeof err), RAFTLOCK_ECONFIG);
	assert_has(err, "No such file or directory");
	/* and the same flags with a readable file are a configuration */
	write_text("# nothing\n", 10);
	assert_int_equal(config_parse(&cfg, 11, argv, err, sizeof err), 0);
}

/* The message of a bad line still names the file and its line. */
static void test_bad_line_named(void **state)
{
	(void)state;
	struct config cfg;
	char err[1024];
	assert_int_equal(parse_text(BASE "no equals sign\n", &cfg, err, sizeof err),
			 RAFTLOCK_ECONFIG);
	assert_has(err, "config ");
	assert_has(err, ":5: expected 'key = value'");
	assert_int_equal(parse_text(BASE "election-timeout = 5\n", &cfg, err, sizeof err),
			 RAFTLOCK_ECONFIG);
	assert_has(err, ":5: election-timeout: '5' not in 100..60000");
}

/* --keepalive-max-ids, ids per connection and second, defaults to the
 * documented 262,144 (GUARANTEES, keepalive limits), not to what one
 * request may name (RAFTLOCK_KEEPALIVE_MAX, far fewer). */
static void test_keepalive_budget_default(void **state)
{
	(void)state;
	struct config cfg;
	char err[1024];
	assert_int_equal(parse_text(BASE, &cfg, err, sizeof err), 0);
	assert_int_equal(cfg.keepalive_max_ids, 262144);
	assert_int_equal(parse_text(BASE "keepalive-max-ids = 5000\n", &cfg, err, sizeof err), 0);
	assert_int_equal(cfg.keepalive_max_ids, 5000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_duplicate_key, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restore_only_on_the_command_line, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_line_length, setup, teardown),
		cmocka_unit_test_setup_teardown(test_endless_line, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nul_byte, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_line_named, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keepalive_budget_default, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
