/* pe_gzip: each output decompresses to its input and is byte for byte what a fresh compressor at
 * the same level writes, on several threads at once and across levels; a thread's compressors are
 * kept (no allocation past the first call at a level), at most PE_GZIP_LEVELS_KEPT of them, and
 * freed when the thread exits. libdeflate's allocations are counted through
 * libdeflate_set_memory_allocator, set before any compressor exists. */
#include "posenc/tensor.h"
#include "support/pe_check.h"

#include <libdeflate.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_long n_alloc, n_free;

static void *count_malloc(size_t n)
{
	void *p = malloc(n);
	if (p)
		atomic_fetch_add(&n_alloc, 1);
	return p;
}

static void count_free(void *p)
{
	if (p)
		atomic_fetch_add(&n_free, 1);
	free(p);
}

static long live(void) { return atomic_load(&n_alloc) - atomic_load(&n_free); }

static void setup(void) { libdeflate_set_memory_allocator(count_malloc, count_free); }

/* Input number seed: len bytes of JSON-like text, rows of numbers with repeats and noise, so that
 * matches, literals and several blocks all occur. */
static char *input(uint64_t seed, size_t *len)
{
	static const size_t sizes[] = {0, 1, 2, 17, 300, 4096, 20000, 70000};
	size_t n = sizes[seed % (sizeof sizes / sizeof sizes[0])];
	char *p = malloc(n + 1);
	uint64_t x = seed * 0x9E3779B97F4A7C15u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[i] = (x >> 60) < 11 ? "[0.12345],\n"[i % 11] : (char)('0' + (x >> 32) % 10);
	}
	*len = n;
	return p;
}

/* Compress input seed at level with pe_gzip; NULL if all is well, else what went wrong. */
static const char *check_one(uint64_t seed, int level)
{
	static const char *const bad_rc = "pe_gzip (or the test's own set-up) failed", *const bad_inflate = "does not decompress to its input",
				 *const bad_bytes = "differs from a fresh compressor's output";
	const char *why = NULL;
	size_t len, got = 0, fresh_len = 0;
	char *in = input(seed, &len);
	char *back = malloc(len + 1);
	struct pe_buf out;
	pe_buf_init(&out, (size_t)1 << 24);
	int rc = pe_buf_append(&out, "x", 1); /* pe_gzip appends after what is there */
	struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
	struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
	size_t bound = c ? libdeflate_gzip_compress_bound(c, len) : 0;
	char *fresh = c && in ? malloc(bound) : NULL;
	if (fresh)
		fresh_len = libdeflate_gzip_compress(c, in, len, fresh, bound);
	if (rc != 0 || !in || !back || !c || !d || !fresh || pe_gzip(&out, in, len, level) != 0)
		why = bad_rc;
	else if (libdeflate_gzip_decompress(d, out.data + 1, out.len - 1, back, len + 1, &got) != LIBDEFLATE_SUCCESS ||
		 got != len || memcmp(back, in, len) != 0)
		why = bad_inflate;
	else if (out.len - 1 != fresh_len || memcmp(out.data + 1, fresh, fresh_len) != 0)
		why = bad_bytes;
	libdeflate_free_decompressor(d);
	libdeflate_free_compressor(c);
	pe_buf_destroy(&out);
	free(fresh);
	free(back);
	free(in);
	return why;
}

/* One thread's share: inputs seed0.. at levels taken in turn from a list longer than what a
 * thread keeps, so that kept compressors are also dropped and made again. */
struct job {
	uint64_t seed0;
	int count;
	char why[160];
};

static void *worker(void *arg)
{
	static const int levels[] = {6, 1, 6, 9, 12, 6};
	struct job *j = arg;
	for (int i = 0; i < j->count && !j->why[0]; i++) {
		int level = levels[(j->seed0 + (uint64_t)i) % (sizeof levels / sizeof levels[0])];
		const char *why = check_one(j->seed0 + (uint64_t)i, level);
		if (why)
			snprintf(j->why, sizeof j->why, "input %llu level %d: %s", (unsigned long long)(j->seed0 + i),
				 level, why);
	}
	return NULL;
}

/* Rounds of threads compressing at once; when a round's threads have exited, everything they
 * allocated is freed (their kept compressors with them). The main thread compresses too. */
