/* JSON tensor bodies (src/tensor/json_in.c): what the parser accepts and the tensor it builds,
 * and the malformed bodies it must refuse with PE_EBODY. The refusals below were found by
 * tests/fuzz/fuzz_json_tensor.c: the object form was located by searching the bytes for "data"
 * and "shape" instead of parsing the object, so garbage around or after the members passed and a
 * "data" nested inside another member was taken for the tensor; an empty array before numbers at
 * the same depth gave a shape without the numbers; and data nested as another shape was silently
 * reshaped. */
#include "posenc/tensor.h"
#include "support/pe_check.h"

#include <stdlib.h>
#include <string.h>

static int parse(const char *body, struct pe_tensor_mut *t, struct pe_err *err)
{
	memset(t, 0, sizeof *t);
	return pe_json_tensor_parse(body, strlen(body), 1000, t, err);
}

static void expect_ok(const char *body, int rank, const size_t *dims, const double *vals, size_t n)
{
	struct pe_tensor_mut t;
	struct pe_err err = {0};
	int rc = parse(body, &t, &err);
	ck_assert_msg(rc == 0, "'%s' refused: %s", body, err.detail);
	ck_assert_int_eq(t.dtype, PE_F64);
	ck_assert_int_eq(t.shape.rank, rank);
	for (int i = 0; i < rank; i++)
		ck_assert_uint_eq(t.shape.dim[i], dims[i]);
	for (size_t i = 0; i < n; i++)
		ck_assert(((double *)t.data)[i] == vals[i]);
	free(t.data);
}

static void expect_refused(const char *body, int code, const char *param)
{
	struct pe_tensor_mut t;
	struct pe_err err = {0};
	int rc = parse(body, &t, &err);
	ck_assert_msg(rc == code, "'%s' gave %d (want %d)", body, rc, code);
	ck_assert_str_eq(err.param, param);
	ck_assert(err.detail[0] != 0);
}

START_TEST(accepts_the_contract_forms)
{
	static const double v6[] = {1, 2, 3, 4, 5, 6};
	expect_ok("[[1, 2, 3], [4, 5, 6]]", 2, (size_t[]){2, 3}, v6, 6);
	expect_ok(" {\"shape\": [2, 3], \"data\": [[1, 2, 3], [4, 5, 6]]} ", 2, (size_t[]){2, 3}, v6, 6);
	expect_ok("{\"data\": [1, 2, 3, 4, 5, 6], \"shape\": [3, 2]}", 2, (size_t[]){3, 2}, v6, 6);
	expect_ok("{\"data\": [[1, 2, 3], [4, 5, 6]]}", 2, (size_t[]){2, 3}, v6, 6);
	/* Our own responses carry "dtype" (and tables "encoding", "params"): posted back as they are. */
	expect_ok("{\"shape\":[2,3],\"dtype\":\"f32\",\"x\":{\"a\":[true,false,null,\"s\\\"\\u00e9\"]},"
		  "\"data\":[[1,2,3],[4,5,6]]}",
		  2, (size_t[]){2, 3}, v6, 6);
	expect_ok("[[], []]", 2, (size_t[]){2, 0}, NULL, 0);
	expect_ok("7", 0, NULL, (double[]){7}, 1);
}
END_TEST

START_TEST(refuses_malformed_objects)
{
	expect_refused("{\"data\": [1, 2], #shape\": [2]}", PE_EBODY, "body");
	expect_refused("{\"data\": [1, 2]", PE_EBODY, "body");
	expect_refused("{\"data\": [1, 2]} trailing", PE_EBODY, "body");
	expect_refused("{\"data\": [1, 2],}", PE_EBODY, "body");
	expect_refused("{\"data\" [1, 2]}", PE_EBODY, "body");
	expect_refused("{\"data\": [1], \"data\": [2]}", PE_EBODY, "body");
	expect_refused("{\"x\": [1 2], \"data\": [1]}", PE_EBODY, "body");
	expect_refused("{\"x\": \"unterminated, \"data\": [1]}", PE_EBODY, "body");
	expect_refused("{\"x\": nul, \"data\": [1]}", PE_EBODY, "body");
	expect_refused("{\"x\": 1e999, \"data\": [1]}", PE_EBODY, "body");
	expect_refused("{\"x\": \"\\q\", \"data\": [1]}", PE_EBODY, "body");
	expect_refused("{}", PE_EBODY, "body");
}
END_TEST

START_TEST(data_is_the_top_level_member)
{
	/* A "data" inside another member is not the tensor. */
	expect_ok("{\"x\": {\"data\": [9, 9, 9]}, \"data\": [1, 2]}", 1, (size_t[]){2}, (double[]){1, 2}, 2);
	expect_refused("{\"x\": {\"data\": [9, 9, 9]}}", PE_EBODY, "body");
	expect_ok("{\"note\": \"data\", \"data\": [5]}", 1, (size_t[]){1}, (double[]){5}, 1);
}
END_TEST

START_TEST(refuses_ragged_arrays_with_empty_rows)
{
	expect_refused("[[[]], [1]]", PE_EBODY, "body");
	expect_refused("[[], [1]]", PE_EBODY, "body");
	expect_refused("[[1], []]", PE_EBODY, "body");
	expect_refused("[[1], [[]]]", PE_EBODY, "body");
}
END_TEST

START_TEST(data_nested_as_the_shape_or_flat)
{
	expect_refused("{\"shape\": [2, 3], \"data\": [[1, 2], [3, 4], [5, 6]]}", PE_EBODY, "shape");
	expect_refused("{\"shape\": [0], \"data\": [[], []]}", PE_EBODY, "shape");
	expect_refused("{\"shape\": [2, 2], \"data\": [1, 2, 3]}", PE_EBODY, "shape");
	expect_ok("{\"shape\": [1], \"data\": 5}", 1, (size_t[]){1}, (double[]){5}, 1);
}
END_TEST

START_TEST(limits)
{
	struct pe_tensor_mut t;
	struct pe_err err = {0};
	ck_assert_int_eq(pe_json_tensor_parse("[1, 2, 3]", 9, 2, &t, &err), PE_ETOOBIG);
	expect_refused("[[[[[[[[[1]]]]]]]]]", PE_EBODY, "body");
	expect_refused("[1, NaN]", PE_EBODY, "body");
	expect_refused("[1, -]", PE_EBODY, "body");
	expect_refused("", PE_EBODY, "body");
}
END_TEST

static Suite *json_in_suite(void)
{
	Suite *s = suite_create("json_in");
	TCase *c = tcase_create("parse");
	tcase_add_test(c, accepts_the_contract_forms);
	tcase_add_test(c, refuses_malformed_objects);
	tcase_add_test(c, data_is_the_top_level_member);
	tcase_add_test(c, refuses_ragged_arrays_with_empty_rows);
	tcase_add_test(c, data_nested_as_the_shape_or_flat);
	tcase_add_test(c, limits);
	suite_add_tcase(s, c);
	return s;
}

PE_TEST_MAIN(json_in_suite)
