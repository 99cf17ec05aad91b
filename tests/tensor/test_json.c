/* JSON writers: the output parses with jansson, has the contract's structure and shape, and every
 * number reads back to the identical value of its dtype (exhaustively for f16 and bf16, random
 * bit patterns for f32 and f64), both through jansson's doubles (what Python's json module does)
 * and by parsing each number's text with strtof / strtod. Also: params rendering, the extra field,
 * non-finite values, and the buffer's max enforced to the byte. */
#include "posenc/tensor.h"
#include "support/pe_check.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static struct pe_shape shape_of(int rank, const size_t *dim)
{
	struct pe_shape s;
	memset(&s, 0, sizeof s);
	s.rank = rank;
	for (int i = 0; i < rank; i++)
		s.dim[i] = dim[i];
	return s;
}

static json_t *load(const struct pe_buf *b)
{
	json_error_t je;
	json_t *j = json_loadb(b->data, b->len, JSON_DECODE_INT_AS_REAL | JSON_DECODE_ANY, &je);
	ck_assert_msg(j != NULL, "invalid JSON at %d: %s", je.position, je.text);
	return j;
}

/* Element i of a view as the double its dtype value widens to. */
static double elem_value(const struct pe_tensor_view *t, size_t i)
{
	const unsigned char *d = t->data;
	float f;
	double x;
	int32_t k;
	uint16_t h;
	switch (t->dtype) {
	case PE_F32:
		memcpy(&f, d + 4 * i, 4);
		return f;
	case PE_F64:
		memcpy(&x, d + 8 * i, 8);
		return x;
	case PE_I32:
		memcpy(&k, d + 4 * i, 4);
		return k;
	case PE_F16:
		memcpy(&h, d + 2 * i, 2);
		return pe_f16_to_f32(h);
	default:
		memcpy(&h, d + 2 * i, 2);
		return pe_bf16_to_f32(h);
	}
}

/* A double read back from JSON equals element i of the view bit for bit once rounded to the dtype. */
static int same_elem(const struct pe_tensor_view *t, size_t i, double got)
{
	const unsigned char *d = t->data;
	uint16_t h;
	float f;
	switch (t->dtype) {
	case PE_F32:
		f = (float)got;
		return memcmp(&f, d + 4 * i, 4) == 0;
	case PE_F64:
		return memcmp(&got, d + 8 * i, 8) == 0;
	case PE_I32:
		return got == elem_value(t, i);
	case PE_F16:
		h = pe_f64_to_f16(got);
		return memcmp(&h, d + 2 * i, 2) == 0;
	default:
		h = pe_f64_to_bf16(got);
		return memcmp(&h, d + 2 * i, 2) == 0;
	}
}

/* Walk the nested arrays of `data` against the view's shape; *next counts elements in C order. */
static void check_nested(const json_t *j, const struct pe_tensor_view *t, int level, size_t *next)
{
	if (level == t->shape.rank) {
		if (!json_is_real(j))
			ck_abort_msg("element %zu is not a number", *next);
		if (!same_elem(t, *next, json_real_value(j)))
			ck_abort_msg("element %zu (%.17g) reads back as %.17g", *next, elem_value(t, *next),
				     json_real_value(j));
		(*next)++;
		return;
	}
	if (!json_is_array(j) || json_array_size(j) != t->shape.dim[level])
		ck_abort_msg("axis %d: not an array of %zu", level, t->shape.dim[level]);
	for (size_t i = 0; i < t->shape.dim[level]; i++)
		check_nested(json_array_get(j, i), t, level + 1, next);
}

/* The number tokens after "data": parsed from the text itself with strtof / strtod. */
static void check_tokens(const struct pe_buf *b, const char *from, const struct pe_tensor_view *t, size_t count)
{
	const char *p = from, *end = b->data + b->len;
	size_t i = 0;
	while (p < end) {
		if (!strchr("-0123456789", *p)) {
			p++;
			continue;
		}
		char tok[64], *e;
		size_t n = strspn(p, "-+.0123456789eE");
		if (n >= sizeof tok || i >= count)
			ck_abort_msg("token %zu too long or too many tokens", i);
		memcpy(tok, p, n);
		tok[n] = 0;
		int same;
		if (t->dtype == PE_F32) {
			float f = strtof(tok, &e);
			same = memcmp(&f, (const char *)t->data + 4 * i, 4) == 0;
		} else {
			same = same_elem(t, i, strtod(tok, &e));
		}
		if (!same || e != tok + n)
			ck_abort_msg("element %zu: '%s' does not read back", i, tok);
		i++;
		p += n;
	}
	ck_assert_uint_eq(i, count);
}

