/* The dtype conversions of src/core/dtype.c against the known answers of tests/ref/gen_dtype.py:
 * float64 and float32 rounded once to binary16 and bfloat16 (ties, subnormals, overflow, NaN,
 * signed zero, double-rounding traps, random values), every binary16 pattern widened to float32,
 * and the store helpers that tables write their output with. */
#include "posenc/dtype.h"
#include "posenc/err.h"
#include "support/pe_check.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA_DIR "tests/data/dtype/"

static void *load(const char *file, size_t elem, size_t *n)
{
	char path[256];
	size_t len;
	snprintf(path, sizeof path, DATA_DIR "%s", file);
	void *p = pe_test_read_file(path, &len);
	ck_assert_msg(len % elem == 0 && len > 0, "%s: %zu bytes", path, len);
	*n = len / elem;
	return p;
}

static int is_nan16(uint16_t h, int bf16)
{
	return bf16 ? ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) : ((h & 0x7c00) == 0x7c00 && (h & 0x3ff));
}

/* got must equal want bit for bit, except that any NaN matches any NaN of the same sign. */
static int same16(uint16_t got, uint16_t want, int bf16)
{
	if (is_nan16(want, bf16))
		return is_nan16(got, bf16) && (got & 0x8000) == (want & 0x8000);
	return got == want;
}

static uint16_t narrow_f64(double v, int bf16) { return bf16 ? pe_f64_to_bf16(v) : pe_f64_to_f16(v); }
static uint16_t narrow_f32(float v, int bf16) { return bf16 ? pe_f32_to_bf16(v) : pe_f32_to_f16(v); }
static float widen(uint16_t h, int bf16) { return bf16 ? pe_bf16_to_f32(h) : pe_f16_to_f32(h); }

/* Element i of x, float64 (elem 8) or float32 (elem 4), rounded to bf16 or f16 from its own type. */
static uint16_t narrow_at(const void *x, size_t elem, size_t i, int bf16)
{
	return elem == 8 ? narrow_f64(((const double *)x)[i], bf16) : narrow_f32(((const float *)x)[i], bf16);
}

static double value_at(const void *x, size_t elem, size_t i)
{
	return elem == 8 ? ((const double *)x)[i] : (double)((const float *)x)[i];
}

/* <from>_in.bin rounded to binary16 and bfloat16 equals <from>_f16.bin and <from>_bf16.bin. */
static void check_narrowing(const char *from, size_t elem)
{
	static const char *const to[2] = {"f16", "bf16"};
	char file[32];
	size_t n, nh[2];
	snprintf(file, sizeof file, "%s_in.bin", from);
	void *x = load(file, elem, &n);
	uint16_t *want[2];
	size_t bad[2] = {0, 0};
	for (int bf = 0; bf < 2; bf++) {
		snprintf(file, sizeof file, "%s_%s.bin", from, to[bf]);
		want[bf] = load(file, 2, &nh[bf]);
		ck_assert_msg(nh[bf] == n, "%s: %zu values for %zu inputs", file, nh[bf], n);
	}
	for (size_t i = 0; i < n; i++)
		for (int bf = 0; bf < 2; bf++) {
			uint16_t got = narrow_at(x, elem, i, bf);
			if (!same16(got, want[bf][i], bf) && bad[bf]++ < 5)
				fprintf(stderr, "%s->%-4s %a: got 0x%04x, want 0x%04x\n", from, to[bf],
					value_at(x, elem, i), got, want[bf][i]);
		}
	fprintf(stderr, "%s -> f16 / bf16: %zu inputs, %zu / %zu wrong\n", from, n, bad[0], bad[1]);
	for (int bf = 0; bf < 2; bf++) {
		ck_assert_msg(bad[bf] == 0, "%s -> %s: %zu wrong", from, to[bf], bad[bf]);
		free(want[bf]);
	}
	free(x);
}

START_TEST(f64_to_f16_and_bf16) { check_narrowing("f64", 8); }
END_TEST

START_TEST(f32_to_f16_and_bf16) { check_narrowing("f32", 4); }
END_TEST

