/* End-to-end: POST /v1/rope/apply as multipart/form-data, a part x and a part positions.
 *
 * - Per-token positions give the same bytes as the query's positions= for the same positions
 *   (same cos/sin rows, same kernels), for every arithmetic and the scalings that read the
 *   sequence's end, dense and scattered positions, int32 and int64, [seq], [batch, seq] (each row
 *   as its own request), [1, seq], and vLLM's flattened [num_tokens, heads, head_dim].
 * - M-RoPE whose three position rows are equal is plain RoPE over those positions, bit for bit.
 * - No 4096 cap: 5000 positions 0..4999 give what offset=0 gives.
 * - x as JSON (typed or sniffed) or raw bytes with shape=; libcurl's own multipart (curl -F).
 * - Bad parts and positions are 400 problems naming the part or parameter; multipart elsewhere 415. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc/posenc.h"
#include "test_apply_positions_form.h"

#define D 64

/* Each test's daemon (started in the test's own process by the checked fixture). */
static struct pe_daemon SRV;

static void start(void) { pe_daemon_start(&SRV, NULL); }
static void stop(void) { ck_assert_int_eq(pe_daemon_stop(&SRV, SIGTERM), 0); }

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* An f32 npy of this shape with values in [-2, 2); caller frees. */
static char *npy_x(const size_t *shape, int rank, size_t *len)
{
	struct pe_tensor_view v = {.dtype = PE_F32};
	v.shape.rank = rank;
	size_t n = 1;
	for (int i = 0; i < rank; i++)
		n *= v.shape.dim[i] = shape[i];
	float *x = malloc(n * sizeof *x);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)((double)(next_u64() >> 11) * 0x1p-53 * 4 - 2);
	v.data = x;
	struct pe_buf b;
	pe_buf_init(&b, (size_t)1 << 30);
	ck_assert_int_eq(pe_npy_write(&b, &v, NULL), 0);
	free(x);
	return pe_buf_steal(&b, len);
}

static void post_plain(const struct pe_daemon *d, const char *query, const char *x, size_t xlen, struct pe_resp *r)
{
	char url[65536];
	snprintf(url, sizeof url, "/v1/rope/apply?%s", query);
	const char *hs[] = {"Content-Type: application/x-npy", NULL};
	pe_request(d, "POST", url, hs, x, xlen, r);
}

static void post_form(const struct pe_daemon *d, const char *query, const struct form_part *parts, size_t n,
		      struct pe_resp *r)
{
	char url[4096];
	size_t len;
	char *body = form_body(parts, n, &len);
	snprintf(url, sizeof url, "/v1/rope/apply?%s", query);
	pe_request(d, "POST", url, form_headers, body, len, r);
	free(body);
}

/* x and positions (npy of shape pshape) as a form; the answer must be 200. */
static void post_xpos(const struct pe_daemon *d, const char *query, const char *x, size_t xlen, const int64_t *pos,
		      const size_t *pshape, int prank, int wide, struct pe_resp *r)
{
	size_t plen;
	char *p = npy_ints(pos, pshape, prank, wide, &plen);
	struct form_part parts[] = {{"x", "application/octet-stream", x, xlen}, {"positions", "application/octet-stream", p, plen}};
	post_form(d, query, parts, 2, r);
	free(p);
	ck_assert_msg(r->status == 200, "%s: %ld %s", query, r->status, r->body);
}

static void list_of(const int64_t *pos, size_t n, char *out, size_t cap)
{
	size_t at = (size_t)snprintf(out, cap, "positions=");
	for (size_t i = 0; i < n; i++)
		at += (size_t)snprintf(out + at, cap - at, "%s%lld", i ? "," : "", (long long)pos[i]);
}

static void same_bytes(const struct pe_resp *a, const struct pe_resp *b, const char *what)
{
	ck_assert_msg(a->len == b->len && memcmp(a->body, b->body, a->len) == 0, "%s: the answers differ (%zu vs %zu bytes)",
		      what, a->len, b->len);
}

/* a and b are want's bytes; all three are freed. */
static void same_three(struct pe_resp *want, struct pe_resp *a, struct pe_resp *b, const char *what)
{
	same_bytes(want, a, what);
	same_bytes(want, b, what);
	pe_resp_free(want);
	pe_resp_free(a);
	pe_resp_free(b);
}

