/*
 * limit_message.h: the words for a refusal by one of the state machine's limits
 * (Result.limit, fsm.c), so that the client's message names the limit, its
 * value and the setting that moves it. No I/O.
 */
#ifndef RAFTLOCK_LIMIT_MESSAGE_H
#define RAFTLOCK_LIMIT_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "raftlock.pb-c.h"

/*
 * Writes into buf (len bytes, always terminated) what refused res, a
 * RAFTLOCK_ELIMIT result: "identity 'alice' holds 3 sessions, the limit
 * (max-sessions-per-identity)". identity is the requester's (NULL or "" if
 * none). Returns false, leaving buf alone, when res names no limit.
 */
bool limit_message(const Raftlock__Result *res, const char *identity, char *buf, size_t len);

#endif
