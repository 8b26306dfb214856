/* resolve.c: see resolve.h. */
#include "resolve.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "raftlock.h"

struct resolve {
	unsigned refs; /* each owner's and the thread's (atomic) */
	bool done;     /* the answer below is in (release/acquire) */
	/* in resolve_under_way while the thread runs (resolve_mu) */
	struct resolve *prev, *next;
	int fd; /* eventfd, written once done */
	resolve_fn fn;
	enum resolve_use use;
	char *host;
	char *port;
	/* the answer, written by the thread before done */
	int gai;
	int gai_errno; /* errno of EAI_SYSTEM */
	struct addrinfo *res;
};

/* Lookups not yet freed (atomic, not under resolve_mu: the last owner
 * to let go, resolve_drop, frees a lookup without taking the mutex, and
 * only tests read the count). */
static unsigned resolve_count;

/* The lookups whose thread runs, each of one host, port and resolver,
 * which a new owner of the same joins (resolve_start), and their places
 * under the caps; all under resolve_mu. */
static pthread_mutex_t resolve_mu = PTHREAD_MUTEX_INITIALIZER;
static struct resolve *resolve_under_way;
static unsigned resolve_running; /* lookups whose thread runs */
static unsigned resolve_one_off; /* of those, RESOLVE_ONE_OFF */

/* fork() copies the list and the counts into the child, but not the
 * lookups' threads: there, none of those lookups will ever answer, and an
 * owner of the same name would join one and wait in vain at every call.
 * The child forgets them (their memory stays, with the references its
 * copied owners hold) and starts its lookups anew; resolve_mu is held
 * across the fork, so the child never inherits it locked by a thread it
 * does not have. */
static pthread_once_t resolve_fork_once = PTHREAD_ONCE_INIT;

static void resolve_before_fork(void)
{
	pthread_mutex_lock(&resolve_mu);
}

static void resolve_after_fork_in_parent(void)
{
	pthread_mutex_unlock(&resolve_mu);
}

static void resolve_after_fork_in_child(void)
{
	resolve_under_way = NULL;
	resolve_running = 0;
	resolve_one_off = 0;
	pthread_mutex_unlock(&resolve_mu);
}

static void resolve_watch_forks(void)
{
	(void)pthread_atfork(resolve_before_fork, resolve_after_fork_in_parent,
			     resolve_after_fork_in_child);
}

/* As the connect used them before lookups had threads of their own. */
static const struct addrinfo resolve_hints = {
	.ai_family = AF_UNSPEC,
	.ai_socktype = SOCK_STREAM,
	.ai_flags = AI_NUMERICSERV,
};

int resolve_numeric(const char *host, const char *port, struct addrinfo **res)
{
	struct addrinfo hints = resolve_hints;
	hints.ai_flags |= AI_NUMERICHOST; /* never asks a resolver */
	int gai = getaddrinfo(host, port, &hints, res);
	if (gai == 0)
		return 0;
	return gai == EAI_NONAME   ? RAFTLOCK_EINVAL
	       : gai == EAI_MEMORY ? RAFTLOCK_ENOMEM
				   : RAFTLOCK_ECONNECTION;
}

static void resolve_unref(struct resolve *r)
{
	if (__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	if (r->res != NULL)
		freeaddrinfo(r->res);
	close(r->fd);
	free(r->host);
	free(r->port);
	free(r);
	__atomic_sub_fetch(&resolve_count, 1, __ATOMIC_RELEASE);
}

/* resolve_mu held: takes a place for a lookup of use under the cap and
 * its share. Returns 0, or RAFTLOCK_ELIMIT with why (why_len bytes)
 * naming the cap that refused. */
static int resolve_reserve(const char *host, enum resolve_use use, char *why, size_t why_len)
{
	bool share_full = use == RESOLVE_ONE_OFF && resolve_one_off >= RESOLVE_EXCHANGE_MAX;
	if (share_full || resolve_running >= RESOLVE_MAX) {
		snprintf(why, why_len,
			 "name lookup of '%s' not started: %s %d lookups under way (the resolver "
			 "does not answer?)",
			 host, share_full ? "status calls have their" : "the process has its",
			 share_full ? RESOLVE_EXCHANGE_MAX : RESOLVE_MAX);
		return RAFTLOCK_ELIMIT;
	}
	resolve_running++;
	if (use == RESOLVE_ONE_OFF)
		resolve_one_off++;
	return 0;
}

/* resolve_mu held. */
static void resolve_release(enum resolve_use use)
{
	resolve_running--;
	if (use == RESOLVE_ONE_OFF)
		resolve_one_off--;
}

/* resolve_mu held. */
static void resolve_link(struct resolve *r)
{
	r->prev = NULL;
	r->next = resolve_under_way;
	if (r->next != NULL)
		r->next->prev = r;
	resolve_under_way = r;
}

/* resolve_mu held. */
static void resolve_unlink(struct resolve *r)
{
	if (r->prev != NULL)
		r->prev->next = r->next;
	else
		resolve_under_way = r->next;
	if (r->next != NULL)
		r->next->prev = r->prev;
	r->prev = r->next = NULL;
}

/* resolve_mu held: the lookup of host and port by fn whose thread runs,
 * with a reference more for the caller, or NULL. Its thread's reference
 * keeps it while it is listed. */
static struct resolve *resolve_join(const char *host, const char *port, resolve_fn fn)
{
	for (struct resolve *r = resolve_under_way; r != NULL; r = r->next) {
		if (r->fn == fn && strcmp(r->host, host) == 0 && strcmp(r->port, port) == 0) {
			__atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED);
			return r;
		}
	}
	return NULL;
}

