/* Resampling of position tables (see include/posenc/resample.h for the formulas and layout).
 *
 * Design: every mode reduces to one separable building block. For one axis, a struct taps lists,
 * for each output index, k input indices and their weights (linear: 2, bicubic: 4 with clamped
 * indices, antialiased: as many as the widened support needs, padded with zero weights). apply()
 * then resamples one axis of an [outer, len, inner] array, summing the taps in order from the
 * first, the order PyTorch's CPU kernels use. A grid is two passes: the width into a scratch
 * (the smaller of [h, ow, d] and [oh, w, d]), then the other axis.
 *
 * Coordinates and weights are computed operation by operation as PyTorch writes them, rounded to
 * float32 after each operation for float32 tables (rd(), fused()), with the multiply-adds its
 * AVX2 / AVX-512 builds fuse. The formulas were pinned against the weights PyTorch 1.13 applies
 * (interpolating an identity matrix): linear taps are identical; bicubic and antialiased weights
 * agree to float64 rounding, and to a few float32 ulps for float32 tables. Values are summed in
 * float64. Scalar code: a table of a few thousand rows resamples in milliseconds. */
#include "posenc/resample.h"
#include "posenc/err.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct taps {
	size_t n, k;  /* output indices, taps per output */
	size_t *idx;  /* [n * k] input indices */
	double *w;    /* [n * k] weights */
};

static int taps_init(struct taps *t, size_t n, size_t k)
{
	t->n = n;
	t->k = k;
	t->idx = NULL;
	t->w = NULL;
	if (n > SIZE_MAX / k / sizeof(double))
		return PE_ENOMEM;
	t->idx = malloc(n * k * sizeof *t->idx);
	t->w = malloc(n * k * sizeof *t->w);
	return t->idx && t->w ? 0 : PE_ENOMEM;
}

static void taps_destroy(struct taps *t)
{
	free(t->idx);
	free(t->w);
}

static size_t clamp_index(double i, size_t len)
{
	return i <= 0 ? 0 : i >= (double)(len - 1) ? len - 1 : (size_t)i;
}

/* One operation's result in PyTorch's coordinate precision: float32 when f32 is set. Each call
 * rounds the exact (or float64) result once; for +, -, * and / of float32 operands that equals the
 * float32 operation, since float64 has more than twice float32's precision. */
static double rd(int f32, double x) { return f32 ? (double)(float)x : x; }

static double scale_of(size_t in, size_t out, int f32) { return rd(f32, (double)in / (double)out); }

/* area_pixel_compute_source_index(scale, i, align_corners=false): scale*(i+0.5) - 0.5 from the
 * (float32 or float64) scale, in float64 with one fused multiply-add, as PyTorch's AVX2 / AVX-512
 * kernels compute it for both precisions (checked on the weights PyTorch applies). */
static double source_index(double scale, size_t i) { return fma(scale, (double)i + 0.5, -0.5); }

/* upsample_linear1d: two taps, the source index clamped at 0 first (sizes equal: a copy). */
static int taps_linear(struct taps *t, size_t in, size_t out, int f32)
{
	int rc = taps_init(t, out, 2);
	double scale = scale_of(in, out, f32);
	for (size_t i = 0; rc == 0 && i < out; i++) {
		double src = in == out ? (double)i : fmax(source_index(scale, i), 0.0);
		size_t i0 = (size_t)src;
		double l1 = fmin(rd(f32, src - (double)i0), 1.0);
		t->idx[2 * i] = i0;
		t->idx[2 * i + 1] = i0 + (i0 < in - 1);
		t->w[2 * i] = rd(f32, 1.0 - l1);
		t->w[2 * i + 1] = l1;
	}
	return rc;
}

/* a*b + c rounded once, in float32 for f32 (where PyTorch's compiled kernels fuse them). */
static double fused(int f32, double a, double b, double c)
{
	return f32 ? (double)fmaf((float)a, (float)b, (float)c) : fma(a, b, c);
}

/* Keys' cubic convolution kernel for |x| <= 1 and 1 < |x| < 2 (PyTorch's cubic_convolution1/2),
 * operation by operation, multiply-adds fused. */
static double cubic1(double x, double a, int f32)
{
	double t = fused(f32, a + 2, x, -(a + 3));
	return fused(f32, rd(f32, t * x), x, 1);
}

static double cubic2(double x, double a, int f32)
{
	return fused(f32, fused(f32, fused(f32, a, x, -5 * a), x, 8 * a), x, -4 * a);
}

/* upsample_bicubic2d along one axis: taps floor(src)-1 ... floor(src)+2, clamped to the edges,
 * weights from get_cubic_upsample_coefficients. */
static int taps_cubic(struct taps *t, size_t in, size_t out, int f32)
{
	const double a = -0.75;
	int rc = taps_init(t, out, 4);
	double scale = scale_of(in, out, f32);
	for (size_t i = 0; rc == 0 && i < out; i++) {
		double src = source_index(scale, i), fl = floor(src);
		double x = rd(f32, src - fl), x2 = rd(f32, 1 - x);
		const double w[4] = {cubic2(rd(f32, x + 1), a, f32), cubic1(x, a, f32), cubic1(x2, a, f32),
				     cubic2(rd(f32, x2 + 1), a, f32)};
		for (int j = 0; j < 4; j++) {
			t->idx[4 * i + (size_t)j] = clamp_index(fl - 1 + j, in);
			t->w[4 * i + (size_t)j] = w[j];
		}
	}
	return rc;
}

