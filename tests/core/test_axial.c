/* Axial RoPE: the grid parser and preset position ids (axial.c), and the cos/sin tables
 * (axial_table.c) against the known answers of tests/ref/gen_axial.py, on both kernel paths.
 *
 * Bounds (every comparison prints its measured maximum):
 *   positions: exact f64 equal to NumPy's; hf f32 equal to torch's (CogVideoX's torch.linspace).
 *   exact tables vs float64 NumPy rounded once to the dtype: 1 ulp (sincos within 1 ulp).
 *   hf tables vs the models' PyTorch float32: equal on CPUs with AVX2 and FMA (the float64
 *       presets' cos/sin rounded once; the float32 presets' through SLEEF's 8-lane functions in
 *       PyTorch's groups, pe_torch_sincosf8), else 1 ulp. */
#include "core/axial.h"
#include "core/isa.h"
#include "posenc/core.h"
#include "support/pe_check.h"
#include "support/pe_kat.h"
#include "posenc/tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA_DIR "tests/data/axial"

/* ---- the grid ---- */

START_TEST(grid_parse)
{
	struct pe_axial_grid g;
	struct pe_err err = {0};
	char buf[64];
	ck_assert_int_eq(pe_axial_grid_parse("64x48", &g, &err), 0);
	ck_assert_int_eq(g.rank, 2);
	ck_assert_int_eq(g.t, 1);
	ck_assert_int_eq(g.h, 64);
	ck_assert_int_eq(g.w, 48);
	ck_assert_int_eq(pe_axial_grid_parse("013x30x045", &g, &err), 0);
	ck_assert_int_eq(g.rank, 3);
	ck_assert_int_eq(g.t, 13);
	ck_assert_int_gt(pe_axial_grid_format(&g, buf, sizeof buf), 0);
	ck_assert_str_eq(buf, "13x30x45");
	ck_assert_int_eq(pe_axial_grid_format(&g, buf, 4), -1);
	static const char *const bad[] = {"", "64", "x4", "4x", "4xx4", "0x4", "4x0", "1x2x3x4", "4*4", "-4x4", "4x4 ",
					  "65537x1", "4096x4097", "99999999999999999999x1", "4x+4", "4x4x", NULL};
	for (size_t i = 0; bad[i]; i++) {
		memset(&err, 0, sizeof err);
		ck_assert_msg(pe_axial_grid_parse(bad[i], &g, &err) == PE_EINVAL, "'%s' accepted", bad[i]);
		ck_assert_str_eq(err.param, "grid");
	}
	ck_assert_int_eq(pe_axial_grid_parse(NULL, &g, &err), PE_EINVAL);
}
END_TEST

/* A plan names a preset's tables by this query, and it is one the tables accept. */
START_TEST(query_for_plans)
{
	struct pe_axial_grid g = {.rank = 2, .t = 1, .h = 64, .w = 64};
	char q[128];
	struct pe_params p;
	struct pe_err err = {0};
	ck_assert_int_gt(pe_axial_query(PE_AXIAL_FLUX, &g, 512, q, sizeof q), 0);
	ck_assert_str_eq(q, "preset=flux&grid=64x64&text_tokens=512");
	ck_assert_int_eq(pe_query_params(&p, "rope/axial", q, &err), 0);
	pe_params_destroy(&p);
	g = (struct pe_axial_grid){.rank = 3, .t = 21, .h = 30, .w = 52};
	ck_assert_int_gt(pe_axial_query(PE_AXIAL_WAN, &g, 512, q, sizeof q), 0);
	ck_assert_str_eq(q, "preset=wan&grid=21x30x52"); /* no text positions: text_tokens left out */
	ck_assert_int_eq(pe_query_params(&p, "rope/axial/positions", q, &err), 0);
	pe_params_destroy(&p);
	ck_assert_int_eq(pe_axial_query(PE_AXIAL_NONE, &g, 0, q, sizeof q), -1);
	ck_assert_int_eq(pe_axial_query(PE_AXIAL_WAN, &g, 0, q, 8), -1);
}
END_TEST

