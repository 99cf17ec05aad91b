/* Every family's plan against its known answer, over HTTP (tests/plan/test_plan_families.c checks
 * the same answers in-process): for each tests/data/plan_families/<model>.json
 * (tests/ref/gen_plan_families.py, the model's transformers formulas in float32 torch), the
 * config is POSTed to /v1/plan, each known encoding is matched to the plan's by tower, kind and
 * layers, and the url the plan names is fetched with compat=hf as float32 (int32 for buckets):
 * - rope / mrope: inv_freq (/v1/rope/inv_freq of the same parameters) and cos/sin of each listed
 *   position, attention_scaling folded in, honouring layout half / interleaved: within 1 ulp
 *   (compat=hf takes PyTorch's own float32 cos/sin where a scale multiplies them);
 *   one plan per table, made for the table's seq_len (LongRoPE and dynamic NTK switch on it);
 * - rope2d (vision): cos/sin of the listed patches or tokens, within 1 ulp;
 * - sinusoidal (Whisper's encoder) and query-scale tables: within 1 ulp;
 * - t5 / deberta buckets and DeBERTa's [q_len, k_len] table: equal;
 * - learned: positions, offset, grid and class tokens, a table per axis's axes equal; none: the
 *   layers alone;
 * - attention_scaling and softmax_scale: equal as doubles. Both sides print them as shortest
 *   round-trip decimals, so equal means the same double the attention module computes.
 * A family whose plan does not match is a failure, unless it is in known_mismatch[] below; an entry
 * there that matches fails too, so the table only shrinks. */
#include "support/pe_check.h"
#include "support/pe_daemon.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KNOWN "tests/data/plan_families"
#define CONFIGS "tests/data/configs"

/* Families whose plan differs from their known answer, with the difference and the side that is
 * wrong. Each must still differ: remove the row when it is fixed. */
static const struct {
	const char *model;
	const char *why;
} known_mismatch[] = {
	{NULL, NULL},
};

static const char *const json_ct[] = {"Content-Type: application/json", NULL};

/* How many known encodings of each kind were compared with what the daemon served (or, for learned
 * and none, with the plan's fields), whatever the outcome: a kind no family reaches is a failure. */
static const char *const kinds[] = {"rope", "mrope", "rope2d", "sinusoidal", "query_scale", "t5", "deberta", "learned", "none"};
static size_t compared[sizeof kinds / sizeof kinds[0]];

static void count(const char *kind)
{
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		if (!strcmp(kinds[i], kind))
			compared[i]++;
}

/* One family's findings: each difference counted and the first few kept for the message. */
struct fam {
	const struct pe_daemon *d;
	const char *model;
	int bad;
	size_t at;
	char log[3000];
};

static void miss(struct fam *f, const char *fmt, ...)
{
	va_list ap;
	f->bad++;
	if (f->at + 8 >= sizeof f->log)
		return;
	f->at += (size_t)snprintf(f->log + f->at, sizeof f->log - f->at, "\n  ");
	va_start(ap, fmt);
	int n = vsnprintf(f->log + f->at, sizeof f->log - f->at, fmt, ap);
	va_end(ap);
	f->at = n < 0 ? f->at : f->at + (size_t)n >= sizeof f->log ? sizeof f->log - 1 : f->at + (size_t)n;
}

/* ---- numbers ---- */

static float hexf(json_t *s)
{
	const char *t = json_string_value(s);
	uint32_t u = t ? (uint32_t)strtoul(t, NULL, 16) : 0x7fc00000u;
	float v;
	memcpy(&v, &u, 4);
	return v;
}

/* Distance in float32 steps (0 for +0 and -0; huge for NaN). */
static uint32_t ulps(float a, float b)
{
	int32_t x, y;
	if (isnan(a) || isnan(b))
		return UINT32_MAX;
	memcpy(&x, &a, 4);
	memcpy(&y, &b, 4);
	x = x < 0 ? INT32_MIN - x : x;
	y = y < 0 ? INT32_MIN - y : y;
	int64_t dd = (int64_t)x - y;
	return (uint32_t)(dd < 0 ? -dd : dd);
}

static float f32_at(const struct pe_resp *r, size_t i)
{
	float v = NAN;
	if ((i + 1) * 4 <= r->len)
		memcpy(&v, r->body + 4 * i, 4);
	return v;
}

static int32_t i32_at(const struct pe_resp *r, size_t i)
{
	int32_t v = INT32_MIN;
	if ((i + 1) * 4 <= r->len)
		memcpy(&v, r->body + 4 * i, 4);
	return v;
}

