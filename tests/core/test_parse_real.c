/* A real parameter written as a decimal integer ("10000", the usual form of a default) is read
 * without strtod (src/core/params.c): the value, sign of zero included, must be strtod's for every
 * such text, with leading zeros, a '-', every length up to 15 digits and past it (strtod again),
 * as a scalar and as a list value; texts that are not numbers are still refused. */
#include "posenc/core.h"
#include "support/pe_check.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct pe_param_spec spec[] = {
	{"x", PE_PT_REAL, "1", -DBL_MAX, DBL_MAX, NULL, "a real"},
	{"l", PE_PT_LIST, "", -DBL_MAX, DBL_MAX, NULL, "a list of reals"},
};

static int one_shape(const struct pe_params *p, struct pe_shape *s)
{
	(void)p;
	s->rank = 1;
	s->dim[0] = 1;
	return 0;
}

static const struct pe_table_def def = {
	.name = "test/parse",
	.params = spec,
	.nparams = 2,
	.fixed_dtype = PE_DTYPE_COUNT_,
	.shape = one_shape,
};

/* text as x and as a list of two values: both strtod's value, bit for bit */
static void check(const char *text)
{
	double want = strtod(text, NULL);
	struct pe_params p;
	struct pe_err err = {0};
	char list[80];
	pe_params_init(&p, &def);
	ck_assert_msg(pe_params_set(&p, "x", text, &err) == 0, "%s: %s", text, err.detail);
	ck_assert_msg(memcmp(&p.v[0].r, &want, sizeof want) == 0, "%s: %a, strtod %a", text, p.v[0].r, want);
	snprintf(list, sizeof list, "%s,%s", text, text);
	ck_assert_msg(pe_params_set(&p, "l", list, &err) == 0, "%s: %s", list, err.detail);
	ck_assert_uint_eq(p.v[1].nlist, 2);
	ck_assert(memcmp(&p.v[1].list[1], &want, sizeof want) == 0);
	pe_params_destroy(&p);
}

START_TEST(integers_as_strtod_reads_them)
{
	char t[40];
	for (int i = 0; i <= 20000; i++) {
		snprintf(t, sizeof t, "%d", i);
		check(t);
		snprintf(t, sizeof t, "-%d", i);
		check(t);
		snprintf(t, sizeof t, "000%d", i);
		check(t);
	}
	unsigned long long seed = 12345;
	for (int n = 1; n <= 20; n++) /* every length, the 15-digit limit and past it */
		for (int k = 0; k < 300; k++) {
			for (int i = 0; i < n; i++) {
				seed = seed * 6364136223846793005ull + 1442695040888963407ull;
				t[i] = (char)('0' + (seed >> 33) % 10);
			}
			t[n] = 0;
			check(t);
			memmove(t + 1, t, (size_t)n + 1);
			t[0] = '-';
			check(t);
		}
	check("999999999999999");
	check("-999999999999999");
	check("9007199254740993"); /* 16 digits: rounded, by strtod */
	check("-0");
	check("0");
}
END_TEST

START_TEST(non_numbers_still_refused)
{
	const char *bad[] = {"-", "+1", "1-", "--1", "1 ", " 1", "0x10", "1a", "", "1e999"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct pe_params p;
		struct pe_err err = {0};
		pe_params_init(&p, &def);
		ck_assert_msg(pe_params_set(&p, "x", bad[i], &err) == PE_EINVAL, "'%s' accepted", bad[i]);
		pe_params_destroy(&p);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("parse_real");
	TCase *tc = tcase_create("integers");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, integers_as_strtod_reads_them);
	tcase_add_test(tc, non_numbers_still_refused);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
