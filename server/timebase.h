/*
 * timebase.h: the server's time, injected. The leader's cluster clock, the
 * lease deadlines and keepalive budgets (leases.c), the transfer back-off
 * (followers.c) and the shutdown timers (node.c) read time and start timers
 * only through a struct timebase, as canonical raft's core takes time only from
 * raft_io->time: the daemon passes one backed by libuv (timebase_init_uv),
 * unit tests a manual one whose time moves only when the test says so
 * (timebase_init_manual, timebase_advance), so they replay exactly.
 *
 * Times are milliseconds on a monotonic clock with an arbitrary origin.
 * The state machine never sees this clock (STYLE rule 6): it knows only
 * the cluster time written into entries.
 *
 * Loop thread only. Timer callbacks follow libuv's rule: a stopped or
 * closed timer never fires again.
 */
#ifndef RAFTLOCK_TIMEBASE_H
#define RAFTLOCK_TIMEBASE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "list.h"

struct timebase;
struct timebase_timer;

typedef void (*timebase_timer_cb)(struct timebase_timer *t);

struct timebase_timer {
	struct timebase *clock;
	timebase_timer_cb cb;
	void *data; /* the owner's */
	bool active;
	uint64_t due, repeat; /* manual clock */
	struct list link;     /* manual clock: in its timers while active */
	uv_timer_t uv;        /* libuv clock */
};

struct timebase {
	enum { TIMEBASE_UV, TIMEBASE_MANUAL } kind;
	uv_loop_t *loop;    /* libuv clock */
	uint64_t now;       /* manual clock */
	struct list timers; /* manual clock: active timers */
};

/* Time from CLOCK_MONOTONIC (uv_hrtime), timers on loop. */
void timebase_init_uv(struct timebase *c, uv_loop_t *loop);

/* Time that starts at start_ms and moves only in timebase_advance(). */
void timebase_init_manual(struct timebase *c, uint64_t start_ms);

/* Manual clock: moves time forward by ms; each timer that falls due fires
 * at its due time (timebase_now() returns it during the callback), in order
 * of due time, a repeating one as often as it falls due. */
void timebase_advance(struct timebase *c, uint64_t ms);

uint64_t timebase_now(struct timebase *c);

/* A timer of c, inactive until started; data is the owner's. A libuv
 * timer must be closed with timebase_timer_close() before its memory is
 * freed. */
void timebase_timer_init(struct timebase *c, struct timebase_timer *t, void *data);

/* (Re)starts: cb runs first after timeout_ms, then every repeat_ms (0:
 * once), until stopped. */
void timebase_timer_start(struct timebase_timer *t, timebase_timer_cb cb, uint64_t timeout_ms,
			  uint64_t repeat_ms);
void timebase_timer_stop(struct timebase_timer *t);
bool timebase_timer_active(const struct timebase_timer *t);

/* Stops it for good. A libuv timer's memory may be freed once the loop
 * has run its close callbacks (uv_run after this); a manual one's at once. */
void timebase_timer_close(struct timebase_timer *t);

#endif