/* A plan's view of a diffusers config: its class names the preset, its head width the axes. */
START_TEST(config_helpers)
{
	int64_t ax[3];
	ck_assert_int_eq(pe_axial_preset_of_class("FluxTransformer2DModel"), PE_AXIAL_FLUX);
	ck_assert_int_eq(pe_axial_preset_of_class("WanTransformer3DModel"), PE_AXIAL_WAN);
	ck_assert_int_eq(pe_axial_preset_of_class("QwenImageTransformer2DModel"), PE_AXIAL_QWENIMAGE);
	ck_assert_int_eq(pe_axial_preset_of_class("SD3Transformer2DModel"), PE_AXIAL_NONE);
	ck_assert_int_eq(pe_axial_preset_of_class(NULL), PE_AXIAL_NONE);
	ck_assert_int_eq(pe_axial_head_split(PE_AXIAL_WAN, 128, ax), 0);
	ck_assert_msg(ax[0] == 44 && ax[1] == 42 && ax[2] == 42, "wan 128: %lld,%lld,%lld", (long long)ax[0],
		      (long long)ax[1], (long long)ax[2]);
	ck_assert_str_eq(pe_axial_preset(PE_AXIAL_WAN)->axes_dim, "44,42,42");
	ck_assert_int_eq(pe_axial_head_split(PE_AXIAL_COGVIDEOX, 64, ax), 0);
	ck_assert_msg(ax[0] == 16 && ax[1] == 24 && ax[2] == 24, "cogvideox 64");
	ck_assert_int_eq(pe_axial_head_split(PE_AXIAL_WAN, 6, ax), 0); /* 2, 2, 2 */
	ck_assert_int_eq(pe_axial_head_split(PE_AXIAL_WAN, 5, ax), PE_EINVAL); /* 1, 2, 2 */
	ck_assert_int_eq(pe_axial_head_split(PE_AXIAL_COGVIDEOX, 36, ax), PE_EINVAL); /* 9, 12, 12 */
	ck_assert_int_eq(pe_axial_head_split(PE_AXIAL_FLUX, 128, ax), PE_EINVAL); /* its config states axes_dims_rope */
}
END_TEST

START_TEST(refused)
{
	static const struct pe_kat_refusal bad[] = {
		{"rope/axial/positions", "preset=none&grid=4x4", "preset"},
		{"rope/axial/positions", "preset=flux&grid=4x4x4", "grid"},
		{"rope/axial/positions", "preset=flux&grid=4by4", "grid"},
		{"rope/axial/positions", "preset=wan&grid=4x4&text_tokens=3", "text_tokens"},
		{"rope/axial/positions", "preset=flux&grid=4x4&base_width=3", "base_width"},
		{"rope/axial/positions", "preset=wan&grid=4x4&base_height=3", "base_height"},
		{"rope/axial/positions", "preset=flux&grid=4x4&scale_rope=0", "scale_rope"},
		{"rope/axial/positions", "preset=wan&grid=2x1025x4", "grid"},
		{"rope/axial/positions", "preset=qwenimage&grid=8194x2", "grid"},
		{"rope/axial/positions", "preset=qwenimage&grid=8x8&text_tokens=4093", "text_tokens"},
		{"rope/axial/positions", "preset=flux&grid=4096x4096&text_tokens=1", "text_tokens"},
		{"rope/axial/positions", "preset=flux&grid=4x4&text_tokens=-1", "text_tokens"},
		{"rope/axial", "preset=none&axes_dim=16,56,56", "preset"},
		{"rope/axial", "preset=flux&grid=4x4&axes_dim=16,56", "axes_dim"},
		{"rope/axial", "preset=flux&grid=4x4&axes_dim=16,55,56", "axes_dim"},
		{"rope/axial", "preset=flux&grid=4x4&axes_dim=0,56,56", "axes_dim"},
		{"rope/axial", "preset=flux&grid=4x4&axes_dim=16,56.5,56", "axes_dim"},
		{"rope/axial", "preset=flux&grid=4x4&axes_dim=16,56,65536", "axes_dim"},
		{"rope/axial", "preset=flux&grid=4x4&theta=0", "theta"},
		{"rope/axial", "preset=flux&grid=4x4&theta=-3", "theta"},
		{"rope/axial", "preset=flux&grid=4x4&theta=1e300&compat=hf&freqs_dtype=f32", "theta"},
		{"rope/axial", "preset=flux&grid=4x4&freqs_dtype=f32", "freqs_dtype"},
		{"rope/axial", "preset=flux&grid=4x4&layout=rotate", "layout"},
		{"rope/axial", "preset=flux&grid=4x4&compat=ggml", "compat"},
	};
	pe_kat_rejects_all(bad, sizeof bad / sizeof bad[0]);
}
END_TEST

