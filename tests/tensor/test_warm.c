/* The warm reserve (posenc/warm.h): a take maps a block of its size (with headroom where there is
 * room), the filler writes it (every page resident), up to the limit and no further; takes get the
 * smallest written block that fits, shrunk, but not one made for more than twice their size; a
 * larger demand makes room by giving back blocks too small for it; a size whose block could never
 * fit asks nothing and drops nothing; the tick gives idle blocks back, written or not; the filler
 * thread wakes on a take and stops; a written block given back joins the ready ones where it fits
 * (in the room of one not yet written if need be); a buffer's first block comes from the reserve
 * with its budget counting what it holds. */
#include "posenc/tensor.h"
#include "posenc/warm.h"
#include "support/pe_check.h"

#include <pthread.h>
#include <stdint.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define HOUR_S 3600.0

static struct pe_warm_stats stats_of(struct pe_warm *w)
{
	struct pe_warm_stats s;
	pe_warm_stats(w, &s);
	return s;
}

/* Is every page of [p, p + n) resident? */
static int resident(const void *p, size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)p & ~(page - 1), e = ((uintptr_t)p + n + page - 1) & ~(page - 1);
	size_t pages = (e - a) / page;
	unsigned char *v = malloc(pages);
	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(mincore((void *)a, e - a, v), 0);
	size_t in = 0;
	for (size_t i = 0; i < pages; i++)
		in += v[i] & 1;
	free(v);
	return in == pages;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

START_TEST(no_reserve_below_its_minimum)
{
	ck_assert_ptr_null(pe_warm_new(PE_WARM_MIN, HOUR_S)); /* no room for one block's rounding */
	ck_assert_ptr_null(pe_warm_new(0, HOUR_S));
	struct pe_warm *w = pe_warm_new(pe_mem_bound(PE_WARM_MIN), HOUR_S);
	ck_assert_ptr_nonnull(w);
	ck_assert_ptr_null(pe_warm_take(w, PE_WARM_MIN));
	ck_assert_int_eq(pe_warm_fill(w), 1);
	char *p = pe_warm_take(w, PE_WARM_MIN);
	ck_assert_ptr_nonnull(p); /* the smallest reserve holds one block of the smallest size */
	free(p);
	pe_warm_free(w);
	ck_assert_ptr_null(pe_warm_take(NULL, 4 * MIB));
	ck_assert_int_eq(pe_warm_fill(NULL), 0);
	ck_assert_int_eq(pe_warm_tick(NULL), 0);
	pe_warm_stop(NULL);
	pe_warm_free(NULL);
}
END_TEST

START_TEST(a_take_maps_its_size_and_the_filler_writes_it)
{
	struct pe_warm *w = pe_warm_new(16 * MIB, HOUR_S);
	ck_assert_ptr_nonnull(w);
	ck_assert_int_eq(pe_warm_fill(w), 0); /* nothing asked yet: nothing to write */
	size_t n = 3 * MIB + 5;
	ck_assert_ptr_null(pe_warm_take(w, n)); /* empty: a miss, which maps a block of its size */
	struct pe_warm_stats s = stats_of(w);
	ck_assert_uint_eq(s.misses, 1);
	ck_assert_uint_eq(s.blocks, 0);
	ck_assert_uint_ge(s.bytes, n); /* held against the limit before it is written */
	ck_assert_uint_eq(s.ready_bytes, 0);
	ck_assert_ptr_null(pe_warm_take(w, n)); /* not written yet: another miss (and another block) */
	ck_assert_int_eq(pe_warm_fill(w), 1);
	ck_assert_int_eq(pe_warm_fill(w), 1);
	ck_assert_int_eq(pe_warm_fill(w), 0);
	s = stats_of(w);
	ck_assert_uint_eq(s.blocks, 2);
	ck_assert_uint_eq(s.made, 2);
	ck_assert_uint_eq(s.ready_bytes, s.bytes);
	ck_assert_uint_le(s.bytes, 2 * pe_mem_bound(n + n / PE_WARM_HEADROOM)); /* with their headroom */
	char *p = pe_warm_take(w, n);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq((uintptr_t)p % 64, 0);
	ck_assert_uint_ge(pe_mem_size(p), n);
	ck_assert_msg(resident(p, n), "a warm block's pages are resident before it is written");
	s = stats_of(w);
	ck_assert_uint_eq(s.hits, 1);
	ck_assert_uint_eq(s.blocks, 1);
	memset(p, 0x5a, n); /* ordinary memory, the taker's */
	ck_assert_int_eq(p[n - 1], 0x5a);
	free(p);
	ck_assert_int_eq(pe_warm_fill(w), 1); /* the take mapped its replacement */
	ck_assert_uint_eq(stats_of(w).blocks, 2);
	/* Outside [PE_WARM_MIN, what fits the limit]: no take, and nothing asked. */
	ck_assert_ptr_null(pe_warm_take(w, PE_WARM_MIN - 1));
	ck_assert_ptr_null(pe_warm_take(w, 16 * MIB));
	ck_assert_uint_eq(stats_of(w).misses, 2);
	ck_assert_int_eq(pe_warm_fill(w), 0);
	pe_warm_free(w);
}
END_TEST

