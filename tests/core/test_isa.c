/* SIMD dispatch (isa.c): pe_isa_force and POSENC_ISA select each tier the CPU has, and nothing
 * else; pe_isa_name() names it; pe_kernels() hands out that tier's table. What the CPU has is asked
 * here independently of isa.c (gcc's __builtin_cpu_supports), so a tier isa.c misdetects fails.
 *
 * POSENC_ISA is read once, at the first pe_isa_active(): the environment tests rely on check
 * running each test in its own fork of a runner that never called it (the default; not with
 * CK_FORK=no). */
#include "core/kernels.h"
#include "posenc/core.h"
#include "support/pe_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	enum pe_isa isa;
	const char *name;
} tiers[] = {{PE_ISA_SCALAR, "scalar"}, {PE_ISA_AVX2, "avx2"}, {PE_ISA_AVX512, "avx512"}};
#define NTIERS (int)(sizeof tiers / sizeof tiers[0])

static int cpu_has(enum pe_isa isa)
{
	__builtin_cpu_init();
	int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
	switch (isa) {
	case PE_ISA_SCALAR:
		return 1;
	case PE_ISA_AVX2:
		return avx2;
	case PE_ISA_AVX512:
		return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
	}
	return 0;
}

static enum pe_isa best(void)
{
	return cpu_has(PE_ISA_AVX512) ? PE_ISA_AVX512 : cpu_has(PE_ISA_AVX2) ? PE_ISA_AVX2 : PE_ISA_SCALAR;
}

/* The active tier is isa, by pe_isa_active(), pe_isa_name() and the kernel table. */
static void expect_active(enum pe_isa isa, const char *why)
{
	ck_assert_msg(pe_isa_active() == isa, "%s: active tier %d, expected %d", why, (int)pe_isa_active(), (int)isa);
	ck_assert_msg(strcmp(pe_isa_name(), tiers[isa].name) == 0, "%s: pe_isa_name() is \"%s\", expected \"%s\"", why,
		      pe_isa_name(), tiers[isa].name);
	const struct pe_kernel_table *k = pe_kernels();
	void (*const sin_row[])(struct pe_rope_rec *, double, size_t, size_t, int, float *) = {
		pe_sin_row_f32_scalar, pe_sin_row_f32_avx2, pe_sin_row_f32_avx512};
	ck_assert_msg(k->sin_row_f32 == sin_row[isa], "%s: the kernel table's sin_row_f32 is not the %s one", why,
		      tiers[isa].name);
	/* the AVX-512 tier has AVX2's other kernels */
	ck_assert(k->rope_row == (isa == PE_ISA_SCALAR ? pe_rope_row_scalar : pe_rope_row_avx2));
	ck_assert(k->sincos_f64 == (isa == PE_ISA_SCALAR ? pe_sincos_f64_scalar : pe_sincos_f64_avx2));
}

START_TEST(tiers_in_order)
{
	ck_assert_int_lt(PE_ISA_SCALAR, PE_ISA_AVX2);
	ck_assert_int_lt(PE_ISA_AVX2, PE_ISA_AVX512);
	for (int i = 0; i < NTIERS; i++)
		ck_assert_int_eq(tiers[i].isa, i);
}
END_TEST

/* Unset: the best tier the CPU has. */
START_TEST(default_is_best)
{
	unsetenv("POSENC_ISA");
	expect_active(best(), "POSENC_ISA unset");
	fprintf(stderr, "isa: this CPU's best tier is %s\n", pe_isa_name());
}
END_TEST

/* pe_isa_force(tier): 0 and that tier when the CPU has it, PE_EINVAL and no change when not. */
START_TEST(force_selects_each_tier)
{
	enum pe_isa isa = tiers[_i].isa, before = pe_isa_active();
	int rc = pe_isa_force(isa);
	if (!cpu_has(isa)) {
		fprintf(stderr, "isa: no %s on this CPU, pe_isa_force must refuse it\n", tiers[_i].name);
		ck_assert_int_eq(rc, PE_EINVAL);
		expect_active(before, "after a refused pe_isa_force");
		return;
	}
	ck_assert_int_eq(rc, 0);
	expect_active(isa, "pe_isa_force");
}
END_TEST

START_TEST(force_rejects_no_tier)
{
	enum pe_isa before = pe_isa_active();
	ck_assert_int_eq(pe_isa_force((enum pe_isa)NTIERS), PE_EINVAL);
	ck_assert_int_eq(pe_isa_force((enum pe_isa)-1), PE_EINVAL);
	expect_active(before, "after pe_isa_force of no tier");
}
END_TEST

/* POSENC_ISA=<tier>: that tier when the CPU has it (avx2 also on an AVX-512 CPU), else the best. */
START_TEST(env_selects_each_tier)
{
	enum pe_isa isa = tiers[_i].isa;
	ck_assert_int_eq(setenv("POSENC_ISA", tiers[_i].name, 1), 0);
	char why[64];
	snprintf(why, sizeof why, "POSENC_ISA=%s", tiers[_i].name);
	if (!cpu_has(isa))
		fprintf(stderr, "isa: no %s on this CPU, POSENC_ISA=%s must fall back to the best\n", tiers[_i].name,
			tiers[_i].name);
	expect_active(cpu_has(isa) ? isa : best(), why);
}
END_TEST

START_TEST(env_unknown_is_best)
{
	ck_assert_int_eq(setenv("POSENC_ISA", "avx1024", 1), 0);
	expect_active(best(), "POSENC_ISA=avx1024");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("isa");
	TCase *tc = tcase_create("dispatch");
	tcase_add_test(tc, tiers_in_order);
	tcase_add_test(tc, default_is_best);
	tcase_add_loop_test(tc, force_selects_each_tier, 0, NTIERS);
	tcase_add_test(tc, force_rejects_no_tier);
	tcase_add_loop_test(tc, env_selects_each_tier, 0, NTIERS);
	tcase_add_test(tc, env_unknown_is_best);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
