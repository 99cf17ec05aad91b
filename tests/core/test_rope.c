/* /v1/rope and /v1/rope/inv_freq against the known answers of tests/ref/gen_rope.py, in ulps, on both
 * kernel paths, plus the recurrence's error bound over long tables, validation and attention_scaling.
 *
 * Bounds, and why they hold (every comparison prints its measured maximum):
 *   exact f32/f16/bf16 vs float64 NumPy rounded once: 1 ulp. The core's double cos/sin are within
 *       2^-44 of the true value of the same double angle (recurrence, bounded below) or within 1 ulp
 *       (SLEEF/glibc), NumPy's within 1 ulp, so one rounding lands on the same or the next value.
 *   exact f64 vs NumPy and vs mpmath: 1 ulp when attention_scaling is 1 (both within 1 ulp of the
 *       truth, one double apart); 2 ulp when scaled (the product cos*att rounds once more).
 *   exact inv_freq f64: 0 ulp (same operations, same libm).
 *   hf vs PyTorch: inv_freq 0 ulp (PyTorch's pow reproduced: SLEEF blocks of 16, libm tail); cos/sin
 *       1 ulp (the core rounds the double cos of the float angle once, torch's SLEEF cosf is within
 *       1 ulp); scaled, 1 ulp too: there the core takes torch's own 8-lane SLEEF cos/sin before
 *       the float multiply (a correctly rounded cos could land 2 ulp away after it).
 *   ggml vs the NumPy/libm emulation: angles bit-identical (inv_freq files are the angles at
 *       position 1: 0 ulp); cos/sin 0 ulp, mscale != 1 too (libm's cosf and sinf, as llama.cpp;
 *       correctly rounded ones were 1 ulp off, 2 after the mscale multiply).
 *   scalar vs AVX2: the same bounds as against the references. */
#include "core/kernels.h"
#include "core/rope.h"
#include "posenc/core.h"
#include "support/pe_check.h"
#include "support/pe_kat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA_DIR "tests/data/rope"
#define LARGE_POSITION 1000000
#define REC_ERR_BOUND 0x1p-44 /* absolute, derived in kernels.h */

static const enum pe_dtype float_dtypes[] = {PE_F64, PE_F32, PE_F16, PE_BF16};

/* The tables against each reference: label names the comparison (per_dtype: a printf format whose
 * %s is each float dtype in turn); scaled cases (attention_scaling != 1) have their own bound, in
 * f64 bound_scaled_f64. */
static const struct kat_run {
	const char *label;
	struct pe_kat_cmp cmp;
	int per_dtype;
	uint64_t bound, bound_scaled, bound_scaled_f64;
} kat_runs[] = {
	{"rope exact %s vs numpy", {NULL, "query", "ref_f64", PE_F64, "attention_scaling", 0}, 1, 1, 1, 2},
	{"rope exact f64 vs mpmath", {NULL, "query", "mp_f64", PE_F64, "attention_scaling", 0}, 0, 1, 2, 2},
	/* f64 carries the float exactly; f16/bf16 round torch's float once, as the core does */
	{"rope hf %s vs torch", {NULL, "hf_query", "torch_f32", PE_F32, "attention_scaling", 0}, 1, 1, 1, 1},
	{"rope ggml f32 vs numpy/libm emulation", {NULL, "ggml_query", "ggml_f32", PE_F32, "ggml_attention_scaling", 0},
	 0, 0, 0, 0},
};
#define NKAT_RUNS ((int)(sizeof kat_runs / sizeof kat_runs[0]))

/* Iteration i: comparison i / 2 on ISA path i % 2 (scalar, AVX2). */
START_TEST(known_answers)
{
	const struct kat_run *k = &kat_runs[_i / 2];
	if (!pe_kat_use_isa(_i % 2))
		return;
	if (k->per_dtype)
		pe_kat_compare_dtypes(DATA_DIR, &k->cmp, k->label, k->bound, k->bound_scaled, k->bound_scaled_f64);
	else
		pe_kat_compare_dir(DATA_DIR, &k->cmp, k->label, k->bound, k->bound_scaled);
}
END_TEST

/* The frequencies are exact reproductions: any difference would grow with the position. */
START_TEST(inv_freq_bit_identical)
{
	if (!pe_kat_use_isa(_i))
		return;
	static const char *const q[] = {"query", "hf_query", "ggml_query"};
	static const char *const f[] = {"ref_f64", "torch_f32", "ggml_f32"};
	for (int mode = 0; mode < 3; mode++) {
		char what[64];
		snprintf(what, sizeof what, "inv_freq %s vs %s", q[mode], f[mode]);
		struct pe_kat k;
		struct pe_kat_max m = {.what = what};
		pe_kat_load(&k, DATA_DIR);
		for (size_t i = 0; i < pe_kat_count(&k); i++) {
			json_t *c = pe_kat_case(&k, i);
			if (strcmp(pe_kat_str(c, "table"), "rope/inv_freq") || !pe_kat_has(c, q[mode]))
				continue;
			struct pe_shape s;
			size_t n = pe_kat_shape(c, &s);
			void *ref = pe_kat_file(&k, c, f[mode], n * (mode ? 4 : 8));
			double *got = pe_kat_run("rope/inv_freq", pe_kat_str(c, q[mode]), PE_F64, &s);
			for (size_t j = 0; j < n; j++)
				pe_kat_max_add(&m, pe_ulp_f64(got[j], mode ? ((float *)ref)[j] : ((double *)ref)[j]),
					       pe_kat_str(c, q[mode]), j);
			free(ref);
			free(got);
		}
		pe_kat_free(&k);
		pe_kat_max_check(&m, 0);
	}
}
END_TEST

