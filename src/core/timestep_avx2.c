/* AVX2 part of timestep.c: SLEEF's 8-lane float32 sin and cos, the functions PyTorch's AVX2
 * kernels apply to each group of 8 elements (compiled with -mavx2 -mfma: the Makefile's _avx2 rule). */
#include "core/timestep.h"

#include <immintrin.h>
#include <sleef.h>

void pe_timestep_sincos8_avx2(const float *x, float *s, float *c)
{
	__m256 v = _mm256_loadu_ps(x);
	_mm256_storeu_ps(s, Sleef_sinf8_u10avx2(v));
	_mm256_storeu_ps(c, Sleef_cosf8_u10avx2(v));
}
