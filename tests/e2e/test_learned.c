/* End-to-end tests of learned tables (/v1/learned) against a real posencd with its own data_dir:
 * upload and download in every format, the list, ETag / 304 / cache keyed by the table's sha256
 * (a replaced table is never served stale), resampling over HTTP against PyTorch's known answers,
 * upload errors and limits (400 / 413 before reading / 507), hostile names sent raw, access
 * control (token; remote clients are tested in namespaces by test_learned_remote.c), the start-up
 * scan, the store telling the truth (a re-upload with other metadata, a file removed or replaced
 * behind its back, even when its answers are cached, a FIFO in data_dir, a write answered 503, a second daemon on the same data_dir), and a
 * crash test: SIGKILL during a stream of uploads, then everything acknowledged must come back
 * intact and nothing partial be listed.
 *
 * Every test that is about the store's contract rather than its files runs twice: against the file
 * store (tcase "learned") and against PostgreSQL (tcase "learned_pg": a private cluster per test,
 * support/pe_pg.h, with --store-url; what "files" means there is the rows of posenc_learned). The
 * tests of data_dir itself (damage, quarantine, FIFOs, the lock) run on the file store only. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"
#include "support/pe_kat.h"
#include "support/pe_pg.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "posenc/posenc.h"

static struct pe_daemon D;
static char dir[64];
static int pg_mode;  /* the test runs against PostgreSQL */
static struct pe_pg PG;

/* ---- fixtures and helpers ---- */