/* Equal grids written differently share one canonical key; the preset's axes and theta fill in. */
START_TEST(canonical)
{
	struct pe_params p;
	struct pe_err err;
	char key[512];
	ck_assert_int_eq(pe_query_params(&p, "rope/axial", "preset=hunyuanvideo&grid=02x004x6", &err), 0);
	ck_assert_int_gt(pe_params_canonical(&p, key, sizeof key), 0);
	ck_assert_str_eq(key, "grid=2x4x6&preset=hunyuanvideo&axes_dim=16,56,56&theta=256&layout=interleaved&compat=exact");
	pe_params_destroy(&p);
}
END_TEST

/* ---- known answers ---- */

START_TEST(positions_known)
{
	static const struct pe_kat_cmp exact = {"rope/axial/positions", "query", "ref_f64", PE_F64, NULL, 0},
				       hf = {"rope/axial/positions", "hf_query", "torch_f32", PE_F32, NULL, 1};
	pe_kat_compare_dir(DATA_DIR, &exact, "axial positions exact f64 vs numpy", 0, 0);
	pe_kat_compare_dir(DATA_DIR, &hf, "axial positions hf f32 vs torch", 0, 0);
}
END_TEST

/* _i / 2 the reference, _i % 2 the kernel path. */
static const struct reference {
	struct pe_kat_cmp cmp;
	const char *label;
	uint64_t bound;
} references[] = {
	{{"rope/axial", "query", "ref_f64", PE_F64, NULL, 0}, "axial exact %s vs numpy", 1},
	{{"rope/axial", "hf_query", "torch_f32", PE_F32, NULL, 0}, "axial hf %s vs torch", 0},
};

/* hf's bound against PyTorch: 0 where SLEEF's AVX2 functions run as PyTorch's do. */
static uint64_t hf_bound(void) { return pe_cpu_has(PE_CPU_AVX2 | PE_CPU_FMA) ? 0 : 1; }

START_TEST(tables_known)
{
	if (!pe_kat_use_isa(_i % 2))
		return;
	const struct reference *ref = &references[_i / 2];
	uint64_t bound = ref->bound ? ref->bound : hf_bound();
	pe_kat_compare_dtypes(DATA_DIR, &ref->cmp, ref->label, bound, bound, bound);
}
END_TEST

START_TEST(paths_agree)
{
	static const char *const dirs[] = {DATA_DIR};
	if (pe_kat_have_avx2(""))
		pe_kat_paths_agree(dirs, 1, "rope/axial", "axial");
}
END_TEST

/* The ids of a POST case ([S][naxes] doubles from its "ids" list); *naxes set. */
static double *case_ids(json_t *c, size_t *n, size_t *naxes)
{
	json_t *ids = json_object_get(c, "ids");
	*n = json_array_size(ids);
	*naxes = json_array_size(json_array_get(ids, 0));
	double *v = malloc(*n * *naxes * sizeof *v);
	for (size_t i = 0; i < *n; i++)
		for (size_t a = 0; a < *naxes; a++)
			v[i * *naxes + a] = json_number_value(json_array_get(json_array_get(ids, i), a));
	return v;
}

