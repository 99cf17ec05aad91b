/* Tests for shortest round-trip printing (src/tensor/shortest.c).
 *
 * Every printed number is checked against glibc as the reference, never against the code under
 * test: (a) it reads back to the identical bits (strtod / strtof, which round correctly, and for
 * f16 / bf16 an exact test against the rounding interval, below); (b) it is shortest: neither the
 * correctly rounded decimal with one digit fewer (snprintf "%.*e", digits - 2) nor its
 * neighbours read back, and those are the only candidates (every shorter decimal that reads back
 * lies between them and x); (c) it is the closest: when the correctly rounded decimal with the
 * same number of digits reads back, the output is that decimal; (d) it is a JSON number in the
 * documented style (plain decimal unless scientific is shorter). f16 and bf16 are checked for all
 * 65536 bit patterns each, f32 and f64 on edge cases, every binary exponent and millions of
 * random values (all 2^32 floats: tests/exhaustive/test_shortest_all.c).
 *
 * Exact read-back for f16 / bf16 without a bignum: the ends of a small format's rounding interval
 * are doubles, and glibc's strtod honours the rounding mode, so for a decimal D and a double b,
 * D >= b iff strtod rounding down gives >= b, and D <= b iff strtod rounding up gives <= b. */
#include "support/pe_check.h"
#include "posenc/core.h"
#include "posenc/tensor.h"
#include "tensor/internal.h"

#include <fenv.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind { K_F64, K_F32, K_F16, K_BF16 };

/* ck_assert_* records its location on every call (a write to check's log): too slow for
 * millions of values, so the sweeps only call into check on failure. */
#define FAIL_IF(cond, ...)                                                                       \
	do {                                                                                     \
		if (cond)                                                                        \
			ck_abort_msg(__VA_ARGS__);                                               \
	} while (0)

/* ---- the value under test ---- */

struct val {
	enum kind kind;
	uint64_t bits;
};

static double small_to_double(enum kind k, uint16_t h)
{
	int neg = h >> 15;
	double v;
	if (k == K_F16) {
		int e = h >> 10 & 0x1f, m = h & 0x3ff;
		v = e == 0x1f ? (m ? NAN : INFINITY) : e ? ldexp(m | 0x400, e - 25) : ldexp(m, -24);
	} else {
		uint32_t b = (uint32_t)(h & 0x7fff) << 16;
		float f;
		memcpy(&f, &b, 4);
		v = f;
	}
	return neg ? -v : v;
}

/* The exact value as a double (every f32, f16 and bf16 is one). */
static double val_double(struct val v)
{
	switch (v.kind) {
	case K_F64: {
		double d;
		memcpy(&d, &v.bits, 8);
		return d;
	}
	case K_F32: {
		uint32_t b = (uint32_t)v.bits;
		float f;
		memcpy(&f, &b, 4);
		return f;
	}
	default:
		return small_to_double(v.kind, (uint16_t)v.bits);
	}
}

/* Print with the function under test into an exactly PE_NUM_MAX-byte heap buffer (so ASan sees
 * any write past it), then NUL-terminate a copy. */
static size_t print_val(struct val v, char *out)
{
	char *buf = malloc(PE_NUM_MAX);
	FAIL_IF(!buf, "out of memory");
	size_t n = 0;
	switch (v.kind) {
	case K_F64:
		n = pe_fmt_f64(val_double(v), buf);
		break;
	case K_F32:
		n = pe_fmt_f32((float)val_double(v), buf);
		break;
	case K_F16:
		n = pe_fmt_f16((uint16_t)v.bits, buf);
		break;
	case K_BF16:
		n = pe_fmt_bf16((uint16_t)v.bits, buf);
		break;
	}
	FAIL_IF(n == 0 || n >= PE_NUM_MAX, "length %zu", n);
	memcpy(out, buf, n);
	out[n] = 0;
	free(buf);
	return n;
}

/* ---- reading back ---- */

static double strtod_round(const char *s, int mode)
{
	fesetround(mode);
	double d = strtod(s, NULL);
	fesetround(FE_TONEAREST);
	return d;
}

/* Does decimal s (no sign) lie in the rounding interval of the positive small-format value h? */
static int small_reads_back(enum kind k, uint16_t h, const char *s)
{
	double dn = strtod_round(s, FE_DOWNWARD), up = strtod_round(s, FE_UPWARD);
	if (h == 0)
		return dn == 0 && up == 0;
	int top = k == K_F16 ? 0x7c00 : 0x7f80; /* +Infinity */
	double v = small_to_double(k, h), prev = small_to_double(k, (uint16_t)(h - 1));
	double lo = (prev + v) / 2; /* exact: a small format's midpoints fit a double */
	double hi = h + 1 == top ? v + (v - prev) / 2 : (v + small_to_double(k, (uint16_t)(h + 1))) / 2;
	if (h & 1) /* odd significand: ties go to the neighbours, the ends are excluded */
		return up > lo && dn < hi;
	return dn >= lo && up <= hi;
}