static void make_dir(void)
{
	const char *base = pe_scratch_base(); /* the 6000 tables of list_is_held_on_the_budget */
	snprintf(dir, sizeof dir, "%s/posenc-learned-XXXXXX", strlen(base) < 40 ? base : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	memset(&D, 0, sizeof D);
}

static void remove_dir(void)
{
	char cmd[128];
	if (D.s.pid > 0)
		pe_daemon_stop(&D, SIGKILL);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void make_dir_pg(void)
{
	char why[200];
	make_dir();
	pg_mode = 1;
	ck_assert_msg(pe_pg_start(&PG, why, sizeof why) == 0, "%s", why);
}

static void remove_dir_pg(void)
{
	remove_dir();
	pe_pg_destroy(&PG);
}

/* posencd on data_dir dir, with extra arguments (NULL-terminated, may be NULL). */
static void start(const char *const *extra)
{
	const char *args[32] = {"--data-dir", dir, "--workers", "2", "--store-url", pg_mode ? PG.url : "file:"};
	int n = 6;
	for (int i = 0; extra && extra[i] && n < 31; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	pe_daemon_start(&D, args);
}

static void stop(void) { ck_assert_int_eq(pe_daemon_stop(&D, SIGTERM), 0); }

static void sha_hex(const void *data, size_t len, char out[65])
{
	struct sha256_ctx c;
	uint8_t d[32];
	sha256_init(&c);
	sha256_update(&c, len, data);
	sha256_digest(&c, sizeof d, d);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void npy(struct pe_buf *b, enum pe_dtype dt, size_t rows, size_t cols, const void *data)
{
	struct pe_tensor_view v = {.shape = {2, {rows, cols}}, .dtype = dt, .data = data};
	pe_buf_init(b, (size_t)1 << 30);
	ck_assert_int_eq(pe_npy_write(b, &v, NULL), 0);
}

static float *ramp(size_t n, float seed)
{
	float *v = malloc(n * sizeof *v);
	ck_assert_ptr_nonnull(v);
	for (size_t i = 0; i < n; i++)
		v[i] = seed + sinf((float)i * 0.37f);
	return v;
}

static void put_with(const char *path, const void *body, size_t len, const char *auth, struct pe_resp *r)
{
	const char *hs[] = {"Content-Type: application/x-npy", auth, NULL};
	pe_request(&D, "PUT", path, hs, body, len, r);
}

static void put(const char *path, const struct pe_buf *b, struct pe_resp *r) { put_with(path, b->data, b->len, NULL, r); }

/* PUT b to path: a 400 problem naming param. */
static void put_refused(const char *path, const struct pe_buf *b, const char *param)
{
	struct pe_resp r;
	put(path, b, &r);
	ck_assert_msg(r.status == 400, "PUT %s: %ld, want 400: %s", path, r.status, r.body);
	pe_assert_problem(&r, 400, param);
	pe_resp_free(&r);
}

/* PUT a [rows, cols] f32 table; its status must be want. */
static void put_table(const char *path, size_t rows, size_t cols, float seed, long want)
{
	struct pe_buf b;
	struct pe_resp r;
	float *v = ramp(rows * cols, seed);
	npy(&b, PE_F32, rows, cols, v);
	put(path, &b, &r);
	ck_assert_msg(r.status == want, "PUT %s: %ld, want %ld: %s", path, r.status, want, r.body);
	pe_resp_free(&r);
	pe_buf_destroy(&b);
	free(v);
}

static void get_problem(const char *path, long status, const char *param)
{
	struct pe_resp r;
	pe_get(&D, path, &r);
	pe_assert_problem(&r, status, param);
	pe_resp_free(&r);
}

/* GET /v1/learned, listed on a worker (the store checks every table: never on the HTTP thread):
 * posenc_jobs_total counts it, posenc_jobs_inline_total does not. */
static json_t *list(void)
{
	struct pe_resp r;
	char v[64];
	double jobs = pe_metric(&D, "posenc_jobs_total"), inl = pe_metric(&D, "posenc_jobs_inline_total");
	pe_get(&D, "/v1/learned", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(pe_resp_header(&r, "Content-Type", v, sizeof v), "application/json");
	ck_assert_str_eq(pe_resp_header(&r, "Cache-Control", v, sizeof v), "no-store");
	json_t *j = pe_resp_json(&r);
	pe_resp_free(&r);
	ck_assert_double_eq(pe_metric(&D, "posenc_jobs_total"), jobs + 1);
	ck_assert_double_eq(pe_metric(&D, "posenc_jobs_inline_total"), inl);
	return j;
}

/* The list's entry for name, or NULL (borrowed from doc). */
static json_t *listed(json_t *doc, const char *name)
{
	json_t *t = json_object_get(doc, "tables");
	for (size_t i = 0; i < json_array_size(t); i++)
		if (!strcmp(json_string_value(json_object_get(json_array_get(t, i), "name")), name))
			return json_array_get(t, i);
	return NULL;
}

/* Entries of data_dir (not quarantine/ nor the lock file), '|'-joined; with PostgreSQL, the rows of
 * posenc_learned as the files they would be. */
static void files(char *out, size_t cap)
{
	char cmd[400];
	if (pg_mode)
		snprintf(cmd, sizeof cmd, "psql -X -At '%s' -c \"SELECT name || '.table' FROM posenc_learned ORDER BY name\" "
			 "| tr '\\n' '|'", PG.url);
	else
		snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -v -e '^quarantine$' -e '^.posencd.lock$' | tr '\\n' '|'", dir);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = 0;
	pclose(p);
}

/* The list counts count tables and the store holds exactly the files want ("a.table|b.table|"). */
static void assert_stored(json_int_t count, const char *want)
{
	json_t *l = list();
	ck_assert_int_eq(json_integer_value(json_object_get(l, "count")), count);
	json_decref(l);
	char f[256];
	files(f, sizeof f);
	ck_assert_str_eq(f, want);
}

/* ---- upload, download, list ---- */

START_TEST(put_get_every_format)
{
	start(NULL);
	float *v = ramp(6 * 4, 0.5f);
	struct pe_buf b;
	struct pe_resp r;
	char h[128], sha[65];
	npy(&b, PE_F32, 6, 4, v);
	sha_hex(v, sizeof(float) * 24, sha);
	put("/v1/learned/bert.pos", &b, &r);
	ck_assert_int_eq(r.status, 201);
	ck_assert_str_eq(pe_resp_header(&r, "Location", h, sizeof h), "/v1/learned/bert.pos");
	json_t *m = pe_resp_json(&r);
	ck_assert_str_eq(json_string_value(json_object_get(m, "name")), "bert.pos");
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(m, "shape"), 0)), 6);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(m, "shape"), 1)), 4);
	ck_assert_str_eq(json_string_value(json_object_get(m, "dtype")), "f32");
	ck_assert(json_is_null(json_object_get(m, "grid")));
	ck_assert_int_eq(json_integer_value(json_object_get(m, "prefix_tokens")), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(m, "bytes")), 96);
	ck_assert_str_eq(json_string_value(json_object_get(m, "sha256")), sha);
	ck_assert_uint_eq(strlen(json_string_value(json_object_get(m, "created"))), 24); /* 2024-06-06T12:00:00.000Z */
	json_decref(m);
	pe_resp_free(&r);

	pe_get(&D, "/v1/learned/bert.pos?format=bin", &r); /* the stored bytes, as the sha256 says */
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Shape", h, sizeof h), "6,4");
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Dtype", h, sizeof h), "f32");
	ck_assert_str_eq(pe_resp_header(&r, "Cache-Control", h, sizeof h), "no-cache");
	ck_assert_uint_eq(r.len, 96);
	ck_assert_int_eq(memcmp(r.body, v, 96), 0);
	pe_resp_free(&r);
	pe_get(&D, "/v1/learned/bert.pos?format=npy", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.len, b.len);
	ck_assert_int_eq(memcmp(r.body, b.data, b.len), 0);
	pe_resp_free(&r);
	pe_get(&D, "/v1/learned/bert.pos?format=bin&dtype=f16", &r);
	ck_assert_uint_eq(r.len, 48);
	for (int i = 0; i < 24; i++)
		ck_assert_uint_eq(((uint16_t *)r.body)[i], pe_f32_to_f16(v[i]));
	pe_resp_free(&r);
	pe_get(&D, "/v1/learned/bert.pos?format=bin&dtype=f64", &r);
	for (int i = 0; i < 24; i++)
		ck_assert(((double *)r.body)[i] == v[i]);
	pe_resp_free(&r);
	pe_get(&D, "/v1/learned/bert.pos", &r); /* JSON by default */
	json_t *j = pe_resp_json(&r), *data = json_object_get(j, "data");
	ck_assert_uint_eq(json_array_size(data), 6);
	for (size_t i = 0; i < 24; i++)
		ck_assert((float)json_number_value(json_array_get(json_array_get(data, i / 4), i % 4)) == v[i]);
	json_decref(j);
	pe_resp_free(&r);
	pe_get(&D, "/v1/learned/bert.pos?format=csv", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(pe_resp_header(&r, "Content-Type", h, sizeof h), "text/csv");
	pe_resp_free(&r);
	pe_get(&D, "/v1/learned/bert.pos?format=png", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(memcmp(r.body, "\x89PNG", 4), 0);
	pe_resp_free(&r);
	pe_request(&D, "HEAD", "/v1/learned/bert.pos", NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.len, 0);
	pe_resp_free(&r);

	json_t *l = list();
	ck_assert_int_eq(json_integer_value(json_object_get(l, "count")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(l, "bytes")), 96);
	ck_assert_str_eq(json_string_value(json_object_get(listed(l, "bert.pos"), "sha256")), sha);
	json_decref(l);
	pe_buf_destroy(&b);
	free(v);
	stop();
}
END_TEST

START_TEST(replace_changes_etag_never_stale)
{
	start(NULL);
	struct pe_resp r;
	char e1[64], e2[64], h[64], inm[96];
	put_table("/v1/learned/t", 5, 3, 0, 201);
	pe_get(&D, "/v1/learned/t?format=bin", &r);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Cache", h, sizeof h), "miss");
	ck_assert_ptr_nonnull(pe_resp_header(&r, "ETag", e1, sizeof e1));
	pe_resp_free(&r);
	pe_get(&D, "/v1/learned/t?format=bin", &r);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Cache", h, sizeof h), "hit");
	ck_assert_str_eq(pe_resp_header(&r, "ETag", h, sizeof h), e1);
	pe_resp_free(&r);
	snprintf(inm, sizeof inm, "If-None-Match: %s", e1);
	const char *hs[] = {inm, NULL};
	pe_request(&D, "GET", "/v1/learned/t?format=bin", hs, NULL, 0, &r);
	ck_assert_int_eq(r.status, 304);
	pe_resp_free(&r);

	put_table("/v1/learned/t", 5, 3, 100, 200); /* replaced: 200, not 201 */
	pe_request(&D, "GET", "/v1/learned/t?format=bin", hs, NULL, 0, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Cache", h, sizeof h), "miss");
	ck_assert_str_ne(pe_resp_header(&r, "ETag", e2, sizeof e2), e1);
	float *v = ramp(15, 100);
	ck_assert_int_eq(memcmp(r.body, v, 60), 0);
	free(v);
	pe_resp_free(&r);

	pe_request(&D, "DELETE", "/v1/learned/t", NULL, NULL, 0, &r);
	ck_assert_int_eq(r.status, 204);
	pe_resp_free(&r);
	get_problem("/v1/learned/t?format=bin", 404, "name");
	pe_request(&D, "DELETE", "/v1/learned/t", NULL, NULL, 0, &r);
	pe_assert_problem(&r, 404, "name");
	pe_resp_free(&r);
	assert_stored(0, "");
	stop();
}
END_TEST

START_TEST(wrong_methods)
{
	start(NULL);
	struct pe_resp r;
	char h[64];
	pe_request(&D, "POST", "/v1/learned/x", NULL, "a", 1, &r);
	pe_assert_problem(&r, 405, NULL);
	ck_assert_str_eq(pe_resp_header(&r, "Allow", h, sizeof h), "GET, HEAD, PUT, DELETE, OPTIONS");
	pe_resp_free(&r);
	pe_request(&D, "PUT", "/v1/learned", NULL, "a", 1, &r);
	pe_assert_problem(&r, 405, NULL);
	ck_assert_str_eq(pe_resp_header(&r, "Allow", h, sizeof h), "GET, HEAD, OPTIONS");
	pe_resp_free(&r);
	get_problem("/v1/learned?x=1", 400, "x");
	stop();
}
END_TEST

/* ---- resampling against PyTorch ---- */

static size_t kat_int(json_t *c, const char *f) { return (size_t)json_integer_value(json_object_get(c, f)); }

/* Upload case c as dtype dt (f32: the float64 input rounded), GET it resampled as f32 / f64 and
 * compare with PyTorch on the same dtype. */
static void resample_case(const struct pe_kat *k, json_t *c, enum pe_dtype dt)
{
	const char *name = pe_kat_str(c, "name");
	json_t *in_shape = json_object_get(c, "in_shape");
	size_t rows = (size_t)json_integer_value(json_array_get(in_shape, 0));
	size_t d = (size_t)json_integer_value(json_array_get(in_shape, 1));
	double *in = pe_kat_file(k, c, "in_f64", rows * d * 8);
	float *in32 = malloc(rows * d * sizeof *in32);
	for (size_t i = 0; i < rows * d; i++)
		in32[i] = (float)in[i];
	struct pe_buf b;
	struct pe_resp r;
	char path[256];
	npy(&b, dt, rows, d, dt == PE_F32 ? (void *)in32 : (void *)in);
	if (!strcmp(pe_kat_str(c, "kind"), "grid"))
		snprintf(path, sizeof path, "/v1/learned/%s?prefix_tokens=%zu&grid=%zu,%zu", name, kat_int(c, "prefix"),
			 kat_int(c, "h"), kat_int(c, "w"));
	else
		snprintf(path, sizeof path, "/v1/learned/%s", name);
	put(path, &b, &r);
	ck_assert_msg(r.status == 201 || r.status == 200, "%s: %ld %s", path, r.status, r.body);
	pe_resp_free(&r);
	struct pe_shape s;
	size_t n = pe_kat_shape(c, &s);
	snprintf(path, sizeof path, "/v1/learned/%s?%s&format=bin&dtype=%s", name, pe_kat_str(c, "query"),
		 pe_dtype_name(dt));
	pe_get(&D, path, &r);
	ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body);
	ck_assert_uint_eq(r.len, n * pe_dtype_size(dt));
	void *ref = pe_kat_file(k, c, dt == PE_F32 ? "torch_f32" : "torch_f64", n * pe_dtype_size(dt));
	double tol = dt == PE_F32 ? 1e-6 : 1e-14;
	for (size_t i = 0; i < n; i++) {
		double got = pe_kat_get(dt, r.body, i), want = pe_kat_get(dt, ref, i);
		ck_assert_msg(fabs(got - want) <= tol, "%s [%zu]: %.17g vs torch %.17g", path, i, got, want);
	}
	pe_resp_free(&r);
	pe_get(&D, path, &r); /* resampled tables are cached like any table */
	char h[16];
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Cache", h, sizeof h), "hit");
	pe_resp_free(&r);
	free(ref);
	free(in);
	free(in32);
	pe_buf_destroy(&b);
}

START_TEST(resampling_matches_torch)
{
	start(NULL);
	struct pe_kat k;
	pe_kat_load(&k, "tests/data/resample");
	for (size_t i = 0; i < pe_kat_count(&k); i++) {
		resample_case(&k, pe_kat_case(&k, i), PE_F32);
		resample_case(&k, pe_kat_case(&k, i), PE_F64);
	}
	pe_kat_free(&k);
	stop();
}
END_TEST

/* A grid resampling's intermediate is held on the response budget too: a 256 x 256 grid (dim 1)
 * to 250 x 250 holds the read (256 KiB), its float64 copy (512), the answer's values (488) and the
 * intermediate of the two passes (500 KiB) at once. With 1.5 MiB of budget that is a 413 naming
 * height before any work (the intermediate outside the budget, it was served, 500 KiB past it);
 * a wide answer's names width, and a table too large to read within the budget names the table.
 * With 2 MiB it is served, and the budget is back at zero after. */
START_TEST(grid_resampling_holds_its_intermediate_on_the_budget)
{
	const char *tight[] = {"--response-budget-bytes", "1572864", "--cache-bytes", "0", NULL};
	start(tight);
	put_table("/v1/learned/g256?prefix_tokens=0&grid=256,256", 65536, 1, 0, 201);
	get_problem("/v1/learned/g256?height=250&width=250&format=bin", 413, "height");
	get_problem("/v1/learned/g256?height=2&width=60000&format=bin", 413, "width"); /* the larger side */
	/* a table whose read alone (1 MiB and its 2 MiB float64 copy) passes the budget: no answer
	 * size would fit, and the 413 names the table */
	put_table("/v1/learned/g512?prefix_tokens=0&grid=512,512", 262144, 1, 0, 201);
	get_problem("/v1/learned/g512?height=1&width=1&format=bin", 413, "name");
	stop();
	const char *roomy[] = {"--response-budget-bytes", "2097152", "--cache-bytes", "0", NULL};
	start(roomy);
	struct pe_resp r;
	pe_get(&D, "/v1/learned/g256?height=250&width=250&format=bin", &r);
	ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
	ck_assert_uint_eq(r.len, 250 * 250 * 4);
	pe_resp_free(&r);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
	stop();
}
END_TEST

START_TEST(resampling_errors)
{
	const char *args[] = {"--max-elements", "100000", NULL};
	start(args);
	put_table("/v1/learned/seq", 8, 4, 0, 201);
	put_table("/v1/learned/vit?prefix_tokens=1&grid=2,3", 7, 4, 0, 201);
	get_problem("/v1/learned/vit?len=10", 400, "len");
	get_problem("/v1/learned/seq?height=4&width=4", 400, "height");
	get_problem("/v1/learned/vit?height=4", 400, "width");
	get_problem("/v1/learned/vit?width=4", 400, "height");
	get_problem("/v1/learned/seq?len=10&antialias=1", 400, "antialias");
	get_problem("/v1/learned/seq?len=0", 400, "len");
	get_problem("/v1/learned/seq?len=1e3", 400, "len");
	get_problem("/v1/learned/seq?len=30000", 413, "len");
	get_problem("/v1/learned/vit?height=200&width=200", 413, "height");
	get_problem("/v1/learned/seq?bogus=1", 400, "bogus");
	get_problem("/v1/learned/seq?dtype=i32", 400, "dtype");
	get_problem("/v1/learned/seq?format=npy&dtype=bf16", 400, "dtype");
	struct pe_resp r;
	pe_get(&D, "/v1/learned/vit?height=3&width=2&antialias=1&format=bin", &r);
	ck_assert_int_eq(r.status, 200);
	char h[32];
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Shape", h, sizeof h), "7,4");
	float *v = ramp(28, 0);
	ck_assert_int_eq(memcmp(r.body, v, 16), 0); /* the prefix row is kept */
	free(v);
	pe_resp_free(&r);
	stop();
}
END_TEST

/* ---- upload errors and limits ---- */

START_TEST(upload_errors)
{
	const char *args[] = {"--max-table-bytes", "4000", "--store-max-bytes", "7000", NULL};
	start(args);
	struct pe_buf b;
	struct pe_resp r;
	float v[200] = {0};
	char req[512], buf[4096];

	npy(&b, PE_F32, 10, 4, v); /* header says 160 bytes of data; send 80 */
	put_with("/v1/learned/liar", b.data, b.len - 80, NULL, &r);
	pe_assert_problem(&r, 400, "body");
	pe_resp_free(&r);
	put_with("/v1/learned/junk", "not an npy file", 15, NULL, &r);
	pe_assert_problem(&r, 400, "body");
	pe_resp_free(&r);
	pe_buf_destroy(&b);

	int32_t iv[4] = {1, 2, 3, 4};
	struct pe_tensor_view t = {.shape = {2, {2, 2}}, .dtype = PE_I32, .data = iv};
	pe_buf_init(&b, 1 << 20);
	pe_npy_write(&b, &t, NULL);
	put_refused("/v1/learned/ints", &b, "body");
	pe_buf_destroy(&b);
	t = (struct pe_tensor_view){.shape = {3, {2, 2, 2}}, .dtype = PE_F32, .data = v};
	pe_buf_init(&b, 1 << 20);
	pe_npy_write(&b, &t, NULL);
	put_refused("/v1/learned/rank3", &b, "body");
	pe_buf_destroy(&b);
	v[3] = NAN;
	npy(&b, PE_F32, 2, 2, v);
	put_refused("/v1/learned/nan", &b, "body");
	pe_buf_destroy(&b);
	v[3] = 0;

	npy(&b, PE_F32, 6, 2, v);
	static const char *const bad_query[][2] = {
		{"/v1/learned/g?prefix_tokens=1&grid=2,2", "grid"},
		{"/v1/learned/g?prefix_tokens=2", "prefix_tokens"},
		{"/v1/learned/g?grid=2", "grid"},
		{"/v1/learned/g?grid=2.5,2", "grid"},
		{"/v1/learned/g?color=red", "color"},
	};
	for (size_t i = 0; i < sizeof bad_query / sizeof bad_query[0]; i++)
		put_refused(bad_query[i][0], &b, bad_query[i][1]);
	const char *form[] = {"Content-Type: application/json", NULL};
	pe_request(&D, "PUT", "/v1/learned/g", form, b.data, b.len, &r);
	pe_assert_problem(&r, 415, "Content-Type");
	pe_resp_free(&r);
	pe_buf_destroy(&b);

	/* 413 from Content-Length on the first call: no body is ever sent (with Expect; without, the
	 * body is read and dropped first: tests/fault/test_linger.c) */
	snprintf(req, sizeof req, "PUT /v1/learned/huge HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
				  "Content-Length: 100000000\r\nExpect: 100-continue\r\n\r\n");
	pe_raw_exchange(&D, req, strlen(req), buf, sizeof buf, 5000);
	ck_assert_msg(strncmp(buf, "HTTP/1.1 413", 12) == 0, "%s", buf);
	ck_assert_ptr_nonnull(strstr(buf, "\"param\":\"body\""));
	/* a table over max_table_bytes whose body is within the npy allowance: 413 too */
	float *big = calloc(1100, sizeof *big);
	npy(&b, PE_F32, 1100, 1, big);
	put("/v1/learned/big", &b, &r);
	pe_assert_problem(&r, 413, "body");
	pe_resp_free(&r);
	pe_buf_destroy(&b);
	free(big);
	/* store_max_bytes: two 3200-byte tables fit in 7000, a third is 507 */
	put_table("/v1/learned/s1", 800, 1, 0, 201);
	put_table("/v1/learned/s2", 800, 1, 0, 201);
	put_table("/v1/learned/s3", 800, 1, 0, 507);
	put_table("/v1/learned/s1", 800, 1, 1, 200); /* replacing needs no more room */
	assert_stored(2, "s1.table|s2.table|");
	stop();
}
END_TEST

/* Names are checked after URL decoding: raw requests, so that no client library normalises them. */
START_TEST(hostile_names)
{
	start(NULL);
	static const char *const paths[] = {
		"/v1/learned/..%2F..%2Ftmp%2Fevil", "/v1/learned/a%2Fb", "/v1/learned/.hidden", "/v1/learned/%2e%2e",
		"/v1/learned/..", "/v1/learned/a%20b", "/v1/learned/a/b", "/v1/learned/caf%C3%A9", "/v1/learned/a%5Cb",
		"/v1/learned/", "/v1/learned/%2E%2Ftable", "/v1/learned/t%3Fformat=npy", "/v1/learned/t%3F?len=2",
		"/v1/learned/x123456789x123456789x123456789x123456789x123456789x123456789x1234",
		"/v1/learned/a%00b", "/v1/learned/%00",
	};
	const char *methods[] = {"PUT", "GET", "DELETE"};
	char req[512], buf[4096];
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
		for (int m = 0; m < 3; m++) {
			snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
				 "Content-Length: 0\r\nConnection: close\r\n\r\n", methods[m], paths[i]);
			pe_raw_exchange(&D, req, strlen(req), buf, sizeof buf, 5000);
			ck_assert_msg(strncmp(buf, "HTTP/1.1 400", 12) == 0 && strstr(buf, "\"param\":\"name\""),
				      "%s %s: %.300s", methods[m], paths[i], buf);
		}
	char f[256];
	files(f, sizeof f);
	ck_assert_str_eq(f, "");
	struct stat st;
	ck_assert_int_ne(stat("/tmp/evil.table", &st), 0);
	/* the longest and the oddest valid names */
	put_table("/v1/learned/x123456789x123456789x123456789x123456789x123456789x123456789x123", 2, 2, 0, 201);
	put_table("/v1/learned/A-z_0.9..", 2, 2, 0, 201);
	stop();
}
END_TEST

