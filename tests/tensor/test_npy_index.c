/* pe_npy_parse_index, the npy reader of position bodies: '<i4' as pe_npy_parse reads it, '<i8'
 * (NumPy's default int, what get_rope_index returns) flagged wide with its 8-byte elements left
 * untouched for the caller to range-check (every int64, INT64_MIN and INT64_MAX included), and the
 * same refusals as pe_npy_parse: big-endian and other dtypes, shapes that lie about the data,
 * counts past max_elements. pe_npy_parse itself keeps refusing '<i8'. */
#include "posenc/tensor.h"
#include "support/pe_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A version 1.0 file of header dict + data (the dict padded to a 64-byte data offset). */
static char *make_npy(const char *dict, const void *data, size_t dlen, size_t *len)
{
	size_t dl = strlen(dict), hlen = dl + 1 + (64 - (10 + dl + 1) % 64) % 64;
	char *p = malloc(10 + hlen + dlen + 1);
	ck_assert_ptr_nonnull(p);
	memcpy(p, "\x93NUMPY\x01\x00", 8);
	p[8] = (char)(hlen & 0xff);
	p[9] = (char)(hlen >> 8);
	memcpy(p + 10, dict, dl);
	memset(p + 10 + dl, ' ', hlen - dl - 1);
	p[10 + hlen - 1] = '\n';
	if (dlen)
		memcpy(p + 10 + hlen, data, dlen);
	*len = 10 + hlen + dlen;
	return p;
}

static const int64_t six8[6] = {0, 1, INT64_MAX, INT64_MIN, -1, (int64_t)1 << 31};
static const int32_t six4[6] = {0, 1, INT32_MAX, INT32_MIN, -1, 7};

static char *file_of(const char *descr, const char *shape, const void *data, size_t dlen, size_t *len)
{
	char dict[160];
	snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
	return make_npy(dict, data, dlen, len);
}

/* Parse with pe_npy_parse_index and expect rc, a detail containing needle and the body named. */
static void expect_refused(const char *descr, const char *shape, size_t dlen, size_t max, int rc,
			   const char *needle)
{
	size_t len;
	char *p = file_of(descr, shape, six8, dlen, &len);
	struct pe_tensor_view v;
	struct pe_err err;
	int wide = -1;
	pe_err_clear(&err);
	ck_assert_msg(pe_npy_parse_index(p, len, max, &v, &wide, &err) == rc, "%s %s: accepted or wrong code (%s)",
		      descr, shape, err.detail);
	ck_assert_msg(strstr(err.detail, needle), "%s %s: detail '%s' lacks '%s'", descr, shape, err.detail, needle);
	ck_assert_str_eq(err.param, "body");
	free(p);
}

/* pe_npy_parse_index of the file p (descr what), at most max elements, gives into v an I32 view of
 * shape [rows, cols] over the n bytes data, wide as want_wide. */
static void expect_index(const char *what, const char *p, size_t len, size_t max, int want_wide, size_t rows,
			 size_t cols, const void *data, size_t n, struct pe_tensor_view *v)
{
	struct pe_err err;
	int wide = -1;
	ck_assert_msg(pe_npy_parse_index(p, len, max, v, &wide, &err) == 0, "%s: %s", what, err.detail);
	ck_assert_int_eq(wide, want_wide);
	ck_assert_int_eq(v->dtype, PE_I32);
	ck_assert_int_eq(v->shape.rank, 2);
	ck_assert_uint_eq(v->shape.dim[0], rows);
	ck_assert_uint_eq(v->shape.dim[1], cols);
	ck_assert_mem_eq(v->data, data, n);
}

START_TEST(i4_is_narrow)
{
	size_t len;
	char *p = file_of("<i4", "(2, 3)", six4, sizeof six4, &len);
	struct pe_tensor_view v;
	struct pe_err err;
	expect_index("<i4", p, len, 100, 0, 2, 3, six4, sizeof six4, &v);
	/* the same view pe_npy_parse gives */
	struct pe_tensor_view w;
	ck_assert_int_eq(pe_npy_parse(p, len, 100, &w, &err), 0);
	ck_assert_ptr_eq(w.data, v.data);
	ck_assert_int_eq(w.dtype, v.dtype);
	free(p);
}
END_TEST

