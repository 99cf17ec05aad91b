/* Llama 4's RoPE (scaling=llama3 with low_freq_factor == high_freq_factor) and the vision 2-D
 * variants of /v1/rope2d (qwen2vl with spatial_merge_size, pixtral, llama4, gemma4) against the known
 * answers of tests/ref/gen_rope_variants.py, in ulps, on both kernel paths:
 *
 *   exact  every dtype within 1 ulp of the float64 reference rounded once to it; f64 within 1 ulp
 *          of mpmath where the case has it.
 *   hf     within 1 ulp of PyTorch float32 as the model builds it (Llama 4: its complex freqs_cis as
 *          the interleaved table; f64 output carries the same floats).
 *   ggml   within 1 ulp of the llama.cpp emulation (the converter's rope_freqs for Llama 4).
 *
 * Plus properties that need no reference: the llama3 step keeps or divides each frequency, the
 * edge itself is refused, Qwen2-VL's merge order is a permutation of the row-major rows, the
 * default table and its key are today's, Llama 4's class token, Gemma 4's halves are Qwen2-VL's
 * blocks reordered, streamed blocks equal the whole
 * table byte for byte, and validation names the parameter. */
#include "posenc/core.h"
#include "support/pe_check.h"
#include "support/pe_kat.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA_DIR "tests/data/rope_variants"

static const enum pe_dtype float_dtypes[] = {PE_F64, PE_F32, PE_F16, PE_BF16};

/* The known answers each case is checked against, within 1 ulp: every float dtype (label's %s its
 * name) or, without all_dtypes, cmp.dt alone (label as it is). */
static const struct reference {
	struct pe_kat_cmp cmp;
	const char *label;
	int all_dtypes;
} references[] = {
	{{NULL, "query", "ref_f64", PE_F64, NULL, 0}, "variants exact %s vs numpy", 1},
	{{NULL, "query", "mp_f64", PE_F64, NULL, 0}, "variants exact f64 vs mpmath", 0},
	{{NULL, "hf_query", "torch_f32", PE_F32, NULL, 0}, "variants hf %s vs torch", 1},
	{{NULL, "ggml_query", "ggml_f32", PE_F32, NULL, 0}, "llama4 ggml f32 vs emulation", 0},
};

/* _i / 2 the reference, _i % 2 the kernel path. */
START_TEST(vs_reference)
{
	if (!pe_kat_use_isa(_i % 2))
		return;
	const struct reference *ref = &references[_i / 2];
	if (ref->all_dtypes)
		pe_kat_compare_dtypes(DATA_DIR, &ref->cmp, ref->label, 1, 1, 1);
	else
		pe_kat_compare_dir(DATA_DIR, &ref->cmp, ref->label, 1, 1);
}
END_TEST

START_TEST(scalar_and_avx2_agree)
{
	static const char *const dirs[] = {DATA_DIR};
	if (pe_kat_have_avx2(""))
		pe_kat_paths_agree(dirs, 1, NULL, "variants");
}
END_TEST

/* ---- Llama 4's step ------------------------------------------------------------------------- */

static double *inv_freq(const char *query, size_t h)
{
	struct pe_shape s = {.rank = 1, .dim = {h}};
	return pe_kat_run("rope/inv_freq", query, PE_F64, &s);
}

/* With low == high every frequency is either the plain one (wavelength at most the edge) or the
 * plain one divided by factor (beyond it), in each arithmetic, and both kinds occur. */
