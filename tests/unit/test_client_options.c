/* test_client_options.c: option and address validation, which needs no
 * server: raftlock_client_open() does not connect. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "conn.h"
#include "raftlock.h"

static int open_with(const char *const *addrs, size_t n, const char **msg)
{
	struct raftlock_client_options o = {.addresses = addrs, .n_addresses = n};
	raftlock_client *c = NULL;
	int rv = raftlock_client_open(&o, &c, msg);
	if (rv == 0) {
		assert_non_null(c);
		raftlock_client_close(c);
	} else {
		assert_null(c);
	}
	return rv;
}

static void test_no_options(void **state)
{
	(void)state;
	raftlock_client *c = NULL;
	const char *msg = NULL;
	assert_int_equal(raftlock_client_open(NULL, &c, &msg), RAFTLOCK_EINVAL);
	assert_null(c);
	assert_non_null(msg);
}

/* A NULL out is refused, as a NULL argument of the other calls is, not
 * written through. */
static void test_no_out(void **state)
{
	(void)state;
	const char *msg = NULL;
	const char *addrs[] = {"127.0.0.1:7101"};
	struct raftlock_client_options o = {.addresses = addrs, .n_addresses = 1};
	assert_int_equal(raftlock_client_open(&o, NULL, &msg), RAFTLOCK_EINVAL);
	assert_non_null(strstr(msg, "out is NULL"));
}

static void test_no_addresses(void **state)
{
	(void)state;
	const char *msg = NULL;
	const char *addrs[] = {"127.0.0.1:7101"};
	assert_int_equal(open_with(addrs, 0, &msg), RAFTLOCK_EINVAL);
	assert_non_null(strstr(msg, "no node address"));
	assert_int_equal(open_with(NULL, 3, &msg), RAFTLOCK_EINVAL);
}

static void test_bad_addresses(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"localhost", "127.0.0.1", "127.0.0.1:", ":7101",    "h:0",
		"h:65536",   "h:70000",   "h:port",     "h:71a",    "::1:7101",
		"[::1:7101", "[]:7101",   "h:-1",       "h:123456",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		const char *msg = NULL;
		const char *addrs[] = {"127.0.0.1:7101", bad[i]};
		assert_int_equal(open_with(addrs, 2, &msg), RAFTLOCK_EINVAL);
		/* the message names the address that failed */
		assert_non_null(strstr(msg, bad[i]));
	}
	const char *msg = NULL;
	const char *addrs[] = {NULL};
	assert_int_equal(open_with(addrs, 1, &msg), RAFTLOCK_EINVAL);
}

static void test_good_addresses(void **state)
{
	(void)state;
	const char *addrs[] = {"127.0.0.1:7101", "node-2.example:1", "[::1]:65535",
			       "localhost:7103"};
	assert_int_equal(open_with(addrs, 4, NULL), 0);
}

static void test_address_parts(void **state)
{
	(void)state;
	struct conn_addr a;
	assert_int_equal(conn_addr_parse("[::1]:7101", &a), 0);
	assert_string_equal(a.host, "::1");
	assert_string_equal(a.port, "7101");
	assert_string_equal(a.text, "[::1]:7101");
	conn_addr_free(&a);
	assert_int_equal(conn_addr_parse("db-1:80", &a), 0);
	assert_string_equal(a.host, "db-1");
	assert_string_equal(a.port, "80");
	conn_addr_free(&a);
}

static void test_session_ttl_range(void **state)
{
	(void)state;
	const char *addrs[] = {"127.0.0.1:1"};
	struct raftlock_client_options o = {
		.addresses = addrs, .n_addresses = 1, .request_timeout_ms = 200};
	raftlock_client *c;
	assert_int_equal(raftlock_client_open(&o, &c, NULL), 0);
	raftlock_session *s = NULL;
	struct raftlock_session_options so = {.ttl_ms = RAFTLOCK_TTL_MIN_MS - 1};
	assert_int_equal(raftlock_session_open(c, &so, &s), RAFTLOCK_EINVAL);
	assert_null(s);
	assert_non_null(strstr(raftlock_errmsg(c), "ttl 999"));
	so.ttl_ms = RAFTLOCK_TTL_MAX_MS + 1;
	assert_int_equal(raftlock_session_open(c, &so, &s), RAFTLOCK_EINVAL);
	assert_null(s);
	/* in range, but nobody listens: the connection error, in time */
	so.ttl_ms = RAFTLOCK_TTL_MIN_MS;
	assert_int_equal(raftlock_session_open(c, &so, &s), RAFTLOCK_ECONNECTION);
	assert_null(s);
	assert_non_null(strstr(raftlock_errmsg(c), "open session"));
	raftlock_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_options),        cmocka_unit_test(test_no_out),
		cmocka_unit_test(test_no_addresses),      cmocka_unit_test(test_bad_addresses),
		cmocka_unit_test(test_good_addresses),    cmocka_unit_test(test_address_parts),
		cmocka_unit_test(test_session_ttl_range),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