/* Write a data array, then check it both ways. */
static void round_trip(const struct pe_tensor_view *t)
{
	int ovf;
	size_t count = pe_shape_count(&t->shape, &ovf);
	struct pe_buf b;
	struct pe_err err;
	pe_buf_init(&b, 1 << 26);
	ck_assert_msg(pe_json_write_data(&b, t, &err) == 0, "%s", err.detail);
	json_t *j = load(&b);
	size_t next = 0;
	check_nested(j, t, 0, &next);
	ck_assert_uint_eq(next, count);
	check_tokens(&b, b.data, t, count);
	json_decref(j);
	pe_buf_destroy(&b);
}

/* Every finite pattern of a 16-bit dtype (exponent bits exp_mask not all set) round-trips through
 * JSON, as a [rows, cols] table of exactly those patterns. */
static void all_finite_16(enum pe_dtype dt, uint32_t exp_mask, size_t rows, size_t cols)
{
	uint16_t *h = malloc(rows * cols * 2);
	ck_assert_ptr_nonnull(h);
	size_t n = 0;
	for (uint32_t x = 0; x < 0x10000; x++)
		if ((x & exp_mask) != exp_mask)
			h[n++] = (uint16_t)x;
	ck_assert_uint_eq(n, rows * cols);
	size_t dim[] = {rows, cols};
	struct pe_tensor_view t = {shape_of(2, dim), dt, h};
	round_trip(&t);
	free(h);
}

START_TEST(f16_all_values) { all_finite_16(PE_F16, 0x7c00, 62, 1024); }
END_TEST

START_TEST(bf16_all_values) { all_finite_16(PE_BF16, 0x7f80, 255, 256); }
END_TEST

START_TEST(f32_values)
{
	enum { N = 1 << 18 };
	static const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN,
					FLT_TRUE_MIN, -FLT_TRUE_MIN, 0.1f, 1e-7f, 16777216.0f, 16777217.0f,
					3.4028235e38f, 1.17549435e-38f, 0.84147096f, 9.9999994e-11f};
	float *v = malloc(N * sizeof *v);
	size_t n = sizeof special / sizeof special[0];
	memcpy(v, special, sizeof special);
	while (n < N) {
		uint32_t w = (uint32_t)next_rand();
		if ((w & 0x7f800000u) == 0x7f800000u)
			continue;
		memcpy(&v[n++], &w, 4);
	}
	size_t dim[] = {4, 16, 64, 64};
	struct pe_tensor_view t = {shape_of(4, dim), PE_F32, v};
	round_trip(&t);
	free(v);
}
END_TEST

START_TEST(f64_values)
{
	enum { N = 1 << 16 };
	static const double special[] = {0.0, -0.0, 1.0, DBL_MAX, -DBL_MAX, DBL_MIN, 4.9406564584124654e-324,
					 0.1, 1e23, 9007199254740993.0, 5e-324, 2.2250738585072009e-308};
	double *v = malloc(N * sizeof *v);
	size_t n = sizeof special / sizeof special[0];
	memcpy(v, special, sizeof special);
	while (n < N) {
		uint64_t w = next_rand();
		if ((w & 0x7ff0000000000000ull) == 0x7ff0000000000000ull)
			continue;
		memcpy(&v[n++], &w, 8);
	}
	size_t dim[] = {N};
	struct pe_tensor_view t = {shape_of(1, dim), PE_F64, v};
	round_trip(&t);
	free(v);
}
END_TEST