/* ---- access control ---- */

START_TEST(token_required_for_writes)
{
	const char *args[] = {"--auth-token", "s3cret-token", NULL};
	start(args);
	struct pe_buf b;
	struct pe_resp r;
	char h[128], req[512], buf[4096];
	float *v = ramp(4, 0);
	npy(&b, PE_F32, 2, 2, v);
	put_with("/v1/learned/t", b.data, b.len, NULL, &r);
	pe_assert_problem(&r, 401, "Authorization");
	ck_assert_ptr_nonnull(pe_resp_header(&r, "WWW-Authenticate", h, sizeof h));
	ck_assert_int_eq(strncmp(h, "Bearer", 6), 0);
	pe_resp_free(&r);
	put_with("/v1/learned/t", b.data, b.len, "Authorization: Basic czNjcmV0LXRva2Vu", &r);
	pe_assert_problem(&r, 401, "Authorization");
	pe_resp_free(&r);
	put_with("/v1/learned/t", b.data, b.len, "Authorization: Bearer s3cret-tokem", &r);
	pe_assert_problem(&r, 403, "Authorization");
	pe_resp_free(&r);
	put_with("/v1/learned/t", b.data, b.len, "Authorization: Bearer s3cret", &r);
	pe_assert_problem(&r, 403, "Authorization");
	pe_resp_free(&r);
	put_with("/v1/learned/t", b.data, b.len, "Authorization: Bearer s3cret-token", &r);
	ck_assert_int_eq(r.status, 201);
	pe_resp_free(&r);
	pe_get(&D, "/v1/learned/t", &r); /* reads stay open */
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	/* refused before the body is read: the client never sends it */
	snprintf(req, sizeof req, "PUT /v1/learned/t HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\nExpect: 100-continue\r\n\r\n");
	pe_raw_exchange(&D, req, strlen(req), buf, sizeof buf, 5000);
	ck_assert_msg(strncmp(buf, "HTTP/1.1 401", 12) == 0, "%s", buf);
	const char *none[] = {NULL};
	pe_request(&D, "DELETE", "/v1/learned/t", none, NULL, 0, &r);
	pe_assert_problem(&r, 401, "Authorization");
	pe_resp_free(&r);
	const char *auth[] = {"Authorization: bearer s3cret-token", NULL};
	pe_request(&D, "DELETE", "/v1/learned/t", auth, NULL, 0, &r);
	ck_assert_int_eq(r.status, 204);
	pe_resp_free(&r);
	pe_buf_destroy(&b);
	free(v);
	stop();
}
END_TEST

