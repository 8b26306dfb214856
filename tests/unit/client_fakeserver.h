/*
 * client_fakeserver.h: a fake raftlock node for the client tests. It
 * listens on 127.0.0.1 (an ephemeral port), speaks the real framing and
 * envelopes (proto/frame.h, proto/codec.h), logs every request it gets and
 * answers as its behaviour fields say. One thread per fake; the fields
 * are read under f->mu (set them with FAKE_SET).
 */
#ifndef RAFTLOCK_TEST_CLIENT_FAKESERVER_H
#define RAFTLOCK_TEST_CLIENT_FAKESERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "frame.h"
#include "raftlock.h"
#include "raftlock.pb-c.h"

#define FAKE_CONNS 8
#define FAKE_LOG 256

enum fake_role {
	FAKE_LEADER,   /* answers everything */
	FAKE_FOLLOWER, /* NOT_LEADER, pointing at `leader` */
};

struct fake_entry {
	Raftlock__Envelope__BodyCase body;
	uint64_t id;
	uint64_t session;
	uint64_t seq;
	uint64_t ack_below;
	uint64_t acked[4]; /* the first acknowledged queued acquires */
	size_t n_acked;
	uint64_t nonce;                      /* open session */
	uint64_t other;                      /* acquire: owner; cancel: acquire_seq;
						watch: after_index */
	bool wait;                           /* acquire; watch: resume */
	uint64_t cluster;                    /* watch: cluster_id */
	int kind;                            /* acquire: LockKind */
	uint32_t limit;                      /* acquire */
	size_t value_len;                    /* acquire: its election value */
	char name[32];                       /* release: the lock's (cut short) */
	uint8_t secret[RAFTLOCK_SECRET_MAX]; /* open: its secret; a mutation:
						the sequence's; a keepalive:
						its first id's */
	size_t secret_len;
	size_t n_secrets; /* keepalive */
	int conn;         /* serial number of the connection */
	uint64_t at_boot; /* CLOCK_BOOTTIME ms when it arrived */
};

struct fake {
	int lfd;
	int stop[2];
	char addr[32];
	pthread_t thread;
	pthread_mutex_t mu;
	/* behaviour, set by the test under mu */
	enum fake_role role;
	char leader[32];
	bool drop_first_acquire;    /* close the connection instead of answering */
	bool unknown_first_acquire; /* answer EUNKNOWN once */
	bool keepalive_silent;      /* never answer keepalives */
	bool keepalive_gone;        /* answer ESESSION */
	int keepalive_status;       /* else answer every id this status */
	int keepalive_delay_ms;     /* answer keepalives this much later */
	bool busy;                  /* try-locks: EBUSY */
	int event_with_grant;       /* try-locks: push a SessionEvent of this
				       kind for the grant, in the same write */
	bool ignore_acquires;       /* log acquires, never answer them */
	bool silent;                /* log everything, answer nothing (a node
				       whose loop is stuck) */
	int grant_after_ms;         /* wait=true: push a grant after this; <0 never */
	int queued_after_ms;        /* wait=true: answer "queued" this much later
				       (the fake stalls: a slow commit) */
	int cancel_status;          /* CancelWait result */
	bool grant_on_cancel;       /* push the grant just before the cancel
				       reply; with cancel_status 0 the reply
				       carries the grant's token */
	bool revoke_with_grant;     /* write a SessionEvent REVOKED of each
				       pushed grant in the grant's own
				       write() (an admin revoke or a short
				       max_hold_ms racing the push), and
				       of a set's grant (MULTI_ACQUIRE) the
				       revocation of its item
				       revoke_set_item (in name order) */
	int revoke_set_item;        /* see revoke_with_grant */
	bool lose_with_grant;       /* hold the answer to the next try-lock,
				       then answer it RAFTLOCK_ESESSION in
				       the same write() as the next grant,
				       after it: a try-lock's, a set's or a
				       cancel's "granted first" (the
				       session's loss, told by another of
				       its requests, read with the grant) */
	int refuse_acquires;        /* answer this many acquires with the
				       status refuse_status (not executed) */
	int refuse_status;
	int revoked_acquires; /* answer this many acquires with the result
				 ENOTHOLDER, as a server does an acquire sent
				 again whose grant was revoked since */
	/* the message of those answers (NULL: none) */
	const char *refuse_message;
	bool ignore_cancels;     /* log cancels, never answer them */
	bool ignore_releases;    /* log releases, never answer them */
	int ignore_proclaims;    /* log this many proclaims, answer none */
	bool drop_first_close;   /* execute the close, then drop the
				    connection instead of answering */
	bool refuse_conns;       /* greet each new connection with ELIMIT
				    (id 0) and close it, as a node at its
				    connections-per-address limit does */
	uint64_t closed_session; /* executed close: its requests get
				    ESESSION */
	int watch_cut;           /* a watch's state (two HOLDING, CURRENT):
				    drop the connection after this many
				    HOLDING (3: after CURRENT), once */
	uint64_t watch_cluster;  /* the cluster_id its events carry */
	int watch_ends;          /* end this many watches right after
				    their answer, without an event, with
				    a second answer of watch_end_status
				    (a node that could not start its
				    state in time) */
	int watch_end_status;
	/* the value of the state's first HOLDING (w/a; NULL: "") */
	const char *watch_value;
	/* the message of a close's ESESSION answer (NULL: none) */
	const char *close_message;
	int revoke_drops;    /* drop the connection instead of answering
				this many REVOKEs (they ran: the
				answer is lost), after the refusals */
	int revoke_refusals; /* answer this many REVOKEs with the
				status revoke_status, no Result */
	int revoke_status;
	bool join_names_members; /* answer MEMBER_JOIN with the member list
				    (else as a server older than that
				    answer: a bare Result) */
	/* NULL-terminated: the locks LIST_LOCKS lists, one a page (each
	   as a/2 is), the locks of the one session, and the names of a
	   watch's state (NULL: a/1 and a/2; w/a and w/b) */
	const char *const *lock_names;
	const char *owner_host;   /* the owners' host (NULL: host-"1") */
	bool reads_before_paging; /* GET_LOCK lists a/1's first holders
				     whatever holders_after asks, as a
				     server older than paging them */
	/* state */
	int conns_seen;
	int keepalives;                 /* keepalive requests received (the log may be full) */
	size_t keepalive_most;          /* most sessions one of them named */
	uint64_t keepalive_answered_at; /* CLOCK_BOOTTIME ms when the last keepalive
					   answered arrived (its send was no later) */
	uint64_t next_session;
	uint64_t next_token;
	struct fake_entry log[FAKE_LOG];
	int n_log;
	/* the try-lock held by lose_with_grant (id 0: none) */
	uint64_t loss_id;
	int loss_fd;
	/* one pending push */
	int push_fd;
	uint64_t push_id;
	uint64_t push_at;
	uint64_t push_session; /* what its revocation names (revoke_with_grant) */
	uint64_t push_owner;
	char push_name[RAFTLOCK_NAME_MAX + 1];
	int fds[FAKE_CONNS];
	int serial[FAKE_CONNS];
	struct frame_reader readers[FAKE_CONNS];
};

