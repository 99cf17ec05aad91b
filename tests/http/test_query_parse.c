/* Unit tests of the one query parser of declared routes (src/http/query.c): every fault is a 400
 * (PE_EINVAL) naming the parameter, the same for a table's parameters, the output options and a
 * route's extras; a name is read against the lists in one order; the query's text is split as
 * libmicrohttpd split it. Table-driven. */
#include "support/pe_check.h"

#include <stdio.h>
#include <string.h>

#include "http/query.h"
#include "http/router.h"

static const struct pe_param_spec extra_spec[] = {
	{"shape", PE_PT_TEXT, "", 0, 64, NULL, "a shape"},
};
static const struct pe_table_def extras = {.name = "x", .params = extra_spec, .nparams = 1, .fixed_dtype = PE_DTYPE_COUNT_};

struct kv {
	const char *key;
	size_t key_len; /* 0: strlen */
	const char *value;
	size_t value_len;
};

struct qcase {
	const char *what;
	int output;          /* the route takes the output options */
	struct kv kv[3];     /* key NULL ends */
	int code;            /* of the last pair */
	const char *param;   /* err->param of a failure */
	const char *detail;  /* a substring of err->detail, or NULL */
};

static const struct qcase cases[] = {
	{"a table's parameters", 1, {{"len", 0, "8", 0}, {"dim", 0, "4", 0}, {"format", 0, "npy", 0}}, 0, "", NULL},
	{"an extra", 0, {{"len", 0, "8", 0}, {"shape", 0, "1,2", 0}}, 0, "", NULL},
	{"an empty name", 1, {{"", 0, "1", 0}}, PE_EINVAL, "", "empty name"},
	{"an empty name without a value", 1, {{"", 0, NULL, 0}}, PE_EINVAL, "", "empty name"},
	{"a NUL in the name", 1, {{"len", 4, "8", 0}}, PE_EINVAL, "len", "NUL"},
	{"a NUL in the value", 1, {{"len", 0, "8", 2}}, PE_EINVAL, "len", "NUL"},
	{"a NUL in an extra's value", 0, {{"shape", 0, "1", 2}}, PE_EINVAL, "shape", "NUL"},
	{"an unknown name", 1, {{"nope", 0, "1", 0}}, PE_EINVAL, "nope", "unknown parameter 'nope' for /v1/t"},
	{"output options where the route takes none", 0, {{"format", 0, "npy", 0}}, PE_EINVAL, "format", "unknown"},
	{"a table parameter twice", 1, {{"len", 0, "8", 0}, {"len", 0, "8", 0}}, PE_EINVAL, "len", "more than once"},
	{"an output option twice", 1, {{"dtype", 0, "f32", 0}, {"dtype", 0, "f64", 0}}, PE_EINVAL, "dtype", "more than once"},
	{"an extra twice", 0, {{"shape", 0, "1", 0}, {"shape", 0, "2", 0}}, PE_EINVAL, "shape", "more than once"},
	{"an empty value", 1, {{"len", 0, "", 0}}, PE_EINVAL, "len", "empty value"},
	{"a name alone", 1, {{"len", 0, NULL, 0}}, PE_EINVAL, "len", "empty value"},
	{"an output option without a value", 1, {{"format", 0, NULL, 0}}, PE_EINVAL, "format", "empty value"},
	{"a mistyped integer", 1, {{"len", 0, "8.5", 0}}, PE_EINVAL, "len", "decimal integer"},
	{"a literal %00", 1, {{"len", 0, "%00", 0}}, PE_EINVAL, "len", "decimal integer"},
	{"an out-of-range value", 1, {{"len", 0, "-1", 0}}, PE_EINVAL, "len", "between"},
};

START_TEST(faults_name_the_parameter)
{
	const struct qcase *c = &cases[_i];
	struct pe_query q;
	struct pe_err err = {0};
	int rc = 0;
	pe_query_init(&q, pe_table_find("sinusoidal"), &extras, c->output, "/v1/t");
	for (int i = 0; i < 3 && c->kv[i].key && rc == 0; i++) {
		const struct kv *kv = &c->kv[i];
		size_t vlen = kv->value_len ? kv->value_len : kv->value ? strlen(kv->value) : 0;
		rc = pe_query_take(&q, kv->key, kv->key_len ? kv->key_len : strlen(kv->key), kv->value, vlen, &err);
	}
	ck_assert_msg(rc == c->code, "%s: %d, want %d (%s)", c->what, rc, c->code, err.detail);
	ck_assert_msg(!strcmp(err.param, c->param), "%s: param '%s', want '%s'", c->what, err.param, c->param);
	ck_assert_msg(!c->detail || strstr(err.detail, c->detail), "%s: detail '%s'", c->what, err.detail);
	pe_query_destroy(&q);
}
END_TEST

