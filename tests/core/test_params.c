/* The parameter layer (src/core/params.c) as clients reach it: strict numbers, one value per key,
 * ranges, enums that list their choices, required parameters, err->param always naming the
 * offending key, canonical keys independent of order and spelling, and the sinusoidal table's
 * variant-specific rules. A registry test checks every table's built-in defaults parse.
 *
 * Generic parsing (bool, list) is driven through a table defined here, since no registered table
 * needs to have every parameter type. */
#include "posenc/core.h"
#include "support/pe_check.h"
#include "support/pe_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parse and finish query on table; expect PE_EINVAL naming param, with detail containing want
 * (if not NULL). */
static void expect_fail(const char *table, const char *query, const char *param, const char *want)
{
	struct pe_params p;
	struct pe_err err = {0};
	int rc = pe_query_params(&p, table, query, &err);
	ck_assert_msg(rc == PE_EINVAL, "%s: rc %d, expected PE_EINVAL", query, rc);
	ck_assert_int_eq(err.code, PE_EINVAL);
	ck_assert_msg(strcmp(err.param, param) == 0, "%s: err.param '%s', expected '%s' (%s)", query, err.param,
		      param, err.detail);
	ck_assert_msg(err.detail[0] != 0, "%s: empty detail", query);
	if (want)
		ck_assert_msg(strstr(err.detail, want) != NULL, "%s: detail '%s' lacks '%s'", query, err.detail, want);
	pe_params_destroy(&p);
}

/* Parse and finish query on table, which must succeed; the canonical key goes into buf. */
static void canonical(const char *table, const char *query, char *buf, size_t cap)
{
	struct pe_params p;
	struct pe_err err = {0};
	ck_assert_msg(pe_query_params(&p, table, query, &err) == 0, "%s: %s (%s)", query, err.detail, err.param);
	int n = pe_params_canonical(&p, buf, cap);
	ck_assert_msg(n > 0 && (size_t)n == strlen(buf), "%s: canonical returned %d", query, n);
	pe_params_destroy(&p);
}

#define SIN "sinusoidal"

START_TEST(unknown_parameter)
{
	expect_fail(SIN, "len=4&dim=4&lenght=5", "lenght", "unknown parameter");
	expect_fail(SIN, "Len=4", "Len", NULL); /* names are case-sensitive */
	expect_fail(SIN, "len=4&dim=4&dtype=f32", "dtype", NULL); /* dtype is not a table parameter */
}
END_TEST

START_TEST(repeated_parameter)
{
	expect_fail(SIN, "len=4&dim=4&len=4", "len", "more than once");
	expect_fail(SIN, "len=4&dim=4&base=10&base=10000", "base", "more than once");
	/* a rejected value does not mark the key as given; an accepted one does */
	struct pe_params p;
	struct pe_err err = {0};
	pe_params_init(&p, pe_table_find(SIN));
	ck_assert_int_eq(pe_params_set(&p, "len", "x", &err), PE_EINVAL);
	ck_assert_int_eq(pe_params_set(&p, "len", "4", &err), 0);
	ck_assert_int_eq(pe_params_set(&p, "len", "4", &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "len");
	pe_params_destroy(&p);
}
END_TEST

START_TEST(empty_value)
{
	expect_fail(SIN, "len=&dim=4", "len", "empty");
	expect_fail(SIN, "len=4&dim=4&base=", "base", "empty");
	expect_fail(SIN, "len=4&dim=4&variant=", "variant", "empty");
	struct pe_params p;
	struct pe_err err = {0};
	pe_params_init(&p, pe_table_find(SIN));
	ck_assert_int_eq(pe_params_set(&p, "dim", NULL, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "dim");
	pe_params_destroy(&p);
}
END_TEST

START_TEST(integers_are_strict)
{
	static const char *const bad[] = {
		"+5", "1e3", "5.0", "5.", " 5", "5 ", "0x10", "-", "--5", "5-", "1_000", "٥", "nan", "inf",
		"18446744073709551616",  /* 2^64 */
		"18446744073709551615",  /* 2^64 - 1: still past int64 */
		"9223372036854775808",   /* 2^63 */
		"-9223372036854775809",  /* below INT64_MIN */
		"99999999999999999999999999999999",
	};
	char q[128];
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(q, sizeof q, "len=4&dim=%s", bad[i]);
		expect_fail(SIN, q, "dim", NULL);
		snprintf(q, sizeof q, "len=4&dim=4&offset=%s", bad[i]);
		expect_fail(SIN, q, "offset", NULL);
	}
	/* the largest int64 parses as a number and then fails the range, with its own message */
	expect_fail(SIN, "len=4&dim=4&offset=9223372036854775807", "offset", "between");
	expect_fail(SIN, "len=-1&dim=4", "len", "between");
	/* leading zeros and "-0" are plain decimal integers */
	char a[256], b[256];
	canonical(SIN, "len=0004&dim=4&offset=-0", a, sizeof a);
	canonical(SIN, "len=4&dim=4", b, sizeof b);
	ck_assert_str_eq(a, b);
}
END_TEST

START_TEST(reals_are_finite_decimals)
{
	static const char *const bad[] = {
		"nan", "NaN", "inf", "-inf", "Infinity", "0x10", "0x1p4", "1e", "e4", "1e+", "1..0", "1.0.0",
		"10000 ", " 10000", "1,5", "--1", "1e400", "1e-400", "10000abc", ".", "+", "1e4e4",
	};
	char q[128];
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(q, sizeof q, "len=4&dim=4&base=%s", bad[i]);
		expect_fail(SIN, q, "base", NULL);
	}
	/* spellings of the same number all parse */
	static const char *const good[] = {"10000", "1e4", "1E4", "1e+4", "10000.0", "10000.", "1.0e4", "0.1e5",
					   "010000", "100000e-1"};
	char ref[256], got[256];
	canonical(SIN, "len=4&dim=4&base=10000", ref, sizeof ref);
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		snprintf(q, sizeof q, "len=4&dim=4&base=%s", good[i]);
		canonical(SIN, q, got, sizeof got);
		ck_assert_msg(strcmp(got, ref) == 0, "base=%s: '%s' != '%s'", good[i], got, ref);
	}
}
END_TEST

