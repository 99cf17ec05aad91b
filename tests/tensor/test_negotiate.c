/* Unit tests of content negotiation (format= and Accept with q-values) and If-None-Match. */
#include "support/pe_check.h"

#include "posenc/output.h"

#include <string.h>

#define ALL (PE_FMT_BIT(PE_FMT_JSON) | PE_FMT_BIT(PE_FMT_NPY) | PE_FMT_BIT(PE_FMT_BIN))

/* One negotiation: format= and Accept in, the status and (where rc is 0) the format out.
 * not_json: only "anything but JSON" is asserted; param: the parameter err must name, or NULL. */
struct pick_case {
	const char *format, *accept;
	int rc;
	int want; /* an enum pe_format, or -1: not checked */
	int not_json;
	const char *param;
};

#define OK(fmt, acc, w) { fmt, acc, 0, w, 0, NULL }
#define NOT_JSON(acc) { NULL, acc, 0, -1, 1, NULL }
#define REFUSED(fmt, acc, rc, param) { fmt, acc, rc, -1, 0, param }

static const struct pick_case defaults[] = {
	OK(NULL, NULL, PE_FMT_JSON),
	OK(NULL, "  ", PE_FMT_JSON),
	OK(NULL, "*/*", PE_FMT_JSON),
};

static const struct pick_case with_quality[] = {
	OK(NULL, "application/x-npy", PE_FMT_NPY),
	OK(NULL, "application/json;q=0.2, application/octet-stream;q=0.9", PE_FMT_BIN),
	OK(NULL, "text/html, */*;q=0.1", PE_FMT_JSON),
	/* a specific range beats a wildcard of equal quality */
	OK(NULL, "*/*, application/x-npy", PE_FMT_NPY),
	/* case-insensitive media types, spaces around parameters */
	OK(NULL, "Application/X-NPY ; q=1", PE_FMT_NPY),
};

static const struct pick_case unacceptable[] = {
	REFUSED(NULL, "text/html", PE_ENOTACCEPT, "Accept"),
	REFUSED(NULL, "application/json;q=0", PE_ENOTACCEPT, NULL),
	/* strtod reads "nan" and "inf": NaN is q 0 (the fuzzer's finding: (int)NaN is undefined),
	 * infinity is clamped to 1 */
	REFUSED(NULL, "application/json;q=nan", PE_ENOTACCEPT, NULL),
	OK(NULL, "application/json;Q=NaN, application/x-npy;q=0.1", PE_FMT_NPY),
	OK(NULL, "application/x-npy;q=0.5, application/json;q=inf", PE_FMT_JSON),
	REFUSED(NULL, "image/png", PE_ENOTACCEPT, NULL),
};

/* q=0 on a specific type overrides a wildcard that would cover it (issue 21 item 8), whichever
 * comes first; a more specific range sets a type's quality even when it is lower. */
static const struct pick_case zero_quality[] = {
	NOT_JSON("application/json;q=0, */*"),
	NOT_JSON("*/*, application/json;q=0"),
	NOT_JSON("application/*, application/json;q=0"),
	REFUSED(NULL, "application/json;q=0, application/x-npy;q=0, application/octet-stream;q=0, */*",
		PE_ENOTACCEPT, NULL),
	OK(NULL, "application/*;q=0, application/octet-stream", PE_FMT_BIN),
	/* a specific q=0.1 for JSON beats the wildcard's q=1 for it: npy (q 0.5) wins */
	OK(NULL, "*/*;q=0.5, application/json;q=0.1", PE_FMT_NPY),
	OK(NULL, "application/x-npy;q=0.3, application/octet-stream;q=0.7, application/json;q=0.5", PE_FMT_BIN),
};

static const struct pick_case format_param[] = {
	OK("npy", "text/html", PE_FMT_NPY),
	REFUSED("xml", NULL, PE_EINVAL, "format"),
	REFUSED("png", NULL, PE_ENOTACCEPT, "format"),
};

/* Each case's failure names its table, index, format= and Accept. */
static void check_picks(const char *table, const struct pick_case *c, size_t n)
{
	for (size_t i = 0; i < n; i++, c++) {
		enum pe_format f = PE_FMT_PNG;
		struct pe_err err = {0};
		int rc = pe_negotiate_format(c->format, c->accept, ALL, &f, &err);
		const char *fm = c->format ? c->format : "(none)", *ac = c->accept ? c->accept : "(none)";
		ck_assert_msg(rc == c->rc, "%s[%zu] format=%s Accept: %s: rc %d, want %d", table, i, fm, ac,
			      rc, c->rc);
		if (c->want >= 0)
			ck_assert_msg((int)f == c->want, "%s[%zu] format=%s Accept: %s: format %d, want %d",
				      table, i, fm, ac, (int)f, c->want);
		if (c->not_json)
			ck_assert_msg(f != PE_FMT_JSON, "%s[%zu] Accept: %s: JSON chosen", table, i, ac);
		if (c->param)
			ck_assert_msg(err.param && strcmp(err.param, c->param) == 0,
				      "%s[%zu] format=%s Accept: %s: err.param %s, want %s", table, i, fm, ac,
				      err.param ? err.param : "(null)", c->param);
	}
}

#define CHECK_PICKS(table) check_picks(#table, table, sizeof table / sizeof table[0])

START_TEST(defaults_to_json) { CHECK_PICKS(defaults); }
END_TEST

START_TEST(accept_with_quality) { CHECK_PICKS(with_quality); }
END_TEST

START_TEST(not_acceptable) { CHECK_PICKS(unacceptable); }
END_TEST

START_TEST(zero_quality_overrides_wildcards) { CHECK_PICKS(zero_quality); }
END_TEST

START_TEST(format_param_wins) { CHECK_PICKS(format_param); }
END_TEST

/* An input header and whether it must match / accept. */
struct header_case {
	const char *value;
	int want;
};

static const struct header_case etags[] = {
	{ "\"abc\"", 1 }, { "W/\"abc\"", 1 }, { "\"x\", \"abc\"", 1 }, { "*", 1 },
	{ "\"abcd\"", 0 }, { "\"ab\"", 0 }, { "", 0 }, { "abc", 0 },
};

START_TEST(etag_matching)
{
	for (size_t i = 0; i < sizeof etags / sizeof etags[0]; i++)
		ck_assert_msg(!!pe_etag_matches(etags[i].value, "\"abc\"") == etags[i].want,
			      "If-None-Match: %s against \"abc\": want %s", etags[i].value,
			      etags[i].want ? "a match" : "no match");
}
END_TEST

static const struct header_case encodings[] = {
	{ "gzip", 1 }, { "deflate, gzip;q=0.5, br", 1 }, { "x-gzip", 1 }, { "*", 1 }, { "GZIP", 1 },
	{ NULL, 0 }, { "", 0 }, { "br, deflate", 0 }, { "gzip;q=0", 0 }, { "gzip;q=nan", 0 },
	{ "*, gzip;q=0", 0 }, { "gzipx", 0 },
};

START_TEST(gzip_acceptance)
{
	for (size_t i = 0; i < sizeof encodings / sizeof encodings[0]; i++)
		ck_assert_msg(!!pe_accepts_gzip(encodings[i].value) == encodings[i].want,
			      "Accept-Encoding: %s: want %s", encodings[i].value ? encodings[i].value : "(none)",
			      encodings[i].want ? "gzip" : "no gzip");
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