/* Does the decimal string s read back to exactly v? */
static int reads_back(struct val v, const char *s)
{
	switch (v.kind) {
	case K_F64: {
		double d = strtod(s, NULL);
		uint64_t b;
		memcpy(&b, &d, 8);
		return b == v.bits;
	}
	case K_F32: {
		float f = strtof(s, NULL);
		uint32_t b;
		memcpy(&b, &f, 4);
		return b == (uint32_t)v.bits;
	}
	default: {
		uint16_t h = (uint16_t)v.bits;
		if ((s[0] == '-') != (h >> 15))
			return 0;
		return small_reads_back(v.kind, h & 0x7fff, s + (s[0] == '-'));
	}
	}
}

/* ---- the shape of a decimal ---- */


/* A decimal as significant digits and exponent: value = sign * digits * 10^exp, digits without
 * leading or trailing zeros ("" for zero). */
struct dec {
	int neg;
	char digits[64];
	int exp;
};

static struct dec parse_dec(const char *s)
{
	struct dec d = {0, "", 0};
	int n = 0, frac = 0, seen_point = 0;
	if (*s == '-' || *s == '+')
		d.neg = *s++ == '-';
	for (; (*s >= '0' && *s <= '9') || *s == '.'; s++) {
		if (*s == '.') {
			seen_point = 1;
			continue;
		}
		if (n > 0 || *s != '0')
			d.digits[n++] = *s;
		frac += seen_point;
	}
	d.exp = -frac;
	if (*s == 'e' || *s == 'E')
		d.exp += atoi(s + 1);
	while (n > 0 && d.digits[n - 1] == '0') {
		n--;
		d.exp++;
	}
	d.digits[n] = 0;
	if (n == 0)
		d.exp = 0;
	return d;
}

static int dec_eq(struct dec a, struct dec b)
{
	return a.neg == b.neg && a.exp == b.exp && strcmp(a.digits, b.digits) == 0;
}

/* The documented style, built independently: plain decimal when not longer than d.ddde-x. */
static void style_ref(struct dec d, char *out)
{
	int n = (int)strlen(d.digits), x = d.exp + n - 1;
	char plain[400], sci[160], *p = plain;
	if (n == 0) {
		strcpy(out, d.neg ? "-0" : "0");
		return;
	}
	snprintf(sci, sizeof sci, "%s%c%s%se%d", d.neg ? "-" : "", d.digits[0], n > 1 ? "." : "",
		 d.digits + 1, x);
	if (d.neg)
		*p++ = '-';
	if (d.exp >= 0) {
		p += sprintf(p, "%s", d.digits);
		for (int i = 0; i < d.exp; i++)
			*p++ = '0';
		*p = 0;
	} else if (x >= 0) {
		sprintf(p, "%.*s.%s", x + 1, d.digits, d.digits + x + 1);
	} else {
		p += sprintf(p, "0.");
		for (int i = 0; i < -x - 1; i++)
			*p++ = '0';
		sprintf(p, "%s", d.digits);
	}
	strcpy(out, strlen(plain) <= strlen(sci) ? plain : sci);
}

/* ---- the checks ---- */

static const char *kind_name(enum kind k)
{
	return k == K_F64 ? "f64" : k == K_F32 ? "f32" : k == K_F16 ? "f16" : "bf16";
}

/* m * 10^j as a string with the sign of v. */
static void cand(char *out, int neg, unsigned long long m, int j)
{
	sprintf(out, "%s%llue%d", neg ? "-" : "", m, j);
}