/* A known double against the plan's: both must be numbers and the same double. */
static void same_double(struct fam *f, const char *what, json_t *known, json_t *plan)
{
	if (!json_is_number(known)) /* null: layers without a softmax (mamba, linear attention) */
		return;
	if (!json_is_number(plan) || json_number_value(plan) != json_number_value(known))
		miss(f, "%s: plan %.17g, known %.17g", what, json_is_number(plan) ? json_number_value(plan) : NAN,
		     json_number_value(known));
}

static void same_int(struct fam *f, const char *what, long long known, json_t *plan)
{
	if (!json_is_integer(plan) || json_integer_value(plan) != known)
		miss(f, "%s: plan %lld, known %lld", what, json_is_integer(plan) ? (long long)json_integer_value(plan) : -1LL,
		     known);
}

/* ---- urls ---- */

/* The value of key in url's query, or NULL. */
static const char *param(const char *url, const char *key, char *buf, size_t cap)
{
	size_t k = strlen(key);
	const char *p = strchr(url, '?');
	while (p) {
		p++;
		if (!strncmp(p, key, k) && p[k] == '=') {
			size_t n = strcspn(p + k + 1, "&");
			n = n < cap - 1 ? n : cap - 1;
			memcpy(buf, p + k + 1, n);
			buf[n] = '\0';
			return buf;
		}
		p = strchr(p, '&');
	}
	return NULL;
}

/* url (freed) with key set to val, or dropped when val is NULL; a new string. */
static char *with(char *url, const char *key, const char *val)
{
	size_t cap = strlen(url) + strlen(key) + (val ? strlen(val) : 0) + 8, k = strlen(key);
	char *out = malloc(cap), *q = strchr(url, '?');
	ck_assert_ptr_nonnull(out);
	size_t at = (size_t)(q ? q - url : (ptrdiff_t)strlen(url));
	memcpy(out, url, at);
	out[at] = '\0';
	char sep = '?';
	for (const char *p = q; p && *p;) {
		p++;
		size_t n = strcspn(p, "&");
		if (!(n > k && !strncmp(p, key, k) && p[k] == '=')) {
			out[at++] = sep;
			memcpy(out + at, p, n);
			at += n;
			sep = '&';
		}
		p += n;
	}
	if (val)
		at += (size_t)snprintf(out + at, cap - at, "%c%s=%s", sep, key, val);
	out[at] = '\0';
	free(url);
	return out;
}

static char *with_ll(char *url, const char *key, long long v)
{
	char b[32];
	snprintf(b, sizeof b, "%lld", v);
	return with(url, key, b);
}

/* The float32 compat=hf bytes of url (with its path replaced by path when given). */
static char *hf_f32(const char *url, const char *path)
{
	char *u = strdup(url);
	ck_assert_ptr_nonnull(u);
	if (path) {
		const char *q = strchr(url, '?');
		char *p = malloc(strlen(path) + (q ? strlen(q) : 0) + 1);
		ck_assert_ptr_nonnull(p);
		strcpy(p, path);
		strcat(p, q ? q : "");
		free(u);
		u = p;
	}
	u = with(u, "compat", "hf");
	u = with(u, "format", "bin");
	return with(u, "dtype", "f32");
}

static int fetch(struct fam *f, const char *url, size_t want, struct pe_resp *r)
{
	pe_get(f->d, url, r);
	if (r->status == 200 && r->len == want)
		return 1;
	miss(f, "%s: %ld, %zu bytes (expected %zu) %.200s", url, r->status, r->len, want,
	     r->status == 200 ? "" : r->body ? r->body : "");
	pe_resp_free(r);
	return 0;
}

/* ---- plans ---- */

static json_t *plan_for(struct fam *f, long long len)
{
	char path[300], query[64];
	size_t n;
	struct pe_resp r;
	snprintf(path, sizeof path, CONFIGS "/%s", f->model);
	char *body = pe_test_read_file(path, &n);
	if (len > 0)
		snprintf(query, sizeof query, "/v1/plan?len=%lld", len);
	else
		snprintf(query, sizeof query, "/v1/plan");
	pe_request(f->d, "POST", query, json_ct, body, n, &r);
	free(body);
	json_t *plan = r.status == 200 ? pe_resp_json(&r) : NULL;
	if (!plan)
		miss(f, "%s: %ld %.300s", query, r.status, r.body ? r.body : "");
	pe_resp_free(&r);
	return plan;
}

static const char *plan_kind(const char *known)
{
	return !strcmp(known, "t5") ? "relative/t5" : !strcmp(known, "deberta") ? "relative/deberta" : known;
}

