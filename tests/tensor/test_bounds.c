/* Each writer answers for its own bound (pe_<format>_bound, pe_out_bound): for the widest values
 * of every dtype (negative subnormals and normals at full precision, the largest magnitudes,
 * negative zero; NaN and infinities where the format allows them; every f16 and bf16 value), at
 * shapes of one and many rows and columns and ranks 0 to 8, the bytes written stay under the bound,
 * and a budget of exactly pe_out_bound admits the whole encoding (every reservation the writer
 * makes, gzip's copy included). For the text formats at their widest and the raw formats the bound
 * is also close: within 5% and a few hundred bytes of what was written. */
#include "posenc/output.h"
#include "posenc/tensor.h"
#include "support/pe_check.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum fill { WIDEST, SPECIAL, EVERY };

/* The i-th (mod 97) value at or past -DBL_MIN (-9.9e-21 for f32, where float spacing is finer
 * than eight digits) whose shortest form is as long as any can be: "-2.2250738585072014e-308"
 * (24 bytes), "-9.90000034e-21" (15). Found once per process. */
#define POOL 97
static double wide_f64(size_t i)
{
	static double pool[POOL];
	static size_t have;
	char buf[PE_NUM_MAX];
	for (double x = have ? nextafter(pool[have - 1], -1.0) : -DBL_MIN; have < POOL; x = nextafter(x, -1.0))
		if (pe_fmt_f64(x, buf) == pe_fmt_width(PE_F64) - 1)
			pool[have++] = x;
	return pool[i % POOL];
}

static float wide_f32(size_t i)
{
	static float pool[POOL];
	static size_t have;
	char buf[PE_NUM_MAX];
	for (float x = have ? nextafterf(pool[have - 1], -1.0f) : -9.9e-21f; have < POOL; x = nextafterf(x, -1.0f))
		if (pe_fmt_f32(x, buf) == pe_fmt_width(PE_F32) - 1)
			pool[have++] = x;
	return pool[i % POOL];
}

static int nonfinite16(uint16_t h, enum pe_dtype dt)
{
	return dt == PE_F16 ? (h & 0x7c00) == 0x7c00 : (h & 0x7f80) == 0x7f80;
}

/* A table of n elements of dt filled as `how` says: WIDEST cycles through the longest shortest
 * forms (negative, all digits, a two- or three-digit exponent); SPECIAL puts NaN, infinities, the
 * largest magnitudes, negative zero and subnormals at every third; EVERY walks every 16-bit pattern
 * (f16, bf16; NaN and infinity skipped), as SPECIAL does with them. */
static void *fill_table(enum pe_dtype dt, size_t n, enum fill how)
{
	static const double special64[] = {NAN, INFINITY, -INFINITY, -DBL_MAX, -0.0, -4.9406564584124654e-324,
					   -2.2250738585072009e-308};
	static const float special32[] = {NAN,  INFINITY, -INFINITY, -3.4028235e38f, -0.0f, -1.4e-45f,
					  -1.1754942e-38f}; /* the last two subnormal */
	char *p = malloc(n * pe_dtype_size(dt) + 1);
	ck_assert_ptr_nonnull(p);
	uint16_t h = 0;
	for (size_t i = 0; i < n; i++) {
		int sp = how == SPECIAL && i % 3 == 0;
		switch (dt) {
		case PE_F64:
			((double *)p)[i] = sp ? special64[i / 3 % 7] : wide_f64(i);
			break;
		case PE_F32:
			((float *)p)[i] = sp ? special32[i / 3 % 7] : wide_f32(i);
			break;
		case PE_I32:
			((int32_t *)p)[i] = i % 2 ? INT32_MIN : -1999999999;
			break;
		default: /* f16, bf16: every finite pattern in turn, negative ones first */
			do
				h = (uint16_t)(h - 1);
			while (how != SPECIAL && nonfinite16(h, dt));
			((uint16_t *)p)[i] = h;
			break;
		}
	}
	return p;
}

struct shape_case {
	int rank;
	size_t dim[PE_MAX_RANK];
};

