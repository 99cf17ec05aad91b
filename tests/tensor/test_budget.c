/* The byte budget's waiting and shares (src/tensor/budget.c): one job waits for room while the
 * bytes it wants are kept back from other takes (but small ones), a second would-be waiter is
 * refused at once, a wait ends at its time or its thread's deadline; two jobs that each hold
 * half the budget and need more end with one served, not both refused; a share holds its bytes
 * on the parent, spills past itself, hands an answer over and gives the rest back when it
 * closes. pe_mem_bound holds every block; pe_mem_keep_headroom grows an arena in one step.
 * (take/charge/give alone: test_buf.c.) */
#include "posenc/core.h"
#include "posenc/budget.h"
#include "support/pe_check.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <time.h>

/* Sizes in units of 1/64 of PE_BUDGET_SMALL_TAKE (1 KiB), so that B(100) and more are takes a
 * waiter's bytes are kept back from, and a take of a few bytes is not. */
#define B(n) ((size_t)(n) * (PE_BUDGET_SMALL_TAKE / 64))

static size_t used_of(struct pe_budget *g)
{
	struct pe_budget_stats st;
	pe_budget_stats(g, &st);
	return st.used;
}

static void nap_ms(int ms)
{
	struct timespec ts = {0, ms * 1000000L};
	nanosleep(&ts, NULL);
}

/* Until a waiter keeps its bytes back: a take of probe, which fits beside what is used, is refused. */
static int waiter_registered(struct pe_budget *g, size_t probe)
{
	double end = pe_monotonic() + 10;
	while (pe_monotonic() < end) {
		if (pe_budget_take(g, probe) != 0)
			return 1;
		pe_budget_give(g, probe);
		nap_ms(1);
	}
	return 0;
}

struct waiter {
	struct pe_budget *g;
	size_t n;
	int rc;
	struct pe_budget *share; /* when it opens a share instead */
	int as_share;
};

static void *wait_cb(void *arg)
{
	struct waiter *w = arg;
	double until = pe_monotonic() + 10;
	if (w->as_share)
		w->share = pe_budget_share_open(w->g, w->n, until, &w->rc);
	else
		w->rc = pe_budget_take_wait(w->g, w->n, until);
	return NULL;
}

#if !defined(PE_SANITIZED) /* the headroom's helpers: glibc's arenas only */
/* The end of the writable part of the mapping that holds p (/proc/self/maps): for a block in a
 * thread's own arena, how far glibc has grown that arena (its mprotect'd part). 0: not found. */
static uintptr_t writable_end(const void *p)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	uintptr_t end = 0, at = (uintptr_t)p;
	while (f && !end && fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		char perms[8];
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && lo <= at && at < hi && perms[1] == 'w')
			end = hi;
	}
	if (f)
		fclose(f);
	return end;
}

struct headroom_seen {
	size_t top, made, after;
};

#define KEPT_MAX 512

/* In a new thread (its own arena, which starts grown 128 KiB past its first block): small blocks
 * kept until the arena's grown part ends within 8 KiB of the last one; then how far it is grown
 * past that block after pe_mem_keep_headroom (called as after every cached body), and after 48 KiB
 * more of small blocks. */
static void *headroom_cb(void *arg)
{
	struct headroom_seen *seen = arg;
	static void *kept[KEPT_MAX];
	int n = 0;
	char *last = NULL;
	while (n < KEPT_MAX - 12 && (!last || writable_end(last) - (uintptr_t)last > 8192))
		kept[n++] = last = malloc(4000);
	seen->top = writable_end(last) - (uintptr_t)last;
	for (int i = 0; i < 8; i++)
		pe_mem_keep_headroom();
	seen->made = writable_end(last) - (uintptr_t)last;
	for (int i = 0; i < 12; i++)
		kept[n++] = malloc(4000);
	seen->after = writable_end(last) - (uintptr_t)last;
	while (n)
		free(kept[--n]);
	return NULL;
}
#endif

/* pe_mem_keep_headroom grows a thread's arena in one step well past its top, so the small blocks
 * kept next (a cache filling with small tables) do not each grow it by a system call: 48 KiB of
 * them leave its grown part where it was. glibc's arenas only (ASan brings its own allocator). */
