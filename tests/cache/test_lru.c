/* Tests for the cache layer (src/cache/lru.c and hash.c against include/posenc/cache.h).
 *
 * The cache source is compiled into this program with malloc/calloc/free routed through counting
 * wrappers, so a test can make the n-th allocation fail and check that nothing leaks; the
 * library's copy of lru.o is then not linked in. The tests may also look at the cache's internals
 * (ENTRY_OVERHEAD, the LRU list) to check its invariants. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_long t_live;    /* cache allocations not yet freed */
static atomic_long t_fail_at; /* index of the next allocation to fail; -1: none */
static atomic_long t_failed;  /* how many allocations were made to fail */

static bool t_should_fail(void)
{
	if (atomic_load(&t_fail_at) < 0)
		return false;
	if (atomic_fetch_sub(&t_fail_at, 1) != 0)
		return false;
	atomic_fetch_add(&t_failed, 1);
	return true;
}

static void *t_malloc(size_t n)
{
	void *p = t_should_fail() ? NULL : malloc(n);
	if (p != NULL)
		atomic_fetch_add(&t_live, 1);
	return p;
}

static void *t_calloc(size_t n, size_t m)
{
	void *p = t_should_fail() ? NULL : calloc(n, m);
	if (p != NULL)
		atomic_fetch_add(&t_live, 1);
	return p;
}

static void t_free(void *p)
{
	if (p != NULL)
		atomic_fetch_sub(&t_live, 1);
	free(p);
}

#define malloc t_malloc
#define calloc t_calloc
#define free t_free
#include "cache/lru.c"
#undef malloc
#undef calloc
#undef free

#include "support/pe_check.h"

#define COST(bytes, keylen) ((size_t)(bytes) + (size_t)(keylen) + ENTRY_OVERHEAD)

/* ---- values and waiters ---- */

struct t_val {
	int id;
	atomic_int frees;
};

#define T_NVALS 4096
static struct t_val t_vals[T_NVALS];
static int t_nvals;
static atomic_int t_freed; /* free_cb calls over all values */

static void t_setup(void)
{
	atomic_store(&t_live, 0);
	atomic_store(&t_fail_at, -1);
	atomic_store(&t_failed, 0);
	atomic_store(&t_freed, 0);
	t_nvals = 0;
}

static struct t_val *t_val_new(int id)
{
	ck_assert_int_lt(t_nvals, T_NVALS);
	struct t_val *v = &t_vals[t_nvals++];
	v->id = id;
	atomic_store(&v->frees, 0);
	return v;
}

static void t_val_free(void *p)
{
	struct t_val *v = p;
	atomic_fetch_add(&v->frees, 1);
	atomic_fetch_add(&t_freed, 1);
}

/* The cache freed: free_cb called freed times in all, and no cache allocation left. */
static void free_cache(struct pe_cache *c, int freed)
{
	pe_cache_free(c);
	ck_assert_int_eq(atomic_load(&t_freed), freed);
	ck_assert_int_eq(atomic_load(&t_live), 0);
}

static int t_frees(const struct t_val *v)
{
	return atomic_load(&((struct t_val *)v)->frees);
}

static int t_put(struct pe_cache *c, const char *key, struct t_val *v, size_t bytes)
{
	return pe_cache_fill(c, key, strlen(key), v, bytes, t_val_free);
}

static int t_id(const struct pe_cache_entry *e)
{
	return ((const struct t_val *)pe_cache_value(e))->id;
}

/* The id stored under key, or -1; a plain get, so it refreshes recency and counts a hit/miss. */
static int t_peek(struct pe_cache *c, const char *key)
{
	struct pe_cache_entry *e = pe_cache_get(c, key, strlen(key));
	if (e == NULL)
		return -1;
	int id = t_id(e);
	pe_cache_release(e);
	return id;
}

struct t_rec {
	int calls;
	struct pe_cache_entry *e;
	int code;
};

static void t_record(void *arg, struct pe_cache_entry *e, int code)
{
	struct t_rec *r = arg;
	r->calls++;
	r->e = e;
	r->code = code;
}

static struct pe_cache_stats t_stats(struct pe_cache *c)
{
	struct pe_cache_stats s;
	pe_cache_stats(c, &s);
	return s;
}

/* ---- basics ---- */

START_TEST(test_empty)
{
	struct pe_cache *c = pe_cache_new(1000);
	ck_assert_ptr_nonnull(c);
	struct pe_cache_stats s = t_stats(c);
	ck_assert_uint_eq(s.hits + s.misses + s.evictions + s.joins, 0);
	ck_assert_uint_eq(s.bytes + s.entries + s.pending, 0);
	ck_assert_ptr_null(pe_cache_get(c, "x", 1));
	ck_assert_uint_eq(t_stats(c).misses, 1);
	pe_cache_release(NULL);
	pe_cache_free(c);
	pe_cache_free(NULL);
	ck_assert_int_eq(atomic_load(&t_live), 0);
}
END_TEST

START_TEST(test_hit_miss)
{
	struct pe_cache *c = pe_cache_new(1 << 20);
	struct pe_cache_entry *e = (void *)1;
	struct t_rec first = {0}, second = {0};

	ck_assert_int_eq(pe_cache_acquire(c, "a", 1, t_record, &first, &e), PE_CACHE_MISS);
	ck_assert_ptr_null(e);
	struct pe_cache_stats s = t_stats(c);
	ck_assert_uint_eq(s.misses, 1);
	ck_assert_uint_eq(s.pending, 1);
	ck_assert_uint_eq(s.entries, 0);
	ck_assert_ptr_null(pe_cache_get(c, "a", 1)); /* pending is not a value */
	ck_assert_uint_eq(t_stats(c).misses, 2);

	ck_assert_int_eq(pe_cache_acquire(c, "a", 1, t_record, &second, &e), PE_CACHE_WAIT);
	ck_assert_ptr_null(e);
	ck_assert_int_eq(first.calls + second.calls, 0);

	struct t_val *v = t_val_new(7);
	ck_assert_int_eq(t_put(c, "a", v, 100), 0);
	ck_assert_int_eq(first.calls, 1);
	ck_assert_int_eq(second.calls, 1);
	ck_assert_int_eq(first.code, 0);
	ck_assert_ptr_eq(first.e, second.e);
	ck_assert_ptr_eq(pe_cache_value(first.e), v);
	ck_assert_uint_eq(pe_cache_entry_bytes(first.e), 100);

	ck_assert_int_eq(pe_cache_acquire(c, "a", 1, t_record, &first, &e), PE_CACHE_HIT);
	ck_assert_ptr_eq(e, first.e);
	ck_assert_int_eq(first.calls, 1); /* cb not kept on a hit */
	ck_assert_int_eq(t_peek(c, "a"), 7);
	ck_assert_int_eq(t_peek(c, "b"), -1);
	s = t_stats(c);
	ck_assert_uint_eq(s.hits, 2);
	ck_assert_uint_eq(s.misses, 3);
	ck_assert_uint_eq(s.joins, 1);
	ck_assert_uint_eq(s.pending, 0);
	ck_assert_uint_eq(s.entries, 1);
	ck_assert_uint_eq(s.bytes, COST(100, 1));

	pe_cache_release(e);
	pe_cache_release(first.e);
	pe_cache_release(second.e);
	ck_assert_int_eq(t_frees(v), 0); /* the cache still holds it */
	pe_cache_free(c);
	ck_assert_int_eq(t_frees(v), 1);
	ck_assert_int_eq(atomic_load(&t_live), 0);
}
END_TEST