static size_t sink(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

/* status of method url with body; -1 on failure */
static long request_url(const char *url, const char *method, const char *header, const void *body, size_t len)
{
	CURL *c = curl_easy_init();
	struct curl_slist *hl = curl_slist_append(NULL, "Content-Type: application/x-npy");
	long status = -1;
	if (header)
		hl = curl_slist_append(hl, header);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	}
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	return status;
}

/* ---- the store across restarts ---- */

static int log_has(const char *needle)
{
	char *log = pe_daemon_log(&D);
	int found = strstr(log, needle) != NULL;
	free(log);
	return found;
}

START_TEST(start_quarantines_damage)
{
	start(NULL);
	put_table("/v1/learned/good", 10, 3, 0, 201);
	put_table("/v1/learned/rot", 10, 3, 1, 201);
	stop();
	char path[160];
	snprintf(path, sizeof path, "%s/rot.table", dir);
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "X", 1, 256 + 17), 1);
	close(fd);
	snprintf(path, sizeof path, "%s/.tmp-good.4242.7", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	ck_assert_int_eq(write(fd, "PETABLE1", 8), 8);
	close(fd);

	start(NULL);
	json_t *l = list();
	ck_assert_int_eq(json_integer_value(json_object_get(l, "count")), 1);
	ck_assert_ptr_nonnull(listed(l, "good"));
	json_decref(l);
	get_problem("/v1/learned/rot", 404, "name");
	ck_assert(log_has("\"event\":\"quarantine\",\"file\":\"rot.table\""));
	ck_assert(log_has("\"event\":\"quarantine\",\"file\":\".tmp-good.4242.7\""));
	char f[256];
	files(f, sizeof f);
	ck_assert_str_eq(f, "good.table|");
	struct pe_resp r; /* the quarantine is counted */
	pe_get(&D, "/metrics", &r);
	ck_assert_msg(strstr(r.body, "\nposenc_store_quarantine_files 2\n") != NULL, "%s", r.body);
	ck_assert(strstr(r.body, "\nposenc_store_quarantined_total 2\n") != NULL);
	ck_assert(strstr(r.body, "\nposenc_store_tables 1\n") != NULL);
	pe_resp_free(&r);
	stop();
	/* and bounded: with room for one file only the newer is kept at the next start */
	snprintf(path, sizeof path, "%s/.tmp-good.4242.8", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	ck_assert_int_eq(write(fd, "PETABLE1", 8), 8);
	close(fd);
	const char *one[] = {"--quarantine-max-bytes", "8", NULL};
	start(one);
	pe_get(&D, "/metrics", &r);
	ck_assert_msg(strstr(r.body, "\nposenc_store_quarantine_files 1\n") != NULL, "%s", r.body);
	ck_assert(strstr(r.body, "\nposenc_store_quarantine_bytes 8\n") != NULL);
	pe_resp_free(&r);
	ck_assert(log_has("\"event\":\"quarantine_dropped\""));
	stop();
}
END_TEST

START_TEST(unusable_data_dir_exits_1)
{
	char cmd[512], path[128];
	snprintf(path, sizeof path, "%s/file", dir);
	FILE *f = fopen(path, "w");
	fclose(f);
	snprintf(cmd, sizeof cmd, "%s --port 0 --data-dir %s/file/sub 2>%s/err.txt >/dev/null", pe_daemon_bin(), dir, dir);
	int st = system(cmd);
	ck_assert(WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), 1);
	size_t len;
	snprintf(path, sizeof path, "%s/err.txt", dir);
	char *msg = pe_test_read_file(path, &len);
	ck_assert_msg(strstr(msg, "data_dir") != NULL, "%s", msg);
	free(msg);
}
END_TEST