static const char *const queries[] = {
	"format=bin",
	"format=bin&compat=hf",
	"format=bin&compat=ggml",
	"format=bin&scaling=yarn&factor=4&original_max_position_embeddings=64&compat=hf",
	"format=bin&scaling=dynamic&factor=2&original_max_position_embeddings=16",
	"format=bin&scaling=llama3&factor=8&original_max_position_embeddings=32&base=500000",
	"format=bin&layout=interleaved&rotary_dim=32&inverse=1",
};

/* [seq] and [2, seq] with two equal rows, int32 and int64, against positions=. */
START_TEST(same_as_query_positions)
{
	enum { L = 12 };
	const int64_t sets[][L] = {
		{3, 0, 7, 1, 2, 11, 5, 4, 10, 8, 9, 6},                               /* one table */
		{5, 40000, 7, 123456, 0, 99, 4096, 4097, 17, 1 << 20, 3000000, 42}, /* a row each */
	};
	size_t xs[] = {2, 3, L, D}, xlen;
	char *x = npy_x(xs, 4, &xlen);
	for (size_t q = 0; q < sizeof queries / sizeof *queries; q++)
		for (size_t s = 0; s < 2; s++) {
			char query[1024];
			int64_t two[2 * L];
			memcpy(two, sets[s], sizeof sets[s]);
			memcpy(two + L, sets[s], sizeof sets[s]);
			list_of(sets[s], L, query, sizeof query);
			snprintf(query + strlen(query), sizeof query - strlen(query), "&%s", queries[q]);
			struct pe_resp want, a, b;
			post_plain(&SRV, query, x, xlen, &want);
			ck_assert_msg(want.status == 200, "%s: %ld %s", query, want.status, want.body);
			size_t one_shape[] = {L}, two_shape[] = {2, L};
			post_xpos(&SRV, queries[q], x, xlen, sets[s], one_shape, 1, (int)s, &a);
			post_xpos(&SRV, queries[q], x, xlen, two, two_shape, 2, (int)!s, &b);
			same_three(&want, &a, &b, query);
		}
	free(x);
}
END_TEST

/* [batch, seq] with different rows: entry b of the answer is x[b] rotated by row b alone. */
START_TEST(batch_rows)
{
	enum { B = 3, H = 2, L = 9 };
	int64_t pos[B * L];
	for (size_t i = 0; i < B * L; i++)
		pos[i] = (int64_t)(next_u64() % 100000);
	size_t xs[] = {B, H, L, D}, xlen, pshape[] = {B, L};
	char *x = npy_x(xs, 4, &xlen);
	struct pe_tensor_view xv;
	ck_assert_int_eq(pe_npy_parse(x, xlen, 1 << 20, &xv, NULL), 0);
	for (size_t q = 0; q < 3; q++) {
		struct pe_resp all;
		post_xpos(&SRV, queries[q], x, xlen, pos, pshape, 2, 1, &all);
		ck_assert_uint_eq(all.len, (size_t)B * H * L * D * 4);
		for (size_t b = 0; b < B; b++) {
			struct pe_tensor_view one = xv;
			one.shape.dim[0] = 1;
			one.data = (const float *)xv.data + b * H * L * D;
			struct pe_buf nb;
			pe_buf_init(&nb, 1 << 20);
			ck_assert_int_eq(pe_npy_write(&nb, &one, NULL), 0);
			char query[1024];
			list_of(pos + b * L, L, query, sizeof query);
			snprintf(query + strlen(query), sizeof query - strlen(query), "&%s", queries[q]);
			struct pe_resp r;
			post_plain(&SRV, query, nb.data, nb.len, &r);
			ck_assert_msg(r.status == 200, "%s: %ld", query, r.status);
			ck_assert_msg(r.len == (size_t)H * L * D * 4 && !memcmp(r.body, all.body + b * r.len, r.len),
				      "batch entry %zu differs from its own request (%s)", b, query);
			pe_resp_free(&r);
			pe_buf_destroy(&nb);
		}
		pe_resp_free(&all);
	}
	free(x);
}
END_TEST

