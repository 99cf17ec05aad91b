/* End-to-end over HTTP: Llama 4's RoPE (scaling=llama3 with low_freq_factor == high_freq_factor) and
 * /v1/rope2d's variants (qwen2vl spatial_merge_size, pixtral, llama4) from a real daemon, against
 * the known answers of tests/ref/gen_rope_variants.py: every case as raw f64 (exact, within 1 ulp of
 * the float64 reference) and f32 (hf, within 1 ulp of PyTorch float32; ggml within 1 ulp of the
 * llama.cpp emulation), with X-PE-Shape the case's shape. Bad parameters are RFC 9457 problems
 * naming the parameter; the default rope2d table keeps its ETag when variant=qwen2vl and
 * spatial_merge_size=1 are spelled out, and another variant has another. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"
#include "support/pe_kat_http.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA_DIR "tests/data/rope_variants"

static struct pe_daemon D;

START_TEST(known_answers_over_http)
{
	pe_daemon_start(&D, NULL);
	pe_kat_http_compare(&D, DATA_DIR, "query", "ref_f64", PE_F64, "http exact f64 vs numpy");
	pe_kat_http_compare(&D, DATA_DIR, "hf_query", "torch_f32", PE_F32, "http hf f32 vs torch");
	pe_kat_http_compare(&D, DATA_DIR, "ggml_query", "ggml_f32", PE_F32, "http ggml f32 vs emulation");
	ck_assert_int_eq(pe_daemon_stop(&D, SIGTERM), 0);
}
END_TEST

static void expect_400(const char *path, const char *param)
{
	struct pe_resp r;
	pe_get(&D, path, &r);
	ck_assert_msg(r.status == 400, "%s: %ld %s", path, r.status, r.body ? r.body : "");
	pe_assert_problem(&r, 400, param);
	pe_resp_free(&r);
}

static void etag_of(const char *path, char *etag, size_t cap)
{
	struct pe_resp r;
	pe_get(&D, path, &r);
	ck_assert_msg(r.status == 200, "%s: %ld", path, r.status);
	ck_assert_msg(pe_resp_header(&r, "ETag", etag, cap) != NULL, "%s: no ETag", path);
	pe_resp_free(&r);
}

START_TEST(problems_and_etags)
{
	pe_daemon_start(&D, NULL);
	expect_400("/v1/rope2d?height=4&width=4&dim=8&variant=vit", "variant");
	expect_400("/v1/rope2d?height=5&width=4&dim=8&spatial_merge_size=2", "height");
	expect_400("/v1/rope2d?height=4&width=4&dim=8&variant=pixtral&spatial_merge_size=2", "spatial_merge_size");
	expect_400("/v1/rope2d?height=4&width=70&dim=8&variant=pixtral&max_patches_per_side=64", "width");
	expect_400("/v1/rope2d?height=4&width=5&dim=8&variant=llama4", "width");
	expect_400("/v1/rope2d?height=4&width=4&dim=8&variant=llama4&max_patches_per_side=4", "max_patches_per_side");
	/* the step's edge: pair 0's wavelength 2*pi equals 1 / low_freq_factor */
	expect_400("/v1/rope?len=4&dim=8&scaling=llama3&factor=8&original_max_position_embeddings=1"
		   "&low_freq_factor=0.15915494309189535&high_freq_factor=0.15915494309189535", "low_freq_factor");
	char a[64], b[64], c[64];
	etag_of("/v1/rope2d?height=4&width=6&dim=16&format=npy", a, sizeof a);
	etag_of("/v1/rope2d?spatial_merge_size=1&height=4&width=6&variant=qwen2vl&dim=16&format=npy", b, sizeof b);
	etag_of("/v1/rope2d?height=4&width=6&dim=16&spatial_merge_size=2&format=npy", c, sizeof c);
	ck_assert_str_eq(a, b);
	ck_assert_str_ne(a, c);
	ck_assert_int_eq(pe_daemon_stop(&D, SIGTERM), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("rope_variants_http");
	TCase *tc = tcase_create("rope variants");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, known_answers_over_http);
	tcase_add_test(tc, problems_and_etags);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
