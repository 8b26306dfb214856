/* test_address.c: address_split(), the one HOST:PORT parser of server and
 * client. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "address.h"

static void accepted(const char *text, const char *host, const char *port)
{
	char h[64], p[ADDRESS_PORT_MAX];
	assert_int_equal(address_split(text, h, sizeof h, p), 0);
	assert_string_equal(h, host);
	assert_string_equal(p, port);
}

static void refused(const char *text)
{
	char h[64], p[ADDRESS_PORT_MAX];
	if (address_split(text, h, sizeof h, p) != 0)
		return;
	fail_msg("'%s' was accepted as host '%s' port '%s'", text ? text : "(null)", h, p);
}

static void test_hosts_and_ports(void **state)
{
	(void)state;
	accepted("127.0.0.1:7100", "127.0.0.1", "7100");
	accepted("localhost:1", "localhost", "1");
	accepted("node-1.example:65535", "node-1.example", "65535");
	accepted("[::1]:7100", "::1", "7100");
	accepted("[fe80::1%lo]:7100", "fe80::1%lo", "7100");
}

static void test_malformed(void **state)
{
	(void)state;
	refused(NULL);
	refused("");
	refused("127.0.0.1");
	refused(":7100");
	refused("[]:7100");
	refused("::1:7100"); /* a bare IPv6 literal */
	refused("[::1:7100");
	refused("::1]:7100");
	refused("[::1]7100");
	refused("a[b]:7100");
	refused("host:");
	refused("host:0");
	refused("host:65536");
	refused("host:123456");
	refused("host:-1");
	refused("host:+80");
	refused("host:80 ");
	refused("host:0x50");
}

static void test_host_that_does_not_fit(void **state)
{
	(void)state;
	char h[8], p[ADDRESS_PORT_MAX];
	assert_int_equal(address_split("1234567:80", h, sizeof h, p), 0);
	assert_string_equal(h, "1234567");
	assert_int_equal(address_split("12345678:80", h, sizeof h, p), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hosts_and_ports),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_host_that_does_not_fit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
