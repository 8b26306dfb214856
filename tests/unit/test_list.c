/* test_list.c: the intrusive list (order, removal inside a loop, removing
 * twice) and the JSON string writer (every control byte escaped). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"
#include "list.h"

struct item {
	int value;
	struct list link;
};

static void values_are(struct list *head, const int *want, size_t n)
{
	struct list *l;
	size_t i = 0;
	list_each (l, head) {
		assert_true(i < n);
		assert_int_equal(list_entry(l, struct item, link)->value, want[i]);
		i++;
	}
	assert_int_equal(i, n);
}

static void order_and_removal(void **state)
{
	(void)state;
	struct item it[4];
	struct list head, *l, *tmp;

	list_init(&head);
	assert_true(list_empty(&head));
	assert_null(list_first(&head));
	for (int i = 0; i < 4; i++) {
		it[i].value = i;
		list_init(&it[i].link);
		assert_false(list_linked(&it[i].link));
	}
	list_add_tail(&head, &it[1].link);
	list_add_tail(&head, &it[2].link);
	list_add_head(&head, &it[0].link);
	list_add_tail(&head, &it[3].link);
	values_are(&head, (int[]){0, 1, 2, 3}, 4);
	assert_ptr_equal(list_first(&head), &it[0].link);
	assert_true(list_linked(&it[2].link));

	/* Removing every odd item while walking the list. */
	list_each_safe (l, tmp, &head) {
		if (list_entry(l, struct item, link)->value % 2)
			list_remove(l);
	}
	values_are(&head, (int[]){0, 2}, 2);
	assert_false(list_linked(&it[1].link));

	/* A second removal does nothing to the list. */
	list_remove(&it[1].link);
	values_are(&head, (int[]){0, 2}, 2);
	list_remove(&it[0].link);
	list_remove(&it[2].link);
	assert_true(list_empty(&head));
}

static void json_escapes(void **state)
{
	(void)state;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	json_write_string(f, "a\"b\\c\n\x01\x1f\xc3\xa9");
	json_write_string(f, NULL);
	assert_int_equal(fclose(f), 0);
	assert_string_equal(text, "\"a\\\"b\\\\c\\u000a\\u0001\\u001f\xc3\xa9\"\"\"");
	free(text);

	char esc[8];
	for (int c = 0; c < 0x20; c++) {
		json_char((unsigned char)c, esc);
		assert_int_equal(strlen(esc), 6);
	}
	assert_string_equal(json_char('x', esc), "x");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(order_and_removal),
		cmocka_unit_test(json_escapes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