START_TEST(keep_headroom_grows_the_arena_once)
{
#if defined(PE_SANITIZED)
	printf("keep_headroom_grows_the_arena_once: skipped under a sanitizer (its own allocator)\n");
#else
	struct headroom_seen seen = {0};
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, headroom_cb, &seen), 0);
	pthread_join(t, NULL);
	printf("keep_headroom: grown %zu bytes past the last block, %zu after headroom, %zu after 48 KiB kept\n",
	       seen.top, seen.made, seen.after);
	ck_assert_msg(seen.top <= 8192, "small blocks did not reach the arena's top: %zu bytes left", seen.top);
	ck_assert_msg(seen.made >= (size_t)64 << 10, "headroom: the arena is grown only %zu bytes past its top",
		      seen.made);
	ck_assert_msg(seen.after == seen.made, "48 KiB of small blocks grew the arena again: %zu, then %zu",
		      seen.made, seen.after);
#endif
}
END_TEST

/* pe_mem_bound(n) holds whatever block the allocator gives for n bytes: fresh, grown by realloc,
 * shrunk by realloc from less than twice n as a doubling buffer is (a chunk kept whole rather than
 * split, a mapping kept mapped), carved from what earlier frees left,
 * heap-sized and mapped (from 128 KiB, M_MMAP_THRESHOLD as posencd sets it), at sizes a few bytes
 * either side of a page boundary, where a mapped block's header takes it into the next page. */
START_TEST(mem_bound_holds_every_block)
{
	static const size_t sizes[] = {0, 1, 15, 16, 17, 24, 40, 100, 1000, 1023, 1024, 4076, 4079, 4080, 4096,
				       8191, 65535, 131071, 131072, 131073, 135100, 135148, 135160, 139200, 139250,
				       200000, 261992, 262008, 286568, 409448, 528232, 1 << 20, (1 << 20) + 1,
				       (3 << 20) - 100, (3 << 20) - 20, 3 << 20};
	void *churn[64] = {0};
	mallopt(M_MMAP_THRESHOLD, 128 * 1024); /* as posencd: fixed, not raised by each mapped block freed */
	for (size_t r = 0; r < 3; r++)
		for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
			size_t n = sizes[i];
			for (size_t k = 0; k < 64; k++) { /* leave holes of assorted sizes behind */
				free(churn[k]);
				churn[k] = (k + r + i) % 3 ? malloc(16 * (k + 1) + r) : NULL;
			}
			char *fresh = malloc(n + 1);
			char *grown = malloc(n / 2 + 1);
			char *shrunk = malloc(n + n / 2 + 100);
			char *aligned = aligned_alloc(64, (n + 64) / 64 * 64); /* pe_buf's first block: n + 1 up to 64 */
			char *ashrunk = aligned_alloc(64, (n + n / 2 + 127) / 64 * 64);
			ck_assert(fresh && grown && shrunk && aligned && ashrunk);
			char *g = realloc(grown, n + 1), *s = realloc(shrunk, n + 1), *as = realloc(ashrunk, n + 1);
			ck_assert(g && s && as);
			size_t bound = pe_mem_bound(n + 1), abound = bound; /* a body's figure counts n + 1 */
			ck_assert_msg(pe_mem_size(fresh) <= bound, "fresh %zu: %zu > %zu", n, pe_mem_size(fresh), bound);
			ck_assert_msg(pe_mem_size(g) <= bound, "grown %zu: %zu > %zu", n, pe_mem_size(g), bound);
			ck_assert_msg(pe_mem_size(s) <= bound, "shrunk %zu: %zu > %zu", n, pe_mem_size(s), bound);
			ck_assert_msg(pe_mem_size(as) <= bound, "aligned, shrunk %zu: %zu > %zu", n, pe_mem_size(as), bound);
			ck_assert_msg(pe_mem_size(aligned) <= abound, "aligned %zu: %zu > %zu", n, pe_mem_size(aligned), abound);
			free(aligned);
			free(as);
			ck_assert_uint_ge(bound, n + 1);
			ck_assert_uint_le(bound, n + 1 + 4096 + 256); /* a bound, not a guess */
			if (n + 1 >= 128 * 1024) /* past the threshold the bound is the mapping's whole pages */
				ck_assert_uint_le(bound - pe_mem_size(fresh), 4096 + 256);
			else if (n + 1 < 64 * 1024) /* below half of it, the heap's rounding alone */
				ck_assert_uint_le(bound, n + 1 + 128);
			free(fresh);
			free(g);
			free(s);
		}
	for (size_t k = 0; k < 64; k++)
		free(churn[k]);
	ck_assert_uint_eq(pe_mem_bound(SIZE_MAX - 5), SIZE_MAX);
}
END_TEST

