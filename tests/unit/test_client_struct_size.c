/* test_client_struct_size.c: raftlock_struct_size() gives the sizeof of
 * every struct raftlock.h defines (the header read back, so that a struct
 * added there and not to the library's table fails here), and 0 for any
 * other name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "raftlock.h"

/* Written here apart from client/abi.c's table: a name misspelt or a
 * struct left out there fails against this list. */
#define STRUCTS(X)                  \
	X(raftlock_client_options)  \
	X(raftlock_session_options) \
	X(raftlock_lock_options)    \
	X(raftlock_multi_item)      \
	X(raftlock_position)        \
	X(raftlock_watch_event)     \
	X(raftlock_leader_event)    \
	X(raftlock_member)          \
	X(raftlock_status)          \
	X(raftlock_owner)           \
	X(raftlock_holder)          \
	X(raftlock_waiter)          \
	X(raftlock_lock_info)       \
	X(raftlock_lock_list)       \
	X(raftlock_session_info)    \
	X(raftlock_session_list)    \
	X(raftlock_acl_rule)        \
	X(raftlock_acl_list)        \
	X(raftlock_member_info)     \
	X(raftlock_member_list)

#define STRUCT_NAME(s) #s,
static const char *const names[] = {STRUCTS(STRUCT_NAME)};
#undef STRUCT_NAME
#define STRUCT_SIZE(s) sizeof(struct s),
static const size_t sizes[] = {STRUCTS(STRUCT_SIZE)};
#undef STRUCT_SIZE

#define N_STRUCTS (sizeof names / sizeof names[0])

static void test_every_struct_has_its_size(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_STRUCTS; i++) {
		size_t size = raftlock_struct_size(names[i]);
		if (size != sizes[i])
			fail_msg("%s: %zu, sizeof %zu", names[i], size, sizes[i]);
	}
}

/* Every "struct raftlock_X {" at the start of a line of raftlock.h is in
 * the list above (and so known by the library), and the list has no
 * struct the header lacks. */
static void test_the_list_is_the_headers(void **state)
{
	(void)state;
	FILE *f = fopen(RAFTLOCK_SOURCE_DIR "/client/raftlock.h", "r");
	assert_non_null(f);
	char line[512];
	char name[128];
	size_t defined = 0;
	while (fgets(line, sizeof line, f) != NULL) {
		char brace;
		if (sscanf(line, "struct %127[a-z_] %c", name, &brace) != 2 || brace != '{')
			continue;
		size_t i = 0;
		while (i < N_STRUCTS && strcmp(names[i], name) != 0)
			i++;
		if (i == N_STRUCTS)
			fail_msg("struct %s of raftlock.h is not in the test's list", name);
		assert_true(raftlock_struct_size(name) > 0);
		defined++;
	}
	fclose(f);
	assert_int_equal(defined, N_STRUCTS);
}

static void test_unknown_names(void **state)
{
	(void)state;
	const char *unknown[] = {
		"",
		"raftlock_client", /* opaque: its size is not the caller's */
		"raftlock_lock",
		"struct raftlock_lock_info", /* the prefix is not part of the name */
		"raftlock_lock_info ",
		"raftlock_lock_inf",
		"raftlock_lock_info_x",
		"RAFTLOCK_LOCK_INFO",
		"raftlock_no_such_struct",
	};
	for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
		if (raftlock_struct_size(unknown[i]) != 0)
			fail_msg("\"%s\" is known", unknown[i]);
	assert_int_equal(raftlock_struct_size(NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_struct_has_its_size),
		cmocka_unit_test(test_the_list_is_the_headers),
		cmocka_unit_test(test_unknown_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