START_TEST(test_binary_keys)
{
	struct pe_cache *c = pe_cache_new(1 << 20);
	static const char k1[] = {'a', 0, 'b'}, k2[] = {'a', 0, 'c'};
	char big1[4096], big2[4096];
	memset(big1, 'x', sizeof big1);
	memcpy(big2, big1, sizeof big2);
	big2[4095] = 'y';

	ck_assert_int_eq(pe_cache_fill(c, k1, 3, t_val_new(1), 0, t_val_free), 0);
	ck_assert_int_eq(pe_cache_fill(c, k2, 3, t_val_new(2), 0, t_val_free), 0);
	ck_assert_int_eq(pe_cache_fill(c, k1, 2, t_val_new(3), 0, t_val_free), 0); /* "a\0" */
	ck_assert_int_eq(pe_cache_fill(c, k1, 1, t_val_new(4), 0, t_val_free), 0); /* "a" */
	ck_assert_int_eq(pe_cache_fill(c, "", 0, t_val_new(5), 0, t_val_free), 0);
	ck_assert_int_eq(pe_cache_fill(c, big1, sizeof big1, t_val_new(6), 0, t_val_free), 0);
	ck_assert_int_eq(pe_cache_fill(c, big2, sizeof big2, t_val_new(7), 0, t_val_free), 0);
	ck_assert_int_eq(pe_cache_fill(c, big1, 4000, t_val_new(8), 0, t_val_free), 0);

	const struct {
		const void *key;
		size_t len;
		int id;
	} want[] = {{k1, 3, 1}, {k2, 3, 2}, {k1, 2, 3}, {k1, 1, 4}, {"", 0, 5},
		    {big1, 4096, 6}, {big2, 4096, 7}, {big1, 4000, 8}};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		struct pe_cache_entry *e = pe_cache_get(c, want[i].key, want[i].len);
		ck_assert_ptr_nonnull(e);
		ck_assert_int_eq(t_id(e), want[i].id);
		pe_cache_release(e);
	}
	ck_assert_uint_eq(t_stats(c).entries, 8);
	ck_assert_uint_eq(t_stats(c).bytes, COST(0, 3 + 3 + 2 + 1 + 0 + 4096 + 4096 + 4000) + 7 * ENTRY_OVERHEAD);
	free_cache(c, 8);
}
END_TEST

START_TEST(test_hash_spread)
{
	/* Keys differing in one byte, or only in length, must not collide in the 64-bit hash. */
	char key[64];
	memset(key, 'k', sizeof key);
	uint64_t h[3 * 64 + 64];
	size_t n = 0;
	for (size_t i = 0; i < 64; i++)
		h[n++] = pe_cache_hash(1, key, i);
	for (size_t i = 0; i < 64; i++) {
		for (int d = 1; d <= 3; d++) {
			key[i] = (char)('k' + d);
			h[n++] = pe_cache_hash(1, key, sizeof key);
			key[i] = 'k';
		}
	}
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			ck_assert_msg(h[i] != h[j], "hash collision %zu/%zu", i, j);
	/* keys that differ only in trailing zero bytes (the tail is zero-padded internally) */
	static const char zeros[40] = {'a'};
	for (size_t i = 1; i <= sizeof zeros; i++)
		for (size_t j = i + 1; j <= sizeof zeros; j++)
			ck_assert_uint_ne(pe_cache_hash(1, zeros, i), pe_cache_hash(1, zeros, j));
	/* the seed changes the hash */
	ck_assert_uint_ne(pe_cache_hash(1, key, 10), pe_cache_hash(2, key, 10));
}
END_TEST

/* ---- recency, eviction, bytes ---- */

START_TEST(test_lru_order)
{
	/* room for exactly three entries of 100 bytes with 1-byte keys */
	struct pe_cache *c = pe_cache_new(3 * COST(100, 1));
	ck_assert_int_eq(t_put(c, "a", t_val_new(1), 100), 0);
	ck_assert_int_eq(t_put(c, "b", t_val_new(2), 100), 0);
	ck_assert_int_eq(t_put(c, "c", t_val_new(3), 100), 0);
	ck_assert_uint_eq(t_stats(c).evictions, 0);
	ck_assert_uint_eq(t_stats(c).bytes, 3 * COST(100, 1));

	ck_assert_int_eq(t_peek(c, "a"), 1); /* recency now a, c, b */
	ck_assert_int_eq(t_put(c, "d", t_val_new(4), 100), 0);
	ck_assert_uint_eq(t_stats(c).evictions, 1);
	ck_assert_int_eq(t_frees(&t_vals[1]), 1); /* b went, nobody held it */
	ck_assert_int_eq(t_peek(c, "b"), -1);
	ck_assert_int_eq(t_peek(c, "c"), 3); /* c, d, a */
	ck_assert_int_eq(t_peek(c, "a"), 1); /* a, c, d */

	/* a hit through acquire refreshes too: d, a, c */
	struct pe_cache_entry *e;
	ck_assert_int_eq(pe_cache_acquire(c, "d", 1, NULL, NULL, &e), PE_CACHE_HIT);
	pe_cache_release(e);
	ck_assert_int_eq(t_put(c, "e", t_val_new(5), 100), 0); /* evicts c */
	ck_assert_int_eq(t_put(c, "f", t_val_new(6), 100), 0); /* evicts a */
	ck_assert_uint_eq(t_stats(c).evictions, 3);
	ck_assert_int_eq(t_frees(&t_vals[2]), 1);
	ck_assert_int_eq(t_frees(&t_vals[0]), 1);
	ck_assert_int_eq(t_peek(c, "c"), -1);
	ck_assert_int_eq(t_peek(c, "a"), -1);
	ck_assert_int_eq(t_peek(c, "d"), 4);
	ck_assert_int_eq(t_peek(c, "e"), 5);
	ck_assert_int_eq(t_peek(c, "f"), 6);

	/* one big entry pushes out two */
	ck_assert_int_eq(t_put(c, "g", t_val_new(7), 100 + COST(100, 1)), 0); /* d and e go */
	ck_assert_uint_eq(t_stats(c).evictions, 5);
	ck_assert_int_eq(t_peek(c, "f"), 6);
	ck_assert_int_eq(t_peek(c, "g"), 7);
	ck_assert_uint_eq(t_stats(c).entries, 2);
	ck_assert_uint_eq(t_stats(c).bytes, 3 * COST(100, 1));
	pe_cache_free(c);
	ck_assert_int_eq(atomic_load(&t_freed), 7);
	for (int i = 0; i < 7; i++)
		ck_assert_int_eq(t_frees(&t_vals[i]), 1);
	ck_assert_int_eq(atomic_load(&t_live), 0);
}
END_TEST

