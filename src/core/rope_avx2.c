/* AVX2 RoPE kernels (kernels.h): the angle-addition recurrence four columns at a time, anchors and
 * fallback lanes through SLEEF's sincos (1 ulp), and the float32 row store. A large table is written
 * once and not read back soon, so streamed rows are built 64 columns at a time in an L1 buffer and
 * copied out with 32-byte non-temporal stores wherever the destination is aligned (it may have any
 * alignment: the HTTP layer writes tables behind headers). Tails of fewer than four columns go
 * through the scalar twins. Compiled with -mavx2 -mfma. */
#include "core/kernels.h"

#include <immintrin.h>
#include <sleef.h>
#include <stdint.h>

#define CHUNK 64 /* columns per streamed piece */

static __m256d vabs(__m256d x) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), x); }

/* sin(d) and cos(d) - 1 for |d| <= 2^-4, the series of rope_scalar.c. */
static inline void series(__m256d d, __m256d *sd, __m256d *cm1)
{
	__m256d d2 = _mm256_mul_pd(d, d);
	__m256d ps = _mm256_fmadd_pd(d2, _mm256_set1_pd(1.0 / 362880), _mm256_set1_pd(-1.0 / 5040));
	ps = _mm256_fmadd_pd(d2, ps, _mm256_set1_pd(1.0 / 120));
	ps = _mm256_fmadd_pd(d2, ps, _mm256_set1_pd(-1.0 / 6));
	*sd = _mm256_fmadd_pd(_mm256_mul_pd(d, d2), ps, d);
	__m256d pc = _mm256_fmadd_pd(d2, _mm256_set1_pd(1.0 / 40320), _mm256_set1_pd(-1.0 / 720));
	pc = _mm256_fmadd_pd(d2, pc, _mm256_set1_pd(1.0 / 24));
	pc = _mm256_fmadd_pd(d2, pc, _mm256_set1_pd(-0.5));
	*cm1 = _mm256_mul_pd(d2, pc);
}

static void anchor4(struct pe_rope_rec *st, size_t i, __m256d vpos, __m256d t, double *c, double *s)
{
	Sleef___m256d_2 r = Sleef_sincosd4_u10avx2(t);
	_mm256_storeu_pd(st->c + i, r.y);
	_mm256_storeu_pd(st->s + i, r.x);
	_mm256_storeu_pd(st->d0 + i, _mm256_fnmadd_pd(vpos, _mm256_loadu_pd(st->w + i), t));
	_mm256_storeu_pd(c + i, r.y);
	_mm256_storeu_pd(s + i, r.x);
}

/* One recurrence step of columns i..i+3; first_order is a constant at each call site. */
static inline __attribute__((always_inline)) void step4(struct pe_rope_rec *st, size_t i, __m256d vpos,
							 __m256d t, double *c, double *s, int first_order)
{
	__m256d c0 = _mm256_loadu_pd(st->c + i), s0 = _mm256_loadu_pd(st->s + i);
	__m256d cw = _mm256_loadu_pd(st->cw + i), sw = _mm256_loadu_pd(st->sw + i);
	__m256d cn = _mm256_fmsub_pd(c0, cw, _mm256_mul_pd(s0, sw));
	__m256d sn = _mm256_fmadd_pd(s0, cw, _mm256_mul_pd(c0, sw));
	_mm256_storeu_pd(st->c + i, cn);
	_mm256_storeu_pd(st->s + i, sn);
	__m256d d = _mm256_sub_pd(_mm256_fnmadd_pd(vpos, _mm256_loadu_pd(st->w + i), t), _mm256_loadu_pd(st->d0 + i));
	__m256d co, so, small = _mm256_set1_pd(0x1p-16), bad;
	if (first_order) {
		co = _mm256_fnmadd_pd(sn, d, cn);
		so = _mm256_fmadd_pd(cn, d, sn);
		bad = _mm256_setzero_pd();
	} else {
		__m256d sd, cm1;
		series(d, &sd, &cm1);
		co = _mm256_add_pd(cn, _mm256_fmsub_pd(cn, cm1, _mm256_mul_pd(sn, sd)));
		so = _mm256_add_pd(sn, _mm256_fmadd_pd(sn, cm1, _mm256_mul_pd(cn, sd)));
		bad = _mm256_cmp_pd(vabs(d), _mm256_set1_pd(0x1p-4), _CMP_GT_OQ);
	}
	bad = _mm256_or_pd(bad, _mm256_or_pd(_mm256_cmp_pd(vabs(co), small, _CMP_LT_OQ),
					     _mm256_cmp_pd(vabs(so), small, _CMP_LT_OQ)));
	if (_mm256_movemask_pd(bad)) {
		Sleef___m256d_2 r = Sleef_sincosd4_u10avx2(t);
		co = _mm256_blendv_pd(co, r.y, bad);
		so = _mm256_blendv_pd(so, r.x, bad);
	}
	_mm256_storeu_pd(c + i, co);
	_mm256_storeu_pd(s + i, so);
}

/* Target angles of columns i..i+3: given, the hf float product, or the exact pos*w. */
static inline __m256d angles(const struct pe_rope_rec *st, const double *t, size_t i, __m256d vpos)
{
	if (t)
		return _mm256_loadu_pd(t + i);
	if (st->wf)
		return _mm256_cvtps_pd(_mm_mul_ps(_mm256_cvtpd_ps(vpos), _mm_loadu_ps(st->wf + i)));
	return _mm256_mul_pd(vpos, _mm256_loadu_pd(st->w + i));
}

