/*
 * introspect.h: the read side of the API (status, locks, sessions, token
 * checks): requests that change nothing, and the conversion of their
 * answers into the public structs of raftlock.h, which the caller frees
 * with the matching *_free function. Everything is in raftlock.h; this
 * header only names the file's concern.
 */
#ifndef RAFTLOCK_INTROSPECT_H
#define RAFTLOCK_INTROSPECT_H

#include "raftlock.h"

#endif