START_TEST(i32_values)
{
	int32_t v[] = {0, 1, -1, INT32_MAX, INT32_MIN, 1000000, -31, 7};
	size_t dim[] = {2, 4};
	struct pe_tensor_view t = {shape_of(2, dim), PE_I32, v};
	round_trip(&t);
	struct pe_buf b;
	pe_buf_init(&b, 1024);
	ck_assert_int_eq(pe_json_write_data(&b, &t, NULL), 0);
	ck_assert_uint_eq(b.len, strlen("[[0,1,-1,2147483647],[-2147483648,1000000,-31,7]]"));
	ck_assert(memcmp(b.data, "[[0,1,-1,2147483647],[-2147483648,1000000,-31,7]]", b.len) == 0);
	pe_buf_destroy(&b);
}
END_TEST

/* Nesting for ranks 0-4, zero-length axes included. */
START_TEST(nesting)
{
	static const struct {
		int rank;
		size_t dim[4];
		const char *want;
	} cases[] = {
		{0, {0}, "1.5"},
		{1, {3}, "[1.5,2,-0.25]"},
		{2, {2, 2}, "[[1.5,2],[-0.25,3]]"},
		{3, {2, 1, 2}, "[[[1.5,2]],[[-0.25,3]]]"},
		{4, {1, 2, 1, 2}, "[[[[1.5,2]],[[-0.25,3]]]]"},
		{1, {0}, "[]"},
		{2, {0, 3}, "[]"},
		{2, {2, 0}, "[[],[]]"},
		{3, {2, 0, 3}, "[[],[]]"},
		{3, {1, 2, 0}, "[[[],[]]]"},
	};
	float v[4] = {1.5f, 2.0f, -0.25f, 3.0f};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		struct pe_tensor_view t = {shape_of(cases[c].rank, cases[c].dim), PE_F32, v};
		struct pe_buf b;
		pe_buf_init(&b, 1024);
		ck_assert_int_eq(pe_json_write_data(&b, &t, NULL), 0);
		ck_assert_msg(b.len == strlen(cases[c].want) && memcmp(b.data, cases[c].want, b.len) == 0,
			      "case %zu: got '%.*s'", c, (int)b.len, b.data);
		json_t *j = load(&b);
		json_decref(j);
		pe_buf_destroy(&b);
	}
}
END_TEST

START_TEST(non_finite_refused)
{
	float f[3] = {1, NAN, 2};
	double d[2] = {-INFINITY, 0};
	uint16_t h16[2] = {0x3c00, 0x7c00}, hb[2] = {0x7fc0, 0};
	size_t d3[] = {3}, d2[] = {2};
	struct pe_tensor_view views[] = {{shape_of(1, d3), PE_F32, f}, {shape_of(1, d2), PE_F64, d},
					 {shape_of(1, d2), PE_F16, h16}, {shape_of(1, d2), PE_BF16, hb}};
	for (size_t k = 0; k < 4; k++) {
		struct pe_buf b;
		struct pe_err err;
		pe_buf_init(&b, 1024);
		pe_buf_puts(&b, "keep");
		ck_assert_int_eq(pe_json_write_data(&b, &views[k], &err), PE_EINTERNAL);
		ck_assert_msg(strstr(err.detail, "not finite"), "%s", err.detail);
		ck_assert_int_eq(pe_json_write_table(&b, NULL, &views[k], &err), PE_EINTERNAL);
		ck_assert_uint_eq(b.len, 4);
		pe_buf_destroy(&b);
	}
}
END_TEST

/* Output that fits max exactly succeeds (through the scratch path near the end); one byte less
 * fails with PE_ETOOBIG and leaves the buffer as it was. */