START_TEST(llama3_equal_factors_is_a_step)
{
	static const char *const compat[] = {"exact", "hf"};
	for (int m = 0; m < 2; m++) {
		char plain_q[128], step_q[256];
		snprintf(plain_q, sizeof plain_q, "dim=128&base=500000&compat=%s", compat[m]);
		snprintf(step_q, sizeof step_q,
			 "dim=128&base=500000&scaling=llama3&factor=16&original_max_position_embeddings=8192"
			 "&low_freq_factor=1&high_freq_factor=1&compat=%s", compat[m]);
		double *w = inv_freq(plain_q, 64), *v = inv_freq(step_q, 64);
		int kept = 0, divided = 0;
		for (size_t i = 0; i < 64; i++) {
			double wavelen = m ? (double)((1.0f / (float)w[i]) * (float)(2 * M_PI)) : 2 * M_PI / w[i];
			double divided_w = m ? (double)((float)w[i] / 16.0f) : w[i] / 16;
			if (wavelen > 8192) {
				ck_assert_msg(v[i] == divided_w, "%s: pair %zu (wavelength %g) not divided", compat[m], i, wavelen);
				divided++;
			} else {
				ck_assert_msg(v[i] == w[i], "%s: pair %zu (wavelength %g) not kept", compat[m], i, wavelen);
				kept++;
			}
		}
		ck_assert_int_gt(kept, 0);
		ck_assert_int_gt(divided, 0);
		free(w);
		free(v);
	}
}
END_TEST

/* A wavelength exactly original_max_position_embeddings / low_freq_factor: transformers' smoothing
 * there is 0/0 (NaN), llama.cpp's converter's too; the table is refused in every arithmetic. Pair
 * 0 has frequency 1 and wavelength 2*pi: low_freq_factor = 1/(2*pi) to the double puts the edge on it. */
START_TEST(llama3_step_edge_is_refused)
{
	double lo = 1 / (2 * M_PI);
	while (1 / lo != 2 * M_PI)
		lo = nextafter(lo, 1 / lo < 2 * M_PI ? 0 : 1);
	static const char *const compat[] = {"exact", "hf", "ggml"};
	for (int m = 0; m < 3; m++) {
		char q[256];
		snprintf(q, sizeof q,
			 "len=4&dim=8&scaling=llama3&factor=8&original_max_position_embeddings=1&low_freq_factor=%.17g"
			 "&high_freq_factor=%.17g&compat=%s", lo, lo, compat[m]);
		pe_kat_rejects("rope", q, "low_freq_factor");
		/* one ulp off the edge the step is defined again */
		snprintf(q, sizeof q,
			 "len=4&dim=8&scaling=llama3&factor=8&original_max_position_embeddings=1&low_freq_factor=%.17g"
			 "&high_freq_factor=%.17g&compat=%s", lo * (1 + 1e-6), lo * (1 + 1e-6), compat[m]);
		struct pe_shape s = {.rank = 3, .dim = {2, 4, 8}};
		free(pe_kat_run("rope", q, PE_F32, &s));
	}
}
END_TEST

/* Factors that differ in double but not in float32 (their difference below float's smallest
 * subnormal): compat=hf's smoothing divides by (float)(high - low) = 0 as transformers' does, NaN
 * for a wavelength in the medium band. Frequencies near 1e-38 put a wavelength near 1e38, where
 * low = 1/wavelength is that small: the band is that one wavelength, and it is refused. */
START_TEST(llama3_factors_equal_in_float_are_refused)
{
	double *w = inv_freq("dim=2000&base=3e38&compat=hf", 1000);
	size_t i = 0;
	for (size_t k = 0; k < 1000; k++) /* the pair whose float32 wavelength is nearest 1e38 */
		if (fabs(log((double)((1.0f / (float)w[k]) * (float)(2 * M_PI))) - log(1e38)) <
		    fabs(log((double)((1.0f / (float)w[i]) * (float)(2 * M_PI))) - log(1e38)))
			i = k;
	float wavelen = (1.0f / (float)w[i]) * (float)(2 * M_PI);
	double lo = 1 / (double)wavelen, hi = lo + 1e-46;
	ck_assert(isfinite(wavelen) && hi != lo && (float)(hi - lo) == 0 && (float)(1 / lo) == wavelen);
	char q[256];
	snprintf(q, sizeof q,
		 "dim=2000&base=3e38&compat=hf&scaling=llama3&factor=8&original_max_position_embeddings=1"
		 "&low_freq_factor=%.17g&high_freq_factor=%.17g", lo, hi);
	pe_kat_rejects("rope/inv_freq", q, "high_freq_factor");
	free(w);
}
END_TEST

