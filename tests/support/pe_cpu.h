/* What this CPU supports, asked of the compiler's own CPU probe (independently of src/core/isa.c),
 * for the tests of POSENC_ISA: each SIMD tier as isa.c defines it (avx2 with FMA and F16C; avx512
 * with F, DQ, CD, BW and VL). Header-only. */
#ifndef PE_TEST_CPU_H
#define PE_TEST_CPU_H

static inline int pe_cpu_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

static inline int pe_cpu_avx512(void)
{
	return pe_cpu_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
	       __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512bw") &&
	       __builtin_cpu_supports("avx512vl");
}

#endif