START_TEST(fills_to_its_limit_and_no_further)
{
	struct pe_warm *w = pe_warm_new(10 * MIB, HOUR_S);
	for (int i = 0; i < 5; i++)
		ck_assert_ptr_null(pe_warm_take(w, 3 * MIB));
	int made = 0;
	while (pe_warm_fill(w) && made < 100)
		made++;
	struct pe_warm_stats s = stats_of(w);
	ck_assert_int_eq(made, 3); /* a fourth 3 MiB block does not fit in 10 MiB */
	ck_assert_uint_eq(s.blocks, 3);
	ck_assert_uint_le(s.bytes, 10 * MIB);
	pe_warm_free(w); /* frees the blocks it holds (ASan's leak check) */
}
END_TEST

START_TEST(a_smaller_take_gets_the_smallest_block_shrunk)
{
	struct pe_warm *w = pe_warm_new(16 * MIB, HOUR_S);
	ck_assert_ptr_null(pe_warm_take(w, 3 * MIB));
	ck_assert_ptr_null(pe_warm_take(w, 5 * MIB));
	ck_assert_int_eq(pe_warm_fill(w), 1);
	ck_assert_int_eq(pe_warm_fill(w), 1);
	ck_assert_uint_eq(stats_of(w).blocks, 2);
	char *p = pe_warm_take(w, 2 * MIB + 1);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_lt(pe_mem_size(p), 3 * MIB); /* the 3 MiB block, shrunk to what was asked */
	ck_assert_uint_ge(pe_mem_size(p), 2 * MIB + 1);
	ck_assert_uint_eq((uintptr_t)p % 64, 0);
	struct pe_warm_stats s = stats_of(w);
	ck_assert_uint_eq(s.blocks, 1);
	ck_assert_uint_ge(s.ready_bytes, 5 * MIB); /* the 5 MiB block stays */
	memset(p, 1, 2 * MIB + 1);
	free(p);
	pe_warm_free(w);
}
END_TEST

START_TEST(a_larger_demand_drops_blocks_too_small)
{
	struct pe_warm *w = pe_warm_new(9 * MIB, HOUR_S);
	ck_assert_ptr_null(pe_warm_take(w, 4 * MIB));
	ck_assert_ptr_null(pe_warm_take(w, 4 * MIB));
	ck_assert_int_eq(pe_warm_fill(w), 1);
	ck_assert_int_eq(pe_warm_fill(w), 1);
	ck_assert_uint_eq(stats_of(w).blocks, 2);
	ck_assert_ptr_null(pe_warm_take(w, 6 * MIB)); /* 4 + 4 + 6 > 9: both 4 MiB blocks make room */
	struct pe_warm_stats s = stats_of(w);
	ck_assert_uint_eq(s.dropped, 2);
	ck_assert_uint_eq(s.blocks, 0);
	ck_assert_int_eq(pe_warm_fill(w), 1);
	s = stats_of(w);
	ck_assert_uint_eq(s.blocks, 1);
	ck_assert_uint_le(s.bytes, 9 * MIB);
	char *p = pe_warm_take(w, 6 * MIB);
	ck_assert_ptr_nonnull(p);
	free(p);
	pe_warm_free(w);
}
END_TEST

/* Making room for a take's replacement gives back only ready blocks too small for its size: a
 * block that serves the size may still be below its bound (pe_mem_bound counts the allocator's
 * worst rounding), and is kept. Two blocks made as a take's replacement is (pe_mem_first_block)
 * serve n, a few bytes less than their size, while n's bound is past their size; the limit holds
 * both but, after a hit, not n's bound beside the one left, so there is no room for a
 * replacement. The blocks come back through pe_warm_give, so the case holds for any allocator's
 * rounding (glibc's mapped blocks hold a page more than asked, AddressSanitizer's what was asked). */
START_TEST(blocks_that_serve_the_size_are_kept_when_there_is_no_room)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024); /* as posencd: each block mapped alike */
	char *a = pe_mem_first_block(3 * MIB), *b = pe_mem_first_block(3 * MIB);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	size_t size = pe_mem_size(a), n = size - 64;
	ck_assert_uint_eq(pe_mem_size(b), size);
	ck_assert_uint_lt(size, pe_mem_bound(n)); /* what makes the case */
	struct pe_warm *w = pe_warm_new(size + (size + pe_mem_bound(n)) / 2, HOUR_S);
	ck_assert_int_eq(pe_warm_give(w, a), 1);
	ck_assert_int_eq(pe_warm_give(w, b), 1);
	ck_assert_uint_eq(stats_of(w).ready_bytes, 2 * size);
	char *p = pe_warm_take(w, n); /* a hit; n's bound does not fit beside the other block */
	ck_assert_ptr_nonnull(p);
	struct pe_warm_stats s = stats_of(w);
	ck_assert_uint_eq(s.dropped, 0);
	ck_assert_uint_eq(s.blocks, 1);
	ck_assert_int_eq(pe_warm_fill(w), 0); /* nothing was mapped */
	char *q = pe_warm_take(w, n);       /* the kept block serves the next answer of the size */
	ck_assert_ptr_nonnull(q);
	ck_assert_uint_eq(stats_of(w).hits, 2);
	free(p);
	free(q);
	pe_warm_free(w);
}
END_TEST

/* A size whose block could never fit (its allocator's rounding past the limit) is not asked: it
 * maps nothing, and the blocks of other sizes stay. */