static double aa_cubic(double x, int f32)
{
	x = fabs(x);
	return x < 1 ? cubic1(x, -0.5, f32) : x < 2 ? cubic2(x, -0.5, f32) : 0.0;
}

/* _upsample_bicubic2d_aa along one axis: the inputs within the support around the output's centre,
 * clipped to the input, weights normalised; the rest of the k taps padded with zero weights. */
static int taps_aa(struct taps *t, size_t in, size_t out, int f32)
{
	double scale = scale_of(in, out, f32);
	double support = scale >= 1 ? 2 * scale : 2, invscale = scale >= 1 ? rd(f32, 1 / scale) : 1;
	int rc = taps_init(t, out, (size_t)ceil(support) * 2 + 1);
	for (size_t i = 0; rc == 0 && i < out; i++) {
		double center = rd(f32, scale * ((double)i + 0.5)), total = 0;
		int64_t lo = (int64_t)(rd(f32, center - support) + 0.5), hi = (int64_t)(rd(f32, center + support) + 0.5);
		size_t xmin = lo < 0 ? 0 : (size_t)lo, xmax = hi > (int64_t)in ? in : (size_t)hi;
		size_t *idx = t->idx + i * t->k;
		double *w = t->w + i * t->k;
		for (size_t j = 0; j < t->k; j++) {
			int live = xmin + j < xmax;
			double x = rd(f32, (rd(f32, (double)(xmin + j) - center) + 0.5) * invscale);
			idx[j] = live ? xmin + j : xmin;
			w[j] = live ? aa_cubic(x, f32) : 0.0;
			total = rd(f32, total + w[j]);
		}
		for (size_t j = 0; j < t->k && total != 0; j++)
			w[j] = rd(f32, w[j] / total);
	}
	return rc;
}

/* out [outer, t->n, inner] from in [outer, len, inner] along the middle axis. */
static void apply(const double *in, double *out, size_t outer, size_t len, size_t inner, const struct taps *t)
{
	for (size_t o = 0; o < outer; o++) {
		const double *src = in + o * len * inner;
		for (size_t i = 0; i < t->n; i++) {
			double *dst = out + (o * t->n + i) * inner;
			const size_t *idx = t->idx + i * t->k;
			const double *w = t->w + i * t->k;
			for (size_t c = 0; c < inner; c++)
				dst[c] = src[idx[0] * inner + c] * w[0];
			for (size_t j = 1; j < t->k; j++)
				for (size_t c = 0; c < inner; c++)
					dst[c] += src[idx[j] * inner + c] * w[j];
		}
	}
}

int pe_resample_linear(const double *in, size_t n, size_t d, double *out, size_t m, enum pe_dtype dt)
{
	struct taps t;
	if (!n || !d || !m)
		return PE_EINVAL;
	int rc = taps_linear(&t, n, m, dt != PE_F64);
	if (rc == 0)
		apply(in, out, 1, n, d, &t);
	taps_destroy(&t);
	return rc;
}

/* The two passes commute; the one that leaves the smaller intermediate goes first, so it never
 * exceeds sqrt(input x output) elements (a tall grid resampled to one wide row would otherwise
 * build h x ow x d: gigabytes from a small table and a small answer). */
static int rows_first(size_t h, size_t w, size_t oh, size_t ow) { return oh * w < h * ow; }

size_t pe_resample_grid_scratch(size_t h, size_t w, size_t d, size_t oh, size_t ow)
{
	int first = rows_first(h, w, oh, ow);
	size_t rows = first ? oh : h, cols = first ? w : ow;
	if (!rows || !cols || !d)
		return 0;
	if (rows > SIZE_MAX / cols / d / sizeof(double))
		return SIZE_MAX;
	return rows * cols * d * sizeof(double);
}

int pe_resample_grid(const double *in, size_t prefix, size_t h, size_t w, size_t d, double *out, size_t oh,
		     size_t ow, int antialias, enum pe_dtype dt, double *scratch)
{
	struct taps tw = {0}, th = {0};
	double *tmp = scratch, *own = NULL;
	int rc = PE_EINVAL;
	int (*make)(struct taps *, size_t, size_t, int) = antialias ? taps_aa : taps_cubic;
	int f32 = dt != PE_F64;
	if (!h || !w || !d || !oh || !ow)
		goto out;
	rc = make(&tw, w, ow, f32);
	if (rc == 0)
		rc = make(&th, h, oh, f32);
	size_t bytes = pe_resample_grid_scratch(h, w, d, oh, ow);
	if (rc == 0 && !tmp && (bytes == SIZE_MAX || !(tmp = own = malloc(bytes))))
		rc = PE_ENOMEM;
	if (rc != 0)
		goto out;
	memcpy(out, in, prefix * d * sizeof *in);
	if (rows_first(h, w, oh, ow)) {
		apply(in + prefix * d, tmp, 1, h, w * d, &th);
		apply(tmp, out + prefix * d, oh, w, d, &tw);
	} else {
		apply(in + prefix * d, tmp, h, w, d, &tw);
		apply(tmp, out + prefix * d, 1, h, ow * d, &th);
	}
out:
	free(own);
	taps_destroy(&tw);
	taps_destroy(&th);
	return rc;
}
