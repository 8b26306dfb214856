/*
 * id_sort.h: a sort of records keyed by a 64-bit id (their first word),
 * for the checks of a load that meet millions of rows with the sessions
 * in id order (party_sessions.h, nonce_sessions.h).
 *
 * By the ids' bytes, lowest first, skipping a byte every id has alike
 * (ids are small: most of their bytes are 0): a million ids in about
 * 20 ms where qsort() took 150, a quarter of a whole load. Stable: the
 * records of one id keep their order.
 */
#ifndef RAFTLOCK_ID_SORT_H
#define RAFTLOCK_ID_SORT_H

#include <stddef.h>
#include <stdint.h>

/* Sorts the n records of `words` words each at v (words 1 or more) by
 * their first word, increasing. 0, or RAFTLOCK_ENOMEM (v unchanged). */
int id_sort(uint64_t *v, size_t n, size_t words);

#endif