START_TEST(a_size_that_can_never_fit_asks_nothing)
{
	size_t limit = 4 * MIB + 64;
	struct pe_warm *w = pe_warm_new(limit, HOUR_S);
	ck_assert_ptr_null(pe_warm_take(w, 3 * MIB));
	ck_assert_int_eq(pe_warm_fill(w), 1);
	ck_assert_ptr_null(pe_warm_take(w, 4 * MIB)); /* pe_mem_bound(4 MiB) > 4 MiB + 64 */
	struct pe_warm_stats s = stats_of(w);
	ck_assert_uint_eq(s.misses, 1);
	ck_assert_uint_eq(s.blocks, 1);
	ck_assert_uint_eq(s.dropped, 0);
	char *p = pe_warm_take(w, 3 * MIB);
	ck_assert_ptr_nonnull(p);
	free(p);
	pe_warm_free(w);
}
END_TEST

START_TEST(idle_blocks_are_given_back_by_the_tick)
{
	struct pe_warm *w = pe_warm_new(8 * MIB, 0.1);
	ck_assert_ptr_null(pe_warm_take(w, 2 * MIB));
	ck_assert_ptr_null(pe_warm_take(w, 2 * MIB));
	ck_assert_int_eq(pe_warm_fill(w), 1); /* one written, one still queued */
	ck_assert_int_eq(pe_warm_tick(w), 0); /* not idle yet */
	sleep_ms(150);
	ck_assert_int_eq(pe_warm_tick(w), 1);
	struct pe_warm_stats s = stats_of(w);
	ck_assert_uint_eq(s.blocks, 0);
	ck_assert_uint_eq(s.bytes, 0);
	ck_assert_uint_eq(s.dropped, 2); /* the queued one too */
	ck_assert_int_eq(pe_warm_tick(w), 0);
	ck_assert_int_eq(pe_warm_fill(w), 0); /* nothing left to write until a take asks again */
	ck_assert_ptr_null(pe_warm_take(w, 2 * MIB));
	ck_assert_int_eq(pe_warm_fill(w), 1);
	pe_warm_free(w);
}
END_TEST

static void *run(void *w)
{
	pe_warm_run(w);
	return NULL;
}

/* Polls up to 10 s for the filler to have written `made` blocks. */
static int wait_made(struct pe_warm *w, uint64_t made)
{
	for (int i = 0; i < 1000; i++) {
		if (stats_of(w).made >= made)
			return 1;
		sleep_ms(10);
	}
	return 0;
}

START_TEST(the_filler_wakes_on_a_take_and_stops)
{
	struct pe_warm *w = pe_warm_new(8 * MIB, HOUR_S);
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, run, w), 0);
	sleep_ms(20);
	ck_assert_uint_eq(stats_of(w).made, 0); /* asleep until asked */
	ck_assert_ptr_null(pe_warm_take(w, 3 * MIB));
	ck_assert_msg(wait_made(w, 1), "the filler wrote the block the take mapped");
	char *p = pe_warm_take(w, 3 * MIB);
	ck_assert_ptr_nonnull(p);
	free(p);
	ck_assert_msg(wait_made(w, 2), "and its replacement");
	struct pe_warm_stats s = stats_of(w);
	ck_assert_uint_eq(s.blocks, 1);
	ck_assert_uint_eq(s.ready_bytes, s.bytes);
	pe_warm_stop(w);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	pe_warm_free(w);
}
END_TEST

/* Stopped while blocks wait: the filler returns, and pe_warm_free frees what is left. */
START_TEST(stop_leaves_queued_blocks_to_free)
{
	struct pe_warm *w = pe_warm_new(64 * MIB, HOUR_S);
	for (int i = 0; i < 6; i++)
		ck_assert_ptr_null(pe_warm_take(w, 8 * MIB));
	pe_warm_stop(w);
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, run, w), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(stats_of(w).made, 0);
	ck_assert_ptr_null(pe_warm_take(w, 8 * MIB)); /* stopped: maps nothing more */
	ck_assert_uint_le(stats_of(w).bytes, 6 * pe_mem_bound(8 * MIB + MIB));
	pe_warm_free(w);
}
END_TEST

/* Takes from several threads at once, each mapping a block of a new size while no filler runs (a
 * starved one): never more than 16 places, never past the limit (two takes that each saw one
 * place left used to write past the lists: UBSan's bounds check, or a crash). */
struct racer {
	struct pe_warm *w;
	int id;
};

static void *race_takes(void *arg)
{
	struct racer *r = arg;
	for (int i = 0; i < 60; i++) {
		char *p = pe_warm_take(r->w, 2 * MIB + ((size_t)r->id * 60 + (size_t)i) * 4096);
		free(p);
	}
	return NULL;
}

START_TEST(takes_at_once_hold_at_most_sixteen_places)
{
	struct pe_warm *w = pe_warm_new((size_t)1 << 30, HOUR_S);
	pthread_t t[4];
	struct racer r[4];
	for (int i = 0; i < 4; i++) {
		r[i] = (struct racer){w, i};
		ck_assert_int_eq(pthread_create(&t[i], NULL, race_takes, &r[i]), 0);
	}
	size_t most = 0;
	for (int k = 0; k < 200; k++) {
		size_t p = stats_of(w).places;
		most = p > most ? p : most;
	}
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
	struct pe_warm_stats s = stats_of(w);
	ck_assert_uint_le(most, 16);
	ck_assert_uint_eq(s.places, 16);
	ck_assert_uint_le(s.bytes, (size_t)1 << 30);
	int made = 0;
	while (pe_warm_fill(w))
		made++;
	ck_assert_int_eq(made, 16);
	ck_assert_uint_eq(stats_of(w).blocks, 16);
	pe_warm_free(w);
}
END_TEST

