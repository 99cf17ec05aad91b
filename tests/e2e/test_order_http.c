/* End-to-end tests of /v1/analysis/order against a real posencd: the GET's JSON against the NumPy
 * known answers (tests/data/order, tests/ref/gen_order.py) to 1e-12, the same X POSTed as npy
 * (float64 and float32) giving the same answer as the GET that drew it, the cache (ETag, hit), and
 * the refusals: perm not a permutation (400 perm), len² and len·dim past their limits (413 len,
 * dim), X not finite or not [len, dim] (400 body), the wrong media type (415), generator
 * parameters on a POST (400 naming them), other methods (405), and a response budget too small
 * for the job (413 len before any job runs). */
#include "support/pe_check.h"
#include "support/pe_daemon.h"
#include "support/pe_kat.h"

#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"

#define DATA "tests/data/order"

static struct pe_daemon D;

static void start(void) { pe_daemon_start(&D, NULL); }
static void stop(void) { ck_assert_int_eq(pe_daemon_stop(&D, SIGTERM), 0); }

static void get(const char *query, struct pe_resp *r)
{
	char path[4096];
	snprintf(path, sizeof path, "/v1/analysis/order?%s", query);
	pe_get(&D, path, r);
}

static void post(const char *query, const char *ctype, const void *body, size_t len, struct pe_resp *r)
{
	char path[4096], h[96];
	snprintf(path, sizeof path, "/v1/analysis/order%s%s", *query ? "?" : "", query);
	snprintf(h, sizeof h, "Content-Type: %s", ctype);
	const char *hs[] = {h, NULL};
	pe_request(&D, "POST", path, hs, body, len, r);
}

/* An npy file of x [rows, cols] as dt (f64 or f32); caller frees. */
static char *npy_of(const double *x, size_t rows, size_t cols, enum pe_dtype dt, size_t *len)
{
	struct pe_buf b;
	struct pe_err err = {0};
	float *f = malloc(rows * cols * sizeof *f);
	for (size_t i = 0; i < rows * cols; i++)
		f[i] = (float)x[i];
	struct pe_tensor_view v = {.shape = {.rank = 2, .dim = {rows, cols}}, .dtype = dt,
				   .data = dt == PE_F64 ? (const void *)x : (const void *)f};
	pe_buf_init(&b, 1u << 26);
	ck_assert_int_eq(pe_npy_write(&b, &v, &err), 0);
	free(f);
	return pe_buf_steal(&b, len);
}

/* doc[field] is a [rows, cols] array within 1e-12 of want. */
static void matrix_close(json_t *doc, const char *field, const double *want, size_t rows, size_t cols, const char *what)
{
	json_t *m = json_object_get(doc, field);
	ck_assert_msg(json_array_size(m) == rows, "%s: %s has %zu rows", what, field, json_array_size(m));
	for (size_t i = 0; i < rows; i++) {
		json_t *row = json_array_get(m, i);
		ck_assert_uint_eq(json_array_size(row), cols);
		for (size_t c = 0; c < cols; c++) {
			double got = json_number_value(json_array_get(row, c));
			ck_assert_msg(fabs(got - want[i * cols + c]) <= 1e-12, "%s %s[%zu][%zu]: %.17g vs %.17g", what, field, i,
				      c, got, want[i * cols + c]);
		}
	}
}

static void check_case(const struct pe_kat *k, json_t *c, json_t *doc, const char *what)
{
	size_t len = (size_t)json_integer_value(json_object_get(c, "len"));
	size_t dim = (size_t)json_integer_value(json_object_get(c, "dim"));
	static const char *const fields[] = {"attention", "attention_permuted", "output", "output_permuted"};
	ck_assert_int_eq(json_integer_value(json_object_get(doc, "len")), (json_int_t)len);
	ck_assert_int_eq(json_integer_value(json_object_get(doc, "dim")), (json_int_t)dim);
	ck_assert_uint_eq(json_array_size(json_object_get(doc, "perm")), len);
	for (int f = 0; f < 4; f++) {
		char field[64];
		size_t cols = f < 2 ? len : dim;
		snprintf(field, sizeof field, "%s_f64", fields[f]);
		double *want = pe_kat_file(k, c, field, len * cols * 8);
		matrix_close(doc, fields[f], want, len, cols, what);
		free(want);
	}
	double diff = json_number_value(json_object_get(c, "output_difference"));
	ck_assert_msg(fabs(json_number_value(json_object_get(doc, "output_difference")) - diff) <= 1e-12, "%s", what);
	ck_assert_int_eq(json_is_true(json_object_get(doc, "equivariant")), json_is_true(json_object_get(c, "equivariant")));
}