/* 800 of g's 1000 held by two "bodies" of 400, then w waiting for its 500 on a thread of its own,
 * its bytes kept back (a take of 100, which fits beside the 800, is refused). */
static pthread_t holders_and_waiter(struct pe_budget *g, struct waiter *w)
{
	pthread_t t;
	ck_assert_int_eq(pe_budget_take(g, B(400)), 0);
	ck_assert_int_eq(pe_budget_take(g, B(400)), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, wait_cb, w), 0);
	ck_assert_msg(waiter_registered(g, B(100)), "the waiter's 500 are kept back: 800 + 100 refused");
	return t;
}

START_TEST(take_wait_without_waiting)
{
	struct pe_budget *g = pe_budget_new(B(1000));
	ck_assert_int_eq(pe_budget_take_wait(g, B(600), pe_monotonic() + 5), 0); /* room now: no wait */
	ck_assert_uint_eq(used_of(g), B(600));
	ck_assert_int_eq(pe_budget_take_wait(g, B(1001), pe_monotonic() + 5), PE_ETOOBIG); /* never fits */
	ck_assert_int_eq(pe_budget_take_wait(NULL, SIZE_MAX, 0), 0);
	ck_assert_int_eq(pe_budget_take_wait(g, 0, 0), 0);
	double t0 = pe_monotonic();
	ck_assert_int_eq(pe_budget_take_wait(g, B(500), t0 + 0.05), PE_EBUSY); /* nobody gives: its time ends */
	ck_assert(pe_monotonic() >= t0 + 0.05);
	ck_assert_int_eq(pe_budget_take(g, B(400)), 0); /* nothing kept back once it gave up */
	ck_assert_uint_eq(used_of(g), B(1000));
	pe_budget_free(g);
}
END_TEST

/* A waiter whose thread's deadline passes stops waiting with PE_ETIMEOUT, long before its own
 * time, and keeps nothing back afterwards. */
START_TEST(take_wait_stops_at_deadline)
{
	struct pe_budget *g = pe_budget_new(B(1000));
	ck_assert_int_eq(pe_budget_take(g, B(900)), 0);
	double t0 = pe_monotonic();
	pe_cancel_set_deadline(t0 + 0.1);
	int rc = pe_budget_take_wait(g, B(500), t0 + 20);
	pe_cancel_set_deadline(0);
	ck_assert_int_eq(rc, PE_ETIMEOUT);
	ck_assert_msg(pe_monotonic() - t0 < 10, "stopped at the deadline, not at its own time");
	ck_assert_int_eq(pe_budget_take(g, B(100)), 0);
	pe_budget_free(g);
}
END_TEST

/* A waiter is let through by a give; meanwhile its bytes are kept back from others (but not from
 * takes under PE_BUDGET_SMALL_TAKE), and a second would-be waiter is refused without waiting. */
START_TEST(one_waiter_kept_room)
{
	struct pe_budget *g = pe_budget_new(B(1000));
	struct waiter w = {.g = g, .n = B(500)};
	pthread_t t = holders_and_waiter(g, &w);
	double t0 = pe_monotonic();
	ck_assert_int_eq(pe_budget_take_wait(g, B(100), t0 + 5), PE_EBUSY);
	ck_assert_int_eq(pe_budget_take(g, 4096), 0); /* a small take passes the kept-back bytes */
	pe_budget_give(g, 4096);
	ck_assert_msg(pe_monotonic() - t0 < 2.5, "the second waiter did not wait for its time");
	pe_budget_give(g, B(400)); /* what the refused one held */
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(w.rc, 0);
	ck_assert_uint_eq(used_of(g), B(900));
	ck_assert_int_eq(pe_budget_take(g, B(100)), 0); /* no bytes kept back any more */
	pe_budget_free(g);
}
END_TEST

