/*
 * session.h: sessions, their sequence numbers, and the keepalive thread.
 *
 * Every mutating request of a session carries (session, seq, ack_below):
 * seq counts from 1; ack_below is the lowest seq whose outcome the client
 * does not know yet (the request's own seq if none is older). A seq whose
 * outcome stays unknown (a timeout) keeps ack_below where it is forever:
 * the server then keeps answering a retry of it from its record.
 *
 * The keepalive thread batches all live sessions of the client into one
 * KeepAliveRequest every min(TTL)/3, moves their validity forward from the
 * SEND time of each acknowledged keepalive, marks a session lost when its
 * validity passes or the server says it is gone, and calls on_lost once.
 * All functions here expect c->mu held unless they say otherwise.
 */
#ifndef RAFTLOCK_SESSION_H
#define RAFTLOCK_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "client.h"

struct raftlock_lock;

struct raftlock_session {
	struct raftlock_session *prev, *next; /* in the client's list */
	raftlock_client *client;
	uint64_t id;
	unsigned ttl_ms;
	uint64_t valid_until; /* CLOCK_BOOTTIME ms; 0 once lost */
	bool lost;
	int lost_reason;
	bool cb_pending; /* on_lost is due */
	raftlock_session_lost_cb on_lost;
	void *on_lost_arg;
	uint64_t next_seq;
	uint64_t *inflight; /* seqs whose outcome is unknown */
	size_t n_inflight;
	size_t cap_inflight;
	struct raftlock_lock *locks; /* handles made on this session */
};

/*
 * The end of validity of a lease whose renewal was sent at sent_ms
 * (CLOCK_BOOTTIME) with the given TTL: sent + ttl - (ttl * rho + margin),
 * with rho = RAFTLOCK_CLOCK_RATE_PPM / 1e6 rounded up to whole ms, and
 * margin = RAFTLOCK_LEASE_MARGIN_MS. Pure; never below sent_ms.
 */
uint64_t session_validity_ms(uint64_t sent_ms, unsigned ttl_ms);

/* Takes the next seq of s and the ack_below to send with it, and records
 * the seq as in flight. RAFTLOCK_ESESSION when s is lost; ENOMEM. */
int session_seq_begin(raftlock_session *s, uint64_t *seq, uint64_t *ack_below);

/* The outcome of seq is known: it no longer holds ack_below back. */
void session_seq_end(raftlock_session *s, uint64_t seq);

/* Marks s lost for good (valid_until 0); on_lost will run once from the
 * keepalive thread. No-op when already lost. */
void session_mark_lost(raftlock_session *s, int reason);

/*
 * Sends one mutating request of s: sets *f_session, *f_seq, *f_ack_below
 * (fields of the request inside env), waits up to the client's request
 * timeout, and tracks the seq. On 0 *result points into *reply (owned by
 * the caller) and holds the command's outcome; a result of
 * RAFTLOCK_ESESSION also marks s lost. Errors: transport and response
 * errors (ETIMEDOUT, ECONNECTION, EUNAVAILABLE, EPROTO, ...), ESESSION.
 */
int session_mutate(raftlock_session *s, Raftlock__Envelope *env,
		   uint64_t *f_session, uint64_t *f_seq, uint64_t *f_ack_below,
		   Raftlock__Envelope **reply, const Raftlock__Result **result);

/* Checks a completed reply of a mutating request: 0 with *result, or the
 * response's error (EPROTO when it carries no result). */
int session_reply_result(const Raftlock__Envelope *reply,
			 const Raftlock__Result **result);

/* Start and stop the keepalive thread (called without c->mu held). */
int session_keepalive_start(raftlock_client *c);
void session_keepalive_stop(raftlock_client *c);

/* Closes every session of c within one request timeout in total (called
 * without c->mu held). */
void session_close_all(raftlock_client *c);

#endif
