/* Unit tests of the one query parser of declared routes (src/http/query.c): every fault is a 400
 * (PE_EINVAL) naming the parameter, the same for a table's parameters, the output options and a
 * route's extras; a name is read against the lists in one order. Table-driven. */
#include "support/pe_check.h"

#include <string.h>

#include "http/query.h"

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

static Suite *query_suite(void)
{
	Suite *s = suite_create("query_parse");
	TCase *tc = tcase_create("query");
	tcase_add_loop_test(tc, faults_name_the_parameter, 0, (int)(sizeof cases / sizeof cases[0]));
	tcase_add_test(tc, values_land_in_their_list);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(query_suite)
