/* /v1/analysis/order's core (src/core/order.c) against tests/data/order (tests/ref/gen_order.py, a
 * float64 NumPy reference): the generator's X bit for bit, the attention matrices and outputs to
 * 1e-12; equivariance for every encoding and length; the parameters' validation. */
#include "support/pe_check.h"
#include "support/pe_kat.h"
#include "support/pe_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/order.h"
#include "posenc/posenc.h"

#define DATA "tests/data/order"
#define TOL 1e-12

static void params_of(struct pe_params *p, const char *query)
{
	struct pe_err err = {0};
	int rc = pe_query_params(p, "analysis/order", query, &err);
	ck_assert_msg(rc == 0, "%s: %s (%s)", query, err.detail, err.param);
}

static void run_query(const char *query, struct pe_order_result *r)
{
	struct pe_params p;
	struct pe_err err = {0};
	params_of(&p, query);
	ck_assert_msg(pe_order_compute(&p, NULL, r, &err) == 0, "%s: %s", query, err.detail);
	pe_params_destroy(&p);
}

static void close_all(const double *got, const double *want, size_t n, const char *what, const char *name)
{
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(fabs(got[i] - want[i]) <= TOL, "%s %s[%zu]: %.17g vs %.17g", name, what, i, got[i], want[i]);
}

START_TEST(known_answers)
{
	struct pe_kat k;
	pe_kat_load(&k, DATA);
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		json_t *c = pe_kat_case(&k, i);
		const char *name = pe_kat_str(c, "name"), *query = pe_kat_str(c, "query");
		size_t len = (size_t)json_integer_value(json_object_get(c, "len"));
		size_t dim = (size_t)json_integer_value(json_object_get(c, "dim"));
		struct pe_params p;
		struct pe_order_result r;
		struct pe_err err = {0};
		params_of(&p, query);
		ck_assert_uint_eq((size_t)pe_param_int(&p, "len"), len);
		/* X: the generator's bits exactly */
		double *x = pe_kat_file(&k, c, "x_f64", len * dim * 8), *mine = malloc(len * dim * 8);
		size_t nt;
		pe_order_draw((uint64_t)pe_param_int(&p, "seed"), pe_param_list(&p, "tokens", &nt), len, dim, mine);
		ck_assert_msg(memcmp(x, mine, len * dim * 8) == 0, "%s: X differs from the reference generator", name);
		ck_assert_int_eq(pe_order_compute(&p, NULL, &r, &err), 0);
		static const char *const fields[] = {"attention_f64", "attention_permuted_f64", "output_f64",
						     "output_permuted_f64"};
		const double *got[] = {r.attention, r.attention_permuted, r.output, r.output_permuted};
		for (int f = 0; f < 4; f++) {
			size_t n = f < 2 ? len * len : len * dim;
			double *want = pe_kat_file(&k, c, fields[f], n * 8);
			close_all(got[f], want, n, fields[f], name);
			free(want);
		}
		double diff = json_number_value(json_object_get(c, "output_difference"));
		ck_assert_msg(fabs(r.output_difference - diff) <= TOL, "%s: output_difference %.17g vs %.17g", name,
			      r.output_difference, diff);
		ck_assert_int_eq(r.equivariant, json_is_true(json_object_get(c, "equivariant")));
		/* X given (a POST) is the same computation */
		struct pe_order_result rx;
		ck_assert_int_eq(pe_order_compute(&p, x, &rx, &err), 0);
		ck_assert(memcmp(rx.block, r.block, (2 * len * len + 2 * len * dim) * 8) == 0);
		pe_order_result_destroy(&rx);
		pe_order_result_destroy(&r);
		pe_params_destroy(&p);
		free(x);
		free(mine);
	}
	pe_kat_free(&k);
}
END_TEST

/* Without an encoding, any permutation, any length: equivariant. Sinusoidal and RoPE at every
 * length from 2, reversed (the default): not. */
START_TEST(equivariant_only_without_encoding)
{
	static const char *const encs[] = {"none", "sinusoidal", "rope"};
	for (int e = 0; e < 3; e++)
		for (int len = 2; len <= 24; len++) {
			char q[128];
			struct pe_order_result r;
			snprintf(q, sizeof q, "encoding=%s&len=%d&dim=8&seed=%d", encs[e], len, len);
			run_query(q, &r);
			ck_assert_msg(r.equivariant == (e == 0), "%s: equivariant %d, output_difference %g", q, r.equivariant,
				      r.output_difference);
			ck_assert_msg(e == 0 ? r.output_difference <= 1e-12 : r.output_difference > 1e-3, "%s: %g", q,
				      r.output_difference);
			pe_order_result_destroy(&r);
		}
}
END_TEST

/* ALiBi sees positions only through |i - j|: a permutation that keeps every distance (reversal;
 * at len 2 the only other one) leaves attention equivariant; a rotation by one, from len 3, does
 * not. */
