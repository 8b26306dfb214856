/* cli_fault.c: see cli_fault.h. */
#include "cli_fault.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CLI_FAULT_POLL_MS 10

static bool late_revoke; /* "late-revoke", set before any event comes */

/* Shared with the I/O thread (cli_fault_hold_back). */
static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;
static bool holding_back = true; /* with late_revoke: until the command's exit is handled */
static bool revoked_late;        /* a revocation was held back */

void cli_fault_init(void)
{
	const char *v = getenv("RAFTLOCK_TEST_FAULT");
	if (v == NULL)
		return;
	late_revoke = strstr(v, "late-revoke") != NULL;
	if (late_revoke)
		fprintf(stderr, "raftlock: test faults injected: %s\n", v);
}

bool cli_fault_hold_back(enum raftlock_lock_event ev)
{
	if (!late_revoke || ev != RAFTLOCK_LOCK_REVOKED)
		return false;
	pthread_mutex_lock(&fault_mu);
	bool held = holding_back;
	revoked_late = revoked_late || held;
	pthread_mutex_unlock(&fault_mu);
	return held;
}

bool cli_fault_revoke_late(void)
{
	if (!late_revoke)
		return false;
	for (int waited = 0;; waited += CLI_FAULT_POLL_MS) {
		pthread_mutex_lock(&fault_mu);
		bool came = revoked_late;
		bool done = came || waited >= CLI_FAULT_WAIT_MS;
		if (done)
			holding_back = false; /* from now on an event is recorded as it comes */
		pthread_mutex_unlock(&fault_mu);
		if (done)
			return came;
		struct timespec ts = {.tv_sec = 0, .tv_nsec = CLI_FAULT_POLL_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
}
