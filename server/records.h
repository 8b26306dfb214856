/*
 * records.h: small edits of stored records (LockRecord, SessionRecord).
 *
 * Records come from the store with every part malloc'd (see store.h); these
 * functions grow and shrink their repeated fields in the same way, so the
 * record is always freed with its free_unpacked(). Out of memory aborts the
 * server (log_fatal): a half-applied command is never an option.
 */
#ifndef RAFTLOCK_RECORDS_H
#define RAFTLOCK_RECORDS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "raftlock.pb-c.h"

char *records_strdup(const char *s);

/* Replaces a string field of a record (which may hold protobuf-c's shared
 * empty default, never to be freed). */
void records_set_string(char **field, const char *value);

/* Replaces a bytes field of a record with a copy of value (empty: none). */
void records_set_bytes(ProtobufCBinaryData *field, const ProtobufCBinaryData *value);

Raftlock__LockRecord *records_new_lock(const char *name, Raftlock__LockKind kind, uint32_t limit);
Raftlock__SessionRecord *records_new_session(const Raftlock__Owner *owner);

/* Holders: appended zeroed (count 0); removal keeps the order. */
Raftlock__Holder *records_add_holder(Raftlock__LockRecord *lock);
void records_remove_holder(Raftlock__LockRecord *lock, size_t i);
Raftlock__Holder *records_find_holder(Raftlock__LockRecord *lock, uint64_t session, uint64_t owner);
ssize_t records_holder_index(const Raftlock__LockRecord *lock, uint64_t session, uint64_t owner);
uint64_t records_permits_held(const Raftlock__LockRecord *lock);

/* Waiters: FIFO, appended at the tail. */
Raftlock__Waiter *records_add_waiter(Raftlock__LockRecord *lock);
void records_remove_waiter(Raftlock__LockRecord *lock, size_t i);
ssize_t records_find_waiter(const Raftlock__LockRecord *lock, uint64_t session, uint64_t owner);

/* Whether the session holds or awaits the lock. */
bool records_session_on_lock(const Raftlock__LockRecord *lock, uint64_t session);

/* The session's list of lock names it holds or awaits, below feature level
 * FEATURES_SESSION_LOCK_INDEX: apply goes through session_locks.h, which
 * knows where the names are. */
bool records_has_name(const Raftlock__SessionRecord *sess, const char *name);
void records_add_name(Raftlock__SessionRecord *sess, const char *name);
void records_remove_name(Raftlock__SessionRecord *sess, const char *name);

/* The session's de-duplication table. */
const Raftlock__Outcome *records_find_outcome(const Raftlock__SessionRecord *sess, uint64_t seq);
/* Inserts or replaces the outcome of seq. A record created pending (a
 * queued acquire) in a session that acknowledges queued acquires
 * (acks_queued) is marked queued; replacing keeps the mark. */
void records_set_outcome(Raftlock__SessionRecord *sess, uint64_t seq, const Raftlock__Result *res,
			 bool pending);
/* The parts of records_set_outcome(): a new record of seq, and its result
 * (res, whose tokens are copied) with pending. */
Raftlock__Outcome *records_new_outcome(uint64_t seq, bool queued);
void records_fill_outcome(Raftlock__Outcome *o, const Raftlock__Result *res, bool pending);
/* The client has learned the final outcome of the queued acquire seq:
 * its record becomes an ordinary one (pruned once below the mark). A
 * pending record stays as it is: nobody can have learned its outcome. */
void records_ack_outcome(Raftlock__SessionRecord *sess, uint64_t seq);
/* Drops outcomes of sequences below mark, except pending ones (a queued
 * acquire's outcome must survive until it is final) and queued ones not
 * acknowledged yet (the client's mark does not count them). */
void records_prune_outcomes(Raftlock__SessionRecord *sess, uint64_t mark);

#endif