START_TEST(test_bytes_exact)
{
	size_t ca = COST(10, 5), cb = COST(1000, 3), cc = COST(0, 12);
	struct pe_cache *c = pe_cache_new(ca + cb + cc);
	ck_assert_int_eq(t_put(c, "alpha", t_val_new(1), 10), 0);
	ck_assert_uint_eq(t_stats(c).bytes, ca);
	ck_assert_int_eq(t_put(c, "bet", t_val_new(2), 1000), 0);
	ck_assert_uint_eq(t_stats(c).bytes, ca + cb);
	ck_assert_int_eq(t_put(c, "gamma-delta!", t_val_new(3), 0), 0);
	ck_assert_uint_eq(t_stats(c).bytes, ca + cb + cc); /* exactly at the limit: nothing evicted */
	ck_assert_uint_eq(t_stats(c).evictions, 0);
	ck_assert_uint_eq(t_stats(c).entries, 3);

	/* replacing alpha by a value one byte bigger goes one byte over: the LRU entry (bet) goes */
	ck_assert_int_eq(t_put(c, "alpha", t_val_new(4), 11), 0);
	ck_assert_uint_eq(t_stats(c).evictions, 1);
	ck_assert_int_eq(t_peek(c, "bet"), -1);
	ck_assert_uint_eq(t_stats(c).bytes, COST(11, 5) + cc);
	ck_assert_uint_eq(t_stats(c).entries, 2);

	/* a value whose cost is exactly the budget is kept (alone) */
	pe_cache_set_limit(c, COST(500, 4));
	ck_assert_uint_eq(t_stats(c).bytes, COST(11, 5) + cc);
	ck_assert_int_eq(t_put(c, "full", t_val_new(5), 500), 0);
	ck_assert_uint_eq(t_stats(c).bytes, COST(500, 4));
	ck_assert_uint_eq(t_stats(c).entries, 1);
	ck_assert_uint_eq(t_stats(c).evictions, 3);
	ck_assert_int_eq(t_peek(c, "full"), 5);
	free_cache(c, 5);
}
END_TEST

START_TEST(test_bytes_no_overflow)
{
	/* with an unbounded budget, a value claiming SIZE_MAX bytes is charged SIZE_MAX (saturated):
	 * it is kept alone, and the count never wraps around */
	struct pe_cache *c = pe_cache_new(SIZE_MAX);
	ck_assert_int_eq(t_put(c, "a", t_val_new(1), 10), 0);
	ck_assert_int_eq(t_put(c, "b", t_val_new(2), SIZE_MAX - 5), 0);
	struct pe_cache_stats s = t_stats(c);
	ck_assert_uint_eq(s.bytes, SIZE_MAX);
	ck_assert_uint_eq(s.entries, 1);
	ck_assert_uint_eq(s.evictions, 1);
	ck_assert_int_eq(t_peek(c, "b"), 2);
	ck_assert_int_eq(t_put(c, "c", t_val_new(3), 0), 0); /* b goes to make room */
	ck_assert_uint_eq(t_stats(c).bytes, COST(0, 1));
	ck_assert_int_eq(t_peek(c, "b"), -1);
	free_cache(c, 3);
}
END_TEST

START_TEST(test_set_limit)
{
	struct pe_cache *c = pe_cache_new(10 * COST(50, 2));
	char key[3] = "k0";
	for (int i = 0; i < 10; i++) {
		key[1] = (char)('0' + i);
		ck_assert_int_eq(t_put(c, key, t_val_new(i), 50), 0);
	}
	ck_assert_uint_eq(t_stats(c).entries, 10);
	pe_cache_set_limit(c, 4 * COST(50, 2) + 1);
	struct pe_cache_stats s = t_stats(c);
	ck_assert_uint_eq(s.entries, 4);
	ck_assert_uint_eq(s.evictions, 6);
	ck_assert_uint_eq(s.bytes, 4 * COST(50, 2));
	ck_assert_int_eq(atomic_load(&t_freed), 6);
	for (int i = 0; i < 10; i++) { /* the six oldest went */
		key[1] = (char)('0' + i);
		ck_assert_int_eq(t_peek(c, key), i < 6 ? -1 : i);
	}
	pe_cache_set_limit(c, 0); /* everything goes, nothing fits */
	ck_assert_uint_eq(t_stats(c).entries, 0);
	ck_assert_uint_eq(t_stats(c).bytes, 0);
	ck_assert_int_eq(t_put(c, "x", t_val_new(10), 0), 0);
	ck_assert_uint_eq(t_stats(c).entries, 0);
	ck_assert_int_eq(atomic_load(&t_freed), 11);
	pe_cache_set_limit(c, 1 << 20); /* growing keeps again */
	ck_assert_int_eq(t_put(c, "x", t_val_new(11), 0), 0);
	ck_assert_int_eq(t_peek(c, "x"), 11);
	free_cache(c, 12);
}
END_TEST

START_TEST(test_oversize)
{
	size_t max = COST(1000, 3);
	struct pe_cache *c = pe_cache_new(max);
	struct pe_cache_entry *e;
	struct t_rec r1 = {0}, r2 = {0};

	ck_assert_int_eq(t_put(c, "old", t_val_new(0), 10), 0);
	/* a waited-for value one byte over the budget reaches every waiter, but is not kept */
	ck_assert_int_eq(pe_cache_acquire(c, "big", 3, t_record, &r1, &e), PE_CACHE_MISS);
	ck_assert_int_eq(pe_cache_acquire(c, "big", 3, t_record, &r2, &e), PE_CACHE_WAIT);
	struct t_val *big = t_val_new(1);
	ck_assert_int_eq(t_put(c, "big", big, 1001), 0);
	ck_assert_int_eq(r1.calls, 1);
	ck_assert_int_eq(r2.calls, 1);
	ck_assert_ptr_eq(pe_cache_value(r1.e), big);
	ck_assert_ptr_eq(r1.e, r2.e);
	struct pe_cache_stats s = t_stats(c);
	ck_assert_uint_eq(s.entries, 1); /* "old" is untouched */
	ck_assert_uint_eq(s.bytes, COST(10, 3));
	ck_assert_uint_eq(s.pending, 0);
	ck_assert_uint_eq(s.evictions, 0);
	ck_assert_int_eq(t_peek(c, "big"), -1);
	ck_assert_int_eq(t_peek(c, "old"), 0);
	pe_cache_release(r1.e);
	ck_assert_int_eq(t_frees(big), 0);
	pe_cache_release(r2.e);
	ck_assert_int_eq(t_frees(big), 1);

	/* oversize with nobody waiting: freed at once */
	struct t_val *huge = t_val_new(2);
	ck_assert_int_eq(t_put(c, "huge", huge, SIZE_MAX), 0);
	ck_assert_int_eq(t_frees(huge), 1);
	ck_assert_int_eq(t_peek(c, "huge"), -1);

	/* an oversize fill of a key that has an entry still replaces it: the old value goes */
	ck_assert_int_eq(t_put(c, "old", t_val_new(3), 2000), 0);
	ck_assert_int_eq(t_frees(&t_vals[0]), 1);
	ck_assert_int_eq(t_frees(&t_vals[3]), 1);
	ck_assert_int_eq(t_peek(c, "old"), -1);
	ck_assert_uint_eq(t_stats(c).entries, 0);
	ck_assert_uint_eq(t_stats(c).bytes, 0);
	free_cache(c, 4);
}
END_TEST