/* ---- rope2d ----------------------------------------------------------------------------------- */

static void *table2d(const char *query, enum pe_dtype dt, size_t rows, size_t dim)
{
	struct pe_shape s = {.rank = 3, .dim = {2, rows, dim}};
	return pe_kat_run("rope2d", query, dt, &s);
}

/* Row k of Qwen2-VL's merged order is the row-major row of its patch, byte for byte. */
START_TEST(merge_order_permutes_row_major_rows)
{
	static const struct {
		size_t h, w, m;
		const char *extra;
	} g[] = {{4, 6, 2, ""}, {8, 12, 4, "&compat=hf"}, {6, 2, 2, "&base=7"}, {3, 3, 3, "&compat=hf"}};
	for (size_t t = 0; t < sizeof g / sizeof g[0]; t++)
		for (size_t d = 0; d < 4; d++) {
			enum pe_dtype dt = float_dtypes[d];
			size_t dim = 16, rows = g[t].h * g[t].w, rb = dim * pe_dtype_size(dt), m = g[t].m;
			char q0[96], q1[192];
			snprintf(q0, sizeof q0, "height=%zu&width=%zu&dim=%zu%s", g[t].h, g[t].w, dim, g[t].extra);
			snprintf(q1, sizeof q1, "%s&variant=qwen2vl&spatial_merge_size=%zu", q0, m);
			char *plain = table2d(q0, dt, rows, dim), *merged = table2d(q1, dt, rows, dim);
			for (size_t k = 0; k < rows; k++) {
				size_t band = k / (m * g[t].w), p = k % (m * g[t].w), win = p / (m * m), in = p % (m * m);
				size_t r = band * m + in / m, c = win * m + in % m;
				for (int pl = 0; pl < 2; pl++)
					ck_assert_msg(!memcmp(merged + (pl * rows + k) * rb, plain + (pl * rows + r * g[t].w + c) * rb, rb),
						      "%s: row %zu is not patch (%zu, %zu)", q1, k, r, c);
			}
			free(plain);
			free(merged);
		}
}
END_TEST

/* The default is today's table: spatial_merge_size=1 and variant=qwen2vl change no byte, and the
 * canonical key (so the ETag and cache entries) is the one it had before variants existed. */
START_TEST(default_table_and_key_unchanged)
{
	static const char *const same[] = {"height=5&width=7&dim=8", "height=5&width=7&dim=8&variant=qwen2vl",
					   "height=5&width=7&dim=8&spatial_merge_size=1",
					   "height=5&width=7&dim=8&variant=qwen2vl&spatial_merge_size=1"};
	char *first = table2d(same[0], PE_F32, 35, 8), key0[256] = "";
	for (size_t i = 0; i < 4; i++) {
		struct pe_params p;
		struct pe_err err;
		char key[256];
		ck_assert_int_eq(pe_query_params(&p, "rope2d", same[i], &err), 0);
		ck_assert_int_gt(pe_params_canonical(&p, key, sizeof key), 0);
		ck_assert_msg(!strstr(key, "variant") && !strstr(key, "spatial_merge_size") && !strstr(key, "max_patches"),
			      "%s: key %s", same[i], key);
		if (i == 0)
			snprintf(key0, sizeof key0, "%s", key);
		ck_assert_str_eq(key, key0);
		pe_params_destroy(&p);
		char *t = table2d(same[i], PE_F32, 35, 8);
		ck_assert(!memcmp(t, first, 2 * 35 * 8 * 4));
		free(t);
	}
	free(first);
	/* the other variants' keys name them */
	struct pe_params p;
	struct pe_err err;
	char key[256];
	ck_assert_int_eq(pe_query_params(&p, "rope2d", "height=4&width=4&dim=8&variant=pixtral", &err), 0);
	ck_assert_int_gt(pe_params_canonical(&p, key, sizeof key), 0);
	ck_assert_ptr_nonnull(strstr(key, "variant=pixtral"));
	ck_assert_ptr_null(strstr(key, "spatial_merge_size"));
	pe_params_destroy(&p);
}
END_TEST

