#ifndef RAFTLOCK_WAKER_H
#define RAFTLOCK_WAKER_H

/*
 * Threads that wait for the I/O thread without the client lock, woken a
 * batch at a time: callers of a blocking try-lock or release (lock.c),
 * and every thread that waits for its request's answer (transport_sleep).
 *
 * A thread woken by a system call of another preempts it on return from
 * that call: the I/O thread handing out a batch of answers with one
 * sem_post each was preempted once per caller, and switched back in
 * once per caller too (3.5 context switches per acquire-release pair at
 * 64 blocking callers). Here each waiter owns a slot, one bit of a futex
 * word (FUTEX_WAIT_BITSET); the I/O thread collects the slots of a batch
 * and wakes each word's with one FUTEX_WAKE_BITSET, so it is preempted
 * once per batch at most. Slots are claimed and released with atomics:
 * nothing here needs the client lock. More waiters than WAKER_SLOTS share
 * the last slot, and wake each other for nothing (each waits again).
 */

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define WAKER_WORDS 32
#define WAKER_SLOTS (WAKER_WORDS * 32)

struct waker {
	uint32_t seq[WAKER_WORDS];  /* the futex words: bumped by each wake */
	uint32_t busy[WAKER_WORDS]; /* claimed slots (the shared one never) */
};

struct waiter {
	unsigned slot;
	uint32_t done; /* set once, by the waking thread: its last touch */
};

/* Claims a slot for w (any thread). */
void waiter_init(struct waker *k, struct waiter *w);

/* Sleeps until w is woken (the thread that called waiter_init). */
void waiter_wait(struct waker *k, struct waiter *w);

/* The same, until the CLOCK_MONOTONIC time until at the latest (NULL: no
 * limit). Returns whether w was woken. */
bool waiter_wait_until(struct waker *k, struct waiter *w, const struct timespec *until);

/* Makes a woken w wait again: its waiter, while nothing can wake w (a lock
 * that every waker of w holds when it calls wake_batch_add). */
void waiter_rearm(struct waiter *w);

/* Tests only: when set, waiter_wait calls it between its look at the
 * word and its look at done, where a wake must not be lost. */
extern void (*waker_test_between)(struct waiter *w);

/* Releases w's slot once nobody waits on it (any thread; a wake still
 * on its way for w only wakes the slot's next owner for nothing). */
void waiter_fini(struct waker *k, struct waiter *w);

/* The waiters a thread wakes at once. */
struct wake_batch {
	uint32_t bits[WAKER_WORDS];
};

/* Ends w's wait at the next wake_batch_send(): after this call, w belongs
 * to its waiter again and may be gone. */
void wake_batch_add(struct wake_batch *b, struct waiter *w);

/* Wakes the waiters of b, and empties it. */
void wake_batch_send(struct waker *k, struct wake_batch *b);

#endif