START_TEST(out_of_range)
{
	expect_fail(SIN, "len=0&dim=4", "len", "between");
	expect_fail(SIN, "len=1073741825&dim=4", "len", "between"); /* 2^30 + 1 */
	expect_fail(SIN, "len=4&dim=0", "dim", "between");
	expect_fail(SIN, "len=4&dim=65537", "dim", "between");
	expect_fail(SIN, "len=4&dim=4&base=0", "base", "between");
	expect_fail(SIN, "len=4&dim=4&base=-10000", "base", "between");
	/* bounds as written, not as %.17g prints them (1.0000000000000001e+300) */
	expect_fail(SIN, "len=4&dim=4&base=1e301", "base", "base must be between 1e-300 and 1e+300");
	expect_fail(SIN, "len=4&dim=4&offset=-1", "offset", "between");
	expect_fail(SIN, "len=4&dim=4&offset=4503599627370497", "offset", "between"); /* 2^52 + 1 */
	expect_fail(SIN, "len=4&dim=4&variant=t2t&min_timescale=0", "min_timescale", "between");
	expect_fail(SIN, "len=4&dim=4&variant=t2t&max_timescale=-1", "max_timescale", "between");
	/* the bounds themselves are inside */
	char buf[512];
	canonical(SIN, "len=1&dim=65536", buf, sizeof buf);
	canonical(SIN, "len=1073741824&dim=1&offset=4503599627370496", buf, sizeof buf);
	ck_assert_ptr_nonnull(strstr(buf, "offset=4503599627370496"));
}
END_TEST

START_TEST(bad_enum_lists_choices)
{
	expect_fail(SIN, "len=4&dim=4&variant=sinusoid", "variant", "vaswani, concat, t2t");
	expect_fail(SIN, "len=4&dim=4&variant=Vaswani", "variant", "vaswani, concat, t2t");
	expect_fail(SIN, "len=4&dim=4&compat=ggml", "compat", "exact, hf"); /* ggml is RoPE only */
	expect_fail(SIN, "len=4&dim=4&compat=0", "compat", "exact, hf");
	/* a refused choice says so (a route may list forms of its own after the table's); other
	 * refusals of the same parameter do not */
	struct pe_params p;
	struct pe_err err = {0};
	pe_params_init(&p, pe_table_find(SIN));
	ck_assert_int_eq(pe_params_set(&p, "variant", "sinusoid", &err), PE_EINVAL);
	ck_assert_int_eq(err.choices, 1);
	ck_assert_int_eq(pe_params_set(&p, "variant", "", &err), PE_EINVAL);
	ck_assert_int_eq(err.choices, 0);
	ck_assert_int_eq(pe_params_set(&p, "variant", "t2t", &err), 0);
	ck_assert_int_eq(pe_params_set(&p, "variant", "nope", &err), PE_EINVAL); /* given twice */
	ck_assert_int_eq(err.choices, 0);
	pe_params_destroy(&p);
}
END_TEST

