/* Unit tests of content negotiation (format= and Accept with q-values) and If-None-Match. */
#include "support/pe_check.h"

#include "posenc/output.h"

#define ALL (PE_FMT_BIT(PE_FMT_JSON) | PE_FMT_BIT(PE_FMT_NPY) | PE_FMT_BIT(PE_FMT_BIN))

static int pick(const char *format, const char *accept, enum pe_format *f)
{
	struct pe_err err = {0};
	return pe_negotiate_format(format, accept, ALL, f, &err);
}

START_TEST(defaults_to_json)
{
	enum pe_format f = PE_FMT_PNG;
	ck_assert_int_eq(pick(NULL, NULL, &f), 0);
	ck_assert_int_eq(f, PE_FMT_JSON);
	ck_assert_int_eq(pick(NULL, "  ", &f), 0);
	ck_assert_int_eq(f, PE_FMT_JSON);
	ck_assert_int_eq(pick(NULL, "*/*", &f), 0);
	ck_assert_int_eq(f, PE_FMT_JSON);
}
END_TEST

START_TEST(accept_with_quality)
{
	enum pe_format f;
	ck_assert_int_eq(pick(NULL, "application/x-npy", &f), 0);
	ck_assert_int_eq(f, PE_FMT_NPY);
	ck_assert_int_eq(pick(NULL, "application/json;q=0.2, application/octet-stream;q=0.9", &f), 0);
	ck_assert_int_eq(f, PE_FMT_BIN);
	ck_assert_int_eq(pick(NULL, "text/html, */*;q=0.1", &f), 0);
	ck_assert_int_eq(f, PE_FMT_JSON);
	/* a specific range beats a wildcard of equal quality */
	ck_assert_int_eq(pick(NULL, "*/*, application/x-npy", &f), 0);
	ck_assert_int_eq(f, PE_FMT_NPY);
	/* case-insensitive media types, spaces around parameters */
	ck_assert_int_eq(pick(NULL, "Application/X-NPY ; q=1", &f), 0);
	ck_assert_int_eq(f, PE_FMT_NPY);
}
END_TEST

START_TEST(not_acceptable)
{
	enum pe_format f;
	struct pe_err err = {0};
	ck_assert_int_eq(pe_negotiate_format(NULL, "text/html", ALL, &f, &err), PE_ENOTACCEPT);
	ck_assert_str_eq(err.param, "Accept");
	ck_assert_int_eq(pick(NULL, "application/json;q=0", &f), PE_ENOTACCEPT);
	/* strtod reads "nan" and "inf": NaN is q 0 (the fuzzer's finding: (int)NaN is undefined),
	 * infinity is clamped to 1 */
	ck_assert_int_eq(pick(NULL, "application/json;q=nan", &f), PE_ENOTACCEPT);
	ck_assert_int_eq(pick(NULL, "application/json;Q=NaN, application/x-npy;q=0.1", &f), 0);
	ck_assert_int_eq(f, PE_FMT_NPY);
	ck_assert_int_eq(pick(NULL, "application/x-npy;q=0.5, application/json;q=inf", &f), 0);
	ck_assert_int_eq(f, PE_FMT_JSON);
	ck_assert_int_eq(pe_negotiate_format(NULL, "image/png", ALL, &f, &err), PE_ENOTACCEPT);
}
END_TEST

/* q=0 on a specific type overrides a wildcard that would cover it (issue 21 item 8), whichever
 * comes first; a more specific range sets a type's quality even when it is lower. */
START_TEST(zero_quality_overrides_wildcards)
{
	enum pe_format f;
	ck_assert_int_eq(pick(NULL, "application/json;q=0, */*", &f), 0);
	ck_assert_int_ne(f, PE_FMT_JSON);
	ck_assert_int_eq(pick(NULL, "*/*, application/json;q=0", &f), 0);
	ck_assert_int_ne(f, PE_FMT_JSON);
	ck_assert_int_eq(pick(NULL, "application/*, application/json;q=0", &f), 0);
	ck_assert_int_ne(f, PE_FMT_JSON);
	ck_assert_int_eq(pick(NULL, "application/json;q=0, application/x-npy;q=0, application/octet-stream;q=0, */*", &f),
			 PE_ENOTACCEPT);
	ck_assert_int_eq(pick(NULL, "application/*;q=0, application/octet-stream", &f), 0);
	ck_assert_int_eq(f, PE_FMT_BIN);
	/* a specific q=0.1 for JSON beats the wildcard's q=1 for it: npy (q 0.5) wins */
	ck_assert_int_eq(pick(NULL, "*/*;q=0.5, application/json;q=0.1", &f), 0);
	ck_assert_int_eq(f, PE_FMT_NPY);
	ck_assert_int_eq(pick(NULL, "application/x-npy;q=0.3, application/octet-stream;q=0.7, application/json;q=0.5", &f), 0);
	ck_assert_int_eq(f, PE_FMT_BIN);
}
END_TEST

START_TEST(format_param_wins)
{
	enum pe_format f;
	struct pe_err err = {0};
	ck_assert_int_eq(pick("npy", "text/html", &f), 0);
	ck_assert_int_eq(f, PE_FMT_NPY);
	ck_assert_int_eq(pe_negotiate_format("xml", NULL, ALL, &f, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "format");
	ck_assert_int_eq(pe_negotiate_format("png", NULL, ALL, &f, &err), PE_ENOTACCEPT);
	ck_assert_str_eq(err.param, "format");
}
END_TEST

START_TEST(etag_matching)
{
	const char *e = "\"abc\"";
	ck_assert(pe_etag_matches("\"abc\"", e));
	ck_assert(pe_etag_matches("W/\"abc\"", e));
	ck_assert(pe_etag_matches("\"x\", \"abc\"", e));
	ck_assert(pe_etag_matches("*", e));
	ck_assert(!pe_etag_matches("\"abcd\"", e));
	ck_assert(!pe_etag_matches("\"ab\"", e));
	ck_assert(!pe_etag_matches("", e));
	ck_assert(!pe_etag_matches("abc", e));
}
END_TEST

START_TEST(gzip_acceptance)
{
	ck_assert(pe_accepts_gzip("gzip"));
	ck_assert(pe_accepts_gzip("deflate, gzip;q=0.5, br"));
	ck_assert(pe_accepts_gzip("x-gzip"));
	ck_assert(pe_accepts_gzip("*"));
	ck_assert(pe_accepts_gzip("GZIP"));
	ck_assert(!pe_accepts_gzip(NULL));
	ck_assert(!pe_accepts_gzip(""));
	ck_assert(!pe_accepts_gzip("br, deflate"));
	ck_assert(!pe_accepts_gzip("gzip;q=0"));
	ck_assert(!pe_accepts_gzip("gzip;q=nan"));
	ck_assert(!pe_accepts_gzip("*, gzip;q=0"));
	ck_assert(!pe_accepts_gzip("gzipx"));
}
END_TEST

static Suite *negotiate_suite(void)
{
	Suite *s = suite_create("negotiate");
	TCase *tc = tcase_create("negotiate");
	tcase_add_test(tc, defaults_to_json);
	tcase_add_test(tc, accept_with_quality);
	tcase_add_test(tc, not_acceptable);
	tcase_add_test(tc, zero_quality_overrides_wildcards);
	tcase_add_test(tc, format_param_wins);
	tcase_add_test(tc, etag_matching);
	tcase_add_test(tc, gzip_acceptance);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(negotiate_suite)
