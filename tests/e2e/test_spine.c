/* End-to-end tests of the service spine against a real posencd on port 0: tables in every format
 * checked bit for bit against the core, cache hit/miss, ETag/304, negotiation, errors as
 * problem+json, single flight under concurrent identical requests, the queue limit, operations
 * endpoints, configuration errors, and draining on SIGTERM. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"
#include "support/pe_table.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "posenc/posenc.h"

static struct pe_daemon D;

static char data_dir[64]; /* the fixture's own: tests start a second daemon beside it, on another */

static void start_default(void)
{
	snprintf(data_dir, sizeof data_dir, "/tmp/posenc-spine-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(data_dir));
	const char *args[] = {"--data-dir", data_dir, NULL};
	pe_daemon_start(&D, args);
}

static void stop_default(void)
{
	char cmd[128];
	ck_assert_int_eq(pe_daemon_stop(&D, SIGTERM), 0);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", data_dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(json_table_matches_core_and_caches)
{
	struct pe_resp a, b;
	char h[256];
	pe_get(&D, "/v1/sinusoidal?len=7&dim=10&offset=3", &a);
	ck_assert_int_eq(a.status, 200);
	ck_assert_str_eq(pe_resp_header(&a, "Content-Type", h, sizeof h), "application/json");
	ck_assert_str_eq(pe_resp_header(&a, "X-PE-Shape", h, sizeof h), "7,10");
	ck_assert_str_eq(pe_resp_header(&a, "X-PE-Dtype", h, sizeof h), "f32");
	ck_assert_str_eq(pe_resp_header(&a, "X-PE-Cache", h, sizeof h), "miss");
	ck_assert_str_eq(pe_resp_header(&a, "Cache-Control", h, sizeof h), "public, max-age=31536000, immutable");
	ck_assert_str_eq(pe_resp_header(&a, "Access-Control-Allow-Origin", h, sizeof h), "*");
	char etag[64];
	ck_assert_ptr_nonnull(pe_resp_header(&a, "ETag", etag, sizeof etag));
	ck_assert_int_eq(etag[0], '"');

	json_t *j = pe_resp_json(&a);
	ck_assert_str_eq(json_string_value(json_object_get(j, "encoding")), "sinusoidal");
	ck_assert_str_eq(json_string_value(json_object_get(j, "dtype")), "f32");
	json_t *params = json_object_get(j, "params");
	ck_assert_int_eq(json_integer_value(json_object_get(params, "offset")), 3);
	ck_assert_str_eq(json_string_value(json_object_get(params, "variant")), "vaswani");
	ck_assert_int_eq(json_array_size(json_object_get(j, "shape")), 2);
	float *ref = pe_query_table("sinusoidal", "len=7&dim=10&offset=3", PE_F32, NULL);
	json_t *data = json_object_get(j, "data");
	ck_assert_int_eq(json_array_size(data), 7);
	for (size_t r = 0; r < 7; r++)
		for (size_t c = 0; c < 10; c++) {
			float got = (float)json_number_value(json_array_get(json_array_get(data, r), c));
			ck_assert_msg(pe_ulp_f32(got, ref[r * 10 + c]) == 0, "row %zu col %zu differs", r, c);
		}
	free(ref);
	json_decref(j);

	/* the shared (hit) response is built at the first hit and counted in the cache from then on
	 * (produce.c SHARED_RESPONSE_BYTES, 2048), once */
	double cached = pe_metric(&D, "posenc_cache_bytes");
	pe_get(&D, "/v1/sinusoidal?offset=3&dim=10&len=7&base=1e4", &b);
	ck_assert_int_eq(b.status, 200);
	ck_assert_str_eq(pe_resp_header(&b, "X-PE-Cache", h, sizeof h), "hit");
	ck_assert_msg(pe_metric(&D, "posenc_cache_bytes") == cached + 2048, "cache bytes %.0f after the first hit, %.0f before",
		      pe_metric(&D, "posenc_cache_bytes"), cached);
	ck_assert_str_eq(pe_resp_header(&b, "ETag", h, sizeof h), etag);
	ck_assert_uint_eq(a.len, b.len);
	ck_assert(memcmp(a.body, b.body, a.len) == 0);
	/* the first hit builds the shared response, the next ones reuse it: every header each time */
	for (int i = 0; i < 2; i++) {
		pe_resp_free(&b);
		pe_get(&D, "/v1/sinusoidal?len=7&dim=10&offset=3", &b);
		ck_assert_int_eq(b.status, 200);
		ck_assert_str_eq(pe_resp_header(&b, "X-PE-Cache", h, sizeof h), "hit");
		ck_assert_str_eq(pe_resp_header(&b, "ETag", h, sizeof h), etag);
		ck_assert_str_eq(pe_resp_header(&b, "Content-Type", h, sizeof h), "application/json");
		ck_assert_str_eq(pe_resp_header(&b, "X-PE-Shape", h, sizeof h), "7,10");
		ck_assert_str_eq(pe_resp_header(&b, "X-PE-Dtype", h, sizeof h), "f32");
		ck_assert_str_eq(pe_resp_header(&b, "Cache-Control", h, sizeof h), "public, max-age=31536000, immutable");
		ck_assert_str_eq(pe_resp_header(&b, "Access-Control-Allow-Origin", h, sizeof h), "*");
		ck_assert_uint_eq(a.len, b.len);
		ck_assert(memcmp(a.body, b.body, a.len) == 0);
	}
	ck_assert_msg(pe_metric(&D, "posenc_cache_bytes") == cached + 2048, "cache bytes %.0f after three hits, %.0f before",
		      pe_metric(&D, "posenc_cache_bytes"), cached);
	pe_resp_free(&a);
	pe_resp_free(&b);
}
END_TEST

static void check_binary(const char *query, enum pe_dtype dt, size_t header)
{
	struct pe_resp r;
	char path[256], h[64];
	snprintf(path, sizeof path, "/v1/sinusoidal?%s", query);
	pe_get(&D, path, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(pe_resp_header(&r, "X-PE-Dtype", h, sizeof h), pe_dtype_name(dt));
	struct pe_shape s;
	int of;
	void *ref = pe_query_table("sinusoidal", query, dt, &s);
	size_t n = pe_shape_count(&s, &of);
	ck_assert_uint_eq(r.len, header + n * pe_dtype_size(dt));
	ck_assert(memcmp(r.body + header, ref, n * pe_dtype_size(dt)) == 0);
	free(ref);
	pe_resp_free(&r);
}

START_TEST(bin_every_dtype_matches_core)
{
	check_binary("len=33&dim=20&format=bin", PE_F32, 0);
	check_binary("len=33&dim=20&format=bin&dtype=f64", PE_F64, 0);
	check_binary("len=33&dim=20&format=bin&dtype=f16&variant=concat", PE_F16, 0);
	check_binary("len=33&dim=21&format=bin&dtype=bf16&variant=t2t&compat=hf", PE_BF16, 0);
}
END_TEST

/* GET path with the request headers hs (NULL: none) into r: a 200 with Content-Type type (NULL:
 * any). The caller frees r. */
static void get_200(const char *path, const char *const *hs, const char *type, struct pe_resp *r)
{
	char h[64];
	pe_request(&D, "GET", path, hs, NULL, 0, r);
	ck_assert_msg(r->status == 200, "GET %s: %ld", path, r->status);
	if (!type)
		return;
	const char *got = pe_resp_header(r, "Content-Type", h, sizeof h);
	ck_assert_msg(got && !strcmp(got, type), "GET %s: Content-Type %s, want %s", path, got ? got : "(none)", type);
}

/* get_200 without the body. */
static void expect_200(const char *path, const char *const *hs, const char *type)
{
	struct pe_resp r;
	get_200(path, hs, type, &r);
	pe_resp_free(&r);
}

START_TEST(npy_matches_core)
{
	struct pe_resp r;
	get_200("/v1/sinusoidal?len=5&dim=8&format=npy&dtype=f64", NULL, "application/x-npy", &r);
	ck_assert(memcmp(r.body, "\x93NUMPY\x01\x00", 8) == 0);
	size_t hlen = 10 + (size_t)(unsigned char)r.body[8] + 256 * (size_t)(unsigned char)r.body[9];
	ck_assert_uint_eq(hlen % 64, 0);
	ck_assert(memmem(r.body, hlen, "'descr': '<f8'", 14) != NULL);
	ck_assert(memmem(r.body, hlen, "(5, 8)", 6) != NULL);
	pe_resp_free(&r);
	check_binary("len=5&dim=8&format=npy&dtype=f64", PE_F64, hlen);
}
END_TEST

START_TEST(accept_negotiation)
{
	struct pe_resp r;
	const char *npy[] = {"Accept: text/html;q=0.9, application/x-npy", NULL};
	expect_200("/v1/sinusoidal?len=2&dim=2", npy, "application/x-npy");
	const char *bin[] = {"Accept: application/json;q=0.5, application/octet-stream;q=0.8", NULL};
	expect_200("/v1/sinusoidal?len=2&dim=2", bin, "application/octet-stream");
	const char *html[] = {"Accept: text/html", NULL};
	pe_request(&D, "GET", "/v1/sinusoidal?len=2&dim=2", html, NULL, 0, &r);
	pe_assert_problem(&r, 406, "Accept");
	pe_resp_free(&r);
	/* format= wins over Accept */
	expect_200("/v1/sinusoidal?len=2&dim=2&format=json", html, "application/json");
}
END_TEST

START_TEST(etag_304)
{
	struct pe_resp r, n;
	char etag[64], hdr[96], h[64];
	pe_get(&D, "/v1/sinusoidal?len=3&dim=4&format=bin", &r);
	pe_resp_header(&r, "ETag", etag, sizeof etag);
	snprintf(hdr, sizeof hdr, "If-None-Match: \"other\", %s", etag);
	const char *hs[] = {hdr, NULL};
	pe_request(&D, "GET", "/v1/sinusoidal?len=3&dim=4&format=bin", hs, NULL, 0, &n);
	ck_assert_int_eq(n.status, 304);
	ck_assert_uint_eq(n.len, 0);
	ck_assert_str_eq(pe_resp_header(&n, "ETag", h, sizeof h), etag);
	pe_resp_free(&n);
	/* another representation has another ETag */
	pe_request(&D, "GET", "/v1/sinusoidal?len=3&dim=4&format=npy", hs, NULL, 0, &n);
	ck_assert_int_eq(n.status, 200);
	ck_assert_str_ne(pe_resp_header(&n, "ETag", h, sizeof h), etag);
	pe_resp_free(&n);
	pe_resp_free(&r);
}
END_TEST

START_TEST(errors_are_problems)
{
	struct pe_resp r;
	static const struct {
		const char *path;
		long status;
		const char *param;
	} cases[] = {
		{"/v1/sinusoidal?dim=4", 400, "len"},
		{"/v1/sinusoidal?len=4&dim=abc", 400, "dim"},
		{"/v1/sinusoidal?len=4&dim=4&lenght=3", 400, "lenght"},
		{"/v1/sinusoidal?len=4&len=5&dim=4", 400, "len"},
		{"/v1/sinusoidal?len=4&dim=4&dtype=f8", 400, "dtype"},
		{"/v1/sinusoidal?len=4&dim=4&dtype=bf16&format=npy", 400, "dtype"},
		{"/v1/sinusoidal?len=4&dim=4&format=xml", 400, "format"},
		{"/v1/sinusoidal?len=4&dim=4&base=0", 400, "base"},
		{"/v1/sinusoidal?len=4&dim=4&base=nan", 400, "base"},
		{"/v1/sinusoidal?len=4&dim=5&variant=concat", 400, "dim"},
		{"/v1/sinusoidal?len=4&dim=4&variant=rope", 400, "variant"},
		{"/v1/sinusoidal?len=1073741824&dim=65536", 413, "len"},
		{"/v1/sinusoidal?len=5%00abc&dim=2", 400, "len"},
		{"/v1/sinusoidal?len=5%00&dim=2", 400, "len"},
		{"/v1/sinusoidal%00?len=5&dim=2", 404, NULL},
		{"/v1/sinus%6Fidal?len=1&dim=2&base=1%2E5e4", 200, NULL},
		{"/v1/sinusoidal?len=%2B5&dim=2", 400, "len"},
		{"/v1/sinusoidal?len=5&dim=2&base=%2B1e4", 400, "base"},
		{"/v1/sinusoidal?len=1e3&dim=2", 400, "len"},
		{"/v1/sinusoidal?len=18446744073709551617&dim=2", 400, "len"},
		{"/v1/sinusoidal?len=%zz&dim=2", 400, "len"},
		{"/v1/sinusoidal?len=2&dim=2&base=inf", 400, "base"},
		{"/v1/sinusoidal?len=2&dim=", 400, "dim"},
		{"/v1/sinusoidal?len=2&dim=2&format=npy&format=bin", 400, "format"},
		{"/v1/nope", 404, NULL},
		{"/v1//sinusoidal?len=1&dim=1", 404, NULL},
		{"/v1/sinusoidal/", 404, NULL},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		pe_get(&D, cases[i].path, &r);
		if (cases[i].status == 200)
			ck_assert_int_eq(r.status, 200);
		else
			pe_assert_problem(&r, cases[i].status, cases[i].param);
		pe_resp_free(&r);
	}
	char h[64];
	pe_request(&D, "POST", "/v1/sinusoidal?len=2&dim=2", NULL, "x", 1, &r);
	pe_assert_problem(&r, 405, NULL);
	ck_assert_str_eq(pe_resp_header(&r, "Allow", h, sizeof h), "GET, HEAD, OPTIONS");
	pe_resp_free(&r);
}
END_TEST

START_TEST(operations_endpoints)
{
	struct pe_resp r;
	char h[128];
	expect_200("/healthz", NULL, NULL);
	expect_200("/readyz", NULL, NULL);
	get_200("/openapi.yaml", NULL, NULL, &r);
	ck_assert(strstr(r.body, "openapi:") != NULL);
	ck_assert(strstr(r.body, "/v1/sinusoidal") != NULL);
	pe_resp_free(&r);
	pe_get(&D, "/v1/sinusoidal?len=2&dim=2", &r);
	pe_resp_free(&r);
	pe_get(&D, "/metrics", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert(strncmp(pe_resp_header(&r, "Content-Type", h, sizeof h), "text/plain; version=0.0.4", 25) == 0);
	const char *names[] = {"posenc_requests_total{route=\"sinusoidal\",status=\"200\"}",
			       "posenc_request_duration_seconds_bucket{route=\"sinusoidal\",le=\"+Inf\"}",
			       "posenc_cache_hits_total", "posenc_cache_misses_total", "posenc_cache_evictions_total",
			       "posenc_cache_bytes", "posenc_jobs_total", "posenc_queue_depth"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		ck_assert_msg(strstr(r.body, names[i]) != NULL, "metrics lack %s", names[i]);
	pe_resp_free(&r);
}
END_TEST

struct fetch {
	const char *path;
	struct pe_resp r;
};

static void *fetch_thread(void *arg)
{
	struct fetch *f = arg;
	pe_get(&D, f->path, &f->r);
	return NULL;
}

START_TEST(single_flight)
{
	enum { N = 24 };
	double jobs0 = pe_metric(&D, "posenc_jobs_total");
	struct fetch f[N];
	pthread_t t[N];
	for (int i = 0; i < N; i++) {
		f[i].path = "/v1/sinusoidal?len=4096&dim=1024&format=bin&offset=77";
		pthread_create(&t[i], NULL, fetch_thread, &f[i]);
	}
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(f[i].r.status, 200);
		ck_assert_uint_eq(f[i].r.len, 4096u * 1024u * 4u);
		ck_assert(memcmp(f[i].r.body, f[0].r.body, f[0].r.len) == 0);
	}
	for (int i = 0; i < N; i++) /* f[0] is every comparison's reference: free all at the end */
		pe_resp_free(&f[i].r);
	ck_assert_int_eq((int)(pe_metric(&D, "posenc_jobs_total") - jobs0), 1);
}
END_TEST

START_TEST(queue_limit_503)
{
	struct pe_daemon small;
	const char *args[] = {"--workers", "1", "--max-queue", "1", NULL};
	pe_daemon_start(&small, args);
	struct pe_daemon saved = D;
	D = small;
	enum { N = 12 };
	struct fetch f[N];
	pthread_t t[N];
	char paths[N][128];
	for (int i = 0; i < N; i++) {
		snprintf(paths[i], sizeof paths[i], "/v1/sinusoidal?len=8192&dim=1024&format=bin&offset=%d", i);
		f[i].path = paths[i];
		pthread_create(&t[i], NULL, fetch_thread, &f[i]);
	}
	int ok = 0, busy = 0;
	char h[32];
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		if (f[i].r.status == 200)
			ok++;
		else {
			pe_assert_problem(&f[i].r, 503, NULL);
			ck_assert_ptr_nonnull(pe_resp_header(&f[i].r, "Retry-After", h, sizeof h));
			busy++;
		}
		pe_resp_free(&f[i].r);
	}
	D = saved;
	ck_assert_int_eq(ok + busy, N);
	ck_assert_int_ge(ok, 1);
	ck_assert_int_ge(busy, 1);
	ck_assert_int_eq(pe_daemon_stop(&small, SIGTERM), 0);
}
END_TEST

START_TEST(sigterm_finishes_inflight)
{
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	struct pe_daemon saved = D;
	D = d;
	struct fetch f = {.path = "/v1/sinusoidal?len=65536&dim=512&format=bin&dtype=f64"};
	pthread_t t;
	pthread_create(&t, NULL, fetch_thread, &f);
	/* the request is being computed (a fixed sleep lost the race under ThreadSanitizer on a loaded
	 * machine: the signal came before the connection); past 10 s, the table was done already */
	for (int i = 0; i < 2000 && pe_metric(&d, "posenc_jobs_in_flight") < 1; i++)
		usleep(5000);
	kill(d.s.pid, SIGTERM);
	pthread_join(t, NULL);
	D = saved;
	ck_assert_int_eq(f.r.status, 200);
	ck_assert_uint_eq(f.r.len, 65536u * 512u * 8u);
	pe_resp_free(&f.r);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(bad_config_exits_2)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s --workers 0 2>/tmp/posenc-cfgerr.txt", pe_daemon_bin());
	int st = system(cmd);
	ck_assert(WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), 2);
	size_t len;
	char *msg = pe_test_read_file("/tmp/posenc-cfgerr.txt", &len);
	ck_assert_msg(strstr(msg, "workers") != NULL, "message does not name the key: %s", msg);
	ck_assert_ptr_eq(strchr(msg, '\n'), msg + len - 1); /* one line */
	free(msg);
	unlink("/tmp/posenc-cfgerr.txt");
}
END_TEST

static Suite *spine_suite(void)
{
	Suite *s = suite_create("e2e_spine");
	TCase *tc = tcase_create("daemon");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, start_default, stop_default);
	tcase_add_test(tc, json_table_matches_core_and_caches);
	tcase_add_test(tc, bin_every_dtype_matches_core);
	tcase_add_test(tc, npy_matches_core);
	tcase_add_test(tc, accept_negotiation);
	tcase_add_test(tc, etag_304);
	tcase_add_test(tc, errors_are_problems);
	tcase_add_test(tc, operations_endpoints);
	tcase_add_test(tc, single_flight);
	tcase_add_test(tc, queue_limit_503);
	tcase_add_test(tc, sigterm_finishes_inflight);
	tcase_add_test(tc, bad_config_exits_2);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(spine_suite)
