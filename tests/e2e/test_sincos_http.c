/* End-to-end test of diffusers' sin-cos grids and timestep embeddings against a real posencd:
 * GET /v1/sinusoidal2d (scaled, cropped), /v1/sinusoidal3d and /v1/sinusoidal/timestep against the
 * known answers of tests/ref/gen_sincos_grids.py (compat=hf byte for byte PyTorch's float32 table;
 * exact f64 within 1 ulp of the float64 reference), POST /v1/sinusoidal/timestep with the same
 * timesteps as a JSON array and as npy vectors (the GET's bytes), and the refusals: bad
 * parameters, bodies, media types, sizes past max_elements and max_body_bytes, each a problem
 * naming its parameter. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"
#include "support/pe_kat_http.h"

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"

static const char *const dirs[] = {"tests/data/sinusoidal2d_scaled", "tests/data/sinusoidal3d", "tests/data/timestep"};

/* Does this CPU run PyTorch's (and our) AVX2+FMA SLEEF kernels? Else hf timesteps are within 1 ulp. */
static int torch_bits(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

static void get_bin(const struct pe_daemon *d, const char *table, const char *query, const char *dtype, struct pe_resp *r)
{
	char url[8192];
	snprintf(url, sizeof url, "/v1/%s?%s&format=bin&dtype=%s", table, query, dtype);
	pe_get(d, url, r);
	ck_assert_msg(r->status == 200, "%s: %ld %s", url, r->status, r->body);
}

/* Every case: hf f32 bytes against torch, exact f64 within 1 ulp of numpy. */
START_TEST(known_answers)
{
	struct pe_kat_walk w;
	pe_kat_walk_start(&w, dirs[0]);
	for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
		pe_kat_walk_load(&w, dirs[k]);
		while (pe_kat_walk_next(&w, NULL)) {
			json_t *c = w.c;
			size_t n = w.n;
			struct pe_resp r;
			const char *table = pe_kat_str(c, "table");
			if (pe_kat_has(c, "torch_f32")) {
				float *ref = pe_kat_file(&w.k, c, "torch_f32", n * 4);
				get_bin(&w.d, table, pe_kat_str(c, "hf_query"), "f32", &r);
				ck_assert_uint_eq(r.len, n * 4);
				for (size_t j = 0; j < n; j++) {
					float g;
					memcpy(&g, r.body + 4 * j, 4);
					PE_CHECK(pe_ulp_f32(g, ref[j]) <= (torch_bits() ? 0u : 1u), "%s [%zu]: %.9g vs torch %.9g",
					         pe_kat_str(c, "hf_query"), j, g, ref[j]);
				}
				pe_resp_free(&r);
				free(ref);
			}
			double *ref = pe_kat_file(&w.k, c, "ref_f64", n * 8);
			get_bin(&w.d, table, pe_kat_str(c, "query"), "f64", &r);
			ck_assert_uint_eq(r.len, n * 8);
			for (size_t j = 0; j < n; j++) {
				double g;
				memcpy(&g, r.body + 8 * j, 8);
				PE_CHECK(pe_ulp_f64(g, ref[j]) <= 1, "%s [%zu]", pe_kat_str(c, "query"), j);
			}
			pe_resp_free(&r);
			free(ref);
			w.checked += n;
		}
	}
	pe_kat_walk_end(&w, 100001); /* more than 100000 values */
}
END_TEST

/* An npy vector of the timesteps as dtype ('<f8', '<f4' or '<i8'). */
static void npy_body(json_t *ts, const char *descr, struct pe_buf *b)
{
	char head[128];
	size_t n = json_array_size(ts);
	int w = snprintf(head, sizeof head, "{'descr': '%s', 'fortran_order': False, 'shape': (%zu,), }", descr, n);
	size_t total = 10 + (size_t)w + 1, pad = (64 - total % 64) % 64;
	pe_buf_init(b, 1 << 24);
	pe_buf_append(b, "\x93NUMPY\x01\x00", 8);
	uint16_t hl = (uint16_t)(w + pad + 1);
	pe_buf_append(b, &hl, 2);
	pe_buf_append(b, head, (size_t)w);
	for (size_t i = 0; i < pad; i++)
		pe_buf_append(b, " ", 1);
	pe_buf_append(b, "\n", 1);
	for (size_t i = 0; i < n; i++) {
		double v = json_number_value(json_array_get(ts, i));
		float f = (float)v;
		int64_t q = (int64_t)v;
		if (!strcmp(descr, "<f8"))
			pe_buf_append(b, &v, 8);
		else if (!strcmp(descr, "<f4"))
			pe_buf_append(b, &f, 4);
		else
			pe_buf_append(b, &q, 8);
	}
}