/* The POST form: the table of posted ids (pe_axial_body_def), exact and both hf arithmetics. */
START_TEST(ids_known)
{
	static const struct {
		const char *query_field, *file;
		enum pe_dtype dt;
	} cmp[] = {{"query", "ref_f64", PE_F64}, {"query", "ref_f64", PE_F32}, {"hf_query", "torch_f32", PE_F32},
		   {"hf32_query", "torchf32freq_f32", PE_F32}};
	struct pe_kat k;
	struct pe_kat_max m = {.what = "axial POST ids exact vs numpy"}, mh = {.what = "axial POST ids hf vs torch"};
	pe_kat_load(&k, DATA_DIR);
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		json_t *c = pe_kat_case(&k, i);
		if (strcmp(pe_kat_str(c, "table"), "rope/axial POST"))
			continue;
		size_t n, na;
		double *ids = case_ids(c, &n, &na);
		struct pe_shape s;
		size_t count = pe_kat_shape(c, &s);
		for (size_t q = 0; q < sizeof cmp / sizeof cmp[0]; q++) {
			struct pe_params p;
			struct pe_err err = {0};
			const char *query = pe_kat_str(c, cmp[q].query_field);
			int f64 = strstr(cmp[q].file, "f64") != NULL;
			void *ref = pe_kat_file(&k, c, cmp[q].file, count * (f64 ? 8 : 4));
			void *got = malloc(count * pe_dtype_size(cmp[q].dt));
			pe_params_init(&p, &pe_axial_body_def);
			ck_assert_int_eq(pe_query_set(&p, query, NULL, &err), 0);
			ck_assert_msg(pe_params_finish(&p, &err) == 0, "%s: %s", query, err.detail);
			ck_assert_int_eq(pe_axial_body_check(&p, na, &err), 0);
			ck_assert_int_eq(pe_axial_body_check(&p, na + 1, &err), PE_EINVAL);
			ck_assert_str_eq(err.param, "axes_dim");
			ck_assert_int_eq(pe_axial_table_compute(&p, ids, n, cmp[q].dt, got, &err), 0);
			for (size_t j = 0; j < count; j++)
				pe_kat_max_add(f64 ? &m : &mh, pe_kat_ref_ulp(cmp[q].dt, got, ref, f64, j, query), query, j);
			pe_params_destroy(&p);
			free(ref);
			free(got);
		}
		free(ids);
	}
	pe_kat_free(&k);
	pe_kat_max_check(&m, 1);
	pe_kat_max_check(&mh, hf_bound());
}
END_TEST

/* A preset's table is the table of its positions posted as ids, byte for byte, past a block. */
START_TEST(grid_equals_ids)
{
	static const char grid[] = "preset=cogvideox&grid=3x20x30", rope[] = "preset=cogvideox";
	struct pe_shape s, ps;
	float *whole = pe_query_table("rope/axial", grid, PE_F32, &s);
	double *pos = pe_query_table("rope/axial/positions", grid, PE_F64, &ps);
	ck_assert_uint_eq(ps.dim[0], 1800);
	ck_assert_uint_eq(s.dim[1], 1800);
	struct pe_params b;
	struct pe_err err = {0};
	pe_params_init(&b, &pe_axial_body_def);
	ck_assert_int_eq(pe_query_set(&b, rope, NULL, &err), 0);
	ck_assert_int_eq(pe_params_finish(&b, &err), 0);
	float *given = malloc(2 * 1800 * s.dim[2] * sizeof *given);
	ck_assert_int_eq(pe_axial_table_compute(&b, pos, 1800, PE_F32, given, &err), 0);
	ck_assert_mem_eq(given, whole, 2 * 1800 * s.dim[2] * 4);
	ck_assert_int_eq(pe_query_set(&b, "grid=4x4", NULL, &err), PE_EINVAL); /* not in the POST form */
	pe_params_destroy(&b);
	free(given);
	free(pos);
	free(whole);
}
END_TEST