START_TEST(limit_exact)
{
	enum { N = 3000 };
	float *v = malloc(N * sizeof *v);
	for (size_t i = 0; i < N; i++)
		v[i] = (float)sin((double)i) * 1e-3f;
	size_t dim[] = {30, 100};
	struct pe_tensor_view t = {shape_of(2, dim), PE_F32, v};
	struct pe_buf b;
	pe_buf_init(&b, 1 << 20);
	ck_assert_int_eq(pe_json_write_table(&b, NULL, &t, NULL), 0);
	size_t full = b.len;
	char *want = pe_buf_steal(&b, NULL);
	pe_buf_destroy(&b);
	for (size_t max = full - 40; max <= full + 40; max++) {
		struct pe_err err;
		pe_buf_init(&b, max);
		int rc = pe_json_write_table(&b, NULL, &t, &err);
		if (max >= full) {
			ck_assert_int_eq(rc, 0);
			ck_assert(b.len == full && memcmp(b.data, want, full) == 0);
		} else {
			ck_assert_int_eq(rc, PE_ETOOBIG);
			ck_assert_uint_eq(b.len, 0);
			ck_assert_msg(strstr(err.detail, "exceeds the limit"), "%s", err.detail);
		}
		pe_buf_destroy(&b);
	}
	/* the same with data only, appended after existing content */
	pe_buf_init(&b, 1 << 20);
	ck_assert_int_eq(pe_json_write_data(&b, &t, NULL), 0);
	full = b.len;
	pe_buf_destroy(&b);
	pe_buf_init(&b, full + 2);
	pe_buf_puts(&b, "ab");
	ck_assert_int_eq(pe_json_write_data(&b, &t, NULL), 0);
	ck_assert_uint_eq(b.len, full + 2);
	pe_buf_destroy(&b);
	pe_buf_init(&b, full + 1);
	pe_buf_puts(&b, "ab");
	ck_assert_int_eq(pe_json_write_data(&b, &t, NULL), PE_ETOOBIG);
	ck_assert_uint_eq(b.len, 2);
	ck_assert(memcmp(b.data, "ab", 2) == 0);
	pe_buf_destroy(&b);
	free(want);
	free(v);
}
END_TEST

/* The real sinusoidal table, 512x768 f32, as the daemon sends it. */
START_TEST(sinusoidal_document)
{
	const struct pe_table_def *def = pe_table_find("sinusoidal");
	ck_assert_ptr_nonnull(def);
	struct pe_params p;
	struct pe_err err;
	pe_params_init(&p, def);
	ck_assert_int_eq(pe_params_set(&p, "len", "512", &err), 0);
	ck_assert_int_eq(pe_params_set(&p, "dim", "768", &err), 0);
	ck_assert_int_eq(pe_params_set(&p, "base", "1e4", &err), 0);
	ck_assert_msg(pe_params_finish(&p, &err) == 0, "%s", err.detail);
	struct pe_shape s;
	ck_assert_int_eq(pe_table_shape(&p, &s), 0);
	float *v = malloc(512 * 768 * sizeof *v);
	ck_assert_int_eq(pe_table_compute(&p, PE_F32, v, &err), 0);
	struct pe_tensor_view t = {s, PE_F32, v};
	struct pe_buf b;
	pe_buf_init(&b, 64 << 20);
	ck_assert_msg(pe_json_write_table(&b, &p, &t, &err) == 0, "%s", err.detail);
	json_t *j = load(&b);
	ck_assert_str_eq(json_string_value(json_object_get(j, "encoding")), "sinusoidal");
	ck_assert_str_eq(json_string_value(json_object_get(j, "dtype")), "f32");
	json_t *shape = json_object_get(j, "shape");
	ck_assert_uint_eq(json_array_size(shape), 2);
	ck_assert(json_real_value(json_array_get(shape, 0)) == 512);
	ck_assert(json_real_value(json_array_get(shape, 1)) == 768);
	json_t *params = json_object_get(j, "params");
	ck_assert(json_real_value(json_object_get(params, "len")) == 512);
	ck_assert(json_real_value(json_object_get(params, "dim")) == 768);
	ck_assert(json_real_value(json_object_get(params, "base")) == 10000);
	ck_assert(json_real_value(json_object_get(params, "offset")) == 0);
	ck_assert_str_eq(json_string_value(json_object_get(params, "variant")), "vaswani");
	/* every set parameter, and only those */
	size_t nset = 0;
	for (int i = 0; i < def->nparams; i++) {
		nset += p.v[i].set != 0;
		ck_assert_int_eq(json_object_get(params, def->params[i].name) != NULL, p.v[i].set != 0);
	}
	ck_assert_uint_eq(json_object_size(params), nset);
	ck_assert_uint_eq(json_object_size(j), 5);
	/* key order of the contract: data last */
	const char *txt = b.data;
	const char *pre = "{\"encoding\":\"sinusoidal\",\"params\":{";
	ck_assert_msg(strncmp(txt, pre, strlen(pre)) == 0, "%.60s", txt);
	const char *data = strstr(txt, "\"data\":");
	ck_assert_ptr_nonnull(data);
	const char *sh = strstr(txt, "\"shape\":[512,768],\"dtype\":\"f32\",");
	ck_assert(sh != NULL && sh < data);
	size_t next = 0;
	check_nested(json_object_get(j, "data"), &t, 0, &next);
	check_tokens(&b, data, &t, 512 * 768);
	json_decref(j);
	pe_buf_destroy(&b);
	free(v);
	pe_params_destroy(&p);
}
END_TEST