/* Sixteen small blocks hold every place: a larger size gives back the smallest to be mapped. */
START_TEST(a_full_set_of_small_blocks_makes_way_for_a_larger_one)
{
	struct pe_warm *w = pe_warm_new((size_t)1 << 30, HOUR_S);
	for (int i = 0; i < 20; i++)
		ck_assert_ptr_null(pe_warm_take(w, 2 * MIB));
	while (pe_warm_fill(w))
		;
	ck_assert_uint_eq(stats_of(w).blocks, 16);
	ck_assert_ptr_null(pe_warm_take(w, 8 * MIB));
	struct pe_warm_stats s = stats_of(w);
	ck_assert_uint_eq(s.dropped, 1);
	ck_assert_uint_eq(s.places, 16);
	ck_assert_int_eq(pe_warm_fill(w), 1);
	char *p = pe_warm_take(w, 8 * MIB);
	ck_assert_ptr_nonnull(p);
	free(p);
	pe_warm_free(w);
}
END_TEST

/* A written block more than twice the size asked is not shrunk for it: the answers of its own
 * size would miss it, and the filler write it again (an attack alternated 100 MiB tables with
 * ~3 MiB ones, and every 100 MiB one missed). The small take maps its own size instead. */
START_TEST(a_far_larger_block_is_kept_for_its_own_size)
{
	struct pe_warm *w = pe_warm_new(64 * MIB, HOUR_S);
	ck_assert_ptr_null(pe_warm_take(w, 12 * MIB));
	ck_assert_int_eq(pe_warm_fill(w), 1);
	ck_assert_ptr_null(pe_warm_take(w, 3 * MIB)); /* a miss, though the 12 MiB block fits */
	struct pe_warm_stats s = stats_of(w);
	ck_assert_uint_eq(s.blocks, 1);
	ck_assert_uint_ge(s.ready_bytes, 12 * MIB);
	ck_assert_int_eq(pe_warm_fill(w), 1); /* its own size, mapped by the miss */
	char *small = pe_warm_take(w, 3 * MIB);
	ck_assert_ptr_nonnull(small);
	ck_assert_uint_lt(pe_mem_size(small), 4 * MIB);
	char *big = pe_warm_take(w, 12 * MIB); /* still there for its size */
	ck_assert_ptr_nonnull(big);
	ck_assert_uint_ge(pe_mem_size(big), 12 * MIB);
	ck_assert_uint_eq(stats_of(w).hits, 2);
	free(small);
	free(big);
	ck_assert_int_eq(pe_warm_fill(w), 1);
	ck_assert_int_eq(pe_warm_fill(w), 1);
	char *half = pe_warm_take(w, 7 * MIB); /* 12 MiB is within twice 7 MiB: served, shrunk */
	ck_assert_ptr_nonnull(half);
	ck_assert_uint_lt(pe_mem_size(half), 8 * MIB);
	free(half);
	pe_warm_free(w);
}
END_TEST

/* Stale blocks too large to serve a take give it their room, largest first, when it has none: two
 * 7 MiB blocks an answer gave back fill a 16 MiB reserve, and without that every 3 MiB take after
 * them would miss and map nothing for as long as takes come (the idle tick never runs out). They
 * are stale once PE_WARM_STALE_TAKES takes in a row passed them over. */
START_TEST(stale_blocks_too_large_to_serve_a_take_make_room_for_it)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024); /* as posencd: each block mapped alike */
	struct pe_warm *w = pe_warm_new(16 * MIB, HOUR_S);
	char *big[3] = {pe_mem_first_block(7 * MIB), pe_mem_first_block(7 * MIB), pe_mem_first_block(9 * MIB)};
	ck_assert_int_eq(pe_warm_give(w, big[0]), 1);
	ck_assert_int_eq(pe_warm_give(w, big[1]), 1);
	ck_assert_int_eq(pe_warm_give(w, big[2]), 0); /* no room for it */
	free(big[2]);
	for (int i = 1; i < PE_WARM_STALE_TAKES; i++) {
		ck_assert_ptr_null(pe_warm_take(w, 3 * MIB)); /* 7 MiB is past twice 3 MiB: a miss */
		ck_assert_uint_eq(stats_of(w).dropped, 0);  /* not stale yet: no room, nothing mapped */
		ck_assert_int_eq(pe_warm_fill(w), 0);
	}
	ck_assert_ptr_null(pe_warm_take(w, 3 * MIB));
	struct pe_warm_stats s = stats_of(w);
	ck_assert_uint_eq(s.dropped, 1); /* one 7 MiB block was enough room */
	ck_assert_uint_eq(s.blocks, 1);
	ck_assert_int_eq(pe_warm_fill(w), 1); /* the 3 MiB replacement */
	char *p = pe_warm_take(w, 3 * MIB);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(stats_of(w).hits, 1);
	char *q = pe_warm_take(w, 6 * MIB); /* the 7 MiB block left serves its own sizes still */
	ck_assert_ptr_nonnull(q);
	ck_assert_uint_eq(stats_of(w).hits, 2);
	free(p);
	free(q);
	pe_warm_free(w);
}
END_TEST

