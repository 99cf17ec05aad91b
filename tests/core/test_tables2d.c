/* /v1/sinusoidal2d and /v1/rope2d against the known answers of tests/ref/gen_tables.py, in ulps, on
 * both kernel paths (scalar and AVX2).
 *
 *   exact  every dtype within 1 ulp of the float64 NumPy reference rounded once to it (both are
 *          within 1 ulp of the true sine of the same double angle, so at most one double apart);
 *          f64 within 1 ulp of mpmath where the case has it.
 *   hf     timm and rope2d within 1 ulp of PyTorch float32 (same float frequencies and angles; sin/cos
 *          rounded from double vs torch's SLEEF sinf/cosf <= 1 ulp); at positions in the hundreds
 *          hf follows PyTorch where exact visibly does not. mae+hf is MAE's float64 table rounded to
 *          float: bit-identical to exact f32.
 * Plus hand-checked values that pin the channel layouts (MAE's meshgrid order) and validation. */
#include "posenc/core.h"
#include "support/pe_check.h"
#include "support/pe_kat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const dirs[] = {"tests/data/sinusoidal2d", "tests/data/rope2d"};
#define NDIRS (sizeof dirs / sizeof dirs[0])

static const enum pe_dtype float_dtypes[] = {PE_F64, PE_F32, PE_F16, PE_BF16};

/* One comparison over the cases of both directories, within 1 ulp. */
static void compare_dirs(const struct pe_kat_cmp *cmp, const char *what)
{
	struct pe_kat_max m = {.what = what};
	for (size_t d = 0; d < NDIRS; d++) {
		struct pe_kat k;
		pe_kat_load(&k, dirs[d]);
		pe_kat_compare(&k, cmp, &m, &m);
		pe_kat_free(&k);
	}
	pe_kat_max_check(&m, 1);
}

START_TEST(exact_vs_numpy)
{
	if (!pe_kat_use_isa(_i))
		return;
	for (size_t t = 0; t < 4; t++) {
		char what[64];
		snprintf(what, sizeof what, "2d exact %s vs numpy", pe_dtype_name(float_dtypes[t]));
		const struct pe_kat_cmp cmp = {.query_field = "query", .file = "ref_f64", .dt = float_dtypes[t]};
		compare_dirs(&cmp, what);
	}
}
END_TEST

START_TEST(exact_f64_vs_mpmath)
{
	if (!pe_kat_use_isa(_i))
		return;
	const struct pe_kat_cmp cmp = {.query_field = "query", .file = "mp_f64", .dt = PE_F64};
	compare_dirs(&cmp, "2d exact f64 vs mpmath");
}
END_TEST

/* compat=hf in f32 against PyTorch; f64 output carries the same floats. */
START_TEST(hf_vs_torch)
{
	if (!pe_kat_use_isa(_i))
		return;
	const struct pe_kat_cmp cmp = {.query_field = "hf_query", .file = "torch_f32", .dt = PE_F32, .f64_is_f32 = 1};
	compare_dirs(&cmp, "2d hf f32 vs torch");
}
END_TEST

/* MAE computes in float64 and a model holds the float32 copy: mae+hf f32 is exact f32, bit for bit,
 * and its f16 is that float rounded again (what .half() of the float32 parameter gives). */
START_TEST(mae_hf_is_the_float64_table_as_float)
{
	if (!pe_kat_use_isa(_i))
		return;
	struct pe_kat k;
	size_t checked = 0;
	pe_kat_load(&k, dirs[0]);
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		json_t *c = pe_kat_case(&k, i);
		if (pe_kat_has(c, "torch_f32")) /* timm */
			continue;
		struct pe_shape s;
		size_t n = pe_kat_shape(c, &s);
		float *hf = pe_kat_run("sinusoidal2d", pe_kat_str(c, "hf_query"), PE_F32, &s);
		float *ex = pe_kat_run("sinusoidal2d", pe_kat_str(c, "query"), PE_F32, &s);
		uint16_t *h16 = pe_kat_run("sinusoidal2d", pe_kat_str(c, "hf_query"), PE_F16, &s);
		for (size_t j = 0; j < n; j++) {
			ck_assert_msg(pe_ulp_f32(hf[j], ex[j]) == 0, "%s [%zu]", pe_kat_str(c, "hf_query"), j);
			ck_assert_uint_eq(h16[j], pe_f32_to_f16(hf[j]));
		}
		checked += n;
		free(hf);
		free(ex);
		free(h16);
	}
	pe_kat_free(&k);
	ck_assert_uint_gt(checked, 1000);
}
END_TEST

