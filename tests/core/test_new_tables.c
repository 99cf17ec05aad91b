/* /v1/relative/deberta, /v1/rope/query-scale and /v1/rope?scaling=proportional against
 * tests/data/{relative_deberta,query_scale,rope_proportional} (tests/ref/gen_new_tables.py).
 *
 * deberta: every entry equal to transformers' build_relative_position run in torch float32,
 * including the distances where float32 moves a bucket away from the real-number formula (the core
 * must differ from the real numbers there, as the model does); refusals name the parameter.
 * query-scale: exact within 1 ulp of mpmath in every dtype, hf within 1 ulp of the model's float32
 * expression, past 2^24 too (windows of rows, where float(p) rounds and the two modes differ). proportional: exact within 1 ulp of float64 NumPy, hf within 1 ulp of transformers'
 * proportional inv_freq and rotary forward in torch, the pairs past the rotated share cos 1, sin 0. */
#include "posenc/core.h"
#include "support/pe_check.h"
#include "support/pe_kat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define DEBERTA "tests/data/relative_deberta"
#define QSCALE "tests/data/query_scale"
#define PROP "tests/data/rope_proportional"

/* ---- relative/deberta ---- */

/* Every case's buckets against its file `field`; returns how many entries differ. */
static size_t deberta_against(const char *field, size_t *cases, int only_boundary)
{
	struct pe_kat k;
	size_t differ = 0;
	*cases = 0;
	pe_kat_load(&k, DEBERTA);
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		json_t *c = pe_kat_case(&k, i);
		if (!pe_kat_has(c, field) || (only_boundary && !pe_kat_has(c, "boundary")))
			continue;
		struct pe_shape s;
		size_t n = pe_kat_shape(c, &s);
		int32_t *want = pe_kat_file(&k, c, field, n * 4);
		int32_t *got = pe_kat_run("relative/deberta", pe_kat_str(c, "query"), PE_I32, &s);
		for (size_t j = 0; j < n; j++)
			differ += got[j] != want[j];
		if (!strcmp(field, "torch_i32"))
			for (size_t j = 0; j < n; j++)
				ck_assert_msg(got[j] == want[j], "%s: [%zu, %zu] is %d, transformers says %d",
					      pe_kat_str(c, "query"), j / s.dim[1], j % s.dim[1], got[j], want[j]);
		(*cases)++;
		free(want);
		free(got);
	}
	pe_kat_free(&k);
	return differ;
}

START_TEST(deberta_vs_transformers)
{
	size_t cases;
	deberta_against("torch_i32", &cases, 0);
	fprintf(stderr, "deberta: %zu cases identical to transformers in torch\n", cases);
	ck_assert_uint_ge(cases, 12);
}
END_TEST

/* On the boundary cases float32 rounds the log quotient across an integer: the core's bucket (the
 * model's) is not the real-number one there. */
START_TEST(deberta_boundaries_follow_float32)
{
	size_t cases, differ = deberta_against("mp_i32", &cases, 1);
	ck_assert_uint_ge(cases, 1);
	ck_assert_uint_ge(differ, cases);
}
END_TEST

static int32_t *deberta_row(const char *query, size_t q, size_t kl)
{
	struct pe_shape s = {.rank = 2, .dim = {q, kl}};
	return pe_kat_run("relative/deberta", query, PE_I32, &s);
}

/* position_buckets=4, max_relative_positions=5: mid 2, ratio 4/2 = 2, one log step per doubling:
 * |d| <= 2 kept, else 2 + ceil(log2(|d|/2)); sign of q - k. 256 = 2 * 2^7 lies exactly on a step:
 * float32's log(128) / log(2) is exactly 7 too (the logs of powers of two scale exactly), so 9. */
START_TEST(deberta_by_hand)
{
	int32_t *r = deberta_row("q_len=1&k_len=300&position_buckets=4&max_relative_positions=5", 1, 300);
	static const int at[] = {0, 1, 2, 3, 4, 5, 8, 9, 255, 256, 257};
	static const int want[] = {0, -1, -2, -3, -3, -4, -4, -5, -9, -9, -10};
	for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
		ck_assert_msg(r[at[i]] == want[i], "q - k = -%d: %d, expected %d", at[i], r[at[i]], want[i]);
	free(r);
	int32_t *plain = deberta_row("q_len=3&k_len=2&position_buckets=0", 3, 2); /* q - k, unclipped */
	static const int pw[] = {0, -1, 1, 0, 2, 1};
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(plain[i], pw[i]);
	free(plain);
}
END_TEST