/* A large and a small size alternating in a reserve that cannot hold both: the large one keeps
 * its block, which every other take uses, and the small one misses. Had the small take given the
 * large block back for its own, each would give back the other's and every take would miss. */
START_TEST(a_block_taken_every_other_take_is_not_given_back_for_a_smaller_one)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	struct pe_warm *w = pe_warm_new(16 * MIB, HOUR_S);
	ck_assert_ptr_null(pe_warm_take(w, 14 * MIB));
	ck_assert_int_eq(pe_warm_fill(w), 1);
	for (int i = 0; i < 3 * PE_WARM_STALE_TAKES; i++) {
		ck_assert_ptr_null(pe_warm_take(w, 3 * MIB));
		ck_assert_int_eq(pe_warm_fill(w), 0); /* nothing was mapped for it */
		char *p = pe_warm_take(w, 14 * MIB);
		ck_assert_ptr_nonnull(p);
		free(p);
		ck_assert_int_eq(pe_warm_fill(w), 1); /* the 14 MiB replacement */
	}
	struct pe_warm_stats s = stats_of(w);
	ck_assert_uint_eq(s.hits, 3 * PE_WARM_STALE_TAKES);
	ck_assert_uint_eq(s.dropped, 0);
	pe_warm_free(w);
}
END_TEST

/* An answer as posencd's: its block from the reserve when one serves it (1), else a new one; the
 * filler done before the next; the block given back when the answer is done with. */
/* A written block of `bytes` the reserve keeps. */
static void give_written(struct pe_warm *w, size_t bytes)
{
	char *p = pe_mem_first_block(bytes);
	ck_assert_ptr_nonnull(p);
	memset(p, 1, bytes);
	ck_assert_int_eq(pe_warm_give(w, p), 1);
}

/* One answer of `bytes`: taken from the reserve (1) or new memory (0), written, and given back,
 * the filler writing what the take queued before the give (a CPU idle for it) or after it. */
static int answer_in_order(struct pe_warm *w, size_t bytes, int fill_first)
{
	char *p = pe_warm_take(w, bytes);
	int hit = p != NULL;
	if (!p)
		p = pe_mem_first_block(bytes);
	ck_assert_ptr_nonnull(p);
	memset(p, 1, bytes);
	while (fill_first && pe_warm_fill(w))
		;
	if (!pe_warm_give(w, p))
		free(p);
	while (pe_warm_fill(w))
		;
	return hit;
}

static int answer(struct pe_warm *w, size_t bytes) { return answer_in_order(w, bytes, 1); }

/* How long a block too large for the takes passing it over waits is learnt: a 14 MiB answer
 * every ninth, 3 MiB ones between, lost its block at the eighth small take, came back at once
 * and missed, and so at every round no take hit. After one such miss the large block waits
 * longer than the gap its size comes back after, and every large answer hits; once that size
 * stops coming, the small ones get the room again. The wait stays: halved it would be below
 * PE_WARM_STALE_TAKES, and a period of two gaps (8 and 15 small answers) would then lose the
 * large block at both. */
START_TEST(a_block_given_back_too_soon_waits_longer_next_time)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	struct pe_warm *w = pe_warm_new(16 * MIB, HOUR_S);
	int large_hits = 0;
	for (int round = 0; round < 10; round++) {
		int hit = answer(w, 14 * MIB);
		if (round >= 2)
			large_hits += hit;
		for (int i = 0; i < PE_WARM_STALE_TAKES; i++)
			answer(w, 3 * MIB);
	}
	ck_assert_int_eq(large_hits, 8);
	/* the large size came back 9 takes after its block was last ready */
	ck_assert_uint_eq(stats_of(w).stale_after, PE_WARM_STALE_TAKES + 2);
	int small_hits = 0;
	for (int i = 0; i < 4 * PE_WARM_STALE_TAKES; i++)
		small_hits += answer(w, 3 * MIB);
	ck_assert_int_ge(small_hits, 2 * PE_WARM_STALE_TAKES);
	ck_assert_uint_eq(stats_of(w).stale_after, PE_WARM_STALE_TAKES + 2);
	pe_warm_free(w);
}
END_TEST

/* The wait grows with each drop that came too soon and halves after a drop that proved right: 14
 * MiB after 11 small answers (its block dropped at the 8th, back 4 takes later: waits 13), then
 * after 15 (dropped at the 13th, back 3 later: waits 17), then small ones only (dropped at the
 * 17th, and the small takes after it saved more than its bytes: halved to 8). */
START_TEST(a_drop_proved_right_halves_the_wait)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	struct pe_warm *w = pe_warm_new(16 * MIB, HOUR_S);
	const int smalls[] = {11, 15};
	const uint64_t learnt[] = {13, 17};
	answer(w, 14 * MIB);
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < smalls[k]; i++)
			answer(w, 3 * MIB);
		ck_assert_int_eq(answer(w, 14 * MIB), 0);
		ck_assert_uint_eq(stats_of(w).stale_after, learnt[k]);
	}
	for (int i = 0; i < 4 * 17; i++)
		answer(w, 3 * MIB);
	ck_assert_uint_eq(stats_of(w).stale_after, 8);
	pe_warm_free(w);
}
END_TEST