/* The plan encoding's layer indices: layer_indices, or layers when it is a list. */
static json_t *indices(json_t *pe)
{
	json_t *li = json_object_get(pe, "layer_indices");
	if (json_is_array(li) && json_array_size(li))
		return li;
	li = json_object_get(pe, "layers");
	return json_is_array(li) ? li : NULL;
}

static int has_index(json_t *list, json_int_t v)
{
	size_t i;
	json_t *x;
	json_array_foreach(list, i, x)
		if (json_integer_value(x) == v)
			return 1;
	return 0;
}

/* 2: the same layers; 1: the plan's encoding covers the known one's layers; 0: neither. */
static int covers(json_t *pe, json_t *ke)
{
	json_t *kl = json_object_get(ke, "layers"), *pl = json_object_get(pe, "layers");
	if (json_is_string(kl))
		return json_is_string(pl) && !strcmp(json_string_value(kl), json_string_value(pl)) ? 2 : 0;
	json_t *pi = indices(pe);
	size_t i;
	json_t *x;
	if (!pi)
		return 0;
	json_array_foreach(kl, i, x)
		if (!has_index(pi, json_integer_value(x)))
			return 0;
	return json_array_size(pi) == json_array_size(kl) ? 2 : 1;
}

static json_t *match(json_t *plan, json_t *ke)
{
	const char *tower = json_string_value(json_object_get(ke, "tower"));
	const char *kind = plan_kind(json_string_value(json_object_get(ke, "kind")));
	json_t *best = NULL, *pe;
	int how = 0;
	size_t i;
	json_array_foreach(json_object_get(plan, "encodings"), i, pe) {
		const char *t = json_string_value(json_object_get(pe, "tower"));
		const char *k = json_string_value(json_object_get(pe, "kind"));
		int c = t && k && !strcmp(t, tower) && !strcmp(k, kind) ? covers(pe, ke) : 0;
		if (c > how) {
			best = pe;
			how = c;
		}
	}
	return best;
}

static const char *url_of(json_t *pe)
{
	const char *u = json_string_value(json_object_get(pe, "url"));
	return u && !strncmp(u, "/v1/", 4) ? u : NULL;
}

/* ---- rope and mrope ---- */

/* Channel of pair i's first (second 0) or second value in a row of d channels; half_per_axis
 * (Gemma 4 vision): each half of the row is a half-layout block of its own. */
static size_t channel(const char *layout, size_t i, size_t d, int second)
{
	if (!strcmp(layout, "half_per_axis"))
		return i + (i >= d / 4 ? d / 4 : 0) + (second ? d / 4 : 0);
	return !strcmp(layout, "interleaved") ? 2 * i + (size_t)second : i + (second ? d / 2 : 0);
}


/* Row `row` of a served cos/sin table [2, rows, d] against the known pair values kc, ks [d/2],
 * within bound ulps; the first difference is recorded and ends the comparison (0). */
static int row_match(struct fam *f, const struct pe_resp *r, size_t rows, size_t d, size_t row, const char *layout,
		     json_t *kc, json_t *ks, uint32_t bound, const char *what, const char *url)
{
	for (size_t i = 0; i < d / 2; i++)
		for (int s = 0; s < 2; s++) {
			size_t c = channel(layout, i, d, s);
			float gc = f32_at(r, row * d + c), gs = f32_at(r, (rows + row) * d + c);
			float wc = hexf(json_array_get(kc, i)), ws = hexf(json_array_get(ks, i));
			if (ulps(gc, wc) > bound || ulps(gs, ws) > bound) {
				miss(f, "%s %s pair %zu: cos %.9g sin %.9g, known %.9g %.9g (%s)", what, layout, i, gc, gs, wc,
				     ws, url);
				return 0;
			}
		}
	return 1;
}

/* cos/sin rows [2, n, d] against the known pair values of rows (kcos/ksin [n][d/2]) within bound. */
static void rows_match(struct fam *f, const char *url, const struct pe_resp *r, size_t n, size_t d,
		       const char *layout, json_t *kcos, json_t *ksin, const char *what, uint32_t bound)
{
	for (size_t p = 0; p < n; p++)
		if (!row_match(f, r, n, d, p, layout, json_array_get(kcos, p), json_array_get(ksin, p), bound, what, url))
			return;
}

/* An M-RoPE url less its sequence (segments and how they are numbered): the table's parameters. */
static char *table_params(char *u)
{
	static const char *const seq_keys[] = {"segments", "variant", "spatial_merge_size", "tokens_per_second",
					       "second_per_grid_t", "timestamp_tokens", "time_step"};
	for (size_t k = 0; k < sizeof seq_keys / sizeof seq_keys[0]; k++)
		u = with(u, seq_keys[k], NULL);
	return u;
}