START_TEST(alibi_equivariant_only_under_distance_preserving_perms)
{
	for (int len = 2; len <= 24; len++) {
		char q[4096];
		struct pe_order_result r;
		snprintf(q, sizeof q, "encoding=alibi&len=%d&dim=8&max_bias=2&seed=%d", len, len);
		run_query(q, &r);
		ck_assert_msg(r.equivariant, "%s (reversed): %g", q, r.output_difference);
		pe_order_result_destroy(&r);
		if (len < 3)
			continue;
		int n = snprintf(q, sizeof q, "encoding=alibi&len=%d&dim=8&max_bias=2&seed=%d&perm=", len, len);
		for (int i = 0; i < len; i++)
			n += snprintf(q + n, sizeof q - (size_t)n, "%s%d", i ? "," : "", (i + 1) % len);
		run_query(q, &r);
		ck_assert_msg(!r.equivariant && r.output_difference > 1e-6, "%s: %g", q, r.output_difference);
		pe_order_result_destroy(&r);
	}
}
END_TEST

/* Repeated tokens share a row of X; tokens sets len. */
START_TEST(tokens_share_rows)
{
	struct pe_params p;
	params_of(&p, "tokens=5,9,5&dim=6&seed=4");
	ck_assert_int_eq(pe_param_int(&p, "len"), 3);
	size_t nt;
	double x[18], row9[6];
	pe_order_draw(4, pe_param_list(&p, "tokens", &nt), 3, 6, x);
	ck_assert(memcmp(x, x + 12, 6 * sizeof *x) == 0);
	double all[60];
	pe_order_draw(4, NULL, 10, 6, all);
	memcpy(row9, all + 54, sizeof row9);
	ck_assert(memcmp(x + 6, row9, sizeof row9) == 0);
	pe_params_destroy(&p);
}
END_TEST

static void rejects(const char *query, int code, const char *param)
{
	struct pe_params p;
	struct pe_err err = {0};
	int rc = pe_query_params(&p, "analysis/order", query, &err);
	pe_params_destroy(&p);
	ck_assert_msg(rc == code, "%s: rc %d, expected %d (%s)", query, rc, code, err.detail);
	ck_assert_msg(!strcmp(err.param, param), "%s: names '%s', expected '%s' (%s)", query, err.param, param,
		      err.detail);
}

START_TEST(validation_names_parameters)
{
	rejects("len=3&perm=0,0,1", PE_EINVAL, "perm");
	rejects("len=3&perm=0,1,3", PE_EINVAL, "perm");
	rejects("len=3&perm=0,1", PE_EINVAL, "perm");
	rejects("len=3&perm=2,1,0,3", PE_EINVAL, "perm");
	rejects("len=3&perm=-1,0,1", PE_EINVAL, "perm");
	rejects("len=513&dim=1", PE_ETOOBIG, "len");
	rejects("len=512&dim=513", PE_ETOOBIG, "dim");
	rejects("len=2&tokens=1,2,3", PE_EINVAL, "tokens");
	rejects("tokens=1,2,x", PE_EINVAL, "tokens");
	rejects("encoding=rope&dim=7", PE_EINVAL, "dim");
	rejects("encoding=rope&variant=concat", PE_EINVAL, "variant");
	rejects("encoding=sinusoidal&max_bias=4", PE_EINVAL, "max_bias");
	rejects("encoding=none&base=100", PE_EINVAL, "base");
	rejects("encoding=alibi&scaling=linear", PE_EINVAL, "scaling");
	rejects("encoding=rope&scaling=linear", PE_EINVAL, "factor");
	rejects("encoding=learned", PE_EINVAL, "encoding");
	rejects("seed=-1", PE_EINVAL, "seed");
	/* at the limits: accepted */
	struct pe_params p;
	params_of(&p, "len=512&dim=512");
	pe_params_destroy(&p);
}
END_TEST

START_TEST(overflowing_values_refused)
{
	struct pe_params p;
	struct pe_order_result r;
	struct pe_err err = {0};
	double x[4] = {1e200, 1, -1e200, 2};
	params_of(&p, "len=2&dim=2");
	ck_assert_int_eq(pe_order_compute(&p, x, &r, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "body");
	ck_assert_ptr_null(r.block);
	pe_params_destroy(&p);
}
END_TEST

/* The registered table is the two attention matrices. */
START_TEST(table_is_the_attention_pair)
{
	struct pe_shape s;
	struct pe_order_result r;
	double *t = pe_query_table("analysis/order", "encoding=rope&len=5&dim=4", PE_F64, &s);
	ck_assert_int_eq(s.rank, 3);
	ck_assert_uint_eq(s.dim[0], 2);
	run_query("encoding=rope&len=5&dim=4", &r);
	ck_assert(memcmp(t, r.attention, 50 * sizeof *t) == 0);
	pe_order_result_destroy(&r);
	free(t);
}
END_TEST

static Suite *order_suite(void)
{
	Suite *s = suite_create("order");
	TCase *tc = tcase_create("order");
	tcase_add_test(tc, known_answers);
	tcase_add_test(tc, equivariant_only_without_encoding);
	tcase_add_test(tc, alibi_equivariant_only_under_distance_preserving_perms);
	tcase_add_test(tc, tokens_share_rows);
	tcase_add_test(tc, validation_names_parameters);
	tcase_add_test(tc, overflowing_values_refused);
	tcase_add_test(tc, table_is_the_attention_pair);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(order_suite)
