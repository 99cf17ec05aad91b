/* glibc's thread cache for posencd's small allocations (alloc.c): a bigger cache, set through
 * GLIBC_TUNABLES at start, and a calloc that takes from it. */
#ifndef PE_DAEMON_ALLOC_H
#define PE_DAEMON_ALLOC_H

#include <stddef.h>

/* Freed chunks glibc keeps per size and thread (its default: 7). */
#define PE_ALLOC_TCACHE_COUNT 32

/* The GLIBC_TUNABLES value posencd starts with, from the current one (NULL: unset) into out (cap
 * bytes): 1 when written, 0 when current sets the thread cache's count already (kept as it is),
 * -1 when it does not fit. */
int pe_alloc_tunables(const char *current, char *out, size_t cap);

/* Start posencd again with that value, once, before anything else in main (returns only when
 * that is not done: set already, under AddressSanitizer, or the exec failed). */
void pe_alloc_tune_exec(char **argv);

#endif