void pe_rope_row_avx2(struct pe_rope_rec *st, double pos, const double *t, int anchor, double *c, double *s)
{
	size_t i = 0, n = st->n;
	__m256d vpos = _mm256_set1_pd(pos);
	if (anchor)
		for (; i + 4 <= n; i += 4)
			anchor4(st, i, vpos, angles(st, t, i, vpos), c, s);
	else if (st->first_order)
		for (; i + 4 <= n; i += 4)
			step4(st, i, vpos, angles(st, t, i, vpos), c, s, 1);
	else
		for (; i + 4 <= n; i += 4)
			step4(st, i, vpos, angles(st, t, i, vpos), c, s, 0);
	if (i < n) {
		struct pe_rope_rec tail = {n - i, st->w + i, st->cw + i, st->sw + i, st->c + i, st->s + i, st->d0 + i,
					   st->first_order, st->wf ? st->wf + i : NULL, NULL};
		pe_rope_row_scalar(&tail, pos, t ? t + i : NULL, anchor, c + i, s + i);
	}
}

static inline __m128 to_f32(__m256d v, double att, int fmode)
{
	if (!fmode)
		return _mm256_cvtpd_ps(att == 1.0 ? v : _mm256_mul_pd(v, _mm256_set1_pd(att)));
	__m128 f = _mm256_cvtpd_ps(v);
	return att == 1.0 ? f : _mm_mul_ps(f, _mm_set1_ps((float)att));
}

/* n float32 values of v into o: plain (o[k]) or each twice (o[2k], o[2k+1]). */
static void convert(const double *v, size_t n, double att, int fmode, int twice, float *o)
{
	size_t i = 0;
	for (; i + 4 <= n; i += 4) {
		__m128 f = to_f32(_mm256_loadu_pd(v + i), att, fmode);
		if (twice) {
			_mm_storeu_ps(o + 2 * i, _mm_unpacklo_ps(f, f));
			_mm_storeu_ps(o + 2 * i + 4, _mm_unpackhi_ps(f, f));
		} else {
			_mm_storeu_ps(o + i, f);
		}
	}
	for (; i < n; i++) {
		float f = pe_rope_f32_value(v[i], att, fmode);
		if (twice)
			o[2 * i] = o[2 * i + 1] = f;
		else
			o[i] = f;
	}
}

/* Copy n floats, non-temporal wherever dst is 32-byte aligned. */
static void stream_copy(float *dst, const float *src, size_t n)
{
	while (n && ((uintptr_t)dst & 31)) {
		*dst++ = *src++;
		n--;
	}
	for (; n >= 8; n -= 8, dst += 8, src += 8)
		_mm256_stream_ps(dst, _mm256_loadu_ps(src));
	while (n--)
		*dst++ = *src++;
}

static inline __m256 to_f32x8(const double *v, double att, int fmode)
{
	return _mm256_set_m128(to_f32(_mm256_loadu_pd(v + 4), att, fmode), to_f32(_mm256_loadu_pd(v), att, fmode));
}

/* The common case of plane_row: streamed, 32-byte aligned, n % 8 == 0, straight from registers. */
static void plane_row_aligned(const double *v, size_t n, double att, int fmode, int interleaved, float *o)
{
	for (size_t i = 0; i < n; i += 8) {
		__m256 f = to_f32x8(v + i, att, fmode);
		if (interleaved) {
			__m256 lo = _mm256_unpacklo_ps(f, f), hi = _mm256_unpackhi_ps(f, f);
			_mm256_stream_ps(o + 2 * i, _mm256_permute2f128_ps(lo, hi, 0x20));
			_mm256_stream_ps(o + 2 * i + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
		} else {
			_mm256_stream_ps(o + i, f);
			_mm256_stream_ps(o + n + i, f);
		}
	}
}

static void plane_row(const double *v, size_t n, double att, int fmode, int interleaved, int stream, float *o)
{
	if (stream && n % 8 == 0 && ((uintptr_t)o & 31) == 0) {
		plane_row_aligned(v, n, att, fmode, interleaved, o);
		return;
	}
	float buf[2 * CHUNK];
	for (size_t i = 0; i < n; i += CHUNK) {
		size_t m = n - i < CHUNK ? n - i : CHUNK;
		if (interleaved && stream) {
			convert(v + i, m, att, fmode, 1, buf);
			stream_copy(o + 2 * i, buf, 2 * m);
		} else if (interleaved) {
			convert(v + i, m, att, fmode, 1, o + 2 * i);
		} else if (stream) {
			convert(v + i, m, att, fmode, 0, buf);
			stream_copy(o + i, buf, m);
			stream_copy(o + n + i, buf, m);
		} else {
			convert(v + i, m, att, fmode, 0, o + i);
			convert(v + i, m, att, fmode, 0, o + n + i);
		}
	}
}

void pe_rope_store_f32_avx2(const double *c, const double *s, size_t n, double att, int fmode,
			    int interleaved, int stream, float *oc, float *os)
{
	plane_row(c, n, att, fmode, interleaved, stream, oc);
	plane_row(s, n, att, fmode, interleaved, stream, os);
}

void pe_rope_fence_avx2(void) { _mm_sfence(); }
