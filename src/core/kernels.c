/* The kernel tables of kernels.h, one per ISA, selected by pe_isa_active(). */
#include "core/kernels.h"
#include "posenc/core.h"

static const struct pe_kernel_table scalar = {
	.sincos_f64 = pe_sincos_f64_scalar,
	.rope_row = pe_rope_row_scalar,
	.rope_store_f32 = pe_rope_store_f32_scalar,
	.rope_fence = pe_rope_fence_scalar,
	.rope_apply_f32 = pe_rope_apply_f32_scalar,
};

static const struct pe_kernel_table avx2 = {
	.sincos_f64 = pe_sincos_f64_avx2,
	.rope_row = pe_rope_row_avx2,
	.rope_store_f32 = pe_rope_store_f32_avx2,
	.rope_fence = pe_rope_fence_avx2,
	.rope_apply_f32 = pe_rope_apply_f32_avx2,
};

const struct pe_kernel_table *pe_kernels(void)
{
	return pe_isa_active() == PE_ISA_AVX2 ? &avx2 : &scalar;
}
