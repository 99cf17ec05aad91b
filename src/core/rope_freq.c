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
 * (x / 0.0 with x = 0 or not, then inf - inf); it is NaN here too, and /v1/rope refuses it. */
#include "core/rope.h"
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
static double ntk_base(const struct pe_rope_cfg *c)
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
static double ntk_base_hf(const struct pe_rope_cfg *c)
{
	if (c->scaling != PE_ROPE_DYNAMIC || c->seq_len <= c->orig)
		return ntk_base(c);
	double d = (double)c->dim;
	float x = (float)c->factor * (float)c->seq_len;
	x = x / (float)c->orig;
	x = x - (float)(c->factor - 1);
	float scale = (float)pow((double)x, d / (d - 2));
	return (double)((float)c->base * scale);
}

/* YaRN's find_correction_range: [low, high] in dimension-pair units, high > low. */
static void yarn_range(const struct pe_rope_cfg *c, double *low, double *high)
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

static const double *longrope_factors(const struct pe_rope_cfg *c)
{
	return c->seq_len > c->orig ? c->long_factor : c->short_factor;
}

/* ---- exact (double) ------------------------------------------------------------------------ */

static double x_exact(const struct pe_rope_cfg *c, size_t i) { return (double)(2 * i) / (double)c->dim; }

