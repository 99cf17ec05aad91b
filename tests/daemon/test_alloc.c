/* Unit tests of src/daemon/alloc.c: the GLIBC_TUNABLES value posencd starts again with (added to
 * what is set, never over an operator's own thread cache count, refused when it does not fit),
 * and its calloc (this test runs on it, as posencd does): zeroed blocks, also where freed ones
 * written with another pattern are handed out again, and ENOMEM for a product past SIZE_MAX. */
#include "support/pe_check.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/alloc.h"

START_TEST(tunables_added_once)
{
	char out[256], want[128];
	snprintf(want, sizeof want, "glibc.malloc.tcache_count=%d", PE_ALLOC_TCACHE_COUNT);
	ck_assert_int_eq(pe_alloc_tunables(NULL, out, sizeof out), 1);
	ck_assert_str_eq(out, want);
	ck_assert_int_eq(pe_alloc_tunables("", out, sizeof out), 1);
	ck_assert_str_eq(out, want);
	ck_assert_int_eq(pe_alloc_tunables("glibc.malloc.mxfast=0", out, sizeof out), 1);
	snprintf(want, sizeof want, "glibc.malloc.mxfast=0:glibc.malloc.tcache_count=%d", PE_ALLOC_TCACHE_COUNT);
	ck_assert_str_eq(out, want);
	strcpy(out, "untouched");
	ck_assert_int_eq(pe_alloc_tunables("glibc.malloc.tcache_count=7", out, sizeof out), 0);
	ck_assert_int_eq(pe_alloc_tunables("glibc.malloc.mxfast=0:glibc.malloc.tcache_count=0", out, sizeof out), 0);
	ck_assert_str_eq(out, "untouched");
	snprintf(want, sizeof want, "glibc.malloc.tcache_count=%d", PE_ALLOC_TCACHE_COUNT);
	ck_assert_int_eq(pe_alloc_tunables(NULL, out, strlen(want)), -1); /* no room for the NUL */
	ck_assert_int_eq(pe_alloc_tunables(NULL, out, strlen(want) + 1), 1);
	ck_assert_int_eq(pe_alloc_tunables("glibc.malloc.mxfast=0", out, 30), -1);
}
END_TEST

START_TEST(calloc_zeroes_reused_blocks)
{
	static const size_t sizes[] = {1, 24, 56, 200, 1032, 4096, 200000};
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		unsigned char *dirty[16];
		for (int i = 0; i < 16; i++) { /* freed blocks full of 0xa5, for calloc to be handed */
			dirty[i] = malloc(sizes[s]);
			ck_assert_ptr_nonnull(dirty[i]);
			memset(dirty[i], 0xa5, sizes[s]);
		}
		for (int i = 0; i < 16; i++)
			free(dirty[i]);
		for (int i = 0; i < 16; i++) {
			unsigned char *p = calloc(1, sizes[s]);
			ck_assert_ptr_nonnull(p);
			size_t k = 0;
			while (k < sizes[s] && p[k] == 0)
				k++;
			ck_assert_msg(k == sizes[s], "calloc(1, %zu): byte %zu is %u", sizes[s], k, k < sizes[s] ? p[k] : 0);
			dirty[i] = p;
		}
		for (int i = 0; i < 16; i++)
			free(dirty[i]);
	}
	unsigned *q = calloc(1000, sizeof *q);
	ck_assert_ptr_nonnull(q);
	int k = 0;
	while (k < 1000 && q[k] == 0)
		k++;
	ck_assert_int_eq(k, 1000);
	free(q);
}
END_TEST

/* AddressSanitizer's calloc (the one a sanitizer build runs on) stops the process instead. */
START_TEST(calloc_overflow_is_enomem)
{
#if !defined(__SANITIZE_ADDRESS__)
	errno = 0;
	volatile size_t n = SIZE_MAX / 2 + 1;
	void *p = calloc(n, 2);
	ck_assert_ptr_null(p);
	ck_assert_int_eq(errno, ENOMEM);
	errno = 0;
	volatile size_t third = SIZE_MAX / 3 + 1;
	p = calloc(3, third);
	ck_assert_ptr_null(p);
	ck_assert_int_eq(errno, ENOMEM);
#endif
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("alloc");
	TCase *tc = tcase_create("alloc");
	tcase_add_test(tc, tunables_added_once);
	tcase_add_test(tc, calloc_zeroes_reused_blocks);
	tcase_add_test(tc, calloc_overflow_is_enomem);
	suite_add_tcase(s, tc);
	return s;
}

PE_TEST_MAIN(suite)