/* At long positions float32 angles lose the low bits of p*w: compat=hf must follow PyTorch there,
 * and compat=exact must not (the point of the mode). */
START_TEST(hf_follows_torch_at_large_positions)
{
	if (!pe_kat_use_isa(_i))
		return;
	struct pe_kat k;
	struct pe_kat_max mh = {.what = "hf f32 vs torch, positions >= 1e6"};
	double ex_abs = 0;
	uint64_t ex_differ = 0, count = 0;
	pe_kat_load(&k, DATA_DIR);
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		json_t *c = pe_kat_case(&k, i);
		if (strcmp(pe_kat_str(c, "table"), "rope") || pe_kat_scaled(c, "attention_scaling"))
			continue;
		struct pe_params p;
		struct pe_err err;
		ck_assert_int_eq(pe_query_params(&p, "rope", pe_kat_str(c, "query"), &err), 0);
		int64_t offset = pe_param_int(&p, "offset");
		pe_params_destroy(&p);
		if (offset < LARGE_POSITION)
			continue;
		struct pe_shape s;
		size_t n = pe_kat_shape(c, &s);
		float *torch = pe_kat_file(&k, c, "torch_f32", n * 4);
		float *h = pe_kat_run("rope", pe_kat_str(c, "hf_query"), PE_F32, &s);
		float *e = pe_kat_run("rope", pe_kat_str(c, "query"), PE_F32, &s);
		for (size_t j = 0; j < n; j++) {
			pe_kat_max_add(&mh, pe_ulp_f32(h[j], torch[j]), pe_kat_str(c, "hf_query"), j);
			ex_abs = fmax(ex_abs, fabs((double)e[j] - torch[j]));
			ex_differ += e[j] != torch[j];
			count++;
		}
		free(torch);
		free(h);
		free(e);
	}
	pe_kat_free(&k);
	fprintf(stderr, "%-7s positions >= %d: exact vs torch max |diff| %.3g, %llu of %llu differ\n", pe_isa_name(),
		LARGE_POSITION, ex_abs, (unsigned long long)ex_differ, (unsigned long long)count);
	ck_assert_uint_gt(count, 1000);
	pe_kat_max_check(&mh, 1);
	ck_assert_msg(ex_abs > 0.1, "exact vs torch at large positions: max |diff| %g", ex_abs);
	ck_assert_uint_gt(ex_differ, count / 2);
}
END_TEST

/* HF's dynamic NTK base is a float32 tensor (seq_len = torch.max(position_ids) + 1): far past
 * original_max_position_embeddings a double base moves frequencies by an ulp and the cos at the
 * last position by ~1e-4, so there inv_freq must be bit-identical and the table within 1 ulp. */
START_TEST(hf_dynamic_long_seq_len)
{
	struct pe_kat k;
	struct pe_kat_max mi = {.what = "hf dynamic inv_freq vs torch, seq_len >= 1e5"};
	struct pe_kat_max mt = {.what = "hf dynamic rope vs torch, seq_len >= 1e5"};
	pe_kat_load(&k, DATA_DIR);
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		json_t *c = pe_kat_case(&k, i);
		struct pe_params p;
		struct pe_err err;
		const char *table = pe_kat_str(c, "table"), *query = pe_kat_str(c, "hf_query");
		ck_assert_int_eq(pe_query_params(&p, table, query, &err), 0);
		struct pe_rope_cfg cfg;
		pe_rope_cfg_get(&p, &cfg);
		int64_t seq_len = cfg.seq_len;
		if (!strcmp(table, "rope") && !pe_param_isset(&p, "seq_len"))
			seq_len = pe_param_int(&p, "offset") + pe_param_int(&p, "len");
		pe_params_destroy(&p);
		if (cfg.scaling != PE_ROPE_DYNAMIC || seq_len < 100000)
			continue;
		struct pe_shape s;
		size_t n = pe_kat_shape(c, &s);
		float *torch = pe_kat_file(&k, c, "torch_f32", n * 4);
		float *got = pe_kat_run(table, query, PE_F32, &s);
		struct pe_kat_max *into = strcmp(table, "rope") ? &mi : &mt;
		for (size_t j = 0; j < n; j++)
			pe_kat_max_add(into, pe_ulp_f32(got[j], torch[j]), query, j);
		free(torch);
		free(got);
	}
	pe_kat_free(&k);
	ck_assert_uint_gt(mi.count, 0);
	ck_assert_uint_gt(mt.count, 0);
	pe_kat_max_check(&mi, 0);
	pe_kat_max_check(&mt, 1);
}
END_TEST