/* What a rope url's table uses as seq_len, made explicit for the inv_freq and row urls. */
static char *pin_seq_len(char *u)
{
	char b[64], o[32], l[32];
	if (!param(u, "scaling", b, sizeof b) || (strcmp(b, "dynamic") && strcmp(b, "longrope")) ||
	    param(u, "seq_len", b, sizeof b) || !param(u, "len", l, sizeof l))
		return u;
	return with_ll(u, "seq_len", atoll(l) + (param(u, "offset", o, sizeof o) ? atoll(o) : 0));
}

static void inv_freq_match(struct fam *f, const char *url, json_t *kinv)
{
	size_t h = json_array_size(kinv);
	char *u = table_params(pin_seq_len(strdup(url)));
	u = with(with(with(u, "len", NULL), "offset", NULL), "layout", NULL);
	u = with(with(u, "mrope_section", NULL), "interleaved", NULL);
	char *v = hf_f32(u, "/v1/rope/inv_freq");
	struct pe_resp r;
	if (fetch(f, v, 4 * h, &r)) {
		for (size_t i = 0; i < h; i++)
			if (ulps(f32_at(&r, i), hexf(json_array_get(kinv, i))) > 1) {
				miss(f, "inv_freq[%zu]: %.9g, known %.9g (%s)", i, f32_at(&r, i),
				     hexf(json_array_get(kinv, i)), v);
				break;
			}
		pe_resp_free(&r);
	}
	free(u);
	free(v);
}

/* Each listed position as a one-row table (offset p, len 1, seq_len as the plan's url has it). */
static void rope_rows(struct fam *f, const char *url, json_t *ke, json_t *t)
{
	json_t *pos = json_object_get(t, "positions");
	const char *layout = json_string_value(json_object_get(ke, "layout"));
	size_t d = (size_t)json_integer_value(json_object_get(ke, "rotary_dim"));
	for (size_t p = 0; p < json_array_size(pos); p++) {
		char *u = pin_seq_len(strdup(url));
		u = with_ll(with_ll(u, "offset", json_integer_value(json_array_get(pos, p))), "len", 1);
		char *v = hf_f32(u, NULL);
		struct pe_resp r;
		char what[48];
		snprintf(what, sizeof what, "position %lld", (long long)json_integer_value(json_array_get(pos, p)));
		if (fetch(f, v, 8 * d, &r)) {
			row_match(f, &r, 1, d, 0, layout, json_array_get(json_object_get(t, "cos"), p),
				  json_array_get(json_object_get(t, "sin"), p), 1, what, v);
			pe_resp_free(&r);
		}
		free(u);
		free(v);
	}
}

/* M-RoPE text alone: the positions as three equal rows, POSTed with the plan url's table parameters. */
static void mrope_rows(struct fam *f, const char *url, json_t *ke, json_t *t)
{
	static const char *const npy_ct[] = {"Content-Type: application/x-npy", NULL};
	json_t *pos = json_object_get(t, "positions");
	size_t n = json_array_size(pos), d = (size_t)json_integer_value(json_object_get(ke, "rotary_dim"));
	char *u = table_params(pin_seq_len(strdup(url)));
	char *v = hf_f32(u, NULL);
	char npy[256 + 12 * 64];
	int hl = snprintf(npy + 10, 118, "{'descr': '<i4', 'fortran_order': False, 'shape': (3, %zu), }", n);
	memcpy(npy, "\x93NUMPY\x01\x00\x76\x00", 10);
	memset(npy + 10 + hl, ' ', (size_t)(127 - 10 - hl));
	npy[127] = '\n';
	ck_assert_uint_le(n, 64);
	for (size_t a = 0; a < 3; a++)
		for (size_t p = 0; p < n; p++) {
			int32_t x = (int32_t)json_integer_value(json_array_get(pos, p));
			memcpy(npy + 128 + 4 * (a * n + p), &x, 4);
		}
	struct pe_resp r;
	pe_request(f->d, "POST", v, npy_ct, npy, 128 + 12 * n, &r);
	if (r.status == 200 && r.len == 8 * n * d)
		rows_match(f, v, &r, n, d, json_string_value(json_object_get(ke, "layout")), json_object_get(t, "cos"),
			   json_object_get(t, "sin"), "mrope", 1);
	else
		miss(f, "POST %s: %ld, %zu bytes %.200s", v, r.status, r.len, r.status == 200 ? "" : r.body ? r.body : "");
	pe_resp_free(&r);
	free(u);
	free(v);
}

