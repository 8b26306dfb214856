/* alloc_fail.c: see alloc_fail.h. */
#include "alloc_fail.h"

#include <errno.h>
#include <string.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

static pthread_mutex_t alloc_fail_mu = PTHREAD_MUTEX_INITIALIZER;
static bool alloc_fail_armed;
static struct alloc_fail_rule alloc_fail_rule;
static int alloc_fail_seen, alloc_fail_failed;

void alloc_fail_start(const struct alloc_fail_rule *rule)
{
	pthread_mutex_lock(&alloc_fail_mu);
	alloc_fail_rule = *rule;
	alloc_fail_armed = true;
	alloc_fail_seen = 0;
	alloc_fail_failed = 0;
	pthread_mutex_unlock(&alloc_fail_mu);
}

void alloc_fail_stop(void)
{
	pthread_mutex_lock(&alloc_fail_mu);
	alloc_fail_armed = false;
	pthread_mutex_unlock(&alloc_fail_mu);
}

int alloc_fail_count(void)
{
	pthread_mutex_lock(&alloc_fail_mu);
	int n = alloc_fail_failed;
	pthread_mutex_unlock(&alloc_fail_mu);
	return n;
}

/* Whether this allocation (by call, of size bytes; text: what it copies,
 * len bytes of it, else NULL) is to fail. */
static bool alloc_fail_now(unsigned call, size_t size, const char *text, size_t len)
{
	bool fail = false;
	pthread_mutex_lock(&alloc_fail_mu);
	const struct alloc_fail_rule *r = &alloc_fail_rule;
	if (alloc_fail_armed && (r->calls == 0 || (r->calls & call) != 0) &&
	    (r->size == 0 || r->size == size) &&
	    (r->text == NULL ||
	     (text != NULL && strlen(r->text) == len && memcmp(r->text, text, len) == 0)) &&
	    (!r->one_thread || pthread_equal(r->thread, pthread_self()))) {
		int k = alloc_fail_seen++;
		fail = k >= r->skip && k - r->skip < r->count;
		alloc_fail_failed += fail;
	}
	pthread_mutex_unlock(&alloc_fail_mu);
	if (fail)
		errno = ENOMEM;
	return fail;
}

void *__wrap_malloc(size_t size)
{
	return alloc_fail_now(ALLOC_FAIL_MALLOC, size, NULL, 0) ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	size_t bytes;
	if (__builtin_mul_overflow(n, size, &bytes)) {
		errno = ENOMEM; /* as calloc must (ASan's would abort): no rule's */
		return NULL;
	}
	return alloc_fail_now(ALLOC_FAIL_CALLOC, bytes, NULL, 0) ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
	return alloc_fail_now(ALLOC_FAIL_REALLOC, size, NULL, 0) ? NULL : __real_realloc(p, size);
}

char *__wrap_strdup(const char *s)
{
	size_t len = strlen(s);
	return alloc_fail_now(ALLOC_FAIL_STRDUP, len + 1, s, len) ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	return alloc_fail_now(ALLOC_FAIL_STRDUP, len + 1, s, len) ? NULL : __real_strndup(s, n);
}