START_TEST(threads_that_exit)
{
	enum { ROUNDS = 3, THREADS = 4, EACH = 24 };
	for (int r = 0; r < ROUNDS; r++) {
		long before = live();
		pthread_t th[THREADS];
		struct job jobs[THREADS];
		for (int t = 0; t < THREADS; t++) {
			jobs[t] = (struct job){.seed0 = (uint64_t)(r * THREADS + t) * EACH, .count = EACH};
			ck_assert_int_eq(pthread_create(&th[t], NULL, worker, &jobs[t]), 0);
		}
		for (int t = 0; t < THREADS; t++) {
			ck_assert_int_eq(pthread_join(th[t], NULL), 0);
			ck_assert_msg(!jobs[t].why[0], "round %d thread %d, %s", r, t, jobs[t].why);
		}
		ck_assert_int_eq(live(), before);
		const char *why = check_one(1000 + (uint64_t)r, 6); /* the main thread keeps its own */
		ck_assert_msg(why == NULL, "main thread: %s", why);
	}
}
END_TEST

/* Once a level's compressor is kept, compressing at that level allocates nothing in libdeflate
 * (the output buffer aside, which is not libdeflate's). */
static void *reuse(void *arg)
{
	long *allocated = arg;
	struct pe_buf out;
	pe_buf_init(&out, (size_t)1 << 24);
	size_t len;
	char *in = input(6, &len);
	int rc = pe_gzip(&out, in, len, 6);
	long before = atomic_load(&n_alloc);
	for (int i = 0; i < 20 && rc == 0; i++)
		rc = pe_gzip(&out, in, len, 6);
	*allocated = rc == 0 ? atomic_load(&n_alloc) - before : -1;
	pe_buf_destroy(&out);
	free(in);
	return NULL;
}

START_TEST(kept_between_calls)
{
	pthread_t t;
	long allocated = -1, before = live();
	ck_assert_int_eq(pthread_create(&t, NULL, reuse, &allocated), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(allocated, 0);
	ck_assert_int_eq(live(), before);
}
END_TEST

/* Every level in turn, twice over: never more than PE_GZIP_LEVELS_KEPT compressors alive on the
 * thread; the last levels used stay kept (using them again allocates nothing). */
struct bound {
	long most, again;
	int rc;
};

static void *levels(void *arg)
{
	struct bound *b = arg;
	struct pe_buf out;
	pe_buf_init(&out, (size_t)1 << 24);
	long base = live();
	for (int pass = 0; pass < 2; pass++)
		for (int level = 1; level <= 12 && b->rc == 0; level++) {
			b->rc = pe_gzip(&out, "[[0.5,1.0]]", 11, level);
			if (live() - base > b->most)
				b->most = live() - base;
		}
	long before = atomic_load(&n_alloc);
	for (int level = 12; level > 12 - PE_GZIP_LEVELS_KEPT && b->rc == 0; level--)
		b->rc = pe_gzip(&out, "[[0.5,1.0]]", 11, level);
	b->again = atomic_load(&n_alloc) - before;
	pe_buf_destroy(&out);
	return NULL;
}

START_TEST(levels_kept_bounded)
{
	pthread_t t;
	struct bound b = {0};
	long before = live();
	ck_assert_int_eq(pthread_create(&t, NULL, levels, &b), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(b.rc, 0);
	ck_assert_int_ge(b.most, 1);
	ck_assert_int_le(b.most, PE_GZIP_LEVELS_KEPT);
	ck_assert_int_eq(b.again, 0);
	ck_assert_int_eq(live(), before);
}
END_TEST

/* A level libdeflate refuses is PE_ENOMEM (no compressor), and out is left as it was. */
START_TEST(bad_level)
{
	struct pe_buf out;
	pe_buf_init(&out, 1024);
	ck_assert_int_eq(pe_gzip(&out, "abc", 3, 13), PE_ENOMEM);
	ck_assert_int_eq(pe_gzip(&out, "abc", 3, -1), PE_ENOMEM);
	ck_assert_uint_eq(out.len, 0);
	ck_assert_int_eq(pe_gzip(&out, "abc", 3, 6), 0);
	ck_assert_uint_gt(out.len, 0);
	pe_buf_destroy(&out);
}
END_TEST

static Suite *gzip_suite(void)
{
	Suite *s = suite_create("gzip");
	TCase *tc = tcase_create("gzip");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, threads_that_exit);
	tcase_add_test(tc, kept_between_calls);
	tcase_add_test(tc, levels_kept_bounded);
	tcase_add_test(tc, bad_level);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(gzip_suite)
