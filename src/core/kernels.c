/* The kernel tables of kernels.h, one per ISA, selected by pe_isa_active(). */
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

static const struct pe_kernel_table avx2 = {
	.sincos_f64 = pe_sincos_f64_avx2,
	.rope_row = pe_rope_row_avx2,
	.rope_store_f32 = pe_rope_store_f32_avx2,
	.rope_fence = pe_rope_fence_avx2,
	.rope_apply_f32 = pe_rope_apply_f32_avx2,
	.sincos_store_f32 = pe_sincos_store_f32_avx2,
	.sin_row_f32 = pe_sin_row_f32_avx2,
};

const struct pe_kernel_table *pe_kernels(void)
{
	return pe_isa_active() == PE_ISA_AVX2 ? &avx2 : &scalar;
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