/* ---- the store tells the truth ---- */

/* The same elements re-uploaded with another grid, prefix_tokens or shape are another version:
 * new ETag, new metadata, never the cached answer of the old one. */
START_TEST(reupload_same_bytes_other_metadata)
{
	start(NULL);
	struct pe_resp r;
	struct pe_buf b;
	char e1[64], e2[64], h[64];
	float *v = ramp(15, 0);
	npy(&b, PE_F32, 5, 3, v);
	put("/v1/learned/vit?prefix_tokens=1&grid=2,2", &b, &r);
	ck_assert_int_eq(r.status, 201);
	pe_resp_free(&r);
	pe_get(&D, "/v1/learned/vit?format=bin", &r);
	ck_assert_ptr_nonnull(pe_resp_header(&r, "ETag", e1, sizeof e1));
	pe_resp_free(&r);
	pe_get(&D, "/v1/learned/vit?height=2&width=2&format=bin", &r); /* the 2x2 grid as it is */
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(memcmp(r.body, v, 60), 0);
	pe_resp_free(&r);

	put("/v1/learned/vit?prefix_tokens=1&grid=1,4", &b, &r); /* same bytes, another grid */
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	json_t *l = list();
	json_t *g = json_object_get(listed(l, "vit"), "grid");
	ck_assert_int_eq(json_integer_value(json_array_get(g, 0)), 1);
	ck_assert_int_eq(json_integer_value(json_array_get(g, 1)), 4);
	json_decref(l);
	pe_get(&D, "/v1/learned/vit?format=bin", &r);
	ck_assert_str_ne(pe_resp_header(&r, "ETag", e2, sizeof e2), e1);
	pe_resp_free(&r);
	pe_get(&D, "/v1/learned/vit?height=2&width=2&format=bin", &r); /* now a 1x4 grid stretched to 2x2 */
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Cache", h, sizeof h), "miss");
	ck_assert_int_ne(memcmp(r.body, v, 60), 0);
	pe_resp_free(&r);

	put("/v1/learned/flat", &b, &r); /* [5, 3], then the same bytes as [3, 5] */
	pe_resp_free(&r);
	pe_get(&D, "/v1/learned/flat?format=bin", &r);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Shape", h, sizeof h), "5,3");
	pe_resp_header(&r, "ETag", e1, sizeof e1);
	pe_resp_free(&r);
	pe_buf_destroy(&b);
	npy(&b, PE_F32, 3, 5, v);
	put("/v1/learned/flat", &b, &r);
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	pe_get(&D, "/v1/learned/flat?format=bin", &r);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Shape", h, sizeof h), "3,5");
	ck_assert_str_ne(pe_resp_header(&r, "ETag", e2, sizeof e2), e1);
	pe_resp_free(&r);
	pe_buf_destroy(&b);
	free(v);
	stop();
}
END_TEST

