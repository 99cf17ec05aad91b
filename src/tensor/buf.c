/* struct pe_buf: a growable byte buffer with a hard maximum, the sink of every tensor writer.
 *
 * `max` bounds len (the bytes written), and a request past it fails with PE_ETOOBIG before any
 * memory is taken, so output that grows with client input can never exceed the configured limit
 * (curl's dynbuf). Capacity doubles (clamped to max) so n appends cost O(n) copies. One byte past
 * cap is always allocated and kept free: vsnprintf can write its NUL there, and pe_buf_steal hands
 * out a NUL-terminated string at no cost. A max of 0 means nothing may be written; there is no
 * "unlimited" value.
 *
 * Memory held is memory counted: the first block is as large as the first request (a buffer
 * reserved once for a whole table is not doubled past it), pe_buf_steal shrinks the block to
 * len + 1 before handing it out (a JSON document reserved from its worst-case width is a quarter
 * of that estimate, which the cache would otherwise keep, faulted in), and with a budget the
 * reservation follows the allocation's usable size at every step.
 *
 * A buffer may start in memory of the caller's (pe_buf_use: the HTTP layer's job keeps 16 KiB on
 * its stack): a small document is then written there and copied once into a block of its exact
 * size, one malloc where the estimate's block cost an aligned allocation (glibc splits and frees
 * its lead and tail) and a shrinking realloc, and left fragments behind in the heap. A first block
 * of 2 MiB or more lies on transparent huge pages (pe_mem_first_block): a page fault per 2 MiB, not
 * 4 KiB; a buffer given a warm reserve (pe_buf_set_warm) takes it from there when one fits. */
#include "posenc/budget.h"
#include "posenc/warm.h"

#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_CAP 64

void pe_buf_init(struct pe_buf *b, size_t max)
{
	b->data = NULL;
	b->len = b->cap = 0;
	b->max = max < SIZE_MAX - 1 ? max : SIZE_MAX - 1; /* room for the spare byte */
	b->budget = NULL;
	b->held = 0;
	b->borrowed = 0;
	b->warm = NULL;
}

void pe_buf_use(struct pe_buf *b, void *mem, size_t n)
{
	if (b->data || n < 2)
		return;
	b->data = mem;
	b->cap = n - 1 < b->max ? n - 1 : b->max; /* writers fill to cap: never past max */
	b->borrowed = 1;
}

void pe_buf_set_budget(struct pe_buf *b, struct pe_budget *budget) { b->budget = budget; }

void pe_buf_set_warm(struct pe_buf *b, struct pe_warm *warm) { b->warm = warm; }

void pe_buf_destroy(struct pe_buf *b)
{
	pe_budget_give(b->budget, b->held);
	if (!b->borrowed)
		free(b->data);
	b->data = NULL;
	b->len = b->cap = b->held = 0;
	b->borrowed = 0;
}

/* Has b a block of its own (not none, not the caller's memory)? */
static int owns_block(const struct pe_buf *b) { return b->data && !b->borrowed; }

/* After an allocation: the reservation becomes the block's usable size. */
static void settle(struct pe_buf *b)
{
	size_t real = pe_mem_size(b->data);
	if (real > b->held)
		pe_budget_charge(b->budget, real - b->held);
	else
		pe_budget_give(b->budget, b->held - real);
	b->held = b->budget ? real : 0;
}

/* Next capacity for a need of `want` bytes: at least double, at most max; the first block just
 * what is asked for, and so is a need past twice the block (a writer's one reservation of its
 * estimate after a few bytes of head: doubling from the small block would overshoot it by up to
 * twice, past what a job's share of the budget set aside for it). */
static size_t doubled_cap(const struct pe_buf *b, size_t want)
{
	if (!owns_block(b) || (b->cap >= MIN_CAP && want / 2 > b->cap))
		return want < MIN_CAP ? (MIN_CAP < b->max ? MIN_CAP : b->max) : want;
	size_t cap = b->cap < MIN_CAP ? MIN_CAP : b->cap;
	while (cap < want && cap <= b->max / 2)
		cap *= 2;
	if (cap > b->max)
		cap = b->max;
	return cap < want ? want : cap;
}

/* The bytes a block of capacity cap allocates: cap + 1, the first block rounded up to its 64-byte
 * alignment. */
static size_t block_of(const struct pe_buf *b, size_t cap)
{
	return owns_block(b) ? cap + 1 : (cap + 1 + 63) & ~(size_t)63;
}

/* doubled_cap, but a block of no more than `most` bytes when want fits in one: a caller that holds
 * the block against a limit of its own is not refused for growth past what it needs. */
static size_t grown_cap(const struct pe_buf *b, size_t want, size_t most)
{
	size_t cap = doubled_cap(b, want);
	if (cap <= want || block_of(b, cap) <= most)
		return cap;
	size_t fit = owns_block(b) ? (most ? most - 1 : 0) : (most >= 64 ? (most & ~(size_t)63) - 1 : 0);
	return fit > want ? fit : want;
}

size_t pe_buf_block_within(const struct pe_buf *b, size_t more, size_t most)
{
	if (more > b->max - b->len)
		return 0;
	size_t want = b->len + more;
	if (want <= b->cap && b->data)
		return owns_block(b) ? pe_mem_size(b->data) : 0;
	return block_of(b, grown_cap(b, want, most));
}

