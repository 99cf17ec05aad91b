/* pe_row_writer (src/tensor/rows.c): a document written a few rows at a time is byte for byte the
 * whole-table writer's (pe_json_write_table with and without params, pe_npy_write, pe_bin_write,
 * pe_csv_write), for ranks 0 to 4, every dtype, and rows fed in uneven chunks (1, 2, 3, 5, 7, ...
 * rows at a time); and its refusals: a NaN named by its index in the whole table, rows past the
 * end, an early end, png, bf16 as npy. */
#include "posenc/posenc.h"
#include "support/pe_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct pe_shape shapes[] = {
	{.rank = 0},
	{.rank = 1, .dim = {7}},
	{.rank = 2, .dim = {5, 3}},
	{.rank = 2, .dim = {1, 9}},
	{.rank = 3, .dim = {2, 4, 3}},
	{.rank = 3, .dim = {3, 1, 2}},
	{.rank = 4, .dim = {2, 3, 2, 2}},
};

/* count elements of dt with varied values (negative, tiny, large, integers). */
static void *fill(enum pe_dtype dt, size_t count)
{
	double *v = malloc(sizeof(double) * (count ? count : 1));
	void *out = malloc(pe_dtype_size(dt) * (count ? count : 1));
	ck_assert(v && out);
	for (size_t i = 0; i < count; i++)
		v[i] = dt == PE_I32 ? (double)((int)i * 37 % 101 - 50) : sin((double)i * 1.7) * pow(10.0, (double)(i % 9) - 4);
	pe_store_f64(dt, out, v, count);
	free(v);
	return out;
}

static void whole(enum pe_format fmt, const struct pe_params *p, const struct pe_tensor_view *t, struct pe_buf *b)
{
	struct pe_err err = {0};
	int rc = fmt == PE_FMT_JSON  ? pe_json_write_table(b, p, t, &err)
		 : fmt == PE_FMT_NPY ? pe_npy_write(b, t, &err)
		 : fmt == PE_FMT_BIN ? pe_bin_write(b, t)
				     : pe_csv_write(b, t, &err);
	ck_assert_msg(rc == 0, "whole %s: %s", pe_format_name(fmt), err.detail);
}

static void streamed(enum pe_format fmt, const struct pe_params *p, const struct pe_tensor_view *t, struct pe_buf *b)
{
	struct pe_row_writer w;
	struct pe_err err = {0};
	ck_assert_int_eq(pe_row_writer_begin(&w, fmt, p, &t->shape, t->dtype, b, &err), 0);
	size_t row_bytes = w.width * pe_dtype_size(t->dtype), chunk = 1;
	for (size_t r = 0; r < w.rows; chunk = chunk % 7 + 1) { /* 1, 2, ..., 7, 1, ... rows at a time */
		size_t n = w.rows - r < chunk ? w.rows - r : chunk;
		ck_assert_int_eq(pe_row_writer_rows(&w, (const char *)t->data + r * row_bytes, n, b, &err), 0);
		r += n;
	}
	ck_assert_int_eq(pe_row_writer_end(&w, b, &err), 0);
}

START_TEST(rows_equal_the_whole_writers)
{
	static const enum pe_dtype dts[] = {PE_F32, PE_F64, PE_F16, PE_BF16, PE_I32};
	static const enum pe_format fmts[] = {PE_FMT_JSON, PE_FMT_NPY, PE_FMT_BIN, PE_FMT_CSV};
	struct pe_params p;
	struct pe_err err = {0};
	pe_params_init(&p, pe_table_find("sinusoidal"));
	ck_assert_int_eq(pe_params_set(&p, "len", "4", &err), 0);
	ck_assert_int_eq(pe_params_set(&p, "dim", "8", &err), 0);
	ck_assert_int_eq(pe_params_finish(&p, &err), 0);
	const struct pe_shape *s = &shapes[_i];
	int overflow;
	size_t count = pe_shape_count(s, &overflow);
	for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
		struct pe_tensor_view t = {.shape = *s, .dtype = dts[d]};
		void *data = fill(dts[d], count);
		t.data = data;
		for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++)
			for (int with_params = 0; with_params < 2; with_params++) {
				if ((fmts[f] == PE_FMT_NPY && dts[d] == PE_BF16) || (with_params && fmts[f] != PE_FMT_JSON))
					continue;
				struct pe_buf a, b;
				pe_buf_init(&a, SIZE_MAX);
				pe_buf_init(&b, SIZE_MAX);
				whole(fmts[f], with_params ? &p : NULL, &t, &a);
				streamed(fmts[f], with_params ? &p : NULL, &t, &b);
				ck_assert_msg(a.len == b.len && !memcmp(a.data, b.data, a.len),
					      "rank %d %s %s: %zu bytes streamed, %zu whole", s->rank, pe_dtype_name(dts[d]),
					      pe_format_name(fmts[f]), b.len, a.len);
				pe_buf_destroy(&a);
				pe_buf_destroy(&b);
			}
		free(data);
	}
	pe_params_destroy(&p);
}
END_TEST

START_TEST(refusals)
{
	struct pe_shape s = {.rank = 2, .dim = {3, 4}};
	float v[12] = {0};
	struct pe_row_writer w;
	struct pe_err err = {0};
	struct pe_buf b;
	pe_buf_init(&b, SIZE_MAX);
	/* a NaN in the second block is named by its index in the table */
	ck_assert_int_eq(pe_row_writer_begin(&w, PE_FMT_JSON, NULL, &s, PE_F32, &b, &err), 0);
	ck_assert_int_eq(pe_row_writer_rows(&w, v, 1, &b, &err), 0);
	v[4 + 2] = NAN;
	size_t len = b.len;
	ck_assert_int_eq(pe_row_writer_rows(&w, v + 4, 2, &b, &err), PE_EINTERNAL);
	ck_assert_str_eq(err.detail, "element 6 is not finite");
	ck_assert_uint_eq(b.len, len); /* nothing of the failed block */
	/* an early end, rows past the end */
	ck_assert_int_eq(pe_row_writer_end(&w, &b, &err), PE_EINTERNAL);
	v[6] = 0;
	ck_assert_int_eq(pe_row_writer_rows(&w, v + 4, 2, &b, &err), 0);
	ck_assert_int_eq(pe_row_writer_rows(&w, v, 1, &b, &err), PE_EINTERNAL);
	ck_assert_int_eq(pe_row_writer_end(&w, &b, &err), 0);
	/* formats and dtypes that cannot be streamed */
	b.len = 0;
	memset(&err, 0, sizeof err);
	ck_assert_int_eq(pe_row_writer_begin(&w, PE_FMT_PNG, NULL, &s, PE_F32, &b, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "format");
	ck_assert_int_eq(pe_row_writer_begin(&w, PE_FMT_NPY, NULL, &s, PE_BF16, &b, &err), PE_EINVAL);
	ck_assert_str_eq(err.param, "dtype");
	ck_assert_uint_eq(b.len, 0);
	pe_buf_destroy(&b);
}
END_TEST

static Suite *rows_suite(void)
{
	Suite *s = suite_create("row_writer");
	TCase *tc = tcase_create("rows");
	tcase_add_loop_test(tc, rows_equal_the_whole_writers, 0, (int)(sizeof shapes / sizeof shapes[0]));
	tcase_add_test(tc, refusals);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(rows_suite)