/* A table file removed behind posencd's back: 404, and the list forgets it (not 503 "retry"). */
START_TEST(removed_file_is_404)
{
	start(NULL);
	put_table("/v1/learned/gone", 4, 2, 0, 201);
	put_table("/v1/learned/kept", 4, 2, 1, 201);
	char path[160];
	snprintf(path, sizeof path, "%s/gone.table", dir);
	ck_assert_int_eq(unlink(path), 0);
	get_problem("/v1/learned/gone?format=npy", 404, "name");
	get_problem("/v1/learned/gone?format=csv", 404, "name");
	json_t *l = list();
	ck_assert_int_eq(json_integer_value(json_object_get(l, "count")), 1);
	ck_assert_ptr_null(listed(l, "gone"));
	json_decref(l);
	ck_assert(log_has("\"event\":\"vanished\",\"file\":\"gone.table\""));
	put_table("/v1/learned/gone", 4, 2, 0, 201); /* created anew, not replaced */
	stop();
}
END_TEST

/* GET name (json) sending If-None-Match: inm (when not NULL); the answer in *r. */
static void get_json(const char *path, const char *etag, struct pe_resp *r)
{
	char inm[96];
	snprintf(inm, sizeof inm, "If-None-Match: %s", etag ? etag : "");
	const char *hs[] = {inm, NULL};
	pe_request(&D, "GET", path, etag ? hs : NULL, NULL, 0, r);
}

/* Cached answers do not outlive the file: replaced behind posencd's back (renamed over, as a
 * restore would), the next GET, though its key was cached, serves the file's version (new ETag,
 * the old one no longer 304); removed, a GET whose answer was cached is a 404 and the list
 * forgets the table, before anything misses the cache. */
START_TEST(cached_answers_follow_the_file)
{
	start(NULL);
	struct pe_resp r;
	char path[160], saved[160], e1[64], e2[64], h[64];
	snprintf(path, sizeof path, "%s/one.table", dir);
	snprintf(saved, sizeof saved, "%s/saved", dir);
	put_table("/v1/learned/one", 8, 2, 5, 201);
	ck_assert_int_eq(link(path, saved), 0); /* a valid [8, 2] one.table, kept aside */
	put_table("/v1/learned/one", 4, 4, 0, 200);
	for (int i = 0; i < 2; i++) {
		get_json("/v1/learned/one?format=json", NULL, &r);
		ck_assert_int_eq(r.status, 200);
		ck_assert_str_eq(pe_resp_header(&r, "X-PE-Cache", h, sizeof h), i ? "hit" : "miss");
		ck_assert_str_eq(pe_resp_header(&r, "X-PE-Shape", h, sizeof h), "4,4");
		ck_assert_ptr_nonnull(pe_resp_header(&r, "ETag", e1, sizeof e1));
		pe_resp_free(&r);
	}

	ck_assert_int_eq(rename(saved, path), 0);
	get_json("/v1/learned/one?format=json", e1, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Shape", h, sizeof h), "8,2");
	ck_assert_str_ne(pe_resp_header(&r, "ETag", e2, sizeof e2), e1);
	json_t *j = pe_resp_json(&r);
	ck_assert_int_eq(json_array_size(json_object_get(j, "data")), 8);
	json_decref(j);
	pe_resp_free(&r);
	json_t *l = list();
	json_t *one = listed(l, "one");
	ck_assert_ptr_nonnull(one);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(one, "shape"), 0)), 8);
	json_decref(l);
	ck_assert(log_has("\"event\":\"adopted\",\"file\":\"one.table\""));
	get_json("/v1/learned/one?format=json", e2, &r); /* cached again, under the new version */
	ck_assert_int_eq(r.status, 304);
	pe_resp_free(&r);

	ck_assert_int_eq(unlink(path), 0);
	for (int i = 0; i < 2; i++)
		get_problem("/v1/learned/one?format=json", 404, "name");
	get_json("/v1/learned/one?format=json", e2, &r);
	pe_assert_problem(&r, 404, "name");
	pe_resp_free(&r);
	l = list();
	ck_assert_ptr_null(listed(l, "one"));
	ck_assert_int_eq(json_integer_value(json_object_get(l, "count")), 0);
	json_decref(l);
	ck_assert(log_has("\"event\":\"vanished\",\"file\":\"one.table\""));
	stop();
}
END_TEST

/* A FIFO named like a table must not block start-up (open() on a FIFO waits for a writer). */
START_TEST(fifo_in_data_dir_does_not_block)
{
	char path[160];
	snprintf(path, sizeof path, "%s/fifo.table", dir);
	ck_assert_int_eq(mkfifo(path, 0644), 0);
	start(NULL); /* fails if posencd does not report its port */
	ck_assert(log_has("\"event\":\"ignored\",\"file\":\"fifo.table\""));
	get_problem("/v1/learned/fifo", 404, "name");
	put_table("/v1/learned/t", 2, 2, 0, 201);
	stop();
	struct stat st;
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISFIFO(st.st_mode)); /* left alone */
}
END_TEST

/* A write answered 503 at job_timeout must not land later. POSENC_TEST_WRITE_GATE holds writes
 * (before they reach the store) while its file exists: the 503 comes first, then the gate opens,
 * and with one worker, a later write's answer means the held one is over. */
