/* clock.c: see clock.h. */
#include "clock.h"

#include "raftlock.h"

static uint64_t clock_read_ms(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t clock_mono_ms(void)
{
	return clock_read_ms(CLOCK_MONOTONIC);
}

uint64_t clock_boot_ms(void)
{
	return clock_read_ms(CLOCK_BOOTTIME);
}

struct timespec clock_mono_deadline(uint64_t abs_mono_ms)
{
	struct timespec ts = {
		.tv_sec = (time_t)(abs_mono_ms / 1000),
		.tv_nsec = (long)(abs_mono_ms % 1000) * 1000000,
	};
	return ts;
}

RAFTLOCK_API uint64_t raftlock_now_ms(void)
{
	return clock_boot_ms();
}
