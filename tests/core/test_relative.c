/* /v1/relative/t5 and /v1/relative/xl against tests/data/relative (tests/ref/gen_tables.py).
 *
 * t5: every bucket equal to transformers' _relative_position_bucket run in torch (int32, exact),
 * including its float32 log; hand-checked buckets of the default configuration; the T5 configurations
 * on which transformers divides by zero are refused by name.
 * xl: exact within 1 ulp of float64 NumPy in every dtype (and of mpmath in f64), hf within 1 ulp of
 * Transformer-XL's float32 torch code, on both kernel paths. */
#include "posenc/core.h"
#include "support/pe_check.h"
#include "support/pe_kat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define DATA "tests/data/relative"

START_TEST(t5_vs_transformers)
{
	struct pe_kat k;
	size_t compared = 0, cases = 0;
	pe_kat_load(&k, DATA);
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		json_t *c = pe_kat_case(&k, i);
		if (strcmp(pe_kat_str(c, "table"), "relative/t5") != 0)
			continue;
		struct pe_shape s;
		size_t n = pe_kat_shape(c, &s);
		const char *query = pe_kat_str(c, "query");
		int32_t *want = pe_kat_file(&k, c, "torch_i32", n * 4);
		int32_t *got = pe_kat_run("relative/t5", query, PE_I32, &s);
		for (size_t j = 0; j < n; j++)
			ck_assert_msg(got[j] == want[j], "%s: [%zu, %zu] is bucket %d, transformers says %d", query,
				      j / s.dim[1], j % s.dim[1], got[j], want[j]);
		compared += n;
		cases++;
		free(want);
		free(got);
	}
	pe_kat_free(&k);
	fprintf(stderr, "t5: %zu buckets of %zu cases identical to transformers\n", compared, cases);
	ck_assert_uint_ge(cases, 5);
}
END_TEST

static int32_t *t5_row(const char *query, size_t q, size_t kl)
{
	struct pe_shape s = {.rank = 2, .dim = {q, kl}};
	return pe_kat_run("relative/t5", query, PE_I32, &s);
}

/* Defaults (32 buckets, max_distance 128, bidirectional): 16 buckets per direction, 8 exact, then
 * 8 + int(log(n/8)/log(16)*8); keys after the query (k > q) add 16. */
START_TEST(t5_buckets_by_hand)
{
	int32_t *fwd = t5_row("q_len=1&k_len=1001", 1, 1001); /* k - q = k */
	static const int at[] = {0, 1, 7, 8, 12, 127, 128, 1000}, fwd_want[] = {0, 17, 23, 24, 25, 31, 31, 31};
	for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
		ck_assert_msg(fwd[at[i]] == fwd_want[i], "k - q = %d: bucket %d", at[i], fwd[at[i]]);
	free(fwd);
	int32_t *back = t5_row("q_len=1001&k_len=1", 1001, 1); /* k - q = -q */
	static const int back_want[] = {0, 1, 7, 8, 9, 15, 15, 15};
	for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
		ck_assert_msg(back[at[i]] == back_want[i], "k - q = -%d: bucket %d", at[i], back[at[i]]);
	free(back);
	/* decoder (bidirectional=0): future keys all fall in bucket 0, the past uses all 32 buckets */
	int32_t *dec = t5_row("q_len=2&k_len=2&bidirectional=0", 2, 2);
	ck_assert_int_eq(dec[1], 0);
	ck_assert_int_eq(dec[2], 1);
	free(dec);
}
END_TEST