/* ---- params rendering against a made-up table with every parameter type ---- */

static const char *const choices[] = {"alpha", "be\"ta", NULL};
static const struct pe_param_spec fake_params[] = {
	{"n", PE_PT_INT, "-3", -10, 10, NULL, ""},
	{"r", PE_PT_REAL, "0.1", -1e300, 1e300, NULL, ""},
	{"e", PE_PT_ENUM, "alpha", 0, 0, choices, ""},
	{"flag", PE_PT_BOOL, "1", 0, 1, NULL, ""},
	{"lst", PE_PT_LIST, "1,0.5,1e-300", 0, 1, NULL, ""},
	{"unset", PE_PT_REAL, "", 0, 1, NULL, ""},
	{"we\"ird\\\x01", PE_PT_INT, "2", 0, 9, NULL, ""},
	{"big", PE_PT_INT, "-9223372036854775808", -1e19, 1e19, NULL, ""},
};
static double fake_extra(const struct pe_params *p) { return 1.0 / 3.0; }
static double bad_extra(const struct pe_params *p) { return INFINITY; }
static const struct pe_table_def fake_def = {
	.name = "fake/table", .params = fake_params, .nparams = 8, .fixed_dtype = PE_DTYPE_COUNT_,
	.extra_name = "attention_scaling", .extra = fake_extra,
};

START_TEST(params_object)
{
	struct pe_params p;
	struct pe_err err;
	pe_params_init(&p, &fake_def);
	ck_assert_int_eq(pe_params_set(&p, "e", "be\"ta", &err), 0);
	ck_assert_msg(pe_params_finish(&p, &err) == 0, "%s", err.detail);
	struct pe_buf b;
	pe_buf_init(&b, 4096);
	ck_assert_int_eq(pe_json_write_params(&b, &p), 0);
	json_error_t je;
	json_t *j = json_loadb(b.data, b.len, 0, &je);
	ck_assert_msg(j != NULL, "%s: %.*s", je.text, (int)b.len, b.data);
	ck_assert_uint_eq(json_object_size(j), 7);
	ck_assert(json_is_integer(json_object_get(j, "n")));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "n")), -3);
	ck_assert(json_is_real(json_object_get(j, "r")));
	ck_assert(json_real_value(json_object_get(j, "r")) == 0.1);
	ck_assert_str_eq(json_string_value(json_object_get(j, "e")), "be\"ta");
	ck_assert(json_is_integer(json_object_get(j, "flag")));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "flag")), 1);
	json_t *l = json_object_get(j, "lst");
	ck_assert_uint_eq(json_array_size(l), 3);
	ck_assert(json_number_value(json_array_get(l, 0)) == 1);
	ck_assert(json_number_value(json_array_get(l, 1)) == 0.5);
	ck_assert(json_number_value(json_array_get(l, 2)) == 1e-300);
	ck_assert_ptr_null(json_object_get(j, "unset"));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "we\"ird\\\x01")), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "big")), INT64_MIN);
	/* keys in spec order, the odd one escaped, 0.1 shortest */
	const char *pre = "{\"n\":-3,\"r\":0.1,\"e\":\"be\\\"ta\",\"flag\":1,\"lst\":[1,0.5,";
	ck_assert_msg(strncmp(b.data, pre, strlen(pre)) == 0, "%.*s", (int)b.len, b.data);
	ck_assert_ptr_nonnull(strstr(b.data, "\"we\\\"ird\\\\\\u0001\":2"));
	json_decref(j);
	pe_buf_destroy(&b);
	pe_params_destroy(&p);
}
END_TEST

