/* posenc memory: the byte budget that every response being built or sent is counted against,
 * the allocator's view of a block's size, and struct pe_buf, the bounded growable buffer every
 * writer appends to.
 *
 * Thread-safety: a struct pe_budget is shared by threads (take, charge and give are atomics on
 * one counter and never block; only pe_budget_take_wait sleeps, and give() wakes it). A struct
 * pe_buf belongs to one thread at a time; its budget may be shared. Ownership: a buffer owns its
 * block (unless borrowed, pe_buf_use) until pe_buf_steal/pe_buf_take hands it to the caller with
 * its reservation. */
#ifndef POSENC_BUDGET_H
#define POSENC_BUDGET_H

#include <stddef.h>
#include <stdint.h>
#include "posenc/err.h"

struct pe_warm;

/* ---- byte budget ----
 * A count of bytes in use against a limit, shared by threads. take(), charge() and give() are
 * atomics and never block (give() takes a lock only to wake a waiter); pe_budget_take_wait is the
 * one call that sleeps, until room is given back or its deadline. take() admits a reservation
 * only while the total stays within the limit, else it fails with PE_EBUSY and counts a refusal; charge() adds bytes that already exist (memory handed over from elsewhere),
 * even past the limit; give() returns either. The daemon uses one for every response being built
 * or sent (the cache's own bytes are bounded separately, by cache_bytes). A NULL budget admits
 * everything and counts nothing, so every function below accepts NULL. */
struct pe_budget;
struct pe_budget_stats {
	size_t used, limit;
	uint64_t refused;
	size_t waiting; /* bytes the one waiter of pe_budget_take_wait wants; 0: none waits */
};
struct pe_budget *pe_budget_new(size_t limit);
void pe_budget_free(struct pe_budget *b);
/* 0; PE_EBUSY when it does not fit now; PE_ETOOBIG when n exceeds the whole limit (never fits). */
int pe_budget_take(struct pe_budget *b, size_t n);
/* take() that counts no refusal: for a caller with another way to go when the bytes do not fit
 * (nothing is refused to a client). */
int pe_budget_try_take(struct pe_budget *b, size_t n);
/* take(), or when it does not fit now, wait for room until `until` (CLOCK_MONOTONIC seconds, as
 * pe_monotonic gives): one caller at a time waits, and while it does the bytes it wants are kept
 * back from every other take of PE_BUDGET_SMALL_TAKE bytes or more (smaller ones pass: they are
 * given back soon, and a small table's answer is not refused for a large job's sake); a second
 * caller that would wait gets PE_EBUSY at once. For a job
 * that already holds memory (its body) and needs more: two such jobs would otherwise refuse each
 * other. give() wakes the waiter. A waiter also stops when pe_cancelled() says so (its thread's
 * deadline, shutdown), with that code (PE_ETIMEOUT, PE_EDRAINING). */
int pe_budget_take_wait(struct pe_budget *b, size_t n, double until);
#define PE_BUDGET_SMALL_TAKE ((size_t)64 * 1024)
/* A share: n bytes taken from parent at once (pe_budget_take_wait until `until`), as a budget of
 * its own limited to n, for one job's blocks. A take past the share spills to the parent (a plain
 * take there), so a share never refuses what the parent alone would have admitted. NULL with *rc
 * PE_EBUSY / PE_ETOOBIG / PE_ENOMEM; NULL with *rc 0 when parent is NULL (no budget). */
struct pe_budget *pe_budget_share_open(struct pe_budget *parent, size_t n, double until, int *rc);
/* n bytes of a block reserved on the share now held on the parent (an answer outliving the job). */
void pe_budget_share_hand_over(struct pe_budget *s, size_t n);
/* Gives the share's bytes back to the parent and frees it; its blocks must all be given back or
 * handed over first. NULL is fine. */
void pe_budget_share_close(struct pe_budget *s);
void pe_budget_charge(struct pe_budget *b, size_t n);
void pe_budget_give(struct pe_budget *b, size_t n);
void pe_budget_stats(const struct pe_budget *b, struct pe_budget_stats *out);
/* Bytes the allocator actually holds for a block from malloc (its usable size; 0 for NULL). */
size_t pe_mem_size(const void *p);
/* The most pe_mem_size can be for a block malloc'd, or realloc'd last, to n bytes, whichever block
 * the allocator picked: what a figure told to clients counts, so it is the same for every request
 * of that size. */
size_t pe_mem_bound(size_t n);
/* Called after each block a thread keeps (a cached body): every few calls, moves the calling
 * thread's arena's grown part a block's worth past its top, so the next small blocks kept do not
 * each grow it by a system call (budget.c says why). Any thread; costs no memory. */
void pe_mem_keep_headroom(void);
/* malloc(n) with a reservation of exactly pe_mem_size(block) on b; NULL with *rc PE_EBUSY (the
 * budget is full), PE_ETOOBIG (n is over its limit) or PE_ENOMEM. Free it with
 * pe_budget_free_block(b, block). */
