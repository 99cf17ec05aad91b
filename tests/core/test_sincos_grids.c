/* diffusers' sin-cos grids and timestep embeddings: /v1/sinusoidal2d with base_size,
 * interpolation_scale and pos_embed_max_size, /v1/sinusoidal3d and /v1/sinusoidal/timestep against
 * the known answers of tests/ref/gen_sincos_grids.py, in ulps, on every kernel path.
 *
 *   exact  every dtype within 1 ulp of the float64 NumPy reference rounded once to it.
 *   hf     the grids: diffusers' float64 table on float32 coordinates, rounded to float, against
 *          PyTorch (float64 sin/cos there are SLEEF's, here glibc's: both within 1 ulp of the same
 *          double, so the float they round to agrees but at a tie); the timesteps: PyTorch's float32
 *          arithmetic bit for bit where the CPU has FMA (the SLEEF builds PyTorch's AVX2 kernels
 *          use), else within 1 ulp.
 * Plus: without the new parameters sinusoidal2d is byte for byte the table it was before them
 * (tests/data/sinusoidal2d_today/, written by the CLI of 910b4e8, which had no base_size), a crop is
 * the centre of the max square, the channel layouts by hand, and validation. */
#include "core/isa.h"
#include "posenc/core.h"
#include "support/pe_check.h"
#include "support/pe_kat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dirs[] = {"tests/data/sinusoidal2d_scaled", "tests/data/sinusoidal3d", "tests/data/timestep"};
#define NDIRS (sizeof dirs / sizeof dirs[0])

START_TEST(exact_vs_numpy)
{
	if (!pe_kat_use_isa(_i))
		return;
	for (size_t d = 0; d < NDIRS; d++) {
		const struct pe_kat_cmp cmp = {.query_field = "query", .file = "ref_f64"};
		char label[96];
		snprintf(label, sizeof label, "%s exact %%s vs numpy", dirs[d] + strlen("tests/data/"));
		pe_kat_compare_dtypes(dirs[d], &cmp, label, 1, 1, 1);
	}
}
END_TEST

START_TEST(grids_hf_vs_torch)
{
	if (!pe_kat_use_isa(_i))
		return;
	for (size_t d = 0; d < 2; d++) {
		const struct pe_kat_cmp cmp = {.query_field = "hf_query", .file = "torch_f32", .dt = PE_F32, .f64_is_f32 = 1};
		pe_kat_compare_dir(dirs[d], &cmp, d ? "3d hf f32 vs torch" : "2d scaled hf f32 vs torch", 0, 0);
	}
}
END_TEST

START_TEST(timestep_hf_is_torch)
{
	if (!pe_kat_use_isa(_i))
		return;
	const struct pe_kat_cmp cmp = {.query_field = "hf_query", .file = "torch_f32", .dt = PE_F32, .f64_is_f32 = 1};
	pe_kat_compare_dir(dirs[2], &cmp, "timestep hf f32 vs torch", pe_cpu_has(PE_CPU_AVX2 | PE_CPU_FMA) ? 0 : 1, 0);
}
END_TEST

/* The same bytes a table without the new parameters gave before they existed. */
START_TEST(unscaled_2d_is_todays_table)
{
	static const char *const queries[] = {
		"height=5&width=7&dim=16&cls_token=1",
		"height=5&width=7&dim=16&cls_token=1&compat=hf",
		"height=3&width=4&dim=8&base=100&variant=timm&compat=hf",
		"height=2&width=300&dim=12&variant=timm",
	};
	static const enum pe_dtype dts[] = {PE_F32, PE_F64, PE_F16, PE_BF16};
	for (size_t q = 0; q < sizeof queries / sizeof queries[0]; q++)
		for (size_t t = 0; t < 4; t++) {
			struct pe_params p;
			struct pe_err err;
			struct pe_shape s;
			int of;
			ck_assert_int_eq(pe_query_params(&p, "sinusoidal2d", queries[q], &err), 0);
			pe_table_shape(&p, &s);
			pe_params_destroy(&p);
			size_t bytes = pe_shape_count(&s, &of) * pe_dtype_size(dts[t]);
			char path[128];
			snprintf(path, sizeof path, "tests/data/sinusoidal2d_today/q%zu.%s.bin", q, pe_dtype_name(dts[t]));
			size_t len = 0;
			void *want = pe_test_read_file(path, &len);
			ck_assert_msg(want && len == bytes, "%s: %zu bytes, want %zu", path, len, bytes);
			void *got = pe_kat_run("sinusoidal2d", queries[q], dts[t], &s);
			ck_assert_msg(memcmp(want, got, bytes) == 0, "%s as %s differs from today's table", queries[q],
				      pe_dtype_name(dts[t]));
			free(want);
			free(got);
		}
}
END_TEST

