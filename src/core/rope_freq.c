/* RoPE frequencies, attention scaling and angles in the three arithmetics of /v1/rope.
 *
 * Formulas are transformers' modeling_rope_utils.py (_compute_*_parameters); each compat mode
 * replays one implementation's order of operations, because at long positions a frequency one ulp
 * off moves the angle by far more than an ulp:
 *
 *   exact  double throughout; x_i = (2i)/dim, w_i = 1/pow(base, x_i) and the scalings' formulas in
 *          double, exactly the operations of the float64 reference (tests/ref/gen_rope.py).
 *   hf     PyTorch float32 as HF writes it: x_i = float(2i)/float(dim), base ** x through PyTorch's
 *          CPU pow (16 elements at a time through SLEEF's powf u10, the remainder through libm: see
 *          pe_torch_powf in torchmath.c), then every tensor operation rounded to float in HF's
 *          order; scalars that HF computes in Python (static NTK base, YaRN's correction range,
 *          wavelength thresholds) stay double until PyTorch casts them to float. Dynamic NTK past
 *          original_max_position_embeddings is the exception: current transformers (the
 *          position_ids rotary forward and dynamic_rope_update, through the 5.x rope_parameters code)
 *          recomputes it with seq_len = torch.max(position_ids) + 1, an int64 tensor, so the base is
 *          a float32 tensor:
 *          x = float(float(float(factor)*float(seq_len)) / float(orig)) - float(factor - 1),
 *          base' = float(float(base) * float(pow(double(x), dim/(dim-2)))). Older releases
 *          (_set_cos_sin_cache(seq_len) with a Python int, before about 4.38) kept it in double,
 *          as compat=exact does; compat=hf follows current HF.
 *   ggml   llama.cpp's CPU rope cache (ggml_rope_cache_init / rope_yarn) and its converter's
 *          llama3 freq factors, in float with libm's powf/logf.
 *
 * Angles: exact p*w_i in double; hf float(float(p)*w_i); ggml theta = float(p), theta *= theta_scale
 * per frequency.
 *
 * llama3 with low_freq_factor == high_freq_factor (Llama 4: 1 and 1) is a step: wavelengths above
 * original_max_position_embeddings / low_freq_factor are divided by factor, the rest kept, in all
 * three arithmetics (HF computes its smoothing term for every frequency but selects it only where
 * neither comparison holds; llama.cpp's converter, whose assert is commented out "for Llama4",
 * takes the same branches). A wavelength exactly on the edge is NaN in HF and in the converter
 * (x / 0.0 with x = 0 or not, then inf - inf); it is NaN here too, and /v1/rope refuses it.
 *
 * proportional (Gemma 4; transformers' _compute_proportional_rope_parameters): the first
 * rot = floor(partial_rotary_factor * dim / 2) frequencies are the unscaled ones of the whole dim,
 * 1/base^(2i/dim) (the exponent's denominator is dim, not the rotated width), divided by factor as
 * linear's are; the other dim/2 - rot are 0 (cos 1, sin 0: those pairs do not turn). In hf the pow
 * runs over a tensor of rot exponents, which decides where PyTorch's SLEEF blocks end. */
#include "core/rope_freq.h"
#include "core/tables.h"
#include "core/torchmath.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

void pe_rope_cfg_get(const struct pe_params *p, struct pe_rope_cfg *c)
{
	c->dim = (size_t)pe_param_int(p, "dim");
	c->h = c->dim / 2;
	c->base = pe_param_real(p, "base");
	c->scaling = pe_param_enum(p, "scaling");
	c->compat = pe_param_enum(p, "compat");
	c->has_factor = pe_param_isset(p, "factor");
	c->factor = c->has_factor ? pe_param_real(p, "factor") : 1.0;
	c->orig = pe_param_isset(p, "original_max_position_embeddings") ?
		pe_param_int(p, "original_max_position_embeddings") : 0;
	c->seq_len = pe_param_isset(p, "seq_len") ? pe_param_int(p, "seq_len") : 0;
	c->beta_fast = pe_param_real(p, "beta_fast");
	c->beta_slow = pe_param_real(p, "beta_slow");
	c->has_mscale = pe_param_isset(p, "mscale");
	c->mscale = c->has_mscale ? pe_param_real(p, "mscale") : 0;
	c->mscale_all_dim = pe_param_isset(p, "mscale_all_dim") ? pe_param_real(p, "mscale_all_dim") : 0;
	c->has_attention_factor = pe_param_isset(p, "attention_factor");
	c->attention_factor = c->has_attention_factor ? pe_param_real(p, "attention_factor") : 1.0;
	c->truncate = (int)pe_param_int(p, "truncate");
	c->low_freq_factor = pe_param_real(p, "low_freq_factor");
	c->high_freq_factor = pe_param_real(p, "high_freq_factor");
	c->rot = c->h;
	if (c->scaling == PE_ROPE_PROPORTIONAL) /* Python's int(prf * head_dim // 2) */
		c->rot = (size_t)floor(pe_param_real(p, "partial_rotary_factor") * (double)c->dim / 2.0);
	size_t n;
	c->short_factor = pe_param_list(p, "short_factor", &n);
	c->long_factor = pe_param_list(p, "long_factor", &n);
}

