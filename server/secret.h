/*
 * secret.h: session capability secrets (GUARANTEES rule 14).
 *
 * A client draws a session's secret from the kernel's random source and
 * sends it with the session's open; the leader keeps only its SHA-256 in
 * the replicated state (OpenSession.secret_digest, SessionRecord), and
 * checks every keepalive and mutating request of the session against it
 * before anything reaches the log. The secret itself is never stored,
 * logged or answered: these functions are the only ones that read it.
 */
#ifndef RAFTLOCK_SECRET_H
#define RAFTLOCK_SECRET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#define SECRET_DIGEST_LEN 32 /* SHA-256 */

/* Whether a presented secret has an acceptable length
 * (RAFTLOCK_SECRET_MIN..RAFTLOCK_SECRET_MAX bytes). */
bool secret_valid(const ProtobufCBinaryData *secret);

/* out = SHA-256(secret). Aborts the server should libcrypto fail. */
void secret_digest(const ProtobufCBinaryData *secret, uint8_t out[SECRET_DIGEST_LEN]);

/*
 * The refusal, before any session is looked at, of a request framed by
 * `protocol` that presents `secret` (a session open's when opening, else
 * its sequence header's): RAFTLOCK_EPROTO for a sender older than client
 * protocol 3 that brings none (msg says to upgrade the client), and for a
 * session open whose secret is not of a valid length; 0 otherwise. msg
 * gets at most len bytes, NUL-terminated, and never the secret.
 */
int secret_refusal(uint32_t protocol, const ProtobufCBinaryData *secret, bool opening, char *msg,
		   size_t len);

/*
 * Whether secret is the one whose digest is stored: false for a secret
 * of invalid length and for a stored digest that is not SECRET_DIGEST_LEN
 * bytes (a session opened before secrets). The digests are compared in
 * constant time.
 */
bool secret_matches(const ProtobufCBinaryData *secret, const uint8_t *digest, size_t digest_len);

#endif
