/* Every one of the 2^32 float32 bit patterns through pe_fmt_f32 (run by `make test-exhaustive`,
 * minutes on two cores; not part of `make test`).
 *
 * For each finite value: the output is a JSON number in the documented style, reads back with
 * glibc's strtof (correctly rounded) to the identical bits, and is shortest. Shortness without
 * printf: write the output as d * 10^j (d without trailing zeros, n >= 2 digits) and let
 * lo = floor(d / 10) * 10^(j+1), hi = lo + 10^(j+1), so lo < |output| < hi. Any decimal with
 * fewer than n digits is either lo, hi, or outside [lo, hi] (inside that span the only such
 * numbers are the multiples of 10^(j+1)); if one read back, then because the rounding interval
 * is convex and holds the output too, lo or hi would lie in it and read back. So checking that
 * neither lo nor hi reads back proves that nothing shorter does. Non-finite patterns must print
 * NaN / Infinity / -Infinity. Closeness among equally short candidates is checked by
 * tests/tensor/test_shortest.c (millions of values, and every f16 / bf16). Every pattern also goes
 * through pe_fmt_list, in lists of 2^20 consecutive patterns, which must write exactly what
 * pe_fmt_f32 writes one by one, with the active tier: on a CPU with AVX-512 that proves the list
 * printer's AVX-512 tier (src/tensor/shortest_avx512.c) equal to the scalar printer for every
 * float32, on one with AVX2 only the AVX2 tier (src/tensor/shortest_avx2.c). When the active tier
 * is not AVX2 and the CPU has AVX2, each slice's lists go through the AVX2 tier once more (forced,
 * in a second pass), so an AVX-512 machine proves both. */
#include "support/pe_check.h"
#include "posenc/core.h"
#include "posenc/tensor.h"
#include "tensor/internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define THREADS 2
#define SLICES 16        /* one check test each: check cannot report a test longer than ~35 min */
#define BLOCK (1u << 20) /* patterns handed out to a thread at a time */

static uint64_t next_block, end_block; /* this slice's work, in blocks */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t failures;
static char first_failure[8][128];

static void record_failure(uint32_t bits, const char *s, const char *why)
{
	pthread_mutex_lock(&lock);
	if (failures < 8)
		snprintf(first_failure[failures], sizeof first_failure[0], "%08x \"%s\": %s", bits, s,
			 why);
	failures++;
	pthread_mutex_unlock(&lock);
}


/* "[-]m e j" into out, without printf (it would dominate the run time). */
static void put_candidate(char *out, int neg, uint64_t m, int j)
{
	char tmp[48];
	int n = 0;
	if (neg)
		*out++ = '-';
	do {
		tmp[n++] = (char)('0' + m % 10);
		m /= 10;
	} while (m);
	while (n)
		*out++ = tmp[--n];
	*out++ = 'e';
	if (j < 0) {
		*out++ = '-';
		j = -j;
	}
	n = 0;
	do {
		tmp[n++] = (char)('0' + j % 10);
		j /= 10;
	} while (j);
	while (n)
		*out++ = tmp[--n];
	*out = 0;
}

static int reads_back(const char *s, uint32_t bits)
{
	float f = strtof(s, NULL);
	uint32_t b;
	memcpy(&b, &f, 4);
	return b == bits;
}