START_TEST(scalar_and_avx2_agree)
{
	if (!pe_kat_have_avx2("rope: "))
		return;
	static const char *const q[] = {"query", "hf_query", "ggml_query"};
	struct pe_kat k;
	pe_kat_load(&k, DATA_DIR);
	for (int mode = 0; mode < 3; mode++)
		for (int t = 0; t < 2; t++) {
			enum pe_dtype dt = float_dtypes[t];
			char what[64], what_s[64];
			snprintf(what, sizeof what, "%s %s scalar~avx2", q[mode], pe_dtype_name(dt));
			snprintf(what_s, sizeof what_s, "%s %s scalar~avx2 (scaled)", q[mode], pe_dtype_name(dt));
			struct pe_kat_max m = {.what = what}, ms = {.what = what_s};
			const struct pe_kat_cmp cmp = {NULL, q[mode], NULL, dt,
						       mode == 2 ? "ggml_attention_scaling" : "attention_scaling", 0};
			pe_kat_paths(&k, &cmp, &m, &ms);
			pe_kat_max_check(&m, 1);
			pe_kat_max_check(&ms, 2);
		}
	pe_kat_free(&k);
}
END_TEST

/* ---- the recurrence over long tables ------------------------------------------------------- */

/* Run the rope_row kernel over rows [offset, offset+len) as rope.c does (anchors as there) and
 * return the largest absolute error of cos/sin against glibc's sincos of the same target angles. */
static double recurrence_error(const char *query, int first_order, uint64_t *checked)
{
	struct pe_params p;
	struct pe_err err;
	ck_assert_msg(pe_query_params(&p, "rope", query, &err) == 0, "%s: %s", query, err.detail);
	struct pe_rope_plan pl;
	ck_assert_int_eq(pe_rope_plan_init(&pl, &p), 0);
	size_t h = pl.cfg.h, len = (size_t)pe_param_int(&p, "len");
	int64_t offset = pe_param_int(&p, "offset");
	double *buf = malloc(sizeof(double) * 10 * h);
	ck_assert_ptr_nonnull(buf);
	double *t = buf, *c = t + h, *s = c + h, *cw = s + h, *sw = cw + h;
	const struct pe_kernel_table *k = pe_kernels();
	k->sincos_f64(pl.w, sw, cw, h);
	float *wf = malloc(h * sizeof *wf);
	ck_assert_ptr_nonnull(wf);
	for (size_t i = 0; i < h; i++)
		wf[i] = (float)pl.w[i];
	struct pe_rope_rec st = {h, pl.w, cw, sw, sw + h, sw + 2 * h, sw + 3 * h, first_order,
				 pl.cfg.compat == 1 ? wf : NULL, NULL};
	double worst = 0;
	for (size_t r = 0; r < len; r++) {
		int64_t pos = offset + (int64_t)r;
		pe_rope_angles(&pl, pos, 1, t);
		/* exact and hf angles are formed in the kernel, as rope.c has it do */
		k->rope_row(&st, (double)pos, pl.cfg.compat == 2 ? t : NULL, r % PE_ROPE_ANCHOR_ROWS == 0, c, s);
		for (size_t i = 0; i < h; i++) {
			double rs, rc;
			sincos(t[i], &rs, &rc);
			worst = fmax(worst, fmax(fabs(c[i] - rc), fabs(s[i] - rs)));
			(*checked)++;
		}
	}
	free(buf);
	free(wf);
	pe_rope_plan_destroy(&pl);
	pe_params_destroy(&p);
	return worst;
}

START_TEST(recurrence_error_bound)
{
	static const struct {
		const char *query;
		int first_order;
	} runs[] = {
		{"len=65536&dim=128", 1},
		{"len=65536&dim=128", 0},
		{"len=4096&dim=128&offset=60000000&base=500000", 0}, /* angles near 2^26: full series */
		{"len=65536&dim=64&compat=hf", 0},
		{"len=20000&dim=64&compat=hf&offset=700000", 0},
		{"len=65536&dim=128&compat=ggml", 0},
		{"len=16384&dim=64&compat=ggml&scaling=yarn&factor=8&original_max_position_embeddings=4096", 0},
		{"len=16384&dim=128&compat=ggml&scaling=llama3&factor=8&original_max_position_embeddings=8192&base=500000", 0},
	};
	if (!pe_kat_use_isa(_i))
		return;
	for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
		uint64_t checked = 0;
		double e = recurrence_error(runs[r].query, runs[r].first_order, &checked);
		fprintf(stderr, "%-7s recurrence %-100s %s: max abs error %.3g = 2^%.1f over %llu values (bound 2^-44)\n",
			pe_isa_name(), runs[r].query, runs[r].first_order ? "1st order" : "series", e,
			e > 0 ? log2(e) : -INFINITY, (unsigned long long)checked);
		ck_assert_msg(e <= REC_ERR_BOUND, "%s: recurrence error %g > 2^-44", runs[r].query, e);
	}
}
END_TEST

