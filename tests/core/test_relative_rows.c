/* pe_relative_rows (the rows of /v1/relative/t5 and /v1/relative/deberta): a block of rows costs
 * values for that block's distances only. A table streams in blocks of rows, so a block that
 * computed every distance of the table (q_len + k_len - 1) made a q_len x 1 table cost q_len
 * values per block: 64 Mi x 1 took 64 blocks of 64 Mi logs and ran past job_timeout, cutting its
 * 200 short. Every window equals the same rows of the whole table (built without a buffer of its
 * own: each row is one new value and the previous row shifted). */
#include "core/tables.h"
#include "posenc/core.h"
#include "support/pe_check.h"
#include "support/pe_table.h"

#include <stdlib.h>
#include <string.h>

struct counter {
	size_t calls;
};

/* k - q as the entry, counting the calls. */
static int32_t counted(const void *ctx, int64_t k_minus_q)
{
	((struct counter *)(uintptr_t)ctx)->calls++;
	return (int32_t)k_minus_q;
}

static const struct {
	const char *query;
	size_t r0, n;
} windows[] = {
	{"q_len=100000&k_len=1", 99990, 10},
	{"q_len=100000&k_len=1", 0, 1},
	{"q_len=7&k_len=300000", 3, 2},
	{"q_len=50&k_len=40", 0, 50},
	{"q_len=50&k_len=40", 17, 9},
	{"q_len=1&k_len=1", 0, 1},
};

START_TEST(block_costs_its_own_distances)
{
	struct pe_params p;
	struct pe_err err;
	ck_assert_int_eq(pe_query_params(&p, "relative/deberta", windows[_i].query, &err), 0);
	size_t q_len = (size_t)pe_param_int(&p, "q_len"), k_len = (size_t)pe_param_int(&p, "k_len");
	size_t r0 = windows[_i].r0, n = windows[_i].n;
	int32_t *out = malloc(n * k_len * sizeof *out);
	struct counter c = {0};
	ck_assert_int_eq(pe_relative_rows(&p, counted, &c, r0, n, out, &err), 0);
	ck_assert_uint_le(c.calls, n + k_len - 1);
	size_t wrong = 0;
	for (size_t q = r0; q < r0 + n; q++)
		for (size_t k = 0; k < k_len; k++)
			wrong += out[(q - r0) * k_len + k] != (int32_t)k - (int32_t)q;
	ck_assert_uint_eq(wrong, 0);
	ck_assert_uint_le(r0 + n, q_len);
	free(out);
	pe_params_destroy(&p);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("relative_rows");
	TCase *tc = tcase_create("rows");
	tcase_add_loop_test(tc, block_costs_its_own_distances, 0, (int)(sizeof windows / sizeof windows[0]));
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
