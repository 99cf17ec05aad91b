/* Scalar twins of the sinusoidal kernels (kernels.h): the row store (n sin/cos pairs rounded once
 * to float32, laid out interleaved s0 c0 s1 c1 ... or in halves [s | c]) and the fused recurrence
 * row, with glibc's sincos where a value is computed directly. Plain C: runs on any x86-64. */
#include "core/kernels.h"

#include <math.h>

void pe_sincos_store_f32_from(const double *s, const double *c, size_t n, size_t from, int interleaved,
			      float *o)
{
	for (size_t i = from; i < n; i++) {
		if (interleaved) {
			o[2 * i] = (float)s[i];
			o[2 * i + 1] = (float)c[i];
		} else {
			o[i] = (float)s[i];
			o[n + i] = (float)c[i];
		}
	}
}

void pe_sincos_store_f32_scalar(const double *s, const double *c, size_t n, int interleaved, float *o)
{
	pe_sincos_store_f32_from(s, c, n, 0, interleaved, o);
}

/* One pair of the fused row: rotate the state by w (three shears, the AVX2 kernel's operations),
 * correct to fl(pos*w) when asked (first or second order, kernels.h), round to float. */
static void sin_pair(struct pe_rope_rec *st, size_t i, double pos, int corr, float *fs, float *fc)
{
	double c1 = fma(-st->tw[i], st->s[i], st->c[i]);
	double sn = fma(st->sw[i], c1, st->s[i]);
	double cn = fma(-st->tw[i], sn, c1);
	st->c[i] = cn;
	st->s[i] = sn;
	if (corr) {
		double d = fma(-pos, st->w[i], pos * st->w[i]) - st->d0[i];
		if (!st->first_order) { /* cos d = 1 - u, u = d^2 / 2 */
			double u = d * 0.5 * d;
			cn = fma(-cn, u, cn);
			sn = fma(-sn, u, sn);
		}
		double co = fma(-sn, d, cn);
		sn = fma(cn, d, sn);
		cn = co;
	}
	*fs = (float)sn;
	*fc = (float)cn;
}

/* Where the sin and cos of column i sit in the row. */
static size_t sin_at(size_t i, int interleaved) { return interleaved ? 2 * i : i; }
static size_t cos_at(size_t n, size_t i, int interleaved) { return interleaved ? 2 * i + 1 : n + i; }

void pe_sin_row_f32_from(struct pe_rope_rec *st, double pos, size_t lo, size_t hi, int interleaved, size_t from,
			 float *o)
{
	for (size_t i = from; i < st->n; i++) {
		float fs, fc;
		sin_pair(st, i, pos, i >= lo && i < hi, &fs, &fc);
		o[sin_at(i, interleaved)] = fs;
		o[cos_at(st->n, i, interleaved)] = fc;
	}
}

void pe_sin_row_f32_fix_small(const struct pe_rope_rec *st, double pos, size_t from, int interleaved, float *o)
{
	for (size_t i = from; i < st->n; i++) {
		float *fs = &o[sin_at(i, interleaved)], *fc = &o[cos_at(st->n, i, interleaved)];
		if (fabsf(*fs) < PE_SIN_MIN_RECURRENT || fabsf(*fc) < PE_SIN_MIN_RECURRENT) {
			double sn, cn;
			sincos(pos * st->w[i], &sn, &cn);
			*fs = (float)sn;
			*fc = (float)cn;
		}
	}
}

void pe_sin_row_f32_scalar(struct pe_rope_rec *st, double pos, size_t lo, size_t hi, int interleaved, float *o)
{
	pe_sin_row_f32_from(st, pos, lo, hi, interleaved, 0, o);
	pe_sin_row_f32_fix_small(st, pos, 0, interleaved, o);
}