/* Check a finite value; returns its number of significant digits. */
static int check_val(struct val v)
{
	char s[64], ref[512], r[64], c[64];
	double x = val_double(v);
	print_val(v, s);
	const char *kn = kind_name(v.kind);
	unsigned long long bits = (unsigned long long)v.bits;

	FAIL_IF(!pe_is_json_number(s), "%s %#llx: \"%s\" is not a JSON number", kn, bits, s);
	FAIL_IF(!reads_back(v, s), "%s %#llx: \"%s\" does not read back", kn, bits, s);
	struct dec d = parse_dec(s);
	style_ref(d, ref);
	FAIL_IF(strcmp(ref, s) != 0, "%s %#llx: \"%s\", style wants \"%s\"", kn, bits, s, ref);
	int n = (int)strlen(d.digits);
	if (n == 0) {
		FAIL_IF(x != 0 || d.neg != !!signbit(x), "%s %#llx: \"%s\"", kn, bits, s);
		return 0;
	}

	/* (b) one digit fewer: the correctly rounded one R and the grid points next to it */
	if (n >= 2) {
		snprintf(r, sizeof r, "%.*e", n - 2, fabs(x));
		struct dec rd = parse_dec(r);
		/* R = m * 10^j with n - 1 digits (pad back the zeros parse_dec dropped) */
		unsigned long long m = strtoull(rd.digits, NULL, 10);
		int j = rd.exp;
		for (int i = (int)strlen(rd.digits); i < n - 1; i++, j--)
			m *= 10;
		/* below a power of ten the grid is ten times finer: 1.000e5 -> 9.999e4 */
		int pow10 = strcmp(rd.digits, "1") == 0;
		unsigned long long ms[4] = {m - 1, m, m + 1, 10 * m - 1};
		int js[4] = {j, j, j, j - 1};
		for (int i = 0; i < 3 + pow10; i++) {
			cand(c, x < 0, ms[i], js[i]);
			FAIL_IF(reads_back(v, c), "%s %#llx: \"%s\" is not shortest, \"%s\" reads back", kn,
				bits, s, c);
		}
	}
	/* (c) the correctly rounded decimal of n digits, when it reads back, is the answer */
	snprintf(r, sizeof r, "%s%.*e", x < 0 ? "-" : "", n - 1, fabs(x));
	FAIL_IF(reads_back(v, r) && !dec_eq(parse_dec(r), d),
		"%s %#llx: \"%s\" but \"%s\" is closer and reads back", kn, bits, s, r);
	return n;
}

static void check_f64(double x)
{
	struct val v = {K_F64, 0};
	memcpy(&v.bits, &x, 8);
	check_val(v);
}

static void check_f32(float x)
{
	uint32_t b;
	memcpy(&b, &x, 4);
	check_val((struct val){K_F32, b});
}

static void expect_f64(double x, const char *want)
{
	char buf[PE_NUM_MAX + 1];
	buf[pe_fmt_f64(x, buf)] = 0;
	ck_assert_str_eq(buf, want);
	check_f64(x);
}

static void expect_f32(float x, const char *want)
{
	char buf[PE_NUM_MAX + 1];
	buf[pe_fmt_f32(x, buf)] = 0;
	ck_assert_str_eq(buf, want);
	check_f32(x);
}

