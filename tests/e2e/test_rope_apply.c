/* End-to-end test of POST /v1/rope/apply against PyTorch: committed known answers from
 * tests/ref/gen_rope_apply.py (HF's apply_rotary_pos_emb in float32) for the half and interleaved
 * layouts, offsets, explicit positions, partial rotary, seq_axis -3, another base, the inverse,
 * and the linear, YaRN and Llama 3 scalings (attention_scaling included).
 * compat=hf forms the same float32 angles as PyTorch; cos/sin may differ from PyTorch's SLEEF
 * values by 1 ulp, so each rotated channel a·c ∓ b·s is within 2^-22·(|a| + |b|) plus one rounding
 * of the result; pass-through channels are bit-identical. Both kernel paths are exercised by
 * running the daemon with POSENC_ISA=scalar and with the default (AVX2's rope kernels where the
 * CPU has AVX2, also on the AVX-512 tier). */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"

#define DIR "tests/data/rope_apply/"

static void check_case(const struct pe_daemon *d, const char *name, const char *query)
{
	char path[256], url[512];
	size_t in_len, out_len;
	snprintf(path, sizeof path, DIR "%s.in.npy", name);
	char *in = pe_test_read_file(path, &in_len);
	snprintf(path, sizeof path, DIR "%s.out.npy", name);
	char *want_file = pe_test_read_file(path, &out_len);
	struct pe_tensor_view x, want, got;
	ck_assert_int_eq(pe_npy_parse(in, in_len, 1 << 24, &x, NULL), 0);
	ck_assert_int_eq(pe_npy_parse(want_file, out_len, 1 << 24, &want, NULL), 0);
	snprintf(url, sizeof url, "/v1/rope/apply?%s", query);
	const char *hs[] = {"Content-Type: application/x-npy", NULL};
	struct pe_resp r;
	pe_request(d, "POST", url, hs, in, in_len, &r);
	ck_assert_msg(r.status == 200, "%s: %ld %s", name, r.status, r.body);
	ck_assert_int_eq(pe_npy_parse(r.body, r.len, 1 << 24, &got, NULL), 0);
	ck_assert_int_eq(memcmp(&got.shape, &x.shape, sizeof got.shape), 0);
	int of;
	size_t n = pe_shape_count(&x.shape, &of), last = x.shape.dim[x.shape.rank - 1];
	const float *xv = x.data, *wv = want.data, *gv = got.data;
	float worst = 0;
	for (size_t i = 0; i < n; i++) {
		/* the partner channel of i (half layout i ± rd/2, interleaved i ^ 1) is bounded by the
		 * vector's largest magnitude, which covers both layouts */
		float m = 0;
		for (size_t c = i - i % last; c < i - i % last + last; c++)
			m = fabsf(xv[c]) > m ? fabsf(xv[c]) : m;
		float tol = 0x1p-21f * m + 0x1p-23f * fabsf(wv[i]);
		float err = fabsf(gv[i] - wv[i]);
		worst = err / (tol > 0 ? tol : 1) > worst ? err / (tol > 0 ? tol : 1) : worst;
		ck_assert_msg(err <= tol, "%s[%zu]: %.9g vs torch %.9g", name, i, gv[i], wv[i]);
		if (strstr(query, "rotary_dim=32") && i % last >= 32)
			ck_assert_msg(gv[i] == xv[i], "%s[%zu]: a pass-through channel changed", name, i);
	}
	printf("rope/apply %-18s max error %.2f of the bound\n", name, worst);
	pe_resp_free(&r);
	free(in);
	free(want_file);
}

static void run_all(const char *isa)
{
	if (isa)
		setenv("POSENC_ISA", isa, 1);
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	unsetenv("POSENC_ISA");
	size_t len;
	char *text = pe_test_read_file(DIR "cases.json", &len);
	json_t *cases = json_loadb(text, len, 0, NULL);
	ck_assert_ptr_nonnull(cases);
	for (size_t i = 0; i < json_array_size(cases); i++) {
		json_t *c = json_array_get(cases, i);
		check_case(&d, json_string_value(json_object_get(c, "name")), json_string_value(json_object_get(c, "query")));
	}
	ck_assert_uint_ge(json_array_size(cases), 8);
	json_decref(cases);
	free(text);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}

START_TEST(matches_pytorch_default_isa) { run_all(NULL); }
END_TEST

START_TEST(matches_pytorch_scalar) { run_all("scalar"); }
END_TEST

START_TEST(errors_name_parameters)
{
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	float x[2 * 3 * 8] = {0};
	static const struct {
		const char *query, *param;
	} bad[] = {
		{"shape=2,3,8&rotary_dim=7", "rotary_dim"},
		{"shape=2,3,8&rotary_dim=16", "rotary_dim"},
		{"shape=2,3,8&seq_axis=-4", "seq_axis"},
		{"shape=2,3,8&seq_axis=-1", "seq_axis"},
		{"shape=2,3,8&positions=1,2", "positions"},
		{"shape=2,3,8&positions=1,2,3&offset=4", "offset"},
		{"shape=2,3,8&positions=1,2.5,3", "positions"},
		{"shape=2,3,8&scaling=yarn&factor=4", "original_max_position_embeddings"},
		{"shape=2,3,8&len=3", "len"},
	};
	const char *hs[] = {"Content-Type: application/octet-stream", NULL};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char url[256];
		snprintf(url, sizeof url, "/v1/rope/apply?%s", bad[i].query);
		struct pe_resp r;
		pe_request(&d, "POST", url, hs, x, sizeof x, &r);
		ck_assert_msg(r.status == 400, "%s: %ld", bad[i].query, r.status);
		pe_assert_problem(&r, 400, bad[i].param);
		pe_resp_free(&r);
	}
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static Suite *rope_apply_suite(void)
{
	Suite *s = suite_create("e2e_rope_apply");
	TCase *tc = tcase_create("rope_apply");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, matches_pytorch_default_isa);
	tcase_add_test(tc, matches_pytorch_scalar);
	tcase_add_test(tc, errors_name_parameters);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(rope_apply_suite)
