/* Frequencies 1/base^(num/den) and sin/cos of position * frequency, exact (double) or hf (float32),
 * for the 2-D and relative tables (see angles.h). */
#include "core/angles.h"
#include "core/kernels.h"
#include "core/torchmath.h"

#include <math.h>

void pe_inv_freq_pow(double base, size_t n, unsigned step, double den, int hf, double *w)
{
	for (size_t k = 0; k < n; k++) {
		double num = (double)(step * k);
		if (hf)
			w[k] = (double)(1.0f / pe_torch_powf((float)base, (float)num / (float)den, k, n));
		else
			w[k] = 1.0 / pow(base, num / den);
	}
}

void pe_sincos_at(double pos, const double *w, size_t n, int hf, double *ang, double *s, double *c)
{
	if (hf) {
		float pf = (float)pos;
		for (size_t k = 0; k < n; k++)
			ang[k] = (double)(pf * (float)w[k]);
	} else {
		for (size_t k = 0; k < n; k++)
			ang[k] = pos * w[k];
	}
	pe_kernels()->sincos_f64(ang, s, c, n);
	if (hf)
		for (size_t k = 0; k < n; k++) {
			s[k] = (double)(float)s[k];
			c[k] = (double)(float)c[k];
		}
}
