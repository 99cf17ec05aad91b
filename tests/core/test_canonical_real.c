/* The canonical text of a real parameter (src/core/params_key.c) against the definition it replaced:
 * the shortest %.*g that strtod reads back as the same double, found by trying precisions 1 to
 * 17 with snprintf. The key of a cached table is built from that text, so it must not change by
 * a byte for any double: integers, powers of ten and two and their neighbours, 0.1-style
 * decimals, huge and tiny values, subnormals, -0 and random bit patterns (a fixed seed), several
 * ten thousand values in all, each through pe_params_canonical of a one-parameter table (a
 * real, and a list of reals). */
#include "posenc/core.h"
#include "support/pe_check.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct pe_param_spec spec[] = {
	{"x", PE_PT_REAL, "1", -DBL_MAX, DBL_MAX, NULL, "a real"},
	{"l", PE_PT_LIST, "", -DBL_MAX, DBL_MAX, NULL, "a list of reals"},
};

static int one_shape(const struct pe_params *p, struct pe_shape *s)
{
	(void)p;
	s->rank = 1;
	s->dim[0] = 1;
	return 0;
}

static const struct pe_table_def def = {
	.name = "test/real",
	.params = spec,
	.nparams = 2,
	.fixed_dtype = PE_DTYPE_COUNT_,
	.shape = one_shape,
};

/* The definition: the first precision whose text reads back. */
static void reference(double x, char *buf, size_t cap)
{
	if (x == 0) {
		snprintf(buf, cap, "0");
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, cap, "%.*g", prec, x);
		if (strtod(buf, NULL) == x)
			return;
	}
	snprintf(buf, cap, "%.17g", x);
}

static size_t checked;

/* x's key as a real and as a one-value list: both "name=<reference text>". */
static void check(double x)
{
	if (!isfinite(x))
		return;
	char want[64], got[128], expect[80];
	reference(x, want, sizeof want);
	struct pe_params p;
	pe_params_init(&p, &def);
	p.v[0].set = 1;
	p.v[0].r = x;
	int n = pe_params_canonical(&p, got, sizeof got);
	snprintf(expect, sizeof expect, "x=%s", want);
	ck_assert_msg(n == (int)strlen(expect) && strcmp(got, expect) == 0, "%a: got '%s' (%d), want '%s'", x, got,
		      n, expect);
	double one[1] = {x};
	p.v[0].set = 0;
	p.v[1].set = 1;
	p.v[1].list = one;
	p.v[1].nlist = 1;
	n = pe_params_canonical(&p, got, sizeof got);
	snprintf(expect, sizeof expect, "l=%s", want);
	ck_assert_msg(n == (int)strlen(expect) && strcmp(got, expect) == 0, "list %a: got '%s', want '%s'", x, got,
		      expect);
	checked++;
}

/* x, -x and their neighbours on both sides. */
static void check_around(double x)
{
	for (int s = 0; s < 2; s++) {
		double v = s ? -x : x;
		check(v);
		check(nextafter(v, INFINITY));
		check(nextafter(v, -INFINITY));
	}
}

static double parse(const char *text) { return strtod(text, NULL); }

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

START_TEST(integers)
{
	for (int i = 0; i <= 3000; i++)
		check_around(i);
	for (int m = 0; m <= 22; m++) /* k * 10^m: trailing zeros, written with an exponent */
		for (int k = 1; k < 1000; k += k < 100 ? 1 : 7)
			check_around(k * pow(10, m));
	for (int k = 0; k < 3000; k++) {
		check_around(0x1p53 - k);
		check_around(0x1p52 + k);
		check_around((double)(next_random() >> (11 + k % 40)));
	}
}
END_TEST

START_TEST(powers)
{
	char t[32];
	for (int e = -330; e <= 310; e++) {
		snprintf(t, sizeof t, "1e%d", e);
		check_around(parse(t));
		snprintf(t, sizeof t, "5e%d", e);
		check_around(parse(t));
		snprintf(t, sizeof t, "2.5e%d", e);
		check_around(parse(t));
	}
	for (int e = -1074; e <= 1023; e++)
		check_around(ldexp(1, e));
}
END_TEST

START_TEST(short_decimals)
{
	char t[64];
	for (int k = 1; k <= 1000; k++)
		for (int j = 1; j <= 6; j++) { /* k / 10^j: 0.1, 0.25, 1.5, 12.34 */
			snprintf(t, sizeof t, "%de-%d", k, j);
			check_around(parse(t));
		}
	for (int i = 0; i < 15000; i++) { /* d * 10^e with 1 to 17 digits, any exponent */
		int digits = 1 + (int)(next_random() % 17), e = (int)(next_random() % 60) - 40;
		unsigned long long d = next_random() % 100000000000000000ull;
		for (int k = digits; k < 17; k++)
			d /= 10;
		snprintf(t, sizeof t, "%llue%d", d, e);
		check_around(parse(t));
	}
}
END_TEST

