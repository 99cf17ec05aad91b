/* CSV writer: exact contents for ranks 0-3 (LF line ends, the shape comment for rank >= 3),
 * empty axes, non-finite values refused, the buffer's max enforced to the byte. */
#include "posenc/tensor.h"
#include "support/pe_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct pe_shape shape_of(int rank, const size_t *dim)
{
	struct pe_shape s;
	memset(&s, 0, sizeof s);
	s.rank = rank;
	for (int i = 0; i < rank; i++)
		s.dim[i] = dim[i];
	return s;
}

static void expect_csv(const struct pe_tensor_view *t, const char *want)
{
	struct pe_buf b;
	struct pe_err err;
	pe_buf_init(&b, 1 << 20);
	ck_assert_msg(pe_csv_write(&b, t, &err) == 0, "%s", err.detail);
	ck_assert_msg(b.len == strlen(want) && memcmp(b.data, want, b.len) == 0, "got:\n%.*s\nwant:\n%s",
		      (int)b.len, b.data, want);
	pe_buf_destroy(&b);
}

static const float v12[12] = {0.5f, -1, 2, 0.1f, 3, 4, 5, 6, 7, 8, 9, 0.125f};

START_TEST(rank1)
{
	size_t dim[] = {4};
	struct pe_tensor_view t = {shape_of(1, dim), PE_F32, v12};
	expect_csv(&t, "0.5\n-1\n2\n0.1\n");
}
END_TEST

START_TEST(rank2)
{
	size_t dim[] = {3, 4};
	struct pe_tensor_view t = {shape_of(2, dim), PE_F32, v12};
	expect_csv(&t, "0.5,-1,2,0.1\n3,4,5,6\n7,8,9,0.125\n");
}
END_TEST

START_TEST(rank3)
{
	size_t dim[] = {2, 3, 2};
	struct pe_tensor_view t = {shape_of(3, dim), PE_F32, v12};
	expect_csv(&t, "# shape: 2,3,2; rows are the last axis flattened in C order\n"
		       "0.5,-1\n2,0.1\n3,4\n5,6\n7,8\n9,0.125\n");
	size_t dim4[] = {1, 2, 2, 3};
	struct pe_tensor_view t4 = {shape_of(4, dim4), PE_F32, v12};
	expect_csv(&t4, "# shape: 1,2,2,3; rows are the last axis flattened in C order\n"
			"0.5,-1,2\n0.1,3,4\n5,6,7\n8,9,0.125\n");
}
END_TEST

START_TEST(rank0_and_empty)
{
	size_t dim[] = {0, 3, 0};
	struct pe_tensor_view t0 = {shape_of(0, dim), PE_F32, v12};
	expect_csv(&t0, "0.5\n");
	struct pe_tensor_view e1 = {shape_of(1, dim), PE_F32, v12};
	expect_csv(&e1, "");
	struct pe_tensor_view e2 = {shape_of(2, dim), PE_F32, v12}; /* 0 rows of 3 */
	expect_csv(&e2, "");
	struct pe_tensor_view e3 = {shape_of(2, dim + 1), PE_F32, v12}; /* 3 rows of 0 */
	expect_csv(&e3, "\n\n\n");
}
END_TEST

START_TEST(dtypes)
{
	int32_t i[4] = {-2147483647 - 1, 0, 7, 2147483647};
	double d[2] = {0.1, -1e300};
	uint16_t h[3] = {0x3c00, 0x3555, 0x0001}; /* 1, 0.33325, smallest subnormal */
	size_t d22[] = {2, 2}, d12[] = {1, 2}, d3[] = {3};
	struct pe_tensor_view ti = {shape_of(2, d22), PE_I32, i};
	expect_csv(&ti, "-2147483648,0\n7,2147483647\n");
	/* exponent spelling is shortest.c's business: take it from pe_fmt_* */
	char want[128], n1[PE_NUM_MAX + 1] = {0}, n2[PE_NUM_MAX + 1] = {0};
	pe_fmt_f64(-1e300, n1);
	pe_fmt_f16(0x0001, n2);
	struct pe_tensor_view td = {shape_of(2, d12), PE_F64, d};
	snprintf(want, sizeof want, "0.1,%s\n", n1);
	expect_csv(&td, want);
	struct pe_tensor_view th = {shape_of(1, d3), PE_F16, h};
	snprintf(want, sizeof want, "1\n0.3333\n%s\n", n2);
	expect_csv(&th, want);
}
END_TEST

START_TEST(non_finite)
{
	float f[3] = {1, 2, INFINITY};
	size_t dim[] = {3};
	struct pe_tensor_view t = {shape_of(1, dim), PE_F32, f};
	struct pe_buf b;
	struct pe_err err;
	pe_buf_init(&b, 1024);
	pe_buf_puts(&b, "x");
	ck_assert_int_eq(pe_csv_write(&b, &t, &err), PE_EINTERNAL);
	ck_assert_msg(strstr(err.detail, "element 2"), "%s", err.detail);
	ck_assert_uint_eq(b.len, 1);
	pe_buf_destroy(&b);
}
END_TEST

/* Exactly the output size fits, one byte less is PE_ETOOBIG with the buffer untouched. */
START_TEST(limit_exact)
{
	enum { N = 2000 };
	float *v = malloc(N * sizeof *v);
	for (size_t k = 0; k < N; k++)
		v[k] = (float)cos((double)k);
	size_t dim[] = {2, 10, 100};
	struct pe_tensor_view t = {shape_of(3, dim), PE_F32, v};
	struct pe_buf b;
	pe_buf_init(&b, 1 << 20);
	ck_assert_int_eq(pe_csv_write(&b, &t, NULL), 0);
	size_t full = b.len;
	char *want = pe_buf_steal(&b, NULL);
	for (size_t max = full - 30; max <= full + 30; max++) {
		pe_buf_init(&b, max);
		int rc = pe_csv_write(&b, &t, NULL);
		ck_assert_int_eq(rc, max >= full ? 0 : PE_ETOOBIG);
		if (rc == 0)
			ck_assert(b.len == full && memcmp(b.data, want, full) == 0);
		else
			ck_assert_uint_eq(b.len, 0);
		pe_buf_destroy(&b);
	}
	free(want);
	free(v);
}
END_TEST

static Suite *csv_suite(void)
{
	Suite *s = suite_create("csv");
	TCase *tc = tcase_create("csv");
	tcase_add_test(tc, rank1);
	tcase_add_test(tc, rank2);
	tcase_add_test(tc, rank3);
	tcase_add_test(tc, rank0_and_empty);
	tcase_add_test(tc, dtypes);
	tcase_add_test(tc, non_finite);
	tcase_add_test(tc, limit_exact);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(csv_suite)