/* The whole benchmark-sized table against glibc per element: every f32 value within 1 ulp of the
 * correctly rounded (exact) / float-angle (hf) value, in both layouts, through the streaming store. */
START_TEST(long_table_f32)
{
	static const char *const queries[] = {
		"len=65536&dim=128", "len=65536&dim=128&layout=interleaved&offset=3",
		"len=32768&dim=64&compat=hf", "len=2048&dim=256&scaling=yarn&factor=4&original_max_position_embeddings=1024"
		"&offset=1000000",
	};
	if (!pe_kat_use_isa(_i))
		return;
	for (size_t q = 0; q < sizeof queries / sizeof queries[0]; q++) {
		struct pe_params p;
		struct pe_err err;
		ck_assert_int_eq(pe_query_params(&p, "rope", queries[q], &err), 0);
		struct pe_rope_plan pl;
		ck_assert_int_eq(pe_rope_plan_init(&pl, &p), 0);
		size_t h = pl.cfg.h, dim = pl.cfg.dim, len = (size_t)pe_param_int(&p, "len");
		int inter = pe_param_enum(&p, "layout") == 1, hf = pl.cfg.compat == 1;
		struct pe_shape s = {3, {2, len, dim}};
		float *got = pe_kat_run("rope", queries[q], PE_F32, &s);
		double *t = malloc(h * sizeof *t);
		ck_assert_ptr_nonnull(t);
		struct pe_kat_max m = {.what = queries[q]};
		size_t tiny = 0; /* values the recurrence leaves to the direct path */
		for (size_t r = 0; r < len; r++) {
			pe_rope_angles(&pl, pe_param_int(&p, "offset") + (int64_t)r, 1, t);
			for (size_t i = 0; i < h; i++) {
				double rs, rc;
				sincos(t[i], &rs, &rc);
				tiny += fabs(rc) < 0x1p-16 || fabs(rs) < 0x1p-16;
				float ec = pe_rope_f32_value(rc, pl.att, hf), es = pe_rope_f32_value(rs, pl.att, hf);
				size_t a = r * dim + (inter ? 2 * i : i), b = r * dim + (inter ? 2 * i + 1 : h + i);
				pe_kat_max_add(&m, pe_ulp_f32(got[a], ec), queries[q], a);
				pe_kat_max_add(&m, pe_ulp_f32(got[len * dim + a], es), queries[q], len * dim + a);
				PE_CHECK(got[a] == got[b] && got[len * dim + a] == got[len * dim + b], "%s: [%zu] and [%zu] differ",
				         queries[q], a, b);
			}
		}
		pe_kat_max_check(&m, 1);
		fprintf(stderr, "        %zu values below 2^-16 (direct path)\n", tiny);
		ck_assert_uint_gt(tiny, q == 0 ? 20 : 0);
		free(t);
		free(got);
		pe_rope_plan_destroy(&pl);
		pe_params_destroy(&p);
	}
}
END_TEST

/* Tables may be written at any address (the HTTP layer writes behind headers): a streamed table at
 * an odd float offset is bit-identical to an aligned one. */
START_TEST(any_alignment)
{
	if (!pe_kat_use_isa(_i))
		return;
	static const char *const queries[] = {"len=8192&dim=128", "len=8192&dim=128&layout=interleaved",
					      "len=4100&dim=250&compat=hf"};
	for (size_t q = 0; q < 3; q++) {
		struct pe_params p;
		struct pe_err err;
		struct pe_shape s;
		int ov;
		ck_assert_int_eq(pe_query_params(&p, "rope", queries[q], &err), 0);
		pe_table_shape(&p, &s);
		size_t n = pe_shape_count(&s, &ov);
		float *a = malloc((n + 8) * 4), *b = malloc((n + 8) * 4);
		ck_assert(a && b);
		for (size_t off = 0; off < 8; off += 3) {
			ck_assert_int_eq(pe_table_compute(&p, PE_F32, a + off, &err), 0);
			ck_assert_int_eq(pe_table_compute(&p, PE_F32, b, &err), 0);
			ck_assert_msg(memcmp(a + off, b, n * 4) == 0, "%s at float offset %zu differs", queries[q], off);
		}
		free(a);
		free(b);
		pe_params_destroy(&p);
	}
}
END_TEST

/* ---- values a reader can check by hand ------------------------------------------------------ */

static double extra_of(const char *table, const char *query)
{
	struct pe_params p;
	struct pe_err err;
	ck_assert_msg(pe_query_params(&p, table, query, &err) == 0, "%s: %s", query, err.detail);
	ck_assert_str_eq(p.def->extra_name, "attention_scaling");
	double v = p.def->extra(&p);
	pe_params_destroy(&p);
	return v;
}

