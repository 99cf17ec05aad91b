/* Tests of the analysis tables against closed forms computed here independently:
 * sinusoidal similarity S_ij = Σ_k cos((i−j)·ω_k) (vaswani, even dim: sin·sin + cos·cos per pair),
 * RoPE similarity of rotated all-ones vectors 2·Σ_k cos((i−j)·θ_k) (no scaling), and RoFormer's
 * decay mean_j |Σ_{k<j} e^{i r θ_k}| written with real sums. f64 results within a few ulps of
 * sums that are accumulated in another order; the RoPE matrix depends only on i − j. */
#include "support/pe_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"

static double *run(const char *table, const char *const *kv, size_t *n)
{
	struct pe_params p;
	struct pe_err err = {0};
	pe_params_init(&p, pe_table_find(table));
	for (int i = 0; kv[i]; i += 2)
		ck_assert_msg(pe_params_set(&p, kv[i], kv[i + 1], &err) == 0, "%s", err.detail);
	ck_assert_msg(pe_params_finish(&p, &err) == 0, "%s", err.detail);
	struct pe_shape s;
	int of;
	pe_table_shape(&p, &s);
	*n = pe_shape_count(&s, &of);
	double *out = malloc(*n * sizeof *out);
	ck_assert_int_eq(pe_table_compute(&p, PE_F64, out, &err), 0);
	pe_params_destroy(&p);
	return out;
}

static void close_to(double got, double want, double scale, const char *what, size_t i)
{
	/* the sums differ in order: allow 8 ulps of the largest term's magnitude */
	ck_assert_msg(fabs(got - want) <= 8 * 2.220446049250313e-16 * scale, "%s[%zu]: %.17g vs %.17g", what, i,
		      got, want);
}

START_TEST(sinusoidal_similarity_closed_form)
{
	const char *kv[] = {"len", "40", "dim", "16", "offset", "7", NULL};
	size_t n;
	double *g = run("analysis/similarity", kv, &n);
	ck_assert_uint_eq(n, 1600);
	for (size_t i = 0; i < 40; i++)
		for (size_t j = 0; j < 40; j++) {
			double want = 0;
			for (int k = 0; k < 8; k++)
				want += cos(((double)i - (double)j) * pow(10000.0, -2.0 * k / 16));
			close_to(g[i * 40 + j], want, 16, "sinusoidal", i * 40 + j);
		}
	free(g);
}
END_TEST

START_TEST(rope_similarity_depends_on_distance_only)
{
	if (!pe_table_find("rope"))
		return; /* rope not registered in this build */
	const char *kv[] = {"encoding", "rope", "len", "32", "dim", "16", "base", "500", NULL};
	size_t n;
	double *g = run("analysis/similarity", kv, &n);
	for (size_t i = 0; i < 32; i++)
		for (size_t j = 0; j < 32; j++) {
			double want = 0;
			for (int k = 0; k < 8; k++)
				want += 2 * cos(((double)i - (double)j) * pow(500.0, -2.0 * k / 16));
			close_to(g[i * 32 + j], want, 32, "rope", i * 32 + j);
			if (i > 0 && j > 0)
				close_to(g[i * 32 + j], g[(i - 1) * 32 + j - 1], 32, "rope shift", i * 32 + j);
		}
	free(g);
}
END_TEST

START_TEST(rope_decay_closed_form)
{
	const char *kv[] = {"dim", "64", "base", "10000", "max_distance", "300", NULL};
	size_t n;
	double *v = run("analysis/rope-decay", kv, &n);
	ck_assert_uint_eq(n, 300);
	ck_assert(v[0] == 16.5); /* r = 0: mean of j over j = 1..32 */
	for (size_t r = 0; r < 300; r++) {
		double re = 0, im = 0, acc = 0;
		for (int k = 0; k < 32; k++) {
			double th = pow(10000.0, -2.0 * k / 64);
			re += cos((double)r * th);
			im += sin((double)r * th);
			acc += sqrt(re * re + im * im);
		}
		close_to(v[r], acc / 32, 32, "decay", r);
	}
	/* the figure's point: it decays (first value is the maximum, far values are much smaller) */
	ck_assert(v[299] < v[0] / 2);
	free(v);
}
END_TEST

START_TEST(validation_names_parameters)
{
	struct pe_params p;
	struct pe_err err = {0};
	pe_params_init(&p, pe_table_find("analysis/similarity"));
	ck_assert_int_eq(pe_params_set(&p, "len", "4", &err), 0);
	ck_assert_int_eq(pe_params_set(&p, "dim", "8", &err), 0);
	ck_assert_int_eq(pe_params_set(&p, "scaling", "linear", &err), 0);
	ck_assert_int_eq(pe_params_finish(&p, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "scaling");
	pe_params_destroy(&p);
	pe_params_init(&p, pe_table_find("analysis/rope-decay"));
	ck_assert_int_eq(pe_params_set(&p, "dim", "7", &err), 0);
	ck_assert_int_eq(pe_params_finish(&p, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "dim");
	pe_params_destroy(&p);
	pe_params_init(&p, pe_table_find("analysis/similarity"));
	ck_assert_int_eq(pe_params_set(&p, "len", "8193", &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "len");
	pe_params_destroy(&p);
}
END_TEST

static Suite *analysis_suite(void)
{
	Suite *s = suite_create("analysis");
	TCase *tc = tcase_create("analysis");
	tcase_add_test(tc, sinusoidal_similarity_closed_form);
	tcase_add_test(tc, rope_similarity_depends_on_distance_only);
	tcase_add_test(tc, rope_decay_closed_form);
	tcase_add_test(tc, validation_names_parameters);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(analysis_suite)