/* What one drop that came too soon teaches is bounded by the bytes: a 12 MiB block passed over
 * by 200 answers of 2.1 MiB (room for both), then dropped for one of 4.5 MiB, its size asked right
 * after. It waits no longer than 8 takes for each whole 4.5 MiB its bytes hold, plus 8 (24), not
 * the 202 takes it sat: holding it longer costs those takes more than the one it would save.
 * A wait of 202 would hold it through 200 more 4.5 MiB answers, all missing. */
START_TEST(one_early_drop_teaches_no_more_than_its_bytes_are_worth)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	struct pe_warm *w = pe_warm_new(16 * MIB, HOUR_S);
	const size_t big = 12 * MIB, small = 21 * MIB / 10, mid = 9 * MIB / 2;
	answer(w, big);
	for (int i = 0; i < 200; i++)
		answer(w, small);
	ck_assert_int_eq(answer(w, mid), 0); /* makes room: the stale 12 MiB block goes */
	ck_assert_int_eq(answer(w, big), 0);
	ck_assert_uint_eq(stats_of(w).stale_after, PE_WARM_STALE_TAKES * (big / mid + 1));
	int mid_hits = 0;
	for (int i = 0; i < 40; i++)
		mid_hits += answer(w, mid);
	ck_assert_int_ge(mid_hits, 40 - 24 - 2);
	pe_warm_free(w);
}
END_TEST

/* A drop that came too soon never shortens the wait: learnt up to 29 from a 14 MiB size coming
 * back 2 takes after each drop of its block among 3 MiB answers, then dropped for 6 MiB ones,
 * whose bytes would bound a new lesson at 24 (8 for each whole 6 MiB in 14, plus 8), and asked
 * right after: the wait stays 29. */
START_TEST(a_drop_too_soon_never_shortens_the_wait)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	struct pe_warm *w = pe_warm_new(16 * MIB, HOUR_S);
	answer(w, 14 * MIB);
	for (uint64_t learnt = 13; learnt <= 29; learnt += 4) {
		for (uint64_t i = 0; i + 2 < learnt; i++)
			answer(w, 3 * MIB);
		ck_assert_int_eq(answer(w, 14 * MIB), 0);
		ck_assert_uint_eq(stats_of(w).stale_after, learnt);
	}
	for (int i = 0; i < 29; i++)
		answer(w, 6 * MIB);
	ck_assert_int_eq(answer(w, 14 * MIB), 0);
	ck_assert_uint_eq(stats_of(w).stale_after, 29);
	pe_warm_free(w);
}
END_TEST

/* Blocks the idle tick gave back are not drops: a size asked again after it misses because the
 * reserve was idle, and teaches the wait nothing. */
START_TEST(a_miss_after_the_idle_tick_teaches_nothing)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	struct pe_warm *w = pe_warm_new(16 * MIB, 0.1);
	answer(w, 14 * MIB);
	for (int i = 0; i < PE_WARM_STALE_TAKES; i++)
		answer(w, 3 * MIB); /* the 14 MiB block is dropped at the last */
	sleep_ms(150);
	ck_assert_int_eq(pe_warm_tick(w), 1);
	ck_assert_uint_eq(stats_of(w).blocks, 0);
	ck_assert_int_eq(answer(w, 14 * MIB), 0);
	ck_assert_uint_eq(stats_of(w).stale_after, PE_WARM_STALE_TAKES);
	pe_warm_free(w);
}
END_TEST

/* A written block its owner is done with joins the ready ones as it is: the next take of its size
 * gets that very block, and no filler work was needed for it. */
START_TEST(a_given_block_serves_the_next_take)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024); /* as posencd */
	struct pe_warm *w = pe_warm_new(16 * MIB, HOUR_S);
	size_t n = 3 * MIB;
	char *p = pe_mem_first_block(n);
	ck_assert_ptr_nonnull(p);
	memset(p, 0x33, n); /* an answer, written to its end */
	ck_assert_int_eq(pe_warm_give(w, p), 1);
	struct pe_warm_stats s = stats_of(w);
	ck_assert_uint_eq(s.recycled, 1);
	ck_assert_uint_eq(s.blocks, 1);
	ck_assert_uint_eq(s.ready_bytes, pe_mem_size(p));
	ck_assert_uint_eq(s.bytes, s.ready_bytes);
	ck_assert_uint_eq(s.made, 0);
	char *q = pe_warm_take(w, n);
	ck_assert_ptr_eq(q, p);
	ck_assert_uint_eq(stats_of(w).hits, 1);
	free(q);
	pe_warm_free(w);
}
END_TEST

/* What the reserve does not keep stays the caller's: no reserve, no block, a block below
 * PE_WARM_MIN or not 64-byte aligned (no SIMD writer could use it), one past the room left in
 * bytes or places, any block once stopped. */
