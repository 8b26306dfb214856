/*
 * nonce_sessions.h: whether the nonces of an image being loaded
 * (store_load_from()) and its sessions agree.
 *
 * Apply writes a nonce's row (nonce -> session) with the session that
 * opens with it, which keeps the nonce in its record, and deletes the
 * row, by the record's nonce, when the session ends: so each row names a
 * session of the image whose record has that nonce, and each session with
 * a nonce has its row. A row of no session (or of one that has another
 * nonce) would never be deleted, and a retried open with its nonce would
 * name a session that is not there; a session without its row would be
 * opened twice by a retried open. A load refuses such an image, naming
 * the nonce and the session (store_load_error()).
 *
 * Kept cheap for images of millions of sessions: each row is noted as it
 * loads, the notes sorted by session once (id_sort.h) and met with the
 * sessions in their table's order, which the load walks anyway.
 *
 * Runs inside the load's write transaction.
 */
#ifndef RAFTLOCK_NONCE_SESSIONS_H
#define RAFTLOCK_NONCE_SESSIONS_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftlock.pb-c.h"
#include "store.h"

struct nonce_sessions {
	uint64_t *rows; /* (session, nonce) pairs; once sorted, by session */
	size_t n;       /* pairs */
	size_t cap;     /* words of rows (two a pair) */
	bool failed;    /* out of memory while noting */
	size_t met;     /* rows[0..met) are of sessions met */
};

void nonce_sessions_init(struct nonce_sessions *ns);
void nonce_sessions_free(struct nonce_sessions *ns);

/* Notes a row of the nonces table as it is loaded (key and val borrowed
 * for the call). A row not of 8 and 8 bytes is not noted: the load
 * refuses it for its sizes (store_check_misshapen()). */
void nonce_sessions_add(struct nonce_sessions *ns, const MDB_val *key, const MDB_val *val);

/* Once every row is loaded, before the first nonce_sessions_meet(): 0, or
 * RAFTLOCK_ENOMEM (a note or the sort ran out of memory). */
int nonce_sessions_sort(struct nonce_sessions *ns);

/* The image's sessions, each once, in increasing id order: 0, or
 * RAFTLOCK_EDATA (store_load_error() says which) when a row names a
 * session below rec's that was not met, when rec has a nonce and no row
 * of it, or a row that is not of its nonce. */
int nonce_sessions_meet(struct nonce_sessions *ns, struct store *s,
			const Raftlock__SessionRecord *rec);

/* After the last session: 0, or RAFTLOCK_EDATA when a row names a session
 * that was not met, as nonce_sessions_meet(). */
int nonce_sessions_end(struct nonce_sessions *ns, struct store *s);

#endif
