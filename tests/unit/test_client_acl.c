/*
 * test_client_acl.c: the client's side of authentication and access rules:
 * the token goes first on every connection the client makes (a reconnect
 * included), a token the library cannot send is refused at open, and the
 * permission words parse and print.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "client_fakeserver.h"
#include "raftlock.h"

static raftlock_client *client_with_token(const char *addr, const char *token, int *rv)
{
	const char *addrs[] = {addr};
	struct raftlock_client_options o = {
		.addresses = addrs,
		.n_addresses = 1,
		.client_name = "test",
		.request_timeout_ms = 5000,
		.connect_timeout_ms = 300,
		.auth_token = token,
	};
	raftlock_client *c = NULL;
	*rv = raftlock_client_open(&o, &c, NULL);
	return c;
}

static void test_token_first_on_every_connection(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	FAKE_SET(f, drop_first_acquire, true); /* a reconnect in the middle */
	int rv;
	raftlock_client *c = client_with_token(f->addr, "tok-alice", &rv);
	assert_int_equal(rv, 0);
	struct raftlock_session_options so = {.ttl_ms = 5000};
	raftlock_session *s = NULL;
	assert_int_equal(raftlock_session_open(c, &so, &s), 0);
	raftlock_lock *l = NULL;
	assert_int_equal(raftlock_lock_new(s, "x", NULL, &l), 0);
	uint64_t token = 0;
	assert_int_equal(raftlock_lock_try(l, &token), 0);
	raftlock_lock_free(l);
	assert_int_equal(raftlock_session_close(s), 0);
	raftlock_client_close(c);

	pthread_mutex_lock(&f->mu);
	int conns = 0, auths = 0, last_conn = -1;
	for (int i = 0; i < f->n_log; i++) {
		const struct fake_entry *e = &f->log[i];
		if (e->body == RAFTLOCK__ENVELOPE__BODY_AUTHENTICATE)
			auths++;
		if (e->conn != last_conn) { /* the first frame of a connection */
			assert_int_equal(e->body, RAFTLOCK__ENVELOPE__BODY_AUTHENTICATE);
			assert_int_equal(e->id, 0); /* its answer is not awaited */
			conns++;
			last_conn = e->conn;
		}
	}
	pthread_mutex_unlock(&f->mu);
	assert_true(conns >= 2);
	assert_int_equal(auths, conns);
	fake_stop(f);
}

static void test_no_token_sends_none(void **state)
{
	(void)state;
	struct fake *f = fake_start(FAKE_LEADER);
	int rv;
	raftlock_client *c = client_with_token(f->addr, NULL, &rv);
	assert_int_equal(rv, 0);
	struct raftlock_session_options so = {.ttl_ms = 5000};
	raftlock_session *s = NULL;
	assert_int_equal(raftlock_session_open(c, &so, &s), 0);
	assert_int_equal(raftlock_session_close(s), 0);
	raftlock_client_close(c);
	assert_int_equal(fake_count(f, RAFTLOCK__ENVELOPE__BODY_AUTHENTICATE), 0);
	fake_stop(f);
}

static void test_bad_token_refused_at_open(void **state)
{
	(void)state;
	char longtok[RAFTLOCK_TOKEN_MAX + 2];
	memset(longtok, 't', sizeof longtok - 1);
	longtok[sizeof longtok - 1] = '\0';
	int rv;
	assert_null(client_with_token("127.0.0.1:1", longtok, &rv));
	assert_int_equal(rv, RAFTLOCK_EINVAL);
	assert_null(client_with_token("127.0.0.1:1", "", &rv));
	assert_int_equal(rv, RAFTLOCK_EINVAL);
	longtok[RAFTLOCK_TOKEN_MAX] = '\0';
	raftlock_client *c = client_with_token("127.0.0.1:1", longtok, &rv);
	assert_int_equal(rv, 0);
	raftlock_client_close(c);
}

static void test_perms_words(void **state)
{
	(void)state;
	uint32_t p = 0;
	assert_int_equal(raftlock_acl_perms_parse("lock", &p), 0);
	assert_int_equal(p, RAFTLOCK_ACL_LOCK);
	assert_int_equal(raftlock_acl_perms_parse("read,lock", &p), 0);
	assert_int_equal(p, RAFTLOCK_ACL_LOCK | RAFTLOCK_ACL_READ);
	assert_int_equal(raftlock_acl_perms_parse("all", &p), 0);
	assert_int_equal(p, RAFTLOCK_ACL_LOCK | RAFTLOCK_ACL_READ | RAFTLOCK_ACL_ADMIN);
	p = 99;
	const char *bad[] = {"", ",", "lock,", ",lock", "write", "lock,,read", "Lock", "locks"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(raftlock_acl_perms_parse(bad[i], &p), RAFTLOCK_EINVAL);
		assert_int_equal(p, 99);
	}
	assert_int_equal(raftlock_acl_perms_parse(NULL, &p), RAFTLOCK_EINVAL);
	char buf[32];
	assert_string_equal(
		raftlock_acl_perms_format(RAFTLOCK_ACL_LOCK | RAFTLOCK_ACL_ADMIN, buf, sizeof buf),
		"lock,admin");
	assert_string_equal(raftlock_acl_perms_format(7, buf, sizeof buf), "lock,read,admin");
	assert_string_equal(raftlock_acl_perms_format(0, buf, sizeof buf), "none");
	/* Round trip. */
	for (uint32_t m = 1; m < 8; m++) {
		assert_int_equal(
			raftlock_acl_perms_parse(raftlock_acl_perms_format(m, buf, sizeof buf), &p),
			0);
		assert_int_equal(p, m);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_token_first_on_every_connection),
		cmocka_unit_test(test_no_token_sends_none),
		cmocka_unit_test(test_bad_token_refused_at_open),
		cmocka_unit_test(test_perms_words),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
