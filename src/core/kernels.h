/* Internal kernel table of the core: each operation has a scalar and an AVX2 twin with the same
 * contract (sin_row_f32 also an AVX-512 one); pe_kernels() returns the table for the active ISA
 * (see isa.c). Tables (sinusoidal.c, rope.c, ...) call only through it. */
#ifndef PE_CORE_KERNELS_H
#define PE_CORE_KERNELS_H

#include <stddef.h>

/* RoPE by angle addition (rope.c): per column i, the cos/sin of an anchor row's exact angle is
 * rotated by (cw[i], sw[i]) = (cos w[i], sin w[i]) once per row, and each row's output is corrected
 * to its own target angle t[i] by d = (t[i] - pos*w[i]) - d0[i] (fma, so d is exact for exact-mode
 * angles) through a short sin/cos series of d. Lanes whose |d| > 2^-4 or whose |cos| or |sin| falls
 * below 2^-16 (where an absolute error would be a large relative one) are computed directly. */
#define PE_ROPE_ANCHOR_ROWS 64 /* rows between directly computed anchors */

struct pe_rope_rec {
	size_t n;
	const double *w, *cw, *sw;
	double *c, *s, *d0; /* state, n each */
	int first_order;    /* the caller guarantees |d| <= 2^-26: sin d = d, cos d = 1 suffice */
	const float *wf;    /* NULL, or w as floats: compat=hf angles float(float(pos) * wf[i]) */
	const double *tw;   /* sin_row_f32 only: tan(w/2) = sin w / (1 + cos w), cos w >= 0 */
};

struct pe_kernel_table {
	/* s[i] = sin(x[i]), c[i] = cos(x[i]) in double, each within 1 ulp (x finite). */
	void (*sincos_f64)(const double *x, double *s, double *c, size_t n);
	/* c[i], s[i] = cos, sin of t[i] for the row at position pos (rows in order, pos advancing by
	 * one; t == NULL: the angles are formed in the kernel, pos*w[i] in double, or with wf the hf
	 * float product); anchor != 0 computes them
	 * directly (within 1 ulp) and restarts the recurrence there. With anchors every
	 * PE_ROPE_ANCHOR_ROWS rows the absolute error stays below 2^-44: each step adds at most 2^-51
	 * (two roundings of the rotation, the rounding of cos w and sin w), 63 steps, plus the anchor's
	 * and the correction's roundings; measured about 2^-47 (tests/core/test_rope.c). Lanes below
	 * 2^-16 are direct, so one rounding to float stays within 1 ulp (float ulp there: 2^-39). */
	void (*rope_row)(struct pe_rope_rec *st, double pos, const double *t, int anchor, double *c, double *s);
	/* One row of each plane of a float32 RoPE table from n cos/sin values: exact (fmode 0): one
	 * rounding of v*att; fmode 1: float(v) then times float(att) in float. Layout half [v | v] or
	 * interleaved (v0 v0 v1 v1 ...), 2n floats to oc and to os, any alignment. stream: non-temporal
	 * stores where aligned; call rope_fence after the last row. */
	void (*rope_store_f32)(const double *c, const double *s, size_t n, double att, int fmode,
			       int interleaved, int stream, float *oc, float *os);
	void (*rope_fence)(void);
	/* Apply RoPE to one vector of rd rotary channels: out = x*cos + rotate(x)*sin (sin negated with
	 * inverse), rotate = rotate_half (half layout) or the pair swap (interleaved), PyTorch's order:
	 * each product rounded, then the sum. out may be x. cs/sn are that position's table rows. */
	void (*rope_apply_f32)(const float *x, float *out, const float *cs, const float *sn, size_t rd,
			       int interleaved, int inverse);
	/* One sinusoidal row of 2n float32 values from n sin/cos values, each rounded once: interleaved
	 * (s0 c0 s1 c1 ...) or halves [s0 .. s(n-1) | c0 .. c(n-1)], any alignment. */
	void (*sincos_store_f32)(const double *s, const double *c, size_t n, int interleaved, float *o);
	/* rope_row (exact angles, no t) fused with sincos_store_f32 for a row that is not an anchor.
	 * The state advances one row by three shears instead of rope_row's rotation (three fmas
	 * instead of four operations): c1 = c - t*s, s' = s + sin(w)*c1, c' = c1 - t*s' with
	 * t = tw = tan(w/2), which needs cos w >= 0 (|t| <= 1). Each step rounds three times (at most
	 * 2^-52 each, with |c1| <= 2), and the product of the three shears has determinant 1 with
	 * rounded t and sin w too, so errors are carried along without growth and the rotation angle
	 * is off by about an ulp per step, as with rope_row: the 2^-44 bound holds.
	 * Columns [lo, hi) are corrected to their own angle fl(pos*w) by d = (fl(pos*w) - pos*w) - d0
	 * (the AVX2 and AVX-512 kernels may also correct their neighbours in the same group of four,
	 * or of eight): to first order (cos d = 1, sin d = d) when st->first_order, as rope_row, else
	 * to second order (cos d = 1 - d^2/2), which the caller uses for angles below
	 * PE_SIN_MAX_ANGLE: there |d| <= 2^-15 and the d^3/6 left out is below 2^-47. The other
	 * columns keep the state's angle, pos*w plus the anchor's rounding; the caller leaves out only
	 * columns whose angles stay within PE_SIN_UNCORRECTED_ANGLE, where that difference (two half
	 * ulps of the angle) is at most 2^-47. Values below 2^-16 in float32 are computed directly. */
	void (*sin_row_f32)(struct pe_rope_rec *st, double pos, size_t lo, size_t hi, int interleaved, float *o);
};

