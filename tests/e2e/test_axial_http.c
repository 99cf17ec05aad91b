/* End-to-end test of axial RoPE against a real posencd: GET /v1/rope/axial/positions and
 * /v1/rope/axial against the known answers of tests/ref/gen_axial.py (npy, exact f64 and hf f32),
 * POST /v1/rope/axial with a case's ids as an npy body (f64 and f32 bodies; compat=hf bit for bit
 * PyTorch's on AVX2 CPUs, as test_axial.c argues), POST /v1/rope/apply
 * with axes_dim and an ids part against diffusers' apply_rotary_emb (float64 NumPy within float32
 * rounding, the torch float32 module bit for bit), and the refusals: grids, presets, axes, ids
 * bodies, sizes, each a problem naming its parameter. */
#include "support/pe_check.h"
#include "support/pe_cpu.h"
#include "support/pe_daemon.h"
#include "support/pe_kat_http.h"

#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"
#include "test_apply_positions_form.h"

#define DATA_DIR "tests/data/axial"

static const char *const npy_h[] = {"Content-Type: application/x-npy", NULL};

/* GET path?query&format=npy&dtype=dt: the view of the answer (r keeps the bytes). */
static void get_npy(const struct pe_daemon *d, const char *path, const char *query, const char *dt, struct pe_resp *r,
		    struct pe_tensor_view *v)
{
	char url[4096];
	snprintf(url, sizeof url, "%s?%s&format=npy&dtype=%s", path, query, dt);
	pe_get(d, url, r);
	ck_assert_msg(r->status == 200, "%s: %ld %s", url, r->status, r->body);
	ck_assert_int_eq(pe_npy_parse(r->body, r->len, 1 << 26, v, NULL), 0);
}

/* compat=hf against PyTorch: equal where SLEEF's AVX2 functions run as PyTorch's do, else 1 ulp. */
static uint64_t hf_bound(void) { return pe_cpu_avx2() ? 0 : 1; }

/* The largest ulp distance of n answer values (dtype dt) from a reference file's (f64 or f32). */
static uint64_t max_ulps(const struct pe_tensor_view *v, const void *ref, int ref_f64, size_t n)
{
	uint64_t m = 0;
	for (size_t i = 0; i < n; i++) {
		double w = ref_f64 ? ((const double *)ref)[i] : ((const float *)ref)[i];
		uint64_t u = v->dtype == PE_F64 ? pe_ulp_f64(((const double *)v->data)[i], w)
					       : pe_ulp_f32(((const float *)v->data)[i], (float)w);
		m = u > m ? u : m;
	}
	return m;
}

/* Every GET case (positions and tables): exact f64 vs NumPy, hf f32 vs torch. */
START_TEST(get_known_answers)
{
	static const char *const tables[] = {"rope/axial", "rope/axial/positions", NULL};
	struct pe_kat_walk w;
	pe_kat_walk_start(&w, DATA_DIR);
	while (pe_kat_walk_next(&w, tables)) {
		json_t *c = w.c;
		const char *table = pe_kat_str(c, "table");
		int positions = !strcmp(table, "rope/axial/positions");
		char path[64];
		struct pe_resp r;
		struct pe_tensor_view v;
		snprintf(path, sizeof path, "/v1/%s", table);
		double *ref = pe_kat_file(&w.k, c, "ref_f64", w.n * 8);
		get_npy(&w.d, path, pe_kat_str(c, "query"), "f64", &r, &v);
		ck_assert_int_eq(memcmp(&v.shape, &w.s, sizeof w.s), 0);
		ck_assert_uint_le(max_ulps(&v, ref, 1, w.n), positions ? 0 : 1);
		pe_resp_free(&r);
		free(ref);
		if (pe_kat_has(c, "torch_f32")) {
			float *t = pe_kat_file(&w.k, c, "torch_f32", w.n * 4);
			get_npy(&w.d, path, pe_kat_str(c, "hf_query"), "f32", &r, &v);
			ck_assert_uint_le(max_ulps(&v, t, 0, w.n), positions ? 0 : hf_bound());
			pe_resp_free(&r);
			free(t);
		}
		w.checked++;
	}
	pe_kat_walk_end(&w, 20);
}
END_TEST