void *pe_budget_malloc(struct pe_budget *b, size_t n, int *rc);
void pe_budget_free_block(struct pe_budget *b, void *p); /* gives back pe_mem_size(p); NULL is fine */

/* ---- bounded buffer ----
 * With a budget (pe_buf_set_budget, before anything is written), the buffer holds a reservation
 * of exactly the allocation it holds: growth reserves first and fails (PE_EBUSY, PE_ETOOBIG)
 * before any memory is taken when the budget has no room. */
struct pe_buf {
	char *data;
	size_t len, cap, max;
	struct pe_budget *budget; /* NULL: none */
	size_t held;              /* reserved on budget for data: pe_mem_size(data) */
	int borrowed;             /* data is the caller's memory (pe_buf_use): never freed or grown */
	struct pe_warm *warm;     /* where a first block of 2 MiB or more is taken from first (NULL: none) */
};

void pe_buf_init(struct pe_buf *b, size_t max);
void pe_buf_set_budget(struct pe_buf *b, struct pe_budget *budget);
/* A first block that fits one of warm's blocks is taken from there (posenc/warm.h): pages already
 * written. Set before anything is written; NULL (the default) is none. */
void pe_buf_set_warm(struct pe_buf *b, struct pe_warm *warm);
void pe_buf_destroy(struct pe_buf *b);
/* 0, PE_ETOOBIG (over max, or over the budget's whole limit), PE_EBUSY (the budget is full now) or
 * PE_ENOMEM. */
int pe_buf_reserve(struct pe_buf *b, size_t more);
int pe_buf_append(struct pe_buf *b, const void *p, size_t n);
/* The bytes b's block will take once pe_buf_reserve(b, more) has grown it, without a budget (an
 * allocator may round up by less than a page); 0 when more is past max. For a caller that counts
 * a buffer's memory itself (the HTTP layer's request bodies). */
size_t pe_buf_block_after(const struct pe_buf *b, size_t more);
/* pe_buf_reserve and pe_buf_block_after growing to a block of at most `most` bytes (as
 * pe_buf_block_after counts it) when the bytes wanted fit in one: for a caller that holds the
 * block against a limit itself, whom doubling past the limit would refuse a body within it. */
int pe_buf_reserve_within(struct pe_buf *b, size_t more, size_t most);
size_t pe_buf_block_within(const struct pe_buf *b, size_t more, size_t most);
int pe_buf_puts(struct pe_buf *b, const char *s);
int pe_buf_printf(struct pe_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hand the bytes to the caller; the buffer is left empty. The block is first shrunk to len + 1
 * (its NUL), so what a caller keeps is what it holds, not the capacity it grew to. It is free()d,
 * or with a budget pe_budget_free_block()ed: the reservation (pe_mem_size of the block) goes with
 * it to the caller. */
char *pe_buf_steal(struct pe_buf *b, size_t *len);
/* pe_buf_steal with the reason when no block can be handed out: 0 and *out set, or PE_EBUSY or
 * PE_ETOOBIG (the budget refused the copy of a borrowed buffer) or PE_ENOMEM, and *out NULL. */
int pe_buf_take(struct pe_buf *b, char **out, size_t *len);
/* Let an empty b write into the caller's n bytes at mem first (n - 1 of them: the spare byte),
 * neither allocated nor reserved on the budget; growth past them moves the bytes to the heap as
 * the first block would be (64-byte aligned), and pe_buf_steal of bytes still there copies them
 * into a block of exactly len + 1, reserved on the budget then. For a writer whose output is
 * usually small (one malloc of the exact size instead of an estimate's block shrunk after); mem
 * (64-byte aligned if SIMD writers fill it) must outlive the buffer's use. */
void pe_buf_use(struct pe_buf *b, void *mem, size_t n);
/* Fault in the whole pages of [p, p + n) for writing, in one system call (Linux 5.14's
 * MADV_POPULATE_WRITE) instead of a page fault per 4 KiB page; a no-op where unsupported. For
 * large buffers about to be written in full. */
void pe_mem_prefault(void *p, size_t n);
/* A block of `bytes`, 64-byte aligned, free()d by the caller. From 2 MiB it starts on a 2 MiB
 * boundary with its whole huge pages advised as such (MADV_HUGEPAGE): a page fault per 2 MiB
 * where transparent huge pages are in "madvise" mode. NULL when out of memory. */
char *pe_mem_first_block(size_t bytes);
/* The most a buffer holds on its budget for n bytes reserved or written (a writer's bound): the
 * spare byte, the first block's 64-byte alignment and the allocator's rounding (pe_mem_bound of
 * n + 64), and never less than n + 8 KiB. pe_buf_bound of a writer's bound is what a caller asks
 * its budget for (pe_out_bound). Saturates at SIZE_MAX. */
size_t pe_buf_bound(size_t n);

#endif