START_TEST(required_missing)
{
	expect_fail(SIN, "dim=4", "len", "required");
	expect_fail(SIN, "len=4", "dim", "required");
	expect_fail(SIN, "base=10", "len", "required");
}
END_TEST

START_TEST(canonical_key)
{
	char a[512], b[512], c[512];
	/* order-independent */
	canonical(SIN, "len=16&dim=8&base=500&offset=3&variant=concat&compat=hf", a, sizeof a);
	canonical(SIN, "compat=hf&variant=concat&offset=3&base=500&dim=8&len=16", b, sizeof b);
	ck_assert_str_eq(a, b);
	/* spelling-independent */
	canonical(SIN, "len=4&dim=4&base=1e4", a, sizeof a);
	canonical(SIN, "len=4&dim=4&base=10000", b, sizeof b);
	ck_assert_str_eq(a, b);
	/* defaults filled: giving a default explicitly is the same table and the same key */
	canonical(SIN, "len=4&dim=4", c, sizeof c);
	ck_assert_str_eq(a, c);
	canonical(SIN, "len=4&dim=4&base=10000&offset=0&variant=vaswani&compat=exact", b, sizeof b);
	ck_assert_str_eq(b, c);
	ck_assert_ptr_nonnull(strstr(c, "base="));
	ck_assert_ptr_nonnull(strstr(c, "offset=0"));
	ck_assert_ptr_nonnull(strstr(c, "variant=vaswani"));
	ck_assert_ptr_nonnull(strstr(c, "compat=exact"));
	/* parameters that do not apply stay out of the key */
	ck_assert_ptr_null(strstr(c, "timescale"));
	/* different values give different keys */
	canonical(SIN, "len=4&dim=4&base=10001", b, sizeof b);
	ck_assert_str_ne(b, c);
	canonical(SIN, "len=4&dim=4&base=0.1", a, sizeof a);
	canonical(SIN, "len=4&dim=4&base=0.10000000000000001", b, sizeof b); /* the same double */
	ck_assert_str_eq(a, b);
	/* t2t: min_timescale defaults to 1 and max_timescale to base */
	canonical(SIN, "len=4&dim=4&variant=t2t&base=500", a, sizeof a);
	canonical(SIN, "len=4&dim=4&variant=t2t&base=500&min_timescale=1&max_timescale=500", b, sizeof b);
	ck_assert_str_eq(a, b);
	ck_assert_ptr_nonnull(strstr(a, "min_timescale=1"));
	ck_assert_ptr_nonnull(strstr(a, "max_timescale=5"));
	/* an explicit max_timescale beats base */
	canonical(SIN, "len=4&dim=4&variant=t2t&base=500&max_timescale=700", c, sizeof c);
	ck_assert_str_ne(a, c);
}
END_TEST

/* The canonical key is a valid query: parsing it again gives the same key. */
START_TEST(canonical_key_round_trips)
{
	static const char *const qs[] = {
		"len=4&dim=4",
		"len=7&dim=33&base=2.5&offset=1000000&compat=hf",
		"len=4&dim=6&variant=concat&base=0.1",
		"len=4&dim=5&variant=t2t",
		"len=4&dim=5&variant=t2t&min_timescale=0.3&max_timescale=123456.789&base=1e300",
	};
	char a[512], b[512];
	for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
		canonical(SIN, qs[i], a, sizeof a);
		canonical(SIN, a, b, sizeof b);
		ck_assert_msg(strcmp(a, b) == 0, "%s: '%s' then '%s'", qs[i], a, b);
	}
}
END_TEST

/* query's canonical key (n characters) fits a buffer of n + 1 bytes and not one of n; buffers of 1
 * and 0 bytes fail too. */
static void canonical_needs_exactly(const char *query)
{
	struct pe_params p;
	struct pe_err err = {0};
	char buf[256];
	pe_params_init(&p, pe_table_find(SIN));
	ck_assert_int_eq(pe_query_set(&p, query, NULL, &err), 0);
	ck_assert_int_eq(pe_params_finish(&p, &err), 0);
	int n = pe_params_canonical(&p, buf, sizeof buf);
	ck_assert_msg(n > 0, "%s: canonical returned %d", query, n);
	ck_assert_msg(pe_params_canonical(&p, buf, (size_t)n + 1) == n, "%s: does not fit %d + 1 bytes", query, n);
	ck_assert_msg(pe_params_canonical(&p, buf, (size_t)n) == -1, "%s: fits %d bytes", query, n);
	ck_assert_msg(pe_params_canonical(&p, buf, 1) == -1, "%s: fits 1 byte", query);
	ck_assert_msg(pe_params_canonical(&p, buf, 0) == -1, "%s: fits 0 bytes", query);
	pe_params_destroy(&p);
}

