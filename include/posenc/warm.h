/* posenc warm blocks: a small reserve of memory faulted in before it is needed, so a large answer
 * written into memory new to the process does not wait for the kernel to clear its pages.
 *
 * Every page a process has never had is cleared by the kernel at its first write; on a VM whose
 * host takes back long-free guest memory (free page reporting) that first write also faults on
 * the host, and a fresh daemon's 4.3 MB JSON answer spent more time there than encoding it. A
 * struct pe_warm keeps blocks of the size the last answers asked for, already written once; a
 * first block of a buffer that has one (pe_buf_set_warm) is taken from it, and a filler thread,
 * which the caller runs at the lowest priority (pe_warm_run; this layer starts no thread), makes
 * the next one when a CPU is otherwise idle. Blocks sit at most `limit` bytes together; those not
 * taken for `idle_s` are given back, so an idle daemon holds none.
 *
 * Thread-safety: every function may be called from any thread; one thread runs pe_warm_run.
 * Ownership: a taken block is the taker's (free() it); the reserve owns the rest. */
#ifndef POSENC_WARM_H
#define POSENC_WARM_H

#include <stddef.h>
#include <stdint.h>

/* The smallest block the reserve serves: below it an answer's pages are few (and a buffer's
 * first block is not laid on huge pages). */
#define PE_WARM_MIN ((size_t)2 << 20)

struct pe_warm;
struct pe_warm_stats {
	size_t bytes, blocks;   /* held now (pe_mem_size of each) */
	uint64_t hits, misses;  /* takes served from the reserve; takes it could not serve */
	uint64_t made, dropped; /* blocks made; blocks given back unused (idle, or too small for the demand) */
};

/* A reserve of at most limit bytes whose blocks are given back after idle_s seconds without a take;
 * NULL when limit is below PE_WARM_MIN (no reserve: pe_warm_take of NULL takes nothing). */
struct pe_warm *pe_warm_new(size_t limit, double idle_s);
/* Frees the reserve and its blocks; pe_warm_run must have returned. NULL is fine. */
void pe_warm_free(struct pe_warm *w);
/* A block of at least `bytes` (pe_mem_size), 64-byte aligned, whose pages are written, from the
 * reserve: the smallest that fits, shrunk to `bytes`; NULL when none fits or bytes is outside
 * [PE_WARM_MIN, limit]. Either way the size is remembered as what the next block is made for,
 * and the filler is woken. */
void *pe_warm_take(struct pe_warm *w, size_t bytes);
/* One step of the filler, without waiting: gives back the blocks when idle_s have passed since
 * the last take, else one block too small for the latest demand when that makes room for it, else
 * makes one block of the latest demand when it fits within limit. 1 when it did something. */
int pe_warm_fill(struct pe_warm *w);
/* The filler: pe_warm_fill whenever there is something to do, else sleeps until a take or the
 * idle deadline; returns after pe_warm_stop (a block being made is finished first, stopping
 * between its 2 MiB steps). */
void pe_warm_run(struct pe_warm *w);
void pe_warm_stop(struct pe_warm *w);
void pe_warm_stats(struct pe_warm *w, struct pe_warm_stats *out);

#endif
