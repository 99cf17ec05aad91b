/* AVX-512 fused sinusoidal row kernel (kernels.h sin_row_f32), eight sin/cos pairs at a time; the
 * last n % 8 pairs go through the scalar twin. Compiled with -mavx512f -mavx512dq -mavx2 -mfma
 * -mf16c; selected only on CPUs with AVX-512 F and DQ (isa.c).
 *
 * The AVX2 kernel (sinusoidal_avx2.c) is bound by its execution ports: three fmas, two
 * double->float conversions and a lane permute per four pairs. The same instructions on eight
 * doubles do twice the work each (a 512x768 f32 table, anchor rows included, measured 1.3-1.4x
 * faster than with the AVX2 kernel, -O2, Xeon with AVX-512). The arithmetic per column is the
 * AVX2 kernel's, operation for operation (the same shears, corrections and fma order), so the two
 * write the same bits, but for the neighbours of [lo, hi) in the group where it starts or ends:
 * corrected here in a group of eight, there of four (a change below 2^-47; kernels.h). The store
 * differs: one 64-byte store interleaved (one permute), two 32-byte halves. The other kernels of
 * the AVX-512 tier are AVX2's (kernels.c). */
#include "core/kernels.h"

#include <immintrin.h>

/* The row's operands, held locally so that the compiler keeps them in registers (as in the AVX2
 * kernel: stores through the double pointers could otherwise alias the struct). */
struct row {
	const double *restrict w, *restrict tw, *restrict sw, *restrict d0;
	double *restrict c, *restrict s;
	float *restrict o;
	size_t n;
	__m512d pos;
};

/* Columns i..i+7: advance, correct (corr: 0 not, 1 first order, 2 second order; kernels.h), round,
 * lay out; returns |values| for the row's minimum. */
static inline __attribute__((always_inline)) __m512 sin_group(const struct row *r, size_t i, int corr,
							       int interleaved)
{
	__m512d c0 = _mm512_loadu_pd(r->c + i), s0 = _mm512_loadu_pd(r->s + i);
	__m512d tw = _mm512_loadu_pd(r->tw + i), sw = _mm512_loadu_pd(r->sw + i);
	__m512d c1 = _mm512_fnmadd_pd(tw, s0, c0); /* three shears: kernels.h */
	__m512d sn = _mm512_fmadd_pd(sw, c1, s0);
	__m512d cn = _mm512_fnmadd_pd(tw, sn, c1);
	_mm512_storeu_pd(r->c + i, cn);
	_mm512_storeu_pd(r->s + i, sn);
	if (corr) {
		__m512d w = _mm512_loadu_pd(r->w + i);
		__m512d d = _mm512_sub_pd(_mm512_fnmadd_pd(r->pos, w, _mm512_mul_pd(r->pos, w)), _mm512_loadu_pd(r->d0 + i));
		if (corr == 2) { /* cos d = 1 - u, u = d^2 / 2 */
			__m512d u = _mm512_mul_pd(_mm512_mul_pd(d, _mm512_set1_pd(0.5)), d);
			cn = _mm512_fnmadd_pd(cn, u, cn);
			sn = _mm512_fnmadd_pd(sn, u, sn);
		}
		__m512d co = _mm512_fnmadd_pd(sn, d, cn);
		sn = _mm512_fmadd_pd(cn, d, sn);
		cn = co;
	}
	/* s0..s7 in the low half, c0..c7 in the high half */
	__m512 v = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(sn)), _mm512_cvtpd_ps(cn), 1);
	__builtin_prefetch(r->o + 2 * r->n + 2 * i, 1, 3);
	if (interleaved) {
		const __m512i pairs = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
		_mm512_storeu_ps(r->o + 2 * i, _mm512_permutexvar_ps(pairs, v));
	} else {
		_mm256_storeu_ps(r->o + i, _mm512_castps512_ps256(v));
		_mm256_storeu_ps(r->o + r->n + i, _mm512_extractf32x8_ps(v, 1));
	}
	return _mm512_abs_ps(v);
}

/* Groups [from, to) of eight columns, corrected or not; folds their |values| into *mn as integers
 * (the same order for non-negative floats; an integer minimum has one cycle of latency where
 * minps has four, and this chain runs through the whole row). */
static inline __attribute__((always_inline)) void sin_groups(const struct row *r, size_t from, size_t to, int corr,
							      int interleaved, __m512i *mn)
{
	__m512i m = *mn;
#pragma GCC unroll 2
	for (size_t i = from; i < to; i += 8)
		m = _mm512_min_epu32(m, _mm512_castps_si512(sin_group(r, i, corr, interleaved)));
	*mn = m;
}

/* The groups before, in and after the corrected range [a, b); interleaved is a constant. */
static inline __attribute__((always_inline)) void sin_segments(const struct row *r, const struct pe_sin_range *g,
								int first_order, int interleaved, __m512i *mn)
{
	sin_groups(r, 0, g->a, 0, interleaved, mn);
	if (first_order)
		sin_groups(r, g->a, g->b, 1, interleaved, mn);
	else
		sin_groups(r, g->a, g->b, 2, interleaved, mn);
	sin_groups(r, g->b, g->n, 0, interleaved, mn);
}

void pe_sin_row_f32_avx512(struct pe_rope_rec *st, double pos, size_t lo, size_t hi, int interleaved, float *o)
{
	struct pe_sin_range g = pe_sin_groups(st->n, lo, hi, 8);
	const struct row r = {st->w, st->tw, st->sw, st->d0, st->c, st->s, o, st->n, _mm512_set1_pd(pos)};
	__m512i mn = _mm512_castps_si512(_mm512_set1_ps(1.0f));
	if (interleaved)
		sin_segments(&r, &g, st->first_order, 1, &mn);
	else
		sin_segments(&r, &g, st->first_order, 0, &mn);
	__mmask16 small = _mm512_cmp_ps_mask(_mm512_castsi512_ps(mn), _mm512_set1_ps(PE_SIN_MIN_RECURRENT), _CMP_LT_OQ);
	/* leave no dirty upper state to the SSE code of the scalar tail and glibc (sinusoidal_avx2.c) */
	_mm256_zeroupper();
	pe_sin_row_f32_from(st, pos, lo, hi, interleaved, g.n, o);
	pe_sin_row_f32_fix_small(st, pos, small ? 0 : g.n, interleaved, o);
}
