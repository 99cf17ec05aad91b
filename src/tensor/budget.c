/* struct pe_budget: bytes in use against a limit, shared by every thread that builds or sends a
 * response (contract in include/posenc/budget.h).
 *
 * It sits in the tensor layer because its first user is struct pe_buf, the sink of every writer;
 * the cache (which hands evicted-but-still-sent entries over to it) and the HTTP layer sit above.
 * A reservation is a compare-and-swap on one counter, so admission never blocks and never
 * overshoots: take() succeeds only if used + n <= limit at the instant it commits. charge() is for
 * memory that exists already and must be counted somewhere (an entry leaving the cache while it
 * is still being sent; the few bytes by which an allocation's usable size exceeds the request),
 * so it may run past the limit; then take() refuses until enough is given back. A reservation
 * larger than the whole limit can never succeed: that is PE_ETOOBIG (a 413, not a 503 to retry).
 * Blocks are counted by their usable size (malloc_usable_size), the bytes the allocator really
 * holds for them, and the allocator's side of it lives here too: pe_mem_size, pe_mem_bound, and
 * pe_mem_first_block, the block a pe_buf (or the warm reserve) starts with.
 *
 * One job at a time may wait for room (pe_budget_take_wait): jobs that each hold a body and need
 * more for their answer would otherwise refuse each other forever (two at once, each 503 because
 * of the other's body). While it waits, the bytes it wants are kept back from every other take of
 * PE_BUDGET_SMALL_TAKE or more, so other bodies and jobs cannot take its room first; smaller takes
 * (a small table's answer, the first steps of a body) still pass, and are given back soon. A
 * second would-be waiter is refused at once, and giving its body back is what lets the first one
 * through. give() wakes the waiter; when nobody waits it costs one more atomic load. A share (pe_budget_share_open) is a budget of its own
 * whose bytes were taken from its parent at once: a job's blocks are reserved on the share, and
 * past it they spill to the parent like any take, so a share's estimate can only add room. */
#include "posenc/core.h"
#include "posenc/budget.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define WAIT_SLICE_S 0.05 /* how often a waiter looks at pe_cancelled() */
#define HEAP_ONLY_BELOW ((size_t)64 << 10) /* pe_mem_bound: half of posencd's M_MMAP_THRESHOLD */
#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_FROM HUGE_PAGE /* first blocks from this size are laid on huge pages (pe_mem_first_block) */

struct pe_budget {
	atomic_size_t used;
	size_t limit;
	atomic_uint_fast64_t refused;
	atomic_size_t waiting; /* bytes the one waiter wants, kept back from other takes; 0: none */
	pthread_mutex_t lock;  /* the waiter sleeps on room under it */
	pthread_cond_t room;
	struct pe_budget *parent; /* a share's: its bytes came from there, and its spill goes there */
	size_t share;             /* bytes taken from parent when the share opened */
	atomic_size_t spilled;    /* bytes taken from parent past the share, not yet given back */
};

struct pe_budget *pe_budget_new(size_t limit)
{
	struct pe_budget *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	int bad = pthread_mutex_init(&b->lock, NULL) != 0 || pthread_cond_init(&b->room, &ca) != 0;
	pthread_condattr_destroy(&ca);
	if (bad) {
		free(b);
		return NULL;
	}
	atomic_init(&b->used, 0);
	atomic_init(&b->refused, 0);
	atomic_init(&b->waiting, 0);
	atomic_init(&b->spilled, 0);
	b->limit = limit;
	return b;
}

void pe_budget_free(struct pe_budget *b)
{
	if (!b)
		return;
	pthread_mutex_destroy(&b->lock);
	pthread_cond_destroy(&b->room);
	free(b);
}

/* n more bytes if they fit beside `kept` bytes held back for a waiter; nothing counted. */
static int try_take(struct pe_budget *b, size_t n, size_t kept)
{
	if (n > b->limit)
		return PE_ETOOBIG;
	size_t used = atomic_load(&b->used);
	do {
		if (kept > b->limit - n || used > b->limit - n - kept)
			return PE_EBUSY;
	} while (!atomic_compare_exchange_weak(&b->used, &used, used + n));
	return 0;
}

static int count_refusal(struct pe_budget *b, int rc)
{
	if (rc != 0)
		atomic_fetch_add_explicit(&b->refused, 1, memory_order_relaxed);
	return rc;
}

/* take(), counting a refusal or not. */
static int take(struct pe_budget *b, size_t n, int count)
{
	if (!b || n == 0)
		return 0;
	int rc = try_take(b, n, n < PE_BUDGET_SMALL_TAKE ? 0 : atomic_load(&b->waiting));
	if (rc != 0 && b->parent) { /* a share spills to its parent, which counts the refusal */
		if ((rc = take(b->parent, n, count)) == 0)
			atomic_fetch_add(&b->spilled, n);
		return rc;
	}
	return count ? count_refusal(b, rc) : rc;
}