static void post(const struct pe_daemon *d, const char *query, const char *ctype, const void *body, size_t len,
		 struct pe_resp *r)
{
	char url[8192], h[96];
	snprintf(url, sizeof url, "/v1/sinusoidal/timestep?%s&format=bin", query);
	snprintf(h, sizeof h, "Content-Type: %s", ctype);
	const char *hs[] = {h, NULL};
	pe_request(d, "POST", url, hs, body, len, r);
}

/* POST with the body's timesteps gives the GET's bytes: JSON and npy f64 always; npy f32 and i8
 * where the values survive the conversion (hf converts to float first anyway; integers). */
START_TEST(post_is_the_get_table)
{
	struct pe_kat_walk w;
	pe_kat_walk_start(&w, dirs[2]);
	while (pe_kat_walk_next(&w, NULL)) {
		json_t *c = w.c, *ts = json_object_get(c, "timesteps");
		for (int hf = 0; hf < 2; hf++) {
			const char *q = pe_kat_str(c, hf ? "hf_query" : "query"), *rest = strchr(q, '&') + 1;
			struct pe_resp g, r;
			get_bin(&w.d, "sinusoidal/timestep", q, "f32", &g);
			char *js = json_dumps(ts, JSON_COMPACT);
			post(&w.d, rest, "application/json", js, strlen(js), &r);
			ck_assert_msg(r.status == 200 && r.len == g.len && !memcmp(r.body, g.body, g.len), "JSON %s: %ld %s", q,
				      r.status, r.status == 200 ? "" : r.body);
			pe_resp_free(&r);
			free(js);
			int integral = 1;
			for (size_t t = 0; t < json_array_size(ts); t++)
				integral &= json_number_value(json_array_get(ts, t)) == (double)(int64_t)json_number_value(json_array_get(ts, t));
			const char *descrs[] = {"<f8", hf ? "<f4" : NULL, integral ? "<i8" : NULL};
			for (int k = 0; k < 3; k++) {
				if (!descrs[k])
					continue;
				struct pe_buf b;
				npy_body(ts, descrs[k], &b);
				post(&w.d, rest, "application/x-npy", b.data, b.len, &r);
				ck_assert_msg(r.status == 200 && r.len == g.len && !memcmp(r.body, g.body, g.len), "npy %s %s: %ld",
					      descrs[k], q, r.status);
				pe_resp_free(&r);
				pe_buf_destroy(&b);
				w.checked++;
			}
			pe_resp_free(&g);
		}
	}
	pe_kat_walk_end(&w, 21); /* more than 20 posts */
}
END_TEST

