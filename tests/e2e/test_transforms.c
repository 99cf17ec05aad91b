/* End-to-end tests of the transforms over HTTP: every body format (npy, raw with shape=/dtype=,
 * JSON nested and {"shape","data"}), output format and dtype overrides, the arithmetic against
 * the core's own tables (x*xscale + PE in float32, scores + bias with the mask at the output
 * dtype's lowest value), and the errors: 405, 415, 413 before and while reading, lying bodies,
 * shape/parameter mismatches. A job that starts after its job_timeout, or after shutdown cancelled
 * all work, does none (with the HTTP layer in this process, its jobs held and run by the test). */
#include "support/pe_check.h"
#include "support/pe_daemon.h"
#include "support/pe_table.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "http/http.h"
#include "posenc/posenc.h"

static struct pe_daemon D;

static void start(void)
{
	const char *args[] = {"--max-body-bytes", "1000000", NULL};
	pe_daemon_start(&D, args);
}
static void stop(void) { ck_assert_int_eq(pe_daemon_stop(&D, SIGTERM), 0); }

static void post(const char *path, const char *ctype, const void *body, size_t len, struct pe_resp *r)
{
	char h[96];
	snprintf(h, sizeof h, "Content-Type: %s", ctype);
	const char *hs[] = {h, NULL};
	pe_request(&D, "POST", path, hs, body, len, r);
}

/* x [2, 5, 8] f32 of distinct values */
static void fill(float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)i * 0.37f - 3.0f;
}