static void expect_small(enum kind k, uint16_t h, const char *want)
{
	char buf[PE_NUM_MAX + 1];
	buf[(k == K_F16 ? pe_fmt_f16 : pe_fmt_bf16)(h, buf)] = 0;
	ck_assert_str_eq(buf, want);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- tests ---- */

START_TEST(test_known_f64)
{
	expect_f64(0.0, "0");
	expect_f64(-0.0, "-0");
	expect_f64(1.0, "1");
	expect_f64(-1.0, "-1");
	expect_f64(0.1, "0.1");
	expect_f64(-1.5, "-1.5");
	expect_f64(1.0 / 3, "0.3333333333333333");
	expect_f64(2.0 / 3, "0.6666666666666666");
	expect_f64(100, "100");
	expect_f64(1000, "1e3"); /* scientific is shorter */
	expect_f64(1234, "1234");
	expect_f64(123.456, "123.456");
	expect_f64(0.05, "0.05");
	expect_f64(0.001, "1e-3");
	expect_f64(0.00123, "0.00123"); /* a tie: plain */
	expect_f64(0.000123, "1.23e-4");
	expect_f64(1e-7, "1e-7");
	expect_f64(1e21, "1e21");
	expect_f64(1e22, "1e22");
	expect_f64(1e23, "1e23");
	expect_f64(65504, "65504");
	expect_f64(9007199254740992.0, "9007199254740992");
	expect_f64(9223372036854775808.0, "9223372036854776000");
	expect_f64(123456789012345680000.0, "123456789012345680000");
	expect_f64(5e-324, "5e-324");
	expect_f64(1e-323, "1e-323");
	expect_f64(DBL_MIN, "2.2250738585072014e-308");
	expect_f64(nextafter(DBL_MIN, 0), "2.225073858507201e-308");
	expect_f64(DBL_MAX, "1.7976931348623157e308");
	expect_f64(-DBL_MAX, "-1.7976931348623157e308");
	expect_f64(DBL_EPSILON, "2.220446049250313e-16");
	expect_f64(M_PI, "3.141592653589793");
	expect_f64(0.3, "0.3");
	expect_f64(0.1 + 0.2, "0.30000000000000004");
	expect_f64(2.5, "2.5");
	expect_f64(0x1p-1022 * 3, "6.675221575521604e-308");
}
END_TEST

START_TEST(test_known_f32)
{
	expect_f32(0.0f, "0");
	expect_f32(-0.0f, "-0");
	expect_f32(1.0f, "1");
	expect_f32(0.1f, "0.1");
	expect_f32(1.0f / 3, "0.33333334");
	expect_f32(16777216.0f, "16777216");
	expect_f32(1e10f, "1e10");
	expect_f32(FLT_MAX, "3.4028235e38");
	expect_f32(-FLT_MAX, "-3.4028235e38");
	expect_f32(FLT_MIN, "1.1754944e-38");
	expect_f32(nextafterf(FLT_MIN, 0), "1.1754942e-38");
	expect_f32(0x1p-149f, "1e-45");
	expect_f32(0x1p-148f, "3e-45");
	expect_f32(3.4e38f, "3.4e38");
	expect_f32(1e-40f, "1e-40");
	expect_f32(FLT_EPSILON, "1.1920929e-7");
	expect_f32(0.3f, "0.3");
	expect_f32(8388607.5f, "8388607.5");
	expect_f32(-123.456f, "-123.456");
	expect_f32(7.038531e-26f, "7.038531e-26"); /* needs the full interval (Ryu's hard case) */
}
END_TEST

START_TEST(test_nonfinite)
{
	char buf[PE_NUM_MAX + 1];
	buf[pe_fmt_f64(NAN, buf)] = 0;
	ck_assert_str_eq(buf, "NaN");
	buf[pe_fmt_f64(-NAN, buf)] = 0;
	ck_assert_str_eq(buf, "NaN");
	buf[pe_fmt_f64(INFINITY, buf)] = 0;
	ck_assert_str_eq(buf, "Infinity");
	buf[pe_fmt_f64(-INFINITY, buf)] = 0;
	ck_assert_str_eq(buf, "-Infinity");
	buf[pe_fmt_f32(NAN, buf)] = 0;
	ck_assert_str_eq(buf, "NaN");
	buf[pe_fmt_f32(-INFINITY, buf)] = 0;
	ck_assert_str_eq(buf, "-Infinity");
	expect_small(K_F16, 0x7c00, "Infinity");
	expect_small(K_F16, 0xfc00, "-Infinity");
	expect_small(K_F16, 0x7e00, "NaN");
	expect_small(K_F16, 0xfc01, "NaN");
	expect_small(K_BF16, 0x7f80, "Infinity");
	expect_small(K_BF16, 0xff80, "-Infinity");
	expect_small(K_BF16, 0x7fc0, "NaN");
	expect_small(K_BF16, 0xff81, "NaN");
}
END_TEST

START_TEST(test_known_small)
{
	expect_small(K_F16, 0x0000, "0");
	expect_small(K_F16, 0x8000, "-0");
	expect_small(K_F16, 0x3c00, "1");
	expect_small(K_F16, 0xbc00, "-1");
	expect_small(K_F16, 0x3555, "0.3333");
	expect_small(K_F16, 0x2e66, "0.1");
	expect_small(K_F16, 0x7bff, "65500"); /* 65504, but 65500 is inside (65488, 65520) */
	expect_small(K_F16, 0x0001, "6e-8");   /* smallest subnormal, 2^-24 */
	expect_small(K_F16, 0x03ff, "6.1e-5"); /* largest subnormal */
	expect_small(K_F16, 0x0400, "6.104e-5");
	expect_small(K_F16, 0x6400, "1024");
	expect_small(K_F16, 0x63d0, "1e3");
	expect_small(K_BF16, 0x0000, "0");
	expect_small(K_BF16, 0x8000, "-0");
	expect_small(K_BF16, 0x3f80, "1");
	expect_small(K_BF16, 0x3eab, "0.334");
	expect_small(K_BF16, 0x3dcd, "0.1");
	expect_small(K_BF16, 0x7f7f, "3.39e38");
	expect_small(K_BF16, 0xff7f, "-3.39e38");
	expect_small(K_BF16, 0x0001, "9e-41");
	expect_small(K_BF16, 0x0080, "1.18e-38");
}
END_TEST

/* Every f16 and every bf16 bit pattern: this is the proof for those two types. */
static void all_small(enum kind k)
{
	int top = k == K_F16 ? 0x7c00 : 0x7f80;
	int max_digits = 0;
	for (uint32_t h = 0; h < 0x10000; h++) {
		if ((h & 0x7fff) >= (uint32_t)top)
			continue; /* non-finite: test_nonfinite */
		int n = check_val((struct val){k, h});
		if (n > max_digits)
			max_digits = n;
	}
	/* f16 needs up to 5 significant digits, bf16 up to 4 */
	ck_assert_int_eq(max_digits, k == K_F16 ? 5 : 4);
}

START_TEST(test_every_f16) { all_small(K_F16); }
END_TEST

START_TEST(test_every_bf16) { all_small(K_BF16); }
END_TEST

/* Every binary exponent, with the significands at both ends of the binade and random ones: each
 * exponent has its own decimal scale k and table entry. */
START_TEST(test_every_exponent)
{
	for (uint64_t be = 0; be < 0x7ff; be++) {
		uint64_t ts[] = {0, 1, 2, 3, (1ull << 52) - 1, (1ull << 52) - 2, 1ull << 51,
				 rnd() >> 12, rnd() >> 12, rnd() >> 12, rnd() >> 12};
		for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
			for (uint64_t sign = 0; sign < 2; sign++)
				check_val((struct val){K_F64, sign << 63 | be << 52 | ts[i]});
	}
	for (uint32_t be = 0; be < 0xff; be++) {
		uint32_t ts[] = {0, 1, 2, 3, (1u << 23) - 1, (1u << 23) - 2, 1u << 22,
				 (uint32_t)rnd() >> 9, (uint32_t)rnd() >> 9, (uint32_t)rnd() >> 9};
		for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
			check_val((struct val){K_F32, be << 23 | ts[i]});
	}
}
END_TEST

/* Powers of ten and of two and their neighbours; the smallest subnormals; short decimals at
 * every scale, which are the values where a shorter candidate (the k+1 grid) is taken. */
START_TEST(test_boundaries)
{
	char s[64];
	for (int p = -325; p <= 309; p++) {
		snprintf(s, sizeof s, "1e%d", p);
		double x = strtod(s, NULL);
		if (x == 0 || isinf(x))
			continue;
		check_f64(x);
		check_f64(nextafter(x, 0));
		check_f64(nextafter(x, INFINITY));
		float f = strtof(s, NULL);
		if (f != 0 && !isinf(f)) {
			check_f32(f);
			check_f32(nextafterf(f, 0));
			check_f32(nextafterf(f, INFINITY));
		}
	}
	for (int p = -1074; p <= 1023; p++) {
		double x = ldexp(1, p);
		check_f64(x);
		check_f64(nextafter(x, 0));
		check_f64(nextafter(x, INFINITY));
		if (p >= -149 && p <= 127) {
			check_f32((float)x);
			check_f32(nextafterf((float)x, 0));
			check_f32(nextafterf((float)x, INFINITY));
		}
	}
	for (uint64_t t = 1; t < 20000; t++) { /* tiny subnormals: few digits, extreme scale */
		check_val((struct val){K_F64, t});
		check_val((struct val){K_F64, (1ull << 52) - t});
		check_val((struct val){K_F32, t});
	}
	for (int i = 0; i < 200000; i++) {
		snprintf(s, sizeof s, "%de%d", (int)(rnd() % 100000), (int)(rnd() % 660) - 330);
		double x = strtod(s, NULL);
		if (!isinf(x))
			check_f64(x);
		snprintf(s, sizeof s, "%de%d", (int)(rnd() % 10000), (int)(rnd() % 90) - 48);
		float f = strtof(s, NULL);
		if (!isinf(f))
			check_f32(f);
	}
}
END_TEST

#define RANDOM_N 2000000 /* each for f32 and f64 */

START_TEST(test_random_f32)
{
	for (int i = 0; i < RANDOM_N; i++) {
		uint32_t b = (uint32_t)rnd();
		if ((b >> 23 & 0xff) != 0xff)
			check_val((struct val){K_F32, b});
	}
}
END_TEST

START_TEST(test_random_f64)
{
	for (int i = 0; i < RANDOM_N; i++) {
		uint64_t b = rnd();
		if ((b >> 52 & 0x7ff) != 0x7ff)
			check_val((struct val){K_F64, b});
	}
}
END_TEST

/* Values like the tables the service prints: sin/cos of many angles, in f32 and f64. */
START_TEST(test_table_values)
{
	for (int pos = 0; pos < 256; pos++)
		for (int i = 0; i < 128; i++) {
			double a = pos * pow(10000.0, -(double)(i & ~1) / 128);
			double x = i & 1 ? cos(a) : sin(a);
			check_f64(x);
			check_f32((float)x);
		}
}
END_TEST

START_TEST(test_elem)
{
	char buf[PE_NUM_MAX + 1];
	int32_t ints[] = {0, 7, -7, 2147483647, INT32_MIN, 1000000000, -1000000};
	const char *int_want[] = {"0", "7", "-7", "2147483647", "-2147483648", "1000000000",
				  "-1000000"};
	struct pe_tensor_view t = {{1, {7}}, PE_I32, ints};
	for (size_t i = 0; i < 7; i++) {
		buf[pe_fmt_elem(&t, i, buf)] = 0;
		ck_assert_str_eq(buf, int_want[i]);
	}
	float f[] = {0.1f, -2.5f};
	t = (struct pe_tensor_view){{1, {2}}, PE_F32, f};
	buf[pe_fmt_elem(&t, 1, buf)] = 0;
	ck_assert_str_eq(buf, "-2.5");
	double d[] = {0.1, 1e300};
	t = (struct pe_tensor_view){{1, {2}}, PE_F64, d};
	buf[pe_fmt_elem(&t, 0, buf)] = 0;
	ck_assert_str_eq(buf, "0.1");
	buf[pe_fmt_elem(&t, 1, buf)] = 0;
	ck_assert_str_eq(buf, "1e300");
	uint16_t h[] = {0x3c00, 0x3555};
	t = (struct pe_tensor_view){{1, {2}}, PE_F16, h};
	buf[pe_fmt_elem(&t, 1, buf)] = 0;
	ck_assert_str_eq(buf, "0.3333");
	t.dtype = PE_BF16;
	buf[pe_fmt_elem(&t, 0, buf)] = 0;
	ck_assert_str_eq(buf, "0.0078"); /* 2^-7 as bf16: a tie with 7.8e-3, so plain */
	t.dtype = PE_DTYPE_COUNT_;
	ck_assert_uint_eq(pe_fmt_elem(&t, 0, buf), 0);
}
END_TEST

/* Elements start .. start+n-1 of t printed one by one and joined by commas: what pe_fmt_list must
 * write. Returns the length. */
static size_t join_elems(const struct pe_tensor_view *t, size_t start, size_t n, char *out)
{
	size_t w = 0;
	for (size_t i = 0; i < n; i++) {
		if (i)
			out[w++] = ',';
		w += pe_fmt_elem(t, start + i, out + w);
	}
	return w;
}

/* pe_fmt_list (the rows of JSON and CSV; float32 values two at a time) writes exactly the
 * element-by-element forms joined by commas, for every dtype, any start and odd or even counts,
 * with the values that leave its paired path (zeros, subnormals, powers of two, non-finite)
 * scattered among random patterns. */
START_TEST(test_list)
{
	enum { N = 4099 };
	uint32_t *bits = malloc(N * sizeof *bits);
	double *d = malloc(N * sizeof *d);
	char *got = malloc((size_t)N * 40), *want = malloc((size_t)N * 40);
	ck_assert(bits && d && got && want);
	static const uint32_t special[] = {0, 0x80000000u, 1, 0x007fffffu, 0x00800000u, 0x3f800000u,
					   0x7f7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x4b000000u};
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < N; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		bits[i] = i % 7 == 3 ? special[(x >> 40) % (sizeof special / sizeof special[0])] : (uint32_t)x;
		d[i] = (double)(int64_t)x * 1e-9;
	}
	struct pe_tensor_view views[] = {{{1, {N}}, PE_F32, bits}, {{1, {N}}, PE_F64, d},
					 {{1, {N}}, PE_F16, bits}, {{1, {N}}, PE_I32, bits}};
	static const size_t spans[][2] = {{0, N}, {1, N - 1}, {5, 0}, {7, 1}, {2, 2}, {3, 3}, {100, 1001}};
	for (size_t v = 0; v < sizeof views / sizeof views[0]; v++) {
		struct pe_tensor_view t = views[v];
		if (t.dtype == PE_F16)
			t.shape.dim[0] = N * 2 - 1; /* the same words read as halves */
		for (size_t k = 0; k < sizeof spans / sizeof spans[0]; k++) {
			size_t start = spans[k][0], n = spans[k][1], w = join_elems(&t, start, n, want);
			size_t g = pe_fmt_list(&t, start, n, got);
			ck_assert_msg(g == w && memcmp(got, want, w) == 0, "dtype %d, start %zu, n %zu", (int)t.dtype,
				      start, n);
		}
	}
	free(bits);
	free(d);
	free(got);
	free(want);
}
END_TEST

