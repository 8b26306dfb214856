/*
 * return_hold.h: when the leader's next entry waits for the callers its
 * last entry answered (node.c's group commit; the numbers there).
 *
 * A client that makes one call at a time (a thread per lock user, or a
 * chain of asynchronous calls) sends its next command as soon as its
 * answer comes. With one entry of ours in flight, the callers an entry
 * answered come back just after the next entry went out and wait a whole
 * commit for it before their own: the clients split into two groups that
 * take turns, each command two commits long (at 64 clients, 32 commands
 * an entry). So when an entry of ours is applied with nothing else in
 * flight, the batch that follows waits until three in four of the
 * sessions whose calls it answered (and that will call again: not a
 * queued acquire, whose caller waits for its grant, nor a refusal) have
 * called again (a call already in the batch counts: node.c notes it
 * after return_hold_arm()), for at most RETURN_HOLD_MS. Only those
 * sessions count: other traffic does not end the wait, or a steady
 * stream of unrelated commands would hold every entry. A wait that ends by time (callers that
 * do something else first) makes the next 1, 2, 4 ... RETURN_HOLD_SKIP_MAX
 * holds not happen; each that ends with the callers back halves that.
 *
 * Times are the caller's milliseconds (timebase.h). Loop thread only; no
 * I/O.
 */
#ifndef RAFTLOCK_RETURN_HOLD_H
#define RAFTLOCK_RETURN_HOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RETURN_HOLD_MS 2        /* the longest wait: 1-2 ms of a ms clock */
#define RETURN_HOLD_SKIP_MAX 64 /* holds skipped after waits that ended by time */

struct return_hold_caller {
	uint64_t session;
	bool seen; /* it called since */
};

struct return_hold {
	struct return_hold_caller *callers; /* the last entry answered: sorted, distinct */
	size_t n, cap;
	bool failed; /* out of memory while noting them: no hold */
	size_t came; /* how many of them called since */
	uint64_t until;
	bool waited; /* a batch waited in this hold */
	unsigned skip, backoff;
	uint64_t filled, expired; /* how holds that made a batch wait ended */
};

void return_hold_init(struct return_hold *h);
void return_hold_free(struct return_hold *h);

/* An entry of ours was applied with nothing else of ours in flight: the
 * hold starts over, with the sessions given to return_hold_expect() next;
 * return_hold_arm() at `now` ends the list. */
void return_hold_begin(struct return_hold *h);
void return_hold_expect(struct return_hold *h, uint64_t session); /* 0: ignored */
void return_hold_arm(struct return_hold *h, uint64_t now);

/* A call of `session` was proposed. */
void return_hold_note_call(struct return_hold *h, uint64_t session);

/* Whether a batch waiting to be proposed at `now` waits; then *wake_in
 * is how many ms later to ask again (at least 1). A hold ends the first
 * time this answers false. */
bool return_hold_waits(struct return_hold *h, uint64_t now, uint64_t *wake_in);

/* Leadership lost or gained: no hold, no skip. */
void return_hold_reset(struct return_hold *h);

#endif