/* vLLM: x [num_tokens, heads, head_dim], positions [num_tokens], seq_axis=-3. */
START_TEST(vllm_flattened)
{
	enum { T = 10 };
	int64_t pos[T] = {0, 1, 2, 3, 4, 0, 1, 2, 900, 901}; /* three sequences packed together */
	size_t xs[] = {T, 4, D}, xlen, ps[] = {T};
	char *x = npy_x(xs, 3, &xlen);
	char query[512];
	list_of(pos, T, query, sizeof query);
	strcat(query, "&seq_axis=-3&format=bin&compat=hf");
	struct pe_resp want, got;
	post_plain(&SRV, query, x, xlen, &want);
	ck_assert_msg(want.status == 200, "%ld %s", want.status, want.body);
	post_xpos(&SRV, "seq_axis=-3&format=bin&compat=hf", x, xlen, pos, ps, 1, 1, &got);
	same_bytes(&want, &got, "vLLM's flattened layout");
	pe_resp_free(&want);
	pe_resp_free(&got);
	free(x);
}
END_TEST

/* M-RoPE with t = h = w is RoPE: the same rows, gathered channel by channel. */
START_TEST(mrope_equal_rows_is_rope)
{
	enum { L = 7 };
	int64_t pos[L] = {0, 5, 3, 3000, 9, 1, 2}, pos3[3 * L], pos32[3 * 2 * L];
	for (size_t r = 0; r < 3; r++) {
		memcpy(pos3 + r * L, pos, sizeof pos);
		memcpy(pos32 + r * 2 * L, pos, sizeof pos);
		memcpy(pos32 + r * 2 * L + L, pos, sizeof pos);
	}
	size_t xs[] = {2, 2, L, D}, xlen, p3[] = {3, L}, p32[] = {3, 2, L}, p1[] = {L};
	char *x = npy_x(xs, 4, &xlen);
	static const char *const mq[] = {"mrope_section=8,12,12", "mrope_section=16,8,8&interleaved=1",
					 "mrope_section=10,10,12&layout=interleaved&compat=hf"};
	for (size_t q = 0; q < 3; q++) {
		char query[256], rq[256];
		snprintf(query, sizeof query, "%s&format=bin", mq[q]);
		snprintf(rq, sizeof rq, "format=bin%s", strstr(mq[q], "&layout") ? strstr(mq[q], "&layout") : "");
		struct pe_resp want, a, b;
		post_xpos(&SRV, rq, x, xlen, pos, p1, 1, 1, &want);
		post_xpos(&SRV, query, x, xlen, pos3, p3, 2, 0, &a);
		post_xpos(&SRV, query, x, xlen, pos32, p32, 3, 1, &b);
		same_three(&want, &a, &b, query);
	}
	free(x);
}
END_TEST

/* positions= stops at 4096 values; a positions part does not. */
START_TEST(no_4096_cap)
{
	enum { L = 5000 };
	int64_t *pos = malloc(L * sizeof *pos);
	for (size_t i = 0; i < L; i++)
		pos[i] = (int64_t)i;
	size_t xs[] = {1, 1, L, 8}, xlen, ps[] = {L};
	char *x = npy_x(xs, 4, &xlen);
	char *query = malloc(65536);
	list_of(pos, L, query, 65536);
	struct pe_resp capped, want, got;
	post_plain(&SRV, query, x, xlen, &capped);
	pe_assert_problem(&capped, 400, "positions");
	post_plain(&SRV, "format=bin", x, xlen, &want);
	post_xpos(&SRV, "format=bin", x, xlen, pos, ps, 1, 0, &got);
	same_bytes(&want, &got, "5000 positions 0..4999 and offset=0");
	pe_resp_free(&capped);
	pe_resp_free(&want);
	pe_resp_free(&got);
	free(query);
	free(pos);
	free(x);
}
END_TEST