/* Starts a fake on a free loopback port (f->addr). */
struct fake *fake_start(enum fake_role role);
/* Stops its thread and closes everything. */
void fake_stop(struct fake *f);
/* The leader address a FAKE_FOLLOWER names in its NOT_LEADER answers. */
void fake_set_leader(struct fake *f, const char *addr);

/* Every fake of the process answers as a server of protocol 1 would: its
 * frames carry no protocol (it never reads Envelope.sequence either, which
 * the fake does not emulate beyond that). */
void fake_speak_protocol_1(bool on);
/* How many requests of that kind it got so far. */
int fake_count(struct fake *f, Raftlock__Envelope__BodyCase body);
/* The k-th logged request of that kind (copied; zeroed if none). */
struct fake_entry fake_nth(struct fake *f, Raftlock__Envelope__BodyCase body, int k);

void sleep_ms(unsigned ms);

/* Sets a behaviour field of a running fake. */
#define FAKE_SET(f, field, value)               \
	do {                                    \
		pthread_mutex_lock(&(f)->mu);   \
		(f)->field = (value);           \
		pthread_mutex_unlock(&(f)->mu); \
	} while (0)

#define ACQUIRE RAFTLOCK__ENVELOPE__BODY_ACQUIRE
#define RELEASE RAFTLOCK__ENVELOPE__BODY_RELEASE
#define CANCEL RAFTLOCK__ENVELOPE__BODY_CANCEL_WAIT
#define CLOSE RAFTLOCK__ENVELOPE__BODY_CLOSE_SESSION
#define OPEN RAFTLOCK__ENVELOPE__BODY_OPEN_SESSION
#define KEEPALIVE RAFTLOCK__ENVELOPE__BODY_KEEPALIVE
#define REVOKE RAFTLOCK__ENVELOPE__BODY_REVOKE
#define MULTI_ACQUIRE RAFTLOCK__ENVELOPE__BODY_MULTI_ACQUIRE
#define PROCLAIM RAFTLOCK__ENVELOPE__BODY_PROCLAIM

#endif
