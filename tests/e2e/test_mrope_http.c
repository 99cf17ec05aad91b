/* End-to-end test of M-RoPE against a real posencd: GET /v1/rope/mrope/positions against the known
 * answers of tests/ref/gen_mrope.py (every format, the X-PE-Mrope-Delta header and the JSON
 * field; GLM-4.1V's videos with variant=glm4v among them), GET /v1/rope/mrope (ETag and 304 as every table), POST /v1/rope/mrope with those
 * positions as an npy body (the same table as the segments give), and the refusals: bad segments,
 * sections, bodies, media types, sizes, each a problem naming its parameter. */
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

#define DATA_DIR "tests/data/mrope"
#define TABLE_Q "dim=16&mrope_section=2,3,3&base=1000000&segments=text:5,image:1x8x8,text:3,video:3x8x8,text:4"
#define SEGMENTS "segments=text:5,image:1x8x8,text:3,video:3x8x8,text:4"

static void get(const struct pe_daemon *d, const char *path, const char *query, struct pe_resp *r)
{
	char url[8192];
	snprintf(url, sizeof url, "%s?%s", path, query);
	pe_get(d, url, r);
}

START_TEST(positions_match_known_answers)
{
	static const char *const tables[] = {"rope/mrope/positions", NULL};
	struct pe_kat_walk w;
	pe_kat_walk_start(&w, DATA_DIR);
	while (pe_kat_walk_next(&w, tables)) {
		json_t *c = w.c;
		const struct pe_shape s = w.s;
		size_t n = w.n;
		const char *query = pe_kat_str(c, "query");
		long delta = (long)json_integer_value(json_object_get(c, "mrope_position_delta"));
		int32_t *ref = pe_kat_file(&w.k, c, "ref_i32", n * 4);
		char q[4096], hdr[64], want[32];
		struct pe_resp r;
		struct pe_tensor_view v;
		snprintf(want, sizeof want, "%ld", delta);
		snprintf(q, sizeof q, "%s&format=npy", query);
		get(&w.d, "/v1/rope/mrope/positions", q, &r);
		ck_assert_msg(r.status == 200, "%s: %ld %s", query, r.status, r.body);
		ck_assert_int_eq(pe_npy_parse(r.body, r.len, 1 << 24, &v, NULL), 0);
		ck_assert_int_eq(v.dtype, PE_I32);
		ck_assert_int_eq(memcmp(&v.shape, &s, sizeof s), 0);
		ck_assert_mem_eq(v.data, ref, n * 4);
		ck_assert_str_eq(pe_resp_header(&r, "X-PE-Mrope-Delta", hdr, sizeof hdr), want);
		pe_resp_free(&r);
		snprintf(q, sizeof q, "%s&format=bin", query);
		get(&w.d, "/v1/rope/mrope/positions", q, &r);
		ck_assert_uint_eq(r.len, n * 4);
		ck_assert_mem_eq(r.body, ref, n * 4);
		pe_resp_free(&r);
		snprintf(q, sizeof q, "%s&format=json", query);
		get(&w.d, "/v1/rope/mrope/positions", q, &r);
		json_t *j = pe_resp_json(&r);
		ck_assert_int_eq(json_integer_value(json_object_get(j, "mrope_position_delta")), delta);
		json_t *row2 = json_array_get(json_object_get(j, "data"), 2);
		ck_assert_uint_eq(json_array_size(row2), s.dim[1]);
		for (size_t t = 0; t < s.dim[1]; t++)
			ck_assert_int_eq(json_integer_value(json_array_get(row2, t)), ref[2 * s.dim[1] + t]);
		json_decref(j);
		pe_resp_free(&r);
		snprintf(q, sizeof q, "%s&format=csv", query);
		get(&w.d, "/v1/rope/mrope/positions", q, &r);
		ck_assert_int_eq(r.status, 200);
		char first[32];
		int len = snprintf(first, sizeof first, "%d,%d,", ref[0], ref[1]);
		ck_assert_msg(!strncmp(r.body, first, (size_t)len), "%s: csv starts %.20s", query, r.body);
		pe_resp_free(&r);
		free(ref);
		w.checked++;
	}
	pe_kat_walk_end(&w, 5);
}
END_TEST

