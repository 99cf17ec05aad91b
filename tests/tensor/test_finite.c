/* pe_first_nonfinite: the exact index of the first NaN or infinity of each element width, wherever
 * it falls against the 64-element blocks the check tests at once (first, last and middle of a
 * block, the tail after the last whole block), the earliest of two, and none at all. Values that
 * look close (the largest finite, subnormals, -0) are not hits. */
#include "posenc/tensor.h"
#include "support/pe_check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define N 300 /* four whole blocks and a tail of 44 */

/* Fill n elements of dt with finite values near the edge of finiteness. */
static void fill_finite(void *data, enum pe_dtype dt, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		switch (dt) {
		case PE_F32:
			((float *)data)[i] = i % 3 == 0 ? 3.4028235e38f : i % 3 == 1 ? -0.0f : 1e-45f;
			break;
		case PE_F64:
			((double *)data)[i] = i % 2 ? -1.7976931348623157e308 : 5e-324;
			break;
		case PE_F16:
			((uint16_t *)data)[i] = i % 2 ? 0x7bff : 0x8001; /* 65504, a negative subnormal */
			break;
		case PE_BF16:
			((uint16_t *)data)[i] = i % 2 ? 0xff7f : 0x0001;
			break;
		default:
			break;
		}
	}
}

static void put_nonfinite(void *data, enum pe_dtype dt, size_t i, int nan)
{
	switch (dt) {
	case PE_F32:
		((float *)data)[i] = nan ? NAN : -INFINITY;
		break;
	case PE_F64:
		((double *)data)[i] = nan ? NAN : INFINITY;
		break;
	case PE_F16:
		((uint16_t *)data)[i] = nan ? 0x7e00 : 0xfc00;
		break;
	case PE_BF16:
		((uint16_t *)data)[i] = nan ? 0x7fc0 : 0xff80;
		break;
	default:
		break;
	}
}

START_TEST(first_nonfinite_every_width)
{
	static const enum pe_dtype dts[] = {PE_F32, PE_F64, PE_F16, PE_BF16};
	static const size_t at[] = {0, 1, 63, 64, 65, 127, 128, 200, 255, 256, 257, 299};
	double *data = malloc(N * sizeof(double));
	ck_assert_ptr_nonnull(data);
	for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
		struct pe_tensor_view t = {{1, {N}}, dts[d], data};
		fill_finite(data, dts[d], N);
		ck_assert_uint_eq(pe_first_nonfinite(&t, N), N);
		for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
			fill_finite(data, dts[d], N);
			put_nonfinite(data, dts[d], at[k], (int)(k & 1));
			ck_assert_uint_eq(pe_first_nonfinite(&t, N), at[k]);
			ck_assert_uint_eq(pe_first_nonfinite(&t, at[k]), at[k]); /* count stops before it */
			put_nonfinite(data, dts[d], N - 1 - at[k] / 2, 1);       /* a later second one */
			ck_assert_uint_eq(pe_first_nonfinite(&t, N), at[k] <= N - 1 - at[k] / 2 ? at[k] : N - 1 - at[k] / 2);
		}
	}
	int32_t ints[4] = {0x7f800000, -1, 0x7fc00000, 0};
	struct pe_tensor_view ti = {{1, {4}}, PE_I32, ints};
	ck_assert_uint_eq(pe_first_nonfinite(&ti, 4), 4); /* integers are always finite */
	free(data);
}
END_TEST

static Suite *finite_suite(void)
{
	Suite *s = suite_create("finite");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, first_nonfinite_every_width);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(finite_suite)
