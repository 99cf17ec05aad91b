/* /v1/alibi/slopes and /v1/alibi against tests/data/alibi (tests/ref/gen_tables.py).
 *
 * Slopes are compared with mpmath's 2^(-max_bias*k/den) rounded once (the generator also checks the
 * paper's, BLOOM's and MPT's float64 formulas against it): f64 within 1 ulp, every other dtype
 * within 1 ulp of the mpmath value rounded once to it. Bias entries likewise against mpmath's
 * -2^e*|q_pos - k|; masked entries must be exactly the dtype's lowest finite value. ALiBi uses no
 * trigonometric kernel, so there is one code path. */
#include "posenc/core.h"
#include "support/pe_check.h"
#include "support/pe_kat.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA "tests/data/alibi"

static const enum pe_dtype float_dtypes[] = {PE_F64, PE_F32, PE_F16, PE_BF16};

/* Compare every case of one table in every float dtype; masked entries (-inf in the file) must be
 * the dtype's lowest value. Returns the number of masked entries seen. */
static size_t compare_table(const char *table, uint64_t bound_f64)
{
	size_t masked = 0;
	for (size_t t = 0; t < 4; t++) {
		enum pe_dtype dt = float_dtypes[t];
		char what[64];
		snprintf(what, sizeof what, "%s %s vs mpmath", table, pe_dtype_name(dt));
		struct pe_kat_max m = {.what = what};
		struct pe_kat k;
		pe_kat_load(&k, DATA);
		for (size_t i = 0; i < pe_kat_count(&k); i++) {
			json_t *c = pe_kat_case(&k, i);
			if (strcmp(pe_kat_str(c, "table"), table) != 0)
				continue;
			struct pe_shape s;
			size_t n = pe_kat_shape(c, &s);
			const char *query = pe_kat_str(c, "query");
			double *ref = pe_kat_file(&k, c, pe_kat_has(c, "mp_f64") ? "mp_f64" : "ref_f64", n * 8);
			void *got = pe_kat_run(table, query, dt, &s);
			for (size_t j = 0; j < n; j++) {
				if (isinf(ref[j])) {
					ck_assert_msg(pe_kat_get(dt, got, j) == pe_dtype_lowest(dt), "%s %s [%zu]: masked entry is %g",
						      query, pe_dtype_name(dt), j, pe_kat_get(dt, got, j));
					masked++;
					continue;
				}
				pe_kat_max_add(&m, pe_kat_ulp(dt, got, j, ref[j]), query, j);
			}
			free(ref);
			free(got);
		}
		pe_kat_free(&k);
		pe_kat_max_check(&m, dt == PE_F64 ? bound_f64 : 1);
	}
	return masked;
}

START_TEST(slopes_vs_mpmath)
{
	ck_assert_uint_eq(compare_table("alibi/slopes", 1), 0);
}
END_TEST

/* A bias entry is the long double slope times an integer, rounded once: within 1 ulp of the exact
 * product in every dtype (a double slope times the integer, rounded again, was 1.3 ulp off in f64
 * in case h21_q1_k6_off9_mb13.1). */
START_TEST(bias_vs_mpmath)
{
	ck_assert_uint_gt(compare_table("alibi", 1), 100);
}
END_TEST

static double *slopes(const char *query, size_t heads)
{
	struct pe_shape s = {.rank = 1, .dim = {heads}};
	return pe_kat_run("alibi/slopes", query, PE_F64, &s);
}

START_TEST(slopes_by_hand)
{
	double *s8 = slopes("heads=8", 8);
	for (int i = 0; i < 8; i++)
		ck_assert_msg(s8[i] == ldexp(1.0, -(i + 1)), "heads=8: slope %d = %.17g", i, s8[i]);
	free(s8);
	/* 12 heads: the 8 slopes of 8, then every other slope of 16: 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 */
	double *s12 = slopes("heads=12", 12);
	for (int i = 0; i < 8; i++)
		ck_assert(s12[i] == ldexp(1.0, -(i + 1)));
	for (int j = 0; j < 4; j++)
		ck_assert_msg(pe_ulp_f64(s12[8 + j], M_SQRT1_2 * ldexp(1.0, -j)) <= 1, "heads=12: slope %d = %.17g", 8 + j,
			      s12[8 + j]);
	free(s12);
	double *s1 = slopes("heads=1", 1);
	ck_assert(s1[0] == ldexp(1.0, -8));
	free(s1);
	double *m16 = slopes("heads=4&max_bias=16", 4);
	for (int i = 0; i < 4; i++)
		ck_assert(m16[i] == ldexp(1.0, -4 * (i + 1)));
	free(m16);
}
END_TEST

