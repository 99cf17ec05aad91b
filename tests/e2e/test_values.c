/* End-to-end tests of results the output cannot hold (issue 21, F15), decided from the parameters
 * before any work: ALiBi at offset 2^52 in f16, a RoPE similarity of 65536 dims in f16, inverse
 * frequencies beyond float32 are 400 naming dtype in every format (not 200 with infinities in
 * npy/bin and 500 in JSON/CSV); wider dtypes still answer 200. A PNG with more panels than fit is a
 * 400 naming format, also before any work (no job is submitted for it). Integer lists take
 * integers only (positions=1e3 is a 400 naming positions, grid=2e0,2 one naming grid). Learned
 * tables too big for the dtype asked, as stored, resampled or as dot products: 400 naming dtype. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "posenc/posenc.h"

/* Each test's daemon, started in the test's own process by a checked fixture: the default
 * configuration, or a data directory of the test's own for learned tables (removed afterwards). */
static struct pe_daemon SRV;
static char learned_dir[64];

static void start(void) { pe_daemon_start(&SRV, NULL); }
static void stop(void) { ck_assert_int_eq(pe_daemon_stop(&SRV, SIGTERM), 0); }

static void start_learned(void)
{
	snprintf(learned_dir, sizeof learned_dir, "/tmp/posenc-values-%d", (int)getpid());
	const char *args[] = {"--data-dir", learned_dir, NULL};
	pe_daemon_start(&SRV, args);
}

static void stop_learned(void)
{
	char cmd[96];
	stop();
	snprintf(cmd, sizeof cmd, "rm -rf %s", learned_dir);
	ck_assert_int_eq(system(cmd), 0);
}

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
	static const char *const fmts[] = {"npy", "bin", "json", "csv"};
	char path[256];
	for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
		snprintf(path, sizeof path, "/v1/alibi?heads=8&q_len=2&offset=4503599627370496&dtype=f16&format=%s", fmts[i]);
		expect_400(&SRV, path, "dtype");
		snprintf(path, sizeof path, "/v1/analysis/similarity?encoding=rope&len=4&dim=65536&dtype=f16&format=%s",
			 fmts[i]);
		expect_400(&SRV, path, "dtype");
		snprintf(path, sizeof path, "/v1/rope/inv_freq?dim=8&scaling=linear&factor=1e-300&format=%s", fmts[i]);
		expect_400(&SRV, path, "dtype");
	}
	/* the refusal is not remembered as a result: asked again, the same answer */
	expect_400(&SRV, "/v1/alibi?heads=8&q_len=2&offset=4503599627370496&dtype=f16&format=npy", "dtype");
	/* head 0 of 8 has slope 1/2: 131040/2 = 65520 rounds to infinity in f16, 131033/2 to 65504 */
	expect_400(&SRV, "/v1/alibi?heads=8&q_len=4&offset=131037&dtype=f16&format=npy", "dtype");
	expect_200(&SRV, "/v1/alibi?heads=8&q_len=4&offset=131030&dtype=f16&format=npy");
	expect_200(&SRV, "/v1/alibi?heads=8&q_len=2&offset=4503599627370496&dtype=f32&format=npy");
	/* every key after every query: all masked (the dtype's lowest value), nothing to overflow */
	expect_200(&SRV, "/v1/alibi?heads=8&q_len=2&k_len=4&offset=-4503599627370496&mask=causal&dtype=f16&format=npy");
	expect_400(&SRV, "/v1/alibi?heads=8&q_len=2&k_len=4&offset=-4503599627370496&dtype=f16&format=npy", "dtype");
	expect_200(&SRV, "/v1/analysis/similarity?encoding=rope&len=4&dim=65504&dtype=f16&format=npy");
	expect_200(&SRV, "/v1/rope/inv_freq?dim=8&scaling=linear&factor=1e-300&dtype=f64");
}
END_TEST

START_TEST(png_panels_decided_before_work)
{
	long before = (long)pe_metric(&SRV, "posenc_jobs_total");
	expect_400(&SRV, "/v1/alibi?heads=200&q_len=4&format=png", "format");
	ck_assert_int_eq((long)pe_metric(&SRV, "posenc_jobs_total"), before); /* refused while parsing: no job ran */
	expect_200(&SRV, "/v1/alibi?heads=12&q_len=4&format=png");
}
END_TEST