/* sin_row_f32's limits (see there). */
#define PE_SIN_UNCORRECTED_ANGLE 0x1p6 /* columns whose angles stay within: no correction */
#define PE_SIN_MAX_ANGLE 0x1p37        /* the fused path's largest angle (second order) */
#define PE_SIN_MIN_RECURRENT 0x1p-16f  /* below, sin_row_f32 computes a pair directly */

/* A vector sin_row_f32's groups of `width` columns: [0, n) whole groups, of which [a, b) overlap
 * the corrected columns [lo, hi) (empty when none do); the rest is the scalar tail. */
struct pe_sin_range {
	size_t n, a, b;
};
static inline struct pe_sin_range pe_sin_groups(size_t cols, size_t lo, size_t hi, size_t width)
{
	struct pe_sin_range g = {cols / width * width, lo / width * width, (hi + width - 1) / width * width};
	g.a = g.a < g.n ? g.a : g.n;
	g.b = g.b < g.n ? g.b : g.n;
	if (g.b <= g.a)
		g.a = g.b = 0;
	return g;
}

/* Which rope_row recurrence serves angles up to last * wmax (last: one past the last position,
 * wmax: the largest |w|) within the 2^-44 bound above: PE_REC_DIRECT when none does (corrections
 * beyond the series' range, or hf float positions no longer exact), PE_REC_SERIES, or
 * PE_REC_FIRST_ORDER (exact angles below 2^26: a correction is at most an ulp, 2^-27). */
enum { PE_REC_DIRECT, PE_REC_SERIES, PE_REC_FIRST_ORDER };
int pe_rope_rec_order(double last, double wmax, int hf);

const struct pe_kernel_table *pe_kernels(void);

void pe_sincos_f64_scalar(const double *x, double *s, double *c, size_t n);
void pe_sincos_f64_avx2(const double *x, double *s, double *c, size_t n);
void pe_rope_row_scalar(struct pe_rope_rec *st, double pos, const double *t, int anchor, double *c, double *s);
void pe_rope_row_avx2(struct pe_rope_rec *st, double pos, const double *t, int anchor, double *c, double *s);
void pe_rope_store_f32_scalar(const double *c, const double *s, size_t n, double att, int fmode,
			      int interleaved, int stream, float *oc, float *os);
void pe_rope_store_f32_avx2(const double *c, const double *s, size_t n, double att, int fmode,
			    int interleaved, int stream, float *oc, float *os);
void pe_rope_fence_scalar(void);
/* The float32 value both store kernels write for v (see rope_store_f32). */
float pe_rope_f32_value(double v, double att, int fmode);
void pe_rope_fence_avx2(void);
void pe_rope_apply_f32_scalar(const float *x, float *out, const float *cs, const float *sn, size_t rd,
			      int interleaved, int inverse);
void pe_rope_apply_f32_avx2(const float *x, float *out, const float *cs, const float *sn, size_t rd,
			    int interleaved, int inverse);
void pe_sincos_store_f32_scalar(const double *s, const double *c, size_t n, int interleaved, float *o);
void pe_sincos_store_f32_avx2(const double *s, const double *c, size_t n, int interleaved, float *o);
/* The scalar store of pairs from..n-1 of such a row (the AVX2 kernel's tail). */
void pe_sincos_store_f32_from(const double *s, const double *c, size_t n, size_t from, int interleaved,
			      float *o);
void pe_sin_row_f32_scalar(struct pe_rope_rec *st, double pos, size_t lo, size_t hi, int interleaved, float *o);
void pe_sin_row_f32_avx2(struct pe_rope_rec *st, double pos, size_t lo, size_t hi, int interleaved, float *o);
void pe_sin_row_f32_avx512(struct pe_rope_rec *st, double pos, size_t lo, size_t hi, int interleaved, float *o);
/* The scalar pairs from..n-1 of such a row (the AVX2 and AVX-512 kernels' tail). */
void pe_sin_row_f32_from(struct pe_rope_rec *st, double pos, size_t lo, size_t hi, int interleaved, size_t from,
			 float *o);
/* Pairs from..n-1 of a finished row whose sin or cos is below PE_SIN_MIN_RECURRENT, recomputed
 * directly (glibc's sincos of fl(pos*w)). */
void pe_sin_row_f32_fix_small(const struct pe_rope_rec *st, double pos, size_t from, int interleaved, float *o);
/* f64 bodies are rare: one scalar kernel serves both paths. */
void pe_rope_apply_f64(const double *x, double *out, const double *cs, const double *sn, size_t rd,
		       int interleaved, int inverse);

#endif