int pe_budget_take(struct pe_budget *b, size_t n) { return take(b, n, 1); }

int pe_budget_try_take(struct pe_budget *b, size_t n) { return take(b, n, 0); }

/* Sleep until `until` (CLOCK_MONOTONIC seconds) or a give(), whichever is first, but no more than
 * WAIT_SLICE_S: the waiter looks at pe_cancelled() between slices (shutdown wakes nobody here). */
static void wait_for_room(struct pe_budget *b, double until)
{
	double slice = pe_monotonic() + WAIT_SLICE_S;
	if (slice < until)
		until = slice;
	struct timespec ts = {.tv_sec = (time_t)until};
	ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
	if (ts.tv_nsec >= 1000000000L)
		ts.tv_nsec = 999999999L;
	pthread_cond_timedwait(&b->room, &b->lock, &ts);
}

int pe_budget_take_wait(struct pe_budget *b, size_t n, double until)
{
	if (!b || n == 0)
		return 0;
	size_t none = 0;
	int rc = try_take(b, n, n < PE_BUDGET_SMALL_TAKE ? 0 : atomic_load(&b->waiting)), stop = 0;
	if (rc != PE_EBUSY || !atomic_compare_exchange_strong(&b->waiting, &none, n))
		return count_refusal(b, rc); /* done, never fits, or another job already waits */
	pthread_mutex_lock(&b->lock);
	/* waiting was set before used is read again (both sequentially consistent), and give()
	 * reads waiting after lowering used: one of the two sees the other */
	while ((rc = try_take(b, n, 0)) == PE_EBUSY && pe_monotonic() < until && !(stop = pe_cancelled()))
		wait_for_room(b, until);
	atomic_store(&b->waiting, 0);
	pthread_mutex_unlock(&b->lock);
	return stop ? stop : count_refusal(b, rc);
}

void pe_budget_charge(struct pe_budget *b, size_t n)
{
	if (b && n)
		atomic_fetch_add_explicit(&b->used, n, memory_order_relaxed);
}

/* Take up to n off a share's spill; what was taken goes back to the parent. */
static size_t give_spill(struct pe_budget *b, size_t n)
{
	size_t s = atomic_load(&b->spilled), back;
	do
		back = s < n ? s : n;
	while (back && !atomic_compare_exchange_weak(&b->spilled, &s, s - back));
	pe_budget_give(b->parent, back);
	return back;
}

void pe_budget_give(struct pe_budget *b, size_t n)
{
	if (!b || !n)
		return;
	if (b->parent)
		n -= give_spill(b, n);
	if (n)
		atomic_fetch_sub(&b->used, n);
	if (atomic_load(&b->waiting)) {
		pthread_mutex_lock(&b->lock);
		pthread_cond_broadcast(&b->room);
		pthread_mutex_unlock(&b->lock);
	}
}

struct pe_budget *pe_budget_share_open(struct pe_budget *parent, size_t n, double until, int *rc)
{
	*rc = 0;
	if (!parent)
		return NULL;
	struct pe_budget *s = pe_budget_new(n);
	if (!s) {
		*rc = PE_ENOMEM;
		return NULL;
	}
	if ((*rc = pe_budget_take_wait(parent, n, until)) != 0) {
		pe_budget_free(s);
		return NULL;
	}
	s->parent = parent;
	s->share = n;
	return s;
}

void pe_budget_share_hand_over(struct pe_budget *s, size_t n)
{
	if (!s || !n)
		return;
	pe_budget_charge(s->parent, n);
	pe_budget_give(s, n);
}

void pe_budget_share_close(struct pe_budget *s)
{
	if (!s)
		return;
	pe_budget_give(s->parent, s->share + atomic_load(&s->spilled));
	pe_budget_free(s);
}

void pe_budget_stats(const struct pe_budget *b, struct pe_budget_stats *out)
{
	*out = (struct pe_budget_stats){0};
	if (!b)
		return;
	out->used = atomic_load_explicit(&((struct pe_budget *)b)->used, memory_order_relaxed);
	out->limit = b->limit;
	out->refused = atomic_load_explicit(&((struct pe_budget *)b)->refused, memory_order_relaxed);
	out->waiting = atomic_load_explicit(&((struct pe_budget *)b)->waiting, memory_order_relaxed);
}

size_t pe_mem_size(const void *p) { return p ? malloc_usable_size((void *)p) : 0; }

