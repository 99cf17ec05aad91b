/* posenc with POSENC_ISA set (src/core/isa.c's pe_isa_check_env, src/cli/main.c): a value that names
 * no SIMD tier, an empty one, or a tier this CPU lacks is refused before anything runs, status 2
 * and one stderr line naming POSENC_ISA, the value, the accepted values and what this CPU
 * supports; a tier the CPU has (scalar always) runs and gives the same bytes as the default. */
#include "cli/run.h"
#include "support/pe_cpu.h"


static const char *const unknown[] = {"avx9", "", "AVX2", "scalar ", "sse4"};
#define NUNKNOWN (int)(sizeof unknown / sizeof unknown[0])

static void run_with(struct crun *r, const char *isa)
{
	struct crun_opts o = {0};
	ck_assert_int_eq(setenv("POSENC_ISA", isa, 1), 0);
	crun(r, &o, "sinusoidal", "--len", "4", "--dim", "8", NULL);
	unsetenv("POSENC_ISA");
}

/* Status 2, nothing on stdout, one stderr line with each of the words. */
static void expect_refused(const struct crun *r, const char *isa, const char *const *words)
{
	ck_assert_msg(r->status == 2, "POSENC_ISA=\"%s\": status %d, expected 2; stderr: %s", isa, r->status,
		      r->err ? r->err : "");
	ck_assert_uint_eq(r->nout, 0);
	ck_assert_msg(r->nerr > 8 && !strncmp(r->err, "posenc: ", 8), "stderr: %s", r->err ? r->err : "");
	ck_assert_msg(strchr(r->err, '\n') == r->err + r->nerr - 1, "not one line: %s", r->err);
	char quoted[64];
	snprintf(quoted, sizeof quoted, "POSENC_ISA=\"%s\"", isa);
	ck_assert_msg(strstr(r->err, quoted) != NULL, "'%s' does not name %s", r->err, quoted);
	for (; *words; words++)
		ck_assert_msg(strstr(r->err, *words) != NULL, "'%s' does not say '%s'", r->err, *words);
	/* what this CPU supports, in the line */
	ck_assert_msg(strstr(r->err, "supports scalar") != NULL, "'%s' does not list what this CPU supports", r->err);
	ck_assert_msg(!strstr(r->err, "supports scalar, avx2") == !pe_cpu_avx2(), "'%s': avx2 listed wrongly", r->err);
}

START_TEST(unknown_value_refused)
{
	struct crun r;
	static const char *const words[] = {"scalar, avx2 and avx512", NULL};
	run_with(&r, unknown[_i]);
	expect_refused(&r, unknown[_i], words);
	crun_free(&r);
}
END_TEST

/* A tier the CPU lacks (on a CPU with AVX-512 every tier runs: nothing to refuse). */
START_TEST(missing_tier_refused)
{
	const char *isa = !pe_cpu_avx2() ? "avx2" : !pe_cpu_avx512() ? "avx512" : NULL;
	if (!isa) {
		fprintf(stderr, "cli_isa: this CPU has every tier; no missing tier to refuse\n");
		return;
	}
	struct crun r;
	const char *const words[] = {"lacks", isa, NULL};
	run_with(&r, isa);
	expect_refused(&r, isa, words);
	crun_free(&r);
}
END_TEST

/* Control characters in the value never break the one line. */
START_TEST(control_bytes_shown_safely)
{
	struct crun r;
	run_with(&r, "avx2\nx");
	ck_assert_int_eq(r.status, 2);
	ck_assert_msg(strchr(r.err, '\n') == r.err + r.nerr - 1, "not one line: %s", r.err);
	ck_assert_msg(strstr(r.err, "POSENC_ISA=\"avx2?x\"") != NULL, "stderr: %s", r.err);
	crun_free(&r);
}
END_TEST

/* Each tier the CPU has runs, with the default's bytes (the table's values are the same in every
 * tier to the printed digits: sinusoidal JSON at this size). */
START_TEST(valid_tier_runs)
{
	static const char *const tiers[] = {"scalar", "avx2", "avx512"};
	if ((_i == 1 && !pe_cpu_avx2()) || (_i == 2 && !pe_cpu_avx512()))
		return;
	struct crun r, base;
	struct crun_opts o = {0};
	unsetenv("POSENC_ISA");
	crun(&base, &o, "sinusoidal", "--len", "4", "--dim", "8", "--format", "bin", NULL);
	crun_expect_ok(&base);
	ck_assert_int_eq(setenv("POSENC_ISA", tiers[_i], 1), 0);
	crun(&r, &o, "sinusoidal", "--len", "4", "--dim", "8", "--format", "bin", NULL);
	unsetenv("POSENC_ISA");
	crun_expect_ok(&r);
	ck_assert_uint_eq(r.nout, 4 * 8 * 4);
	ck_assert_uint_eq(r.nout, base.nout);
	crun_free(&r);
	crun_free(&base);
}
END_TEST

static Suite *cli_isa_suite(void)
{
	Suite *s = suite_create("cli_isa");
	TCase *tc = tcase_create("isa");
	tcase_add_loop_test(tc, unknown_value_refused, 0, NUNKNOWN);
	tcase_add_test(tc, missing_tier_refused);
	tcase_add_test(tc, control_bytes_shown_safely);
	tcase_add_loop_test(tc, valid_tier_runs, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(cli_isa_suite)
