/* AVX2 sinusoidal kernels (kernels.h), four sin/cos pairs at a time; the last n % 4 pairs go
 * through the scalar twins. Compiled with -mavx2 -mfma.
 *   sincos_store_f32  pairs converted to float32 (one rounding each) and written interleaved or in
 *                     halves with 16-byte stores, any alignment (measured faster than 32-byte
 *                     stores and their lane shuffles: the row goes to L2 either way);
 *   sin_row_f32       one recurrence row fused with its store: the state advanced, the angle
 *                     correction only in the columns the caller names, the pairs rounded to float32
 *                     and laid out with one 32-byte store (interleaved, one lane permute) or two
 *                     16-byte halves; the row's smallest |value| is tracked on the way, and only a
 *                     row that has one below 2^-16 is scanned for the pairs to recompute. */
#include "core/kernels.h"

#include <immintrin.h>

void pe_sincos_store_f32_avx2(const double *s, const double *c, size_t n, int interleaved, float *o)
{
	size_t i = 0;
	for (; i + 4 <= n; i += 4) {
		__m128 fs = _mm256_cvtpd_ps(_mm256_loadu_pd(s + i)), fc = _mm256_cvtpd_ps(_mm256_loadu_pd(c + i));
		if (interleaved) {
			_mm_storeu_ps(o + 2 * i, _mm_unpacklo_ps(fs, fc));
			_mm_storeu_ps(o + 2 * i + 4, _mm_unpackhi_ps(fs, fc));
		} else {
			_mm_storeu_ps(o + i, fs);
			_mm_storeu_ps(o + n + i, fc);
		}
	}
	pe_sincos_store_f32_from(s, c, n, i, interleaved, o);
	/* GCC adds no vzeroupper here (no ymm register is written), but the 256-bit conversions leave
	 * the upper state dirty: without it the SSE code after the table (glibc's fma and sincos in the
	 * scalar path) measured 30x slower. */
	_mm256_zeroupper();
}

/* The fused row's operands, held locally so that the compiler keeps them in registers (stores
 * through the double pointers could otherwise alias the struct). */
struct row {
	const double *restrict w, *restrict tw, *restrict sw, *restrict d0;
	double *restrict c, *restrict s;
	float *restrict o;
	size_t n;
	__m256d pos;
};

/* Columns i..i+3: advance, correct (corr: 0 not, 1 first order, 2 second order; kernels.h), round,
 * lay out; returns |values| for the row's minimum. */
static inline __attribute__((always_inline)) __m256 sin_group(const struct row *r, size_t i, int corr,
							       int interleaved)
{
	__m256d c0 = _mm256_loadu_pd(r->c + i), s0 = _mm256_loadu_pd(r->s + i);
	__m256d tw = _mm256_loadu_pd(r->tw + i), sw = _mm256_loadu_pd(r->sw + i);
	__m256d c1 = _mm256_fnmadd_pd(tw, s0, c0); /* three shears: kernels.h */
	__m256d sn = _mm256_fmadd_pd(sw, c1, s0);
	__m256d cn = _mm256_fnmadd_pd(tw, sn, c1);
	_mm256_storeu_pd(r->c + i, cn);
	_mm256_storeu_pd(r->s + i, sn);
	if (corr) {
		__m256d w = _mm256_loadu_pd(r->w + i);
		__m256d d = _mm256_sub_pd(_mm256_fnmadd_pd(r->pos, w, _mm256_mul_pd(r->pos, w)), _mm256_loadu_pd(r->d0 + i));
		if (corr == 2) { /* cos d = 1 - u, u = d^2 / 2 */
			__m256d u = _mm256_mul_pd(_mm256_mul_pd(d, _mm256_set1_pd(0.5)), d);
			cn = _mm256_fnmadd_pd(cn, u, cn);
			sn = _mm256_fnmadd_pd(sn, u, sn);
		}
		__m256d co = _mm256_fnmadd_pd(sn, d, cn);
		sn = _mm256_fmadd_pd(cn, d, sn);
		cn = co;
	}
	__m256 v = _mm256_set_m128(_mm256_cvtpd_ps(cn), _mm256_cvtpd_ps(sn));
	__builtin_prefetch(r->o + 2 * r->n + 2 * i, 1, 3);
	if (interleaved) {
		_mm256_storeu_ps(r->o + 2 * i, _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
	} else {
		_mm_storeu_ps(r->o + i, _mm256_castps256_ps128(v));
		_mm_storeu_ps(r->o + r->n + i, _mm256_extractf128_ps(v, 1));
	}
	return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

/* Groups [from, to) of four columns, corrected or not; folds their |values| into *mn as integers
 * (the same order for non-negative floats; an integer minimum has one cycle of latency where
 * minps has four, and this chain runs through the whole row). */
static inline __attribute__((always_inline)) void sin_groups(const struct row *r, size_t from, size_t to, int corr,
							      int interleaved, __m256i *mn)
{
	__m256i m = *mn;
#pragma GCC unroll 2
	for (size_t i = from; i < to; i += 4)
		m = _mm256_min_epu32(m, _mm256_castps_si256(sin_group(r, i, corr, interleaved)));
	*mn = m;
}

/* The groups before, in and after the corrected range [a, b); interleaved is a constant. */
static inline __attribute__((always_inline)) void sin_segments(const struct row *r, const struct pe_sin_range *g,
								int first_order, int interleaved, __m256i *mn)
{
	sin_groups(r, 0, g->a, 0, interleaved, mn);
	if (first_order)
		sin_groups(r, g->a, g->b, 1, interleaved, mn);
	else
		sin_groups(r, g->a, g->b, 2, interleaved, mn);
	sin_groups(r, g->b, g->n, 0, interleaved, mn);
}

void pe_sin_row_f32_avx2(struct pe_rope_rec *st, double pos, size_t lo, size_t hi, int interleaved, float *o)
{
	struct pe_sin_range g = pe_sin_groups(st->n, lo, hi, 4);
	const struct row r = {st->w, st->tw, st->sw, st->d0, st->c, st->s, o, st->n, _mm256_set1_pd(pos)};
	__m256i mn = _mm256_castps_si256(_mm256_set1_ps(1.0f));
	if (interleaved)
		sin_segments(&r, &g, st->first_order, 1, &mn);
	else
		sin_segments(&r, &g, st->first_order, 0, &mn);
	int small = _mm256_movemask_ps(
		_mm256_cmp_ps(_mm256_castsi256_ps(mn), _mm256_set1_ps(PE_SIN_MIN_RECURRENT), _CMP_LT_OQ));
	_mm256_zeroupper();
	pe_sin_row_f32_from(st, pos, lo, hi, interleaved, g.n, o);
	pe_sin_row_f32_fix_small(st, pos, small ? 0 : g.n, interleaved, o);
}