START_TEST(integer_lists_take_integers)
{
	static const char *const bad[] = {"1e3", "1.0", "+4", "0x10"};
	char path[128];
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct pe_resp r;
		const char *ct[] = {"Content-Type: application/json", NULL};
		snprintf(path, sizeof path, "/v1/rope/apply?positions=%s", bad[i]);
		pe_request(&SRV, "POST", path, ct, "[[1,2,3,4]]", 11, &r);
		ck_assert_msg(r.status == 400 && r.body && strstr(r.body, "\"param\":\"positions\""), "%s: %ld %s", path,
			      r.status, r.body ? r.body : "");
		pe_resp_free(&r);
	}
}
END_TEST

/* ---- learned tables ---- */

static void put_npy(const struct pe_daemon *d, const char *name_query, enum pe_dtype dt, size_t rows, size_t cols,
		    const void *data)
{
	struct pe_tensor_view v = {.shape = {2, {rows, cols}}, .dtype = dt, .data = data};
	struct pe_buf b;
	struct pe_resp r;
	char path[160];
	const char *ct[] = {"Content-Type: application/x-npy", NULL};
	pe_buf_init(&b, 1 << 20);
	ck_assert_int_eq(pe_npy_write(&b, &v, NULL), 0);
	snprintf(path, sizeof path, "/v1/learned/%s", name_query);
	pe_request(d, "PUT", path, ct, b.data, b.len, &r);
	ck_assert_msg(r.status == 201 || r.status == 200, "PUT %s: %ld %s", path, r.status, r.body ? r.body : "");
	pe_resp_free(&r);
	pe_buf_destroy(&b);
}

/* 400 naming dtype without a job: decided from the table's largest |value| */
static void expect_400_no_job(const struct pe_daemon *d, const char *path)
{
	long before = (long)pe_metric(d, "posenc_jobs_total");
	expect_400(d, path, "dtype");
	ck_assert_msg((long)pe_metric(d, "posenc_jobs_total") == before, "%s: decided before any job", path);
}

/* Learned tables read into a narrower dtype (issue 21, F15): a 400 naming dtype in every format,
 * not infinities with 200 (npy/bin) or a 500 (JSON/CSV). Where the stored table's largest |value|
 * decides it (the table as stored; dot products whose diagonal already overflows) no job runs, also
 * after a restart (the value is found again by the start-up scan); resampled tables and smaller dot
 * products are checked on the values made, including bicubic overshoot past the table's own range. */