/* The known encoding's layout, rotary_dim and head_dim, as the plan gives them. */
static void shape_fields(struct fam *f, json_t *ke, json_t *pe)
{
	static const char *const ints[] = {"head_dim", "rotary_dim"};
	for (size_t i = 0; i < 2; i++)
		if (json_object_get(ke, ints[i]))
			same_int(f, ints[i], json_integer_value(json_object_get(ke, ints[i])), json_object_get(pe, ints[i]));
	const char *kl = json_string_value(json_object_get(ke, "layout"));
	if (!strcmp(json_string_value(json_object_get(ke, "kind")), "rope2d"))
		return; /* a vision table's channel order is its variant's: the rows are checked in it */
	const char *pl = json_string_value(json_object_get(pe, "layout"));
	if (kl && (!pl || strcmp(kl, pl)))
		miss(f, "layout: plan %s, known %s", pl ? pl : "null", kl);
}

static void mrope_fields(struct fam *f, json_t *ke, const char *url)
{
	char b[128], want[128] = "";
	size_t i, at = 0;
	json_t *x;
	const char *variant = json_string_value(json_object_get(ke, "variant"));
	if (variant && (!param(url, "variant", b, sizeof b) || strcmp(b, variant)))
		miss(f, "mrope variant: plan %s, known %s", param(url, "variant", b, sizeof b) ? b : "none", variant);
	json_array_foreach(json_object_get(ke, "mrope_section"), i, x)
		at += (size_t)snprintf(want + at, sizeof want - at, "%s%lld", i ? "," : "", (long long)json_integer_value(x));
	if (!param(url, "mrope_section", b, sizeof b) || strcmp(b, want))
		miss(f, "mrope_section: plan %s, known %s", param(url, "mrope_section", b, sizeof b) ? b : "none", want);
	int inter = json_is_true(json_object_get(ke, "mrope_interleaved"));
	if (!param(url, "interleaved", b, sizeof b) || atoi(b) != inter)
		miss(f, "mrope interleaved: plan %s, known %d", param(url, "interleaved", b, sizeof b) ? b : "none", inter);
}

/* One plan per table, made for its seq_len; the table's attention_scaling overrides the encoding's. */
static void rope_check(struct fam *f, json_t *ke)
{
	size_t i;
	json_t *t;
	int mrope = !strcmp(json_string_value(json_object_get(ke, "kind")), "mrope");
	json_array_foreach(json_object_get(ke, "tables"), i, t) {
		long long len = json_integer_value(json_object_get(t, "seq_len"));
		json_t *plan = plan_for(f, len), *pe = plan ? match(plan, ke) : NULL;
		const char *url = url_of(pe);
		char what[64];
		if (!url) {
			if (plan)
				miss(f, "len=%lld: no %s url for the known encoding", len, mrope ? "mrope" : "rope");
			json_decref(plan);
			continue;
		}
		json_t *as = json_object_get(t, "attention_scaling");
		snprintf(what, sizeof what, "attention_scaling (len=%lld)", len);
		same_double(f, what, as ? as : json_object_get(ke, "attention_scaling"), json_object_get(pe, "attention_scaling"));
		inv_freq_match(f, url, json_object_get(t, "inv_freq"));
		if (mrope) {
			mrope_fields(f, ke, url);
			mrope_rows(f, url, ke, t);
		} else {
			rope_rows(f, url, ke, t);
		}
		json_decref(plan);
	}
}

/* ---- vision rope2d ---- */

/* Row of patch (r, c) in a table of width w visited in m x m merge windows (m 1: row-major). */
static size_t patch_row(long long r, long long c, long long w, long long m)
{
	long long win = (r / m) * (w / m) + c / m;
	return (size_t)(win * m * m + (r % m) * m + c % m);
}

