/* End-to-end tests of the people-facing formats over HTTP: CSV, PNG heatmaps, gzip negotiation (compressed
 * bodies decompress to the identity body, are cached as their own representation with their own
 * ETag, and carry Vary), and HEAD. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <libdeflate.h>
#include <png.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"

static struct pe_daemon D;

static void start(void) { pe_daemon_start(&D, NULL); }
static void stop(void) { ck_assert_int_eq(pe_daemon_stop(&D, SIGTERM), 0); }

START_TEST(csv_rows)
{
	struct pe_resp r, j;
	char h[64];
	pe_get(&D, "/v1/sinusoidal?len=3&dim=4&format=csv", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(pe_resp_header(&r, "Content-Type", h, sizeof h), "text/csv");
	ck_assert_str_eq(r.body, "0,1,0,1\n0.84147096,0.5403023,0.009999833,0.99995\n"
				 "0.9092974,-0.41614684,0.019998666,0.9998\n");
	pe_resp_free(&r);
	const char *acc[] = {"Accept: text/csv", NULL};
	pe_request(&D, "GET", "/v1/sinusoidal?len=3&dim=4", acc, NULL, 0, &j);
	ck_assert_str_eq(pe_resp_header(&j, "Content-Type", h, sizeof h), "text/csv");
	pe_resp_free(&j);
}
END_TEST

static char *gunzip(const char *data, size_t len, size_t *out_len)
{
	struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
	size_t cap = 1 << 24;
	char *out = malloc(cap);
	ck_assert_int_eq(libdeflate_gzip_decompress(d, data, len, out, cap, out_len), LIBDEFLATE_SUCCESS);
	libdeflate_free_decompressor(d);
	return out;
}

START_TEST(gzip_when_allowed)
{
	const char *path = "/v1/sinusoidal?len=64&dim=32";
	const char *gz[] = {"Accept-Encoding: br, gzip", NULL};
	struct pe_resp plain, z, z2;
	char h[128], e1[64], e2[64];
	pe_get(&D, path, &plain);
	ck_assert_ptr_null(pe_resp_header(&plain, "Content-Encoding", h, sizeof h));
	ck_assert_str_eq(pe_resp_header(&plain, "Vary", h, sizeof h), "Accept, Accept-Encoding");
	pe_request(&D, "GET", path, gz, NULL, 0, &z);
	ck_assert_int_eq(z.status, 200);
	ck_assert_str_eq(pe_resp_header(&z, "Content-Encoding", h, sizeof h), "gzip");
	ck_assert_str_eq(pe_resp_header(&z, "X-PE-Cache", h, sizeof h), "miss");
	ck_assert_uint_lt(z.len, plain.len);
	size_t n;
	char *unz = gunzip(z.body, z.len, &n);
	ck_assert_uint_eq(n, plain.len);
	ck_assert(memcmp(unz, plain.body, n) == 0);
	free(unz);
	ck_assert_str_ne(pe_resp_header(&z, "ETag", e1, sizeof e1), pe_resp_header(&plain, "ETag", e2, sizeof e2));
	pe_request(&D, "GET", path, gz, NULL, 0, &z2);
	ck_assert_str_eq(pe_resp_header(&z2, "X-PE-Cache", h, sizeof h), "hit");
	ck_assert_uint_eq(z2.len, z.len);
	ck_assert(memcmp(z2.body, z.body, z.len) == 0);
	pe_resp_free(&z2);
	pe_resp_free(&z);
	/* binary formats are never compressed; q=0 refuses gzip */
	const char *no[] = {"Accept-Encoding: gzip;q=0", NULL};
	pe_request(&D, "GET", path, no, NULL, 0, &z);
	ck_assert_ptr_null(pe_resp_header(&z, "Content-Encoding", h, sizeof h));
	ck_assert_uint_eq(z.len, plain.len);
	pe_resp_free(&z);
	pe_request(&D, "GET", "/v1/sinusoidal?len=64&dim=32&format=npy", gz, NULL, 0, &z);
	ck_assert_ptr_null(pe_resp_header(&z, "Content-Encoding", h, sizeof h));
	pe_resp_free(&z);
	pe_resp_free(&plain);
}
END_TEST