/* The case's query without the generator's parameters (a POST brings X itself). */
static void post_query(const char *query, char *out, size_t cap)
{
	size_t n = 0;
	char *q = strdup(query), *save = NULL;
	out[0] = 0;
	for (char *kv = strtok_r(q, "&", &save); kv; kv = strtok_r(NULL, "&", &save))
		if (strncmp(kv, "seed=", 5) && strncmp(kv, "tokens=", 7))
			n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? "&" : "", kv);
	free(q);
}

START_TEST(get_and_post_known_answers)
{
	struct pe_kat k;
	start();
	pe_kat_load(&k, DATA);
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		json_t *c = pe_kat_case(&k, i);
		const char *query = pe_kat_str(c, "query"), *name = pe_kat_str(c, "name");
		size_t len = (size_t)json_integer_value(json_object_get(c, "len"));
		size_t dim = (size_t)json_integer_value(json_object_get(c, "dim"));
		struct pe_resp r;
		char h[64], what[128], pq[1024];
		get(query, &r);
		ck_assert_msg(r.status == 200, "%s: %ld %s", name, r.status, r.body);
		ck_assert_str_eq(pe_resp_header(&r, "Content-Type", h, sizeof h), "application/json");
		json_t *doc = pe_resp_json(&r);
		snprintf(what, sizeof what, "GET %s", name);
		check_case(&k, c, doc, what);
		json_decref(doc);
		pe_resp_free(&r);
		/* the same X, POSTed */
		double *x = pe_kat_file(&k, c, "x_f64", len * dim * 8);
		size_t nlen;
		char *npy = npy_of(x, len, dim, PE_F64, &nlen);
		post_query(query, pq, sizeof pq);
		post(pq, "application/x-npy", npy, nlen, &r);
		ck_assert_msg(r.status == 200, "POST %s: %ld %s", name, r.status, r.body);
		ck_assert_str_eq(pe_resp_header(&r, "Cache-Control", h, sizeof h), "no-store");
		doc = pe_resp_json(&r);
		snprintf(what, sizeof what, "POST %s", name);
		check_case(&k, c, doc, what);
		json_decref(doc);
		pe_resp_free(&r);
		free(npy);
		free(x);
	}
	pe_kat_free(&k);
	stop();
}
END_TEST

/* float32 X works too (widened exactly); the answer is that of the float64 of its values. */
START_TEST(post_float32)
{
	double x[12], xr[12];
	for (int i = 0; i < 12; i++)
		x[i] = 0.1 * i - 0.5, xr[i] = (float)x[i];
	size_t n32, n64;
	char *a = npy_of(x, 3, 4, PE_F32, &n32), *b = npy_of(xr, 3, 4, PE_F64, &n64);
	struct pe_resp r32, r64;
	start();
	post("encoding=sinusoidal", "application/x-npy", a, n32, &r32);
	post("encoding=sinusoidal&len=3&dim=4", "application/x-npy", b, n64, &r64);
	ck_assert_int_eq(r32.status, 200);
	ck_assert_int_eq(r64.status, 200);
	/* len and dim from X, or given and equal: the same document */
	ck_assert_uint_eq(r32.len, r64.len);
	ck_assert(memcmp(r32.body, r64.body, r32.len) == 0);
	json_t *d32 = pe_resp_json(&r32);
	ck_assert(json_is_false(json_object_get(d32, "equivariant")));
	/* the params echo what the answer depends on: X is the body's, so no generator seed */
	ck_assert_ptr_null(json_object_get(json_object_get(d32, "params"), "seed"));
	json_decref(d32);
	pe_resp_free(&r32);
	pe_resp_free(&r64);
	free(a);
	free(b);
	stop();
}
END_TEST