/* Cases whose grid reaches coordinate 500: float32 angles there are off by up to 2^-15 rad. */
static int far_case(json_t *c)
{
	struct pe_params p;
	struct pe_err err;
	ck_assert_int_eq(pe_query_params(&p, pe_kat_str(c, "table"), pe_kat_str(c, "query"), &err), 0);
	int far = pe_param_int(&p, "height") >= 500 || pe_param_int(&p, "width") >= 500;
	pe_params_destroy(&p);
	return far && pe_kat_has(c, "torch_f32");
}

START_TEST(hf_follows_torch_at_large_positions)
{
	if (!pe_kat_use_isa(_i))
		return;
	struct pe_kat_max mh = {.what = "2d hf f32 vs torch, grids >= 500"},
			  me = {.what = "2d exact f32 vs torch, grids >= 500"};
	double ex_abs = 0;
	for (size_t d = 0; d < NDIRS; d++) {
		struct pe_kat k;
		pe_kat_load(&k, dirs[d]);
		for (size_t i = 0; i < pe_kat_count(&k); i++) {
			json_t *c = pe_kat_case(&k, i);
			if (!far_case(c))
				continue;
			struct pe_shape s;
			size_t n = pe_kat_shape(c, &s);
			const char *table = pe_kat_str(c, "table");
			float *torch = pe_kat_file(&k, c, "torch_f32", n * 4);
			float *hf = pe_kat_run(table, pe_kat_str(c, "hf_query"), PE_F32, &s);
			float *ex = pe_kat_run(table, pe_kat_str(c, "query"), PE_F32, &s);
			for (size_t j = 0; j < n; j++) {
				pe_kat_max_add(&mh, pe_ulp_f32(hf[j], torch[j]), pe_kat_str(c, "hf_query"), j);
				pe_kat_max_add(&me, pe_ulp_f32(ex[j], torch[j]), pe_kat_str(c, "query"), j);
				ex_abs = fmax(ex_abs, fabs((double)ex[j] - torch[j]));
			}
			free(torch);
			free(hf);
			free(ex);
		}
		pe_kat_free(&k);
	}
	fprintf(stderr, "%-7s grids >= 500: max |exact - torch| = %.3g\n", pe_isa_name(), ex_abs);
	pe_kat_max_check(&mh, 1);
	ck_assert_uint_ge(mh.count, 4000);
	/* exact is the true table: far from torch's float angles in absolute terms and in many entries */
	ck_assert_msg(ex_abs > 1e-5, "exact vs torch: max abs %g", ex_abs);
	ck_assert_uint_gt(me.differ, me.count / 4);
}
END_TEST

START_TEST(scalar_and_avx2_agree)
{
	if (pe_kat_have_avx2(""))
		pe_kat_paths_agree(dirs, NDIRS, NULL, "2d");
}
END_TEST

/* Row `row` of a [.., 8] f64 table equals want within 1 ulp each. */
static void expect_row(const double *t, size_t row, const double want[8], const char *what)
{
	for (int j = 0; j < 8; j++)
		ck_assert_msg(pe_ulp_f64(t[row * 8 + j], want[j]) <= 1, "%s: row %zu col %d is %.17g, expected %.17g", what,
			      row, j, t[row * 8 + j], want[j]);
}

/* dim = 8, base = 10000: two frequencies per coordinate, 1 and 0.01. The patch at row 0, column 2
 * (table row cls + 2) must carry sin/cos of 2 where MAE's meshgrid puts the column: first. */
START_TEST(channel_layouts_by_hand)
{
	struct pe_shape s = {.rank = 2, .dim = {7, 8}};
	double *mae = pe_kat_run("sinusoidal2d", "height=2&width=3&dim=8&cls_token=1", PE_F64, &s);
	const double zero[8] = {0};
	const double mae_r0c2[8] = {sin(2.0), sin(0.02), cos(2.0), cos(0.02), 0, 0, 1, 1};
	const double mae_r1c0[8] = {0, 0, 1, 1, sin(1.0), sin(0.01), cos(1.0), cos(0.01)};
	expect_row(mae, 0, zero, "mae cls row");
	expect_row(mae, 3, mae_r0c2, "mae row 0 col 2");
	expect_row(mae, 4, mae_r1c0, "mae row 1 col 0");
	free(mae);

	s.dim[0] = 6;
	double *timm = pe_kat_run("sinusoidal2d", "height=2&width=3&dim=8&variant=timm", PE_F64, &s);
	const double timm_r0c2[8] = {0, 0, sin(2.0), sin(0.02), 1, 1, cos(2.0), cos(0.02)};
	const double timm_r1c0[8] = {sin(1.0), sin(0.01), 0, 0, cos(1.0), cos(0.01), 1, 1};
	expect_row(timm, 2, timm_r0c2, "timm row 0 col 2");
	expect_row(timm, 3, timm_r1c0, "timm row 1 col 0");
	free(timm);

	/* rope2d: w_k = 10000^(-2k/4) = 1, 0.01; patch (1, 2) is row 5; cos plane then sin plane */
	struct pe_shape r = {.rank = 3, .dim = {2, 6, 8}};
	double *rope = pe_kat_run("rope2d", "height=2&width=3&dim=8", PE_F64, &r);
	const double cos12[8] = {cos(1.0), cos(0.01), cos(2.0), cos(0.02), cos(1.0), cos(0.01), cos(2.0), cos(0.02)};
	const double sin12[8] = {sin(1.0), sin(0.01), sin(2.0), sin(0.02), sin(1.0), sin(0.01), sin(2.0), sin(0.02)};
	expect_row(rope, 5, cos12, "rope2d cos (1,2)");
	expect_row(rope, 6 + 5, sin12, "rope2d sin (1,2)");
	free(rope);
}
END_TEST