static const struct shape_case shapes[] = {
	{0, {0}},
	{1, {1}},
	{1, {333}},
	{2, {1, 1}},
	{2, {1, 700}},
	{2, {700, 1}},
	{2, {37, 41}},
	{2, {5, 0}},
	{3, {3, 5, 7}},
	{8, {1, 1, 1, 1, 1, 1, 1, 1}},
	{8, {2, 2, 2, 2, 2, 2, 2, 3}},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static struct pe_shape shape_of(const struct shape_case *c)
{
	struct pe_shape s = {.rank = c->rank};
	memcpy(s.dim, c->dim, sizeof s.dim);
	return s;
}

static const enum pe_dtype dtypes[] = {PE_F32, PE_F64, PE_F16, PE_BF16, PE_I32};
#define NDTYPES (sizeof dtypes / sizeof dtypes[0])

static size_t used(const struct pe_budget *g)
{
	struct pe_budget_stats st;
	pe_budget_stats(g, &st);
	return st.used;
}

/* t encoded as o into a buffer on a budget of exactly pe_out_bound: admitted, and within it. Returns
 * the bytes written. */
static size_t encode_within(const struct pe_out *o, const struct pe_tensor_view *t, const struct pe_parallel *par)
{
	size_t limit = pe_out_bound(o, &t->shape, 0, NULL);
	ck_assert_uint_lt(limit, SIZE_MAX);
	struct pe_budget *g = pe_budget_new(limit);
	struct pe_buf b;
	struct pe_err err = {0};
	pe_buf_init(&b, SIZE_MAX);
	pe_buf_set_budget(&b, g);
	int rc = o->fmt == PE_FMT_JSON && !o->gzip ? pe_json_write_table_mt(&b, NULL, t, par, &err)
						    : pe_out_encode(o, par, NULL, t, &b, &err);
	ck_assert_msg(rc == 0, "%s %s%s rank %d: %d %s (budget %zu)", pe_format_name(o->fmt), pe_dtype_name(t->dtype),
		      o->gzip ? " gzip" : "", t->shape.rank, rc, err.detail, limit);
	ck_assert_uint_le(used(g), limit);
	size_t len = b.len;
	pe_buf_destroy(&b);
	ck_assert_uint_eq(used(g), 0);
	pe_budget_free(g);
	return len;
}

/* Written within bound, and for `tight` no more than 5% and 512 bytes under it. */
static void check_close(size_t len, size_t bound, int tight, const char *what, const struct pe_shape *s)
{
	ck_assert_msg(len <= bound, "%s rank %d: wrote %zu, bound %zu", what, s->rank, len, bound);
	if (tight)
		ck_assert_msg(bound - len <= len / 20 + 512, "%s rank %d: wrote %zu, bound %zu is loose", what, s->rank,
			      len, bound);
}

/* The text formats: every dtype that has a JSON/CSV spelling, at its widest, each shape. */
START_TEST(text_writers_within_bound)
{
	enum pe_dtype dt = dtypes[_i % NDTYPES];
	const struct pe_shape s = shape_of(&shapes[_i / NDTYPES]);
	int of;
	size_t n = pe_shape_count(&s, &of);
	struct pe_tensor_view t = {.shape = s, .dtype = dt, .data = fill_table(dt, n ? n : 1, WIDEST)};
	/* tight only for tables whose numbers outweigh the writer's fixed spares, at full width */
	int tight = n >= 1000 && (dt == PE_F32 || dt == PE_F64);
	for (int gz = 0; gz < 2; gz++) {
		struct pe_out json = {.fmt = PE_FMT_JSON, .dt = dt, .gzip = gz}, csv = {.fmt = PE_FMT_CSV, .dt = dt, .gzip = gz};
		size_t jl = encode_within(&json, &t, NULL), cl = encode_within(&csv, &t, NULL);
		if (!gz) {
			check_close(jl, pe_json_bound(&s, dt, 0), tight, "json", &s);
			check_close(cl, pe_csv_bound(&s, dt), tight, "csv", &s);
		}
	}
	free((void *)t.data);
}
END_TEST

/* npy and bin hold NaN, infinities and every value: their bounds are exact. */
START_TEST(raw_writers_exact)
{
	enum pe_dtype dt = dtypes[_i % NDTYPES];
	const struct pe_shape s = shape_of(&shapes[_i / NDTYPES]);
	int of;
	size_t n = pe_shape_count(&s, &of);
	struct pe_tensor_view t = {.shape = s, .dtype = dt, .data = fill_table(dt, n ? n : 1, SPECIAL)};
	struct pe_out bin = {.fmt = PE_FMT_BIN, .dt = dt}, npy = {.fmt = PE_FMT_NPY, .dt = dt};
	ck_assert_uint_eq(encode_within(&bin, &t, NULL), pe_bin_bound(&s, dt));
	if (dt == PE_BF16)
		ck_assert_uint_eq(pe_npy_bound(&s, dt), SIZE_MAX); /* npy cannot hold it */
	else
		ck_assert_uint_eq(encode_within(&npy, &t, NULL), pe_npy_bound(&s, dt));
	free((void *)t.data);
}
END_TEST

/* Every f16 and every bf16 value (NaN and infinity aside) in one table, as JSON and CSV. */
START_TEST(every_half_value)
{
	enum pe_dtype dt = _i ? PE_BF16 : PE_F16;
	/* 65536 patterns less the non-finite ones: 2 * 1024 for f16, 2 * 128 for bf16 */
	struct pe_shape s = {.rank = 2, .dim = {_i ? 255 : 248, 256}};
	struct pe_tensor_view t = {.shape = s, .dtype = dt, .data = fill_table(dt, s.dim[0] * 256, EVERY)};
	struct pe_out json = {.fmt = PE_FMT_JSON, .dt = dt}, csv = {.fmt = PE_FMT_CSV, .dt = dt};
	check_close(encode_within(&json, &t, NULL), pe_json_bound(&s, dt, 0), 0, "json", &s);
	check_close(encode_within(&csv, &t, NULL), pe_csv_bound(&s, dt), 0, "csv", &s);
	free((void *)t.data);
}
END_TEST

/* The JSON document split over threads (here: chunks run in turn) reserves a window per chunk:
 * within the same bound, for a table big enough to be split. */
START_TEST(json_chunks_within_bound)
{
	enum pe_dtype dt = _i ? PE_F64 : PE_F32;
	struct pe_shape s = {.rank = 2, .dim = {300, 257}};
	struct pe_tensor_view t = {.shape = s, .dtype = dt, .data = fill_table(dt, 300 * 257, WIDEST)};
	struct pe_out json = {.fmt = PE_FMT_JSON, .dt = dt};
	for (unsigned width = 2; width <= 9; width += 7) {
		struct pe_parallel par = {.run = NULL, .width = width};
		check_close(encode_within(&json, &t, &par), pe_json_bound(&s, dt, 0), 1, "json_mt", &s);
	}
	free((void *)t.data);
}
END_TEST

/* The caller's part of the head (encoding, parameters) adds to the bound byte for byte once the
 * head is longer than the writer's first guess, and a shape too big for memory saturates. */
START_TEST(json_head_counted)
{
	struct pe_shape huge = {.rank = 8}, one = {.rank = 8, .dim = {1, 1, 1, 1, 1, 1, 1, 1}};
	for (int k = 0; k < 8; k++)
		huge.dim[k] = SIZE_MAX / 3;
	ck_assert_uint_eq(pe_json_bound(&huge, PE_F32, 0), SIZE_MAX);
	ck_assert_uint_eq(pe_csv_bound(&huge, PE_F32), SIZE_MAX);
	ck_assert_uint_eq(pe_bin_bound(&huge, PE_F32), SIZE_MAX);
	ck_assert_uint_eq(pe_npy_bound(&huge, PE_F32), SIZE_MAX);
	ck_assert_uint_eq(pe_json_bound(&one, PE_F64, 6000) - pe_json_bound(&one, PE_F64, 5000), 1000);
	ck_assert_uint_ge(pe_json_bound(&one, PE_F64, 5000), 5000 + 25 + 8 * 3);
	ck_assert_uint_eq(pe_json_bound(&one, PE_F32, SIZE_MAX - 1), SIZE_MAX);
}
END_TEST

/* gzip of incompressible bytes stays under pe_gzip_bound at every level, which is within a few
 * bytes per 1000 of the input; and the empty input. */
START_TEST(gzip_incompressible)
{
	size_t lens[] = {0, 1, 100, 70000, 300000};
	uint64_t x = 88172645463325252ull;
	for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
		size_t len = lens[k];
		unsigned char *in = malloc(len + 1);
		for (size_t i = 0; i < len; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64: no redundancy for deflate */
			in[i] = (unsigned char)(x >> 32);
		}
		size_t bound = pe_gzip_bound(len);
		ck_assert_uint_le(bound, len + len / 200 + 64);
		for (int level = 1; level <= 12; level += 5) {
			struct pe_budget *g = pe_budget_new(pe_buf_bound(bound));
			struct pe_buf out;
			pe_buf_init(&out, SIZE_MAX);
			pe_buf_set_budget(&out, g);
			ck_assert_int_eq(pe_gzip(&out, in, len, level), 0);
			ck_assert_uint_ge(out.len, len); /* it did not compress: the worst case was tried */
			ck_assert_uint_le(out.len, bound);
			pe_buf_destroy(&out);
			pe_budget_free(g);
		}
		free(in);
	}
}
END_TEST