START_TEST(deberta_keys)
{
	struct pe_params p;
	struct pe_err err;
	char key[256];
	ck_assert_int_eq(pe_query_params(&p, "relative/deberta", "q_len=3", &err), 0);
	ck_assert_int_gt(pe_params_canonical(&p, key, sizeof key), 0);
	ck_assert_str_eq(key, "q_len=3&k_len=3&position_buckets=256&max_relative_positions=512");
	ck_assert_int_eq(p.def->fixed_dtype, PE_I32);
	pe_params_destroy(&p);
	/* no buckets: -1 and 0 are one table, and max_relative_positions plays no part */
	ck_assert_int_eq(pe_query_params(&p, "relative/deberta", "q_len=3&position_buckets=-1&max_relative_positions=9", &err), 0);
	ck_assert_int_gt(pe_params_canonical(&p, key, sizeof key), 0);
	ck_assert_str_eq(key, "q_len=3&k_len=3&position_buckets=0");
	pe_params_destroy(&p);
}
END_TEST

START_TEST(deberta_refusals)
{
	static const struct pe_kat_refusal bad[] = {
		{"relative/deberta", "k_len=4", "q_len"},
		{"relative/deberta", "q_len=0", "q_len"},
		{"relative/deberta", "q_len=4&k_len=0", "k_len"},
		{"relative/deberta", "q_len=4&position_buckets=1", "position_buckets"},
		{"relative/deberta", "q_len=4&position_buckets=-2", "position_buckets"},
		{"relative/deberta", "q_len=4&position_buckets=70000", "position_buckets"},
		{"relative/deberta", "q_len=4&max_relative_positions=129", "max_relative_positions"},
		{"relative/deberta", "q_len=4&max_relative_positions=0", "max_relative_positions"},
		{"relative/deberta", "q_len=4&position_buckets=8&max_relative_positions=5", "max_relative_positions"},
		/* buckets past int32: a log ratio of 1 + 2^-15 over distances of 2^30 */
		{"relative/deberta", "q_len=1073741824&k_len=1&position_buckets=65536&max_relative_positions=32770",
		 "max_relative_positions"},
		{"relative/deberta", "q_len=4&compat=hf", "compat"},
	};
	pe_kat_rejects_all(bad, sizeof bad / sizeof bad[0]);
}
END_TEST

/* ---- rope/query-scale ---- */

START_TEST(query_scale_exact_vs_mpmath)
{
	const struct pe_kat_cmp cmp = {"rope/query-scale", "query", "mp_f64", PE_F64, NULL, 0};
	pe_kat_compare_dtypes(QSCALE, &cmp, "query-scale exact %s vs mpmath", 1, 1, 1);
}
END_TEST

START_TEST(query_scale_hf_vs_torch)
{
	const struct pe_kat_cmp cmp = {"rope/query-scale", "hf_query", "torch_f32", PE_F32, NULL, 1};
	pe_kat_compare_dir(QSCALE, &cmp, "query-scale hf f32 vs torch", 1, 1);
}
END_TEST

/* Windows of tables too long to store, past 2^24 where float(p) rounds: rows [row0, row0 + n) of
 * compat=exact within 1 ulp of mpmath, of compat=hf within 1 ulp of torch; and the two differ. */
START_TEST(query_scale_windows_past_2p24)
{
	struct pe_kat k;
	size_t cases = 0;
	pe_kat_load(&k, QSCALE);
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		json_t *c = pe_kat_case(&k, i);
		if (!pe_kat_has(c, "row0"))
			continue;
		struct pe_shape s;
		size_t n = pe_kat_shape(c, &s), row0 = (size_t)json_integer_value(json_object_get(c, "row0")), differ = 0;
		double *mp = pe_kat_file(&k, c, "mpwin_f64", n * 8);
		float *torch = pe_kat_file(&k, c, "torchwin_f32", n * 4);
		float got[2][256];
		ck_assert_uint_le(n, 256);
		for (int m = 0; m < 2; m++) {
			struct pe_params p;
			struct pe_err err;
			ck_assert_int_eq(pe_query_params(&p, "rope/query-scale", pe_kat_str(c, m ? "hf_query" : "query"), &err), 0);
			ck_assert_int_eq(pe_table_compute_rows(&p, PE_F32, 0, row0, n, got[m], &err), 0);
			pe_params_destroy(&p);
		}
		for (size_t j = 0; j < n; j++) {
			ck_assert_msg(pe_ulp_f32(got[0][j], (float)mp[j]) <= 1, "row %zu: exact %.9g, mpmath %.17g", row0 + j,
				      got[0][j], mp[j]);
			ck_assert_msg(pe_ulp_f32(got[1][j], torch[j]) <= 1, "row %zu: hf %.9g, torch %.9g", row0 + j, got[1][j],
				      torch[j]);
			differ += got[0][j] != got[1][j];
		}
		ck_assert_uint_gt(differ, 0);
		free(mp);
		free(torch);
		cases++;
	}
	pe_kat_free(&k);
	ck_assert_uint_ge(cases, 2);
}
END_TEST