/* ---- attention scaling -------------------------------------------------------------------- */

static double yarn_get_mscale(double scale, double m)
{
	return scale <= 1 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

static double attention_double(const struct pe_rope_cfg *c)
{
	if (c->scaling == PE_ROPE_YARN) {
		if (c->has_attention_factor)
			return c->attention_factor;
		if (c->has_mscale)
			return yarn_get_mscale(c->factor, c->mscale) / yarn_get_mscale(c->factor, c->mscale_all_dim);
		return yarn_get_mscale(c->factor, 1.0);
	}
	if (c->scaling == PE_ROPE_LONGROPE) {
		if (c->has_attention_factor)
			return c->attention_factor;
		return c->factor <= 1.0 ? 1.0 : sqrt(1 + log(c->factor) / log((double)c->orig));
	}
	return 1.0;
}

/* llama.cpp's magnitude factor: 1 + 0.1*ln(1/freq_scale) for YaRN (rope_yarn), the converter's
 * stored float attn_factor for LongRoPE, else 1. */
static float ggml_mscale(const struct pe_rope_cfg *c)
{
	if (c->scaling == PE_ROPE_YARN) {
		float freq_scale = 1.0f / (float)c->factor;
		return 1.0f * (1.0f + 0.1f * logf(1.0f / freq_scale));
	}
	if (c->scaling == PE_ROPE_LONGROPE)
		return (float)attention_double(c);
	return 1.0f;
}

double pe_rope_attention_scaling(const struct pe_rope_cfg *c)
{
	return c->compat == PE_COMPAT_GGML ? (double)ggml_mscale(c) : attention_double(c);
}

/* ---- shared scalars ------------------------------------------------------------------------ */

/* Base after static or dynamic NTK in double (exact; HF's static NTK, a Python float), else the base. */
double pe_rope_ntk_base(const struct pe_rope_cfg *c)
{
	double d = (double)c->dim, e = d / (d - 2);
	if (c->scaling == PE_ROPE_NTK)
		return c->base * pow(c->factor, e);
	if (c->scaling == PE_ROPE_DYNAMIC && c->seq_len > c->orig)
		return c->base * pow(c->factor * (double)c->seq_len / (double)c->orig - (c->factor - 1), e);
	return c->base;
}

/* HF's dynamic NTK base past orig: seq_len is the int64 tensor torch.max(position_ids) + 1, so every
 * step is a float32 tensor op with the Python scalars cast to float, except that PyTorch raises a
 * float tensor to a Python-float power in double and rounds once (measured against torch 1.13.1). */
double pe_rope_ntk_base_hf(const struct pe_rope_cfg *c)
{
	if (c->scaling != PE_ROPE_DYNAMIC || c->seq_len <= c->orig)
		return pe_rope_ntk_base(c);
	double d = (double)c->dim;
	float x = (float)c->factor * (float)c->seq_len;
	x = x / (float)c->orig;
	x = x - (float)(c->factor - 1);
	float scale = (float)pow((double)x, d / (d - 2));
	return (double)((float)c->base * scale);
}

/* YaRN's find_correction_range: [low, high] in dimension-pair units, high > low. */
void pe_rope_yarn_range(const struct pe_rope_cfg *c, double *low, double *high)
{
	double d = (double)c->dim, lb = 2 * log(c->base), orig = (double)c->orig;
	double lo = d * log(orig / (c->beta_fast * 2 * M_PI)) / lb;
	double hi = d * log(orig / (c->beta_slow * 2 * M_PI)) / lb;
	if (c->truncate) {
		lo = floor(lo);
		hi = ceil(hi);
	}
	lo = fmax(lo, 0);
	hi = fmin(hi, d - 1);
	if (lo == hi)
		hi += 0.001;
	*low = lo;
	*high = hi;
}

const double *pe_rope_longrope_factors(const struct pe_rope_cfg *c)
{
	return c->seq_len > c->orig ? c->long_factor : c->short_factor;
}

/* ---- exact (double) ------------------------------------------------------------------------ */

double pe_rope_x_exact(const struct pe_rope_cfg *c, size_t i) { return (double)(2 * i) / (double)c->dim; }

double pe_rope_llama3_exact(const struct pe_rope_cfg *c, double w)
{
	double orig = (double)c->orig, lo = c->low_freq_factor, hi = c->high_freq_factor;
	double wavelen = 2 * M_PI / w;
	if (wavelen < orig / hi)
		return w;
	if (wavelen > orig / lo)
		return w / c->factor;
	if (hi == lo)
		return NAN; /* the step's edge itself: transformers' smoothing is 0/0 or inf - inf there */
	double smooth = (orig / wavelen - lo) / (hi - lo);
	return (1 - smooth) * w / c->factor + smooth * w;
}

static void freqs_exact(const struct pe_rope_cfg *c, double *w)
{
	double base = pe_rope_ntk_base(c), low = 0, high = 1;
	if (c->scaling == PE_ROPE_YARN)
		pe_rope_yarn_range(c, &low, &high);
	for (size_t i = 0; i < c->h; i++) {
		double pos = pow(base, pe_rope_x_exact(c, i));
		switch (c->scaling) {
		case PE_ROPE_LINEAR:
		case PE_ROPE_PROPORTIONAL:
			w[i] = i < c->rot ? 1.0 / pos / c->factor : 0.0;
			break;
		case PE_ROPE_YARN: {
			double ramp = fmin(fmax(((double)i - low) / (high - low), 0), 1), ef = 1 - ramp;
			w[i] = 1.0 / (c->factor * pos) * (1 - ef) + 1.0 / pos * ef;
			break;
		}
		case PE_ROPE_LONGROPE:
			w[i] = 1.0 / (pe_rope_longrope_factors(c)[i] * pos);
			break;
		case PE_ROPE_LLAMA3:
			w[i] = pe_rope_llama3_exact(c, 1.0 / pos);
			break;
		default: /* none, ntk, dynamic: the base already carries the scaling */
			w[i] = 1.0 / pos;
		}
	}
}

/* ---- hf (PyTorch float32) ------------------------------------------------------------------ */

/* base ** (torch.arange(0, dim, 2).float() / dim) */
static void pow_hf(const struct pe_rope_cfg *c, double base, float *pw)
{
	for (size_t i = 0; i < c->h; i++)
		pw[i] = pe_torch_powf((float)base, (float)(2 * i) / (float)c->dim, i, c->rot);
}

/* HF's llama3 on float32 tensors. `2*pi / t` is t.reciprocal() * 2*pi in PyTorch, and comparisons
 * with a Python float compare in float32. */
float pe_rope_llama3_hf(const struct pe_rope_cfg *c, float w)
{
	double orig = (double)c->orig, lo = c->low_freq_factor, hi = c->high_freq_factor;
	float f = (float)c->factor;
	float wavelen = (1.0f / w) * (float)(2 * M_PI);
	float inv_llama = wavelen > (float)(orig / lo) ? w / f : w;
	int medium = !(wavelen < (float)(orig / hi)) && !(wavelen > (float)(orig / lo));
	if (!medium)
		return inv_llama;
	if (hi == lo)
		return NAN; /* smooth = x / 0.0 is +-inf or NaN, and the blend NaN */
	float smooth = ((1.0f / wavelen) * (float)orig - (float)lo) / (float)(hi - lo);
	return (1.0f - smooth) * inv_llama / f + smooth * inv_llama;
}

float pe_rope_yarn_hf(const struct pe_rope_cfg *c, size_t i, float pos, double low, double high)
{
	float extra = 1.0f / pos, inter = 1.0f / ((float)c->factor * pos);
	float ramp = ((float)i - (float)low) / (float)(high - low);
	ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
	float ef = 1.0f - ramp;
	return inter * (1.0f - ef) + extra * ef;
}

static void freqs_hf(const struct pe_rope_cfg *c, float *pw, double *w)
{
	double low = 0, high = 1;
	if (c->scaling == PE_ROPE_YARN)
		pe_rope_yarn_range(c, &low, &high);
	pow_hf(c, pe_rope_ntk_base_hf(c), pw);
	for (size_t i = 0; i < c->h; i++) {
		float v;
		switch (c->scaling) {
		case PE_ROPE_LINEAR:
		case PE_ROPE_PROPORTIONAL:
			v = i < c->rot ? (1.0f / pw[i]) / (float)c->factor : 0.0f;
			break;
		case PE_ROPE_YARN:
			v = pe_rope_yarn_hf(c, i, pw[i], low, high);
			break;
		case PE_ROPE_LONGROPE:
			v = 1.0f / ((float)pe_rope_longrope_factors(c)[i] * pw[i]);
			break;
		case PE_ROPE_LLAMA3:
			v = pe_rope_llama3_hf(c, 1.0f / pw[i]);
			break;
		default:
			v = 1.0f / pw[i];
		}
		w[i] = (double)v;
	}
}

/* ---- ggml (llama.cpp) ---------------------------------------------------------------------- */

static float ggml_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base)
{
	return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

/* convert_hf_to_gguf.py's llama3 rope_freqs, computed there on float32 tensors. */
float pe_rope_llama3_ggml_factor(const struct pe_rope_cfg *c, float freq)
{
	double orig = (double)c->orig, lo = c->low_freq_factor, hi = c->high_freq_factor;
	float wavelen = (1.0f / freq) * (float)(2 * M_PI);
	if (wavelen < (float)(orig / hi))
		return 1.0f;
	if (wavelen > (float)(orig / lo))
		return (float)c->factor;
	if (hi == lo)
		return NAN; /* the converter's 1 / ((1 - inf) / factor + inf) */
	float smooth = ((1.0f / wavelen) * (float)orig - (float)lo) / (float)(hi - lo);
	return 1.0f / ((1.0f - smooth) / (float)c->factor + smooth);
}

int pe_rope_plan_ggml(const struct pe_rope_cfg *c, struct pe_rope_ggml *g)
{
	int n_dims = (int)c->dim;
	float base = (float)c->base;
	g->theta_scale = powf(base, -2.0f / (float)n_dims);
	g->freq_scale = (c->scaling == PE_ROPE_LINEAR || c->scaling == PE_ROPE_YARN) ? 1.0f / (float)c->factor : 1.0f;
	g->ext_factor = c->scaling == PE_ROPE_YARN ? 1.0f : 0.0f;
	g->corr_dims[0] = g->corr_dims[1] = 0;
	if (c->scaling == PE_ROPE_YARN) {
		float start = floorf(ggml_corr_dim(n_dims, (int)c->orig, (float)c->beta_fast, base));
		float end = ceilf(ggml_corr_dim(n_dims, (int)c->orig, (float)c->beta_slow, base));
		g->corr_dims[0] = start > 0 ? start : 0;
		g->corr_dims[1] = end < (float)(n_dims - 1) ? end : (float)(n_dims - 1);
	}
	g->mscale = ggml_mscale(c);
	g->freq_factors = NULL;
	if (c->scaling != PE_ROPE_LLAMA3 && c->scaling != PE_ROPE_LONGROPE)
		return 0;
	g->freq_factors = malloc(c->h * sizeof *g->freq_factors);
	if (!g->freq_factors)
		return PE_ENOMEM;
	float *pw = malloc(c->h * sizeof *pw);
	if (!pw)
		return PE_ENOMEM;
	pow_hf(c, c->base, pw); /* the converter's float32 torch frequencies */
	for (size_t i = 0; i < c->h; i++)
		g->freq_factors[i] = c->scaling == PE_ROPE_LLAMA3 ? pe_rope_llama3_ggml_factor(c, 1.0f / pw[i]) :
			(float)pe_rope_longrope_factors(c)[i];
	free(pw);
	return 0;
}

/* rope_yarn_ramp's mix for pair i (ext_factor folded in). */
float pe_rope_ggml_ramp_mix(const struct pe_rope_ggml *g, size_t i)
{
	float low = g->corr_dims[0], high = g->corr_dims[1];
	float y = ((float)(int64_t)i - low) / (high - low > 0.001f ? high - low : 0.001f);
	y = y > 0 ? y : 0;
	return (1 - (y < 1 ? y : 1)) * g->ext_factor;
}

/* Angle of pair i from the running theta (theta_extrap before the freq factor). */
float pe_rope_ggml_angle(const struct pe_rope_ggml *g, float theta, size_t i, float ramp_mix)
{
	float te = g->freq_factors ? theta / g->freq_factors[i] : theta;
	float ti = g->freq_scale * te;
	if (g->ext_factor == 0.0f)
		return ti;
	return ti * (1 - ramp_mix) + te * ramp_mix;
}

/* A double estimate of the per-position angle step of pair i (seeds the recurrence; the exact
 * ggml angle is always the target). */
double pe_rope_ggml_step(const struct pe_rope_ggml *g, size_t i)
{
	double w = pow((double)g->theta_scale, (double)i), rm = pe_rope_ggml_ramp_mix(g, i);
	if (g->freq_factors)
		w /= g->freq_factors[i];
	return w * ((double)g->freq_scale * (1 - rm) + rm);
}

/* ---- plans and angles ---------------------------------------------------------------------- */

int pe_rope_plan_init(struct pe_rope_plan *pl, const struct pe_params *p)
{
	pe_rope_cfg_get(p, &pl->cfg);
	const struct pe_rope_cfg *c = &pl->cfg;
	pl->g.freq_factors = NULL;
	pl->w = malloc(c->h * sizeof *pl->w);
	float *pw = malloc(c->h * sizeof *pw);
	int rc = (pl->w && pw) ? 0 : PE_ENOMEM;
	if (rc == 0 && c->compat == PE_COMPAT_EXACT)
		freqs_exact(c, pl->w);
	else if (rc == 0 && c->compat == PE_COMPAT_HF)
		freqs_hf(c, pw, pl->w);
	else if (rc == 0 && (rc = pe_rope_plan_ggml(c, &pl->g)) == 0)
		for (size_t i = 0; i < c->h; i++)
			pl->w[i] = pe_rope_ggml_step(&pl->g, i);
	pl->att = pe_rope_attention_scaling(c);
	free(pw);
	if (rc != 0)
		pe_rope_plan_destroy(pl);
	return rc;
}

void pe_rope_plan_destroy(struct pe_rope_plan *pl)
{
	free(pl->w);
	free(pl->g.freq_factors);
	pl->w = NULL;
	pl->g.freq_factors = NULL;
}

#define GGML_BLOCK 8 /* rows advanced together so the float chain vectorises across rows */

static void angles_ggml(const struct pe_rope_plan *pl, int64_t pos0, size_t nrows, double *t)
{
	const struct pe_rope_ggml *g = &pl->g;
	size_t h = pl->cfg.h;
	for (size_t r0 = 0; r0 < nrows; r0 += GGML_BLOCK) {
		size_t nb = nrows - r0 < GGML_BLOCK ? nrows - r0 : GGML_BLOCK;
		float theta[GGML_BLOCK];
		for (size_t r = 0; r < nb; r++)
			theta[r] = (float)(pos0 + (int64_t)(r0 + r));
		for (size_t i = 0; i < h; i++) {
			float rm = pe_rope_ggml_ramp_mix(g, i);
			for (size_t r = 0; r < nb; r++) {
				t[(r0 + r) * h + i] = (double)pe_rope_ggml_angle(g, theta[r], i, rm);
				theta[r] *= g->theta_scale;
			}
		}
	}
}

void pe_rope_angles(const struct pe_rope_plan *pl, int64_t pos0, size_t nrows, double *t)
{
	size_t h = pl->cfg.h;
	const double *w = pl->w;
	if (pl->cfg.compat == PE_COMPAT_GGML) {
		angles_ggml(pl, pos0, nrows, t);
		return;
	}
	for (size_t r = 0; r < nrows; r++, t += h) {
		int64_t p = pos0 + (int64_t)r;
		if (pl->cfg.compat == PE_COMPAT_HF) {
			float pf = (float)p;
			for (size_t i = 0; i < h; i++)
				t[i] = (double)(pf * (float)w[i]);
		} else {
			double pd = (double)p;
			for (size_t i = 0; i < h; i++)
				t[i] = pd * w[i];
		}
	}
}
