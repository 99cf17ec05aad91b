/* SIMD dispatch: which kernel family runs, chosen once (AVX2+FMA if the CPU has both), overridable
 * by POSENC_ISA=scalar|avx2 for tests and benchmarks, as SLEEF's and redis' dispatchers do. */
#include "posenc/core.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_int active = -1;

static int cpu_has_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
	       __builtin_cpu_supports("f16c");
}

static enum pe_isa detect(void)
{
	const char *env = getenv("POSENC_ISA");
	if (env && strcmp(env, "scalar") == 0)
		return PE_ISA_SCALAR;
	return cpu_has_avx2() ? PE_ISA_AVX2 : PE_ISA_SCALAR;
}

enum pe_isa pe_isa_active(void)
{
	int a = atomic_load_explicit(&active, memory_order_acquire);
	if (a < 0) {
		a = (int)detect();
		atomic_store_explicit(&active, a, memory_order_release);
	}
	return (enum pe_isa)a;
}

const char *pe_isa_name(void) { return pe_isa_active() == PE_ISA_AVX2 ? "avx2" : "scalar"; }

int pe_isa_force(enum pe_isa isa)
{
	if (isa == PE_ISA_AVX2 && !cpu_has_avx2())
		return PE_EINVAL;
	atomic_store_explicit(&active, (int)isa, memory_order_release);
	return 0;
}