START_TEST(attention_scaling_values)
{
	/* none: 1; YaRN: 0.1 ln 4 + 1; DeepSeek: (0.1 ln 40 + 1) / (0.0707 ln 40 + 1); override; LongRoPE
	 * Phi-3: sqrt(1 + ln 32 / ln 4096); llama3: 1; ggml YaRN: llama.cpp's float 1 + 0.1f logf(4). */
	ck_assert_double_eq(extra_of("rope", "len=1&dim=8"), 1.0);
	ck_assert_double_eq_tol(extra_of("rope", "len=1&dim=8&scaling=yarn&factor=4&original_max_position_embeddings=2048"),
				1.1386294361119891, 1e-15);
	ck_assert_double_eq_tol(extra_of("rope/inv_freq", "dim=64&scaling=yarn&factor=40&original_max_position_embeddings=4096"
				       "&mscale=1&mscale_all_dim=0.707"),
				(0.1 * log(40) + 1) / (0.1 * 0.707 * log(40) + 1), 1e-15);
	ck_assert_double_eq_tol(extra_of("rope/inv_freq", "dim=64&scaling=yarn&factor=40&original_max_position_embeddings=4096"
				       "&mscale=1&mscale_all_dim=0.707"),
				1.0857264, 1e-7);
	ck_assert_double_eq(extra_of("rope", "len=1&dim=8&scaling=yarn&factor=4&original_max_position_embeddings=64"
				     "&attention_factor=1.25"), 1.25);
	ck_assert_double_eq_tol(extra_of("rope", "len=1&dim=4&scaling=longrope&factor=32&original_max_position_embeddings=4096"
				     "&short_factor=1,1&long_factor=2,3"),
				1.1902380714238083, 1e-15);
	ck_assert_double_eq(extra_of("rope", "len=1&dim=4&scaling=longrope&factor=1&original_max_position_embeddings=4096"
				     "&short_factor=1,1&long_factor=2,3"), 1.0);
	ck_assert_double_eq(extra_of("rope", "len=1&dim=8&scaling=llama3&factor=8&original_max_position_embeddings=8192"), 1.0);
	ck_assert_double_eq(extra_of("rope", "len=1&dim=8&compat=ggml&scaling=yarn&factor=4&original_max_position_embeddings=64"),
			    (double)(1.0f + 0.1f * logf(4.0f)));
	/* and the committed cases agree with transformers' Python floats bit for bit */
	struct pe_kat k;
	pe_kat_load(&k, DATA_DIR);
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		json_t *c = pe_kat_case(&k, i);
		const char *table = pe_kat_str(c, "table");
		double want = json_real_value(json_object_get(c, "attention_scaling"));
		ck_assert_msg(extra_of(table, pe_kat_str(c, "query")) == want, "%s", pe_kat_str(c, "query"));
		ck_assert_msg(extra_of(table, pe_kat_str(c, "hf_query")) == want, "%s", pe_kat_str(c, "hf_query"));
		if (pe_kat_has(c, "ggml_attention_scaling"))
			ck_assert(extra_of(table, pe_kat_str(c, "ggml_query")) ==
				  json_real_value(json_object_get(c, "ggml_attention_scaling")));
	}
	pe_kat_free(&k);
}
END_TEST

/* Values from first principles: position 0 is cos 1 / sin 0; position 1, pair 0 is cos 1 / sin 1;
 * the last pair of dim=4, base=100 at position 10 has angle 10/100^(1/2) = 1; interleaved repeats. */
START_TEST(hand_values)
{
	struct pe_shape s = {3, {2, 11, 4}};
	float *a = pe_kat_run("rope", "len=11&dim=4&base=100", PE_F32, &s);
	ck_assert_float_eq(a[0], 1.0f);
	ck_assert_float_eq(a[44], 0.0f);
	ck_assert_float_eq(a[4], (float)cos(1.0));
	ck_assert_float_eq(a[44 + 4], (float)sin(1.0));
	ck_assert_float_eq(a[10 * 4 + 1], (float)cos(1.0));
	ck_assert_float_eq(a[10 * 4 + 3], (float)cos(1.0)); /* half layout: [c0 c1 | c0 c1] */
	ck_assert_float_eq(a[10 * 4 + 0], (float)cos(10.0));
	free(a);
	float *b = pe_kat_run("rope", "len=11&dim=4&base=100&layout=interleaved", PE_F32, &s);
	ck_assert_float_eq(b[10 * 4 + 0], (float)cos(10.0));
	ck_assert_float_eq(b[10 * 4 + 1], (float)cos(10.0));
	ck_assert_float_eq(b[10 * 4 + 2], (float)cos(1.0));
	ck_assert_float_eq(b[44 + 10 * 4 + 3], (float)sin(1.0));
	free(b);
	/* linear factor 2: position 2 equals position 1 unscaled */
	struct pe_shape s1 = {1, {2}};
	double *w = pe_kat_run("rope/inv_freq", "dim=4&base=100&scaling=linear&factor=2", PE_F64, &s1);
	ck_assert_double_eq(w[0], 0.5);
	ck_assert_double_eq(w[1], 0.05);
	free(w);
	/* llama3: 2*pi/w above orig/low is divided by factor, below orig/high kept */
	struct pe_shape s2 = {1, {4}};
	w = pe_kat_run("rope/inv_freq", "dim=8&base=10000&scaling=llama3&factor=8&original_max_position_embeddings=64", PE_F64,
		       &s2);
	ck_assert_double_eq(w[0], 1.0);                     /* wavelength 6.3 < 16 */
	ck_assert_double_eq(w[3], 1.0 / pow(10000, 0.75) / 8); /* wavelength 6283 > 64 */
	free(w);
}
END_TEST

