/* AVX2 twin of apply_rope_scalar.c's float kernel: eight channels at a time, the same products and
 * sums in the same order (separate multiplies and adds, no FMA, so results are bit-identical to
 * the scalar path). Half layout pairs channel c with c + rd/2; interleaved pairs neighbours,
 * swapped within each pair by a permute. Tails go to the scalar kernel. */
#include "core/kernels.h"

#include <immintrin.h>

static void apply_half(const float *x, float *out, const float *cs, const float *sn, size_t h, __m256 sign)
{
	size_t c = 0;
	for (; c + 8 <= h; c += 8) {
		__m256 a = _mm256_loadu_ps(x + c), b = _mm256_loadu_ps(x + h + c);
		__m256 p1 = _mm256_mul_ps(a, _mm256_loadu_ps(cs + c)), q1 = _mm256_mul_ps(b, _mm256_loadu_ps(sn + c));
		__m256 p2 = _mm256_mul_ps(b, _mm256_loadu_ps(cs + h + c)), q2 = _mm256_mul_ps(a, _mm256_loadu_ps(sn + h + c));
		_mm256_storeu_ps(out + c, _mm256_sub_ps(p1, _mm256_mul_ps(sign, q1)));
		_mm256_storeu_ps(out + h + c, _mm256_add_ps(p2, _mm256_mul_ps(sign, q2)));
	}
	for (; c < h; c++) {
		float a = x[c], b = x[c + h], s = _mm256_cvtss_f32(sign);
		float p1 = a * cs[c], q1 = b * sn[c], p2 = b * cs[c + h], q2 = a * sn[c + h];
		out[c] = p1 - s * q1;
		out[c + h] = p2 + s * q2;
	}
}

/* out = x*cos + swap(x)*[-s, +s, ...]*sin, which is p1 - s*q1 in even lanes and p2 + s*q2 in odd. */
static void apply_interleaved(const float *x, float *out, const float *cs, const float *sn, size_t rd, __m256 sign)
{
	const __m256 alt = _mm256_setr_ps(-1, 1, -1, 1, -1, 1, -1, 1);
	size_t c = 0;
	for (; c + 8 <= rd; c += 8) {
		__m256 v = _mm256_loadu_ps(x + c), sw = _mm256_permute_ps(v, 0xB1);
		__m256 p = _mm256_mul_ps(v, _mm256_loadu_ps(cs + c)), q = _mm256_mul_ps(sw, _mm256_loadu_ps(sn + c));
		_mm256_storeu_ps(out + c, _mm256_add_ps(p, _mm256_mul_ps(_mm256_mul_ps(alt, sign), q)));
	}
	if (c < rd)
		pe_rope_apply_f32_scalar(x + c, out + c, cs + c, sn + c, rd - c, 1, _mm256_cvtss_f32(sign) < 0);
}

void pe_rope_apply_f32_avx2(const float *x, float *out, const float *cs, const float *sn, size_t rd,
			    int interleaved, int inverse)
{
	__m256 sign = _mm256_set1_ps(inverse ? -1.0f : 1.0f);
	if (interleaved)
		apply_interleaved(x, out, cs, sn, rd, sign);
	else
		apply_half(x, out, cs, sn, rd / 2, sign);
}
