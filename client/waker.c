#include "waker.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SHARED_SLOT (WAKER_SLOTS - 1)

void (*waker_test_between)(struct waiter *w);

/* FUTEX_WAIT_BITSET's timeout is absolute, on CLOCK_MONOTONIC. */
static long futex(uint32_t *word, int op, uint32_t val, const struct timespec *until, uint32_t bits)
{
	return syscall(SYS_futex, word, op | FUTEX_PRIVATE_FLAG, val, until, NULL, bits);
}

void waiter_init(struct waker *k, struct waiter *w)
{
	w->done = 0;
	w->slot = SHARED_SLOT;
	for (unsigned i = 0; i < WAKER_WORDS; i++) {
		uint32_t busy = __atomic_load_n(&k->busy[i], __ATOMIC_RELAXED);
		/* the shared slot is never claimed */
		uint32_t full = i == WAKER_WORDS - 1 ? UINT32_MAX >> 1 : UINT32_MAX;
		while ((busy & full) != full) {
			unsigned b = (unsigned)__builtin_ctz(~busy);
			if (__atomic_compare_exchange_n(&k->busy[i], &busy, busy | 1u << b, false,
							__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
				w->slot = i * 32 + b;
				return;
			}
		}
	}
}

bool waiter_wait_until(struct waker *k, struct waiter *w, const struct timespec *until)
{
	uint32_t *word = &k->seq[w->slot / 32];
	for (;;) {
		/* the word before done: a wake between the two moves the word,
		 * and the futex then does not sleep */
		uint32_t seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
		if (waker_test_between != NULL)
			waker_test_between(w);
		if (__atomic_load_n(&w->done, __ATOMIC_ACQUIRE))
			return true;
		if (futex(word, FUTEX_WAIT_BITSET, seen, until, 1u << (w->slot % 32)) != 0 &&
		    errno == ETIMEDOUT)
			return __atomic_load_n(&w->done, __ATOMIC_ACQUIRE) != 0;
	}
}

void waiter_wait(struct waker *k, struct waiter *w)
{
	waiter_wait_until(k, w, NULL);
}

void waiter_rearm(struct waiter *w)
{
	__atomic_store_n(&w->done, 0, __ATOMIC_RELAXED);
}

void waiter_fini(struct waker *k, struct waiter *w)
{
	if (w->slot != SHARED_SLOT)
		__atomic_and_fetch(&k->busy[w->slot / 32], ~(1u << (w->slot % 32)),
				   __ATOMIC_RELAXED);
}

void wake_batch_add(struct wake_batch *b, struct waiter *w)
{
	unsigned slot = w->slot; /* read before done: w may be gone after */
	b->bits[slot / 32] |= 1u << (slot % 32);
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
}

void wake_batch_send(struct waker *k, struct wake_batch *b)
{
	for (unsigned i = 0; i < WAKER_WORDS; i++) {
		if (b->bits[i] == 0)
			continue;
		__atomic_add_fetch(&k->seq[i], 1, __ATOMIC_SEQ_CST);
		futex(&k->seq[i], FUTEX_WAKE_BITSET, INT_MAX, NULL, b->bits[i]);
		b->bits[i] = 0;
	}
}
