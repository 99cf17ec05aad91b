/* PyTorch's float32 cos and sin of 8 lanes at once, as its AVX2 kernels compute a contiguous
 * tensor: SLEEF's cosf8/sinf8 (u10) on each group of 8 elements, the group's lanes taken together
 * (SLEEF picks its argument reduction per vector, so a lane's result can depend on its
 * neighbours). Compiled with AVX2; called only on CPUs that have it (torchmath.c). */
#include "core/torchmath.h"

#include <immintrin.h>

__m256 Sleef_cosf8_u10(__m256 x);
__m256 Sleef_sinf8_u10(__m256 x);

void pe_torch_sincosf8_avx2(const float x[8], float s[8], float c[8])
{
	__m256 v = _mm256_loadu_ps(x);
	_mm256_storeu_ps(c, Sleef_cosf8_u10(v));
	_mm256_storeu_ps(s, Sleef_sinf8_u10(v));
}