/* ---- validation and canonical keys ---------------------------------------------------------- */

START_TEST(rejects_naming_the_parameter)
{
	static const struct pe_kat_refusal bad[] = {
		{"rope", "len=4&dim=7", "dim"},
		{"rope/inv_freq", "dim=9", "dim"},
		{"rope", "len=4", "dim"},
		{"rope", "dim=8", "len"},
		{"rope", "len=0&dim=8", "len"},
		{"rope", "len=4&dim=8&base=0", "base"},
		{"rope", "len=4&dim=8&base=-2", "base"},
		{"rope", "len=4&dim=8&offset=-1", "offset"},
		{"rope", "len=4&dim=8&layout=gptj", "layout"},
		{"rope", "len=4&dim=8&scaling=rope", "scaling"},
		{"rope", "len=4&dim=8&compat=vllm", "compat"},
		{"rope", "len=4&dim=8&beta_fast=16", "beta_fast"},
		{"rope", "len=4&dim=8&factor=2", "factor"},
		{"rope", "len=4&dim=8&scaling=linear&factor=2&original_max_position_embeddings=64", "original_max_position_embeddings"},
		{"rope", "len=4&dim=8&scaling=linear&factor=2&truncate=0", "truncate"},
		{"rope", "len=4&dim=8&scaling=ntk&factor=2&seq_len=9", "seq_len"},
		{"rope", "len=4&dim=8&scaling=yarn&factor=2&original_max_position_embeddings=64&low_freq_factor=2", "low_freq_factor"},
		{"rope", "len=4&dim=8&scaling=llama3&factor=8&original_max_position_embeddings=64&mscale=1", "mscale"},
		{"rope", "len=4&dim=8&scaling=llama3&factor=8&original_max_position_embeddings=64&short_factor=1,1,1,1", "short_factor"},
		{"rope", "len=4&dim=8&scaling=linear", "factor"},
		{"rope", "len=4&dim=8&scaling=linear&factor=0", "factor"},
		{"rope", "len=4&dim=8&scaling=linear&factor=-1", "factor"},
		{"rope", "len=4&dim=8&scaling=ntk&factor=0.5", "factor"},
		{"rope", "len=4&dim=8&scaling=yarn&factor=0.9&original_max_position_embeddings=64", "factor"},
		{"rope", "len=4&dim=2&scaling=ntk&factor=2", "dim"},
		{"rope", "len=4&dim=2&scaling=dynamic&factor=2&original_max_position_embeddings=64", "dim"},
		{"rope", "len=4&dim=8&scaling=dynamic&factor=2", "original_max_position_embeddings"},
		{"rope", "len=4&dim=8&scaling=yarn&factor=2", "original_max_position_embeddings"},
		{"rope", "len=4&dim=4&scaling=longrope&factor=2&short_factor=1,1&long_factor=1,1", "original_max_position_embeddings"},
		{"rope", "len=4&dim=8&scaling=llama3&factor=8", "original_max_position_embeddings"},
		{"rope", "len=4&dim=8&scaling=llama3&original_max_position_embeddings=64", "factor"},
		{"rope", "len=4&dim=8&scaling=yarn&factor=2&original_max_position_embeddings=64&beta_fast=1&beta_slow=1", "beta_fast"},
		{"rope", "len=4&dim=8&scaling=yarn&factor=2&original_max_position_embeddings=64&beta_fast=2&beta_slow=4", "beta_fast"},
		{"rope", "len=4&dim=8&scaling=yarn&factor=2&original_max_position_embeddings=64&base=1", "base"},
		{"rope", "len=4&dim=8&scaling=yarn&factor=2&original_max_position_embeddings=64&mscale=1", "mscale_all_dim"},
		{"rope", "len=4&dim=8&scaling=yarn&factor=2&original_max_position_embeddings=64&mscale_all_dim=1", "mscale"},
		{"rope", "len=4&dim=8&scaling=yarn&factor=2&original_max_position_embeddings=64&mscale=1&mscale_all_dim=1"
			 "&attention_factor=1.1", "mscale"},
		{"rope", "len=4&dim=8&scaling=yarn&factor=2&original_max_position_embeddings=64&attention_factor=0", "attention_factor"},
		{"rope", "len=4&dim=8&scaling=yarn&factor=2&original_max_position_embeddings=64&truncate=2", "truncate"},
		{"rope", "len=4&dim=8&scaling=llama3&factor=8&original_max_position_embeddings=64&low_freq_factor=4"
			 "&high_freq_factor=1", "high_freq_factor"},
		{"rope", "len=4&dim=8&scaling=llama3&factor=8&original_max_position_embeddings=64&low_freq_factor=0", "low_freq_factor"},
		{"rope", "len=4&dim=8&scaling=longrope&factor=2&original_max_position_embeddings=64&long_factor=1,1,1,1", "short_factor"},
		{"rope", "len=4&dim=8&scaling=longrope&factor=2&original_max_position_embeddings=64&short_factor=1,1,1"
			 "&long_factor=1,1,1,1", "short_factor"},
		{"rope", "len=4&dim=8&scaling=longrope&factor=2&original_max_position_embeddings=64&short_factor=1,1,1,1"
			 "&long_factor=1,1,1,1,1", "long_factor"},
		{"rope", "len=4&dim=8&scaling=longrope&factor=2&original_max_position_embeddings=64&short_factor=1,1,1,1"
			 "&long_factor=1,x,1,1", "long_factor"},
		{"rope", "len=4&dim=8&scaling=longrope&factor=2&original_max_position_embeddings=64&short_factor=1,1,0,1"
			 "&long_factor=1,1,1,1", "short_factor"},
		{"rope", "len=4&dim=8&scaling=longrope&original_max_position_embeddings=64&short_factor=1,1,1,1&long_factor=1,1,1,1",
		 "factor"},
		{"rope", "len=4&dim=8&scaling=longrope&factor=2&attention_factor=1.2&original_max_position_embeddings=64"
			 "&short_factor=1,1,1,1&long_factor=1,1,1,1", "factor"},
		{"rope", "len=4&dim=8&scaling=longrope&factor=2&original_max_position_embeddings=1&short_factor=1,1,1,1"
			 "&long_factor=1,1,1,1", "original_max_position_embeddings"},
		{"rope", "len=4&dim=8&scaling=dynamic&factor=2&original_max_position_embeddings=64&seq_len=0", "seq_len"},
		{"rope", "len=4&dim=8&compat=ggml&scaling=ntk&factor=2", "compat"},
		{"rope", "len=4&dim=8&compat=ggml&scaling=dynamic&factor=2&original_max_position_embeddings=64", "compat"},
		{"rope", "len=4&dim=8&compat=ggml&scaling=yarn&factor=2&original_max_position_embeddings=64&truncate=0", "truncate"},
		{"rope", "len=4&dim=8&compat=ggml&scaling=yarn&factor=2&original_max_position_embeddings=64&attention_factor=1.1",
		 "attention_factor"},
		{"rope", "len=4&dim=8&compat=ggml&scaling=yarn&factor=2&original_max_position_embeddings=64&mscale=1"
			 "&mscale_all_dim=1", "mscale"},
		{"rope", "len=4&dim=8&compat=ggml&offset=2147483645", "offset"},
		{"rope", "len=4&dim=8&base=1e-60&compat=hf", "base"}, /* float(base) = 0 */
		{"rope/inv_freq", "dim=64&base=1e-60&compat=ggml", "base"},
		{"rope", "len=100&dim=8&scaling=linear&factor=1e-306", "factor"},
		{"rope", "len=100&dim=8&scaling=linear&factor=1e-37&compat=ggml", "factor"},
		{"rope", "len=4&dim=8&scaling=yarn&factor=2&original_max_position_embeddings=64&attention_factor=1e6",
		 "attention_factor"},
		{"rope", "len=4&dim=8&scaling=yarn&factor=1e300&original_max_position_embeddings=64&mscale=1e6"
			 "&mscale_all_dim=1e-300", "mscale"},
		{"rope/inv_freq", "dim=8&len=4", "len"},
		{"rope/inv_freq", "dim=8&offset=4", "offset"},
		{"rope/inv_freq", "dim=8&layout=half", "layout"},
		{"rope/inv_freq", "dim=8&scaling=yarn&factor=2&original_max_position_embeddings=64&beta_slow=40", "beta_fast"},
	};
	pe_kat_rejects_all(bad, sizeof bad / sizeof bad[0]);
}
END_TEST