/* A dtype too narrow for the ids is refused before they are computed: f16 holds 65504. */
START_TEST(positions_dtype_range)
{
	struct pe_params p;
	struct pe_err err = {0};
	ck_assert_int_eq(pe_query_params(&p, "rope/axial/positions", "preset=qwenimage&grid=8x8&text_tokens=4000", &err), 0);
	ck_assert_double_eq(p.def->max_abs(&p), 4003);
	ck_assert_int_eq(pe_table_check_dtype(&p, PE_F16, &err), 0);
	pe_params_destroy(&p);
	ck_assert_int_eq(pe_query_params(&p, "rope/axial/positions", "preset=hunyuanvideo&grid=65536x2x2", &err), 0);
	ck_assert_double_eq(p.def->max_abs(&p), 65535);
	ck_assert_int_eq(pe_table_check_dtype(&p, PE_F16, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "dtype");
	ck_assert_int_eq(pe_table_check_dtype(&p, PE_BF16, &err), 0);
	pe_params_destroy(&p);
	ck_assert_int_eq(pe_query_params(&p, "rope/axial/positions", "preset=qwenimage&grid=9x7", &err), 0);
	ck_assert_double_eq(p.def->max_abs(&p), 5); /* rows -5 .. 3 */
	pe_params_destroy(&p);
	ck_assert_int_eq(pe_query_params(&p, "rope/axial/positions", "preset=cogvideox&grid=20x30", &err), 0);
	ck_assert_double_eq(p.def->max_abs(&p), 43.5); /* x on linspace(0, 45 * 29 / 30, 30) */
	pe_params_destroy(&p);
}
END_TEST

/* An npy file of tests/data/axial as a view (buf keeps its bytes; caller frees it). */
static void load_npy(const char *name, char **buf, struct pe_tensor_view *v)
{
	char path[256];
	size_t len;
	snprintf(path, sizeof path, DATA_DIR "/%s.npy", name);
	*buf = pe_test_read_file(path, &len);
	ck_assert_int_eq(pe_npy_parse(*buf, len, 1 << 24, v, NULL), 0);
}

/* rope/apply's params of query (a transform: not in pe_query_params's registry of tables). */
static void apply_params(struct pe_params *p, const char *query)
{
	struct pe_err err = {0};
	pe_params_init(p, pe_transform_find("rope/apply"));
	ck_assert_int_eq(pe_query_set(p, query, NULL, &err), 0);
	ck_assert_msg(pe_params_finish(p, &err) == 0, "%s: %s", query, err.detail);
}

/* rope/apply with axes_dim through the core (pe_rope_apply_positions): compat=hf is diffusers'
 * apply_rotary_emb with FluxPosEmbed bit for bit; compat=exact within float32 rounding of the
 * float64 answer (each channel within 2^-22·(|a| + |b|) plus half an ulp); inverse=1 undoes it. */
START_TEST(apply_known_answer)
{
	char *xb, *pb, *rb, *tb;
	struct pe_tensor_view xv, pv, rv, tv;
	load_npy("apply_flux.x", &xb, &xv);
	load_npy("apply_flux.pos", &pb, &pv);
	load_npy("apply_flux.ref", &rb, &rv);
	load_npy("apply_flux.torch", &tb, &tv);
	int of;
	size_t n = pe_shape_count(&xv.shape, &of), last = xv.shape.dim[xv.shape.rank - 1];
	float *x = malloc(n * 4);
	struct pe_positions pos = {.shape = pv.shape, .data = pv.data, .dtype = pv.dtype};
	static const char *const queries[] = {"axes_dim=16,56,56&compat=hf", "axes_dim=16,56,56"};
	for (int q = 0; q < 2; q++) {
		struct pe_params p;
		struct pe_err err = {0};
		memcpy(x, xv.data, n * 4);
		struct pe_tensor_mut t = {.shape = xv.shape, .dtype = PE_F32, .data = x};
		apply_params(&p, queries[q]);
		ck_assert_msg(pe_rope_apply_positions(&p, &pos, &t, &err) == 0, "%s", err.detail);
		for (size_t i = 0; i < n && q == 0; i++)
			ck_assert_msg(x[i] == ((const float *)tv.data)[i], "[%zu] %.9g vs torch %.9g", i, x[i],
				      ((const float *)tv.data)[i]);
		for (size_t i = 0; i < n && q == 1; i++) {
			double m = 0, w = ((const double *)rv.data)[i];
			for (size_t c = i - i % last; c < i - i % last + last; c++)
				m = fabs(((const float *)xv.data)[c]) > m ? fabs(((const float *)xv.data)[c]) : m;
			ck_assert_msg(fabs(x[i] - w) <= 0x1p-21 * m + 0x1p-24 * fabs(w), "[%zu] %.9g vs %.17g", i, x[i], w);
		}
		pe_params_destroy(&p);
		apply_params(&p, "axes_dim=16,56,56&inverse=1");
		ck_assert_int_eq(pe_rope_apply_positions(&p, &pos, &t, &err), 0);
		for (size_t i = 0; i < n; i++)
			ck_assert(fabs(x[i] - ((const float *)xv.data)[i]) <= 1e-5);
		pe_params_destroy(&p);
	}
	free(x);
	free(xb);
	free(pb);
	free(rb);
	free(tb);
}
END_TEST

/* Blocks of rows (pe_table_compute_rows, how tables stream) are the whole table's bytes, also for
 * compat=hf's float32 presets, whose values depend on the tokens beside a block. */
START_TEST(rows_equal_the_whole)
{
	static const char *const queries[][2] = {
		{"rope/axial", "preset=hunyuanvideo&grid=3x20x20&axes_dim=2,4,2&compat=hf"},
		{"rope/axial", "preset=cogvideox&grid=2x24x30&compat=hf"},
		{"rope/axial", "preset=qwenimage&grid=40x40&text_tokens=7&layout=half"},
		{"rope/axial/positions", "preset=cogvideox&grid=3x17x40&compat=hf"},
	};
	static const size_t blocks[][2] = {{0, 1}, {1, 7}, {1023, 2}, {1030, 300}, {5, 1100}};
	for (size_t q = 0; q < sizeof queries / sizeof queries[0]; q++) {
		struct pe_params p;
		struct pe_shape s;
		struct pe_err err = {0};
		int of;
		ck_assert_int_eq(pe_query_params(&p, queries[q][0], queries[q][1], &err), 0);
		char *whole = pe_query_table(queries[q][0], queries[q][1], PE_F32, &s);
		size_t planes = s.rank == 3 ? 2 : 1, seq = s.dim[s.rank - 2], row = s.dim[s.rank - 1] * 4;
		char *part = malloc(planes * 1100 * row);
		for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
			size_t r0 = blocks[b][0], n = blocks[b][1];
			if (r0 + n > seq)
				continue;
			ck_assert_int_eq(pe_table_compute_rows(&p, PE_F32, PE_TABLE_ALL_PLANES, r0, n, part, &err), 0);
			for (size_t pl = 0; pl < planes; pl++)
				ck_assert_msg(!memcmp(part + pl * n * row, whole + (pl * seq + r0) * row, n * row), "%s rows %zu+%zu",
					      queries[q][1], r0, n);
		}
		ck_assert_uint_gt(pe_shape_count(&s, &of), 0);
		free(part);
		free(whole);
		pe_params_destroy(&p);
	}
}
END_TEST

