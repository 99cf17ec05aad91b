/* Cheap verdicts for validating /v1/rope's parameters (and the tables that reuse its check): the
 * largest frequency bounded from a few witnesses computed exactly as rope_freq.c's plans compute
 * them, so the HTTP thread never builds dim/2 frequencies to refuse or accept a request. */
#include "core/rope_freq.h"
#include "core/tables.h"
#include "core/torchmath.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

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
		double pos = pow(base, pe_rope_x_exact(c, i));
		*extra = 1.0 / pos;
		switch (c->scaling) {
		case PE_ROPE_LINEAR:
		case PE_ROPE_PROPORTIONAL:
			*w = 1.0 / pos / c->factor;
			break;
		case PE_ROPE_YARN: {
			double ramp = fmin(fmax(((double)i - low) / (high - low), 0), 1), ef = 1 - ramp;
			*w = 1.0 / (c->factor * pos) * (1 - ef) + 1.0 / pos * ef;
			break;
		}
		case PE_ROPE_LONGROPE:
			*w = 1.0 / (pe_rope_longrope_factors(c)[i] * pos);
			break;
		case PE_ROPE_LLAMA3:
			*w = pe_rope_llama3_exact(c, 1.0 / pos);
			break;
		default:
			*w = 1.0 / pos;
		}
		return;
	}
	float pw = pe_torch_powf((float)base, (float)(2 * i) / (float)c->dim, i, c->rot), v;
	*extra = (double)(1.0f / pw);
	switch (c->scaling) {
	case PE_ROPE_LINEAR:
	case PE_ROPE_PROPORTIONAL:
		v = (1.0f / pw) / (float)c->factor;
		break;
	case PE_ROPE_YARN:
		v = pe_rope_yarn_hf(c, i, pw, low, high);
		break;
	case PE_ROPE_LONGROPE:
		v = 1.0f / ((float)pe_rope_longrope_factors(c)[i] * pw);
		break;
	case PE_ROPE_LLAMA3:
		v = pe_rope_llama3_hf(c, 1.0f / pw);
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
	const double *f = pe_rope_longrope_factors(c);
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
		return (float)pe_rope_longrope_factors(c)[i];
	float pw = pe_torch_powf((float)c->base, (float)(2 * i) / (float)c->dim, i, c->h);
	return pe_rope_llama3_ggml_factor(c, 1.0f / pw);
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
		return pe_rope_plan_ggml(&none, &g) != 0 ? -1 : ggml_ff_bound(c, &g, m, u);
	}
	if (pe_rope_plan_ggml(c, &g) != 0)
		return -1;
	double w0 = pe_rope_ggml_step(&g, 0), w1 = pe_rope_ggml_step(&g, c->h - 1);
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
	if (!bound_covers(c) || c->rot == 0)
		return -1;
	double base = c->compat == PE_COMPAT_HF ? pe_rope_ntk_base_hf(c) : pe_rope_ntk_base(c), low = 0, high = 1, w, extra, fmin = 1, k = 1,
	       xmax = 0;
	size_t idx[MAX_WITNESS] = {0, c->rot - 1}, n = 2, a = 1, b = 0; /* proportional's zeros are no larger */
	int ok = 1;
	if (c->scaling == PE_ROPE_YARN)
		pe_rope_yarn_range(c, &low, &high);
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
	    pe_rope_plan_ggml(c, &g) != 0)
		return -1;
	float theta = 1.0f;
	for (size_t i = 0; i + 1 < c->h; i++)
		theta *= g.theta_scale;
	double a0 = fabs((double)pe_rope_ggml_angle(&g, 1.0f, 0, pe_rope_ggml_ramp_mix(&g, 0)));
	double a1 = fabs((double)pe_rope_ggml_angle(&g, theta, c->h - 1, pe_rope_ggml_ramp_mix(&g, c->h - 1)));
	*m = fmax(a0, a1);
	if (isnan(a0) || isnan(a1))
		return -1;
	*u = c->scaling == PE_ROPE_YARN ? fmax(1, (double)theta) * BOUND_SLACK + BOUND_ABS : *m;
	return 0;
}