/* The extra scalar comes right before "data"; p == NULL leaves out encoding and params. */
START_TEST(extra_and_no_params)
{
	struct pe_params p;
	struct pe_err err;
	pe_params_init(&p, &fake_def);
	ck_assert_int_eq(pe_params_finish(&p, &err), 0);
	double v[2] = {0.25, -1};
	size_t dim[] = {2};
	struct pe_tensor_view t = {shape_of(1, dim), PE_F64, v};
	struct pe_buf b;
	pe_buf_init(&b, 4096);
	ck_assert_int_eq(pe_json_write_table(&b, &p, &t, &err), 0);
	json_t *j = load(&b);
	ck_assert_str_eq(json_string_value(json_object_get(j, "encoding")), "fake/table");
	ck_assert(json_real_value(json_object_get(j, "attention_scaling")) == 1.0 / 3.0);
	ck_assert_ptr_nonnull(strstr(b.data, ",\"dtype\":\"f64\",\"attention_scaling\":"));
	ck_assert_ptr_nonnull(strstr(b.data, ",\"data\":[0.25,-1]}"));
	ck_assert_uint_eq(json_object_size(j), 6);
	json_decref(j);
	pe_buf_destroy(&b);

	pe_buf_init(&b, 4096);
	ck_assert_int_eq(pe_json_write_table(&b, NULL, &t, &err), 0);
	ck_assert_uint_eq(b.len, strlen("{\"shape\":[2],\"dtype\":\"f64\",\"data\":[0.25,-1]}"));
	ck_assert(memcmp(b.data, "{\"shape\":[2],\"dtype\":\"f64\",\"data\":[0.25,-1]}", b.len) == 0);
	pe_buf_destroy(&b);

	/* rank 0: "shape":[] and a bare number */
	struct pe_tensor_view t0 = {shape_of(0, dim), PE_F64, v};
	pe_buf_init(&b, 4096);
	ck_assert_int_eq(pe_json_write_table(&b, NULL, &t0, &err), 0);
	ck_assert(memcmp(b.data, "{\"shape\":[],\"dtype\":\"f64\",\"data\":0.25}", b.len) == 0);
	pe_buf_destroy(&b);

	/* a non-finite extra is an internal error, and nothing is left behind */
	struct pe_table_def bad = fake_def;
	bad.extra = bad_extra;
	p.def = &bad;
	pe_buf_init(&b, 4096);
	ck_assert_int_eq(pe_json_write_table(&b, &p, &t, &err), PE_EINTERNAL);
	ck_assert_uint_eq(b.len, 0);
	pe_buf_destroy(&b);
	pe_params_destroy(&p);
}
END_TEST

/* A pe_parallel with a thread of its own for every chunk but the first (which the caller runs), so
 * the chunks really run at once; counts its calls. */
struct spawner {
	void (*fn)(void *, size_t);
	void *arg;
	size_t k;
};
static unsigned spawn_calls;

static void *spawned(void *arg)
{
	struct spawner *s = arg;
	s->fn(s->arg, s->k);
	return NULL;
}

static void spawn_run(void *ctx, size_t n, void (*fn)(void *arg, size_t k), void *arg)
{
	pthread_t th[16];
	struct spawner sp[16];
	ck_assert_uint_le(n, 16);
	spawn_calls++;
	for (size_t k = 1; k < n; k++) {
		sp[k] = (struct spawner){fn, arg, k};
		ck_assert_int_eq(pthread_create(&th[k], NULL, spawned, &sp[k]), 0);
	}
	fn(arg, 0);
	for (size_t k = 1; k < n; k++)
		pthread_join(th[k], NULL);
}

/* Chunks through a hook give exactly the bytes of one thread, for ranks 2 and 3, uneven splits and
 * dtypes: on threads of their own (spawn_run) and one after another on the caller (run NULL). */