/* cls_token rows are zeros in every dtype, and the patches follow them unchanged. */
START_TEST(cls_rows_are_zero)
{
	struct pe_shape s3 = {.rank = 2, .dim = {3 + 12, 16}}, s0 = {.rank = 2, .dim = {12, 16}};
	for (size_t t = 0; t < 4; t++) {
		enum pe_dtype dt = float_dtypes[t];
		size_t esz = pe_dtype_size(dt);
		unsigned char *with = pe_kat_run("sinusoidal2d", "height=3&width=4&dim=16&cls_token=3&variant=timm", dt, &s3);
		unsigned char *without = pe_kat_run("sinusoidal2d", "height=3&width=4&dim=16&variant=timm", dt, &s0);
		for (size_t j = 0; j < 3 * 16 * esz; j++)
			ck_assert_uint_eq(with[j], 0);
		ck_assert_int_eq(memcmp(with + 3 * 16 * esz, without, 12 * 16 * esz), 0);
		free(with);
		free(without);
	}
}
END_TEST

START_TEST(validation_names_the_parameter)
{
	static const struct pe_kat_refusal bad[] = {
		{"sinusoidal2d", "height=4&width=4&dim=6", "dim"},
		{"sinusoidal2d", "height=4&width=4&dim=0", "dim"},
		{"sinusoidal2d", "height=4&width=4&dim=2", "dim"},
		{"sinusoidal2d", "height=0&width=4&dim=8", "height"},
		{"sinusoidal2d", "height=4&width=0&dim=8", "width"},
		{"sinusoidal2d", "height=4&width=-3&dim=8", "width"},
		{"sinusoidal2d", "height=2000000&width=4&dim=8", "height"},
		{"sinusoidal2d", "width=4&dim=8", "height"},
		{"sinusoidal2d", "height=4&width=4", "dim"},
		{"sinusoidal2d", "height=4&width=4&dim=8&base=0", "base"},
		{"sinusoidal2d", "height=4&width=4&dim=8&base=-10", "base"},
		{"sinusoidal2d", "height=4&width=4&dim=8&cls_token=-1", "cls_token"},
		{"sinusoidal2d", "height=4&width=4&dim=8&variant=vit", "variant"},
		{"sinusoidal2d", "height=4&width=4&dim=8&compat=ggml", "compat"},
		{"sinusoidal2d", "height=4&width=4&dim=8&len=3", "len"},
		{"rope2d", "height=4&width=4&dim=10", "dim"},
		{"rope2d", "height=4&width=4&dim=2", "dim"},
		{"rope2d", "height=0&width=4&dim=8", "height"},
		{"rope2d", "height=4&width=0&dim=8", "width"},
		{"rope2d", "height=4&width=4&dim=8&base=0", "base"},
		{"rope2d", "height=4&width=4&dim=8&compat=ggml", "compat"},
		{"rope2d", "height=4&width=4&dim=8&variant=mae", "variant"},
	};
	pe_kat_rejects_all(bad, sizeof bad / sizeof bad[0]);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("tables2d");
	TCase *kat = tcase_create("known answers");
	tcase_set_timeout(kat, 60);
	tcase_add_loop_test(kat, exact_vs_numpy, 0, 2);
	tcase_add_loop_test(kat, exact_f64_vs_mpmath, 0, 2);
	tcase_add_loop_test(kat, hf_vs_torch, 0, 2);
	tcase_add_loop_test(kat, mae_hf_is_the_float64_table_as_float, 0, 2);
	tcase_add_loop_test(kat, hf_follows_torch_at_large_positions, 0, 2);
	tcase_add_test(kat, scalar_and_avx2_agree);
	suite_add_tcase(s, kat);
	TCase *unit = tcase_create("layout and validation");
	tcase_add_test(unit, channel_layouts_by_hand);
	tcase_add_test(unit, cls_rows_are_zero);
	tcase_add_test(unit, validation_names_the_parameter);
	suite_add_tcase(s, unit);
	return s;
}

PE_TEST_MAIN(suite)
