/*
 * election.h: leader election on the lock and watch layers (client.h):
 * raftlock_campaign(), raftlock_proclaim(), raftlock_resign() are a lock
 * handle whose grants publish a value (lock_set_value, lock_proclaim);
 * raftlock_observe() is a watch of the one name, folded into the
 * (leader, value, token) it says, and reported when that changes.
 */
#ifndef RAFTLOCK_CLIENT_ELECTION_H
#define RAFTLOCK_CLIENT_ELECTION_H

#include "raftlock.h"

#endif