static int digit_count(uint64_t v)
{
	int n = 1;
	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

/* The documented style's length for d * 10^j with n digits: plain unless scientific is shorter. */
static int styled_length(int n, int j)
{
	int x = j + n - 1, ax = x < 0 ? -x : x;
	int plain = j >= 0 ? n + j : x >= 0 ? n + 1 : n + 1 - x;
	int sci = n + (n > 1) + 1 + (x < 0) + digit_count((uint64_t)ax);
	return plain <= sci ? plain : sci;
}

static void check_nonfinite(uint32_t bits, const char *s)
{
	const char *want = (bits & 0x7fffff) ? "NaN" : bits >> 31 ? "-Infinity" : "Infinity";
	if (strcmp(s, want) != 0)
		record_failure(bits, s, "non-finite spelling");
}

static void check_one(uint32_t bits)
{
	char s[PE_NUM_MAX + 1], c[64];
	float x;
	memcpy(&x, &bits, 4);
	size_t len = pe_fmt_f32(x, s);
	if (len == 0 || len >= PE_NUM_MAX) {
		record_failure(bits, "", "length");
		return;
	}
	s[len] = 0;
	if ((bits >> 23 & 0xff) == 0xff) {
		check_nonfinite(bits, s);
		return;
	}
	if (!pe_is_json_number(s)) {
		record_failure(bits, s, "not a JSON number");
		return;
	}
	if (!reads_back(s, bits)) {
		record_failure(bits, s, "does not read back");
		return;
	}
	/* d * 10^j from the text */
	const char *p = s + (s[0] == '-');
	uint64_t d = 0;
	int j = 0, frac = 0, neg = s[0] == '-';
	for (; (*p >= '0' && *p <= '9') || *p == '.'; p++) {
		if (*p == '.')
			frac = 1;
		else {
			d = d * 10 + (uint64_t)(*p - '0');
			j -= frac;
		}
	}
	if (*p == 'e')
		j += atoi(p + 1);
	if (d == 0)
		return; /* "0" / "-0": reading back proved it is the zero of the right sign */
	while (d % 10 == 0) { /* zeros of a plain integer like 100 */
		d /= 10;
		j++;
	}
	int n = digit_count(d);
	if ((size_t)styled_length(n, j) + (size_t)neg != len) {
		record_failure(bits, s, "not in the documented style");
		return;
	}
	if (n < 2)
		return;
	uint64_t lo = d / 10;
	put_candidate(c, neg, lo, j + 1);
	if (reads_back(c, bits))
		record_failure(bits, s, "a shorter decimal (below) reads back");
	put_candidate(c, neg, lo + 1, j + 1);
	if (reads_back(c, bits))
		record_failure(bits, s, "a shorter decimal (above) reads back");
}

/* pe_fmt_list over n patterns (the active tier's list printer: eight at a time on AVX-512) against
 * pe_fmt_f32's forms joined by commas: 0 when they are the same, byte for byte. */
static int list_differs(const uint32_t *bits, size_t n, char *want, char *got)
{
	size_t w = 0;
	for (size_t i = 0; i < n; i++) {
		float x;
		memcpy(&x, &bits[i], 4);
		if (i)
			want[w++] = ',';
		w += pe_fmt_f32(x, want + w);
	}
	struct pe_tensor_view t = {{1, {n}}, PE_F32, bits};
	size_t g = pe_fmt_list(&t, 0, n, got);
	return g != w || memcmp(got, want, w) != 0;
}

/* The n consecutive patterns from first as one list; on a difference, the first block of eight
 * that differs on its own is recorded. */
static void check_list(uint32_t first, size_t n, uint32_t *bits, char *want, char *got)
{
	for (size_t i = 0; i < n; i++)
		bits[i] = first + (uint32_t)i;
	if (!list_differs(bits, n, want, got))
		return;
	for (size_t i = 0; i + 8 <= n; i += 8)
		if (list_differs(bits + i, 8, want, got)) {
			record_failure(bits[i], "", "pe_fmt_list of this block of eight differs from pe_fmt_f32");
			return;
		}
	record_failure(first, "", "pe_fmt_list differs from pe_fmt_f32 (no block of eight alone does)");
}

/* arg: non-NULL for the lists only (the second pass, another tier). */
static void *worker_cb(void *arg)
{
	int lists_only = arg != NULL;
	uint32_t *bits = malloc(BLOCK * sizeof *bits);
	char *want = malloc((size_t)BLOCK * 16 + 2 * PE_NUM_MAX), *got = malloc((size_t)BLOCK * 16 + 2 * PE_NUM_MAX);
	if (!bits || !want || !got) {
		record_failure(0, "", "out of memory");
		goto out;
	}
	for (;;) {
		pthread_mutex_lock(&lock);
		uint64_t blk = next_block++;
		pthread_mutex_unlock(&lock);
		if (blk >= end_block)
			break;
		for (uint64_t b = blk * BLOCK; b < (blk + 1) * BLOCK && !lists_only; b++)
			check_one((uint32_t)b);
		check_list((uint32_t)(blk * BLOCK), BLOCK, bits, want, got);
	}
out:
	free(bits);
	free(want);
	free(got);
	return NULL;
}

/* Blocks first .. first+blocks-1 by THREADS workers (lists_only: see worker_cb). */
static void run_pass(uint64_t first, uint64_t blocks, int lists_only)
{
	pthread_t th[THREADS];
	next_block = first;
	end_block = first + blocks;
	for (int i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, worker_cb, lists_only ? &th[i] : NULL), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
}

/* Slice _i of the 2^32 patterns (each test runs in its own process). */
START_TEST(test_every_float)
{
	struct timespec t0, t1;
	uint64_t blocks = (1ull << 32) / BLOCK / SLICES, first = (uint64_t)_i * blocks;
	enum pe_isa active = pe_isa_active();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	run_pass(first, blocks, 0);
	int avx2_too = active != PE_ISA_AVX2 && pe_isa_force(PE_ISA_AVX2) == 0;
	if (avx2_too) {
		run_pass(first, blocks, 1);
		ck_assert_int_eq(pe_isa_force(active), 0);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	fprintf(stderr, "test_shortest_all: slice %d/%d (%08llx..%08llx) in %.0f s, lists by %s%s, %llu failures\n",
		_i + 1, SLICES, (unsigned long long)first * BLOCK, (unsigned long long)(first + blocks) * BLOCK - 1,
		secs, pe_isa_name(), avx2_too ? " and avx2" : "", (unsigned long long)failures);
	for (uint64_t i = 0; i < failures && i < 8; i++)
		fprintf(stderr, "  %s\n", first_failure[i]);
	ck_assert_msg(failures == 0, "%llu float32 values failed, first: %s",
		      (unsigned long long)failures, first_failure[0]);
}
END_TEST

static Suite *shortest_all_suite(void)
{
	Suite *s = suite_create("shortest_all");
	TCase *tc = tcase_create("f32");
	tcase_set_timeout(tc, 1800);
	tcase_add_loop_test(tc, test_every_float, 0, SLICES);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(shortest_all_suite)