START_TEST(learned_overflow_is_400_naming_dtype)
{
	char path[192];
	float big[8] = {0.5f, -1, 2, 1e6f, 3, 4, -5, 6}, huge[2] = {3.4e38f, 1}, hot[32], warm[32], step[16];
	double far[2] = {1e300, -2};
	for (int i = 0; i < 32; i++) {
		hot[i] = 300;  /* dot products 8 * 300^2: 300^2 alone overflows nothing, 720000 overflows f16 */
		warm[i] = 100; /* 100^2 fits f16, 8 * 100^2 = 80000 does not: only the job can tell */
	}
	for (int i = 0; i < 16; i++)
		step[i] = i % 4 >= 2 ? 65504 : 0; /* a 4x4 grid, an edge from 0 to f16's largest value */
	put_npy(&SRV, "big", PE_F32, 4, 2, big);
	put_npy(&SRV, "huge", PE_F32, 2, 1, huge);
	put_npy(&SRV, "far", PE_F64, 2, 1, far);
	put_npy(&SRV, "hot", PE_F32, 4, 8, hot);
	put_npy(&SRV, "warm", PE_F32, 4, 8, warm);
	put_npy(&SRV, "step?grid=4,4", PE_F32, 16, 1, step);
	static const char *const fmts[] = {"npy", "bin", "json", "csv"};
	for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
		snprintf(path, sizeof path, "/v1/learned/big?dtype=f16&format=%s", fmts[i]);
		expect_400_no_job(&SRV, path);
		snprintf(path, sizeof path, "/v1/analysis/similarity?encoding=learned:hot&dtype=f16&format=%s", fmts[i]);
		expect_400_no_job(&SRV, path);
		snprintf(path, sizeof path, "/v1/learned/big?len=7&dtype=f16&format=%s", fmts[i]);
		expect_400(&SRV, path, "dtype");
		snprintf(path, sizeof path, "/v1/analysis/similarity?encoding=learned:warm&dtype=f16&format=%s", fmts[i]);
		expect_400(&SRV, path, "dtype");
	}
	expect_400_no_job(&SRV, "/v1/learned/huge?dtype=bf16&format=bin");
	expect_400_no_job(&SRV, "/v1/learned/far?dtype=f32&format=npy");
	expect_400(&SRV, "/v1/analysis/similarity?encoding=learned:hot&len=6&dtype=f16&format=npy", "dtype");
	expect_400(&SRV, "/v1/analysis/similarity?encoding=learned:far&dtype=f32&format=npy", "dtype");
	/* the refusal is not remembered as a result: asked again, the same answer */
	expect_400(&SRV, "/v1/learned/big?len=7&dtype=f16&format=npy", "dtype");
	expect_200(&SRV, "/v1/learned/big?dtype=f32&format=npy");
	expect_200(&SRV, "/v1/learned/big?len=7&dtype=f32&format=npy");
	expect_200(&SRV, "/v1/learned/huge?dtype=f32&format=bin");
	expect_200(&SRV, "/v1/learned/far?dtype=f64&format=npy");
	expect_200(&SRV, "/v1/analysis/similarity?encoding=learned:warm&dtype=f32&format=npy");
	/* bicubic overshoots the edge: past 65504 (and 65520, where f16 rounds to infinity) */
	struct pe_resp r;
	pe_get(&SRV, "/v1/learned/step?height=16&width=16&dtype=f32&format=bin", &r);
	ck_assert_int_eq(r.status, 200);
	float top = 0;
	for (size_t i = 0; i < r.len / 4; i++)
		top = ((const float *)r.body)[i] > top ? ((const float *)r.body)[i] : top;
	ck_assert_msg(top > 65520, "the bicubic answer reaches %g", top);
	pe_resp_free(&r);
	expect_200(&SRV, "/v1/learned/step?dtype=f16&format=bin");
	expect_400(&SRV, "/v1/learned/step?height=16&width=16&dtype=f16&format=bin", "dtype");
	expect_400(&SRV, "/v1/learned/step?height=16&width=16&dtype=f16&format=json", "dtype");
	stop();
	/* after a restart the start-up scan knows the largest values again */
	start_learned();
	expect_400_no_job(&SRV, "/v1/learned/big?dtype=f16&format=npy");
	expect_400_no_job(&SRV, "/v1/analysis/similarity?encoding=learned:hot&dtype=f16&format=bin");
}
END_TEST

/* grid= takes integers as positions= does: 2e0 or 2.0 is a 400 naming grid, before the body. */
START_TEST(learned_grid_takes_integers)
{
	char path[128];
	float t[4] = {1, 2, 3, 4};
	struct pe_tensor_view v = {.shape = {2, {4, 1}}, .dtype = PE_F32, .data = t};
	struct pe_buf b;
	pe_buf_init(&b, 1 << 16);
	ck_assert_int_eq(pe_npy_write(&b, &v, NULL), 0);
	const char *ct[] = {"Content-Type: application/x-npy", NULL};
	static const char *const bad[] = {"2e0,2", "2,2.0", "+2,2", "0x2,2", "2,2,1"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct pe_resp r;
		snprintf(path, sizeof path, "/v1/learned/g?grid=%s", bad[i]);
		pe_request(&SRV, "PUT", path, ct, b.data, b.len, &r);
		ck_assert_msg(r.status == 400 && r.body && strstr(r.body, "\"param\":\"grid\""), "%s: %ld %s", path,
			      r.status, r.body ? r.body : "");
		pe_resp_free(&r);
	}
	struct pe_resp r;
	pe_request(&SRV, "PUT", "/v1/learned/g?grid=2,2", ct, b.data, b.len, &r);
	ck_assert_int_eq(r.status, 201);
	pe_resp_free(&r);
	pe_buf_destroy(&b);
}
END_TEST

static Suite *values_suite(void)
{
	Suite *s = suite_create("values");
	TCase *tc = tcase_create("values");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, start, stop);
	tcase_add_test(tc, overflowing_dtype_is_400_naming_dtype);
	tcase_add_test(tc, png_panels_decided_before_work);
	tcase_add_test(tc, integer_lists_take_integers);
	suite_add_tcase(s, tc);
	tc = tcase_create("learned");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, start_learned, stop_learned);
	tcase_add_test(tc, learned_overflow_is_400_naming_dtype);
	tcase_add_test(tc, learned_grid_takes_integers);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(values_suite)