START_TEST(ids_checked)
{
	double ids[6] = {0, 1, -2.5, 4503599627370496.0, 1, 2};
	struct pe_err err = {0};
	ck_assert_int_eq(pe_axial_ids_check(ids, 2, 3, "body", &err), 0);
	ids[3] = 4503599627370497.0 * 2;
	ck_assert_int_eq(pe_axial_ids_check(ids, 2, 3, "body", &err), PE_EBODY);
	ck_assert_str_eq(err.param, "body");
	ids[3] = 0.0 / 0.0;
	ck_assert_int_eq(pe_axial_ids_check(ids, 2, 3, "positions", &err), PE_EBODY);
	ck_assert_str_eq(err.param, "positions");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("axial");
	TCase *tc = tcase_create("axial");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, grid_parse);
	tcase_add_test(tc, query_for_plans);
	tcase_add_test(tc, config_helpers);
	tcase_add_test(tc, refused);
	tcase_add_test(tc, canonical);
	tcase_add_test(tc, positions_known);
	tcase_add_loop_test(tc, tables_known, 0, 2 * (int)(sizeof references / sizeof references[0]));
	tcase_add_test(tc, paths_agree);
	tcase_add_test(tc, ids_known);
	tcase_add_test(tc, grid_equals_ids);
	tcase_add_test(tc, ids_checked);
	tcase_add_test(tc, positions_dtype_range);
	tcase_add_test(tc, apply_known_answer);
	tcase_add_test(tc, rows_equal_the_whole);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
