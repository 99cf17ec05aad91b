/* pe_shape_format (X-PE-Shape, CSV's comment) against the snprintf loop it replaced: the same
 * text, length and cut for every rank, for dimensions of every digit count (0, powers of ten and
 * their neighbours, SIZE_MAX) and for every buffer size from 0 up past the whole text. */
#include "posenc/core.h"
#include "support/pe_check.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The definition: "%s%zu" per axis with snprintf, as long as the buffer has room. */
static size_t reference(const struct pe_shape *s, char *buf, size_t cap)
{
	size_t len = 0;
	if (cap)
		buf[0] = 0;
	for (int i = 0; i < s->rank && len < cap; i++) {
		int w = snprintf(buf + len, cap - len, "%s%zu", i ? "," : "", s->dim[i]);
		if (w < 0)
			break;
		len += (size_t)w;
	}
	return len < cap ? len : (cap ? cap - 1 : 0);
}

static void compare(const struct pe_shape *s)
{
	char want[128], got[128];
	for (size_t cap = 0; cap <= 100; cap++) {
		memset(want, 'w', sizeof want);
		memset(got, 'w', sizeof got);
		size_t a = reference(s, want, cap), b = pe_shape_format(s, got, cap);
		ck_assert_uint_eq(a, b);
		ck_assert_msg(memcmp(want, got, sizeof want) == 0, "rank %d, cap %zu: '%.*s' against '%.*s'", s->rank,
			      cap, (int)cap, got, (int)cap, want);
	}
}

START_TEST(same_as_snprintf)
{
	size_t dims[] = {0, 1, 9, 10, 11, 16, 99, 100, 768, 999, 1000, 65536, 4294967295u, 4294967296u,
			 SIZE_MAX / 10, SIZE_MAX - 1, SIZE_MAX};
	size_t n = sizeof dims / sizeof dims[0];
	for (int rank = 0; rank <= PE_MAX_RANK; rank++)
		for (size_t i = 0; i < n; i++) {
			struct pe_shape s = {.rank = rank};
			for (int k = 0; k < rank; k++)
				s.dim[k] = dims[(i + (size_t)k * 5) % n];
			compare(&s);
		}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("shape_format");
	TCase *tc = tcase_create("text");
	tcase_add_test(tc, same_as_snprintf);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