static void rope2d_check(struct fam *f, json_t *ke, const char *url)
{
	char b[64];
	json_t *patches = json_object_get(ke, "patches"), *tokens = json_object_get(ke, "tokens");
	size_t d = (size_t)json_integer_value(json_object_get(ke, "head_dim")), n = json_array_size(patches ? patches : tokens);
	const char *variant = json_string_value(json_object_get(ke, "variant"));
	if (!param(url, "variant", b, sizeof b) ? strcmp(variant, "qwen2vl") && strcmp(variant, "glm4v") : strcmp(b, variant))
		miss(f, "rope2d variant: plan %s, known %s", param(url, "variant", b, sizeof b) ? b : "default", variant);
	char *u = strdup(url);
	long long h = param(u, "height", b, sizeof b) ? atoll(b) : 0, w = param(u, "width", b, sizeof b) ? atoll(b) : 0;
	long long m = param(u, "spatial_merge_size", b, sizeof b) ? atoll(b) : 1;
	for (size_t k = 0; patches && k < n; k++) {
		json_t *rc = json_array_get(patches, k);
		long long r = json_integer_value(json_array_get(rc, 0)) + 1, c = json_integer_value(json_array_get(rc, 1)) + 1;
		h = h > r ? h : (r + m - 1) / m * m; /* a patch past the plan's grid: a larger grid, same values */
		w = w > c ? w : (c + m - 1) / m * m;
	}
	u = with_ll(with_ll(u, "height", h), "width", w);
	size_t rows = (size_t)(h * w) + (!strcmp(variant, "llama4") ? 1 : 0);
	char *v = hf_f32(u, NULL);
	struct pe_resp r;
	if (fetch(f, v, 8 * rows * d, &r)) {
		const char *layout = json_string_value(json_object_get(ke, "layout"));
		for (size_t k = 0; k < n; k++) {
			json_t *rc = patches ? json_array_get(patches, k) : NULL;
			size_t row = rc ? patch_row(json_integer_value(json_array_get(rc, 0)), json_integer_value(json_array_get(rc, 1)), w, m)
					: (size_t)json_integer_value(json_array_get(tokens, k));
			char what[48];
			snprintf(what, sizeof what, "rope2d entry %zu", k);
			if (!row_match(f, &r, rows, d, row, layout, json_array_get(json_object_get(ke, "cos"), k),
				       json_array_get(json_object_get(ke, "sin"), k), 1, what, v))
				break;
		}
		pe_resp_free(&r);
	}
	free(u);
	free(v);
}

/* ---- the other kinds ---- */

static void sinusoidal_check(struct fam *f, json_t *ke, const char *url)
{
	char b[32];
	size_t d = (size_t)json_integer_value(json_object_get(ke, "dim"));
	size_t len = param(url, "len", b, sizeof b) ? (size_t)atoll(b) : 0, i;
	json_t *row;
	if (len != (size_t)json_integer_value(json_object_get(ke, "num_positions")))
		miss(f, "sinusoidal len: plan %zu, known %lld", len, (long long)json_integer_value(json_object_get(ke, "num_positions")));
	char *v = hf_f32(url, NULL);
	struct pe_resp r;
	if (fetch(f, v, 4 * len * d, &r)) {
		json_array_foreach(json_object_get(ke, "table"), i, row) {
			size_t p = (size_t)json_integer_value(json_array_get(json_object_get(ke, "rows"), i));
			for (size_t c = 0; c < d; c++)
				if (p >= len || ulps(f32_at(&r, p * d + c), hexf(json_array_get(row, c))) > 1) {
					miss(f, "sinusoidal row %zu channel %zu: %.9g, known %.9g", p, c, f32_at(&r, p * d + c),
					     hexf(json_array_get(row, c)));
					i = json_array_size(json_object_get(ke, "table"));
					break;
				}
		}
		pe_resp_free(&r);
	}
	free(v);
}

static void query_scale_check(struct fam *f, json_t *ke, const char *url)
{
	json_t *pos = json_object_get(ke, "positions"), *x;
	long long len = 0;
	size_t i;
	json_array_foreach(pos, i, x)
		len = json_integer_value(x) + 1 > len ? json_integer_value(x) + 1 : len;
	char *u = with_ll(strdup(url), "len", len), *v = hf_f32(u, NULL);
	struct pe_resp r;
	free(u);
	if (fetch(f, v, 4 * (size_t)len, &r)) {
		json_array_foreach(pos, i, x) {
			float got = f32_at(&r, (size_t)json_integer_value(x)), want = hexf(json_array_get(json_object_get(ke, "scale"), i));
			if (ulps(got, want) > 1) {
				miss(f, "query scale at %lld: %.9g, known %.9g", (long long)json_integer_value(x), got, want);
				break;
			}
		}
		pe_resp_free(&r);
	}
	free(v);
}

/* Buckets of the known relative positions: entry [q][k] of an (n+1) x (n+1) table, n the largest
 * distance; t5 buckets k - q, deberta q - k. */
