/* The kernel tables of kernels.h, one per ISA, selected by pe_isa_active(). The AVX-512 table is
 * the AVX2 one but for the fused sinusoidal row (port-bound at 256 bits: sinusoidal_avx512.c), the
 * one kernel with an AVX-512 twin. */
#include "core/kernels.h"
#include "posenc/core.h"

static const struct pe_kernel_table scalar = {
	.sincos_f64 = pe_sincos_f64_scalar,
	.rope_row = pe_rope_row_scalar,
	.rope_store_f32 = pe_rope_store_f32_scalar,
	.rope_fence = pe_rope_fence_scalar,
	.rope_apply_f32 = pe_rope_apply_f32_scalar,
	.sincos_store_f32 = pe_sincos_store_f32_scalar,
	.sin_row_f32 = pe_sin_row_f32_scalar,
};

/* The AVX2 kernels, shared by the two vector tables. */
#define AVX2_KERNELS                                                                                   \
	.sincos_f64 = pe_sincos_f64_avx2, .rope_row = pe_rope_row_avx2, .rope_store_f32 = pe_rope_store_f32_avx2, \
	.rope_fence = pe_rope_fence_avx2, .rope_apply_f32 = pe_rope_apply_f32_avx2,                     \
	.sincos_store_f32 = pe_sincos_store_f32_avx2

static const struct pe_kernel_table avx2 = {AVX2_KERNELS, .sin_row_f32 = pe_sin_row_f32_avx2};
static const struct pe_kernel_table avx512 = {AVX2_KERNELS, .sin_row_f32 = pe_sin_row_f32_avx512};

const struct pe_kernel_table *pe_kernels(void)
{
	switch (pe_isa_active()) {
	case PE_ISA_AVX512:
		return &avx512;
	case PE_ISA_AVX2:
		return &avx2;
	case PE_ISA_SCALAR:
		break;
	}
	return &scalar;
}

#define REC_MAX_FLOAT_POS 0x1p24     /* hf: float(position) stops being exact */
#define REC_MAX_HF_ANGLE 0x1p20      /* hf: beyond, corrections exceed the series' range */
#define REC_MAX_EXACT_ANGLE 0x1p47   /* exact: corrections (an ulp of the angle) stay below 2^-5 */
#define REC_FIRST_ORDER_ANGLE 0x1p26 /* exact: corrections below 2^-27, first order exact to 2^-55 */

int pe_rope_rec_order(double last, double wmax, int hf)
{
	double amax = last * wmax;
	if (hf)
		return last <= REC_MAX_FLOAT_POS && amax < REC_MAX_HF_ANGLE ? PE_REC_SERIES : PE_REC_DIRECT;
	if (!(amax < REC_MAX_EXACT_ANGLE))
		return PE_REC_DIRECT;
	return amax < REC_FIRST_ORDER_ANGLE ? PE_REC_FIRST_ORDER : PE_REC_SERIES;
}
