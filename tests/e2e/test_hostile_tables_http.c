/* A hostile client against /v1/relative/deberta, /v1/relative/t5, /v1/rope/query-scale,
 * /v1/rope?scaling=proportional and /v1/rope/mrope/positions' time step: sizes at and past every
 * limit, each refusal a problem naming the parameter that causes it, and the largest allowed
 * tables served whole.
 *
 * A relative table sized past max_elements by k_len alone names k_len (the limit's problem named
 * the table's first parameter, q_len, which the client had set to 1). Relative tables of one
 * column or one row at max_elements stream whole (what a block of rows costs:
 * tests/core/test_relative_rows.c). */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const struct {
	const char *path;
	long status;
	const char *param;
} refused[] = {
	{"/v1/relative/deberta?q_len=1&k_len=1073741824", 413, "k_len"},
	{"/v1/relative/deberta?q_len=2&k_len=67108864", 413, "k_len"},
	{"/v1/relative/deberta?q_len=67108864&k_len=2", 413, "q_len"},
	{"/v1/relative/t5?q_len=1&k_len=1073741824", 413, "k_len"},
	{"/v1/relative/deberta?q_len=1&k_len=1073741825", 400, "k_len"},
	{"/v1/relative/deberta?q_len=-1", 400, "q_len"},
	{"/v1/relative/deberta?q_len=4&q_len=4", 400, "q_len"},
	{"/v1/relative/deberta?q_len=4&position_buckets=65537", 400, "position_buckets"},
	{"/v1/relative/deberta?q_len=4&position_buckets=1", 400, "position_buckets"},
	{"/v1/relative/deberta?q_len=4&position_buckets=65536&max_relative_positions=32769", 400, "max_relative_positions"},
	{"/v1/relative/deberta?q_len=67108864&k_len=1&position_buckets=65536&max_relative_positions=32770", 400,
	 "max_relative_positions"},
	{"/v1/relative/deberta?q_len=4&dtype=f32", 400, "dtype"},
	{"/v1/rope/query-scale?len=4", 400, "variant"},
	{"/v1/rope/query-scale?len=4&variant=llama4&attn_scale=nan", 400, "attn_scale"},
	{"/v1/rope/query-scale?len=4&variant=llama4&attn_scale=1e31", 400, "attn_scale"},
	{"/v1/rope/query-scale?len=3&variant=llama4&attn_scale=1e30&floor_scale=1&dtype=f16", 400, "dtype"},
	{"/v1/rope/query-scale?len=4&variant=ministral3&beta=1", 400, "original_max_position_embeddings"},
	{"/v1/rope/query-scale?len=4&variant=llama4&beta=1", 400, "beta"},
	{"/v1/rope/query-scale?len=1073741824&variant=llama4", 413, "len"},
	{"/v1/rope?scaling=proportional&len=4&dim=8&partial_rotary_factor=0.1", 400, "partial_rotary_factor"},
	{"/v1/rope?scaling=proportional&len=4&dim=8&partial_rotary_factor=inf", 400, "partial_rotary_factor"},
	{"/v1/rope?scaling=proportional&len=4&dim=8&factor=1e-40&compat=hf", 400, "factor"},
	{"/v1/rope?scaling=proportional&len=4&dim=8&compat=ggml", 400, "compat"},
	{"/v1/rope?scaling=proportional&len=4&dim=8&seq_len=4", 400, "seq_len"},
	{"/v1/rope/mrope/positions?variant=qwen25vl&segments=video:2x2x2&time_step=", 400, "time_step"},
	{"/v1/rope/mrope/positions?variant=qwen25vl&segments=video:2x2x2&time_step=Float", 400, "time_step"},
	{"/v1/rope/mrope/positions?variant=qwen2vl&segments=video:2x2x2&time_step=int", 400, "time_step"},
	{"/v1/rope/mrope/positions?variant=qwen25vl&segments=video:2149x1x1&spatial_merge_size=1"
	 "&second_per_grid_t=999999.9&tokens_per_second=1",
	 400, "second_per_grid_t"},
	{"/v1/rope/mrope/positions?variant=qwen25vl&segments=video:4296x1x1&spatial_merge_size=1"
	 "&second_per_grid_t=1000000&tokens_per_second=0.5",
	 400, "second_per_grid_t"},
};

START_TEST(refusals_name_the_cause)
{
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		struct pe_resp r;
		pe_get(&d, refused[i].path, &r);
		pe_assert_problem(&r, refused[i].status, refused[i].param);
		pe_resp_free(&r);
	}
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* At the limit: max_elements entries in one column or one row, whole, entry `at` checked (deberta
 * with position_buckets <= 0 is q - k; t5's default buckets put q - k = -4194303 in bucket 15).
 * The int time step at the position limit is served: the last of 2148 frames of 10^6 s at 1
 * token per second sits at 2147000000. */
START_TEST(largest_tables_served_whole)
{
	static const struct {
		const char *path;
		size_t n, at;
		int32_t value;
	} big[] = {
		{"/v1/relative/deberta?q_len=4194304&k_len=1&position_buckets=0&format=bin", 4194304, 4194303, 4194303},
		{"/v1/relative/deberta?q_len=1&k_len=4194304&position_buckets=0&format=bin", 4194304, 4194303, -4194303},
		{"/v1/relative/t5?q_len=4194304&k_len=1&format=bin", 4194304, 4194303, 15},
		{"/v1/rope/mrope/positions?variant=qwen25vl&segments=video:2148x1x1&spatial_merge_size=1"
		 "&second_per_grid_t=1000000&tokens_per_second=1&format=bin",
		 3 * 2148, 2147, 2147000000},
	};
	const char *argv[] = {"--max-elements", "4194304", NULL};
	struct pe_daemon d;
	pe_daemon_start(&d, argv);
	for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
		struct pe_resp r;
		pe_get(&d, big[i].path, &r);
		ck_assert_msg(r.status == 200, "%s: %ld %.200s", big[i].path, r.status, r.body);
		ck_assert_msg(r.len == big[i].n * 4, "%s: %zu bytes of %zu", big[i].path, r.len, big[i].n * 4);
		int32_t v;
		memcpy(&v, r.body + 4 * big[i].at, 4);
		ck_assert_msg(v == big[i].value, "%s: [%zu] is %d", big[i].path, big[i].at, v);
		pe_resp_free(&r);
	}
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("e2e_hostile_tables");
	TCase *tc = tcase_create("hostile");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, refusals_name_the_cause);
	tcase_add_test(tc, largest_tables_served_whole);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
