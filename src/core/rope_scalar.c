/* Scalar twins of the RoPE kernels (kernels.h): the angle-addition recurrence with glibc's sincos
 * for anchors and fallback lanes, and the float32 row store. Plain C: runs on any x86-64. */
#include "core/kernels.h"

#include <math.h>

#define MAX_D 0x1p-4    /* largest correction angle the series below covers */
#define MIN_CS 0x1p-16  /* below this |cos| or |sin|, compute directly (see kernels.h) */

/* sin(d) and cos(d) - 1 for |d| <= 2^-4: Taylor series, truncation below 2^-61. */
static void series(double d, double *sd, double *cm1)
{
	double d2 = d * d;
	*sd = d + d * d2 * (-1.0 / 6 + d2 * (1.0 / 120 + d2 * (-1.0 / 5040 + d2 * (1.0 / 362880))));
	*cm1 = d2 * (-0.5 + d2 * (1.0 / 24 + d2 * (-1.0 / 720 + d2 * (1.0 / 40320))));
}

void pe_rope_row_scalar(struct pe_rope_rec *st, double pos, const double *t, int anchor, double *c, double *s)
{
	for (size_t i = 0; i < st->n; i++) {
		double ti = t ? t[i] : st->wf ? (double)((float)pos * st->wf[i]) : pos * st->w[i];
		if (anchor) {
			sincos(ti, &s[i], &c[i]);
			st->c[i] = c[i];
			st->s[i] = s[i];
			st->d0[i] = fma(-pos, st->w[i], ti);
			continue;
		}
		double cn = st->c[i] * st->cw[i] - st->s[i] * st->sw[i];
		double sn = st->s[i] * st->cw[i] + st->c[i] * st->sw[i];
		st->c[i] = cn;
		st->s[i] = sn;
		double d = fma(-pos, st->w[i], ti) - st->d0[i], sd = d, cm1 = 0;
		if (!st->first_order && fabs(d) > MAX_D) {
			sincos(ti, &s[i], &c[i]);
			continue;
		}
		if (!st->first_order)
			series(d, &sd, &cm1);
		c[i] = cn + (cn * cm1 - sn * sd);
		s[i] = sn + (sn * cm1 + cn * sd);
		if (fabs(c[i]) < MIN_CS || fabs(s[i]) < MIN_CS)
			sincos(ti, &s[i], &c[i]);
	}
}

float pe_rope_f32_value(double v, double att, int fmode)
{
	if (!fmode)
		return (float)(att == 1.0 ? v : v * att);
	float f = (float)v;
	return att == 1.0 ? f : f * (float)att;
}

void pe_rope_store_f32_scalar(const double *c, const double *s, size_t n, double att, int fmode,
			      int interleaved, int stream, float *oc, float *os)
{
	for (size_t i = 0; i < n; i++) {
		float fc = pe_rope_f32_value(c[i], att, fmode), fs = pe_rope_f32_value(s[i], att, fmode);
		if (interleaved) {
			oc[2 * i] = oc[2 * i + 1] = fc;
			os[2 * i] = os[2 * i + 1] = fs;
		} else {
			oc[i] = oc[n + i] = fc;
			os[i] = os[n + i] = fs;
		}
	}
}

void pe_rope_fence_scalar(void) {}