START_TEST(canonical_buffer_too_small)
{
	canonical_needs_exactly("len=4&dim=4");
	/* The last value's canonical text (1e+03) is not its only round-tripping spelling (1000): a
	 * buffer one byte short fails too, instead of fitting the other spelling (found by fuzzing). */
	canonical_needs_exactly("len=4&dim=4&variant=t2t&max_timescale=1000");
}
END_TEST

START_TEST(sinusoidal_variant_rules)
{
	expect_fail(SIN, "len=4&dim=5&variant=concat", "dim", "even");
	expect_fail(SIN, "len=4&dim=4&max_timescale=100", "max_timescale", "t2t");
	expect_fail(SIN, "len=4&dim=4&variant=concat&max_timescale=100", "max_timescale", "t2t");
	expect_fail(SIN, "len=4&dim=4&variant=vaswani&min_timescale=1", "min_timescale", "t2t");
	/* odd dim is fine for vaswani and t2t */
	char buf[512];
	canonical(SIN, "len=4&dim=5", buf, sizeof buf);
	canonical(SIN, "len=4&dim=5&variant=t2t&min_timescale=2&max_timescale=100", buf, sizeof buf);
}
END_TEST

START_TEST(accessors_after_finish)
{
	struct pe_params p;
	struct pe_err err = {0};
	pe_params_init(&p, pe_table_find(SIN));
	ck_assert_int_eq(pe_query_set(&p, "dim=6&len=3&variant=t2t&base=1e3&offset=12", NULL, &err), 0);
	ck_assert_int_eq(pe_params_finish(&p, &err), 0);
	ck_assert_int_eq(pe_param_int(&p, "len"), 3);
	ck_assert_int_eq(pe_param_int(&p, "dim"), 6);
	ck_assert_int_eq(pe_param_int(&p, "offset"), 12);
	ck_assert_double_eq(pe_param_real(&p, "base"), 1000.0);
	ck_assert_double_eq(pe_param_real(&p, "max_timescale"), 1000.0);
	ck_assert_double_eq(pe_param_real(&p, "min_timescale"), 1.0);
	ck_assert_int_eq(pe_param_enum(&p, "variant"), 2);
	ck_assert_int_eq(pe_param_enum(&p, "compat"), 0);
	ck_assert_int_eq(pe_param_index(p.def, "offset"), 3);
	ck_assert_int_eq(pe_param_index(p.def, "nope"), -1);
	struct pe_shape s;
	ck_assert_int_eq(pe_table_shape(&p, &s), 0);
	ck_assert_int_eq(s.rank, 2);
	ck_assert_uint_eq(s.dim[0], 3);
	ck_assert_uint_eq(s.dim[1], 6);
	pe_params_destroy(&p);
}
END_TEST

/* A table of every parameter type, for parsing that no registered table needs to cover. */
static const char *const colors[] = {"red", "green", NULL};
static const struct pe_param_spec all_spec[] = {
	{"n", PE_PT_INT, "3", -5, 5, NULL, "int"},
	{"x", PE_PT_REAL, "0.5", -1, 1, NULL, "real"},
	{"c", PE_PT_ENUM, "red", 0, 0, colors, "enum"},
	{"b", PE_PT_BOOL, "0", 0, 1, NULL, "bool"},
	{"l", PE_PT_LIST, "", 0, 10, NULL, "list"},
	{"r", PE_PT_INT, NULL, 1, 100, NULL, "required"},
	{"il", PE_PT_LIST, "", -1e300, 1e300, PE_LIST_INTEGERS, "integer list"},
};
static int all_shape(const struct pe_params *p, struct pe_shape *s)
{
	s->rank = 1;
	s->dim[0] = (size_t)pe_param_int(p, "r");
	return 0;
}
static const struct pe_table_def all_types = {
	.name = "test/all",
	.params = all_spec,
	.nparams = sizeof all_spec / sizeof all_spec[0],
	.fixed_dtype = PE_DTYPE_COUNT_,
	.shape = all_shape,
};

static int all_query(const char *query, char *canon, size_t cap, struct pe_err *err)
{
	struct pe_params p;
	pe_params_init(&p, &all_types);
	int rc = pe_query_set(&p, query, NULL, err);
	if (rc == 0)
		rc = pe_params_finish(&p, err);
	if (rc == 0 && canon)
		ck_assert_int_gt(pe_params_canonical(&p, canon, cap), 0);
	pe_params_destroy(&p);
	return rc;
}

