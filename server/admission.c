/* admission.c: see admission.h. */
#include "admission.h"

#include <netinet/in.h>
#include <string.h>

/* What one address holds. */
struct admission_count {
	unsigned open;     /* ADMISSION_OPEN */
	unsigned refusing; /* ADMISSION_REFUSE */
};

void admission_init(struct admission *a, unsigned max_per_address)
{
	memset(a, 0, sizeof *a);
	a->max_per_address = max_per_address;
	idmap_init(&a->counts, sizeof(struct admission_count));
}

void admission_close(struct admission *a)
{
	idmap_close(&a->counts);
}

/* FNV-1a over the address bytes, never 0 (0 means "no key"); a collision
 * of two hosts only makes them share one limit. */
static uint64_t hash_bytes(const uint8_t *b, size_t n, uint8_t family)
{
	uint64_t h = 1469598103934665603ull ^ family;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h == 0 ? 1 : h;
}

uint64_t admission_key(const struct sockaddr *peer)
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (peer->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)peer;
		return hash_bytes((const uint8_t *)&in->sin_addr, 4, AF_INET);
	}
	if (peer->sa_family == AF_INET6) {
		const uint8_t *b = ((const struct sockaddr_in6 *)peer)->sin6_addr.s6_addr;
		if (memcmp(b, v4mapped, sizeof v4mapped) == 0)
			return hash_bytes(b + 12, 4, AF_INET);
		return hash_bytes(b, 16, AF_INET6);
	}
	return 0;
}

enum admission_verdict admission_enter(struct admission *a, uint64_t key)
{
	if (key == 0)
		return ADMISSION_OPEN;
	struct admission_count *n = idmap_put(&a->counts, key);
	if (n == NULL)
		return ADMISSION_NO_MEMORY;
	if (a->max_per_address == 0 || n->open < a->max_per_address) {
		n->open++;
		return ADMISSION_OPEN;
	}
	a->refused++;
	if (n->refusing >= ADMISSION_MAX_REFUSING)
		return ADMISSION_DROP;
	n->refusing++;
	return ADMISSION_REFUSE;
}

void admission_leave(struct admission *a, uint64_t key, enum admission_verdict v)
{
	struct admission_count *n = key == 0 ? NULL : idmap_get(&a->counts, key);
	if (n == NULL)
		return;
	if (v == ADMISSION_OPEN && n->open > 0)
		n->open--;
	else if (v == ADMISSION_REFUSE && n->refusing > 0)
		n->refusing--;
	if (n->open == 0 && n->refusing == 0)
		idmap_del(&a->counts, key);
}

bool admission_frame_overdue(uint64_t started_ms, uint64_t now_ms, unsigned timeout_ms)
{
	return timeout_ms != 0 && started_ms != 0 && now_ms - started_ms >= timeout_ms;
}
