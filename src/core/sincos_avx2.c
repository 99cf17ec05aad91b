/* AVX2 sin/cos kernels over SLEEF (Debian's libsleef): Sleef_sincosd4_u10avx2 is within 1.0 ulp in
 * double for every finite argument (Payne-Hanek reduction for large ones), which keeps one
 * rounding to float/f16/bf16 within 1 ulp of the exact value. The tail uses glibc like the scalar
 * twin. Compiled with -mavx2 -mfma. */
#include "core/kernels.h"

#include <immintrin.h>
#include <math.h>
#include <sleef.h>

void pe_sincos_f64_avx2(const double *x, double *s, double *c, size_t n)
{
	size_t i = 0;
	for (; i + 4 <= n; i += 4) {
		Sleef___m256d_2 r = Sleef_sincosd4_u10avx2(_mm256_loadu_pd(x + i));
		_mm256_storeu_pd(s + i, r.x);
		_mm256_storeu_pd(c + i, r.y);
	}
	for (; i < n; i++)
		sincos(x[i], &s[i], &c[i]);
}
