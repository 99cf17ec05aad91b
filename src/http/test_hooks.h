/* Points where a test can hold the daemon still (test_hooks.c). They do something only in the
 * test build, build/posencd-hooks, whose test_hooks.o is compiled with -DPE_TEST_HOOKS; in
 * posencd they return at once and nothing reads the environment for them. */
#ifndef PE_HTTP_TEST_HOOKS_H
#define PE_HTTP_TEST_HOOKS_H

#include <stddef.h>

/* A pooled table job with this cache key, before it computes. */
void pe_hook_job_gate(const char *key, size_t keylen);

/* A streamed answer's job, after its first block went to the request that made it. */
void pe_hook_stream_gate(const char *key, size_t keylen);

/* A learned-table write or delete, before it reaches the store. */
void pe_hook_write_gate(void);

#endif
