/* End-to-end known answers for /v1/sinusoidal/apply and /v1/alibi/apply from NumPy
 * (tests/ref/gen_apply.py: tables in float64 from their formulas, rounded once to float32, applied
 * in float32 as PyTorch does). The table part may differ by one ulp where libm and the kernels
 * round differently, so each element is within one ulp of the table value plus one rounding of
 * the result; masked entries are exactly float32's lowest value. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"

#define DIR "tests/data/apply/"

static float ulp_of(float v)
{
	float a = fabsf(v);
	return a < FLT_MIN ? 0x1p-149f : nextafterf(a, INFINITY) - a;
}

static void check_case(const struct pe_daemon *d, const char *name, const char *path, const char *query)
{
	char file[256], url[512];
	size_t in_len, out_len;
	snprintf(file, sizeof file, DIR "%s.in.npy", name);
	char *in = pe_test_read_file(file, &in_len);
	snprintf(file, sizeof file, DIR "%s.out.npy", name);
	char *want_file = pe_test_read_file(file, &out_len);
	struct pe_tensor_view x, want, got;
	ck_assert_int_eq(pe_npy_parse(in, in_len, 1 << 20, &x, NULL), 0);
	ck_assert_int_eq(pe_npy_parse(want_file, out_len, 1 << 20, &want, NULL), 0);
	snprintf(url, sizeof url, "%s?%s", path, query);
	const char *hs[] = {"Content-Type: application/x-npy", NULL};
	struct pe_resp r;
	pe_request(d, "POST", url, hs, in, in_len, &r);
	ck_assert_msg(r.status == 200, "%s: %ld %s", name, r.status, r.body);
	ck_assert_int_eq(pe_npy_parse(r.body, r.len, 1 << 20, &got, NULL), 0);
	ck_assert_int_eq(memcmp(&got.shape, &want.shape, sizeof got.shape), 0);
	int of;
	size_t n = pe_shape_count(&want.shape, &of), exact = 0;
	const float *w = want.data, *g = got.data;
	for (size_t i = 0; i < n; i++) {
		if (w[i] == -FLT_MAX) {
			ck_assert_msg(g[i] == -FLT_MAX, "%s[%zu]: masked entry is %g", name, i, g[i]);
			exact++;
			continue;
		}
		float tol = 0x1p-23f * 64 + ulp_of(w[i]); /* one ulp of a table value up to 64 (ALiBi distances) */
		ck_assert_msg(fabsf(g[i] - w[i]) <= tol, "%s[%zu]: %.9g vs %.9g", name, i, g[i], w[i]);
		exact += g[i] == w[i];
	}
	printf("%-20s %zu of %zu elements bit-identical to NumPy\n", name, exact, n);
	pe_resp_free(&r);
	free(in);
	free(want_file);
}

START_TEST(numpy_known_answers)
{
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	size_t len;
	char *text = pe_test_read_file(DIR "cases.json", &len);
	json_t *cases = json_loadb(text, len, 0, NULL);
	ck_assert_uint_ge(json_array_size(cases), 5);
	for (size_t i = 0; i < json_array_size(cases); i++) {
		json_t *c = json_array_get(cases, i);
		check_case(&d, json_string_value(json_object_get(c, "name")), json_string_value(json_object_get(c, "path")),
			   json_string_value(json_object_get(c, "query")));
	}
	json_decref(cases);
	free(text);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static Suite *apply_kat_suite(void)
{
	Suite *s = suite_create("e2e_apply_kat");
	TCase *tc = tcase_create("apply");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, numpy_known_answers);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(apply_kat_suite)
