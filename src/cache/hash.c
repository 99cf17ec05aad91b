/* The cache's key hash (hash.h): 16 bytes per step folded through a 64x64->128 multiply
 * (wyhash's construction), keyed by a per-cache seed so that keys a client picks cannot be made
 * to collide on purpose. Pure functions; lru.c owns the table they index. */
#include "cache/hash.h"

#include <string.h>
#include <time.h>

static uint64_t mix(uint64_t a, uint64_t b)
{
	__extension__ unsigned __int128 r = (unsigned __int128)a * b;
	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static uint64_t read64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

#define K0 0xa0761d6478bd642fULL
#define K1 0xe7037ed1a0b428dbULL
#define K2 0x8ebc6af09c88c6e3ULL

/* The tail is zero-padded and the length is mixed in last, so keys that differ only in trailing
 * zeros differ. */
uint64_t pe_cache_hash(uint64_t seed, const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = seed ^ K0;
	size_t n = len;
	for (; n >= 16; n -= 16, p += 16)
		h = mix(read64(p) ^ K1, read64(p + 8) ^ h);
	if (n > 0) {
		unsigned char tail[16] = {0};
		memcpy(tail, p, n);
		h = mix(read64(tail) ^ K1, read64(tail + 8) ^ h);
	}
	return mix(h ^ K2, (uint64_t)len ^ K1);
}

uint64_t pe_cache_seed(const void *salt)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return mix((uint64_t)(uintptr_t)salt ^ K2, (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ K0);
}