/* ---- references and replacement ---- */

START_TEST(test_ref_outlives_eviction)
{
	struct pe_cache *c = pe_cache_new(2 * COST(8, 1));
	struct t_val *a = t_val_new(1);
	ck_assert_int_eq(t_put(c, "a", a, 8), 0);
	struct pe_cache_entry *held = pe_cache_get(c, "a", 1);
	struct pe_cache_entry *held2 = pe_cache_get(c, "a", 1);
	pe_cache_retain(held);
	ck_assert_int_eq(t_put(c, "b", t_val_new(2), 8), 0);
	ck_assert_int_eq(t_put(c, "c", t_val_new(3), 8), 0); /* evicts a */
	ck_assert_uint_eq(t_stats(c).evictions, 1);
	ck_assert_int_eq(t_peek(c, "a"), -1);
	ck_assert_uint_eq(t_stats(c).bytes, 2 * COST(8, 1)); /* a no longer counted */
	ck_assert_int_eq(t_frees(a), 0);
	ck_assert_ptr_eq(pe_cache_value(held), a);
	ck_assert_uint_eq(pe_cache_entry_bytes(held), 8);
	pe_cache_release(held);
	pe_cache_release(held2);
	ck_assert_int_eq(t_frees(a), 0);
	pe_cache_release(held);
	ck_assert_int_eq(t_frees(a), 1);
	ck_assert_int_eq(atomic_load(&t_freed), 1);
	free_cache(c, 3);
}
END_TEST

START_TEST(test_ref_outlives_free)
{
	struct pe_cache *c = pe_cache_new(1 << 20);
	struct t_val *a = t_val_new(1), *b = t_val_new(2);
	ck_assert_int_eq(t_put(c, "a", a, 8), 0);
	ck_assert_int_eq(t_put(c, "b", b, 8), 0);
	struct pe_cache_entry *ea = pe_cache_get(c, "a", 1);
	pe_cache_free(c);
	ck_assert_int_eq(t_frees(b), 1);
	ck_assert_int_eq(t_frees(a), 0);
	ck_assert_int_eq(atomic_load(&t_live), 1); /* only a's entry */
	ck_assert_ptr_eq(pe_cache_value(ea), a);
	pe_cache_retain(ea);
	pe_cache_release(ea);
	ck_assert_int_eq(t_frees(a), 0);
	pe_cache_release(ea);
	ck_assert_int_eq(t_frees(a), 1);
	ck_assert_int_eq(atomic_load(&t_live), 0);
}
END_TEST

START_TEST(test_replace)
{
	struct pe_cache *c = pe_cache_new(1 << 20);
	struct t_val *v1 = t_val_new(1), *v2 = t_val_new(2), *v3 = t_val_new(3);
	ck_assert_int_eq(t_put(c, "k", v1, 100), 0);
	struct pe_cache_entry *old = pe_cache_get(c, "k", 1);
	ck_assert_int_eq(t_put(c, "k", v2, 300), 0);
	ck_assert_int_eq(t_peek(c, "k"), 2);
	ck_assert_int_eq(t_frees(v1), 0); /* still referenced */
	ck_assert_ptr_eq(pe_cache_value(old), v1);
	struct pe_cache_stats s = t_stats(c);
	ck_assert_uint_eq(s.entries, 1);
	ck_assert_uint_eq(s.bytes, COST(300, 1));
	ck_assert_uint_eq(s.evictions, 0); /* replacement is not eviction */
	pe_cache_release(old);
	ck_assert_int_eq(t_frees(v1), 1);

	ck_assert_int_eq(t_put(c, "k", v3, 50), 0); /* nobody holds v2: freed on replacement */
	ck_assert_int_eq(t_frees(v2), 1);
	ck_assert_uint_eq(t_stats(c).bytes, COST(50, 1));
	ck_assert_int_eq(t_peek(c, "k"), 3);
	pe_cache_free(c);
	ck_assert_int_eq(t_frees(v3), 1);
	ck_assert_int_eq(atomic_load(&t_freed), 3);
	ck_assert_int_eq(atomic_load(&t_live), 0);
}
END_TEST

START_TEST(test_growth)
{
	enum { N = 3000 };
	struct pe_cache *c = pe_cache_new(SIZE_MAX);
	char key[32];
	for (int i = 0; i < N; i++) {
		int n = snprintf(key, sizeof key, "key/%d", i);
		ck_assert_int_eq(pe_cache_fill(c, key, (size_t)n, t_val_new(i), (size_t)i, t_val_free), 0);
	}
	ck_assert_uint_ge(c->nbuckets, (size_t)N * 4 / 3);
	size_t bytes = 0;
	for (int i = 0; i < N; i++) {
		int n = snprintf(key, sizeof key, "key/%d", i);
		ck_assert_int_eq(t_peek(c, key), i);
		bytes += COST(i, n);
	}
	struct pe_cache_stats s = t_stats(c);
	ck_assert_uint_eq(s.entries, N);
	ck_assert_uint_eq(s.bytes, bytes);
	ck_assert_uint_eq(s.hits, N);
	free_cache(c, N);
}
END_TEST

/* Every chain's back links point at the link that points at each entry (hpprev). */
static void t_chains_consistent(const struct pe_cache *c)
{
	size_t n = 0;
	for (size_t i = 0; i < c->nbuckets; i++)
		for (struct pe_cache_entry *const *link = &c->buckets[i]; *link; link = &(*link)->hnext, n++)
			ck_assert_ptr_eq((*link)->hpprev, link);
	ck_assert_uint_eq(n, c->count);
}

/* Entries leave chains from any position (replaced, evicted in LRU order, failed while pending),
 * before and after the table grows; lookups stay right and the back links consistent. */
