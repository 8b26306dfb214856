/*
 * auth.h: identities and what they may do (issue 11, item 3;
 * docs/GUARANTEES.md, authorization).
 *
 * With auth = on, every client connection is a named identity: the subject
 * CN of its client certificate (client-tls = mutual), or the name that the
 * node's auth-tokens file gives the SHA-256 of the bearer token it sent in
 * an AuthenticateRequest. Access rules (identity, prefix, permissions) live
 * in the replicated state (store.h, acls), changed by ACL_SET/ACL_DELETE
 * commands, so that every node decides alike and snapshots carry them.
 *
 * Rules only grant. An identity's permissions on a name are the union of
 * the permissions of its rules and of identity "*"'s rules whose prefix
 * starts the name ("" starts every name); no rule, no permission. The
 * identity named by auth-admin has every permission on every name (the
 * bootstrap admin: it creates the first rules).
 *
 * Decided by the node that serves the request, against its applied state
 * when the request arrives, before anything is proposed: a refusal changes
 * nothing. Loop thread only.
 */
#ifndef RAFTLOCK_AUTH_H
#define RAFTLOCK_AUTH_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

enum {
	AUTH_LOCK = RAFTLOCK__ACL_PERM__ACL_LOCK,   /* acquire, release, cancel */
	AUTH_READ = RAFTLOCK__ACL_PERM__ACL_READ,   /* read the lock; on "": all owners */
	AUTH_ADMIN = RAFTLOCK__ACL_PERM__ACL_ADMIN, /* rules; on "": others' sessions */
	AUTH_ALL = AUTH_LOCK | AUTH_READ | AUTH_ADMIN,
};

/* The identity whose rules apply to every authenticated identity. */
#define AUTH_ANYONE "*"

/* What a decision reads: the applied state through a read (or the
 * apply's write) transaction, and the bootstrap admin. */
struct auth_view {
	struct store *store;
	MDB_txn *txn;
	const char *root; /* auth-admin, or NULL / "" for none */
};

/* The permissions identity has on name (a mask of AUTH_*). An identity of
 * NULL or "" (not authenticated) has none. */
uint32_t auth_perms(const struct auth_view *v, const char *identity, const char *name);

/* Whether identity has every permission of perm on name. */
bool auth_allows(const struct auth_view *v, const char *identity, uint32_t perm, const char *name);

/* Disjoint name prefixes (none starts another), in name order. */
struct auth_ranges {
	char **v;
	size_t n;
};

/*
 * The names under prefix `within` ("" = every name) on which identity has
 * perm (one AUTH_* bit), as ranges: each name is covered by one of them
 * exactly when identity has perm on it and it starts with within. They
 * are the intersections of within with the prefixes of identity's rules
 * and of "*"'s that grant perm ({within} for the bootstrap admin; none
 * without an identity), those that a shorter one covers dropped: at most
 * as many as those rules. A walk of them in order visits names in name
 * order and only those (listings, reads.h). out owns its strings: free it
 * with auth_ranges_free(). Aborts on out of memory (server rule).
 */
void auth_ranges(const struct auth_view *v, const char *identity, uint32_t perm, const char *within,
		 struct auth_ranges *out);
void auth_ranges_free(struct auth_ranges *r);

/* "lock", "read" or "admin" for one bit; "none" for 0. */
const char *auth_perm_name(uint32_t perm);

/* The refusal's message: "identity 'alice' has no 'lock' on 'db/x'" (or
 * "... on every name" for ""). */
void auth_denied(char *buf, size_t len, const char *identity, uint32_t perm, const char *name);

/*
 * Whether identity may send env (a request other than STATUS and
 * AUTHENTICATE), at the node that serves it, before anything is proposed
 * or read. session is the session a mutation names (its sequence header),
 * 0 for the others. The rules:
 *   - without an identity nothing is allowed;
 *   - OPEN_SESSION, KEEPALIVE, LIST_LOCKS, LIST_SESSIONS, ACL_LIST: any
 *     identity (listings are filtered: reads.h);
 *   - ACQUIRE, RELEASE, CANCEL_WAIT: the session was opened by identity,
 *     and identity has lock on the name;
 *   - CLOSE_SESSION: the session was opened by identity, or identity has
 *     admin on every name ("");
 *   - GET_LOCK, CHECK_TOKEN: read on the name;
 *   - ACL_SET, ACL_DELETE: admin on the rule's prefix;
 *   - MEMBER_JOIN for id N: the identity member_cn(N) ("raftlock-node-N",
 *     the name of member N's certificate, member_cn.h), or admin on every
 *     name: a claim decides which node takes an added member's place, so
 *     anyone else's would keep that member out;
 *   - MEMBER_LIST: any identity (it says no more than STATUS);
 *   - any other request (the membership and snapshot commands to come):
 *     admin on every name.
 * A session that does not exist passes (the state machine answers
 * ESESSION). Returns 0, or RAFTLOCK_EPERM with the reason in msg.
 */
int auth_check_request(const struct auth_view *v, const char *identity,
		       const Raftlock__Envelope *env, uint64_t session, char *msg, size_t len);

/* Whether identity may see the owners of session rec (introspection): its
 * own sessions, or read on every name. */
bool auth_sees_session(const struct auth_view *v, const char *identity,
		       const Raftlock__SessionRecord *rec);

/* ----------------------------------------------------------- tokens -- */

#define AUTH_DIGEST_SIZE 32 /* SHA-256 */

struct auth_token {
	char *name;
	uint8_t digest[AUTH_DIGEST_SIZE];
	unsigned line; /* of the file: an error names it */
};

struct auth_tokens {
	struct auth_token *v;
	size_t n;
};

/*
 * Reads an auth-tokens file: one "NAME SHA256HEX" per line (the hex of the
 * token's SHA-256, 64 digits), blank lines and lines starting with '#'
 * ignored. Names are at most RAFTLOCK_NAME_MAX bytes without blanks, not
 * "*", each at most once. The file is read by line_file_read: a line above
 * LINE_FILE_MAX bytes, a NUL byte or a read error fails the load too.
 * Returns 0, or RAFTLOCK_ECONFIG with the file and line in err (t then
 * holds nothing). Free with auth_tokens_free.
 */
int auth_tokens_load(struct auth_tokens *t, const char *path, char *err, size_t errlen);
void auth_tokens_free(struct auth_tokens *t);

/* The name whose digest is SHA-256(token), or NULL. Compares with every
 * entry in constant time (CRYPTO_memcmp), whichever matches. */
const char *auth_tokens_check(const struct auth_tokens *t, const void *token, size_t len);

/* Writes the lowercase hex SHA-256 of token (65 bytes with the NUL). */
void auth_digest_hex(const void *token, size_t len, char hex[2 * AUTH_DIGEST_SIZE + 1]);

#endif
