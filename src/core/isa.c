/* SIMD dispatch: which kernel family runs, chosen once: the best the CPU has of AVX-512 (F, DQ, CD,
 * BW and VL, which every AVX-512 server CPU since Skylake has, on top of AVX2's requirements), AVX2
 * (+ FMA, F16C) and scalar, in that order. POSENC_ISA=scalar|avx2|avx512 picks a tier for tests
 * and benchmarks, as SLEEF's and redis' dispatchers do. Here a value that names no tier, or one
 * the CPU lacks, falls back to the best it has (a library must not exit); pe_isa_check_env() says
 * so, with the reason, and posencd and posenc refuse to run on it (the caller prints: no I/O here). The AVX-512 tier differs from AVX2 only in the kernels that have an AVX-512 twin
 * (kernels.c) and in the float32 list printer (src/tensor/shortest_avx512.c).
 *
 * This is the one place that asks the CPU what it has (__builtin_cpu_supports); other files ask
 * pe_cpu_has() (isa.h) or pe_isa_active(). */
#include "core/isa.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int active = -1;
static atomic_int features = -1; /* enum pe_cpu_feature bits */

static unsigned read_features(void)
{
	__builtin_cpu_init();
	unsigned f = 0;
	if (__builtin_cpu_supports("fma"))
		f |= PE_CPU_FMA;
	if (__builtin_cpu_supports("avx2"))
		f |= PE_CPU_AVX2;
	if (__builtin_cpu_supports("f16c"))
		f |= PE_CPU_F16C;
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
	    __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl"))
		f |= PE_CPU_AVX512;
	return f;
}

int pe_cpu_has(unsigned want)
{
	int f = atomic_load_explicit(&features, memory_order_acquire);
	if (f < 0) { /* racing first callers all store the same bits */
		f = (int)read_features();
		atomic_store_explicit(&features, f, memory_order_release);
	}
	return ((unsigned)f & want) == want;
}

#define AVX2_TIER (PE_CPU_AVX2 | PE_CPU_FMA | PE_CPU_F16C)

static int cpu_has(enum pe_isa isa)
{
	switch (isa) {
	case PE_ISA_SCALAR:
		return 1;
	case PE_ISA_AVX2:
		return pe_cpu_has(AVX2_TIER);
	case PE_ISA_AVX512:
		return pe_cpu_has(AVX2_TIER | PE_CPU_AVX512);
	}
	return 0;
}

static const struct {
	const char *name;
	enum pe_isa isa;
} names[] = {{"scalar", PE_ISA_SCALAR}, {"avx2", PE_ISA_AVX2}, {"avx512", PE_ISA_AVX512}};
#define NNAMES (sizeof names / sizeof names[0])

/* The tier a POSENC_ISA value names, or -1. */
static int named(const char *env)
{
	for (size_t i = 0; env && i < NNAMES; i++)
		if (strcmp(env, names[i].name) == 0)
			return (int)names[i].isa;
	return -1;
}

static enum pe_isa detect(void)
{
	int isa = named(getenv("POSENC_ISA"));
	if (isa >= 0 && cpu_has((enum pe_isa)isa))
		return (enum pe_isa)isa;
	return cpu_has(PE_ISA_AVX512) ? PE_ISA_AVX512 : cpu_has(PE_ISA_AVX2) ? PE_ISA_AVX2 : PE_ISA_SCALAR;
}

/* The tiers this CPU has, "scalar, avx2, ...", into out. */
static void supported(char *out, size_t cap)
{
	size_t n = 0;
	out[0] = 0;
	for (size_t i = 0; i < NNAMES && n < cap; i++)
		if (cpu_has(names[i].isa))
			n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? ", " : "", names[i].name);
}

int pe_isa_check_env(struct pe_err *err)
{
	const char *env = getenv("POSENC_ISA");
	int isa = named(env);
	if (!env || (isa >= 0 && cpu_has((enum pe_isa)isa)))
		return 0;
	char shown[33], have[64];
	size_t n = 0;
	for (; env[n] && n + 1 < sizeof shown; n++) /* one line, printable: the value is the operator's */
		shown[n] = env[n] >= 0x20 && env[n] < 0x7f ? env[n] : '?';
	shown[n] = 0;
	supported(have, sizeof have);
	if (isa < 0)
		return pe_err_set(err, PE_EINVAL, "POSENC_ISA",
				  "POSENC_ISA=\"%s%s\" names no SIMD tier: accepted values are scalar, avx2 and avx512 "
				  "(this CPU supports %s), or leave it unset for the best",
				  shown, env[n] ? "..." : "", have);
	return pe_err_set(err, PE_EINVAL, "POSENC_ISA",
			  "POSENC_ISA=\"%s\": this CPU lacks %s; it supports %s (or leave POSENC_ISA unset for the best)",
			  shown, shown, have);
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

const char *pe_isa_name(void)
{
	switch (pe_isa_active()) {
	case PE_ISA_AVX512:
		return "avx512";
	case PE_ISA_AVX2:
		return "avx2";
	case PE_ISA_SCALAR:
		break;
	}
	return "scalar";
}

int pe_isa_force(enum pe_isa isa)
{
	if (!cpu_has(isa))
		return PE_EINVAL;
	atomic_store_explicit(&active, (int)isa, memory_order_release);
	return 0;
}
