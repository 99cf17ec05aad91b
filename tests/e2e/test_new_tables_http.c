/* End-to-end over HTTP: /v1/relative/deberta, /v1/rope/query-scale and /v1/rope?scaling=proportional
 * from a real daemon against the known answers of tests/ref/gen_new_tables.py: buckets as raw i32
 * equal to transformers' torch float32 ones (the distance where float32 moves a bucket included),
 * query scales and proportional tables as raw f64 (exact, within 1 ulp of mpmath / NumPy) and f32
 * (hf, within 1 ulp of PyTorch float32), with X-PE-Shape the case's shape. Bad parameters are RFC
 * 9457 problems naming the parameter; a table past max_elements is refused before it is made. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"
#include "support/pe_kat_http.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct pe_daemon D;

START_TEST(known_answers_over_http)
{
	pe_daemon_start(&D, NULL);
	ck_assert_uint_ge(pe_kat_http_compare(&D, "tests/data/relative_deberta", "query", "torch_i32", PE_I32, "deberta"), 12);
	ck_assert_uint_ge(pe_kat_http_compare(&D, "tests/data/query_scale", "query", "mp_f64", PE_F64, "http query-scale exact f64"), 6);
	ck_assert_uint_ge(pe_kat_http_compare(&D, "tests/data/query_scale", "hf_query", "torch_f32", PE_F32, "http query-scale hf f32"), 6);
	ck_assert_uint_ge(pe_kat_http_compare(&D, "tests/data/rope_proportional", "query", "ref_f64", PE_F64, "http proportional exact f64"), 6);
	ck_assert_uint_ge(pe_kat_http_compare(&D, "tests/data/rope_proportional", "hf_query", "torch_f32", PE_F32, "http proportional hf f32"), 6);
	ck_assert_int_eq(pe_daemon_stop(&D, SIGTERM), 0);
}
END_TEST

static void expect_problem(const char *path, long status, const char *param)
{
	struct pe_resp r;
	pe_get(&D, path, &r);
	ck_assert_msg(r.status == status, "%s: %ld %s", path, r.status, r.body ? r.body : "");
	pe_assert_problem(&r, status, param);
	pe_resp_free(&r);
}

START_TEST(problems_name_the_parameter)
{
	static const char *const args[] = {"--max-elements", "100000", NULL};
	pe_daemon_start(&D, args);
	expect_problem("/v1/relative/deberta?q_len=4&position_buckets=1", 400, "position_buckets");
	expect_problem("/v1/relative/deberta?q_len=4&max_relative_positions=100", 400, "max_relative_positions");
	expect_problem("/v1/relative/deberta?q_len=4&dtype=f32", 400, "dtype");
	expect_problem("/v1/rope/query-scale?len=4", 400, "variant");
	expect_problem("/v1/rope/query-scale?len=4&variant=ministral3&beta=0.1", 400, "original_max_position_embeddings");
	expect_problem("/v1/rope/query-scale?len=4&variant=llama4&beta=0.1", 400, "beta");
	expect_problem("/v1/rope?len=4&dim=8&scaling=proportional&partial_rotary_factor=0.2", 400, "partial_rotary_factor");
	expect_problem("/v1/rope?len=4&dim=8&partial_rotary_factor=0.5", 400, "partial_rotary_factor");
	/* past max_elements (100000), refused from the parameters before anything is allocated */
	expect_problem("/v1/relative/deberta?q_len=1073741824&k_len=1073741824", 413, "q_len");
	expect_problem("/v1/relative/deberta?q_len=317&k_len=317", 413, "q_len");
	expect_problem("/v1/rope/query-scale?len=100001&variant=llama4", 413, "len");
	struct pe_resp r;
	pe_get(&D, "/v1/relative/deberta?q_len=316&k_len=316&format=bin", &r);
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	ck_assert_int_eq(pe_daemon_stop(&D, SIGTERM), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("new_tables_http");
	TCase *tc = tcase_create("new tables");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, known_answers_over_http);
	tcase_add_test(tc, problems_name_the_parameter);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