START_TEST(test_chain_unlink_anywhere)
{
	enum { N = 3000 };
	struct pe_cache *c = pe_cache_new(SIZE_MAX);
	char key[32];
	for (int i = 0; i < N; i++) {
		int n = snprintf(key, sizeof key, "key/%d", i);
		ck_assert_int_eq(pe_cache_fill(c, key, (size_t)n, t_val_new(i), 10, t_val_free), 0);
		if (i % 500 == 0)
			t_chains_consistent(c);
	}
	t_chains_consistent(c);
	for (int i = 0; i < N; i += 3) { /* replaced: the old entry leaves its chain wherever it is */
		int n = snprintf(key, sizeof key, "key/%d", i);
		ck_assert_int_eq(pe_cache_fill(c, key, (size_t)n, t_val_new(N + i), 10, t_val_free), 0);
	}
	t_chains_consistent(c);
	for (int i = 1; i < N; i += 3) { /* touched, so the LRU order is not the insertion order */
		snprintf(key, sizeof key, "key/%d", i);
		ck_assert_int_ge(t_peek(c, key), 0);
	}
	struct pe_cache_entry *e;
	ck_assert_int_eq(pe_cache_acquire(c, "pending", 7, NULL, NULL, &e), PE_CACHE_MISS);
	t_chains_consistent(c);
	pe_cache_fail(c, "pending", 7, PE_EINTERNAL); /* a pending entry leaves its chain */
	t_chains_consistent(c);
	pe_cache_set_limit(c, (size_t)(N / 2) * COST(10, 8)); /* about half evicted, oldest first */
	t_chains_consistent(c);
	size_t kept = 0;
	for (int i = 0; i < N; i++) {
		snprintf(key, sizeof key, "key/%d", i);
		int v = t_peek(c, key);
		if (v >= 0) {
			ck_assert_int_eq(v, i % 3 == 0 ? N + i : i);
			kept++;
		}
	}
	ck_assert_uint_eq(kept, t_stats(c).entries);
	ck_assert_uint_gt(kept, 0);
	ck_assert_uint_lt(kept, N);
	pe_cache_free(c);
	ck_assert_int_eq(atomic_load(&t_live), 0);
}
END_TEST

/* ---- single flight ---- */

START_TEST(test_single_flight)
{
	enum { W = 16 };
	struct pe_cache *c = pe_cache_new(1 << 20);
	struct t_rec owner = {0}, rec[W] = {{0}};
	struct pe_cache_entry *e;

	ck_assert_int_eq(pe_cache_acquire(c, "key", 3, t_record, &owner, &e), PE_CACHE_MISS);
	for (int i = 0; i < W; i++)
		ck_assert_int_eq(pe_cache_acquire(c, "key", 3, t_record, &rec[i], &e), PE_CACHE_WAIT);
	struct pe_cache_stats s = t_stats(c);
	ck_assert_uint_eq(s.joins, W);
	ck_assert_uint_eq(s.misses, 1);
	ck_assert_uint_eq(s.pending, 1);

	/* another key meanwhile is independent */
	struct t_rec other = {0};
	ck_assert_int_eq(pe_cache_acquire(c, "kez", 3, t_record, &other, &e), PE_CACHE_MISS);
	ck_assert_uint_eq(t_stats(c).pending, 2);

	struct t_val *v = t_val_new(42);
	ck_assert_int_eq(t_put(c, "key", v, 64), 0);
	ck_assert_int_eq(owner.calls, 1);
	ck_assert_ptr_eq(pe_cache_value(owner.e), v);
	for (int i = 0; i < W; i++) {
		ck_assert_int_eq(rec[i].calls, 1);
		ck_assert_int_eq(rec[i].code, 0);
		ck_assert_ptr_eq(rec[i].e, owner.e);
	}
	ck_assert_int_eq(other.calls, 0);
	ck_assert_uint_eq(t_stats(c).pending, 1);
	ck_assert_uint_eq(t_stats(c).entries, 1);

	/* each waiter got its own reference: the value outlives the cache until the last release */
	pe_cache_fail(c, "kez", 3, PE_EIO);
	pe_cache_free(c);
	ck_assert_int_eq(other.calls, 1);
	ck_assert_int_eq(other.code, PE_EIO);
	pe_cache_release(owner.e);
	for (int i = 0; i < W - 1; i++)
		pe_cache_release(rec[i].e);
	ck_assert_int_eq(t_frees(v), 0);
	pe_cache_release(rec[W - 1].e);
	ck_assert_int_eq(t_frees(v), 1);
	ck_assert_int_eq(atomic_load(&t_live), 0);
}
END_TEST

/* A watch is told like a waiter, is not a join, and needs the key pending. */
START_TEST(test_watch)
{
	struct pe_cache *c = pe_cache_new(1 << 20);
	struct t_rec owner = {0}, watch = {0};
	struct pe_cache_entry *e;
	ck_assert_int_eq(pe_cache_watch(c, "key", 3, t_record, &watch), PE_EINVAL); /* nothing under way */
	ck_assert_int_eq(pe_cache_acquire(c, "key", 3, t_record, &owner, &e), PE_CACHE_MISS);
	ck_assert_int_eq(pe_cache_watch(c, "key", 3, t_record, &watch), 0);
	ck_assert_uint_eq(t_stats(c).joins, 0);
	struct t_val *v = t_val_new(7);
	ck_assert_int_eq(t_put(c, "key", v, 64), 0);
	ck_assert_int_eq(watch.calls, 1);
	ck_assert_int_eq(watch.code, 0);
	ck_assert_ptr_eq(watch.e, owner.e);
	ck_assert_int_eq(pe_cache_watch(c, "key", 3, t_record, &watch), PE_EINVAL); /* filled: not pending */
	pe_cache_free(c);
	pe_cache_release(owner.e);
	ck_assert_int_eq(t_frees(v), 0); /* the watch's reference holds the value */
	pe_cache_release(watch.e);
	ck_assert_int_eq(t_frees(v), 1);
	ck_assert_int_eq(atomic_load(&t_live), 0);
}
END_TEST

START_TEST(test_fail)
{
	struct pe_cache *c = pe_cache_new(1 << 20);
	struct t_rec rec[5] = {{0}};
	struct pe_cache_entry *e;

	ck_assert_int_eq(pe_cache_acquire(c, "k", 1, t_record, &rec[0], &e), PE_CACHE_MISS);
	for (int i = 1; i < 5; i++)
		ck_assert_int_eq(pe_cache_acquire(c, "k", 1, t_record, &rec[i], &e), PE_CACHE_WAIT);
	pe_cache_fail(c, "k", 1, PE_ETIMEOUT);
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(rec[i].calls, 1);
		ck_assert_ptr_null(rec[i].e);
		ck_assert_int_eq(rec[i].code, PE_ETIMEOUT);
	}
	struct pe_cache_stats s = t_stats(c);
	ck_assert_uint_eq(s.pending, 0);
	ck_assert_uint_eq(s.entries, 0);
	ck_assert_uint_eq(s.bytes, 0);

	/* nothing stored: the next acquire computes again; a late fail is a no-op */
	pe_cache_fail(c, "k", 1, PE_ETIMEOUT);
	ck_assert_int_eq(rec[0].calls, 1);
	ck_assert_int_eq(pe_cache_acquire(c, "k", 1, t_record, &rec[0], &e), PE_CACHE_MISS);
	pe_cache_fail(c, "k", 1, 0); /* a code of 0 would tell waiters nothing: becomes an error */
	ck_assert_int_eq(rec[0].calls, 2);
	ck_assert_int_eq(rec[0].code, PE_EINTERNAL);

	/* fail never touches a ready entry */
	ck_assert_int_eq(t_put(c, "k", t_val_new(1), 1), 0);
	pe_cache_fail(c, "k", 1, PE_EIO);
	ck_assert_int_eq(t_peek(c, "k"), 1);
	ck_assert_uint_eq(t_stats(c).misses, 2);
	free_cache(c, 1);
}
END_TEST

