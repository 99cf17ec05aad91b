/* AVX2 sinusoidal row store (kernels.h): four sin/cos pairs at a time converted to float32 (one
 * rounding each) and written interleaved or in halves with 16-byte stores, any alignment (measured
 * faster than 32-byte stores and their lane shuffles: the row goes to L2 either way); the last
 * n % 4 pairs go through the scalar twin. Compiled with -mavx2 -mfma. */
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
