/* End-to-end tests of results the output cannot hold (issue 21, F15), decided from the parameters
 * before any work: ALiBi at offset 2^52 in f16, a RoPE similarity of 65536 dims in f16, inverse
 * frequencies beyond float32 are 400 naming dtype in every format (not 200 with infinities in
 * npy/bin and 500 in JSON/CSV); wider dtypes still answer 200. A PNG with more panels than fit is a
 * 400 naming format, also before any work (no job is submitted for it). Integer lists take
 * integers only (positions=1e3 is a 400 naming positions). */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void expect_400(const struct pe_daemon *d, const char *path, const char *param)
{
	struct pe_resp r;
	pe_get(d, path, &r);
	ck_assert_msg(r.status == 400, "%s: %ld %s", path, r.status, r.body);
	pe_assert_problem(&r, 400, param);
	pe_resp_free(&r);
}

static void expect_200(const struct pe_daemon *d, const char *path)
{
	struct pe_resp r;
	pe_get(d, path, &r);
	ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body ? r.body : "");
	pe_resp_free(&r);
}

START_TEST(overflowing_dtype_is_400_naming_dtype)
{
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	static const char *const fmts[] = {"npy", "bin", "json", "csv"};
	char path[256];
	for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
		snprintf(path, sizeof path, "/v1/alibi?heads=8&q_len=2&offset=4503599627370496&dtype=f16&format=%s", fmts[i]);
		expect_400(&d, path, "dtype");
		snprintf(path, sizeof path, "/v1/analysis/similarity?encoding=rope&len=4&dim=65536&dtype=f16&format=%s",
			 fmts[i]);
		expect_400(&d, path, "dtype");
		snprintf(path, sizeof path, "/v1/rope/inv_freq?dim=8&scaling=linear&factor=1e-300&format=%s", fmts[i]);
		expect_400(&d, path, "dtype");
	}
	/* the refusal is not remembered as a result: asked again, the same answer */
	expect_400(&d, "/v1/alibi?heads=8&q_len=2&offset=4503599627370496&dtype=f16&format=npy", "dtype");
	/* head 0 of 8 has slope 1/2: 131040/2 = 65520 rounds to infinity in f16, 131033/2 to 65504 */
	expect_400(&d, "/v1/alibi?heads=8&q_len=4&offset=131037&dtype=f16&format=npy", "dtype");
	expect_200(&d, "/v1/alibi?heads=8&q_len=4&offset=131030&dtype=f16&format=npy");
	expect_200(&d, "/v1/alibi?heads=8&q_len=2&offset=4503599627370496&dtype=f32&format=npy");
	/* every key after every query: all masked (the dtype's lowest value), nothing to overflow */
	expect_200(&d, "/v1/alibi?heads=8&q_len=2&k_len=4&offset=-4503599627370496&mask=causal&dtype=f16&format=npy");
	expect_400(&d, "/v1/alibi?heads=8&q_len=2&k_len=4&offset=-4503599627370496&dtype=f16&format=npy", "dtype");
	expect_200(&d, "/v1/analysis/similarity?encoding=rope&len=4&dim=65504&dtype=f16&format=npy");
	expect_200(&d, "/v1/rope/inv_freq?dim=8&scaling=linear&factor=1e-300&dtype=f64");
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(png_panels_decided_before_work)
{
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	long before = (long)pe_metric(&d, "posenc_jobs_total");
	expect_400(&d, "/v1/alibi?heads=200&q_len=4&format=png", "format");
	ck_assert_int_eq((long)pe_metric(&d, "posenc_jobs_total"), before); /* refused while parsing: no job ran */
	expect_200(&d, "/v1/alibi?heads=12&q_len=4&format=png");
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(integer_lists_take_integers)
{
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	static const char *const bad[] = {"1e3", "1.0", "+4", "0x10"};
	char path[128];
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct pe_resp r;
		const char *ct[] = {"Content-Type: application/json", NULL};
		snprintf(path, sizeof path, "/v1/rope/apply?positions=%s", bad[i]);
		pe_request(&d, "POST", path, ct, "[[1,2,3,4]]", 11, &r);
		ck_assert_msg(r.status == 400 && r.body && strstr(r.body, "\"param\":\"positions\""), "%s: %ld %s", path,
			      r.status, r.body ? r.body : "");
		pe_resp_free(&r);
	}
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static Suite *values_suite(void)
{
	Suite *s = suite_create("values");
	TCase *tc = tcase_create("values");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, overflowing_dtype_is_400_naming_dtype);
	tcase_add_test(tc, png_panels_decided_before_work);
	tcase_add_test(tc, integer_lists_take_integers);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(values_suite)
