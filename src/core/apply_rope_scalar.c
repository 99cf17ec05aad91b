/* Scalar RoPE application kernels (see kernels.h: rope_apply_f32 / rope_apply_f64): one vector of
 * rd rotary channels, PyTorch's arithmetic q*cos + rotate_half(q)*sin (each product rounded, then
 * the sum; no fused multiply-add), in place allowed. */
#include "core/kernels.h"

#define DEFINE_APPLY(T, NAME)                                                                           \
	void NAME(const T *x, T *out, const T *cs, const T *sn, size_t rd, int interleaved, int inverse) \
	{                                                                                               \
		T sign = inverse ? (T)-1 : (T)1;                                                        \
		if (interleaved) {                                                                      \
			for (size_t c = 0; c + 1 < rd; c += 2) {                                        \
				T a = x[c], b = x[c + 1];                                                \
				T p1 = a * cs[c], q1 = b * sn[c], p2 = b * cs[c + 1], q2 = a * sn[c + 1]; \
				out[c] = p1 - sign * q1;                                                 \
				out[c + 1] = p2 + sign * q2;                                             \
			}                                                                               \
			return;                                                                         \
		}                                                                                       \
		size_t h = rd / 2;                                                                      \
		for (size_t c = 0; c < h; c++) {                                                        \
			T a = x[c], b = x[c + h];                                                        \
			T p1 = a * cs[c], q1 = b * sn[c], p2 = b * cs[c + h], q2 = a * sn[c + h];         \
			out[c] = p1 - sign * q1;                                                         \
			out[c + h] = p2 + sign * q2;                                                     \
		}                                                                                       \
	}

DEFINE_APPLY(float, pe_rope_apply_f32_scalar)
DEFINE_APPLY(double, pe_rope_apply_f64)