static void buckets_check(struct fam *f, json_t *ke, const char *url, int t5)
{
	json_t *rp = json_object_get(ke, "relative_position"), *x;
	long long n = 0;
	size_t i;
	json_array_foreach(rp, i, x)
		n = llabs(json_integer_value(x)) > n ? llabs(json_integer_value(x)) : n;
	n++;
	char *v = with(with_ll(with_ll(strdup(url), "q_len", n), "k_len", n), "format", "bin");
	struct pe_resp r;
	if (fetch(f, v, 4 * (size_t)(n * n), &r)) {
		json_array_foreach(rp, i, x) {
			long long d = json_integer_value(x), a = d < 0 ? -d : 0, b = d < 0 ? 0 : d; /* k - q = d: q a, k b */
			size_t at = t5 ? (size_t)(a * n + b) : (size_t)(b * n + a); /* deberta: q - k = d */
			long long want = json_integer_value(json_array_get(json_object_get(ke, "bucket"), i));
			if (i32_at(&r, at) != want) {
				miss(f, "bucket of relative position %lld: %d, known %lld", d, i32_at(&r, at), want);
				break;
			}
		}
		pe_resp_free(&r);
	}
	free(v);
}

static void deberta_table_check(struct fam *f, json_t *ke, const char *url)
{
	json_t *t = json_object_get(ke, "table"), *row;
	char b[32];
	long long q = param(url, "q_len", b, sizeof b) ? atoll(b) : 0, k = param(url, "k_len", b, sizeof b) ? atoll(b) : 0;
	size_t i;
	if (q != json_integer_value(json_object_get(t, "q_len")) || k != json_integer_value(json_object_get(t, "k_len"))) {
		miss(f, "deberta table %lldx%lld, known %lldx%lld", q, k, (long long)json_integer_value(json_object_get(t, "q_len")),
		     (long long)json_integer_value(json_object_get(t, "k_len")));
		return;
	}
	char *v = with(strdup(url), "format", "bin");
	struct pe_resp r;
	if (fetch(f, v, 4 * (size_t)(q * k), &r)) {
		json_array_foreach(json_object_get(t, "values"), i, row) {
			long long p = json_integer_value(json_array_get(json_object_get(t, "rows"), i));
			for (long long c = 0; c < k; c++)
				if (i32_at(&r, (size_t)(p * k + c)) != json_integer_value(json_array_get(row, (size_t)c))) {
					miss(f, "deberta [%lld][%lld]: %d, known %lld", p, c, i32_at(&r, (size_t)(p * k + c)),
					     (long long)json_integer_value(json_array_get(row, (size_t)c)));
					i = json_array_size(json_object_get(t, "values"));
					break;
				}
		}
		pe_resp_free(&r);
	}
	free(v);
}

/* A table per axis (Gemma 4's vision): the plan's per_axis list equals the known one. */
static void per_axis_check(struct fam *f, json_t *ke, json_t *params)
{
	json_t *want = json_object_get(ke, "per_axis"), *got = json_object_get(params, "per_axis");
	if (!want != !got || (want && !json_equal(want, got)))
		miss(f, "learned per_axis: plan %s, known %s", got ? "a list" : "none", want ? "a list" : "none");
}

static void learned_check(struct fam *f, json_t *ke, json_t *pe)
{
	json_t *p = json_object_get(pe, "params"), *g = json_object_get(ke, "grid");
	json_t *off = json_object_get(p, "position_offset"), *cls = json_object_get(p, "class_tokens");
	same_int(f, "learned positions", json_integer_value(json_object_get(ke, "num_positions")), json_object_get(p, "positions"));
	if ((off ? json_integer_value(off) : 0) != json_integer_value(json_object_get(ke, "offset")))
		miss(f, "learned offset: plan %lld, known %lld", off ? (long long)json_integer_value(off) : 0LL,
		     (long long)json_integer_value(json_object_get(ke, "offset")));
	per_axis_check(f, ke, p);
	if (g) {
		char want[64];
		const char *got = json_string_value(json_object_get(p, "grid"));
		snprintf(want, sizeof want, "%lldx%lld", (long long)json_integer_value(json_array_get(g, 0)),
			 (long long)json_integer_value(json_array_get(g, 1)));
		if (!got || strcmp(got, want))
			miss(f, "learned grid: plan %s, known %s", got ? got : "none", want);
		if ((cls ? json_integer_value(cls) : 0) != json_integer_value(json_object_get(ke, "cls_tokens")))
			miss(f, "learned class tokens: plan %lld, known %lld", cls ? (long long)json_integer_value(cls) : 0LL,
			     (long long)json_integer_value(json_object_get(ke, "cls_tokens")));
	}
}

/* ---- one family ---- */

