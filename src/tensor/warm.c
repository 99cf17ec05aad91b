/* The warm reserve (posenc/warm.h): blocks written once ahead of need, for answers too large to
 * write into memory new to the process without waiting on its page clearing.
 *
 * Who does what. The filler runs at the lowest priority and must never hold a lock another thread
 * of the process waits for: preempted while holding it, it would wait hundreds of milliseconds for
 * a CPU, and so would that thread. Every call that changes the process' memory map (mmap, mremap,
 * munmap, madvise) takes its mmap lock, so the filler makes none: a take maps the block that
 * replaces it (pe_mem_first_block, untouched: microseconds) and gives back the blocks its demand
 * has no room for, pe_warm_tick gives back idle ones, and the filler only writes pages, one store
 * per 4 KiB (a page fault takes the block's own lock, not the mmap lock; MADV_POPULATE_WRITE
 * would take the mmap lock for the whole range). An attack with both CPUs busy measured requests
 * stalled up to 1.2 s behind a filler that mapped its own blocks.
 *
 * Blocks given back by the answers done with them (pe_warm_give) join `ready` as they are, in the
 * room a queued block held when there is no other (one of no more bytes, or made without headroom
 * for a take they hold): recycled memory costs no filler work and no page clearing.
 *
 * A take of n bytes gets the smallest ready block of at least n, unless that was made for more than
 * twice n: it waits for an answer of its size. The block that replaces a take holds an eighth more
 * than it (PE_WARM_HEADROOM) when that has room without giving a block back, so a table asked for
 * again a few rows longer is served too. (Growing a block a little short of n is no way to serve
 * it: a block laid on huge pages is two mappings, its unadvised head and the rest, which mremap
 * cannot move as one, and glibc's realloc then copies it into fresh pages.)
 *
 * Making room for a take's replacement gives back, while it lacks room, first the blocks too small
 * for its size, then the stale ones too large to serve it, largest first: blocks a large answer
 * gave back would otherwise hold the room against every smaller one for as long as takes come. A
 * block is stale once `stale_after` takes in a row passed it over; one that answers of its size
 * keep taking is not: a large and a small size alternating in a reserve that cannot hold both
 * gave each other's blocks back at every take, and nearly every take missed; so the large size
 * keeps its block, and the small one misses, unless it comes `stale_after` times in a row. That
 * count learns (judge_stale_drop): it starts at PE_WARM_STALE_TAKES and grows to the gap its size
 * came back after when the size a block was given back for staleness is asked again, and missed,
 * before the smaller takes after it could have saved its bytes (a large answer every ninth take,
 * small ones between, lost its block at each eighth small take, and no take hit); it halves back
 * when they could have, while the half is still PE_WARM_STALE_TAKES or more (a period of two gaps,
 * 8 and 15 small answers, halved to 8 after the long one and lost the large block after both).
 * What one early drop teaches is bounded by its bytes: at most PE_WARM_STALE_TAKES takes for each
 * whole take's worth of bytes the block holds, plus PE_WARM_STALE_TAKES, however long it had sat
 * (a 12 MiB block passed over by 1,100 small takes, dropped for a 4.5 MiB one and asked again at
 * once, taught 1,024, and then held the room against the 4.5 MiB takes for 1,024 more). Blocks
 * the idle tick gives back are not drops: a miss after it teaches nothing.
 *
 * The reserve owns its blocks, written (`ready`) or not yet (`pending`, the filler's queue), under
 * one lock; `bytes` counts both against the limit, a block being written included, and at most
 * MAX_BLOCKS places are held, those of blocks other takes are mapping outside the lock included
 * (an attack overran the lists when two takes each saw a place left). */
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
	size_t size;    /* pe_mem_size(p) */
	uint64_t since; /* ready blocks: the reserve's count of takes when it became ready */
	size_t asked;   /* the take it was mapped for (size has headroom over it); given back: size */
};

struct list {
	struct block b[MAX_BLOCKS];
	size_t n;
};

struct pe_warm {
	pthread_mutex_t lock;
	pthread_cond_t wake; /* a pending block, or stop */
	size_t limit;
	double idle_s;
	struct list ready, pending;
	struct block filling; /* the block the filler writes now (outside the lock); p NULL: none */
	size_t bytes;         /* ready + pending + filling, and room a take is mapping */
	size_t mapping;       /* takes mapping a block now (outside the lock): places held for them */
	double last_take; /* pe_monotonic() */
	atomic_int stop;
	uint64_t takes; /* every take, served or not: how long a ready block has been passed over */
	uint64_t stale_after; /* takes in a row that make a block too large for them stale */
	struct {              /* the last block given back for staleness, until judged */
		size_t size;      /* 0: none */
		size_t asked;     /* the take it was made for */
		size_t for_bytes; /* the take it made room for */
		uint64_t at;      /* the takes count then */
		uint64_t ready;   /* and when the block had become ready */
	} stale;
	uint64_t hits, misses, made, dropped, recycled;
};

