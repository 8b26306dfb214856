/*
 * alloc_fail.h: makes chosen allocations of a test binary fail, to reach
 * the client's out-of-memory paths. The binary is linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup
 * (client/tests.cmake): the calls of every object linked into it (the test,
 * the fake node, libraftlock's static objects) go through the wrappers
 * here; shared libraries' own calls (protobuf-c's unpack, OpenSSL,
 * cmocka) do not, so they never fail. Under ASan, the real functions are
 * the sanitizer's.
 *
 * One rule at a time, for every thread: an allocation matches it when
 * each selector set matches; the first `skip` matches go through, the
 * next `count` fail (NULL, errno ENOMEM), the rest go through again.
 */
#ifndef RAFTLOCK_TEST_ALLOC_FAIL_H
#define RAFTLOCK_TEST_ALLOC_FAIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* The functions a rule may name (a mask). */
enum {
	ALLOC_FAIL_MALLOC = 1,
	ALLOC_FAIL_CALLOC = 2,
	ALLOC_FAIL_REALLOC = 4,
	ALLOC_FAIL_STRDUP = 8, /* and strndup */
};

struct alloc_fail_rule {
	unsigned calls;   /* 0: any; else a mask of the functions above */
	size_t size;      /* 0: any; else the bytes asked (calloc: n * size,
			     never matched when that overflows) */
	const char *text; /* NULL: any; else only strdup/strndup whose copy
			     is this text (strndup's first n bytes) */
	bool one_thread;  /* false: any thread; else only `thread` */
	pthread_t thread;
	int skip;
	int count;
};

/* Replaces the rule (copied; text is borrowed until alloc_fail_stop())
 * and zeroes the count of failures. */
void alloc_fail_start(const struct alloc_fail_rule *rule);
/* No allocation fails from now on. */
void alloc_fail_stop(void);
/* How many allocations failed since alloc_fail_start(). */
int alloc_fail_count(void);

#endif