/* Two queries' tables, as dt, are byte for byte equal. */
static void same_bytes(const char *table, const char *qa, const char *qb, enum pe_dtype dt)
{
	struct pe_params p;
	struct pe_err err;
	struct pe_shape s;
	int of;
	ck_assert_int_eq(pe_query_params(&p, table, qa, &err), 0);
	pe_table_shape(&p, &s);
	pe_params_destroy(&p);
	void *a = pe_kat_run(table, qa, dt, &s), *b = pe_kat_run(table, qb, dt, &s);
	ck_assert_msg(memcmp(a, b, pe_shape_count(&s, &of) * pe_dtype_size(dt)) == 0, "%s and %s differ", qa, qb);
	free(a);
	free(b);
}

/* DiT's base_size is its grid: index / 1.0 / 1.0 is the index, so the table is the integer one. */
START_TEST(base_size_of_the_grid_is_the_integer_table)
{
	same_bytes("sinusoidal2d", "height=16&width=16&dim=72", "height=16&width=16&dim=72&base_size=16&interpolation_scale=1",
		   PE_F64);
	same_bytes("sinusoidal2d", "height=16&width=16&dim=72&compat=hf",
		   "height=16&width=16&dim=72&base_size=16&compat=hf", PE_F32);
}
END_TEST

/* height x width cropped from the M x M square: rows top.., columns left.. of the square's table. */
START_TEST(crop_is_the_centre_of_the_max_square)
{
	static const char *const compat[] = {"exact", "hf"};
	for (int c = 0; c < 2; c++) {
		size_t m = 11, h = 4, w = 7, dim = 8, top = (m - h) / 2, left = (m - w) / 2;
		char qs[128], qc[128];
		snprintf(qs, sizeof qs, "height=%zu&width=%zu&dim=%zu&base_size=3&interpolation_scale=1.5&compat=%s", m, m,
			 dim, compat[c]);
		snprintf(qc, sizeof qc, "height=%zu&width=%zu&dim=%zu&base_size=3&interpolation_scale=1.5&compat=%s&pos_embed_max_size=%zu",
			 h, w, dim, compat[c], m);
		struct pe_shape ss = {.rank = 2, .dim = {m * m, dim}}, sc = {.rank = 2, .dim = {h * w, dim}};
		double *sq = pe_kat_run("sinusoidal2d", qs, PE_F64, &ss), *cr = pe_kat_run("sinusoidal2d", qc, PE_F64, &sc);
		for (size_t r = 0; r < h; r++)
			ck_assert_msg(memcmp(cr + r * w * dim, sq + ((top + r) * m + left) * dim, w * dim * sizeof *cr) == 0,
				      "%s: crop row %zu", qc, r);
		free(sq);
		free(cr);
	}
}
END_TEST

/* Frame t, row r, column c: [sin t | cos t | sin c | cos c | sin r | cos r] at the first frequency
 * of each (1), each block dim/8, 3dim/16, 3dim/16 wide. */
START_TEST(layout_3d_by_hand)
{
	struct pe_shape s = {.rank = 3, .dim = {3, 6, 16}};
	double *v = pe_kat_run("sinusoidal3d", "frames=3&height=2&width=3&dim=16&temporal_interpolation_scale=2", PE_F64, &s);
	size_t t = 2, r = 1, c = 2;
	const double *row = v + (t * 6 + r * 3 + c) * 16;
	ck_assert_double_eq(row[0], sin(1.0)); /* t / 2 */
	ck_assert_double_eq(row[2], cos(1.0));
	ck_assert_double_eq(row[4], sin(2.0)); /* column */
	ck_assert_double_eq(row[7], cos(2.0));
	ck_assert_double_eq(row[10], sin(1.0)); /* row */
	ck_assert_double_eq(row[13], cos(1.0));
	free(v);
}
END_TEST

/* t = 0: sin 0 = 0, cos 0 = 1 in their halves (flipped: cos first); an odd dim's last column is 0. */
START_TEST(timestep_layout_by_hand)
{
	struct pe_shape s = {.rank = 2, .dim = {2, 5}};
	double *a = pe_kat_run("sinusoidal/timestep", "timesteps=0,1&dim=5", PE_F64, &s);
	double *b = pe_kat_run("sinusoidal/timestep", "timesteps=0,1&dim=5&flip_sin_to_cos=1", PE_F64, &s);
	const double want_a[5] = {0, 0, 1, 1, 0}, want_b[5] = {1, 1, 0, 0, 0};
	for (int k = 0; k < 5; k++) {
		ck_assert_double_eq(a[k], want_a[k]);
		ck_assert_double_eq(b[k], want_b[k]);
	}
	ck_assert_double_eq(a[5], sin(1.0)); /* k = 0: frequency 1 */
	ck_assert_double_eq(b[5 + 2], sin(1.0));
	ck_assert_double_eq(a[9], 0);
	ck_assert_double_eq(b[9], 0);
	free(a);
	free(b);
}
END_TEST