START_TEST(get_is_cached)
{
	struct pe_resp r;
	char h[64], etag[64];
	start();
	get("encoding=rope&len=6&dim=8", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Cache", h, sizeof h), "miss");
	ck_assert_ptr_nonnull(pe_resp_header(&r, "ETag", etag, sizeof etag));
	pe_resp_free(&r);
	get("len=6&dim=8&encoding=rope", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Cache", h, sizeof h), "hit");
	pe_resp_free(&r);
	char inm[96];
	snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
	const char *hs[] = {inm, NULL};
	pe_request(&D, "GET", "/v1/analysis/order?encoding=rope&len=6&dim=8", hs, NULL, 0, &r);
	ck_assert_int_eq(r.status, 304);
	pe_resp_free(&r);
	stop();
}
END_TEST

/* An output parameter asks for the registered table: the attention pair [2, len, len], here as
 * float64 bin, the same numbers as the document's. */
START_TEST(format_gives_the_attention_pair)
{
	struct pe_resp r, t;
	char h[64];
	start();
	get("encoding=sinusoidal&len=5&dim=6&perm=1,0,2,4,3", &r);
	get("encoding=sinusoidal&len=5&dim=6&perm=1,0,2,4,3&format=bin&dtype=f64", &t);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(t.status, 200);
	ck_assert_str_eq(pe_resp_header(&t, "X-PE-Shape", h, sizeof h), "2,5,5");
	ck_assert_uint_eq(t.len, 2 * 25 * 8);
	json_t *doc = pe_resp_json(&r);
	matrix_close(doc, "attention", (const double *)t.body, 5, 5, "bin");
	matrix_close(doc, "attention_permuted", (const double *)t.body + 25, 5, 5, "bin");
	json_decref(doc);
	pe_resp_free(&r);
	pe_resp_free(&t);
	stop();
}
END_TEST

static void get_refused(const char *query, long status, const char *param)
{
	struct pe_resp r;
	get(query, &r);
	pe_assert_problem(&r, status, param);
	pe_resp_free(&r);
}

START_TEST(get_validation)
{
	start();
	get_refused("len=3&perm=0,0,1", 400, "perm");
	get_refused("len=3&perm=0,1", 400, "perm");
	get_refused("len=3&perm=1,2,3", 400, "perm");
	get_refused("len=513&dim=1", 413, "len");
	get_refused("tokens=1,2&len=3", 400, "tokens");
	get_refused("len=512&dim=513", 413, "dim");
	get_refused("encoding=rope&dim=5", 400, "dim");
	get_refused("encoding=none&max_bias=2", 400, "max_bias");
	get_refused("encoding=nope", 400, "encoding");
	get_refused("format=npy&perm=1,1", 400, "perm");
	struct pe_resp r;
	pe_request(&D, "PUT", "/v1/analysis/order", NULL, NULL, 0, &r);
	pe_assert_problem(&r, 405, NULL);
	pe_resp_free(&r);
	stop();
}
END_TEST

static void post_refused(const char *query, const char *ctype, const void *body, size_t len, long status,
			 const char *param)
{
	struct pe_resp r;
	post(query, ctype, body, len, &r);
	pe_assert_problem(&r, status, param);
	pe_resp_free(&r);
}

START_TEST(post_validation)
{
	double x[6] = {1, 2, 3, 4, 5, NAN}, big[4] = {1e200, 1, -1e200, 1};
	size_t n, nb, n3;
	char *npy = npy_of(x, 2, 3, PE_F64, &n), *bnpy = npy_of(big, 2, 2, PE_F64, &nb);
	struct pe_tensor_view v3 = {.shape = {.rank = 3, .dim = {1, 2, 2}}, .dtype = PE_F64, .data = big};
	struct pe_buf b3;
	struct pe_err err = {0};
	pe_buf_init(&b3, 1u << 20);
	ck_assert_int_eq(pe_npy_write(&b3, &v3, &err), 0);
	char *npy3 = pe_buf_steal(&b3, &n3);
	double *tall = calloc(513 * 1, sizeof *tall);
	size_t nt;
	char *tnpy = npy_of(tall, 513, 1, PE_F64, &nt);
	start();
	post_refused("", "application/x-npy", npy, n, 400, "body");         /* NaN */
	post_refused("", "application/x-npy", npy3, n3, 400, "body");       /* not [len, dim] */
	post_refused("", "application/x-npy", bnpy, nb, 400, "body");       /* scores overflow */
	post_refused("", "application/x-npy", tnpy, nt, 413, "body");       /* len^2 past the limit */
	post_refused("len=3", "application/x-npy", bnpy, nb, 400, "body");  /* len disagrees with X */
	post_refused("seed=3", "application/x-npy", bnpy, nb, 400, "seed");
	post_refused("tokens=1,2", "application/x-npy", bnpy, nb, 400, "tokens");
	post_refused("perm=0,0", "application/x-npy", bnpy, nb, 400, "perm");
	post_refused("", "application/json", "[[1,2],[3,4]]", 13, 415, "Content-Type");
	post_refused("", "application/x-npy", "not npy", 7, 400, "body");
	/* a body larger than any X's npy can be is refused as too large, not read whole and parsed */
	size_t huge = 4u << 20;
	char *junk = calloc(huge, 1);
	post_refused("", "application/x-npy", junk, huge, 413, "body");
	free(junk);
	stop();
	free(npy);
	free(bnpy);
	free(npy3);
	free(tnpy);
	free(tall);
}
END_TEST

/* small is served; big is a 413 naming len, and no job is started for it. */
static void refused_before_job(const char *small, const char *big)
{
	struct pe_resp r;
	get(small, &r);
	ck_assert_msg(r.status == 200, "%s: %ld", small, (long)r.status);
	pe_resp_free(&r);
	double jobs = pe_metric(&D, "posenc_jobs_total");
	get(big, &r);
	pe_assert_problem(&r, 413, "len");
	pe_resp_free(&r);
	ck_assert_msg(pe_metric(&D, "posenc_jobs_total") == jobs, "%s started a job", big);
}

/* A job that could never fit the response budget is refused before it exists. */
START_TEST(budget_refused_before_the_job)
{
	const char *args[] = {"--response-budget-bytes", "1048576", NULL};
	pe_daemon_start(&D, args);
	refused_before_job("len=8&dim=8", "len=512&dim=512");
	stop();
}
END_TEST

/* The analysis' work is held to max_analysis_cost like every analysis: 413 before any job. */
START_TEST(work_within_max_analysis_cost)
{
	const char *args[] = {"--max-analysis-cost", "1000", NULL};
	double x[16] = {0};
	size_t n;
	char *npy = npy_of(x, 4, 4, PE_F64, &n);
	struct pe_resp r;
	pe_daemon_start(&D, args);
	refused_before_job("len=2&dim=2", "len=8&dim=16");
	post("", "application/x-npy", npy, n, &r);
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	free(npy);
	double big[8 * 16] = {0};
	npy = npy_of(big, 8, 16, PE_F64, &n);
	post("", "application/x-npy", npy, n, &r);
	pe_assert_problem(&r, 413, "body");
	pe_resp_free(&r);
	free(npy);
	stop();
}
END_TEST

static Suite *order_suite(void)
{
	Suite *s = suite_create("e2e_order");
	TCase *tc = tcase_create("order");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, get_and_post_known_answers);
	tcase_add_test(tc, post_float32);
	tcase_add_test(tc, get_is_cached);
	tcase_add_test(tc, format_gives_the_attention_pair);
	tcase_add_test(tc, get_validation);
	tcase_add_test(tc, post_validation);
	tcase_add_test(tc, budget_refused_before_the_job);
	tcase_add_test(tc, work_within_max_analysis_cost);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(order_suite)
