/* pe_isa_check_env (src/core/isa.c): POSENC_ISA unset or a tier this CPU has is 0; any other value
 * is PE_EINVAL naming "POSENC_ISA", with one printable line that shows the value (cut at 32 bytes),
 * the accepted values and what this CPU supports. The check reads the environment each call, and
 * does not change the dispatch (a library falls back to the best tier). */
#include "posenc/core.h"
#include "support/pe_check.h"
#include "support/pe_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static int check_with(const char *isa, struct pe_err *err)
{
	if (isa)
		ck_assert_int_eq(setenv("POSENC_ISA", isa, 1), 0);
	else
		unsetenv("POSENC_ISA");
	*err = (struct pe_err){0};
	return pe_isa_check_env(err);
}

static void expect_printable_line(const struct pe_err *err)
{
	for (const char *c = err->detail; *c; c++)
		ck_assert_msg(*c >= 0x20 && *c < 0x7f, "byte 0x%02x in '%s'", (unsigned char)*c, err->detail);
}

START_TEST(accepted)
{
	struct pe_err err;
	ck_assert_int_eq(check_with(NULL, &err), 0);
	ck_assert_int_eq(check_with("scalar", &err), 0);
	ck_assert_int_eq(check_with("avx2", &err), pe_cpu_avx2() ? 0 : PE_EINVAL);
	ck_assert_int_eq(check_with("avx512", &err), pe_cpu_avx512() ? 0 : PE_EINVAL);
}
END_TEST

START_TEST(unknown_refused)
{
	static const char *const bad[] = {"avx9", "", "Scalar", "avx2,avx512", " avx2"};
	struct pe_err err;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_int_eq(check_with(bad[i], &err), PE_EINVAL);
		ck_assert_int_eq(err.code, PE_EINVAL);
		ck_assert_str_eq(err.param, "POSENC_ISA");
		char quoted[64];
		snprintf(quoted, sizeof quoted, "POSENC_ISA=\"%s\"", bad[i]);
		ck_assert_msg(strstr(err.detail, quoted) != NULL, "'%s' does not show %s", err.detail, quoted);
		ck_assert_msg(strstr(err.detail, "scalar, avx2 and avx512") != NULL, "'%s'", err.detail);
		ck_assert_msg(strstr(err.detail, pe_cpu_avx2() ? "supports scalar, avx2" : "supports scalar)") != NULL,
			      "'%s' does not list what this CPU supports", err.detail);
		expect_printable_line(&err);
	}
	unsetenv("POSENC_ISA");
}
END_TEST

START_TEST(missing_tier_refused)
{
	const char *isa = !pe_cpu_avx2() ? "avx2" : !pe_cpu_avx512() ? "avx512" : NULL;
	if (!isa)
		return; /* every tier is here */
	struct pe_err err;
	ck_assert_int_eq(check_with(isa, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "POSENC_ISA");
	char want[64];
	snprintf(want, sizeof want, "lacks %s", isa);
	ck_assert_msg(strstr(err.detail, want) != NULL, "'%s'", err.detail);
	/* the dispatch itself still runs, on the best tier there is */
	ck_assert_int_eq(pe_isa_active(), pe_cpu_avx2() ? PE_ISA_AVX2 : PE_ISA_SCALAR);
	unsetenv("POSENC_ISA");
}
END_TEST

/* Control bytes become '?', a long value is cut at 32 bytes and marked. */
START_TEST(value_shown_safely)
{
	struct pe_err err;
	char long_value[200];
	memset(long_value, 'x', sizeof long_value - 1);
	long_value[sizeof long_value - 1] = 0;
	ck_assert_int_eq(check_with(long_value, &err), PE_EINVAL);
	ck_assert_msg(strstr(err.detail, "POSENC_ISA=\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...\"") != NULL, "'%s'",
		      err.detail);
	ck_assert_int_eq(check_with("avx2\n\x1b[2J\xff", &err), PE_EINVAL);
	ck_assert_msg(strstr(err.detail, "POSENC_ISA=\"avx2??[2J?\"") != NULL, "'%s'", err.detail);
	expect_printable_line(&err);
	unsetenv("POSENC_ISA");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("isa_env");
	TCase *tc = tcase_create("check");
	tcase_add_test(tc, accepted);
	tcase_add_test(tc, unknown_refused);
	tcase_add_test(tc, missing_tier_refused);
	tcase_add_test(tc, value_shown_safely);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