START_TEST(validation_names_the_parameter)
{
	static const struct pe_kat_refusal bad[] = {
		{"sinusoidal2d", "height=4&width=4&dim=8&base_size=0", "base_size"},
		{"sinusoidal2d", "height=4&width=4&dim=8&interpolation_scale=0", "interpolation_scale"},
		{"sinusoidal2d", "height=4&width=4&dim=8&interpolation_scale=-2", "interpolation_scale"},
		{"sinusoidal2d", "height=4&width=4&dim=8&pos_embed_max_size=0", "pos_embed_max_size"},
		{"sinusoidal2d", "height=9&width=4&dim=8&pos_embed_max_size=8", "height"},
		{"sinusoidal2d", "height=4&width=9&dim=8&pos_embed_max_size=8", "width"},
		{"sinusoidal3d", "frames=2&height=2&width=2&dim=24", "dim"},
		{"sinusoidal3d", "frames=2&height=2&width=2&dim=8", "dim"},
		{"sinusoidal3d", "frames=0&height=2&width=2&dim=16", "frames"},
		{"sinusoidal3d", "frames=2&height=2&width=2&dim=16&spatial_interpolation_scale=0", "spatial_interpolation_scale"},
		{"sinusoidal3d", "frames=2&height=2&width=2&dim=16&temporal_interpolation_scale=nan", "temporal_interpolation_scale"},
		{"sinusoidal3d", "height=2&width=2&dim=16", "frames"},
		{"sinusoidal/timestep", "dim=8", "timesteps"},
		{"sinusoidal/timestep", "timesteps=1,x&dim=8", "timesteps"},
		{"sinusoidal/timestep", "timesteps=1,,2&dim=8", "timesteps"},
		{"sinusoidal/timestep", "timesteps=1e31&dim=8", "timesteps"},
		{"sinusoidal/timestep", "timesteps=1&dim=0", "dim"},
		{"sinusoidal/timestep", "timesteps=1&dim=8&downscale_freq_shift=4", "downscale_freq_shift"},
		{"sinusoidal/timestep", "timesteps=1&dim=8&max_period=0", "max_period"},
		{"sinusoidal/timestep", "timesteps=1&dim=8&flip_sin_to_cos=2", "flip_sin_to_cos"},
		{"sinusoidal/timestep", "timesteps=1&dim=8&compat=ggml", "compat"},
	};
	pe_kat_rejects_all(bad, sizeof bad / sizeof bad[0]);
}
END_TEST

/* The query takes at most PE_MAX_LIST timesteps (a POST body takes more). */
START_TEST(timesteps_list_is_bounded)
{
	size_t cap = (PE_MAX_LIST + 1) * 8 + 64, len = 0;
	char *q = malloc(cap);
	ck_assert_ptr_nonnull(q);
	len += (size_t)snprintf(q, cap, "dim=4&timesteps=");
	for (int i = 0; i <= PE_MAX_LIST; i++)
		len += (size_t)snprintf(q + len, cap - len, "%s%d", i ? "," : "", i % 1000);
	pe_kat_rejects("sinusoidal/timestep", q, "timesteps");
	q[strrchr(q, ',') - q] = 0; /* PE_MAX_LIST of them */
	struct pe_params p;
	struct pe_err err;
	ck_assert_int_eq(pe_query_params(&p, "sinusoidal/timestep", q, &err), 0);
	pe_params_destroy(&p);
	free(q);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sincos_grids");
	TCase *kat = tcase_create("known answers");
	tcase_set_timeout(kat, 60);
	tcase_add_loop_test(kat, exact_vs_numpy, 0, 2);
	tcase_add_loop_test(kat, grids_hf_vs_torch, 0, 2);
	tcase_add_loop_test(kat, timestep_hf_is_torch, 0, 2);
	suite_add_tcase(s, kat);
	TCase *unit = tcase_create("identity, layout and validation");
	tcase_add_test(unit, unscaled_2d_is_todays_table);
	tcase_add_test(unit, base_size_of_the_grid_is_the_integer_table);
	tcase_add_test(unit, crop_is_the_centre_of_the_max_square);
	tcase_add_test(unit, layout_3d_by_hand);
	tcase_add_test(unit, timestep_layout_by_hand);
	tcase_add_test(unit, validation_names_the_parameter);
	tcase_add_test(unit, timesteps_list_is_bounded);
	suite_add_tcase(s, unit);
	return s;
}

PE_TEST_MAIN(suite)
