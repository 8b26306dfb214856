/*
 * clock.h: the two clocks of the client, in milliseconds.
 *
 * CLOCK_MONOTONIC measures timeouts and backoff; CLOCK_BOOTTIME measures
 * lease validity, because it keeps counting while the machine is suspended
 * and the server's lease keeps running meanwhile.
 */
#ifndef RAFTLOCK_CLOCK_H
#define RAFTLOCK_CLOCK_H

#include <stdint.h>
#include <time.h>

uint64_t clock_mono_ms(void);
uint64_t clock_boot_ms(void);

/* abs_mono_ms (a CLOCK_MONOTONIC time) as a timespec, for
 * pthread_cond_timedwait on a condition variable set to that clock. */
struct timespec clock_mono_deadline(uint64_t abs_mono_ms);

#endif
