/* Float32 elementary functions as PyTorch's CPU kernels compute them, for compat=hf.
 *
 * torch.exp on a float32 tensor runs SLEEF's expf (u10) on AVX2 machines, which differs from
 * glibc's expf in the last bit for about one input in ten; a frequency one ulp off moves the angle
 * at long positions by far more than an ulp. We call the same SLEEF function (Debian's libsleef,
 * the FMA build, as PyTorch's AVX2 kernels are) so frequencies match PyTorch bit for bit. CPUs
 * without FMA fall back to SLEEF's portable u10 expf, which is within 1 ulp but not bit-identical
 * (PyTorch itself uses libm there).
 *
 * torch.pow(scalar, float32 tensor) on an AVX2 CPU runs its binary loop through SLEEF's powf u10 on
 * blocks of 16 floats and std::pow (glibc powf) on the last n % 16; bit-identical to torch 1.13 over
 * 269100 exponents and six bases (the known answers check it element for element). Without FMA,
 * SLEEF's portable u10 powf (within 1 ulp). Whether the CPU has FMA is asked of isa.c.
 *
 * torch.log on a float32 tensor runs SLEEF's logf u10 on every element, the tail of a block and a
 * 0-dim tensor included (measured on torch 1.13: it differs from glibc's logf on 5732 of the
 * integers up to 2^24, the first 429).
 *
 * Where the model's code calls libm on one float at a time (torch.polar's std::sin and std::cos,
 * llama.cpp's sinf and cosf), pe_libm_sincosf calls it too. */
#include "core/torchmath.h"
#include "core/isa.h"

#include <math.h>
#include <sleef.h>

/* sleef.h declares the FMA builds only when this file is compiled with -mfma (FP_FAST_FMA); it
 * must not be, since it also runs on CPUs without FMA. The symbols are in every libsleef. */
float Sleef_expf1_u10purecfma(float x);
float Sleef_powf1_u10purecfma(float x, float y);
float Sleef_logf1_u10purecfma(float x);

float pe_torch_expf(float x) { return pe_cpu_has(PE_CPU_FMA) ? Sleef_expf1_u10purecfma(x) : Sleef_expf_u10(x); }

float pe_torch_logf(float x) { return pe_cpu_has(PE_CPU_FMA) ? Sleef_logf1_u10purecfma(x) : Sleef_logf_u10(x); }

float pe_torch_powf(float base, float x, size_t i, size_t n)
{
	if (i < n / 16 * 16)
		return pe_cpu_has(PE_CPU_FMA) ? Sleef_powf1_u10purecfma(base, x) : Sleef_powf_u10(base, x);
	return powf(base, x);
}

void pe_torch_sincosf8(const float x[8], float s[8], float c[8])
{
	if (pe_cpu_has(PE_CPU_AVX2 | PE_CPU_FMA)) {
		pe_torch_sincosf8_avx2(x, s, c);
		return;
	}
	for (int i = 0; i < 8; i++) {
		s[i] = Sleef_sinf_u10(x[i]);
		c[i] = Sleef_cosf_u10(x[i]);
	}
}

void pe_torch_sincosf(const double *t, double *s, double *c, size_t n)
{
	float x[8], fs[8], fc[8];
	for (size_t i = 0; i < n; i += 8) {
		for (int l = 0; l < 8; l++)
			x[l] = (float)t[i + (size_t)l];
		pe_torch_sincosf8(x, fs, fc);
		for (int l = 0; l < 8; l++) {
			s[i + (size_t)l] = fs[l];
			c[i + (size_t)l] = fc[l];
		}
	}
}

void pe_libm_sincosf(const double *t, double *s, double *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float sf, cf;
		sincosf((float)t[i], &sf, &cf);
		s[i] = sf;
		c[i] = cf;
	}
}
