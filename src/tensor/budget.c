/* struct pe_budget: bytes in use against a limit, shared by every thread that builds or sends a
 * response (contract in include/posenc/tensor.h).
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
 * holds for them. */
#include "posenc/tensor.h"
#include "tensor/internal.h"

#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>

struct pe_budget {
	atomic_size_t used;
	size_t limit;
	atomic_uint_fast64_t refused;
};

struct pe_budget *pe_budget_new(size_t limit)
{
	struct pe_budget *b = malloc(sizeof *b);
	if (!b)
		return NULL;
	atomic_init(&b->used, 0);
	atomic_init(&b->refused, 0);
	b->limit = limit;
	return b;
}

void pe_budget_free(struct pe_budget *b) { free(b); }

int pe_budget_take(struct pe_budget *b, size_t n)
{
	if (!b || n == 0)
		return 0;
	size_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
	do {
		if (n > b->limit || used > b->limit - n) {
			atomic_fetch_add_explicit(&b->refused, 1, memory_order_relaxed);
			return n > b->limit ? PE_ETOOBIG : PE_EBUSY;
		}
	} while (!atomic_compare_exchange_weak_explicit(&b->used, &used, used + n, memory_order_relaxed,
							memory_order_relaxed));
	return 0;
}

void pe_budget_charge(struct pe_budget *b, size_t n)
{
	if (b && n)
		atomic_fetch_add_explicit(&b->used, n, memory_order_relaxed);
}

void pe_budget_give(struct pe_budget *b, size_t n)
{
	if (b && n)
		atomic_fetch_sub_explicit(&b->used, n, memory_order_relaxed);
}

void pe_budget_stats(const struct pe_budget *b, struct pe_budget_stats *out)
{
	*out = (struct pe_budget_stats){0};
	if (!b)
		return;
	out->used = atomic_load_explicit(&((struct pe_budget *)b)->used, memory_order_relaxed);
	out->limit = b->limit;
	out->refused = atomic_load_explicit(&((struct pe_budget *)b)->refused, memory_order_relaxed);
}

size_t pe_mem_size(const void *p) { return p ? malloc_usable_size((void *)p) : 0; }

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

size_t pe_budget_text_width(enum pe_dtype dt) { return pe_fmt_width(dt); }
