/* secret.c: see secret.h. */
#include "secret.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "log.h"
#include "raftlock.h"

bool secret_valid(const ProtobufCBinaryData *secret)
{
	return secret->len >= RAFTLOCK_SECRET_MIN && secret->len <= RAFTLOCK_SECRET_MAX;
}

void secret_digest(const ProtobufCBinaryData *secret, uint8_t out[SECRET_DIGEST_LEN])
{
	unsigned n = 0;
	if (EVP_Digest(secret->data, secret->len, out, &n, EVP_sha256(), NULL) != 1 ||
	    n != SECRET_DIGEST_LEN)
		log_fatal("SHA-256 failed (out of memory?)");
}

bool secret_matches(const ProtobufCBinaryData *secret, const uint8_t *digest, size_t digest_len)
{
	if (!secret_valid(secret) || digest_len != SECRET_DIGEST_LEN)
		return false;
	uint8_t presented[SECRET_DIGEST_LEN];
	secret_digest(secret, presented);
	bool same = CRYPTO_memcmp(presented, digest, SECRET_DIGEST_LEN) == 0;
	OPENSSL_cleanse(presented, sizeof presented);
	return same;
}
