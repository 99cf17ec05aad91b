/* Unit tests of the JSON tensor parser: bare nested arrays and {"shape","data"} objects (data
 * nested or flat), values read exactly as strtod reads them, and every refusal: ragged, lying
 * shapes, non-finite, non-numeric or overlong values, truncation at every byte, trailing bytes,
 * too deep, over max_elements (checked before the buffer is taken). */
#include "support/pe_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"

static int parse(const char *s, size_t max, struct pe_tensor_mut *t, struct pe_err *err)
{
	pe_err_clear(err);
	memset(t, 0, sizeof *t);
	return pe_json_tensor_parse(s, strlen(s), max, t, err);
}

START_TEST(accepted_forms)
{
	struct pe_tensor_mut t;
	struct pe_err err;
	ck_assert_int_eq(parse(" [[1, 2.5, -3e2], [4, 5, 6]] ", 100, &t, &err), 0);
	ck_assert_int_eq(t.dtype, PE_F64);
	ck_assert_int_eq(t.shape.rank, 2);
	ck_assert_uint_eq(t.shape.dim[0], 2);
	ck_assert_uint_eq(t.shape.dim[1], 3);
	const double *v = t.data;
	ck_assert(v[0] == 1 && v[1] == 2.5 && v[2] == -300 && v[5] == 6);
	free(t.data);
	ck_assert_int_eq(parse("{\"shape\": [2, 2], \"data\": [0.1, 0.2, 0.3, 0.4]}", 100, &t, &err), 0);
	ck_assert_int_eq(t.shape.rank, 2);
	ck_assert(((double *)t.data)[3] == strtod("0.4", NULL));
	free(t.data);
	ck_assert_int_eq(parse("{\"data\": [[[1],[2]]], \"shape\": [1,2,1]}", 100, &t, &err), 0);
	ck_assert_int_eq(t.shape.rank, 3);
	free(t.data);
	ck_assert_int_eq(parse("[]", 100, &t, &err), 0);
	ck_assert_int_eq(t.shape.rank, 1);
	ck_assert_uint_eq(t.shape.dim[0], 0);
	free(t.data);
}
END_TEST

START_TEST(refused_forms)
{
	static const char *const bad[] = {
		"[[1,2],[3]]", "[[1,2],3]", "[1,[2]]", "[[1],[]]", "[1,2,]", "[1 2]", "[\"1\"]", "[nan]",
		"[Infinity]", "[1e999]", "[01]", "[.5]", "[1.]", "[+1]", "[true]", "[1] x", "[[[[[[[[[1]]]]]]]]]",
		"{\"shape\":[3],\"data\":[1,2]}", "{\"shape\":[2,2],\"data\":[[1,2,3,4]]}", "{\"shape\":[2]}",
		"{\"shape\":[-1],\"data\":[]}", "{\"shape\":[1.5],\"data\":[1]}", "", "x",
		"{\"shape\":[4294967296,4294967296,4294967296],\"data\":[1]}",
	};
	struct pe_tensor_mut t;
	struct pe_err err;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc = parse(bad[i], 1000, &t, &err);
		ck_assert_msg(rc == PE_EBODY || rc == PE_ETOOBIG, "accepted %s", bad[i]);
		ck_assert_msg(err.param[0] && err.detail[0], "no detail for %s", bad[i]);
		ck_assert_ptr_null(t.data);
	}
}
END_TEST

/* A number past 400 characters in the data is refused for its length (not as "expected a
 * number"); in a member the parser skips, any JSON number passes, however long or large. */
START_TEST(long_numbers)
{
	struct pe_tensor_mut t;
	struct pe_err err;
	char doc[12000];
	snprintf(doc, sizeof doc, "[[1%0400d]]", 0); /* 401 characters */
	ck_assert_int_eq(parse(doc, 100, &t, &err), PE_EBODY);
	ck_assert_msg(strstr(err.detail, "longer than 400 characters") != NULL, "%s", err.detail);
	ck_assert_str_eq(err.param, "body");
	ck_assert_ptr_null(t.data);
	snprintf(doc, sizeof doc, "[[1.%0397d5]]", 0); /* 400 characters: read */
	ck_assert_int_eq(parse(doc, 100, &t, &err), 0);
	ck_assert(((double *)t.data)[0] == 1.0);
	free(t.data);
	snprintf(doc, sizeof doc, "{\"note\": [1%010000d, 1e999], \"data\": [2]}", 0);
	ck_assert_int_eq(parse(doc, 100, &t, &err), 0);
	ck_assert(((double *)t.data)[0] == 2);
	free(t.data);
}
END_TEST

START_TEST(every_truncation_refused)
{
	const char *doc = "{\"shape\": [2, 3], \"data\": [[1, 2, 3], [4.5e-1, -6, 7]]}";
	size_t n = strlen(doc);
	for (size_t cut = 0; cut < n; cut++) {
		char *p = malloc(cut + 1); /* exact size: ASan sees any read past the end */
		memcpy(p, doc, cut);
		struct pe_tensor_mut t = {0};
		struct pe_err err = {0};
		ck_assert_msg(pe_json_tensor_parse(p, cut, 100, &t, &err) != 0, "accepted %zu bytes", cut);
		free(p);
	}
}
END_TEST

START_TEST(max_elements_before_allocation)
{
	struct pe_tensor_mut t;
	struct pe_err err;
	ck_assert_int_eq(parse("[[1,2,3],[4,5,6]]", 6, &t, &err), 0);
	free(t.data);
	ck_assert_int_eq(parse("[[1,2,3],[4,5,6]]", 5, &t, &err), PE_ETOOBIG);
	ck_assert_ptr_null(t.data);
}
END_TEST

static Suite *json_in_suite(void)
{
	Suite *s = suite_create("json_in");
	TCase *tc = tcase_create("json_in");
	tcase_add_test(tc, accepted_forms);
	tcase_add_test(tc, refused_forms);
	tcase_add_test(tc, long_numbers);
	tcase_add_test(tc, every_truncation_refused);
	tcase_add_test(tc, max_elements_before_allocation);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(json_in_suite)