START_TEST(test_null_callback)
{
	struct pe_cache *c = pe_cache_new(1 << 20);
	struct pe_cache_entry *e;
	struct t_rec rec = {0};
	ck_assert_int_eq(pe_cache_acquire(c, "k", 1, NULL, NULL, &e), PE_CACHE_MISS);
	ck_assert_int_eq(pe_cache_acquire(c, "k", 1, t_record, &rec, &e), PE_CACHE_WAIT);
	struct t_val *v = t_val_new(1);
	ck_assert_int_eq(t_put(c, "k", v, 1), 0);
	ck_assert_int_eq(rec.calls, 1);
	pe_cache_release(rec.e);
	ck_assert_int_eq(t_peek(c, "k"), 1);
	pe_cache_free(c);
	ck_assert_int_eq(t_frees(v), 1); /* the NULL-cb owner holds no reference */
	ck_assert_int_eq(atomic_load(&t_live), 0);
}
END_TEST

START_TEST(test_free_with_pending)
{
	struct pe_cache *c = pe_cache_new(1 << 20);
	struct t_rec r1 = {0}, r2 = {0};
	struct pe_cache_entry *e;
	ck_assert_int_eq(pe_cache_acquire(c, "k", 1, t_record, &r1, &e), PE_CACHE_MISS);
	ck_assert_int_eq(pe_cache_acquire(c, "k", 1, t_record, &r2, &e), PE_CACHE_WAIT);
	pe_cache_free(c);
	ck_assert_int_eq(r1.calls, 1);
	ck_assert_int_eq(r2.calls, 1);
	ck_assert_ptr_null(r2.e);
	ck_assert_int_eq(r2.code, PE_EDRAINING);
	ck_assert_int_eq(atomic_load(&t_live), 0);
}
END_TEST

/* A waiter callback runs outside the lock, so it may use the cache (here: read and insert). */
struct t_reenter {
	struct pe_cache *c;
	int seen;
};

static void t_reenter_cb(void *arg, struct pe_cache_entry *e, int code)
{
	struct t_reenter *r = arg;
	r->seen = t_peek(r->c, "k");
	ck_assert_int_eq(t_put(r->c, "from-cb", t_val_new(9), 1), 0);
	pe_cache_release(e);
}

START_TEST(test_callback_reenters)
{
	struct pe_cache *c = pe_cache_new(1 << 20);
	struct t_reenter r = {c, 0};
	struct pe_cache_entry *e;
	ck_assert_int_eq(pe_cache_acquire(c, "k", 1, t_reenter_cb, &r, &e), PE_CACHE_MISS);
	ck_assert_int_eq(t_put(c, "k", t_val_new(5), 1), 0);
	ck_assert_int_eq(r.seen, 5);
	ck_assert_int_eq(t_peek(c, "from-cb"), 9);
	free_cache(c, 2);
}
END_TEST

/* ---- allocation failures ---- */

/* One scenario with the n-th allocation failing: every call either succeeds or says PE_ENOMEM and
 * leaves the cache as if it had not been made; at the end nothing leaks and every value handed to
 * the cache is freed exactly once. Returns whether a failure was injected. */
static bool t_enomem_run(long n)
{
	t_setup();
	atomic_store(&t_fail_at, n);
	struct pe_cache *c = pe_cache_new(1 << 20);
	if (c == NULL) {
		ck_assert_int_eq(atomic_load(&t_live), 0);
		return true;
	}
	struct t_rec r1 = {0}, r2 = {0};
	struct pe_cache_entry *e;
	int rc = pe_cache_acquire(c, "k", 1, t_record, &r1, &e);
	if (rc == PE_ENOMEM) {
		ck_assert_uint_eq(t_stats(c).pending, 0);
		ck_assert_uint_eq(t_stats(c).misses, 0);
	} else {
		ck_assert_int_eq(rc, PE_CACHE_MISS);
		rc = pe_cache_acquire(c, "k", 1, t_record, &r2, &e);
		ck_assert(rc == PE_ENOMEM || rc == PE_CACHE_WAIT);
		ck_assert_uint_eq(t_stats(c).joins, rc == PE_CACHE_WAIT);
		ck_assert_int_eq(t_put(c, "k", t_val_new(0), 1), 0); /* completing never fails */
		ck_assert_int_eq(r1.calls, 1);
		ck_assert_int_eq(r2.calls, rc == PE_CACHE_WAIT);
		pe_cache_release(r1.e);
		pe_cache_release(r2.e);
	}
	/* plain inserts, enough to grow the table, and a replacement */
	char key[16];
	bool stored[40];
	for (int i = 0; i < 40; i++) {
		int len = snprintf(key, sizeof key, "p%d", i % 30);
		struct t_val *v = t_val_new(100 + i);
		rc = pe_cache_fill(c, key, (size_t)len, v, 1, t_val_free);
		ck_assert(rc == 0 || rc == PE_ENOMEM);
		ck_assert_int_eq(t_frees(v), rc == 0 ? 0 : 1);
		stored[i] = rc == 0;
	}
	/* a failed replacement leaves the old value in place */
	for (int i = 0; i < 30; i++) {
		snprintf(key, sizeof key, "p%d", i);
		int want = i < 10 && stored[i + 30] ? 130 + i : stored[i] ? 100 + i : -1;
		ck_assert_int_eq(t_peek(c, key), want);
	}
	pe_cache_free(c);
	ck_assert_int_eq(atomic_load(&t_live), 0);
	for (int i = 0; i < t_nvals; i++)
		ck_assert_int_eq(t_frees(&t_vals[i]), 1);
	return atomic_load(&t_failed) > 0;
}

START_TEST(test_enomem)
{
	long n = 0;
	while (t_enomem_run(n))
		n++;
	ck_assert_int_gt(n, 10); /* the scenario does allocate; every one of them was made to fail */
}
END_TEST

/* ---- threads ---- */

enum { S_THREADS = 8, S_ITERS = 20000, S_KEYS = 48, S_HOLD = 4 };

struct s_val {
	int key;
	atomic_int frees;
};

static struct s_val *s_pool;
static atomic_int s_next;
static atomic_long s_callbacks, s_cb_failed, s_bad;
static char s_keys[S_KEYS][1200];
static size_t s_keylen[S_KEYS];

struct s_count {
	long hit, miss, wait, get_hit, get_miss, registered;
	unsigned rng;
};

static void s_free(void *p)
{
	atomic_fetch_add(&((struct s_val *)p)->frees, 1);
}

static void s_check(struct pe_cache_entry *e, int key)
{
	struct s_val *v = pe_cache_value(e);
	if (v->key != key || atomic_load(&v->frees) != 0)
		atomic_fetch_add(&s_bad, 1);
}

