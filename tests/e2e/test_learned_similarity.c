/* End-to-end test of /v1/analysis/similarity?encoding=learned:{name}: a table uploaded over HTTP,
 * its [n, n] dot products (summed in double, row by row in channel order, as computed here too),
 * with len= resampling first, cached and ETagged by the table's content, and the errors (with the
 * text of their detail). The work is bounded like the core's analyses (issue 21, family A): by
 * max_analysis_cost before it starts, and by job_timeout while it runs. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "posenc/posenc.h"

/* PUT rows x cols f32 values as /v1/learned/<name>; the status. */
static long put_table(const struct pe_daemon *d, const char *name, int rows, int cols, const float *t)
{
	struct pe_tensor_view v = {.shape = {2, {(size_t)rows, (size_t)cols}}, .dtype = PE_F32, .data = t};
	struct pe_buf b;
	struct pe_resp r;
	char path[128];
	const char *ct[] = {"Content-Type: application/x-npy", NULL};
	pe_buf_init(&b, (size_t)1 << 28);
	ck_assert_int_eq(pe_npy_write(&b, &v, NULL), 0);
	snprintf(path, sizeof path, "/v1/learned/%s", name);
	pe_request(d, "PUT", path, ct, b.data, b.len, &r);
	long status = r.status;
	pe_resp_free(&r);
	pe_buf_destroy(&b);
	return status;
}


/* A rows x cols table of (i % 13) / 13, element i in row-major order, PUT as name; the status. */
static long put_ramp(const struct pe_daemon *d, const char *name, int rows, int cols)
{
	int n = rows * cols;
	float *t = malloc((size_t)n * sizeof *t);
	ck_assert_ptr_nonnull(t);
	for (int i = 0; i < n; i++)
		t[i] = (float)(i % 13) / 13.0f;
	long status = put_table(d, name, rows, cols, t);
	free(t);
	return status;
}

static void expect(const struct pe_daemon *d, const char *path, long status, const char *param)
{
	struct pe_resp r;
	char want[64];
	pe_get(d, path, &r);
	snprintf(want, sizeof want, "\"param\":\"%s\"", param ? param : "");
	ck_assert_msg(r.status == status && (!param || (r.body && strstr(r.body, want))), "%s: %ld %s", path, r.status,
		      r.body ? r.body : "");
	pe_resp_free(&r);
}

/* Starts d on a data directory of this process's own, /tmp/posenc-<tag>-<pid> (its path into dir),
 * with the further arguments extra (NULL-terminated, or NULL). */
static void start_in(struct pe_daemon *d, char dir[64], const char *tag, const char *const *extra)
{
	const char *args[16] = {"--data-dir", dir};
	size_t n = 2;
	snprintf(dir, 64, "/tmp/posenc-%s-%d", tag, (int)getpid());
	for (; extra && *extra; extra++)
		args[n++] = *extra;
	args[n] = NULL;
	pe_daemon_start(d, args);
}

