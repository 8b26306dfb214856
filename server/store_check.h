/*
 * store_check.h: whether an image loaded into the store
 * (store_load_from()) is one this build could have written, past its
 * sums: its records have the sizes the store reads them with, its
 * format agrees with the level its state records, and each session
 * agrees with its rows by (session, seq), its lease, its names
 * (session_locks.h), the holders and waiters of the locks
 * (party_sessions.h), its nonce (nonce_sessions.h) and its queued lock
 * sets
 * (sets_check.h). A load refuses an image that fails, saying why
 * (store_load_refuse(), store_load_error()), rather than stop the node
 * later, as apply would.
 *
 * Runs inside the load's write transaction.
 */
#ifndef RAFTLOCK_STORE_CHECK_H
#define RAFTLOCK_STORE_CHECK_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>

#include "nonce_sessions.h"
#include "sets_check.h"
#include "store.h"

/* The meta record's key (store.c's): store_check_loaded() reads that
 * record itself, as store_get_meta() stops the node on one that does not
 * decode. Declared here, not in store.h, as only the two files use it. */
extern MDB_val store_meta_key;

/* An LMDB call's rc where no failure is expected: one stops the node,
 * naming what failed (store.c's calls and this file's). */
void store_check_lmdb(int rc, const char *what);

/* Why a record of an image has not the sizes the store reads it with
 * (the layout of store.h), or is not under the key apply would find it
 * by, into why (len bytes): nonces and leases by an 8-byte id, of 8 and
 * 12 bytes; access rules of 4 bytes, by an identity and a prefix of at
 * most RAFTLOCK_NAME_MAX bytes each; a lock under its name. False when
 * it has them. */
bool store_check_misshapen(const struct store *s, MDB_dbi dbi, const MDB_val *key,
			   const MDB_val *val, char *why, size_t len);

/* The checks of a load past the records' own: no record was misshapen
 * (misshapen: store_check_misshapen()'s first, or ""), the image's format
 * agrees with the level its state records (its meta record decodes),
 * each lock record can be read, each session agrees with its rows by
 * (session, seq), the holders and waiters of the locks with the
 * sessions, the queued lock sets with their waiters (lock_sets has read
 * the locks loaded), and the nonces with the sessions (nonces has noted
 * the rows loaded). Counts every session in the identities index, which
 * must be empty. 0, RAFTLOCK_EDATA (store_load_error() says why) or
 * RAFTLOCK_ENOMEM. */
int store_check_loaded(struct store *s, MDB_txn *txn, bool seq_tables, const char *misshapen,
		       struct sets_check *lock_sets, struct nonce_sessions *nonces);

#endif