/* The float32 list printer's tiers write the same bytes: with a SIMD tier forced (AVX-512, AVX2;
 * skipped, saying so, on a CPU without it), pe_fmt_list must equal pe_fmt_f32 one by one on lists
 * built to reach every path of the eight-wide printers: random normal patterns; every layout (sign
 * x 1 to 9 digits x exponents -38 to 38, from decimals like 1234e-7); short decimals whose shortest
 * form drops trailing zeros (0.5, 2.5e-3, 1e20); table-like sines; every binary exponent of normal
 * values, near both ends of the binade, either sign (every cache entry and beta); values whose
 * interval ends are exact short decimals, where Dragonbox decides ties and excluded ends (the
 * integers to 10^5 and their halves, the neighbours of short decimals); and
 * blocks of eight with one or several lanes handed back to the scalar printer (zero, subnormal,
 * power of two, non-finite) at each position. test-exhaustive checks every float32 the same way. */
/* A random finite float32 pattern. */
static uint32_t finite_bits(void)
{
	uint32_t b = (uint32_t)rnd();
	return (b >> 23 & 0xff) == 0xff ? b ^ 1u << 30 : b;
}

/* Appends the float32 nearest to text to bits at *n. */
static void put_text(uint32_t *bits, size_t *n, const char *text)
{
	float f = strtof(text, NULL);
	memcpy(&bits[(*n)++], &f, 4);
}