/* k_len defaults to q_len, offset to k_len - q_len; both appear in the canonical key. */
START_TEST(bias_defaults)
{
	static const struct {
		const char *query, *canonical;
	} cases[] = {
		{"heads=2&q_len=3", "heads=2&q_len=3&k_len=3&offset=0&max_bias=8&mask=none"},
		{"heads=2&q_len=3&k_len=10", "heads=2&q_len=3&k_len=10&offset=7&max_bias=8&mask=none"},
		{"q_len=5&k_len=2&heads=1", "heads=1&q_len=5&k_len=2&offset=-3&max_bias=8&mask=none"},
		{"heads=1&q_len=2&offset=40&mask=causal", "heads=1&q_len=2&k_len=2&offset=40&max_bias=8&mask=causal"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct pe_params p;
		struct pe_err err;
		char key[256];
		ck_assert_int_eq(pe_query_params(&p, "alibi", cases[i].query, &err), 0);
		ck_assert_int_gt(pe_params_canonical(&p, key, sizeof key), 0);
		ck_assert_str_eq(key, cases[i].canonical);
		pe_params_destroy(&p);
	}
}
END_TEST

/* A KV-cache step: one query at position 9 over 10 keys is the last row of the 10 x 10 table. */
START_TEST(bias_offset_is_a_kv_cache_position)
{
	struct pe_shape full_s = {.rank = 3, .dim = {3, 10, 10}}, step_s = {.rank = 3, .dim = {3, 1, 10}};
	float *full = pe_kat_run("alibi", "heads=3&q_len=10&mask=causal", PE_F32, &full_s);
	float *step = pe_kat_run("alibi", "heads=3&q_len=1&k_len=10&mask=causal", PE_F32, &step_s);
	for (int h = 0; h < 3; h++)
		ck_assert_int_eq(memcmp(step + h * 10, full + h * 100 + 90, 10 * sizeof(float)), 0);
	ck_assert_float_eq(step[0], -0.0625f * 9); /* 3 heads: slopes 2^-4, 2^-8, then 2^-2 (of 4) */
	free(full);
	free(step);
}
END_TEST

/* Where q_pos = k the bias is +0 (not -0), in every dtype; causal masks only k > q_pos. */
START_TEST(diagonal_and_mask)
{
	struct pe_shape s = {.rank = 3, .dim = {2, 4, 6}};
	for (size_t t = 0; t < 4; t++) {
		enum pe_dtype dt = float_dtypes[t];
		void *b = pe_kat_run("alibi", "heads=2&q_len=4&k_len=6&mask=causal", dt, &s);
		for (size_t h = 0; h < 2; h++)
			for (size_t i = 0; i < 4; i++)
				for (size_t k = 0; k < 6; k++) {
					size_t j = (h * 4 + i) * 6 + k, qpos = 2 + i;
					double v = pe_kat_get(dt, b, j);
					if (k == qpos)
						ck_assert_msg(v == 0 && !signbit(v), "%s: diagonal [%zu] is %g", pe_dtype_name(dt), j, v);
					else if (k > qpos)
						ck_assert(v == pe_dtype_lowest(dt));
					else
						ck_assert(v < 0 && v > -1);
				}
		free(b);
	}
	ck_assert(pe_dtype_lowest(PE_F32) == -FLT_MAX);
	ck_assert(pe_dtype_lowest(PE_F16) == -65504.0);
}
END_TEST

/* pe_table_check_dtype decides from the parameters exactly what computing would show: the largest
 * unmasked |bias| of the f64 table (found here by computing it) rounds to infinity in f16 iff the
 * check refuses f16, naming dtype; f32 and f64 hold every ALiBi table. */
START_TEST(dtype_check_matches_the_table)
{
	static const char *const cases[][5] = {
		/* heads, q_len, k_len, offset, mask */
		{"8", "4", "4", "131037", "none"},   {"8", "4", "4", "131030", "none"},
		{"12", "3", "5", "87370", "none"},   {"12", "3", "5", "87370", "causal"},
		{"6", "2", "300000", "-10", "none"}, {"6", "2", "300000", "-10", "causal"},
		{"1", "5", "5", "16773120", "none"}, {"3", "2", "2", "4503599627370496", "causal"},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		struct pe_params p;
		struct pe_err err = {0};
		pe_params_init(&p, pe_table_find("alibi"));
		static const char *const keys[] = {"heads", "q_len", "k_len", "offset", "mask"};
		for (int k = 0; k < 5; k++)
			ck_assert_int_eq(pe_params_set(&p, keys[k], cases[c][k], &err), 0);
		ck_assert_int_eq(pe_params_finish(&p, &err), 0);
		struct pe_shape sh;
		int of;
		pe_table_shape(&p, &sh);
		size_t n = pe_shape_count(&sh, &of);
		double *t = malloc(n * sizeof *t), m = 0;
		ck_assert_int_eq(pe_table_compute(&p, PE_F64, t, &err), 0);
		for (size_t i = 0; i < n; i++)
			if (t[i] != -DBL_MAX && fabs(t[i]) > m)
				m = fabs(t[i]);
		int inf16 = isinf(pe_f16_to_f32(pe_f64_to_f16(m)));
		memset(&err, 0, sizeof err);
		int rc = pe_table_check_dtype(&p, PE_F16, &err);
		ck_assert_msg(rc == (inf16 ? PE_EINVAL : 0), "case %zu: max %.17g, check %d", c, m, rc);
		if (rc)
			ck_assert_str_eq(err.param, "dtype");
		ck_assert_int_eq(pe_table_check_dtype(&p, PE_F32, NULL), 0);
		ck_assert_int_eq(pe_table_check_dtype(&p, PE_F64, NULL), 0);
		free(t);
		pe_params_destroy(&p);
	}
}
END_TEST

/* The helper for values already computed (learned tables): the first value that rounds to
 * infinity in the dtype is refused, naming dtype; f16's largest finite 65504 and the values that
 * round down to it pass, 65520 (the tie, to even = infinity) does not. */
START_TEST(dtype_range_of_values)
{
	double ok[] = {0, -65504, 65519.99, 1e-30, NAN}, bad[] = {1, 65520}, big[] = {3.5e38};
	struct pe_err err = {0};
	ck_assert_int_eq(pe_check_dtype_range(ok, 5, PE_F16, &err), 0);
	ck_assert_int_eq(pe_check_dtype_range(bad, 2, PE_F16, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "dtype");
	ck_assert_int_eq(pe_check_dtype_range(bad, 2, PE_F32, NULL), 0);
	ck_assert_int_eq(pe_check_dtype_range(big, 1, PE_F32, NULL), PE_EINVAL);
	ck_assert_int_eq(pe_check_dtype_range(big, 1, PE_BF16, NULL), PE_EINVAL);
	ck_assert_int_eq(pe_check_dtype_range(big, 1, PE_F64, NULL), 0);
}
END_TEST

START_TEST(validation_names_the_parameter)
{
	static const struct pe_kat_refusal bad[] = {
		{"alibi/slopes", "heads=0", "heads"},
		{"alibi/slopes", "heads=-4", "heads"},
		{"alibi/slopes", "max_bias=8", "heads"},
		{"alibi/slopes", "heads=8&max_bias=-1", "max_bias"},
		{"alibi/slopes", "heads=8&max_bias=nan", "max_bias"},
		{"alibi/slopes", "heads=8&max_bias=65", "max_bias"},
		{"alibi/slopes", "heads=8&q_len=4", "q_len"},
		{"alibi", "q_len=4", "heads"},
		{"alibi", "heads=4", "q_len"},
		{"alibi", "heads=0&q_len=4", "heads"},
		{"alibi", "heads=4&q_len=0", "q_len"},
		{"alibi", "heads=4&q_len=4&k_len=0", "k_len"},
		{"alibi", "heads=4&q_len=4&offset=99999999999999999", "offset"},
		{"alibi", "heads=4&q_len=4&offset=1.5", "offset"},
		{"alibi", "heads=4&q_len=4&mask=full", "mask"},
		{"alibi", "heads=4&q_len=4&max_bias=-2", "max_bias"},
		{"alibi", "heads=4&q_len=4&compat=exact", "compat"},
	};
	pe_kat_rejects_all(bad, sizeof bad / sizeof bad[0]);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("alibi");
	TCase *kat = tcase_create("known answers");
	tcase_add_test(kat, slopes_vs_mpmath);
	tcase_add_test(kat, bias_vs_mpmath);
	suite_add_tcase(s, kat);
	TCase *unit = tcase_create("values, defaults, validation");
	tcase_add_test(unit, slopes_by_hand);
	tcase_add_test(unit, bias_defaults);
	tcase_add_test(unit, bias_offset_is_a_kv_cache_position);
	tcase_add_test(unit, diagonal_and_mask);
	tcase_add_test(unit, dtype_check_matches_the_table);
	tcase_add_test(unit, dtype_range_of_values);
	tcase_add_test(unit, validation_names_the_parameter);
	suite_add_tcase(s, unit);
	return s;
}

PE_TEST_MAIN(suite)