/* Unusual but finite requests stay accepted: a base below 1, a tiny linear factor, a large
 * attention factor within f16's range. */
START_TEST(accepts_finite_extremes)
{
	static const char *const ok[] = {
		"len=4&dim=8&base=0.5", "len=4&dim=8&base=1e300", "len=4&dim=8&base=1e-30", "len=4&dim=8&scaling=linear&factor=1e-6",
		"len=4&dim=8&scaling=yarn&factor=2&original_max_position_embeddings=64&attention_factor=65504",
		"len=4&dim=8&scaling=ntk&factor=1e300",
	};
	struct pe_shape s = {3, {2, 4, 8}};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		for (int compat = 0; compat < 2; compat++) {
			char q[256];
			snprintf(q, sizeof q, "%s%s", ok[i], compat ? "&compat=hf" : "");
			float *v = pe_kat_run("rope", q, PE_F32, &s);
			for (size_t j = 0; j < 64; j++)
				ck_assert_msg(isfinite(v[j]), "%s: value %zu is %g", q, j, v[j]);
			free(v);
		}
}
END_TEST

static void canonical(const char *table, const char *query, char *out, size_t cap)
{
	struct pe_params p;
	struct pe_err err;
	ck_assert_msg(pe_query_params(&p, table, query, &err) == 0, "%s: %s", query, err.detail);
	ck_assert_int_gt(pe_params_canonical(&p, out, cap), 0);
	pe_params_destroy(&p);
}

