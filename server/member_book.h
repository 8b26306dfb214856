/*
 * member_book.h: the replicated record of membership kept in Meta (the
 * state machine applies it; the leader and the STATUS/LIST answers read
 * it). Two facts live there:
 *   - max_member_id: the highest member id ever added or removed. An id at
 *     or below it is never added again, so a machine that lost its data
 *     directory cannot take part again under its old identity.
 *   - one MemberRecord per member added at run time and not removed: its
 *     addresses (the client address redirects clients to a leader) and the
 *     incarnation of the data directory that first started under the id.
 *   - from feature level 11 (FEATURES_REMOVED_MEMBERS), the ids removed,
 *     so that a remove of an id never used is told from a retried one.
 * Members of the bootstrap configuration (founding members) are recorded
 * by the first leader that knows their addresses (its --member list), so
 * that a member that joined later can redirect clients to them; they never
 * join. Until then, the leader refuses to add an id that is in the raft
 * configuration without a record.
 *
 * Pure functions on a decoded Meta: no clock, no I/O. Every outcome is a
 * status (0 or a negative RAFTLOCK_E* code), never a failed apply.
 */
#ifndef RAFTLOCK_MEMBER_BOOK_H
#define RAFTLOCK_MEMBER_BOOK_H

#include <stdbool.h>
#include <stdint.h>

#include "raftlock.pb-c.h"

/* The record of id, or NULL (borrowed from m). */
const Raftlock__MemberRecord *member_book_find(const Raftlock__Meta *m, uint64_t id);

/*
 * MEMBER_ADD: records the member and raises max_member_id. 0 when added,
 * or when the same id is recorded with the same addresses (a retried add);
 * RAFTLOCK_EINVAL when the id is 0, an address is empty or too long, or
 * the id was used before (at or below max_member_id otherwise). A founding
 * record (op->founding, proposed by the leader for a member of the
 * bootstrap configuration) is not held to max_member_id.
 */
int member_book_add(Raftlock__Meta *m, const Raftlock__MemberAdd *op);

/* MEMBER_REMOVE: forgets the record (if any) and raises max_member_id to
 * the id, so it is never added again; from the level FEATURES_REMOVED_MEMBERS
 * (as m records it) notes the id among the removed. Always 0 (EINVAL for
 * id 0). */
int member_book_remove(Raftlock__Meta *m, const Raftlock__MemberRemove *op);

/* The apply that raises the cluster to FEATURES_REMOVED_MEMBERS: the ids
 * used until then (at or below max_member_id) may have been removed
 * unnoted. */
void member_book_note_removals(Raftlock__Meta *m);

/*
 * Whether id may be a member removed before, for a remove of an id that
 * neither the raft configuration nor the book has (the leader answers a
 * retry 0, anything else "no member N"): from FEATURES_REMOVED_MEMBERS an
 * id noted removed or used before removals were noted; below it, any id
 * used (0 < id <= max_member_id), as the book cannot tell.
 */
bool member_book_removed(const Raftlock__Meta *m, uint64_t id);

/* Forgets every record, keeping max_member_id: the book of a cluster
 * restored from a backup image (feature_level.h, FEATURES_RESTORED_BOOK). */
void member_book_forget(Raftlock__Meta *m);

/*
 * MEMBER_JOIN: a node's first start under a recorded id. 0 when the record
 * had no incarnation yet (now set) or has this one (a retry);
 * RAFTLOCK_ENOTFOUND when the id has no record (never added, or removed);
 * RAFTLOCK_EPERM when another incarnation already started under it, or it
 * is a founding member (the node lost its data: it must come back under a
 * new id).
 */
int member_book_join(Raftlock__Meta *m, const Raftlock__MemberJoin *op);

#endif
