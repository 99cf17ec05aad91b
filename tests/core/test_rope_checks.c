/* The cheap frequency verdict of rope validation (pe_rope_freq_bound, used by /v1/rope,
 * /v1/rope/inv_freq, /v1/rope/mrope and the analyses that validate through rope's check) against
 * the exhaustive one it replaced (the plan built and every frequency scanned,
 * pe_rope_freq_force_scan(1)): over random and edge parameter sets of every scaling and compat
 * mode, both must accept or refuse alike and name the same parameter; for rope/inv_freq, the dtype
 * check (max_abs) must give the same verdict for every dtype.
 *
 * The sets favour the places where the two could part: bases from 1e-300 to 1e300 and near 1,
 * float's limits (1e-45, FLT_MIN, FLT_MAX), factors far below 1, LongRoPE lists with tiny and huge
 * factors, llama3's equal factors, and bases and factors tuned so that the largest angle lands
 * within 1e-3 .. 1e-15 (relative) of the overflow limit on either side. */
#include "core/rope.h"
#include "core/torchmath.h"
#include "core/tables.h"
#include "posenc/core.h"
#include "support/pe_check.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double unif(void) { return (double)(next() >> 11) * 0x1p-53; }
static size_t pick(size_t n) { return (size_t)(next() % n); }
static double logunif(double lo, double hi) { return exp(log(lo) + unif() * (log(hi) - log(lo))); }

/* One request: up to 24 key=value pairs. */
struct req {
	const char *table;
	int n;
	char key[24][48];
	char *val[24];
};