/* PNG: the layout's bound holds the picture of noise (every cell its own colour, NaN, infinities
 * and masked cells among them) at several sizes and scales, and a budget of pe_out_bound for that
 * layout admits it. */
START_TEST(png_within_bound)
{
	static const struct shape_case cases[] = {{0, {0}}, {1, {1}}, {2, {1, 1}}, {2, {64, 64}}, {2, {3, 900}},
						  {3, {2, 17, 5}}, {2, {5000, 3}}};
	const struct pe_shape s = shape_of(&cases[_i]);
	int of;
	size_t n = pe_shape_count(&s, &of);
	struct pe_tensor_view t = {.shape = s, .dtype = PE_F32, .data = fill_table(PE_F32, n, SPECIAL)};
	float *v = (float *)t.data;
	uint64_t x = 2463534242u;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		if (i % 3)
			v[i] = (float)(x % 100003) - 50000.0f;
	}
	for (int scale = 0; scale <= 7; scale += 7) {
		struct pe_png_options po;
		pe_png_options_init(&po);
		po.scale = scale;
		struct pe_png_layout lay;
		ck_assert_int_eq(pe_png_plan(&t, &po, &lay, NULL), 0);
		struct pe_out o = {.fmt = PE_FMT_PNG, .dt = PE_F32, .scale = scale};
		size_t limit = pe_out_bound(&o, &s, 0, &lay);
		ck_assert_uint_eq(pe_out_bound(&o, &s, 0, NULL), SIZE_MAX); /* no layout, no bound */
		struct pe_budget *g = pe_budget_new(limit);
		struct pe_buf b;
		pe_buf_init(&b, SIZE_MAX);
		pe_buf_set_budget(&b, g);
		ck_assert_int_eq(pe_out_encode(&o, NULL, NULL, &t, &b, NULL), 0);
		ck_assert_uint_le(b.len, pe_png_bound(&lay));
		pe_buf_destroy(&b);
		pe_budget_free(g);
	}
	free((void *)t.data);
}
END_TEST