START_TEST(sinusoidal_add_raw_f32)
{
	float x[2 * 5 * 8];
	fill(x, 80);
	struct pe_resp r;
	char h[64];
	post("/v1/sinusoidal/apply?shape=2,5,8&offset=3&xscale=2", "application/octet-stream", x, sizeof x, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Shape", h, sizeof h), "2,5,8");
	ck_assert_str_eq(pe_resp_header(&r, "Cache-Control", h, sizeof h), "no-store");
	ck_assert_uint_eq(r.len, sizeof x);
	float *pe = pe_query_table("sinusoidal", "len=5&dim=8&offset=3", PE_F32, NULL), *y = (float *)r.body;
	for (size_t i = 0; i < 80; i++) {
		float scaled = x[i] * 2.0f, want = scaled + pe[i % 40];
		ck_assert_msg(pe_ulp_f32(y[i], want) == 0, "element %zu: %a vs %a", i, y[i], want);
	}
	free(pe);
	pe_resp_free(&r);
}
END_TEST

START_TEST(sinusoidal_concat_npy_f16_in)
{
	/* a [3, 4] f16 npy made by hand: header written by the library's own writer */
	uint16_t xh[12];
	for (int i = 0; i < 12; i++)
		xh[i] = pe_f64_to_f16(i * 0.5 - 2);
	struct pe_tensor_view v = {.shape = {2, {3, 4}}, .dtype = PE_F16, .data = xh};
	struct pe_buf b;
	pe_buf_init(&b, 1 << 20);
	ck_assert_int_eq(pe_npy_write(&b, &v, NULL), 0);
	struct pe_resp r;
	post("/v1/sinusoidal/apply?mode=concat&pe_dim=6", "application/x-npy", b.data, b.len, &r);
	ck_assert_int_eq(r.status, 200);
	struct pe_tensor_view y;
	ck_assert_int_eq(pe_npy_parse(r.body, r.len, 1000, &y, NULL), 0);
	ck_assert_int_eq(y.dtype, PE_F16);
	ck_assert_int_eq(y.shape.dim[0], 3);
	ck_assert_int_eq(y.shape.dim[1], 10);
	float *pe = pe_query_table("sinusoidal", "len=3&dim=6", PE_F32, NULL);
	const uint16_t *yd = y.data;
	for (int row = 0; row < 3; row++) {
		for (int c = 0; c < 4; c++)
			ck_assert_uint_eq(yd[row * 10 + c], xh[row * 4 + c]);
		for (int c = 0; c < 6; c++) /* PE computed in f32 then rounded once to f16 */
			ck_assert_uint_eq(yd[row * 10 + 4 + c], pe_f32_to_f16(pe[row * 6 + c]));
	}
	free(pe);
	pe_buf_destroy(&b);
	pe_resp_free(&r);
}
END_TEST

START_TEST(alibi_json_with_mask_and_dtypes)
{
	const char *body = "{\"shape\":[1,2,3,4],\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,"
			   "-1,-2,-3,-4,-5,-6,-7,-8,-9,-10,-11,-12]}";
	struct pe_resp r;
	post("/v1/alibi/apply?mask=causal&heads=2&format=bin&dtype=f64", "application/json", body, strlen(body), &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.len, 24 * 8);
	/* JSON input computes in f32 unless f64 is asked: here f64 */
	double *bias = pe_query_table("alibi", "heads=2&q_len=3&k_len=4", PE_F64, NULL), *y = (double *)r.body;
	for (int i = 0; i < 24; i++) {
		int col = i % 4, row = (i / 4) % 3, off = 1; /* offset = k_len - q_len */
		double x = i < 12 ? i + 1 : -(i - 11);
		double want = col > row + off ? -1.7976931348623157e308 : x + bias[i];
		ck_assert_msg(y[i] == want, "element %d: %g vs %g", i, y[i], want);
	}
	free(bias);
	pe_resp_free(&r);
	/* a bare nested array, JSON out by default, f16 mask value */
	post("/v1/alibi/apply?mask=causal&dtype=f16", "application/json", "[[[0,0],[0,0]]]", 15, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert(strstr(r.body, "\"shape\":[1,2,2]") != NULL);
	ck_assert(strstr(r.body, "-65500") != NULL);
	pe_resp_free(&r);
}
END_TEST

START_TEST(errors)
{
	struct pe_resp r;
	float x[8] = {0};
	pe_request(&D, "GET", "/v1/alibi/apply", NULL, NULL, 0, &r);
	pe_assert_problem(&r, 405, NULL);
	char h[32];
	ck_assert_str_eq(pe_resp_header(&r, "Allow", h, sizeof h), "POST, OPTIONS");
	pe_resp_free(&r);
	/* each bad request: a problem+json with its status naming its parameter; body NULL: x */
	static const struct {
		const char *path, *ctype, *body;
		long status;
		const char *param;
	} bad[] = {
		{"/v1/alibi/apply", "text/plain", "x", 415, "Content-Type"},
		{"/v1/alibi/apply", "application/octet-stream", NULL, 400, "shape"},
		{"/v1/alibi/apply?shape=2,2,3", "application/octet-stream", NULL, 400, "body"},
		{"/v1/alibi/apply?shape=2,2,2&heads=3", "application/octet-stream", NULL, 400, "heads"},
		{"/v1/alibi/apply?shape=8", "application/octet-stream", NULL, 400, "shape"},
		/* shape= is typed: sizes, at most 8 of them, each up to 2^40 */
		{"/v1/alibi/apply?shape=2,x,2", "application/octet-stream", NULL, 400, "shape"},
		{"/v1/alibi/apply?shape=1,1,1,1,1,1,1,1,8", "application/octet-stream", NULL, 400, "shape"},
		{"/v1/alibi/apply?shape=2199023255552,0", "application/octet-stream", NULL, 400, "shape"},
		{"/v1/alibi/apply?shape=2,2,2&bogus=1", "application/octet-stream", NULL, 400, "bogus"},
		{"/v1/sinusoidal/apply?pe_dim=3", "application/json", "[[1,2],[3,4]]", 400, "pe_dim"},
		{"/v1/sinusoidal/apply", "application/json", "[[1,2],[3,\"a\"]]", 400, "body"},
		/* float32 work: an xscale beyond float32 would make every value infinite (fuzz_params) */
		{"/v1/sinusoidal/apply?shape=2,4&xscale=5e43", "application/octet-stream", NULL, 400, "xscale"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (bad[i].body)
			post(bad[i].path, bad[i].ctype, bad[i].body, strlen(bad[i].body), &r);
		else
			post(bad[i].path, bad[i].ctype, x, sizeof x, &r);
		pe_assert_problem(&r, bad[i].status, bad[i].param);
		pe_resp_free(&r);
	}
	post("/v1/sinusoidal/apply?shape=2,4&xscale=-3e38", "application/octet-stream", x, sizeof x, &r);
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	/* an npy whose header claims more data than it has */
	static const char lying[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (100, 100), }";
	char npy[128 + 16];
	memset(npy, ' ', sizeof npy);
	memcpy(npy, lying, sizeof lying - 1);
	npy[127] = '\n';
	post("/v1/sinusoidal/apply", "application/x-npy", npy, sizeof npy, &r);
	pe_assert_problem(&r, 400, NULL);
	pe_resp_free(&r);
}
END_TEST

START_TEST(body_limits)
{
	struct pe_resp r;
	/* a 1 TiB Content-Length is refused at once, before any body byte is sent */
	static const char req[] = "POST /v1/alibi/apply?shape=1,1,1 HTTP/1.1\r\nHost: x\r\n"
				  "Content-Type: application/octet-stream\r\nContent-Length: 1099511627776\r\n\r\n";
	char reply[4096];
	pe_raw_exchange(&D, req, sizeof req - 1, reply, sizeof reply, 3000);
	ck_assert_msg(strncmp(reply, "HTTP/1.1 413", 12) == 0, "got: %.60s", reply);
	ck_assert(strstr(reply, "application/problem+json") != NULL);
	size_t big = 1000001;
	char *body = calloc(1, big);
	/* a declared length over the limit is answered at once, before the body is read; the client
	 * waits for that answer (Expect: 100-continue) instead of racing the server's close with its
	 * body, which could reset the connection before the 413 was read */
	const char *expect[] = {"Content-Type: application/octet-stream", "Expect: 100-continue", NULL};
	pe_request(&D, "POST", "/v1/alibi/apply?shape=1,1,250000", expect, body, big, &r);
	pe_assert_problem(&r, 413, "body");
	pe_resp_free(&r);
	/* chunked: no Content-Length, capped as it arrives */
	const char *chunked[] = {"Content-Type: application/octet-stream", "Transfer-Encoding: chunked", NULL};
	pe_request(&D, "POST", "/v1/alibi/apply?shape=1,1,250000", chunked, body, big, &r);
	pe_assert_problem(&r, 413, "body");
	pe_resp_free(&r);
	free(body);
	/* a small body whose concatenated table outgrows max_elements: 1100 x (1 + 65536), pe_dim's doing */
	char *rows = malloc(1100 * 4 + 3), *w = rows;
	*w++ = '[';
	for (int i = 0; i < 1100; i++)
		w += sprintf(w, "%s[1]", i ? "," : "");
	strcpy(w, "]");
	post("/v1/sinusoidal/apply?mode=concat&pe_dim=65536", "application/json", rows, strlen(rows), &r);
	pe_assert_problem(&r, 413, "pe_dim");
	pe_resp_free(&r);
	free(rows);
}
END_TEST

/* ---- a transform job that starts too late does nothing (issue 21, family A) ----
 * The HTTP layer runs in this process with a submit hook that holds the job instead of running it,
 * so the test decides when it runs: after its request's job_timeout, or after shutdown cancelled
 * all work. It must then not even decode the body. Seen through the response budget: its limit of
 * one byte refuses (and counts) any reservation, and decoding this raw f16 body reserves one
 * (the float32 working copy), as does everything after it. */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	void (*work)(void *);
	void *arg;
} held = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL};

static int hold_cb(void *ctx, void (*work)(void *), void *arg)
{
	pthread_mutex_lock(&held.lock);
	held.work = work;
	held.arg = arg;
	pthread_cond_signal(&held.cond);
	pthread_mutex_unlock(&held.lock);
	return 0;
}

struct poster {
	struct pe_daemon d;
	struct pe_resp r;
};

static void *post_cb(void *arg)
{
	struct poster *p = arg;
	uint16_t x[2 * 4 * 8] = {0};
	const char *hs[] = {"Content-Type: application/octet-stream", NULL};
	pe_request(&p->d, "POST", "/v1/rope/apply?shape=2,4,8&dtype=f16&format=json", hs, x, sizeof x, &p->r);
	return NULL;
}

/* The block a request body of n bytes takes (the server reserves it on the budget), and the few
 * bytes an aligned allocation may hold past it. */
static size_t body_block(size_t n)
{
	struct pe_buf b;
	pe_buf_init(&b, n);
	size_t size = pe_buf_block_after(&b, n);
	pe_buf_destroy(&b);
	return size + 64;
}

/* Post a transform, let late() make it too late, run the held job here; no reservation was tried
 * (the budget holds the request's body and no more than 64 bytes beside it). */
static void run_late_job(void (*late)(struct pe_http *h))
{
	struct pe_budget *bg = pe_budget_new(body_block(2 * 4 * 8 * sizeof(uint16_t)));
	struct pe_http_options o = {.bind = "127.0.0.1", .max_elements = 1 << 20, .max_body_bytes = 1 << 20,
				    .max_response_bytes = 1 << 24, .max_analysis_cost = 1 << 30, .max_connections = 8,
				    .max_connections_per_ip = 8, .connection_timeout_s = 30, .job_timeout_s = 1,
				    .budget = bg, .hooks = {.submit = hold_cb}};
	struct pe_err err = {0};
	struct pe_http *h = pe_http_start(&o, &err);
	ck_assert_msg(h != NULL, "%s", err.detail);
	struct poster p = {.d = {.s = {.port = pe_http_port(h)}}};
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, post_cb, &p), 0);
	pthread_mutex_lock(&held.lock);
	while (!held.work)
		pthread_cond_wait(&held.cond, &held.lock);
	pthread_mutex_unlock(&held.lock);
	late(h);
	held.work(held.arg); /* as a worker would, now */
	pthread_join(t, NULL);
	ck_assert_msg(p.r.status == 503, "%ld %s", p.r.status, p.r.body ? p.r.body : "");
	pe_resp_free(&p.r);
	struct pe_budget_stats st;
	pe_budget_stats(bg, &st);
	ck_assert_msg(st.refused == 0, "the late job tried %llu reservations", (unsigned long long)st.refused);
	pe_http_tick(h, 1);
	pe_http_stop(h);
	pe_budget_free(bg);
}