START_TEST(head_has_headers_no_body)
{
	struct pe_resp r;
	char h[64];
	pe_request(&D, "HEAD", "/v1/sinusoidal?len=8&dim=8&format=bin", NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.len, 0);
	ck_assert_str_eq(pe_resp_header(&r, "Content-Length", h, sizeof h), "256");
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Shape", h, sizeof h), "8,8");
	pe_resp_free(&r);
}
END_TEST

START_TEST(png_heatmaps)
{
	struct pe_resp r, q;
	char h[64], e1[64], e2[64];
	pe_get(&D, "/v1/sinusoidal?len=64&dim=32&format=png&scale=2", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(pe_resp_header(&r, "Content-Type", h, sizeof h), "image/png");
	ck_assert(memcmp(r.body, "\x89PNG\r\n\x1a\n", 8) == 0);
	/* the picture's geometry is the library's plan for this table */
	size_t n;
	struct pe_params p;
	pe_params_init(&p, pe_table_find("sinusoidal"));
	pe_params_set(&p, "len", "64", NULL);
	pe_params_set(&p, "dim", "32", NULL);
	ck_assert_int_eq(pe_params_finish(&p, NULL), 0);
	float tab[64 * 32];
	ck_assert_int_eq(pe_table_compute(&p, PE_F32, tab, NULL), 0);
	struct pe_tensor_view v = {.shape = {2, {64, 32}}, .dtype = PE_F32, .data = tab};
	struct pe_png_options o;
	pe_png_options_init(&o);
	o.scale = 2;
	struct pe_png_layout lay;
	ck_assert_int_eq(pe_png_plan(&v, &o, &lay, NULL), 0);
	png_image img = {.version = PNG_IMAGE_VERSION};
	ck_assert(png_image_begin_read_from_memory(&img, r.body, r.len));
	ck_assert_uint_eq(img.width, lay.width);
	ck_assert_uint_eq(img.height, lay.height);
	png_image_free(&img);
	(void)n;
	pe_params_destroy(&p);
	/* another colormap is another representation */
	pe_get(&D, "/v1/sinusoidal?len=64&dim=32&format=png&scale=2&cmap=RdBu", &q);
	ck_assert_int_eq(q.status, 200);
	ck_assert_str_ne(pe_resp_header(&q, "ETag", e1, sizeof e1), pe_resp_header(&r, "ETag", e2, sizeof e2));
	pe_resp_free(&q);
	pe_resp_free(&r);
	/* rank 3 tables draw as panels; bad options are 400s naming them */
	pe_get(&D, "/v1/alibi?heads=4&q_len=8&format=png", &r);
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	const char *bad[] = {"/v1/sinusoidal?len=4&dim=4&format=png&cmap=jet", "cmap",
			     "/v1/sinusoidal?len=4&dim=4&cmap=RdBu", "cmap",
			     "/v1/sinusoidal?len=4&dim=4&format=png&scale=-1", "scale",
			     "/v1/sinusoidal?len=4&dim=4&format=png&scale=1e3", "scale"};
	for (int i = 0; i < 8; i += 2) {
		pe_get(&D, bad[i], &r);
		ck_assert_int_eq(r.status, 400);
		ck_assert_msg(strstr(r.body, bad[i + 1]) != NULL, "%s: %s", bad[i], r.body);
		pe_resp_free(&r);
	}
}
END_TEST

static Suite *formats_suite(void)
{
	Suite *s = suite_create("e2e_formats");
	TCase *tc = tcase_create("formats");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, start, stop);
	tcase_add_test(tc, csv_rows);
	tcase_add_test(tc, gzip_when_allowed);
	tcase_add_test(tc, head_has_headers_no_body);
	tcase_add_test(tc, png_heatmaps);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(formats_suite)
