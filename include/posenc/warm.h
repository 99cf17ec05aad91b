/* posenc warm blocks: a small reserve of memory written before it is needed, so a large answer
 * written into memory new to the process does not wait for the kernel to clear its pages.
 *
 * Every page a process has never had is cleared by the kernel at its first write; on a VM whose
 * host takes back long-free guest memory (free page reporting) that first write also faults on
 * the host, and a fresh daemon's 4.3 MB JSON answer spent more time there than encoding it. A
 * struct pe_warm keeps blocks of the sizes answers asked for, already written once; a first block
 * of a buffer that has one (pe_buf_set_warm) is taken from it, the take maps (untouched) the block
 * that will replace it, and a filler thread, which the caller runs at the lowest priority
 * (pe_warm_run; this layer starts no thread), writes that block's pages when a CPU is otherwise
 * idle. A block an answer is done with (evicted from the cache, or sent) may be given back to the
 * reserve (pe_warm_give): its pages are written already, so the next answer of its size needs no
 * filler at all. Blocks sit at most `limit` bytes together; pe_warm_tick gives them back once no
 * take came for `idle_s` seconds, so an idle daemon holds none. The filler itself never maps or
 * unmaps memory (warm.c says why).
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
/* A written block too large to serve takes that passed it over this many times in a row is given
 * back when one of them needs its room (warm.c says why not at once). The count grows past this
 * when such a block's size comes back too soon after, and halves while the half is still at least
 * this (a count of 9-15 stays). */
#define PE_WARM_STALE_TAKES 8
/* The block that replaces a take of n bytes holds n + n / PE_WARM_HEADROOM (the next answer of a
 * table grown by a few rows fits it). */
#define PE_WARM_HEADROOM 8

struct pe_warm;
struct pe_warm_stats {
	size_t bytes;           /* held against the limit: written, queued and being written */
	size_t ready_bytes;     /* of which written (pe_mem_size of each) */
	size_t blocks;          /* written blocks */
	size_t places;          /* blocks held or being mapped or written (at most 16) */
	uint64_t hits, misses;  /* takes served from the reserve; takes it could not serve */
	uint64_t made, dropped; /* blocks written; blocks given back unused (idle, or no room) */
	uint64_t recycled;      /* blocks kept from pe_warm_give */
	uint64_t stale_after;   /* takes in a row that make a block too large for them stale, as learnt */
};

/* A reserve of at most limit bytes whose blocks are given back after idle_s seconds without a
 * take; NULL when limit cannot hold one block of PE_WARM_MIN (no reserve: a take of NULL takes
 * nothing). */
struct pe_warm *pe_warm_new(size_t limit, double idle_s);
/* Frees the reserve and its blocks; pe_warm_run must have returned. NULL is fine. */
void pe_warm_free(struct pe_warm *w);
/* A block of at least `bytes` (pe_mem_size), 64-byte aligned, whose pages are written: the
 * smallest written one that fits, shrunk to `bytes`, unless that one was made for a take of more
 * than twice `bytes` (it is kept for an answer of its own size, which would miss it); NULL when
 * none fits, or when bytes is below PE_WARM_MIN or its block could never fit in the limit
 * (pe_mem_bound). Then, in either case, a block of `bytes` is mapped for the filler, with its
 * headroom (PE_WARM_HEADROOM) when that has room without giving any block back, when it fits in
 * the limit and one of the 16 places, after giving back written blocks too small for `bytes`,
 * then stale ones too large to serve it (PE_WARM_STALE_TAKES; largest first), while it lacks
 * room. Called by the thread that needs the memory, which so does the mapping (microseconds) at
 * its own priority. */
void *pe_warm_take(struct pe_warm *w, size_t bytes);
/* A block its owner is done with, every page of it written (an answer's, written to its end),
 * kept as a written block when it is at least PE_WARM_MIN, 64-byte aligned, and there is room for
 * it in bytes and places; a queued block not yet written of no more bytes, or made without
 * headroom for a take of no more bytes, gives up its room to it (the filler then has less to
 * write). 1 when the reserve took it (and owns it now), 0 when the caller still owns it (and
 * frees it). Any thread; it may unmap the queued block it replaces. */
int pe_warm_give(struct pe_warm *w, void *p);
/* The filler's step, without waiting: writes the pages of one block a take mapped. 1 when it did. */
int pe_warm_fill(struct pe_warm *w);
/* Gives back every block (written or not) once idle_s seconds passed since the last take: for a
 * thread of normal priority to call now and then (the daemon's ticker). 1 when it gave any back. */
int pe_warm_tick(struct pe_warm *w);
/* The filler: pe_warm_fill while blocks wait, else sleeps until a take maps one; returns after
 * pe_warm_stop (a block being written is left, between its 2 MiB steps, for pe_warm_free). */
void pe_warm_run(struct pe_warm *w);
void pe_warm_stop(struct pe_warm *w);
void pe_warm_stats(struct pe_warm *w, struct pe_warm_stats *out);

#endif