/* Every int64 value, the extremes included, reaches the caller unchanged: the range is its call. */
START_TEST(i8_is_wide_and_untouched)
{
	static const char *const descrs[] = {"<i8", "=i8"};
	for (size_t d = 0; d < 2; d++) {
		size_t len;
		char *p = file_of(descrs[d], "(3, 2)", six8, sizeof six8, &len);
		struct pe_tensor_view v;
		struct pe_err err;
		expect_index(descrs[d], p, len, 6, 1, 3, 2, six8, sizeof six8, &v);
		/* the plain parser still refuses it */
		ck_assert_int_eq(pe_npy_parse(p, len, 100, &v, &err), PE_EBODY);
		ck_assert_msg(strstr(err.detail, "'<i8'") || strstr(err.detail, "'=i8'"), "%s", err.detail);
		free(p);
	}
}
END_TEST

/* NumPy's own int64 file (tests/data/npy/i8_r1.npy: np.arange(4, dtype='<i8')). */
START_TEST(i8_numpy_file)
{
	FILE *f = fopen("tests/data/npy/i8_r1.npy", "rb");
	ck_assert_ptr_nonnull(f);
	char buf[256];
	size_t len = fread(buf, 1, sizeof buf, f);
	fclose(f);
	struct pe_tensor_view v;
	struct pe_err err;
	int wide = 0;
	ck_assert_msg(pe_npy_parse_index(buf, len, 100, &v, &wide, &err) == 0, "%s", err.detail);
	ck_assert_int_eq(wide, 1);
	ck_assert_int_eq(v.shape.rank, 1);
	ck_assert_uint_eq(v.shape.dim[0], 4);
	for (int64_t i = 0; i < 4; i++) {
		int64_t x;
		memcpy(&x, (const char *)v.data + 8 * i, 8);
		ck_assert_int_eq(x, i);
	}
}
END_TEST

START_TEST(other_dtypes_refused)
{
	expect_refused(">i8", "(6,)", 48, 100, PE_EBODY, "'>i8'");
	expect_refused(">i4", "(12,)", 48, 100, PE_EBODY, "big-endian");
	expect_refused("<u8", "(6,)", 48, 100, PE_EBODY, "'<u8'");
	expect_refused("<i2", "(24,)", 48, 100, PE_EBODY, "'<i2'");
	expect_refused("<i16", "(3,)", 48, 100, PE_EBODY, "unsupported dtype");
	expect_refused("int64", "(6,)", 48, 100, PE_EBODY, "'int64'");
}
END_TEST

/* The declared shape must account for the data in 8-byte elements when wide, 4-byte when not. */
START_TEST(lying_shapes_refused)
{
	expect_refused("<i8", "(3, 3)", 48, 100, PE_EBODY, "truncated data: shape (3, 3) of i64 needs 72 bytes, 48 present");
	expect_refused("<i8", "(5,)", 48, 100, PE_EBODY, "8 bytes after the data");
	expect_refused("<i8", "(12,)", 48, 100, PE_EBODY, "truncated data"); /* 12 int32s' worth of bytes */
	expect_refused("<i8", "(6,)", 47, 100, PE_EBODY, "needs 48 bytes, 47 present");
	expect_refused("<i8", "()", 48, 100, PE_EBODY, "40 bytes after the data");
	expect_refused("<i4", "(6,)", 48, 100, PE_EBODY, "24 bytes after the data");
	expect_refused("<i8", "(4611686018427387904, 4)", 48, 100, PE_EBODY, "more elements than can exist");
	expect_refused("<i8", "(2305843009213693952,)", 48, SIZE_MAX, PE_EBODY, "more elements than can exist");
	expect_refused("<i8", "(99999999999999999999999,)", 48, 100, PE_EBODY, "shape");
}
END_TEST

START_TEST(max_elements_counts_int64_elements)
{
	expect_refused("<i8", "(6,)", 48, 5, PE_ETOOBIG, "more than the limit of 5");
	size_t len;
	char *p = file_of("<i8", "(6,)", six8, sizeof six8, &len);
	struct pe_tensor_view v;
	struct pe_err err;
	int wide = 0;
	ck_assert_int_eq(pe_npy_parse_index(p, len, 6, &v, &wide, &err), 0);
	free(p);
}
END_TEST

static Suite *npy_index_suite(void)
{
	Suite *s = suite_create("npy_index");
	TCase *tc = tcase_create("parse_index");
	tcase_add_test(tc, i4_is_narrow);
	tcase_add_test(tc, i8_is_wide_and_untouched);
	tcase_add_test(tc, i8_numpy_file);
	tcase_add_test(tc, other_dtypes_refused);
	tcase_add_test(tc, lying_shapes_refused);
	tcase_add_test(tc, max_elements_counts_int64_elements);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(npy_index_suite)