START_TEST(bool_and_list)
{
	char a[512], b[512];
	struct pe_err err = {0};
	ck_assert_int_eq(all_query("r=1&b=true&l=1,2.5,1e1", a, sizeof a, &err), 0);
	ck_assert_int_eq(all_query("l=1,2.50,10&r=1&b=1", b, sizeof b, &err), 0);
	ck_assert_str_eq(a, b);
	ck_assert_ptr_nonnull(strstr(a, "b=1"));
	ck_assert_msg(strstr(a, "l=1,2.5,") != NULL, "canonical %s", a);
	ck_assert_int_eq(all_query("r=1&b=false", a, sizeof a, &err), 0);
	ck_assert_int_eq(all_query("r=1&b=0", b, sizeof b, &err), 0);
	ck_assert_str_eq(a, b);
	ck_assert_ptr_null(strstr(a, "l=")); /* optional with no default: not in the key */
	static const char *const bad_bool[] = {"2", "yes", "TRUE", "01", "-1", " 1"};
	char q[64];
	for (size_t i = 0; i < sizeof bad_bool / sizeof bad_bool[0]; i++) {
		snprintf(q, sizeof q, "r=1&b=%s", bad_bool[i]);
		memset(&err, 0, sizeof err);
		ck_assert_msg(all_query(q, NULL, 0, &err) == PE_EINVAL, "%s accepted", q);
		ck_assert_str_eq(err.param, "b");
	}
	static const char *const bad_list[] = {"1,", ",1", "1,,2", "1,nan", "1,inf", "1,11", "1,-0.5", "1;2", "0x1"};
	for (size_t i = 0; i < sizeof bad_list / sizeof bad_list[0]; i++) {
		snprintf(q, sizeof q, "r=1&l=%s", bad_list[i]);
		memset(&err, 0, sizeof err);
		ck_assert_msg(all_query(q, NULL, 0, &err) == PE_EINVAL, "%s accepted", q);
		ck_assert_str_eq(err.param, "l");
	}
	/* integer lists take plain decimal integers only, as INT parameters do (README) */
	static const char *const bad_int_list[] = {"1e3", "1,1e3", "1.0", "1,2.5", "+4", "1,0x10", "1, 2",
						   "9007199254740993", "1,-"};
	for (size_t i = 0; i < sizeof bad_int_list / sizeof bad_int_list[0]; i++) {
		snprintf(q, sizeof q, "r=1&il=%s", bad_int_list[i]);
		memset(&err, 0, sizeof err);
		ck_assert_msg(all_query(q, NULL, 0, &err) == PE_EINVAL, "%s accepted", q);
		ck_assert_str_eq(err.param, "il");
	}
	ck_assert_int_eq(all_query("r=1&il=1000,-2,0,9007199254740992", a, sizeof a, &err), 0);
	ck_assert_msg(strstr(a, "il=1000,-2,0,9007199254740992") != NULL, "canonical %s", a);
	/* at most PE_MAX_LIST values */
	size_t cap = 2 * (PE_MAX_LIST + 1) + 8;
	char *big = malloc(cap);
	ck_assert_ptr_nonnull(big);
	char *w = big + sprintf(big, "r=1&l=1");
	for (int i = 1; i < PE_MAX_LIST; i++)
		w += sprintf(w, ",1");
	ck_assert_int_eq(all_query(big, NULL, 0, &err), 0);
	strcpy(w, ",1");
	memset(&err, 0, sizeof err);
	ck_assert_int_eq(all_query(big, NULL, 0, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "l");
	free(big);
	/* int range is inclusive on both sides, with negative numbers */
	ck_assert_int_eq(all_query("r=1&n=-5", NULL, 0, &err), 0);
	ck_assert_int_eq(all_query("r=100&n=5", NULL, 0, &err), 0);
	memset(&err, 0, sizeof err);
	ck_assert_int_eq(all_query("r=1&n=-6", NULL, 0, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "n");
	ck_assert_int_eq(all_query("r=1&x=-1", NULL, 0, &err), 0);
	memset(&err, 0, sizeof err);
	ck_assert_int_eq(all_query("r=1&x=1.0000000000000002", NULL, 0, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "x");
	memset(&err, 0, sizeof err);
	ck_assert_int_eq(all_query("n=1", NULL, 0, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "r");
	ck_assert_ptr_nonnull(strstr(err.detail, "required"));
}
END_TEST

/* A decimal beyond a double's range is refused for what it is, not as "not a finite number": past
 * the parameter's range, the range (with its bound); inside it, too close to 0 for a double. */
START_TEST(reals_beyond_a_double)
{
	/* sinusoidal's base is 1e-300 .. 1e300: under- and overflows are below or above it */
	static const char *const outside[] = {"1e-320", "1e-400", "-1e-400", "4.9e-324", "1e400", "-1e400",
					      "1e99999999999"};
	char q[128];
	for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
		snprintf(q, sizeof q, "len=4&dim=4&base=%s", outside[i]);
		expect_fail(SIN, q, "base", "base must be between 1e-300 and ");
	}
	/* test/all's x is -1 .. 1, l (a list) 0 .. 10: a tiny magnitude is inside them */
	static const char *const tiny[] = {"1e-320", "-1e-320", "1e-400", "-1e-400", "2e-308",
					   "2.2250738585072011e-308"};
	struct pe_err err;
	char want[160];
	for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
		memset(&err, 0, sizeof err);
		snprintf(q, sizeof q, "r=1&x=%s", tiny[i]);
		ck_assert_msg(all_query(q, NULL, 0, &err) == PE_EINVAL, "%s accepted", q);
		ck_assert_str_eq(err.param, "x");
		snprintf(want, sizeof want, "x=%s is too close to 0 for a double: a nonzero value needs a magnitude "
			 "of at least 2.2250738585072014e-308", tiny[i]);
		ck_assert_str_eq(err.detail, want);
	}
	memset(&err, 0, sizeof err);
	ck_assert_int_eq(all_query("r=1&l=1,1e-320", NULL, 0, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "l");
	ck_assert_str_eq(err.detail, "l: value 2 is too close to 0 for a double: a nonzero value needs a magnitude of "
			 "at least 2.2250738585072014e-308");
	/* a negative tiny list value is below l's 0, an overflow above x's 1; a list's value is named
	 * by its place */
	memset(&err, 0, sizeof err);
	ck_assert_int_eq(all_query("r=1&l=1,-1e-400", NULL, 0, &err), PE_EINVAL);
	ck_assert_str_eq(err.detail, "l: value 2 must be between 0 and 10");
	memset(&err, 0, sizeof err);
	ck_assert_int_eq(all_query("r=1&x=1e400", NULL, 0, &err), PE_EINVAL);
	ck_assert_str_eq(err.detail, "x must be between -1 and 1");
	memset(&err, 0, sizeof err);
	ck_assert_int_eq(all_query("r=1&l=1e400", NULL, 0, &err), PE_EINVAL);
	ck_assert_str_eq(err.detail, "l: value 1 must be between 0 and 10");
	memset(&err, 0, sizeof err);
	ck_assert_int_eq(all_query("r=1&l=1,11", NULL, 0, &err), PE_EINVAL);
	ck_assert_str_eq(err.detail, "l: value 2 must be between 0 and 10");
	/* the smallest normal double (also as a longer decimal that rounds to it) and exact zeros are
	 * numbers like any other */
	ck_assert_int_eq(all_query("r=1&x=2.2250738585072014e-308&l=0e-400,-0,2.2250738585072012e-308", NULL, 0, &err),
			 0);
	ck_assert_int_eq(all_query("r=1&x=-2.2250738585072012e-308", NULL, 0, &err), 0);
	ck_assert_int_eq(all_query("r=1&x=-0.0e-999", NULL, 0, &err), 0);
	/* what is no number keeps its message */
	memset(&err, 0, sizeof err);
	ck_assert_int_eq(all_query("r=1&x=1e-4e", NULL, 0, &err), PE_EINVAL);
	ck_assert_str_eq(err.detail, "x must be a finite number, got '1e-4e'");
	/* a number of more than 63 characters is refused as that, not as no number: 63 are taken */
	char digits[80] = "0.";
	memset(digits + 2, '1', 61);
	snprintf(q, sizeof q, "r=1&x=%s", digits);
	ck_assert_int_eq(all_query(q, NULL, 0, &err), 0);
	digits[63] = '1';
	snprintf(q, sizeof q, "r=1&x=%s", digits);
	memset(&err, 0, sizeof err);
	ck_assert_int_eq(all_query(q, NULL, 0, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "x");
	ck_assert_ptr_nonnull(strstr(err.detail, "has more than 63 characters"));
	snprintf(q, sizeof q, "r=1&l=1,%s", digits);
	memset(&err, 0, sizeof err);
	ck_assert_int_eq(all_query(q, NULL, 0, &err), PE_EINVAL);
	ck_assert_str_eq(err.detail, "l: value 2 has more than 63 characters: a double needs at most 17 significant digits");
}
END_TEST

/* A valid value for a required parameter of any table: 64 clamped into its range (even, a
 * multiple of 4, so dimension rules hold), the first choice, or false. */
static void valid_value(const struct pe_param_spec *sp, char *buf, size_t cap)
{
	double v = 64;
	if (v < sp->min)
		v = sp->min;
	if (v > sp->max)
		v = sp->max;
	switch (sp->type) {
	case PE_PT_ENUM:
		snprintf(buf, cap, "%s", sp->choices[0]);
		break;
	case PE_PT_BOOL:
		snprintf(buf, cap, "0");
		break;
	case PE_PT_INT:
		snprintf(buf, cap, "%lld", (long long)v);
		break;
	default:
		snprintf(buf, cap, "%.17g", v);
		break;
	}
}

START_TEST(registry_defaults_parse)
{
	size_t n;
	const struct pe_table_def *const *all = pe_table_all(&n);
	ck_assert_uint_gt(n, 0);
	for (size_t t = 0; t < n; t++) {
		const struct pe_table_def *def = all[t];
		ck_assert_ptr_eq(pe_table_find(def->name), def);
		ck_assert_int_le(def->nparams, PE_MAX_PARAMS);
		struct pe_params p;
		struct pe_err err = {0};
		pe_params_init(&p, def);
		for (int i = 0; i < def->nparams; i++) {
			const struct pe_param_spec *sp = &def->params[i];
			ck_assert_msg(pe_param_index(def, sp->name) == i, "%s: duplicate parameter %s", def->name,
				      sp->name);
			ck_assert_msg(sp->type != PE_PT_ENUM || (sp->choices && sp->choices[0]), "%s.%s: no choices",
				      def->name, sp->name);
			if (sp->def)
				continue;
			char v[64];
			valid_value(sp, v, sizeof v);
			ck_assert_msg(pe_params_set(&p, sp->name, v, &err) == 0, "%s: %s=%s: %s", def->name, sp->name,
				      v, err.detail);
		}
		ck_assert_msg(pe_params_finish(&p, &err) == 0, "/v1/%s: defaults rejected: %s (%s)", def->name,
			      err.detail, err.param);
		struct pe_shape s;
		int ov;
		ck_assert_int_eq(pe_table_shape(&p, &s), 0);
		ck_assert_int_ge(s.rank, 1);
		ck_assert_uint_gt(pe_shape_count(&s, &ov), 0);
		char key[4096];
		ck_assert_int_gt(pe_params_canonical(&p, key, sizeof key), 0);
		pe_params_destroy(&p);
	}
	ck_assert_ptr_null(pe_table_find("nope"));
	ck_assert_ptr_null(pe_table_find(""));
}
END_TEST

/* def's parameters at their defaults (required ones from valid_value), enum parameter `which`
 * (an index, or -1 for none) set to its choice `choice`; 0 when the table accepts them. */
static int params_with(const struct pe_table_def *def, int which, int choice, struct pe_params *p)
{
	struct pe_err err = {0};
	char v[64];
	pe_params_init(p, def);
	for (int i = 0; i < def->nparams; i++) {
		const struct pe_param_spec *sp = &def->params[i];
		int rc = 0;
		if (i == which)
			rc = pe_params_set(p, sp->name, sp->choices[choice], &err);
		else if (!sp->def) {
			valid_value(sp, v, sizeof v);
			rc = pe_params_set(p, sp->name, v, &err);
		}
		if (rc != 0)
			return rc;
	}
	return pe_params_finish(p, &err);
}

/* Computes p's table in dt into a block of 0xa5 bytes and into one of zeros: they must be equal. */
static void check_writes_all(const struct pe_params *p, enum pe_dtype dt, const char *what)
{
	struct pe_shape s;
	struct pe_err err = {0};
	int ov;
	ck_assert_int_eq(pe_table_shape(p, &s), 0);
	size_t bytes = pe_shape_count(&s, &ov) * pe_dtype_size(dt);
	if (ov || bytes > ((size_t)64 << 20))
		return;
	unsigned char *a = malloc(bytes), *z = calloc(1, bytes);
	ck_assert(a && z);
	memset(a, 0xa5, bytes);
	ck_assert_msg(pe_table_compute(p, dt, a, &err) == 0, "%s: %s", what, err.detail);
	ck_assert_msg(pe_table_compute(p, dt, z, &err) == 0, "%s: %s", what, err.detail);
	ck_assert_msg(memcmp(a, z, bytes) == 0, "%s %s: leaves elements unwritten", what, pe_dtype_name(dt));
	free(a);
	free(z);
}

/* Every table writes every element of its output: the server computes tables into scratch blocks
 * it reuses (src/http/table.c), so a table that left elements as they were (counting on fresh,
 * zeroed memory) would serve another table's bytes. Each table at its defaults and once per
 * choice of each enum parameter, in every dtype it offers. */
START_TEST(every_table_writes_every_element)
{
	static const enum pe_dtype dts[] = {PE_F32, PE_F64, PE_F16, PE_BF16};
	size_t n, checked = 0;
	const struct pe_table_def *const *all = pe_table_all(&n);
	for (size_t t = 0; t < n; t++) {
		const struct pe_table_def *def = all[t];
		for (int which = -1; which < def->nparams; which++) {
			const struct pe_param_spec *sp = which < 0 ? NULL : &def->params[which];
			if (sp && sp->type != PE_PT_ENUM)
				continue;
			for (int c = 0; sp ? sp->choices[c] != NULL : c == 0; c++) {
				struct pe_params p;
				char what[128];
				snprintf(what, sizeof what, "/v1/%s%s%s%s%s", def->name, sp ? "?" : "", sp ? sp->name : "",
					 sp ? "=" : "", sp ? sp->choices[c] : "");
				if (params_with(def, which, c, &p) == 0) {
					for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
						if (def->fixed_dtype == PE_DTYPE_COUNT_ || d == 0)
							check_writes_all(&p, def->fixed_dtype == PE_DTYPE_COUNT_ ? dts[d] : def->fixed_dtype, what);
					checked++;
				}
				pe_params_destroy(&p);
			}
		}
	}
	fprintf(stderr, "params: %zu table variants compute every element (over %zu tables)\n", checked, n);
	ck_assert_uint_gt(checked, n);
}
END_TEST

/* The key is written only when it fits whole: for every cap up to its length plus one, an exact
 * heap buffer (ASan sees a byte past it) gets the key (cap > length) or -1, never a prefix. */
START_TEST(canonical_fits_exactly)
{
	static const char *const cases[][2] = {
		{"rope", "len=3&dim=8&offset=5&base=500000&scaling=longrope&factor=2&original_max_position_embeddings=2"
			 "&short_factor=1,1.5,2,2.5&long_factor=1,2,3,4"},
		{SIN, "len=1073741824&dim=1&offset=4503599627370496&variant=t2t"},
		{"alibi", "heads=12&q_len=4&mask=causal"},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		struct pe_params p;
		struct pe_err err = {0};
		ck_assert_msg(pe_query_params(&p, cases[c][0], cases[c][1], &err) == 0, "%s: %s", cases[c][1], err.detail);
		char full[4096];
		int n = pe_params_canonical(&p, full, sizeof full);
		ck_assert_msg(n > 0 && (size_t)n == strlen(full), "%s: %d", cases[c][1], n);
		for (size_t cap = 1; cap <= (size_t)n + 1; cap++) {
			char *buf = malloc(cap);
			ck_assert_ptr_nonnull(buf);
			int got = pe_params_canonical(&p, buf, cap);
			if (cap > (size_t)n) {
				ck_assert_int_eq(got, n);
				ck_assert_str_eq(buf, full);
			} else
				ck_assert_msg(got == -1, "%s: cap %zu of %d gave %d", cases[c][1], cap, n, got);
			free(buf);
		}
		pe_params_destroy(&p);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("params");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, unknown_parameter);
	tcase_add_test(tc, repeated_parameter);
	tcase_add_test(tc, empty_value);
	tcase_add_test(tc, integers_are_strict);
	tcase_add_test(tc, reals_are_finite_decimals);
	tcase_add_test(tc, reals_beyond_a_double);
	tcase_add_test(tc, out_of_range);
	tcase_add_test(tc, bad_enum_lists_choices);
	tcase_add_test(tc, required_missing);
	tcase_add_test(tc, bool_and_list);
	suite_add_tcase(s, tc);
	tc = tcase_create("canonical");
	tcase_add_test(tc, canonical_key);
	tcase_add_test(tc, canonical_key_round_trips);
	tcase_add_test(tc, canonical_buffer_too_small);
	suite_add_tcase(s, tc);
	tc = tcase_create("tables");
	tcase_set_timeout(tc, 60); /* every table computed: ~2.5 s of CPU, past check's 4 s on a busy machine */
	tcase_add_test(tc, sinusoidal_variant_rules);
	tcase_add_test(tc, accessors_after_finish);
	tcase_add_test(tc, registry_defaults_parse);
	tcase_add_test(tc, every_table_writes_every_element);
	tcase_add_test(tc, canonical_fits_exactly);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