static void encoding_check(struct fam *f, json_t *plan, json_t *ke)
{
	const char *kind = json_string_value(json_object_get(ke, "kind"));
	json_t *pe = match(plan, ke);
	char layers[64];
	json_t *kl = json_object_get(ke, "layers");
	snprintf(layers, sizeof layers, "%s", json_is_string(kl) ? json_string_value(kl) : "[list]");
	if (!pe) {
		miss(f, "no plan encoding for %s %s layers %s", json_string_value(json_object_get(ke, "tower")), kind, layers);
		return;
	}
	same_double(f, "softmax_scale", json_object_get(ke, "softmax_scale"), json_object_get(pe, "softmax_scale"));
	count(kind);
	if (!strcmp(kind, "none"))
		return;
	if (!strcmp(kind, "learned")) {
		learned_check(f, ke, pe);
		return;
	}
	if (!strcmp(kind, "rope") || !strcmp(kind, "mrope")) {
		shape_fields(f, ke, pe);
		rope_check(f, ke);
		return;
	}
	const char *url = url_of(pe);
	if (!url) {
		miss(f, "%s: no url", kind);
		return;
	}
	if (!strcmp(kind, "rope2d")) {
		shape_fields(f, ke, pe);
		rope2d_check(f, ke, url);
	} else if (!strcmp(kind, "sinusoidal")) {
		sinusoidal_check(f, ke, url);
	} else if (!strcmp(kind, "query_scale")) {
		query_scale_check(f, ke, url);
	} else if (!strcmp(kind, "t5")) {
		buckets_check(f, ke, url, 1);
	} else if (!strcmp(kind, "deberta")) {
		buckets_check(f, ke, url, 0);
		deberta_table_check(f, ke, url);
	} else {
		miss(f, "kind %s: no comparison for it in this test", kind);
	}
}

static void family_check(struct fam *f)
{
	char path[300];
	json_error_t err;
	size_t i;
	json_t *ke;
	snprintf(path, sizeof path, KNOWN "/%s", f->model);
	json_t *known = json_load_file(path, 0, &err);
	ck_assert_msg(known, "%s: %s", path, err.text);
	ck_assert_uint_gt(json_array_size(json_object_get(known, "encodings")), 0);
	json_t *plan = plan_for(f, 0);
	if (plan)
		json_array_foreach(json_object_get(known, "encodings"), i, ke)
			encoding_check(f, plan, ke);
	json_decref(plan);
	json_decref(known);
}

static const char *mismatch_reason(const char *model)
{
	for (size_t i = 0; known_mismatch[i].model; i++)
		if (!strcmp(known_mismatch[i].model, model))
			return known_mismatch[i].why;
	return NULL;
}

START_TEST(every_family_matches_its_known_answer)
{
	struct pe_daemon d;
	struct dirent *de;
	size_t families = 0, matched = 0, listed = 0, failed = 0;
	pe_daemon_start(&d, NULL);
	DIR *dir = opendir(KNOWN);
	ck_assert_ptr_nonnull(dir);
	while ((de = readdir(dir)) != NULL) {
		size_t k = strlen(de->d_name);
		if (k < 6 || strcmp(de->d_name + k - 5, ".json"))
			continue;
		struct fam f = {.d = &d, .model = de->d_name};
		family_check(&f);
		const char *why = mismatch_reason(de->d_name);
		families++;
		if (why) {
			listed++;
			if (f.bad == 0) {
				fprintf(stderr, "%s matches its known answer now: remove it from known_mismatch[] (%s)\n", f.model, why);
				failed++;
			}
			continue;
		}
		if (f.bad) {
			fprintf(stderr, "%s: %d differences from its known answer:%s\n", f.model, f.bad, f.log);
			failed++;
			continue;
		}
		matched++;
	}
	closedir(dir);
	ck_assert_msg(failed == 0, "%zu families differ from their known answers, or match and are listed (above)", failed);
	ck_assert_uint_ge(families, 60);
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		ck_assert_msg(compared[i] > 0, "no known %s encoding was compared", kinds[i]);
	ck_assert_uint_eq(matched + listed, families);
	for (size_t i = 0; known_mismatch[i].model; i++) {
		char path[300];
		snprintf(path, sizeof path, KNOWN "/%s", known_mismatch[i].model);
		ck_assert_msg(access(path, R_OK) == 0, "known_mismatch[] names %s, which has no known answer", path);
	}
	ck_assert_int_eq(pe_daemon_stop(&d, SIGTERM), 0);
}
END_TEST

static Suite *plan_families_http_suite(void)
{
	Suite *s = suite_create("plan_families_http");
	TCase *tc = tcase_create("e2e");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, every_family_matches_its_known_answer);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(plan_families_http_suite)
