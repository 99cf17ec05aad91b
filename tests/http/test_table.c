/* Unit tests of the table handler's pieces that need no server (src/http/table.c): the response
 * header of a table's extra value is named after the table's definition. */
#include "support/pe_check.h"

#include <string.h>

#include "http/handler.h"

static double one(const struct pe_params *p) { return 1.0; }

START_TEST(extra_header_from_definition)
{
	char name[40];
	const struct pe_table_def *rope = pe_table_find("rope");
	ck_assert_ptr_nonnull(rope);
	ck_assert_ptr_nonnull(rope->extra_name);
	pe_table_extra_header(rope, name, sizeof name);
	ck_assert_str_eq(name, "X-PE-Attention-Scaling");
	/* another table's value gets its own header, not rope's */
	struct pe_table_def def = {.name = "kv", .extra_name = "kv_cache_scale", .extra = one,
				   .fixed_dtype = PE_DTYPE_COUNT_};
	pe_table_extra_header(&def, name, sizeof name);
	ck_assert_str_eq(name, "X-PE-Kv-Cache-Scale");
	/* cut to the buffer, still terminated */
	pe_table_extra_header(&def, name, 9);
	ck_assert_str_eq(name, "X-PE-Kv-");
}
END_TEST

static Suite *table_suite(void)
{
	Suite *s = suite_create("table");
	TCase *tc = tcase_create("table");
	tcase_add_test(tc, extra_header_from_definition);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(table_suite)