START_TEST(a_given_block_is_kept_only_where_it_fits)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	struct pe_warm *w = pe_warm_new(8 * MIB, HOUR_S);
	char *small = pe_mem_first_block(PE_WARM_MIN - 4096);
	char *plain = malloc(3 * MIB); /* a mapped chunk: 16 bytes past a page */
	char *a = pe_mem_first_block(3 * MIB), *b = pe_mem_first_block(3 * MIB), *c = pe_mem_first_block(3 * MIB);
	ck_assert_ptr_nonnull(small);
	ck_assert_ptr_nonnull(plain);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(pe_warm_give(NULL, a), 0);
	ck_assert_int_eq(pe_warm_give(w, NULL), 0);
	ck_assert_int_eq(pe_warm_give(w, small), 0);
	if ((uintptr_t)plain % 64 != 0)
		ck_assert_int_eq(pe_warm_give(w, plain), 0);
	ck_assert_int_eq(pe_warm_give(w, a), 1);
	ck_assert_int_eq(pe_warm_give(w, b), 1);
	ck_assert_int_eq(pe_warm_give(w, c), 0); /* 3 x 3 MiB > 8 MiB */
	ck_assert_uint_eq(stats_of(w).recycled, 2);
	ck_assert_uint_le(stats_of(w).bytes, 8 * MIB);
	pe_warm_stop(w);
	char *d = pe_warm_take(w, 3 * MIB); /* a take still serves; a give no longer keeps */
	ck_assert_ptr_nonnull(d);
	ck_assert_int_eq(pe_warm_give(w, d), 0);
	free(small);
	if ((uintptr_t)plain % 64 != 0 || !pe_warm_give(w, plain))
		free(plain);
	free(c);
	free(d);
	pe_warm_free(w); /* frees the block it kept (ASan's leak check) */

	struct pe_warm *many = pe_warm_new((size_t)1 << 30, HOUR_S);
	char *blocks[17];
	for (int i = 0; i < 17; i++) {
		blocks[i] = pe_mem_first_block(2 * MIB);
		ck_assert_ptr_nonnull(blocks[i]);
		ck_assert_int_eq(pe_warm_give(many, blocks[i]), i < 16);
	}
	ck_assert_uint_eq(stats_of(many).places, 16);
	free(blocks[16]);
	pe_warm_free(many);
}
END_TEST

/* With no room left, a given block takes the room of a queued one of no more bytes, which the
 * filler has yet to write (it is given back unwritten): the reserve then holds written memory
 * where it held a promise, and the filler has one block less to write. A block past that room is
 * refused. A queued block with headroom keeps its room from a given block of its take's size: a
 * growing table's next take needs the headroom. */
START_TEST(a_given_block_takes_the_room_of_one_not_yet_written)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	size_t n = 3 * MIB, made = n + n / PE_WARM_HEADROOM;
	size_t limit = pe_mem_bound(n) + 64 * 1024; /* one block of n, no room for its headroom */
	struct pe_warm *w = pe_warm_new(limit, HOUR_S);
	ck_assert_ptr_null(pe_warm_take(w, n)); /* a block of n queued for the filler: no room for another */
	size_t queued = stats_of(w).bytes;
	ck_assert_uint_ge(queued, n);
	ck_assert_uint_lt(queued, made);
	char *big = pe_mem_first_block(n + MIB); /* past the room even in the queued block's place */
	ck_assert_ptr_nonnull(big);
	memset(big, 1, n + MIB);
	ck_assert_int_eq(pe_warm_give(w, big), 0);
	free(big);
	char *p = pe_mem_first_block(n);
	ck_assert_ptr_nonnull(p);
	memset(p, 1, n);
	size_t given = pe_mem_size(p);
	ck_assert_int_eq(pe_warm_give(w, p), 1);
	struct pe_warm_stats s = stats_of(w);
	ck_assert_uint_eq(s.recycled, 1);
	ck_assert_uint_eq(s.dropped, 1);
	ck_assert_uint_eq(s.blocks, 1);
	ck_assert_uint_eq(s.bytes, given); /* written where the promise was */
	ck_assert_int_eq(pe_warm_fill(w), 0);
	pe_warm_free(w);

	w = pe_warm_new(pe_mem_bound(made) + 64 * 1024, HOUR_S); /* room for the headroom, no more */
	ck_assert_ptr_null(pe_warm_take(w, n));
	ck_assert_uint_ge(stats_of(w).bytes, made);
	p = pe_mem_first_block(n);
	ck_assert_ptr_nonnull(p);
	memset(p, 1, n);
	ck_assert_int_eq(pe_warm_give(w, p), 0);
	free(p);
	ck_assert_uint_eq(stats_of(w).dropped, 0);
	ck_assert_int_eq(pe_warm_fill(w), 1);
	p = pe_warm_take(w, n + 6 * 1024); /* the next, larger take of a growing table */
	ck_assert_ptr_nonnull(p);
	free(p);
	pe_warm_free(w);
}
END_TEST

/* A table asked for again a row longer each time (4 MiB and 6 KiB more at each take): every take
 * but the first is served by the block the one before it mapped, with an eighth more than it
 * asked, also when each answer is given back before the filler writes that block (both CPUs
 * busy: the answer must not take the headroom block's room). Headroom never costs a block of
 * another size its room: beside a 2.2 MiB block, in a limit that holds 2.2 and 5 MiB but not 2.2
 * and 5.6, a 5 MiB take's replacement is 5 MiB, and the 2.2 MiB block still serves. */
