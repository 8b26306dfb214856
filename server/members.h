/*
 * members.h: membership on the leader (docs/OPERATIONS.md, "Membership").
 * Serves the member requests of the client protocol and promotes caught-up
 * standbys:
 *   LIST     the raft configuration with each member's addresses, role and
 *            (on the leader) match index.
 *   ADD      MEMBER_ADD through the log (member_book.h: ids are never
 *            reused), then raft_add (a spare) and raft_assign to standby:
 *            the new member receives the log without voting.
 *   REMOVE   the leader itself: hand leadership over first (raft_transfer)
 *            and answer "unavailable", so that the client retries at the
 *            new leader. Another member: MEMBER_REMOVE (its id is never
 *            used again), then raft_remove. A voter's removal first
 *            checks that a majority of the voters that would remain
 *            answer (a barrier, then their match indexes, until the
 *            deadline below): raft counts a new configuration from the
 *            moment it is appended, so leaving voters {A, C} while C is
 *            down would commit nothing, itself included, until C returned.
 *            Refused with RAFTLOCK_ESTATE, nothing proposed, when they do
 *            not. A voter's removal (the leader's too) runs alone: while
 *            one is on its way, or while another change is, the other is
 *            refused "unavailable" (the client retries). The check is made
 *            once, before MEMBER_REMOVE: a voter that dies after it is not
 *            seen. An id in neither the raft
 *            configuration nor the book: 0 when it was removed before (a
 *            retry), "no member N" otherwise (member_book_removed()),
 *            nothing proposed.
 *   PROMOTE  raft_assign to voter (libraft lets the member catch up first:
 *            rounds of replication, the last under an election timeout).
 *   JOIN     MEMBER_JOIN: a new node's first start claims its id for its
 *            data directory's incarnation; answered, once it holds, with
 *            the member list as LIST's (the peers the new node admits on
 *            its raft port before it has a log, join.h).
 * Automatic promotion: every MEMBERS_CHECK_MS the ready leader makes a
 * standby that has joined a voter once its match index is within
 * MEMBERS_PROMOTE_GAP entries of the leader's last index. At the same
 * pace it records in the member book the addresses of the members of the
 * bootstrap configuration that its --member list knows and the book lacks
 * (member_book.h).
 *
 * Every request is answered exactly once through its reply callback (also
 * when leadership is lost or the node stops: libraft calls every change
 * back when it closes). Loop thread only.
 */
#ifndef RAFTLOCK_MEMBERS_H
#define RAFTLOCK_MEMBERS_H

#include <stdbool.h>
#include <stdint.h>

#include "node.h"
#include "timebase.h"

#define MEMBERS_CHECK_MS 200
#define MEMBERS_PROMOTE_GAP 64
/* How often a voter's removal looks at the remaining voters' match
 * indexes while it waits for a majority of them to answer (ms). */
#define MEMBERS_QUORUM_POLL_MS 10
/* How long it waits for them from the request: this many election
 * timeouts, at most MEMBERS_QUORUM_WAIT_MAX_MS. A voter answers when it
 * holds an entry appended after the request came, or when its match index
 * moves meanwhile (alive, catching up by entries; one receiving a
 * snapshot does not answer until it has it). */
#define MEMBERS_QUORUM_ELECTIONS 2
#define MEMBERS_QUORUM_WAIT_MAX_MS 3000
/* After an automatic promotion failed (its member did not catch up in
 * time: its node is down or slow), the next one waits this long (ms), so
 * that it does not hold every other membership change off. */
#define MEMBERS_PROMOTE_AGAIN_MS 10000

struct member_op;

/* Called once per request with the answer (borrowed for the call). */
typedef void (*members_reply_cb)(void *arg, const Raftlock__Response *resp);

struct members {
	struct node *node;
	struct timebase *tb;
	struct timebase_timer timer;
	struct timebase_timer quorum_timer; /* polls for removing's check */
	struct member_op *removing;         /* the voter removal on its way */
	unsigned ops;                       /* add, promote, remove requests on their way */
	bool closing;
	struct raft_change promotion; /* the automatic one, while promoting */
	bool promoting;
	uint64_t promotee;
	struct raft_transfer transfer; /* handing over before removing this node */
	unsigned busy;                 /* requests of ours in a raft change */
	unsigned recording;            /* founding members' records in flight */
	uint64_t promotions;           /* automatic promotions done */
	uint64_t promote_again_ms;     /* none before (after one failed) */
};

/* Whether env is a member request (its body is MEMBER_*). */
bool members_is_request(const Raftlock__Envelope *env);

/* Starts the promotion check on tb. Never fails. */
void members_start(struct members *m, struct timebase *tb, struct node *node);

/* Serves a member request on the ready leader (the caller checked it);
 * env is borrowed for the call. reply(arg, ...) is called exactly once,
 * possibly before this returns. */
void members_handle(struct members *m, const Raftlock__Envelope *env, members_reply_cb reply,
		    void *arg);

/* Stops the check (its timer is closed). */
void members_close(struct members *m);

#endif