/* Llama 4 at the defaults: 1 up to position 8190, then 1 + 0.1 ln 2 from 8191 ((p + 1) / 8192 = 1);
 * Ministral 3: 1 + beta ln(1 + floor(p / orig)). */
START_TEST(query_scale_by_hand)
{
	struct pe_shape s = {.rank = 1, .dim = {8200}};
	double *v = pe_kat_run("rope/query-scale", "len=8200&variant=llama4", PE_F64, &s);
	ck_assert(v[0] == 1.0 && v[8190] == 1.0);
	ck_assert_msg(pe_ulp_f64(v[8191], 1 + 0.1 * log(2.0)) <= 1, "%.17g", v[8191]);
	free(v);
	struct pe_shape s2 = {.rank = 1, .dim = {7}};
	v = pe_kat_run("rope/query-scale", "len=7&variant=ministral3&beta=0.5&original_max_position_embeddings=3", PE_F64, &s2);
	ck_assert(v[2] == 1.0);
	ck_assert_msg(pe_ulp_f64(v[3], 1 + 0.5 * log(2.0)) <= 1, "%.17g", v[3]);
	ck_assert_msg(pe_ulp_f64(v[6], 1 + 0.5 * log(3.0)) <= 1, "%.17g", v[6]);
	free(v);
	/* 1 + beta ln 5457 = 7.88157003834341488..., 0.28 ulp above the double 7.881570038343415, its
	 * correct rounding: a double log times beta gave the double below that, 1.28 ulp off */
	struct pe_shape s3 = {.rank = 1, .dim = {10913}};
	v = pe_kat_run("rope/query-scale",
		       "len=10913&variant=ministral3&beta=0.7997497243597889&original_max_position_embeddings=2", PE_F64, &s3);
	ck_assert_msg(v[10912] == 7.881570038343415, "%.17g", v[10912]);
	free(v);
}
END_TEST

START_TEST(query_scale_refusals)
{
	static const struct pe_kat_refusal bad[] = {
		{"rope/query-scale", "variant=llama4", "len"},
		{"rope/query-scale", "len=4", "variant"},
		{"rope/query-scale", "len=4&variant=llama5", "variant"},
		{"rope/query-scale", "len=0&variant=llama4", "len"},
		{"rope/query-scale", "len=4&variant=llama4&floor_scale=0", "floor_scale"},
		{"rope/query-scale", "len=4&variant=llama4&beta=0.1", "beta"},
		{"rope/query-scale", "len=4&variant=llama4&original_max_position_embeddings=8", "original_max_position_embeddings"},
		{"rope/query-scale", "len=4&variant=ministral3&original_max_position_embeddings=8", "beta"},
		{"rope/query-scale", "len=4&variant=ministral3&beta=0.1", "original_max_position_embeddings"},
		{"rope/query-scale", "len=4&variant=ministral3&beta=0.1&original_max_position_embeddings=8&attn_scale=1",
		 "attn_scale"},
		{"rope/query-scale", "len=4&variant=ministral3&beta=1e31&original_max_position_embeddings=8", "beta"},
		{"rope/query-scale", "len=4&variant=llama4&compat=ggml", "compat"},
	};
	pe_kat_rejects_all(bad, sizeof bad / sizeof bad[0]);
	/* a table beyond f16's range is refused for that dtype only */
	struct pe_params p;
	struct pe_err err;
	ck_assert_int_eq(pe_query_params(&p, "rope/query-scale", "len=9000&variant=llama4&attn_scale=1e6", &err), 0);
	ck_assert_int_eq(pe_table_check_dtype(&p, PE_F16, &err), PE_EINVAL);
	ck_assert_int_eq(pe_table_check_dtype(&p, PE_F32, &err), 0);
	pe_params_destroy(&p);
}
END_TEST

/* ---- rope?scaling=proportional ---- */

START_TEST(proportional_known_answers)
{
	const struct pe_kat_cmp exact = {"rope", "query", "ref_f64", PE_F64, NULL, 0};
	const struct pe_kat_cmp hf = {"rope", "hf_query", "torch_f32", PE_F32, NULL, 1};
	if (!pe_kat_use_isa(_i))
		return;
	pe_kat_compare_dtypes(PROP, &exact, "proportional exact %s vs numpy", 1, 1, 1);
	pe_kat_compare_dir(PROP, &hf, "proportional hf f32 vs torch", 1, 1);
}
END_TEST