START_TEST(a_table_grown_by_a_row_is_served_by_the_last_ones_replacement)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	for (int fill_first = 1; fill_first >= 0; fill_first--) {
		struct pe_warm *w = pe_warm_new(16 * MIB, HOUR_S);
		size_t n = 4 * MIB;
		int hits = 0;
		for (int i = 0; i < 40; i++, n += 6 * 1024)
			hits += answer_in_order(w, n, fill_first);
		ck_assert_msg(hits == 39, "%s: %d hits of 40", fill_first ? "filled first" : "given first", hits);
		ck_assert_uint_le(stats_of(w).bytes, 16 * MIB);
		pe_warm_free(w);
	}
	size_t small = 22 * MIB / 10, five = 5 * MIB; /* a 5 MiB block does not serve 2.2 (not half) */
	struct pe_warm *w = pe_warm_new(pe_mem_bound(small) + pe_mem_bound(five) + 64 * 1024, HOUR_S);
	give_written(w, small);
	give_written(w, five);
	ck_assert_int_eq(answer(w, five), 1);
	ck_assert_int_eq(answer(w, small), 1);
	ck_assert_uint_eq(stats_of(w).misses, 0);
	pe_warm_free(w);
}
END_TEST

/* A buffer with a reserve: its first block of 2 MiB or more comes from there (the size mapped by
 * the first buffer's miss), and its budget holds exactly what the block holds. */
START_TEST(a_buffers_first_block_comes_from_the_reserve)
{
	struct pe_warm *w = pe_warm_new(16 * MIB, HOUR_S);
	struct pe_budget *bg = pe_budget_new(64 * MIB);
	size_t n = 5 * MIB + 123;
	struct pe_buf b;
	pe_buf_init(&b, 64 * MIB);
	pe_buf_set_budget(&b, bg);
	pe_buf_set_warm(&b, w);
	ck_assert_int_eq(pe_buf_reserve(&b, n), 0); /* a miss: a new block */
	ck_assert_uint_eq(stats_of(w).misses, 1);
	pe_buf_destroy(&b);
	ck_assert_int_eq(pe_warm_fill(w), 1);
	pe_buf_init(&b, 64 * MIB);
	pe_buf_set_budget(&b, bg);
	pe_buf_set_warm(&b, w);
	ck_assert_int_eq(pe_buf_reserve(&b, n), 0);
	ck_assert_uint_eq(stats_of(w).hits, 1);
	ck_assert_uint_eq((uintptr_t)b.data % 64, 0);
	ck_assert_msg(resident(b.data, n), "the buffer's pages were written before it got them");
	struct pe_budget_stats st;
	pe_budget_stats(bg, &st);
	ck_assert_uint_eq(st.used, pe_mem_size(b.data));
	memset(b.data, 'x', n);
	b.len = n;
	size_t len = 0;
	char *s = pe_buf_steal(&b, &len);
	ck_assert_uint_eq(len, n);
	ck_assert_int_eq(s[n - 1], 'x');
	pe_budget_give(bg, pe_mem_size(s));
	free(s);
	pe_budget_stats(bg, &st);
	ck_assert_uint_eq(st.used, 0);
	/* Without a reserve (the default), the same buffer asks nothing of it. */
	pe_buf_init(&b, 64 * MIB);
	ck_assert_int_eq(pe_buf_reserve(&b, n), 0);
	pe_buf_destroy(&b);
	ck_assert_uint_eq(stats_of(w).hits + stats_of(w).misses, 2);
	pe_budget_free(bg);
	pe_warm_free(w);
}
END_TEST

static Suite *warm_suite(void)
{
	Suite *s = suite_create("warm");
	TCase *tc = tcase_create("warm");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, no_reserve_below_its_minimum);
	tcase_add_test(tc, a_take_maps_its_size_and_the_filler_writes_it);
	tcase_add_test(tc, fills_to_its_limit_and_no_further);
	tcase_add_test(tc, a_smaller_take_gets_the_smallest_block_shrunk);
	tcase_add_test(tc, a_larger_demand_drops_blocks_too_small);
	tcase_add_test(tc, blocks_that_serve_the_size_are_kept_when_there_is_no_room);
	tcase_add_test(tc, a_size_that_can_never_fit_asks_nothing);
	tcase_add_test(tc, idle_blocks_are_given_back_by_the_tick);
	tcase_add_test(tc, the_filler_wakes_on_a_take_and_stops);
	tcase_add_test(tc, stop_leaves_queued_blocks_to_free);
	tcase_add_test(tc, takes_at_once_hold_at_most_sixteen_places);
	tcase_add_test(tc, a_full_set_of_small_blocks_makes_way_for_a_larger_one);
	tcase_add_test(tc, a_far_larger_block_is_kept_for_its_own_size);
	tcase_add_test(tc, stale_blocks_too_large_to_serve_a_take_make_room_for_it);
	tcase_add_test(tc, a_block_taken_every_other_take_is_not_given_back_for_a_smaller_one);
	tcase_add_test(tc, a_block_given_back_too_soon_waits_longer_next_time);
	tcase_add_test(tc, a_drop_proved_right_halves_the_wait);
	tcase_add_test(tc, a_drop_too_soon_never_shortens_the_wait);
	tcase_add_test(tc, one_early_drop_teaches_no_more_than_its_bytes_are_worth);
	tcase_add_test(tc, a_miss_after_the_idle_tick_teaches_nothing);
	tcase_add_test(tc, a_given_block_serves_the_next_take);
	tcase_add_test(tc, a_given_block_is_kept_only_where_it_fits);
	tcase_add_test(tc, a_given_block_takes_the_room_of_one_not_yet_written);
	tcase_add_test(tc, a_table_grown_by_a_row_is_served_by_the_last_ones_replacement);
	tcase_add_test(tc, a_buffers_first_block_comes_from_the_reserve);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(warm_suite)
