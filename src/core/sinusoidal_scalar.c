/* Scalar twin of the sinusoidal row store (kernels.h): n sin/cos pairs rounded once to float32 and
 * laid out interleaved (s0 c0 s1 c1 ...) or in halves [s | c]. Plain C: runs on any x86-64. */
#include "core/kernels.h"

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