/* Llama 4: the class token is the last row, cos 1 and sin 0 in every dtype; pairs are interleaved. */
START_TEST(llama4_class_token_and_pairs)
{
	for (size_t d = 0; d < 4; d++) {
		enum pe_dtype dt = float_dtypes[d];
		double *t = NULL;
		void *raw = table2d("height=3&width=3&dim=16&variant=llama4&compat=hf", dt, 10, 16);
		t = malloc(2 * 10 * 16 * sizeof *t);
		ck_assert_ptr_nonnull(t);
		for (size_t j = 0; j < 2 * 10 * 16; j++)
			t[j] = pe_kat_get(dt, raw, j);
		for (size_t j = 0; j < 16; j++) {
			ck_assert(t[9 * 16 + j] == 1.0);
			ck_assert(t[10 * 16 + 9 * 16 + j] == 0.0);
		}
		for (size_t r = 0; r < 9; r++)
			for (size_t j = 0; j < 16; j += 2)
				ck_assert(t[r * 16 + j] == t[r * 16 + j + 1] && t[160 + r * 16 + j] == t[160 + r * 16 + j + 1]);
		free(t);
		free(raw);
	}
}
END_TEST

/* Pixtral and Qwen2-VL share the row frequencies (base^(-4k/dim)): the row halves agree exactly;
 * the column halves differ (Pixtral turns the odd frequencies). */
START_TEST(pixtral_rows_even_columns_odd)
{
	double *q = table2d("height=3&width=4&dim=16", PE_F64, 12, 16);
	double *p = table2d("height=3&width=4&dim=16&variant=pixtral", PE_F64, 12, 16);
	int cols_differ = 0;
	for (size_t r = 0; r < 24; r++)
		for (size_t k = 0; k < 4; k++) {
			ck_assert(p[r * 16 + k] == q[r * 16 + k] && p[r * 16 + 8 + k] == q[r * 16 + 8 + k]);
			cols_differ += p[r * 16 + 4 + k] != q[r * 16 + 4 + k];
		}
	ck_assert_int_gt(cols_differ, 0);
	free(q);
	free(p);
}
END_TEST

/* Gemma 4 and Qwen2-VL share frequencies: a Gemma 4 row [C | C | R | R] holds Qwen2-VL's
 * row-major row [R | C | R | C] blocks, reordered, in every arithmetic. */
START_TEST(gemma4_is_qwen2vl_blocks_column_first)
{
	for (int hf = 0; hf < 2; hf++) {
		double *q = table2d(hf ? "height=3&width=5&dim=16&base=100&compat=hf" : "height=3&width=5&dim=16&base=100",
				    PE_F64, 15, 16);
		double *g = table2d(hf ? "height=3&width=5&dim=16&base=100&variant=gemma4&compat=hf"
				       : "height=3&width=5&dim=16&base=100&variant=gemma4", PE_F64, 15, 16);
		for (size_t r = 0; r < 30; r++)
			for (size_t k = 0; k < 4; k++) {
				ck_assert(g[r * 16 + k] == q[r * 16 + 4 + k] && g[r * 16 + 4 + k] == q[r * 16 + 4 + k]);
				ck_assert(g[r * 16 + 8 + k] == q[r * 16 + k] && g[r * 16 + 12 + k] == q[r * 16 + k]);
			}
		free(q);
		free(g);
	}
}
END_TEST