/* An npy body of ids [n][naxes] in dtype dt (f64 or f32); caller frees. */
static char *ids_npy(json_t *ids, enum pe_dtype dt, size_t *len)
{
	size_t n = json_array_size(ids), na = json_array_size(json_array_get(ids, 0));
	double *v = malloc(n * na * 8);
	for (size_t i = 0; i < n * na; i++)
		v[i] = json_number_value(json_array_get(json_array_get(ids, i / na), i % na));
	if (dt == PE_F32)
		for (size_t i = 0; i < n * na; i++)
			((float *)v)[i] = (float)v[i];
	struct pe_tensor_view t = {.shape = {.rank = 2, .dim = {n, na}}, .dtype = dt, .data = v};
	struct pe_buf b;
	pe_buf_init(&b, 1 << 24);
	ck_assert_int_eq(pe_npy_write(&b, &t, NULL), 0);
	free(v);
	return pe_buf_steal(&b, len);
}

/* POST the ids of every POST case: the table of the known answers (both hf arithmetics). */
START_TEST(post_known_answers)
{
	static const char *const tables[] = {"rope/axial POST", NULL};
	static const struct {
		const char *query, *file, *dtype;
	} runs[] = {{"query", "ref_f64", "f64"}, {"hf_query", "torch_f32", "f32"}, {"hf32_query", "torchf32freq_f32", "f32"}};
	struct pe_kat_walk w;
	pe_kat_walk_start(&w, DATA_DIR);
	while (pe_kat_walk_next(&w, tables)) {
		json_t *c = w.c;
		for (int body_dt = 0; body_dt < 2; body_dt++)
			for (size_t q = 0; q < sizeof runs / sizeof runs[0]; q++) {
				size_t len;
				char *body = ids_npy(json_object_get(c, "ids"), body_dt ? PE_F32 : PE_F64, &len), url[512];
				int f64 = !strcmp(runs[q].dtype, "f64");
				void *ref = pe_kat_file(&w.k, c, runs[q].file, w.n * (f64 ? 8 : 4));
				struct pe_resp r;
				struct pe_tensor_view v;
				snprintf(url, sizeof url, "/v1/rope/axial?%s&format=npy&dtype=%s", pe_kat_str(c, runs[q].query),
					 runs[q].dtype);
				pe_request(&w.d, "POST", url, npy_h, body, len, &r);
				ck_assert_msg(r.status == 200, "%s: %ld %s", url, r.status, r.body);
				ck_assert_int_eq(pe_npy_parse(r.body, r.len, 1 << 24, &v, NULL), 0);
				ck_assert_int_eq(memcmp(&v.shape, &w.s, sizeof w.s), 0);
				ck_assert_uint_le(max_ulps(&v, ref, f64, w.n), f64 ? 1 : hf_bound());
				ck_assert_ptr_nonnull(strstr(r.headers, "no-store"));
				pe_resp_free(&r);
				free(ref);
				free(body);
				w.checked++;
			}
	}
	pe_kat_walk_end(&w, 6);
}
END_TEST

static double elem(const struct pe_tensor_view *v, size_t i)
{
	return v->dtype == PE_F64 ? ((const double *)v->data)[i] : ((const float *)v->data)[i];
}

/* rope/apply with axes_dim: the ids part rotates x as diffusers does. compat=exact rounds each cos/sin
 * once to float32 and rotates in float32 (each rotated channel within 2^-22·(|a| + |b|) plus one
 * rounding of the float64 answer, as test_apply_positions_kat.c argues); compat=hf's cos/sin are
 * FluxPosEmbed's, so the answer is torch's bit for bit. */