/* The pairs past the rotated share do not turn: cos exactly 1, sin exactly 0, in both modes. */
START_TEST(proportional_tail_is_still)
{
	struct pe_kat k;
	pe_kat_load(&k, PROP);
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		json_t *c = pe_kat_case(&k, i);
		struct pe_shape s;
		size_t n = pe_kat_shape(c, &s), len = s.dim[1], dim = s.dim[2];
		size_t rot = (size_t)json_integer_value(json_object_get(c, "rotated"));
		int inter = strstr(pe_kat_str(c, "query"), "interleaved") != NULL;
		for (int m = 0; m < 2; m++) {
			float *t = pe_kat_run("rope", pe_kat_str(c, m ? "hf_query" : "query"), PE_F32, &s);
			for (size_t r = 0; r < len; r++)
				for (size_t j = 0; j < dim; j++) {
					size_t pair = inter ? j / 2 : j % (dim / 2);
					if (pair < rot)
						continue;
					ck_assert(t[r * dim + j] == 1.0f);
					ck_assert(t[n / 2 + r * dim + j] == 0.0f);
				}
			free(t);
		}
	}
	pe_kat_free(&k);
}
END_TEST

START_TEST(proportional_params)
{
	static const struct pe_kat_refusal bad[] = {
		{"rope", "len=4&dim=8&partial_rotary_factor=0.5", "partial_rotary_factor"},
		{"rope", "len=4&dim=8&scaling=linear&factor=2&partial_rotary_factor=0.5", "partial_rotary_factor"},
		{"rope", "len=4&dim=8&scaling=proportional&partial_rotary_factor=0.2", "partial_rotary_factor"},
		{"rope", "len=4&dim=8&scaling=proportional&partial_rotary_factor=0", "partial_rotary_factor"},
		{"rope", "len=4&dim=8&scaling=proportional&partial_rotary_factor=1.5", "partial_rotary_factor"},
		{"rope", "len=4&dim=8&scaling=proportional&factor=0", "factor"},
		{"rope", "len=4&dim=8&scaling=proportional&compat=ggml", "compat"},
		{"rope", "len=4&dim=8&scaling=proportional&original_max_position_embeddings=8", "original_max_position_embeddings"},
		{"rope/inv_freq", "dim=8&scaling=proportional&partial_rotary_factor=0.1", "partial_rotary_factor"},
	};
	pe_kat_rejects_all(bad, sizeof bad / sizeof bad[0]);
	struct pe_params p;
	struct pe_err err;
	char key[512];
	ck_assert_int_eq(pe_query_params(&p, "rope/inv_freq", "dim=8&scaling=proportional&partial_rotary_factor=0.5", &err), 0);
	ck_assert_int_gt(pe_params_canonical(&p, key, sizeof key), 0);
	ck_assert_str_eq(key, "dim=8&base=1e+04&scaling=proportional&partial_rotary_factor=0.5&compat=exact");
	double w[4];
	ck_assert_int_eq(pe_table_compute(&p, PE_F64, w, &err), 0);
	ck_assert(w[0] == 1.0 && w[1] == 0.1 && w[2] == 0.0 && w[3] == 0.0);
	pe_params_destroy(&p);
	/* other scalings leave partial_rotary_factor out of their key */
	ck_assert_int_eq(pe_query_params(&p, "rope/inv_freq", "dim=8", &err), 0);
	ck_assert_int_gt(pe_params_canonical(&p, key, sizeof key), 0);
	ck_assert_ptr_null(strstr(key, "partial_rotary_factor"));
	pe_params_destroy(&p);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("new_tables");
	TCase *d = tcase_create("deberta");
	tcase_add_test(d, deberta_vs_transformers);
	tcase_add_test(d, deberta_boundaries_follow_float32);
	tcase_add_test(d, deberta_by_hand);
	tcase_add_test(d, deberta_keys);
	tcase_add_test(d, deberta_refusals);
	suite_add_tcase(s, d);
	TCase *q = tcase_create("query_scale");
	tcase_add_test(q, query_scale_exact_vs_mpmath);
	tcase_add_test(q, query_scale_hf_vs_torch);
	tcase_add_test(q, query_scale_windows_past_2p24);
	tcase_add_test(q, query_scale_by_hand);
	tcase_add_test(q, query_scale_refusals);
	suite_add_tcase(s, q);
	TCase *r = tcase_create("proportional");
	tcase_add_loop_test(r, proportional_known_answers, 0, 2);
	tcase_add_test(r, proportional_tail_is_still);
	tcase_add_test(r, proportional_params);
	suite_add_tcase(s, r);
	return s;
}

PE_TEST_MAIN(suite)