/* A buffer's bound holds its bytes with the allocator's rounding, for blocks on the heap and
 * mapped, and saturates. */
START_TEST(buf_bound_holds_blocks)
{
	size_t sizes[] = {0, 1, 63, 64, 4095, 65536, 200000, 3 << 20};
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		struct pe_budget *g = pe_budget_new(pe_buf_bound(sizes[k]));
		struct pe_buf b;
		pe_buf_init(&b, SIZE_MAX);
		pe_buf_set_budget(&b, g);
		ck_assert_int_eq(pe_buf_reserve(&b, sizes[k] ? sizes[k] : 1), 0);
		ck_assert_uint_le(used(g), pe_buf_bound(sizes[k] ? sizes[k] : 1));
		pe_buf_destroy(&b);
		pe_budget_free(g);
	}
	ck_assert_uint_eq(pe_buf_bound(SIZE_MAX - 10), SIZE_MAX);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("bounds");
	TCase *tc = tcase_create("writers");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, text_writers_within_bound, 0, (int)(NSHAPES * NDTYPES));
	tcase_add_loop_test(tc, raw_writers_exact, 0, (int)(NSHAPES * NDTYPES));
	tcase_add_loop_test(tc, every_half_value, 0, 2);
	tcase_add_loop_test(tc, json_chunks_within_bound, 0, 2);
	tcase_add_test(tc, json_head_counted);
	tcase_add_test(tc, gzip_incompressible);
	tcase_add_loop_test(tc, png_within_bound, 0, 7);
	tcase_add_test(tc, buf_bound_holds_blocks);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