START_TEST(apply_known_answers)
{
	struct pe_daemon d;
	size_t xlen, plen, rlen, tlen, blen;
	char *x = pe_test_read_file(DATA_DIR "/apply_flux.x.npy", &xlen), *p = pe_test_read_file(DATA_DIR "/apply_flux.pos.npy", &plen);
	char *ref = pe_test_read_file(DATA_DIR "/apply_flux.ref.npy", &rlen), *tor = pe_test_read_file(DATA_DIR "/apply_flux.torch.npy", &tlen);
	struct pe_tensor_view xv, rv, tv, got;
	ck_assert_int_eq(pe_npy_parse(x, xlen, 1 << 24, &xv, NULL), 0);
	ck_assert_int_eq(pe_npy_parse(ref, rlen, 1 << 24, &rv, NULL), 0);
	ck_assert_int_eq(pe_npy_parse(tor, tlen, 1 << 24, &tv, NULL), 0);
	const struct form_part parts[] = {{"x", "application/octet-stream", x, xlen}, {"positions", NULL, p, plen}};
	char *body = form_body(parts, 2, &blen);
	pe_daemon_start(&d, NULL);
	struct pe_resp r;
	int of;
	size_t n = pe_shape_count(&xv.shape, &of), last = xv.shape.dim[xv.shape.rank - 1];
	pe_request(&d, "POST", "/v1/rope/apply?axes_dim=16,56,56", form_headers, body, blen, &r);
	ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
	ck_assert_int_eq(pe_npy_parse(r.body, r.len, 1 << 24, &got, NULL), 0);
	ck_assert_int_eq(got.dtype, PE_F32);
	for (size_t i = 0; i < n; i++) {
		double m = 0;
		for (size_t c = i - i % last; c < i - i % last + last; c++)
			m = fabs(elem(&xv, c)) > m ? fabs(elem(&xv, c)) : m;
		double w = ((const double *)rv.data)[i], tol = 0x1p-22 * 2 * m + 0x1p-23 * fabs(w);
		ck_assert_msg(fabs(elem(&got, i) - w) <= tol, "[%zu]: %.9g vs NumPy %.17g", i, elem(&got, i), w);
	}
	pe_resp_free(&r);
	pe_request(&d, "POST", "/v1/rope/apply?axes_dim=16,56,56&compat=hf", form_headers, body, blen, &r);
	ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
	ck_assert_int_eq(pe_npy_parse(r.body, r.len, 1 << 24, &got, NULL), 0);
	ck_assert_mem_eq(got.data, tv.data, n * 4);
	pe_resp_free(&r);
	/* inverse=1 undoes it within float32 rounding */
	pe_request(&d, "POST", "/v1/rope/apply?axes_dim=16,56,56&inverse=1", form_headers, body, blen, &r);
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
	free(body);
	free(x);
	free(p);
	free(ref);
	free(tor);
}
END_TEST

static void expect_get(const struct pe_daemon *d, const char *url, long status, const char *param)
{
	struct pe_resp r;
	pe_get(d, url, &r);
	pe_assert_problem(&r, status, param);
	pe_resp_free(&r);
}