/* The patterns list_tier prints, cap of them: the cases above, then random ones. */
static size_t tier_lists(uint32_t *bits, size_t cap)
{
	static const uint32_t special[] = {0, 0x80000000u, 1, 0x807fffffu, 0x3f800000u, 0xc0000000u,
					   0x7f800000u, 0xff800000u, 0x7fc00000u, 0x00800000u, 0x00800001u};
	enum { NSPECIAL = sizeof special / sizeof special[0] };
	size_t n = 0;
	char text[64];
	for (int neg = 0; neg < 2; neg++) /* every layout, each in a block of its own kind */
		for (int digits = 1; digits <= 9; digits++)
			for (int x = -38; x <= 38; x++) {
				snprintf(text, sizeof text, "%s%.*se%d", neg ? "-" : "", digits, "123456789",
					 x - digits + 1);
				put_text(bits, &n, text);
			}
	for (int i = 0; i < 4096; i++) { /* short decimals */
		snprintf(text, sizeof text, "%de%d", (int)(rnd() % 1000), (int)(rnd() % 70) - 40);
		put_text(bits, &n, text);
	}
	for (int i = 0; i < 65536; i++) { /* table-like values */
		float f = (float)sin(i * 0.7 + (double)(i % 64) * 1e-3);
		memcpy(&bits[n++], &f, 4);
	}
	for (uint32_t be = 1; be < 0xff; be++) /* every exponent, with the ends of its binade */
		for (uint32_t t = 1; t < 8; t++) {
			bits[n++] = be << 23 | t;
			bits[n++] = be << 23 | (0x800000u - t);
			bits[n++] = 1u << 31 | be << 23 | (uint32_t)(rnd() & 0x7fffff);
		}
	for (uint32_t v = 1; v <= 100000; v++) { /* integers and halves: exact ends of the interval */
		float f = (float)v, h = (float)v + 0.5f;
		memcpy(&bits[n++], &f, 4);
		memcpy(&bits[n++], &h, 4);
	}
	for (int i = 0; i < 20000; i++) { /* the neighbours of short decimals: ties and near-ties */
		snprintf(text, sizeof text, "%de%d", (int)(rnd() % 100000), (int)(rnd() % 76) - 45);
		float f = strtof(text, NULL);
		uint32_t b;
		memcpy(&b, &f, 4);
		bits[n++] = b - 1;
		bits[n++] = b + 1;
	}
	while (n % 8)
		bits[n++] = finite_bits();
	for (int k = 0; k < 8; k++) /* one scalar lane at each position of a block */
		for (size_t s = 0; s < NSPECIAL; s++)
			for (int i = 0; i < 8; i++)
				bits[n++] = i == k ? special[s] : finite_bits();
	for (int r = 0; r < 4096; r++) /* several, at random positions */
		for (int i = 0; i < 8; i++)
			bits[n++] = rnd() % 4 == 0 ? special[rnd() % NSPECIAL] : finite_bits();
	while (n < cap) /* random patterns */
		bits[n++] = finite_bits();
	return n;
}