/* The x part as JSON (typed, or recognised) or raw bytes with shape=: the npy part's numbers. */
START_TEST(x_formats)
{
	static const char json[] = "[[[0.5, -1, 2, 0.25], [1, 1, -3, 0.125]]]";
	const float raw[] = {0.5f, -1, 2, 0.25f, 1, 1, -3, 0.125f};
	int64_t pos[] = {7, 70000};
	size_t ps[] = {2}, plen;
	char *p = npy_ints(pos, ps, 1, 1, &plen);
	struct pe_resp a, b, c;
	struct form_part typed[] = {{"x", "application/json", json, sizeof json - 1}, {"positions", NULL, p, plen}};
	struct form_part plain[] = {{"x", NULL, json, sizeof json - 1}, {"positions", NULL, p, plen}};
	struct form_part bytes[] = {{"x", "application/octet-stream", raw, sizeof raw}, {"positions", NULL, p, plen}};
	post_form(&SRV, "format=bin", typed, 2, &a);
	post_form(&SRV, "format=bin", plain, 2, &b);
	post_form(&SRV, "shape=1,2,4&dtype=f32", bytes, 2, &c);
	ck_assert_msg(a.status == 200 && b.status == 200 && c.status == 200, "%ld %ld %ld %s", a.status, b.status, c.status,
		      c.body);
	same_bytes(&a, &b, "a JSON part with and without its Content-Type");
	same_bytes(&a, &c, "JSON and raw parts of the same numbers");
	pe_resp_free(&a);
	pe_resp_free(&b);
	pe_resp_free(&c);
	post_form(&SRV, "", typed, 2, &a); /* the answer's format follows the x part */
	char ct[128];
	ck_assert_str_eq(pe_resp_header(&a, "Content-Type", ct, sizeof ct), "application/json");
	pe_resp_free(&a);
	free(p);
}
END_TEST

static size_t sink(char *p, size_t size, size_t n, void *cls)
{
	struct pe_buf *b = cls;
	return pe_buf_append(b, p, size * n) == 0 ? size * n : 0;
}

/* libcurl's own multipart encoder, as curl -F x=@q.npy -F positions=@pos.npy sends it. */
START_TEST(curl_form)
{
	int64_t pos[] = {4, 8, 15, 16, 23};
	size_t xs[] = {1, 2, 5, D}, xlen, ps[] = {5}, plen;
	char *x = npy_x(xs, 4, &xlen), *p = npy_ints(pos, ps, 1, 1, &plen), url[256];
	CURL *c = curl_easy_init();
	curl_mime *mime = curl_mime_init(c);
	curl_mimepart *part = curl_mime_addpart(mime);
	curl_mime_name(part, "x");
	curl_mime_filename(part, "q.npy");
	curl_mime_data(part, x, xlen);
	part = curl_mime_addpart(mime);
	curl_mime_name(part, "positions");
	curl_mime_filename(part, "pos.npy");
	curl_mime_data(part, p, plen);
	snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/rope/apply?format=bin", SRV.s.port);
	struct pe_buf got;
	pe_buf_init(&got, 1 << 20);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
	ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	ck_assert_int_eq(status, 200);
	struct pe_resp want;
	post_xpos(&SRV, "format=bin", x, xlen, pos, ps, 1, 0, &want);
	ck_assert_msg(got.len == want.len && !memcmp(got.data, want.body, got.len), "curl's form gives other bytes");
	pe_resp_free(&want);
	pe_buf_destroy(&got);
	curl_mime_free(mime);
	curl_easy_cleanup(c);
	free(x);
	free(p);
}
END_TEST

static void expect_form(const struct pe_daemon *d, const char *query, const struct form_part *parts, size_t n,
			long status, const char *param)
{
	struct pe_resp r;
	post_form(d, query, parts, n, &r);
	pe_assert_problem(&r, status, param);
	pe_resp_free(&r);
}

