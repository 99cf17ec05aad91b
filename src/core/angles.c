/* Frequencies 1/base^(num/den) and sin/cos of position * frequency, exact (double) or hf (float32),
 * for the 2-D and relative tables (see angles.h). */
#include "core/angles.h"
#include "core/kernels.h"

#include <math.h>
#include <sleef.h>

/* SLEEF's FMA build of powf, the scalar twin of the Sleef_powf8_u10 PyTorch's AVX2 kernels call (in
 * every libsleef; sleef.h declares it only under -mfma, which this file must not be built with). */
float Sleef_powf1_u10purecfma(float x, float y);

/* PyTorch's pow(scalar, float32 tensor) on an AVX2 CPU: its binary loop runs SLEEF on blocks of 16
 * floats and std::pow (glibc powf) on the last n % 16; bit-identical to torch 1.13 over 269100
 * exponents and six bases. Without FMA, PyTorch's kernels are libm's throughout. */
static float torch_powf(float b, float x, size_t k, size_t n)
{
	__builtin_cpu_init();
	if (k < n - n % 16 && __builtin_cpu_supports("fma"))
		return Sleef_powf1_u10purecfma(b, x);
	return powf(b, x);
}

void pe_inv_freq_pow(double base, size_t n, unsigned step, double den, int hf, double *w)
{
	for (size_t k = 0; k < n; k++) {
		double num = (double)(step * k);
		if (hf)
			w[k] = (double)(1.0f / torch_powf((float)base, (float)num / (float)den, k, n));
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