/* The POST form with the positions the GET form uses gives the same table, byte for byte. */
START_TEST(post_positions_match_get)
{
	struct pe_daemon d;
	struct pe_resp pos, a, b;
	struct pe_tensor_view va, vb;
	char hdr[64];
	pe_daemon_start(&d, NULL);
	get(&d, "/v1/rope/mrope/positions", SEGMENTS "&format=npy", &pos);
	ck_assert_int_eq(pos.status, 200);
	get(&d, "/v1/rope/mrope", TABLE_Q "&format=npy&scaling=yarn&factor=4&original_max_position_embeddings=64", &a);
	ck_assert_msg(a.status == 200, "%ld %s", a.status, a.body);
	const char *hs[] = {"Content-Type: application/x-npy", NULL};
	pe_request(&d, "POST",
		   "/v1/rope/mrope?dim=16&mrope_section=2,3,3&base=1000000&format=npy&scaling=yarn&factor=4&"
		   "original_max_position_embeddings=64",
		   hs, pos.body, pos.len, &b);
	ck_assert_msg(b.status == 200, "%ld %s", b.status, b.body);
	ck_assert_int_eq(pe_npy_parse(a.body, a.len, 1 << 24, &va, NULL), 0);
	ck_assert_int_eq(pe_npy_parse(b.body, b.len, 1 << 24, &vb, NULL), 0);
	ck_assert_int_eq(memcmp(&va.shape, &vb.shape, sizeof va.shape), 0);
	ck_assert_uint_eq(va.shape.dim[1], 76);
	ck_assert_mem_eq(va.data, vb.data, 2 * 76 * 16 * 4);
	ck_assert_str_eq(pe_resp_header(&b, "X-PE-Shape", hdr, sizeof hdr), pe_resp_header(&a, "X-PE-Shape", hdr + 32, 32));
	ck_assert_str_eq(pe_resp_header(&b, "Cache-Control", hdr, sizeof hdr), "no-store");
	ck_assert_ptr_nonnull(pe_resp_header(&b, "X-PE-Attention-Scaling", hdr, sizeof hdr));
	ck_assert_str_eq(hdr, pe_resp_header(&a, "X-PE-Attention-Scaling", hdr + 32, 32));
	pe_resp_free(&b);
	/* JSON answers carry the parameters and attention_scaling as the GET form's */
	pe_request(&d, "POST", "/v1/rope/mrope?dim=16&mrope_section=2,3,3&format=json", hs, pos.body, pos.len, &b);
	json_t *j = pe_resp_json(&b);
	ck_assert_double_eq(json_number_value(json_object_get(j, "attention_scaling")), 1.0);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "params"), "dim")), 16);
	json_decref(j);
	pe_resp_free(&b);
	pe_resp_free(&a);
	pe_resp_free(&pos);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(get_is_a_cached_table)
{
	struct pe_daemon d;
	struct pe_resp a, b;
	char etag[128], line[160];
	pe_daemon_start(&d, NULL);
	get(&d, "/v1/rope/mrope", TABLE_Q, &a);
	ck_assert_int_eq(a.status, 200);
	ck_assert_ptr_nonnull(pe_resp_header(&a, "ETag", etag, sizeof etag));
	snprintf(line, sizeof line, "If-None-Match: %s", etag);
	const char *hs[] = {line, NULL};
	pe_request(&d, "GET", "/v1/rope/mrope?" TABLE_Q, hs, NULL, 0, &b);
	ck_assert_int_eq(b.status, 304);
	pe_resp_free(&b);
	/* the same sequence written differently is the same representation */
	pe_request(&d, "GET", "/v1/rope/mrope?dim=16&mrope_section=2,3,3&base=1000000&segments=text:05,image:1x08x8,text:3,video:3x8x8,text:4",
		   hs, NULL, 0, &b);
	ck_assert_int_eq(b.status, 304);
	pe_resp_free(&b);
	pe_resp_free(&a);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(refusals_name_the_parameter)
{
	static const struct {
		const char *path, *query, *param;
		long status;
	} bad[] = {
		{"/v1/rope/mrope/positions", "segments=image:1x27x28", "segments", 400},
		{"/v1/rope/mrope/positions", "segments=text:5,picture:1x2x2", "segments", 400},
		{"/v1/rope/mrope/positions", "segments=text:16777217", "segments", 400},
		{"/v1/rope/mrope/positions", "tokens_per_second=3", "tokens_per_second", 400},
		{"/v1/rope/mrope/positions", "variant=qwen25vl&segments=video:1x2x2&second_per_grid_t=1,2", "second_per_grid_t", 400},
		{"/v1/rope/mrope/positions", "variant=qwen3vl&segments=video:2x2x2", "timestamp_tokens", 400},
		{"/v1/rope/mrope/positions", "variant=qwen3vl&segments=video:2x2x2&timestamp_tokens=1,2,3", "timestamp_tokens", 400},
		{"/v1/rope/mrope/positions", "variant=qwen3vl&segments=video:2x2x2&timestamp_tokens=1025", "timestamp_tokens", 400},
		{"/v1/rope/mrope/positions", "variant=qwen3vl&segments=video:20000x2x2&timestamp_tokens=1024", "timestamp_tokens", 400},
		{"/v1/rope/mrope/positions", "timestamp_tokens=6", "timestamp_tokens", 400},
		{"/v1/rope/mrope/positions", "variant=glm4v&segments=text:1,video:2x2x2,text:1", "timestamp_tokens", 400},
		{"/v1/rope/mrope/positions", "variant=glm4v&segments=video:2x2x2&timestamp_tokens=1,2,3", "timestamp_tokens", 400},
		{"/v1/rope/mrope/positions", "variant=glm4v&tokens_per_second=2", "tokens_per_second", 400},
		{"/v1/rope/mrope/positions", "variant=glm4v&time_step=int", "time_step", 400},
		{"/v1/rope/mrope", "dim=16&mrope_section=2,3,3&variant=glm4v&segments=video:2x2x2", "timestamp_tokens", 400},
		{"/v1/rope/mrope/positions", "variant=qwen25vl&time_step=round", "time_step", 400},
		{"/v1/rope/mrope/positions", "variant=qwen25vl&time_step=int&time_step=float", "time_step", 400},
		{"/v1/rope/mrope/positions", "time_step=float", "time_step", 400},
		{"/v1/rope/mrope/positions", "variant=qwen3vl&timestamp_tokens=1&time_step=int", "time_step", 400},
		{"/v1/rope/mrope", "dim=16&mrope_section=2,3,3&time_step=float", "time_step", 400},
		{"/v1/rope/mrope", "dim=16&mrope_section=2,3", "mrope_section", 400},
		{"/v1/rope/mrope", "dim=16&mrope_section=2,3,2", "mrope_section", 400},
		{"/v1/rope/mrope", "dim=16&mrope_section=2,3,3&compat=ggml", "compat", 400},
		{"/v1/rope/mrope", "dim=16&mrope_section=2,3,3&len=4", "len", 400},
		{"/v1/rope/mrope", "dim=16&mrope_section=2,3,3&segments=text:16777216", "segments", 413},
	};
	struct pe_daemon d;
	pe_daemon_start(&d, NULL);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct pe_resp r;
		get(&d, bad[i].path, bad[i].query, &r);
		pe_assert_problem(&r, bad[i].status, bad[i].param);
		pe_resp_free(&r);
	}
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* An npy header for shape (rows, cols) of descr, then data bytes; returns the length. */
static size_t npy(char *buf, const char *descr, size_t rows, size_t cols, const void *data, size_t bytes)
{
	char head[128];
	int n = snprintf(head, sizeof head, "{'descr': '%s', 'fortran_order': False, 'shape': (%zu, %zu), }", descr, rows, cols);
	size_t total = 10 + (size_t)n + 1, pad = (64 - total % 64) % 64;
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (char)((n + 1 + pad) & 0xff);
	buf[9] = (char)((n + 1 + pad) >> 8);
	memcpy(buf + 10, head, (size_t)n);
	memset(buf + 10 + n, ' ', pad);
	buf[10 + n + pad] = '\n';
	memcpy(buf + total + pad, data, bytes);
	return total + pad + bytes;
}

/* POST one body, 200 expected; the answer's bytes. */
/* POST body to path with headers hs: a problem of status naming param. */
static void post_refused(const struct pe_daemon *d, const char *path, const char *const *hs, const char *body,
			 size_t len, long status, const char *param)
{
	struct pe_resp r;
	pe_request(d, "POST", path, hs, body, len, &r);
	ck_assert_msg(r.status == status, "POST %s: %ld, want %ld: %s", path, r.status, status, r.body);
	pe_assert_problem(&r, status, param);
	pe_resp_free(&r);
}

static void post_ok(const struct pe_daemon *d, const char *query, const char *body, size_t len, struct pe_resp *r)
{
	const char *hs[] = {"Content-Type: application/x-npy", NULL};
	char url[512];
	snprintf(url, sizeof url, "/v1/rope/mrope?%s", query);
	pe_request(d, "POST", url, hs, body, len, r);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
}

/* get_rope_index returns int64 and NumPy's default int is int64: an '<i8' body answers exactly as
 * the same positions in '<i4' (large positions too), and int64 values past int32 are a 400. */
START_TEST(post_int64_positions_equal_int32)
{
	struct pe_daemon d;
	struct pe_resp pos, a, b;
	struct pe_tensor_view v;
	static char b4[4096], b8[4096];
	static int32_t p4[3 * 76], q4[3 * 76];
	static int64_t q8[3 * 76];
	pe_daemon_start(&d, NULL);
	get(&d, "/v1/rope/mrope/positions", SEGMENTS "&format=npy", &pos);
	ck_assert_int_eq(pos.status, 200);
	ck_assert_int_eq(pe_npy_parse(pos.body, pos.len, 1 << 24, &v, NULL), 0);
	ck_assert_uint_eq(v.shape.dim[1], 76);
	memcpy(p4, v.data, sizeof p4);
	static const char *const queries[] = {
		"dim=16&mrope_section=2,3,3&base=1000000&format=npy",
		"dim=16&mrope_section=2,3,3&format=npy&compat=hf&scaling=dynamic&factor=2&original_max_position_embeddings=16",
	};
	static const int32_t shift[] = {0, 2147483000};
	for (size_t s = 0; s < 2; s++) {
		for (size_t i = 0; i < 3 * 76; i++) {
			q4[i] = p4[i] + (i % 76 == 75 ? shift[s] : 0);
			q8[i] = q4[i];
		}
		size_t n4 = npy(b4, "<i4", 3, 76, q4, sizeof q4), n8 = npy(b8, "<i8", 3, 76, q8, sizeof q8);
		for (size_t q = 0; q < 2; q++) {
			post_ok(&d, queries[q], b4, n4, &a);
			post_ok(&d, queries[q], b8, n8, &b);
			ck_assert_uint_gt(a.len, 2 * 76 * 16 * 4);
			ck_assert_uint_eq(a.len, b.len);
			ck_assert_mem_eq(a.body, b.body, a.len);
			pe_resp_free(&a);
			pe_resp_free(&b);
		}
	}
	const char *npy_h[] = {"Content-Type: application/x-npy", NULL};
	static const int64_t bad[] = {2147483648LL, INT64_MAX, -1, INT64_MIN};
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
		int64_t row[6] = {0, 1, 0, 1, 0, 1};
		row[3] = bad[k];
		size_t n = npy(b8, "<i8", 3, 2, row, sizeof row);
		post_refused(&d, "/v1/rope/mrope?dim=16&mrope_section=2,3,3", npy_h, b8, n, 400, "body");
	}
	pe_resp_free(&pos);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

START_TEST(post_refusals)
{
	struct pe_daemon d;
	struct pe_resp r;
	char body[512];
	const int32_t ok[6] = {0, 1, 0, 1, 0, 1}, neg[6] = {0, 1, 0, -1, 0, 1};
	const float f[6] = {0};
	const char *npy_h[] = {"Content-Type: application/x-npy", NULL}, *text_h[] = {"Content-Type: text/plain", NULL};
	pe_daemon_start(&d, NULL);
	size_t n = npy(body, "<i4", 3, 2, ok, sizeof ok);
	pe_request(&d, "POST", "/v1/rope/mrope?dim=16&mrope_section=2,3,3", npy_h, body, n, &r);
	ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
	pe_resp_free(&r);
	post_refused(&d, "/v1/rope/mrope?dim=16&mrope_section=2,3,3&" SEGMENTS, npy_h, body, n, 400, "segments");
	post_refused(&d, "/v1/rope/mrope?dim=16&mrope_section=2,3,3", text_h, body, n, 415, "Content-Type");
	post_refused(&d, "/v1/rope/mrope?dim=16&mrope_section=2,3,4", npy_h, body, n, 400, "mrope_section");
	n = npy(body, "<i4", 3, 2, neg, sizeof neg);
	post_refused(&d, "/v1/rope/mrope?dim=16&mrope_section=2,3,3", npy_h, body, n, 400, "body");
	n = npy(body, "<f4", 3, 2, f, sizeof f);
	post_refused(&d, "/v1/rope/mrope?dim=16&mrope_section=2,3,3", npy_h, body, n, 400, "body");
	n = npy(body, "<i4", 2, 3, ok, sizeof ok);
	post_refused(&d, "/v1/rope/mrope?dim=16&mrope_section=2,3,3", npy_h, body, n, 400, "body");
	pe_request(&d, "PUT", "/v1/rope/mrope?dim=16&mrope_section=2,3,3", npy_h, body, n, &r);
	ck_assert_int_eq(r.status, 405);
	pe_resp_free(&r);
	pe_request(&d, "POST", "/v1/rope/mrope/positions", npy_h, body, n, &r);
	ck_assert_int_eq(r.status, 405);
	pe_resp_free(&r);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* A body over max_body_bytes is refused from its Content-Length, naming body. */
START_TEST(post_body_bounded)
{
	struct pe_daemon d;
	struct pe_resp r;
	const char *argv[] = {"--max-body-bytes", "1024", NULL};
	const char *hs[] = {"Content-Type: application/x-npy", NULL};
	size_t len = 4096;
	char *body = calloc(1, len);
	pe_daemon_start(&d, argv);
	pe_request(&d, "POST", "/v1/rope/mrope?dim=16&mrope_section=2,3,3", hs, body, len, &r);
	pe_assert_problem(&r, 413, "body");
	pe_resp_free(&r);
	free(body);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* GET a URL of any length (pe_get's URL buffer is 4 KB): the status and the body, bin, into out. */
static size_t sink_cb(char *data, size_t size, size_t nmemb, void *cls)
{
	struct pe_resp *r = cls;
	size_t n = size * nmemb;
	r->body = realloc(r->body, r->len + n + 1);
	memcpy(r->body + r->len, data, n);
	r->len += n;
	r->body[r->len] = 0;
	return n;
}

static void get_long(const struct pe_daemon *d, const char *path, struct pe_resp *r)
{
	size_t cap = strlen(path) + 64;
	char *url = malloc(cap);
	snprintf(url, cap, "http://127.0.0.1:%d%s", d->s.port, path);
	memset(r, 0, sizeof *r);
	r->headers = calloc(1, 1);
	CURL *c = curl_easy_init();
	ck_assert_ptr_nonnull(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	curl_easy_cleanup(c);
	free(url);
	if (!r->body)
		r->body = calloc(1, 1);
}

/* A long key is still a key: 4096 videos with their second_per_grid_t make a canonical key of
 * about 130 KB (over the fixed 110 KB the table handler once had: a 500 "cannot form the cache
 * key"); with request headers allowed that long, the positions are served, twice. */
START_TEST(long_key_is_served)
{
	struct pe_daemon d;
	struct pe_resp r;
	const char *argv[] = {"--max-header-bytes", "262144", NULL};
	const char video[] = "video:1x2x2", second[] = "0.12345678901234567";
	size_t n = 4096, cap = 256 + n * (sizeof video + sizeof second);
	char *path = malloc(cap);
	size_t len = (size_t)snprintf(path, cap, "/v1/rope/mrope/positions?variant=qwen25vl&format=bin&segments=");
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(path + len, cap - len, "%s%s", i ? "," : "", video);
	len += (size_t)snprintf(path + len, cap - len, "&second_per_grid_t=");
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(path + len, cap - len, "%s%s", i ? "," : "", second);
	ck_assert_uint_lt(len, cap);
	pe_daemon_start(&d, argv);
	for (int pass = 0; pass < 2; pass++) {
		get_long(&d, path, &r);
		ck_assert_msg(r.status == 200, "pass %d: %ld %.200s", pass, r.status, r.body);
		ck_assert_uint_eq(r.len, 3 * n * 4);
		const int32_t *pos = (const int32_t *)(const void *)r.body;
		for (size_t i = 0; i < n; i++) /* one token per video, each one further, on every row */
			ck_assert(pos[i] == (int32_t)i && pos[n + i] == (int32_t)i && pos[2 * n + i] == (int32_t)i);
		pe_resp_free(&r);
	}
	free(path);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* The plan fixture's Qwen2.5-VL video example (tests/ref/gen_plan_families.py, PyTorch): for each
 * second_per_grid_t, its rows `hf` are what the default and time_step=int serve, `float` what
 * time_step=float serves, bit for bit. */
START_TEST(video_example_both_time_steps)
{
	struct pe_daemon d;
	json_error_t jerr;
	json_t *fix = json_load_file("tests/data/plan_families/qwen2.5-vl-7b.json", 0, &jerr), *ex = NULL, *e;
	size_t i, checked = 0;
	ck_assert_msg(fix != NULL, "%s", jerr.text);
	json_array_foreach(json_object_get(fix, "encodings"), i, e)
		ex = ex ? ex : json_object_get(e, "video_example");
	ck_assert_ptr_nonnull(ex);
	static const struct {
		const char *mode, *query;
	} modes[] = {{"hf", ""}, {"hf", "&time_step=int"}, {"float", "&time_step=float"}};
	const char *spg;
	json_t *answers;
	pe_daemon_start(&d, NULL);
	json_object_foreach(json_object_get(ex, "second_per_grid_t"), spg, answers) {
		for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
			json_t *rows = json_object_get(answers, modes[m].mode);
			size_t n = json_array_size(json_array_get(rows, 0));
			char q[512];
			struct pe_resp r;
			snprintf(q, sizeof q, "variant=qwen25vl&segments=%s&spatial_merge_size=%lld&tokens_per_second=%lld&second_per_grid_t=%s%s&format=bin",
				 json_string_value(json_object_get(ex, "segments")),
				 (long long)json_integer_value(json_object_get(ex, "spatial_merge_size")),
				 (long long)json_integer_value(json_object_get(ex, "tokens_per_second")), spg, modes[m].query);
			get(&d, "/v1/rope/mrope/positions", q, &r);
			ck_assert_msg(r.status == 200, "%s: %ld %s", q, r.status, r.body);
			ck_assert_uint_eq(json_array_size(rows), 3);
			ck_assert_msg(n > 0 && r.len == 3 * n * 4, "%s: %zu bytes for %zu tokens", q, r.len, n);
			const int32_t *pos = (const int32_t *)(const void *)r.body;
			for (size_t row = 0; row < 3; row++)
				for (size_t t = 0; t < n; t++)
					ck_assert_msg(pos[row * n + t] == json_integer_value(json_array_get(json_array_get(rows, row), t)),
						      "%s: row %zu token %zu: %d", q, row, t, pos[row * n + t]);
			pe_resp_free(&r);
			checked++;
		}
	}
	ck_assert_uint_eq(checked, 4 * 3);
	json_decref(fix);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

/* The two time steps are cached apart: the same request but time_step answers with its own rows
 * and its own ETag, in either order after the other is cached. */
START_TEST(time_steps_cached_apart)
{
	struct pe_daemon d;
	const char *q[] = {"variant=qwen25vl&segments=video:3x2x2&second_per_grid_t=0.5&format=json",
			   "variant=qwen25vl&segments=video:3x2x2&second_per_grid_t=0.5&time_step=float&format=json"};
	const char *want[] = {"[0,0,0]", "[0,1,2]"}; /* frame times: 0.5 truncated to 0; 0.5 * 2 = 1 per frame */
	char etag[2][128];
	pe_daemon_start(&d, NULL);
	for (int pass = 0; pass < 2; pass++)
		for (int k = 0; k < 2; k++) {
			struct pe_resp r;
			get(&d, "/v1/rope/mrope/positions", q[k], &r);
			ck_assert_int_eq(r.status, 200);
			json_t *j = pe_resp_json(&r);
			char *row = json_dumps(json_array_get(json_object_get(j, "data"), 0), JSON_COMPACT);
			ck_assert_str_eq(row, want[k]);
			char tag[128];
			ck_assert_ptr_nonnull(pe_resp_header(&r, "ETag", tag, sizeof tag));
			if (pass == 0)
				strcpy(etag[k], tag);
			ck_assert_str_eq(tag, etag[k]);
			free(row);
			json_decref(j);
			pe_resp_free(&r);
		}
	ck_assert_str_ne(etag[0], etag[1]);
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("e2e_mrope");
	TCase *tc = tcase_create("mrope");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, positions_match_known_answers);
	tcase_add_test(tc, post_positions_match_get);
	tcase_add_test(tc, get_is_a_cached_table);
	tcase_add_test(tc, refusals_name_the_parameter);
	tcase_add_test(tc, post_int64_positions_equal_int32);
	tcase_add_test(tc, post_refusals);
	tcase_add_test(tc, post_body_bounded);
	tcase_add_test(tc, long_key_is_served);
	tcase_add_test(tc, video_example_both_time_steps);
	tcase_add_test(tc, time_steps_cached_apart);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
