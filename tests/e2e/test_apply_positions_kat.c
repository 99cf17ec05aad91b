/* End-to-end known answers for POST /v1/rope/apply with per-token positions (multipart/form-data:
 * a part x, a part positions) from tests/ref/gen_apply_positions.py: float64 NumPy, written from
 * the RoPE formulas, and for M-RoPE from Qwen2-VL's apply_multimodal_rotary_pos_emb (and Qwen3-VL's
 * interleaved sections). posencd (compat=exact) rounds each cos/sin once to float32 and rotates in
 * float32: each rotated channel a·c ∓ b·s is then within 2^-22·(|a| + |b|) of the float64 answer
 * (two roundings of each product's inputs and result) plus one rounding of the result; f64 bodies
 * are held to the same bound scaled to float64 (2^-51). Pass-through channels are bit-identical. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"
#include "test_apply_positions_form.h"

#define DIR "tests/data/apply_positions/"

static double elem(const struct pe_tensor_view *v, size_t i)
{
	return v->dtype == PE_F64 ? ((const double *)v->data)[i] : ((const float *)v->data)[i];
}

static void check_case(const struct pe_daemon *d, const char *name, const char *query)
{
	char path[256], url[512];
	size_t xlen, plen, rlen, blen;
	snprintf(path, sizeof path, DIR "%s.x.npy", name);
	char *x = pe_test_read_file(path, &xlen);
	snprintf(path, sizeof path, DIR "%s.pos.npy", name);
	char *p = pe_test_read_file(path, &plen);
	snprintf(path, sizeof path, DIR "%s.ref.npy", name);
	char *ref = pe_test_read_file(path, &rlen);
	struct pe_tensor_view xv, rv, got;
	ck_assert_int_eq(pe_npy_parse(x, xlen, 1 << 24, &xv, NULL), 0);
	ck_assert_int_eq(pe_npy_parse(ref, rlen, 1 << 24, &rv, NULL), 0);
	ck_assert_int_eq(rv.dtype, PE_F64);
	const struct form_part parts[] = {{"x", "application/octet-stream", x, xlen}, {"positions", NULL, p, plen}};
	char *body = form_body(parts, 2, &blen);
	snprintf(url, sizeof url, "/v1/rope/apply?%s", query);
	struct pe_resp r;
	pe_request(d, "POST", url, form_headers, body, blen, &r);
	ck_assert_msg(r.status == 200, "%s: %ld %s", name, r.status, r.body);
	ck_assert_int_eq(pe_npy_parse(r.body, r.len, 1 << 24, &got, NULL), 0);
	ck_assert_int_eq(got.dtype, xv.dtype);
	ck_assert_int_eq(memcmp(&got.shape, &xv.shape, sizeof got.shape), 0);
	int of;
	size_t n = pe_shape_count(&xv.shape, &of), last = xv.shape.dim[xv.shape.rank - 1], exact = 0;
	double unit = xv.dtype == PE_F64 ? 0x1p-51 : 0x1p-22, worst = 0;
	for (size_t i = 0; i < n; i++) {
		double m = 0; /* the partner channel is bounded by the vector's largest magnitude */
		for (size_t c = i - i % last; c < i - i % last + last; c++)
			m = fabs(elem(&xv, c)) > m ? fabs(elem(&xv, c)) : m;
		double w = ((const double *)rv.data)[i], g = elem(&got, i);
		double tol = unit * 2 * m + unit / 2 * fabs(w), e = fabs(g - w);
		ck_assert_msg(e <= tol, "%s[%zu]: %.17g vs NumPy %.17g (bound %.3g)", name, i, g, w, tol);
		worst = e / tol > worst ? e / tol : worst;
		exact += xv.dtype == PE_F32 ? (float)w == (float)g : w == g;
	}
	printf("rope/apply positions %-18s max error %.2f of the bound, %zu of %zu correctly rounded\n", name, worst,
	       exact, n);
	pe_resp_free(&r);
	free(body);
	free(x);
	free(p);
	free(ref);
}

START_TEST(numpy_known_answers)
{
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	json_error_t jerr;
	json_t *root = json_load_file(DIR "cases.json", 0, &jerr);
	ck_assert_msg(root != NULL, "cases.json: %s", jerr.text);
	json_t *cases = json_object_get(root, "cases");
	ck_assert_uint_ge(json_array_size(cases), 10);
	for (size_t i = 0; i < json_array_size(cases); i++) {
		json_t *c = json_array_get(cases, i);
		check_case(&d, json_string_value(json_object_get(c, "name")), json_string_value(json_object_get(c, "query")));
	}
	json_decref(root);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static Suite *apply_positions_kat_suite(void)
{
	Suite *s = suite_create("e2e_apply_positions_kat");
	TCase *tc = tcase_create("kat");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, numpy_known_answers);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(apply_positions_kat_suite)