/* The lists through the tier isa (named name) against pe_fmt_f32 one by one. */
static void list_tier(enum pe_isa isa, const char *name)
{
	enum pe_isa was = pe_isa_active();
	if (pe_isa_force(isa) != 0) {
		fprintf(stderr, "shortest: no %s on this CPU, its list printer not compared\n", name);
		return;
	}
	enum { N = 1 << 21 };
	uint32_t *bits = malloc(N * sizeof *bits);
	char *got = malloc((size_t)N * 16 + PE_NUM_MAX), *want = malloc((size_t)N * 16 + PE_NUM_MAX);
	ck_assert(bits && got && want);
	size_t total = tier_lists(bits, N);
	ck_assert_uint_eq(total, N);
	struct pe_tensor_view t = {{1, {N}}, PE_F32, bits};
	static const size_t spans[][2] = {{0, N}, {3, N - 3}, {8, 7}, {5, 13}, {1, 16}};
	for (size_t k = 0; k < sizeof spans / sizeof spans[0]; k++) {
		size_t start = spans[k][0], count = spans[k][1], w = join_elems(&t, start, count, want);
		size_t g = pe_fmt_list(&t, start, count, got), at = 0;
		while (at < w && at < g && got[at] == want[at])
			at++;
		ck_assert_msg(g == w && at == w, "%s: start %zu, n %zu: differs at byte %zu: \"%.40s\" for \"%.40s\"",
			      name, start, count, at, got + (at > 20 ? at - 20 : 0), want + (at > 20 ? at - 20 : 0));
	}
	ck_assert_int_eq(pe_isa_active(), isa);
	ck_assert_int_eq(pe_isa_force(was), 0);
	free(bits);
	free(got);
	free(want);
}