/* Stops d (it must exit cleanly) and removes its data directory. */
static void stop_and_remove(struct pe_daemon *d, const char *dir)
{
	char cmd[128];
	ck_assert_int_eq(pe_daemon_stop(d, SIGTERM), 0);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(similarity_of_an_upload)
{
	char dir[64], h[96];
	struct pe_daemon d;
	start_in(&d, dir, "sim", NULL);
	enum { N = 6, C = 5 };
	float t[N * C];
	for (int i = 0; i < N * C; i++)
		t[i] = (float)((i * 37) % 11) / 7.0f - 0.6f;
	ck_assert_int_eq(put_table(&d, "emb", N, C, t), 201);
	struct pe_resp r;
	pe_get(&d, "/v1/analysis/similarity?encoding=learned:emb&format=bin&dtype=f64", &r);
	ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Shape", h, sizeof h), "6,6");
	ck_assert_uint_eq(r.len, N * N * 8);
	const double *g = (const double *)r.body;
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++) {
			double acc = 0;
			for (int k = 0; k < C; k++)
				acc += (double)t[i * C + k] * (double)t[j * C + k];
			ck_assert_msg(g[i * N + j] == acc, "(%d,%d) %.17g vs %.17g", i, j, g[i * N + j], acc);
		}
	char etag[64];
	pe_resp_header(&r, "ETag", etag, sizeof etag);
	pe_resp_free(&r);
	pe_get(&d, "/v1/analysis/similarity?encoding=learned:emb&format=bin&dtype=f64", &r);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Cache", h, sizeof h), "hit");
	pe_resp_free(&r);
	/* resampled to 12 positions first */
	pe_get(&d, "/v1/analysis/similarity?encoding=learned:emb&len=12&format=bin", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Shape", h, sizeof h), "12,12");
	pe_resp_free(&r);
	/* replacing the table changes the answer's ETag */
	t[0] += 1;
	put_table(&d, "emb", N, C, t);
	pe_get(&d, "/v1/analysis/similarity?encoding=learned:emb&format=bin&dtype=f64", &r);
	ck_assert_str_ne(pe_resp_header(&r, "ETag", h, sizeof h), etag);
	pe_resp_free(&r);
	/* errors */
	pe_get(&d, "/v1/analysis/similarity?encoding=learned:nope", &r);
	ck_assert_int_eq(r.status, 404);
	pe_resp_free(&r);
	pe_get(&d, "/v1/analysis/similarity?encoding=learned:..%2Fx", &r);
	ck_assert_int_eq(r.status, 400);
	ck_assert(strstr(r.body, "\"param\":\"encoding\"") != NULL);
	pe_resp_free(&r);
	/* the message says both what was wrong and why, intact (it was once formatted into itself) */
	pe_get(&d, "/v1/analysis/similarity?encoding=learned:a%20b", &r);
	ck_assert_int_eq(r.status, 400);
	json_t *doc = json_loadb(r.body, r.len, 0, NULL);
	ck_assert_ptr_nonnull(doc);
	ck_assert_str_eq(json_string_value(json_object_get(doc, "detail")),
			 "encoding=learned:{name} needs a valid table name: name may hold only A-Z a-z 0-9 . _ - "
			 "(byte 2 is 0x20)");
	json_decref(doc);
	pe_resp_free(&r);
	pe_get(&d, "/v1/analysis/similarity?encoding=learned:emb&dim=4", &r);
	ck_assert_int_eq(r.status, 400);
	pe_resp_free(&r);
	stop_and_remove(&d, dir);
}
END_TEST

/* GET path is a 400 naming encoding with exactly this detail. */
static void expect_encoding_detail(const struct pe_daemon *d, const char *path, const char *detail)
{
	struct pe_resp r;
	pe_get(d, path, &r);
	ck_assert_msg(r.status == 400, "%s: %ld %s", path, r.status, r.body ? r.body : "");
	json_t *doc = json_loadb(r.body, r.len, 0, NULL);
	ck_assert_msg(doc != NULL, "%s: not JSON", path);
	ck_assert_str_eq(json_string_value(json_object_get(doc, "param")), "encoding");
	ck_assert_msg(!strcmp(json_string_value(json_object_get(doc, "detail")), detail), "%s: '%s', expected '%s'",
		      path, json_string_value(json_object_get(doc, "detail")), detail);
	json_decref(doc);
	pe_resp_free(&r);
}

/* An encoding similarity does not take lists every form it does take, the stored table's too, as
 * openapi.yaml documents them; names are case-sensitive, as every choice is. Other routes'
 * encodings, and an encoding's other faults, keep their own words. */
START_TEST(similarity_encoding_choices_name_learned)
{
	char dir[64];
	struct pe_daemon d;
	start_in(&d, dir, "simenc", NULL);
	const char *all = "encoding must be one of: sinusoidal, rope, learned:{name}";
	expect_encoding_detail(&d, "/v1/analysis/similarity?encoding=Learned:x&len=4&dim=8", all);
	expect_encoding_detail(&d, "/v1/analysis/similarity?len=4&dim=8&encoding=Rope", all);
	expect_encoding_detail(&d, "/v1/analysis/similarity?encoding=learned", all);
	expect_encoding_detail(&d, "/v1/analysis/similarity?encoding=rope&encoding=nope&len=4&dim=8",
			       "encoding is given more than once");
	expect_encoding_detail(&d, "/v1/analysis/order?encoding=learned:x",
			       "encoding must be one of: none, sinusoidal, rope, alibi");
	stop_and_remove(&d, dir);
}
END_TEST

/* The dot products' work, rows*(rows+1)/2*cols multiply-adds, is held to max_analysis_cost before
 * any work (413 naming what sets the rows), as the core's encodings are: [400, 16] costs 1283200. */
START_TEST(similarity_cost_is_bounded)
{
	char dir[64];
	const char *args[] = {"--max-analysis-cost", "1000000", NULL};
	struct pe_daemon d;
	start_in(&d, dir, "simcost", args);
	ck_assert_int_eq(put_ramp(&d, "wide", 8, 16), 201);
	ck_assert_int_eq(put_ramp(&d, "tall", 400, 16), 201);
	expect(&d, "/v1/analysis/similarity?encoding=learned:wide&format=bin", 200, NULL);
	/* 353 rows: 999664 multiply-adds; 354 rows: 1005360 */
	expect(&d, "/v1/analysis/similarity?encoding=learned:wide&len=353&format=bin", 200, NULL);
	expect(&d, "/v1/analysis/similarity?encoding=learned:wide&len=354&format=bin", 413, "len");
	expect(&d, "/v1/analysis/similarity?encoding=learned:tall&format=bin", 413, "encoding");
	expect(&d, "/v1/learned/tall?format=bin", 200, NULL); /* the table itself costs no analysis */
	stop_and_remove(&d, dir);
}
END_TEST

/* One worker, job_timeout 1 s, no practical cost limit: dot products that would run for many
 * seconds (4096 rows of 4096) get 503 at job_timeout and stop there, so that same worker serves
 * the next request at once instead of leaving it to time out behind them. */
START_TEST(similarity_stops_at_job_timeout)
{
	char dir[64];
	const char *args[] = {"--workers", "1", "--job-timeout", "1", "--max-analysis-cost", "1000000000000000", NULL};
	struct pe_daemon d;
	start_in(&d, dir, "simtime", args);
	ck_assert_int_eq(put_ramp(&d, "big", 2, 4096), 201);
	ck_assert_int_eq(put_ramp(&d, "small", 2, 2), 201);
	struct pe_resp r;
	pe_get(&d, "/v1/analysis/similarity?encoding=learned:big&len=4096&format=bin", &r);
	ck_assert_msg(r.status == 503 && r.body && strstr(r.body, "job-timeout"), "%ld %s", r.status,
		      r.body ? r.body : "");
	pe_resp_free(&r);
	/* The one worker is free again once the stopped similarity has unwound: a small table is then
	 * served. On a loaded machine the unwinding may outlast the small table's own 1 s job_timeout,
	 * so its 503 job-timeout is retried for up to 20 s; a worker that never comes back fails. */
	long status = 0;
	for (int i = 0; i < 40 && status != 200; i++) {
		pe_get(&d, "/v1/learned/small?format=bin", &r);
		status = r.status;
		ck_assert_msg(status == 200 || (status == 503 && r.body && strstr(r.body, "job-timeout")), "%ld %s",
			      status, r.body ? r.body : "");
		pe_resp_free(&r);
		if (status != 200)
			usleep(500000);
	}
	ck_assert_int_eq(status, 200);
	stop_and_remove(&d, dir);
}
END_TEST

static Suite *learned_similarity_suite(void)
{
	Suite *s = suite_create("e2e_learned_similarity");
	TCase *tc = tcase_create("similarity");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, similarity_of_an_upload);
	tcase_add_test(tc, similarity_cost_is_bounded);
	tcase_add_test(tc, similarity_encoding_choices_name_learned);
	tcase_add_test(tc, similarity_stops_at_job_timeout);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(learned_similarity_suite)