static double llama3_exact(const struct pe_rope_cfg *c, double w)
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
	double base = ntk_base(c), low = 0, high = 1;
	if (c->scaling == PE_ROPE_YARN)
		yarn_range(c, &low, &high);
	for (size_t i = 0; i < c->h; i++) {
		double pos = pow(base, x_exact(c, i));
		switch (c->scaling) {
		case PE_ROPE_LINEAR:
			w[i] = 1.0 / pos / c->factor;
			break;
		case PE_ROPE_YARN: {
			double ramp = fmin(fmax(((double)i - low) / (high - low), 0), 1), ef = 1 - ramp;
			w[i] = 1.0 / (c->factor * pos) * (1 - ef) + 1.0 / pos * ef;
			break;
		}
		case PE_ROPE_LONGROPE:
			w[i] = 1.0 / (longrope_factors(c)[i] * pos);
			break;
		case PE_ROPE_LLAMA3:
			w[i] = llama3_exact(c, 1.0 / pos);
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
		pw[i] = pe_torch_powf((float)base, (float)(2 * i) / (float)c->dim, i, c->h);
}

/* HF's llama3 on float32 tensors. `2*pi / t` is t.reciprocal() * 2*pi in PyTorch, and comparisons
 * with a Python float compare in float32. */
static float llama3_hf(const struct pe_rope_cfg *c, float w)
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

static float yarn_hf(const struct pe_rope_cfg *c, size_t i, float pos, double low, double high)
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
		yarn_range(c, &low, &high);
	pow_hf(c, ntk_base_hf(c), pw);
	for (size_t i = 0; i < c->h; i++) {
		float v;
		switch (c->scaling) {
		case PE_ROPE_LINEAR:
			v = (1.0f / pw[i]) / (float)c->factor;
			break;
		case PE_ROPE_YARN:
			v = yarn_hf(c, i, pw[i], low, high);
			break;
		case PE_ROPE_LONGROPE:
			v = 1.0f / ((float)longrope_factors(c)[i] * pw[i]);
			break;
		case PE_ROPE_LLAMA3:
			v = llama3_hf(c, 1.0f / pw[i]);
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
static float llama3_ggml_factor(const struct pe_rope_cfg *c, float freq)
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

static int plan_ggml(const struct pe_rope_cfg *c, struct pe_rope_ggml *g)
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
		g->freq_factors[i] = c->scaling == PE_ROPE_LLAMA3 ? llama3_ggml_factor(c, 1.0f / pw[i]) :
			(float)longrope_factors(c)[i];
	free(pw);
	return 0;
}

/* rope_yarn_ramp's mix for pair i (ext_factor folded in). */
static float ggml_ramp_mix(const struct pe_rope_ggml *g, size_t i)
{
	float low = g->corr_dims[0], high = g->corr_dims[1];
	float y = ((float)(int64_t)i - low) / (high - low > 0.001f ? high - low : 0.001f);
	y = y > 0 ? y : 0;
	return (1 - (y < 1 ? y : 1)) * g->ext_factor;
}

/* Angle of pair i from the running theta (theta_extrap before the freq factor). */
static float ggml_angle(const struct pe_rope_ggml *g, float theta, size_t i, float ramp_mix)
{
	float te = g->freq_factors ? theta / g->freq_factors[i] : theta;
	float ti = g->freq_scale * te;
	if (g->ext_factor == 0.0f)
		return ti;
	return ti * (1 - ramp_mix) + te * ramp_mix;
}

/* A double estimate of the per-position angle step of pair i (seeds the recurrence; the exact
 * ggml angle is always the target). */
static double ggml_step(const struct pe_rope_ggml *g, size_t i)
{
	double w = pow((double)g->theta_scale, (double)i), rm = ggml_ramp_mix(g, i);
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
	else if (rc == 0 && (rc = plan_ggml(c, &pl->g)) == 0)
		for (size_t i = 0; i < c->h; i++)
			pl->w[i] = ggml_step(&pl->g, i);
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
			float rm = ggml_ramp_mix(g, i);
			for (size_t r = 0; r < nb; r++) {
				t[(r0 + r) * h + i] = (double)ggml_angle(g, theta[r], i, rm);
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

/* ---- cheap verdicts for validation --------------------------------------------------------- */

/* Validation asks whether every frequency is a number with |w_i| * last < lim. Building the plan
 * costs a pow per frequency (milliseconds at dim 65536, on the HTTP thread), so for the monotone
 * cases the answer comes from the two ends instead, plus a proof that the middle cannot do worse:
 *
 *   pos_i = pow(base, x_i) is monotone in the mathematical x_i (exact) or in the float x_i of
 *   HF's grid (hf), and each computed pos_i is within a relative e of its true value while it is a
 *   normal number (e <= 2^-50 in double, <= 2^-22 for SLEEF's powf u10 and libm's powf). So every
 *   computed pos_i is >= min(computed ends) * (1 - e)^2, and w_i (1/pos, then /factor: roundings,
 *   monotone) is <= max(w at the ends) * (1 + 2^-16) (generous). YaRN's blend of 1/(factor*pos)
 *   and 1/pos with factor >= 1 is at most 1/pos times the same slack. LongRoPE's 1/(f_i * pos_i) is
 *   at most max 1/f_i times the largest 1/pos, and its smallest factor's own w is a witness.
 *
 * A witness (an end, LongRoPE's smallest factor) is computed exactly as the plan computes it, so a
 * witness that fails is the plan's own failure. Unknown (-1, scan the plan) whenever the argument
 * does not cover the case (llama3 whose NaN cannot be ruled out cheaply), a
 * subnormal pow at an end, or a bound between the witness and the limit (a band 2^-16 wide). */

#define BOUND_SLACK (1 + 0x1p-16)
#define BOUND_ABS 1e-30 /* covers w rounding into subnormals; far below any limit */

/* One frequency as freqs_exact / freqs_hf compute it (w), and its unscaled 1/pos (extra); base is
 * the one they raise (ntk_base, ntk_base_hf). */
static void freq_at(const struct pe_rope_cfg *c, double base, double low, double high, size_t i, double *w,
		    double *extra)
{
	if (c->compat == PE_COMPAT_EXACT) {
		double pos = pow(base, x_exact(c, i));
		*extra = 1.0 / pos;
		switch (c->scaling) {
		case PE_ROPE_LINEAR:
			*w = 1.0 / pos / c->factor;
			break;
		case PE_ROPE_YARN: {
			double ramp = fmin(fmax(((double)i - low) / (high - low), 0), 1), ef = 1 - ramp;
			*w = 1.0 / (c->factor * pos) * (1 - ef) + 1.0 / pos * ef;
			break;
		}
		case PE_ROPE_LONGROPE:
			*w = 1.0 / (longrope_factors(c)[i] * pos);
			break;
		case PE_ROPE_LLAMA3:
			*w = llama3_exact(c, 1.0 / pos);
			break;
		default:
			*w = 1.0 / pos;
		}
		return;
	}
	float pw = pe_torch_powf((float)base, (float)(2 * i) / (float)c->dim, i, c->h), v;
	*extra = (double)(1.0f / pw);
	switch (c->scaling) {
	case PE_ROPE_LINEAR:
		v = (1.0f / pw) / (float)c->factor;
		break;
	case PE_ROPE_YARN:
		v = yarn_hf(c, i, pw, low, high);
		break;
	case PE_ROPE_LONGROPE:
		v = 1.0f / ((float)longrope_factors(c)[i] * pw);
		break;
	case PE_ROPE_LLAMA3:
		v = llama3_hf(c, 1.0f / pw);
		break;
	default:
		v = 1.0f / pw;
	}
	*w = (double)v;
}

static int bound_covers(const struct pe_rope_cfg *c)
{
	return c->compat != PE_COMPAT_GGML;
}

static int float_normal(double v)
{
	float f = (float)v;
	return isnormal(f) && f > 0;
}

/* llama3 with low == high is NaN where a computed wavelength equals the edge t = orig / low (as
 * the mode rounds it). The true wavelength 2 pi B^x is strictly monotone in x = 2i/dim, and the
 * computed one is within 8 eps of the true one at a grid point within 2^-24 of x, so an equal one
 * lies within dim/2 (8 eps/|ln B|) + 1 indices of where the true one crosses t: [*a, *b] covers
 * them (empty when *a > *b). 0 when that window is not small or cannot be placed. */
static int llama3_edge_window(const struct pe_rope_cfg *c, size_t *a, size_t *b)
{
	int hf = c->compat == PE_COMPAT_HF;
	double B = hf ? (double)(float)c->base : c->base, t = (double)c->orig / c->low_freq_factor;
	if (hf)
		t = (double)(float)t;
	if (B == 1) { /* every frequency the same */
		*a = *b = 0;
		return 1;
	}
	double lb = fabs(log(B)), eps = hf ? 0x1p-24 : 0x1p-53, half = (double)c->dim / 2;
	double win = 8 * eps * half / lb + 4, at = log(t / (2 * M_PI)) / log(B) * half;
	if (!(hf ? float_normal(t) : t >= DBL_MIN && t <= DBL_MAX) || !(win <= 64) || !isfinite(at))
		return 0;
	double lo = fmax(floor(at - win), 0), hi = fmin(ceil(at + win), (double)c->h - 1);
	*a = lo > hi ? 1 : (size_t)lo;
	*b = lo > hi ? 0 : (size_t)hi;
	return 1;
}

/* llama3 with low < high: no NaN, and every w_i at most k times the largest 1/pos_i, when the
 * smoothing stays within [-1/64, 1 + 1/64] (its rounding error over high - low is small) and
 * every threshold is a normal number in the mode's arithmetic. 0: not shown (scan). */
static int llama3_smooth_bounded(const struct pe_rope_cfg *c, double *k)
{
	double lo = c->low_freq_factor, hi = c->high_freq_factor, orig = (double)c->orig;
	*k = 1 + 1.0 / 32;
	if (c->compat == PE_COMPAT_EXACT)
		return hi / lo >= 1 + 0x1p-20 && orig / hi >= 1e-300 && orig / lo <= DBL_MAX;
	return hi / lo >= 1 + 0x1p-10 && float_normal(lo) && float_normal(hi) && float_normal(hi - lo) &&
	       float_normal(c->factor) && float_normal(orig) && (float)(orig / hi) >= 1e-37f && float_normal(orig / lo);
}

/* LongRoPE: the smallest factor (as the mode rounds it) and its index; 0 when one is not a
 * positive normal number there (no bound then). */
static int longrope_min(const struct pe_rope_cfg *c, double *fmin, size_t *at)
{
	const double *f = longrope_factors(c);
	double m = INFINITY;
	for (size_t i = 0; i < c->h; i++) {
		double v = c->compat == PE_COMPAT_HF ? (double)(float)f[i] : f[i];
		if (v < m) {
			m = v;
			*at = i;
		}
	}
	*fmin = m;
	return c->compat == PE_COMPAT_HF ? m >= FLT_MIN && m <= FLT_MAX : m >= DBL_MIN;
}

/* compat=ggml without freq factors (none, linear, yarn; ntk and dynamic are refused before):
 * w_i = pow(theta_scale, i) * (freq_scale (1 - ramp) + ramp), monotone in i for none and linear,
 * at most pow(theta_scale, i) for yarn (freq_scale = 1/factor <= 1, ramp in [0, 1]). */
#define MAX_WITNESS 140

/* Freq factor i of compat=ggml, alone (plan_ggml makes all of them). */
static float ggml_ff_at(const struct pe_rope_cfg *c, size_t i)
{
	if (c->scaling == PE_ROPE_LONGROPE)
		return (float)longrope_factors(c)[i];
	float pw = pe_torch_powf((float)c->base, (float)(2 * i) / (float)c->dim, i, c->h);
	return llama3_ggml_factor(c, 1.0f / pw);
}

/* compat=ggml with freq factors: w_i = pow(theta_scale, i) / ff_i. LongRoPE's factors are the list
 * (bound: the largest power over the smallest factor, witnessed there); llama3's come from HF's
 * float frequencies with HF's float thresholds (the converter's arithmetic), so the edge window
 * and the smoothing bound of compat=hf apply, and 1/ff_i is at most k. */
static int ggml_ff_bound(const struct pe_rope_cfg *c, const struct pe_rope_ggml *g, double *m, double *u)
{
	struct pe_rope_cfg hc = *c;
	size_t idx[MAX_WITNESS] = {0, c->h - 1}, n = 2, a = 1, b = 0;
	double ffmin = 1, k = 1;
	int ok;
	hc.compat = PE_COMPAT_HF;
	if (c->scaling == PE_ROPE_LONGROPE)
		ok = longrope_min(&hc, &ffmin, &idx[n++]);
	else if (c->low_freq_factor == c->high_freq_factor)
		ok = llama3_edge_window(&hc, &a, &b);
	else
		ok = llama3_smooth_bounded(&hc, &k);
	for (size_t i = a; ok && i <= b && n < MAX_WITNESS; i++)
		idx[n++] = i;
	*m = 0;
	for (size_t j = 0; j < n; j++) {
		double w = pow((double)g->theta_scale, (double)idx[j]) / (double)ggml_ff_at(c, idx[j]);
		if (isnan(w)) {
			*m = *u = NAN;
			return 0;
		}
		*m = fmax(*m, fabs(w));
	}
	if (c->scaling == PE_ROPE_LLAMA3 && ok) { /* HF's float frequencies normal at both ends */
		float p0 = pe_torch_powf((float)c->base, 0.0f, 0, c->h);
		float p1 = pe_torch_powf((float)c->base, (float)(2 * (c->h - 1)) / (float)c->dim, c->h - 1, c->h);
		ok = p0 >= 0x1p-125f && p1 >= 0x1p-125f;
	}
	if (!ok && c->scaling == PE_ROPE_LLAMA3)
		return -1; /* a NaN elsewhere, which names another parameter, is not ruled out */
	double top = fmax(1, pow((double)g->theta_scale, (double)(c->h - 1)));
	if (!ok || !(top <= 0x1p1021))
		return *u = INFINITY, 0;
	*u = (c->scaling == PE_ROPE_LONGROPE ? top / ffmin : top * k) * BOUND_SLACK + BOUND_ABS;
	return 0;
}

static int ggml_bound(const struct pe_rope_cfg *c, double *m, double *u)
{
	struct pe_rope_ggml g;
	if (c->scaling == PE_ROPE_LLAMA3 || c->scaling == PE_ROPE_LONGROPE) {
		struct pe_rope_cfg none = *c;
		none.scaling = PE_ROPE_NONE; /* theta_scale alone: no factor list made */
		return plan_ggml(&none, &g) != 0 ? -1 : ggml_ff_bound(c, &g, m, u);
	}
	if (plan_ggml(c, &g) != 0)
		return -1;
	double w0 = ggml_step(&g, 0), w1 = ggml_step(&g, c->h - 1);
	if (isnan(w0) || isnan(w1)) {
		*m = *u = NAN;
		return 0;
	}
	*m = fmax(fabs(w0), fabs(w1));
	double top = c->scaling == PE_ROPE_YARN ? fmax(1, pow((double)g.theta_scale, (double)(c->h - 1))) : *m;
	*u = top * BOUND_SLACK + BOUND_ABS;
	return 0;
}

int pe_rope_freq_bound(const struct pe_rope_cfg *c, double *m, double *u)
{
	if (c->compat == PE_COMPAT_GGML)
		return ggml_bound(c, m, u);
	if (!bound_covers(c))
		return -1;
	double base = c->compat == PE_COMPAT_HF ? ntk_base_hf(c) : ntk_base(c), low = 0, high = 1, w, extra, fmin = 1, k = 1,
	       xmax = 0;
	size_t idx[MAX_WITNESS] = {0, c->h - 1}, n = 2, a = 1, b = 0;
	int ok = 1;
	if (c->scaling == PE_ROPE_YARN)
		yarn_range(c, &low, &high);
	if (c->scaling == PE_ROPE_LONGROPE)
		ok = longrope_min(c, &fmin, &idx[n++]);
	if (c->scaling == PE_ROPE_LLAMA3 && c->low_freq_factor == c->high_freq_factor)
		ok = llama3_edge_window(c, &a, &b);
	else if (c->scaling == PE_ROPE_LLAMA3)
		ok = llama3_smooth_bounded(c, &k);
	for (size_t i = a; ok && i <= b && n < MAX_WITNESS; i++)
		idx[n++] = i;
	*m = 0;
	for (size_t j = 0; j < n; j++) {
		freq_at(c, base, low, high, idx[j], &w, &extra);
		if (isnan(w)) {
			*m = *u = NAN;
			return 0;
		}
		*m = fmax(*m, fabs(w));
		if (j < 2)
			xmax = fmax(xmax, extra);
	}
	/* the ends' 1/pos must be normal numbers for the relative error arguments (llama3's window
	 * too: without them a NaN elsewhere, which names another parameter, is not ruled out) */
	if (!ok || !(xmax <= (c->compat == PE_COMPAT_HF ? 0x1p125 : 0x1p1021)))
		return c->scaling == PE_ROPE_LLAMA3 ? -1 : (*u = INFINITY, 0);
	if (c->scaling == PE_ROPE_YARN || c->scaling == PE_ROPE_LLAMA3)
		*u = xmax * k * BOUND_SLACK + BOUND_ABS;
	else if (c->scaling == PE_ROPE_LONGROPE)
		*u = xmax / fmin * BOUND_SLACK + BOUND_ABS;
	else
		*u = *m * BOUND_SLACK + BOUND_ABS;
	return 0;
}

/* compat=ggml's rope/inv_freq values (its angles at position 1) without freq factors: theta runs
 * the float chain 1, *= theta_scale, ... (monotone: each rounded product moves the same way), the
 * angle is freq_scale * theta (none, linear: monotone in theta, so the ends are the extremes) or,
 * for yarn, a blend of freq_scale * theta and theta with freq_scale <= 1 (at most theta, up to
 * rounding). *m: the larger end angle; *u: a bound of every angle. -1 for llama3 and longrope. */
int pe_rope_ggml_angle_bound(const struct pe_rope_cfg *c, double *m, double *u)
{
	struct pe_rope_ggml g;
	if (c->compat != PE_COMPAT_GGML || c->scaling == PE_ROPE_LLAMA3 || c->scaling == PE_ROPE_LONGROPE ||
	    plan_ggml(c, &g) != 0)
		return -1;
	float theta = 1.0f;
	for (size_t i = 0; i + 1 < c->h; i++)
		theta *= g.theta_scale;
	double a0 = fabs((double)ggml_angle(&g, 1.0f, 0, ggml_ramp_mix(&g, 0)));
	double a1 = fabs((double)ggml_angle(&g, theta, c->h - 1, ggml_ramp_mix(&g, c->h - 1)));
	*m = fmax(a0, a1);
	if (isnan(a0) || isnan(a1))
		return -1;
	*u = c->scaling == PE_ROPE_YARN ? fmax(1, (double)theta) * BOUND_SLACK + BOUND_ABS : *m;
	return 0;
}
