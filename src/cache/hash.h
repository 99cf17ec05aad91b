/* The cache's key hash (hash.c). Private to src/cache. */
#ifndef PE_CACHE_HASH_H
#define PE_CACHE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* A 64-bit hash of len bytes of key under seed. */
uint64_t pe_cache_hash(uint64_t seed, const void *key, size_t len);
/* A seed for one cache: salt (its address) mixed with the monotonic clock. */
uint64_t pe_cache_seed(const void *salt);

#endif