static void *resolve_main(void *arg)
{
	struct resolve *r = arg;
	struct addrinfo *res = NULL;
	int gai = r->fn(r->host, r->port, &resolve_hints, &res);
	r->gai_errno = errno;
	r->gai = gai;
	r->res = gai == 0 ? res : NULL;
	/* an owner that comes from now on starts a lookup of its own: this
	 * answer may already be old by the time it asks */
	pthread_mutex_lock(&resolve_mu);
	resolve_unlink(r);
	resolve_release(r->use);
	pthread_mutex_unlock(&resolve_mu);
	__atomic_store_n(&r->done, true, __ATOMIC_RELEASE);
	uint64_t one = 1;
	ssize_t w = write(r->fd, &one, sizeof one);
	(void)w; /* an eventfd written once cannot be full */
	resolve_unref(r);
	return NULL;
}

/* Starts r's thread with every signal blocked (a new thread inherits its
 * creator's mask); the caller's mask is as it was after. */
static int resolve_spawn(struct resolve *r)
{
	pthread_attr_t attr;
	if (pthread_attr_init(&attr) != 0)
		return -1;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	sigset_t all, caller;
	sigfillset(&all);
	int e = pthread_sigmask(SIG_SETMASK, &all, &caller);
	if (e == 0) {
		pthread_t thread;
		e = pthread_create(&thread, &attr, resolve_main, r);
		pthread_sigmask(SIG_SETMASK, &caller, NULL);
	}
	pthread_attr_destroy(&attr);
	return e;
}

/* resolve_mu held: a new lookup, its thread started and listed. */
static int resolve_new(const char *host, const char *port, resolve_fn fn, enum resolve_use use,
		       struct resolve **out, char *why, size_t why_len)
{
	int rv = resolve_reserve(host, use, why, why_len);
	if (rv != 0)
		return rv;
	__atomic_add_fetch(&resolve_count, 1, __ATOMIC_RELAXED);
	struct resolve *r = calloc(1, sizeof *r);
	if (r == NULL)
		goto err_count;
	r->refs = 2;
	r->fn = fn;
	r->use = use;
	r->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	r->host = strdup(host);
	r->port = strdup(port);
	if (r->fd < 0 || r->host == NULL || r->port == NULL)
		goto err_free;
	resolve_link(r); /* before its thread can unlink it */
	if (resolve_spawn(r) != 0) {
		resolve_unlink(r);
		goto err_free;
	}
	*out = r;
	return 0;

err_free:
	if (r->fd >= 0)
		close(r->fd);
	free(r->host);
	free(r->port);
	free(r);
err_count:
	__atomic_sub_fetch(&resolve_count, 1, __ATOMIC_RELEASE);
	resolve_release(use);
	return RAFTLOCK_ENOMEM;
}

int resolve_start(const char *host, const char *port, resolve_fn fn, enum resolve_use use,
		  struct resolve **out, char *why, size_t why_len)
{
	if (fn == NULL)
		fn = getaddrinfo;
	pthread_once(&resolve_fork_once, resolve_watch_forks);
	/* held while a lookup starts, so that two owners of one name never
	 * start two */
	pthread_mutex_lock(&resolve_mu);
	struct resolve *r = resolve_join(host, port, fn);
	int rv = 0;
	if (r != NULL)
		*out = r;
	else
		rv = resolve_new(host, port, fn, use, out, why, why_len);
	pthread_mutex_unlock(&resolve_mu);
	return rv;
}

int resolve_fd(const struct resolve *r)
{
	return r->fd;
}

int resolve_answer(const struct resolve *r, const struct addrinfo **res, char *why, size_t why_len)
{
	if (!__atomic_load_n(&r->done, __ATOMIC_ACQUIRE))
		return 1;
	if (r->res != NULL) {
		*res = r->res;
		return 0;
	}
	if (r->gai == EAI_MEMORY)
		return RAFTLOCK_ENOMEM;
	const char *reason = r->gai == 0            ? "no address"
			     : r->gai == EAI_SYSTEM ? strerror(r->gai_errno)
						    : gai_strerror(r->gai);
	snprintf(why, why_len, "name lookup of '%s' failed: %s", r->host, reason);
	return RAFTLOCK_ECONNECTION;
}

void resolve_drop(struct resolve *r)
{
	if (r != NULL)
		resolve_unref(r);
}

unsigned resolve_live(void)
{
	return __atomic_load_n(&resolve_count, __ATOMIC_ACQUIRE);
}
