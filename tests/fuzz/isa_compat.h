/* Included (clang -include) before src/core/isa.c in the fuzz build only: clang 14's
 * __builtin_cpu_supports does not know "f16c" (gcc's does), so that one feature is read from
 * CPUID here (leaf 1, ECX bit 29) and every other name goes to the builtin. */
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
	return 0;
}
#define __builtin_cpu_supports(feature) pe_fuzz_cpu_supports(feature)