START_TEST(write_answered_503_never_lands)
{
	char gate[160], f[256];
	snprintf(gate, sizeof gate, "%s/gate", dir);
	pe_spawn_hooks(1); /* only the test build honours the gate */
	setenv("POSENC_TEST_WRITE_GATE", gate, 1);
	const char *args[] = {"--workers", "1", "--job-timeout", "1", NULL};
	start(args);
	put_table("/v1/learned/kept", 2, 2, 0, 201);
	FILE *g = fopen(gate, "w");
	ck_assert_ptr_nonnull(g);
	fclose(g);
	struct pe_resp r;
	struct pe_buf b;
	float *v = ramp(4, 9);
	npy(&b, PE_F32, 2, 2, v);
	put("/v1/learned/late", &b, &r);
	pe_assert_problem(&r, 503, NULL);
	ck_assert_msg(strstr(r.body, "nothing changed") != NULL, "%s", r.body);
	pe_resp_free(&r);
	pe_request(&D, "DELETE", "/v1/learned/kept", NULL, NULL, 0, &r); /* waits behind it, expires too */
	pe_assert_problem(&r, 503, NULL);
	ck_assert_msg(strstr(r.body, "nothing changed") != NULL, "%s", r.body);
	pe_resp_free(&r);
	ck_assert_int_eq(unlink(gate), 0);
	put_table("/v1/learned/after", 2, 2, 1, 201); /* runs after both held writes */
	get_problem("/v1/learned/late", 404, "name");
	pe_get(&D, "/v1/learned/kept", &r);
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	files(f, sizeof f);
	ck_assert_str_eq(f, "after.table|kept.table|"); /* and no temporary file */
	stop();
	start(args); /* and not after a restart either */
	get_problem("/v1/learned/late", 404, "name");
	stop();
	pe_buf_destroy(&b);
	free(v);
	unsetenv("POSENC_TEST_WRITE_GATE");
	pe_spawn_hooks(0);
}
END_TEST

/* ---- one daemon per data_dir ---- */

static atomic_int writing, put_failures, put_count;

static void *put_loop(void *arg)
{
	char url[160];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/learned/w%d", D.s.port, (int)(intptr_t)arg);
	struct pe_buf b;
	float *v = ramp(256 * 256, (float)(intptr_t)arg);
	npy(&b, PE_F32, 256, 256, v);
	while (atomic_load(&writing)) {
		long st = request_url(url, "PUT", NULL, b.data, b.len);
		atomic_fetch_add(&put_count, 1);
		if (st != 200 && st != 201)
			atomic_fetch_add(&put_failures, 1);
	}
	pe_buf_destroy(&b);
	free(v);
	return NULL;
}

/* A second posencd on the same data_dir (and port) while the first is uploading: it exits 1 saying
 * why, and touches nothing of the first's: not an upload's temporary file, not quarantine/; every
 * PUT of the first succeeds. */
START_TEST(second_daemon_changes_nothing)
{
	start(NULL);
	char path[160], cmd[600], f[512];
	snprintf(path, sizeof path, "%s/.tmp-x.%d.1", dir, D.s.pid); /* as an upload in progress leaves it */
	FILE *t = fopen(path, "w");
	ck_assert_ptr_nonnull(t);
	fputs("PETABLE1", t);
	fclose(t);
	pthread_t th[3];
	atomic_store(&writing, 1);
	for (intptr_t i = 0; i < 3; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, put_loop, (void *)i), 0);
	while (atomic_load(&put_count) < 3)
		usleep(1000);
	snprintf(cmd, sizeof cmd, "%s --port %d --bind 127.0.0.1 --data-dir %s >%s/out2.txt 2>%s/err2.txt", pe_daemon_bin(),
		 D.s.port, dir, dir, dir);
	int st = system(cmd);
	atomic_store(&writing, 0);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	ck_assert(WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), 1);
	snprintf(path, sizeof path, "%s/err2.txt", dir);
	size_t len;
	char *msg = pe_test_read_file(path, &len);
	ck_assert_msg(strstr(msg, "is in use by another posencd") != NULL, "%s", msg);
	free(msg);
	ck_assert_int_eq(atomic_load(&put_failures), 0);
	files(f, sizeof f);
	char want[64];
	snprintf(want, sizeof want, ".tmp-x.%d.1|", D.s.pid);
	ck_assert_msg(strstr(f, want) != NULL, "%s", f);
	snprintf(cmd, sizeof cmd, "ls -A '%s/quarantine' | wc -l", dir);
	FILE *p = popen(cmd, "r");
	ck_assert_int_eq(fscanf(p, "%d", &st), 1);
	pclose(p);
	ck_assert_int_eq(st, 0);
	stop();
}
END_TEST

/* ---- crash: SIGKILL during a stream of uploads ---- */

#define WRITERS 3
#define NAMES_PER_WRITER 2
#define MAX_VERSIONS 4096

/* One name, written by one thread only, so its versions are ordered: acked is the last version
 * the daemon confirmed, inflight the one sent after it and not answered (or -1). */
struct name_log {
	char name[32];
	char sha[MAX_VERSIONS][65];
	int n, acked, inflight;
};

static struct name_log logs[WRITERS * NAMES_PER_WRITER];
static int crash_port;
static atomic_int acks;

struct writer {
	int id;
	unsigned seed;
};

static void *writer_run(void *arg)
{
	struct writer *w = arg;
	char url[160];
	for (int round = 0;; round++) {
		struct name_log *l = &logs[w->id * NAMES_PER_WRITER + round % NAMES_PER_WRITER];
		size_t rows = 64 + (size_t)(rand_r(&w->seed) % 448), cols = 256, n = rows * cols;
		float *v = malloc(n * sizeof *v);
		for (size_t i = 0; i < n; i++)
			v[i] = (float)rand_r(&w->seed) / (float)RAND_MAX;
		struct pe_buf b;
		struct pe_tensor_view t = {.shape = {2, {rows, cols}}, .dtype = PE_F32, .data = v};
		pe_buf_init(&b, (size_t)1 << 30);
		pe_npy_write(&b, &t, NULL);
		if (l->n == MAX_VERSIONS)
			abort();
		sha_hex(v, n * sizeof *v, l->sha[l->n]);
		l->inflight = l->n++;
		snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/learned/%s", crash_port, l->name);
		long status = request_url(url, "PUT", NULL, b.data, b.len);
		pe_buf_destroy(&b);
		free(v);
		if (status != 200 && status != 201)
			return NULL; /* the daemon is gone (or refused: the checks will tell) */
		l->acked = l->inflight;
		l->inflight = -1;
		atomic_fetch_add(&acks, 1);
	}
}

/* After a restart: every name acknowledged is listed with its last acknowledged version, or with
 * the one that was in flight when the daemon died; no other table exists; every listed table
 * reads back with the listed sha256. Then the listed version becomes the acknowledged one. */