/* Every non-NaN pattern survives widening to float32 and rounding back, from float32 and from
 * float64. */
static void check_round_trips(int bf16)
{
	for (uint32_t i = 0; i < 65536; i++) {
		uint16_t h = (uint16_t)i;
		if (is_nan16(h, bf16))
			continue;
		ck_assert_msg(narrow_f32(widen(h, bf16), bf16) == h, "%s 0x%04x: not kept through f32",
			      bf16 ? "bf16" : "f16", h);
		ck_assert_msg(narrow_f64((double)widen(h, bf16), bf16) == h, "%s 0x%04x: not kept through f64",
			      bf16 ? "bf16" : "f16", h);
	}
}

START_TEST(f16_to_f32_every_pattern)
{
	size_t n;
	float *want = load("f16_f32.bin", 4, &n);
	ck_assert_uint_eq(n, 65536);
	size_t bad = 0;
	for (uint32_t i = 0; i < 65536; i++) {
		float got = pe_f16_to_f32((uint16_t)i);
		int ok = isnan(want[i]) ? isnan(got) && signbit(got) == signbit(want[i])
					: memcmp(&got, &want[i], 4) == 0; /* bitwise: -0 is not +0 */
		if (!ok && bad++ < 5)
			fprintf(stderr, "f16 0x%04x: got %a, want %a\n", i, (double)got, (double)want[i]);
	}
	ck_assert_uint_eq(bad, 0);
	check_round_trips(0);
	free(want);
}
END_TEST

/* bf16 -> f32 is exact (the top half of a float); every pattern round-trips, values spot-checked. */
START_TEST(bf16_to_f32)
{
	ck_assert_float_eq(pe_bf16_to_f32(0x3f80), 1.0f);
	ck_assert_float_eq(pe_bf16_to_f32(0xc000), -2.0f);
	ck_assert_float_eq(pe_bf16_to_f32(0x0001), 0x1p-133f);
	ck_assert_float_eq(pe_bf16_to_f32(0x7f7f), 0x1.fep127f);
	ck_assert(isinf(pe_bf16_to_f32(0x7f80)) && pe_bf16_to_f32(0x7f80) > 0);
	ck_assert(isnan(pe_bf16_to_f32(0x7fc0)));
	ck_assert(signbit(pe_bf16_to_f32(0x8000)) && pe_bf16_to_f32(0x8000) == 0);
	check_round_trips(1);
}
END_TEST

/* A few answers stated outright, so a regenerated data file cannot silently change them. */
START_TEST(landmarks)
{
	ck_assert_uint_eq(pe_f64_to_f16(65504.0), 0x7bff);
	ck_assert_uint_eq(pe_f64_to_f16(65519.999999), 0x7bff);
	ck_assert_uint_eq(pe_f64_to_f16(65520.0), 0x7c00); /* the tie at the top goes to inf */
	ck_assert_uint_eq(pe_f64_to_f16(-1e300), 0xfc00);
	ck_assert_uint_eq(pe_f64_to_f16(0x1p-24), 0x0001);
	ck_assert_uint_eq(pe_f64_to_f16(0x1p-25), 0x0000); /* tie to even: zero */
	ck_assert_uint_eq(pe_f64_to_f16(0x1.0000000000001p-25), 0x0001);
	ck_assert_uint_eq(pe_f64_to_f16(0x3p-25), 0x0002);    /* 1.5 * 2^-24: tie to even */
	ck_assert_uint_eq(pe_f64_to_f16(0x1.ffcp-15), 0x0400); /* (largest subnormal + 2^-14) / 2: to 2^-14 */
	ck_assert_uint_eq(pe_f64_to_f16(-0.0), 0x8000);
	ck_assert_uint_eq(pe_f64_to_f16(0x1p-1074), 0x0000);
	ck_assert_uint_eq(pe_f64_to_f16(1.0 + 0x1p-11), 0x3c00);            /* tie, even below */
	ck_assert_uint_eq(pe_f64_to_f16(1.0 + 0x1p-11 + 0x1p-40), 0x3c01); /* float32 would lose 2^-40 */
	ck_assert_uint_eq(pe_f64_to_f16(1.0 + 0x3p-11), 0x3c02);            /* tie, even above */
	ck_assert_uint_eq(pe_f64_to_bf16(1.0 + 0x1p-8 + 0x1p-30), 0x3f81);
	ck_assert_uint_eq(pe_f64_to_bf16(1.0 + 0x1p-8), 0x3f80);
	ck_assert_uint_eq(pe_f64_to_bf16(0x1.ffp127), 0x7f80); /* tie above the largest: inf */
	ck_assert_uint_eq(pe_f64_to_bf16(0x1.fefffffffffffp127), 0x7f7f);
	ck_assert_uint_eq(pe_f64_to_bf16(0x1p-133), 0x0001);
	ck_assert_uint_eq(pe_f64_to_bf16(0x1p-134), 0x0000);
	ck_assert_uint_eq(pe_f64_to_bf16(-0x1.8p-133), 0x8002);
	ck_assert(is_nan16(pe_f64_to_f16(NAN), 0));
	ck_assert(is_nan16(pe_f64_to_bf16(-NAN), 1));
	ck_assert_uint_eq(pe_f64_to_bf16(-INFINITY), 0xff80);
	ck_assert_uint_eq(pe_f32_to_bf16(0x1p-134f), 0x0000); /* float subnormal, tie: to zero */
	ck_assert_uint_eq(pe_f32_to_bf16(0x1.0002p-134f), 0x0001);
	ck_assert_uint_eq(pe_f32_to_bf16(0x1.8p-133f), 0x0002);
	ck_assert_uint_eq(pe_f32_to_bf16(FLT_MAX), 0x7f80);
}
END_TEST