START_TEST(canonical_keys)
{
	char key[1024];
	canonical("rope", "dim=8&len=4", key, sizeof key);
	ck_assert_str_eq(key, "len=4&offset=0&layout=half&dim=8&base=1e+04&scaling=none&compat=exact");
	canonical("rope", "len=4&dim=8&base=10000&compat=exact&layout=half", key, sizeof key);
	ck_assert_str_eq(key, "len=4&offset=0&layout=half&dim=8&base=1e+04&scaling=none&compat=exact");
	canonical("rope", "len=4&dim=8&scaling=dynamic&factor=2&original_max_position_embeddings=64&offset=100", key, sizeof key);
	ck_assert_str_eq(key, "len=4&offset=100&layout=half&dim=8&base=1e+04&scaling=dynamic&factor=2"
			      "&original_max_position_embeddings=64&seq_len=104&compat=exact");
	canonical("rope", "len=4&dim=8&scaling=yarn&factor=2&original_max_position_embeddings=64", key, sizeof key);
	ck_assert_str_eq(key, "len=4&offset=0&layout=half&dim=8&base=1e+04&scaling=yarn&factor=2"
			      "&original_max_position_embeddings=64&beta_fast=32&beta_slow=1&truncate=1&compat=exact");
	canonical("rope", "len=4&dim=8&scaling=llama3&factor=8&original_max_position_embeddings=64", key, sizeof key);
	ck_assert_str_eq(key, "len=4&offset=0&layout=half&dim=8&base=1e+04&scaling=llama3&factor=8"
			      "&original_max_position_embeddings=64&low_freq_factor=1&high_freq_factor=4&compat=exact");
	canonical("rope/inv_freq", "dim=4&scaling=longrope&factor=2&original_max_position_embeddings=64&short_factor=1,1"
				   "&long_factor=2.50,3", key, sizeof key);
	ck_assert_str_eq(key, "dim=4&base=1e+04&scaling=longrope&factor=2&original_max_position_embeddings=64&seq_len=64"
			      "&short_factor=1,1&long_factor=2.5,3&compat=exact");
}
END_TEST

/* The committed data covers what the comparisons are meant to: every scaling, both layouts, every
 * compat mode, scaled attention, long positions, mpmath values. */
START_TEST(known_answers_cover_the_cases)
{
	static const char *const need[] = {"scaling=linear", "scaling=ntk", "scaling=dynamic", "scaling=yarn",
					   "scaling=longrope", "scaling=llama3", "layout=interleaved", "truncate=0",
					   "mscale_all_dim", "attention_factor", "seq_len", "offset=2147483"};
	struct pe_kat k;
	pe_kat_load(&k, DATA_DIR);
	int found[sizeof need / sizeof need[0]] = {0}, mp = 0, ggml = 0, inv = 0, none = 0;
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		json_t *c = pe_kat_case(&k, i);
		const char *q = pe_kat_str(c, "query");
		for (size_t n = 0; n < sizeof need / sizeof need[0]; n++)
			found[n] += strstr(q, need[n]) != NULL;
		mp += pe_kat_has(c, "mp_f64");
		ggml += pe_kat_has(c, "ggml_f32");
		inv += strcmp(pe_kat_str(c, "table"), "rope/inv_freq") == 0;
		none += strstr(q, "scaling=") == NULL;
		ck_assert_msg(strstr(q, "compat=") == NULL, "%s: query must default to compat=exact", q);
	}
	pe_kat_free(&k);
	for (size_t n = 0; n < sizeof need / sizeof need[0]; n++)
		ck_assert_msg(found[n], "no case with %s", need[n]);
	ck_assert(mp >= 5 && ggml >= 10 && inv >= 8 && none >= 4);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("rope");
	TCase *tc = tcase_create("known answers");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, known_answers_cover_the_cases);
	tcase_add_loop_test(tc, known_answers, 0, 2 * NKAT_RUNS);
	tcase_add_loop_test(tc, inv_freq_bit_identical, 0, 2);
	tcase_add_loop_test(tc, hf_follows_torch_at_large_positions, 0, 2);
	tcase_add_test(tc, hf_dynamic_long_seq_len);
	tcase_add_test(tc, scalar_and_avx2_agree);
	suite_add_tcase(s, tc);
	TCase *tr = tcase_create("recurrence");
	tcase_set_timeout(tr, 600);
	tcase_add_loop_test(tr, recurrence_error_bound, 0, 2);
	tcase_add_loop_test(tr, long_table_f32, 0, 2);
	tcase_add_loop_test(tr, any_alignment, 0, 2);
	suite_add_tcase(s, tr);
	TCase *tv = tcase_create("values and validation");
	tcase_add_test(tv, attention_scaling_values);
	tcase_add_test(tv, hand_values);
	tcase_add_test(tv, rejects_naming_the_parameter);
	tcase_add_test(tv, accepts_finite_extremes);
	tcase_add_test(tv, canonical_keys);
	suite_add_tcase(s, tv);
	return s;
}

PE_TEST_MAIN(suite)
