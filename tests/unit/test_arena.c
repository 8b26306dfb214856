/* test_arena.c: the bump allocator behind decoded log entries: alignment,
 * growth past a chunk, what a reset keeps, and a protobuf-c message decoded
 * into it equal to the same bytes decoded with malloc. */
#include <setjmp.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "arena.h"
#include "codec.h"
#include "raftlock.h"
#include "raftlock.pb-c.h"

static void aligned_and_apart(void **state)
{
	(void)state;
	struct arena a;
	arena_init(&a);
	unsigned char *p[100];
	for (size_t n = 0; n < 100; n++) {
		p[n] = arena_alloc(&a, n);
		assert_non_null(p[n]);
		assert_int_equal((uintptr_t)p[n] % alignof(max_align_t), 0);
		memset(p[n], (int)n, n); /* ASan: the whole length is ours */
	}
	/* No allocation overlaps another. */
	for (size_t n = 0; n < 100; n++)
		for (size_t i = 0; i < n; i++)
			assert_int_equal(p[n][i], (unsigned char)n);
	arena_fini(&a);
}

/* Allocations past the first chunk stay valid until the reset. */
static void grows_past_a_chunk(void **state)
{
	(void)state;
	struct arena a;
	arena_init(&a);
	enum { N = 3 * ARENA_FIRST / 64 };
	uint64_t *p[N];
	for (size_t i = 0; i < N; i++) {
		p[i] = arena_alloc(&a, 64);
		assert_non_null(p[i]);
		for (size_t j = 0; j < 8; j++)
			p[i][j] = i;
	}
	for (size_t i = 0; i < N; i++)
		for (size_t j = 0; j < 8; j++)
			assert_int_equal(p[i][j], i);
	/* One allocation larger than any chunk so far. */
	unsigned char *big = arena_alloc(&a, 10 * ARENA_FIRST);
	assert_non_null(big);
	memset(big, 1, 10 * ARENA_FIRST);
	arena_fini(&a);
}

/* A reset keeps the largest chunk: the same load fits it again. */
static void reset_keeps_the_largest(void **state)
{
	(void)state;
	struct arena a;
	arena_init(&a);
	assert_non_null(arena_alloc(&a, 3 * ARENA_FIRST));
	assert_non_null(arena_alloc(&a, 100));
	arena_reset(&a);
	unsigned char *first = arena_alloc(&a, 3 * ARENA_FIRST);
	assert_non_null(first);
	unsigned char *second = arena_alloc(&a, 100);
	/* Both from the one kept chunk, one after the other (a sanitizer
	 * build leaves a small gap). */
	assert_true(second >= first + 3 * ARENA_FIRST && second <= first + 3 * ARENA_FIRST + 64);
	arena_reset(&a);
	assert_ptr_equal(arena_alloc(&a, 1), first);
	/* A chunk beyond ARENA_KEEP_MAX goes; the largest below it stays. */
	assert_non_null(arena_alloc(&a, 2 * ARENA_KEEP_MAX));
	arena_reset(&a);
	assert_ptr_equal(arena_alloc(&a, 1), first);
	arena_fini(&a);
	assert_null(a.head);
}

static void refuses_the_impossible(void **state)
{
	(void)state;
	struct arena a;
	arena_init(&a);
	assert_null(arena_alloc(&a, SIZE_MAX));
	assert_null(arena_alloc(&a, SIZE_MAX - 8));
	assert_non_null(arena_alloc(&a, 8));
	arena_fini(&a);
}

/* A log entry decoded into the arena is the entry decoded with malloc,
 * entry after entry with resets in between. */
static void decodes_entries(void **state)
{
	(void)state;
	struct arena a;
	arena_init(&a);
	for (unsigned round = 0; round < 50; round++) {
		Raftlock__LogEntry e = RAFTLOCK__LOG_ENTRY__INIT;
		e.cluster_time = 1000 + round;
		size_t n = 1 + round % 40;
		Raftlock__Command cmds[40], *pcmds[40];
		Raftlock__Acquire acq[40];
		char names[40][32];
		for (size_t i = 0; i < n; i++) {
			raftlock__command__init(&cmds[i]);
			raftlock__acquire__init(&acq[i]);
			snprintf(names[i], sizeof names[i], "lock/%u/%zu", round, i);
			acq[i].name = names[i];
			acq[i].wait = i % 2;
			cmds[i].session = 7 + i;
			cmds[i].seq = round * 100 + i;
			cmds[i].op_case = RAFTLOCK__COMMAND__OP_ACQUIRE;
			cmds[i].acquire = &acq[i];
			pcmds[i] = &cmds[i];
		}
		e.n_commands = n;
		e.commands = pcmds;
		void *buf;
		size_t len;
		assert_int_equal(codec_encode_entry(&e, malloc, &buf, &len), 0);
		Raftlock__LogEntry *heap, *in_arena;
		assert_int_equal(codec_decode_entry(buf, len, NULL, &heap), 0);
		assert_int_equal(codec_decode_entry(buf, len, &a, &in_arena), 0);
		assert_int_equal(in_arena->cluster_time, heap->cluster_time);
		assert_int_equal(in_arena->n_commands, n);
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(in_arena->commands[i]->seq, heap->commands[i]->seq);
			assert_int_equal(in_arena->commands[i]->session, 7 + i);
			assert_string_equal(in_arena->commands[i]->acquire->name, names[i]);
			assert_int_equal(in_arena->commands[i]->acquire->wait, i % 2);
		}
		/* Packs to the same bytes. */
		size_t sz = raftlock__log_entry__get_packed_size(heap);
		assert_int_equal(raftlock__log_entry__get_packed_size(in_arena), sz);
		uint8_t *x = malloc(sz + 1), *y = malloc(sz + 1);
		raftlock__log_entry__pack(heap, x);
		raftlock__log_entry__pack(in_arena, y);
		assert_memory_equal(x, y, sz);
		free(x);
		free(y);
		raftlock__log_entry__free_unpacked(heap, NULL);
		/* A damaged copy (a field that claims more bytes than there are)
		 * fails, and what it allocated stays the arena's. */
		static const uint8_t claim[] = {0x12, 0xff, 0xff, 0xff, 0x7f};
		memcpy((uint8_t *)buf + ENTRY_HEADER_SIZE, claim, sizeof claim);
		Raftlock__LogEntry *bad = NULL;
		assert_int_equal(codec_decode_entry(buf, len, &a, &bad), RAFTLOCK_EPROTO);
		assert_null(bad);
		free(buf);
		arena_reset(&a);
	}
	arena_fini(&a);
}

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>

/* Under ASan what a reset dropped, and the gap after each allocation,
 * are poisoned: a pointer kept past its entry's apply is still caught. */
static void poisoned_after_reset(void **state)
{
	(void)state;
	struct arena a;
	arena_init(&a);
	unsigned char *p = arena_alloc(&a, 24);
	assert_false(__asan_address_is_poisoned(p));
	assert_false(__asan_address_is_poisoned(p + 23));
	assert_true(__asan_address_is_poisoned(p + 32)); /* the gap */
	arena_reset(&a);
	assert_true(__asan_address_is_poisoned(p));
	arena_fini(&a);
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(aligned_and_apart),
		cmocka_unit_test(grows_past_a_chunk),
		cmocka_unit_test(reset_keeps_the_largest),
		cmocka_unit_test(refuses_the_impossible),
		cmocka_unit_test(decodes_entries),
#if defined(__SANITIZE_ADDRESS__)
		cmocka_unit_test(poisoned_after_reset),
#endif
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