START_TEST(test_list_avx512) { list_tier(PE_ISA_AVX512, "AVX-512"); }
END_TEST

START_TEST(test_list_avx2) { list_tier(PE_ISA_AVX2, "AVX2"); }
END_TEST

/* POSENC_ISA=scalar, read on first use (each check test runs in a fresh process), makes the
 * scalar printer print even on a CPU with AVX2 or AVX-512: the tier is scalar, and the list is the
 * element-by-element text. Skipped, saying so, when the tier was chosen before (CK_FORK=no). */
START_TEST(test_list_env_scalar)
{
	setenv("POSENC_ISA", "scalar", 1);
	enum pe_isa isa = pe_isa_active();
	unsetenv("POSENC_ISA");
	if (isa != PE_ISA_SCALAR && getenv("CK_FORK") && strcmp(getenv("CK_FORK"), "no") == 0) {
		fprintf(stderr, "shortest: the tier was chosen before POSENC_ISA was set (CK_FORK=no), not checked\n");
		return;
	}
	ck_assert_int_eq(isa, PE_ISA_SCALAR);
	enum { N = 4096 };
	uint32_t *bits = malloc(N * sizeof *bits);
	char *got = malloc((size_t)N * 16 + PE_NUM_MAX), *want = malloc((size_t)N * 16 + PE_NUM_MAX);
	ck_assert(bits && got && want);
	for (size_t i = 0; i < N; i++)
		bits[i] = finite_bits();
	struct pe_tensor_view t = {{1, {N}}, PE_F32, bits};
	size_t w = join_elems(&t, 0, N, want), g = pe_fmt_list(&t, 0, N, got);
	ck_assert(g == w && memcmp(got, want, w) == 0);
	free(bits);
	free(got);
	free(want);
}
END_TEST

/* The multiplier table is built on first use: many threads racing to be first must all see it
 * complete (each check test runs in a fresh process, so this one really is the first use). */
static void *race_cb(void *arg)
{
	char buf[PE_NUM_MAX + 1];
	int *ok = arg;
	*ok = 1;
	for (int i = 0; i < 1000; i++) {
		buf[pe_fmt_f64(1e-300 * (i + 1), buf)] = 0;
		*ok &= strtod(buf, NULL) == 1e-300 * (i + 1);
		buf[pe_fmt_f32(1e30f * (float)(i + 1), buf)] = 0;
		*ok &= strtof(buf, NULL) == 1e30f * (float)(i + 1);
	}
	return NULL;
}

START_TEST(test_first_use_race)
{
	pthread_t th[8];
	int ok[8];
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, race_cb, &ok[i]), 0);
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(ok[i], 1);
	}
}
END_TEST

static Suite *shortest_suite(void)
{
	Suite *s = suite_create("shortest");
	TCase *tc = tcase_create("known");
	tcase_add_test(tc, test_first_use_race);
	tcase_add_test(tc, test_known_f64);
	tcase_add_test(tc, test_known_f32);
	tcase_add_test(tc, test_known_small);
	tcase_add_test(tc, test_nonfinite);
	tcase_add_test(tc, test_elem);
	tcase_add_test(tc, test_list);
	tcase_add_test(tc, test_list_avx512);
	tcase_add_test(tc, test_list_avx2);
	tcase_add_test(tc, test_list_env_scalar);
	suite_add_tcase(s, tc);
	tc = tcase_create("sweeps");
	tcase_set_timeout(tc, 600); /* minutes under the sanitizers */
	tcase_add_test(tc, test_every_f16);
	tcase_add_test(tc, test_every_bf16);
	tcase_add_test(tc, test_every_exponent);
	tcase_add_test(tc, test_boundaries);
	tcase_add_test(tc, test_table_values);
	tcase_add_test(tc, test_random_f32);
	tcase_add_test(tc, test_random_f64);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(shortest_suite)