START_TEST(refusals_name_the_parameter)
{
	static const struct {
		const char *url;
		long status;
		const char *param;
	} bad[] = {
		{"/v1/sinusoidal3d?frames=2&height=2&width=2&dim=24", 400, "dim"},
		{"/v1/sinusoidal3d?frames=2&height=2&width=2&dim=16&spatial_interpolation_scale=0", 400, "spatial_interpolation_scale"},
		{"/v1/sinusoidal3d?frames=x&height=2&width=2&dim=16", 400, "frames"},
		{"/v1/sinusoidal2d?height=200&width=2&dim=8&pos_embed_max_size=192", 400, "height"},
		{"/v1/sinusoidal2d?height=2&width=4&dim=8&base_size=-1", 400, "base_size"},
		{"/v1/sinusoidal2d?height=2&width=4&dim=8&interpolation_scale=inf", 400, "interpolation_scale"},
		{"/v1/sinusoidal/timestep?timesteps=1,abc&dim=8", 400, "timesteps"},
		{"/v1/sinusoidal/timestep?dim=8", 400, "timesteps"},
		{"/v1/sinusoidal/timestep?timesteps=1&dim=8&downscale_freq_shift=4", 400, "downscale_freq_shift"},
		{"/v1/sinusoidal/timestep?timesteps=1&dim=8&max_period=-1", 400, "max_period"},
		/* angles past float32 (compat=hf) or float64 would be NaN or inf in the table */
		{"/v1/sinusoidal/timestep?timesteps=1e20&dim=8&scale=1e20&compat=hf", 400, "timesteps"},
		{"/v1/sinusoidal/timestep?timesteps=0,1&dim=4&max_period=1e-30&downscale_freq_shift=1.999999", 400,
		 "downscale_freq_shift"},
	};
	struct pe_daemon d;
	struct pe_resp r;
	pe_daemon_start(&d, NULL);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		pe_get(&d, bad[i].url, &r);
		ck_assert_msg(r.status == bad[i].status, "%s: %ld", bad[i].url, r.status);
		pe_assert_problem(&r, bad[i].status, bad[i].param);
		pe_resp_free(&r);
	}
	static const struct {
		const char *query, *ctype, *body;
		long status;
		const char *param;
	} bodies[] = {
		{"dim=8", "application/json", "[[1,2]]", 400, "body"},
		{"dim=8", "application/json", "[]", 400, "body"},
		{"dim=8", "application/json", "[1,\"a\"]", 400, "body"},
		{"dim=8", "application/json", "[1,1e31]", 400, "body"},
		{"dim=8", "application/json", "[1,", 400, "body"},
		{"dim=8", "application/x-npy", "\x93NUMPY junk", 400, "body"},
		{"dim=8&timesteps=1", "application/json", "[1]", 400, "timesteps"},
		{"dim=8&downscale_freq_shift=4", "application/json", "[1]", 400, "downscale_freq_shift"},
		{"dim=8&scale=1e30&compat=hf", "application/json", "[1e30]", 400, "body"},
		{"dim=8", "text/plain", "[1]", 415, "Content-Type"},
	};
	for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
		post(&d, bodies[i].query, bodies[i].ctype, bodies[i].body, strlen(bodies[i].body), &r);
		ck_assert_msg(r.status == bodies[i].status, "POST %s %s: %ld %s", bodies[i].query, bodies[i].body, r.status, r.body);
		pe_assert_problem(&r, bodies[i].status, bodies[i].param);
		pe_resp_free(&r);
	}
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* T·H·W·D and N·dim against max_elements before any work; bodies against max_body_bytes. */
START_TEST(sizes_are_bounded)
{
	struct pe_daemon d;
	struct pe_resp r;
	const char *argv[] = {"--max-elements", "1000", "--max-body-bytes", "4096", NULL};
	pe_daemon_start(&d, argv);
	pe_get(&d, "/v1/sinusoidal3d?frames=4&height=4&width=4&dim=16&format=bin", &r);
	ck_assert_int_eq(r.status, 413);
	pe_resp_free(&r);
	pe_get(&d, "/v1/sinusoidal3d?frames=65536&height=1048576&width=1048576&dim=65536", &r);
	ck_assert_int_eq(r.status, 413);
	pe_resp_free(&r);
	pe_get(&d, "/v1/sinusoidal3d?frames=3&height=4&width=5&dim=16&format=bin", &r); /* 960 */
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.len, 960 * 4);
	pe_resp_free(&r);
	char body[2048];
	size_t len = 0;
	body[len++] = '[';
	for (int i = 0; i < 126; i++)
		len += (size_t)snprintf(body + len, sizeof body - len, "%s%d", i ? "," : "", i);
	body[len++] = ']';
	post(&d, "dim=8", "application/json", body, len, &r); /* 1008 elements */
	pe_assert_problem(&r, 413, "body");
	pe_resp_free(&r);
	post(&d, "dim=7", "application/json", body, len, &r); /* 882 */
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.len, 126 * 7 * 4);
	pe_resp_free(&r);
	char *big = calloc(1, 8192);
	post(&d, "dim=8", "application/x-npy", big, 8192, &r);
	pe_assert_problem(&r, 413, "body");
	pe_resp_free(&r);
	free(big);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sincos_http");
	TCase *tc = tcase_create("sincos");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, known_answers);
	tcase_add_test(tc, post_is_the_get_table);
	tcase_add_test(tc, refusals_name_the_parameter);
	tcase_add_test(tc, sizes_are_bounded);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