/* The most malloc_usable_size can be for a request's body of n bytes (its NUL included).
 * - A heap block: glibc rounds it up to 16 bytes past its 8-byte header and hands over a chunk up
 *   to 31 bytes larger rather than split off less than its minimum chunk (at most n + 47); pe_buf's
 *   first block is 64-byte aligned and n rounded up to 64: n + 128 holds both.
 * - A mapped block (posencd maps from 128 KiB, main.c): whole pages, holding the block rounded to 16
 *   past its header plus 8 (a block 20 bytes short of a page boundary takes the next page), and
 *   for an aligned block its alignment and a minimum chunk more, a tail a mapping keeps: n + 256
 *   rounded to pages holds them all (a 261992-byte body holds 266176 bytes, past n + 128's
 *   262144).
 * - A buffer that grows by doubling (pe_buf) holds less than twice its length, so a block under
 *   64 KiB never was mapped: the heap's bound alone (a page-rounded one would count a 2 KiB
 *   positions part as 4 KiB, an int32 part as much as an int64 one: test_apply_need).
 * Which kind a block is, and which free chunk it got, changes between requests (the thread's arena,
 * what was freed before): counted by pe_mem_size, the same request's 413 figure moved by a few
 * bytes to a page, so a budget set to one request's figure refused the next. */
size_t pe_mem_bound(size_t n)
{
	size_t page = (size_t)getpagesize();
	if (n > SIZE_MAX - 2 * page)
		return SIZE_MAX;
	size_t heap = n + 128, mapped = (n + 256 + page - 1) / page * page;
	return n < HEAP_ONLY_BELOW || heap > mapped ? heap : mapped;
}

/* glibc grows a thread's own arena (every arena but the main one, which grows by brk with
 * M_TOP_PAD to spare) by exactly what a malloc lacks, rounded to a page, and each growth past the
 * arena's high-water mark is an mprotect that splits and merges its mapping: while the cache fills
 * with small tables (~5 KiB each, a body, its entry and response), nearly every miss paid one (perf,
 * cold 16x16 JSON misses at -c16: grow_heap's mprotect 9% of posencd's CPU). A block of
 * HEADROOM_BYTES, malloc'd and freed at once, moves the mark that far past the top in one call
 * (freed, it merges back into the top untouched: no page is faulted in for it, nothing is kept),
 * so the next HEADROOM_EVERY fills grow within it. Below posencd's mmap threshold (128 KiB), or
 * it would be mapped on its own and move nothing. On two CPUs (AMD EPYC) this takes ~8% off the
 * CPU of a cold 16x16 miss while the cache fills. */
#define HEADROOM_BYTES ((size_t)96 << 10)
#define HEADROOM_EVERY 8u

void pe_mem_keep_headroom(void)
{
/* The sanitizers' allocators have no arenas; AddressSanitizer's would only quarantine the block. */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	static _Thread_local unsigned calls;
	if (calls++ % HEADROOM_EVERY)
		return;
	void *volatile block = malloc(HEADROOM_BYTES); /* volatile: the pair is the point, keep it */
	free(block);
#endif
}

void *pe_budget_malloc(struct pe_budget *b, size_t n, int *rc)
{
	if (n == 0)
		n = 1;
	*rc = pe_budget_take(b, n);
	if (*rc != 0)
		return NULL;
	void *p = malloc(n);
	if (!p) {
		pe_budget_give(b, n);
		*rc = PE_ENOMEM;
		return NULL;
	}
	pe_budget_charge(b, pe_mem_size(p) - n); /* the allocator's rounding: less than a page */
	return p;
}

void pe_budget_free_block(struct pe_budget *b, void *p)
{
	pe_budget_give(b, pe_mem_size(p));
	free(p);
}

/* A pe_buf's first block of `bytes`, 64-byte aligned. From HUGE_FROM bytes it starts on a 2 MiB
 * boundary and asks for transparent huge pages (in THP's "madvise" mode large blocks get 4 KiB
 * pages unless asked): a 24 MiB table written in full then takes ~15 page faults instead of
 * ~6,150, one per 4 KiB (memset of a 24 MiB block, AMD EPYC VM: 5-8 ms of CPU against 22 ms). On
 * a VM whose host takes back long-free guest memory, huge pages the process never had cost more
 * to fill than 4 KiB ones (tests/tools/bench.sh's cold section reports both cases; the warm
 * reserve, warm.c, fills them off the request's path). The aligned allocation maps up to 2 MiB
 * more; the same-size realloc trims that tail off again (glibc shrinks a mapped block in place),
 * so the block holds what a plain one of these bytes would (pe_mem_bound). An allocator that
 * moves the block instead keeps it when it is still 64-byte aligned, else the plain allocation
 * is made. */
char *pe_mem_first_block(size_t bytes)
{
	if (bytes < HUGE_FROM || bytes > SIZE_MAX - HUGE_PAGE)
		return aligned_alloc(64, bytes);
	char *p = aligned_alloc(HUGE_PAGE, (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
	char *q = p ? realloc(p, bytes) : NULL;
	if (!q) {
		free(p);
		return aligned_alloc(64, bytes);
	}
	if ((uintptr_t)q % 64 != 0) {
		free(q);
		return aligned_alloc(64, bytes);
	}
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t end = ((uintptr_t)q + bytes) & ~(uintptr_t)(page > 0 ? page - 1 : 4095);
	if (q == p && end > (uintptr_t)q)
		(void)madvise(q, end - (uintptr_t)q, MADV_HUGEPAGE); /* a hint: refused where THP is off */
	return q;
}