static void check_after_crash(void)
{
	json_t *l = list();
	size_t listed_names = 0;
	for (size_t i = 0; i < WRITERS * NAMES_PER_WRITER; i++) {
		struct name_log *nl = &logs[i];
		json_t *e = listed(l, nl->name);
		if (!e) {
			ck_assert_msg(nl->acked < 0, "%s: acknowledged version %d lost", nl->name, nl->acked);
			continue;
		}
		listed_names++;
		const char *sha = json_string_value(json_object_get(e, "sha256"));
		int v = nl->acked >= 0 && !strcmp(sha, nl->sha[nl->acked])         ? nl->acked
			: nl->inflight >= 0 && !strcmp(sha, nl->sha[nl->inflight]) ? nl->inflight
										   : -2;
		ck_assert_msg(v != -2, "%s: listed version %s is neither the acknowledged (%d) nor the in-flight one (%d)",
			      nl->name, sha, nl->acked, nl->inflight);
		char path[96], got[65];
		struct pe_resp r;
		snprintf(path, sizeof path, "/v1/learned/%.31s?format=bin&dtype=f32", nl->name);
		pe_get(&D, path, &r);
		ck_assert_int_eq(r.status, 200);
		sha_hex(r.body, r.len, got);
		ck_assert_str_eq(got, sha);
		pe_resp_free(&r);
		nl->acked = v;
		nl->inflight = -1;
	}
	ck_assert_int_eq(json_integer_value(json_object_get(l, "count")), (json_int_t)listed_names);
	json_decref(l);
	static const char ev[] = "\"event\":\"quarantine\",\"file\":\"";
	char *log = pe_daemon_log(&D);
	for (char *q = log; (q = strstr(q, ev)) != NULL; q++)
		ck_assert_msg(!strncmp(q + strlen(ev), ".tmp-", 5), "a table was quarantined: %.200s", q);
	free(log);
}

START_TEST(sigkill_during_uploads)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	unsigned seed = (unsigned)ts.tv_nsec;
	for (int i = 0; i < WRITERS * NAMES_PER_WRITER; i++) {
		snprintf(logs[i].name, sizeof logs[i].name, "w%d-n%d", i / NAMES_PER_WRITER, i % NAMES_PER_WRITER);
		logs[i].acked = logs[i].inflight = -1;
	}
	start(NULL);
	for (int round = 0; round < 4; round++) {
		pthread_t t[WRITERS];
		struct writer w[WRITERS];
		crash_port = D.s.port;
		atomic_store(&acks, 0);
		for (int i = 0; i < WRITERS; i++) {
			w[i] = (struct writer){i, seed + (unsigned)(round * WRITERS + i)};
			ck_assert_int_eq(pthread_create(&t[i], NULL, writer_run, &w[i]), 0);
		}
		usleep(500000 + (useconds_t)(rand_r(&seed) % 500000));
		ck_assert_int_eq(pe_daemon_stop(&D, SIGKILL), 128 + SIGKILL);
		for (int i = 0; i < WRITERS; i++)
			pthread_join(t[i], NULL);
		ck_assert_msg(atomic_load(&acks) > 0, "round %d: no upload was acknowledged", round);
		fprintf(stderr, "crash round %d: %d uploads acknowledged before SIGKILL\n", round, atomic_load(&acks));
		start(NULL);
		check_after_crash();
	}
	stop();
}
END_TEST

/* The list is held on the response budget while it is made and sent (the store's copy of it,
 * then its JSON, which a client that does not read keeps): a list within a 1 MiB budget is served
 * (1000 tables), one past it is refused 413, never 503 (which would have it retried for ever),
 * whether that shows before the store is scanned (6000 tables) or while the JSON is written
 * (2870), and the budget is back at zero after each. */
START_TEST(list_is_held_on_the_budget)
{
	static const char *const small[] = {"--response-budget-bytes", "1048576", NULL};
	char path[64];
	struct pe_resp r;
	start(small);
	for (int i = 0; i < 6000; i++) {
		snprintf(path, sizeof path, "/v1/learned/t%04d", i);
		put_table(path, 1, 1, (float)i, 201);
		if (i == 999) {
			json_t *doc = list();
			ck_assert_int_eq(json_integer_value(json_object_get(doc, "count")), 1000);
			ck_assert_int_eq(json_array_size(json_object_get(doc, "tables")), 1000);
			json_decref(doc);
			ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
		}
		if (i == 2869) { /* the copy (2934 x 168 bytes) leaves less than 2870 entries of 194 */
			pe_get(&D, "/v1/learned", &r);
			ck_assert_msg(r.status == 413 && strstr(r.body, "response_budget_bytes"), "2870: %ld %s", r.status,
				      r.body);
			pe_resp_free(&r);
			ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
		}
	}
	pe_get(&D, "/v1/learned", &r);
	ck_assert_msg(r.status == 413 && strstr(r.body, "response_budget_bytes"), "%ld %s", r.status, r.body);
	pe_resp_free(&r);
	ck_assert_double_eq(pe_metric_becomes(&D, "posenc_response_budget_bytes", 0), 0);
	stop();
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("e2e_learned");
	TCase *tc = tcase_create("learned");
	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, make_dir, remove_dir);
	tcase_add_test(tc, put_get_every_format);
	tcase_add_test(tc, replace_changes_etag_never_stale);
	tcase_add_test(tc, wrong_methods);
	tcase_add_test(tc, resampling_matches_torch);
	tcase_add_test(tc, resampling_errors);
	tcase_add_test(tc, grid_resampling_holds_its_intermediate_on_the_budget);
	tcase_add_test(tc, upload_errors);
	tcase_add_test(tc, hostile_names);
	tcase_add_test(tc, token_required_for_writes);
	tcase_add_test(tc, start_quarantines_damage);
	tcase_add_test(tc, unusable_data_dir_exits_1);
	tcase_add_test(tc, sigkill_during_uploads);
	tcase_add_test(tc, reupload_same_bytes_other_metadata);
	tcase_add_test(tc, removed_file_is_404);
	tcase_add_test(tc, cached_answers_follow_the_file);
	tcase_add_test(tc, fifo_in_data_dir_does_not_block);
	tcase_add_test(tc, write_answered_503_never_lands);
	tcase_add_test(tc, second_daemon_changes_nothing);
	tcase_add_test(tc, list_is_held_on_the_budget);
	suite_add_tcase(s, tc);
	if (!pe_pg_available()) {
		fprintf(stderr, "e2e_learned: PostgreSQL is not installed: the learned_pg cases are skipped\n");
		return s;
	}
	TCase *pg = tcase_create("learned_pg"); /* the same contract, on PostgreSQL */
	tcase_set_timeout(pg, 300);
	tcase_add_checked_fixture(pg, make_dir_pg, remove_dir_pg);
	tcase_add_test(pg, put_get_every_format);
	tcase_add_test(pg, replace_changes_etag_never_stale);
	tcase_add_test(pg, wrong_methods);
	tcase_add_test(pg, resampling_matches_torch);
	tcase_add_test(pg, resampling_errors);
	tcase_add_test(pg, upload_errors);
	tcase_add_test(pg, hostile_names);
	tcase_add_test(pg, token_required_for_writes);
	tcase_add_test(pg, sigkill_during_uploads);
	tcase_add_test(pg, reupload_same_bytes_other_metadata);
	tcase_add_test(pg, write_answered_503_never_lands);
	suite_add_tcase(s, pg);
	return s;
}

PE_TEST_MAIN(suite)