static void s_cb(void *arg, struct pe_cache_entry *e, int code)
{
	int key = (int)(intptr_t)arg;
	atomic_fetch_add(&s_callbacks, 1);
	if (e == NULL) {
		if (code != PE_ETIMEOUT)
			atomic_fetch_add(&s_bad, 1);
		atomic_fetch_add(&s_cb_failed, 1);
		return;
	}
	if (code != 0)
		atomic_fetch_add(&s_bad, 1);
	s_check(e, key);
	pe_cache_release(e);
}

static unsigned s_rand(unsigned *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

static struct s_val *s_value(int key)
{
	struct s_val *v = &s_pool[atomic_fetch_add(&s_next, 1)];
	v->key = key;
	atomic_init(&v->frees, 0);
	return v;
}

struct s_arg {
	struct pe_cache *c;
	struct s_count n;
	int id;
};

static void *s_thread(void *p)
{
	struct s_arg *a = p;
	struct pe_cache *c = a->c;
	struct pe_cache_entry *held[S_HOLD] = {0};
	for (int i = 0; i < S_ITERS; i++) {
		unsigned r = s_rand(&a->n.rng);
		int k = (int)(r % S_KEYS);
		unsigned op = (r >> 8) % 16;
		struct pe_cache_entry *e = NULL;
		if (op < 11) {
			int rc = pe_cache_acquire(c, s_keys[k], s_keylen[k], s_cb, (void *)(intptr_t)k, &e);
			if (rc == PE_CACHE_HIT) {
				a->n.hit++;
				s_check(e, k);
			} else if (rc == PE_CACHE_WAIT) {
				a->n.wait++;
				a->n.registered++;
			} else if (rc == PE_CACHE_MISS) {
				a->n.miss++;
				a->n.registered++;
				sched_yield(); /* "compute": let others join the pending key */
				if ((r >> 16) % 8 == 0)
					pe_cache_fail(c, s_keys[k], s_keylen[k], PE_ETIMEOUT);
				else if (pe_cache_fill(c, s_keys[k], s_keylen[k], s_value(k), (r >> 20) % 400, s_free))
					atomic_fetch_add(&s_bad, 1);
			} else {
				atomic_fetch_add(&s_bad, 1);
			}
		} else if (op < 14) {
			e = pe_cache_get(c, s_keys[k], s_keylen[k]);
			if (e != NULL) {
				a->n.get_hit++;
				s_check(e, k);
			} else {
				a->n.get_miss++;
			}
		} else if (op == 14) {
			/* a plain fill, possibly completing someone else's pending key */
			if (pe_cache_fill(c, s_keys[k], s_keylen[k], s_value(k), (r >> 20) % 400, s_free))
				atomic_fetch_add(&s_bad, 1);
		} else if (a->id == 0) {
			pe_cache_set_limit(c, (r >> 20) % 2 ? 6000 : 12000);
		}
		/* keep a few references for a while so they outlive evictions */
		if (e != NULL) {
			int slot = (int)((r >> 24) % S_HOLD);
			pe_cache_release(held[slot]);
			held[slot] = e;
		}
	}
	for (int i = 0; i < S_HOLD; i++)
		pe_cache_release(held[i]);
	return NULL;
}

START_TEST(test_stress)
{
	s_pool = calloc((size_t)S_THREADS * S_ITERS, sizeof *s_pool);
	ck_assert_ptr_nonnull(s_pool);
	for (int k = 0; k < S_KEYS; k++) {
		/* long, mostly shared prefixes: only the tail tells keys apart */
		s_keylen[k] = 16 + (size_t)(k * 397) % 1100;
		memset(s_keys[k], 'q', s_keylen[k]);
		snprintf(s_keys[k] + s_keylen[k] - 11, 11, "/%09u", (unsigned)k % 1000u);
	}
	struct pe_cache *c = pe_cache_new(12000);
	struct s_arg args[S_THREADS];
	pthread_t th[S_THREADS];
	for (int i = 0; i < S_THREADS; i++) {
		args[i] = (struct s_arg){.c = c, .id = i, .n.rng = 0x9e3779b9u * (unsigned)(i + 1)};
		ck_assert_int_eq(pthread_create(&th[i], NULL, s_thread, &args[i]), 0);
	}
	struct s_count sum = {0};
	for (int i = 0; i < S_THREADS; i++) {
		pthread_join(th[i], NULL);
		sum.hit += args[i].n.hit;
		sum.miss += args[i].n.miss;
		sum.wait += args[i].n.wait;
		sum.get_hit += args[i].n.get_hit;
		sum.get_miss += args[i].n.get_miss;
		sum.registered += args[i].n.registered;
	}
	pe_cache_set_limit(c, 12000);

	ck_assert_int_eq(atomic_load(&s_bad), 0);
	struct pe_cache_stats s = t_stats(c);
	ck_assert_uint_eq(s.pending, 0);
	ck_assert_uint_le(s.bytes, 12000);
	ck_assert_uint_eq(s.hits, (uint64_t)(sum.hit + sum.get_hit));
	ck_assert_uint_eq(s.misses, (uint64_t)(sum.miss + sum.get_miss));
	ck_assert_uint_eq(s.joins, (uint64_t)sum.wait);
	ck_assert_int_eq(atomic_load(&s_callbacks), sum.registered); /* every waiter exactly once */
	ck_assert_int_gt(sum.hit, 0);
	ck_assert_int_gt(sum.wait, 0);
	ck_assert_int_gt(atomic_load(&s_cb_failed), 0);
	ck_assert_uint_gt(s.evictions, 100);

	/* the bytes and entries counts match what is actually in the list */
	size_t bytes = 0, entries = 0;
	for (struct pe_cache_entry *e = c->head; e != NULL; e = e->next) {
		bytes += cost(e->bytes, e->keylen);
		entries++;
	}
	ck_assert_uint_eq(s.bytes, bytes);
	ck_assert_uint_eq(s.entries, entries);
	ck_assert_uint_eq(c->count, entries);

	pe_cache_free(c);
	int used = atomic_load(&s_next);
	ck_assert_int_gt(used, 1000);
	for (int i = 0; i < used; i++)
		ck_assert_msg(atomic_load(&s_pool[i].frees) == 1, "value %d freed %d times", i,
			      atomic_load(&s_pool[i].frees));
	ck_assert_int_eq(atomic_load(&t_live), 0);
	free(s_pool);
}
END_TEST

/* ---- the budget: bytes still being sent after they left the cache ---- */

static size_t t_budget_used(const struct pe_budget *g)
{
	struct pe_budget_stats st;
	pe_budget_stats(g, &st);
	return st.used;
}

/* An entry evicted, replaced or too large to keep while a reader still holds it moves from the
 * cache's count to the budget until its last reference goes; one nobody holds is just freed. So
 * cache bytes + budget bytes is always what is alive. */
START_TEST(test_budget_takes_evicted_in_flight)
{
	struct pe_budget *g = pe_budget_new(1u << 20);
	struct pe_cache *c = pe_cache_new(2 * COST(8, 1));
	pe_cache_set_budget(c, g);
	ck_assert_int_eq(t_put(c, "a", t_val_new(1), 8), 0);
	ck_assert_int_eq(t_put(c, "b", t_val_new(2), 8), 0);
	struct pe_cache_entry *held = pe_cache_get(c, "a", 1);
	ck_assert_int_eq(t_put(c, "c", t_val_new(3), 8), 0); /* evicts a, still being sent */
	ck_assert_int_eq(t_put(c, "d", t_val_new(4), 8), 0); /* evicts b, held by nobody */
	ck_assert_uint_eq(t_stats(c).evictions, 2);
	ck_assert_uint_eq(t_stats(c).bytes, 2 * COST(8, 1));
	ck_assert_uint_eq(t_budget_used(g), COST(8, 1)); /* a, and only a */
	ck_assert_int_eq(t_frees(&t_vals[1]), 1);
	pe_cache_release(held);
	ck_assert_int_eq(t_frees(&t_vals[0]), 1);
	ck_assert_uint_eq(t_budget_used(g), 0);

	/* replaced while held */
	held = pe_cache_get(c, "c", 1);
	ck_assert_int_eq(t_put(c, "c", t_val_new(5), 8), 0);
	ck_assert_uint_eq(t_budget_used(g), COST(8, 1));
	pe_cache_release(held);
	ck_assert_uint_eq(t_budget_used(g), 0);

	/* too large to keep: counted by the budget while its waiters send it */
	struct t_rec r = {0};
	struct pe_cache_entry *e;
	ck_assert_int_eq(pe_cache_acquire(c, "big", 3, t_record, &r, &e), PE_CACHE_MISS);
	ck_assert_int_eq(t_put(c, "big", t_val_new(6), 1000), 0);
	ck_assert_int_eq(r.calls, 1);
	ck_assert_uint_eq(t_budget_used(g), COST(1000, 3));
	ck_assert_uint_eq(t_stats(c).bytes, 2 * COST(8, 1));
	pe_cache_release(r.e);
	ck_assert_uint_eq(t_budget_used(g), 0);

	/* shrinking the cache under a reader */
	held = pe_cache_get(c, "d", 1);
	pe_cache_set_limit(c, 0);
	ck_assert_uint_eq(t_budget_used(g), COST(8, 1));
	pe_cache_release(held);
	ck_assert_uint_eq(t_budget_used(g), 0);
	pe_cache_free(c);
	ck_assert_uint_eq(t_budget_used(g), 0);
	ck_assert_int_eq(atomic_load(&t_live), 0);
	pe_budget_free(g);
}
END_TEST

/* A value that grows after its fill (a hit response built at the first hit) is counted where the
 * rest of it is: in the cache's bytes while listed, colder entries evicted past the limit (the
 * entry itself when it is the coldest); by the budget once it left the cache under a reader, and
 * given back with it. */
START_TEST(test_charge_more)
{
	struct pe_budget *g = pe_budget_new(1u << 20);
	struct pe_cache *c = pe_cache_new(2 * COST(8, 1) + 100);
	pe_cache_set_budget(c, g);
	ck_assert_int_eq(t_put(c, "a", t_val_new(1), 8), 0);
	ck_assert_int_eq(t_put(c, "b", t_val_new(2), 8), 0);
	struct pe_cache_entry *e = pe_cache_get(c, "b", 1);
	pe_cache_charge_more(c, e, 100); /* fits: nothing evicted */
	ck_assert_uint_eq(t_stats(c).bytes, 2 * COST(8, 1) + 100);
	ck_assert_uint_eq(pe_cache_entry_bytes(e), 108);
	ck_assert_uint_eq(t_stats(c).evictions, 0);
	pe_cache_charge_more(c, e, 1); /* one byte past the limit: the colder a goes */
	ck_assert_uint_eq(t_stats(c).evictions, 1);
	ck_assert_uint_eq(t_stats(c).bytes, COST(109, 1));
	ck_assert_int_eq(t_frees(&t_vals[0]), 1);
	ck_assert_uint_eq(t_budget_used(g), 0);
	pe_cache_release(e);

	/* left the cache under a reader: the growth goes to the budget with the rest, and back */
	e = pe_cache_get(c, "b", 1);
	pe_cache_set_limit(c, 0);
	ck_assert_uint_eq(t_budget_used(g), COST(109, 1));
	pe_cache_charge_more(c, e, 50);
	ck_assert_uint_eq(t_budget_used(g), COST(159, 1));
	ck_assert_uint_eq(t_stats(c).bytes, 0);
	pe_cache_release(e);
	ck_assert_uint_eq(t_budget_used(g), 0);

	/* growing past the limit alone: the entry itself is evicted, charged to the budget while held */
	pe_cache_set_limit(c, 2 * COST(8, 1));
	ck_assert_int_eq(t_put(c, "c", t_val_new(3), 8), 0);
	e = pe_cache_get(c, "c", 1);
	pe_cache_charge_more(c, e, 1000);
	ck_assert_uint_eq(t_stats(c).bytes, 0);
	ck_assert_uint_eq(t_stats(c).entries, 0);
	ck_assert_uint_eq(t_budget_used(g), COST(1008, 1));
	pe_cache_release(e);
	ck_assert_uint_eq(t_budget_used(g), 0);
	pe_cache_free(c);
	ck_assert_int_eq(atomic_load(&t_live), 0);
	pe_budget_free(g);
}
END_TEST

static Suite *lru_suite(void)
{
	Suite *s = suite_create("cache");
	TCase *tc = tcase_create("lru");
	tcase_add_checked_fixture(tc, t_setup, NULL);
	tcase_add_test(tc, test_empty);
	tcase_add_test(tc, test_hit_miss);
	tcase_add_test(tc, test_binary_keys);
	tcase_add_test(tc, test_hash_spread);
	tcase_add_test(tc, test_lru_order);
	tcase_add_test(tc, test_bytes_exact);
	tcase_add_test(tc, test_bytes_no_overflow);
	tcase_add_test(tc, test_set_limit);
	tcase_add_test(tc, test_oversize);
	tcase_add_test(tc, test_ref_outlives_eviction);
	tcase_add_test(tc, test_ref_outlives_free);
	tcase_add_test(tc, test_budget_takes_evicted_in_flight);
	tcase_add_test(tc, test_charge_more);
	tcase_add_test(tc, test_replace);
	tcase_add_test(tc, test_growth);
	tcase_add_test(tc, test_chain_unlink_anywhere);
	tcase_add_test(tc, test_single_flight);
	tcase_add_test(tc, test_watch);
	tcase_add_test(tc, test_fail);
	tcase_add_test(tc, test_null_callback);
	tcase_add_test(tc, test_free_with_pending);
	tcase_add_test(tc, test_callback_reenters);
	tcase_add_test(tc, test_enomem);
	suite_add_tcase(s, tc);

	TCase *threads = tcase_create("threads");
	tcase_add_checked_fixture(threads, t_setup, NULL);
	tcase_set_timeout(threads, 120);
	tcase_add_test(threads, test_stress);
	suite_add_tcase(s, threads);
	return s;
}

PE_TEST_MAIN(lru_suite)