struct pe_warm *pe_warm_new(size_t limit, double idle_s)
{
	if (limit < pe_mem_bound(PE_WARM_MIN))
		return NULL;
	struct pe_warm *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->wake, NULL);
	w->limit = limit;
	w->idle_s = idle_s;
	w->last_take = pe_monotonic();
	w->stale_after = PE_WARM_STALE_TAKES;
	return w;
}

static void free_list(struct list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->b[i].p);
	l->n = 0;
}

void pe_warm_free(struct pe_warm *w)
{
	if (!w)
		return;
	free_list(&w->ready);
	free_list(&w->pending);
	free(w->filling.p);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

/* Block i out of l (the last one takes its place). */
static struct block detach(struct list *l, size_t i)
{
	struct block b = l->b[i];
	l->b[i] = l->b[--l->n];
	return b;
}

/* The index of the smallest ready block below `bytes`; n if none. */
static size_t smallest_below(const struct list *l, size_t bytes)
{
	size_t best = l->n;
	for (size_t i = 0; i < l->n; i++)
		if (l->b[i].size < bytes && (best == l->n || l->b[i].size < l->b[best].size))
			best = i;
	return best;
}

/* Whether a ready block made for a take of `asked` bytes, holding `size`, serves a take of `bytes`
 * (shrunk to it): it holds them, and they are not less than half what it was made for. */
static int serves(size_t asked, size_t size, size_t bytes) { return size >= bytes && asked / 2 <= bytes; }

/* The smallest ready block that serves a take of `bytes`; n if none. */
static size_t serving(const struct list *l, size_t bytes)
{
	size_t best = l->n;
	for (size_t i = 0; i < l->n; i++)
		if (serves(l->b[i].asked, l->b[i].size, bytes) && (best == l->n || l->b[i].size < l->b[best].size))
			best = i;
	return best;
}

#define STALE_MOST 1024 /* stale_after grows up to this many takes */

/* The index of the largest stale ready block too large to serve a take of `bytes`; n if none. */
static size_t largest_stale_too_large(const struct pe_warm *w, size_t bytes)
{
	const struct list *l = &w->ready;
	size_t best = l->n;
	for (size_t i = 0; i < l->n; i++)
		if (l->b[i].size > bytes && !serves(l->b[i].asked, l->b[i].size, bytes) &&
		    w->takes - l->b[i].since >= w->stale_after &&
		    (best == l->n || l->b[i].size > l->b[best].size))
			best = i;
	return best;
}

static struct block take_ready(struct pe_warm *w, size_t i)
{
	struct block b = detach(&w->ready, i);
	w->bytes -= b.size;
	return b;
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

/* Blocks held or promised: written, queued, being written, being mapped. At most MAX_BLOCKS. */
static size_t places(const struct pe_warm *w)
{
	return w->ready.n + w->pending.n + (w->filling.p != NULL) + w->mapping;
}

/* Whether a block of `bound` bytes lacks room, in bytes or in places. Lock held. */
static int no_room(const struct pe_warm *w, size_t bound)
{
	return w->bytes + bound > w->limit || places(w) >= MAX_BLOCKS;
}

/* Room for the block that replaces a take of `bytes`: its bound is held on w->bytes and a place on
 * w->mapping until it is mapped (other takes map theirs meanwhile). While it does not fit, the
 * ready blocks too small for the take, then the stale ones too large to serve it (largest first),
 * are moved to *drop. 0 when there is no room. Lock held. */
static int room_for(struct pe_warm *w, size_t bytes, size_t bound, struct list *drop)
{
	size_t i;
	while (no_room(w, bound) && (i = smallest_below(&w->ready, bytes)) < w->ready.n)
		drop->b[drop->n++] = take_ready(w, i);
	while (no_room(w, bound) && (i = largest_stale_too_large(w, bytes)) < w->ready.n) {
		if (!w->stale.size) {
			w->stale.size = w->ready.b[i].size;
			w->stale.asked = w->ready.b[i].asked;
			w->stale.for_bytes = bytes;
			w->stale.at = w->takes;
			w->stale.ready = w->ready.b[i].since;
		}
		drop->b[drop->n++] = take_ready(w, i);
	}
	w->dropped += drop->n;
	if (no_room(w, bound))
		return 0;
	w->bytes += bound;
	w->mapping++;
	return 1;
}

/* A new, untouched block of `bytes` queued for the filler, in the room `bound` held for it, made
 * for a take of `asked`. */
static void map_pending(struct pe_warm *w, size_t bytes, size_t bound, size_t asked)
{
	char *p = pe_mem_first_block(bytes);
	size_t size = p ? pe_mem_size(p) : 0;
	pthread_mutex_lock(&w->lock);
	w->bytes -= bound;
	w->mapping--;
	if (p && w->bytes + size <= w->limit) {
		w->pending.b[w->pending.n++] = (struct block){p, size, 0, asked};
		w->bytes += size;
		p = NULL;
		pthread_cond_signal(&w->wake);
	}
	pthread_mutex_unlock(&w->lock);
	free(p);
}

/* The last staleness drop judged by a take of `bytes` that `missed` or not. It was right once the
 * takes after it could have been served, at the size of the take it made room for, as many bytes
 * as it gave back (stale_after halves, if the half is PE_WARM_STALE_TAKES or more); too soon when
 * its own size comes back, and misses, before that (stale_after grows to one more than the takes
 * from its block's becoming ready to this one, at most PE_WARM_STALE_TAKES * (the bytes it was
 * made for / the take's bytes + 1), never less than it was). Lock held. */
static void judge_stale_drop(struct pe_warm *w, size_t bytes, int missed)
{
	if (!w->stale.size)
		return;
	uint64_t since = w->takes - w->stale.at - 1; /* takes between it and this one */
	if (since * w->stale.for_bytes >= w->stale.size) {
		if (w->stale_after / 2 >= PE_WARM_STALE_TAKES)
			w->stale_after /= 2;
		w->stale.size = 0;
	} else if (missed && serves(w->stale.asked, w->stale.size, bytes)) {
		uint64_t gap = w->takes - w->stale.ready; /* from its block's last answer to this one */
		uint64_t most = PE_WARM_STALE_TAKES * (w->stale.asked / w->stale.for_bytes + 1); /* its worth */
		if (most > STALE_MOST)
			most = STALE_MOST;
		if (gap + 1 < most)
			most = gap + 1;
		if (most > w->stale_after)
			w->stale_after = most;
		w->stale.size = 0;
	}
}

/* The size of the block that replaces a take of `bytes`: an eighth more when that has room without
 * giving any block back, so the next answer of a table grown by a row or a few (a sequence asked
 * for again one token longer) is served by it; else `bytes`: headroom never costs a block of
 * another size its room. Lock held. */
static size_t with_headroom(const struct pe_warm *w, size_t bytes)
{
	size_t more = bytes + bytes / PE_WARM_HEADROOM;
	return no_room(w, pe_mem_bound(more)) ? bytes : more;
}

void *pe_warm_take(struct pe_warm *w, size_t bytes)
{
	if (!w || bytes < PE_WARM_MIN || pe_mem_bound(bytes) > w->limit)
		return NULL;
	struct block got = {0};
	struct list drop = {.n = 0};
	pthread_mutex_lock(&w->lock);
	w->last_take = pe_monotonic();
	w->takes++;
	size_t i = serving(&w->ready, bytes);
	judge_stale_drop(w, bytes, i == w->ready.n);
	if (i < w->ready.n)
		got = take_ready(w, i);
	else
		w->misses++;
	size_t made = with_headroom(w, bytes), bound = pe_mem_bound(made);
	int map = !atomic_load(&w->stop) && room_for(w, bytes, bound, &drop);
	pthread_mutex_unlock(&w->lock);
	free_list(&drop);
	if (map)
		map_pending(w, made, bound, bytes);
	if (!got.p)
		return NULL;
	char *p = shrunk(got.p, bytes);
	pthread_mutex_lock(&w->lock);
	*(p ? &w->hits : &w->misses) += 1;
	pthread_mutex_unlock(&w->lock);
	return p;
}

/* Whether a written block of `size` may take queued block q's room: it holds as much, or q was made
 * without headroom for a take it holds too. A block with headroom keeps its room: its take's answer,
 * given back before the filler wrote it (both CPUs busy), would leave the next, larger take of a
 * growing table no block to fit. */
static int gives_way(const struct block *q, size_t size)
{
	return q->size <= size || (q->asked <= size && q->size - q->asked < q->asked / PE_WARM_HEADROOM);
}

/* The index of the largest queued block that gives way to a written one of `size`; n if none. */
static size_t largest_within(const struct list *l, size_t size)
{
	size_t best = l->n;
	for (size_t i = 0; i < l->n; i++)
		if (gives_way(&l->b[i], size) && (best == l->n || l->b[i].size > l->b[best].size))
			best = i;
	return best;
}

/* Room for a written block of `size`, made when needed by giving back one queued block that gives
 * way to it (moved to *drop): the room a take held for a block the filler has yet to write. Lock
 * held. */
static int room_for_given(struct pe_warm *w, size_t size, struct list *drop)
{
	if (!no_room(w, size))
		return 1;
	size_t i = largest_within(&w->pending, size);
	if (i == w->pending.n || w->bytes - w->pending.b[i].size + size > w->limit)
		return 0;
	struct block b = detach(&w->pending, i);
	w->bytes -= b.size;
	w->dropped++;
	drop->b[drop->n++] = b;
	return 1;
}

int pe_warm_give(struct pe_warm *w, void *p)
{
	if (!w || !p || (uintptr_t)p % 64 != 0)
		return 0;
	size_t size = pe_mem_size(p);
	if (size < PE_WARM_MIN || size > w->limit)
		return 0;
	struct list drop = {.n = 0};
	pthread_mutex_lock(&w->lock);
	int kept = !atomic_load(&w->stop) && room_for_given(w, size, &drop);
	if (kept) {
		w->ready.b[w->ready.n++] = (struct block){p, size, w->takes, size};
		w->bytes += size;
		w->recycled++;
	}
	pthread_mutex_unlock(&w->lock);
	free_list(&drop);
	return kept;
}

/* Every page of [p, p + n) written once; 0 when stopped first. */
static int write_pages(struct pe_warm *w, char *p, size_t n)
{
	for (size_t at = 0; at < n; at += STEP) {
		if (atomic_load(&w->stop))
			return 0;
		size_t end = n - at < STEP ? n : at + STEP;
		for (size_t i = at; i < end; i += PAGE)
			((volatile char *)p)[i] = 0;
	}
	return 1;
}

int pe_warm_fill(struct pe_warm *w)
{
	if (!w)
		return 0;
	pthread_mutex_lock(&w->lock);
	if (!w->pending.n || w->filling.p || atomic_load(&w->stop)) {
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	w->filling = detach(&w->pending, 0);
	pthread_mutex_unlock(&w->lock);
	int done = write_pages(w, w->filling.p, w->filling.size);
	pthread_mutex_lock(&w->lock);
	struct list *to = done ? &w->ready : &w->pending; /* stopped: pe_warm_free frees it */
	w->filling.since = w->takes;
	to->b[to->n++] = w->filling;
	if (done)
		w->made++;
	w->filling = (struct block){0};
	pthread_mutex_unlock(&w->lock);
	return done;
}

int pe_warm_tick(struct pe_warm *w)
{
	if (!w)
		return 0;
	struct list out = {.n = 0};
	pthread_mutex_lock(&w->lock);
	if (pe_monotonic() - w->last_take >= w->idle_s) {
		while (w->ready.n)
			out.b[out.n++] = take_ready(w, 0);
		while (w->pending.n) {
			struct block b = detach(&w->pending, 0);
			w->bytes -= b.size;
			out.b[out.n++] = b;
		}
		w->dropped += out.n;
		w->stale.size = 0; /* a miss after this is the idle trim's, not a stale drop's */
	}
	pthread_mutex_unlock(&w->lock);
	int gave = out.n > 0;
	free_list(&out);
	return gave;
}

void pe_warm_run(struct pe_warm *w)
{
	while (!atomic_load(&w->stop)) {
		if (pe_warm_fill(w))
			continue;
		pthread_mutex_lock(&w->lock);
		while (!w->pending.n && !atomic_load(&w->stop))
			pthread_cond_wait(&w->wake, &w->lock);
		pthread_mutex_unlock(&w->lock);
	}
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
	size_t ready = 0;
	for (size_t i = 0; i < w->ready.n; i++)
		ready += w->ready.b[i].size;
	*out = (struct pe_warm_stats){.bytes = w->bytes, .ready_bytes = ready, .blocks = w->ready.n,
				      .places = places(w),
				      .hits = w->hits, .misses = w->misses, .made = w->made, .dropped = w->dropped,
				      .recycled = w->recycled, .stale_after = w->stale_after};
	pthread_mutex_unlock(&w->lock);
}