START_TEST(refusals)
{
	size_t xs[] = {1, 2, 4, 16}, xlen, plen, p3len, neglen, flen;
	char *x = npy_x(xs, 4, &xlen);
	int64_t pos[] = {0, 1, 2, 3}, pos3[12] = {0}, neg[] = {0, -1, 2, 3};
	size_t ps[] = {4}, p3s[] = {3, 4}, p5[] = {5};
	char *p = npy_ints(pos, ps, 1, 1, &plen), *p3 = npy_ints(pos3, p3s, 2, 0, &p3len);
	char *pn = npy_ints(neg, ps, 1, 1, &neglen), *p5n = npy_ints(pos3, p5, 1, 0, &flen);
	const struct form_part ok[] = {{"x", NULL, x, xlen}, {"positions", NULL, p, plen}};
	const struct form_part extra[] = {{"x", NULL, x, xlen}, {"positions", NULL, p, plen}, {"scale", NULL, "2", 1}};
	const struct form_part twice[] = {{"x", NULL, x, xlen}, {"x", NULL, x, xlen}};
	const struct form_part twice_pos[] = {{"positions", NULL, p, plen}, {"x", NULL, x, xlen}, {"positions", NULL, p, plen}};
	const struct form_part no_x[] = {{"positions", NULL, p, plen}};
	const struct form_part float_pos[] = {{"x", NULL, x, xlen}, {"positions", NULL, x, xlen}};
	const struct form_part json_pos[] = {{"x", NULL, x, xlen}, {"positions", NULL, "[0,1,2,3]", 9}};
	const struct form_part neg_pos[] = {{"x", NULL, x, xlen}, {"positions", NULL, pn, neglen}};
	const struct form_part short_pos[] = {{"x", NULL, x, xlen}, {"positions", NULL, p5n, flen}};
	const struct form_part three[] = {{"x", NULL, x, xlen}, {"positions", NULL, p3, p3len}};
	const struct form_part text_x[] = {{"x", NULL, "hello", 5}, {"positions", NULL, p, plen}};
	/* each refused with 400 naming param */
	const struct {
		const char *query;
		const struct form_part *parts;
		size_t n;
		const char *param;
	} refused[] = {
		{"", extra, 3, "scale"},
		{"", twice, 2, "x"},
		{"", twice_pos, 3, "positions"},
		{"", no_x, 1, "x"},
		{"", float_pos, 2, "positions"},
		{"", json_pos, 2, "positions"},
		{"", neg_pos, 2, "positions"},
		{"", short_pos, 2, "positions"},
		{"", three, 2, "positions"},                          /* [3, 4]: batch 3 vs x's 1 */
		{"seq_axis=-3", ok, 2, "positions"},                  /* 4 positions, an axis of 2 */
		{"mrope_section=4,2,2", ok, 2, "positions"},          /* M-RoPE needs [3, ...] */
		{"mrope_section=4,2,1", three, 2, "mrope_section"},   /* sums to 7, not 8 */
		{"mrope_section=2,3,3&interleaved=1", three, 2, "mrope_section"},
		{"interleaved=1", ok, 2, "interleaved"},
		{"offset=5", ok, 2, "offset"},
		{"positions=0,1,2,3", ok, 2, "positions"},
		{"", text_x, 2, "x"},
	};
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
		expect_form(&SRV, refused[i].query, refused[i].parts, refused[i].n, 400, refused[i].param);
	int64_t far[] = {0, 1, 2, (int64_t)1 << 31}; /* llama.cpp's positions are int32 */
	size_t farlen;
	char *pfar = npy_ints(far, ps, 1, 1, &farlen);
	const struct form_part far_pos[] = {{"x", NULL, x, xlen}, {"positions", NULL, pfar, farlen}};
	expect_form(&SRV, "compat=ggml", far_pos, 2, 400, "positions");             /* not offset: none was given */
	free(pfar);
	static const char broken[] = "\x93NUMPY\x01\x00\x02\x00{}"; /* a header dict without its keys */
	const struct form_part bad_npy[] = {{"x", "application/x-npy", broken, sizeof broken - 1}};
	expect_form(&SRV, "", bad_npy, 1, 400, "x");                                /* a broken npy in x */
	const struct form_part empty_x[] = {{"x", "application/x-npy", "", 0}, {"positions", NULL, p, plen}};
	expect_form(&SRV, "", empty_x, 2, 400, "x");
	struct pe_resp r;
	const char *hs[] = {"Content-Type: application/x-npy", NULL};
	pe_request(&SRV, "POST", "/v1/rope/apply?mrope_section=4,2,2", hs, x, xlen, &r);
	pe_assert_problem(&r, 400, "positions"); /* M-RoPE without a positions part */
	pe_resp_free(&r);
	size_t blen;
	char *body = form_body(ok, 2, &blen);
	char long_boundary[6000] = "multipart/form-data; boundary=";
	memset(long_boundary + strlen(long_boundary), 'b', 5000); /* past MHD_PostProcessor's buffer */
	/* the form's body under other Content-Types: each refused naming Content-Type, but one */
	const struct {
		const char *path, *type;
		long status;
	} types[] = {
		{"/v1/alibi/apply", "multipart/form-data; boundary=" FORM_BOUNDARY, 415},
		{"/v1/rope/apply", "multipart/form-data", 400},
		{"/v1/rope/apply", long_boundary, 400},
		/* a parameter after boundary=, or boundary= inside another parameter: libmicrohttpd would
		 * take the wrong boundary and read the whole body as a preamble */
		{"/v1/rope/apply", "multipart/form-data; boundary=" FORM_BOUNDARY "; charset=utf-8", 400},
		{"/v1/rope/apply", "multipart/form-data; a=\"boundary=x\"; boundary=" FORM_BOUNDARY, 400},
		{"/v1/rope/apply", "multipart/form-data; charset=utf-8; boundary=\"" FORM_BOUNDARY "\"", 200},
	};
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		char h[6100];
		snprintf(h, sizeof h, "Content-Type: %s", types[i].type);
		const char *hs_i[] = {h, NULL};
		pe_request(&SRV, "POST", types[i].path, hs_i, body, blen, &r);
		if (types[i].status == 200) /* boundary= last and quoted */
			ck_assert_msg(r.status == 200, "boundary= last and quoted: %ld %s", r.status, r.body);
		else
			pe_assert_problem(&r, types[i].status, "Content-Type");
		pe_resp_free(&r);
	}
	const char *urlenc[] = {"Content-Type: application/x-www-form-urlencoded", NULL};
	pe_request(&SRV, "POST", "/v1/rope/apply", urlenc, "x=1", 3, &r);
	pe_assert_problem(&r, 415, "Content-Type");
	pe_resp_free(&r);
	/* the body cut before its closing boundary; base64-encoded parts */
	pe_request(&SRV, "POST", "/v1/rope/apply", form_headers, body, blen - strlen(FORM_BOUNDARY) - 6, &r);
	pe_assert_problem(&r, 400, "body");
	pe_resp_free(&r);
	static const char enc[] = "--" FORM_BOUNDARY "\r\nContent-Disposition: form-data; name=\"x\"\r\n"
				  "Content-Transfer-Encoding: base64\r\n\r\nk05VTVBZ\r\n--" FORM_BOUNDARY "--\r\n";
	pe_request(&SRV, "POST", "/v1/rope/apply", form_headers, enc, sizeof enc - 1, &r);
	pe_assert_problem(&r, 400, "x");
	pe_resp_free(&r);
	/* an empty batch with [0, seq] positions: an empty answer */
	size_t es[] = {0, 2, 4, 16}, elen, eps[] = {0, 4}, eplen;
	char *ex = npy_x(es, 4, &elen), *ep = npy_ints(pos, eps, 2, 1, &eplen);
	const struct form_part empty_batch[] = {{"x", NULL, ex, elen}, {"positions", NULL, ep, eplen}};
	post_form(&SRV, "format=bin", empty_batch, 2, &r);
	ck_assert_msg(r.status == 200 && r.len == 0, "an empty batch: %ld %s", r.status, r.body);
	pe_resp_free(&r);
	free(ex);
	free(ep);
	/* and a good one still works on the same daemon */
	post_form(&SRV, "", ok, 2, &r);
	ck_assert_int_eq(r.status, 200);
	pe_resp_free(&r);
	free(body);
	free(x);
	free(p);
	free(p3);
	free(pn);
	free(p5n);
}
END_TEST

static Suite *apply_positions_suite(void)
{
	Suite *s = suite_create("e2e_apply_positions");
	TCase *tc = tcase_create("positions");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, start, stop);
	tcase_add_test(tc, same_as_query_positions);
	tcase_add_test(tc, batch_rows);
	tcase_add_test(tc, vllm_flattened);
	tcase_add_test(tc, mrope_equal_rows_is_rope);
	tcase_add_test(tc, no_4096_cap);
	tcase_add_test(tc, x_formats);
	tcase_add_test(tc, curl_form);
	tcase_add_test(tc, refusals);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(apply_positions_suite)