START_TEST(threaded_equals_single)
{
	static const struct {
		int rank;
		size_t d0, d1, d2;
		enum pe_dtype dt;
	} cases[] = {{2, 1000, 77, 0, PE_F32}, {2, 513, 256, 0, PE_F64}, {3, 3, 700, 64, PE_F16},
		     {2, 2, 40000, 0, PE_F32}, {2, 100, 10, 0, PE_F32} /* small: one thread */,
		     {2, 600, 600, 0, PE_F64} /* windows beyond the kept scratch: printed in the answer */};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		struct pe_tensor_view t = {.shape = {cases[c].rank, {cases[c].d0, cases[c].d1, cases[c].d2}},
					   .dtype = cases[c].dt};
		int of;
		size_t n = pe_shape_count(&t.shape, &of), esz = pe_dtype_size(t.dtype);
		unsigned char *data = malloc(n * esz);
		for (size_t i = 0; i < n; i++) {
			double v = sin((double)i * 0.731) * 1000.0 / (double)(i % 97 + 1);
			if (t.dtype == PE_F32)
				((float *)data)[i] = (float)v;
			else if (t.dtype == PE_F64)
				((double *)data)[i] = v;
			else
				((uint16_t *)data)[i] = pe_f64_to_f16(v);
		}
		t.data = data;
		for (unsigned threads = 2; threads <= 10; threads++) { /* past 8: 8 chunks */
			struct pe_parallel par = {.run = threads % 2 ? NULL : spawn_run, .width = threads};
			struct pe_buf one, many;
			pe_buf_init(&one, 1u << 30);
			pe_buf_init(&many, 1u << 30);
			ck_assert_int_eq(pe_json_write_table(&one, NULL, &t, NULL), 0);
			unsigned calls = spawn_calls;
			ck_assert_int_eq(pe_json_write_table_mt(&many, NULL, &t, &par, NULL), 0);
			int small = n < 65536 || cases[c].d0 < (threads < 8 ? threads : 8); /* one thread, no hook */
			ck_assert_uint_eq(spawn_calls - calls, par.run && !small ? 1 : 0);
			ck_assert_uint_eq(one.len, many.len);
			ck_assert_msg(memcmp(one.data, many.data, one.len) == 0, "case %zu, %u threads", c, threads);
			/* a max the width bound does not fit under but the document does: written by one
			 * thread to the byte; one byte less: too big, and nothing is left behind */
			struct pe_buf tight;
			pe_buf_init(&tight, one.len);
			ck_assert_int_eq(pe_json_write_table_mt(&tight, NULL, &t, &par, NULL), 0);
			ck_assert_msg(tight.len == one.len && memcmp(one.data, tight.data, one.len) == 0, "case %zu", c);
			pe_buf_destroy(&tight);
			pe_buf_init(&tight, one.len - 1);
			ck_assert_int_eq(pe_json_write_table_mt(&tight, NULL, &t, &par, NULL), PE_ETOOBIG);
			ck_assert_uint_eq(tight.len, 0);
			pe_buf_destroy(&tight);
			pe_buf_destroy(&one);
			pe_buf_destroy(&many);
		}
		free(data);
	}
}
END_TEST

static Suite *json_suite(void)
{
	Suite *s = suite_create("json");
	TCase *v = tcase_create("values");
	tcase_set_timeout(v, 60);
	tcase_add_test(v, f16_all_values);
	tcase_add_test(v, bf16_all_values);
	tcase_add_test(v, f32_values);
	tcase_add_test(v, f64_values);
	tcase_add_test(v, i32_values);
	tcase_add_test(v, sinusoidal_document);
	tcase_add_test(v, threaded_equals_single);
	suite_add_tcase(s, v);
	TCase *st = tcase_create("structure");
	tcase_add_test(st, nesting);
	tcase_add_test(st, non_finite_refused);
	tcase_add_test(st, limit_exact);
	tcase_add_test(st, params_object);
	tcase_add_test(st, extra_and_no_params);
	suite_add_tcase(s, st);
	return s;
}

PE_TEST_MAIN(json_suite)
