/* The warm reserve (posenc/warm.h): blocks written once ahead of need, for answers too large to
 * write into memory new to the process without waiting on its page clearing.
 *
 * The reserve owns its blocks (an array of at most MAX_BLOCKS, under one lock); a take hands one
 * over whole. The filler writes a new block's pages one store per 4 KiB page (a 2 MiB step at a
 * time), not with MADV_POPULATE_WRITE: that holds the process' mmap lock for the whole range,
 * and a filler at the lowest priority, preempted while holding it, would stall every other
 * thread's mmap and munmap (each large block's malloc and free); a store faults under the block's
 * own lock only. */
#include "posenc/warm.h"
#include "posenc/budget.h"
#include "posenc/core.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define MAX_BLOCKS 16
#define STEP ((size_t)2 << 20) /* the filler looks at pe_warm_stop between steps */
#define PAGE ((size_t)4096)

struct block {
	char *p;
	size_t size; /* pe_mem_size(p) */
};

struct pe_warm {
	pthread_mutex_t lock;
	pthread_cond_t wake; /* a take, or stop */
	size_t limit;
	double idle_s;
	struct block blocks[MAX_BLOCKS];
	size_t nblocks, bytes;
	size_t want;       /* the latest take's size: the next block's; 0 none since the last drop */
	double last_take;   /* pe_monotonic() */
	uint64_t takes;     /* every take: the filler sleeps only when none came since it looked */
	int filling;        /* a pe_warm_fill is making a block (outside the lock) */
	atomic_int stop;
	uint64_t hits, misses, made, dropped;
};

struct pe_warm *pe_warm_new(size_t limit, double idle_s)
{
	if (limit < PE_WARM_MIN)
		return NULL;
	struct pe_warm *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&w->lock, NULL);
	w->limit = limit;
	w->idle_s = idle_s;
	w->last_take = pe_monotonic();
	return w;
}

void pe_warm_free(struct pe_warm *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->nblocks; i++)
		free(w->blocks[i].p);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

/* The index of the smallest block of at least `bytes`; nblocks when none. Lock held. */
static size_t smallest_fitting(const struct pe_warm *w, size_t bytes)
{
	size_t best = w->nblocks;
	for (size_t i = 0; i < w->nblocks; i++)
		if (w->blocks[i].size >= bytes && (best == w->nblocks || w->blocks[i].size < w->blocks[best].size))
			best = i;
	return best;
}

/* Block i out of the reserve (the last one takes its place). Lock held. */
static char *detach(struct pe_warm *w, size_t i)
{
	char *p = w->blocks[i].p;
	w->bytes -= w->blocks[i].size;
	w->blocks[i] = w->blocks[--w->nblocks];
	return p;
}

/* p shrunk to `bytes` in place (a mapped block's realloc); p as it is when the allocator cannot;
 * NULL (p freed) when it moved to an address a SIMD writer could not use. */
static char *shrunk(char *p, size_t bytes)
{
	if (pe_mem_size(p) <= bytes)
		return p;
	char *q = realloc(p, bytes);
	if (!q)
		return p;
	if ((uintptr_t)q % 64 != 0) {
		free(q);
		return NULL;
	}
	return q;
}

void *pe_warm_take(struct pe_warm *w, size_t bytes)
{
	if (!w || bytes < PE_WARM_MIN || bytes > w->limit)
		return NULL;
	char *p = NULL;
	pthread_mutex_lock(&w->lock);
	w->want = bytes;
	w->last_take = pe_monotonic();
	w->takes++;
	size_t i = smallest_fitting(w, bytes);
	if (i < w->nblocks)
		p = detach(w, i);
	else
		w->misses++;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
	if (!p)
		return NULL;
	p = shrunk(p, bytes);
	pthread_mutex_lock(&w->lock);
	*(p ? &w->hits : &w->misses) += 1;
	pthread_mutex_unlock(&w->lock);
	return p;
}

/* A block of `bytes` whose every page has been written; NULL when out of memory or stopped. */
static char *make_block(struct pe_warm *w, size_t bytes)
{
	char *p = pe_mem_first_block(bytes);
	if (!p)
		return NULL;
	for (size_t at = 0; at < bytes; at += STEP) {
		if (atomic_load(&w->stop)) {
			free(p);
			return NULL;
		}
		size_t end = bytes - at < STEP ? bytes : at + STEP;
		for (size_t i = at; i < end; i += PAGE)
			((volatile char *)p)[i] = 0;
	}
	return p;
}