/* o16 holds x's n elements (elem 8: float64, 4: float32) rounded to bf16 or f16 one by one. */
static void expect_stored_halves(const uint16_t *o16, const void *x, size_t elem, size_t n, int bf16)
{
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(o16[i] == narrow_at(x, elem, i, bf16), "pe_store_f%zu to %s, element %zu: 0x%04x, want 0x%04x",
			      elem * 8, bf16 ? "bf16" : "f16", i, o16[i], narrow_at(x, elem, i, bf16));
}

static void store_from(size_t elem, enum pe_dtype dt, void *out, const void *x, size_t n)
{
	if (elem == 8)
		pe_store_f64(dt, out, x, n);
	else
		pe_store_f32(dt, out, x, n);
}

/* pe_store_f64 (elem 8) or pe_store_f32 (elem 4) of x into each float dtype: its own type bit for
 * bit, the other float type 0 ulp from a cast, f16 and bf16 as the scalar conversions round. */
static void check_stores(const void *x, size_t elem, size_t n, double *o64, float *o32, uint16_t *o16)
{
	store_from(elem, PE_F64, o64, x, n);
	store_from(elem, PE_F32, o32, x, n);
	ck_assert_msg(memcmp(elem == 8 ? (const void *)o64 : (const void *)o32, x, n * elem) == 0,
		      "pe_store_f%zu into its own dtype changed a value", elem * 8);
	for (size_t i = 0; i < n; i++) {
		if (elem == 8)
			ck_assert_msg(pe_ulp_f32(o32[i], (float)((const double *)x)[i]) == 0,
				      "pe_store_f64 to f32, element %zu", i);
		else
			ck_assert_msg(pe_ulp_f64(o64[i], (double)((const float *)x)[i]) == 0,
				      "pe_store_f32 to f64, element %zu", i);
	}
	for (int bf = 0; bf < 2; bf++) {
		store_from(elem, bf ? PE_BF16 : PE_F16, o16, x, n);
		expect_stored_halves(o16, x, elem, n, bf);
	}
}

/* pe_store_f64 / pe_store_f32 round each element as the scalar conversions do. */
START_TEST(store_helpers)
{
	size_t n;
	double *x = load("f64_in.bin", 8, &n);
	float *xf = malloc(n * sizeof *xf);
	float *o32 = malloc(n * 4);
	double *o64 = malloc(n * 8);
	uint16_t *o16 = malloc(n * 2);
	ck_assert(xf && o32 && o64 && o16);
	for (size_t i = 0; i < n; i++)
		xf[i] = (float)x[i];
	check_stores(x, 8, n, o64, o32, o16);
	check_stores(xf, 4, n, o64, o32, o16);
	free(x);
	free(xf);
	free(o32);
	free(o64);
	free(o16);
}
END_TEST