START_TEST(t5_is_int32_only)
{
	struct pe_params p;
	struct pe_err err;
	ck_assert_int_eq(pe_query_params(&p, "relative/t5", "q_len=3", &err), 0);
	float out[9];
	ck_assert_int_eq(pe_table_compute(&p, PE_F32, out, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "dtype");
	ck_assert_int_eq(p.def->fixed_dtype, PE_I32);
	char key[128];
	ck_assert_int_gt(pe_params_canonical(&p, key, sizeof key), 0);
	ck_assert_str_eq(key, "q_len=3&k_len=3&num_buckets=32&max_distance=128&bidirectional=1");
	pe_params_destroy(&p);
}
END_TEST

/* ---- xl ---- */

/* xl against each reference, within 1 ulp (per_dtype: in every float dtype, label's %s its name). */
static const struct xl_run {
	const char *label;
	struct pe_kat_cmp cmp;
	int per_dtype;
} xl_runs[] = {
	{"xl exact %s vs numpy", {"relative/xl", "query", "ref_f64", PE_F64, NULL, 0}, 1},
	{"xl exact %s vs mpmath", {"relative/xl", "query", "mp_f64", PE_F64, NULL, 0}, 1},
	{"xl hf f32 vs torch", {"relative/xl", "hf_query", "torch_f32", PE_F32, NULL, 1}, 0},
};
#define NXL_RUNS ((int)(sizeof xl_runs / sizeof xl_runs[0]))

/* Iteration i: comparison i / 2 on kernel path i % 2 (scalar, AVX2). */
START_TEST(xl_known_answers)
{
	const struct xl_run *x = &xl_runs[_i / 2];
	if (!pe_kat_use_isa(_i % 2))
		return;
	if (x->per_dtype)
		pe_kat_compare_dtypes(DATA, &x->cmp, x->label, 1, 1, 1);
	else
		pe_kat_compare_dir(DATA, &x->cmp, x->label, 1, 1);
}
END_TEST

/* exact is not torch: positions up to 999 make float32 angles visibly different. */
START_TEST(xl_exact_is_not_torch)
{
	if (!pe_kat_use_isa(_i))
		return;
	const struct pe_kat_cmp exact = {"relative/xl", "query", "torch_f32", PE_F32, NULL, 0};
	struct pe_kat k;
	struct pe_kat_max me = {.what = "(xl exact f32 vs torch)"};
	pe_kat_load(&k, DATA);
	pe_kat_compare(&k, &exact, &me, &me);
	pe_kat_free(&k);
	ck_assert_uint_gt(me.max, 100);
}
END_TEST

START_TEST(xl_scalar_and_avx2_agree)
{
	static const char *const dirs[] = {DATA};
	if (pe_kat_have_avx2(""))
		pe_kat_paths_agree(dirs, 1, "relative/xl", "xl");
}
END_TEST

/* Positions run len-1 ... 0 and are clamped: len=5, clamp_len=2 gives 2, 2, 2, 1, 0. dim=4 has
 * frequencies 1 and base^(-1/2) = 0.01: rows [sin p, sin p/100, cos p, cos p/100]. */
START_TEST(xl_positions_by_hand)
{
	struct pe_shape s = {.rank = 2, .dim = {5, 4}};
	double *t = pe_kat_run("relative/xl", "len=5&dim=4&clamp_len=2", PE_F64, &s);
	static const double pos[] = {2, 2, 2, 1, 0};
	for (int r = 0; r < 5; r++) {
		const double want[4] = {sin(pos[r]), sin(pos[r] * 0.01), cos(pos[r]), cos(pos[r] * 0.01)};
		for (int j = 0; j < 4; j++)
			ck_assert_msg(pe_ulp_f64(t[r * 4 + j], want[j]) <= 1, "row %d col %d: %.17g, expected %.17g", r, j,
				      t[r * 4 + j], want[j]);
	}
	free(t);
}
END_TEST

START_TEST(validation_names_the_parameter)
{
	static const struct pe_kat_refusal bad[] = {
		{"relative/t5", "k_len=4", "q_len"},
		{"relative/t5", "q_len=0", "q_len"},
		{"relative/t5", "q_len=4&k_len=0", "k_len"},
		{"relative/t5", "q_len=4&num_buckets=1", "num_buckets"},
		{"relative/t5", "q_len=4&num_buckets=0", "num_buckets"},
		{"relative/t5", "q_len=4&num_buckets=3", "num_buckets"},
		{"relative/t5", "q_len=4&num_buckets=100000", "num_buckets"},
		{"relative/t5", "q_len=4&max_distance=8", "max_distance"},
		{"relative/t5", "q_len=4&max_distance=0", "max_distance"},
		{"relative/t5", "q_len=4&num_buckets=8&max_distance=2", "max_distance"},
		{"relative/t5", "q_len=4&num_buckets=8&max_distance=4&bidirectional=0", "max_distance"},
		{"relative/t5", "q_len=4&bidirectional=2", "bidirectional"},
		{"relative/t5", "q_len=4&compat=hf", "compat"},
		{"relative/xl", "dim=8", "len"},
		{"relative/xl", "len=4", "dim"},
		{"relative/xl", "len=0&dim=8", "len"},
		{"relative/xl", "len=4&dim=7", "dim"},
		{"relative/xl", "len=4&dim=0", "dim"},
		{"relative/xl", "len=4&dim=8&clamp_len=-1", "clamp_len"},
		{"relative/xl", "len=4&dim=8&base=0", "base"},
		{"relative/xl", "len=4&dim=8&compat=ggml", "compat"},
		{"relative/xl", "len=4&dim=8&offset=3", "offset"},
	};
	pe_kat_rejects_all(bad, sizeof bad / sizeof bad[0]);
	/* the smallest valid T5 configurations */
	struct pe_params p;
	struct pe_err err;
	ck_assert_int_eq(pe_query_params(&p, "relative/t5", "q_len=4&num_buckets=4&max_distance=2", &err), 0);
	pe_params_destroy(&p);
	ck_assert_int_eq(pe_query_params(&p, "relative/t5", "q_len=4&num_buckets=2&max_distance=2&bidirectional=0", &err), 0);
	pe_params_destroy(&p);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("relative");
	TCase *t5 = tcase_create("t5");
	tcase_add_test(t5, t5_vs_transformers);
	tcase_add_test(t5, t5_buckets_by_hand);
	tcase_add_test(t5, t5_is_int32_only);
	suite_add_tcase(s, t5);
	TCase *xl = tcase_create("xl");
	tcase_add_loop_test(xl, xl_known_answers, 0, 2 * NXL_RUNS);
	tcase_add_loop_test(xl, xl_exact_is_not_torch, 0, 2);
	tcase_add_test(xl, xl_scalar_and_avx2_agree);
	tcase_add_test(xl, xl_positions_by_hand);
	suite_add_tcase(s, xl);
	TCase *v = tcase_create("validation");
	tcase_add_test(v, validation_names_the_parameter);
	suite_add_tcase(s, v);
	return s;
}

PE_TEST_MAIN(suite)
