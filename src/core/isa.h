/* The CPU's features, read once (src/core/isa.c) for every file that asks: the SIMD tier in use is
 * pe_isa_active() (posenc/core.h), which POSENC_ISA may lower; what the hardware itself has is
 * pe_cpu_has(), which nothing overrides (PyTorch's float32 results depend on the CPU, not on the
 * tier we chose). Thread-safe. */
#ifndef PE_CORE_ISA_H
#define PE_CORE_ISA_H

#include "posenc/core.h"

enum pe_cpu_feature {
	PE_CPU_FMA = 1u << 0,
	PE_CPU_AVX2 = 1u << 1,
	PE_CPU_F16C = 1u << 2,
	PE_CPU_AVX512 = 1u << 3, /* F, DQ, CD, BW and VL together */
};

/* 1 when the CPU has every feature of the mask, else 0. */
int pe_cpu_has(unsigned features);

#endif