START_TEST(names_sizes_lowest)
{
	static const struct {
		const char *name;
		enum pe_dtype dt;
		size_t size;
	} t[] = {{"f32", PE_F32, 4}, {"f64", PE_F64, 8}, {"f16", PE_F16, 2}, {"bf16", PE_BF16, 2}, {"i32", PE_I32, 4}};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		enum pe_dtype dt = PE_DTYPE_COUNT_;
		ck_assert_int_eq(pe_dtype_parse(t[i].name, &dt), 0);
		ck_assert_int_eq(dt, t[i].dt);
		ck_assert_str_eq(pe_dtype_name(dt), t[i].name);
		ck_assert_uint_eq(pe_dtype_size(dt), t[i].size);
		ck_assert_int_eq(pe_dtype_is_float(dt), dt != PE_I32);
	}
	enum pe_dtype dt;
	ck_assert_int_eq(pe_dtype_parse("F32", &dt), PE_EINVAL);
	ck_assert_int_eq(pe_dtype_parse("float32", &dt), PE_EINVAL);
	ck_assert_int_eq(pe_dtype_parse("", &dt), PE_EINVAL);
	/* torch.finfo(dtype).min */
	ck_assert_double_eq(pe_dtype_lowest(PE_F32), -3.4028234663852886e38);
	ck_assert_double_eq(pe_dtype_lowest(PE_F64), -1.7976931348623157e308);
	ck_assert_double_eq(pe_dtype_lowest(PE_F16), -65504.0);
	ck_assert_double_eq(pe_dtype_lowest(PE_BF16), -3.3895313892515355e38);
	/* and it is representable: it survives the rounding into its own dtype */
	ck_assert_uint_eq(pe_f64_to_f16(pe_dtype_lowest(PE_F16)), 0xfbff);
	ck_assert_uint_eq(pe_f64_to_bf16(pe_dtype_lowest(PE_BF16)), 0xff7f);
}
END_TEST

START_TEST(shapes)
{
	struct pe_shape s = {.rank = 2, .dim = {512, 768}};
	int ov;
	char buf[64];
	ck_assert_uint_eq(pe_shape_count(&s, &ov), 512 * 768);
	ck_assert_int_eq(ov, 0);
	ck_assert_uint_eq(pe_shape_format(&s, buf, sizeof buf), 7);
	ck_assert_str_eq(buf, "512,768");
	ck_assert_uint_eq(pe_shape_format(&s, buf, 4), 3); /* truncated, terminated */
	ck_assert_str_eq(buf, "512");
	struct pe_shape big = {.rank = 3, .dim = {SIZE_MAX / 2, 3, 1}};
	ck_assert_uint_eq(pe_shape_count(&big, &ov), 0);
	ck_assert_int_eq(ov, 1);
	struct pe_shape zero = {.rank = 2, .dim = {0, SIZE_MAX}};
	ck_assert_uint_eq(pe_shape_count(&zero, &ov), 0);
	ck_assert_int_eq(ov, 0);
	struct pe_shape scalar = {.rank = 0};
	ck_assert_uint_eq(pe_shape_count(&scalar, &ov), 1);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("dtype");
	TCase *tc = tcase_create("rounding");
	tcase_set_timeout(tc, 30); /* every bit pattern, also under ASan */
	tcase_add_test(tc, f64_to_f16_and_bf16);
	tcase_add_test(tc, f32_to_f16_and_bf16);
	tcase_add_test(tc, f16_to_f32_every_pattern);
	tcase_add_test(tc, bf16_to_f32);
	tcase_add_test(tc, landmarks);
	tcase_add_test(tc, store_helpers);
	suite_add_tcase(s, tc);
	tc = tcase_create("types");
	tcase_add_test(tc, names_sizes_lowest);
	tcase_add_test(tc, shapes);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
