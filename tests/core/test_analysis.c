/* Tests of the analysis tables against closed forms computed here independently:
 * sinusoidal similarity S_ij = Σ_k cos((i−j)·ω_k) (vaswani, even dim: sin·sin + cos·cos per pair),
 * RoPE similarity of rotated all-ones vectors 2·Σ_k cos((i−j)·θ_k) (no scaling), and RoFormer's
 * decay mean_j |Σ_{k<j} e^{i r θ_k}| written with real sums. f64 results within a few ulps of
 * sums that are accumulated in another order; the RoPE matrix depends only on i − j. */
#include "support/pe_check.h"
#include "support/pe_table.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"

static double *run(const char *table, const char *query, size_t *n)
{
	struct pe_shape s;
	int of;
	double *out = pe_query_table(table, query, PE_F64, &s);
	*n = pe_shape_count(&s, &of);
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
	const char *kv = "len=40&dim=16&offset=7";
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
	const char *kv = "encoding=rope&len=32&dim=16&base=500";
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
	const char *kv = "dim=64&base=10000&max_distance=300";
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

/* pe_gram against a long double sum of the same products: within its documented bound
 * (d/2 + 8) u sum|x y|, on every ISA, for sizes that leave partial tiles, blocks and k chunks;
 * each pair is computed once, so the matrix is exactly symmetric. */
static void gram_case(size_t n, size_t d)
{
	double *x = malloc(n * d * sizeof *x), *g = malloc(n * n * sizeof *g);
	uint64_t s = 0x9e3779b97f4a7c15ull ^ (n * 131 + d);
	for (size_t i = 0; i < n * d; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		x[i] = (double)(int64_t)(s >> 11) / 4503599627370496.0 - 1; /* [-1, 1) */
	}
	for (int isa = PE_ISA_SCALAR; isa <= PE_ISA_AVX512; isa++) {
		if (pe_isa_force((enum pe_isa)isa) != 0)
			continue;
		struct pe_err err = {0};
		ck_assert_int_eq(pe_gram(x, n, d, PE_F64, g, &err), 0);
		for (size_t i = 0; i < n; i++)
			for (size_t j = 0; j < n; j++) {
				long double ref = 0, mag = 0;
				for (size_t k = 0; k < d; k++) {
					ref += (long double)x[i * d + k] * x[j * d + k];
					mag += fabsl((long double)x[i * d + k] * x[j * d + k]);
				}
				double bound = ((double)d / 2 + 8) * 0x1p-53 * (double)mag;
				ck_assert_msg(fabs(g[i * n + j] - (double)ref) <= bound, "%s n=%zu d=%zu [%zu,%zu]: %.17g vs %.17Lg",
					      pe_isa_name(), n, d, i, j, g[i * n + j], ref);
				ck_assert(g[i * n + j] == g[j * n + i]);
			}
	}
	free(x);
	free(g);
}

START_TEST(gram_within_bound_on_every_isa)
{
	gram_case(1, 1);
	gram_case(5, 3);
	gram_case(37, 1037);
	gram_case(70, 9);
	gram_case(33, 512);
}
END_TEST

/* p: table's parameters with each of the NULL-terminated name, value pairs kv set (each accepted);
 * not finished. */
static void params_with(struct pe_params *p, const char *table, const char *const *kv)
{
	struct pe_err err = {0};
	pe_params_init(p, pe_table_find(table));
	for (; *kv; kv += 2)
		ck_assert_msg(pe_params_set(p, kv[0], kv[1], &err) == 0, "%s %s=%s: %s", table, kv[0], kv[1], err.detail);
}

/* The cost of table with the parameters kv, which must be valid. */
static struct pe_cost cost_of(const char *table, const char *const *kv)
{
	struct pe_params p;
	struct pe_cost c;
	struct pe_err err = {0};
	params_with(&p, table, kv);
	ck_assert_msg(pe_params_finish(&p, &err) == 0, "%s: %s", table, err.detail);
	ck_assert_msg(pe_table_cost(&p, &c) == 0, "%s: no cost", table);
	pe_params_destroy(&p);
	return c;
}

/* Cost from the parameters alone: similarity's encoding table and multiply-adds, rope-decay's terms. */
START_TEST(cost_from_parameters)
{
	struct pe_cost c = cost_of("analysis/similarity",
				   (const char *const[]){"encoding", "rope", "len", "8192", "dim", "65536", NULL});
	ck_assert_uint_eq(c.intermediate, 2ull * 8192 * 65536);
	ck_assert_str_eq(c.intermediate_param, "dim");
	ck_assert_uint_eq(c.work, 8192ull * 8193 / 2 * 65536);
	ck_assert_str_eq(c.work_param, "len");
	c = cost_of("analysis/rope-decay", (const char *const[]){"dim", "65536", "max_distance", "1048576", NULL});
	ck_assert_uint_eq(c.intermediate, 0);
	ck_assert_uint_gt(c.work, 1048576ull * 32768);
	ck_assert_str_eq(c.work_param, "max_distance");
	c = cost_of("sinusoidal", (const char *const[]){"len", "4", "dim", "8", NULL});
	ck_assert_uint_eq(c.intermediate + c.work, 0);
}
END_TEST

/* A thread whose deadline has passed computes nothing: the analyses stop at their first check,
 * every table at pe_table_compute; without a deadline the same call works. After pe_cancel_all()
 * (shutdown) everything stops with PE_EDRAINING. */
static int compute_code(const char *table, const char *query)
{
	struct pe_params p;
	struct pe_err err = {0};
	ck_assert_int_eq(pe_query_params(&p, table, query, &err), 0);
	struct pe_shape s;
	int of;
	pe_table_shape(&p, &s);
	double *out = malloc(pe_shape_count(&s, &of) * sizeof *out);
	int rc = pe_table_compute(&p, PE_F64, out, &err);
	if (rc)
		ck_assert_msg(err.code == rc && err.detail[0], "no detail for %d", rc);
	free(out);
	pe_params_destroy(&p);
	return rc;
}

START_TEST(cancelled_computations_stop)
{
	const char *sim = "len=100&dim=64", *decay = "max_distance=300", *sin = "len=4&dim=8";
	ck_assert_int_eq(compute_code("analysis/similarity", sim), 0);
	pe_cancel_set_deadline(pe_monotonic() - 1);
	ck_assert_int_eq(pe_cancelled(), PE_ETIMEOUT);
	ck_assert_int_eq(compute_code("analysis/similarity", sim), PE_ETIMEOUT);
	ck_assert_int_eq(compute_code("analysis/rope-decay", decay), PE_ETIMEOUT);
	ck_assert_int_eq(compute_code("sinusoidal", sin), PE_ETIMEOUT);
	pe_cancel_set_deadline(pe_monotonic() + 3600);
	ck_assert_int_eq(compute_code("analysis/rope-decay", decay), 0);
	pe_cancel_set_deadline(0);
	ck_assert_int_eq(compute_code("sinusoidal", sin), 0);
	pe_cancel_all(); /* this test runs in its own process (check forks) */
	ck_assert_int_eq(compute_code("sinusoidal", sin), PE_EDRAINING);
	ck_assert_int_eq(compute_code("analysis/similarity", sim), PE_EDRAINING);
}
END_TEST

/* The kernels check between blocks, not only on entry: a deadline that passes while the Gram
 * runs stops it part-way (a similarity of 2048 positions takes far longer than a microsecond). */
START_TEST(cancel_checked_between_blocks)
{
	size_t n = 2048, d = 64;
	double *x = calloc(n * d, sizeof *x), *g = malloc(n * n * sizeof *g);
	struct pe_err err = {0};
	pe_cancel_set_deadline(pe_monotonic() + 1e-6);
	ck_assert_int_eq(pe_gram(x, n, d, PE_F64, g, &err), PE_ETIMEOUT);
	pe_cancel_set_deadline(0);
	ck_assert_int_eq(pe_gram(x, n, d, PE_F64, g, &err), 0);
	free(x);
	free(g);
}
END_TEST

/* The big table kernels check between blocks of rows too: 16 Mi elements take milliseconds. */
static int table_with_deadline(const char *table, double deadline)
{
	struct pe_params p;
	struct pe_err err = {0};
	pe_params_init(&p, pe_table_find(table));
	ck_assert_int_eq(pe_params_set(&p, "len", "65536", &err), 0);
	ck_assert_int_eq(pe_params_set(&p, "dim", "128", &err), 0);
	ck_assert_int_eq(pe_params_finish(&p, &err), 0);
	float *out = malloc((size_t)2 * 65536 * 128 * sizeof *out);
	pe_cancel_set_deadline(pe_monotonic() + deadline);
	int rc = pe_table_compute(&p, PE_F32, out, &err);
	pe_cancel_set_deadline(0);
	free(out);
	pe_params_destroy(&p);
	return rc;
}

START_TEST(tables_cancelled_between_rows)
{
	ck_assert_int_eq(table_with_deadline("sinusoidal", 1e-6), PE_ETIMEOUT);
	ck_assert_int_eq(table_with_deadline("sinusoidal", 3600), 0);
	if (!pe_table_find("rope"))
		return;
	ck_assert_int_eq(table_with_deadline("rope", 1e-6), PE_ETIMEOUT);
	ck_assert_int_eq(table_with_deadline("rope", 3600), 0);
}
END_TEST

/* table's parameters kv are each accepted, and together refused naming param. */
static void expect_finish_refuses(const char *table, const char *const *kv, const char *param)
{
	struct pe_params p;
	struct pe_err err = {0};
	params_with(&p, table, kv);
	ck_assert_msg(pe_params_finish(&p, &err) == PE_EINVAL, "%s: accepted, want a refusal naming %s", table, param);
	ck_assert_str_eq(err.param, param);
	pe_params_destroy(&p);
}

START_TEST(validation_names_parameters)
{
	expect_finish_refuses("analysis/similarity",
			      (const char *const[]){"len", "4", "dim", "8", "scaling", "linear", NULL}, "scaling");
	expect_finish_refuses("analysis/rope-decay", (const char *const[]){"dim", "7", NULL}, "dim");
	struct pe_params p;
	struct pe_err err = {0};
	pe_params_init(&p, pe_table_find("analysis/similarity"));
	ck_assert_int_eq(pe_params_set(&p, "len", "8193", &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "len");
	pe_params_destroy(&p);
	/* similarity lists compat ggml (rope's): refused for sinusoidal, by sinusoidal's own list */
	params_with(&p, "analysis/similarity", (const char *const[]){"len", "4", "dim", "8", "compat", "ggml", NULL});
	ck_assert_int_eq(pe_params_finish(&p, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "compat");
	ck_assert_str_eq(err.detail, "compat must be one of: exact, hf when encoding=sinusoidal");
	ck_assert_int_eq(err.choices, 0);
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
	tcase_add_test(tc, gram_within_bound_on_every_isa);
	tcase_add_test(tc, cost_from_parameters);
	tcase_add_test(tc, cancelled_computations_stop);
	tcase_add_test(tc, cancel_checked_between_blocks);
	tcase_add_test(tc, tables_cancelled_between_rows);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(analysis_suite)