START_TEST(extremes)
{
	check(0.0);
	check(-0.0);
	check_around(DBL_MAX);
	check_around(DBL_MIN);
	check_around(DBL_TRUE_MIN);
	check_around(DBL_EPSILON);
	check_around(1e-22);
	check_around(1e22);
	check_around(0x1p50);
	check_around(0x1p-50);
	for (int i = 0; i < 3000; i++) { /* subnormals */
		uint64_t bits = next_random() & ((1ull << 52) - 1);
		double x;
		memcpy(&x, &bits, sizeof x);
		check_around(x);
	}
}
END_TEST

START_TEST(random_bits)
{
	for (int i = 0; i < 30000; i++) {
		uint64_t bits = next_random();
		double x;
		memcpy(&x, &bits, sizeof x);
		check(x);
	}
	/* bit patterns near 1: the magnitudes parameters have */
	for (int i = 0; i < 30000; i++) {
		uint64_t bits = (uint64_t)(1023 - 30 + next_random() % 60) << 52 | (next_random() >> 12);
		double x;
		memcpy(&x, &bits, sizeof x);
		check(x);
	}
	ck_assert_uint_gt(checked, 59000); /* the finite ones: all but a few NaN and infinities */
}
END_TEST

/* Reading: a real parameter written as a decimal integer ("10000", the usual form of a default) is read
 * without strtod (params.c): the value, sign of zero included, must be strtod's for every
 * such text, with leading zeros, a '-', every length up to 15 digits and past it (strtod again),
 * as a scalar and as a list value; texts that are not numbers are still refused. */

/* text as x and as a list of two values: both strtod's value, bit for bit */
static void check_parse(const char *text)
{
	double want = strtod(text, NULL);
	struct pe_params p;
	struct pe_err err = {0};
	char list[80];
	pe_params_init(&p, &def);
	ck_assert_msg(pe_params_set(&p, "x", text, &err) == 0, "%s: %s", text, err.detail);
	ck_assert_msg(memcmp(&p.v[0].r, &want, sizeof want) == 0, "%s: %a, strtod %a", text, p.v[0].r, want);
	snprintf(list, sizeof list, "%s,%s", text, text);
	ck_assert_msg(pe_params_set(&p, "l", list, &err) == 0, "%s: %s", list, err.detail);
	ck_assert_uint_eq(p.v[1].nlist, 2);
	ck_assert(memcmp(&p.v[1].list[1], &want, sizeof want) == 0);
	pe_params_destroy(&p);
}

START_TEST(integers_as_strtod_reads_them)
{
	char t[40];
	for (int i = 0; i <= 20000; i++) {
		snprintf(t, sizeof t, "%d", i);
		check_parse(t);
		snprintf(t, sizeof t, "-%d", i);
		check_parse(t);
		snprintf(t, sizeof t, "000%d", i);
		check_parse(t);
	}
	unsigned long long seed = 12345;
	for (int n = 1; n <= 20; n++) /* every length, the 15-digit limit and past it */
		for (int k = 0; k < 300; k++) {
			for (int i = 0; i < n; i++) {
				seed = seed * 6364136223846793005ull + 1442695040888963407ull;
				t[i] = (char)('0' + (seed >> 33) % 10);
			}
			t[n] = 0;
			check_parse(t);
			memmove(t + 1, t, (size_t)n + 1);
			t[0] = '-';
			check_parse(t);
		}
	check_parse("999999999999999");
	check_parse("-999999999999999");
	check_parse("9007199254740993"); /* 16 digits: rounded, by strtod */
	check_parse("-0");
	check_parse("0");
}
END_TEST

START_TEST(non_numbers_still_refused)
{
	const char *bad[] = {"-", "+1", "1-", "--1", "1 ", " 1", "0x10", "1a", "", "1e999"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct pe_params p;
		struct pe_err err = {0};
		pe_params_init(&p, &def);
		ck_assert_msg(pe_params_set(&p, "x", bad[i], &err) == PE_EINVAL, "'%s' accepted", bad[i]);
		pe_params_destroy(&p);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("canonical_real");
	TCase *tc = tcase_create("same text as printf");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, integers);
	tcase_add_test(tc, powers);
	tcase_add_test(tc, short_decimals);
	tcase_add_test(tc, extremes);
	tcase_add_test(tc, random_bits);
	suite_add_tcase(s, tc);
	TCase *tp = tcase_create("integers read as strtod reads them");
	tcase_set_timeout(tp, 60);
	tcase_add_test(tp, integers_as_strtod_reads_them);
	tcase_add_test(tp, non_numbers_still_refused);
	suite_add_tcase(s, tp);
	return s;
}

PE_TEST_MAIN(suite)