size_t pe_buf_block_after(const struct pe_buf *b, size_t more) { return pe_buf_block_within(b, more, SIZE_MAX); }

/* b's first block: from its warm reserve when one there fits (posenc/warm.h), else a new one. */
static char *first_block(const struct pe_buf *b, size_t bytes)
{
	char *p = pe_warm_take(b->warm, bytes);
	return p ? p : pe_mem_first_block(bytes);
}

/* Reserve on the budget what growing to cap adds: *bytes to allocate, *extra newly reserved. */
static int take_for(struct pe_buf *b, size_t cap, size_t *bytes, size_t *extra)
{
	*bytes = block_of(b, cap);
	*extra = *bytes > b->held ? *bytes - b->held : 0;
	return b->budget ? pe_budget_take(b->budget, *extra) : 0;
}

/* Would growing to cap fit in the budget now? (A hint: take_for decides.) */
static int room_for(const struct pe_buf *b, size_t cap)
{
	struct pe_budget_stats st;
	pe_budget_stats(b->budget, &st);
	size_t extra = cap + 1 > b->held ? cap + 1 - b->held : 0;
	return !b->budget || (extra <= st.limit && st.used <= st.limit - extra);
}

/* 8 KiB holds pe_mem_bound of the block (n, its spare byte and the first block's alignment: n + 64)
 * on 4 KiB pages with room to spare; larger pages need the bound itself. */
#define HELD_SLACK ((size_t)8192)

size_t pe_buf_bound(size_t n)
{
	size_t mem = pe_mem_bound(n > SIZE_MAX - 64 ? SIZE_MAX : n + 64);
	size_t slack = n > SIZE_MAX - HELD_SLACK ? SIZE_MAX : n + HELD_SLACK;
	return mem > slack ? mem : slack;
}

int pe_buf_reserve(struct pe_buf *b, size_t more) { return pe_buf_reserve_within(b, more, SIZE_MAX); }

int pe_buf_reserve_within(struct pe_buf *b, size_t more, size_t most)
{
	if (more > b->max - b->len)
		return PE_ETOOBIG;
	size_t want = b->len + more;
	if (want <= b->cap && b->data)
		return 0;
	size_t cap = grown_cap(b, want, most), bytes, extra;
	if (cap > want && !room_for(b, cap)) /* the budget may still have room for just what is needed */
		cap = want;
	int rc = take_for(b, cap, &bytes, &extra);
	if (rc != 0)
		return rc;
	char *p;
	if (owns_block(b))
		p = realloc(b->data, bytes);
	else /* the first block is 64-byte aligned: SIMD kernels write tables straight into it */
		p = first_block(b, bytes);
	if (!p) {
		pe_budget_give(b->budget, extra);
		return PE_ENOMEM;
	}
	if (b->budget)
		b->held += extra;
	if (b->borrowed && b->len)
		memcpy(p, b->data, b->len);
	b->borrowed = 0;
	b->data = p;
	b->cap = cap;
	settle(b);
	return 0;
}

int pe_buf_append(struct pe_buf *b, const void *p, size_t n)
{
	int rc = pe_buf_reserve(b, n);
	if (rc != 0)
		return rc;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

int pe_buf_puts(struct pe_buf *b, const char *s) { return pe_buf_append(b, s, strlen(s)); }

int pe_buf_printf(struct pe_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return PE_EINTERNAL;
	int rc = pe_buf_reserve(b, (size_t)n);
	if (rc != 0)
		return rc;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap); /* the NUL lands in the spare byte */
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void pe_mem_prefault(void *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t mask = page > 0 ? (uintptr_t)page - 1 : 4095, a = ((uintptr_t)p + mask) & ~mask;
	uintptr_t e = ((uintptr_t)p + n) & ~mask;
	if (e > a)
		(void)madvise((void *)a, e - a, MADV_POPULATE_WRITE); /* EINVAL before Linux 5.14: ignored */
#else
	(void)p;
	(void)n;
#endif
}

/* The block shrunk to len + 1 bytes; when the allocator cannot, the block as it is. */
static void shrink_to_fit(struct pe_buf *b)
{
	if (!owns_block(b) || b->cap == b->len)
		return;
	char *p = realloc(b->data, b->len + 1);
	if (p) {
		b->data = p;
		b->cap = b->len;
	}
	settle(b);
}

int pe_buf_take(struct pe_buf *b, char **out, size_t *len)
{
	size_t n = b->len;
	int rc = 0;
	shrink_to_fit(b);
	char *p = owns_block(b) ? b->data : NULL;
	if (!p && (p = pe_budget_malloc(b->budget, n + 1, &rc)) != NULL && n) /* none yet, or borrowed */
		memcpy(p, b->data, n);
	if (p)
		p[n] = 0;
	if (len)
		*len = p ? n : 0;
	b->data = NULL;
	b->len = b->cap = b->held = 0;
	b->borrowed = 0;
	*out = p;
	return rc;
}

char *pe_buf_steal(struct pe_buf *b, size_t *len)
{
	char *p;
	pe_buf_take(b, &p, len);
	return p;
}