/* job_timeout (1 s) passes while the job is queued; the tick answers 503 as the daemon's would. */
static void past_deadline(struct pe_http *h)
{
	double until = pe_monotonic() + 1.25;
	while (pe_monotonic() < until)
		usleep(50000);
	pe_http_tick(h, 0);
}

static void shutting_down(struct pe_http *h) { pe_cancel_all(); }

START_TEST(transform_queued_past_job_timeout_does_nothing) { run_late_job(past_deadline); }
END_TEST

START_TEST(transform_queued_at_shutdown_does_nothing) { run_late_job(shutting_down); }
END_TEST

static Suite *transforms_suite(void)
{
	Suite *s = suite_create("e2e_transforms");
	TCase *tc = tcase_create("transforms");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, start, stop);
	tcase_add_test(tc, sinusoidal_add_raw_f32);
	tcase_add_test(tc, sinusoidal_concat_npy_f16_in);
	tcase_add_test(tc, alibi_json_with_mask_and_dtypes);
	tcase_add_test(tc, errors);
	tcase_add_test(tc, body_limits);
	suite_add_tcase(s, tc);
	TCase *late = tcase_create("late");
	tcase_set_timeout(late, 30);
	tcase_add_test(late, transform_queued_past_job_timeout_does_nothing);
	tcase_add_test(late, transform_queued_at_shutdown_does_nothing);
	suite_add_tcase(s, late);
	return s;
}

PE_TEST_MAIN(transforms_suite)