static const char *const stream_cases[] = {
	"height=30&width=44&dim=16&spatial_merge_size=2",
	"height=36&width=40&dim=8&spatial_merge_size=4&compat=hf",
	"height=2&width=1100&dim=8&spatial_merge_size=2&base=100",
	"height=1100&width=2&dim=12&spatial_merge_size=2&compat=hf",
	"height=33&width=40&dim=16&variant=pixtral",
	"height=2&width=1100&dim=8&variant=pixtral&compat=hf",
	"height=40&width=40&dim=24&variant=llama4",
	"height=33&width=33&dim=8&variant=llama4&compat=hf",
	"height=33&width=40&dim=16&variant=gemma4",
	"height=2&width=1100&dim=8&variant=gemma4&base=100&compat=hf",
};

static const size_t blocks[] = {1, 7, 63, 64, 65, 1000, 1024, 1500};

/* Blocks (plane by plane, then both planes) are the whole table's rows, byte for byte. */
START_TEST(blocks_equal_the_whole_table)
{
	static const enum pe_isa isas[] = {PE_ISA_SCALAR, PE_ISA_AVX2};
	for (size_t is = 0; is < 2; is++) {
		if (pe_isa_force(isas[is]) != 0)
			continue;
		struct pe_params p;
		struct pe_err err;
		struct pe_shape s;
		int overflow;
		ck_assert_int_eq(pe_query_params(&p, "rope2d", stream_cases[_i], &err), 0);
		ck_assert_int_eq(pe_table_shape(&p, &s), 0);
		for (size_t d = 0; d < 4; d++) {
			enum pe_dtype dt = float_dtypes[d];
			size_t rows = s.dim[1], rb = s.dim[2] * pe_dtype_size(dt);
			char *whole = malloc(pe_shape_count(&s, &overflow) * pe_dtype_size(dt));
			char *buf = malloc(2 * 1500 * rb);
			ck_assert(whole && buf);
			ck_assert_int_eq(pe_table_compute(&p, dt, whole, &err), 0);
			for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++)
				for (size_t r0 = (rows - 1) / blocks[b] * blocks[b];; r0 -= blocks[b]) {
					size_t n = rows - r0 < blocks[b] ? rows - r0 : blocks[b];
					for (size_t pl = 0; pl < 2; pl++) {
						ck_assert_int_eq(pe_table_compute_rows(&p, dt, pl, r0, n, buf, &err), 0);
						ck_assert_msg(!memcmp(buf, whole + (pl * rows + r0) * rb, n * rb), "%s %s: plane %zu rows %zu+%zu",
							      stream_cases[_i], pe_dtype_name(dt), pl, r0, n);
					}
					ck_assert_int_eq(pe_table_compute_rows(&p, dt, PE_TABLE_ALL_PLANES, r0, n, buf, &err), 0);
					for (size_t pl = 0; pl < 2; pl++)
						ck_assert_msg(!memcmp(buf + pl * n * rb, whole + (pl * rows + r0) * rb, n * rb),
							      "%s %s: both planes, rows %zu+%zu", stream_cases[_i], pe_dtype_name(dt), r0, n);
					if (r0 == 0)
						break;
				}
			free(whole);
			free(buf);
		}
		pe_params_destroy(&p);
	}
}
END_TEST

