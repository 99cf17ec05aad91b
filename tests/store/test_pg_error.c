/* Tests for the PostgreSQL store's error classes without a database: each SQLSTATE the store may
 * meet maps to one code (pg_error.c): unavailable or transient ones to PE_EUNAVAIL (503 with
 * Retry-After), a missing privilege on a write to PE_EFORBIDDEN, everything else to PE_ESTORE
 * (never PE_EIO, which means a table whose checksum fails). A real database makes them happen:
 * tests/e2e/test_learned_pg_errors.c. */
#include "store/pg.h"
#include "support/pe_check.h"

START_TEST(transient_states_are_unavailable)
{
	static const char *const st[] = {"08000", "08003", "08006", "08001", "08004", "57014", "55P03", "40001",
					 "40P01", "53000", "53100", "53200", "53300", "57P01", "57P02", "57P03",
					 "57P05", "25P03", "25P04", "25006"};
	for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
		ck_assert_msg(pg_sqlstate_code(st[i], 0) == PE_EUNAVAIL, "%s on a read", st[i]);
		ck_assert_msg(pg_sqlstate_code(st[i], 1) == PE_EUNAVAIL, "%s on a write", st[i]);
	}
	ck_assert_int_eq(pg_sqlstate_code(NULL, 0), PE_EUNAVAIL); /* no answer: libpq's own failure */
	ck_assert_int_eq(pg_sqlstate_code("", 1), PE_EUNAVAIL);
}
END_TEST

START_TEST(privilege_and_configuration)
{
	ck_assert_int_eq(pg_sqlstate_code("42501", 1), PE_EFORBIDDEN);
	ck_assert_int_eq(pg_sqlstate_code("42501", 0), PE_ESTORE);
	static const char *const st[] = {"42P01", "42703", "23505", "22P02", "XX000", "58030", "57P04", "25P02"};
	for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
		ck_assert_msg(pg_sqlstate_code(st[i], 0) == PE_ESTORE, "%s on a read", st[i]);
		ck_assert_msg(pg_sqlstate_code(st[i], 1) == PE_ESTORE, "%s on a write", st[i]);
	}
	ck_assert_int_eq(pe_err_status(PE_ESTORE), 500);
	ck_assert_str_eq(pe_err_slug(PE_ESTORE), "store-error");
}
END_TEST

/* A detail too long for its buffer is cut at a word and marked, keeping its start and its end. */
START_TEST(fit_cuts_at_a_word)
{
	char out[48];
	pg_fit(out, sizeof out, "cannot serve (", "the learned tables do not exist and cannot be created", "); retry");
	ck_assert_str_eq(out, "cannot serve (the learned tables do...); retry");
	pg_fit(out, sizeof out, "a ", "short reason", " b");
	ck_assert_str_eq(out, "a short reason b");
	pg_fit(out, sizeof out, "", "averyveryveryveryveryveryveryveryveryveryverylongword", "");
	ck_assert_str_eq(out, "...");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("store_pg_error");
	TCase *tc = tcase_create("sqlstate");
	tcase_add_test(tc, transient_states_are_unavailable);
	tcase_add_test(tc, privilege_and_configuration);
	tcase_add_test(tc, fit_cuts_at_a_word);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