/* What was read lands where the route reads it. */
START_TEST(values_land_in_their_list)
{
	struct pe_query q;
	struct pe_err err = {0};
	pe_query_init(&q, pe_table_find("sinusoidal"), &extras, 1, "/v1/t");
	ck_assert_int_eq(pe_query_take(&q, "len", 3, "8", 1, &err), 0);
	ck_assert_int_eq(pe_query_take(&q, "dim", 3, "4", 1, &err), 0);
	ck_assert_int_eq(pe_query_take(&q, "format", 6, "npy", 3, &err), 0);
	ck_assert_int_eq(pe_query_take(&q, "shape", 5, "1,2", 3, &err), 0);
	ck_assert_int_eq(pe_params_finish(&q.params, &err), 0);
	ck_assert_int_eq(pe_param_int(&q.params, "len"), 8);
	ck_assert_str_eq(q.out.format, "npy");
	ck_assert_ptr_null(q.out.dtype);
	ck_assert_str_eq(pe_query_extra(&q, "shape"), "1,2");
	pe_query_destroy(&q);
	/* no lists at all: every name is unknown */
	pe_query_init(&q, NULL, NULL, 0, "/v1/learned/t");
	ck_assert_int_eq(pe_query_take(&q, "len", 3, "8", 1, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "len");
	ck_assert_ptr_null(pe_query_extra(&q, "shape"));
	pe_query_destroy(&q);
}
END_TEST

/* The split of a query's text, as libmicrohttpd 0.9.75 split it (MHD_parse_arguments_): pieces
 * between '&' (a trailing empty one is none, an inner one a parameter with an empty name), the
 * name up to the piece's first '=', '+' a space, then the server's percent-decoding on each side
 * (%00 and %2F kept). Each case: the query, then its parameters as "name=value" or "name" (no '='). */
struct split_case {
	const char *query;
	const char *want[5]; /* NULL ends */
};

static const struct split_case splits[] = {
	{"len=8&dim=4", {"len=8", "dim=4"}},
	{"", {NULL}},
	{"len=8&", {"len=8"}},
	{"len=8&&dim=4", {"len=8", "", "dim=4"}},
	{"&", {""}},
	{"len&dim=4", {"len", "dim=4"}},
	{"len", {"len"}},
	{"=1", {"=1"}},
	{"len=8=9", {"len=8=9"}},
	{"len=", {"len="}},
	{"a+b=c+d", {"a b=c d"}},
	{"l%65n=%38&x=%2B", {"len=8", "x=+"}},
	{"x=%00&y=%2F&z=%2f", {"x=%00", "y=%2F", "z=%2f"}},
	{"x=%4&y=%zz", {"x=%4", "y=%zz"}},
	{"?a=1", {"?a=1"}},
};

START_TEST(queries_split_as_libmicrohttpd_split_them)
{
	const struct split_case *c = &splits[_i];
	char text[64];
	struct pe_query_arg args[8];
	snprintf(text, sizeof text, "%s", c->query);
	size_t n = pe_query_split(text, args, 8, pe_query_unescape), want = 0;
	while (c->want[want])
		want++;
	ck_assert_msg(n == want, "'%s': %zu parameters, want %zu", c->query, n, want);
	for (size_t i = 0; i < n; i++) {
		char got[64];
		snprintf(got, sizeof got, "%s%s%s", args[i].key, args[i].value ? "=" : "", args[i].value ? args[i].value : "");
		ck_assert_msg(!strcmp(got, c->want[i]), "'%s' parameter %zu: '%s', want '%s'", c->query, i, got, c->want[i]);
		ck_assert_uint_eq(args[i].key_len, strlen(args[i].key));
		ck_assert_uint_eq(args[i].value_len, args[i].value ? strlen(args[i].value) : 0);
	}
}
END_TEST

/* No more than max parameters are written, whatever the text holds. */
START_TEST(a_split_stops_at_max)
{
	char text[] = "a=1&b=2&c=3&d=4";
	struct pe_query_arg args[3] = {0};
	ck_assert_uint_eq(pe_query_split(text, args, 2, pe_query_unescape), 2);
	ck_assert_str_eq(args[1].key, "b");
	ck_assert_ptr_null(args[2].key);
}
END_TEST

static Suite *query_suite(void)
{
	Suite *s = suite_create("query_parse");
	TCase *tc = tcase_create("query");
	tcase_add_loop_test(tc, faults_name_the_parameter, 0, (int)(sizeof cases / sizeof cases[0]));
	tcase_add_test(tc, values_land_in_their_list);
	tcase_add_loop_test(tc, queries_split_as_libmicrohttpd_split_them, 0, (int)(sizeof splits / sizeof splits[0]));
	tcase_add_test(tc, a_split_stops_at_max);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(query_suite)
