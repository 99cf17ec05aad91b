/* Included (clang -include) before src/core/isa.c in the fuzz build only: clang 14's
 * __builtin_cpu_supports does not know "f16c" (gcc's does), so that one feature is read from
 * CPUID here (leaf 1, ECX bit 29) and every other name isa.c asks for goes to the builtin (a name
 * not listed here reads as absent: add it when isa.c asks for a new one). */
#include <cpuid.h>
#include <string.h>

static inline int pe_fuzz_cpu_supports(const char *feature)
{
	unsigned a, b, c, d;
	if (strcmp(feature, "f16c") == 0)
		return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
	if (strcmp(feature, "avx2") == 0)
		return __builtin_cpu_supports("avx2");
	if (strcmp(feature, "fma") == 0)
		return __builtin_cpu_supports("fma");
	if (strcmp(feature, "avx512f") == 0)
		return __builtin_cpu_supports("avx512f");
	if (strcmp(feature, "avx512dq") == 0)
		return __builtin_cpu_supports("avx512dq");
	if (strcmp(feature, "avx512cd") == 0)
		return __builtin_cpu_supports("avx512cd");
	if (strcmp(feature, "avx512bw") == 0)
		return __builtin_cpu_supports("avx512bw");
	if (strcmp(feature, "avx512vl") == 0)
		return __builtin_cpu_supports("avx512vl");
	return 0;
}
#define __builtin_cpu_supports(feature) pe_fuzz_cpu_supports(feature)