/* Two jobs, each holding 400 of 1000 as a body and needing 500 more: the one that waits is
 * served once the other, refused, gives its body back. Without the wait both are refused. */
START_TEST(two_bodies_one_served)
{
	struct pe_budget *g = pe_budget_new(B(1000));
	struct waiter a = {.g = g, .n = B(500), .as_share = 1};
	pthread_t t = holders_and_waiter(g, &a);
	int rc;
	ck_assert_ptr_null(pe_budget_share_open(g, B(500), pe_monotonic() + 5, &rc));
	ck_assert_int_eq(rc, PE_EBUSY);
	pe_budget_give(g, B(400));
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(a.rc, 0);
	ck_assert_ptr_nonnull(a.share);
	ck_assert_uint_eq(used_of(g), B(900));
	pe_budget_share_close(a.share);
	ck_assert_uint_eq(used_of(g), B(400));
	pe_budget_free(g);
}
END_TEST

/* A share: its bytes held on the parent from the start; takes within it leave the parent alone,
 * takes past it spill to the parent (and are refused where the parent would refuse them); a give
 * returns spill first; an answer handed over stays on the parent after the share closes. */
START_TEST(share_spills_and_hands_over)
{
	struct pe_budget *g = pe_budget_new(B(1000));
	int rc;
	struct pe_budget *s = pe_budget_share_open(g, B(600), pe_monotonic() + 5, &rc);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(used_of(g), B(600));
	ck_assert_int_eq(pe_budget_take(s, B(500)), 0);
	ck_assert_uint_eq(used_of(g), B(600));
	ck_assert_int_eq(pe_budget_take(s, B(300)), 0); /* past the share: 300 from the parent */
	ck_assert_uint_eq(used_of(g), B(900));
	ck_assert_uint_eq(used_of(s), B(500));
	ck_assert_int_eq(pe_budget_take(s, B(200)), PE_EBUSY); /* the parent has 100 left */
	ck_assert_int_eq(pe_budget_take(s, B(2000)), PE_ETOOBIG);
	pe_budget_give(s, B(300)); /* the spill goes back first */
	ck_assert_uint_eq(used_of(g), B(600));
	ck_assert_uint_eq(used_of(s), B(500));
	void *p = pe_budget_malloc(s, 50, &rc); /* rounded up by the allocator: counted as it holds */
	ck_assert_ptr_nonnull(p);
	size_t held = pe_mem_size(p);
	ck_assert_uint_eq(used_of(s), B(500) + held);
	pe_budget_give(s, B(500));
	pe_budget_share_hand_over(s, held); /* the answer outlives the share */
	ck_assert_uint_eq(used_of(s), 0);
	pe_budget_share_close(s);
	ck_assert_uint_eq(used_of(g), held);
	pe_budget_free_block(g, p);
	ck_assert_uint_eq(used_of(g), 0);
	ck_assert_ptr_null(pe_budget_share_open(NULL, B(100), 0, &rc)); /* no budget: no share, no error */
	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_null(pe_budget_share_open(g, B(1001), pe_monotonic() + 5, &rc));
	ck_assert_int_eq(rc, PE_ETOOBIG);
	ck_assert_uint_eq(used_of(g), 0);
	pe_budget_free(g);
}
END_TEST

static Suite *budget_suite(void)
{
	Suite *s = suite_create("budget");
	TCase *tc = tcase_create("budget");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, mem_bound_holds_every_block);
	tcase_add_test(tc, keep_headroom_grows_the_arena_once);
	tcase_add_test(tc, take_wait_without_waiting);
	tcase_add_test(tc, take_wait_stops_at_deadline);
	tcase_add_test(tc, one_waiter_kept_room);
	tcase_add_test(tc, two_bodies_one_served);
	tcase_add_test(tc, share_spills_and_hands_over);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(budget_suite)