/* Give back every block (the reserve has been idle). Lock held on entry, released. */
static int drop_all(struct pe_warm *w)
{
	struct block out[MAX_BLOCKS];
	size_t n = w->nblocks;
	for (size_t i = 0; i < n; i++)
		out[i] = w->blocks[i];
	w->nblocks = w->bytes = 0;
	w->want = 0;
	w->dropped += n;
	pthread_mutex_unlock(&w->lock);
	for (size_t i = 0; i < n; i++)
		free(out[i].p);
	return 1;
}

/* Make one block of `want` bytes and keep it if it still fits. Lock held on entry, released. */
static int add_block(struct pe_warm *w, size_t want)
{
	w->filling = 1;
	pthread_mutex_unlock(&w->lock);
	char *p = make_block(w, want);
	size_t size = p ? pe_mem_size(p) : 0;
	pthread_mutex_lock(&w->lock);
	w->filling = 0;
	int kept = p && w->bytes + size <= w->limit && w->nblocks < MAX_BLOCKS;
	if (kept) {
		w->blocks[w->nblocks++] = (struct block){p, size};
		w->bytes += size;
		w->made++;
	} else if (w->want == want)
		w->want = 0; /* out of memory, stopping, or past the bound: no retry until a take asks */
	pthread_mutex_unlock(&w->lock);
	if (!kept)
		free(p);
	return p != NULL;
}

/* The smallest block too small for `want`, given back to make room for one that fits it. Lock
 * held on entry, released. */
static int drop_small(struct pe_warm *w, size_t want)
{
	size_t small = w->nblocks;
	for (size_t i = 0; i < w->nblocks; i++)
		if (w->blocks[i].size < want && (small == w->nblocks || w->blocks[i].size < w->blocks[small].size))
			small = i;
	char *p = small < w->nblocks ? detach(w, small) : NULL;
	if (p)
		w->dropped++;
	pthread_mutex_unlock(&w->lock);
	free(p);
	return p != NULL;
}

int pe_warm_fill(struct pe_warm *w)
{
	if (!w)
		return 0;
	pthread_mutex_lock(&w->lock);
	if (w->nblocks && pe_monotonic() - w->last_take >= w->idle_s)
		return drop_all(w);
	size_t want = w->want;
	if (!want || w->filling || atomic_load(&w->stop)) {
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	if (w->nblocks < MAX_BLOCKS && pe_mem_bound(want) <= w->limit - w->bytes)
		return add_block(w, want);
	return drop_small(w, want);
}

void pe_warm_run(struct pe_warm *w)
{
	pthread_mutex_lock(&w->lock);
	while (!atomic_load(&w->stop)) {
		uint64_t seen = w->takes;
		pthread_mutex_unlock(&w->lock);
		int did = pe_warm_fill(w);
		pthread_mutex_lock(&w->lock);
		if (did || seen != w->takes || atomic_load(&w->stop))
			continue;
		if (!w->nblocks) {
			pthread_cond_wait(&w->wake, &w->lock);
			continue;
		}
		double due = w->last_take + w->idle_s;
		struct timespec ts = {.tv_sec = (time_t)due};
		ts.tv_nsec = (long)((due - (double)ts.tv_sec) * 1e9);
		if (ts.tv_nsec >= 1000000000L)
			ts.tv_nsec = 999999999L;
		pthread_cond_timedwait(&w->wake, &w->lock, &ts);
	}
	pthread_mutex_unlock(&w->lock);
}

void pe_warm_stop(struct pe_warm *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	atomic_store(&w->stop, 1);
	pthread_cond_broadcast(&w->wake);
	pthread_mutex_unlock(&w->lock);
}

void pe_warm_stats(struct pe_warm *w, struct pe_warm_stats *out)
{
	pthread_mutex_lock(&w->lock);
	*out = (struct pe_warm_stats){.bytes = w->bytes, .blocks = w->nblocks, .hits = w->hits,
				      .misses = w->misses, .made = w->made, .dropped = w->dropped};
	pthread_mutex_unlock(&w->lock);
}