START_TEST(validation_names_the_parameter)
{
	static const struct pe_kat_refusal bad[] = {
		{"rope2d", "height=4&width=4&dim=8&variant=gpt", "variant"},
		{"rope2d", "height=4&width=4&dim=8&spatial_merge_size=0", "spatial_merge_size"},
		{"rope2d", "height=4&width=4&dim=8&spatial_merge_size=65", "spatial_merge_size"},
		{"rope2d", "height=4&width=4&dim=8&spatial_merge_size=1.5", "spatial_merge_size"},
		{"rope2d", "height=5&width=4&dim=8&spatial_merge_size=2", "height"},
		{"rope2d", "height=4&width=6&dim=8&spatial_merge_size=4", "width"},
		{"rope2d", "height=6&width=4&dim=8&variant=qwen2vl&spatial_merge_size=4", "height"},
		{"rope2d", "height=8&width=6&dim=8&spatial_merge_size=4", "width"},
		{"rope2d", "height=4&width=4&dim=8&variant=pixtral&spatial_merge_size=2", "spatial_merge_size"},
		{"rope2d", "height=4&width=4&dim=8&variant=llama4&spatial_merge_size=1", "spatial_merge_size"},
		{"rope2d", "height=4&width=4&dim=8&max_patches_per_side=64", "max_patches_per_side"},
		{"rope2d", "height=4&width=4&dim=8&variant=llama4&max_patches_per_side=64", "max_patches_per_side"},
		{"rope2d", "height=65&width=4&dim=8&variant=pixtral&max_patches_per_side=64", "height"},
		{"rope2d", "height=4&width=65&dim=8&variant=pixtral&max_patches_per_side=64", "width"},
		{"rope2d", "height=4&width=4&dim=8&variant=pixtral&max_patches_per_side=0", "max_patches_per_side"},
		{"rope2d", "height=4&width=5&dim=8&variant=llama4", "width"},
		{"rope2d", "height=4&width=4&dim=10&variant=llama4", "dim"},
		{"rope2d", "height=4&width=4&dim=6&variant=pixtral", "dim"},
		{"rope2d", "height=4&width=4&dim=8&variant=pixtral&compat=ggml", "compat"},
		{"rope2d", "height=4&width=4&dim=8&variant=gemma4&spatial_merge_size=2", "spatial_merge_size"},
		{"rope2d", "height=4&width=4&dim=6&variant=gemma4", "dim"},
		/* float32 angles past FLT_MAX (cos, sin NaN): refused as /v1/rope refuses them */
		{"rope2d", "height=64&width=1&dim=256&base=1.2e-38&compat=hf", "base"},
		{"rope2d", "height=64&width=2&dim=256&base=1.2e-38&compat=hf&variant=pixtral", "base"},
		{"rope2d", "height=8&width=8&dim=256&base=1.2e-38&compat=hf&variant=llama4", "base"},
		{"rope", "len=4&dim=8&scaling=llama3&factor=8&original_max_position_embeddings=64&low_freq_factor=4"
			 "&high_freq_factor=1", "high_freq_factor"},
	};
	pe_kat_rejects_all(bad, sizeof bad / sizeof bad[0]);
	/* the smallest base keeps its small grids (every angle finite) */
	free(table2d("height=1&width=2&dim=256&base=1.2e-38&compat=hf", PE_F32, 2, 256));
	/* the grid bound is inclusive */
	free(table2d("height=64&width=2&dim=8&variant=pixtral&max_patches_per_side=64", PE_F32, 128, 8));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("rope_variants");
	TCase *kat = tcase_create("known answers");
	tcase_set_timeout(kat, 60);
	tcase_add_loop_test(kat, vs_reference, 0, 2 * (int)(sizeof references / sizeof references[0]));
	tcase_add_test(kat, scalar_and_avx2_agree);
	suite_add_tcase(s, kat);
	TCase *unit = tcase_create("properties and validation");
	tcase_set_timeout(unit, 120);
	tcase_add_test(unit, llama3_equal_factors_is_a_step);
	tcase_add_test(unit, llama3_step_edge_is_refused);
	tcase_add_test(unit, llama3_factors_equal_in_float_are_refused);
	tcase_add_test(unit, merge_order_permutes_row_major_rows);
	tcase_add_test(unit, default_table_and_key_unchanged);
	tcase_add_test(unit, llama4_class_token_and_pairs);
	tcase_add_test(unit, pixtral_rows_even_columns_odd);
	tcase_add_test(unit, gemma4_is_qwen2vl_blocks_column_first);
	tcase_add_loop_test(unit, blocks_equal_the_whole_table, 0, sizeof stream_cases / sizeof stream_cases[0]);
	tcase_add_test(unit, validation_names_the_parameter);
	suite_add_tcase(s, unit);
	return s;
}

PE_TEST_MAIN(suite)