START_TEST(get_refusals)
{
	struct pe_daemon d;
	const char *argv[] = {"--max-elements", "100000", NULL};
	pe_daemon_start(&d, argv);
	expect_get(&d, "/v1/rope/axial/positions?preset=none&grid=4x4", 400, "preset");
	expect_get(&d, "/v1/rope/axial/positions?preset=sd3&grid=4x4", 400, "preset");
	expect_get(&d, "/v1/rope/axial/positions?preset=flux&grid=4x", 400, "grid");
	expect_get(&d, "/v1/rope/axial/positions?preset=flux&grid=2x4x4", 400, "grid");
	expect_get(&d, "/v1/rope/axial/positions?preset=wan&grid=4x4&text_tokens=2", 400, "text_tokens");
	expect_get(&d, "/v1/rope/axial?preset=flux&grid=4x4&axes_dim=16,56", 400, "axes_dim");
	expect_get(&d, "/v1/rope/axial?preset=flux&grid=4x4&axes_dim=15,57,56", 400, "axes_dim");
	expect_get(&d, "/v1/rope/axial?preset=none&axes_dim=16,56,56&theta=10000", 400, "preset");
	expect_get(&d, "/v1/rope/axial?preset=flux&grid=4x4&theta=0", 400, "theta");
	/* S * sum(axes_dim) * 2 over max_elements: refused before any work */
	expect_get(&d, "/v1/rope/axial?preset=flux&grid=64x64", 413, "grid");
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static void expect_post(const struct pe_daemon *d, const char *url, const void *body, size_t len, long status,
			const char *param)
{
	struct pe_resp r;
	pe_request(d, "POST", url, npy_h, body, len, &r);
	pe_assert_problem(&r, status, param);
	pe_resp_free(&r);
}

START_TEST(post_refusals)
{
	struct pe_daemon d;
	const char *argv[] = {"--max-elements", "100000", "--max-body-bytes", "65536", NULL};
	json_t *ids = json_loads("[[0, 1, 2], [3, 4.5, -5]]", 0, NULL), *nan = json_loads("[[0, 1, 2]]", 0, NULL);
	size_t len, nlen, blen;
	char *body = ids_npy(ids, PE_F32, &len), *bad = ids_npy(nan, PE_F32, &nlen);
	memcpy(bad + nlen - 4, "\x00\x00\xc0\x7f", 4); /* the last id NaN */
	pe_daemon_start(&d, argv);
	expect_post(&d, "/v1/rope/axial?axes_dim=16,56", body, len, 400, "axes_dim");
	expect_post(&d, "/v1/rope/axial?preset=flux&grid=4x4", body, len, 400, "grid");
	expect_post(&d, "/v1/rope/axial?preset=flux&text_tokens=3", body, len, 400, "text_tokens");
	expect_post(&d, "/v1/rope/axial", body, len, 400, "axes_dim");
	expect_post(&d, "/v1/rope/axial?axes_dim=16,56,56", bad, nlen, 400, "body");
	expect_post(&d, "/v1/rope/axial?axes_dim=16,56,56", "not npy", 7, 400, "body");
	json_t *many = json_array();
	for (int i = 0; i < 400; i++)
		json_array_append_new(many, json_loads("[1, 2, 3]", 0, NULL));
	char *big = ids_npy(many, PE_F32, &blen);
	expect_post(&d, "/v1/rope/axial?axes_dim=16,56,56", big, blen, 413, "body"); /* 2*400*128 > max_elements */
	char *huge = calloc(1, 70000);
	expect_post(&d, "/v1/rope/axial?axes_dim=16,56,56", huge, 70000, 413, "body"); /* over max_body_bytes */
	/* rope/apply: axial ids come as a part, pairs interleaved, axes fit the rotary width */
	struct pe_resp r;
	pe_request(&d, "POST", "/v1/rope/apply?axes_dim=16,56,56&layout=half", npy_h, body, len, &r);
	pe_assert_problem(&r, 400, "layout");
	pe_resp_free(&r);
	pe_request(&d, "POST", "/v1/rope/apply?axes_dim=16,56,56&mrope_section=16,24,24", npy_h, body, len, &r);
	pe_assert_problem(&r, 400, "axes_dim");
	pe_resp_free(&r);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
	json_decref(ids);
	json_decref(nan);
	json_decref(many);
	free(body);
	free(bad);
	free(big);
	free(huge);
}
END_TEST

/* The ids part of rope/apply: its shape against x's sequence and axes_dim, its values finite. */
START_TEST(apply_part_refusals)
{
	struct pe_daemon d;
	float x[2 * 3 * 8] = {0};
	const size_t xs[] = {2, 3, 8};
	json_t *ok = json_loads("[[0, 1], [2, 3], [4, -5.5]]", 0, NULL), *short_ = json_loads("[[0, 1], [2, 3]]", 0, NULL);
	size_t xl, pl, sl, blen;
	struct pe_tensor_view xt = {.shape = {.rank = 3, .dim = {xs[0], xs[1], xs[2]}}, .dtype = PE_F32, .data = x};
	struct pe_buf b;
	pe_buf_init(&b, 1 << 20);
	ck_assert_int_eq(pe_npy_write(&b, &xt, NULL), 0);
	char *xn = pe_buf_steal(&b, &xl), *pn = ids_npy(ok, PE_F64, &pl), *sn = ids_npy(short_, PE_F64, &sl);
	pe_daemon_start(&d, NULL);
	struct pe_resp r;
	const struct form_part good[] = {{"x", NULL, xn, xl}, {"positions", NULL, pn, pl}};
	char *body = form_body(good, 2, &blen);
	pe_request(&d, "POST", "/v1/rope/apply?axes_dim=4,4", form_headers, body, blen, &r);
	ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
	pe_resp_free(&r);
	pe_request(&d, "POST", "/v1/rope/apply?axes_dim=4,2", form_headers, body, blen, &r);
	ck_assert_int_eq(r.status, 200); /* 6 of 8 channels rotated: axes_dim sets the rotary width */
	pe_resp_free(&r);
	pe_request(&d, "POST", "/v1/rope/apply?axes_dim=4,4,2", form_headers, body, blen, &r);
	pe_assert_problem(&r, 400, "axes_dim"); /* wider than the last axis */
	pe_resp_free(&r);
	pe_request(&d, "POST", "/v1/rope/apply?axes_dim=2,2,4", form_headers, body, blen, &r);
	pe_assert_problem(&r, 400, "positions"); /* three axes, ids of two */
	pe_resp_free(&r);
	pe_request(&d, "POST", "/v1/rope/apply?axes_dim=4,4&rotary_dim=6", form_headers, body, blen, &r);
	pe_assert_problem(&r, 400, "axes_dim");
	pe_resp_free(&r);
	free(body);
	const struct form_part shorter[] = {{"x", NULL, xn, xl}, {"positions", NULL, sn, sl}};
	body = form_body(shorter, 2, &blen);
	pe_request(&d, "POST", "/v1/rope/apply?axes_dim=4,4", form_headers, body, blen, &r);
	pe_assert_problem(&r, 400, "positions");
	pe_resp_free(&r);
	free(body);
	json_t *inf = json_loads("[[0, 1], [2, 3], [4, 5]]", 0, NULL);
	size_t il;
	char *in = ids_npy(inf, PE_F32, &il);
	memcpy(in + il - 4, "\x00\x00\x80\x7f", 4); /* the last id +inf */
	const struct form_part infinite[] = {{"x", NULL, xn, xl}, {"positions", NULL, in, il}};
	body = form_body(infinite, 2, &blen);
	pe_request(&d, "POST", "/v1/rope/apply?axes_dim=4,4", form_headers, body, blen, &r);
	pe_assert_problem(&r, 400, "positions");
	pe_resp_free(&r);
	free(in);
	json_decref(inf);
	/* without axes_dim, float positions stay refused (integers only), as before */
	free(body);
	body = form_body(good, 2, &blen);
	pe_request(&d, "POST", "/v1/rope/apply", form_headers, body, blen, &r);
	pe_assert_problem(&r, 400, "positions");
	pe_resp_free(&r);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
	free(body);
	free(xn);
	free(pn);
	free(sn);
	json_decref(ok);
	json_decref(short_);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("axial_http");
	TCase *tc = tcase_create("axial_http");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, get_known_answers);
	tcase_add_test(tc, post_known_answers);
	tcase_add_test(tc, apply_known_answers);
	tcase_add_test(tc, get_refusals);
	tcase_add_test(tc, post_refusals);
	tcase_add_test(tc, apply_part_refusals);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