static void add(struct req *r, const char *k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(struct req *r, const char *k, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	ck_assert_int_ge(vasprintf(&s, fmt, ap), 0);
	va_end(ap);
	snprintf(r->key[r->n], sizeof r->key[0], "%s", k);
	r->val[r->n++] = s;
}

static void req_free(struct req *r)
{
	for (int i = 0; i < r->n; i++)
		free(r->val[i]);
	r->n = 0;
}

/* The verdict: finish's code and parameter, then (when finish passes, for inv_freq) a bit per
 * dtype whose check refuses. */
struct verdict {
	int rc, dtypes;
	char param[PE_ERR_PARAM_MAX];
};

static struct verdict run(const struct req *r, int scan)
{
	struct verdict v = {0};
	struct pe_params p;
	struct pe_err err = {0};
	pe_rope_freq_force_scan(scan);
	pe_params_init(&p, pe_table_find(r->table));
	for (int i = 0; i < r->n && v.rc == 0; i++)
		v.rc = pe_params_set(&p, r->key[i], r->val[i], &err);
	if (v.rc == 0)
		v.rc = pe_params_finish(&p, &err);
	snprintf(v.param, sizeof v.param, "%s", v.rc ? err.param : "");
	static const enum pe_dtype dts[] = {PE_F16, PE_BF16, PE_F32, PE_F64};
	for (int k = 0; v.rc == 0 && k < 4; k++) {
		struct pe_err e2 = {0};
		v.dtypes |= (pe_table_check_dtype(&p, dts[k], &e2) != 0) << k;
	}
	pe_params_destroy(&p);
	pe_rope_freq_force_scan(0);
	return v;
}

static const char *const scalings[] = {"none", "linear", "ntk", "dynamic", "yarn", "longrope", "llama3", "proportional"};
static const char *const compats[] = {"exact", "hf", "ggml"};

/* A base: log-uniform over the whole range, near 1, or at float's and double's edges. */
static double some_base(void)
{
	static const double edge[] = {1, 1 + 0x1p-23, 1 - 0x1p-24, 1 + 1e-12, 1e-45, 1.4e-45, FLT_MIN, 1e-38, 3e-39,
				      FLT_MAX, 3.5e38, 1e38, 1e-300, 1e300, DBL_MIN * 2, 0.5, 2, 10000, 500000};
	switch (pick(4)) {
	case 0:
		return edge[pick(sizeof edge / sizeof edge[0])];
	case 1:
		return 1 + (unif() - 0.5) * 1e-3;
	default:
		return logunif(1e-300, 1e300);
	}
}

static double some_factor(void)
{
	static const double edge[] = {1, 1 + 1e-9, 2, 4, 8, 32, 1e-45, 1e-38, FLT_MIN, FLT_MAX, 3.5e38, 1e-300, 1e300, 0.5};
	return pick(2) ? edge[pick(sizeof edge / sizeof edge[0])] : logunif(1e-300, 1e300);
}

/* The largest angle of the simplest case (the last pair's 1/pos) put at the limit, then nudged by
 * 1e-3 .. 1e-15 either way: base for scaling=none/base<1, factor for linear. */
static void near_limit(struct req *r, int compat, size_t dim, double last)
{
	double lim = (compat == 0 ? DBL_MAX : FLT_MAX) / 4 / last;
	double nudge = 1 + (pick(2) ? 1 : -1) * pow(10, -3 - (double)pick(13));
	double x = (double)(dim - 2) / (double)dim;
	if (pick(2) || dim == 2) {
		add(r, "base", "%.17g", pow(lim * nudge, -1 / (x > 0 ? x : 1)));
	} else {
		add(r, "scaling", "linear");
		add(r, "factor", "%.17g", 1 / (lim * nudge));
	}
}

static void factor_list(struct req *r, const char *key, size_t h)
{
	char *s = malloc(h * 26 + 1);
	size_t len = 0;
	int kind = (int)pick(4);
	double tiny = pick(2) ? 1e-300 : 1e-45;
	for (size_t i = 0; i < h; i++) {
		double f = kind == 0 ? 1 + unif() * 60 : kind == 1 ? logunif(1e-40, 1e40) : (i == pick(h) ? tiny : 1 + unif());
		if (kind == 3)
			f = logunif(1e-300, 1e300);
		len += (size_t)sprintf(s + len, "%s%.17g", i ? "," : "", f);
	}
	add(r, key, "%s", s);
	free(s);
}

static size_t some_dim(int longrope)
{
	static const size_t dims[] = {2, 4, 6, 8, 64, 96, 128, 130, 256};
	if (!longrope && pick(40) == 0)
		return 65536;
	if (pick(2))
		return dims[pick(sizeof dims / sizeof dims[0])];
	return 2 * (1 + pick(longrope ? 512 : 2048));
}

/* llama3 put on its step's edge: low = high = orig / (pair i's wavelength as the mode computes
 * it), so that a wavelength may equal orig / low exactly (NaN, refused), or with high one step
 * above low (factors equal in float, or nearly equal in double). */
static void llama3_edge(struct req *r, int compat, size_t dim)
{
	size_t h = dim / 2, i = pick(h);
	double base = some_base(), orig = (double)(1 + pick(100000)), wl;
	if (pick(3) == 0) { /* wavelengths near 1e38: low and high equal in float, not in double */
		base = logunif(1e20, 3.4e38);
		orig = 1;
	}
	if (compat == 1) {
		float pw = pe_torch_powf((float)base, (float)(2 * i) / (float)dim, i, h);
		wl = (double)((1.0f / (1.0f / pw)) * (float)(2 * M_PI));
	} else {
		wl = 2 * M_PI / (1.0 / pow(base, (double)(2 * i) / (double)dim));
	}
	double lo = orig / wl, hi = pick(2) ? lo : pick(2) ? nextafter(lo, INFINITY) : lo * (1 + 0x1p-30);
	add(r, "scaling", "llama3");
	add(r, "base", "%.17g", base);
	add(r, "factor", "%.17g", pick(2) ? 8.0 : some_factor());
	add(r, "original_max_position_embeddings", "%.0f", orig);
	add(r, "low_freq_factor", "%.17g", lo);
	add(r, "high_freq_factor", "%.17g", hi);
}

/* rope2d: its own frequency list (1/base^x over the pairs of a quarter or half of dim). */
static void make2d(struct req *r)
{
	static const char *const variants[] = {"qwen2vl", "pixtral", "llama4"};
	int hf = (int)pick(2);
	size_t dim = pick(40) == 0 ? 65536 : 4 * (1 + pick(pick(2) ? 16 : 1024));
	int64_t side = pick(2) ? 1 + (int64_t)pick(4) : 1 + (int64_t)pick(4000);
	r->table = "rope2d";
	add(r, "dim", "%zu", dim);
	add(r, "compat", "%s", hf ? "hf" : "exact");
	add(r, "variant", "%s", variants[pick(3)]);
	add(r, "height", "%lld", (long long)side);
	add(r, "width", "%lld", (long long)(pick(2) ? side : 1));
	if (pick(3) == 0) { /* the largest angle tuned to float's limit */
		double x = 1 - 4.0 / (double)dim, lim = FLT_MAX / 4 / (double)(side > 1 ? side - 1 : 1);
		add(r, "base", "%.17g", pow(lim * (1 + (pick(2) ? 1 : -1) * pow(10, -3 - (double)pick(13))), -1 / x));
	} else {
		add(r, "base", "%.17g", some_base());
	}
}

/* A random request of table t (0 rope, 1 inv_freq, 2 mrope, 3 rope2d). */
static void make(struct req *r, int t)
{
	if (t == 3) {
		make2d(r);
		return;
	}
	r->table = t == 0 ? "rope" : t == 1 ? "rope/inv_freq" : "rope/mrope";
	int sc = (int)pick(8), compat = t == 2 ? (int)pick(2) : (int)pick(3);
	size_t dim = some_dim(sc == 5);
	double last = 1;
	add(r, "dim", "%zu", dim);
	if (t == 2) {
		size_t h = dim / 2;
		add(r, "mrope_section", "%zu,%zu,%zu", h - 2 * (h / 3), h / 3, h / 3);
	}
	add(r, "compat", "%s", compats[compat]);
	if (t == 0) {
		int64_t len = pick(3) ? 1 + (int64_t)pick(8) : 1 + (int64_t)pick(100000);
		int64_t off = pick(3) ? (int64_t)pick(4096) : (int64_t)logunif(1, PE_MAX_POSITION - 1e6);
		add(r, "len", "%lld", (long long)len);
		add(r, "offset", "%lld", (long long)off);
		last = (double)off + (double)len;
	}
	if (pick(8) == 0) {
		llama3_edge(r, compat, dim);
		return;
	}
	if (t == 1 && pick(4) == 0) { /* the largest value tuned to a dtype's largest */
		static const double top[] = {65504, 65520, 65519.99, 3.3895313892515355e38, 3.3961775292304611e38, FLT_MAX};
		double x = (double)(dim - 2) / (double)dim, v = top[pick(6)] * (1 + (pick(2) ? 1 : -1) * pow(10, -3 - (double)pick(13)));
		if (pick(2) || dim == 2) {
			add(r, "base", "%.17g", pow(v, -1 / (x > 0 ? x : 1)));
		} else {
			add(r, "scaling", "linear");
			add(r, "factor", "%.17g", 1 / v);
		}
		return;
	}
	if (pick(6) == 0) { /* tuned to the overflow limit */
		near_limit(r, compat, dim, last);
		return;
	}
	add(r, "scaling", "%s", scalings[sc]);
	add(r, "base", "%.17g", some_base());
	if (sc != 0 && pick(12))
		add(r, "factor", "%.17g", some_factor());
	if (sc >= 3 && sc != 7 && pick(12))
		add(r, "original_max_position_embeddings", "%lld", (long long)(pick(2) ? 1 + pick(9000) : 1 + pick(3000000)));
	if ((sc == 3 || sc == 5) && pick(2))
		add(r, "seq_len", "%lld", (long long)(1 + pick(5000000)));
	if (sc == 4 && pick(2)) {
		add(r, "beta_fast", "%.17g", logunif(1e-3, 1e3));
		add(r, "beta_slow", "%.17g", logunif(1e-3, 1e2));
	}
	if (sc == 4 && pick(4) == 0) {
		add(r, "mscale", "%.17g", logunif(1e-3, 1e3));
		add(r, "mscale_all_dim", "%.17g", logunif(1e-3, 1e3));
	}
	if ((sc == 4 || sc == 5) && pick(4) == 0)
		add(r, "attention_factor", "%.17g", logunif(1e-300, 1e300));
	if (sc == 4 && pick(3) == 0)
		add(r, "truncate", "%d", (int)pick(2));
	if (sc == 6 && pick(2)) {
		double lo = logunif(1e-3, 1e3);
		add(r, "low_freq_factor", "%.17g", lo);
		add(r, "high_freq_factor", "%.17g", pick(3) == 0 ? lo : pick(2) ? lo * (1 + 1e-12) : lo * logunif(1, 1e3));
	}
	if (sc == 7 && pick(4))
		add(r, "partial_rotary_factor", "%.17g", pick(2) ? 0.25 : unif());
	if (sc == 5) {
		factor_list(r, "short_factor", dim / 2);
		factor_list(r, "long_factor", dim / 2);
	}
}

/* The cheap verdict decided (no scan) for this request? Only to show the test exercises it. */
static int cheap(const struct req *r)
{
	struct pe_params p;
	struct pe_err err = {0};
	int rc = 0, decided = 0;
	pe_params_init(&p, pe_table_find(r->table));
	for (int i = 0; i < r->n && rc == 0; i++)
		rc = pe_params_set(&p, r->key[i], r->val[i], &err);
	if (rc == 0 && pe_params_finish(&p, &err) == 0) {
		struct pe_rope_cfg c;
		double m, u;
		pe_rope_cfg_get(&p, &c);
		decided = pe_rope_freq_bound(&c, &m, &u) == 0 && isfinite(u);
	}
	pe_params_destroy(&p);
	return decided;
}

static void describe(const struct req *r)
{
	fprintf(stderr, "%s?", r->table);
	for (int i = 0; i < r->n; i++)
		fprintf(stderr, "%s%s=%.80s", i ? "&" : "", r->key[i], r->val[i]);
	fprintf(stderr, "\n");
}

#define CASES 2500

START_TEST(cheap_verdict_equals_the_scan)
{
	int t = _i, accepted = 0, refused = 0, fast = 0, nan = 0;
	rng = 0x9e3779b97f4a7c15u + (uint64_t)t;
	for (int k = 0; k < CASES; k++) {
		struct req r = {0};
		make(&r, t);
		struct verdict a = run(&r, 1), b = run(&r, 0);
		if (a.rc != b.rc || strcmp(a.param, b.param) != 0 || a.dtypes != b.dtypes)
			describe(&r);
		ck_assert_int_eq(a.rc, b.rc);
		ck_assert_str_eq(a.param, b.param);
		ck_assert_int_eq(a.dtypes, b.dtypes);
		accepted += a.rc == 0;
		refused += a.rc != 0;
		nan += strstr(a.param, "freq_factor") != NULL;
		fast += a.rc == 0 && t < 3 && cheap(&r);
		req_free(&r);
	}
	printf("%s: %d accepted (%d decided cheaply), %d refused (%d naming a llama3 freq factor)\n",
	       t == 0 ? "rope" : t == 1 ? "inv_freq" : t == 2 ? "mrope" : "rope2d", accepted, fast, refused, nan);
	ck_assert_int_gt(accepted, CASES / 10);
	ck_assert_int_gt(refused, CASES / 20);
	if (t == 3)
		return;
	ck_assert_int_gt(fast, accepted / 3);
	ck_assert_int_gt(nan, 5);
}
END_TEST

/* Named edges: each must give the scan's verdict (and the expected one, so that the comparison is
 * not between two wrong answers). */
static const struct edge {
	const char *table, *query, *param; /* param: "" accepted */
} edges[] = {
	{"rope", "len=1&dim=65536", ""},
	{"rope", "len=1&dim=65536&compat=hf", ""},
	{"rope/inv_freq", "dim=65536", ""},
	{"rope", "len=1&dim=65536&base=1e-300", ""},
	{"rope", "len=1000&offset=4503599627369496&dim=65536&base=1e-295", "base"},
	{"rope", "len=1&dim=65536&base=1e-310", "base"},
	{"rope", "len=1&dim=65536&base=1e-30&compat=hf", ""},
	{"rope", "len=1&dim=65536&base=1e-40&compat=hf", "base"},
	{"rope", "len=1&dim=8&scaling=linear&factor=1e-300&compat=hf", "factor"},
	{"rope", "len=1&dim=8&scaling=linear&factor=1e-300", ""},
	{"rope", "len=1&dim=8&scaling=linear&factor=3.5e38&base=1e-46&compat=hf", "base"},
	{"rope/inv_freq", "dim=8&base=1e-10", ""},
	{"rope/inv_freq", "dim=8&scaling=yarn&factor=4&original_max_position_embeddings=4096&base=1e-200", ""},
	{"rope", "len=1&dim=128&scaling=llama3&factor=8&original_max_position_embeddings=8192&low_freq_factor=1&high_freq_factor=1", ""},
	{"rope", "len=4&dim=8&scaling=llama3&factor=8&original_max_position_embeddings=1&low_freq_factor=0.15915494309189535&high_freq_factor=0.15915494309189535", "low_freq_factor"},
	{"rope", "len=1&dim=2&scaling=llama3&factor=8&original_max_position_embeddings=2&low_freq_factor=1&high_freq_factor=1&base=3.1415926535897931", ""},
};

static struct req parse(const char *table, const char *query)
{
	struct req r = {.table = table};
	char *q = strdup(query), *save = NULL;
	for (char *kv = strtok_r(q, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');
		*eq = 0;
		add(&r, kv, "%s", eq + 1);
	}
	free(q);
	return r;
}

START_TEST(edges_equal_the_scan)
{
	const struct edge *e = &edges[_i];
	struct req r = parse(e->table, e->query);
	struct verdict a = run(&r, 1), b = run(&r, 0);
	if (a.rc != b.rc || strcmp(a.param, b.param) != 0)
		describe(&r);
	ck_assert_int_eq(a.rc, b.rc);
	ck_assert_str_eq(a.param, b.param);
	ck_assert_int_eq(a.dtypes, b.dtypes);
	ck_assert_str_eq(b.param, e->param);
	req_free(&r);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("rope_checks");
	TCase *tc = tcase_create("cheap verdict");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, cheap_verdict_equals_the_scan, 0, 4);
	tcase_add_loop_test(tc, edges_equal_the_scan, 0, sizeof edges / sizeof edges[0]);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
