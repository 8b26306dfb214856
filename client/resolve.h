/*
 * resolve.h: the addresses of a host, looked up without holding the
 * caller.
 *
 * getaddrinfo() of a name waits as long as the resolver does (a DNS
 * server that never answers, a slow NSS module), and nothing can stop it.
 * A lookup runs it on a detached thread of its own; its owner polls
 * resolve_fd() beside its other descriptors for as long as it cares to
 * wait, then takes the answer or lets go of the lookup. Each owner and
 * the thread hold a reference, and whichever lets go last frees the
 * lookup: one given up on ends by itself whenever its resolver answers,
 * also after the client that started it is gone.
 *
 * A lookup of a host and port (by one resolver) whose thread still runs
 * is joined rather than started again: the new owner takes a reference to
 * it and gets the same answer, so that a name whose resolver hangs holds
 * one thread and one place under the caps below, however many
 * connections and status calls ask for it. One asked for after the
 * answer came starts anew (the answer may be old by then).
 *
 * A thread per lookup rather than glibc's getaddrinfo_a(): that one keeps
 * the request's memory in use until the lookup ends whatever its caller
 * does (gai_cancel() cannot stop a lookup under way), so it would need the
 * same reference count, plus a signal or a thread of glibc's to say it is
 * done; it is glibc's alone, and a test could not stand in for its
 * resolver. Lookups are rare: one per connection attempt to an address
 * given by name.
 *
 * The lookups that wait for their resolver are capped per process, and a
 * one-off exchange (conn_exchange: raftlock_status_get) may hold only a
 * share of that cap: it starts a new lookup at every call, so a program
 * that asks a name whose resolver hangs for its status every second would
 * otherwise fill the cap, and every client's reconnect to a name, also a
 * healthy one, would fail until the resolver answers. Connections keep
 * RESOLVE_MAX - RESOLVE_EXCHANGE_MAX lookups for themselves (an I/O thread
 * holds at most one lookup per address, reused across its attempts).
 * With lookups joined, these caps count names that hang at once, not
 * calls: they are the backstop for a program that asks many such names;
 * while the share is full, a status call of a name not under way fails
 * at once, and the connections are untouched.
 *
 * A resolver thread blocks every signal, so that a signal meant for the
 * process is handled by one of the program's threads, never by a thread
 * the program does not know of.
 *
 * A child of fork() forgets the lookups under way in its parent (their
 * threads are not in the child) and starts its own.
 *
 * A numeric host ("127.0.0.1", "::1") takes resolve_numeric(), which asks
 * no resolver.
 */
#ifndef RAFTLOCK_RESOLVE_H
#define RAFTLOCK_RESOLVE_H

#include <stddef.h>

#include <netdb.h>

/* What looks names up: getaddrinfo(), or a test's stand-in. */
typedef int (*resolve_fn)(const char *host, const char *port, const struct addrinfo *hints,
			  struct addrinfo **res);

/* At most this many lookups of the process wait for their resolver at
 * once (a thread and a descriptor each): past it, a resolver that does not
 * answer would cost one more thread per connection attempt. */
#define RESOLVE_MAX 64
/* Of those, at most this many for one-off exchanges (RESOLVE_ONE_OFF). */
#define RESOLVE_EXCHANGE_MAX 16

/* Who a lookup is for: the share of RESOLVE_MAX it may take. */
enum resolve_use {
	RESOLVE_CONNECTION, /* a connection an I/O thread keeps */
	RESOLVE_ONE_OFF,    /* one exchange, at most RESOLVE_EXCHANGE_MAX */
};

struct resolve;

/* The address of a numeric host (an IPv4 or IPv6 literal, no brackets)
 * and decimal port, for a TCP connect, without a resolver. Returns 0 and
 * *res (the caller's: freeaddrinfo), RAFTLOCK_EINVAL when host is a name
 * (see resolve_start), RAFTLOCK_ENOMEM, or RAFTLOCK_ECONNECTION. */
int resolve_numeric(const char *host, const char *port, struct addrinfo **res);

/* Starts looking host up (TCP addresses with the decimal port) with fn
 * (NULL: getaddrinfo) on a thread of its own, with every signal blocked;
 * host and port are copied. A lookup of the same host, port and fn
 * whose resolver has not answered yet is joined instead, whatever its
 * use, and takes no place under the caps. *out is the caller's
 * reference: let go of it with resolve_drop(). Thread-safe. Errors:
 * RAFTLOCK_ELIMIT (RESOLVE_EXCHANGE_MAX lookups of use RESOLVE_ONE_OFF,
 * or RESOLVE_MAX in all, wait for their resolver: why, why_len bytes,
 * says "name lookup of 'HOST' not started: " and names the cap that
 * refused), RAFTLOCK_ENOMEM (also when the thread cannot start). why is
 * written only on RAFTLOCK_ELIMIT (why_len 0: not at all). */
int resolve_start(const char *host, const char *port, resolve_fn fn, enum resolve_use use,
		  struct resolve **out, char *why, size_t why_len);

/* A descriptor that polls readable (POLLIN) once the answer is in, and
 * stays so; valid until resolve_drop(). Never read it. */
int resolve_fd(const struct resolve *r);

/* The answer, once resolve_fd() polled readable: 1 while it is not in;
 * 0 and *res, borrowed from r until resolve_drop(); RAFTLOCK_ECONNECTION
 * when the host has no address or the lookup failed (why, why_len bytes,
 * says "name lookup of 'HOST' failed: REASON"); RAFTLOCK_ENOMEM. Each
 * owner of a joined lookup gets the same answer (read-only, shared). */
int resolve_answer(const struct resolve *r, const struct addrinfo **res, char *why, size_t why_len);

/* The owner lets go of r, answered or not; r may be freed at once or
 * when its thread ends. NULL is a no-op. */
void resolve_drop(struct resolve *r);

/* Tests: the lookups not yet freed (an owner holds them, or their thread
 * has not ended). */
unsigned resolve_live(void);

#endif
